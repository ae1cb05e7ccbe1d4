//! `ctx run --max-cost` in the executor: the run never spends more than its
//! budget when every task has `max_tokens`, over random plans (DAGs),
//! prices, usages, failures and retries, with in-process engines — one
//! that reports usage (random, never above `max_tokens`) and one that
//! reports none (its output counted, and cut at `max_tokens`). Tasks may
//! carry checks that pass, that never pass (every check attempt is made)
//! and `judge` checks (a judge call per check attempt, through the same
//! engine): the bound then counts every check attempt and its judges.
//!
//! Latencies run on tokio's paused clock, so a case costs no wall time.

use std::collections::BTreeMap;
use std::sync::Arc;

use ctx_cost::{Price, Rate, Usage, Usd};
use ctx_deps::{
    BoxFuture, CostModel, CostOptions, EngineError, Executor, ExecutorOptions, InferenceEngine,
    InferenceRequest, InferenceResponse, MemoryStore, RunReport, is_budget_skip,
};
use ctx_model::{Attempt, Plan, SubTask, TaskStatus, TokenUsage};
use ctx_tokens::TokenizerExt;
use proptest::prelude::*;

/// Tokens a server may add around a prompt (chat framing); the bound
/// allows for them as `ctx plan cost` does.
const FRAMING: u64 = 24;

/// Prices per model, `max_tokens` from each task's params, and the
/// attempts the engine may make.
struct Prices {
    by_model: BTreeMap<String, Price>,
    cap: u64,
    attempts: u32,
    /// Per task with checks: its check attempts, and the most prompt
    /// tokens of its judge call when it has a judge check.
    checks: BTreeMap<String, (u32, Option<u64>)>,
}

/// The `max_tokens` of the judge checks the generated plans carry.
const JUDGE_MAX_TOKENS: u64 = 20;
/// The rubric of those checks.
const RUBRIC: &str = "Is the answer complete?";

impl Prices {
    fn price(&self, task: &SubTask) -> Option<&Price> {
        self.by_model.get(
            task.tool_or_prompt
                .params
                .model
                .as_deref()
                .unwrap_or_default(),
        )
    }
}

impl CostModel for Prices {
    fn bound(&self, task: &SubTask) -> Option<Usd> {
        let max = self.max_tokens(task)?;
        let price = self.price(task)?;
        let (check_attempts, judge_prompt) =
            self.checks.get(&task.id).copied().unwrap_or((1, None));
        // One check attempt: the task's call and its judge's, each with
        // the engine's attempts.
        let mut one = price.highest_cost(self.cap + FRAMING, max);
        if let Some(judge_prompt) = judge_prompt {
            one = one.saturating_add(price.highest_cost(judge_prompt, JUDGE_MAX_TOKENS));
        }
        Some(one.saturating_mul(u64::from(self.attempts) * u64::from(check_attempts)))
    }
    fn max_tokens(&self, task: &SubTask) -> Option<u64> {
        task.tool_or_prompt.params.max_tokens.map(u64::from)
    }
    fn call_cost(&self, task: &SubTask, usage: &Usage) -> Option<Usd> {
        Some(self.price(task)?.cost(usage))
    }
}

/// What the engine does for one task.
#[derive(Debug, Clone)]
struct Behaviour {
    latency_ms: u64,
    /// Calls that fail before the one that answers (or all, when `fails`).
    failed_calls: u32,
    fails: bool,
    /// With usage: completion tokens as a share of max_tokens (0..=100 %),
    /// framing tokens, cached share. Without: the output's words.
    completion_pct: u64,
    framing: u64,
    cached_pct: u64,
    words: usize,
}

struct Engine {
    reports_usage: bool,
    max_tokens: BTreeMap<String, u64>,
    behaviour: BTreeMap<String, Behaviour>,
}

impl InferenceEngine for Engine {
    fn name(&self) -> &str {
        "budget-test"
    }
    fn infer<'a>(
        &'a self,
        request: &'a InferenceRequest,
    ) -> BoxFuture<'a, Result<InferenceResponse, EngineError>> {
        Box::pin(async move {
            let b = &self.behaviour[&request.task_id];
            tokio::time::sleep(std::time::Duration::from_millis(b.latency_ms)).await;
            let failed = (1..=b.failed_calls).map(|n| Attempt {
                number: n,
                duration_ms: 1,
                outcome: "http_500".into(),
                ..Attempt::default()
            });
            if b.fails {
                return Err(EngineError {
                    message: "the server failed".into(),
                    attempts: failed.collect(),
                });
            }
            let mut attempts: Vec<Attempt> = failed.collect();
            attempts.push(Attempt {
                number: b.failed_calls + 1,
                duration_ms: 1,
                outcome: "ok".into(),
                ..Attempt::default()
            });
            // A judge call is limited by its own max_tokens.
            let max = request
                .params
                .max_tokens
                .map_or(self.max_tokens[&request.task_id], u64::from);
            // A retried prompt (it carries the checks' feedback) is
            // answered with what a `contains: zzz` check asks for.
            let retried = request.prompt.contains(ctx_checks::FEEDBACK_HEADING);
            let (output, usage) = if self.reports_usage {
                let prompt = request.prompt_tokens as u64 + b.framing;
                let completion = max * b.completion_pct / 100;
                (
                    if retried { "zzz answer" } else { "answer" }.to_string(),
                    Some(TokenUsage {
                        prompt_tokens: prompt,
                        completion_tokens: completion,
                        total_tokens: prompt + completion,
                        cached_tokens: Some(prompt * b.cached_pct / 100),
                        cache_write_tokens: None,
                        partial: false,
                        prompt_counted: false,
                        service_tier: None,
                    }),
                )
            } else {
                // Possibly far past max_tokens: the executor must cut it.
                let words = vec!["word"; b.words].join(" ");
                (
                    if retried {
                        format!("zzz {words}")
                    } else {
                        words
                    },
                    None,
                )
            };
            Ok(InferenceResponse {
                output,
                usage,
                attempts,
                ..InferenceResponse::default()
            })
        })
    }
}

#[derive(Debug, Clone)]
struct Case {
    deps: Vec<Vec<usize>>,
    model: Vec<usize>,
    max_tokens: Vec<u32>,
    prompt_words: Vec<usize>,
    behaviour: Vec<Behaviour>,
    /// (input, cached, output) in micro-dollars per million tokens.
    rates: Vec<(u64, u64, u64)>,
    /// The budget as a per-mille share of the sum of every task's bound.
    budget_permille: u64,
    concurrency: usize,
    reports_usage: bool,
    attempts: u32,
    /// Per task (missing: 0): 0 no checks, 1 a check that passes, 2 one
    /// that fails the first answer and passes a retried one (the engine
    /// answers `zzz` to feedback), 3 that and a judge (whose answers never
    /// have the judge's shape, so every check attempt is made).
    checks: Vec<u8>,
    check_attempts: u32,
}

fn behaviour(attempts: u32) -> impl Strategy<Value = Behaviour> {
    (
        0u64..40,
        0..attempts,
        prop::bool::weighted(0.1),
        0u64..=100,
        0u64..=FRAMING,
        0u64..=100,
        0usize..400,
    )
        .prop_map(
            |(latency_ms, failed_calls, fails, completion_pct, framing, cached_pct, words)| {
                Behaviour {
                    latency_ms,
                    failed_calls,
                    fails,
                    completion_pct,
                    framing,
                    cached_pct,
                    words,
                }
            },
        )
}

fn case() -> impl Strategy<Value = Case> {
    (1usize..14, 1u32..4).prop_flat_map(|(n, attempts)| {
        (
            proptest::collection::vec(
                proptest::collection::vec(any::<prop::sample::Index>(), 0..3),
                n,
            ),
            proptest::collection::vec(0usize..3, n),
            proptest::collection::vec(1u32..300, n),
            proptest::collection::vec(1usize..60, n),
            proptest::collection::vec(behaviour(attempts), n),
            proptest::collection::vec((0u64..30_000_000, 0u64..30_000_000, 0u64..90_000_000), 3),
            0u64..1200,
            0usize..5,
            any::<bool>(),
            proptest::collection::vec(0u8..4, n),
            1u32..4,
        )
            .prop_map(
                move |(
                    raw,
                    model,
                    max_tokens,
                    prompt_words,
                    behaviour,
                    rates,
                    budget,
                    conc,
                    usage,
                    checks,
                    check_attempts,
                )| {
                    let deps = raw
                        .iter()
                        .enumerate()
                        .map(|(i, picks)| {
                            let mut d: Vec<usize> = if i == 0 {
                                Vec::new()
                            } else {
                                picks.iter().map(|p| p.index(i)).collect()
                            };
                            d.sort_unstable();
                            d.dedup();
                            d
                        })
                        .collect();
                    Case {
                        deps,
                        model,
                        max_tokens,
                        prompt_words,
                        behaviour,
                        rates,
                        budget_permille: budget,
                        concurrency: conc,
                        reports_usage: usage,
                        attempts,
                        checks,
                        check_attempts,
                    }
                },
            )
    })
}

fn id(i: usize) -> String {
    format!("t{i}")
}

fn checks_of(c: &Case, i: usize) -> serde_json::Value {
    match c.checks.get(i).copied().unwrap_or(0) {
        1 => serde_json::json!([{"max_chars": 1_000_000}]),
        2 => serde_json::json!([{"contains": "zzz"}]),
        3 => serde_json::json!([{"contains": "zzz"},
                                {"judge": RUBRIC, "max_tokens": JUDGE_MAX_TOKENS}]),
        _ => serde_json::json!([]),
    }
}

fn plan(c: &Case) -> Plan {
    let subs: Vec<serde_json::Value> = (0..c.deps.len())
        .map(|i| {
            serde_json::json!({
                "checks": checks_of(c, i),
                "id": id(i), "description": "d",
                "dependencies": c.deps[i].iter().map(|&d| id(d)).collect::<Vec<_>>(),
                "tool_or_prompt": {"name": "inference", "params": {
                    "prompt": vec!["do"; c.prompt_words[i]].join(" "),
                    "model": format!("m{}", c.model[i]),
                    "max_tokens": c.max_tokens[i],
                }}
            })
        })
        .collect();
    serde_json::from_value(serde_json::json!({
        "schema_version": 1,
        "config": {"max_prompt_tokens": 400, "max_check_attempts": c.check_attempts},
        "sub_tasks": subs
    }))
    .unwrap()
}

fn prices(c: &Case) -> Prices {
    let p = plan(c);
    // The judge prompt: its fixed text, the judged output (at most the
    // task's max_tokens; the join may cost a token or two more) and the
    // server's framing.
    let checks = p
        .sub_tasks
        .iter()
        .enumerate()
        .filter(|(i, _)| c.checks.get(*i).copied().unwrap_or(0) > 0)
        .map(|(i, t)| {
            let judge = (c.checks[i] == 3).then(|| {
                let counter = ctx_prompt::tokenizer_for_task(&p, t).unwrap().counter();
                let template = ctx_checks::judge::judge_prompt(RUBRIC, "");
                counter.count(&template) as u64 + u64::from(c.max_tokens[i]) + 2 + FRAMING
            });
            (t.id.clone(), (c.check_attempts, judge))
        })
        .collect();
    Prices {
        checks,
        by_model: c
            .rates
            .iter()
            .enumerate()
            .map(|(m, &(i, cached, o))| {
                (
                    format!("m{m}"),
                    Price::flat(
                        Rate::from_micros_per_million(i),
                        Rate::from_micros_per_million(o),
                        Some(Rate::from_micros_per_million(cached.min(i))),
                    ),
                )
            })
            .collect(),
        cap: 400,
        attempts: c.attempts,
    }
}

fn run(c: &Case, budget: Option<Usd>) -> (RunReport, Usd) {
    let p = plan(c);
    let prices = Arc::new(prices(c));
    let sum_of_bounds: Usd = p.sub_tasks.iter().filter_map(|t| prices.bound(t)).sum();
    let budget = budget.unwrap_or_else(|| {
        Usd::from_picos(sum_of_bounds.picos() * u128::from(c.budget_permille) / 1000)
            .saturating_add(Usd::from_picos(1))
    });
    let engine = Arc::new(Engine {
        reports_usage: c.reports_usage,
        max_tokens: (0..c.deps.len())
            .map(|i| (id(i), u64::from(c.max_tokens[i])))
            .collect(),
        behaviour: (0..c.deps.len())
            .map(|i| (id(i), c.behaviour[i].clone()))
            .collect(),
    });
    let options = ExecutorOptions {
        concurrency: c.concurrency,
        cost: Some(CostOptions {
            model: prices,
            max_cost: Some(budget),
            already_spent: Usd::ZERO,
            cut_output_at_max_tokens: !c.reports_usage,
            shared_budget: None,
        }),
        ..ExecutorOptions::default()
    };
    let exec = Executor::new(p, engine, Arc::new(MemoryStore::new()), options).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    (rt.block_on(exec.run()).unwrap(), budget)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(ctx_test_support::budget_proptest_cases(256)))]

    /// The budget property: spent ≤ budget, and what is spent is exactly
    /// the sum of the tasks' recorded costs.
    #[test]
    fn a_run_never_spends_more_than_its_budget(c in case()) {
        let (report, budget) = run(&c, None);
        let summary = report.cost.expect("a cost summary");
        prop_assert!(summary.total() <= budget, "spent {} of {}", summary.total(), budget);
        let recorded: Usd = report.results.iter().filter_map(|r| r.metadata.cost_usd).sum();
        prop_assert_eq!(recorded, summary.spent);
        prop_assert_eq!(summary.unknown, 0);
        let g = ctx_deps::PlanGraph::new(&plan(&c)).unwrap();
        for (i, r) in report.results.iter().enumerate() {
            prop_assert!(r.status.is_terminal());
            if r.status == TaskStatus::Completed {
                prop_assert!(r.metadata.cost_usd.is_some());
            }
            if !c.reports_usage && r.status == TaskStatus::Completed {
                // Cut at max_tokens, counted with the task's tokenizer.
                let counter = ctx_tokens::Tokenizer::Cl100kBase.counter();
                prop_assert!(counter.count(&r.output) <= c.max_tokens[i] as usize);
            }
            // A budget skip is a skip whose reason starts with `budget`,
            // and everything downstream of it is skipped too.
            if is_budget_skip(r) {
                for d in g.transitive_dependents(i) {
                    prop_assert_eq!(report.results[d].status, TaskStatus::Skipped);
                }
            }
        }
        if summary.needed > Usd::ZERO {
            prop_assert!(report.results.iter().any(is_budget_skip));
        }
    }

    /// A budget that covers every bound never skips anything.
    #[test]
    fn a_budget_covering_every_bound_skips_nothing(c in case()) {
        let p = plan(&c);
        let prices = prices(&c);
        let all: Usd = p.sub_tasks.iter().filter_map(|t| prices.bound(t)).sum();
        let (report, _) = run(&c, Some(all.saturating_add(Usd::from_picos(1))));
        prop_assert!(!report.results.iter().any(is_budget_skip));
        prop_assert_eq!(report.cost.unwrap().needed, Usd::ZERO);
    }
}

/// Two tasks that each need 60 % of the budget: the second waits for the
/// first, whose unused reservation comes back, and then fits.
#[test]
fn a_task_waits_for_a_release_then_fits() {
    let c = Case {
        deps: vec![vec![], vec![]],
        model: vec![0, 0],
        max_tokens: vec![100, 100],
        prompt_words: vec![1, 1],
        behaviour: vec![
            Behaviour {
                latency_ms: 10,
                failed_calls: 0,
                fails: false,
                completion_pct: 10,
                framing: 0,
                cached_pct: 0,
                words: 0,
            };
            2
        ],
        rates: vec![(1_000_000, 1_000_000, 1_000_000); 3],
        budget_permille: 600,
        concurrency: 2,
        reports_usage: true,
        attempts: 1,
        checks: vec![],
        check_attempts: 1,
    };
    let (report, _) = run(&c, None);
    assert!(report.all_completed(), "{:?}", report.results);
    let s = report.cost.unwrap();
    assert_eq!(s.needed, Usd::ZERO);
    assert!(s.spent > Usd::ZERO);

    // With 51 % (each bound is 50 %), the second waits, and once the
    // first has spent anything it can never fit.
    let (report, budget) = run(
        &Case {
            budget_permille: 510,
            ..c.clone()
        },
        None,
    );
    assert_eq!(report.count(TaskStatus::Completed), 1);
    let skipped = report
        .results
        .iter()
        .find(|r| r.status == TaskStatus::Skipped)
        .unwrap();
    let error = skipped.error.as_deref().unwrap();
    assert!(error.starts_with("budget: needs up to $"), "{error}");
    assert!(error.ends_with("budget"), "{error}");
    let s = report.cost.unwrap();
    assert!(s.total() <= budget);
    assert!(s.needed > Usd::ZERO);
}

/// Dependents of a task skipped by the budget say so.
#[test]
fn dependents_of_a_budget_skip_are_skipped_for_the_budget() {
    let c = Case {
        deps: vec![vec![], vec![0], vec![1]],
        model: vec![0, 0, 0],
        max_tokens: vec![100, 100, 100],
        prompt_words: vec![1, 1, 1],
        behaviour: vec![
            Behaviour {
                latency_ms: 1,
                failed_calls: 0,
                fails: false,
                completion_pct: 100,
                framing: FRAMING,
                cached_pct: 0,
                words: 0,
            };
            3
        ],
        rates: vec![(1_000_000, 1_000_000, 1_000_000); 3],
        budget_permille: 0,
        concurrency: 1,
        reports_usage: true,
        attempts: 1,
        checks: vec![],
        check_attempts: 1,
    };
    let (report, _) = run(&c, None);
    let errors: Vec<&str> = report
        .results
        .iter()
        .map(|r| r.error.as_deref().unwrap_or(""))
        .collect();
    assert!(errors[0].starts_with("budget: needs up to"), "{errors:?}");
    assert_eq!(
        errors[1],
        "budget: dependency `t0` was not run (over budget)"
    );
    assert_eq!(
        errors[2],
        "budget: upstream task `t0` was not run (over budget)"
    );
    assert!(
        report
            .results
            .iter()
            .all(|r| r.status == TaskStatus::Skipped)
    );
    let s = report.cost.unwrap();
    assert_eq!(s.spent, Usd::ZERO);
    let prices = prices(&c);
    let all: Usd = plan(&c)
        .sub_tasks
        .iter()
        .filter_map(|t| prices.bound(t))
        .sum();
    assert_eq!(s.needed, all);
}

/// A resumed run's budget counts what earlier sessions spent.
#[test]
fn already_spent_counts_against_the_budget() {
    let p = plan(&Case {
        deps: vec![vec![]],
        model: vec![0],
        max_tokens: vec![10],
        prompt_words: vec![1],
        behaviour: vec![],
        rates: vec![],
        budget_permille: 0,
        concurrency: 1,
        reports_usage: true,
        attempts: 1,
        checks: vec![],
        check_attempts: 1,
    });
    let prices = Prices {
        by_model: [(
            "m0".to_string(),
            Price::flat(Rate::parse("1").unwrap(), Rate::parse("1").unwrap(), None),
        )]
        .into(),
        cap: 400,
        attempts: 1,
        checks: BTreeMap::new(),
    };
    let bound = prices.bound(&p.sub_tasks[0]).unwrap();
    let budget = Usd::parse("1").unwrap();
    let options = ExecutorOptions {
        cost: Some(CostOptions {
            model: Arc::new(prices),
            max_cost: Some(budget),
            already_spent: budget
                .saturating_sub(bound)
                .saturating_add(Usd::from_picos(1)),
            cut_output_at_max_tokens: false,
            shared_budget: None,
        }),
        ..ExecutorOptions::default()
    };
    let exec = Executor::new(
        p,
        Arc::new(ctx_deps::DryRunEngine),
        Arc::new(MemoryStore::new()),
        options,
    )
    .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let report = rt.block_on(exec.run()).unwrap();
    assert!(
        is_budget_skip(&report.results[0]),
        "{:?}",
        report.results[0]
    );
    assert!(report.cost.unwrap().total() <= budget);
}

/// A task whose first answer fails its check and whose retry passes made
/// two answered calls: it is charged those two (within its two-attempt
/// bound), not the summed usage plus a "failed call" for the rejected
/// answer, which would spend half as much again as the bound reserved.
#[test]
fn a_check_retry_is_charged_once() {
    let c = Case {
        deps: vec![vec![]],
        model: vec![0],
        max_tokens: vec![100],
        prompt_words: vec![5],
        behaviour: vec![Behaviour {
            latency_ms: 0,
            failed_calls: 0,
            fails: false,
            completion_pct: 100,
            framing: 0,
            cached_pct: 0,
            words: 0,
        }],
        // Output tokens only: each answered call costs max_tokens.
        rates: vec![(0, 0, 1_000_000); 3],
        budget_permille: 1000,
        concurrency: 1,
        reports_usage: true,
        attempts: 1,
        checks: vec![2],
        check_attempts: 2,
    };
    let (report, budget) = run(&c, None);
    let r = &report.results[0];
    assert_eq!(r.status, TaskStatus::Completed, "{r:?}");
    assert_eq!(r.metadata.check_attempts.len(), 2);
    // Two answers of 100 output tokens at $1 per million.
    assert_eq!(r.metadata.cost_usd, Some(Usd::parse("0.0002").unwrap()));
    assert!(report.cost.unwrap().total() <= budget);
}

/// A judge's usage is charged with its task's; an engine that reports no
/// usage has the judge call counted by ctx.
#[test]
fn judge_calls_are_charged_to_their_task() {
    for reports_usage in [true, false] {
        let c = Case {
            deps: vec![vec![]],
            model: vec![0],
            max_tokens: vec![100],
            prompt_words: vec![5],
            behaviour: vec![Behaviour {
                latency_ms: 0,
                failed_calls: 0,
                fails: false,
                completion_pct: 0,
                framing: 0,
                cached_pct: 0,
                words: 3,
            }],
            // Input tokens only.
            rates: vec![(1_000_000, 1_000_000, 0); 3],
            budget_permille: 1000,
            concurrency: 1,
            reports_usage,
            attempts: 1,
            checks: vec![3],
            check_attempts: 1,
        };
        let (report, budget) = run(&c, None);
        let r = &report.results[0];
        let a = &r.metadata.check_attempts[0];
        let judge = a.judge_tokens_used.expect("the judge's usage");
        assert!(judge.prompt_tokens > 0);
        let task_prompt = a
            .tokens_used
            .map_or(a.prompt_tokens as u64, |u| u.prompt_tokens);
        assert_eq!(
            r.metadata.cost_usd,
            Some(Usd::from_picos(
                u128::from(task_prompt + judge.prompt_tokens) * 1_000_000
            )),
            "{reports_usage}"
        );
        assert!(report.cost.unwrap().total() <= budget);
    }
}
