//! `shardlog iotune` on the test machine's disk, bounded to a few seconds:
//! the profile it writes is complete and consistent, progress is shown, and
//! `serve --io-properties` reads it (and refuses a broken one by name).

mod common;

use std::process::{Command, Stdio};

fn shardlog() -> Command {
    Command::new(env!("CARGO_BIN_EXE_shardlog"))
}

#[test]
fn iotune_writes_a_profile_that_serve_reads() {
    let dir = common::tempdir().unwrap();
    let profile = dir.path().join("io-properties.toml");
    let out = shardlog()
        .args(["iotune", "--duration", "4s", "--file-bytes", "67108864", "--core", "0"])
        .arg("--dir")
        .arg(dir.path().join("disk"))
        .arg("--output")
        .arg(&profile)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "iotune failed: {stderr}");
    assert!(stderr.contains("[ 1/22]") && stderr.contains("[22/22]"), "progress per step: {stderr}");
    let text = std::fs::read_to_string(&profile).unwrap();
    let v: toml::Value = toml::from_str(&text).unwrap();
    let f = |k: &str| {
        v[k].as_float().or_else(|| v[k].as_integer().map(|i| i as f64)).unwrap_or_else(|| panic!("{k} in {text}"))
    };
    for key in ["write_bandwidth_mb_per_s", "read_bandwidth_mb_per_s", "random_read_iops_qd1", "random_read_iops_qd32"]
    {
        assert!(f(key) > 0.0, "{key} = {}", f(key));
    }
    let (p50, p99, max) = (f("fdatasync_p50_us"), f("fdatasync_p99_us"), f("fdatasync_max_us"));
    assert!(f("fdatasync_count") > 0.0 && p50 <= p99 && p99 <= max, "fdatasync {p50} {p99} {max}");
    let (a50, a99, amax) = (f("append_write_p50_us"), f("append_write_p99_us"), f("append_write_max_us"));
    assert!(f("append_write_count") > 0.0 && a50 <= a99 && a99 <= amax, "append writes {a50} {a99} {amax}");
    let writes = v["write"].as_array().unwrap();
    let reads = v["read"].as_array().unwrap();
    assert_eq!((writes.len(), reads.len()), (9, 9), "3 block sizes × 3 queue depths each");
    let best = writes.iter().map(|s| s["mb_per_s"].as_float().unwrap()).fold(0.0, f64::max);
    assert_eq!(best, f("write_bandwidth_mb_per_s"), "the headline is the best step");
    assert!([1.0, 4.0, 16.0].contains(&f("read_saturation_queue_depth")));
    assert!(!std::fs::read_dir(dir.path().join("disk")).unwrap().any(|_| true), "test files removed");

    // serve reads it.
    let port = common::broker::free_port();
    let mut child = shardlog()
        .args(["serve", "--cores", "1", "--metrics-listen", "", "--listen", &format!("127.0.0.1:{port}")])
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .arg("--io-properties")
        .arg(&profile)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut banner = String::new();
    use std::io::BufRead;
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    while let Some(Ok(line)) = lines.next() {
        banner += &line;
        banner += "\n";
        if line.contains("listening on") {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(banner.contains("disk profile") && banner.contains("concurrent reads per shard"), "{banner}");

    // A broken profile is refused, by name.
    let broken = dir.path().join("broken.toml");
    std::fs::write(&broken, "write_bandwidth_mb_per_s = \"fast\"\n").unwrap();
    let out = shardlog()
        .args(["serve", "--cores", "1", "--metrics-listen", "", "--listen", &format!("127.0.0.1:{port}")])
        .arg("--data-dir")
        .arg(dir.path().join("data2"))
        .arg("--io-properties")
        .arg(&broken)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("broken.toml"), "{}", String::from_utf8_lossy(&out.stderr));
}
