//! Pacing: requests and tokens per minute, spent before the server has to
//! refuse.
//!
//! Each limit is a token bucket that refills continuously at `limit / 60`
//! per second and holds at most one second's worth (and at least one
//! request's worth), so traffic comes out smooth rather than in a burst at
//! the top of each minute — providers enforce their per-minute limits over
//! much shorter windows. A request reserves its cost at once, possibly
//! driving the bucket into debt, and then sleeps until the debt is paid:
//! waiters are served in the order they arrived, and one request larger
//! than the bucket still goes through once the bucket is full.
//!
//! The token cost of a request is its prompt's token count (ctx counts it
//! before dispatch) plus the completion cap its body carries
//! (`max_completion_tokens` or `max_tokens`, decided in one place,
//! `wire::completion_cap`), which is how providers reckon a request
//! against a tokens-per-minute limit.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// One limit.
#[derive(Debug)]
struct Bucket {
    /// Units per second.
    rate: f64,
    /// Most units the bucket holds.
    capacity: f64,
    /// Units available now; negative while reservations are outstanding.
    level: f64,
    /// When `level` was last brought up to date.
    updated: Instant,
}

impl Bucket {
    fn per_minute(limit: u32, now: Instant) -> Bucket {
        let rate = f64::from(limit.max(1)) / 60.0;
        let capacity = rate.max(1.0);
        Bucket {
            rate,
            capacity,
            level: capacity,
            updated: now,
        }
    }

    /// Reserves `cost` units and says how long to wait before spending them.
    fn reserve(&mut self, cost: f64, now: Instant) -> Duration {
        let elapsed = now.saturating_duration_since(self.updated).as_secs_f64();
        self.level = (self.level + elapsed * self.rate).min(self.capacity);
        self.updated = now;
        // A request larger than the bucket waits for a full bucket.
        let needed = cost.min(self.capacity);
        let wait = if self.level >= needed {
            0.0
        } else {
            (needed - self.level) / self.rate
        };
        self.level -= cost;
        Duration::from_secs_f64(wait.clamp(0.0, 1e9))
    }
}

/// The `--rpm` and `--tpm` limits of one engine, shared by all its tasks.
#[derive(Debug)]
pub(crate) struct Pacer {
    requests: Option<Mutex<Bucket>>,
    tokens: Option<Mutex<Bucket>>,
}

impl Pacer {
    /// A pacer with either limit, both, or neither.
    pub(crate) fn new(requests_per_minute: Option<u32>, tokens_per_minute: Option<u32>) -> Pacer {
        let now = Instant::now();
        Pacer {
            requests: requests_per_minute.map(|l| Mutex::new(Bucket::per_minute(l, now))),
            tokens: tokens_per_minute.map(|l| Mutex::new(Bucket::per_minute(l, now))),
        }
    }

    /// Reserves one request of `tokens` tokens and returns how long the
    /// caller must sleep before sending it.
    pub(crate) fn reserve(&self, tokens: u64) -> Duration {
        let now = Instant::now();
        let take = |bucket: &Option<Mutex<Bucket>>, cost: f64| {
            bucket.as_ref().map_or(Duration::ZERO, |b| {
                // A poisoned lock only means another task panicked while
                // holding it; the bucket's numbers are still usable.
                let mut b = b.lock().unwrap_or_else(|p| p.into_inner());
                b.reserve(cost, now)
            })
        };
        let by_requests = take(&self.requests, 1.0);
        // Precision below one token is meaningless; f64 holds u64 counts far
        // beyond any real prompt exactly enough.
        let by_tokens = take(&self.tokens, tokens as f64);
        by_requests.max(by_tokens)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(d: Duration) -> f64 {
        (d.as_secs_f64() * 1000.0).round() / 1000.0
    }

    #[test]
    fn requests_are_spaced_evenly() {
        let t0 = Instant::now();
        let mut b = Bucket::per_minute(120, t0); // 2/s, holds 2
        let waits: Vec<f64> = (0..6).map(|_| secs(b.reserve(1.0, t0))).collect();
        assert_eq!(waits, [0.0, 0.0, 0.5, 1.0, 1.5, 2.0]);
    }

    #[test]
    fn slow_limits_still_let_one_request_through() {
        let t0 = Instant::now();
        let mut b = Bucket::per_minute(6, t0); // one every 10 s
        assert_eq!(secs(b.reserve(1.0, t0)), 0.0);
        assert_eq!(secs(b.reserve(1.0, t0)), 10.0);
        // That one left at 10 s; at 15 s half a request has refilled.
        let later = t0 + Duration::from_secs(15);
        assert_eq!(secs(b.reserve(1.0, later)), 5.0);
    }

    #[test]
    fn a_request_larger_than_the_bucket_waits_for_a_full_one_then_owes() {
        let t0 = Instant::now();
        let mut b = Bucket::per_minute(6000, t0); // 100 tokens/s, holds 100
        assert_eq!(secs(b.reserve(250.0, t0)), 0.0); // full bucket: goes, owes 150
        assert_eq!(secs(b.reserve(50.0, t0)), 2.0); // pays 150 debt + 50
        let later = t0 + Duration::from_secs(60);
        assert_eq!(secs(b.reserve(50.0, later)), 0.0); // refilled, capped at 100
        assert_eq!(secs(b.reserve(100.0, later)), 0.5);
    }

    #[test]
    fn pacer_takes_the_longer_of_both_waits() {
        let p = Pacer::new(Some(6000), Some(60));
        assert_eq!(p.reserve(1), Duration::ZERO);
        let second = p.reserve(1);
        assert!(second >= Duration::from_millis(900), "{second:?}");
        let none = Pacer::new(None, None);
        assert_eq!(none.reserve(1_000_000), Duration::ZERO);
    }
}
