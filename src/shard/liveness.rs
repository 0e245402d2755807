//! How a broker's death reaches the quorum before its session runs out: a
//! follower refused by its leader, and a leader whose follower's
//! connection closed, each tell the quorum (`BrokerRequest::Unreachable`),
//! whose leader fences the broker at once if it refuses connections too.

use std::time::{Duration, Instant};

use super::{replication::RETRY_PAUSE, Shard};
use crate::controller::{BrokerAnswer, BrokerRequest};

impl Shard {
    /// Tells the quorum that `leader` refused this follower: if it refuses
    /// the quorum's leader too it is fenced now, and its partitions move to
    /// in-sync replicas without waiting out its session.
    pub(super) fn report_unreachable(&self, leader: i32) {
        let Some(link) = self.settings.cluster.clone() else { return };
        let shard = self.id;
        glommio::spawn_local(async move {
            if let BrokerAnswer::Failed(e) = link.ask(BrokerRequest::Unreachable(leader)).await {
                log::debug!("shard {shard}: reporting broker {leader} unreachable: {e}");
            }
        })
        .detach();
    }

    /// Leader: the connection `replica`'s fetches came on closed. Tells
    /// the quorum as a follower tells it of its leader, retrying through
    /// an election (the gone broker may have led the quorum too).
    pub(crate) fn report_follower_gone(&self, replica: i32) {
        let Some(link) = self.settings.cluster.clone() else { return };
        glommio::spawn_local(async move {
            let deadline = Instant::now() + Duration::from_secs(10);
            while let BrokerAnswer::NotLeader | BrokerAnswer::Failed(_) =
                link.ask(BrokerRequest::Unreachable(replica)).await
            {
                if Instant::now() >= deadline {
                    return;
                }
                glommio::timer::sleep(RETRY_PAUSE).await;
            }
        })
        .detach();
    }
}
