//! The `shardlog` command line. Only this layer parses arguments, installs
//! the logger and starts executors.

mod groups;
mod offsets;
mod topics;
mod txn;
mod users;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::{
    protocol::record_batch::BatchHeader,
    storage::{Clock, Faults, LogConfig, PartitionLog, PartitionName},
};

/// The client id the command-line tools' requests carry.
const CLIENT_ID: &str = "shardlog-cli";

#[derive(Parser, Debug)]
#[command(
    name = "shardlog",
    version = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("SHARDLOG_COMMIT"), ")"),
    about = "Kafka-compatible broker, thread-per-core on io_uring"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the broker. With no flags: data in ./data, 127.0.0.1:9092, one
    /// shard per core.
    Serve(ServeArgs),
    /// Inspect a partition log directory.
    #[command(subcommand)]
    Log(LogCommand),
    /// Read the committed offsets stored in `__consumer_offsets`.
    #[command(subcommand)]
    Offsets(OffsetsCommand),
    /// Consumer groups of a running broker.
    #[command(subcommand)]
    Groups(GroupsCommand),
    /// Transactions of a running broker (ListTransactions,
    /// DescribeTransactions).
    #[command(subcommand)]
    Txn(TxnCommand),
    /// Topics over the Kafka protocol: list, create, describe, alter, delete.
    #[command(subcommand)]
    Topics(TopicsCommand),
    /// Open-loop latency benchmark for any Kafka-compatible broker.
    #[command(subcommand)]
    Bench(crate::bench::BenchCommand),
    /// Check (and apply) the OS settings that matter on bare metal.
    /// Exit code: 0 as recommended, 2 settings differ, 3 blocking, 1 error.
    #[command(subcommand)]
    Tune(crate::tune::TuneCommand),
    /// Measure the disk the way the broker uses it; write io-properties.toml.
    Iotune(crate::iotune::IotuneArgs),
    /// Capacity-planning report (HTML and Markdown) from measured results.
    Plan(crate::plan::PlanArgs),
    /// SASL/SCRAM users of a data directory, offline (the first user).
    #[command(subcommand)]
    Users(users::UsersCommand),
}

#[derive(Subcommand, Debug)]
pub enum OffsetsCommand {
    /// Print every record of `__consumer_offsets`, one per line, read from
    /// the segment files (read-only; works beside a running broker).
    Dump {
        #[arg(long, default_value = "./data")]
        data_dir: PathBuf,
        /// `__consumer_offsets`, or `__transaction_state` for the
        /// transaction coordinator's records.
        #[arg(long, default_value = crate::groups::OFFSETS_TOPIC)]
        topic: String,
        /// Only this group's records.
        #[arg(long)]
        group: Option<String>,
        /// Kafka's JSON formatter shape instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum TopicsCommand {
    /// Every topic with its partition count.
    List {
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap: String,
    },
    /// Create topics.
    Create {
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap: String,
        #[arg(required = true)]
        names: Vec<String>,
        /// Partitions (-1: the broker's default).
        #[arg(short = 'p', long, default_value_t = -1)]
        partitions: i32,
        /// Replication factor (-1: the broker's default).
        #[arg(short = 'r', long, default_value_t = -1)]
        replicas: i16,
        /// A topic config, KEY=VALUE (repeatable).
        #[arg(short = 'c', long = "config", value_parser = topics::parse_config)]
        configs: Vec<(String, String)>,
    },
    /// Partitions (leader, log start, high watermark) and configs.
    Describe {
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap: String,
        name: String,
        /// Every config, defaults too (default: the ones set on the topic).
        #[arg(long)]
        all_configs: bool,
        #[arg(long)]
        json: bool,
    },
    /// Add partitions and set or delete configs.
    Alter {
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap: String,
        name: String,
        /// Grow the topic to this many partitions.
        #[arg(short = 'p', long)]
        partitions: Option<i32>,
        /// Set a config, KEY=VALUE (repeatable).
        #[arg(long = "set", value_parser = topics::parse_config)]
        set: Vec<(String, String)>,
        /// Delete a config back to its default (repeatable).
        #[arg(long = "delete")]
        unset: Vec<String>,
    },
    /// Delete topics.
    Delete {
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap: String,
        #[arg(required = true)]
        names: Vec<String>,
    },
}

#[derive(Subcommand, Debug)]
pub enum GroupsCommand {
    /// Every group the broker coordinates, with its state.
    List {
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap: String,
    },
    /// Members, assignments, committed offsets and lag per partition.
    Describe {
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap: String,
        /// One group; all groups when absent.
        #[arg(long)]
        group: Option<String>,
    },
}

#[derive(Subcommand, Debug)]
pub enum TxnCommand {
    /// Every transactional id with its producer id and state.
    List {
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap: String,
    },
    /// State, producer, timeout, start time and partitions of each open
    /// or finished transaction.
    Describe {
        #[arg(long, default_value = "127.0.0.1:9092")]
        bootstrap: String,
        /// One transactional id; all of them when absent.
        #[arg(long)]
        transactional_id: Option<String>,
    },
}

#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// TOML file with any of the settings below (flags override it).
    #[arg(long)]
    pub config: Option<PathBuf>,
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// HOST:PORT of the PLAINTEXT listener (default 127.0.0.1:9092 when no
    /// --listener is given).
    #[arg(long)]
    pub listen: Option<String>,
    /// HOST:PORT that Metadata tells clients of --listen (defaults to it).
    #[arg(long)]
    pub advertise: Option<String>,
    /// A listener, NAME=PROTO://HOST:PORT with PROTO one of PLAINTEXT, SSL,
    /// SASL_PLAINTEXT, SASL_SSL (repeatable; replaces [[listeners]]).
    #[arg(long = "listener", value_name = "NAME=PROTO://HOST:PORT")]
    pub listeners: Vec<String>,
    /// Number of shards (pinned cores).
    #[arg(long)]
    pub cores: Option<usize>,
    /// Cores to pin shards to, e.g. 0-3 or 1,3.
    #[arg(long)]
    pub cpuset: Option<String>,
    /// HOST:PORT for Prometheus /metrics (default 127.0.0.1:9644; "" disables).
    #[arg(long)]
    pub metrics_listen: Option<String>,
    /// Disk profile from `shardlog iotune` (io-properties.toml).
    #[arg(long)]
    pub io_properties: Option<PathBuf>,
    /// Bytes of each active segment zeroed ahead of its appends (default
    /// 1 MiB; 0 turns it off): appends then overwrite written blocks
    /// instead of extending the file.
    #[arg(long)]
    pub zero_ahead_bytes: Option<u64>,
    /// Milliseconds an append answered from the shard journal may wait for
    /// its segment write (default 10; 0 writes each append's segment before
    /// answering).
    #[arg(long)]
    pub write_behind_ms: Option<u64>,
    /// Bytes of each shard journal file (default 32 MiB; 0 turns the
    /// journal off and acks=all syncs each partition's segment instead).
    #[arg(long)]
    pub journal_file_bytes: Option<u64>,
    /// Whether the shard journal writes through the page cache (default
    /// true; false writes it with direct I/O). With write-behind, acks=1
    /// then waits for no device write.
    #[arg(long, num_args = 0..=1, default_missing_value = "true")]
    pub journal_page_cache: Option<bool>,
    /// Microseconds an idle shard polls before it parks (default 0).
    #[arg(long)]
    pub spin_before_park_us: Option<u64>,
    /// CPUs the kernel's io workers (each shard's fdatasyncs) run on, e.g.
    /// 2-3 (default: each shard's own core).
    #[arg(long)]
    pub io_workers_cpuset: Option<String>,
    /// Memory the broker may use, split over its shards, e.g. 2GiB or
    /// 512MiB (default: a quarter of the machine's). It covers requests in
    /// flight, partition state and the batch cache, which evicts to fit.
    #[arg(long)]
    pub memory: Option<String>,
    /// This broker's id (Kafka's node.id; default 0).
    #[arg(long)]
    pub node_id: Option<i32>,
    /// The metadata quorum: ID@HOST:PORT of every voter, comma-separated,
    /// this broker among them (its controller port). Absent: one broker alone.
    #[arg(long, value_name = "ID@HOST:PORT,...")]
    pub controller_quorum: Option<String>,
    /// This broker's rack (Kafka's broker.rack), told to clients in
    /// Metadata; with `replica_selector = "rack-aware"` consumers whose
    /// client.rack matches read from this broker's copies.
    #[arg(long)]
    pub broker_rack: Option<String>,
}

impl ServeArgs {
    fn into_config(self) -> Result<crate::server::ServeConfig, String> {
        let mut c = match &self.config {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                crate::server::ServeConfig::from_toml(&text).map_err(|e| format!("{}: {e}", path.display()))?
            }
            None => crate::server::ServeConfig::default(),
        };
        if let Some(v) = self.data_dir {
            c.data_dir = v;
        }
        if let Some(v) = self.listen {
            c.listen = Some(v);
        }
        if !self.listeners.is_empty() {
            c.listeners = self
                .listeners
                .iter()
                .map(|l| crate::server::listeners::ListenerConfig::parse_flag(l))
                .collect::<Result<_, _>>()?;
        }
        if let Some(v) = self.advertise {
            c.advertise = Some(v);
        }
        if let Some(v) = self.cores {
            c.cores = Some(v);
        }
        if let Some(v) = self.cpuset {
            c.cpuset = Some(v);
        }
        if let Some(v) = self.metrics_listen {
            c.metrics_listen = v;
        }
        if let Some(v) = self.io_properties {
            c.io_properties = Some(v);
        }
        if let Some(v) = self.zero_ahead_bytes {
            c.zero_ahead_bytes = v;
        }
        if let Some(v) = self.write_behind_ms {
            c.write_behind_ms = v;
        }
        if let Some(v) = self.journal_file_bytes {
            c.journal_file_bytes = v;
        }
        if let Some(v) = self.journal_page_cache {
            c.journal_page_cache = v;
        }
        if let Some(v) = self.spin_before_park_us {
            c.spin_before_park_us = v;
        }
        if let Some(v) = self.io_workers_cpuset {
            c.io_workers_cpuset = Some(v);
        }
        if let Some(v) = self.memory {
            c.memory = Some(v);
        }
        if let Some(v) = self.node_id {
            c.node_id = v;
        }
        if let Some(v) = self.controller_quorum {
            c.controller_quorum = Some(v);
        }
        if let Some(v) = self.broker_rack {
            c.broker_rack = Some(v);
        }
        Ok(c)
    }
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
        Command::Serve(args) => args.into_config().and_then(crate::server::serve),
        Command::Log(cmd) => run_log_command(cmd),
        Command::Offsets(OffsetsCommand::Dump { data_dir, topic, group, json }) => {
            offsets::dump(&data_dir, &topic, group.as_deref(), json)
        }
        Command::Txn(TxnCommand::List { bootstrap }) => txn::list(&bootstrap),
        Command::Txn(TxnCommand::Describe { bootstrap, transactional_id }) => {
            txn::describe(&bootstrap, transactional_id.as_deref())
        }
        Command::Groups(GroupsCommand::List { bootstrap }) => groups::list(&bootstrap),
        Command::Groups(GroupsCommand::Describe { bootstrap, group }) => groups::describe(&bootstrap, group.as_deref()),
        Command::Topics(cmd) => run_topics(cmd),
        Command::Bench(cmd) => crate::bench::run(cmd),
        Command::Iotune(args) => crate::iotune::run(&args),
        Command::Plan(args) => crate::plan::run(&args),
        Command::Users(cmd) => users::run(cmd),
        Command::Tune(cmd) => {
            return match crate::tune::run(cmd) {
                Ok(code) => code,
                Err(e) => {
                    say_error(&e.to_string());
                    1
                }
            }
        }
    };
    match result {
        Ok(()) => 0,
        Err(e) => {
            say_error(&e);
            1
        }
    }
}

/// Writes `line` to stderr, ignoring a failed write. Never `eprintln!`: it
/// panics when the write fails, and stderr is often a file on the data
/// disk, which is full exactly when the broker has the most to say.
fn say_error(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "shardlog: {line}");
}

fn partition_name(dir: &std::path::Path) -> PartitionName {
    PartitionName(dir.file_name().map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into_owned()))
}

/// The log settings of the partition in `dir`, from the topic table beside
/// it when there is one: a compacted topic's segments have offset gaps,
/// which recovery with the default settings would take for damage and cut.
fn config_for(dir: &std::path::Path) -> LogConfig {
    let Some(parent) = dir.parent() else { return LogConfig::default() };
    let name = partition_name(dir).0;
    let Some((topic, _)) = name.rsplit_once('-') else { return LogConfig::default() };
    match crate::shard::topics::TopicTable::load(parent) {
        Ok(table) => table
            .topics
            .get(topic)
            .and_then(|meta| crate::shard::topics::log_config(&meta.configs).ok())
            .unwrap_or_default(),
        Err(_) => LogConfig::default(),
    }
}

fn run_log_command(cmd: LogCommand) -> Result<(), String> {
    // Opening a log recovers it, which may write: never beside a running
    // broker. Held until the command ends.
    let dir = match &cmd {
        LogCommand::Check { dir } | LogCommand::Dump { dir, .. } => dir.clone(),
    };
    let _lock = match dir.parent().map(|p| p.join(".lock")).filter(|l| l.exists()) {
        Some(lock) => {
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(&lock)
                .map_err(|e| format!("cannot open {}: {e}", lock.display()))?;
            f.try_lock().map_err(|_| format!("{} belongs to a running broker; stop it first", dir.display()))?;
            Some(f)
        }
        None => None,
    };
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
        PartitionLog::open(&dir, partition_name(&dir), config_for(&dir), Clock::System, Faults::default())
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
    let (log, _) = PartitionLog::open(&dir, partition_name(&dir), config_for(&dir), Clock::System, Faults::default())
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
            // Not `eprintln!`, for the reason `say_error` gives: a lost log
            // line is the lesser harm.
            if self.enabled(r.metadata()) {
                use std::io::Write;
                let _ = writeln!(std::io::stderr().lock(), "{:5} {}: {}", r.level(), r.target(), r.args());
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

fn run_topics(cmd: TopicsCommand) -> Result<(), String> {
    match cmd {
        TopicsCommand::List { bootstrap } => topics::list(&bootstrap),
        TopicsCommand::Create { bootstrap, names, partitions, replicas, configs } => {
            topics::create(&bootstrap, &names, partitions, replicas, &configs)
        }
        TopicsCommand::Describe { bootstrap, name, all_configs, json } => {
            topics::describe(&bootstrap, &name, all_configs, json)
        }
        TopicsCommand::Alter { bootstrap, name, partitions, set, unset } => {
            topics::alter(&bootstrap, &name, partitions, &set, &unset)
        }
        TopicsCommand::Delete { bootstrap, names } => topics::delete(&bootstrap, &names),
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::{Cli, Command};

    fn serve(flags: &[&str]) -> crate::server::ServeConfig {
        let cli = Cli::try_parse_from(["shardlog", "serve"].iter().chain(flags)).expect("the flags parse");
        let Command::Serve(args) = cli.command else { panic!("not serve") };
        args.into_config().expect("a config")
    }

    #[test]
    fn write_behind_and_the_page_cache_journal_are_on_unless_turned_off() {
        let d = serve(&[]);
        assert!(d.journal_page_cache && d.write_behind_ms > 0, "{d:?}");
        assert!(serve(&["--journal-page-cache"]).journal_page_cache);
        assert!(!serve(&["--journal-page-cache", "false"]).journal_page_cache);
        assert!(!serve(&["--journal-page-cache=false"]).journal_page_cache);
        assert_eq!(serve(&["--write-behind-ms", "0"]).write_behind_ms, 0);
    }
}
