//! The sizing rules against hand-worked plans.

use super::*;

fn workload() -> Workload {
    Workload {
        name: "t".into(),
        ingress_avg_mb_per_s: 100.0,
        ingress_peak_mb_per_s: 200.0,
        records_avg_per_s: None,
        records_peak_per_s: None,
        record_bytes: 1024,
        topics: 1,
        partitions: 48,
        consumer_groups: 2,
        catch_up_fraction: 0.1,
        retention_hours: Some(24.0),
        retention_bytes_per_partition: None,
        compression_ratio: 1.0,
        replication_factor: 3,
        acks: "all".into(),
        latency_objective_p99_ms: 5.0,
        growth_per_year: 0.0,
        horizon_years: 1.0,
        headroom: 0.5,
        compaction_overhead: 0.0,
        cache_seconds: 10.0,
        machine: MachineShape {
            cores: 9,
            reserved_cores: 1,
            disks: 1,
            disk_capacity_gb: 100_000.0,
            network_gbps: 100.0,
            memory_gb: 256.0,
            cache_memory_fraction: 0.5,
        },
    }
}

fn line(p: &Plan, r: Resource) -> &Line {
    p.lines.iter().find(|l| l.resource == r).unwrap()
}

#[test]
fn the_disk_not_the_cpu_is_the_limit() {
    // 200 MB/s × RF 3 = 600 MB/s of writes; one 400 MB/s disk at 50%
    // headroom gives 200 MB/s a machine → 3 machines. CPU: a shard does
    // 100 MB/s within 5 ms; 600 ÷ (100 × 0.5) = 12 shards → 8 cores a
    // machine → 2 machines.
    let m = Measured {
        sweep: vec![(50.0, 1.0), (100.0, 4.0), (150.0, 30.0)],
        saturation_mb_per_s: Some(100.0),
        disk_write_mb_per_s: Some(400.0),
        disk_read_mb_per_s: Some(2000.0),
        replication_cost: Some(1.0),
    };
    let mut w = workload();
    w.latency_objective_p99_ms = 4.0;
    let p = plan(&w, &m);
    assert_eq!(line(&p, Resource::Cpu).need, Some(12.0));
    assert_eq!(line(&p, Resource::Cpu).machines, Some(2));
    assert_eq!(line(&p, Resource::DiskWrite).need, Some(600.0));
    assert_eq!(line(&p, Resource::DiskWrite).per_machine, Some(200.0));
    assert_eq!(line(&p, Resource::DiskWrite).machines, Some(3));
    assert_eq!(p.limit, Resource::DiskWrite);
    assert_eq!(p.machines, 3);
    assert!(!p.latency_bound, "saturation and objective coincide");
    // Network in: 600 MB/s = 4.8 Gb/s; 100 Gb/s × 0.5 → 1 machine.
    assert_eq!(line(&p, Resource::NetworkIn).need, Some(4.8));
    // Capacity: 100 MB/s × 3 × 24 h × 3600 ÷ 1000 × 1.02 = 26438.4 GB.
    assert!((line(&p, Resource::DiskCapacity).need.unwrap() - 26_438.4).abs() < 1e-6);
    // Memory: 200 × 3 × 10 s ÷ 1000 = 6 GB, plus 48 × 3 × 16 KiB of
    // partition state.
    let state = 48.0 * 3.0 * crate::server::memory::PARTITION_STATE_BYTES as f64 / 1e9;
    assert!((line(&p, Resource::Memory).need.unwrap() - (6.0 + state)).abs() < 1e-9);
    assert!(p.missing.is_empty(), "{:?}", p.missing);
}

#[test]
fn a_measured_replica_cost_sizes_the_cpu_and_its_absence_is_named() {
    // As above, but a replica measured at half a produce's CPU: 200 ×
    // (1 + 2 × 0.5) = 400 MB/s ÷ (100 × 0.5) = 8 shards. Disks still
    // write every copy in full.
    let mut m = Measured {
        sweep: vec![(50.0, 1.0), (100.0, 4.0), (150.0, 30.0)],
        saturation_mb_per_s: Some(100.0),
        disk_write_mb_per_s: Some(400.0),
        disk_read_mb_per_s: Some(2000.0),
        replication_cost: Some(0.5),
    };
    let mut w = workload();
    w.latency_objective_p99_ms = 4.0;
    let p = plan(&w, &m);
    assert_eq!(line(&p, Resource::Cpu).need, Some(8.0));
    assert_eq!(line(&p, Resource::DiskWrite).need, Some(600.0));
    assert!(p.assumptions.iter().any(|a| a.contains("0.50 of a produce's CPU")), "{:?}", p.assumptions);
    m.replication_cost = None;
    let p = plan(&w, &m);
    assert_eq!(line(&p, Resource::Cpu).need, Some(12.0), "a replica assumed to cost a produce");
    assert!(p.missing.iter().any(|s| s.contains("replication cost")), "{:?}", p.missing);
}

#[test]
fn the_latency_objective_not_throughput_is_the_limit() {
    // A shard saturates at 300 MB/s but keeps p99 ≤ 5 ms only to 60 MB/s
    // (interpolated between 40 MB/s at 2 ms and 80 MB/s at 8 ms).
    let m = Measured {
        sweep: vec![(40.0, 2.0), (80.0, 8.0), (200.0, 20.0), (300.0, 90.0)],
        saturation_mb_per_s: Some(300.0),
        disk_write_mb_per_s: Some(3000.0),
        disk_read_mb_per_s: Some(3000.0),
        replication_cost: Some(1.0),
    };
    let p = plan(&workload(), &m);
    assert_eq!(p.shard_mb_per_s_at_objective, Some(60.0));
    assert!(p.latency_bound);
    // 600 ÷ (60 × 0.5) = 20 shards → ⌈20 ÷ 8⌉ = 3 machines; disk needs 1.
    assert_eq!(line(&p, Resource::Cpu).need, Some(20.0));
    assert_eq!(p.machines, 3);
    assert_eq!(p.limit, Resource::Cpu);
    assert!(line(&p, Resource::Cpu).note.contains("latency objective"));
    // 3 machines × 8 shards: each carries 600 ÷ 24 = 25 MB/s at peak.
    assert_eq!(p.operating_point_mb_per_s, Some(25.0));
}

#[test]
fn missing_measurements_are_reported_not_invented() {
    let p = plan(&workload(), &Measured::default());
    assert_eq!(line(&p, Resource::Cpu).need, None);
    assert_eq!(line(&p, Resource::DiskWrite).machines, None);
    assert_eq!(p.missing.len(), 3, "sweep, disk and replica cost: {:?}", p.missing);
    // What can be sized from the workload alone still is.
    assert!(
        (line(&p, Resource::Memory).need.unwrap()
            - (6.0 + 48.0 * 3.0 * crate::server::memory::PARTITION_STATE_BYTES as f64 / 1e9))
            .abs()
            < 1e-9
    );
}

#[test]
fn an_objective_no_load_met_is_the_limit() {
    let m = Measured { sweep: vec![(10.0, 7.0), (20.0, 9.0)], ..Measured::default() };
    let p = plan(&workload(), &m);
    assert_eq!(p.limit, Resource::Cpu);
    assert!(p.missing.iter().any(|s| s.contains("out of reach")), "{:?}", p.missing);
}

#[test]
fn growth_compounds_over_the_horizon() {
    let mut w = workload();
    w.growth_per_year = 0.5;
    w.horizon_years = 2.0;
    let p = plan(&w, &Measured::default());
    assert_eq!(p.peak_at_horizon, 450.0);
    assert_eq!(p.avg_at_horizon, 225.0);
}
