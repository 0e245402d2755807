//! A full disk, for real: the broker's data directory is a small ext4
//! filesystem made for the test (an image file, loop-mounted; needs root,
//! as CI has). Produce with acks=all until the disk is full: the producer
//! gets KAFKA_STORAGE_ERROR (retriable); reads keep working; nothing
//! acknowledged is lost; once space is freed, writes resume; and after a
//! restart every acknowledged batch is still there.

mod common;

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::Command,
};

use common::{broker::Broker, random_batch, wire::*, Rng};
use kafka_protocol::messages::{ApiKey, FetchResponse};

const TOPIC: &str = "fills-the-disk";
const IMAGE_MB: u64 = 96;

/// The mounted filesystem; unmounted and removed on drop.
struct SmallDisk {
    mount: PathBuf,
    image: PathBuf,
}

impl SmallDisk {
    fn make(dir: &Path) -> Self {
        let image = dir.join("disk.img");
        let mount = dir.join("mnt");
        std::fs::create_dir_all(&mount).unwrap();
        run("truncate", &["-s", &format!("{IMAGE_MB}M"), image.to_str().unwrap()]);
        run("mkfs.ext4", &["-q", "-F", image.to_str().unwrap()]);
        run("mount", &["-o", "loop", image.to_str().unwrap(), mount.to_str().unwrap()]);
        Self { mount, image }
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.mount).status();
        let _ = std::fs::remove_file(&self.image);
    }
}

fn run(cmd: &str, args: &[&str]) {
    let out = Command::new(cmd).args(args).output().unwrap_or_else(|e| panic!("{cmd}: {e}"));
    assert!(out.status.success(), "{cmd} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

fn fetch_all(w: &mut Wire) -> Vec<u8> {
    let mut out = Vec::new();
    let mut next = 0i64;
    loop {
        let mut req = fetch_request(TOPIC, &[(0, next)], 0, 1);
        req.topics[0].partitions[0].partition_max_bytes = 4 << 20;
        let resp: FetchResponse = w.call(ApiKey::Fetch, 12, &req);
        let p = &resp.responses[0].partitions[0];
        assert_eq!(p.error_code, 0, "fetch at {next}");
        let records = p.records.clone().unwrap_or_default();
        if records.is_empty() {
            return out;
        }
        for (base, count) in batches(&records) {
            next = base + i64::from(count);
        }
        out.extend_from_slice(&records);
    }
}

/// Checks that every acknowledged batch is stored at its offset, unchanged.
fn check_acked(stored: &[u8], acked: &BTreeMap<i64, Vec<u8>>, when: &str) {
    let mut at = 0;
    let mut found = 0;
    for (base, _) in batches(stored) {
        let len = i32::from_be_bytes(stored[at + 8..at + 12].try_into().unwrap()) as usize + 12;
        if let Some(sent) = acked.get(&base) {
            let mut want = sent.clone();
            want[..8].copy_from_slice(&base.to_be_bytes());
            assert!(stored[at..at + len] == want[..], "{when}: batch at {base} differs");
            found += 1;
        }
        at += len;
    }
    assert_eq!(found, acked.len(), "{when}: every acknowledged batch is there");
}

#[test]
fn a_full_disk_refuses_writes_retriably_and_loses_nothing() {
    let dir = common::tempdir().unwrap();
    let disk = SmallDisk::make(dir.path());
    let data = disk.mount.join("data");
    // Small segments and preallocation, so the disk fills in the data path;
    // the smallest journal files (two of the default 32 MiB would take most
    // of this disk).
    let mut broker = Broker::start_with_config(
        &data,
        1,
        "offsets_topic_num_partitions = 1\ntransaction_state_log_num_partitions = 1\n\
         log_maintenance_interval_ms = 3600000\njournal_file_bytes = 8388608\n",
        &[],
    );
    let mut w = Wire::connect(&broker.bootstrap());
    assert_eq!(create_topic(&mut w, TOPIC, 1), 0);
    // Leave 40 MiB free (one 32 MiB preallocation step and a little more),
    // the rest held by a file the test can delete later.
    let filler = disk.mount.join("filler");
    let free_mb = {
        let out = Command::new("df").args(["--output=avail", "-m"]).arg(&disk.mount).output().unwrap();
        String::from_utf8_lossy(&out.stdout).lines().nth(1).unwrap().trim().parse::<u64>().unwrap()
    };
    run("fallocate", &["-l", &format!("{}M", free_mb.saturating_sub(40)), filler.to_str().unwrap()]);

    let mut rng = Rng::new(21);
    let mut acked: BTreeMap<i64, Vec<u8>> = BTreeMap::new();
    let mut refused = None;
    for _ in 0..2000 {
        let batch = random_batch(&mut rng, 40, 3000).to_vec();
        let (error, base) = produce(&mut w, TOPIC, 0, batch.clone().into(), -1);
        match error {
            0 => {
                acked.insert(base, batch);
            }
            other => {
                refused = Some(other);
                break;
            }
        }
    }
    assert_eq!(refused, Some(56), "a full disk answers KAFKA_STORAGE_ERROR ({} batches acknowledged)", acked.len());
    assert!(acked.len() > 10, "some batches fit before the disk filled");
    // Still full: refused again, and reads work.
    let batch = random_batch(&mut rng, 40, 3000).to_vec();
    assert_eq!(produce(&mut w, TOPIC, 0, batch.into(), -1).0, 56);
    check_acked(&fetch_all(&mut w), &acked, "with the disk full");

    // Space comes back: writes resume.
    std::fs::remove_file(&filler).unwrap();
    for _ in 0..20 {
        let batch = random_batch(&mut rng, 40, 3000).to_vec();
        let (error, base) = produce(&mut w, TOPIC, 0, batch.clone().into(), -1);
        assert_eq!(error, 0, "writes resume once space is freed");
        acked.insert(base, batch);
    }
    check_acked(&fetch_all(&mut w), &acked, "after space was freed");

    drop(w);
    broker.kill();
    broker.restart();
    let mut w = Wire::connect(&broker.bootstrap());
    check_acked(&fetch_all(&mut w), &acked, "after a SIGKILL and restart");
    drop(w);
    broker.stop();
}

/// The broker's own output on the disk that fills: its warnings about the
/// full disk then fail to be written. That used to panic the shard (a
/// failed `eprintln!`), dropping every connection. The broker must stay up
/// and keep answering, with KAFKA_STORAGE_ERROR for writes.
#[test]
fn a_broker_logging_to_the_full_disk_keeps_answering() {
    let dir = common::tempdir().unwrap();
    let disk = SmallDisk::make(dir.path());
    let log = disk.mount.join("broker.log");
    let port = common::broker::free_port();
    let out = std::fs::File::create(&log).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_shardlog"))
        .args(["serve", "--cores", "1", "--metrics-listen", ""])
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .arg("--data-dir")
        .arg(disk.mount.join("data"))
        .env("SHARDLOG_LOG", "debug")
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .unwrap();
    for _ in 0..200 {
        if std::fs::read_to_string(&log).unwrap_or_default().contains("listening on") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let mut w = Wire::connect(&format!("127.0.0.1:{port}"));
    assert_eq!(create_topic(&mut w, TOPIC, 4), 0);
    let mut rng = Rng::new(23);
    let mut refused = 0;
    for i in 0..4000 {
        let batch = random_batch(&mut rng, 32, 4096).freeze();
        let (code, _) = produce(&mut w, TOPIC, i % 4, batch, -1);
        match code {
            0 => {}
            56 => refused += 1,
            other => panic!("produce {i}: error {other}"),
        }
        // Well past the point where the log file could grow any more.
        if refused >= 200 {
            break;
        }
    }
    assert!(refused >= 200, "the disk filled ({refused} writes refused)");
    assert!(child.try_wait().unwrap().is_none(), "the broker is still running");
    // The same connection and a new one are still answered (a small write
    // may still fit in blocks reserved before; a large one may not).
    let batch = random_batch(&mut rng, 1, 16).freeze();
    let code = produce(&mut w, TOPIC, 0, batch, 1).0;
    assert!(code == 0 || code == 56, "a write on the same connection: {code}");
    let mut fresh = Wire::connect(&format!("127.0.0.1:{port}"));
    let mut req = fetch_request(TOPIC, &[(0, 0)], 0, 1);
    req.topics[0].partitions[0].partition_max_bytes = 1 << 16;
    let resp: FetchResponse = fresh.call(ApiKey::Fetch, 12, &req);
    assert_eq!(resp.responses[0].partitions[0].error_code, 0, "a new connection reads what was stored");
    Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    let status = child.wait().unwrap();
    assert!(status.code().is_some(), "it exited on SIGTERM rather than by a signal: {status:?}");
}
