//! Counts and durations as every message, table and page writes them:
//! `1 task`, `3 tasks`, `0 entities`; `850 ms`, `12.3 s`, `4 min 05 s`.
//! Defined once, here in the vocabulary every crate shares, because the
//! same thing written two ways in two outputs ("1 tasks" in one, "1 task"
//! in another; a timeout of `600s` in an error and `10 min 00 s` in the
//! report) is the kind of drift a user notices first.

use std::time::Duration;

/// `n` and the noun for it: `one` when `n` is 1, else `many`
/// (`count(1, "task", "tasks")` is `1 task`, `count(0, ...)` `0 tasks`).
///
/// ```
/// use ctx_model::display::count;
/// assert_eq!(count(1, "entity", "entities"), "1 entity");
/// assert_eq!(count(3, "entity", "entities"), "3 entities");
/// ```
pub fn count<N>(n: N, one: &str, many: &str) -> String
where
    N: std::fmt::Display + PartialEq + From<u8>,
{
    let noun = if n == N::from(1) { one } else { many };
    format!("{n} {noun}")
}

/// A duration for people: `850 ms`, `12.3 s`, `4 min 05 s`, `2 h 03 min`.
/// Truncated, never rounded up (a timeout of 59.99 s reads `59.9 s`, not
/// `1 min`). Whole milliseconds; a duration beyond `i64::MAX` ms reads as
/// that.
///
/// ```
/// use std::time::Duration;
/// use ctx_model::display::duration;
/// assert_eq!(duration(Duration::from_millis(300)), "300 ms");
/// assert_eq!(duration(Duration::from_secs(600)), "10 min 00 s");
/// ```
pub fn duration(d: Duration) -> String {
    duration_ms(i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// [`duration`] of a signed count of milliseconds, as stored times give
/// them (a span can end before it starts when a clock steps back): `-5 ms`.
pub fn duration_ms(ms: i64) -> String {
    let sign = if ms < 0 { "-" } else { "" };
    let ms = ms.unsigned_abs();
    if ms < 1_000 {
        format!("{sign}{ms} ms")
    } else if ms < 60_000 {
        format!("{sign}{}.{} s", ms / 1_000, (ms % 1_000) / 100)
    } else if ms < 3_600_000 {
        format!("{sign}{} min {:02} s", ms / 60_000, (ms % 60_000) / 1_000)
    } else {
        format!(
            "{sign}{} h {:02} min",
            ms / 3_600_000,
            (ms % 3_600_000) / 60_000
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_is_singular_and_every_other_count_plural() {
        assert_eq!(count(0, "task", "tasks"), "0 tasks");
        assert_eq!(count(1, "task", "tasks"), "1 task");
        assert_eq!(count(2, "task", "tasks"), "2 tasks");
        assert_eq!(count(11, "problem", "problems"), "11 problems");
        assert_eq!(count(1_u32, "call", "calls"), "1 call");
        assert_eq!(
            count(u64::MAX, "call", "calls"),
            "18446744073709551615 calls"
        );
    }

    #[test]
    fn durations_read_in_the_largest_unit_that_keeps_them_short() {
        assert_eq!(duration_ms(0), "0 ms");
        assert_eq!(duration_ms(850), "850 ms");
        assert_eq!(duration_ms(999), "999 ms");
        assert_eq!(duration_ms(1_000), "1.0 s");
        assert_eq!(duration_ms(12_345), "12.3 s");
        assert_eq!(duration_ms(59_999), "59.9 s");
        assert_eq!(duration_ms(60_000), "1 min 00 s");
        assert_eq!(duration_ms(245_000), "4 min 05 s");
        assert_eq!(duration_ms(3_599_999), "59 min 59 s");
        assert_eq!(duration_ms(3_600_000), "1 h 00 min");
        assert_eq!(duration_ms(7_380_000), "2 h 03 min");
        assert_eq!(duration_ms(-5), "-5 ms");
        assert_eq!(duration_ms(i64::MIN), "-2562047788015 h 12 min");
        assert_eq!(duration(Duration::from_millis(1_250)), "1.2 s");
        assert_eq!(duration(Duration::from_micros(300_900)), "300 ms");
        assert_eq!(duration(Duration::MAX), duration_ms(i64::MAX));
    }
}
