//! The period `ctx spend --since DATE --until DATE` sums over: a half-open
//! range of instants, `[since, before)`, in milliseconds since the Unix
//! epoch, so that two adjacent periods (`--until 2026-12-01` and `--since
//! 2026-12-02`) never count an attempt twice nor leave one out.
//!
//! A bound is a day (`2026-12-01`: the whole UTC day, its start for
//! `--since`, its end for `--until`) or an RFC 3339 instant with any offset
//! (`2026-12-01T09:30:00+01:00`: that instant; `--until` includes it).
//! Anything else is refused with the flag and the value quoted, before any
//! store is read.

use chrono::{NaiveDate, NaiveTime};
use ctx_report::Timestamp;

/// A bound that could not be read, or bounds that leave nothing between
/// them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PeriodError {
    /// The value is neither a `YYYY-MM-DD` day nor an RFC 3339 instant.
    #[error(
        "{flag} {value:?}: not a date (YYYY-MM-DD, a whole UTC day) or an RFC 3339 time \
         (like 2026-12-01T09:30:00Z)"
    )]
    Malformed {
        /// `--since` or `--until`.
        flag: &'static str,
        /// The value as given.
        value: String,
    },
    /// `--since` is after `--until`: the period holds no instant.
    #[error("--since {since} is after --until {until}: the period is empty")]
    Reversed {
        /// `--since` as given.
        since: String,
        /// `--until` as given.
        until: String,
    },
}

/// The instants an attempt's start must fall in to be counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Period {
    /// The first instant counted; `None`: from the first run on.
    pub since: Option<Timestamp>,
    /// The first instant no longer counted; `None`: up to now.
    pub before: Option<Timestamp>,
}

impl Period {
    /// Every instant.
    pub const ALL: Period = Period {
        since: None,
        before: None,
    };

    /// The period `--since` and `--until` name (either may be absent).
    pub fn parse(since: Option<&str>, until: Option<&str>) -> Result<Period, PeriodError> {
        let start = since
            .map(|s| bound("--since", s, Edge::Start))
            .transpose()?;
        let before = until.map(|u| bound("--until", u, Edge::End)).transpose()?;
        if let (Some(s), Some(b)) = (start, before)
            && s >= b
        {
            return Err(PeriodError::Reversed {
                since: since.unwrap_or_default().to_string(),
                until: until.unwrap_or_default().to_string(),
            });
        }
        Ok(Period {
            since: start,
            before,
        })
    }

    /// Whether the instant `t` is in the period.
    pub fn contains(&self, t: Timestamp) -> bool {
        self.since.is_none_or(|s| t >= s) && self.before.is_none_or(|b| t < b)
    }
}

/// Which end of the period a bound is.
#[derive(Clone, Copy)]
enum Edge {
    Start,
    End,
}

/// A bound as an instant: a day's first instant for `Start`, the next
/// day's for `End`; an RFC 3339 instant itself for `Start`, the
/// millisecond after it for `End` (it is included).
fn bound(flag: &'static str, value: &str, edge: Edge) -> Result<Timestamp, PeriodError> {
    let malformed = || PeriodError::Malformed {
        flag,
        value: value.to_string(),
    };
    if let Ok(day) = NaiveDate::parse_from_str(value, "%Y-%m-%d") {
        // `%Y` takes a sign and any number of digits: only the written
        // form `YYYY-MM-DD` is a day.
        if value.len() != 10 {
            return Err(malformed());
        }
        let day = match edge {
            Edge::Start => Some(day),
            Edge::End => day.succ_opt(),
        };
        let ms = day
            .map(|d| d.and_time(NaiveTime::MIN).and_utc().timestamp_millis())
            .ok_or_else(malformed)?;
        return Ok(Timestamp::from_unix_ms(ms));
    }
    let t = Timestamp::parse_rfc3339(value).map_err(|_| malformed())?;
    Ok(match edge {
        Edge::Start => t,
        Edge::End => Timestamp::from_unix_ms(t.unix_ms().saturating_add(1)),
    })
}

/// The UTC day (`YYYY-MM-DD`) of the instant `t`.
pub fn utc_day(t: Timestamp) -> String {
    match chrono::DateTime::from_timestamp_millis(t.unix_ms()) {
        Some(t) => t.format("%Y-%m-%d").to_string(),
        None => format!("@{}", t.unix_ms()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        Timestamp::parse_rfc3339(text).unwrap()
    }

    #[test]
    fn a_day_is_the_whole_utc_day() {
        let p = Period::parse(Some("2026-12-01"), Some("2026-12-01")).unwrap();
        assert!(!p.contains(at("2026-11-30T23:59:59.999Z")));
        assert!(p.contains(at("2026-12-01T00:00:00Z")));
        assert!(p.contains(at("2026-12-01T23:59:59.999Z")));
        assert!(!p.contains(at("2026-12-02T00:00:00Z")));
    }

    #[test]
    fn an_instant_is_included_at_both_ends_with_its_offset() {
        let p = Period::parse(
            Some("2026-12-01T10:00:00+01:00"),
            Some("2026-12-01T12:00:00Z"),
        )
        .unwrap();
        assert!(!p.contains(at("2026-12-01T08:59:59.999Z")));
        assert!(p.contains(at("2026-12-01T09:00:00Z")));
        assert!(p.contains(at("2026-12-01T12:00:00Z")));
        assert!(!p.contains(at("2026-12-01T12:00:00.001Z")));
    }

    #[test]
    fn adjacent_periods_share_no_instant() {
        let first = Period::parse(None, Some("2026-12-01")).unwrap();
        let second = Period::parse(Some("2026-12-02"), None).unwrap();
        for t in ["2026-12-01T23:59:59.999Z", "2026-12-02T00:00:00Z"] {
            assert!(first.contains(at(t)) != second.contains(at(t)), "{t}");
        }
    }

    #[test]
    fn malformed_bounds_name_the_flag_and_the_value() {
        for (since, until, flag, value) in [
            (Some("yesterday"), None, "--since", "yesterday"),
            (None, Some("2026-13-01"), "--until", "2026-13-01"),
            (None, Some("2026-02-30"), "--until", "2026-02-30"),
            (Some("2026-1-5"), None, "--since", "2026-1-5"),
            (Some("+2026-01-05"), None, "--since", "+2026-01-05"),
            (Some("-1"), None, "--since", "-1"),
            (Some(""), None, "--since", ""),
            (
                None,
                Some("2026-12-01T25:00:00Z"),
                "--until",
                "2026-12-01T25:00:00Z",
            ),
        ] {
            let e = Period::parse(since, until).unwrap_err();
            assert_eq!(
                e,
                PeriodError::Malformed {
                    flag,
                    value: value.into()
                }
            );
            assert!(
                e.to_string().starts_with(&format!("{flag} {value:?}")),
                "{e}"
            );
        }
    }

    #[test]
    fn since_after_until_is_refused_and_one_day_is_not() {
        let e = Period::parse(Some("2026-12-02"), Some("2026-12-01")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--since 2026-12-02 is after --until 2026-12-01: the period is empty"
        );
        assert!(Period::parse(Some("2026-12-01T10:00:00Z"), Some("2026-12-01T10:00:00Z")).is_ok());
    }

    #[test]
    fn days_are_utc() {
        assert_eq!(utc_day(at("2026-12-01T23:30:00-02:00")), "2026-12-02");
        assert_eq!(utc_day(at("2026-12-01T00:00:00Z")), "2026-12-01");
    }
}
