//! The network layer: starts one pinned executor per shard, joins them into a
//! channel mesh, accepts connections on every shard (SO_REUSEPORT) and shuts
//! down cleanly on SIGINT/SIGTERM.
//!
//! **Architecture invariant:** only `server` (and `cli`) touch Kafka clients'
//! sockets; the metadata quorum (`controller`) has a port and thread of its own.

mod authenticate;
pub mod authz;
mod blocking_pool;
pub mod config;
pub mod connection;
pub mod descriptors;
pub mod fetch_encode;
pub mod fetch_sessions;
pub mod handlers;
mod io_workers;
pub mod listeners;
pub mod memory;
mod replica_ports;
mod response_writer;
mod send;
pub mod tls;

use std::{
    rc::Rc,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use glommio::{channels::channel_mesh::MeshBuilder, net::TcpListener, LocalExecutorBuilder, Placement};

use crate::shard::{topics::TopicTable, BrokerSettings, Envelope, Shard};
use crate::txn::TXN_TOPIC;
pub use config::ServeConfig;

/// Prints a start-up line to stdout, ignoring a failed write (`println!`
/// would panic on it, e.g. when stdout is a file on a full disk).
macro_rules! banner {
    ($($arg:tt)*) => {{
        use std::io::Write;
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

/// Capacity of each shard-to-shard channel: senders wait (backpressure)
/// rather than queue without bound.
const MESH_CHANNEL_CAPACITY: usize = 1024;
/// Added to the start counter by a shard that failed to start, so the main
/// thread stops waiting and reports it.
const FAILED_TO_START: usize = 1 << 20;
/// How long start-up waits for a previous broker's listening sockets to go.
const PORT_RELEASE_WAIT: Duration = Duration::from_secs(3);
/// Concurrent partition reads per shard without a disk profile.
const DISK_READS_PER_SHARD_DEFAULT: usize = 32;
/// How long shutdown waits for in-flight requests before closing logs.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// What the listeners need of security: the TLS state when a listener
/// speaks TLS, and the authorizer's settings (`allow_everyone_if_no_acl_found`
/// is off whenever a listener authenticates). Warns of listeners open to
/// the network without authentication.
fn listeners_security(
    config: &ServeConfig,
    listeners: &[listeners::Listener],
) -> Result<(Option<Arc<tls::TlsState>>, crate::security::authorizer::AuthorizerSettings), String> {
    let tls = match &config.tls {
        Some(t) if listeners.iter().any(|l| l.protocol.uses_tls()) => Some(tls::TlsState::load(t)?),
        _ => None,
    };
    for warning in listeners::open_to_network(listeners, config.tls.as_ref().map(|t| t.client_auth)) {
        banner!("shardlog: {warning}");
        log::warn!("{warning}");
    }
    let client_certs_required = config.tls.as_ref().is_some_and(|t| t.client_auth == tls::ClientAuth::Required);
    let authenticates = listeners
        .iter()
        .any(|l| crate::security::authorizer::listener_authenticates(l.protocol, client_certs_required));
    Ok((tls, config.authorizer_settings(authenticates)?))
}

/// Starts this broker's member of the metadata quorum when
/// `controller_quorum` is set (`controller`); None when it runs alone.
fn start_controller(
    config: &ServeConfig,
    listeners: &[listeners::Listener],
    shard_ports: Vec<u16>,
    stop: &Arc<AtomicBool>,
) -> Result<Option<crate::controller::ControllerHandle>, String> {
    use crate::controller::{BrokerInfo, ControllerSettings, ListenerAddr};
    let Some(quorum) = &config.controller_quorum else {
        return Ok(None);
    };
    if !(0..1 << (63 - crate::shard::PRODUCER_ID_NODE_SHIFT)).contains(&config.node_id) {
        return Err(format!(
            "node id {} is out of range: in a controller quorum node ids are 0..{} (each broker's producer ids \
             carry its node id)",
            config.node_id,
            1i64 << (63 - crate::shard::PRODUCER_ID_NODE_SHIFT)
        ));
    }
    let addrs = listeners.iter().map(|l| &l.advertised);
    let broker = BrokerInfo {
        node_id: config.node_id,
        listeners: addrs
            .map(|a| ListenerAddr { name: a.listener.clone(), host: a.host.clone(), port: a.port })
            .collect(),
        incarnation: crate::controller::new_incarnation(),
        shard_ports,
        rack: config.broker_rack.clone(),
        // The controller's, set when its directory is opened.
        directory_id: None,
    };
    let settings = ControllerSettings {
        node_id: config.node_id,
        voters: crate::controller::parse_quorum(quorum).map_err(|e| format!("--controller-quorum: {e}"))?,
        dir: config.data_dir.join("controller"),
        broker,
        heartbeat_every: Duration::from_millis(config.broker_heartbeat_interval_ms.max(10)),
        session_timeout: Duration::from_millis(config.broker_session_timeout_ms.max(100)),
        rebalance: config.auto_leader_rebalance_enable.then(|| crate::controller::elect::Rebalance {
            every: Duration::from_secs(config.leader_imbalance_check_interval_seconds.max(1)),
            percentage: config.leader_imbalance_per_broker_percentage,
        }),
        stop: stop.clone(),
    };
    let voter = settings.voters.contains_key(&(config.node_id as u64));
    let handle = crate::controller::start(settings)?;
    if voter {
        banner!("shardlog: node {} joined the controller quorum {quorum}", config.node_id);
    } else {
        banner!(
            "shardlog: node {} is not a voter of the controller quorum {quorum}; it joins the cluster as a broker",
            config.node_id
        );
    }
    Ok(Some(handle))
}

/// In a quorum: marks the table as this node's, which leads nothing it
/// kept from its last run until its registration is applied.
fn join_quorum_table(config: &ServeConfig, table: &mut TopicTable) -> Result<(), String> {
    if config.controller_quorum.is_none() {
        return Ok(());
    }
    table.node_id = Some(config.node_id);
    // What this broker led when it stopped may have moved since.
    table.disown(config.node_id);
    table
        .save(&config.data_dir)
        .map_err(|e| format!("cannot persist topic metadata in {}: {e}", config.data_dir.display()))
}

/// In a quorum, `__consumer_offsets` and `__transaction_state` are the
/// quorum's: replicated like any topic, so groups, committed offsets and
/// transactions survive the loss of their coordinator's broker
/// (`shard::coordinator_leadership`). A replication factor is at most the
/// number of voters.
fn internal_topic_specs(config: &ServeConfig) -> Result<Vec<crate::controller::TopicSpec>, String> {
    let Some(quorum) = &config.controller_quorum else { return Ok(Vec::new()) };
    let voters = crate::controller::parse_quorum(quorum).map_err(|e| format!("--controller-quorum: {e}"))?.len();
    let topics = [
        (
            crate::groups::OFFSETS_TOPIC,
            config.offsets_topic_num_partitions,
            config.offsets_topic_replication_factor,
            "offsets_topic_replication_factor",
        ),
        (
            TXN_TOPIC,
            config.transaction_state_log_num_partitions,
            config.transaction_state_log_replication_factor,
            "transaction_state_log_replication_factor",
        ),
    ];
    let mut specs = Vec::new();
    for (name, partitions, factor, setting) in topics {
        if factor < 1 {
            return Err(format!("{setting} must be at least 1, got {factor}"));
        }
        specs.push(crate::controller::TopicSpec {
            name: name.to_string(),
            partitions,
            configs: std::collections::BTreeMap::from([
                ("cleanup.policy".to_string(), "compact".to_string()),
                ("segment.bytes".to_string(), config.offsets_topic_segment_bytes.to_string()),
            ]),
            replication_factor: factor.min(voters as i16),
        });
    }
    Ok(specs)
}

/// Runs the broker until SIGINT or SIGTERM. Returns once every shard has
/// closed its partitions.
pub fn serve(config: ServeConfig) -> Result<(), String> {
    let cpus = config.shard_cpus()?;
    let listeners = listeners::resolve(&config)?;
    let (tls, authorizer) = listeners_security(&config, &listeners)?;
    std::fs::create_dir_all(&config.data_dir)
        .map_err(|e| format!("cannot create {}: {e}", config.data_dir.display()))?;
    let _lock = lock_data_dir(&config.data_dir)?;
    // Shards bind with SO_REUSEPORT, which would let a second broker share
    // the port silently and split its clients: refuse if anything already
    // accepts connections there.
    for l in &listeners {
        refuse_if_listening(l.bind)?;
    }
    let mut table = TopicTable::load(&config.data_dir)?;
    let acls = Arc::new(crate::security::acl_store::load(&config.data_dir)?);
    let groups = config.group_settings();
    let txn = config.txn_settings();
    let internal_topics = internal_topic_specs(&config)?;
    for (name, partitions) in [(crate::groups::OFFSETS_TOPIC, groups.offsets_partitions), (TXN_TOPIC, txn.partitions)] {
        if !internal_topics.is_empty() {
            break; // the quorum's, replicated
        }
        let (dir, segment_bytes) = (&config.data_dir, config.offsets_topic_segment_bytes);
        crate::shard::topics::ensure_internal_topic(&mut table, dir, name, partitions, segment_bytes, cpus.len())?;
    }
    join_quorum_table(&config, &mut table)?;
    let (nofile, memory) = resource_limits(&config, &table, cpus.len())?;
    let maintenance_every = Duration::from_millis(config.log_maintenance_interval_ms.max(10));
    let disk_reads_per_shard = disk_reads_per_shard(&config, cpus.len())?;
    // Bound before the shards start, so a taken port fails start-up with a
    // clear message and port 0 resolves to the real port for the banner.
    let metrics = match config.metrics_addr()? {
        Some(addr) => Some(
            std::net::TcpListener::bind(addr)
                .map_err(|e| format!("cannot serve metrics on {addr} (--metrics-listen): {e}"))?,
        ),
        None => None,
    };
    let metrics_addr = metrics.as_ref().and_then(|l| l.local_addr().ok());
    let mut metrics = metrics;
    let table = Arc::new(table);
    let stop = Arc::new(AtomicBool::new(false));
    let replica = replica_ports::bind(&config, &listeners, cpus.len())?;
    let shard_ports = replica_ports::ports(&replica)?;
    let mut replica = replica.into_iter();
    let controller = start_controller(&config, &listeners, shard_ports, &stop)?;
    let settings = Arc::new(BrokerSettings {
        node_id: config.node_id,
        advertised_host: listeners[0].advertised.host.clone(),
        advertised_port: listeners[0].advertised.port,
        listeners: listeners.iter().map(|l| l.advertised.clone()).collect(),
        cluster_id: "shardlog".into(),
        data_dir: config.data_dir.clone(),
        auto_create_topics: config.auto_create_topics,
        default_partitions: config.default_partitions.max(1),
        max_request_bytes: config.max_request_bytes,
        groups,
        txn,
        max_connections_per_shard: config.max_connections.div_ceil(cpus.len()).max(1),
        max_inflight_bytes_per_connection: config
            .max_inflight_request_bytes_per_connection
            .clamp(1, memory.requests as usize),
        max_inflight_bytes_per_shard: memory.requests as usize,
        disk_reads_per_shard,
        zero_ahead_bytes: config.zero_ahead_bytes,
        write_behind_ms: config.write_behind_ms,
        journal_file_bytes: config.journal_file_bytes,
        journal_page_cache: config.journal_page_cache,
        io_workers_cpus: config.io_workers_cpus(&cpus)?,
        max_partitions: memory.partitions_per_shard() * cpus.len() as u64,
        open_files_per_shard: nofile.open_files_per_shard(cpus.len()),
        idle_files_every: Duration::from_millis(config.segment_files_idle_close_ms.max(10)),
        memory,
        authorizer,
        sasl_mechanisms: config.sasl.enabled()?,
        credentials_at_start: Arc::new(crate::security::credentials::Credentials::load(&config.data_dir)?),
        cluster: controller.as_ref().map(|c| c.link.clone()),
        replica_lag_max: Duration::from_millis(config.replica_lag_time_max_ms.max(100)),
        rack: config.broker_rack.clone(),
        rack_aware_reads: config.rack_aware_reads()?,
        internal_topics,
    });
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, stop.clone()).map_err(|e| format!("cannot handle signal {signal}: {e}"))?;
    }
    let reload = tls.clone().map(tls::reload_on_sighup).transpose()?;
    let listeners = Arc::new(listeners);
    let mesh = MeshBuilder::<Envelope, _>::full(cpus.len(), MESH_CHANNEL_CAPACITY);
    let started = Instant::now();
    let ready = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let replay = read_journals(&config.data_dir)?;
    let mut handles = Vec::new();
    let process_cpus = blocking_pool::process_cpus();
    for (index, &cpu) in cpus.iter().enumerate() {
        let (mesh, table, settings, stop, ready, acls, replay) =
            (mesh.clone(), table.clone(), settings.clone(), stop.clone(), ready.clone(), acls.clone(), replay.clone());
        let (listeners, tls) = (listeners.clone(), tls.clone());
        let metrics = if index == 0 { metrics.take() } else { None };
        let replica = replica.next();
        let handle = shard_executor(index, cpu, &process_cpus, config.spin_before_park_us)
            .spawn(move || async move {
                let start = ShardStart { mesh, table, settings, listeners, tls, stop, ready };
                run_shard(start, ShardExtras { maintenance_every, metrics, replica, acls, replay }).await
            })
            .map_err(|e| format!("cannot start shard on core {cpu}: {e}"))?;
        handles.push(handle);
    }
    while ready.load(Ordering::Acquire) < cpus.len() {
        std::thread::sleep(Duration::from_millis(2));
    }
    if ready.load(Ordering::Acquire) == cpus.len() {
        finish_journals(&replay, &config.data_dir);
        banner!(
            "shardlog: listening on {} with {} shard(s) on cores {:?}, data in {}{} (ready in {} ms)",
            listeners.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "),
            cpus.len(),
            cpus,
            config.data_dir.display(),
            metrics_addr.map_or(String::new(), |a| format!(", metrics at http://{a}/metrics")),
            started.elapsed().as_millis()
        );
    }
    // The journals' bytes are in their partitions now.
    drop(replay);
    wait_for_shards(handles, reload, controller.as_ref(), config.node_id)
}

/// The executor of shard `index`, pinned to `cpu`, its blocking threads
/// over `process_cpus` (`blocking_pool`).
fn shard_executor(index: usize, cpu: usize, process_cpus: &[usize], spin_before_park_us: u64) -> LocalExecutorBuilder {
    let builder = LocalExecutorBuilder::new(Placement::Fixed(cpu))
        .name(&format!("shard-{index}"))
        .blocking_thread_pool_placement(blocking_pool::placement(process_cpus, cpu));
    if spin_before_park_us > 0 {
        builder.spin_before_park(Duration::from_micros(spin_before_park_us))
    } else {
        builder
    }
}

/// Waits for every shard to finish, then for the quorum to fence this
/// broker (when in one); a shard's failure is the result.
fn wait_for_shards(
    handles: Vec<glommio::ExecutorJoinHandle<Result<(), String>>>,
    reload: Option<signal_hook::iterator::Handle>,
    controller: Option<&crate::controller::ControllerHandle>,
    node_id: i32,
) -> Result<(), String> {
    let mut failure = None;
    for h in handles {
        match h.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => failure = Some(e),
            Err(e) => failure = Some(format!("shard panicked: {e:?}")),
        }
    }
    if let Some(handle) = reload {
        handle.close();
    }
    // Fenced by the leader before exit, so clients stop being sent here.
    if let Some(c) = controller {
        if c.wait_left(Duration::from_secs(4)) {
            banner!("shardlog: node {} left the cluster", node_id);
        }
    }
    failure.map_or(Ok(()), Err)
}

/// The open-files limit (raised) and the memory budget, each checked
/// against the partitions on disk and said in the banner.
fn resource_limits(
    config: &ServeConfig,
    table: &TopicTable,
    shards: usize,
) -> Result<(descriptors::Nofile, memory::MemoryBudget), String> {
    let nofile =
        descriptors::raise_soft_limit().map_err(|e| format!("cannot read or raise the open-files limit: {e}"))?;
    descriptors::check_start(shards, &nofile)?;
    banner!(
        "shardlog: open-files limit {}{}: up to {} segment files open per shard",
        nofile.soft,
        nofile.raised_from.map_or(String::new(), |b| format!(" (raised from {b})")),
        nofile.open_files_per_shard(shards),
    );
    let memory = config.memory_budget(shards)?;
    memory.check_start(table.partition_count(), shards)?;
    let per_shard_partitions = table.partition_count().div_ceil(shards as u64);
    banner!(
        "shardlog: memory budget {} ({shards} shard(s) × {}: requests in flight {}, batch cache up to {}): \
         room for {} partitions ({} on disk)",
        memory::show(memory.total),
        memory::show(memory.per_shard),
        memory::show(memory.requests),
        memory::show(memory.cache_limit(per_shard_partitions)),
        memory.partitions_per_shard() * shards as u64,
        table.partition_count()
    );
    Ok((nofile, memory))
}

/// Concurrent partition reads per shard: from the disk profile if given.
fn disk_reads_per_shard(config: &ServeConfig, shards: usize) -> Result<usize, String> {
    let Some(path) = &config.io_properties else { return Ok(DISK_READS_PER_SHARD_DEFAULT) };
    let io = crate::iotune::IoProperties::load(path)?;
    let n = io.disk_reads_per_shard(shards);
    banner!(
        "shardlog: disk profile {} ({:.0} MB/s write, {:.0} MB/s read, fdatasync p99 {} µs): {n} concurrent reads per shard",
        path.display(),
        io.write_bandwidth_mb_per_s,
        io.read_bandwidth_mb_per_s,
        io.fdatasync_p99_us
    );
    Ok(n)
}

/// Refuses to start while something accepts connections on `listen`. A
/// broker that just exited can leave its listening sockets behind for a
/// moment (io_uring tears down asynchronously, and after SIGKILL nothing
/// shuts them down first), so this waits up to `PORT_RELEASE_WAIT` for them.
fn refuse_if_listening(listen: std::net::SocketAddr) -> Result<(), String> {
    let mut probe = listen;
    if probe.ip().is_unspecified() {
        probe.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
    }
    let give_up = Instant::now() + PORT_RELEASE_WAIT;
    loop {
        match std::net::TcpStream::connect_timeout(&probe, Duration::from_millis(200)) {
            // A connect to a free port in the ephemeral range can, rarely,
            // pick that very port as its source and connect to itself.
            Ok(s) if s.local_addr().ok() == s.peer_addr().ok() => return Ok(()),
            Ok(_) if Instant::now() < give_up => std::thread::sleep(Duration::from_millis(50)),
            Ok(_) => return Err(format!("cannot listen on {listen}: another process is already listening there")),
            Err(_) => return Ok(()),
        }
    }
}

/// A shard's listening socket, with its descriptor kept so shutdown can
/// take it out of LISTEN state (glommio's listener does not expose it).
struct Listener {
    socket: TcpListener,
    fd: i32,
}

/// Binds `addr` with SO_REUSEPORT (every shard listens on it; the kernel
/// spreads connections) and SO_REUSEADDR (restart while old connections
/// linger in TIME_WAIT).
#[allow(unsafe_code)]
fn bind(addr: std::net::SocketAddr) -> std::io::Result<Listener> {
    use std::os::fd::IntoRawFd;
    let socket = socket2::Socket::new(socket2::Domain::for_address(addr), socket2::Type::STREAM, None)?;
    socket.set_reuse_port(true)?;
    socket.set_reuse_address(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(1024)?;
    let fd = socket.into_raw_fd();
    // SAFETY: `fd` is a bound, listening TCP socket whose ownership moves
    // into glommio's listener here; nothing else closes it.
    let socket = unsafe { <TcpListener as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    Ok(Listener { socket, fd })
}

/// Hands a bound std listener to glommio (the metrics endpoint's).
fn into_glommio(listener: std::net::TcpListener) -> std::io::Result<TcpListener> {
    adopt(listener).map(|l| l.socket)
}

/// A bound std listener as this shard's (a follower fetch port).
#[allow(unsafe_code)]
fn adopt(listener: std::net::TcpListener) -> std::io::Result<Listener> {
    use std::os::fd::IntoRawFd;
    listener.set_nonblocking(true)?;
    let fd = listener.into_raw_fd();
    // SAFETY: `fd` is a bound, listening TCP socket whose ownership moves
    // into glommio's listener here; nothing else closes it.
    let socket = unsafe { <TcpListener as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    Ok(Listener { socket, fd })
}

/// Takes a listening socket out of LISTEN state now. Dropping it is not
/// enough: an accept still queued in io_uring keeps the socket alive (and
/// in the SO_REUSEPORT group, taking connections nobody accepts) until the
/// ring has cancelled it.
#[allow(unsafe_code)]
fn stop_listening(fd: i32) {
    // SAFETY: shutdown(2) on a descriptor the listener still owns (it is
    // dropped after this call); it touches no memory of ours.
    unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
}

/// Holds an exclusive lock on `<data dir>/.lock` for the broker's lifetime,
/// so two brokers never open the same logs.
fn lock_data_dir(dir: &std::path::Path) -> Result<std::fs::File, String> {
    let path = dir.join(".lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    file.try_lock().map_err(|_| format!("{} is in use by another shardlog process", dir.display()))?;
    Ok(file)
}

/// Reads the journal files the last run left (`storage::journal`).
fn read_journals(data_dir: &std::path::Path) -> Result<Arc<crate::storage::journal::Replay>, String> {
    let started = Instant::now();
    let replay = crate::storage::journal::read_all(data_dir).map_err(|e| {
        format!("cannot read the journal in {}: {e}", data_dir.join(crate::storage::journal::DIR).display())
    })?;
    if replay.entries() > 0 {
        log::info!(
            "journal: {} batch(es) from the last run read in {} ms; each partition appends what it lacks",
            replay.entries(),
            started.elapsed().as_millis()
        );
    }
    Ok(Arc::new(replay))
}

/// Every shard is up, each partition holding what the last run's journals
/// had for it: the files go.
fn finish_journals(replay: &crate::storage::journal::Replay, data_dir: &std::path::Path) {
    match replay.finish(data_dir) {
        Ok(0) => {}
        Ok(n) => log::info!("removed the {n} journal file(s) of the last run: their batches are in their partitions"),
        Err(e) => log::warn!("cannot remove the last run's journal files (the next start reads them again): {e}"),
    }
}

/// What one shard's executor starts from.
struct ShardStart {
    mesh: MeshBuilder<Envelope, glommio::channels::channel_mesh::Full>,
    table: Arc<TopicTable>,
    settings: Arc<BrokerSettings>,
    listeners: Arc<Vec<listeners::Listener>>,
    tls: Option<Arc<tls::TlsState>>,
    stop: Arc<AtomicBool>,
    ready: Arc<std::sync::atomic::AtomicUsize>,
}

/// The rest of what a shard starts from.
struct ShardExtras {
    maintenance_every: Duration,
    metrics: Option<std::net::TcpListener>,
    /// In a quorum, where this shard accepts follower fetches
    /// (`replica_ports`).
    replica: Option<std::net::TcpListener>,
    /// The ACLs persisted, loaded once for every shard.
    acls: Arc<crate::security::acl::AclSet>,
    /// The journals the last run left, read once for every shard.
    replay: Arc<crate::storage::journal::Replay>,
}

async fn run_shard(start: ShardStart, extras: ShardExtras) -> Result<(), String> {
    let ShardStart { mesh, table, settings, listeners, tls, stop, ready } = start;
    let ShardExtras { maintenance_every, metrics, replica, acls, replay } = extras;
    let (senders, receivers) = mesh.join().await.map_err(|e| format!("cannot join the shard mesh: {e}"))?;
    let shard = Shard::new(settings, senders, table.clone());
    shard.set_acls(acls);
    crate::shard::maintenance::use_background_queue();
    match io_workers::set_up(&shard.settings.io_workers_cpus) {
        Ok(done) => log::info!("shard {}: kernel io workers for file syncs: {done}", shard.id),
        Err(e) => log::warn!("shard {}: kernel io workers for file syncs: {e}", shard.id),
    }
    if let Err(e) = crate::storage::file::settle_poll_probe(&shard.settings.data_dir, shard.id).await {
        log::warn!("shard {}: cannot probe {} for polled I/O: {e}", shard.id, shard.settings.data_dir.display());
    }
    shard.serve_peers(receivers);
    crate::storage::open_files::set_limit(shard.settings.open_files_per_shard as usize);
    crate::shard::maintenance::spawn_idle_file_closer(&shard, shard.settings.idle_files_every);
    if let Err(e) = crate::shard::journal_glue::start(&shard, replay).await {
        ready.fetch_add(FAILED_TO_START, Ordering::AcqRel);
        stop.store(true, Ordering::Relaxed);
        return Err(e);
    }
    let failed = shard.apply_topics(table).await;
    crate::shard::journal_glue::started(&shard, failed.is_empty());
    if let Some(crate::shard::messages::OpenFailure { topic, partition, cause }) = failed.first() {
        log::error!(
            "shard {}: {} partition(s) on disk could not be opened and are not served, first {topic}-{partition}: {cause}",
            shard.id,
            failed.len()
        );
    }
    crate::shard::group_glue::load_groups(&shard).await;
    crate::shard::group_glue::spawn_offset_expiry(&shard);
    crate::shard::txn_glue::load_txns(&shard).await;
    crate::shard::txn_glue::spawn_txn_timeouts(&shard);
    crate::shard::maintenance::spawn_log_maintenance(&shard, maintenance_every);
    if let (Some(link), crate::shard::router::CONTROLLER) = (&shard.settings.cluster, shard.id) {
        glommio::spawn_local(shard.clone().follow_cluster(link.clone())).detach();
    }
    shard.spawn_isr_lag_checks();
    crate::shard::maintenance::spawn_wakeup_probe(&shard);
    if let Some(listener) = metrics {
        let listener = into_glommio(listener).map_err(|e| format!("metrics listener: {e}"))?;
        glommio::spawn_local(crate::metrics::http::serve(shard.clone(), listener)).detach();
    }
    let mut bound = Vec::new();
    for l in listeners.iter() {
        match bind(l.bind) {
            Ok(socket) => bound.push((l, socket)),
            Err(e) => {
                ready.fetch_add(FAILED_TO_START, Ordering::AcqRel);
                stop.store(true, Ordering::Relaxed);
                return Err(format!("shard {}: cannot listen on {l}: {e}", shard.id));
            }
        }
    }
    if let (Some(replica), Some(first)) = (replica, listeners.first()) {
        let socket = adopt(replica).map_err(|e| format!("shard {}: follower fetch listener: {e}", shard.id))?;
        bound.push((first, socket));
    }
    ready.fetch_add(1, Ordering::AcqRel);
    let accepting: Vec<_> = bound
        .into_iter()
        .map(|(l, listener)| {
            let door = Rc::new(connection::Door {
                name: Rc::from(l.name.as_str()),
                protocol: l.protocol,
                tls: if l.protocol.uses_tls() { tls.clone() } else { None },
            });
            let (shard, stop) = (shard.clone(), stop.clone());
            glommio::spawn_local(async move {
                accept_until_stopped(&shard, &listener.socket, &stop, &door).await;
                stop_listening(listener.fd);
            })
        })
        .collect();
    for task in accepting {
        task.await;
    }
    let grace_end = Instant::now() + SHUTDOWN_GRACE;
    while shard.inflight.get() > 0 && Instant::now() < grace_end {
        glommio::timer::sleep(Duration::from_millis(10)).await;
    }
    shard.close_all().await;
    Ok(())
}

/// Accepts connections until a stop signal. The signal flag is checked when
/// accept returns and on a coarse timer: an idle broker wakes ten times a
/// second, which costs nothing measurable.
///
/// A failing accept (out of descriptors: EMFILE/ENFILE) backs off, from
/// 1 ms doubling to 100 ms, instead of spinning, and is logged at most once
/// a second with how many failed since the last line.
///
/// One accept stays in flight across the timer's ticks. Dropping an accept
/// whose completion the kernel had already posted (the tick and a new
/// connection in the same turn of the loop) would leak the new socket: the
/// client would wait on an open connection nobody reads.
async fn accept_until_stopped(
    shard: &Rc<Shard>,
    listener: &TcpListener,
    stop: &AtomicBool,
    door: &Rc<connection::Door>,
) {
    let mut backoff = Duration::ZERO;
    let (mut failed, mut last_log): (u64, Option<Instant>) = (0, None);
    let mut accept = Box::pin(listener.accept());
    while !stop.load(Ordering::Relaxed) {
        let accepted = futures_lite::future::or(async { Some((&mut accept).await) }, async {
            glommio::timer::sleep(Duration::from_millis(100)).await;
            None
        })
        .await;
        if accepted.is_some() {
            accept = Box::pin(listener.accept());
        }
        match accepted {
            Some(Ok(stream)) => {
                backoff = Duration::ZERO;
                if log::log_enabled!(log::Level::Debug) {
                    let peer = stream.peer_addr().map_or_else(|_| "?".to_string(), |a| a.to_string());
                    log::debug!("shard {}: accepted connection from {peer}", shard.id);
                }
                glommio::spawn_local(connection::serve(shard.clone(), stream, door.clone())).detach();
            }
            Some(Err(e)) => {
                failed += 1;
                if last_log.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
                    log::warn!("shard {}: accept failed ({failed} time(s) since the last report): {e}", shard.id);
                    (failed, last_log) = (0, Some(Instant::now()));
                }
                backoff = (backoff * 2).clamp(Duration::from_millis(1), Duration::from_millis(100));
                glommio::timer::sleep(backoff).await;
            }
            None => {}
        }
    }
}
