//! The page: one self-contained HTML document with inline CSS, two inline
//! SVG drawings and one small inline script.
//!
//! Written with `write!` into a `String` rather than a templating engine:
//! the page is one fixed layout with loops, every piece of task content
//! goes through [`crate::escape`], and a template language would add a
//! second escaping policy (and a dependency) for no gain in clarity.
//!
//! Safety: the page carries a Content-Security-Policy that forbids every
//! network fetch and allows exactly one script, ours, by its SHA-256. So
//! even if some content escaped escaping, an injected `<script>` or
//! `onerror=` could not run; escaping is the first wall, the policy the
//! second. The script records script errors and policy violations into
//! the page (visible, and readable by the browser test) and opens a task's
//! `<details>` when a bar or node linking to it is clicked.

use std::fmt::Write as _;

use base64::Engine as _;
use sha2::{Digest, Sha256};

use crate::analysis::{Analysis, Span};
use crate::escape::{push_text, text, truncate};
use crate::format::{CacheRead, count, duration, prompt_cache, ratio, tasks, usd, usd_opt};
use crate::input::{AttemptOutcome, RunReportInput, RunStatus, TaskReport};
use crate::{dag, timeline};

/// The page's only script. Task content never goes in here.
pub const SCRIPT: &str = r#"(function () {
  var pending = [];
  function show() {
    var box = document.getElementById("report-errors");
    if (!box) return;
    var list = box.getElementsByTagName("ul")[0];
    while (pending.length) {
      var li = document.createElement("li");
      li.textContent = pending.shift();
      list.appendChild(li);
    }
    if (list.children.length) box.hidden = false;
  }
  function record(message) { pending.push(String(message)); show(); }
  window.addEventListener("error", function (e) { record("script error: " + e.message); });
  document.addEventListener("securitypolicyviolation", function (e) {
    record("blocked by the content security policy: " + e.violatedDirective);
  });
  function openTarget() {
    var el = location.hash ? document.getElementById(location.hash.slice(1)) : null;
    if (el && el.tagName === "DETAILS") el.open = true;
  }
  window.addEventListener("hashchange", openTarget);
  document.addEventListener("DOMContentLoaded", function () {
    show();
    openTarget();
    document.documentElement.setAttribute("data-report-script", "ran");
  });
})();"#;

/// `'sha256-…'` of [`SCRIPT`], for the Content-Security-Policy.
pub fn script_hash() -> String {
    let digest = Sha256::digest(SCRIPT.as_bytes());
    format!(
        "'sha256-{}'",
        base64::engine::general_purpose::STANDARD.encode(digest)
    )
}

const STYLE: &str = r#"
:root { --completed: #3a9d5d; --failed: #d64545; --interrupted: #e08a1e; --in_progress: #3b7dd8;
  --skipped: #9aa0a6; --pending: #c8ccd0; --crit: #111; --line: #d9dde3; --muted: #5f6670; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1d2330; margin: 0; padding: 16px 24px 48px; background: #fff; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 28px 0 8px; } h4 { margin: 12px 0 4px; font-size: 13px; }
code, pre { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12.5px; }
.meta { color: var(--muted); margin: 0 0 8px; }
.banner { background: #e8f0fc; border: 1px solid #3b7dd8; padding: 8px 12px; border-radius: 4px; }
.badge { display: inline-block; padding: 0 7px; border-radius: 9px; color: #fff; font-size: 12px; background: var(--muted); }
.badge.st-completed, .badge.run-completed { background: var(--completed); } .badge.st-failed, .badge.run-failed { background: var(--failed); }
.badge.st-interrupted, .badge.run-interrupted, .badge.run-crashed { background: var(--interrupted); }
.badge.st-in_progress, .badge.run-running { background: var(--in_progress); }
.badge.st-skipped { background: var(--skipped); } .badge.st-pending { background: var(--pending); color: #1d2330; }
dl.totals { display: grid; grid-template-columns: repeat(auto-fill, minmax(250px, 1fr)); gap: 8px; margin: 12px 0; }
dl.totals div { border: 1px solid var(--line); border-radius: 4px; padding: 6px 10px; }
dl.totals dt { color: var(--muted); font-size: 12px; } dl.totals dd { margin: 0; font-size: 15px; }
.path { font-size: 12.5px; color: var(--muted); }
.warnings { border: 1px solid var(--interrupted); background: #fff6ea; padding: 4px 12px; border-radius: 4px; }
.scroll { overflow: auto; max-height: 85vh; border: 1px solid var(--line); border-radius: 4px; }
.legend { display: flex; flex-wrap: wrap; gap: 4px 14px; font-size: 12.5px; color: var(--muted); margin: 4px 0 6px; }
.key { display: inline-block; width: 12px; height: 10px; margin-right: 4px; vertical-align: -1px; border-radius: 2px; }
.key.st-completed { background: var(--completed); } .key.st-failed { background: var(--failed); } .key.st-interrupted { background: var(--interrupted); }
.key.st-in_progress { background: var(--in_progress); } .key.crit { background: #fff; border: 2px solid var(--crit); }
.key.m-retry { background: #b35c00; clip-path: polygon(50% 100%, 0 0, 100% 0); } .key.m-check { background: #7b3fbf; clip-path: polygon(50% 0, 100% 50%, 50% 100%, 0 50%); }
svg text { font: 11.5px system-ui, sans-serif; fill: #1d2330; }
svg .rows rect { fill: #f5f6f8; } svg .axis line { stroke: var(--line); } svg .axis text { fill: var(--muted); text-anchor: middle; font-size: 11px; }
svg .labels text.crit { font-weight: 700; } svg .labels text.item { fill: var(--muted); } svg text.never { fill: var(--muted); font-style: italic; }
svg .stripe { fill: var(--in_progress); }
.bar, .node { stroke: none; }
.st-completed { fill: var(--completed); } .st-failed { fill: var(--failed); } .st-interrupted { fill: var(--interrupted); }
.st-in_progress { fill: url(#stripes); } .node.st-in_progress { fill: #cfe0f7; } .st-skipped { fill: var(--skipped); } .st-pending { fill: var(--pending); }
.bar.cached { fill-opacity: 0.45; } .bar.open { stroke: #333; stroke-dasharray: 4 2; stroke-width: 1; }
.bar.crit, .node.crit { stroke: var(--crit); stroke-width: 2; }
.crit-link { stroke: var(--crit); stroke-width: 1.2; stroke-dasharray: 3 3; fill: none; }
.mark.m-retry { fill: #b35c00; } .mark.m-check { fill: #7b3fbf; }
.now { stroke: var(--in_progress); stroke-width: 2; }
.dag .edges { stroke: #8a94a6; stroke-opacity: 0.45; fill: none; stroke-width: 1; } .dag .edges.crit { stroke: var(--crit); stroke-opacity: 1; stroke-width: 2; }
.dag .node + text { fill: #fff; } .dag .node.st-pending + text, .dag .node.st-in_progress + text { fill: #1d2330; }
a:hover rect { stroke: #000; stroke-width: 2; }
table { border-collapse: collapse; font-size: 13px; }
#tasks table { table-layout: fixed; width: 1180px; } #tasks td { overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
td.s-completed { color: var(--completed); } td.s-failed { color: var(--failed); } td.s-interrupted { color: var(--interrupted); }
td.s-in_progress { color: var(--in_progress); } td.s-skipped, td.s-pending { color: var(--muted); }
th, td { border-bottom: 1px solid var(--line); padding: 3px 10px 3px 0; text-align: left; vertical-align: top; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; } #tasks tr.item > td:first-child { padding-left: 1.5em; }
details.task { border: 1px solid var(--line); border-radius: 4px; margin: 4px 0; padding: 2px 10px; content-visibility: auto; contain-intrinsic-size: auto 28px; }
details.task > summary { cursor: pointer; } details.task:target { outline: 2px solid var(--in_progress); }
details.task .body { padding: 4px 0 8px; }
p.facts { color: var(--muted); margin: 4px 0; } p.deps { margin: 4px 0; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; background: #f6f7f9; border: 1px solid var(--line); padding: 8px; border-radius: 4px; max-height: 60vh; overflow: auto; }
pre.error { background: #fdeeee; border-color: var(--failed); }
#report-errors { border: 2px solid var(--failed); padding: 6px 12px; margin-top: 24px; }
"#;

/// Renders the run as one self-contained HTML document. Deterministic:
/// the same input gives the same bytes (nothing reads the clock or the
/// environment; maps are never iterated for output).
pub fn render_html(input: &RunReportInput) -> String {
    let a = Analysis::of(input);
    let text_bytes: usize = input
        .tasks
        .iter()
        .map(|t| t.output.len() + t.prompt.as_ref().map_or(0, String::len))
        .sum();
    let mut out =
        String::with_capacity(64 * 1024 + input.tasks.len() * 3 * 1024 + text_bytes * 11 / 10);
    head(&mut out, input);
    header(&mut out, input, &a);
    totals(&mut out, input, &a);
    if !a.warnings.is_empty() {
        out.push_str("<section class=\"warnings\"><h2>Problems in the input</h2><ul>");
        for w in &a.warnings {
            out.push_str("<li>");
            push_text(&mut out, w);
            out.push_str("</li>");
        }
        out.push_str("</ul></section>\n");
    }

    out.push_str("<section id=\"timeline\"><h2>Timeline</h2>");
    out.push_str(
        "<div class=\"legend\"><span><span class=\"key st-completed\"></span>completed</span>\
         <span><span class=\"key st-failed\"></span>failed</span>\
         <span><span class=\"key st-interrupted\"></span>interrupted</span>\
         <span><span class=\"key st-in_progress\"></span>in progress</span>\
         <span><span class=\"key crit\"></span>actual critical path</span>\
         <span><span class=\"key m-retry\"></span>call retried</span>\
         <span><span class=\"key m-check\"></span>check failed</span>\
         <span>faded: served from cache</span></div>",
    );
    out.push_str("<div class=\"scroll\">");
    timeline::render(&mut out, input, &a);
    out.push_str("</div></section>\n");

    out.push_str("<section id=\"graph\"><h2>Dependency graph</h2><p class=\"meta\">One column per dependency level; the actual critical path in black.</p><div class=\"scroll\">");
    dag::render(&mut out, input, &a);
    out.push_str("</div></section>\n");

    task_table(&mut out, input, &a);
    published(&mut out, input);
    task_details(&mut out, input, &a);

    out.push_str("<section id=\"report-errors\" hidden><h2>Errors while showing this page</h2><ul></ul></section>\n</body>\n</html>\n");
    out
}

fn head(out: &mut String, input: &RunReportInput) {
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    let _ = writeln!(
        out,
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; script-src {}; img-src 'none'; base-uri 'none'; form-action 'none'\">",
        script_hash()
    );
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<meta name=\"generator\" content=\"ctx-report\">\n<title>ctx run ");
    push_text(out, &input.run_id);
    out.push_str("</title>\n<style>");
    out.push_str(STYLE);
    out.push_str("</style>\n<script>");
    out.push_str(SCRIPT);
    out.push_str("</script>\n</head>\n<body>\n");
}

fn header(out: &mut String, input: &RunReportInput, a: &Analysis) {
    out.push_str("<header><h1>Run <code>");
    push_text(out, &input.run_id);
    out.push_str("</code></h1><p class=\"meta\">");
    if !input.plan.is_empty() {
        out.push_str("plan <code>");
        push_text(out, &input.plan);
        out.push_str("</code> · ");
    }
    let _ = write!(
        out,
        "<span class=\"badge run-{s}\">{label}</span> · started {}",
        input
            .started_at
            .map_or_else(|| "unknown".into(), |t| t.to_rfc3339()),
        s = input.status.as_str(),
        label = match input.status {
            RunStatus::Running => "in progress",
            s => s.as_str(),
        },
    );
    if let Some(end) = input.ended_at {
        let _ = write!(out, " · ended {end}");
    }
    out.push_str("</p>");
    if input.status == RunStatus::Running {
        let as_of = crate::input::Timestamp::from_unix_ms(a.horizon_ms);
        let _ = write!(
            out,
            "<p class=\"banner\">This run is still in progress. The report shows it as of {as_of}: tasks in progress are drawn up to then, and tasks not started yet are pending.</p>"
        );
    }
    out.push_str("</header>\n");
}

fn path_ids(out: &mut String, input: &RunReportInput, path: &[usize]) {
    const SHOWN: usize = 12;
    for (k, &i) in path.iter().enumerate() {
        if path.len() > SHOWN && k == SHOWN / 2 {
            let _ = write!(out, " → … {} more …", path.len() - SHOWN);
        }
        if path.len() > SHOWN && k >= SHOWN / 2 && k < path.len() - SHOWN / 2 {
            continue;
        }
        if k > 0 {
            out.push_str(" → ");
        }
        let _ = write!(out, "<a href=\"#task-{i}\">");
        push_text(out, &truncate(&input.tasks[i].id, 40));
        out.push_str("</a>");
    }
}

fn totals(out: &mut String, input: &RunReportInput, a: &Analysis) {
    let t = &a.totals;
    let running = input.status == RunStatus::Running;
    out.push_str("<section id=\"totals\"><h2>Totals</h2><dl class=\"totals\">");
    let _ = write!(
        out,
        "<div><dt>Wall time</dt><dd>{}{}</dd></div>",
        duration(a.wall_ms()),
        if running { " so far" } else { "" }
    );
    let _ = write!(
        out,
        "<div><dt>Critical-path lower bound</dt><dd>{}",
        duration(a.lower_bound_ms)
    );
    if let Some(r) = ratio(a.wall_ms(), a.lower_bound_ms) {
        let _ = write!(out, " <span class=\"path\">(wall time is {r} of it)</span>");
    }
    let _ = write!(
        out,
        "</dd><dd class=\"path\">longest dependency chain by duration, {}: ",
        tasks(a.lower_bound_path.len())
    );
    path_ids(out, input, &a.lower_bound_path);
    out.push_str("</dd></div>");
    let _ = write!(
        out,
        "<div><dt>Actual critical path</dt><dd>{}</dd><dd class=\"path\">",
        tasks(a.actual_path.len())
    );
    path_ids(out, input, &a.actual_path);
    out.push_str("</dd></div>");
    let _ = write!(
        out,
        "<div><dt>Task time (sum)</dt><dd>{}",
        duration(t.work_ms)
    );
    if let Some(r) = ratio(t.work_ms, a.wall_ms()) {
        let _ = write!(
            out,
            " <span class=\"path\">(average parallelism {r})</span>"
        );
    }
    out.push_str("</dd></div>");
    let _ = write!(
        out,
        "<div><dt>Tasks</dt><dd>{} total</dd><dd class=\"path\">",
        input.tasks.len()
    );
    let parts: Vec<String> = t
        .by_state
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(s, n)| format!("{n} {}", s.label()))
        .collect();
    out.push_str(&parts.join(", "));
    out.push_str("</dd></div>");
    // A sum over tasks that reported nothing is not 0: an engine that
    // reports no usage (a command, a dry run) is "not reported".
    let completion = if t.completion_unreported == 0 {
        format!("{} completion", count(t.completion_tokens))
    } else if t.completion_unreported == t.started {
        "completion not reported".to_string()
    } else {
        format!(
            "{} completion ({} task{} not reported)",
            count(t.completion_tokens),
            t.completion_unreported,
            if t.completion_unreported == 1 {
                ""
            } else {
                "s"
            }
        )
    };
    let _ = write!(
        out,
        "<div><dt>Tokens</dt><dd>{} prompt + {completion}</dd>",
        count(t.prompt_tokens),
    );
    // Cuts are shown only when the input records them: the store does not
    // keep them yet, and a line that always says 0 would claim that
    // nothing was cut.
    if input.tasks.iter().any(|t| !t.dependency_cuts.is_empty()) {
        let _ = write!(
            out,
            "<dd class=\"path\">{} tokens of dependency outputs cut from prompts</dd>",
            count(t.cut_tokens)
        );
    }
    out.push_str("</div>");
    let cost = if t.unpriced == 0 {
        usd(t.cost_usd)
    } else if t.unpriced == t.started && t.cost_usd == 0.0 {
        "unknown".to_string()
    } else {
        format!(
            "{} + unknown ({} task{} without a price)",
            usd(t.cost_usd),
            t.unpriced,
            if t.unpriced == 1 { "" } else { "s" }
        )
    };
    let _ = write!(out, "<div><dt>Cost</dt><dd>{cost}</dd></div>");
    if input.tasks.iter().any(reports_usage) {
        let _ = write!(
            out,
            "<div><dt>Prompt cache</dt><dd>{}</dd></div>",
            prompt_cache(
                CacheRead {
                    tokens: t.cached_tokens,
                    // The share over the tasks that report its base.
                    of_prompt: t
                        .cached_share
                        .filter(|&(read, _)| Some(read) == t.cached_tokens)
                        .map(|(_, of)| of),
                },
                t.cache_write_tokens,
                t.cache_saving_usd
            )
        );
    }
    let _ = write!(
        out,
        "<div><dt>Cache hits</dt><dd>{} of {} started tasks</dd></div>",
        t.cache_hits, t.started
    );
    let _ = write!(
        out,
        "<div><dt>Engine calls</dt><dd>{}</dd><dd class=\"path\">{} retried, {} failed a check</dd></div>",
        t.attempts, t.retries, t.check_failures
    );
    out.push_str("</dl></section>\n");
}

fn attempts_summary(task: &TaskReport) -> String {
    let retries = task
        .attempts
        .iter()
        .filter(|a| a.outcome == AttemptOutcome::Retry)
        .count();
    let checks = task
        .attempts
        .iter()
        .filter(|a| a.outcome == AttemptOutcome::CheckFailure)
        .count();
    let mut s = task.attempts.len().to_string();
    let mut notes = Vec::new();
    if retries > 0 {
        notes.push(format!("{retries} retried"));
    }
    if checks > 0 {
        notes.push(format!("{checks} check failed"));
    }
    if !notes.is_empty() {
        s.push_str(&format!(" ({})", notes.join(", ")));
    }
    s
}

fn cut_summary(task: &TaskReport) -> String {
    if task.dependency_cuts.is_empty() {
        let unknown = !task.dependencies.is_empty() && task.started_at.is_some();
        return if unknown { "not recorded" } else { "" }.into();
    }
    let kept: u64 = task.dependency_cuts.iter().map(|c| c.kept_tokens).sum();
    let original: u64 = task.dependency_cuts.iter().map(|c| c.original_tokens).sum();
    let cut = original.saturating_sub(kept);
    if cut == 0 {
        "none".into()
    } else {
        format!("{} of {}", count(cut), count(original))
    }
}

/// Whether the engine reported a usage for `task` (its completion tokens,
/// or a prompt-cache figure): only then can it have said something about
/// its prompt cache, so only then is "prompt cache not reported" news.
fn reports_usage(task: &TaskReport) -> bool {
    task.completion_tokens.is_some()
        || task.cached_tokens.is_some()
        || task.cache_write_tokens.is_some()
        || task.cache_saving_usd.is_some()
}

/// A task's cost; a cache hit without a recorded cost made no call.
fn cost(task: &TaskReport) -> String {
    match task.cost_usd {
        None if task.cached => "none (cached)".into(),
        c => usd_opt(c),
    }
}

fn time_cell(s: Option<Span>) -> (String, String) {
    match s {
        Some(s) => (
            format!("+{}", duration(s.start)),
            format!(
                "{}{}",
                duration(s.duration()),
                if s.open { " so far" } else { "" }
            ),
        ),
        None => (String::new(), String::new()),
    }
}

/// The files the run published, when it published any: each task and its
/// file, escaped as every other text of the page.
fn published(out: &mut String, input: &RunReportInput) {
    if input.published.is_empty() {
        return;
    }
    out.push_str("<section id=\"published\"><h2>Published</h2><table><thead><tr><th>Task</th><th>File</th></tr></thead><tbody>\n");
    for p in &input.published {
        out.push_str("<tr><td>");
        push_text(out, &p.task_id);
        out.push_str("</td><td>");
        push_text(out, &p.path);
        out.push_str("</td></tr>\n");
    }
    out.push_str("</tbody></table></section>\n");
}

fn task_table(out: &mut String, input: &RunReportInput, a: &Analysis) {
    out.push_str("<section id=\"tasks\"><h2>Tasks</h2><div class=\"scroll\"><table><colgroup><col style=\"width:200px\"><col style=\"width:90px\"><col style=\"width:50px\"><col style=\"width:80px\"><col style=\"width:90px\"><col style=\"width:150px\"><col style=\"width:100px\"><col style=\"width:140px\"><col style=\"width:100px\"><col style=\"width:100px\"><col style=\"width:80px\"></colgroup><thead><tr><th>Task</th><th>Status</th><th class=\"n\">Level</th><th class=\"n\">Start</th><th class=\"n\">Time</th><th class=\"n\">Calls</th><th class=\"n\">Prompt tokens</th><th class=\"n\">Cut from deps</th><th class=\"n\">Completion</th><th class=\"n\">Cost</th><th>Cached</th></tr></thead><tbody>\n");
    // A map task's items follow it, indented, in input order.
    let parents = crate::groups::parents(input);
    for i in crate::groups::grouped_order(&parents, |i| i) {
        let task = &input.tasks[i];
        let (start, time) = time_cell(a.span[i]);
        let row = if parents[i].is_some() {
            "<tr class=\"item\">"
        } else {
            "<tr>"
        };
        let _ = write!(out, "{row}<td><a href=\"#task-{i}\">");
        push_text(out, &truncate(&task.id, 48));
        let _ = writeln!(
            out,
            "</a></td><td class=\"s-{}\">{}</td><td class=\"n\">{}</td><td class=\"n\">{start}</td><td class=\"n\">{time}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td></tr>",
            task.status.as_str(),
            task.status.label(),
            a.level[i],
            if task.attempts.is_empty() {
                String::new()
            } else {
                attempts_summary(task)
            },
            task.prompt_tokens.map(count).unwrap_or_default(),
            cut_summary(task),
            task.completion_tokens.map(count).unwrap_or_default(),
            if task.started_at.is_some() || task.cost_usd.is_some() {
                cost(task)
            } else {
                String::new()
            },
            if task.cached { "yes" } else { "" },
        );
    }
    out.push_str("</tbody></table></div></section>\n");
}

fn task_details(out: &mut String, input: &RunReportInput, a: &Analysis) {
    let mut positions: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for (i, t) in input.tasks.iter().enumerate() {
        positions.entry(t.id.as_str()).or_insert(i);
    }
    let index = |id: &str| positions.get(id).copied();
    let mut on_path = vec![false; input.tasks.len()];
    for &i in &a.actual_path {
        on_path[i] = true;
    }
    out.push_str("<section id=\"details\"><h2>Task details</h2>\n");
    for (i, task) in input.tasks.iter().enumerate() {
        let span = a.span[i];
        let _ = write!(
            out,
            "<details id=\"task-{i}\" class=\"task\"><summary><span class=\"badge st-{}\">{}</span> <code>",
            task.status.as_str(),
            task.status.label()
        );
        push_text(out, &task.id);
        out.push_str("</code>");
        if !task.description.is_empty() {
            out.push_str(" — ");
            push_text(out, &truncate(&task.description, 120));
        }
        if let Some(s) = span {
            let _ = write!(out, " · {}", duration(s.duration()));
        }
        out.push_str("</summary><div class=\"body\">");
        if !task.description.is_empty() {
            out.push_str("<p>");
            push_text(out, &task.description);
            out.push_str("</p>");
        }
        // Facts, dependencies and calls are one line each where possible:
        // at 2,000 tasks every element counts (the browser parses closed
        // <details> too), so no table per task unless there were retries.
        let mut facts: Vec<String> = Vec::new();
        if let Some(m) = &task.model {
            facts.push(format!("model {}", text(m)));
        }
        facts.push(format!("level {}", a.level[i]));
        match (span, task.started_at) {
            (Some(s), Some(start)) => {
                facts.push(format!("started {start} (+{})", duration(s.start)));
                facts.push(match task.ended_at {
                    Some(end) => format!("ended {end}"),
                    None => "not ended".into(),
                });
                facts.push(format!(
                    "{}{}",
                    duration(s.duration()),
                    if s.open { " so far" } else { "" }
                ));
            }
            _ => facts.push("never started".into()),
        }
        if on_path[i] {
            facts.push("<strong>on the actual critical path</strong>".into());
        }
        facts.push(format!(
            "{} prompt tokens",
            task.prompt_tokens.map_or_else(|| "unknown".into(), count)
        ));
        facts.push(match task.completion_tokens {
            Some(n) => format!("{} completion tokens", count(n)),
            // It ran and its engine reported none (a command, a dry run).
            None if task.started_at.is_some() => "completion tokens not reported".into(),
            None => "unknown completion tokens".into(),
        });
        facts.push(format!("cost {}", cost(task)));
        if reports_usage(task) {
            facts.push(format!(
                "prompt cache {}",
                prompt_cache(
                    CacheRead {
                        tokens: task.cached_tokens,
                        of_prompt: task.usage_prompt_tokens,
                    },
                    task.cache_write_tokens,
                    task.cache_saving_usd
                )
            ));
        }
        if task.cached {
            facts.push("served from the cache".into());
        }
        if !task.attempts.is_empty() {
            facts.push(format!("engine calls: {}", attempts_summary(task)));
        }
        if let Some(last) = task.check_attempts.last().filter(|c| !c.checks.is_empty()) {
            facts.push(format!(
                "checks {} of {} passed",
                last.checks.iter().filter(|c| c.passed).count(),
                last.checks.len()
            ));
        }
        let _ = write!(out, "<p class=\"facts\">{}</p>", facts.join(" · "));

        // Dependencies, with what their outputs kept in this prompt.
        let mut dep_ids: Vec<&str> = task.dependencies.iter().map(String::as_str).collect();
        for c in &task.dependency_cuts {
            if !dep_ids.contains(&c.task_id.as_str()) {
                dep_ids.push(&c.task_id);
            }
        }
        if !dep_ids.is_empty() {
            out.push_str("<p class=\"deps\">Dependencies");
            if task.dependency_cuts.is_empty() && task.started_at.is_some() {
                out.push_str(" (cuts not recorded)");
            }
            out.push_str(": ");
            for (k, id) in dep_ids.into_iter().enumerate() {
                if k > 0 {
                    out.push_str(", ");
                }
                match index(id) {
                    Some(j) => {
                        let _ = write!(out, "<a href=\"#task-{j}\">");
                        push_text(out, id);
                        out.push_str("</a>");
                    }
                    None => {
                        push_text(out, id);
                        out.push_str(" (not in the run)");
                    }
                }
                if let Some(c) = task.dependency_cuts.iter().find(|c| c.task_id == id) {
                    let cut = c.original_tokens.saturating_sub(c.kept_tokens);
                    if cut == 0 {
                        let _ = write!(out, " all {} tokens kept", count(c.original_tokens));
                    } else {
                        let _ = write!(
                            out,
                            " {} of {} tokens kept ({}% cut)",
                            count(c.kept_tokens),
                            count(c.original_tokens),
                            u128::from(cut) * 100 / u128::from(c.original_tokens)
                        );
                    }
                }
            }
            out.push_str("</p>");
        }

        let eventful = task.attempts.len() > 1
            || task
                .attempts
                .iter()
                .any(|at| at.outcome != AttemptOutcome::Success || at.error.is_some());
        if eventful {
            out.push_str("<h4>Engine calls</h4><table><thead><tr><th class=\"n\">#</th><th class=\"n\">Start</th><th class=\"n\">Time</th><th>Outcome</th><th>Class</th><th>Error</th></tr></thead><tbody>");
            for at in &task.attempts {
                let start = at
                    .started_at
                    .map(|s| format!("+{}", duration(s.unix_ms().saturating_sub(a.origin_ms))))
                    .unwrap_or_default();
                let time = match (at.started_at, at.ended_at) {
                    (Some(s), Some(e)) => duration(e.unix_ms().saturating_sub(s.unix_ms())),
                    _ => String::new(),
                };
                let _ = write!(
                    out,
                    "<tr><td class=\"n\">{}</td><td class=\"n\">{start}</td><td class=\"n\">{time}</td><td>{}</td><td>{}</td><td>",
                    at.number,
                    at.outcome.label(),
                    at.class.as_deref().map(text).unwrap_or_default()
                );
                if let Some(e) = &at.error {
                    push_text(out, &truncate(e, 500));
                }
                out.push_str("</td></tr>");
            }
            out.push_str("</tbody></table>");
        }

        check_table(out, task);

        if let Some(e) = &task.error {
            out.push_str("<h4>Error</h4><pre class=\"error\">");
            push_text(out, e);
            out.push_str("</pre>");
        }
        match &task.prompt {
            Some(p) => {
                let _ = write!(
                    out,
                    "<details><summary>Prompt ({} characters)</summary><pre>",
                    count(p.chars().count() as u64)
                );
                push_text(out, p);
                out.push_str("</pre></details>");
            }
            None => out.push_str("<p class=\"meta\">No prompt recorded.</p>"),
        }
        if task.output.is_empty() {
            out.push_str("<p class=\"meta\">No output.</p>");
        } else {
            let _ = write!(
                out,
                "<details><summary>Output ({} characters)</summary><pre>",
                count(task.output.chars().count() as u64)
            );
            push_text(out, &task.output);
            out.push_str("</pre></details>");
        }
        out.push_str("</div></details>\n");
    }
    out.push_str("</section>\n");
}

/// A checked task's checks, one row per check of each attempt: its kind,
/// whether it passed and its message (escaped, cut to 500 characters),
/// and under a failed check's message what it found missing when the
/// message is the plan's own (its `detail`), for every attempt.
/// An attempt whose call failed has one row with the engine's error.
fn check_table(out: &mut String, task: &TaskReport) {
    if task.check_attempts.is_empty() {
        return;
    }
    out.push_str("<h4>Checks</h4><table class=\"checks\"><thead><tr><th class=\"n\">Attempt</th><th>Check</th><th>Result</th><th>Message</th></tr></thead><tbody>");
    for attempt in &task.check_attempts {
        if attempt.checks.is_empty() {
            let _ = write!(
                out,
                "<tr><td class=\"n\">{}</td><td></td><td class=\"s-failed\">not checked</td><td>",
                attempt.number
            );
            push_text(
                out,
                &truncate(attempt.error.as_deref().unwrap_or("no output"), 500),
            );
            out.push_str("</td></tr>");
            continue;
        }
        for (k, check) in attempt.checks.iter().enumerate() {
            let number = if k == 0 {
                attempt.number.to_string()
            } else {
                String::new()
            };
            let (class, label) = if check.passed {
                ("s-completed", "passed")
            } else {
                ("s-failed", "failed")
            };
            let _ = write!(out, "<tr><td class=\"n\">{number}</td><td><code>");
            push_text(out, &check.kind);
            let _ = write!(out, "</code></td><td class=\"{class}\">{label}</td><td>");
            push_text(out, &truncate(&check.message, 500));
            if let Some(detail) = check.detail.as_deref().filter(|_| !check.passed) {
                out.push_str("<br><span class=\"path\">");
                push_text(out, &truncate(detail, 500));
                out.push_str("</span>");
            }
            out.push_str("</td></tr>");
        }
    }
    out.push_str("</tbody></table>");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::TaskState;

    #[test]
    fn script_hash_is_a_sha256_source_expression() {
        let h = script_hash();
        assert!(h.starts_with("'sha256-") && h.ends_with("='"), "{h}");
        // 32 bytes in base64 are 44 characters.
        assert_eq!(h.len(), "'sha256-'".len() + 44);
    }

    #[test]
    fn unused_state_is_still_styled() {
        for s in TaskState::ALL {
            assert!(STYLE.contains(&format!(".st-{}", s.as_str())), "{s:?}");
            assert!(STYLE.contains(&format!("td.s-{}", s.as_str())), "{s:?}");
        }
    }
}
