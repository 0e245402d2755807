//! `shardlog iotune --dir DIR`: measures the disk the way the broker uses
//! it and writes `io-properties.toml`, read by `serve --io-properties` (to
//! bound concurrent disk reads per shard) and by `shardlog plan`.
//!
//! - sequential O_DIRECT writes through glommio (as segments are written) at
//!   several block sizes and queue depths;
//! - sequential O_DIRECT `pread`s from threads (as cold fetches of the
//!   active segment and recovery read) at the same sizes and depths;
//! - 4 KiB append + `fdatasync` latency (what an `acks=all` group commit
//!   waits for);
//! - the DMA write latency of 1 KiB appends made as a partition's log makes
//!   them, paced at 5,000 a second (what an `acks=1` produce waits for: the
//!   floor of its latency on this disk);
//! - random 4 KiB reads (IOPS) at queue depth 1 and 32.
//!
//! Bounded by `--duration`, split evenly over the steps; progress per step.

use std::{
    cell::Cell,
    os::unix::fs::{FileExt, OpenOptionsExt},
    path::{Path, PathBuf},
    rc::Rc,
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use clap::Args;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

#[derive(Args, Debug, Clone)]
pub struct IotuneArgs {
    /// A directory on the disk to measure (the broker's data directory).
    #[arg(long, default_value = "./data")]
    pub dir: PathBuf,
    /// Total time for all measurements, e.g. 60s, 5m.
    #[arg(long, default_value = "60s", value_parser = crate::bench::parse_duration)]
    pub duration: Duration,
    /// Where to write the profile.
    #[arg(long, default_value = "io-properties.toml")]
    pub output: PathBuf,
    /// Size of the test file (reads cycle over it).
    #[arg(long, default_value_t = 1 << 30)]
    pub file_bytes: u64,
    /// Core for the writing executor.
    #[arg(long, default_value_t = 0)]
    pub core: usize,
}

/// One bandwidth measurement.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Step {
    pub block_bytes: u64,
    pub queue_depth: u64,
    pub mb_per_s: f64,
    pub iops: f64,
}

/// What `iotune` writes and `serve`/`plan` read.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct IoProperties {
    pub dir: String,
    pub machine: String,
    pub kernel: String,
    pub commit: String,
    pub measured_unix_s: u64,
    pub seconds: f64,
    /// Best sequential DMA write bandwidth over the steps (MB/s).
    pub write_bandwidth_mb_per_s: f64,
    /// Best sequential direct-read bandwidth (MB/s).
    pub read_bandwidth_mb_per_s: f64,
    /// Queue depth at which reads first reached 90% of the best bandwidth.
    pub read_saturation_queue_depth: u64,
    pub random_read_iops_qd1: f64,
    pub random_read_iops_qd32: f64,
    pub fdatasync_p50_us: u64,
    pub fdatasync_p99_us: u64,
    pub fdatasync_p999_us: u64,
    pub fdatasync_max_us: u64,
    pub fdatasync_count: u64,
    /// DMA write latency of paced 1 KiB appends (absent in profiles written
    /// before it was measured).
    #[serde(default)]
    pub append_write_p50_us: u64,
    #[serde(default)]
    pub append_write_p99_us: u64,
    #[serde(default)]
    pub append_write_p999_us: u64,
    #[serde(default)]
    pub append_write_max_us: u64,
    #[serde(default)]
    pub append_write_count: u64,
    /// Appends a second in that measurement.
    #[serde(default)]
    pub append_write_rate: u64,
    pub write: Vec<Step>,
    pub read: Vec<Step>,
}

impl IoProperties {
    pub fn load(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        toml::from_str(&text).map_err(|e| format!("{}: not an io-properties file: {e}", path.display()))
    }

    /// Concurrent disk reads per shard that keep the device busy without
    /// queueing far beyond its saturation point.
    pub fn disk_reads_per_shard(&self, shards: usize) -> usize {
        (self.read_saturation_queue_depth as usize).div_ceil(shards.max(1)).max(2)
    }
}

const BLOCKS: [u64; 3] = [16 << 10, 128 << 10, 1 << 20];
const DEPTHS: [u64; 3] = [1, 4, 16];

pub fn run(a: &IotuneArgs) -> Result<(), String> {
    std::fs::create_dir_all(&a.dir).map_err(|e| format!("{}: {e}", a.dir.display()))?;
    let path = a.dir.join(format!("shardlog-iotune-{}.bin", std::process::id()));
    let result = measure(a, &path);
    let _ = std::fs::remove_file(&path);
    let props = result?;
    let text = format!(
        "# Written by `shardlog iotune --dir {}` ({:.0} s). Read by `shardlog serve --io-properties`\n# and `shardlog plan --io`. Bandwidths in MB/s (10^6 bytes), latencies in µs.\n{}",
        a.dir.display(),
        props.seconds,
        toml::to_string(&props).map_err(|e| e.to_string())?
    );
    std::fs::write(&a.output, text).map_err(|e| format!("{}: {e}", a.output.display()))?;
    println!(
        "sequential write {:.0} MB/s, sequential read {:.0} MB/s (saturates at queue depth {}), random 4 KiB reads {:.0} IOPS at qd 1, {:.0} at qd 32",
        props.write_bandwidth_mb_per_s,
        props.read_bandwidth_mb_per_s,
        props.read_saturation_queue_depth,
        props.random_read_iops_qd1,
        props.random_read_iops_qd32
    );
    println!(
        "fdatasync after a 4 KiB append: p50 {} µs, p99 {} µs, p99.9 {} µs, max {} µs ({} syncs)",
        props.fdatasync_p50_us,
        props.fdatasync_p99_us,
        props.fdatasync_p999_us,
        props.fdatasync_max_us,
        props.fdatasync_count
    );
    println!(
        "DMA write of a 1 KiB append at {}/s: p50 {} µs, p99 {} µs, p99.9 {} µs, max {} µs ({} writes)",
        props.append_write_rate,
        props.append_write_p50_us,
        props.append_write_p99_us,
        props.append_write_p999_us,
        props.append_write_max_us,
        props.append_write_count
    );
    println!("profile: {}", a.output.display());
    Ok(())
}

fn measure(a: &IotuneArgs, path: &Path) -> Result<IoProperties, String> {
    let started = Instant::now();
    // steps: writes, reads, fsync, paced appends, two random-read depths
    let n_steps = (BLOCKS.len() * DEPTHS.len() * 2 + 4) as u32;
    let step = (a.duration / n_steps).max(Duration::from_millis(200));
    let total_steps = n_steps as usize;
    let mut done = 0usize;
    let mut progress = |what: &str, figure: String| {
        done += 1;
        eprintln!("[{done:>2}/{total_steps}] {what:<36} {figure}");
    };
    let file_bytes = a.file_bytes.max(64 << 20) / (1 << 20) * (1 << 20);

    // Writes (they also fill the file the reads use).
    let mut write = Vec::new();
    for &bs in &BLOCKS {
        for &qd in &DEPTHS {
            let s = dma_write(path, a.core, bs, qd, file_bytes, step)?;
            progress(&format!("write {} KiB × qd {qd}", bs >> 10), format!("{:.0} MB/s", s.mb_per_s));
            write.push(s);
        }
    }
    ensure_filled(path, file_bytes)?;
    let mut read = Vec::new();
    for &bs in &BLOCKS {
        for &qd in &DEPTHS {
            let s = direct_read(path, bs, qd, file_bytes, step, false)?;
            progress(&format!("read {} KiB × qd {qd}", bs >> 10), format!("{:.0} MB/s", s.mb_per_s));
            read.push(s);
        }
    }
    let sync = fsync_latency(path, a.core, step)?;
    progress(
        "4 KiB append + fdatasync",
        format!("p50 {} µs, p99 {} µs", sync.value_at_quantile(0.5), sync.value_at_quantile(0.99)),
    );
    let append = append_latency(path, a.core, step, APPEND_RATE)?;
    progress(
        &format!("1 KiB appends at {APPEND_RATE}/s"),
        format!(
            "write p50 {} µs, p99 {} µs, p99.9 {} µs",
            append.value_at_quantile(0.5),
            append.value_at_quantile(0.99),
            append.value_at_quantile(0.999)
        ),
    );
    let r1 = direct_read(path, 4096, 1, file_bytes, step, true)?;
    progress("random 4 KiB reads, qd 1", format!("{:.0} IOPS", r1.iops));
    let r32 = direct_read(path, 4096, 32, file_bytes, step, true)?;
    progress("random 4 KiB reads, qd 32", format!("{:.0} IOPS", r32.iops));

    let best = |v: &[Step]| v.iter().map(|s| s.mb_per_s).fold(0.0, f64::max);
    let best_read = best(&read);
    let saturation = read
        .iter()
        .filter(|s| s.block_bytes == 1 << 20)
        .find(|s| s.mb_per_s >= 0.9 * best_read)
        .map_or(DEPTHS[DEPTHS.len() - 1], |s| s.queue_depth);
    let m = crate::bench::report::machine();
    Ok(IoProperties {
        dir: a.dir.display().to_string(),
        machine: format!("{}, {} cores", m["cpu"].as_str().unwrap_or("?"), m["cores"]),
        kernel: m["kernel"].as_str().unwrap_or("?").to_string(),
        commit: crate::bench::report::commit().to_string(),
        measured_unix_s: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()),
        seconds: started.elapsed().as_secs_f64(),
        write_bandwidth_mb_per_s: best(&write),
        read_bandwidth_mb_per_s: best_read,
        read_saturation_queue_depth: saturation,
        random_read_iops_qd1: r1.iops,
        random_read_iops_qd32: r32.iops,
        fdatasync_p50_us: sync.value_at_quantile(0.5),
        fdatasync_p99_us: sync.value_at_quantile(0.99),
        fdatasync_p999_us: sync.value_at_quantile(0.999),
        fdatasync_max_us: sync.max(),
        fdatasync_count: sync.len(),
        append_write_p50_us: append.value_at_quantile(0.5),
        append_write_p99_us: append.value_at_quantile(0.99),
        append_write_p999_us: append.value_at_quantile(0.999),
        append_write_max_us: append.max(),
        append_write_count: append.len(),
        append_write_rate: APPEND_RATE,
        write,
        read,
    })
}

/// Sequential writes of `bs` with `qd` in flight, for `length` (cycling
/// over `file_bytes`), through glommio's DMA file on `core`.
fn dma_write(path: &Path, core: usize, bs: u64, qd: u64, file_bytes: u64, length: Duration) -> Result<Step, String> {
    let p = path.to_path_buf();
    let written = glommio::LocalExecutorBuilder::new(glommio::Placement::Fixed(core))
        .name("iotune")
        .spawn(move || async move {
            use glommio::io::OpenOptions;
            let file = Rc::new(OpenOptions::new().read(true).write(true).create(true).dma_open(&p).await?);
            file.pre_allocate(file_bytes, true).await?;
            let next = Rc::new(Cell::new(0u64));
            let start = Instant::now();
            let mut tasks = Vec::new();
            for _ in 0..qd {
                let (file, next) = (file.clone(), next.clone());
                tasks.push(glommio::spawn_local(async move {
                    let mut bytes = 0u64;
                    while start.elapsed() < length {
                        let block = next.get();
                        next.set(block + 1);
                        let pos = (block * bs) % (file_bytes - file_bytes % bs);
                        let mut buf = file.alloc_dma_buffer(bs as usize);
                        buf.as_bytes_mut().fill(block as u8);
                        file.write_at(buf, pos).await?;
                        bytes += bs;
                    }
                    Ok::<u64, glommio::GlommioError<()>>(bytes)
                }));
            }
            let mut total = 0;
            for t in tasks {
                total += t.await?;
            }
            file.fdatasync().await?;
            let elapsed = start.elapsed();
            Ok::<(u64, Duration), glommio::GlommioError<()>>((total, elapsed))
        })
        .map_err(|e| format!("iotune executor on core {core}: {e}"))?
        .join()
        .map_err(|e| format!("iotune: {e}"))?
        .map_err(|e| format!("writing {}: {e}", path.display()))?;
    let (bytes, elapsed) = written;
    let secs = elapsed.as_secs_f64();
    Ok(Step { block_bytes: bs, queue_depth: qd, mb_per_s: bytes as f64 / secs / 1e6, iops: (bytes / bs) as f64 / secs })
}

/// Makes sure every block of the file has been written (short runs on
/// fast disks may not have cycled through it).
fn ensure_filled(path: &Path, file_bytes: u64) -> Result<(), String> {
    use std::io::Write;
    let len = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?.len();
    if len >= file_bytes {
        return Ok(());
    }
    let mut f = std::fs::OpenOptions::new().append(true).open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let chunk = vec![0x77u8; 1 << 20];
    let mut at = len;
    while at < file_bytes {
        f.write_all(&chunk).map_err(|e| format!("{}: {e}", path.display()))?;
        at += chunk.len() as u64;
    }
    f.sync_data().map_err(|e| format!("{}: {e}", path.display()))
}

/// O_DIRECT `pread`s of `bs` from `qd` threads, sequential (cycling) or at
/// random aligned offsets.
fn direct_read(path: &Path, bs: u64, qd: u64, file_bytes: u64, length: Duration, random: bool) -> Result<Step, String> {
    let file = Arc::new(
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)
            .map_err(|e| format!("{}: {e}", path.display()))?,
    );
    let next = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let blocks = file_bytes / bs;
    let start = Instant::now();
    let threads: Vec<_> = (0..qd)
        .map(|t| {
            let (file, next, stop) = (file.clone(), next.clone(), stop.clone());
            std::thread::spawn(move || -> std::io::Result<u64> {
                let align = 4096usize;
                let mut raw = vec![0u8; bs as usize + align];
                let at = raw.as_ptr().align_offset(align);
                let buf = &mut raw[at..at + bs as usize];
                let mut rng = crate::bench::schedule::SplitMix::new(0x10 + t);
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let block =
                        if random { rng.next_u64() % blocks } else { next.fetch_add(1, Ordering::Relaxed) % blocks };
                    file.read_exact_at(buf, block * bs)?;
                    n += 1;
                }
                Ok(n)
            })
        })
        .collect();
    std::thread::sleep(length);
    stop.store(true, Ordering::Relaxed);
    let mut ios = 0;
    for t in threads {
        ios += t
            .join()
            .map_err(|_| "a read thread panicked".to_string())?
            .map_err(|e| format!("reading {}: {e}", path.display()))?;
    }
    let secs = start.elapsed().as_secs_f64();
    Ok(Step { block_bytes: bs, queue_depth: qd, mb_per_s: (ios * bs) as f64 / secs / 1e6, iops: ios as f64 / secs })
}

/// Appends a second in the paced append measurement: the rate of the
/// smallest latency target (`perf/latency-targets.sh`).
const APPEND_RATE: u64 = 5_000;
/// A 1 KiB record in a batch of its own, as the benchmark sends it.
const APPEND_BYTES: u64 = 1024 + 70;
const APPEND_PREALLOCATE: u64 = 32 << 20;

/// 1 KiB appends made the way a partition's log makes them: each DMA write
/// covers the partly filled last block plus the new bytes, into a file
/// preallocated ahead without changing its size, one write in flight, paced
/// at `rate` a second from a fixed schedule. Each write's latency in µs.
fn append_latency(path: &Path, core: usize, length: Duration, rate: u64) -> Result<Histogram<u64>, String> {
    let p = path.with_extension("append");
    let p2 = p.clone();
    let result = glommio::LocalExecutorBuilder::new(glommio::Placement::Fixed(core))
        .name("iotune-append")
        .spawn(move || async move {
            use glommio::io::OpenOptions;
            let file = OpenOptions::new().read(true).write(true).create(true).truncate(true).dma_open(&p2).await?;
            let align = file.alignment();
            let mut allocated = APPEND_PREALLOCATE;
            file.pre_allocate(allocated, true).await?;
            let mut h = crate::bench::measure::histogram();
            let interval = Duration::from_secs_f64(1.0 / rate.max(1) as f64);
            let start = Instant::now();
            let mut due = start;
            let mut size = 0u64;
            while start.elapsed() < length {
                let now = Instant::now();
                if due > now {
                    glommio::timer::sleep(due - now).await;
                }
                due += interval;
                let pos = size / align * align;
                let end = size + APPEND_BYTES;
                let len = (end - pos).div_ceil(align) * align;
                if pos + len > allocated {
                    allocated += APPEND_PREALLOCATE;
                    file.pre_allocate(allocated, true).await?;
                }
                let mut buf = file.alloc_dma_buffer(len as usize);
                buf.as_bytes_mut().fill(size as u8);
                let t = Instant::now();
                file.write_at(buf, pos).await?;
                crate::bench::measure::record(&mut h, t.elapsed().as_micros() as u64, 1);
                size = end;
            }
            file.close().await?;
            Ok::<Histogram<u64>, glommio::GlommioError<()>>(h)
        })
        .map_err(|e| format!("iotune executor on core {core}: {e}"))?
        .join()
        .map_err(|e| format!("iotune: {e}"))?;
    let _ = std::fs::remove_file(&p);
    result.map_err(|e| format!("paced appends to {}: {e}", p.display()))
}

/// 4 KiB appends, each followed by `fdatasync`; the sync's latency in µs.
fn fsync_latency(path: &Path, core: usize, length: Duration) -> Result<Histogram<u64>, String> {
    let p = path.with_extension("sync");
    let p2 = p.clone();
    let result = glommio::LocalExecutorBuilder::new(glommio::Placement::Fixed(core))
        .name("iotune-sync")
        .spawn(move || async move {
            use glommio::io::OpenOptions;
            let file = OpenOptions::new().read(true).write(true).create(true).dma_open(&p2).await?;
            let mut h = crate::bench::measure::histogram();
            let start = Instant::now();
            let mut pos = 0u64;
            while start.elapsed() < length {
                let mut buf = file.alloc_dma_buffer(4096);
                buf.as_bytes_mut().fill(pos as u8);
                file.write_at(buf, pos).await?;
                let t = Instant::now();
                file.fdatasync().await?;
                crate::bench::measure::record(&mut h, t.elapsed().as_micros() as u64, 1);
                pos += 4096;
            }
            file.close().await?;
            Ok::<Histogram<u64>, glommio::GlommioError<()>>(h)
        })
        .map_err(|e| format!("iotune executor on core {core}: {e}"))?
        .join()
        .map_err(|e| format!("iotune: {e}"))?;
    let _ = std::fs::remove_file(&p);
    result.map_err(|e| format!("fdatasync on {}: {e}", p.display()))
}
