//! Bounds every count a request claims by the bytes it actually carries,
//! before the protocol crate decodes it.
//!
//! Why: kafka-protocol 0.18 decodes an array with `Vec::with_capacity` of
//! the count read from the wire, before reading any element. A 20-byte
//! Metadata request claiming 67 million topics made it ask for ~120 GB, and
//! a refused allocation aborts the process. No released version of the
//! crate bounds the count, so this module walks the body's wire structure
//! (`layouts`) the way the crate's decoder will, and refuses any array
//! count, string or bytes length or tagged-field count that the bytes left
//! in the frame cannot hold. Each array element takes at least one byte (at
//! least the width of its fixed-size fields), so a request that passes
//! here makes the crate reserve no more than a small multiple of its size.
//!
//! The walk must land on exactly the bytes the crate reads, or a count
//! could hide where the walker does not look: hence the table is the
//! crate's generated decode code transcribed, and the known tagged fields
//! are walked as the crate reads them (ignoring their claimed size).

mod layouts;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_populated;

use kafka_protocol::messages::ApiKey;
use layouts::{Elem, Kind, Message, Struct};

/// Why a request body was refused, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimError {
    /// The API, or `None` for the request header.
    pub api: Option<ApiKey>,
    pub version: i16,
    /// The field's path from the body's top, e.g. `topics.partitions`.
    pub field: String,
    pub fault: Fault,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// An array (or tagged-field section) claims more entries than the
    /// bytes left could hold at `min_bytes` each (1 unless every entry has
    /// a known width).
    TooMany { claimed: u64, min_bytes: u64, left: usize },
    /// A string or bytes field claims more bytes than are left, or a fixed
    /// field runs past the end: the crate would fail here too.
    Truncated { claimed: u64, left: usize },
    /// A length below -1 (the crate refuses those too).
    NegativeLength(i64),
    /// A known tag outside the versions that carry it (the crate refuses it).
    TagNotInVersion(u32),
}

impl std::fmt::Display for ClaimError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.api {
            Some(api) => write!(f, "{api:?} v{}: {} ", self.version, self.field)?,
            None => write!(f, "request header v{}: {} ", self.version, self.field)?,
        }
        match self.fault {
            Fault::TooMany { claimed, min_bytes: 1, left } => {
                write!(f, "claims {claimed} entries but {left} bytes are left")
            }
            Fault::TooMany { claimed, min_bytes, left } => {
                write!(f, "claims {claimed} entries of {min_bytes} bytes but {left} bytes are left")
            }
            Fault::Truncated { claimed, left } => write!(f, "claims {claimed} bytes but {left} bytes are left"),
            Fault::NegativeLength(n) => write!(f, "has a negative length ({n})"),
            Fault::TagNotInVersion(tag) => write!(f, "uses tag {tag}, which this version does not have"),
        }
    }
}

impl std::error::Error for ClaimError {}

/// Checks a request body (the bytes after the request header) of `key` at
/// `version`. Bytes after the body are not looked at, as the crate ignores
/// them too. An API the broker does not decode passes: nothing is decoded.
pub fn check(key: ApiKey, version: i16, body: &[u8]) -> Result<(), ClaimError> {
    walk(key, version, body).map(|_| ())
}

/// Walks a request body as `check` does: how many bytes it spans.
pub fn walk(key: ApiKey, version: i16, body: &[u8]) -> Result<usize, ClaimError> {
    match layouts::message(key) {
        Some(message) => walk_message(message, Some(key), version, body),
        None => Ok(0),
    }
}

/// Walks a request header at its header version (1 or 2): how many bytes it
/// spans. It holds no array, but a client id length still has to fit.
pub fn walk_header(header_version: i16, frame: &[u8]) -> Result<usize, ClaimError> {
    walk_message(layouts::HEADER, None, header_version, frame)
}

fn walk_message(message: Message, api: Option<ApiKey>, version: i16, buf: &[u8]) -> Result<usize, ClaimError> {
    let mut w = Walker { buf, pos: 0, version, flexible: version >= message.flexible_from };
    match w.walk_struct(message.body) {
        Ok(()) => Ok(w.pos),
        Err(e) => {
            let field = e.path.iter().rev().copied().collect::<Vec<_>>().join(".");
            Err(ClaimError { api, version, field, fault: e.fault })
        }
    }
}

/// A fault and the field names from where it happened up to the body's
/// top, pushed as the walk unwinds (only a refused request pays for it).
struct Failure {
    path: Vec<&'static str>,
    fault: Fault,
}

impl Failure {
    fn new(fault: Fault) -> Self {
        Failure { path: Vec::new(), fault }
    }
}

/// Names the field a failure happened in, on the way out.
fn within<T>(name: &'static str, r: Result<T, Failure>) -> Result<T, Failure> {
    r.map_err(|mut e| {
        e.path.push(name);
        e
    })
}

/// A cursor over the body; it only ever moves forward, and every move is
/// checked against the bytes left, so no input makes it read out of bounds.
struct Walker<'a> {
    buf: &'a [u8],
    pos: usize,
    version: i16,
    flexible: bool,
}

impl Walker<'_> {
    fn left(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn skip(&mut self, n: u64) -> Result<(), Failure> {
        let left = self.left();
        if n > left as u64 {
            return Err(Failure::new(Fault::Truncated { claimed: n, left }));
        }
        self.pos += n as usize;
        Ok(())
    }

    fn fixed<const N: usize>(&mut self) -> Result<[u8; N], Failure> {
        let start = self.pos;
        self.skip(N as u64)?;
        let mut out = [0u8; N];
        out.copy_from_slice(&self.buf[start..self.pos]);
        Ok(out)
    }

    /// Exactly the crate's `UnsignedVarInt`: at most five bytes, stopping
    /// at the first without the high bit, bits past 32 dropped (no error
    /// for an overlong encoding, so none here either).
    fn uvarint(&mut self) -> Result<u32, Failure> {
        let mut value = 0u32;
        for i in 0..5 {
            let [b] = self.fixed::<1>()?;
            value |= (u32::from(b) & 0x7F) << (i * 7);
            if b < 0x80 {
                break;
            }
        }
        Ok(value)
    }

    /// A length or count: Int16/Int32 with -1 for null in classic versions,
    /// varint of length + 1 with 0 for null in flexible ones. Null is 0.
    fn length(&mut self, classic_bytes: usize, compact: bool) -> Result<u64, Failure> {
        if compact {
            return Ok(u64::from(self.uvarint()?.saturating_sub(1)));
        }
        let n = if classic_bytes == 2 {
            i64::from(i16::from_be_bytes(self.fixed::<2>()?))
        } else {
            i64::from(i32::from_be_bytes(self.fixed::<4>()?))
        };
        match n {
            -1 => Ok(0),
            n if n < -1 => Err(Failure::new(Fault::NegativeLength(n))),
            n => Ok(n as u64),
        }
    }

    /// Refuses `claimed` entries of at least `min_bytes` each unless the
    /// bytes left can hold them: the check this module exists for.
    fn bound(&self, claimed: u64, min_bytes: u64) -> Result<(), Failure> {
        let left = self.left();
        if claimed.saturating_mul(min_bytes) > left as u64 {
            return Err(Failure::new(Fault::TooMany { claimed, min_bytes, left }));
        }
        Ok(())
    }

    fn walk_struct(&mut self, s: &Struct) -> Result<(), Failure> {
        for field in s.fields {
            if (field.min..=field.max).contains(&self.version) {
                within(field.name, self.walk_kind(field.kind))?;
            }
        }
        if self.flexible {
            self.walk_tagged(s)?;
        }
        Ok(())
    }

    fn walk_kind(&mut self, kind: Kind) -> Result<(), Failure> {
        match kind {
            Kind::Fixed(n) => self.skip(n as u64),
            Kind::Str => self.walk_elem(Elem::Str),
            Kind::Str16 => {
                let n = self.length(2, false)?;
                self.skip(n)
            }
            Kind::Bytes => {
                let n = self.length(4, self.flexible)?;
                self.skip(n)
            }
            Kind::Array(elem) => self.walk_array(elem),
            Kind::Struct(s) => self.walk_struct(s),
        }
    }

    fn walk_elem(&mut self, elem: Elem) -> Result<(), Failure> {
        match elem {
            Elem::Fixed(n) => self.skip(n as u64),
            Elem::Str => {
                let n = self.length(2, self.flexible)?;
                self.skip(n)
            }
            Elem::Struct(s) => self.walk_struct(s),
        }
    }

    fn walk_array(&mut self, elem: Elem) -> Result<(), Failure> {
        let claimed = self.length(4, self.flexible)?;
        if let Elem::Fixed(n) = elem {
            // Bounded at their exact width, then skipped whole.
            self.bound(claimed, n as u64)?;
            return self.skip(claimed * n as u64);
        }
        // Every string and struct element takes at least one byte at every
        // served version (`tests.rs` checks the structs), so more entries
        // than bytes left cannot be there.
        self.bound(claimed, 1)?;
        for _ in 0..claimed {
            self.walk_elem(elem)?;
        }
        Ok(())
    }

    /// A tagged-field section: a count, then (tag, size, value) entries.
    /// Unknown tags are skipped by their size, as the crate keeps them as
    /// raw bytes; known ones are walked as the crate decodes them.
    fn walk_tagged(&mut self, s: &Struct) -> Result<(), Failure> {
        let count = within("tagged fields", self.uvarint())?;
        // A tag and a size: two bytes at least per entry.
        within("tagged fields", self.bound(u64::from(count), 2))?;
        for _ in 0..count {
            let tag = within("tagged fields", self.uvarint())?;
            let size = within("tagged fields", self.uvarint())?;
            match s.tagged.iter().find(|t| t.tag == tag) {
                Some(known) if (known.min..=known.max).contains(&self.version) => {
                    within(known.name, self.walk_kind(known.kind))?;
                }
                Some(known) => return Err(Failure { path: vec![known.name], fault: Fault::TagNotInVersion(tag) }),
                None => within("tagged fields", self.skip(u64::from(size)))?,
            }
        }
        Ok(())
    }
}
