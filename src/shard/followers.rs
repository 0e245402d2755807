//! A leader's view of its followers: where each one's log ends (from its
//! fetches), which moves the high watermark and brings a caught-up one
//! back into the in-sync replicas; and Kafka's
//! `replica.lag.time.max.ms`: an in-sync follower that has not reached
//! the log end for that long leaves the in-sync replicas through the
//! quorum (`LeaveIsr`, checked against the epoch), so acks=all stops
//! waiting for a follower that is alive (heartbeating, never fenced) but
//! does not copy: a slow disk, or a network that cuts it from its leader
//! and not from the quorum. It comes back as any follower does, once it
//! catches up (`JoinIsr`).

use std::{
    rc::Rc,
    time::{Duration, Instant},
};

use super::{Partition, Shard};
use crate::controller::{BrokerAnswer, BrokerRequest, IsrChange};

impl Shard {
    /// Leader, on a follower's fetch: notes where `replica`'s log ends,
    /// moves the high watermark, and asks the quorum to put a follower that
    /// reached it back in sync.
    pub(super) fn follower_fetched(
        self: &Rc<Self>,
        topic: &str,
        partition: i32,
        p: &Partition,
        replica: i32,
        offset: i64,
    ) {
        let join = {
            let mut r = p.replica.borrow_mut();
            if !r.leading || !r.others.contains(&replica) {
                return;
            }
            r.follower_ends.insert(replica, offset);
            // Kafka's rule: caught up as of its previous fetch when this one
            // starts at the log end that fetch saw (under load the end moves
            // on between any two fetches).
            let (now, end) = (Instant::now(), p.log.log_end());
            if let Some((seen_end, at)) = r.last_fetch.insert(replica, (end, now)) {
                if offset >= seen_end {
                    r.caught_up_at.insert(replica, at);
                }
            }
            let caught_up = offset >= r.high_watermark.min(p.log.log_end()) || offset >= p.log.log_end();
            let join = caught_up && !r.isr_others.contains(&replica) && r.joining.insert(replica);
            join.then_some(r.epoch)
        };
        p.advance_high_watermark();
        if let Some(epoch) = join {
            let change = IsrChange { topic: topic.to_string(), partition, broker: replica, epoch };
            self.queue_isr_join(change);
        }
    }

    /// Asks the quorum for the joins queued on this shard in one entry,
    /// once the fetch that queued them has been handled (a restarted
    /// follower catches up on all its partitions in one fetch).
    fn queue_isr_join(self: &Rc<Self>, change: IsrChange) {
        let mut queued = self.isr_joins.borrow_mut();
        queued.push(change);
        if queued.len() > 1 {
            return; // a task is on its way for them
        }
        let Some(link) = self.settings.cluster.clone() else { return };
        let me = self.clone();
        glommio::spawn_local(async move {
            futures_lite::future::yield_now().await;
            let changes = std::mem::take(&mut *me.isr_joins.borrow_mut());
            let names: Vec<String> = changes.iter().map(|c| format!("{}-{}", c.topic, c.partition)).collect();
            let shard = me.id;
            match link.ask(BrokerRequest::JoinIsr(changes.clone())).await {
                BrokerAnswer::Ok => log::info!("shard {shard}: followers asked into the ISR of {}", names.join(", ")),
                other => {
                    log::warn!("shard {shard}: followers could not rejoin the ISR of {}: {other:?}", names.join(", "))
                }
            }
            // Asked again at one of their next fetches if still out once
            // this broker's view has caught up: the quorum had no leader,
            // or the follower was fenced (restarted and not registered
            // again yet) and the entry changed nothing. The views between
            // may be skipped, so the ISR the entry made is not a view to
            // wait for.
            glommio::timer::sleep(Duration::from_millis(200)).await;
            for c in changes {
                if let Some(p) = me.partition(&c.topic, c.partition) {
                    p.replica.borrow_mut().joining.remove(&c.broker);
                }
            }
        })
        .detach();
    }

    /// Every shard, in a quorum: checks the partitions it leads once per
    /// tenth of the lag limit.
    pub fn spawn_isr_lag_checks(self: &Rc<Self>) {
        let Some(link) = self.settings.cluster.clone() else { return };
        let shard = self.clone();
        glommio::spawn_local(async move {
            let every = shard.settings.replica_lag_max / 10;
            loop {
                glommio::timer::sleep(every).await;
                for (topic, partition, epoch, broker) in shard.laggards() {
                    let request = BrokerRequest::LeaveIsr(IsrChange { topic: topic.clone(), partition, broker, epoch });
                    let (link, id, limit) = (link.clone(), shard.id, shard.settings.replica_lag_max);
                    glommio::spawn_local(async move {
                        match link.ask(request).await {
                            BrokerAnswer::Ok => log::warn!(
                                "shard {id}: broker {broker} left {topic}-{partition}'s in-sync replicas: \
                                 behind the log end for over {limit:?}"
                            ),
                            other => log::warn!(
                                "shard {id}: could not drop broker {broker} from {topic}-{partition}'s ISR: {other:?}"
                            ),
                        }
                    })
                    .detach();
                }
            }
        })
        .detach();
    }

    /// (topic, partition, epoch, follower) for each in-sync follower of a
    /// partition led here that has lagged past the limit, not asked about
    /// yet under this epoch. As in Kafka, even one min.insync.replicas
    /// needs: acks=all then answers NOT_ENOUGH_REPLICAS at once rather
    /// than time out waiting.
    fn laggards(&self) -> Vec<(String, i32, i32, i32)> {
        let now = Instant::now();
        let limit = self.settings.replica_lag_max;
        let mut out = Vec::new();
        for (topic, partition, p) in self.partitions.borrow().iter() {
            let mut r = p.replica.borrow_mut();
            if !r.leading || !r.replicated {
                continue;
            }
            let lagging: Vec<i32> = r
                .isr_others
                .iter()
                .copied()
                .filter(|b| r.caught_up_at.get(b).is_some_and(|t| now.duration_since(*t) > limit))
                .filter(|b| !r.dropping.contains(b))
                .collect();
            for b in lagging {
                r.dropping.insert(b);
                out.push((topic.to_string(), partition, r.epoch, b));
            }
        }
        out
    }
}
