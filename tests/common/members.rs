//! Consumer-group members in their own processes, so a test can SIGKILL one
//! (it then stops heartbeating without leaving the group). A member prints
//! `ASSIGNED p,q,…` whenever its assignment changes; this keeps the latest.

use std::{
    collections::BTreeSet,
    io::{BufRead, BufReader},
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

pub struct Member {
    child: Child,
    assignment: Arc<Mutex<BTreeSet<i32>>>,
}

impl Member {
    /// Starts `cmd` (its stdout is read for `ASSIGNED` lines).
    pub fn spawn(mut cmd: Command) -> Self {
        let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().expect("start member");
        let assignment = Arc::new(Mutex::new(BTreeSet::new()));
        let (out, seen) = (child.stdout.take().unwrap(), assignment.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if let Some(list) = line.strip_prefix("ASSIGNED ") {
                    *seen.lock().unwrap() =
                        list.split(',').filter(|s| !s.is_empty()).map(|s| s.parse().unwrap()).collect();
                }
            }
        });
        Self { child, assignment }
    }

    pub fn assignment(&self) -> BTreeSet<i32> {
        self.assignment.lock().unwrap().clone()
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Whether the sets together hold exactly partitions `0..partitions`.
pub fn covers_all(sets: &[BTreeSet<i32>], partitions: i32) -> bool {
    let all: BTreeSet<i32> = sets.iter().flatten().copied().collect();
    all == (0..partitions).collect()
}

/// Polls `done` until it holds; fails the test after `limit`.
pub fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}
