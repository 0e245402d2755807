//! Storage benchmarks: one partition log against raw direct-I/O writes
//! measured in the same run, on the same disk, with the same buffer sizes.
//!
//! `cargo bench --bench storage [-- --quick] [-- --core N]`
//!
//! Reports medians over repetitions (these machines are shared and noisy),
//! the ratio to the raw baseline, the machine, the commit and the parameters.

mod common;

use std::{
    cell::RefCell,
    path::{Path, PathBuf},
    rc::Rc,
    time::{Duration, Instant},
};

use bytes::BytesMut;
use glommio::io::OpenOptions;
use hdrhistogram::Histogram;
use shardlog::{
    protocol::record_batch::{encode_batch, Record},
    storage::{Clock, Durability, Faults, LogConfig, PartitionLog, PartitionName},
};

struct Params {
    quick: bool,
    core: usize,
    reps: usize,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get());
    let core = args.iter().position(|a| a == "--core").and_then(|i| args.get(i + 1)?.parse().ok()).unwrap_or(ncpu - 1);
    let params = Params { quick, core, reps: if quick { 3 } else { 5 } };
    print_header(&params);
    let report = common::pinned(params.core, move || async move { run_all(&params).await });
    println!("{report}");
}

fn print_header(p: &Params) {
    println!("# shardlog storage bench");
    println!("{}", common::machine_and_commit());
    println!(
        "params: pinned to core {}, {} repetitions, medians shown{}",
        p.core,
        p.reps,
        if p.quick { ", --quick" } else { "" }
    );
    println!();
}

fn bench_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-data").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn mb_per_s(bytes: u64, elapsed: Duration) -> f64 {
    bytes as f64 / elapsed.as_secs_f64() / 1e6
}

/// A producer batch of exactly `bytes` bytes (one record).
fn batch_of(bytes: usize) -> Vec<u8> {
    let overhead = encode_batch(&[Record { key: None, value: Some(&[]), timestamp_delta: 0 }], 0).len();
    // The record's varint length fields grow with the value; trim to fit.
    let mut value_len = bytes - overhead - 6;
    loop {
        let value = vec![0xabu8; value_len];
        let b = encode_batch(&[Record { key: None, value: Some(&value), timestamp_delta: 0 }], 1_700_000_000_000);
        if b.len() <= bytes {
            return b;
        }
        value_len -= b.len() - bytes;
    }
}

/// Writes that each wait for their own fdatasync are slow on purpose; this
/// many are enough for a stable figure.
const SYNC_EACH_WRITES_MAX: u64 = 400;

/// Raw baseline: aligned buffer, copy the payload in, `write_at`, one write
/// in flight at a time, sequential positions; optionally fdatasync each.
/// Like an append, each write copies from its own pre-built source buffer,
/// which is dropped afterwards, so neither side copies from a hot cache.
async fn raw_write(dir: &Path, size: usize, total: u64, sync_each: bool) -> f64 {
    let total = if sync_each { total.min(SYNC_EACH_WRITES_MAX * size as u64) } else { total };
    let path = dir.join("raw.bin");
    let file = OpenOptions::new().read(true).write(true).create_new(true).dma_open(&path).await.unwrap();
    let mut payloads: Vec<BytesMut> =
        (0..total / size as u64).map(|_| BytesMut::from(&vec![0xabu8; size][..])).collect();
    let step = 32u64 << 20;
    let mut allocated = 0;
    let start = Instant::now();
    let mut pos = 0u64;
    while pos < total {
        if pos + size as u64 > allocated {
            allocated += step.max(size as u64);
            file.pre_allocate(allocated, true).await.unwrap();
        }
        let payload = payloads.pop().expect("one payload per write");
        let mut buf = file.alloc_dma_buffer(size);
        buf.as_bytes_mut().copy_from_slice(&payload);
        drop(payload);
        file.write_at(buf, pos).await.unwrap();
        if sync_each {
            file.fdatasync().await.unwrap();
        }
        pos += size as u64;
    }
    let elapsed = start.elapsed();
    file.close().await.unwrap();
    std::fs::remove_file(&path).unwrap();
    mb_per_s(total, elapsed)
}

async fn open_log(dir: &Path, cache_bytes: usize) -> Rc<PartitionLog> {
    let config = LogConfig { cache_bytes, max_batch_bytes: 2 << 20, ..LogConfig::default() };
    let (log, _) = PartitionLog::open(dir, PartitionName("bench-0".into()), config, Clock::System, Faults::default())
        .await
        .expect("open bench log");
    Rc::new(log)
}

/// Appends `count` pre-built batches from `appenders` concurrent tasks.
async fn append_run(log: &Rc<PartitionLog>, batch: &[u8], count: usize, appenders: usize, d: Durability) -> Duration {
    let batches: Vec<BytesMut> = (0..count).map(|_| BytesMut::from(batch)).collect();
    let queue = Rc::new(RefCell::new(batches));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..appenders {
        let (log, queue) = (log.clone(), queue.clone());
        tasks.push(glommio::spawn_local(async move {
            loop {
                let Some(b) = queue.borrow_mut().pop() else { break };
                log.append(b, d).await.expect("bench append");
            }
        }));
    }
    for t in tasks {
        t.await;
    }
    start.elapsed()
}

struct Row {
    what: String,
    mbps: f64,
    baseline: f64,
    baseline_name: &'static str,
}

async fn run_all(p: &Params) -> String {
    let mut rows: Vec<Row> = Vec::new();
    for &size in &[16usize << 10, 1 << 20] {
        let total: u64 = match (size, p.quick) {
            (s, false) if s < 1 << 20 => 128 << 20,
            (_, false) => 512 << 20,
            (s, true) if s < 1 << 20 => 32 << 20,
            (_, true) => 128 << 20,
        };
        let count = (total / size as u64) as usize;
        let batch = batch_of(size);
        let label = if size < 1 << 20 { "16 KiB" } else { "1 MiB" };
        let mut raw = Vec::new();
        let mut raw_sync = Vec::new();
        let mut written = Vec::new();
        let mut written4 = Vec::new();
        let mut durable1 = Vec::new();
        let mut durable8 = Vec::new();
        let sync_each_count = count.min(SYNC_EACH_WRITES_MAX as usize);
        for _ in 0..p.reps {
            let dir = bench_dir("raw");
            raw.push(raw_write(&dir, size, total, false).await);
            raw_sync.push(raw_write(&dir, size, total, true).await);
            for (out, appenders, d, n) in [
                (&mut written, 1, Durability::Written, count),
                (&mut written4, 4, Durability::Written, count),
                (&mut durable1, 1, Durability::Synced, sync_each_count),
                (&mut durable8, 8, Durability::Synced, count),
            ] {
                let dir = bench_dir("log");
                let log = open_log(&dir, 8 << 20).await;
                let elapsed = append_run(&log, &batch, n, appenders, d).await;
                out.push(mb_per_s((n * batch.len()) as u64, elapsed));
                log.close().await.unwrap();
            }
        }
        let (raw, raw_sync) = (common::median(raw), common::median(raw_sync));
        rows.push(Row { what: format!("raw DMA write, {label}"), mbps: raw, baseline: raw, baseline_name: "raw" });
        rows.push(Row {
            what: format!("raw DMA write + fdatasync each, {label}"),
            mbps: raw_sync,
            baseline: raw,
            baseline_name: "raw",
        });
        rows.push(Row {
            what: format!("append acks=1, {label}, 1 appender"),
            mbps: common::median(written),
            baseline: raw,
            baseline_name: "raw",
        });
        rows.push(Row {
            what: format!("append acks=1, {label}, 4 appenders"),
            mbps: common::median(written4),
            baseline: raw,
            baseline_name: "raw",
        });
        rows.push(Row {
            what: format!("append durable, {label}, 1 appender"),
            mbps: common::median(durable1.clone()),
            baseline: raw_sync,
            baseline_name: "raw+sync",
        });
        rows.push(Row {
            what: format!("append durable, {label}, 1 appender"),
            mbps: common::median(durable1),
            baseline: raw,
            baseline_name: "raw",
        });
        rows.push(Row {
            what: format!("append durable, {label}, 8 appenders"),
            mbps: common::median(durable8),
            baseline: raw,
            baseline_name: "raw",
        });
        let (tail, cold) = read_throughput(p, &batch, count).await;
        rows.push(Row {
            what: format!("tail read (cache), {label} batches"),
            mbps: tail,
            baseline: raw,
            baseline_name: "raw write",
        });
        rows.push(Row {
            what: format!("cold read (direct I/O), {label} batches"),
            mbps: cold,
            baseline: raw,
            baseline_name: "raw write",
        });
    }
    let mut out = String::from("| measurement | MB/s (median) | ratio | baseline |\n|---|---:|---:|---|\n");
    for r in &rows {
        out.push_str(&format!("| {} | {:.0} | {:.2} | {} |\n", r.what, r.mbps, r.mbps / r.baseline, r.baseline_name));
    }
    out.push('\n');
    out.push_str(&latency_at_fixed_rate(p).await);
    let _ = std::fs::remove_dir_all(Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-data"));
    out
}

/// Reads back a log of `count` batches: from the tail cache (sized to hold it
/// all), then after reopening (cache empty) from disk.
async fn read_throughput(p: &Params, batch: &[u8], count: usize) -> (f64, f64) {
    let mut tail = Vec::new();
    let mut cold = Vec::new();
    for _ in 0..p.reps {
        let dir = bench_dir("read");
        let bytes = (batch.len() * count) as u64;
        let log = open_log(&dir, bytes as usize + (1 << 20)).await;
        append_run(&log, batch, count, 1, Durability::Written).await;
        tail.push(mb_per_s(bytes, read_all(&log).await));
        log.close().await.unwrap();
        drop(log);
        let log = open_log(&dir, 1 << 20).await;
        cold.push(mb_per_s(bytes, read_all(&log).await));
        log.close().await.unwrap();
    }
    (common::median(tail), common::median(cold))
}

async fn read_all(log: &PartitionLog) -> Duration {
    let start = Instant::now();
    let mut offset = log.log_start();
    let mut bytes = 0usize;
    while offset < log.log_end() {
        let slice = log.read(offset, 1 << 20).await.expect("bench read");
        // Walk the batch headers in place, as a fetch would hand the chunks
        // to the socket: no copy. (The log here is one active segment, so
        // every chunk is in memory; `to_bytes` only clones the handle.)
        for chunk in &slice.chunks {
            let chunk = chunk.to_bytes().expect("bench read");
            bytes += chunk.len();
            let mut at = 0;
            while at < chunk.len() {
                let h = shardlog::protocol::record_batch::BatchHeader::parse(&chunk[at..], 64 << 20).unwrap();
                at += h.total_bytes();
                offset = h.last_offset() + 1;
            }
        }
    }
    assert!(bytes > 0);
    start.elapsed()
}

/// Open-loop durable appends of 16 KiB at a fixed rate: each append starts at
/// its scheduled time, and latency counts from that time, so a stall delays
/// every append behind it in the figures too (no coordinated omission).
async fn latency_at_fixed_rate(p: &Params) -> String {
    let rate_per_s: u64 = 2000;
    let seconds: u64 = if p.quick { 2 } else { 5 };
    let batch = batch_of(16 << 10);
    let mut lines = String::new();
    let mut p50s = Vec::new();
    let mut p99s = Vec::new();
    let mut p999s = Vec::new();
    let mut maxes = Vec::new();
    let mut syncs = Vec::new();
    for _ in 0..p.reps {
        let dir = bench_dir("latency");
        let log = open_log(&dir, 8 << 20).await;
        let hist = Rc::new(RefCell::new(Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap()));
        let interval = Duration::from_nanos(1_000_000_000 / rate_per_s);
        let start = Instant::now();
        let syncs_before = log.stats().syncs.get();
        let mut tasks = Vec::new();
        for i in 0..rate_per_s * seconds {
            let intended = start + interval * i as u32;
            let now = Instant::now();
            if intended > now {
                glommio::timer::sleep(intended - now).await;
            }
            let (log, hist, b) = (log.clone(), hist.clone(), BytesMut::from(&batch[..]));
            tasks.push(glommio::spawn_local(async move {
                log.append(b, Durability::Synced).await.expect("latency append");
                let us = intended.elapsed().as_micros() as u64;
                hist.borrow_mut().record(us.max(1)).unwrap();
            }));
        }
        for t in tasks {
            t.await;
        }
        {
            let h = hist.borrow();
            p50s.push(h.value_at_quantile(0.5) as f64);
            p99s.push(h.value_at_quantile(0.99) as f64);
            p999s.push(h.value_at_quantile(0.999) as f64);
            maxes.push(h.max() as f64);
        }
        syncs.push((log.stats().syncs.get() - syncs_before) as f64);
        log.close().await.unwrap();
    }
    lines.push_str(&format!(
        "durable append latency, 16 KiB batches, open loop at {rate_per_s}/s for {seconds} s (median of {} runs):\n",
        p.reps
    ));
    lines.push_str(&format!(
        "p50 {:.0} us, p99 {:.0} us, p99.9 {:.0} us, max {:.0} us; {:.0} fdatasyncs for {} appends\n",
        common::median(p50s),
        common::median(p99s),
        common::median(p999s),
        common::median(maxes),
        common::median(syncs),
        rate_per_s * seconds
    ));
    lines
}
