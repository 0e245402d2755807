//! Encodes every shard's snapshot as OpenMetrics text with the
//! `prometheus-client` crate (a `Collector` over constant values: the
//! counting happened on the shards).

use std::collections::BTreeMap;

use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder},
    metrics::{counter::ConstCounter, gauge::ConstGauge, MetricType},
    registry::Registry,
};

use super::{buckets::BucketSnapshot, snapshot::ShardSnapshot};

type Labels = Vec<(String, String)>;

/// Every shard's snapshot, encoded on demand.
#[derive(Debug)]
pub struct Scrape(pub Vec<ShardSnapshot>);

/// A histogram from a snapshot.
#[derive(Debug)]
struct ConstHistogram<'a>(&'a BucketSnapshot);

impl EncodeMetric for ConstHistogram<'_> {
    fn encode(&self, mut encoder: MetricEncoder<'_>) -> Result<(), std::fmt::Error> {
        encoder.encode_histogram::<prometheus_client::encoding::NoLabelSet>(
            self.0.sum,
            self.0.count,
            &self.0.buckets,
            None,
        )
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

/// One metric family: a name, help, type and labelled values.
fn family<M: EncodeMetric>(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    kind: MetricType,
    rows: impl IntoIterator<Item = (Labels, M)>,
) -> Result<(), std::fmt::Error> {
    let rows: Vec<(Labels, M)> = rows.into_iter().collect();
    if rows.is_empty() {
        return Ok(());
    }
    let mut metric = encoder.encode_descriptor(name, help, None, kind)?;
    for (labels, m) in rows {
        m.encode(metric.encode_family(&labels)?)?;
    }
    Ok(())
}

fn l(pairs: &[(&str, String)]) -> Labels {
    pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
}

fn api_name(key: i16) -> String {
    kafka_protocol::messages::ApiKey::try_from(key).map_or_else(|_| key.to_string(), |k| format!("{k:?}"))
}

impl Collector for Scrape {
    fn encode(&self, mut e: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        self.encode_connections(&mut e)?;
        self.encode_requests(&mut e)?;
        self.encode_shard_state(&mut e)?;
        self.encode_disk(&mut e)?;
        self.encode_partitions(&mut e)?;
        self.encode_groups(&mut e)
    }
}

fn shard(s: &ShardSnapshot) -> (&'static str, String) {
    ("shard", s.shard.to_string())
}

fn counter(v: u64) -> ConstCounter<u64> {
    ConstCounter::new(v)
}

fn gauge(v: i64) -> ConstGauge<i64> {
    ConstGauge::new(v)
}

impl Scrape {
    /// Connections and requests being handled.
    fn encode_connections(&self, e: &mut DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let shards = &self.0;
        family(
            e,
            "shardlog_connections",
            "Open client connections.",
            MetricType::Gauge,
            shards.iter().map(|s| (l(&[shard(s)]), gauge(s.connections as i64))),
        )?;
        family(
            e,
            "shardlog_requests_in_flight",
            "Requests being handled.",
            MetricType::Gauge,
            shards.iter().map(|s| (l(&[shard(s)]), gauge(s.requests_in_flight as i64))),
        )?;
        Ok(())
    }

    /// Requests by API and version, their latency and its split into stages.
    fn encode_requests(&self, e: &mut DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let shards = &self.0;
        family(
            e,
            "shardlog_requests",
            "Requests handled, by API and version.",
            MetricType::Counter,
            shards.iter().flat_map(|s| {
                s.requests.iter().map(move |((k, v), h)| {
                    (l(&[shard(s), ("api", api_name(*k)), ("version", v.to_string())]), counter(h.count))
                })
            }),
        )?;
        family(
            e,
            "shardlog_request_latency_seconds",
            "Time from a request's last byte read to its answer being ready.",
            MetricType::Histogram,
            shards.iter().flat_map(|s| {
                s.requests.iter().map(move |((k, v), h)| {
                    (l(&[shard(s), ("api", api_name(*k)), ("version", v.to_string())]), ConstHistogram(h))
                })
            }),
        )?;
        family(
            e,
            "shardlog_request_total_seconds",
            "Time from a request's size prefix read to its response written: the interval the stages split.",
            MetricType::Histogram,
            shards.iter().flat_map(|s| {
                s.stages.iter().map(move |(k, st)| (l(&[shard(s), ("api", api_name(*k))]), ConstHistogram(&st.total)))
            }),
        )?;
        family(
            e,
            "shardlog_request_stage_seconds",
            "Time an answered request spent in each stage (see metrics/stages.rs); the stages add up to shardlog_request_total_seconds.",
            MetricType::Histogram,
            shards.iter().flat_map(|s| {
                s.stages.iter().flat_map(move |(k, st)| {
                    st.stages.iter().map(move |(stage, h)| {
                        (l(&[shard(s), ("api", api_name(*k)), ("stage", stage.name().to_string())]), ConstHistogram(h))
                    })
                })
            }),
        )?;
        family(
            e,
            "shardlog_request_stage_seconds_by_total",
            "Seconds spent in each stage by the requests whose total fell in the bucket total_le: the breakdown of the slowest requests.",
            MetricType::Counter,
            shards.iter().flat_map(|s| {
                s.stages.iter().flat_map(move |(k, st)| {
                    st.by_total.iter().flat_map(move |(le, row)| {
                        let le = if *le == f64::MAX { "+Inf".to_string() } else { le.to_string() };
                        crate::metrics::stages::STAGES.iter().zip(row).map(move |(stage, secs)| {
                            let labels = l(&[
                                shard(s),
                                ("api", api_name(*k)),
                                ("stage", stage.name().to_string()),
                                ("total_le", le.clone()),
                            ]);
                            (labels, ConstCounter::new(*secs))
                        })
                    })
                })
            }),
        )?;
        Ok(())
    }

    /// Errors answered, long polls, cross-shard traffic and the batch caches.
    fn encode_shard_state(&self, e: &mut DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let shards = &self.0;
        family(
            e,
            "shardlog_produce_errors",
            "Partitions answered with an error by Produce, by Kafka error code.",
            MetricType::Counter,
            shards.iter().flat_map(|s| {
                s.produce_errors.iter().map(move |(c, n)| (l(&[shard(s), ("code", c.to_string())]), counter(*n)))
            }),
        )?;
        family(
            e,
            "shardlog_authorization_denied",
            "Checks refused by the ACLs, by the Kafka error code answered.",
            MetricType::Counter,
            shards.iter().flat_map(|s| {
                s.authorization_denied.iter().map(move |(c, n)| (l(&[shard(s), ("code", c.to_string())]), counter(*n)))
            }),
        )?;
        family(
            e,
            "shardlog_sasl_authentications",
            "SASL authentications on this shard, by mechanism and result (success, failure).",
            MetricType::Counter,
            shards.iter().flat_map(|s| {
                s.sasl_authentications.iter().map(move |(m, r, n)| {
                    (l(&[shard(s), ("mechanism", m.to_string()), ("result", r.to_string())]), counter(*n))
                })
            }),
        )?;
        family(
            e,
            "shardlog_tls_handshake_failures",
            "TLS handshakes that failed on this shard, by listener.",
            MetricType::Counter,
            shards.iter().flat_map(|s| {
                s.tls_handshake_failures
                    .iter()
                    .map(move |(listener, n)| (l(&[shard(s), ("listener", listener.clone())]), counter(*n)))
            }),
        )?;
        family(
            e,
            "shardlog_fetch_errors",
            "Partitions answered with an error by Fetch, by Kafka error code.",
            MetricType::Counter,
            shards.iter().flat_map(|s| {
                s.fetch_errors.iter().map(move |(c, n)| (l(&[shard(s), ("code", c.to_string())]), counter(*n)))
            }),
        )?;
        family(
            e,
            "shardlog_long_poll_waiters",
            "Fetches waiting for data.",
            MetricType::Gauge,
            shards.iter().map(|s| (l(&[shard(s)]), gauge(s.long_poll_waiters as i64))),
        )?;
        self.encode_nearest_replica(e)?;
        self.encode_journal(e)?;
        family(
            e,
            "shardlog_cross_shard_messages_sent",
            "Requests sent to other shards.",
            MetricType::Counter,
            shards.iter().map(|s| (l(&[shard(s)]), counter(s.cross_shard_sent))),
        )?;
        family(
            e,
            "shardlog_cross_shard_messages_received",
            "Requests received from other shards.",
            MetricType::Counter,
            shards.iter().map(|s| (l(&[shard(s)]), counter(s.cross_shard_received))),
        )?;
        family(
            e,
            "shardlog_cross_shard_queue_depth",
            "Requests sent to other shards and not yet answered.",
            MetricType::Gauge,
            shards.iter().map(|s| (l(&[shard(s)]), gauge(s.cross_shard_outstanding as i64))),
        )?;
        family(
            e,
            "shardlog_batch_cache_bytes",
            "Memory held by the shard's batch cache.",
            MetricType::Gauge,
            shards.iter().map(|s| (l(&[shard(s)]), gauge(s.memory.cache.bytes as i64))),
        )?;
        self.encode_memory(e)?;
        family(
            e,
            "shardlog_fetch_sessions",
            "Incremental fetch sessions (KIP-227) the shard holds.",
            MetricType::Gauge,
            shards.iter().map(|s| (l(&[shard(s)]), gauge(s.fetch_sessions.held as i64))),
        )?;
        family(
            e,
            "shardlog_fetch_sessions_opened",
            "Incremental fetch sessions opened.",
            MetricType::Counter,
            shards.iter().map(|s| (l(&[shard(s)]), counter(s.fetch_sessions.opened))),
        )?;
        family(
            e,
            "shardlog_fetch_incremental",
            "Fetches served incrementally, on a session.",
            MetricType::Counter,
            shards.iter().map(|s| (l(&[shard(s)]), counter(s.fetch_sessions.incremental))),
        )?;

        Ok(())
    }

    /// The shard journal's counters.
    fn encode_journal(&self, e: &mut DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let shards = &self.0;
        type JournalCounter = (&'static str, &'static str, fn(&super::snapshot::JournalSnapshot) -> u64);
        let journal: [JournalCounter; 6] = [
            ("shardlog_journal_writes", "Writes to the shard journal.", |j| j.writes),
            ("shardlog_journal_syncs", "fdatasync calls on the shard journal.", |j| j.syncs),
            ("shardlog_journal_bytes", "Bytes written to the shard journal, padding included.", |j| j.bytes),
            ("shardlog_journal_batches", "Record batches written to the shard journal.", |j| j.entries),
            ("shardlog_journal_rotations", "Shard journal files filled and replaced.", |j| j.rotations),
            (
                "shardlog_journal_rotation_waits",
                "Shard journal rotations whose next file was not ready, so appends waited for it.",
                |j| j.rotation_waits,
            ),
        ];
        for (name, help, get) in journal {
            family(
                e,
                name,
                help,
                MetricType::Counter,
                shards.iter().map(|s| (l(&[shard(s)]), counter(get(&s.journal)))),
            )?;
        }
        Ok(())
    }

    /// Fetching from the nearest replica (KIP-392): reads a follower
    /// served, and consumers a leader sent to one.
    fn encode_nearest_replica(&self, e: &mut DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let shards = &self.0;
        type Counter = (&'static str, &'static str, fn(&ShardSnapshot) -> u64);
        let counters: [Counter; 3] = [
            (
                "shardlog_follower_reads",
                "Consumers' partition reads served from a copy this broker follows (KIP-392).",
                |s| s.follower_reads,
            ),
            (
                "shardlog_read_replica_referrals",
                "Fetch answers sending a consumer to an in-sync replica in its rack (replica_selector rack-aware).",
                |s| s.read_replica_referrals,
            ),
            (
                "shardlog_high_watermark_answers",
                "Follower fetches answered at once for a moved high watermark, which consumers reading the follower wait for.",
                |s| s.high_watermark_answers,
            ),
        ];
        for (name, help, get) in counters {
            family(e, name, help, MetricType::Counter, shards.iter().map(|s| (l(&[shard(s)]), counter(get(s)))))?;
        }
        Ok(())
    }

    /// Each shard's memory budget, its parts, and the batch cache's use.
    fn encode_memory(&self, e: &mut DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let shards = &self.0;
        let per_shard = |f: fn(&super::snapshot::MemorySnapshot) -> u64| {
            shards.iter().map(move |s| (l(&[shard(s)]), gauge(f(&s.memory) as i64)))
        };
        family(
            e,
            "shardlog_memory_budget_bytes",
            "The shard's part of --memory.",
            MetricType::Gauge,
            per_shard(|m| m.budget_bytes),
        )?;
        family(
            e,
            "shardlog_memory_used_bytes",
            "Memory the shard's budget accounts, by part: requests in flight, partition state, batch cache.",
            MetricType::Gauge,
            shards.iter().flat_map(|s| {
                let m = &s.memory;
                [("requests", m.requests_bytes), ("partitions", m.partitions_bytes), ("batch_cache", m.cache.bytes)]
                    .map(|(part, v)| (l(&[shard(s), ("part", part.to_string())]), gauge(v as i64)))
            }),
        )?;
        family(
            e,
            "shardlog_memory_requests_budget_bytes",
            "Bytes of requests in flight a shard allows before it stops reading connections.",
            MetricType::Gauge,
            per_shard(|m| m.requests_budget_bytes),
        )?;
        family(
            e,
            "shardlog_batch_cache_limit_bytes",
            "What the budget leaves the shard's batch cache.",
            MetricType::Gauge,
            per_shard(|m| m.cache.limit),
        )?;
        family(
            e,
            "shardlog_batch_cache_evicted_bytes",
            "Bytes the batch cache dropped to stay within the shard's budget.",
            MetricType::Counter,
            shards.iter().map(|s| (l(&[shard(s)]), counter(s.memory.cache.evicted_bytes))),
        )?;
        family(
            e,
            "shardlog_batch_cache_reads",
            "Partition reads served from the batch cache (hit) or from the disk (miss).",
            MetricType::Counter,
            shards.iter().flat_map(|s| {
                [("hit", s.memory.cache.hits), ("miss", s.memory.cache.misses)]
                    .map(|(result, v)| (l(&[shard(s), ("result", result.to_string())]), counter(v)))
            }),
        )
    }

    /// Per-shard sums of the partitions' fsync histograms.
    fn encode_disk(&self, e: &mut DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let shards = &self.0;
        let merged = |f: fn(&super::snapshot::PartitionSnapshot) -> &BucketSnapshot| -> Vec<(usize, BucketSnapshot)> {
            shards
                .iter()
                .map(|s| {
                    let mut total = BucketSnapshot::default();
                    for p in &s.partitions {
                        total.merge(f(p));
                    }
                    (s.shard, total)
                })
                .filter(|(_, h)| h.count > 0)
                .collect()
        };
        let fsync = merged(|p| &p.fsync_seconds);
        family(
            e,
            "shardlog_fsync_seconds",
            "fdatasync latency of segment files.",
            MetricType::Histogram,
            fsync.iter().map(|(s, h)| (l(&[("shard", s.to_string())]), ConstHistogram(h))),
        )?;
        family(
            e,
            "shardlog_shard_wakeup_lag_seconds",
            "How late a timer task on the shard's request queue ran: the wait a task woken now (a socket read, an append's completion) has before the shard runs it.",
            MetricType::Histogram,
            shards.iter().filter(|s| s.wakeup_lag.count > 0).map(|s| (l(&[shard(s)]), ConstHistogram(&s.wakeup_lag))),
        )?;
        let group = merged(|p| &p.appends_per_fsync);
        family(
            e,
            "shardlog_group_commit_appends",
            "Appends made durable by one fdatasync (group commit batch size).",
            MetricType::Histogram,
            group.iter().map(|(s, h)| (l(&[("shard", s.to_string())]), ConstHistogram(h))),
        )?;

        Ok(())
    }

    /// Per-partition counters and gauges.
    fn encode_partitions(&self, e: &mut DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let shards = &self.0;
        let parts: Vec<(&ShardSnapshot, &super::snapshot::PartitionSnapshot)> =
            shards.iter().flat_map(|s| s.partitions.iter().map(move |p| (s, p))).collect();
        let pl = |s: &ShardSnapshot, p: &super::snapshot::PartitionSnapshot| {
            l(&[shard(s), ("topic", p.topic.clone()), ("partition", p.partition.to_string())])
        };
        type Get = fn(&super::snapshot::PartitionSnapshot) -> u64;
        let counters: [(&str, &str, Get); 7] = [
            ("shardlog_partition_records_in", "Records appended.", |p| p.records_in),
            ("shardlog_partition_bytes_in", "Bytes appended (record batches as stored).", |p| p.bytes_in),
            ("shardlog_partition_records_out", "Offsets served to fetches.", |p| p.records_out),
            ("shardlog_partition_bytes_out", "Bytes of record batches served to fetches.", |p| p.bytes_out),
            ("shardlog_partition_fsyncs", "fdatasync calls on the partition's active segment.", |p| p.fsyncs),
            (
                "shardlog_partition_extending_writes",
                "Segment writes past the blocks zeroed ahead (zero-ahead off or behind): each extends the file on its path.",
                |p| p.extending_writes,
            ),
            (
                "shardlog_partition_segment_writes",
                "Writes of appended bytes to the active segment; with write-behind fewer than the appends, and off the answer's path.",
                |p| p.segment_writes,
            ),
        ];
        for (name, help, get) in counters {
            family(e, name, help, MetricType::Counter, parts.iter().map(|(s, p)| (pl(s, p), counter(get(p)))))?;
        }
        type GetI = fn(&super::snapshot::PartitionSnapshot) -> i64;
        let gauges: [(&str, &str, GetI); 4] = [
            ("shardlog_partition_log_end_offset", "Next offset to be assigned (high watermark).", |p| p.log_end),
            ("shardlog_partition_log_start_offset", "First offset still stored.", |p| p.log_start),
            ("shardlog_partition_segments", "Segment files.", |p| p.segments as i64),
            ("shardlog_partition_segment_bytes", "Bytes in segment files.", |p| p.segment_bytes as i64),
        ];
        for (name, help, get) in gauges {
            family(e, name, help, MetricType::Gauge, parts.iter().map(|(s, p)| (pl(s, p), gauge(get(p)))))?;
        }

        Ok(())
    }

    /// Committed offsets and lag per group and partition.
    fn encode_groups(&self, e: &mut DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let shards = &self.0;
        // Lag: the partition's log end (wherever it lives) minus the commit.
        let ends: BTreeMap<(&str, i32), i64> = shards
            .iter()
            .flat_map(|s| s.partitions.iter())
            .map(|p| ((p.topic.as_str(), p.partition), p.log_end))
            .collect();
        let commits: Vec<&(String, String, i32, i64)> = shards.iter().flat_map(|s| s.committed.iter()).collect();
        let gl = |c: &(String, String, i32, i64)| {
            l(&[("group", c.0.clone()), ("topic", c.1.clone()), ("partition", c.2.to_string())])
        };
        family(
            e,
            "shardlog_group_committed_offset",
            "Committed offset per group and partition.",
            MetricType::Gauge,
            commits.iter().map(|c| (gl(c), gauge(c.3))),
        )?;
        family(
            e,
            "shardlog_group_lag",
            "Log end offset minus committed offset, per group and partition.",
            MetricType::Gauge,
            commits.iter().filter_map(|c| ends.get(&(c.1.as_str(), c.2)).map(|end| (gl(c), gauge((end - c.3).max(0))))),
        )?;
        Ok(())
    }
}

/// The OpenMetrics text for `snapshots`.
pub fn render(snapshots: Vec<ShardSnapshot>) -> Result<String, String> {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Scrape(snapshots)));
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &registry).map_err(|e| format!("encoding metrics: {e}"))?;
    Ok(out)
}
