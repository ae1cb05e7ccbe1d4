//! Runs the tests draw: the Tetris fixture plan with synthetic times, and
//! seeded random runs of any size shaped like the scheduling benchmark's
//! plan (`crates/ctx-deps/benches/schedule.rs`).
#![allow(dead_code)]

use std::path::PathBuf;

use ctx_report::{
    AttemptOutcome, AttemptReport, CheckAttemptReport, CheckReport, DependencyCut, RunReportInput,
    RunStatus, TaskReport, TaskState, Timestamp,
};

/// The payloads a hostile output would carry.
pub const ATTACKS: [&str; 4] = [
    "</script><script>document.title='pwned'</script>",
    "<img src=x onerror=\"document.title='pwned'\">",
    "<a href=\"javascript:document.title='pwned'\">click me</a> javascript:document.title='pwned'",
    "<svg onload=\"document.documentElement.setAttribute('data-pwned','1')\"></svg><style>*{display:none}</style>",
];

/// 2026-11-30T10:00:00Z.
pub fn t0() -> i64 {
    Timestamp::parse_rfc3339("2026-11-30T10:00:00.000Z")
        .unwrap()
        .unix_ms()
}

pub fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// List-schedules tasks (input order among ready ones) on `slots` workers
/// with the given durations and a 120 ms dispatch gap; returns (start, end)
/// offsets in ms.
fn schedule(deps: &[Vec<usize>], dur: &[i64], slots: usize) -> Vec<(i64, i64)> {
    let n = deps.len();
    let mut times: Vec<Option<(i64, i64)>> = vec![None; n];
    let mut free = vec![0i64; slots];
    loop {
        // The ready task that can start earliest (ties: input order).
        let next = (0..n)
            .filter(|&i| times[i].is_none())
            .filter_map(|i| {
                let ready = deps[i]
                    .iter()
                    .map(|&d| times[d].map(|t| t.1))
                    .try_fold(0i64, |m, e| e.map(|e| m.max(e)))?;
                Some((ready, i))
            })
            .min();
        let Some((ready, i)) = next else { break };
        let (slot, &at) = free
            .iter()
            .enumerate()
            .min_by_key(|&(k, &f)| (f, k))
            .unwrap();
        let start = ready.max(at) + 120;
        times[i] = Some((start, start + dur[i]));
        free[slot] = start + dur[i];
    }
    times.into_iter().map(|t| t.unwrap()).collect()
}

/// The Tetris fixture's 9 tasks run on two workers, all completed: task 3's
/// first call hit HTTP 429 and was retried, task 7's first output failed a
/// check, task 2 was served from the cache, task 5 has no known price, and
/// task 9 kept only part of task 7's output. With `attack`, every piece of
/// task content carries the [`ATTACKS`].
pub fn tetris_run(attack: bool) -> RunReportInput {
    let plan = ctx_model::load_plan(&workspace_root().join("fixtures/tetris/plan.yaml")).unwrap();
    let ids: Vec<&str> = plan.sub_tasks.iter().map(|t| t.id.as_str()).collect();
    let deps: Vec<Vec<usize>> = plan
        .sub_tasks
        .iter()
        .map(|t| {
            t.dependencies
                .iter()
                .map(|d| ids.iter().position(|i| i == d).unwrap())
                .collect()
        })
        .collect();
    let dur = [4_200, 40, 9_800, 5_200, 4_100, 7_600, 12_400, 6_300, 8_800];
    assert_eq!(dur.len(), ids.len(), "the Tetris plan has 9 tasks");
    let times = schedule(&deps, &dur, 2);
    let origin = t0();
    let at = |ms: i64| Some(Timestamp::from_unix_ms(origin + ms));
    let hostile = ATTACKS.join("\n");
    let tasks = plan
        .sub_tasks
        .iter()
        .enumerate()
        .map(|(i, st)| {
            let (s, e) = times[i];
            let mut t = TaskReport::new(st.id.clone(), TaskState::Completed);
            t.description = st.description.clone();
            t.dependencies = st.dependencies.clone();
            t.started_at = at(s);
            t.ended_at = at(e);
            t.model = Some("gpt-4o-mini".into());
            t.prompt_tokens = Some(420 + 380 * st.dependencies.len() as u64);
            t.completion_tokens = Some(dur[i] as u64 / 9);
            t.cost_usd = (st.id != "5").then(|| {
                t.prompt_tokens.unwrap() as f64 * 0.15e-6
                    + t.completion_tokens.unwrap() as f64 * 0.6e-6
            });
            t.cached = st.id == "2";
            t.prompt = Some(format!(
                "### Task {}: {}\n\nWrite the code for this part of the game.\n",
                st.id, st.description
            ));
            t.output = format!(
                "<!-- part {id} -->\n<script>\n  // {desc}\n  function part{id}() {{ return 1 < 2 && 3 > 2; }}\n</script>\n",
                id = st.id,
                desc = st.description
            );
            let attempt = |n, s: i64, e: i64, outcome, class: &str, error: Option<&str>| AttemptReport {
                number: n,
                started_at: at(s),
                ended_at: at(e),
                outcome,
                class: Some(class.into()),
                error: error.map(str::to_string),
                batch_id: None,
                service_tier: None,
                tier_fallback: None,
            };
            t.attempts = match st.id.as_str() {
                "3" => vec![
                    attempt(1, s, s + 1_500, AttemptOutcome::Retry, "http_429", Some("rate limited")),
                    attempt(2, s + 2_300, e, AttemptOutcome::Success, "ok", None),
                ],
                "7" => vec![
                    attempt(1, s, s + 5_000, AttemptOutcome::CheckFailure, "check:js_parses", Some("SyntaxError: unexpected token at line 12")),
                    attempt(2, s + 5_000, e, AttemptOutcome::Success, "ok", None),
                ],
                "2" => Vec::new(),
                _ => vec![attempt(1, s, e, AttemptOutcome::Success, "ok", None)],
            };
            if st.id == "7" {
                let check = |kind: &str, passed, message: &str| CheckReport {
                    kind: kind.into(),
                    passed,
                    message: message.into(),
                    detail: None,
                };
                t.check_attempts = vec![
                    CheckAttemptReport {
                        number: 1,
                        checks: vec![
                            check("contains", true, "contains \"<canvas\""),
                            check("regex", false, "no match for `function \\w+\\(`"),
                        ],
                        error: None,
                    },
                    CheckAttemptReport {
                        number: 2,
                        checks: vec![
                            check("contains", true, "contains \"<canvas\""),
                            check("regex", true, "matches `function \\w+\\(`"),
                        ],
                        error: None,
                    },
                ];
            }
            if st.id == "9" {
                t.dependency_cuts = st
                    .dependencies
                    .iter()
                    .map(|d| DependencyCut {
                        task_id: d.clone(),
                        kept_tokens: if d == "7" { 900 } else { 380 },
                        original_tokens: if d == "7" { 1_377 } else { 380 },
                    })
                    .collect();
            }
            if attack {
                t.description = format!("{} {hostile}", t.description);
                t.output = format!("{}{hostile}\n", t.output);
                t.prompt = Some(format!("{}{hostile}\n", t.prompt.unwrap()));
                t.model = Some(ATTACKS[1].into());
                t.error = Some(hostile.clone());
                for a in &mut t.attempts {
                    a.class = Some(ATTACKS[0].into());
                    a.error = Some(hostile.clone());
                }
                for c in &mut t.dependency_cuts {
                    c.task_id = format!("{}{}", c.task_id, ATTACKS[1]);
                }
                for a in &mut t.check_attempts {
                    a.error = Some(hostile.clone());
                    for c in &mut a.checks {
                        c.kind = ATTACKS[0].into();
                        c.message = hostile.clone();
                    }
                }
            }
            t
        })
        .collect::<Vec<_>>();
    let end = times.iter().map(|t| t.1).max().unwrap() + 200;
    RunReportInput {
        run_id: if attack {
            format!("20261130T100000.000Z-0badc0de{}", ATTACKS[0])
        } else {
            "20261130T100000.000Z-7e7715a1".into()
        },
        plan: if attack {
            format!("fixtures/tetris/plan.yaml{}", ATTACKS[1])
        } else {
            "fixtures/tetris/plan.yaml".into()
        },
        status: RunStatus::Completed,
        started_at: at(0),
        ended_at: at(end),
        as_of: None,
        tasks,
        published: Vec::new(),
        fallback: None,
        decisions: Vec::new(),
    }
}

/// A tiny deterministic generator (SplitMix64).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
}

/// A completed run of `n` tasks shaped like the scheduling benchmark's
/// plan: every tenth task a source, the others with 1–20 dependencies among
/// the previous 300 tasks, latencies 200–5,000 ms, run on 16 workers;
/// outputs 500–5,000 characters and prompts of the task's own text plus its
/// dependencies' outputs cut to 6,000 characters; one call in 25 retried,
/// one in 40 failing a check.
pub fn synthetic_run(n: usize, seed: u64) -> RunReportInput {
    let mut rng = Rng::new(seed);
    let deps: Vec<Vec<usize>> = (0..n)
        .map(|i| {
            if i.is_multiple_of(10) {
                return Vec::new();
            }
            let lo = i.saturating_sub(300);
            let k = rng.range(1, 20.min(i as u64)) as usize;
            let mut d: Vec<usize> = (0..k)
                .map(|_| rng.range(lo as u64, i as u64 - 1) as usize)
                .collect();
            d.sort();
            d.dedup();
            d
        })
        .collect();
    let dur: Vec<i64> = (0..n).map(|_| rng.range(200, 5_000) as i64).collect();
    let times = schedule(&deps, &dur, 16);
    let words = [
        "tile", "board", "piece", "score", "level", "render", "loop", "input", "queue", "bag",
    ];
    let outputs: Vec<String> = (0..n)
        .map(|_| {
            let len = rng.range(500, 5_000) as usize;
            let mut s = String::with_capacity(len + 8);
            while s.len() < len {
                s.push_str(words[(rng.next() % 10) as usize]);
                s.push(if rng.next().is_multiple_of(12) {
                    '\n'
                } else {
                    ' '
                });
            }
            s
        })
        .collect();
    let origin = t0();
    let at = |ms: i64| Some(Timestamp::from_unix_ms(origin + ms));
    let tasks = (0..n)
        .map(|i| {
            let (s, e) = times[i];
            let mut t = TaskReport::new(format!("task-{i:04}"), TaskState::Completed);
            t.description = format!("Synthetic task {i} of {n}.");
            t.dependencies = deps[i].iter().map(|&d| format!("task-{d:04}")).collect();
            t.started_at = at(s);
            t.ended_at = at(e);
            let mut prompt = format!("### Task {i}\n\nDo part {i}.\n");
            let room = 6_000usize;
            for &d in &deps[i] {
                let original = outputs[d].len() as u64 / 4;
                let share = room / deps[i].len();
                let kept_text = &outputs[d][..outputs[d].len().min(share)];
                prompt.push_str(&format!("\n### Task {d}\n{kept_text}\n"));
                t.dependency_cuts.push(DependencyCut {
                    task_id: format!("task-{d:04}"),
                    kept_tokens: kept_text.len() as u64 / 4,
                    original_tokens: original,
                });
            }
            t.prompt_tokens = Some(prompt.len() as u64 / 4);
            t.prompt = Some(prompt);
            t.output = outputs[i].clone();
            t.completion_tokens = Some(t.output.len() as u64 / 4);
            t.cost_usd = Some(
                t.prompt_tokens.unwrap() as f64 * 0.15e-6
                    + t.completion_tokens.unwrap() as f64 * 0.6e-6,
            );
            let attempt = |number, s: i64, e: i64, outcome, class: &str| AttemptReport {
                number,
                started_at: at(s),
                ended_at: at(e),
                outcome,
                class: Some(class.into()),
                error: None,
                batch_id: None,
                service_tier: None,
                tier_fallback: None,
            };
            t.attempts = match rng.next() % 100 {
                0..=3 => vec![
                    attempt(1, s, (s + e) / 2, AttemptOutcome::Retry, "timeout"),
                    attempt(2, (s + e) / 2, e, AttemptOutcome::Success, "ok"),
                ],
                4..=6 => vec![
                    attempt(1, s, (s + e) / 2, AttemptOutcome::CheckFailure, "check"),
                    attempt(2, (s + e) / 2, e, AttemptOutcome::Success, "ok"),
                ],
                _ => vec![attempt(1, s, e, AttemptOutcome::Success, "ok")],
            };
            t
        })
        .collect();
    let end = times.iter().map(|t| t.1).max().unwrap_or(0);
    RunReportInput {
        run_id: format!("20261130T100000.000Z-{seed:08x}"),
        plan: format!("synthetic plan, {n} tasks, seed {seed}"),
        status: RunStatus::Completed,
        started_at: at(0),
        ended_at: at(end + 100),
        as_of: None,
        tasks,
        published: Vec::new(),
        fallback: None,
        decisions: Vec::new(),
    }
}

/// A mapped run as `ctx runs report` reads it: `src`, the map task `scan`
/// (its span from its expansion to its join), its three items listed
/// after it but started out of order (`scan[2]` first), a task `other`
/// that starts between them, and the reduce `report`.
pub fn mapped_run() -> RunReportInput {
    let at = |s: i64| Some(Timestamp::from_unix_ms(t0() + s));
    let task = |id: &str, deps: &[&str], item_of: Option<&str>, start: i64, end: i64| {
        let mut t = TaskReport::new(id, TaskState::Completed);
        t.description = format!("Task {id}");
        t.dependencies = deps.iter().map(|d| d.to_string()).collect();
        t.item_of = item_of.map(str::to_string);
        t.started_at = at(start);
        t.ended_at = at(end);
        t.output = format!("output of {id}");
        t
    };
    RunReportInput {
        run_id: "20261130T100000.000Z-0000map0".into(),
        plan: "map.yaml".into(),
        status: RunStatus::Completed,
        started_at: at(0),
        ended_at: at(9_000),
        as_of: None,
        tasks: vec![
            task("src", &[], None, 0, 1_000),
            task("scan", &["src"], None, 1_000, 6_000),
            task("scan[0]", &[], Some("scan"), 3_000, 5_000),
            task("scan[1]", &[], Some("scan"), 2_000, 6_000),
            task("scan[2]", &[], Some("scan"), 1_000, 2_500),
            task("other", &[], None, 1_500, 3_000),
            task("report", &["scan"], None, 6_000, 9_000),
        ],
        published: Vec::new(),
        fallback: None,
        decisions: Vec::new(),
    }
}
