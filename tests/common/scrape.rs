//! `/metrics` scraped with the official Prometheus client's OpenMetrics
//! parser (tests/clients/scrape_metrics.py), one sample per line.

use std::{collections::BTreeMap, process::Command};

use serde_json::Value;

use super::broker::Broker;

pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

pub fn scrape(broker: &Broker) -> Vec<Sample> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/clients/scrape_metrics.py");
    let out = Command::new("python3").arg(script).arg(&broker.metrics_url).output().expect("python3");
    assert!(out.status.success(), "scrape failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            Sample {
                name: v["name"].as_str().unwrap().to_string(),
                labels: v["labels"]
                    .as_object()
                    .unwrap()
                    .iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
                    .collect(),
                value: v["value"].as_f64().unwrap(),
            }
        })
        .collect()
}

/// Sum of a metric's samples whose labels include all of `want`.
pub fn sum(samples: &[Sample], name: &str, want: &[(&str, &str)]) -> f64 {
    samples
        .iter()
        .filter(|s| s.name == name && want.iter().all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v)))
        .map(|s| s.value)
        .sum()
}
