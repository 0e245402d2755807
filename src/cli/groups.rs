//! `shardlog groups list|describe --bootstrap HOST:PORT`: consumer groups
//! over the Kafka protocol, with committed offsets and lag (log end −
//! committed) per partition, like kafka-consumer-groups.sh.

use std::collections::BTreeMap;

use bytes::Buf;
use kafka_protocol::{
    messages::{
        list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic},
        ApiKey, ConsumerProtocolAssignment, DescribeGroupsRequest, DescribeGroupsResponse, GroupId, ListGroupsRequest,
        ListGroupsResponse, ListOffsetsRequest, ListOffsetsResponse, OffsetFetchRequest, OffsetFetchResponse,
        TopicName,
    },
    protocol::{Decodable, StrBytes},
};

use crate::{cli::CLIENT_ID, client::Client};

pub fn list(bootstrap: &str) -> Result<(), String> {
    let mut c = Client::connect(bootstrap, CLIENT_ID)?;
    let groups = list_groups(&mut c)?;
    println!("{:<40} {:<20} PROTOCOL-TYPE", "GROUP", "STATE");
    for (name, state, protocol_type) in groups {
        println!("{name:<40} {state:<20} {protocol_type}");
    }
    Ok(())
}

fn list_groups(c: &mut Client) -> Result<Vec<(String, String, String)>, String> {
    let resp: ListGroupsResponse = c.call(ApiKey::ListGroups, 4, &ListGroupsRequest::default())?;
    if resp.error_code != 0 {
        return Err(format!("ListGroups failed with error {}", resp.error_code));
    }
    let mut out: Vec<_> = resp
        .groups
        .iter()
        .map(|g| (g.group_id.0.to_string(), g.group_state.to_string(), g.protocol_type.to_string()))
        .collect();
    out.sort();
    Ok(out)
}

pub fn describe(bootstrap: &str, group: Option<&str>) -> Result<(), String> {
    let mut c = Client::connect(bootstrap, CLIENT_ID)?;
    let names: Vec<String> = match group {
        Some(g) => vec![g.to_string()],
        None => list_groups(&mut c)?.into_iter().map(|(n, _, _)| n).collect(),
    };
    for name in names {
        describe_one(&mut c, &name)?;
        println!();
    }
    Ok(())
}

fn describe_one(c: &mut Client, name: &str) -> Result<(), String> {
    let mut req = DescribeGroupsRequest::default();
    req.groups.push(GroupId(StrBytes::from_string(name.to_string())));
    let resp: DescribeGroupsResponse = c.call(ApiKey::DescribeGroups, 5, &req)?;
    let g = resp.groups.first().ok_or_else(|| format!("no answer for group {name}"))?;
    if g.error_code != 0 {
        return Err(format!("DescribeGroups {name}: error {}", g.error_code));
    }
    println!(
        "group {name}: state {}, protocol {} {}, {} member(s)",
        g.group_state,
        g.protocol_type,
        g.protocol_data,
        g.members.len()
    );
    // Who owns which partition, from the consumer protocol assignments.
    let mut owner: BTreeMap<(String, i32), (String, String, String)> = BTreeMap::new();
    for m in &g.members {
        let mut bytes = m.member_assignment.clone();
        if bytes.len() < 2 {
            continue;
        }
        let version = bytes.get_i16();
        if let Ok(a) = ConsumerProtocolAssignment::decode(&mut bytes, version.clamp(0, 3)) {
            for t in a.assigned_partitions {
                for p in t.partitions {
                    owner.insert(
                        (t.topic.0.to_string(), p),
                        (m.member_id.to_string(), m.client_id.to_string(), m.client_host.to_string()),
                    );
                }
            }
        }
    }
    let mut req = OffsetFetchRequest::default();
    req.group_id = GroupId(StrBytes::from_string(name.to_string()));
    req.topics = None;
    let offsets: OffsetFetchResponse = c.call(ApiKey::OffsetFetch, 7, &req)?;
    if offsets.error_code != 0 {
        return Err(format!("OffsetFetch {name}: error {}", offsets.error_code));
    }
    let mut committed: BTreeMap<(String, i32), i64> = BTreeMap::new();
    for t in &offsets.topics {
        for p in &t.partitions {
            committed.insert((t.name.0.to_string(), p.partition_index), p.committed_offset);
        }
    }
    for key in owner.keys() {
        committed.entry(key.clone()).or_insert(-1);
    }
    let ends = log_ends(c, committed.keys())?;
    println!(
        "{:<24} {:>9} {:>14} {:>14} {:>10}  {:<40} {:<20} HOST",
        "TOPIC", "PARTITION", "COMMITTED", "LOG-END", "LAG", "MEMBER", "CLIENT-ID"
    );
    for ((topic, partition), offset) in &committed {
        let end = ends.get(&(topic.clone(), *partition)).copied().unwrap_or(-1);
        let lag = if *offset >= 0 && end >= 0 { (end - offset).to_string() } else { "-".into() };
        let show = |v: i64| if v >= 0 { v.to_string() } else { "-".into() };
        let (member, client, host) = owner.get(&(topic.clone(), *partition)).cloned().unwrap_or_default();
        println!(
            "{topic:<24} {partition:>9} {:>14} {:>14} {lag:>10}  {:<40} {:<20} {host}",
            show(*offset),
            show(end),
            if member.is_empty() { "-" } else { &member },
            if client.is_empty() { "-" } else { &client },
        );
    }
    Ok(())
}

/// Log end offsets (ListOffsets latest) of the given partitions.
fn log_ends<'a>(
    c: &mut Client,
    partitions: impl Iterator<Item = &'a (String, i32)>,
) -> Result<BTreeMap<(String, i32), i64>, String> {
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (t, p) in partitions {
        by_topic.entry(t).or_default().push(*p);
    }
    let mut req = ListOffsetsRequest::default();
    req.replica_id = (-1).into();
    for (topic, parts) in by_topic {
        let mut t = ListOffsetsTopic::default();
        t.name = TopicName(StrBytes::from_string(topic.to_string()));
        for p in parts {
            let mut lp = ListOffsetsPartition::default();
            lp.partition_index = p;
            lp.timestamp = -1;
            t.partitions.push(lp);
        }
        req.topics.push(t);
    }
    let resp: ListOffsetsResponse = c.call(ApiKey::ListOffsets, 7, &req)?;
    let mut out = BTreeMap::new();
    for t in resp.topics {
        for p in t.partitions {
            if p.error_code == 0 {
                out.insert((t.name.0.to_string(), p.partition_index), p.offset);
            }
        }
    }
    Ok(out)
}
