//! The rendered page, without a browser: determinism, escaping of every
//! field, the snapshot of a small run, and robustness on arbitrary input.

mod common;

use common::{ATTACKS, mapped_run, tetris_run};
use ctx_report::{
    AttemptOutcome, AttemptReport, CheckAttemptReport, CheckReport, DependencyCut, RunReportInput,
    RunStatus, TaskReport, TaskState, Timestamp, render_html,
};
use proptest::prelude::*;

fn small_run() -> RunReportInput {
    let at = |s: i64| Some(Timestamp::from_unix_ms(1_796_032_800_000 + s));
    let mut a = TaskReport::new("fetch", TaskState::Completed);
    a.description = "Fetch the sources.".into();
    a.started_at = at(0);
    a.ended_at = at(2_000);
    a.prompt_tokens = Some(120);
    a.completion_tokens = Some(40);
    a.cost_usd = Some(0.0012);
    a.model = Some("gpt-4o-mini".into());
    a.prompt = Some("Fetch.".into());
    a.output = "sources <ok> & done".into();
    a.check_attempts = vec![
        CheckAttemptReport {
            number: 1,
            checks: vec![
                CheckReport {
                    kind: "contains".into(),
                    passed: true,
                    message: "contains \"ok\"".into(),
                    detail: None,
                },
                CheckReport {
                    kind: "judge".into(),
                    passed: false,
                    message: "the judge said: <b>no</b> & the list is short".into(),
                    detail: Some("missing <source> \"B\"".into()),
                },
            ],
            error: None,
        },
        CheckAttemptReport {
            number: 2,
            checks: vec![
                CheckReport {
                    kind: "contains".into(),
                    passed: true,
                    message: "contains \"ok\"".into(),
                    detail: None,
                },
                CheckReport {
                    kind: "judge".into(),
                    passed: true,
                    message: "the judge said: every source is listed".into(),
                    detail: None,
                },
            ],
            error: None,
        },
    ];
    a.attempts = vec![
        AttemptReport {
            number: 1,
            started_at: at(0),
            ended_at: at(600),
            outcome: AttemptOutcome::Retry,
            class: Some("http_429".into()),
            error: Some("rate limited".into()),
            batch_id: None,
            service_tier: None,
            tier_fallback: None,
        },
        AttemptReport {
            number: 2,
            started_at: at(900),
            ended_at: at(2_000),
            outcome: AttemptOutcome::Success,
            class: Some("ok".into()),
            error: None,
            batch_id: None,
            service_tier: None,
            tier_fallback: None,
        },
    ];
    let mut b = TaskReport::new("summarize", TaskState::Failed);
    b.description = "Summarize them.".into();
    b.dependencies = vec!["fetch".into()];
    b.started_at = at(2_100);
    b.ended_at = at(3_000);
    b.prompt_tokens = Some(300);
    b.dependency_cuts = vec![DependencyCut {
        task_id: "fetch".into(),
        kept_tokens: 30,
        original_tokens: 40,
    }];
    b.prompt = Some("Summarize:\nsources <ok> & d".into());
    b.error = Some("exit 1: model crashed".into());
    b.check_attempts = vec![CheckAttemptReport {
        number: 1,
        checks: Vec::new(),
        error: Some("model crashed".into()),
    }];
    b.attempts = vec![AttemptReport {
        number: 1,
        started_at: at(2_100),
        ended_at: at(3_000),
        outcome: AttemptOutcome::Error,
        class: Some("exit_1".into()),
        error: Some("model crashed".into()),
        batch_id: None,
        service_tier: None,
        tier_fallback: None,
    }];
    let mut c = TaskReport::new("publish", TaskState::Skipped);
    c.description = "Publish the summary.".into();
    c.dependencies = vec!["summarize".into()];
    c.error = Some("dependency summarize failed".into());
    let mut d = TaskReport::new("index", TaskState::Completed);
    d.dependencies = vec!["fetch".into()];
    d.started_at = at(2_050);
    d.ended_at = at(2_400);
    d.cached = true;
    d.output = "cached index".into();
    RunReportInput {
        run_id: "20261130T100000.000Z-5a11c0de".into(),
        plan: "plans/small.yaml".into(),
        status: RunStatus::Failed,
        started_at: at(0),
        ended_at: at(3_100),
        as_of: None,
        tasks: vec![a, b, c, d],
        published: Vec::new(),
        fallback: None,
        decisions: Vec::new(),
    }
}

#[test]
fn small_run_snapshot() {
    insta::assert_snapshot!(render_html(&small_run()));
}

/// The page says what it measured: a task whose engine reported no
/// completion tokens is "not reported" (not "+ 0 completion"), every dollar
/// figure has the same six decimals, and no cut total is claimed when no
/// cut was recorded.
#[test]
fn unreported_tokens_and_costs_are_shown_as_measured() {
    let at = |s: i64| Some(Timestamp::from_unix_ms(1_796_032_800_000 + s));
    let task = |id: &str, cost: f64| {
        let mut t = TaskReport::new(id, TaskState::Completed);
        t.started_at = at(0);
        t.ended_at = at(1_000);
        t.prompt_tokens = Some(10);
        t.cost_usd = Some(cost);
        t
    };
    let mut run = RunReportInput {
        run_id: "r".into(),
        plan: "p".into(),
        status: RunStatus::Completed,
        started_at: at(0),
        ended_at: at(1_000),
        as_of: None,
        tasks: vec![task("a", 0.5), task("b", 0.0012)],
        published: Vec::new(),
        fallback: None,
        decisions: Vec::new(),
    };
    let html = render_html(&run);
    assert!(
        html.contains("<dd>20 prompt + completion not reported</dd>"),
        "{html}"
    );
    assert!(html.contains("completion tokens not reported"));
    assert!(!html.contains("0 completion"));
    assert!(!html.contains("cut from prompts"));
    assert!(html.contains("cost $0.500000") && html.contains("cost $0.001200"));
    assert!(html.contains("<dd>$0.501200</dd>"));

    run.tasks[0].completion_tokens = Some(7);
    let html = render_html(&run);
    assert!(html.contains("<dd>20 prompt + 7 completion (1 task not reported)</dd>"));
}

/// The prompt cache where costs are shown (issue 24): the totals' line and
/// each task's fact give the reads with their share of the reported prompt
/// tokens, the writes and the saving (or the extra cost of writes), and
/// "not reported" for a task whose engine reported a usage without a cache
/// count, never 0. The snapshot holds the totals section and the facts.
#[test]
fn prompt_cache_snapshot() {
    let at = |s: i64| Some(Timestamp::from_unix_ms(1_796_032_800_000 + s));
    let task = |id: &str, cached: Option<u64>, written: Option<u64>, saving: Option<f64>| {
        let mut t = TaskReport::new(id, TaskState::Completed);
        t.started_at = at(0);
        t.ended_at = at(1_000);
        t.prompt_tokens = Some(4_500);
        t.usage_prompt_tokens = Some(4_600);
        t.completion_tokens = Some(20);
        t.cost_usd = Some(0.0021);
        t.cached_tokens = cached;
        t.cache_write_tokens = written;
        t.cache_saving_usd = saving;
        t
    };
    let run = RunReportInput {
        run_id: "r".into(),
        plan: "p".into(),
        status: RunStatus::Completed,
        started_at: at(0),
        ended_at: at(1_000),
        as_of: None,
        tasks: vec![
            task("read", Some(3_072), None, Some(0.00115)),
            task("write", None, Some(4_096), Some(-0.00041)),
            task("silent", None, None, None),
        ],
        published: Vec::new(),
        fallback: None,
        decisions: Vec::new(),
    };
    let html = render_html(&run);
    let totals = html
        .split("<section id=\"totals\">")
        .nth(1)
        .and_then(|rest| rest.split("</section>").next())
        .unwrap();
    let facts: Vec<&str> = html
        .split("<p class=\"facts\">")
        .skip(1)
        .filter_map(|rest| rest.split("</p>").next())
        .collect();
    insta::assert_snapshot!(format!(
        "{}\n\n{}",
        totals.replace("</div>", "</div>\n"),
        facts.join("\n")
    ));
}

#[test]
fn rendering_is_deterministic_and_survives_a_json_round_trip() {
    let run = tetris_run(false);
    let html = render_html(&run);
    assert_eq!(html, render_html(&run));
    let json = serde_json::to_string_pretty(&run).unwrap();
    let back = RunReportInput::from_json(&json, "run.json").unwrap();
    assert_eq!(render_html(&back), html);
}

#[test]
fn every_field_is_escaped() {
    let html = render_html(&tetris_run(true));
    // Ours: one script, one style, no image, no link but to #task-N.
    assert_eq!(html.matches("<script").count(), 1);
    assert_eq!(html.matches("<style").count(), 1);
    assert!(!html.contains("<img") && !html.contains("<a href=\"javascript"));
    assert!(!html.contains("onerror=\"") && !html.contains("onload=\""));
    for (i, _) in html.match_indices("href=\"") {
        assert!(
            html[i..].starts_with("href=\"#task-"),
            "{}",
            &html[i..i + 40]
        );
    }
    for attack in ATTACKS {
        assert!(!html.contains(attack), "raw {attack}");
    }
    assert!(
        html.contains("&lt;/script&gt;&lt;script&gt;document.title=&#39;pwned&#39;&lt;/script&gt;")
    );
}

/// Published files get a section of their own, escaped as every other
/// text; a run that published nothing has none (its page is unchanged).
#[test]
fn published_files_are_listed_and_escaped() {
    let mut run = small_run();
    assert!(!render_html(&run).contains("id=\"published\""));
    run.published = vec![
        ctx_report::Published {
            task_id: "report".into(),
            path: "site/<script>alert(1)</script>.md".into(),
            sha256: None,
            old_sha256: None,
            size: None,
            published_at: None,
        },
        ctx_report::Published {
            task_id: "notes".into(),
            path: "site/notes.md".into(),
            sha256: Some("0123456789abcdef".into()),
            old_sha256: None,
            size: Some(42),
            published_at: Some("2026-12-06T03:38:05.143Z".into()),
        },
    ];
    let html = render_html(&run);
    assert!(html.contains("<section id=\"published\"><h2>Published</h2>"));
    assert!(html.contains(
        "<tr><td>report</td><td>site/&lt;script&gt;alert(1)&lt;/script&gt;.md</td><td></td><td></td><td class=\"n\"></td><td></td></tr>"
    ));
    // The manifest: the digest written (cut to 12 digits), a new file,
    // the size and the time.
    assert!(html.contains(
        "<tr><td>notes</td><td>site/notes.md</td><td>0123456789ab</td><td>new file</td><td class=\"n\">42</td><td>2026-12-06T03:38:05.143Z</td></tr>"
    ), "{html}");
    assert!(!html.contains("<script>alert(1)"));
    let json = serde_json::to_string(&run).unwrap();
    assert_eq!(RunReportInput::from_json(&json, "run.json").unwrap(), run);
}

/// A run on a cheaper fallback says why and lists the tasks moved, escaped;
/// a run on the standard tier has no such section.
#[test]
fn a_fallback_run_says_why_and_which_tasks() {
    let mut run = small_run();
    assert!(!render_html(&run).contains("id=\"fallback\""));
    run.fallback = Some(ctx_report::FallbackNote {
        reason: "budget `nightly` was 85% used: tasks use `<mini>`".into(),
        model: "<mini>".into(),
        tasks: vec![
            ctx_report::FallbackTaskNote {
                task_id: "plan".into(),
                from: Some("gpt-4o".into()),
            },
            ctx_report::FallbackTaskNote {
                task_id: "report".into(),
                from: None,
            },
        ],
    });
    let html = render_html(&run);
    assert!(html.contains("<section id=\"fallback\"><h2>Cheaper fallback</h2><p>budget `nightly` was 85% used: tasks use `&lt;mini&gt;`</p>"));
    assert!(html.contains("<tr><td>plan</td><td>&lt;mini&gt;</td><td>gpt-4o</td></tr>"));
    assert!(html.contains(
        "<tr><td>report</td><td>&lt;mini&gt;</td><td>the engine's default model</td></tr>"
    ));
    let json = serde_json::to_string(&run).unwrap();
    assert_eq!(RunReportInput::from_json(&json, "run.json").unwrap(), run);
}

#[test]
fn one_bar_per_started_task_and_the_run_state_shown() {
    let run = small_run();
    let html = render_html(&run);
    assert_eq!(html.matches("<rect class=\"bar ").count(), 3);
    assert!(html.contains("skipped (never started)"));
    assert!(html.contains("class=\"mark m-retry\""));
    // Each check of each attempt: kind, verdict, message and, under a
    // failed check's message, what it found missing (escaped).
    assert!(html.contains("<h4>Checks</h4>"));
    assert!(html.contains(
        "<td><code>judge</code></td><td class=\"s-failed\">failed</td><td>the judge said: &lt;b&gt;no&lt;/b&gt; &amp; the list is short<br><span class=\"path\">missing &lt;source&gt; &quot;B&quot;</span></td>"
    ));
    assert!(html.contains("<td class=\"s-completed\">passed</td>"));
    assert!(html.contains("checks 2 of 2 passed"));
    assert!(html.contains("not checked</td><td>model crashed</td>"));
    assert!(html.contains("<span class=\"badge run-failed\">failed</span>"));
    assert!(html.contains(">10 of 40<") && html.contains(" 30 of 40 tokens kept (25% cut)"));
    assert!(!html.contains("still in progress"));

    let mut running = run;
    running.status = RunStatus::Running;
    running.ended_at = None;
    running.as_of = Some(Timestamp::from_unix_ms(1_796_032_800_000 + 5_000));
    running.tasks[1].status = TaskState::InProgress;
    running.tasks[1].ended_at = None;
    let html = render_html(&running);
    assert!(html.contains("This run is still in progress"));
    assert!(html.contains("in progress</span>"));
    assert!(html.contains("class=\"bar st-in_progress crit open\""));
    assert!(html.contains(">2.9 s so far<"));
    assert!(html.contains(">5.0 s so far<"));
}

/// The page's text between `from` and the next `to` after it.
fn section<'a>(html: &'a str, from: &str, to: &str) -> &'a str {
    let start = html
        .find(from)
        .unwrap_or_else(|| panic!("{from} in the page"));
    let end = html[start..]
        .find(to)
        .map_or(html.len(), |e| start + e + to.len());
    &html[start..end]
}

/// The ids in `html` in the order they appear, among `ids`.
fn order_of<'a>(html: &str, ids: &[&'a str], around: (&str, &str)) -> Vec<&'a str> {
    let mut at: Vec<(usize, &str)> = ids
        .iter()
        .map(|id| {
            let needle = format!("{}{id}{}", around.0, around.1);
            (
                html.find(&needle).unwrap_or_else(|| panic!("{needle}")),
                *id,
            )
        })
        .collect();
    at.sort_unstable();
    at.into_iter().map(|(_, id)| id).collect()
}

#[test]
fn a_maps_items_are_grouped_under_it_in_the_timeline_and_the_table() {
    let html = render_html(&mapped_run());
    let ids = [
        "src", "scan", "scan[0]", "scan[1]", "scan[2]", "other", "report",
    ];
    // The timeline: by start, but the items right after their map task
    // (by start among themselves), `other` after them although it
    // started before two of them; the items' labels indented.
    let timeline = section(&html, "<svg class=\"timeline\"", "</svg>");
    let labels = section(timeline, "<g class=\"labels\">", "</g>");
    assert_eq!(
        order_of(labels, &ids, (">", "</text>")),
        [
            "src", "scan", "scan[2]", "scan[1]", "scan[0]", "other", "report"
        ]
    );
    assert_eq!(labels.matches("<text x=\"16\" ").count(), 3, "{labels}");
    assert_eq!(labels.matches("class=\"item").count(), 3, "{labels}");
    // The table: in input order, each item in a row of class `item` right
    // after its map task.
    let table = section(&html, "<section id=\"tasks\">", "</section>");
    assert_eq!(
        order_of(table, &ids, (">", "</a></td>")),
        [
            "src", "scan", "scan[0]", "scan[1]", "scan[2]", "other", "report"
        ]
    );
    assert_eq!(table.matches("<tr class=\"item\">").count(), 3);
    // Listed after `other` in the input, the items still follow `scan`.
    let mut moved = mapped_run();
    let item = moved.tasks.remove(2);
    moved.tasks.push(item);
    let html = render_html(&moved);
    let table = section(&html, "<section id=\"tasks\">", "</section>");
    assert_eq!(
        order_of(table, &ids, (">", "</a></td>")),
        [
            "src", "scan", "scan[1]", "scan[2]", "scan[0]", "other", "report"
        ]
    );
    insta::assert_snapshot!(format!(
        "{timeline}\n{}",
        section(
            &render_html(&mapped_run()),
            "<section id=\"tasks\">",
            "</section>"
        )
    ));
}

#[test]
fn an_empty_run_renders() {
    let run = RunReportInput {
        run_id: "r".into(),
        plan: String::new(),
        status: RunStatus::Running,
        started_at: None,
        ended_at: None,
        as_of: None,
        tasks: Vec::new(),
        published: Vec::new(),
        fallback: None,
        decisions: Vec::new(),
    };
    let html = render_html(&run);
    assert!(html.ends_with("</html>\n"));
    assert!(html.contains("0 total"));
}

fn arb_text() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        "[a-c]{1,2}",
        ".{0,12}",
        proptest::sample::select(ATTACKS.to_vec()).prop_map(str::to_string),
    ]
}

fn arb_time() -> impl Strategy<Value = Option<Timestamp>> {
    prop_oneof![
        Just(None),
        (-5_000i64..5_000).prop_map(|t| Some(Timestamp::from_unix_ms(t))),
        prop_oneof![Just(i64::MIN), Just(i64::MAX), Just(0)]
            .prop_map(|t| Some(Timestamp::from_unix_ms(t))),
    ]
}

fn arb_task() -> impl Strategy<Value = TaskReport> {
    (
        arb_text(),
        proptest::collection::vec(arb_text(), 0..4),
        proptest::sample::select(TaskState::ALL.to_vec()),
        arb_time(),
        arb_time(),
        proptest::collection::vec((arb_time(), arb_time(), any::<bool>()), 0..3),
        proptest::option::of(-1.0f64..1.0),
        (arb_text(), any::<u64>(), any::<u64>()),
        arb_text(),
    )
        .prop_map(|(id, deps, status, s, e, attempts, cost, cut, content)| {
            let mut t = TaskReport::new(id, status);
            t.dependencies = deps;
            t.started_at = s;
            t.ended_at = e;
            t.attempts = attempts
                .into_iter()
                .enumerate()
                .map(|(k, (s, e, retry))| AttemptReport {
                    number: k as u32 + 1,
                    started_at: s,
                    ended_at: e,
                    outcome: if retry {
                        AttemptOutcome::Retry
                    } else {
                        AttemptOutcome::CheckFailure
                    },
                    class: Some(content.clone()),
                    error: None,
                    // Every tier mark, with hostile text in the batch id.
                    batch_id: retry.then(|| content.clone()),
                    service_tier: Some(ctx_report::ServiceTier::Flex),
                    tier_fallback: (!retry).then_some(ctx_report::TierFallback::BatchLate),
                })
                .collect();
            t.cost_usd = cost;
            t.prompt_tokens = Some(cut.1);
            t.dependency_cuts = vec![DependencyCut {
                task_id: cut.0,
                kept_tokens: cut.1,
                original_tokens: cut.2,
            }];
            t.output = content.clone();
            t.check_attempts = vec![CheckAttemptReport {
                number: 1,
                checks: vec![CheckReport {
                    kind: content.clone(),
                    passed: cost.is_some(),
                    message: content.clone(),
                    detail: Some(content.clone()),
                }],
                error: Some(content.clone()),
            }];
            t.description = content;
            t
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// Any input (duplicate ids, cycles, unknown dependencies, times at the
    /// ends of i64, ends before starts, negative costs, hostile text)
    /// renders without panicking, to the same bytes twice, with one bar per
    /// task that has a start and no markup from content.
    #[test]
    fn any_input_renders(
        tasks in proptest::collection::vec(arb_task(), 0..8),
        status in proptest::sample::select(vec![RunStatus::Running, RunStatus::Completed, RunStatus::Crashed]),
        s in arb_time(), e in arb_time(), now in arb_time(),
    ) {
        let run = RunReportInput {
            run_id: "r".into(),
            plan: "p".into(),
            status,
            started_at: s,
            ended_at: e,
            as_of: now,
            tasks,
            published: Vec::new(),
            fallback: None,
            decisions: Vec::new(),
        };
        let html = render_html(&run);
        prop_assert_eq!(&html, &render_html(&run));
        prop_assert_eq!(
            html.matches("<rect class=\"bar ").count(),
            run.tasks.iter().filter(|t| t.started_at.is_some()).count()
        );
        prop_assert_eq!(html.matches("<script").count(), 1);
        prop_assert!(!html.contains("<img"));
        prop_assert!(!html.contains("NaN") && !html.contains("inf"));
    }
}

/// A run's decisions on its approval gates get a section of their own,
/// each note escaped, and survive the JSON round trip; a run without
/// any has no such section.
#[test]
fn decisions_on_approval_gates_are_listed_escaped() {
    use ctx_model::approval::{GateStage, Verdict};
    let mut run = small_run();
    assert!(!render_html(&run).contains("id=\"decisions\""));
    run.decisions = vec![ctx_report::Decision {
        task_id: "report".into(),
        stage: GateStage::Publish,
        verdict: Verdict::Reject,
        by: "ana".into(),
        at: "2026-12-06T05:00:00Z".into(),
        note: Some("<b>stale</b> numbers".into()),
        output_sha256: Some("ab12".into()),
    }];
    let html = render_html(&run);
    assert!(
        html.contains("<section id=\"decisions\"><h2>Approval decisions</h2>"),
        "{html}"
    );
    assert!(html.contains(
        "<tr><td>report</td><td>before publish</td><td class=\"s-failed\">reject</td><td>ana</td>"
    ));
    assert!(html.contains("&lt;b&gt;stale&lt;/b&gt; numbers"));
    let json = serde_json::to_string(&run).unwrap();
    assert_eq!(RunReportInput::from_json(&json, "run.json").unwrap(), run);
}

/// The timeline marks how each call was priced, below its bar: a call in
/// a provider batch, one billed at the flex tier, one that fell back to
/// the standard price; and each decision on an approval gate as a flag
/// on its task's row at the decision's time. The legend names only the
/// marks the run has.
#[test]
fn tier_and_decision_marks_on_the_timeline() {
    use ctx_model::approval::{GateStage, Verdict};
    use ctx_report::{ServiceTier, TierFallback};
    let mut run = small_run();
    let plain = render_html(&run);
    for key in [
        "key m-batch",
        "key m-flex",
        "key m-fallback",
        "key m-approve",
    ] {
        assert!(!plain.contains(key), "{key} in a run without it");
    }
    let fetch = &mut run.tasks[0];
    // The first call went in a batch and failed there; the second went
    // real-time, at the standard price.
    fetch.attempts[0].batch_id = Some("batch_<b>7".into());
    fetch.attempts[1].tier_fallback = Some(TierFallback::BatchFailed);
    fetch.attempts[1].service_tier = Some(ServiceTier::Default);
    let summarize = &mut run.tasks[1];
    summarize.attempts[0].service_tier = Some(ServiceTier::Flex);
    run.decisions = vec![
        ctx_report::Decision {
            task_id: "summarize".into(),
            stage: GateStage::Run,
            verdict: Verdict::Approve,
            by: "ana".into(),
            // 2.0 s into the run: before summarize started.
            at: "2026-11-30T10:00:02Z".into(),
            note: Some("<i>go</i>".into()),
            output_sha256: None,
        },
        ctx_report::Decision {
            task_id: "no-such-task".into(),
            stage: GateStage::Run,
            verdict: Verdict::Reject,
            by: "bo".into(),
            at: "2026-11-30T10:00:01Z".into(),
            note: Some("gone".into()),
            output_sha256: None,
        },
    ];
    let html = render_html(&run);
    let timeline = section(&html, "<section id=\"timeline\">", "</section>");
    insta::assert_snapshot!(timeline);
    assert!(timeline.contains("attempt 1: in batch batch_&lt;b&gt;7</title>"));
    assert!(
        timeline.contains(
            "attempt 2: standard tier: it failed in its batch: retried real-time</title>"
        )
    );
    assert!(timeline.contains("attempt 1: billed at the flex tier</title>"));
    assert!(timeline.contains(
        "approved before run by ana at 2026-11-30T10:00:02Z: &lt;i&gt;go&lt;/i&gt;</title>"
    ));
    assert!(
        !timeline.contains("rejected before run by bo"),
        "no row for its task"
    );
    for key in [
        "key m-batch",
        "key m-flex",
        "key m-fallback",
        "key m-approve",
    ] {
        assert!(timeline.contains(key), "{key}");
    }
    assert!(!timeline.contains("key m-reject"));
}
