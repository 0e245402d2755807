//! Member ids: `<prefix>-<32 hex digits>`, as Kafka hands them out
//! (`<client id>-<uuid>`, or `<group instance id>-<uuid>` for static
//! members). The digits come from a per-shard keyed generator seeded once
//! at start, not from the OS per JoinGroup.

use std::{cell::Cell, hash::Hasher};

/// Distinct, unguessable ids for the life of one coordinator: each is a
/// keyed pseudo-random function (SipHash-2-4, keyed by the seed the shard
/// draws from the OS) of a counter, so an id seen tells nothing about the
/// next one without the key.
pub struct MemberIds {
    keys: (u64, u64),
    counter: Cell<u64>,
}

impl MemberIds {
    pub fn new(seed: u128) -> Self {
        Self { keys: ((seed >> 64) as u64, seed as u64), counter: Cell::new(0) }
    }

    /// The next id with `prefix`: 128 bits, two SipHash outputs of the
    /// counter (distinct with overwhelming probability: a repeat needs a
    /// 128-bit collision).
    pub fn next(&self, prefix: &str) -> String {
        let n = self.counter.get().wrapping_add(1);
        self.counter.set(n);
        let (high, low) = (self.prf(n, 0), self.prf(n, 1));
        format!("{prefix}-{high:016x}{low:016x}")
    }

    fn prf(&self, n: u64, half: u8) -> u64 {
        // std's SipHasher is SipHash-2-4 with explicit keys; it is deprecated
        // only as a HashMap hasher, which is not this use.
        #[allow(deprecated)]
        let mut h = std::hash::SipHasher::new_with_keys(self.keys.0, self.keys.1);
        h.write_u64(n);
        h.write_u8(half);
        h.finish()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn ids_are_distinct_and_shaped_like_kafkas() {
        let ids = MemberIds::new(0x0123_4567_89ab_cdef_fedc_ba98_7654_3210);
        let made: Vec<String> = (0..10_000).map(|_| ids.next("client")).collect();
        assert_eq!(made.iter().collect::<HashSet<_>>().len(), made.len(), "no id repeats");
        for id in &made {
            let hex = id.strip_prefix("client-").expect("prefix kept");
            assert_eq!(hex.len(), 32, "{id}");
            assert!(hex.bytes().all(|b| b.is_ascii_hexdigit()), "{id}");
        }
    }

    #[test]
    fn different_seeds_give_different_ids() {
        let (a, b) = (MemberIds::new(1), MemberIds::new(2));
        assert_ne!(a.next("c"), b.next("c"));
    }
}
