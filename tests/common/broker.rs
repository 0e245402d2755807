//! Runs the real `shardlog serve` binary on 127.0.0.1 for protocol tests.

use std::{
    io::{BufRead, BufReader},
    net::TcpListener,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::mpsc,
    time::Duration,
};

pub struct Broker {
    child: Option<Child>,
    pub port: u16,
    pub data_dir: PathBuf,
    pub cores: usize,
    /// A `--config` file, kept for restarts.
    pub config: Option<PathBuf>,
    /// Lines the broker wrote to stderr (its log), collected in the background.
    pub log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    /// The `/metrics` URL the broker announced (tests ask for port 0).
    pub metrics_url: String,
    /// The core the whole process is confined to (`taskset -c`), if any.
    pub confined_to: Option<usize>,
}

/// A port nobody listens on right now, below the ephemeral range
/// (32768–60999), so no client connection can be using it as its source
/// port when the broker restarts on it.
pub fn free_port() -> u16 {
    let seed = std::process::id() as u64
        ^ std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
    let mut rng = super::Rng::new(seed);
    for _ in 0..1000 {
        let port = 20_000 + rng.below(12_000) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in 20000..32000");
}

impl Broker {
    pub fn start(data_dir: &Path, cores: usize) -> Self {
        Self::start_on(data_dir, free_port(), cores, &[])
    }

    pub fn start_on(data_dir: &Path, port: u16, cores: usize, env: &[(&str, &str)]) -> Self {
        Self::launch(data_dir, port, cores, env, None, None)
    }

    /// One shard, with the whole process (helper threads included) confined
    /// to `cpu` by `taskset -c`, as an operator might.
    /// `toml`, when not empty, is a config file's settings, as in
    /// `start_with_config`.
    pub fn start_confined(data_dir: &Path, cpu: usize, toml: &str) -> Self {
        let config = (!toml.is_empty()).then(|| {
            let path = data_dir.with_extension("toml");
            std::fs::write(&path, toml).unwrap();
            path
        });
        Self::launch(data_dir, free_port(), 1, &[], config, Some(cpu))
    }

    /// Starts with extra settings in a TOML config file (written beside the
    /// data directory), which restarts keep using.
    pub fn start_with_config(data_dir: &Path, cores: usize, toml: &str, env: &[(&str, &str)]) -> Self {
        let config = data_dir.with_extension("toml");
        std::fs::write(&config, toml).unwrap();
        Self::launch(data_dir, free_port(), cores, env, Some(config), None)
    }

    /// Starts with its bootstrap port on a listener of `protocol` (e.g.
    /// SASL_PLAINTEXT, named after it) instead of PLAINTEXT, and `toml`'s
    /// other settings; restarts keep both.
    pub fn start_secured(data_dir: &Path, cores: usize, protocol: &str, toml: &str) -> Self {
        let port = free_port();
        let config = data_dir.with_extension("toml");
        let listener = format!(
            "[[listeners]]\nname = \"{protocol}\"\naddress = \"127.0.0.1:{port}\"\nprotocol = \"{protocol}\"\n"
        );
        // Top-level keys first: a key after a table header would belong to it.
        let (top, tables) = toml.find("\n[").map_or((toml, ""), |i| toml.split_at(i + 1));
        std::fs::write(&config, format!("{top}\n{listener}\n{tables}")).unwrap();
        Self::launch(data_dir, port, cores, &[], Some(config), None)
    }

    fn launch(
        data_dir: &Path,
        port: u16,
        cores: usize,
        env: &[(&str, &str)],
        config: Option<PathBuf>,
        confined_to: Option<usize>,
    ) -> Self {
        let mut cmd = match confined_to {
            Some(cpu) => {
                let mut c = Command::new("taskset");
                c.args(["-c", &cpu.to_string(), env!("CARGO_BIN_EXE_shardlog")]);
                c
            }
            None => Command::new(env!("CARGO_BIN_EXE_shardlog")),
        };
        cmd.arg("serve");
        if let Some(c) = &config {
            cmd.arg("--config").arg(c);
        }
        // A config that names a listener on `port` itself (`start_secured`)
        // needs no PLAINTEXT shorthand there.
        let own = format!("\"127.0.0.1:{port}\"");
        if !config.as_ref().is_some_and(|c| std::fs::read_to_string(c).unwrap_or_default().contains(&own)) {
            cmd.args(["--listen", &format!("127.0.0.1:{port}")]);
        }
        cmd.args(["--cores", &cores.to_string()])
            .args(["--metrics-listen", "127.0.0.1:0"])
            .arg("--data-dir")
            .arg(data_dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("start shardlog serve");
        let (tx, rx) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line.contains("listening on") {
                    let url = line.split("metrics at ").nth(1).and_then(|r| r.split_whitespace().next());
                    let _ = tx.send(url.unwrap_or_default().to_string());
                }
            }
        });
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (stderr, sink) = (child.stderr.take().unwrap(), log.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        let ready = rx.recv_timeout(Duration::from_secs(20));
        if ready.is_err() {
            let _ = child.kill();
            let sockets =
                Command::new("ss").arg("-ltnp").output().map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
            panic!("broker did not start; log: {:?}; listening sockets: {sockets:?}", log.lock().unwrap());
        }
        let metrics_url = ready.unwrap_or_default();
        Self {
            child: Some(child),
            port,
            data_dir: data_dir.to_path_buf(),
            cores,
            config,
            log,
            metrics_url,
            confined_to,
        }
    }

    pub fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn pid(&self) -> i32 {
        self.child.as_ref().expect("running").id() as i32
    }

    /// SIGTERM, then wait: the broker must exit 0 after a clean shutdown.
    pub fn stop(&mut self) {
        let mut child = self.child.take().expect("running");
        // kill(1) sends SIGTERM without unsafe code in the tests.
        let status = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
        assert!(status.success());
        let status = child.wait().unwrap();
        assert!(status.success(), "broker exited with {status} after SIGTERM; log: {:?}", self.log.lock().unwrap());
    }

    /// SIGKILL: no chance to flush or close anything.
    pub fn kill(&mut self) {
        let mut child = self.child.take().expect("running");
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// Starts again on the same port and data directory.
    pub fn restart(&mut self) {
        let next =
            Self::launch(&self.data_dir.clone(), self.port, self.cores, &[], self.config.clone(), self.confined_to);
        *self = next;
    }

    /// Waits up to 5 s for a log line containing `needle` (stderr is read by
    /// a background thread, so a line the broker just wrote may not be here
    /// yet); returns the whole log for messages.
    pub fn wait_for_log(&self, needle: &str) -> (bool, String) {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            let log = self.log.lock().unwrap().join("\n");
            if log.contains(needle) {
                return (true, log);
            }
            if std::time::Instant::now() > deadline {
                return (false, log);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// CPU time (user + system) the broker process has used so far.
    pub fn cpu_time(&self) -> Duration {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid())).unwrap();
        let fields: Vec<&str> = stat.rsplit_once(')').unwrap().1.split_whitespace().collect();
        let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
        let hz = 100; // USER_HZ on Linux
        Duration::from_millis(ticks * 1000 / hz)
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // The broker's side of a failed test: its last log lines.
            let log = self.log.lock().unwrap_or_else(|p| p.into_inner());
            // SHARDLOG_TEST_LOG_LINES asks for more than the last 40.
            let lines = std::env::var("SHARDLOG_TEST_LOG_LINES").ok().and_then(|n| n.parse().ok()).unwrap_or(40);
            let tail = &log[log.len().saturating_sub(lines)..];
            eprintln!("--- last log lines of the broker in {} ---\n{}", self.data_dir.display(), tail.join("\n"));
        }
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The broker's `/metrics` page, fetched with curl (tests/run-all.sh installs it).
pub fn metrics_text(broker: &Broker) -> String {
    let out = Command::new("curl").args(["-sf", &broker.metrics_url]).output().expect("run curl");
    assert!(out.status.success(), "scrape {}", broker.metrics_url);
    String::from_utf8(out.stdout).expect("metrics are UTF-8")
}

/// The sum of the samples of family `name` (a counter's samples end in
/// `_total`) whose line contains `filter` (a label value, or "" for all).
pub fn metric_sum(text: &str, name: &str, filter: &str) -> f64 {
    let total = format!("{name}_total");
    text.lines()
        .filter(|l| !l.starts_with('#') && l.contains(filter))
        .filter_map(|l| l.rsplit_once(' '))
        .filter(|(series, _)| series.split('{').next().is_some_and(|s| s == name || s == total))
        .map(|(_, v)| v.parse::<f64>().unwrap_or(f64::NAN))
        .sum()
}
