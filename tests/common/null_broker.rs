//! Runs `shardlog bench null-broker` (the real binary) on 127.0.0.1.

use std::{
    io::{BufRead, BufReader},
    process::{Child, Command, Stdio},
    sync::mpsc,
    time::Duration,
};

pub struct NullBroker {
    child: Child,
    pub port: u16,
}

impl NullBroker {
    /// Starts on a free port, on one core (the default), and waits for its
    /// "listening" line.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// On the cores of `cpuset` (e.g. "0-1"), one node per core.
    pub fn start_on(cpuset: &str) -> Self {
        Self::start_with(&["--cpuset", cpuset])
    }

    fn start_with(extra: &[&str]) -> Self {
        let port = super::broker::free_port();
        let mut child = Command::new(env!("CARGO_BIN_EXE_shardlog"))
            .args(["bench", "null-broker", "--listen", &format!("127.0.0.1:{port}")])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start shardlog bench null-broker");
        let (tx, rx) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line.contains("null broker listening on") {
                    let _ = tx.send(line);
                }
            }
        });
        match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(line) => assert!(line.contains(&format!("127.0.0.1:{port}")), "listening elsewhere: {line}"),
            Err(_) => {
                let _ = child.kill();
                panic!("the null broker did not start");
            }
        }
        Self { child, port }
    }

    pub fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for NullBroker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
