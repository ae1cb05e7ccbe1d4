//! Period budgets (`config.budget`, `ctx run --budget NAME=USD/PERIOD`) on
//! run directories: a run holds its high end of what the period has left
//! before any call, or is refused (exit 3) saying what is left and what
//! its high end is; two `ctx` processes started at once against one root
//! cannot both take the last dollars; bad values are located usage errors.

#![cfg(unix)]

use ctx_cost::Usd;
use ctx_test_support::{Dir, Out};

#[path = "support/budget_plan.rs"]
mod budget_plan;
use serde_json::json;

/// Each call waits a moment (so that runs started together overlap) and
/// counts itself in `calls`, as the model it was asked for.
fn command(dir: &Dir) -> String {
    format!(
        "cat >/dev/null; echo \"$CTX_MODEL\" >> '{}/calls'; sleep 1; printf 'hello world'",
        dir.path().display()
    )
}

/// The tests' plan ([`budget_plan::nightly_plan`]) with `budget`.
fn write_plan(dir: &Dir, budget: serde_json::Value) {
    dir.write("nightly.json", &budget_plan::nightly_plan(budget));
}

/// `ctx run nightly.json` with the command and the price of `m`.
fn run(dir: &Dir, extra: &[&str]) -> Out {
    let mut cmd = dir.ctx();
    cmd.args(run_args(dir, true)).args(extra);
    Out::of(&mut cmd)
}

/// The arguments of `ctx run nightly.json` under `runs` with the
/// command engine, and the price of `m` when `priced`.
fn run_args(dir: &Dir, priced: bool) -> Vec<String> {
    let mut args: Vec<String> = ["run", "nightly.json", "--root", "runs", "--command"]
        .map(String::from)
        .into();
    args.push(command(dir));
    if priced {
        args.extend(["--price".to_string(), "m=1,2".to_string()]);
    }
    args
}

/// The calls the command was asked for.
fn calls(dir: &Dir) -> usize {
    models(dir).len()
}

/// The model of each call the command was asked for, in order.
fn models(dir: &Dir) -> Vec<String> {
    std::fs::read_to_string(dir.path().join("calls"))
        .map(|s| s.lines().map(str::to_string).collect())
        .unwrap_or_default()
}

/// The id of the run `out` started (`run ID in DIR` on stderr).
fn run_id(out: &Out) -> String {
    let line = out
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("run "))
        .unwrap_or_else(|| panic!("{}", out.stderr));
    line.split(' ').next().unwrap().to_string()
}

/// Past a fallback's threshold, a run's tasks call the cheaper model, and
/// its hold is taken at the cheaper prices: what is left would not hold
/// the standard tier's high end, and the run goes through. The summary
/// (text and JSON), `ctx runs show` and the report say which tasks ran on
/// it and why; `--budget` keeps the plan's fallbacks.
#[test]
fn past_a_threshold_the_run_holds_and_runs_on_the_cheaper_model() {
    let dir = Dir::new();
    write_plan(&dir, json!({"period": "month", "usd": 0}));
    let high = ctx_test_support::refused_high_end(&run(&dir, &[]).stderr);
    let fallback = json!([{"above": 0.5, "model": "cheap"}, {"above": 0.8, "model": "cheap", "max_tokens": 5}]);
    write_plan(
        &dir,
        json!({"period": "month", "usd": high.to_string(), "fallback": fallback}),
    );
    let first = run(&dir, &["--format", "json"]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert!(first.json().get("fallback").is_none(), "standard tier");
    assert_eq!(models(&dir), ["m", "m"]);
    let spent = Usd::parse(&first.json()["spent_usd"].to_string()).unwrap();
    // Half the budget used: the 0.5 tier, not the 0.8 one. What is left
    // (`spent`) is below the standard high end.
    let usd = spent.saturating_add(spent);
    assert!(spent < high);
    let budget = format!("nightly={usd}/month");
    let second = run(&dir, &["--format", "json", "--budget", &budget]);
    assert_eq!(second.code, 0, "{}", second.stderr);
    assert_eq!(models(&dir), ["m", "m", "cheap", "cheap"]);
    let f = &second.json()["fallback"];
    assert_eq!(f["model"], "cheap");
    assert_eq!(f["above"], 0.5);
    assert_eq!(f["used_fraction"], 0.5);
    assert_eq!(
        f["tasks"],
        json!([{"task_id": "a", "from": "m"}, {"task_id": "b", "from": "m"}])
    );
    let why = format!(
        "budget `nightly` (month from {}, UTC) was 50% used (${spent} of ${usd}) when the run started, at or above 50%: tasks use `cheap`",
        f["period_start"].as_str().unwrap()
    );
    assert_eq!(f["reason"], why.as_str());
    let id = run_id(&second);
    let show = dir.run(&["runs", "show", &id, "--root", "runs"]);
    assert_eq!(show.code, 0, "{}", show.stderr);
    assert!(
        show.stdout
            .contains(&format!("fallback: {why}\n  a ran on `cheap` instead of `m`\n  b ran on `cheap` instead of `m`\n")),
        "{}",
        show.stdout
    );
    let show = dir.run(&["runs", "show", &id, "--root", "runs", "--format", "json"]);
    assert_eq!(show.json()["fallback"], *f);
    // A resume keeps the run's tier, whatever the period's use is now (a
    // budget this large would be the standard tier for a new run).
    let resumed = run(
        &dir,
        &[
            "--format",
            "json",
            "--budget",
            "nightly=1000/month",
            "--resume",
            &id,
            "--rerun",
            "a",
        ],
    );
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    assert_eq!(models(&dir), ["m", "m", "cheap", "cheap", "cheap"]);
    assert_eq!(resumed.json()["fallback"], *f);
    let html = dir.run(&["runs", "report", &id, "--root", "runs"]);
    assert!(
        html.stdout.contains("<section id=\"fallback\">")
            && html
                .stdout
                .contains("<tr><td>a</td><td>cheap</td><td>m</td></tr>"),
        "{}",
        html.stderr
    );
    // Five sixths used: the highest tier reached wins, and caps
    // max_tokens. The text summary says it too.
    let total = spent.saturating_add(Usd::parse(&second.json()["spent_usd"].to_string()).unwrap());
    let usd = total.saturating_add(Usd::from_picos(total.picos() / 5));
    let text = run(&dir, &["--budget", &format!("nightly={usd}/month")]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert!(
        text.stdout.contains(
            "at or above 80%: tasks use `cheap` (max_tokens 5)\n  a ran on `cheap` instead of `m`"
        ),
        "{}",
        text.stdout
    );
}

#[test]
fn a_run_over_what_is_left_is_refused_before_any_call() {
    let dir = Dir::new();
    write_plan(&dir, json!({"period": "month", "usd": 0}));
    let out = run(&dir, &[]);
    assert_eq!(out.code, 3, "{}", out.stderr);
    assert!(
        out.stderr.contains("budget `nightly` (month from ")
            && out
                .stderr
                .contains("UTC): $0 left of $0 ($0 spent, $0 held"),
        "{}",
        out.stderr
    );
    assert!(ctx_test_support::refused_high_end(&out.stderr) > Usd::ZERO);
    assert_eq!(calls(&dir), 0);
    // No run directory was created for it.
    let runs: Vec<_> = std::fs::read_dir(dir.path().join("runs"))
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.path().is_dir())
        .collect();
    assert!(runs.is_empty(), "{runs:?}");
}

#[test]
fn two_runs_started_at_once_cannot_both_take_the_last_dollars() {
    let dir = Dir::new();
    write_plan(&dir, json!({"period": "day", "usd": 0}));
    let high = ctx_test_support::refused_high_end(&run(&dir, &[]).stderr);
    // Room for one run's high end, not two.
    let budget = high.saturating_add(Usd::from_picos(high.picos() / 2));
    write_plan(&dir, json!({"period": "day", "usd": budget.to_string()}));
    let outs: Vec<Out> = std::thread::scope(|s| {
        let a = s.spawn(|| run(&dir, &["--format", "json"]));
        let b = s.spawn(|| run(&dir, &["--format", "json"]));
        vec![a.join().unwrap(), b.join().unwrap()]
    });
    let mut codes: Vec<i32> = outs.iter().map(|o| o.code).collect();
    codes.sort_unstable();
    assert_eq!(
        codes,
        [0, 3],
        "{:?}",
        outs.iter().map(|o| &o.stderr).collect::<Vec<_>>()
    );
    let ran = outs.iter().find(|o| o.code == 0).unwrap();
    let refused = outs.iter().find(|o| o.code == 3).unwrap();
    assert_eq!(ctx_test_support::refused_high_end(&refused.stderr), high);
    assert!(
        refused.stderr.contains(&format!("${high} held")),
        "{}",
        refused.stderr
    );
    assert_eq!(calls(&dir), 2, "only the run that held its high end called");
    // Settled at what it spent: the next run finds the rest.
    let spent = Usd::parse(&ran.json()["spent_usd"].to_string()).unwrap();
    assert!(spent > Usd::ZERO && spent < high);
    let again = run(
        &dir,
        &[
            "--budget",
            &format!(
                "nightly={}/day",
                spent
                    .saturating_add(high)
                    .saturating_sub(Usd::from_picos(1))
            ),
        ],
    );
    assert_eq!(again.code, 3, "{}", again.stderr);
    let left = high.saturating_sub(Usd::from_picos(1));
    assert!(
        again.stderr.contains(&format!("${left} left")),
        "{}",
        again.stderr
    );
}

#[test]
fn bad_budgets_are_usage_errors_naming_the_field() {
    let dir = Dir::new();
    write_plan(&dir, json!({"period": "month", "usd": -2}));
    let out = run(&dir, &[]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("nightly.json:1:"), "{}", out.stderr);
    write_plan(&dir, json!({"period": "year", "usd": 2}));
    let out = run(&dir, &[]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("year"), "{}", out.stderr);
    write_plan(&dir, json!(null));
    for bad in ["n=-1/day", "n=1/year", "=1/day", "n1day"] {
        let out = run(&dir, &["--budget", bad]);
        assert_eq!(out.code, 2, "{bad}: {}", out.stderr);
        assert!(out.stderr.contains("--budget"), "{bad}: {}", out.stderr);
    }
    // A period budget needs prices for every task.
    let mut cmd = dir.ctx();
    cmd.args(run_args(&dir, false))
        .args(["--budget", "n=5/day"]);
    let out = Out::of(&mut cmd);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert_eq!(calls(&dir), 0);
}

/// `--format json`'s `alerts`.
fn alerts(out: &Out) -> Vec<(f64, String)> {
    assert_eq!(out.code, 0, "{}", out.stderr);
    let json = out.json();
    json["alerts"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|x| {
                    (
                        x["threshold"].as_f64().unwrap(),
                        x["level"].as_str().unwrap().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn alerts_name_each_threshold_crossed_once_on_stderr_json_and_github() {
    let dir = Dir::new();
    write_plan(&dir, json!({"period": "week", "usd": 0}));
    let high = ctx_test_support::refused_high_end(&run(&dir, &[]).stderr);
    let budget = high.saturating_mul(2);
    write_plan(&dir, json!({"period": "week", "usd": budget.to_string()}));
    let first = run(&dir, &["--format", "json"]);
    let spent = Usd::parse(&first.json()["spent_usd"].to_string()).unwrap();
    // Between what the first run left and what the second brings.
    let t = 1.5 * spent.to_f64() / budget.to_f64();
    let below = 0.5 * spent.to_f64() / budget.to_f64();
    let flag = format!("{below},{t},0.95");
    let second = run(&dir, &["--format", "json", "--alert-at", &flag]);
    assert_eq!(alerts(&second), [(t, "warning".to_string())]);
    assert!(
        second
            .stderr
            .contains("warning: budget `nightly` (week from ")
            && second.stderr.contains("of the budget crossed: $"),
        "{}",
        second.stderr
    );
    // Under GitHub Actions, an annotation; a refused run an error one.
    let mut cmd = dir.ctx();
    cmd.env("GITHUB_ACTIONS", "true")
        .args(run_args(&dir, true))
        .args([
            "--alert-at",
            "0.99",
            "--budget",
            &format!("nightly={}/week", spent.saturating_mul(3)),
        ]);
    let refused = Out::of(&mut cmd);
    assert_eq!(refused.code, 3, "{}", refused.stderr);
    assert!(
        refused
            .stderr
            .starts_with("::error title=ctx budget::budget `nightly`"),
        "{}",
        refused.stderr
    );
    // Without a period budget, of --max-cost.
    write_plan(&dir, json!(null));
    let t = 0.5 * spent.to_f64() / high.to_f64();
    let out = run(
        &dir,
        &[
            "--format",
            "json",
            "--max-cost",
            &high.to_string(),
            "--alert-at",
            &t.to_string(),
        ],
    );
    assert_eq!(alerts(&out), [(t, "warning".to_string())]);
    assert!(
        out.stderr.contains("warning: --max-cost: "),
        "{}",
        out.stderr
    );
    for bad in ["0", "1.5", "x", "-0.5"] {
        let out = run(&dir, &["--alert-at", bad]);
        assert_eq!(out.code, 2, "{bad}: {}", out.stderr);
        assert!(out.stderr.contains("--alert-at"), "{}", out.stderr);
    }
}

/// `ctx plan cost` gives the range under each tier, and the high end a
/// run on a fallback holds is that tier's (a $0 budget is used up, so
/// the highest tier applies, and the run is refused with its high end).
#[test]
fn plan_cost_gives_each_tiers_range_and_a_run_holds_its_tiers_high_end() {
    let dir = Dir::new();
    let fallback = json!([{"above": 0.5, "model": "cheap"}, {"above": 0.8, "model": "cheap", "max_tokens": 5}]);
    write_plan(
        &dir,
        json!({"period": "month", "usd": 0, "fallback": fallback}),
    );
    let mut args = run_args(&dir, true);
    args[0] = "plan".into();
    args.insert(1, "cost".into());
    args.retain(|a| a != "--root" && a != "runs");
    let json = dir.run(&[args.clone(), vec!["--format".into(), "json".into()]].concat());
    assert_eq!(json.code, 0, "{}", json.stderr);
    let report = json.json();
    let tiers = report["tiers"].as_array().unwrap();
    assert_eq!(tiers.len(), 3);
    assert_eq!(tiers[0]["above"], serde_json::Value::Null);
    assert_eq!(tiers[0]["total"], report["total"]);
    assert_eq!(
        (tiers[2]["model"].as_str(), tiers[2]["max_tokens"].as_u64()),
        (Some("cheap"), Some(5))
    );
    let high =
        |t: &serde_json::Value| Usd::parse(&t["total"]["cost_usd"]["high"].to_string()).unwrap();
    assert!(high(&tiers[2]) < high(&tiers[1]) && high(&tiers[1]) < high(&tiers[0]));
    let refused = run(&dir, &[]);
    assert_eq!(refused.code, 3, "{}", refused.stderr);
    assert_eq!(
        ctx_test_support::refused_high_end(&refused.stderr),
        high(&tiers[2])
    );
    let text = dir.run(&args);
    assert!(
        text.stdout.contains("budget tiers (config.budget.fallback; a run's tier is chosen when it starts, from the period's use):\ntier")
            && text.stdout.contains("from 80% used  cheap (max_tokens 5)"),
        "{}",
        text.stdout
    );
}

/// A resume holds only what is left to run: the tasks it runs again, not
/// those it reuses. With room for one task's high end and not two, a
/// resume that runs one task again goes through.
#[test]
fn a_resume_holds_only_what_is_left_to_run() {
    let dir = Dir::new();
    write_plan(&dir, json!({"period": "month", "usd": 0}));
    let high = ctx_test_support::refused_high_end(&run(&dir, &[]).stderr);
    write_plan(&dir, json!({"period": "month", "usd": 1}));
    let first = run(&dir, &["--format", "json"]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    let spent = Usd::parse(&first.json()["spent_usd"].to_string()).unwrap();
    let id = run_id(&first);
    // Left: three quarters of the whole high end, more than one task's
    // half of it.
    let usd = spent.saturating_add(Usd::from_picos(high.picos() / 4 * 3));
    let budget = format!("nightly={usd}/month");
    let resumed = run(
        &dir,
        &["--budget", &budget, "--resume", &id, "--rerun", "a"],
    );
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    assert_eq!(calls(&dir), 3, "a ran again, b was reused");
    // Every task again does not fit: the whole high end is held.
    let all = run(
        &dir,
        &[
            "--budget", &budget, "--resume", &id, "--rerun", "a", "--rerun", "b",
        ],
    );
    assert_eq!(all.code, 3, "{}", all.stderr);
    assert_eq!(ctx_test_support::refused_high_end(&all.stderr), high);
}
