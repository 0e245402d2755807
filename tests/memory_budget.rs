//! A tight `--memory` budget holds under a produce burst: the batch cache
//! evicts to stay within what the budget leaves it, the broker's resident
//! memory stays near the budget, `/metrics` shows the budget and its use,
//! and every batch still reads back exact (evicted ones from the disk).

mod common;

use std::{
    collections::BTreeMap,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::Duration,
};

use common::{broker::Broker, random_batch, wire::*, Rng};
use kafka_protocol::messages::{ApiKey, FetchResponse};

const TOPIC: &str = "burst";
const PARTITIONS: i32 = 16;
const PRODUCERS: i32 = 4;
/// About 8 MiB per partition (its own cap), 128 MiB in all: with no
/// shard-wide budget the cache alone would pass the RSS ceiling.
const BATCHES_PER_PARTITION: usize = 32;
const BUDGET_MIB: u64 = 112;
const CONFIG: &str =
    "memory = \"112MiB\"\noffsets_topic_num_partitions = 1\ntransaction_state_log_num_partitions = 1\n";

type Sent = BTreeMap<i32, BTreeMap<i64, Vec<u8>>>;

#[test]
fn a_tight_budget_holds_under_a_produce_burst() {
    let dir = common::tempdir().unwrap();
    let broker = Broker::start_with_config(&dir.path().join("data"), 1, CONFIG, &[]);
    let mut w = Wire::connect(&broker.bootstrap());
    assert_eq!(create_topic(&mut w, TOPIC, PARTITIONS), 0);

    let idle_rss = rss_bytes(broker.pid());
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let (sampling, pid) = (sampling.clone(), broker.pid());
        std::thread::spawn(move || {
            let mut peak = 0;
            while sampling.load(Ordering::Relaxed) {
                peak = peak.max(rss_bytes(pid));
                std::thread::sleep(Duration::from_millis(20));
            }
            peak
        })
    };
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|id| {
            let bootstrap = broker.bootstrap();
            std::thread::spawn(move || produce_share(&bootstrap, id))
        })
        .collect();
    let mut sent = Sent::new();
    for p in producers {
        sent.extend(p.join().unwrap());
    }
    sampling.store(false, Ordering::Relaxed);
    let peak_rss = sampler.join().unwrap();

    let m = scrape(&broker);
    eprintln!(
        "budget {BUDGET_MIB} MiB: cache {} of limit {}, evicted {}, peak RSS {} MiB (idle {} MiB)",
        m["shardlog_memory_used_bytes|batch_cache"],
        m["shardlog_batch_cache_limit_bytes"],
        m["shardlog_batch_cache_evicted_bytes_total"],
        peak_rss >> 20,
        idle_rss >> 20
    );
    let budget = m["shardlog_memory_budget_bytes"];
    assert_eq!(budget, (BUDGET_MIB << 20) as f64, "the shard's part of --memory (one shard)");
    let (cache, limit) = (m["shardlog_memory_used_bytes|batch_cache"], m["shardlog_batch_cache_limit_bytes"]);
    assert!(limit > 0.0 && limit < budget / 2.0, "the cache gets what requests, base and partitions leave: {limit}");
    assert!(cache <= limit, "the cache ({cache}) stays within its limit ({limit})");
    let produced: usize = sent.values().flat_map(|b| b.values()).map(Vec::len).sum();
    assert!(produced as f64 > 2.0 * limit, "the burst ({produced} bytes) is bigger than the cache");
    assert!(
        m["shardlog_batch_cache_evicted_bytes_total"] >= produced as f64 - limit - (1 << 20) as f64,
        "what did not fit was evicted: {m:?}"
    );
    let used: f64 =
        ["requests", "partitions", "batch_cache"].iter().map(|p| m[&format!("shardlog_memory_used_bytes|{p}")]).sum();
    assert!(used <= budget, "the accounted parts ({used}) fit the budget ({budget})");
    // Resident memory: the budget plus the slack the 2.2-of-2 GiB target
    // allows (10%); the idle broker's own size is part of the budget.
    let ceiling = (BUDGET_MIB << 20) as f64 * 1.1;
    assert!(
        (peak_rss as f64) < ceiling,
        "peak RSS {} MiB over {} MiB (idle {} MiB)",
        peak_rss >> 20,
        (ceiling as u64) >> 20,
        idle_rss >> 20
    );

    // Every batch reads back exact from offset 0; the oldest come from the
    // disk, since the cache let them go.
    let before = scrape(&broker);
    for (p, batches) in &sent {
        let mut next = 0i64;
        while let Some((&base, _)) = batches.range(next..).next() {
            let resp: FetchResponse = w.call(ApiKey::Fetch, 12, &fetch_request(TOPIC, &[(*p, base)], 0, 1));
            let part = &resp.responses[0].partitions[0];
            assert_eq!(part.error_code, 0, "partition {p} at {base}");
            let records = part.records.clone().unwrap_or_default();
            let found = batches_of(&records);
            assert!(!found.is_empty(), "partition {p}: nothing at {base}");
            for (offset, bytes) in found {
                let want =
                    batches.get(&offset).unwrap_or_else(|| panic!("partition {p}: unexpected batch at {offset}"));
                assert_eq!(&bytes[16..], &want[16..], "partition {p}: batch at {offset} differs past its header");
                next = offset + 1;
            }
        }
    }
    let after = scrape(&broker);
    let delta = |k: &str| after[k] - before[k];
    assert!(delta("shardlog_batch_cache_reads_total|miss") > 0.0, "evicted batches were read from the disk");
    assert!(delta("shardlog_batch_cache_reads_total|hit") > 0.0, "the newest batches were still cached");
}

/// Produces this producer's partitions (every `PRODUCERS`-th) with acks=1;
/// returns the batches by partition and base offset.
fn produce_share(bootstrap: &str, id: i32) -> Sent {
    let mut w = Wire::connect(bootstrap);
    let mut rng = Rng::new(40 + id as u64);
    let mut sent = Sent::new();
    for _ in 0..BATCHES_PER_PARTITION {
        for p in (id..PARTITIONS).step_by(PRODUCERS as usize) {
            let batch = random_batch(&mut rng, 256, 2048).freeze();
            let (code, base) = produce(&mut w, TOPIC, p, batch.clone(), 1);
            assert_eq!(code, 0, "produce to partition {p}");
            sent.entry(p).or_default().insert(base, batch.to_vec());
        }
    }
    sent
}

/// (base offset, whole batch bytes) of each batch in a records field.
fn batches_of(mut records: &[u8]) -> Vec<(i64, Vec<u8>)> {
    let mut out = Vec::new();
    while records.len() >= 61 {
        let base = i64::from_be_bytes(records[..8].try_into().unwrap());
        let len = i32::from_be_bytes(records[8..12].try_into().unwrap()) as usize + 12;
        if len > records.len() {
            break;
        }
        out.push((base, records[..len].to_vec()));
        records = &records[len..];
    }
    out
}

fn rss_bytes(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib = status.lines().find_map(|l| l.strip_prefix("VmRSS:")).and_then(|v| v.split_whitespace().next());
    kib.and_then(|k| k.parse::<u64>().ok()).unwrap_or(0) * 1024
}

/// Shard 0's samples, keyed `name` or `name|label value` for the one label
/// besides `shard` (`part`, `result`).
fn scrape(broker: &Broker) -> BTreeMap<String, f64> {
    let out = std::process::Command::new("curl").args(["-sf", &broker.metrics_url]).output().expect("run curl");
    assert!(out.status.success(), "scrape {}", broker.metrics_url);
    let text = String::from_utf8(out.stdout).unwrap();
    let mut samples = BTreeMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#') && l.contains("shard=\"0\"")) {
        let (name_labels, value) = line.rsplit_once(' ').unwrap();
        let (name, labels) = name_labels.split_once('{').unwrap_or((name_labels, ""));
        let other = labels.trim_end_matches('}').split(',').find(|kv| !kv.starts_with("shard="));
        let key = match other.and_then(|kv| kv.split_once('=')) {
            Some((_, v)) => format!("{name}|{}", v.trim_matches('"')),
            None => name.to_string(),
        };
        samples.insert(key, value.parse().unwrap_or(f64::NAN));
    }
    samples
}
