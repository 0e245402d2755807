//! The ACLs on disk: `DATA/__security/acls.json`, written whole and
//! atomically (temp file, fsync, rename, fsync of the directory), read
//! once at start. Blocking calls: run at start and, on the controller, on
//! the blocking pool for each change.

use std::{
    fs,
    io::Write,
    path::{Path, PathBuf},
};

use super::acl::AclSet;

/// The directory of the broker's security state inside the data dir.
pub const SECURITY_DIR: &str = "__security";
const ACLS_FILE: &str = "acls.json";

pub fn acls_path(data_dir: &Path) -> PathBuf {
    data_dir.join(SECURITY_DIR).join(ACLS_FILE)
}

/// The persisted ACLs; none when the file does not exist yet.
pub fn load(data_dir: &Path) -> Result<AclSet, String> {
    let path = acls_path(data_dir);
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(AclSet::default()),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let set: AclSet = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    if let Some((acl, why)) = set.acls.iter().find_map(|a| a.invalid().map(|why| (a, why))) {
        return Err(format!("{}: invalid ACL {acl:?}: {why}", path.display()));
    }
    Ok(AclSet::new(set.acls))
}

pub fn save(data_dir: &Path, set: &AclSet) -> Result<(), String> {
    let dir = data_dir.join(SECURITY_DIR);
    fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let path = acls_path(data_dir);
    let tmp = dir.join(format!("{ACLS_FILE}.tmp"));
    let text = serde_json::to_string_pretty(set).map_err(|e| format!("cannot encode ACLs: {e}"))?;
    let write = || -> std::io::Result<()> {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        fs::rename(&tmp, &path)?;
        fs::File::open(&dir)?.sync_all()
    };
    write().map_err(|e| format!("cannot write {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::acl::{Acl, Operation, PatternType, Permission, ResourceType};

    #[test]
    fn saved_acls_load_back_and_a_bad_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(load(dir.path()).unwrap(), AclSet::default());
        let set = AclSet::new(vec![Acl {
            resource_type: ResourceType::Group,
            resource_name: "g".into(),
            pattern_type: PatternType::Literal,
            principal: "User:bob".into(),
            host: "*".into(),
            operation: Operation::Read,
            permission: Permission::Allow,
        }]);
        save(dir.path(), &set).unwrap();
        assert_eq!(load(dir.path()).unwrap(), set);
        fs::write(acls_path(dir.path()), "{\"acls\": [1]}").unwrap();
        assert!(load(dir.path()).unwrap_err().contains("acls.json"));
    }
}
