//! `shardlog serve` settings: embedded defaults, then a TOML file, then flags.

use std::{net::SocketAddr, path::PathBuf};

use serde::Deserialize;

/// Everything `serve` needs. Every field has a default, so no file is needed.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServeConfig {
    pub data_dir: PathBuf,
    /// The PLAINTEXT listener shorthand (`server::listeners`): HOST:PORT;
    /// 127.0.0.1:9092 when no listener is configured.
    pub listen: Option<String>,
    /// What Metadata tells the shorthand listener's clients; the listen
    /// address when empty.
    pub advertise: Option<String>,
    /// `[[listeners]]`: name, address, protocol (and advertised_address).
    pub listeners: Vec<super::listeners::ListenerConfig>,
    /// `[tls]`, for SSL and SASL_SSL listeners.
    pub tls: Option<super::tls::TlsConfig>,
    /// Shards to run; all available cores when absent.
    pub cores: Option<usize>,
    /// Cores to pin shards to, e.g. "0-3" or "1,3"; the first N cores when absent.
    pub cpuset: Option<String>,
    pub auto_create_topics: bool,
    pub default_partitions: i32,
    /// Largest request frame accepted (Kafka's `socket.request.max.bytes`).
    pub max_request_bytes: usize,
    pub node_id: i32,
    /// `ID@HOST:PORT,...`: the metadata quorum's voters and their
    /// controller ports (`controller`); alone when absent.
    pub controller_quorum: Option<String>,
    /// Kafka's `broker.heartbeat.interval.ms`: how often a broker tells the
    /// controller leader it is alive.
    pub broker_heartbeat_interval_ms: u64,
    /// Kafka's `broker.session.timeout.ms`: a broker not heard from for
    /// this long is fenced and leaves Metadata.
    pub broker_session_timeout_ms: u64,
    /// Kafka's `replica.lag.time.max.ms`: a follower that has not reached
    /// its leader's log end for this long leaves the in-sync replicas.
    pub replica_lag_time_max_ms: u64,
    /// In a quorum, the port shard 0 accepts its followers' fetches on, at
    /// the first listener's bind address; shard N takes this plus N. 0: each
    /// shard takes a free port (`server::replica_ports`).
    pub replica_fetch_port: u16,
    /// Kafka's `broker.rack`: where this broker stands, told to clients in
    /// Metadata and matched against a consumer's `client.rack`.
    pub broker_rack: Option<String>,
    /// Kafka's `replica.selector.class`: "leader" (the default: consumers
    /// read from leaders) or "rack-aware" (a leader sends a consumer whose
    /// `client.rack` names another in-sync replica's rack to that replica,
    /// KIP-392). Either way a replica serves consumers' Fetch v11+.
    pub replica_selector: String,
    /// Kafka's `auto.leader.rebalance.enable`: in a quorum, partitions go
    /// back to their preferred replicas (`controller::elect`).
    pub auto_leader_rebalance_enable: bool,
    /// Kafka's `leader.imbalance.check.interval.seconds`.
    pub leader_imbalance_check_interval_seconds: u64,
    /// Kafka's `leader.imbalance.per.broker.percentage`.
    pub leader_imbalance_per_broker_percentage: u32,
    /// Partitions of `__consumer_offsets`, fixed when it is created at first
    /// start (Kafka's `offsets.topic.num.partitions`).
    pub offsets_topic_num_partitions: i32,
    /// In a quorum, replicas of each `__consumer_offsets` partition (Kafka's
    /// `offsets.topic.replication.factor`), at most the number of voters:
    /// the quorum creates the topic once that many brokers are live.
    pub offsets_topic_replication_factor: i16,
    /// Partitions of `__transaction_state`, fixed when it is created at
    /// first start (Kafka's `transaction.state.log.num.partitions`).
    pub transaction_state_log_num_partitions: i32,
    /// In a quorum, replicas of each `__transaction_state` partition
    /// (Kafka's `transaction.state.log.replication.factor`), as for
    /// `offsets_topic_replication_factor`.
    pub transaction_state_log_replication_factor: i16,
    /// Kafka's `transaction.max.timeout.ms`.
    pub transaction_max_timeout_ms: i32,
    /// Kafka's `transaction.abort.timed.out.transaction.cleanup.interval.ms`.
    pub transaction_abort_timed_out_transaction_cleanup_interval_ms: u64,
    /// Kafka's `group.initial.rebalance.delay.ms`.
    pub group_initial_rebalance_delay_ms: u64,
    /// Kafka's `offsets.retention.minutes`.
    pub offsets_retention_minutes: u64,
    /// Kafka's `offsets.retention.check.interval.ms`.
    pub offsets_retention_check_interval_ms: u64,
    /// Kafka's `group.min.session.timeout.ms`.
    pub group_min_session_timeout_ms: i32,
    /// Segment size of `__consumer_offsets` when it is created (Kafka's
    /// `offsets.topic.segment.bytes`).
    pub offsets_topic_segment_bytes: u64,
    /// Connections the broker accepts at once, split evenly over the shards
    /// (Kafka's `max.connections`); more are closed at once, logged.
    pub max_connections: usize,
    /// Bytes of requests one connection may have read but not yet answered;
    /// beyond it the broker stops reading that connection (TCP backpressure).
    pub max_inflight_request_bytes_per_connection: usize,
    /// The same budget shared by all connections of one shard.
    pub max_inflight_request_bytes_per_shard: usize,
    /// How often each shard applies retention and compaction to its logs
    /// (Kafka's `log.cleaner.backoff.ms` / `log.retention.check.interval.ms`).
    pub log_maintenance_interval_ms: u64,
    /// HOST:PORT of the Prometheus endpoint (`/metrics`); empty disables it.
    pub metrics_listen: String,
    /// A disk profile written by `shardlog iotune`: bounds concurrent
    /// partition reads per shard to what the disk can take.
    pub io_properties: Option<PathBuf>,
    /// Bytes written with zeros ahead of each active segment's appends, in
    /// the background, so an append overwrites blocks instead of extending
    /// the file (a journal commit on its path); 0 turns it off.
    pub zero_ahead_bytes: u64,
    /// With the shard journal on: appends are answered once the journal
    /// write holding them completed, and reach their segments within this
    /// many milliseconds, in larger writes (one device write per loop turn
    /// for every partition, where each partition's segment took its own);
    /// 0 writes each append's segment before answering. Default 10 ms. A
    /// run of acks=1 appends of 128 KiB or more writes its segment at once.
    pub write_behind_ms: u64,
    /// Size of each shard journal file (`storage::journal`): durable
    /// appends are made durable there, one write and one sync per loop turn
    /// for all partitions; 0 turns the journal off (each partition's
    /// segment is synced instead).
    pub journal_file_bytes: u64,
    /// The shard journal writes through the page cache instead of with
    /// direct I/O: with write-behind, an acks=1 answer then waits for a
    /// copy into the kernel (which survives the broker's crash, as Kafka's
    /// acks=1 does), not for the device; acks=all still waits for the
    /// journal's fdatasync. On by default.
    pub journal_page_cache: bool,
    /// Microseconds a shard with nothing to do polls its rings before it
    /// parks (glommio's `spin_before_park`); 0 parks at once. A parked
    /// shard is woken by the kernel (an interrupt between cores, a VM exit
    /// on a guest); a spinning one sees the next request without that, but
    /// keeps its core from the kernel's io workers for the spin.
    pub spin_before_park_us: u64,
    /// CPUs the kernel's io workers of each shard run on ("0-1,4"): they
    /// run its fdatasyncs and the writeback those start. None leaves them
    /// on the shard's own core, which they inherit; on a host with spare
    /// cores, naming those keeps that work from preempting the shards
    /// (`server::io_workers`).
    pub io_workers_cpuset: Option<String>,
    /// Memory the broker may use, split over its shards: "2GiB", "512MiB"
    /// (see `server::memory`); a quarter of the machine's when absent.
    pub memory: Option<String>,
    /// Segment files unused for this long to twice this long close their
    /// descriptors (`storage::open_files`); they reopen when next used.
    pub segment_files_idle_close_ms: u64,
    /// Principals that skip every ACL check, e.g. `["User:admin"]`.
    pub super_users: Vec<String>,
    /// Whether a resource no ACL names is open to all; true when unset,
    /// always false when a listener authenticates (`security::authorizer`).
    pub allow_everyone_if_no_acl_found: Option<bool>,
    /// `[sasl]`: the mechanisms SASL listeners offer.
    pub sasl: crate::security::sasl_config::SaslConfig,
}

impl Default for ServeConfig {
    fn default() -> Self {
        Self {
            data_dir: PathBuf::from("./data"),
            listen: None,
            advertise: None,
            listeners: Vec::new(),
            tls: None,
            cores: None,
            cpuset: None,
            auto_create_topics: true,
            default_partitions: 1,
            max_request_bytes: 100 << 20,
            node_id: 0,
            controller_quorum: None,
            broker_heartbeat_interval_ms: 2000,
            broker_session_timeout_ms: 9000,
            replica_lag_time_max_ms: 30_000,
            replica_fetch_port: 0,
            broker_rack: None,
            replica_selector: "leader".into(),
            auto_leader_rebalance_enable: true,
            leader_imbalance_check_interval_seconds: 300,
            leader_imbalance_per_broker_percentage: 10,
            offsets_topic_num_partitions: 50,
            offsets_topic_replication_factor: 3,
            transaction_state_log_num_partitions: 50,
            transaction_state_log_replication_factor: 3,
            transaction_max_timeout_ms: 900_000,
            transaction_abort_timed_out_transaction_cleanup_interval_ms: 10_000,
            group_initial_rebalance_delay_ms: 3000,
            offsets_retention_minutes: 7 * 24 * 60,
            offsets_retention_check_interval_ms: 600_000,
            group_min_session_timeout_ms: 6000,
            offsets_topic_segment_bytes: 100 << 20,
            max_connections: 10_000,
            max_inflight_request_bytes_per_connection: 64 << 20,
            max_inflight_request_bytes_per_shard: 512 << 20,
            log_maintenance_interval_ms: 15_000,
            metrics_listen: "127.0.0.1:9644".into(),
            io_properties: None,
            zero_ahead_bytes: crate::limits::ZERO_AHEAD_BYTES_DEFAULT,
            write_behind_ms: crate::limits::WRITE_BEHIND_MS_DEFAULT,
            journal_file_bytes: crate::limits::JOURNAL_FILE_BYTES_DEFAULT,
            journal_page_cache: true,
            spin_before_park_us: 0,
            io_workers_cpuset: None,
            memory: None,
            segment_files_idle_close_ms: 30_000,
            super_users: Vec::new(),
            allow_everyone_if_no_acl_found: None,
            sasl: Default::default(),
        }
    }
}

impl ServeConfig {
    pub fn from_toml(text: &str) -> Result<Self, String> {
        toml::from_str(text).map_err(|e| e.to_string())
    }

    /// Whether leaders send consumers to an in-sync replica in their rack
    /// (`replica_selector`); an unknown selector is refused.
    pub fn rack_aware_reads(&self) -> Result<bool, String> {
        match self.replica_selector.as_str() {
            "leader" => Ok(false),
            "rack-aware" => Ok(true),
            other => Err(format!("replica_selector {other:?}: expected \"leader\" or \"rack-aware\"")),
        }
    }

    /// Where `/metrics` is served; `None` when disabled.
    pub fn metrics_addr(&self) -> Result<Option<SocketAddr>, String> {
        if self.metrics_listen.trim().is_empty() {
            return Ok(None);
        }
        self.metrics_listen.parse().map(Some).map_err(|e| format!("--metrics-listen {:?}: {e}", self.metrics_listen))
    }

    /// The authorizer's settings; `any_listener_authenticates` from the
    /// listeners (`security::authorizer::listener_authenticates`).
    pub fn authorizer_settings(
        &self,
        any_listener_authenticates: bool,
    ) -> Result<crate::security::authorizer::AuthorizerSettings, String> {
        use crate::security::authorizer::{allow_everyone_if_no_acl_found, AuthorizerSettings};
        if self.allow_everyone_if_no_acl_found == Some(true) && any_listener_authenticates {
            log::warn!("allow_everyone_if_no_acl_found = true is ignored: a listener authenticates");
        }
        let allow = allow_everyone_if_no_acl_found(self.allow_everyone_if_no_acl_found, any_listener_authenticates);
        AuthorizerSettings::new(&self.super_users, allow)
    }

    pub fn group_settings(&self) -> crate::groups::GroupSettings {
        crate::groups::GroupSettings {
            offsets_partitions: self.offsets_topic_num_partitions.clamp(1, 1000),
            initial_rebalance_delay_ms: self.group_initial_rebalance_delay_ms,
            offsets_retention_ms: (self.offsets_retention_minutes as i64).saturating_mul(60_000),
            offsets_retention_check_ms: self.offsets_retention_check_interval_ms.max(1),
            min_session_timeout_ms: self.group_min_session_timeout_ms.max(1),
            ..Default::default()
        }
    }

    pub fn txn_settings(&self) -> crate::txn::TxnSettings {
        crate::txn::TxnSettings {
            partitions: self.transaction_state_log_num_partitions.clamp(1, 1000),
            max_timeout_ms: self.transaction_max_timeout_ms.max(1),
            abort_check_interval_ms: self.transaction_abort_timed_out_transaction_cleanup_interval_ms.max(1),
        }
    }

    /// The memory budget of each of `shards` shards.
    pub fn memory_budget(&self, shards: usize) -> Result<super::memory::MemoryBudget, String> {
        let total = match &self.memory {
            Some(text) => super::memory::parse_size(text).map_err(|e| format!("--memory {e}"))?,
            None => super::memory::default_total(),
        };
        super::memory::MemoryBudget::new(total, shards, self.max_inflight_request_bytes_per_shard.max(1) as u64)
    }

    /// `io_workers_cpuset` parsed; empty when absent. It may not name a
    /// shard's core (`shard_cpus`): the kernel narrows a worker's CPUs to
    /// those its shard pinned itself to whenever the two overlap, so such
    /// a set would leave every worker on its shard's core after all.
    pub fn io_workers_cpus(&self, shard_cpus: &[usize]) -> Result<Vec<usize>, String> {
        let Some(list) = &self.io_workers_cpuset else { return Ok(Vec::new()) };
        let cpus = parse_cpuset(list).map_err(|e| e.replace("--cpuset", "--io-workers-cpuset"))?;
        if let Some(shared) = cpus.iter().find(|c| shard_cpus.contains(c)) {
            return Err(format!(
                "--io-workers-cpuset {list:?} names cpu {shared}, which runs a shard: name only cores without shards \
                 (the kernel would keep each shard's io workers on the shard's own core)"
            ));
        }
        Ok(cpus)
    }

    /// The cores shards run on, one shard per entry.
    pub fn shard_cpus(&self) -> Result<Vec<usize>, String> {
        let available = std::thread::available_parallelism().map_or(1, |n| n.get());
        let cpus = match &self.cpuset {
            Some(list) => parse_cpuset(list)?,
            None => (0..available).collect(),
        };
        let n = self.cores.unwrap_or(cpus.len());
        if n == 0 || n > cpus.len() {
            return Err(format!("--cores {n}: must be between 1 and {} (the cores in the cpuset)", cpus.len()));
        }
        Ok(cpus[..n].to_vec())
    }
}

/// Parses "0-3,6,8-9".
pub fn parse_cpuset(list: &str) -> Result<Vec<usize>, String> {
    let mut out = Vec::new();
    for part in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || format!("--cpuset {list:?}: cannot read {part:?}");
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
                if a > b {
                    return Err(bad());
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().map_err(|_| bad())?),
        }
    }
    if out.is_empty() {
        return Err(format!("--cpuset {list:?} names no core"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_need_no_file_and_toml_overrides() {
        let d = ServeConfig::default();
        assert_eq!(d.listen, None);
        let c = ServeConfig::from_toml("listen = \"127.0.0.1:19092\"\ndefault_partitions = 3\n").unwrap();
        assert_eq!(c.listen.as_deref(), Some("127.0.0.1:19092"));
        assert_eq!(c.default_partitions, 3);
        assert!(c.auto_create_topics);
        assert!(ServeConfig::from_toml("nope = 1").is_err());
    }

    #[test]
    fn sasl_section() {
        let d = ServeConfig::default();
        assert_eq!(d.sasl.enabled().unwrap().len(), 3);
        let c = ServeConfig::from_toml("[sasl]\nmechanisms = [\"SCRAM-SHA-512\"]\n").unwrap();
        assert_eq!(c.sasl.enabled().unwrap().iter().map(|m| m.name()).collect::<Vec<_>>(), ["SCRAM-SHA-512"]);
        assert!(ServeConfig::from_toml("[sasl]\nmechanism = []\n").is_err(), "unknown keys are refused");
    }

    #[test]
    fn cpusets_and_advertised_address() {
        assert_eq!(parse_cpuset("0-2,5").unwrap(), vec![0, 1, 2, 5]);
        assert!(parse_cpuset("3-1").is_err());
    }

    #[test]
    fn io_workers_go_only_to_cores_without_shards() {
        let mut c = ServeConfig::default();
        assert_eq!(c.io_workers_cpus(&[0]).unwrap(), Vec::<usize>::new(), "absent: left on the shard's core");
        c.io_workers_cpuset = Some("2-3".into());
        assert_eq!(c.io_workers_cpus(&[0, 1]).unwrap(), vec![2, 3]);
        c.io_workers_cpuset = Some("1-2".into());
        let refused = c.io_workers_cpus(&[0, 1]).unwrap_err();
        assert!(refused.contains("--io-workers-cpuset \"1-2\" names cpu 1"), "{refused}");
        c.io_workers_cpuset = Some("x".into());
        assert!(c.io_workers_cpus(&[0]).unwrap_err().starts_with("--io-workers-cpuset"));
    }

    #[test]
    fn listeners_and_tls_read_from_toml() {
        let c = ServeConfig::from_toml(
            "[[listeners]]\nname = \"SSL\"\naddress = \"0.0.0.0:9093\"\nprotocol = \"SSL\"\n\
             advertised_address = \"broker.example:9093\"\n\
             [tls]\ncert_file = \"c.pem\"\nkey_file = \"k.pem\"\nca_file = \"ca.pem\"\nclient_auth = \"required\"\n",
        )
        .unwrap();
        assert_eq!(c.listeners[0].advertised_address.as_deref(), Some("broker.example:9093"));
        let tls = c.tls.unwrap();
        assert_eq!(tls.client_auth, super::super::tls::ClientAuth::Required);
        assert_eq!(tls.ca_file.unwrap(), PathBuf::from("ca.pem"));
        assert!(
            ServeConfig::from_toml("[tls]\ncert_file = \"c\"\nkey_file = \"k\"\nclient_auth = \"maybe\"\n").is_err()
        );
    }
}
