//! Every limit the broker enforces, with the reason for its value.
//!
//! Config may lower a default; nothing may raise a value past its `_MAX`.

/// Largest record batch accepted in one append. Bounds the memory one produce
/// request pins and the size of one DMA write. Kafka's `message.max.bytes`
/// defaults to ~1 MiB; we allow more so 1 MiB payload batches fit with their
/// headers, and cap it where one batch would dominate a shard's cache.
pub const BATCH_BYTES_MAX: usize = 16 << 20;
/// Default per-log batch limit: 1 MiB of records plus headroom for headers.
pub const BATCH_BYTES_DEFAULT: usize = (1 << 20) + 4096;

/// Requests one connection may have in flight (read but not yet answered).
/// Enough for Kafka clients' pipelining (librdkafka and the Java client
/// default to 5); past it the connection stops reading, so a client cannot
/// make the broker buffer without bound.
pub const REQUESTS_IN_FLIGHT_MAX: usize = 16;

/// Largest Fetch response the broker builds, whatever `max_bytes` the client
/// asks (Kafka's broker-side `fetch.max.bytes`, 55 MiB). With at most
/// `REQUESTS_IN_FLIGHT_MAX` answers queued per connection, a consumer that
/// stops reading holds a bounded amount of memory.
pub const FETCH_RESPONSE_BYTES_MAX: usize = 55 << 20;

/// Largest response our own clients (the command-line tools, `bench`, the
/// tests and benches) read: well above any Fetch answer a broker sends them
/// (ours caps at `FETCH_RESPONSE_BYTES_MAX`, Kafka's at the `fetch.max.bytes`
/// the client asks, 50 MiB by default), low enough that a stream out of step,
/// whose "size" is four bytes of something else, fails at once rather than
/// allocating gigabytes.
pub const CLIENT_RESPONSE_BYTES_MAX: usize = 256 << 20;

/// Largest single DMA write when queued appends are flushed together. Bounds
/// the aligned staging buffer; a lone batch larger than this is written alone.
/// Each shard journal file (`storage::journal`); a full one is retired
/// after a checkpoint syncs the segments it covers.
pub const JOURNAL_FILE_BYTES_DEFAULT: u64 = 32 << 20;
pub const WRITE_BYTES_MAX: usize = 4 << 20;

/// Segment size at which a log rolls to a new segment (Kafka: 1 GiB).
pub const SEGMENT_BYTES_DEFAULT: u64 = 1 << 30;
/// Index entries store file positions as `u32`; staying below 2 GiB also keeps
/// positions non-negative for tools that read them as Java ints.
pub const SEGMENT_BYTES_MAX: u64 = (1 << 31) - 1;
/// A segment never holds more than this many offsets, so relative offsets fit
/// the `u32` index entries (same bound as Kafka's `Int.MaxValue`).
pub const SEGMENT_OFFSETS_MAX: i64 = i32::MAX as i64;
/// Segment age at which a log rolls (Kafka `segment.ms`: 7 days).
pub const SEGMENT_MS_DEFAULT: i64 = 7 * 24 * 3600 * 1000;

/// Bytes of log between two sparse index entries (Kafka: 4 KiB). A lookup then
/// reads at most this much before reaching the wanted batch.
pub const INDEX_INTERVAL_BYTES_DEFAULT: u32 = 4096;

/// Segment files grow by fallocate in steps up to this big, so appends
/// rarely pay for block allocation and the file stays contiguous on disk.
/// Each step reserves as much again as the segment holds, up to this.
pub const PREALLOCATE_STEP_BYTES_DEFAULT: u64 = 32 << 20;
/// The first reservation of a segment: what a partition that took a few
/// records holds on disk beyond them.
pub const PREALLOCATE_MIN_BYTES: u64 = 64 << 10;
/// Zero-ahead window of an active segment (`storage::zero_ahead`): a few
/// hundred 1 KiB appends, or a few milliseconds of a busy partition.
pub const ZERO_AHEAD_BYTES_DEFAULT: u64 = 1 << 20;
/// How long an append answered from the shard journal may wait for its
/// segment write (the broker's `write_behind_ms`): long enough to gather a
/// busy partition's appends into larger writes, short enough that a read
/// from the file seldom waits for one.
pub const WRITE_BEHIND_MS_DEFAULT: u64 = 10;
/// A partition appending faster than this skips zero-ahead: its writes are
/// large and amortise the extent conversion, and zeros would double the
/// disk's writes at the rates where its bandwidth is the limit.
pub const ZERO_AHEAD_APPEND_BYTES_PER_S_MAX: u64 = 48 << 20;
/// The zero-ahead window of a segment holding less than the window: as
/// much again as it holds, at least this. 50,000 partitions with one
/// record each zeroed a whole window each: 50 GB of zeros.
pub const ZERO_AHEAD_MIN_BYTES: u64 = 64 << 10;
/// Largest zero-ahead window: one zero write holds a buffer this big.
pub const ZERO_AHEAD_BYTES_MAX: u64 = 16 << 20;

/// Partitions a shard opens at once at start or when topics are created.
pub const PARTITION_OPENS_AT_ONCE: usize = 32;

/// Bytes of recent batches a partition keeps in memory for tail reads. A
/// consumer within this distance of the end never touches the disk.
pub const BATCH_CACHE_BYTES_DEFAULT: usize = 8 << 20;

/// Recovery and cold reads fetch the file in windows of this size: large
/// enough for sequential throughput, small enough to bound memory.
pub const READ_WINDOW_BYTES: usize = 1 << 20;

/// Direct I/O alignment assumed for buffers and positions. Every Linux block
/// device we target uses 512 or 4096; 4096 satisfies both.
pub const DMA_ALIGNMENT: u64 = 4096;

/// Bytes of produced batches the null broker (`shardlog bench null-broker`)
/// keeps per partition by default, in memory only; a fetch below them gets
/// OFFSET_OUT_OF_RANGE. The same size as the broker's batch cache, so a
/// consumer near the tail is served from memory by both and their latencies
/// compare like for like. `--tail-bytes` raises it for consumers that lag
/// further (at 500 MB/s over 16 partitions, 8 MiB is a quarter second).
pub const NULL_BROKER_TAIL_BYTES_DEFAULT: usize = BATCH_CACHE_BYTES_DEFAULT;
/// Largest `--tail-bytes`, and the smallest: at least one large batch.
pub const NULL_BROKER_TAIL_BYTES_MAX: usize = 1 << 30;
pub const NULL_BROKER_TAIL_BYTES_MIN: usize = BATCH_BYTES_DEFAULT;
/// Memory the null broker's tails may take in all (partitions × tail
/// bytes): topics past it are refused. 512 partitions at the default.
pub const NULL_BROKER_MEMORY_BYTES_MAX: usize = 4 << 30;
/// Largest request the null broker reads (Kafka's `socket.request.max.bytes`
/// and the broker's default `max_request_bytes`).
pub const NULL_BROKER_REQUEST_BYTES_MAX: usize = 100 << 20;

/// Kernel io_uring workers (io-wq, "bounded": regular-file work such as
/// fdatasync, and DMA writes the kernel cannot finish inline) one shard's
/// thread may run at once. Every fdatasync runs in such a worker; with the
/// kernel's default we saw one worker per shard, so a request's
/// per-partition syncs ran one after another. This lets every partition's
/// sync be in flight together; the disk, not a worker, is then the queue.
pub const IO_WORKERS_BOUNDED_PER_SHARD: u32 = 64;

/// Shares of a shard's background task queue (retention, compaction, offset
/// expiry, the work a segment roll leaves), against 1000 for request
/// handling: when both have work, requests get about 95% of the core.
pub const BACKGROUND_SHARES: usize = 50;

/// How often a shard's wake-up probe sleeps and measures how late it ran
/// (`shardlog_shard_wakeup_lag_seconds`), in milliseconds: 100 samples a
/// second, a negligible wake-up rate for an idle shard.
pub const WAKEUP_PROBE_EVERY_MS: u64 = 10;
