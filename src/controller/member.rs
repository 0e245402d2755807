//! What every broker of the cluster does with the quorum, voter or not:
//! heartbeats to the leader, a controlled shutdown, and the shards'
//! questions passed on. A voter reaches the leader through openraft's view
//! of it (`Controller`), a broker outside the quorum through the voters
//! (`observer::Observer`).

use std::{
    collections::HashMap,
    future::Future,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use super::{network::Peer, Ask, BrokerAnswer, BrokerInfo, BrokerRequest, LEAVE_LIMIT, WRITE_LIMIT};

pub(super) trait Member: Send + Sync + 'static {
    fn node_id(&self) -> i32;
    /// Set at shutdown: heartbeats stop, so the fence stays.
    fn leaving(&self) -> &AtomicBool;
    /// Sends `request` to whichever member leads.
    fn to_leader<'a>(
        &'a self,
        peers: &'a mut HashMap<u64, Peer>,
        request: BrokerRequest,
        limit: Duration,
    ) -> impl Future<Output = BrokerAnswer> + Send + 'a;
}

/// This broker's heartbeats, to whichever member leads, until it leaves.
pub(super) async fn heartbeats<M: Member>(member: Arc<M>, info: BrokerInfo, every: Duration) {
    let mut peers: HashMap<u64, Peer> = HashMap::new();
    let mut last_error = String::new();
    while !member.leaving().load(Ordering::Acquire) {
        match member.to_leader(&mut peers, BrokerRequest::Heartbeat(info.clone()), every).await {
            BrokerAnswer::NotLeader => {}
            BrokerAnswer::Failed(e) if e != last_error => {
                log::warn!("controller: heartbeat of broker {} failed: {e}", info.node_id);
                last_error = e;
            }
            BrokerAnswer::Failed(_) => {}
            _ => last_error.clear(),
        }
        tokio::time::sleep(every).await;
    }
}

/// Waits for the broker's stop flag, then asks the leader to fence this
/// broker (retrying for up to `LEAVE_LIMIT`) and says so on `left`.
pub(super) async fn leave_at_stop<M: Member>(member: Arc<M>, stop: Arc<AtomicBool>, left: std::sync::mpsc::Sender<()>) {
    while !stop.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    member.leaving().store(true, Ordering::Release);
    let id = member.node_id();
    let deadline = Instant::now() + LEAVE_LIMIT;
    let mut peers = HashMap::new();
    while Instant::now() < deadline {
        let answer = member.to_leader(&mut peers, BrokerRequest::Leaving(id), LEAVE_LIMIT / 4).await;
        if matches!(answer, BrokerAnswer::Ok) {
            let _ = left.send(());
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    log::warn!("controller: broker {id} left without being fenced (no leader answered in {LEAVE_LIMIT:?})");
}

/// Answers the shards' questions (`ClusterLink::ask`), each on a task of
/// its own so a slow write holds up no other.
pub(super) async fn answer_shards<M: Member>(member: Arc<M>, mut asks: tokio::sync::mpsc::UnboundedReceiver<Ask>) {
    while let Some((request, reply)) = asks.recv().await {
        let member = member.clone();
        tokio::spawn(async move {
            let mut peers = HashMap::new();
            let answer = member.to_leader(&mut peers, request, WRITE_LIMIT + Duration::from_secs(1)).await;
            let _ = reply.send(answer);
        });
    }
}
