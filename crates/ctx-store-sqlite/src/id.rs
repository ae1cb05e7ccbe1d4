//! Run ids: sortable by creation time, unique without a central counter.
//!
//! An id is `YYYYMMDDTHHMMSS.mmmZ-xxxxxxxx`: the UTC creation time to the
//! millisecond, then 32 random bits in hex. Ids sort lexicographically in
//! creation order (the time part has a fixed width), two ids made in the same
//! millisecond differ by their suffix, and [`crate::RunRoot`] creates each
//! run's directory with `create_dir` (not `create_dir_all`), so a collision
//! is detected and retried instead of two runs sharing a directory.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A new run id for "now".
pub fn new_run_id() -> String {
    let now = chrono::Utc::now();
    format!("{}-{:08x}", now.format("%Y%m%dT%H%M%S%.3fZ"), random_u32())
}

/// Whether `s` has the shape of a run id (used by `gc` so that it never
/// touches a directory ctx did not create).
pub fn is_run_id(s: &str) -> bool {
    // 20261130T090000.123Z-0123abcd
    let b = s.as_bytes();
    if b.len() != 29 {
        return false;
    }
    let digits =
        |r: std::ops::Range<usize>| b.get(r).is_some_and(|x| x.iter().all(u8::is_ascii_digit));
    digits(0..8)
        && b.get(8) == Some(&b'T')
        && digits(9..15)
        && b.get(15) == Some(&b'.')
        && digits(16..19)
        && b.get(19) == Some(&b'Z')
        && b.get(20) == Some(&b'-')
        && b.get(21..29).is_some_and(|x| {
            x.iter()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        })
}

/// 32 bits that differ between processes, threads and calls. `RandomState`
/// is seeded from the OS once per process; the clock, the pid and a counter
/// make successive calls differ. Not cryptographic, and need not be.
fn random_u32() -> u32 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = RandomState::new().build_hasher();
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    h.write_u128(nanos);
    h.write_u32(std::process::id());
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    let x = h.finish();
    (x ^ (x >> 32)) as u32
}

/// The current UTC time as RFC 3339 with milliseconds, as stored.
pub(crate) fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_have_the_documented_shape_and_differ() {
        let a = new_run_id();
        let b = new_run_id();
        assert!(is_run_id(&a), "{a}");
        assert!(is_run_id(&b), "{b}");
        assert_ne!(a, b);
        assert!(!is_run_id("20261130T090000.123Z-0123ABCD"));
        assert!(!is_run_id("notes"));
        assert!(!is_run_id(""));
    }

    #[test]
    fn ids_sort_by_creation_time() {
        let a = new_run_id();
        std::thread::sleep(std::time::Duration::from_millis(3));
        let b = new_run_id();
        assert!(a < b, "{a} !< {b}");
    }
}
