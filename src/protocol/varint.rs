//! Kafka's variable-length integers: unsigned (compact lengths of flexible
//! versions) and zig-zag signed (record fields), as `ByteUtils` writes them.

use bytes::BufMut;

/// Unsigned LEB128, 7 bits a byte.
pub fn put_uvarint(out: &mut impl BufMut, mut v: u64) {
    while v >= 0x80 {
        out.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    out.put_u8(v as u8);
}

/// Zig-zag signed varint (`writeVarlong`).
pub fn put_varlong(out: &mut impl BufMut, value: i64) {
    put_uvarint(out, ((value << 1) ^ (value >> 63)) as u64);
}

/// Reads a zig-zag varint; returns the value and the bytes it took.
pub fn get_varlong(buf: &[u8]) -> Option<(i64, usize)> {
    let mut raw: u64 = 0;
    for (i, &b) in buf.iter().take(10).enumerate() {
        raw |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some((((raw >> 1) as i64) ^ -((raw & 1) as i64), i + 1));
        }
    }
    None
}
