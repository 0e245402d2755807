//! A client program run as a child process (kcat, node), its stdout read
//! line by line in the background so the test can react to what it prints.

use std::{
    io::{BufRead, BufReader},
    process::{Child, Command, ExitStatus, Stdio},
    sync::mpsc::{channel, Receiver, RecvTimeoutError},
    time::{Duration, Instant},
};

pub struct Lines {
    child: Child,
    rx: Receiver<String>,
    /// Every stdout line received so far.
    pub seen: Vec<String>,
    stderr: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Lines {
    pub fn spawn(mut cmd: Command) -> Self {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("start {cmd:?}: {e} (tests/run-all.sh installs it)"));
        let (tx, rx) = channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let (pipe, sink) = (child.stderr.take().unwrap(), stderr.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                let mut s = sink.lock().unwrap();
                s.push_str(&line);
                s.push('\n');
            }
        });
        Self { child, rx, seen: Vec::new(), stderr }
    }

    /// Takes the lines printed so far without waiting.
    pub fn drain(&mut self) {
        while let Ok(line) = self.rx.try_recv() {
            self.seen.push(line);
        }
    }

    /// Waits up to `timeout` for a line equal to `wanted`.
    pub fn wait_for(&mut self, wanted: &str, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        if self.seen.iter().any(|l| l == wanted) {
            return true;
        }
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.rx.recv_timeout(left) {
                Ok(line) => {
                    let hit = line == wanted;
                    self.seen.push(line);
                    if hit {
                        return true;
                    }
                }
                Err(RecvTimeoutError::Timeout) => return false,
                Err(RecvTimeoutError::Disconnected) => return false,
            }
        }
        false
    }

    /// The exit status once the program has ended, if it has.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().unwrap()
    }

    /// Waits up to `timeout` for the program to end (killing it then), and
    /// returns its status and every stdout line.
    pub fn finish(mut self, timeout: Duration) -> (Option<ExitStatus>, Vec<String>, String) {
        let deadline = Instant::now() + timeout;
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break Some(s);
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        // The reader thread ends at EOF; collect what it still holds.
        while let Ok(line) = self.rx.recv_timeout(Duration::from_secs(2)) {
            self.seen.push(line);
        }
        let stderr = self.stderr.lock().unwrap().clone();
        (status, std::mem::take(&mut self.seen), stderr)
    }
}

impl Drop for Lines {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
