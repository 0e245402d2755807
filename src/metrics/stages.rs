//! Where one request's time goes inside the broker, stage by stage.
//!
//! A request's clock starts when its reader has the frame's 4-byte size
//! prefix and stops when the last byte of its response was handed to the
//! socket. [`RequestTrace`] splits that interval into the stages below,
//! one after another, from `Instant` laps taken on the shard (no syscall
//! beyond the vDSO clock read). Concurrent work inside a request (Produce
//! appends to several partitions at once) is charged along its critical
//! path: the partition whose append finished last.
//!
//! The stages tile the interval, so their sums add up to the total: a gap
//! or a double count shows as a difference, which `tests/request_stages.rs`
//! checks. What no stage below names is [`Stage::Handle`], measured
//! as such rather than left out.

use std::{
    cell::Cell,
    time::{Duration, Instant},
};

/// One stage of a request, in the order a Produce goes through them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stage {
    /// Waiting to be read: from the size prefix read until the handler task
    /// first runs. It covers the wait for the in-flight byte budgets, the
    /// read of the rest of the frame and the wait in the shard's run queue.
    /// Time the frame spent in the kernel's socket buffer before the reader
    /// asked for it is not seen; the reader asks as soon as it has handed
    /// on the previous frame, unless `REQUESTS_IN_FLIGHT_MAX` answers are
    /// already waiting for the writer.
    ReadWait,
    /// Request header and body decoding.
    Decode,
    /// The handler's own work outside the stages below: routing, splitting
    /// batches, starting and joining per-partition tasks (and their waits
    /// in the run queue), auto-creating topics. For APIs without a
    /// breakdown (all but Produce) it is the whole handler, a Fetch's
    /// long-poll wait included.
    Handle,
    /// Cross-shard hop, both ways: call → owner starts the append, and
    /// owner done → caller resumes (a plain call when the owner is local,
    /// so near zero there).
    Hop,
    /// Waiting for the partition's write permit (held by the writer of
    /// the previous run, which may write this batch too).
    Permit,
    /// Rolling to a new segment inside an append (seal, indices, new file).
    Roll,
    /// The DMA write of the run holding the batch (preallocation included)
    /// and making it visible.
    DmaWrite,
    /// Waiting for an fdatasync that covers the batch (acks=all): the sync
    /// permit, then the sync.
    Fsync,
    /// The owner's append work outside the waits and I/O above: batch
    /// checks (CRC), idempotence, queueing.
    Append,
    /// Encoding the response.
    Encode,
    /// The response is ready but waits for the answers before it on the
    /// connection to be written (answers go out in request order).
    ResponseWait,
    /// Writing the response to the socket.
    SocketWrite,
}

pub const STAGES: [Stage; 12] = [
    Stage::ReadWait,
    Stage::Decode,
    Stage::Handle,
    Stage::Hop,
    Stage::Permit,
    Stage::Roll,
    Stage::DmaWrite,
    Stage::Fsync,
    Stage::Append,
    Stage::Encode,
    Stage::ResponseWait,
    Stage::SocketWrite,
];

impl Stage {
    pub fn name(self) -> &'static str {
        match self {
            Stage::ReadWait => "read_wait",
            Stage::Decode => "decode",
            Stage::Handle => "handle",
            Stage::Hop => "cross_shard_hop",
            Stage::Permit => "write_permit",
            Stage::Roll => "segment_roll",
            Stage::DmaWrite => "dma_write",
            Stage::Fsync => "fdatasync",
            Stage::Append => "append",
            Stage::Encode => "encode",
            Stage::ResponseWait => "response_wait",
            Stage::SocketWrite => "socket_write",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The stages of one partition's append, measured where they happen (the
/// owner shard) and carried back with the answer. `Send`: it crosses cores.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct AppendStages {
    pub hop: Duration,
    pub permit: Duration,
    pub roll: Duration,
    pub write: Duration,
    pub fsync: Duration,
    pub append: Duration,
}

impl AppendStages {
    pub fn add(&mut self, other: &AppendStages) {
        self.hop += other.hop;
        self.permit += other.permit;
        self.roll += other.roll;
        self.write += other.write;
        self.fsync += other.fsync;
        self.append += other.append;
    }

    pub fn sum(&self) -> Duration {
        self.hop + self.permit + self.roll + self.write + self.fsync + self.append
    }
}

/// One request's laps. Plain cells: a request lives on one shard.
#[derive(Debug)]
pub struct RequestTrace {
    started: Instant,
    /// The end of the last stage charged.
    mark: Cell<Instant>,
    spent: [Cell<Duration>; STAGES.len()],
}

impl RequestTrace {
    pub fn start(at: Instant) -> Self {
        Self { started: at, mark: Cell::new(at), spent: Default::default() }
    }

    /// Charges the time since the last lap to `stage`.
    pub fn lap(&self, stage: Stage) {
        let now = Instant::now();
        self.charge(stage, now.saturating_duration_since(self.mark.get()));
        self.mark.set(now);
    }

    /// Charges the time since the last lap along a critical path measured
    /// elsewhere: `path`'s stages, and the rest of the interval to
    /// [`Stage::Handle`]. `path` lies inside the interval.
    pub fn lap_through(&self, path: &AppendStages) {
        let now = Instant::now();
        let elapsed = now.saturating_duration_since(self.mark.get());
        self.charge(Stage::Hop, path.hop);
        self.charge(Stage::Permit, path.permit);
        self.charge(Stage::Roll, path.roll);
        self.charge(Stage::DmaWrite, path.write);
        self.charge(Stage::Fsync, path.fsync);
        self.charge(Stage::Append, path.append);
        self.charge(Stage::Handle, elapsed.saturating_sub(path.sum()));
        self.mark.set(now);
    }

    fn charge(&self, stage: Stage, d: Duration) {
        let cell = &self.spent[stage.index()];
        cell.set(cell.get() + d);
    }

    /// Time from the size prefix to the last lap.
    pub fn total(&self) -> Duration {
        self.mark.get().saturating_duration_since(self.started)
    }

    pub fn spent(&self, stage: Stage) -> Duration {
        self.spent[stage.index()].get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn laps_tile_the_interval_and_a_critical_path_leaves_the_rest_to_handle() {
        let trace = RequestTrace::start(Instant::now());
        std::thread::sleep(Duration::from_millis(2));
        trace.lap(Stage::ReadWait);
        std::thread::sleep(Duration::from_millis(3));
        let path =
            AppendStages { permit: Duration::from_millis(1), fsync: Duration::from_millis(1), ..Default::default() };
        trace.lap_through(&path);
        let sum: Duration = STAGES.iter().map(|s| trace.spent(*s)).sum();
        assert_eq!(sum, trace.total());
        assert!(trace.spent(Stage::ReadWait) >= Duration::from_millis(2));
        assert_eq!(trace.spent(Stage::Permit), Duration::from_millis(1));
        assert!(trace.spent(Stage::Handle) >= Duration::from_millis(1));
    }
}
