//! Fetching from the nearest replica (KIP-392).
//!
//! Each broker tells the quorum its rack (`broker_rack`, in its
//! registration); the controller shard hands every shard the racks of the
//! live brokers whenever they change (`ApplyRacks`), so a fetch reads them
//! from its own shard's copy, without a lock.
//!
//! With `replica_selector = "rack-aware"`, a leader answers a consumer's
//! Fetch v11+ whose `rack_id` is not the leader's own rack with no records
//! and `preferred_read_replica` naming an in-sync follower in that rack
//! whose log reaches the fetch offset (the one with the most of the log),
//! as Kafka's `RackAwareReplicaSelector` does; the client then fetches
//! there. Any replica serves consumers' Fetch v11+ (`router::reader`), up
//! to its own high watermark; an offset past its log is
//! OFFSET_OUT_OF_RANGE, on which clients go back to the leader.

use std::{collections::BTreeMap, rc::Rc, sync::Arc};

use super::{Partition, Shard};

/// Node id → rack, of the live brokers that have one.
pub type Racks = Arc<BTreeMap<i32, String>>;

/// Every shard's new copy of the brokers' racks.
#[derive(Debug)]
pub struct ApplyRacks {
    pub racks: Racks,
}

impl Shard {
    pub fn set_racks(&self, racks: Racks) {
        *self.racks.borrow_mut() = racks;
    }

    /// Controller shard, in a quorum: gives every shard `racks` when they
    /// differ from the ones it has.
    pub(super) async fn apply_cluster_racks(self: &Rc<Self>, racks: BTreeMap<i32, String>) {
        if **self.racks.borrow() == racks {
            return;
        }
        let racks = Arc::new(racks);
        self.ask_every(|| ApplyRacks { racks: racks.clone() }).await;
    }

    /// Leader of `p`, answering follower `replica`'s fetch with rack-aware
    /// reads on: whether `high_watermark` is past what that follower was
    /// last told (it is told now). Consumers reading the follower wait
    /// for it, so the fetch is answered at once, not at the end of its
    /// long poll (up to 500 ms later when no record follows).
    pub(super) fn high_watermark_news(&self, p: &Partition, replica: i32, high_watermark: i64) -> bool {
        if !self.settings.rack_aware_reads {
            return false;
        }
        let mut r = p.replica.borrow_mut();
        if !r.leading || !r.replicated {
            return false;
        }
        let told = r.high_watermark_told.insert(replica, high_watermark);
        let news = told.is_some_and(|t| high_watermark > t);
        if news {
            crate::metrics::add(&self.metrics.high_watermark_answers, 1);
        }
        news
    }

    /// Leader of `p`: the follower a consumer in `client_rack` (given only
    /// with the rack-aware selector on) reading at `offset` is sent to, if
    /// one fits.
    pub(super) fn read_replica_for(&self, p: &Partition, offset: i64, client_rack: Option<&str>) -> Option<i32> {
        let client_rack = client_rack?;
        let r = p.replica.borrow();
        if !r.leading || !r.replicated {
            return None;
        }
        let racks = self.racks.borrow();
        let candidates = r.isr_others.iter().map(|&f| (f, r.follower_ends.get(&f).copied().unwrap_or(-1)));
        select(self.settings.rack.as_deref(), client_rack, &racks, candidates, offset)
    }
}

/// Kafka's rack-aware choice: none (read here) when the leader stands in
/// the client's rack; else, of the in-sync followers (`(node, log end)`)
/// in that rack whose log reaches `offset`, the one whose log is longest
/// (the lowest id among equals); none when no follower fits.
pub fn select(
    leader_rack: Option<&str>,
    client_rack: &str,
    racks: &BTreeMap<i32, String>,
    in_sync_followers: impl Iterator<Item = (i32, i64)>,
    offset: i64,
) -> Option<i32> {
    if leader_rack == Some(client_rack) {
        return None;
    }
    in_sync_followers
        .filter(|&(node, end)| end >= offset && racks.get(&node).is_some_and(|r| r == client_rack))
        .max_by_key(|&(node, end)| (end, -node))
        .map(|(node, _)| node)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn racks() -> BTreeMap<i32, String> {
        [(1, "a"), (2, "b"), (3, "b"), (4, "c")].into_iter().map(|(n, r)| (n, r.to_string())).collect()
    }

    #[test]
    fn a_follower_in_the_clients_rack_is_chosen_unless_the_leader_is_there() {
        let followers = [(2, 100), (3, 120), (4, 120)];
        assert_eq!(select(Some("a"), "b", &racks(), followers.into_iter(), 90), Some(3), "the longest log in rack b");
        assert_eq!(select(Some("a"), "b", &racks(), [(2, 120), (3, 120)].into_iter(), 90), Some(2), "ties: lowest id");
        assert_eq!(select(Some("b"), "b", &racks(), followers.into_iter(), 90), None, "the leader is in rack b");
        assert_eq!(select(None, "c", &racks(), followers.into_iter(), 90), Some(4));
    }

    #[test]
    fn nobody_fits_when_no_follower_in_the_rack_reaches_the_offset() {
        let followers = [(2, 100), (3, 110), (4, 200)];
        assert_eq!(select(Some("a"), "b", &racks(), followers.into_iter(), 111), None);
        assert_eq!(select(Some("a"), "b", &racks(), followers.into_iter(), 110), Some(3));
        assert_eq!(select(Some("a"), "d", &racks(), followers.into_iter(), 0), None, "no broker in rack d");
        assert_eq!(select(Some("a"), "b", &racks(), std::iter::empty(), 0), None, "none in sync");
    }
}
