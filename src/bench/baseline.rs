//! `shardlog bench baseline`: what this machine does without a broker in
//! the way, measured the way the broker would use it, so every bench
//! figure can be quoted as a ratio.
//!
//! - raw loopback TCP: one pinned thread writes 1 MiB chunks, another on a
//!   second core reads and discards them;
//! - raw DMA write: sequential aligned O_DIRECT writes of 1 MiB through
//!   glommio on the broker's core, into the directory the broker uses, with
//!   the closing fdatasync inside the timing.
//!
//! Each is repeated and the median kept; the machine is shared and noisy.

use std::{
    io::{Read, Write},
    net::{TcpListener, TcpStream},
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use clap::Args;
use serde_json::json;

use super::{produce::pin, report};

#[derive(Args, Debug, Clone)]
pub struct BaselineArgs {
    /// A directory on the disk the broker writes to.
    #[arg(long, default_value = "./data")]
    pub dir: PathBuf,
    /// The broker's core (the TCP reader and the DMA writer run here).
    #[arg(long, default_value_t = 0)]
    pub server_core: usize,
    /// The load generator's core (the TCP writer runs here).
    #[arg(long, default_value_t = 1)]
    pub client_core: usize,
    /// Seconds per TCP repetition.
    #[arg(long, default_value_t = 3.0)]
    pub seconds: f64,
    /// Bytes per DMA repetition.
    #[arg(long, default_value_t = 1 << 30)]
    pub dma_bytes: u64,
    #[arg(long, default_value_t = 3)]
    pub repetitions: usize,
    #[arg(long, default_value = "bench-results")]
    pub output: PathBuf,
}

const CHUNK: usize = 1 << 20;

pub fn run(a: &BaselineArgs) -> Result<(), String> {
    std::fs::create_dir_all(&a.output).map_err(|e| format!("{}: {e}", a.output.display()))?;
    std::fs::create_dir_all(&a.dir).map_err(|e| format!("{}: {e}", a.dir.display()))?;
    let reps = a.repetitions.max(1);
    let mut tcp = Vec::new();
    let mut dma = Vec::new();
    for i in 1..=reps {
        let t = loopback_tcp(a.server_core, a.client_core, Duration::from_secs_f64(a.seconds))?;
        eprintln!("baseline {i}/{reps}: raw loopback TCP {t:.0} MB/s");
        tcp.push(t);
        let d = dma_write(&a.dir, a.server_core, a.dma_bytes)?;
        eprintln!("baseline {i}/{reps}: raw DMA write {d:.0} MB/s");
        dma.push(d);
    }
    let (tcp_median, dma_median) = (median(tcp.clone()), median(dma.clone()));
    println!("raw loopback TCP: {tcp_median:.0} MB/s (median of {reps})");
    println!("raw DMA write:    {dma_median:.0} MB/s (median of {reps}, {} MiB each, 1 MiB writes)", a.dma_bytes >> 20);
    let v = json!({
        "tool": "shardlog bench baseline",
        "machine": report::machine(),
        "commit": report::commit(),
        "parameters": {
            "dir": a.dir, "server_core": a.server_core, "client_core": a.client_core,
            "tcp_seconds": a.seconds, "dma_bytes": a.dma_bytes, "chunk_bytes": CHUNK, "repetitions": reps,
        },
        "raw_loopback_tcp_mb_per_s": tcp_median,
        "raw_dma_write_mb_per_s": dma_median,
        "runs": { "tcp": tcp, "dma": dma },
    });
    let path = a.output.join("baseline.json");
    std::fs::write(&path, serde_json::to_string_pretty(&v).map_err(|e| e.to_string())? + "\n")
        .map_err(|e| format!("{}: {e}", path.display()))?;
    eprintln!("results: {}", path.display());
    Ok(())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn loopback_tcp(server_core: usize, client_core: usize, length: Duration) -> Result<f64, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("loopback listener: {e}"))?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let reader = std::thread::spawn(move || -> std::io::Result<u64> {
        pin(Some(server_core));
        let (mut s, _) = listener.accept()?;
        let mut buf = vec![0u8; CHUNK];
        let mut total = 0u64;
        loop {
            match s.read(&mut buf)? {
                0 => return Ok(total),
                n => total += n as u64,
            }
        }
    });
    let writer = std::thread::spawn(move || -> std::io::Result<(u64, Duration)> {
        pin(Some(client_core));
        let mut s = TcpStream::connect(addr)?;
        let buf = vec![0x5au8; CHUNK];
        let start = Instant::now();
        let mut sent = 0u64;
        while start.elapsed() < length {
            s.write_all(&buf)?;
            sent += CHUNK as u64;
        }
        s.shutdown(std::net::Shutdown::Write)?;
        Ok((sent, start.elapsed()))
    });
    let (sent, _) = writer.join().map_err(|_| "TCP writer panicked")?.map_err(|e| format!("loopback TCP: {e}"))?;
    let start_wait = Instant::now();
    let received = reader.join().map_err(|_| "TCP reader panicked")?.map_err(|e| format!("loopback TCP: {e}"))?;
    if received != sent {
        return Err(format!("loopback TCP: {sent} bytes sent, {received} received"));
    }
    // Count until the reader has everything, not until the writer's buffer took it.
    let elapsed = length.as_secs_f64() + start_wait.elapsed().as_secs_f64();
    Ok(sent as f64 / elapsed / 1e6)
}

fn dma_write(dir: &Path, core: usize, total: u64) -> Result<f64, String> {
    let path = dir.join(format!("shardlog-baseline-{}.bin", std::process::id()));
    let p = path.clone();
    let result = glommio::LocalExecutorBuilder::new(glommio::Placement::Fixed(core))
        .name("baseline-dma")
        .spawn(move || async move {
            use glommio::io::OpenOptions;
            let file = OpenOptions::new().read(true).write(true).create_new(true).dma_open(&p).await?;
            let step = 64u64 << 20;
            let mut allocated = 0;
            let start = Instant::now();
            let mut pos = 0u64;
            while pos < total {
                if pos + CHUNK as u64 > allocated {
                    allocated += step;
                    file.pre_allocate(allocated, true).await?;
                }
                let mut buf = file.alloc_dma_buffer(CHUNK);
                buf.as_bytes_mut().fill((pos >> 20) as u8);
                file.write_at(buf, pos).await?;
                pos += CHUNK as u64;
            }
            file.fdatasync().await?;
            let elapsed = start.elapsed();
            file.close().await?;
            Ok::<f64, glommio::GlommioError<()>>(pos as f64 / elapsed.as_secs_f64() / 1e6)
        })
        .map_err(|e| format!("DMA baseline executor on core {core}: {e}"))?
        .join()
        .map_err(|e| format!("DMA baseline: {e}"))?;
    let _ = std::fs::remove_file(&path);
    result.map_err(|e| format!("DMA write to {}: {e}", path.display()))
}
