//! Every input that once crashed a fuzz target (tests/fuzz/regressions/)
//! stays harmless: decoded in process, and sent to a live broker, which
//! closes or answers that connection and goes on serving others.

mod common;

use std::{
    io::{Read, Write},
    net::TcpStream,
    path::Path,
    time::Duration,
};

use common::{broker::Broker, wire::*};
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse};

fn inputs(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz/regressions").join(target);
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| {
            let e = e.unwrap();
            (e.file_name().to_string_lossy().into_owned(), std::fs::read(e.path()).unwrap())
        })
        .collect();
    out.sort();
    assert!(!out.is_empty(), "no regression inputs in {}", dir.display());
    out
}

#[test]
fn request_frames_that_once_crashed_are_refused_cleanly() {
    for (name, frame) in inputs("request_frame") {
        let decoded = shardlog::server::connection::decode_request(bytes::Bytes::from(frame.clone()));
        assert!(decoded.is_err(), "{name}: decoded as {decoded:?}");
    }
    let dir = common::tempdir().unwrap();
    let broker = Broker::start(&dir.path().join("data"), 1);
    for (name, frame) in inputs("request_frame") {
        let mut s = TcpStream::connect(broker.bootstrap()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut sized = (frame.len() as i32).to_be_bytes().to_vec();
        sized.extend_from_slice(&frame);
        s.write_all(&sized).unwrap();
        let mut b = [0u8; 1];
        assert!(matches!(s.read(&mut b), Ok(0) | Err(_)), "{name}: the connection is closed");
        let mut w = Wire::connect(&broker.bootstrap());
        let resp: ApiVersionsResponse = w.call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
        assert_eq!(resp.error_code, 0, "{name}: the broker still serves");
    }
}
