//! Bad input closes only the offending connection: random bytes, truncated
//! frames, huge or negative length prefixes, unknown API keys and versions,
//! on many connections at once. Afterwards a normal client still works and
//! everything acknowledged before is still there.

mod common;

use std::{
    io::{Read, Write},
    net::TcpStream,
    time::Duration,
};

use common::{broker::Broker, free_batch_bytes, wire::*, Rng};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, FetchResponse, MetadataRequest, MetadataResponse,
};
use shardlog::client::read_frame;

fn raw(addr: &str, bytes: &[u8]) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = s.write_all(bytes);
    s
}

/// The broker closed the connection without answering.
fn closed(mut s: TcpStream) -> bool {
    let mut b = [0u8; 1];
    matches!(s.read(&mut b), Ok(0) | Err(_))
}

fn frame(api_key: i16, version: i16, body: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    let len = 2 + 2 + 4 + 2 + body.len();
    f.extend_from_slice(&(len as i32).to_be_bytes());
    f.extend_from_slice(&api_key.to_be_bytes());
    f.extend_from_slice(&version.to_be_bytes());
    f.extend_from_slice(&7i32.to_be_bytes());
    f.extend_from_slice(&(-1i16).to_be_bytes()); // null client id
    f.extend_from_slice(body);
    f
}

#[test]
fn bad_input_closes_only_that_connection_and_loses_nothing() {
    let dir = common::tempdir().unwrap();
    let broker = Broker::start(dir.path(), 2);
    let addr = broker.bootstrap();
    let mut w = Wire::connect(&addr);
    assert_eq!(create_topic(&mut w, "safe", 2), 0);
    let mut rng = Rng::new(9);
    let mut acked = Vec::new();
    for i in 0..20 {
        let (error, base) = produce(&mut w, "safe", i % 2, free_batch_bytes(&mut rng, 2).into(), -1);
        assert_eq!(error, 0);
        acked.push((i % 2, base));
    }

    // Each kind of garbage, many times, on its own connection.
    let mut streams = Vec::new();
    for round in 0..25 {
        let mut junk = vec![0u8; 1 + rng.below(300) as usize];
        rng.fill(&mut junk);
        streams.push(("random bytes", raw(&addr, &junk), false));
        streams.push(("negative length", raw(&addr, &(-5i32).to_be_bytes()), true));
        streams.push(("huge length", raw(&addr, &i32::MAX.to_be_bytes()), true));
        streams.push(("unknown api key", raw(&addr, &frame(9999, 0, &[])), true));
        streams.push(("unsupported fetch version", raw(&addr, &frame(1, 99, &[0; 40])), true));
        streams.push(("garbage metadata body", raw(&addr, &frame(3, 12, &[0xff; 3])), true));
        let mut truncated = frame(0, 9, &[0; 64]);
        truncated.truncate(20 + round % 30);
        streams.push(("truncated frame", raw(&addr, &truncated), false));
    }
    for (what, s, must_close) in streams {
        if must_close {
            assert!(closed(s), "{what}: connection closed");
        } else {
            drop(s); // random or half frames: the broker waits, then sees EOF
        }
    }

    // An unsupported ApiVersions version gets an answer, not a close.
    let mut w2 = Wire::connect(&addr);
    let resp: ApiVersionsResponse = w2.call(ApiKey::ApiVersions, 0, &ApiVersionsRequest::default());
    assert_eq!(resp.error_code, 0);
    let mut s = raw(&addr, &frame(18, 77, &[]));
    let mut body = Vec::new();
    read_frame(&mut s, ApiKey::ApiVersions, 77, &mut body).unwrap();
    assert_eq!(i16::from_be_bytes([body[4], body[5]]), 35, "UNSUPPORTED_VERSION with the key list");

    // Produce v0–v2 are advertised but refused per partition.
    let mut v1 = Vec::new();
    v1.extend_from_slice(&1i16.to_be_bytes()); // acks
    v1.extend_from_slice(&1000i32.to_be_bytes()); // timeout
    v1.extend_from_slice(&1i32.to_be_bytes()); // one topic
    v1.extend_from_slice(&4i16.to_be_bytes());
    v1.extend_from_slice(b"safe");
    v1.extend_from_slice(&1i32.to_be_bytes()); // one partition
    v1.extend_from_slice(&0i32.to_be_bytes());
    v1.extend_from_slice(&0i32.to_be_bytes()); // empty message set
    let mut s = raw(&addr, &frame(0, 1, &v1));
    read_frame(&mut s, ApiKey::Produce, 1, &mut body).unwrap();
    // correlation, topics(1), name, partitions(1), index, error
    let error_at = 4 + 4 + 2 + 4 + 4 + 4;
    assert_eq!(i16::from_be_bytes([body[error_at], body[error_at + 1]]), 35);

    // A normal client still works, and everything acknowledged is there.
    let mut w3 = Wire::connect(&addr);
    let mut all_topics = MetadataRequest::default();
    all_topics.topics = None;
    let meta: MetadataResponse = w3.call(ApiKey::Metadata, 12, &all_topics);
    assert!(meta.topics.iter().any(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == "safe")));
    for p in 0..2 {
        let resp: FetchResponse = w3.call(ApiKey::Fetch, 12, &fetch_request("safe", &[(p, 0)], 0, 1));
        let bases: Vec<i64> =
            batches(resp.responses[0].partitions[0].records.as_ref().unwrap()).iter().map(|b| b.0).collect();
        let want: Vec<i64> = acked.iter().filter(|a| a.0 == p).map(|a| a.1).collect();
        assert_eq!(bases, want, "partition {p}: acknowledged batches intact");
    }
    assert!(std::fs::metadata(format!("/proc/{}", broker.pid())).is_ok(), "broker still running");
}
