//! The group tools against a live broker: `shardlog groups list|describe`
//! (committed offsets and lag over the protocol) and `shardlog offsets dump`
//! (the records of `__consumer_offsets`, text and JSON, read from disk).

mod common;

use std::process::Command;

use common::{broker::Broker, free_batch_bytes, wire::*, Rng};
use kafka_protocol::{
    messages::{
        offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic},
        offset_delete_request::{OffsetDeleteRequestPartition, OffsetDeleteRequestTopic},
        ApiKey, DeleteGroupsRequest, DeleteGroupsResponse, GroupId, OffsetCommitRequest, OffsetCommitResponse,
        OffsetDeleteRequest, OffsetDeleteResponse,
    },
    protocol::StrBytes,
};

const TOPIC: &str = "tools";
const GROUP: &str = "tool-group";

fn shardlog(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_shardlog")).args(args).output().expect("run shardlog");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn group_tools_report_commits_lag_and_records() {
    let dir = common::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut broker = Broker::start_with_config(&data, 1, "", &[]);
    let b = broker.bootstrap();
    let mut w = Wire::connect(&b);
    assert_eq!(create_topic(&mut w, TOPIC, 3), 0);
    let mut rng = Rng::new(3);
    let mut ends = [0i64; 3];
    for (p, end) in ends.iter_mut().enumerate() {
        for _ in 0..(4 + p) {
            let records = 1 + rng.below(5) as usize;
            let (error, base) = produce(&mut w, TOPIC, p as i32, free_batch_bytes(&mut rng, records).into(), 1);
            assert_eq!(error, 0);
            *end = base + records as i64;
        }
    }
    let committed = [2i64, 4, 6];
    let mut t = OffsetCommitRequestTopic::default();
    t.name = topic_name(TOPIC);
    for (p, offset) in committed.iter().enumerate() {
        let mut pc = OffsetCommitRequestPartition::default();
        pc.partition_index = p as i32;
        pc.committed_offset = *offset;
        pc.committed_leader_epoch = -1;
        pc.committed_metadata = Some(StrBytes::from_static_str("tool-meta"));
        t.partitions.push(pc);
    }
    let mut req = OffsetCommitRequest::default();
    req.group_id = GroupId(StrBytes::from_static_str(GROUP));
    req.generation_id_or_member_epoch = -1;
    req.topics.push(t);
    let resp: OffsetCommitResponse = w.call(ApiKey::OffsetCommit, 8, &req);
    assert!(resp.topics[0].partitions.iter().all(|p| p.error_code == 0));

    let (ok, out, err) = shardlog(&["groups", "list", "--bootstrap", &b]);
    assert!(ok, "groups list: {err}");
    assert!(out.lines().any(|l| l.starts_with(GROUP) && l.contains("Empty")), "groups list:\n{out}");

    let (ok, out, err) = shardlog(&["groups", "describe", "--bootstrap", &b, "--group", GROUP]);
    assert!(ok, "groups describe: {err}");
    for p in 0..3 {
        let row: Vec<&str> = out
            .lines()
            .find(|l| l.split_whitespace().take(2).eq([TOPIC, &p.to_string()]))
            .unwrap_or_else(|| panic!("no row for partition {p}:\n{out}"))
            .split_whitespace()
            .collect();
        let lag = ends[p] - committed[p];
        assert_eq!(
            row[2..5],
            [committed[p].to_string(), ends[p].to_string(), lag.to_string()],
            "partition {p}:\n{out}"
        );
    }

    // Partition 2's offset deleted: a tombstone.
    let mut od = OffsetDeleteRequest::default();
    od.group_id = GroupId(StrBytes::from_static_str(GROUP));
    let mut dt = OffsetDeleteRequestTopic::default();
    dt.name = topic_name(TOPIC);
    let mut dp = OffsetDeleteRequestPartition::default();
    dp.partition_index = 2;
    dt.partitions.push(dp);
    od.topics.push(dt);
    let resp: OffsetDeleteResponse = w.call(ApiKey::OffsetDelete, 0, &od);
    assert_eq!((resp.error_code, resp.topics[0].partitions[0].error_code), (0, 0));

    let data_dir = data.to_str().unwrap();
    let (ok, out, err) = shardlog(&["offsets", "dump", "--data-dir", data_dir, "--group", GROUP]);
    assert!(ok, "offsets dump: {err}");
    let want0 = format!(
        "[{GROUP},{TOPIC},0]::OffsetAndMetadata(offset=2, leaderEpoch=None, metadata=tool-meta, commitTimestamp="
    );
    assert!(out.lines().any(|l| l.starts_with(&want0) && l.ends_with("expireTimestamp=None)")), "dump:\n{out}");
    assert_eq!(out.lines().last(), Some(format!("[{GROUP},{TOPIC},2]::NULL").as_str()), "dump:\n{out}");

    let (ok, out, err) = shardlog(&["offsets", "dump", "--data-dir", data_dir, "--group", GROUP, "--json"]);
    assert!(ok, "offsets dump --json: {err}");
    let lines: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let p1 = lines.iter().find(|v| v["key"]["data"]["partition"] == 1).expect("partition 1 commit");
    assert_eq!(p1["key"]["version"], 1);
    assert_eq!(p1["key"]["data"]["group"], GROUP);
    assert_eq!(p1["value"]["version"], 3);
    assert_eq!(p1["value"]["data"]["offset"], 4);
    assert_eq!(p1["value"]["data"]["metadata"], "tool-meta");
    assert!(lines.last().unwrap()["value"].is_null(), "tombstone last: {out}");

    // Log tools refuse to open a running broker's logs.
    let pdir = std::fs::read_dir(&data).unwrap().map(|e| e.unwrap().path()).find(|p| p.is_dir()).unwrap();
    let (ok, _, err) = shardlog(&["log", "check", pdir.to_str().unwrap()]);
    assert!(!ok && err.contains("running broker"), "log check beside a running broker: {err}");

    // DeleteGroups: an empty group goes, with its offsets; an unknown one is
    // GROUP_ID_NOT_FOUND.
    let mut del = DeleteGroupsRequest::default();
    del.groups_names = vec![GroupId(StrBytes::from_static_str(GROUP)), GroupId(StrBytes::from_static_str("nobody"))];
    let resp: DeleteGroupsResponse = w.call(ApiKey::DeleteGroups, 2, &del);
    let codes: Vec<(String, i16)> = resp.results.iter().map(|r| (r.group_id.0.to_string(), r.error_code)).collect();
    assert_eq!(codes, vec![(GROUP.to_string(), 0), ("nobody".to_string(), 69)]);
    let (ok, out, _) = shardlog(&["groups", "list", "--bootstrap", &b]);
    assert!(ok && !out.contains(GROUP), "deleted group still listed:\n{out}");
    let (_, out, _) = shardlog(&["offsets", "dump", "--data-dir", data_dir, "--group", GROUP]);
    assert!(out.lines().any(|l| l == format!("{GROUP}::NULL")), "group tombstone:\n{out}");
    drop(w);
    broker.stop();

    // Stopped, the log tools open the compacted partitions without cutting
    // anything (their segments may have offset gaps).
    let offsets_dir = data.join("__consumer_offsets-0");
    let (ok, out, err) = shardlog(&["log", "check", offsets_dir.to_str().unwrap()]);
    assert!(ok && out.contains(", 0 cut(s)"), "log check of a compacted partition: {out}{err}");
}
