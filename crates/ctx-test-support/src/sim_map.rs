//! The map workload both map benchmarks run (issue 23): the same plan,
//! the same list, the same call latencies and the same lower bound, on
//! the local stores (`ctx-store-sqlite`'s `map` bench, on Tokio's paused
//! clock) and on the shared PostgreSQL store (`ctx-worker`'s `shared_map`
//! bench, on the real clock).
//!
//! Why one module: a ratio of makespan to bound compares two stores only
//! when the work and the bound are the same on both. Written once per
//! bench, a changed latency or a new term in one bound would make the two
//! figures quietly measure different things.
//!
//! The plan is `src → scan → report`: `src` answers a JSON list of N
//! items, `scan` maps over it (`max_items: N`), `report` reduces every
//! item's output. [`SimMap::engine`] answers each call after its
//! latency, slept on Tokio's clock (paused or real, as the bench's
//! runtime has it): by default items take 200–5,000 ms from a fixed
//! generator ([`item_ms`]), `src` 500 ms and `report` 3,000 ms, like
//! model calls; [`SimMap::fixed`] makes every call take the same time
//! instead, the stress case that shows what the store costs an item.

use std::time::Duration;

use ctx_engine::{BoxFuture, EngineError, InferenceEngine, InferenceRequest, InferenceResponse};
use ctx_model::{MapSpec, Plan};

/// `src`'s latency in the default workload.
pub const SRC_MS: u64 = 500;
/// `report`'s latency in the default workload.
pub const REPORT_MS: u64 = 3_000;

/// Item `i`'s latency in the default workload: 200–5,000 ms from a fixed
/// generator (a SplitMix64 step of `i`), so every run sees the same list.
pub fn item_ms(i: usize) -> u64 {
    let mut x = (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x ^= x >> 31;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 29;
    200 + x % 4_801
}

/// A map of `items` items, with the default latencies or a fixed one.
#[derive(Debug, Clone, Copy)]
pub struct SimMap {
    /// How many items the list holds.
    pub items: usize,
    /// Every call's latency in milliseconds, instead of the defaults.
    pub fixed_ms: Option<u64>,
}

impl SimMap {
    /// `items` items with the default latencies.
    pub fn new(items: usize) -> SimMap {
        SimMap {
            items,
            fixed_ms: None,
        }
    }

    /// The same map with every call taking `ms` milliseconds.
    pub fn fixed(self, ms: u64) -> SimMap {
        SimMap {
            fixed_ms: Some(ms),
            ..self
        }
    }

    /// Item `i`'s latency in milliseconds.
    pub fn item_ms(&self, i: usize) -> u64 {
        self.fixed_ms.unwrap_or_else(|| item_ms(i))
    }

    fn src_ms(&self) -> u64 {
        self.fixed_ms.unwrap_or(SRC_MS)
    }

    fn report_ms(&self) -> u64 {
        self.fixed_ms.unwrap_or(REPORT_MS)
    }

    /// The plan: `src`, `scan` mapping over `src`'s `/items`, `report`.
    pub fn plan(&self) -> Plan {
        let mut plan: Plan = serde_json::from_value(serde_json::json!({
            "schema_version": 1,
            "sub_tasks": [
                {"id": "src", "description": "The list",
                 "tool_or_prompt": {"name": "inference", "params": {"prompt": "List them."}}},
                {"id": "scan", "description": "One repository", "dependencies": ["src"],
                 "tool_or_prompt": {"name": "inference", "params": {
                     "prompt": "Rate <untrusted-content>{{REPO}}</untrusted-content>."}}},
                {"id": "report", "description": "The report", "dependencies": ["scan"],
                 "tool_or_prompt": {"name": "inference", "params": {"prompt": "Sum up."}}}
            ]
        }))
        .expect("the plan");
        // The reduce receives every item under its own heading (about 16
        // tokens each even with every output cut): 10,000 items need a cap
        // of some 160,000 tokens, which a long-context model has; a longer
        // list gets 40 tokens an item (30,000 items: 1.2 M), so the reduce
        // of any size the bench runs fits.
        plan.config.max_prompt_tokens = (self.items * 40).max(400_000);
        plan.sub_tasks[1].map = Some(MapSpec {
            over: "src".into(),
            pointer: Some("/items".into()),
            item: "REPO".into(),
            max_items: Some(self.items.max(1)),
            allow_failures: 0,
            variable_value: None,
        });
        plan
    }

    /// The engine answering this map's calls after their latencies.
    pub fn engine(&self) -> SimEngine {
        let list: Vec<String> = (0..self.items).map(|i| format!("org/repo-{i}")).collect();
        SimEngine {
            map: *self,
            list: serde_json::json!({ "items": list }).to_string(),
        }
    }

    /// The lower bound of the makespan with `in_flight` calls at once:
    /// `src + max(longest item, total item work ÷ in_flight) + report`.
    /// No schedule beats it: the items cannot start before the list, nor
    /// the reduce before the last item.
    pub fn bound(&self, in_flight: usize) -> Duration {
        let work: u64 = (0..self.items).map(|i| self.item_ms(i)).sum();
        let longest = (0..self.items).map(|i| self.item_ms(i)).max().unwrap_or(0);
        let items = longest.max(work.div_ceil(in_flight.max(1) as u64));
        Duration::from_millis(self.src_ms() + items + self.report_ms())
    }

    /// How many tasks a finished run holds: the list, the map task, each
    /// item and the reduce.
    pub fn tasks(&self) -> usize {
        self.items + 3
    }
}

/// Answers `src` with the list, each item with a line naming it, and the
/// reduce with a line, each after its latency on Tokio's clock.
pub struct SimEngine {
    map: SimMap,
    list: String,
}

impl InferenceEngine for SimEngine {
    fn name(&self) -> &str {
        "sim"
    }

    fn infer<'a>(
        &'a self,
        request: &'a InferenceRequest,
    ) -> BoxFuture<'a, Result<InferenceResponse, EngineError>> {
        Box::pin(async move {
            let id = request.task_id.as_str();
            let (ms, output) = match ctx_model::map::parse_item_id(id) {
                Some((_, i)) => (self.map.item_ms(i), format!("item {i}: rated 4 of 5")),
                None if id == "src" => (self.map.src_ms(), self.list.clone()),
                None => (self.map.report_ms(), "the report".to_string()),
            };
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok(InferenceResponse {
                output,
                ..InferenceResponse::default()
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_latencies_stay_between_200_and_5000_ms_and_repeat() {
        let map = SimMap::new(1_000);
        assert!((0..1_000).all(|i| (200..=5_000).contains(&map.item_ms(i))));
        assert_eq!(item_ms(7), item_ms(7));
        assert_ne!(item_ms(7), item_ms(8));
    }

    #[test]
    fn the_bound_is_the_list_the_busiest_share_of_the_items_and_the_reduce() {
        // 10 items of 20 ms on 4 slots: 200 ms of work, 50 ms a slot.
        let map = SimMap::new(10).fixed(20);
        assert_eq!(map.bound(4), Duration::from_millis(20 + 50 + 20));
        // More slots than items: the longest item bounds them.
        assert_eq!(map.bound(100), Duration::from_millis(20 + 20 + 20));
        // Zero slots is read as one, never a division by zero.
        assert_eq!(map.bound(0), Duration::from_millis(20 + 200 + 20));
        let longest = (0..10).map(item_ms).max().unwrap();
        let work: u64 = (0..10).map(item_ms).sum();
        assert_eq!(
            SimMap::new(10).bound(2),
            Duration::from_millis(SRC_MS + longest.max(work.div_ceil(2)) + REPORT_MS)
        );
    }

    #[test]
    fn the_plan_maps_over_the_lists_items_with_a_cap_of_the_list_length() {
        let plan = SimMap::new(42).plan();
        let map = plan.sub_tasks[1].map.as_ref().unwrap();
        assert_eq!(map.max_items, Some(42));
        assert_eq!(map.pointer.as_deref(), Some("/items"));
        assert_eq!(SimMap::new(42).tasks(), 45);
    }
}
