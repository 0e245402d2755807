//! What the storage unit tests share: a directory on a real file system, a
//! glommio executor to run a test in, and a partition log opened there.

use std::{path::Path, rc::Rc};

use super::{Clock, Faults, LogConfig, PartitionLog, PartitionName};

/// A fresh directory under `target/unit-tmp`: direct I/O needs a real file
/// system, not the tmpfs /tmp may be.
pub fn tempdir() -> tempfile::TempDir {
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("target").join("unit-tmp");
    std::fs::create_dir_all(&base).expect("create target/unit-tmp");
    tempfile::tempdir_in(base).expect("tempdir")
}

/// Runs a test body on a glommio executor of its own.
pub fn run<Fut: std::future::Future<Output = ()> + 'static>(f: impl FnOnce() -> Fut + Send + 'static) {
    glommio::LocalExecutorBuilder::default().spawn(f).expect("executor").join().expect("test thread");
}

/// Opens (recovering) the log of partition `name` in `dir`.
pub async fn open_log(dir: &Path, name: &str, config: &LogConfig) -> Rc<PartitionLog> {
    let name = PartitionName(name.to_string());
    let (log, _) = PartitionLog::open(dir, name, config.clone(), Clock::System, Faults::default())
        .await
        .unwrap_or_else(|e| panic!("open {}: {e}", dir.display()));
    Rc::new(log)
}
