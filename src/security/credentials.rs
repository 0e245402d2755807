//! The SCRAM credentials of every user: per user, per mechanism, a
//! [`ScramCredential`] (never the password). Persisted as JSON in
//! `DATA/__security/scram-credentials.json`, written atomically (temp file,
//! fsync, rename, fsync of the directory). Each shard holds its own
//! `Arc<Credentials>`; a change is made on the controller shard, saved,
//! then handed to every shard (`shard::credentials_admin`).

use std::{
    collections::BTreeMap,
    io::Write,
    path::{Path, PathBuf},
};

use base64::{engine::general_purpose::STANDARD as B64, Engine};
use serde::{Deserialize, Serialize};

use super::scram::{Mechanism, ScramCredential, ITERATIONS_MAX, ITERATIONS_MIN};

/// Directory, under the data directory, of the security state.
pub const SECURITY_DIR: &str = "__security";
pub const CREDENTIALS_FILE: &str = "scram-credentials.json";
/// Format version of the file.
const FILE_VERSION: u32 = 1;
/// Bytes of salt `users add` draws from the OS: unique per credential is
/// what matters (RFC 5802 sets no length); 32 is more than enough.
pub const SALT_BYTES: usize = 32;
/// Longest user name accepted: bounds what a request can make us store.
pub const USER_NAME_BYTES_MAX: usize = 1024;

/// Every user's SCRAM credentials. Serialized as the file holds them
/// (the controller quorum's log and snapshot carry them so too).
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "File", into = "File")]
pub struct Credentials {
    users: BTreeMap<String, BTreeMap<Mechanism, ScramCredential>>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Credentials {{ users: {:?} }}", self.users.keys().collect::<Vec<_>>())
    }
}

/// Why a change to one user's credential was refused, as Kafka answers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// RESOURCE_NOT_FOUND: deleting a credential that does not exist.
    NotFound,
    /// UNSUPPORTED_SASL_MECHANISM.
    UnknownMechanism,
    /// UNACCEPTABLE_CREDENTIAL: empty name, iterations out of range, empty salt.
    Unacceptable,
}

impl Credentials {
    pub fn get(&self, user: &str, mechanism: Mechanism) -> Option<&ScramCredential> {
        self.users.get(user)?.get(&mechanism)
    }

    /// Every credential of `user`, by mechanism.
    pub fn of_user(&self, user: &str) -> Option<&BTreeMap<Mechanism, ScramCredential>> {
        self.users.get(user)
    }

    pub fn users(&self) -> impl Iterator<Item = (&String, &BTreeMap<Mechanism, ScramCredential>)> {
        self.users.iter()
    }

    /// Checks a credential before it is stored (Kafka's rules).
    pub fn check(user: &str, credential: &ScramCredential) -> Result<(), Refusal> {
        if user.is_empty() || user.len() > USER_NAME_BYTES_MAX {
            return Err(Refusal::Unacceptable);
        }
        if !(ITERATIONS_MIN..=ITERATIONS_MAX).contains(&credential.iterations) || credential.salt.is_empty() {
            return Err(Refusal::Unacceptable);
        }
        Ok(())
    }

    pub fn upsert(&mut self, user: &str, mechanism: Mechanism, credential: ScramCredential) -> Result<(), Refusal> {
        Self::check(user, &credential)?;
        self.users.entry(user.to_string()).or_default().insert(mechanism, credential);
        Ok(())
    }

    pub fn delete(&mut self, user: &str, mechanism: Mechanism) -> Result<(), Refusal> {
        let of_user = self.users.get_mut(user).ok_or(Refusal::NotFound)?;
        of_user.remove(&mechanism).ok_or(Refusal::NotFound)?;
        if of_user.is_empty() {
            self.users.remove(user);
        }
        Ok(())
    }

    pub fn path(data_dir: &Path) -> PathBuf {
        data_dir.join(SECURITY_DIR).join(CREDENTIALS_FILE)
    }

    /// Reads the file; no file is no users.
    pub fn load(data_dir: &Path) -> Result<Self, String> {
        let path = Self::path(data_dir);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        };
        let file: File = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        Self::from_file(file).map_err(|e| format!("{}: {e}", path.display()))
    }

    fn from_file(file: File) -> Result<Self, String> {
        if file.version != FILE_VERSION {
            return Err(format!("unknown format version {}", file.version));
        }
        let mut out = Self::default();
        for (user, mechanisms) in file.users {
            for (name, c) in mechanisms {
                let bad = |what: &str| format!("user {user:?} {name}: {what}");
                let mechanism = Mechanism::from_name(&name).ok_or_else(|| bad("unknown mechanism"))?;
                let decode = |v: &str| B64.decode(v).map_err(|_| bad("not base64"));
                let credential = ScramCredential {
                    salt: decode(&c.salt)?,
                    iterations: c.iterations,
                    stored_key: decode(&c.stored_key)?,
                    server_key: decode(&c.server_key)?,
                };
                if credential.stored_key.len() != mechanism.hash_bytes()
                    || credential.server_key.len() != mechanism.hash_bytes()
                {
                    return Err(bad("key of the wrong length"));
                }
                out.upsert(&user, mechanism, credential).map_err(|r| bad(&format!("refused: {r:?}")))?;
            }
        }
        Ok(out)
    }

    /// Writes the file atomically: a reader (or a crash) sees the old file
    /// or the new one, never a part.
    pub fn save(&self, data_dir: &Path) -> Result<(), String> {
        let dir = data_dir.join(SECURITY_DIR);
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let file = self.to_file();
        let text = serde_json::to_string_pretty(&file).map_err(|e| format!("cannot encode credentials: {e}"))?;
        let path = dir.join(CREDENTIALS_FILE);
        let temp = dir.join(format!("{CREDENTIALS_FILE}.tmp"));
        let io = |what: &str, p: &Path, e: std::io::Error| format!("cannot {what} {}: {e}", p.display());
        let mut f = std::fs::File::create(&temp).map_err(|e| io("create", &temp, e))?;
        f.write_all(text.as_bytes()).map_err(|e| io("write", &temp, e))?;
        f.sync_all().map_err(|e| io("fsync", &temp, e))?;
        drop(f);
        std::fs::rename(&temp, &path).map_err(|e| io("rename into place", &path, e))?;
        std::fs::File::open(&dir).and_then(|d| d.sync_all()).map_err(|e| io("fsync", &dir, e))?;
        Ok(())
    }
}

impl Credentials {
    fn to_file(&self) -> File {
        let mut file = File { version: FILE_VERSION, users: BTreeMap::new() };
        for (user, mechanisms) in &self.users {
            let entry = file.users.entry(user.clone()).or_default();
            for (m, c) in mechanisms {
                entry.insert(
                    m.name().to_string(),
                    StoredCredential {
                        salt: B64.encode(&c.salt),
                        iterations: c.iterations,
                        stored_key: B64.encode(&c.stored_key),
                        server_key: B64.encode(&c.server_key),
                    },
                );
            }
        }
        file
    }
}

impl TryFrom<File> for Credentials {
    type Error = String;
    fn try_from(file: File) -> Result<Self, String> {
        Self::from_file(file)
    }
}

impl From<Credentials> for File {
    fn from(c: Credentials) -> File {
        c.to_file()
    }
}

/// Random bytes from the OS (salts, nonces).
pub fn random_bytes(n: usize) -> Result<Vec<u8>, String> {
    let mut out = vec![0u8; n];
    getrandom::getrandom(&mut out).map_err(|e| format!("cannot get random bytes from the OS: {e}"))?;
    Ok(out)
}

#[derive(Serialize, Deserialize)]
pub struct File {
    version: u32,
    users: BTreeMap<String, BTreeMap<String, StoredCredential>>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredCredential {
    salt: String,
    iterations: u32,
    stored_key: String,
    server_key: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saved_credentials_load_back_and_deletes_name_what_is_missing() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(Credentials::load(dir.path()).unwrap(), Credentials::default());
        let mut c = Credentials::default();
        let alice = ScramCredential::from_password(Mechanism::Sha512, b"pw", b"salt", 4096);
        c.upsert("alice", Mechanism::Sha512, alice.clone()).unwrap();
        c.save(dir.path()).unwrap();
        let back = Credentials::load(dir.path()).unwrap();
        assert_eq!(back.get("alice", Mechanism::Sha512), Some(&alice));
        assert_eq!(back.get("alice", Mechanism::Sha256), None);
        let text = std::fs::read_to_string(Credentials::path(dir.path())).unwrap();
        assert!(!text.contains("\"pw\""), "no password in the file");
        assert_eq!(c.delete("alice", Mechanism::Sha256), Err(Refusal::NotFound));
        assert_eq!(c.delete("bob", Mechanism::Sha512), Err(Refusal::NotFound));
        c.delete("alice", Mechanism::Sha512).unwrap();
        assert!(c.of_user("alice").is_none());
        let few = ScramCredential::from_password(Mechanism::Sha256, b"pw", b"salt", 4095);
        assert_eq!(c.upsert("x", Mechanism::Sha256, few), Err(Refusal::Unacceptable));
    }
}
