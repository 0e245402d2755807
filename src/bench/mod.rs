//! `shardlog bench`: an open-loop, coordinated-omission-free latency
//! benchmark for any Kafka-compatible broker.
//!
//! - `schedule` fixes every record's intended send time from the rate alone;
//! - `payload` stamps records and builds batches once per request;
//! - `produce` / `consume` drive the broker over plain sockets with our own
//!   protocol code (`rdkafka` runs the same workload through librdkafka);
//! - `measure` keeps the histograms and counts, `report` prints and plots.
//!
//! Latency is always measured from the intended send time; service time
//! (actual send → acknowledgement) is reported beside it. A run whose
//! records were not all acknowledged (and, end to end, received exactly
//! once and in order) is reported as failed, without figures.

pub mod baseline;
pub mod cluster;
pub mod consume;
pub mod engine;
pub mod measure;
pub mod null_broker;
mod outcome;
pub mod payload;
pub mod plot;
pub mod produce;
#[cfg(feature = "rdkafka-client")]
pub mod rdkafka;
pub mod report;
pub mod schedule;
mod transactional;
#[cfg(feature = "rdkafka-client")]
pub mod txn;
pub mod txn_session;

use std::{
    path::PathBuf,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use clap::{Args, Subcommand, ValueEnum};
use serde_json::{json, Value};

pub use outcome::{generator_cpu_since, process_cpu_seconds, Outcome};
use report::{percentiles_json, Progress, Tick};

#[derive(Subcommand, Debug, Clone)]
pub enum BenchCommand {
    /// Produce at a fixed rate; latency from intended send time to acknowledgement.
    Produce(BenchArgs),
    /// Read the topic from its start to its current end as fast as possible.
    Consume(BenchArgs),
    /// Produce and consume at once; latency from intended send time to receipt.
    E2e(BenchArgs),
    /// Produce at increasing rates up to --rate; latency against throughput, saturation marked.
    Sweep(BenchArgs),
    /// Raw loopback TCP and raw DMA write throughput of this machine, the baselines for ratios.
    Baseline(baseline::BaselineArgs),
    /// A broker that only answers (Produce acked at once, Fetch from memory): the floor of bench's latency.
    NullBroker(null_broker::NullBrokerArgs),
}

#[derive(Args, Debug, Clone)]
pub struct BenchArgs {
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub bootstrap: String,
    /// Connect over TLS (the bootstrap is an SSL listener), trusting the
    /// CA in --tls-ca; the native generator only.
    #[arg(long, requires = "tls_ca")]
    pub tls: bool,
    /// PEM file of the CA(s) that signed the broker's certificate.
    #[arg(long, value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
    #[arg(long, default_value = "shardlog-bench")]
    pub topic: String,
    /// Partitions of the topic (created if missing).
    #[arg(long, default_value_t = 16)]
    pub partitions: i32,
    #[arg(long, default_value_t = 1)]
    pub replication_factor: i16,
    /// A topic config for creating the topic, KEY=VALUE (repeatable), e.g.
    /// retention.bytes=268435456 so a long unthrottled run does not fill the disk.
    #[arg(long = "topic-config", value_parser = parse_config)]
    pub topic_configs: Vec<(String, String)>,
    /// Records a second, all partitions together; 0 = as fast as the broker acknowledges.
    #[arg(long, default_value_t = 10_000.0)]
    pub rate: f64,
    /// Poisson arrivals (exponential gaps) instead of evenly spaced ones.
    #[arg(long)]
    pub poisson: bool,
    /// Value bytes per record (at least 28, the stamp).
    #[arg(long, default_value_t = 1024)]
    pub record_size: usize,
    /// Measured length of the run (after the warm-up), e.g. 30s, 500ms, 2m.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Load before measuring starts (sent, validated, not in the histograms).
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub warmup: Duration,
    /// Directory for the JSON result and the SVG plots.
    #[arg(long, default_value = "bench-results")]
    pub output: PathBuf,
    /// File name stem of the results (default: from the workload).
    #[arg(long)]
    pub name: Option<String>,
    /// 0, 1 or all.
    #[arg(long, default_value = "1", value_parser = parse_acks)]
    pub acks: i16,
    /// Largest batch per partition per request.
    #[arg(long, default_value_t = 1 << 20)]
    pub batch_bytes: usize,
    /// Largest produce request (its partitions' batches together).
    #[arg(long, default_value_t = 4 << 20)]
    pub max_request_bytes: usize,
    /// How long a partition's first due record may wait for more to batch with.
    #[arg(long, default_value = "0ms", value_parser = parse_duration)]
    pub linger: Duration,
    /// Keyed records over this many keys (Kafka's murmur2 partitioner); default unkeyed round-robin.
    #[arg(long)]
    pub keys: Option<u64>,
    /// Connections per partition leader, per load thread.
    #[arg(long, default_value_t = 1)]
    pub connections: usize,
    /// Unanswered produce requests allowed per connection.
    #[arg(long, default_value_t = 5)]
    pub max_in_flight: usize,
    /// Cores to pin the load to, one event loop per core (e.g. 1 or 2,3).
    #[arg(long, value_delimiter = ',')]
    pub cores: Vec<usize>,
    /// How long before each intended send time a load core stops sleeping
    /// and spins, so a parked thread's wake-up delay stays out of the
    /// schedule; 0 never spins (for a load core shared with other work).
    #[arg(long, default_value = "100us", value_parser = parse_duration)]
    pub spin: Duration,
    /// `rdkafka` runs the workload with our client and then through
    /// librdkafka, and prints both and their ratio.
    #[arg(long, value_enum, default_value_t = ClientKind::Native)]
    pub client: ClientKind,
    /// Produce: run the workload twice, without and with transactional
    /// producers (one per load core; librdkafka's with `--client rdkafka`),
    /// and compare them (a read_committed reader times both end to end).
    #[arg(long)]
    pub transactional: bool,
    /// How often the transactional producer commits (with --transactional).
    #[arg(long, default_value = "100ms", value_parser = parse_duration)]
    pub txn_interval: Duration,
    /// Fetch size per partition (consume, e2e).
    #[arg(long, default_value_t = 1 << 20)]
    pub fetch_bytes: i32,
    /// Sweep: number of rate steps from rate/steps up to rate.
    #[arg(long, default_value_t = 10)]
    pub steps: usize,
    /// Sweep: a step whose p99 exceeds this many ms counts as saturated.
    #[arg(long)]
    pub slo_p99_ms: Option<f64>,
    /// Authenticate every connection with SASL: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
    #[arg(long, requires_all = ["sasl_user", "sasl_password"])]
    pub sasl: Option<String>,
    #[arg(long)]
    pub sasl_user: Option<String>,
    #[arg(long)]
    pub sasl_password: Option<String>,
}

#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientKind {
    Native,
    Rdkafka,
}

pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = s.split_at(s.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(s.len()));
    let n: f64 = num.parse().map_err(|_| format!("{s:?} is not a duration like 30s, 500ms or 2m"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "" | "s" => n,
        "m" | "min" => n * 60.0,
        "us" | "µs" => n / 1e6,
        _ => return Err(format!("{s:?}: unknown unit {unit:?} (use ms, s or m)")),
    };
    if !(0.0..=86_400.0 * 7.0).contains(&secs) {
        return Err(format!("{s:?} is out of range"));
    }
    Ok(Duration::from_secs_f64(secs))
}

fn parse_config(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("{s:?}: expected KEY=VALUE, e.g. retention.bytes=268435456")),
    }
}

fn parse_acks(s: &str) -> Result<i16, String> {
    match s {
        "0" => Ok(0),
        "1" => Ok(1),
        "all" | "-1" => Ok(-1),
        _ => Err(format!("acks must be 0, 1 or all, not {s:?}")),
    }
}

/// One run's time base: the schedule's start, the wall clock at that
/// instant (payload stamps), and where measurement begins.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    pub start: Instant,
    start_wall_ns: i64,
    pub measure_from: Instant,
}

impl Clock {
    pub fn new(start: Instant, warmup: Duration) -> Self {
        let wall = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock after 1970").as_nanos() as i64;
        let now = Instant::now();
        let start_wall_ns =
            if start >= now { wall + (start - now).as_nanos() as i64 } else { wall - (now - start).as_nanos() as i64 };
        Self { start, start_wall_ns, measure_from: start + warmup }
    }

    pub fn wall_ns(&self, t: Instant) -> i64 {
        if t >= self.start {
            self.start_wall_ns + (t - self.start).as_nanos() as i64
        } else {
            self.start_wall_ns - (self.start - t).as_nanos() as i64
        }
    }

    pub fn wall_ms(&self, t: Instant) -> i64 {
        self.wall_ns(t) / 1_000_000
    }

    pub fn measure_from_ns(&self) -> i64 {
        self.wall_ns(self.measure_from)
    }
}

/// Everything a produce run needs.
#[derive(Debug, Clone)]
pub struct Workload {
    pub topic: String,
    pub partitions: i32,
    pub rate: f64,
    pub poisson: bool,
    pub record_size: usize,
    pub duration: Duration,
    pub warmup: Duration,
    pub acks: i16,
    pub batch_bytes: usize,
    pub max_request_bytes: usize,
    pub linger: Duration,
    pub keys: Option<u64>,
    pub connections: usize,
    pub max_in_flight: usize,
    pub cores: Vec<usize>,
    /// Distinguishes this run's records from earlier ones in the topic.
    pub run: u32,
    /// How long before a due instant the load core spins instead of sleeping.
    pub spin: Duration,
    /// Native transactional producers, committing this often.
    pub txn_interval: Option<Duration>,
    /// End to end, the reader fetches read_committed.
    pub read_committed: bool,
}

impl Workload {
    fn from_args(a: &BenchArgs) -> Result<Self, String> {
        if a.record_size < payload::STAMP_BYTES {
            return Err(format!("--record-size must be at least {} bytes (the stamp)", payload::STAMP_BYTES));
        }
        if a.partitions < 1 {
            return Err("--partitions must be at least 1".into());
        }
        if !(a.rate >= 0.0 && a.rate.is_finite()) {
            return Err("--rate must be 0 (unthrottled) or a positive number of records a second".into());
        }
        if a.duration.is_zero() {
            return Err("--duration must be positive".into());
        }
        let run = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock after 1970").subsec_nanos()
            ^ std::process::id().rotate_left(16);
        Ok(Self {
            topic: a.topic.clone(),
            partitions: a.partitions,
            rate: a.rate,
            poisson: a.poisson,
            record_size: a.record_size,
            duration: a.duration,
            warmup: a.warmup,
            acks: a.acks,
            batch_bytes: a.batch_bytes.max(64),
            max_request_bytes: a.max_request_bytes,
            linger: a.linger,
            keys: a.keys,
            connections: a.connections.max(1),
            max_in_flight: a.max_in_flight.max(1),
            cores: a.cores.clone(),
            run,
            spin: a.spin,
            txn_interval: None,
            read_committed: a.transactional,
        })
    }

    fn params(&self, a: &BenchArgs, mode: &str, client: &str) -> Value {
        json!({
            "mode": mode,
            "client": client,
            "bootstrap": a.bootstrap,
            "topic": self.topic,
            "partitions": self.partitions,
            "replication_factor": a.replication_factor,
            "topic_configs": a.topic_configs.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>(),
            "rate": self.rate,
            "arrivals": if self.poisson { "poisson" } else { "uniform" },
            "record_size": self.record_size,
            "duration_s": self.duration.as_secs_f64(),
            "warmup_s": self.warmup.as_secs_f64(),
            "acks": if self.acks == -1 { "all".to_string() } else { self.acks.to_string() },
            "batch_bytes": self.batch_bytes,
            "max_request_bytes": self.max_request_bytes,
            "linger_ms": self.linger.as_secs_f64() * 1000.0,
            "keys": self.keys,
            "connections": self.connections,
            "max_in_flight": self.max_in_flight,
            "cores": self.cores,
            "spin_us": self.spin.as_micros() as u64,
            "transactional": self.txn_interval.is_some(),
            "txn_interval_ms": self.txn_interval.map(|i| i.as_secs_f64() * 1000.0),
            "isolation": if self.read_committed { "read_committed" } else { "read_uncommitted" },
        })
    }
}

/// Runs one `shardlog bench` command; `Err` for a failed run.
pub fn run(cmd: BenchCommand) -> Result<(), String> {
    let (mode, args) = match &cmd {
        BenchCommand::Produce(a) => ("produce", a),
        BenchCommand::Consume(a) => ("consume", a),
        BenchCommand::E2e(a) => ("e2e", a),
        BenchCommand::Sweep(a) => ("sweep", a),
        BenchCommand::Baseline(a) => return baseline::run(a),
        BenchCommand::NullBroker(a) => return null_broker::run(a),
    };
    let w = Workload::from_args(args)?;
    if let (true, Some(ca)) = (args.tls, &args.tls_ca) {
        if args.client == ClientKind::Rdkafka {
            return Err("--tls is for the native generator (not --client rdkafka)".into());
        }
        crate::client::tls::use_for_all_connections(crate::client::tls::client_config(ca, None)?)?;
    }
    if let (Some(m), Some(user), Some(password)) = (&args.sasl, &args.sasl_user, &args.sasl_password) {
        let mechanism = crate::security::sasl::SaslMechanism::from_name(m)
            .ok_or_else(|| format!("--sasl {m:?}: expected PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"))?;
        let login = crate::client::sasl::SaslLogin { mechanism, user: user.clone(), password: password.clone() };
        crate::client::sasl::use_for_every_connection(login)?;
    }
    std::fs::create_dir_all(&args.output).map_err(|e| format!("{}: {e}", args.output.display()))?;
    let layout =
        cluster::prepare_topic(&args.bootstrap, &w.topic, w.partitions, args.replication_factor, &args.topic_configs)?;
    eprintln!(
        "bench {mode}: {} ({} partitions on {} broker(s)), {}, {} B records, acks={}, {} s + {} s warm-up",
        w.topic,
        w.partitions,
        layout.brokers.len(),
        if w.rate > 0.0 { format!("{} msg/s", w.rate) } else { "unthrottled".into() },
        w.record_size,
        if w.acks == -1 { "all".into() } else { w.acks.to_string() },
        w.duration.as_secs_f64(),
        w.warmup.as_secs_f64(),
    );
    let name = args.name.clone().unwrap_or_else(|| match mode {
        "consume" => format!("consume-{}", w.topic),
        _ => default_name(mode, &w),
    });
    if args.transactional {
        return match mode {
            "produce" => transactional::compare(&w, args, &layout, &name),
            _ => Err(format!("--transactional is for `bench produce`, not `bench {mode}`")),
        };
    }
    match mode {
        "produce" | "e2e" => {
            let e2e = mode == "e2e";
            let native = run_once(&w, &layout, e2e, "native")?;
            let mut result = native.json(&w, args, mode, "native");
            let mut ok = native.ok();
            native.print();
            if args.client == ClientKind::Rdkafka {
                let other = run_rdkafka(&w, args, e2e)?;
                other.print();
                let ratio = json!({
                    "throughput_native_over_rdkafka": native.throughput() / other.throughput().max(1e-9),
                    "p99_native_over_rdkafka": native.p99_ms() / other.p99_ms().max(1e-9),
                });
                eprintln!(
                    "native / librdkafka: throughput x{:.2}, p99 latency x{:.2}",
                    ratio["throughput_native_over_rdkafka"].as_f64().unwrap_or(0.0),
                    ratio["p99_native_over_rdkafka"].as_f64().unwrap_or(0.0)
                );
                result["rdkafka"] = other.json(&w, args, mode, "rdkafka");
                result["ratio"] = ratio;
                ok &= other.ok();
            }
            let json_path = args.output.join(format!("{name}.json"));
            write_json(&json_path, &result)?;
            if ok {
                let svg = args.output.join(format!("{name}.svg"));
                native.plot(&svg, &format!("{mode}: {}", describe(&w)))?;
                eprintln!("results: {} and {}", json_path.display(), svg.display());
                Ok(())
            } else {
                eprintln!("results: {}", json_path.display());
                Err(format!("run failed: {}", native.verdict()))
            }
        }
        "consume" => {
            let result = run_consume(&w, &layout, args)?;
            let json_path = args.output.join(format!("{name}.json"));
            write_json(&json_path, &result.0)?;
            eprintln!("results: {}", json_path.display());
            result.1
        }
        _ => run_sweep(&w, &layout, args, &name),
    }
}

fn default_name(mode: &str, w: &Workload) -> String {
    let acks = if w.acks == -1 { "all".to_string() } else { w.acks.to_string() };
    let rate = if w.rate > 0.0 { format!("{}", w.rate as u64) } else { "max".into() };
    format!("{mode}-{}B-acks{acks}-{rate}", w.record_size)
}

fn describe(w: &Workload) -> String {
    let acks = if w.acks == -1 { "all".to_string() } else { w.acks.to_string() };
    let rate = if w.rate > 0.0 { format!("{} msg/s", w.rate) } else { "unthrottled".into() };
    format!("{} partitions, {} B, acks={acks}, {rate}", w.partitions, w.record_size)
}

fn write_json(path: &std::path::Path, v: &Value) -> Result<(), String> {
    let text = serde_json::to_string_pretty(v).map_err(|e| e.to_string())?;
    std::fs::write(path, text + "\n").map_err(|e| format!("{}: {e}", path.display()))
}

/// One produce run (with a consumer for e2e), with live progress.
pub fn run_once(w: &Workload, layout: &cluster::Layout, e2e: bool, label: &str) -> Result<Outcome, String> {
    let (cpu_before, started) = (process_cpu_seconds(), Instant::now());
    let start = Instant::now() + Duration::from_millis(200);
    let clock = Clock::new(start, w.warmup);
    let (producer, mut jobs) = produce::plan(w, layout, clock)?;
    // End to end, the fetchers share the first load core's event loop.
    let consumer = if e2e {
        let from = cluster::offsets(layout, &w.topic, -1)?;
        let shape = consume::Shape { partition_max_bytes: 1 << 20, read_committed: w.read_committed };
        let (reader, fetchers) =
            consume::plan(&w.topic, layout, from, None, consume::Check::Stamps { run: w.run }, shape, clock)?;
        jobs[0].extend(fetchers);
        Some(reader)
    } else {
        None
    };
    let cores = engine::start(&w.cores, w.spin, jobs)?;
    let total = (w.warmup + w.duration).as_secs_f64();
    let mut progress = Progress::new();
    let what = format!("{label} {}", if e2e { "e2e" } else { "produce" });
    let mut next_tick = 1.0;
    while !producer.is_finished() {
        std::thread::sleep(Duration::from_millis(50));
        if producer.is_finished() || progress_elapsed(start) < next_tick {
            continue;
        }
        next_tick += 1.0;
        let c = producer.counts();
        let note = if Instant::now() < clock.measure_from { "(warm-up)" } else { "" };
        let p99 = consumer
            .as_ref()
            .map_or_else(|| c.so_far.value_at_quantile(0.99), |r| r.counts().so_far.value_at_quantile(0.99));
        progress.tick(Tick {
            what: &what,
            done_s: progress_elapsed(start),
            total_s: total,
            count: c.acked,
            bytes: c.acked_bytes,
            p99_us: (c.acked > 0).then_some(p99),
            note,
        });
    }
    progress.finish();
    let mut produce = producer.counts();
    let consume = match consumer {
        None => None,
        Some(r) => {
            // Wait for the consumer to see everything acknowledged (or give up).
            let deadline = Instant::now() + Duration::from_secs(15);
            loop {
                let c = r.counts();
                let seen: u64 =
                    produce.acked_by_stream.iter().map(|(k, n)| c.streams.get(k).map_or(0, |a| a.seen_below(*n))).sum();
                if seen >= produce.acked || Instant::now() > deadline || r.failed() || r.is_finished() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Some(r.stop())
        }
    };
    if let Err(e) = cores.join() {
        produce.failures.push(e);
    }
    let generator_cpu = generator_cpu_since(w, cpu_before, started);
    Ok(Outcome {
        produce,
        consume,
        window: w.duration,
        service_label: "service time",
        generator_cpu,
        warmup_s: w.warmup.as_secs_f64(),
    })
}

fn progress_elapsed(start: Instant) -> f64 {
    Instant::now().saturating_duration_since(start).as_secs_f64()
}

#[cfg(feature = "rdkafka-client")]
fn run_rdkafka(w: &Workload, a: &BenchArgs, e2e: bool) -> Result<Outcome, String> {
    if e2e {
        return Err("--client rdkafka drives produce only; e2e through librdkafka is not built yet".into());
    }
    rdkafka::run(w, &a.bootstrap)
}

#[cfg(not(feature = "rdkafka-client"))]
fn run_rdkafka(_: &Workload, _: &BenchArgs, _: bool) -> Result<Outcome, String> {
    Err("this shardlog was built without librdkafka: rebuild with `--features rdkafka-client` for --client rdkafka"
        .into())
}

fn run_consume(w: &Workload, layout: &cluster::Layout, a: &BenchArgs) -> Result<(Value, Result<(), String>), String> {
    let from = cluster::offsets(layout, &w.topic, -2)?;
    let to = cluster::offsets(layout, &w.topic, -1)?;
    let expected: i64 = to.iter().map(|(p, end)| end - from.get(p).copied().unwrap_or(0)).sum();
    if expected == 0 {
        return Err(format!("topic {} is empty: produce to it first (shardlog bench produce)", w.topic));
    }
    let start = Instant::now();
    let clock = Clock::new(start, Duration::ZERO);
    let shape = consume::Shape { partition_max_bytes: a.fetch_bytes, read_committed: false };
    let (reader, jobs) = consume::plan(&w.topic, layout, from, Some(to), consume::Check::Offsets, shape, clock)?;
    let cores = engine::start(&w.cores, w.spin, vec![jobs])?;
    let mut progress = Progress::new();
    let limit = w.duration.as_secs_f64();
    while !reader.caught_up() && !reader.failed() && progress_elapsed(start) < limit {
        std::thread::sleep(Duration::from_millis(200));
        let c = reader.counts();
        if progress_elapsed(start) >= 1.0 {
            progress.tick(Tick {
                what: "consume",
                done_s: (c.received as f64 / expected as f64) * limit,
                total_s: limit,
                count: c.received,
                bytes: c.received_bytes,
                p99_us: None,
                note: "",
            });
        }
    }
    progress.finish();
    let elapsed = progress_elapsed(start);
    let mut c = reader.stop();
    if let Err(e) = cores.join() {
        c.failures.push(e);
    }
    let lost = (expected as u64).saturating_sub(c.received - c.duplicated);
    let ok = c.failures.is_empty() && c.duplicated == 0 && lost == 0;
    let verdict = format!(
        "{expected} records in the topic, {} received, {lost} missing, {} duplicated{}",
        c.received,
        c.duplicated,
        c.failures.iter().map(|f| format!("; {f}")).collect::<String>()
    );
    eprintln!("{verdict}");
    let mut v = json!({
        "tool": "shardlog bench",
        "status": if ok { "ok" } else { "failed" },
        "validation": verdict,
        "parameters": w.params(a, "consume", "native"),
        "machine": report::machine(),
        "commit": report::commit(),
    });
    if ok {
        let rate = c.received as f64 / elapsed;
        let mbps = c.received_bytes as f64 / elapsed / 1e6;
        println!("{}", report::table_header());
        println!("{}", report::table_row("fetch round trip", &c.fetch));
        println!("throughput: {rate:.0} msg/s, {mbps:.2} MB/s ({} records in {elapsed:.2} s)", c.received);
        v["throughput"] = json!({ "msgs_per_s": rate, "mb_per_s": mbps, "records": c.received, "elapsed_s": elapsed });
        v["fetch_round_trip_ms"] = percentiles_json(&c.fetch);
        v["histograms"] = json!({ "unit": "microseconds", "fetch_round_trip": report::encoded(&c.fetch) });
        Ok((v, Ok(())))
    } else {
        Ok((v, Err(format!("run failed: {verdict}"))))
    }
}

fn run_sweep(w: &Workload, layout: &cluster::Layout, a: &BenchArgs, name: &str) -> Result<(), String> {
    if w.rate <= 0.0 {
        return Err("sweep needs --rate: the highest rate to try (steps go up to it)".into());
    }
    let steps = a.steps.max(1);
    let mut rows = Vec::new();
    let mut points = Vec::new();
    let mut saturation: Option<(f64, usize)> = None;
    let mut saturated_at = None;
    for k in 1..=steps {
        let mut step = w.clone();
        step.rate = w.rate * k as f64 / steps as f64;
        eprintln!("sweep step {k}/{steps}: {:.0} msg/s", step.rate);
        let o = run_once(&step, layout, false, &format!("step {k}/{steps}"))?;
        o.print();
        let achieved = o.throughput();
        let p99 = o.p99_ms();
        let kept_up = o.ok() && achieved >= 0.95 * step.rate && a.slo_p99_ms.is_none_or(|slo| p99 <= slo);
        let mut row = json!({
            "step": k,
            "requested_msgs_per_s": step.rate,
            "achieved_msgs_per_s": achieved,
            "achieved_mb_per_s": o.produce.measured_bytes as f64 / o.elapsed() / 1e6,
            "status": if o.ok() { "ok" } else { "failed" },
            "validation": o.verdict(),
            "kept_up": kept_up,
        });
        if o.ok() {
            row["latency_ms"] = percentiles_json(&o.produce.latency);
            row["service_time_ms"] = percentiles_json(&o.produce.service);
            row["histogram"] = json!(report::encoded(&o.produce.latency));
            let h = &o.produce.latency;
            points.push(report::SweepPoint {
                achieved,
                p50_ms: report::ms(h.value_at_percentile(50.0)),
                p99_ms: report::ms(h.value_at_percentile(99.0)),
                p999_ms: report::ms(h.value_at_percentile(99.9)),
            });
        }
        rows.push(row);
        if kept_up {
            saturation = Some((achieved, k));
        } else {
            saturated_at = Some(k);
            eprintln!("step {k} did not keep up ({achieved:.0} of {:.0} msg/s, p99 {p99:.3} ms): saturated", step.rate);
            break;
        }
    }
    let result = json!({
        "tool": "shardlog bench",
        "status": "ok",
        "parameters": w.params(a, "sweep", "native"),
        "machine": report::machine(),
        "commit": report::commit(),
        "slo_p99_ms": a.slo_p99_ms,
        "steps": rows,
        "max_sustained_msgs_per_s": saturation.map(|s| s.0),
        "max_sustained_mb_per_s": saturation.map(|s| s.0 * w.record_size as f64 / 1e6),
        "first_saturated_step": saturated_at,
    });
    let json_path = a.output.join(format!("{name}.json"));
    write_json(&json_path, &result)?;
    let svg = a.output.join(format!("{name}.svg"));
    report::sweep_plot(&svg, &format!("sweep: {}", describe(w)), &points, saturation.map(|s| s.0))?;
    match (saturation, saturated_at) {
        (Some((x, _)), Some(_)) => eprintln!("saturation: about {x:.0} msg/s sustained"),
        (Some((x, _)), None) => eprintln!("no saturation up to {x:.0} msg/s: raise --rate"),
        (None, _) => eprintln!("even the first step did not keep up: lower --rate"),
    }
    eprintln!("results: {} and {}", json_path.display(), svg.display());
    Ok(())
}
