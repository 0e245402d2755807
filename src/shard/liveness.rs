//! How a broker's death reaches the quorum before its session runs out: a
//! follower refused by its leader, and a leader whose follower's
//! connection closed, each tell the quorum (`BrokerRequest::Unreachable`),
//! whose leader fences the broker at once if it refuses connections too.

use std::time::{Duration, Instant};

use super::{replication::RETRY_PAUSE, Shard};
use crate::controller::{BrokerAnswer, BrokerRequest};

impl Shard {
    /// Tells the quorum that `broker` may be gone: if it refuses the
    /// quorum's leader too it is fenced now, and its partitions and
    /// in-sync places move without waiting out its session. Asks again
    /// while there is no quorum leader to answer, for up to `retry_for`
    /// (a follower's fetch loop asks at each of its own retries instead).
    pub(crate) fn report_unreachable(&self, broker: i32, retry_for: Duration) {
        let Some(link) = self.settings.cluster.clone() else { return };
        let shard = self.id;
        glommio::spawn_local(async move {
            let deadline = Instant::now() + retry_for;
            loop {
                match link.ask(BrokerRequest::Unreachable(broker)).await {
                    BrokerAnswer::NotLeader | BrokerAnswer::Failed(_) if Instant::now() < deadline => {
                        glommio::timer::sleep(RETRY_PAUSE).await;
                    }
                    BrokerAnswer::Failed(e) => {
                        return log::debug!("shard {shard}: reporting broker {broker} unreachable: {e}");
                    }
                    _ => return,
                }
            }
        })
        .detach();
    }
}
