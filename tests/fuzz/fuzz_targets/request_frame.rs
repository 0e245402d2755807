//! Arbitrary bytes as one request frame (after the size prefix): the
//! broker's request decoding, including the record-batch checks a Produce
//! goes through, must return an error, never panic.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = shardlog::server::connection::decode_request(bytes::Bytes::copy_from_slice(data));
});
