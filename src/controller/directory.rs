//! A voter's directory id, as in Kafka's KIP-853: a random id made with
//! its controller directory and told to the quorum in its registration
//! (`BrokerInfo::directory_id`).
//!
//! Raft assumes a voter never forgets what it acknowledged or whom it
//! voted for. A voter that lost its directory (a failed disk, a wiped
//! machine) forgets both, and with one more voter lagging it could elect
//! a leader that lacks an entry the quorum committed. It starts again with
//! a new id, so a candidate whose applied log registers another id for that
//! voter does not count its vote (`network`); once its registration with
//! the new id is applied, its log holds everything before it (Raft's log
//! matching), and its vote counts again.

use std::{fs, path::Path};

const FILE: &str = "directory-id";

/// This voter's directory id: read from `dir`, or made and written there
/// (synced, before any log is) when the directory has none.
pub fn load_or_create(dir: &Path) -> Result<String, String> {
    let path = dir.join(FILE);
    match fs::read_to_string(&path) {
        Ok(text) if !text.trim().is_empty() => return Ok(text.trim().to_string()),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    }
    fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let mut bytes = [0u8; 16];
    getrandom::getrandom(&mut bytes).map_err(|e| format!("no random bytes for {}: {e}", path.display()))?;
    let id: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    crate::storage::file::write_atomically(&path, id.as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    log::info!("controller: new directory id {id} in {}", dir.display());
    Ok(id)
}

/// Whether a vote answered by a voter with directory `answered` counts,
/// when the applied log registers `registered` for it (none registered:
/// a quorum's first start, or a voter of a build without ids).
pub fn vote_counts(registered: Option<&str>, answered: Option<&str>) -> bool {
    registered.is_none_or(|r| answered == Some(r))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_kept_until_its_directory_is_lost() {
        let dir = crate::storage::testing::tempdir();
        let controller = dir.path().join("controller");
        let first = load_or_create(&controller).unwrap();
        assert_eq!(first.len(), 32);
        assert_eq!(load_or_create(&controller).unwrap(), first, "a restart keeps it");
        fs::remove_dir_all(&controller).unwrap();
        assert_ne!(load_or_create(&controller).unwrap(), first, "a lost directory gets a new one");
    }

    #[test]
    fn only_the_registered_directory_votes() {
        assert!(vote_counts(None, None));
        assert!(vote_counts(None, Some("a")));
        assert!(vote_counts(Some("a"), Some("a")));
        assert!(!vote_counts(Some("a"), Some("b")), "a voter that lost its directory");
        assert!(!vote_counts(Some("a"), None));
    }
}
