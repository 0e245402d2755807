//! Member ids: `<prefix>-<32 hex digits>`, as Kafka hands them out
//! (`<client id>-<uuid>`, or `<group instance id>-<uuid>` for static
//! members). The digits come from a per-shard generator seeded once at
//! start, not from the OS per JoinGroup.

use std::cell::Cell;

/// Distinct ids for the life of one coordinator; unguessable across
/// restarts as long as the seed is (the shard draws it from the OS).
pub struct MemberIds {
    keys: (u64, u64),
    counter: Cell<u64>,
}

impl MemberIds {
    pub fn new(seed: u128) -> Self {
        Self { keys: ((seed >> 64) as u64, seed as u64), counter: Cell::new(0) }
    }

    /// The next id with `prefix`. Each half is a bijection of the counter
    /// (SplitMix64's finaliser over a keyed counter), so ids never repeat
    /// within 2^64 calls.
    pub fn next(&self, prefix: &str) -> String {
        let n = self.counter.get().wrapping_add(1);
        self.counter.set(n);
        let high = mix(self.keys.0.wrapping_add(n));
        let low = mix(self.keys.1 ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        format!("{prefix}-{high:016x}{low:016x}")
    }
}

/// SplitMix64's output function: a bijection on u64 that spreads every
/// input bit over the output.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
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
