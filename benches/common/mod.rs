//! What every bench prints beside its figures: the machine and the commit,
//! and the median it reports.

/// `machine: <cpu>, <n> cores, kernel <release>` and `commit: <hash>[ (dirty)]`.
pub fn machine_and_commit() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let git = |args: &[&str]| std::process::Command::new("git").args(args).output().ok();
    let commit = git(&["rev-parse", "--short", "HEAD"])
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let dirty = git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|o| !o.stdout.is_empty());
    // Online CPUs of the machine, not of this thread (benches pin
    // themselves before printing, which narrows available_parallelism).
    let cores = std::fs::read_to_string("/proc/cpuinfo")
        .map(|s| s.lines().filter(|l| l.starts_with("processor")).count())
        .unwrap_or(0);
    format!(
        "machine: {cpu}, {cores} cores, kernel {}\ncommit: {commit}{}",
        kernel.trim(),
        if dirty { " (dirty)" } else { "" }
    )
}

/// Runs `f` on a glommio executor pinned to `core` and returns its result
/// (a bench's whole measurement, away from the thread that prints).
#[allow(dead_code)]
pub fn pinned<F, Fut, T>(core: usize, f: F) -> T
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = T> + 'static,
    T: Send + 'static,
{
    glommio::LocalExecutorBuilder::new(glommio::Placement::Fixed(core))
        .spawn(f)
        .expect("start pinned executor")
        .join()
        .expect("bench executor")
}

#[allow(dead_code)]
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).expect("figures are not NaN"));
    v[v.len() / 2]
}

/// A small deterministic generator (SplitMix64) for picking keys.
pub struct SplitMix(pub u64);

#[allow(dead_code)]
impl SplitMix {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// A server process, killed when dropped (also when a bench panics).
pub struct Process(pub std::process::Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `shardlog serve` with one shard pinned to core 0, listening on `listen`,
/// once it says it is listening.
#[allow(dead_code)]
pub fn start_broker(listen: &str, dir: &std::path::Path) -> Process {
    use std::io::Read;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_shardlog"))
        .args(["serve", "--listen", listen, "--cores", "1", "--cpuset", "0", "--metrics-listen", "127.0.0.1:0"])
        .arg("--data-dir")
        .arg(dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start broker");
    let mut out = child.stdout.take().unwrap();
    let mut seen = Vec::new();
    let mut b = [0u8; 256];
    while !String::from_utf8_lossy(&seen).contains("listening") {
        let n = out.read(&mut b).unwrap();
        assert!(n > 0, "broker exited");
        seen.extend_from_slice(&b[..n]);
    }
    Process(child)
}
