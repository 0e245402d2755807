//! `[sasl]` in the TOML config: which mechanisms SASL listeners offer.

use serde::Deserialize;

use super::sasl::SaslMechanism;

#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields)]
pub struct SaslConfig {
    /// Kafka's `sasl.enabled.mechanisms`: any of PLAIN, SCRAM-SHA-256,
    /// SCRAM-SHA-512 (all three by default).
    pub mechanisms: Vec<String>,
}

impl Default for SaslConfig {
    fn default() -> Self {
        Self { mechanisms: SaslMechanism::ALL.iter().map(|m| m.name().to_string()).collect() }
    }
}

impl SaslConfig {
    /// The enabled mechanisms, each named once; an unknown name is an error.
    pub fn enabled(&self) -> Result<Vec<SaslMechanism>, String> {
        let mut out = Vec::new();
        for name in &self.mechanisms {
            let m = SaslMechanism::from_name(name).ok_or_else(|| {
                format!("[sasl] mechanisms: unknown mechanism {name:?} (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)")
            })?;
            if !out.contains(&m) {
                out.push(m);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_three_by_default_and_unknown_names_refused() {
        assert_eq!(SaslConfig::default().enabled().unwrap().len(), 3);
        let one = SaslConfig { mechanisms: vec!["scram-sha-512".into(), "SCRAM-SHA-512".into()] };
        assert_eq!(one.enabled().unwrap().len(), 1);
        assert!(SaslConfig { mechanisms: vec!["GSSAPI".into()] }.enabled().unwrap_err().contains("GSSAPI"));
    }
}
