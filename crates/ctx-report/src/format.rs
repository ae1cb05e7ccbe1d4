//! Numbers as the report writes them: durations, token counts, dollars,
//! SVG coordinates. Fixed formats only (no locale, no clock), so the same
//! input gives the same bytes.

use ctx_model::money::{Round, Usd, dollars};

// A duration for people, the one format of ctx
// (`ctx_model::display::duration_ms`): `850 ms`, `4 min 05 s`.
pub use ctx_model::display::duration_ms as duration;

/// A short axis label: `0`, `500 ms`, `30 s`, `2 min`, `1.5 h`.
pub fn axis(ms: i64) -> String {
    if ms == 0 {
        "0".into()
    } else if ms < 1_000 {
        format!("{ms} ms")
    } else if ms < 60_000 {
        trim(ms as f64 / 1e3, "s")
    } else if ms < 3_600_000 {
        trim(ms as f64 / 6e4, "min")
    } else {
        trim(ms as f64 / 3.6e6, "h")
    }
}

fn trim(v: f64, unit: &str) -> String {
    let s = format!("{v:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s} {unit}")
}

/// A count with thousands separators: `12,345`.
pub fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `1 task`, `2 tasks`, `12,345 tasks`: a count of tasks in words.
pub fn tasks(n: usize) -> String {
    let noun = if n == 1 { "task" } else { "tasks" };
    format!("{} {noun}", count(n as u64))
}

/// A cost as every output of ctx prints it ([`dollars`]: six decimals
/// rounded up, an amount under a micro-dollar exactly), read from the
/// report's `f64` as the stored amount's shortest decimal; `unknown` for
/// a value no amount has (NaN, infinite, negative).
///
/// Why not `format!("{v:.6}")`: it rounds to nearest, so a call that cost
/// $0.0000175 showed $0.000017 here and $0.000018 in `ctx runs show` and
/// the run's summary, which print a bound.
pub fn usd(v: f64) -> String {
    Usd::from_f64(v).map_or_else(|_| "unknown".into(), dollars)
}

/// The size of a saving as the text outputs print it: six decimals,
/// rounded up (`ctx_run::cache_figures`).
fn saving_size(v: f64) -> String {
    Usd::from_f64(v.abs()).map_or_else(|_| "unknown".into(), |u| u.to_dollars(6, Round::Up))
}

/// An optional cost: `unknown` when absent.
pub fn usd_opt(v: Option<f64>) -> String {
    v.map_or_else(|| "unknown".into(), usd)
}

/// What the provider's prompt cache did: `3,000 of 4,600 prompt tokens
/// read (65.2%), 1,500 tokens written, saved $0.008100` (each part only
/// when reported, the share only when the prompt tokens the reads are
/// part of are known; `cost $0.000750 more` for a negative saving), or
/// `not reported`, never a 0 the server did not give.
pub fn prompt_cache(read: CacheRead, written: Option<u64>, saving: Option<f64>) -> String {
    let read = read
        .tokens
        .map(|n| match read.of_prompt.filter(|&p| p > 0) {
            Some(p) => format!(
                "{} of {} prompt tokens read ({:.1}%)",
                count(n),
                count(p),
                n as f64 / p as f64 * 100.0
            ),
            None => format!("{} tokens read", count(n)),
        });
    let written = written.map(|n| format!("{} tokens written", count(n)));
    let mut parts: Vec<String> = read.into_iter().chain(written).collect();
    match saving {
        Some(v) if v < 0.0 => parts.push(format!("cost {} more", saving_size(v))),
        Some(v) => parts.push(format!("saved {}", saving_size(v))),
        None => {}
    }
    if parts.is_empty() {
        "not reported".into()
    } else {
        parts.join(", ")
    }
}

/// Prompt tokens read from the provider's cache, and the prompt tokens of
/// the usage they were reported in (the share's base).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheRead {
    /// Tokens read; `None`: not reported.
    pub tokens: Option<u64>,
    /// The prompt tokens they are part of; `None`: not known.
    pub of_prompt: Option<u64>,
}

/// An SVG coordinate with one decimal.
pub fn px(v: f64) -> String {
    if v.is_finite() {
        let s = format!("{v:.1}");
        s.strip_suffix(".0").map_or(s.clone(), str::to_string)
    } else {
        "0".into()
    }
}

/// A ratio like `1.23×`.
pub fn ratio(num: i64, den: i64) -> Option<String> {
    (den > 0).then(|| format!("{:.2}×", num as f64 / den as f64))
}

/// A nice axis step (1, 2 or 5 × 10^k ms) giving at most about `ticks`
/// ticks over `span` ms.
pub fn tick_step(span: i64, ticks: i64) -> i64 {
    let (span, ticks) = (span.max(1), ticks.max(1));
    let raw = span / ticks + i64::from(span % ticks != 0);
    let mut base = 1i64;
    loop {
        for m in [1, 2, 5] {
            let step = base.saturating_mul(m);
            if step >= raw {
                return step;
            }
        }
        if base > i64::MAX / 10 {
            return i64::MAX;
        }
        base *= 10;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_of_tasks_agrees_in_number() {
        assert_eq!(tasks(0), "0 tasks");
        assert_eq!(tasks(1), "1 task");
        assert_eq!(tasks(2), "2 tasks");
        assert_eq!(tasks(12_345), "12,345 tasks");
    }

    #[test]
    fn the_prompt_cache_says_not_reported_rather_than_zero() {
        let read = |tokens, of_prompt| CacheRead { tokens, of_prompt };
        assert_eq!(
            prompt_cache(CacheRead::default(), None, None),
            "not reported"
        );
        assert_eq!(
            prompt_cache(read(Some(0), None), None, Some(0.0)),
            "0 tokens read, saved $0.000000"
        );
        assert_eq!(
            prompt_cache(read(Some(3000), Some(4600)), Some(1500), Some(0.0081)),
            "3,000 of 4,600 prompt tokens read (65.2%), 1,500 tokens written, saved $0.008100"
        );
        assert_eq!(
            prompt_cache(read(Some(0), Some(0)), None, None),
            "0 tokens read"
        );
        assert_eq!(
            prompt_cache(read(None, Some(4600)), Some(1500), Some(-0.00075)),
            "1,500 tokens written, cost $0.000750 more"
        );
    }

    #[test]
    fn formats() {
        assert_eq!(axis(0), "0");
        assert_eq!(axis(30_000), "30 s");
        assert_eq!(axis(90_000), "1.5 min");
        assert_eq!(count(0), "0");
        assert_eq!(count(1_234_567), "1,234,567");
        assert_eq!(usd(0.5), "$0.500000");
        assert_eq!(usd(12.0), "$12.000000");
        assert_eq!(usd(0.000123), "$0.000123");
        assert_eq!(usd_opt(None), "unknown");
        // Rounded up, as `ctx runs show` and the run's summary print a
        // cost: never to nearest.
        assert_eq!(usd(0.0000175), "$0.000018");
        assert_eq!(usd(0.0000121), "$0.000013");
        // Under a micro-dollar, exactly; no amount, unknown.
        assert_eq!(usd(0.00000042), "$0.00000042");
        assert_eq!(usd(0.0), "$0.000000");
        assert_eq!(usd(f64::NAN), "unknown");
        assert_eq!(usd(-1.0), "unknown");
        assert_eq!(px(3.0), "3");
        assert_eq!(px(3.25), "3.2");
        assert_eq!(px(f64::NAN), "0");
        assert_eq!(ratio(3, 2).as_deref(), Some("1.50×"));
        assert_eq!(ratio(3, 0), None);
        assert_eq!(tick_step(10_000, 8), 2_000);
        assert_eq!(tick_step(0, 8), 1);
        assert!(tick_step(i64::MAX, 8) >= i64::MAX / 8);
    }
}
