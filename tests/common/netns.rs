//! Brokers in network namespaces of their own, joined by a bridge, so a
//! test can cut one off (its link to the bridge down) and heal it: the
//! network partitions of issue 18's tests. Needs root and `ip` (iproute2);
//! each test makes and removes its own bridge and namespaces.

use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};

pub const KAFKA_PORT: u16 = 9092;
pub const CONTROLLER_PORT: u16 = 9093;

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip (iproute2)");
    assert!(out.status.success(), "ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
}

/// A bridge in this namespace and three namespaces on it, 10.`subnet`.0.1-3;
/// the bridge is 10.`subnet`.0.254, so this test reaches every broker.
/// Test binaries that run at once use different subnets. Removed on drop.
pub struct Net {
    tag: u32,
    pub subnet: u8,
}

impl Net {
    pub fn new(subnet: u8) -> Self {
        let net = Self { tag: std::process::id() % 100_000, subnet };
        let bridge = net.bridge();
        ip(&["link", "add", &bridge, "type", "bridge"]);
        ip(&["addr", "add", &format!("10.{subnet}.0.254/24"), "dev", &bridge]);
        ip(&["link", "set", &bridge, "up"]);
        for n in 1..=3 {
            let (ns, outside, inside) = (net.ns(n), net.outside(n), format!("sp{}{n}", net.tag));
            ip(&["netns", "add", &ns]);
            ip(&["link", "add", &outside, "type", "veth", "peer", "name", &inside]);
            ip(&["link", "set", &inside, "netns", &ns]);
            ip(&["link", "set", &outside, "master", &bridge, "up"]);
            ip(&["netns", "exec", &ns, "ip", "addr", "add", &format!("10.{subnet}.0.{n}/24"), "dev", &inside]);
            ip(&["netns", "exec", &ns, "ip", "link", "set", &inside, "up"]);
            ip(&["netns", "exec", &ns, "ip", "link", "set", "lo", "up"]);
        }
        net
    }

    fn bridge(&self) -> String {
        format!("slb{}", self.tag)
    }

    fn ns(&self, n: i32) -> String {
        format!("sl{}-{n}", self.tag)
    }

    /// Broker `n`'s link to the bridge, on this side.
    fn outside(&self, n: i32) -> String {
        format!("sv{}{n}", self.tag)
    }

    /// Cuts broker `n` off from the others and from this test (down), or
    /// heals it (up).
    pub fn set_link(&self, n: i32, up: bool) {
        ip(&["link", "set", &self.outside(n), if up { "up" } else { "down" }]);
    }

    pub fn host(&self, n: i32) -> String {
        format!("10.{}.0.{n}", self.subnet)
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for n in 1..=3 {
            let _ = Command::new("ip").args(["link", "del", &self.outside(n)]).status();
            let _ = Command::new("ip").args(["netns", "del", &self.ns(n)]).status();
        }
        let _ = Command::new("ip").args(["link", "del", &self.bridge()]).status();
    }
}

/// `shardlog serve` inside broker `node`'s namespace, one of three voters,
/// with its data in `dir/b<node>` and `settings` (TOML lines) in
/// `dir/b<node>.toml`; SIGKILLed on drop.
pub struct NsBroker {
    pub node: i32,
    child: Option<Child>,
    command: Vec<String>,
    pub data_dir: PathBuf,
}

impl NsBroker {
    pub fn start(net: &Net, node: i32, dir: &Path, settings: &str) -> Self {
        let quorum = (1..=3).map(|i| format!("{i}@{}:{CONTROLLER_PORT}", net.host(i))).collect::<Vec<_>>().join(",");
        let config = dir.join(format!("b{node}.toml"));
        std::fs::write(&config, settings).unwrap();
        let data_dir = dir.join(format!("b{node}"));
        let command: Vec<String> = [
            "netns",
            "exec",
            &net.ns(node),
            env!("CARGO_BIN_EXE_shardlog"),
            "serve",
            "--config",
            &config.to_string_lossy(),
            "--node-id",
            &node.to_string(),
            "--controller-quorum",
            &quorum,
            "--listen",
            &format!("{}:{KAFKA_PORT}", net.host(node)),
            "--cores",
            "1",
            "--metrics-listen",
            "",
            "--data-dir",
            &data_dir.to_string_lossy(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let mut broker = Self { node, child: None, command, data_dir };
        broker.launch();
        broker
    }

    /// Starts the process (`ip netns exec` becomes it) and waits until it
    /// listens.
    fn launch(&mut self) {
        let mut child = Command::new("ip")
            .args(&self.command)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start shardlog in a namespace");
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                if line.contains("listening on") {
                    let _ = tx.send(());
                }
            }
        });
        rx.recv_timeout(Duration::from_secs(30)).expect("broker listening in its namespace");
        self.child = Some(child);
    }

    pub fn addr(&self) -> String {
        let at = self.command.iter().position(|a| a == "--listen").unwrap();
        self.command[at + 1].clone()
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts again on the same address and data directory.
    pub fn restart(&mut self) {
        self.kill();
        self.launch();
    }

    /// Sends `sig` (e.g. -STOP) to the broker's process.
    pub fn signal(&self, sig: &str) {
        let status = Command::new("kill").args([sig, &self.pid().to_string()]).status().unwrap();
        assert!(status.success(), "kill {sig}");
    }
}

impl Drop for NsBroker {
    fn drop(&mut self) {
        self.kill();
    }
}
