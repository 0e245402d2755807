//! The shard journal end to end: acks=all batches acknowledged through the
//! journal come back after their segment writes are lost, and acks=1
//! batches answered from the journal (write-behind) before their segment
//! writes were made come back after a SIGKILL.
//!
//! A SIGKILL alone loses nothing a completed write put in the kernel, so
//! the test then does what a power loss would do to writes no sync
//! covered: each partition's segment reads as zeros past its first batch
//! (the one the first durable append synced; every later append was
//! acknowledged once the journal, not the segment, was synced).

mod common;

use std::{collections::BTreeMap, path::Path};

use common::{broker::Broker, random_batch, wire::*, Rng};
use kafka_protocol::messages::{ApiKey, FetchResponse};

const TOPIC: &str = "journaled";
const PARTITIONS: i32 = 4;

fn fetch_all(w: &mut Wire, partition: i32) -> Vec<u8> {
    let mut out = Vec::new();
    let mut next = 0i64;
    loop {
        let mut req = fetch_request(TOPIC, &[(partition, next)], 0, 1);
        req.topics[0].partitions[0].partition_max_bytes = 4 << 20;
        let resp: FetchResponse = w.call(ApiKey::Fetch, 12, &req);
        let p = &resp.responses[0].partitions[0];
        assert_eq!(p.error_code, 0, "fetch {TOPIC}-{partition} at {next}");
        let records = p.records.clone().unwrap_or_default();
        if records.is_empty() {
            return out;
        }
        for (base, count) in batches(&records) {
            next = base + i64::from(count);
        }
        out.extend_from_slice(&records);
    }
}

/// Every acknowledged batch is stored at its offset, unchanged, and
/// nothing else is.
fn check(stored: &[u8], acked: &BTreeMap<i64, Vec<u8>>, partition: i32) {
    let mut at = 0;
    let mut found = Vec::new();
    for (base, _) in batches(stored) {
        let len = i32::from_be_bytes(stored[at + 8..at + 12].try_into().unwrap()) as usize + 12;
        let sent = acked.get(&base).unwrap_or_else(|| panic!("{TOPIC}-{partition}: batch at {base} was never acked"));
        // The broker sets the base offset; the rest is the producer's bytes.
        assert_eq!(&stored[at + 8..at + len], &sent[8..], "{TOPIC}-{partition}: batch at {base}");
        found.push(base);
        at += len;
    }
    assert_eq!(found, acked.keys().copied().collect::<Vec<_>>(), "{TOPIC}-{partition}: every acked batch");
}

/// `rounds` batches of random records to each partition, one at a time
/// with `acks`; what each partition acknowledged, by base offset.
fn produce_rounds(w: &mut Wire, seed: u64, rounds: usize, bytes: usize, acks: i16) -> Vec<BTreeMap<i64, Vec<u8>>> {
    let mut rng = Rng::new(seed);
    let mut acked: Vec<BTreeMap<i64, Vec<u8>>> = vec![BTreeMap::new(); PARTITIONS as usize];
    for round in 0..rounds {
        for p in 0..PARTITIONS {
            let batch = random_batch(&mut rng, 1 + round % 5, bytes).to_vec();
            let (error, base) = produce(w, TOPIC, p, batch.clone().into(), acks);
            assert_eq!(error, 0, "produce {TOPIC}-{p}");
            acked[p as usize].insert(base, batch);
        }
    }
    acked
}

/// Restarts the killed broker, which must append batches from the journal,
/// and checks every partition holds what it acknowledged.
fn restart_from_the_journal(broker: &mut Broker, acked: &[BTreeMap<i64, Vec<u8>>]) -> Wire {
    broker.restart();
    let (replayed, log) = broker.wait_for_log("from the journal");
    assert!(replayed, "the restart appends batches from the journal; log: {log}");
    let mut w = Wire::connect(&broker.bootstrap());
    for p in 0..PARTITIONS {
        check(&fetch_all(&mut w, p), &acked[p as usize], p);
    }
    w
}

/// Zeros the partition's segment past `keep` bytes.
fn lose_unsynced_writes(data: &Path, partition: i32, keep: u64) {
    use std::os::unix::fs::FileExt;
    let path = data.join(format!("{TOPIC}-{partition}")).join("00000000000000000000.log");
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let len = f.metadata().unwrap().len();
    assert!(len > keep, "{}: {len} bytes, more than the first batch's {keep}", path.display());
    f.write_all_at(&vec![0u8; (len - keep) as usize], keep).unwrap();
    f.sync_all().unwrap();
}

#[test]
fn acks_all_batches_come_back_from_the_journal_after_their_segment_writes_are_lost() {
    let dir = common::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut broker = Broker::start(&data, 1);
    let mut w = Wire::connect(&broker.bootstrap());
    assert_eq!(create_topic(&mut w, TOPIC, PARTITIONS), 0);
    let acked = produce_rounds(&mut w, 77, 25, 1500, -1);
    // Each partition's first durable append synced its segment; the
    // journal took the other 24 of each.
    let metrics = common::broker::metrics_text(&broker);
    let journaled = common::broker::metric_sum(&metrics, "shardlog_journal_batches", "");
    assert!(journaled >= f64::from(24 * PARTITIONS), "batches through the journal: {journaled}");
    drop(w);
    broker.kill();
    for (p, batches) in acked.iter().enumerate() {
        let first = batches.values().next().unwrap().len() as u64;
        lose_unsynced_writes(&data, p as i32, first);
    }

    let w = restart_from_the_journal(&mut broker, &acked);
    // The last run's journal files are gone; this run's are there.
    let names: Vec<String> = std::fs::read_dir(data.join("journal"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!names.is_empty() && names.iter().all(|n| n.starts_with("000001-")), "journal files: {names:?}");

    // And the restarted broker keeps every batch through a clean restart,
    // which leaves no journal file behind: every log was synced at close.
    drop(w);
    broker.stop();
    let left: Vec<_> = std::fs::read_dir(data.join("journal")).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(left.is_empty(), "journal files after a clean stop: {left:?}");
    broker.restart();
    let mut w = Wire::connect(&broker.bootstrap());
    for p in 0..PARTITIONS {
        check(&fetch_all(&mut w, p), &acked[p as usize], p);
    }
    drop(w);
    broker.stop();
}

#[test]
fn acks_1_batches_answered_before_their_segment_writes_survive_a_sigkill() {
    acks_1_batches_survive_a_sigkill("journal_page_cache = false\n");
}

/// The journal written through the page cache (the default): what a
/// killed process wrote there is the kernel's, and comes back as well.
#[test]
fn acks_1_batches_answered_from_a_page_cache_journal_survive_a_sigkill() {
    acks_1_batches_survive_a_sigkill("");
}

fn acks_1_batches_survive_a_sigkill(config: &str) {
    let dir = common::tempdir().unwrap();
    let data = dir.path().join("data");
    // Segment writes a minute behind: until the kill, the journal alone
    // holds what was acknowledged.
    let mut broker = Broker::start_with_config(&data, 1, &format!("write_behind_ms = 60000\n{config}"), &[]);
    let mut w = Wire::connect(&broker.bootstrap());
    assert_eq!(create_topic(&mut w, TOPIC, PARTITIONS), 0);
    let acked = produce_rounds(&mut w, 78, 20, 1200, 1);
    for p in 0..PARTITIONS {
        check(&fetch_all(&mut w, p), &acked[p as usize], p);
    }
    drop(w);
    broker.kill();
    for p in 0..PARTITIONS {
        let segment = data.join(format!("{TOPIC}-{p}")).join("00000000000000000000.log");
        let bytes = std::fs::read(&segment).unwrap_or_default();
        assert!(bytes.iter().all(|&b| b == 0), "{}: written before the kill", segment.display());
    }

    let w = restart_from_the_journal(&mut broker, &acked);
    drop(w);
    broker.stop();
}
