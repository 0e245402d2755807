//! The `shardlog` command line. Only this layer parses arguments, installs
//! the logger and starts executors.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::{
    protocol::record_batch::BatchHeader,
    storage::{Clock, Faults, LogConfig, PartitionLog, PartitionName},
};

#[derive(Parser, Debug)]
#[command(name = "shardlog", version, about = "Kafka-compatible broker, thread-per-core on io_uring")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Inspect a partition log directory.
    #[command(subcommand)]
    Log(LogCommand),
}

#[derive(Subcommand, Debug)]
pub enum LogCommand {
    /// Open (and so recover) a partition directory and summarise it: segments,
    /// offsets, and anything recovery had to cut.
    Check {
        /// The partition directory (holds 00000000000000000000.log, …).
        dir: PathBuf,
    },
    /// Print one line per record batch: offsets, size, timestamps, producer.
    Dump {
        dir: PathBuf,
        /// First offset to print.
        #[arg(long, default_value_t = 0)]
        from: i64,
        /// Stop after this many batches.
        #[arg(long, default_value_t = 1000)]
        limit: usize,
    },
}

/// Runs the parsed command; returns the process exit code.
pub fn run(cli: Cli) -> i32 {
    init_logger();
    let result = match cli.command {
        Command::Log(cmd) => run_log_command(cmd),
    };
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("shardlog: {e}");
            1
        }
    }
}

fn partition_name(dir: &std::path::Path) -> PartitionName {
    PartitionName(dir.file_name().map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into_owned()))
}

fn run_log_command(cmd: LogCommand) -> Result<(), String> {
    glommio::LocalExecutorBuilder::default()
        .spawn(move || async move {
            match cmd {
                LogCommand::Check { dir } => check(dir).await,
                LogCommand::Dump { dir, from, limit } => dump(dir, from, limit).await,
            }
        })
        .map_err(|e| format!("cannot start an executor: {e}"))?
        .join()
        .map_err(|e| format!("executor failed: {e:?}"))?
}

async fn check(dir: PathBuf) -> Result<(), String> {
    if !dir.is_dir() {
        return Err(format!("{} is not a directory", dir.display()));
    }
    let (log, report) =
        PartitionLog::open(&dir, partition_name(&dir), LogConfig::default(), Clock::System, Faults::default())
            .await
            .map_err(|e| e.to_string())?;
    println!("partition {}: offsets [{}, {}), {} bytes", log.name(), log.log_start(), log.log_end(), log.size_bytes());
    for (base, size) in log.segments() {
        println!("  segment {base:020}.log  {size} bytes");
    }
    println!(
        "recovery: {} segments, {} batches walked, {} bytes verified by CRC, {} cut(s)",
        report.segments,
        report.batches_scanned,
        report.bytes_verified,
        report.cuts.len()
    );
    for cut in &report.cuts {
        println!("  cut {} bytes of {} at byte {}: {}", cut.bytes, cut.file.display(), cut.position, cut.reason);
    }
    log.close().await.map_err(|e| e.to_string())
}

async fn dump(dir: PathBuf, from: i64, limit: usize) -> Result<(), String> {
    let (log, _) =
        PartitionLog::open(&dir, partition_name(&dir), LogConfig::default(), Clock::System, Faults::default())
            .await
            .map_err(|e| e.to_string())?;
    let mut offset = from.max(log.log_start());
    let mut printed = 0;
    while offset < log.log_end() && printed < limit {
        let slice = log.read(offset, 1 << 20).await.map_err(|e| e.to_string())?;
        let bytes = slice.to_vec();
        let mut at = 0;
        while at < bytes.len() && printed < limit {
            let h = BatchHeader::parse(&bytes[at..], crate::limits::BATCH_BYTES_MAX).map_err(|e| e.to_string())?;
            println!(
                "offset {}..={} records {} bytes {} max_timestamp {} producer {} epoch {} sequence {}",
                h.base_offset,
                h.last_offset(),
                h.records_count,
                h.total_bytes(),
                h.max_timestamp,
                h.producer_id,
                h.producer_epoch,
                h.base_sequence
            );
            at += h.total_bytes();
            offset = h.last_offset() + 1;
            printed += 1;
        }
    }
    log.close().await.map_err(|e| e.to_string())
}

/// Log lines go to stderr as `LEVEL target: message`; `SHARDLOG_LOG=debug`
/// shows more.
fn init_logger() {
    struct Stderr;
    impl log::Log for Stderr {
        fn enabled(&self, m: &log::Metadata<'_>) -> bool {
            m.level() <= log::max_level()
        }
        fn log(&self, r: &log::Record<'_>) {
            if self.enabled(r.metadata()) {
                eprintln!("{:5} {}: {}", r.level(), r.target(), r.args());
            }
        }
        fn flush(&self) {}
    }
    let level = match std::env::var("SHARDLOG_LOG").as_deref() {
        Ok("debug") => log::LevelFilter::Debug,
        Ok("trace") => log::LevelFilter::Trace,
        Ok("warn") => log::LevelFilter::Warn,
        _ => log::LevelFilter::Info,
    };
    if log::set_logger(&Stderr).is_ok() {
        log::set_max_level(level);
    }
}
