//! ACL changes, made by the controller (shard 0) one at a time: the new
//! set is persisted, then every shard swaps in its own copy (`ApplyAcls`)
//! before the change is answered, so a request on any shard after a
//! CreateAcls/DeleteAcls response sees it. Checks read the shard's copy
//! with no lock and no message.

use std::{rc::Rc, sync::Arc};

use super::{router::CONTROLLER, Shard};
use crate::security::acl::{Acl, AclFilter, AclSet};

/// What a CreateAcls or DeleteAcls asks of the controller (and, in a
/// metadata quorum, what its log carries).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ChangeAcls {
    /// Adds these (valid) ACLs; those already held stay once.
    Create(Vec<Acl>),
    /// Removes every ACL each filter matches.
    Delete(Vec<AclFilter>),
}

/// Per delete filter, the ACLs it removed (empty for a create).
pub type AclsChanged = Result<Vec<Vec<Acl>>, String>;

/// Every shard's new copy of the ACLs.
#[derive(Debug)]
pub struct ApplyAcls {
    pub acls: Arc<AclSet>,
}

impl Shard {
    /// This shard's copy of the ACLs.
    pub fn acls(&self) -> Arc<AclSet> {
        self.acls.borrow().clone()
    }

    pub fn set_acls(&self, acls: Arc<AclSet>) {
        *self.acls.borrow_mut() = acls;
    }

    /// Makes an ACL change through the controller.
    pub async fn change_acls(self: &Rc<Self>, change: ChangeAcls) -> AclsChanged {
        self.ask(CONTROLLER, change).await.unwrap_or_else(|_| Err("the broker is shutting down".into()))
    }

    /// Controller only: applies `change`, persists, publishes to every shard.
    pub(super) async fn apply_acl_change(self: &Rc<Self>, change: ChangeAcls) -> AclsChanged {
        if let Some(link) = &self.settings.cluster {
            return self.change_cluster_acls(link, change).await;
        }
        let _permit = self.acl_permit.acquire_permit(1).await.map_err(|e| format!("ACL change refused: {e}"))?;
        let current = self.acls();
        let (next, deleted) = acls_changed(&current, &change);
        if next != *current {
            self.publish_acls(next).await?;
        }
        Ok(deleted)
    }

    /// Saves `next`, then has every shard swap it in.
    pub(super) async fn publish_acls(self: &Rc<Self>, next: AclSet) -> Result<(), String> {
        let (dir, to_save) = (self.settings.data_dir.clone(), next.clone());
        glommio::executor()
            .spawn_blocking(move || crate::security::acl_store::save(&dir, &to_save))
            .await
            .map_err(|e| format!("cannot persist ACLs: {e}"))?;
        let next = Arc::new(next);
        // A shard already gone (shutdown) serves no more requests.
        self.ask_every(|| ApplyAcls { acls: next.clone() }).await;
        Ok(())
    }
}

/// `change` applied to `current`: the new set and, per delete filter, the
/// ACLs it removed (empty for a create).
pub fn acls_changed(current: &AclSet, change: &ChangeAcls) -> (AclSet, Vec<Vec<Acl>>) {
    match change {
        ChangeAcls::Create(new) => {
            let mut all = current.acls.clone();
            all.extend(new.iter().cloned());
            (AclSet::new(all), Vec::new())
        }
        ChangeAcls::Delete(filters) => {
            let deleted: Vec<Vec<Acl>> =
                filters.iter().map(|f| current.acls.iter().filter(|a| f.matches(a)).cloned().collect()).collect();
            let kept = current.acls.iter().filter(|a| !filters.iter().any(|f| f.matches(a))).cloned().collect();
            (AclSet::new(kept), deleted)
        }
    }
}
