//! The native generator's transactional producer (`bench produce
//! --transactional`): one transactional id per sender, set up before the
//! run (FindCoordinator for key type 1, InitProducerId), then a
//! conversation with its coordinator on the sender's own load core.
//!
//! A partition joins the open transaction before its first batch in it
//! goes out (one AddPartitionsToTxn for every partition of a request that
//! is not in yet), as Kafka's clients add them; the records go out as
//! transactional batches; at each commit slot the sender sends what is due, waits for every
//! answer, and ends the transaction with EndTxn. Commit slots lie on a
//! fixed grid of intervals from the schedule's start, so a long commit
//! does not stretch the intervals after it. Records due while a commit
//! is under way wait in memory for the next transaction, and that wait
//! counts in their latency.

use std::{
    io,
    time::{Duration, Instant},
};

use kafka_protocol::{
    messages::{
        add_partitions_to_txn_request::AddPartitionsToTxnTopic, AddPartitionsToTxnRequest, AddPartitionsToTxnResponse,
        ApiKey, ApiVersionsRequest, ApiVersionsResponse, EndTxnRequest, EndTxnResponse, FindCoordinatorRequest,
        FindCoordinatorResponse, InitProducerIdRequest, InitProducerIdResponse, TopicName, TransactionalId,
    },
    protocol::{Decodable, Encodable, StrBytes},
};

use super::{
    cluster::{pick, CLIENT_ID},
    measure::{record, CommitPhases},
};
use crate::{
    client::{
        nonblocking::{self, AsyncStream},
        tls::{self, Socket},
        Client,
    },
    protocol::{
        client::{request_frame, Response},
        errors,
    },
};

/// How long the broker lets a transaction stay open before aborting it.
const TXN_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a request answered with a retriable error is retried.
const RETRY_FOR: Duration = Duration::from_secs(30);

/// The versions of the transactional APIs spoken with the broker.
#[derive(Debug, Clone, Copy)]
struct TxnVersions {
    find_coordinator: i16,
    init_producer_id: i16,
    add_partitions: i16,
    end_txn: i16,
}

/// A transactional id made ready before the run, on any thread.
pub struct Prepared {
    socket: Socket,
    coordinator: String,
    versions: TxnVersions,
    transactional_id: String,
    pub producer_id: i64,
    pub epoch: i16,
}

/// Retriable answers while a coordinator loads, moves or finishes the
/// transaction before.
fn retriable(code: i16) -> bool {
    matches!(
        code,
        errors::COORDINATOR_LOAD_IN_PROGRESS
            | errors::COORDINATOR_NOT_AVAILABLE
            | errors::NOT_COORDINATOR
            | errors::CONCURRENT_TRANSACTIONS
    )
}

/// Finds `transactional_id`'s coordinator through `bootstrap` and gets its
/// producer id and epoch there (fencing any earlier producer of the id).
pub fn prepare(bootstrap: &str, transactional_id: String) -> Result<Prepared, String> {
    let mut client = Client::connect(bootstrap, CLIENT_ID).map_err(|e| e.to_string())?;
    let offered: ApiVersionsResponse =
        client.call(ApiKey::ApiVersions, 0, &ApiVersionsRequest::default()).map_err(|e| e.to_string())?;
    let versions = TxnVersions {
        find_coordinator: pick(&offered, ApiKey::FindCoordinator, 1..=3)?,
        init_producer_id: pick(&offered, ApiKey::InitProducerId, 0..=4)?,
        add_partitions: pick(&offered, ApiKey::AddPartitionsToTxn, 0..=3)?,
        end_txn: pick(&offered, ApiKey::EndTxn, 0..=3)?,
    };
    let deadline = Instant::now() + RETRY_FOR;
    let what = |step: &str, code: i16| format!("{step} for transactional id {transactional_id}: error {code}");
    let coordinator = loop {
        let mut req = FindCoordinatorRequest::default();
        req.key = StrBytes::from_string(transactional_id.clone());
        req.key_type = 1;
        let resp: FindCoordinatorResponse =
            client.call(ApiKey::FindCoordinator, versions.find_coordinator, &req).map_err(|e| e.to_string())?;
        match resp.error_code {
            errors::NONE => break format!("{}:{}", resp.host.as_str(), resp.port),
            code if retriable(code) && Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            code => return Err(what("FindCoordinator", code)),
        }
    };
    let mut at_coordinator = Client::connect(&coordinator, CLIENT_ID).map_err(|e| e.to_string())?;
    let (producer_id, epoch) = loop {
        let mut req = InitProducerIdRequest::default();
        req.transactional_id = Some(TransactionalId(StrBytes::from_string(transactional_id.clone())));
        req.transaction_timeout_ms = TXN_TIMEOUT.as_millis() as i32;
        req.producer_id = (-1).into();
        req.producer_epoch = -1;
        let resp: InitProducerIdResponse =
            at_coordinator.call(ApiKey::InitProducerId, versions.init_producer_id, &req).map_err(|e| e.to_string())?;
        match resp.error_code {
            errors::NONE => break (resp.producer_id.0, resp.producer_epoch),
            code if retriable(code) && Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            code => return Err(what("InitProducerId", code)),
        }
    };
    let socket = tls::open(&coordinator).map_err(|e| e.to_string())?;
    Ok(Prepared { socket, coordinator, versions, transactional_id, producer_id, epoch })
}

/// The commit slot after `next` on the fixed grid of `interval`s, skipping
/// the slots that passed by `now`: a commit that overran its interval (or
/// a sender held up past a slot) does not commit back to back, with
/// nothing sent in between.
pub fn next_slot(next: Instant, interval: Duration, now: Instant) -> Instant {
    let mut slot = next + interval;
    if slot <= now {
        let behind = now.duration_since(slot).as_nanos() / interval.as_nanos().max(1);
        slot += interval * (behind as u32 + 1);
    }
    slot
}

/// A sender's transactional producer, on its load core.
pub struct Session {
    stream: AsyncStream,
    coordinator: String,
    versions: TxnVersions,
    id: TransactionalId,
    producer_id: i64,
    epoch: i16,
    topic: TopicName,
    /// The partitions in the open transaction.
    added: std::collections::BTreeSet<i32>,
    correlation: i32,
    interval: Duration,
    /// When the open transaction is due to commit.
    pub next: Instant,
    /// Records admitted into the open transaction.
    pub records: u64,
    /// The commits so far, by phase (the drain is the sender's to time).
    pub phases: CommitPhases,
}

impl Session {
    /// Takes the prepared id onto this load core; the first commit is due
    /// one `interval` after `start`.
    pub fn new(p: Prepared, topic: &str, interval: Duration, start: Instant) -> io::Result<Self> {
        Ok(Self {
            stream: nonblocking::into_async(p.socket)?,
            coordinator: p.coordinator,
            versions: p.versions,
            id: TransactionalId(StrBytes::from_string(p.transactional_id)),
            producer_id: p.producer_id,
            epoch: p.epoch,
            topic: TopicName(StrBytes::from_string(topic.to_string())),
            added: Default::default(),
            correlation: 0,
            interval,
            next: start + interval,
            records: 0,
            phases: CommitPhases::default(),
        })
    }

    async fn call<Req: Encodable, Resp: Decodable>(
        &mut self,
        api: ApiKey,
        version: i16,
        req: &Req,
    ) -> Result<Resp, String> {
        self.correlation = self.correlation.wrapping_add(1);
        let at = |e: &dyn std::fmt::Display| format!("{} (transaction coordinator): {e}", self.coordinator);
        let frame = request_frame(api, version, self.correlation, Some(CLIENT_ID), req).map_err(|e| at(&e))?;
        nonblocking::write_frame(&mut self.stream, api, version, &frame).await.map_err(|e| at(&e))?;
        let Response { correlation_id, body, .. } =
            nonblocking::read_response::<Resp>(&mut self.stream, api, version).await.map_err(|e| at(&e))?;
        if correlation_id != self.correlation {
            return Err(at(&format!("answer {correlation_id} where {} was due", self.correlation)));
        }
        Ok(body)
    }

    /// The partitions of `batch` join the open transaction (the first
    /// batch of a transaction opens it); those already in it are not asked
    /// for again.
    pub async fn add(&mut self, batch: impl Iterator<Item = i32>) -> Result<(), String> {
        let new: Vec<i32> = batch.filter(|p| !self.added.contains(p)).collect();
        if new.is_empty() {
            return Ok(());
        }
        let (asked, deadline) = (Instant::now(), Instant::now() + RETRY_FOR);
        loop {
            let mut topic = AddPartitionsToTxnTopic::default();
            topic.name = self.topic.clone();
            topic.partitions = new.clone();
            let mut req = AddPartitionsToTxnRequest::default();
            req.v3_and_below_transactional_id = self.id.clone();
            req.v3_and_below_producer_id = self.producer_id.into();
            req.v3_and_below_producer_epoch = self.epoch;
            req.v3_and_below_topics = vec![topic];
            let resp: AddPartitionsToTxnResponse =
                self.call(ApiKey::AddPartitionsToTxn, self.versions.add_partitions, &req).await?;
            let failed = resp
                .results_by_topic_v3_and_below
                .iter()
                .flat_map(|t| t.results_by_partition.iter().map(move |p| (t.name.as_str(), p)))
                .find(|(_, p)| p.partition_error_code != errors::NONE)
                .map(|(topic, p)| (format!("{topic}-{}", p.partition_index), p.partition_error_code));
            match failed {
                None => {
                    record(&mut self.phases.add_partitions, asked.elapsed().as_micros() as u64, 1);
                    self.added.extend(new);
                    return Ok(());
                }
                Some((_, code)) if retriable(code) && Instant::now() < deadline => {
                    glommio::timer::sleep(Duration::from_millis(1)).await
                }
                Some((partition, code)) => {
                    return Err(format!("AddPartitionsToTxn {partition} for {}: error {code}", self.id.0.as_str()))
                }
            }
        }
    }

    /// Commits the open transaction (every record in it answered) and
    /// moves the next commit to the following slot. A transaction no
    /// partition joined is not open: nothing is sent.
    pub async fn commit(&mut self) -> Result<(), String> {
        if self.added.is_empty() {
            self.skip(Instant::now());
            return Ok(());
        }
        let mut req = EndTxnRequest::default();
        req.transactional_id = self.id.clone();
        req.producer_id = self.producer_id.into();
        req.producer_epoch = self.epoch;
        req.committed = true;
        let asked = Instant::now();
        let resp: EndTxnResponse = self.call(ApiKey::EndTxn, self.versions.end_txn, &req).await?;
        if resp.error_code != errors::NONE {
            return Err(format!("EndTxn (commit) for {}: error {}", self.id.0.as_str(), resp.error_code));
        }
        let now = Instant::now();
        record(&mut self.phases.end_txn, (now - asked).as_micros() as u64, 1);
        if now >= self.next {
            // (Not the last commit, made when the run ends, before its slot.)
            record(&mut self.phases.commit, (now - self.next).as_micros() as u64, 1);
        }
        self.phases.commits += 1;
        self.phases.partitions_ended += self.added.len() as u64;
        self.added.clear();
        self.records = 0;
        self.next = next_slot(self.next, self.interval, now);
        Ok(())
    }

    /// A slot with nothing to commit passes.
    pub fn skip(&mut self, now: Instant) {
        self.next = next_slot(self.next, self.interval, now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_slots_keep_the_grid_and_skip_the_slots_that_passed() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        // On time: the next slot of the grid.
        assert_eq!(next_slot(t0 + ms(100), ms(100), t0 + ms(102)), t0 + ms(200));
        // A commit that ended past the next slot skips it, staying on the grid.
        assert_eq!(next_slot(t0 + ms(100), ms(100), t0 + ms(250)), t0 + ms(300));
        assert_eq!(next_slot(t0 + ms(100), ms(100), t0 + ms(200)), t0 + ms(300));
        assert_eq!(next_slot(t0 + ms(100), ms(100), t0 + ms(1_234)), t0 + ms(1_300));
        for now in [101, 150, 199, 200, 201, 999, 5_000] {
            let slot = next_slot(t0 + ms(100), ms(100), t0 + ms(now));
            assert!(slot > t0 + ms(now) && slot <= t0 + ms(now + 100), "{now} -> {:?}", slot - t0);
        }
    }
}
