//! `shardlog tune` against fake /sys, /proc and /etc trees built here:
//! every decision, the exit codes, `apply --dry-run` commands and a real
//! `apply` (then undo) on the fake tree.

mod common;

use std::{
    path::Path,
    process::{Command, Output},
};

use serde_json::Value;

fn put(root: &Path, rel: &str, content: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

/// A 4-CPU host left untuned: powersave, deep C-state enabled, NIC and
/// NVMe interrupts on every core, THP always, default sysctls and limits,
/// hpet, an NVMe disk with mq-deadline.
fn untuned(root: &Path) {
    put(root, "sys/devices/system/cpu/online", "0-3\n");
    for c in 0..4 {
        put(root, &format!("sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor"), "powersave\n");
        for (s, name, latency) in [(0, "POLL", 0), (1, "C1", 2), (2, "C6", 133)] {
            let d = format!("sys/devices/system/cpu/cpu{c}/cpuidle/state{s}");
            put(root, &format!("{d}/name"), &format!("{name}\n"));
            put(root, &format!("{d}/latency"), &format!("{latency}\n"));
            put(root, &format!("{d}/disable"), "0\n");
        }
    }
    put(
        root,
        "proc/interrupts",
        "           CPU0       CPU1       CPU2       CPU3\n\
          0:         10          0          0          0   IO-APIC   2-edge      timer\n\
         40:        100        200        300        400   PCI-MSI 1-edge      nvme0q0\n\
         41:        100        200        300        400   PCI-MSI 2-edge      nvme0q1\n\
         50:        100        200        300        400   PCI-MSI 3-edge      enp3s0f0-TxRx-0\n\
        NMI:          0          0          0          0   Non-maskable interrupts\n",
    );
    for irq in [0, 40, 41, 50] {
        put(root, &format!("proc/irq/{irq}/smp_affinity_list"), "0-3\n");
    }
    put(root, "proc/1/comm", "systemd\n");
    put(root, "proc/812/comm", "irqbalance\n");
    put(root, "proc/78/comm", "kdamond.0\n");
    put(root, "proc/78/status", "Name:\tkdamond.0\nCpus_allowed:\tf\nCpus_allowed_list:\t0-3\n");
    put(root, "sys/devices/virtual/workqueue/cpumask", "f\n");
    put(root, "sys/kernel/mm/transparent_hugepage/enabled", "[always] madvise never\n");
    put(root, "proc/sys/vm/swappiness", "60\n");
    put(root, "proc/sys/fs/aio-max-nr", "65536\n");
    put(
        root,
        "proc/self/limits",
        "Limit                     Soft Limit           Hard Limit           Units     \n\
         Max open files            1024                 524288               files     \n\
         Max locked memory         8388608              8388608              bytes     \n",
    );
    put(root, "sys/devices/system/clocksource/clocksource0/current_clocksource", "hpet\n");
    put(root, "sys/devices/system/clocksource/clocksource0/available_clocksource", "tsc hpet acpi_pm\n");
    put(root, "sys/block/nvme0n1/queue/scheduler", "[mq-deadline] kyber none\n");
    put(root, "sys/block/nvme0n1/queue/nomerges", "0\n");
    put(root, "sys/block/nvme0n1/queue/write_cache", "write back\n");
    put(root, "sys/block/sda/queue/scheduler", "[mq-deadline] none\n");
    put(root, "proc/sys/net/core/rmem_max", "212992\n");
    put(root, "proc/sys/net/core/wmem_max", "212992\n");
    put(root, "proc/sys/net/ipv4/tcp_rmem", "4096\t131072\t6291456\n");
    put(root, "proc/sys/net/ipv4/tcp_wmem", "4096\t16384\t4194304\n");
    put(root, "proc/sys/net/core/somaxconn", "128\n");
    put(root, "proc/sys/kernel/io_uring_disabled", "0\n");
}

fn tune(root: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_shardlog")).arg("tune").args(args).arg("--root").arg(root).output().unwrap()
}

fn findings(out: &Output) -> Vec<Value> {
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    match v {
        Value::Array(a) => a,
        Value::Object(mut o) => o.remove("findings").unwrap().as_array().unwrap().clone(),
        _ => panic!("unexpected {v}"),
    }
}

fn find<'a>(all: &'a [Value], setting: &str) -> &'a Value {
    all.iter()
        .find(|f| f["setting"].as_str().unwrap().starts_with(setting))
        .unwrap_or_else(|| panic!("no finding {setting:?} in {all:?}"))
}

fn read(root: &Path, rel: &str) -> String {
    std::fs::read_to_string(root.join(rel)).unwrap().trim().to_string()
}

#[test]
fn check_reports_every_untuned_setting_with_exit_code_2() {
    let dir = common::tempdir().unwrap();
    untuned(dir.path());
    let out = tune(dir.path(), &["check", "--json"]);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    let all = findings(&out);
    let status = |s: &str| find(&all, s)["status"].as_str().unwrap().to_string();
    // Broker cores are every online core except the IRQ core 0.
    let gov = find(&all, "CPU frequency governor");
    assert_eq!(gov["setting"], "CPU frequency governor (cpus 1-3)");
    assert_eq!(gov["current"], "powersave");
    assert_eq!(gov["changes"].as_array().unwrap().len(), 3, "cpus 1-3 only");
    let idle = find(&all, "CPU idle states");
    assert_eq!(idle["current"], "C6 (133 µs) enabled");
    assert_eq!(idle["changes"].as_array().unwrap().len(), 3, "C6 on cpus 1-3; C1 (2 µs) stays");
    let irq = find(&all, "NIC/NVMe IRQ affinity");
    assert_eq!(irq["status"], "tune");
    assert_eq!(irq["changes"].as_array().unwrap().len(), 3, "nvme0q0, nvme0q1, enp3s0f0; not the timer");
    assert_eq!(status("irqbalance"), "manual");
    assert_eq!(find(&all, "transparent huge pages")["current"], "always");
    for s in ["vm.swappiness", "fs.aio-max-nr", "open files", "locked memory", "clocksource"] {
        assert_eq!(status(s), "tune", "{s}");
    }
    assert_eq!(find(&all, "locked memory")["current"], "8192 KiB");
    assert_eq!(status("nvme0n1 I/O scheduler"), "tune");
    assert_eq!(find(&all, "nvme0n1 I/O scheduler")["current"], "mq-deadline");
    assert_eq!(status("nvme0n1 nomerges"), "tune");
    assert_eq!(status("nvme0n1 write cache"), "ok", "the default profile leaves the write cache alone");
    assert!(!all.iter().any(|f| f["setting"].as_str().unwrap().starts_with("sda")), "only nvme* devices");
    assert_eq!(status("net.ipv4.tcp_rmem"), "tune");
    assert_eq!(find(&all, "net.ipv4.tcp_rmem")["changes"][0]["value"], "4096 131072 16777216");
    assert_eq!(status("net.core.somaxconn"), "tune");
    assert_eq!(status("kernel.io_uring_disabled"), "ok");
    // Unbound kernel threads: the workqueues' cpumask is rewritten to the
    // IRQ core; kdamond needs taskset (no file to write).
    let wq = find(&all, "unbound workqueues");
    assert_eq!(wq["current"], "cpus 0-3");
    assert_eq!(wq["changes"][0]["value"], "1");
    let damon = find(&all, "DAMON threads");
    assert_eq!(damon["status"], "manual");
    assert_eq!(damon["current"], "78→0-3");
    assert_eq!(damon["recommended"], "taskset -pc 0 78");
}

#[test]
fn disabled_io_uring_blocks_with_exit_code_3_and_a_readable_table() {
    let dir = common::tempdir().unwrap();
    untuned(dir.path());
    put(dir.path(), "proc/sys/kernel/io_uring_disabled", "2\n");
    let out = tune(dir.path(), &["check"]);
    assert_eq!(out.status.code(), Some(3));
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find(|l| l.starts_with("kernel.io_uring_disabled")).expect("a row for io_uring");
    assert!(line.contains("BLOCKS") && line.contains("io_uring"), "{line}");
    assert!(text.lines().next().unwrap().starts_with("setting"), "a table header: {text}");
}

#[test]
fn a_tuned_host_passes_and_absent_hardware_is_not_an_error() {
    let dir = common::tempdir().unwrap();
    let root = dir.path();
    untuned(root);
    // What apply would do, done by hand; no cpufreq, no cpuidle, no NVMe.
    std::fs::remove_dir_all(root.join("sys/block/nvme0n1")).unwrap();
    for c in 0..4 {
        std::fs::remove_dir_all(root.join(format!("sys/devices/system/cpu/cpu{c}"))).unwrap();
    }
    for irq in [40, 41, 50] {
        put(root, &format!("proc/irq/{irq}/smp_affinity_list"), "0\n");
    }
    std::fs::remove_file(root.join("proc/812/comm")).unwrap();
    put(root, "proc/78/status", "Name:\tkdamond.0\nCpus_allowed:\t1\nCpus_allowed_list:\t0\n");
    put(root, "sys/devices/virtual/workqueue/cpumask", "1\n");
    put(root, "sys/kernel/mm/transparent_hugepage/enabled", "always [madvise] never\n");
    put(root, "proc/sys/vm/swappiness", "1\n");
    put(root, "proc/sys/fs/aio-max-nr", "1048576\n");
    put(
        root,
        "proc/self/limits",
        "Max open files            1048576              1048576              files\nMax locked memory         unlimited            unlimited            bytes\n",
    );
    put(root, "sys/devices/system/clocksource/clocksource0/current_clocksource", "tsc\n");
    for f in ["net/core/rmem_max", "net/core/wmem_max"] {
        put(root, &format!("proc/sys/{f}"), "16777216\n");
    }
    put(root, "proc/sys/net/ipv4/tcp_rmem", "4096 131072 16777216\n");
    put(root, "proc/sys/net/ipv4/tcp_wmem", "4096 16384 16777216\n");
    put(root, "proc/sys/net/core/somaxconn", "4096\n");
    let out = tune(root, &["check", "--json"]);
    let all = findings(&out);
    assert_eq!(out.status.code(), Some(0), "{all:#?}");
    assert_eq!(find(&all, "CPU frequency governor")["status"], "absent");
    assert_eq!(find(&all, "block devices")["status"], "absent");
}

#[test]
fn apply_dry_run_prints_exact_commands_and_changes_nothing() {
    let dir = common::tempdir().unwrap();
    let root = dir.path();
    untuned(root);
    let out = tune(root, &["apply", "--dry-run"]);
    assert_eq!(out.status.code(), Some(2));
    let text = String::from_utf8_lossy(&out.stdout);
    let gov = root.join("sys/devices/system/cpu/cpu2/cpufreq/scaling_governor");
    assert!(text.contains(&format!("echo 'performance' > {}", gov.display())), "{text}");
    assert!(text.contains(&format!("echo 'powersave' > {}", gov.display())), "the undo command: {text}");
    let irq = root.join("proc/irq/41/smp_affinity_list");
    assert!(text.contains(&format!("echo '0' > {}", irq.display())), "{text}");
    assert!(!text.contains("proc/irq/0/"), "the timer interrupt is not touched: {text}");
    assert!(text.contains("99-shardlog.conf"), "limits go to a limits.d file: {text}");
    assert_eq!(read(root, "sys/devices/system/cpu/cpu2/cpufreq/scaling_governor"), "powersave", "dry run");
    assert!(!root.join("etc/security/limits.d/99-shardlog.conf").exists());
}

#[test]
fn apply_sets_what_it_can_and_its_undo_restores_the_host() {
    let dir = common::tempdir().unwrap();
    let root = dir.path();
    untuned(root);
    let out = tune(root, &["apply", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["failed"].as_array().unwrap().is_empty(), "{v}");
    // Everything but irqbalance (manual) and the process's own limits
    // (new sessions only) is now as recommended.
    assert_eq!(read(root, "sys/devices/system/cpu/cpu3/cpufreq/scaling_governor"), "performance");
    assert_eq!(read(root, "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"), "powersave", "IRQ core untouched");
    assert_eq!(read(root, "sys/devices/system/cpu/cpu1/cpuidle/state2/disable"), "1");
    assert_eq!(read(root, "sys/devices/system/cpu/cpu1/cpuidle/state1/disable"), "0");
    assert_eq!(read(root, "proc/irq/50/smp_affinity_list"), "0");
    assert_eq!(read(root, "proc/irq/0/smp_affinity_list"), "0-3");
    assert_eq!(read(root, "sys/kernel/mm/transparent_hugepage/enabled"), "madvise");
    assert_eq!(read(root, "sys/block/nvme0n1/queue/scheduler"), "none");
    assert_eq!(read(root, "proc/sys/net/ipv4/tcp_wmem"), "4096 16384 16777216");
    let limits = read(root, "etc/security/limits.d/99-shardlog.conf");
    assert!(limits.contains("* soft nofile 1048576") && limits.contains("memlock unlimited"), "{limits}");
    let after = findings(&out);
    let open: Vec<&str> = after
        .iter()
        .filter(|f| f["status"] != "ok" && f["status"] != "absent")
        .map(|f| f["setting"].as_str().unwrap())
        .collect();
    assert_eq!(
        open,
        ["irqbalance", "DAMON threads (kdamond)", "open files (ulimit -n)", "locked memory (ulimit -l)"],
        "{after:#?}"
    );
    assert_eq!(read(root, "sys/devices/virtual/workqueue/cpumask"), "1");
    // The printed undo commands, run by a shell, restore every value.
    let undo: Vec<String> = v["undo"].as_array().unwrap().iter().map(|c| c.as_str().unwrap().to_string()).collect();
    let status = Command::new("sh").arg("-e").arg("-c").arg(undo.join("\n")).status().unwrap();
    assert!(status.success());
    assert_eq!(read(root, "sys/devices/system/cpu/cpu3/cpufreq/scaling_governor"), "powersave");
    assert_eq!(read(root, "proc/irq/50/smp_affinity_list"), "0-3");
    assert_eq!(read(root, "sys/block/nvme0n1/queue/scheduler"), "mq-deadline");
    assert_eq!(read(root, "proc/sys/net/ipv4/tcp_wmem"), "4096 16384 4194304");
    assert_eq!(read(root, "sys/devices/virtual/workqueue/cpumask"), "f");
    assert!(!root.join("etc/security/limits.d/99-shardlog.conf").exists());
}

#[test]
fn the_spread_profile_puts_one_queue_per_core() {
    let dir = common::tempdir().unwrap();
    let root = dir.path();
    untuned(root);
    let profile = root.join("spread.toml");
    std::fs::write(&profile, "irq_policy = \"spread\"\nbroker_cores = \"0-3\"\ndevices = [\"nvme\", \"sd\"]\n")
        .unwrap();
    let out = tune(root, &["apply", "--json", "--profile", profile.to_str().unwrap()]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["failed"].as_array().unwrap().is_empty(), "{v}");
    let got: Vec<String> =
        [40, 41, 50].iter().map(|i| read(root, &format!("proc/irq/{i}/smp_affinity_list"))).collect();
    assert_eq!(got, ["0", "1", "2"]);
    assert_eq!(read(root, "sys/block/sda/queue/scheduler"), "none", "sd* is in this profile's devices");
    assert_eq!(
        read(root, "sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        "performance",
        "all four are broker cores"
    );
    let bad = root.join("bad.toml");
    std::fs::write(&bad, "irq_policy = \"sideways\"\n").unwrap();
    let out = tune(root, &["check", "--profile", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bad.toml"), "the error names the profile");
}
