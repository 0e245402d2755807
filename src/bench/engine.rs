//! The load generator's event loops: one glommio executor per load core.
//!
//! Every task of a run — a sender, the receivers of its connections and,
//! end to end, the fetchers — runs as a task on the executor of its core.
//! Nothing else competes for that core: no threads taking turns, no
//! spin-waits fighting each other. Sockets are non-blocking; a task that
//! waits for the network or a timer yields to the others.
//!
//! Timing: a sender that waits for a record's intended time sleeps until
//! `spin` before it, then arms a timer for the exact instant, and the
//! executor spins (polling sockets and timers, so receivers still run) for
//! at most `spin` before parking. A parked thread wakes tens of
//! microseconds late on a virtual machine; the spin keeps that out of the
//! schedule, at the cost of CPU that the generator's own core pays. On a
//! core shared with other work the spinning costs the generator the
//! scheduler's favour instead: `--spin 0` never spins.

use std::{
    cell::{Cell, RefCell},
    future::Future,
    pin::Pin,
    task::{Poll, Waker},
    time::{Duration, Instant},
};

use glommio::{timer::Timer, LocalExecutorBuilder, Placement};

/// How long before a due instant a waiting task stops sleeping and the
/// executor starts spinning, by default: above a parked thread's wake-up
/// delay on the machines we measured (p99 well under 100 µs), so the due
/// instant is met by the spin, not by the wake-up.
pub const SPIN_BEFORE_DUE_DEFAULT: Duration = Duration::from_micros(100);

/// A task that waits with no deadline wakes after this long to look again
/// (a lost connection, the end of the run), so no wait is unbounded.
const IDLE_WAIT: Duration = Duration::from_millis(50);

/// A task to run on a load core: built on that core's thread, since the
/// futures hold `Rc`s and glommio sockets that never cross threads.
pub type Job = Box<dyn FnOnce() -> Pin<Box<dyn Future<Output = ()>>> + Send>;

/// The running load cores.
pub struct LoadCores {
    handles: Vec<glommio::ExecutorJoinHandle<()>>,
}

/// Starts one executor per entry of `jobs`: the i-th pinned to `cores[i]`
/// (unpinned when `cores` has no i-th entry). Each runs its jobs to the end.
pub fn start(cores: &[usize], spin: Duration, jobs: Vec<Vec<Job>>) -> Result<LoadCores, String> {
    let mut handles = Vec::new();
    for (i, list) in jobs.into_iter().enumerate() {
        let placement = cores.get(i).map_or(Placement::Unbound, |&c| Placement::Fixed(c));
        let handle = LocalExecutorBuilder::new(placement)
            .name(&format!("bench-load-{i}"))
            .spin_before_park(spin)
            .spawn(move || async move {
                let tasks: Vec<_> = list.into_iter().map(|job| glommio::spawn_local(job())).collect();
                for t in tasks {
                    t.await;
                }
            })
            .map_err(|e| match cores.get(i) {
                Some(c) => format!("cannot start a load executor on core {c}: {e}"),
                None => format!("cannot start a load executor: {e}"),
            })?;
        handles.push(handle);
    }
    Ok(LoadCores { handles })
}

impl LoadCores {
    /// Waits for every executor; an executor that panicked is a bug in this
    /// tool, and is said so.
    pub fn join(self) -> Result<(), String> {
        let mut failed = 0;
        for h in self.handles {
            if h.join().is_err() {
                failed += 1;
            }
        }
        if failed > 0 {
            return Err(format!("{failed} load executor(s) failed (a bug in shardlog bench)"));
        }
        Ok(())
    }
}

/// Wakes one waiting task of the same executor: a receiver tells its
/// sender that an answer freed a slot.
pub struct Notify {
    notified: Cell<bool>,
    waker: RefCell<Option<Waker>>,
    /// How long before a deadline the wait stops sleeping (the executor's
    /// spin covers the rest).
    spin: Duration,
}

impl Notify {
    pub fn new(spin: Duration) -> Self {
        Self { notified: Cell::new(false), waker: RefCell::new(None), spin }
    }

    pub fn notify(&self) {
        self.notified.set(true);
        if let Some(w) = self.waker.borrow_mut().take() {
            w.wake();
        }
    }

    /// Returns at `deadline` or once notified (a notification since the
    /// last wait counts), whichever is first.
    pub async fn wait(&self, deadline: Option<Instant>) {
        let now = Instant::now();
        let deadline = deadline.unwrap_or(now + IDLE_WAIT);
        if self.notified.replace(false) || deadline <= now {
            return;
        }
        let early = deadline - self.spin;
        if early > now && !self.until(early).await {
            return;
        }
        // Close to the instant: an exact timer, met by the executor's spin.
        let now = Instant::now();
        if deadline > now {
            self.until(deadline).await;
        }
    }

    /// Sleeps until `at`; false if a notification came first.
    async fn until(&self, at: Instant) -> bool {
        let timer = Timer::new(at.saturating_duration_since(Instant::now()));
        let notified = std::future::poll_fn(|cx| {
            if self.notified.replace(false) {
                return Poll::Ready(false);
            }
            *self.waker.borrow_mut() = Some(cx.waker().clone());
            Poll::Pending
        });
        futures_lite::future::or(notified, async {
            timer.await;
            true
        })
        .await
    }
}
