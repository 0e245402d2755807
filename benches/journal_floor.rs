//! What a shard journal would save at the device, before anyone builds one.
//!
//! One shard at 50,000 msg/s of 1 KiB over 16 partitions takes, per loop
//! turn, about one record per partition. Today each partition writes its
//! own segment: 16 direct writes a turn, each rewriting the partition's
//! partly filled last block plus the new bytes (and, for acks=all, 16
//! `fdatasync`s). A shard journal would write the turn's records as one
//! direct write to one file (and sync it once). This measures both ways on
//! the same disk in the same run, into blocks written before (as
//! zero-ahead leaves them), rounds paced from a fixed schedule and each
//! round's latency taken from its due instant (a late round counts its
//! wait). Rounds that fell due during a write go into the next write
//! together, in both designs, as the broker's queued appends do. No broker,
//! no network: the device's floor for each design.
//!
//! `cargo bench --bench journal_floor [-- --quick] [-- --core N] [-- --rate ROUNDS_PER_S]`
//!
//! Reports medians of the repetitions' percentiles, the ratio of journal to
//! per-partition, the machine, the commit and the parameters.

mod common;

use std::{
    path::{Path, PathBuf},
    rc::Rc,
    time::{Duration, Instant},
};

use glommio::io::{DmaFile, OpenOptions};
use hdrhistogram::Histogram;

const PARTITIONS: usize = 16;
const RECORD_BYTES: u64 = 1024 + 70; // a 1 KiB record in a batch of its own
/// Each file's region, written with zeros first and then cycled over.
const REGION_BYTES: u64 = 8 << 20;

struct Params {
    core: usize,
    reps: usize,
    rate: u64,
    length: Duration,
}

#[derive(Clone, Copy, PartialEq)]
enum Design {
    /// One write per partition file, all of a round's in flight together.
    PerPartition,
    /// One write of the whole round to one file.
    Journal,
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let arg = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)?.parse::<u64>().ok());
    let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get());
    let params = Params {
        core: arg("--core").map_or(ncpu - 1, |c| c as usize),
        reps: 3,
        rate: arg("--rate").unwrap_or(50_000 / PARTITIONS as u64),
        length: Duration::from_secs(if quick { 3 } else { 10 }),
    };
    println!("# shardlog journal floor bench");
    println!("{}", common::machine_and_commit());
    println!(
        "params: pinned to core {}, {} partitions, {} B per record, {} rounds/s ({} msg/s), {} s per run, {} repetitions interleaved, medians shown",
        params.core,
        PARTITIONS,
        RECORD_BYTES,
        params.rate,
        params.rate * PARTITIONS as u64,
        params.length.as_secs(),
        params.reps
    );
    println!();
    let report = common::pinned(params.core, move || async move { run_all(&params).await });
    println!("{report}");
}

async fn run_all(p: &Params) -> String {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-data/journal-floor");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let partitions = zeroed_files(&dir, "p", PARTITIONS).await;
    let journal = zeroed_files(&dir, "journal", 1).await;
    let mut rows = Vec::new();
    for sync in [false, true] {
        let mut per = Vec::new();
        let mut jour = Vec::new();
        for _ in 0..p.reps {
            per.push(paced_rounds(&partitions, Design::PerPartition, sync, p).await);
            jour.push(paced_rounds(&journal, Design::Journal, sync, p).await);
        }
        rows.push((sync, per, jour));
    }
    for f in partitions.into_iter().chain(journal) {
        f.close_rc().await.unwrap();
    }
    std::fs::remove_dir_all(&dir).unwrap();
    let mut out = String::from(
        "| acks | design | writes a round | p50 µs | p99 µs | p99.9 µs | journal ÷ per-partition (p50, p99) |\n|---|---|---:|---:|---:|---:|---|\n",
    );
    for (sync, per, jour) in rows {
        let acks = if sync { "all (write + fdatasync)" } else { "1 (write)" };
        let m =
            |v: &[Histogram<u64>], q: f64| common::median(v.iter().map(|h| h.value_at_quantile(q) as f64).collect());
        let (p50, p99, p999) = (m(&per, 0.5), m(&per, 0.99), m(&per, 0.999));
        let (j50, j99, j999) = (m(&jour, 0.5), m(&jour, 0.99), m(&jour, 0.999));
        out += &format!("| {acks} | per partition | {PARTITIONS} | {p50:.0} | {p99:.0} | {p999:.0} | |\n");
        out += &format!(
            "| {acks} | journal | 1 | {j50:.0} | {j99:.0} | {j999:.0} | {:.2}, {:.2} |\n",
            j50 / p50,
            j99 / p99
        );
    }
    out
}

/// `n` files in `dir`, each with `REGION_BYTES` written with zeros.
async fn zeroed_files(dir: &Path, stem: &str, n: usize) -> Vec<Rc<DmaFile>> {
    let mut files = Vec::new();
    for i in 0..n {
        let path: PathBuf = dir.join(format!("{stem}-{i}.bin"));
        let file = OpenOptions::new().read(true).write(true).create(true).dma_open(&path).await.unwrap();
        let chunk = 1u64 << 20;
        for pos in (0..REGION_BYTES).step_by(chunk as usize) {
            let mut buf = file.alloc_dma_buffer(chunk as usize);
            buf.as_bytes_mut().fill(0);
            file.write_at(buf, pos).await.unwrap();
        }
        file.fdatasync().await.unwrap();
        files.push(Rc::new(file));
    }
    files
}

/// Rounds of one record per partition, paced at `p.rate` a second for
/// `p.length`; each round's latency from its due instant until its writes
/// (and syncs) completed, in µs. Rounds that fell due while the last
/// writes were in flight are written together, one write per file, as the
/// broker's queued appends are (its group commit).
async fn paced_rounds(files: &[Rc<DmaFile>], design: Design, sync: bool, p: &Params) -> Histogram<u64> {
    let mut h = Histogram::new_with_bounds(1, 60_000_000, 3).unwrap();
    let align = files[0].alignment();
    let per_round = match design {
        Design::PerPartition => RECORD_BYTES,
        Design::Journal => RECORD_BYTES * PARTITIONS as u64,
    };
    let interval = Duration::from_secs_f64(1.0 / p.rate.max(1) as f64);
    let start = Instant::now();
    let mut due = start;
    let mut size = 0u64; // every file grows alike
    while start.elapsed() < p.length {
        let now = Instant::now();
        if due > now {
            glommio::timer::sleep(due - now).await;
        }
        // Every round due by now goes into this write.
        let mut rounds = vec![due];
        while let Some(next) = rounds.last().map(|d| *d + interval).filter(|d| *d <= Instant::now()) {
            rounds.push(next);
        }
        let end = size + per_round * rounds.len() as u64;
        let pos = size / align * align;
        let len = (end - pos).div_ceil(align) * align;
        let at = pos % (REGION_BYTES - len).max(align) / align * align;
        let mut tasks = Vec::new();
        for file in files {
            let file = file.clone();
            let mut buf = file.alloc_dma_buffer(len as usize);
            buf.as_bytes_mut().fill(size as u8);
            tasks.push(glommio::spawn_local(async move {
                file.write_at(buf, at).await.unwrap();
                if sync {
                    file.fdatasync().await.unwrap();
                }
            }));
        }
        for t in tasks {
            t.await;
        }
        for d in &rounds {
            h.saturating_record(d.elapsed().as_micros().max(1) as u64);
        }
        size = end;
        due = *rounds.last().expect("at least the round due") + interval;
    }
    h
}
