//! Period budgets, cheaper fallbacks and alerts on the shared store
//! (`ctx run PLAN --store postgres://…` under `config.budget`), against a
//! real PostgreSQL: the rules run_budget.rs tests on run directories, on
//! the store's own ledger. Without `CTX_TEST_POSTGRES_URL` each test
//! skips with a message, and fails when `CI` is set.

#![cfg(unix)]

#[path = "../../ctx-store-postgres/tests/support/mod.rs"]
mod pg;

#[path = "support/shared_cli.rs"]
mod shared_cli;

#[path = "support/budget_plan.rs"]
mod budget_plan;

use std::path::Path;

use ctx_cost::Usd;
use serde_json::json;
use shared_cli::ctx;

/// What one `ctx` process printed, and how it exited.
struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Ran {
    fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("{e}: {}", self.stderr))
    }
}

/// The tests' plan ([`budget_plan::nightly_plan`]) with `budget`.
fn write_plan(dir: &Path, budget: serde_json::Value) {
    std::fs::write(dir.join("nightly.json"), budget_plan::nightly_plan(budget)).unwrap();
}

/// `ctx run nightly.json --store URL` on a command that logs the model
/// it was asked for and waits a moment (so that runs started together
/// overlap), with `m` priced.
fn run(dir: &Path, url: &str, extra: &[&str]) -> Ran {
    let command = format!(
        "cat >/dev/null; echo \"$CTX_MODEL\" >> '{}/calls'; sleep 1; printf 'hello world'",
        dir.display()
    );
    let out = ctx()
        .current_dir(dir)
        .args(["run", "nightly.json", "--store", url, "--command", &command])
        .args(["--price", "m=1,2"])
        .args(extra)
        .output()
        .unwrap();
    Ran {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn models(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("calls"))
        .map(|s| s.lines().map(str::to_string).collect())
        .unwrap_or_default()
}

fn spent(out: &Ran) -> Usd {
    Usd::parse(&out.json()["spent_usd"].to_string()).unwrap()
}

/// A run that does not fit is refused (exit 3) before anything is
/// registered; two `ctx` processes started at once against a budget that
/// holds one run's high end: one runs, the other is refused; the run's
/// hold is settled at what it spent when it closes, so the next run
/// finds the rest; its alerts are the period's.
#[test]
fn two_shared_runs_started_at_once_cannot_both_take_the_last_dollars() {
    let Some(url) = pg::fresh_db("shared_period") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write_plan(dir, json!({"period": "day", "usd": 0}));
    let refused = run(dir, &url, &[]);
    assert_eq!(refused.code, Some(3), "{}", refused.stderr);
    assert!(
        refused
            .stderr
            .contains("UTC): $0 left of $0 ($0 spent, $0 held"),
        "{}",
        refused.stderr
    );
    let high = ctx_test_support::refused_high_end(&refused.stderr);
    let listed = ctx()
        .args(["runs", "list", "--format", "json", "--store", &url])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&listed.stdout).trim(), "[]");
    let budget = high.saturating_add(Usd::from_picos(high.picos() / 2));
    write_plan(dir, json!({"period": "day", "usd": budget.to_string()}));
    let args = ["--format", "json", "--alert-at", "0.001,0.9"];
    let outs: Vec<Ran> = std::thread::scope(|s| {
        let a = s.spawn(|| run(dir, &url, &args));
        let b = s.spawn(|| run(dir, &url, &args));
        vec![a.join().unwrap(), b.join().unwrap()]
    });
    let mut codes: Vec<Option<i32>> = outs.iter().map(|o| o.code).collect();
    codes.sort_unstable();
    assert_eq!(
        codes,
        [Some(0), Some(3)],
        "{:?}",
        outs.iter().map(|o| &o.stderr).collect::<Vec<_>>()
    );
    let ran = outs.iter().find(|o| o.code == Some(0)).unwrap();
    let no = outs.iter().find(|o| o.code == Some(3)).unwrap();
    assert_eq!(ctx_test_support::refused_high_end(&no.stderr), high);
    assert!(
        no.stderr.contains(&format!("${high} held")),
        "{}",
        no.stderr
    );
    assert_eq!(
        models(dir).len(),
        2,
        "only the run that held its high end called"
    );
    let used = spent(ran);
    assert!(used > Usd::ZERO && used < high);
    // The period's use crossed 0.1 %, not 90 %: one alert, the period's.
    let alerts = ran.json()["alerts"].clone();
    assert_eq!(alerts.as_array().map(Vec::len), Some(1), "{alerts}");
    assert_eq!(alerts[0]["threshold"], 0.001);
    assert!(
        alerts[0]["of"]
            .as_str()
            .unwrap()
            .starts_with("budget `nightly` (day from "),
        "{alerts}"
    );
    // Settled at what it spent: the next run finds the rest.
    let tight = used.saturating_add(high).saturating_sub(Usd::from_picos(1));
    let again = run(dir, &url, &["--budget", &format!("nightly={tight}/day")]);
    assert_eq!(again.code, Some(3), "{}", again.stderr);
    let left = high.saturating_sub(Usd::from_picos(1));
    assert!(
        again.stderr.contains(&format!("${left} left")),
        "{}",
        again.stderr
    );
}

/// Past a fallback's threshold a shared run registers its plan on the
/// cheaper model (every worker runs it so), holds at the cheaper prices,
/// and `ctx runs show --store` says which tasks ran on it and why.
#[test]
fn a_shared_run_past_a_threshold_runs_on_the_cheaper_model() {
    let Some(url) = pg::fresh_db("shared_fallback") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write_plan(dir, json!({"period": "month", "usd": 1}));
    let first = run(dir, &url, &["--format", "json"]);
    assert_eq!(first.code, Some(0), "{}", first.stderr);
    let used = spent(&first);
    let usd = used.saturating_add(used);
    let fallback = json!([{"above": 0.5, "model": "cheap"}]);
    write_plan(
        dir,
        json!({"period": "month", "usd": usd.to_string(), "fallback": fallback}),
    );
    let second = run(dir, &url, &["--format", "json"]);
    assert_eq!(second.code, Some(0), "{}", second.stderr);
    assert_eq!(models(dir), ["m", "m", "cheap", "cheap"]);
    let f = second.json()["fallback"].clone();
    assert_eq!(
        (f["model"].as_str(), f["above"].as_f64()),
        (Some("cheap"), Some(0.5))
    );
    let id = shared_cli::run_id_from_text(&second.stderr);
    let show = ctx()
        .args(["runs", "show", &id, "--store", &url])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(
        text.contains(&format!(
            "fallback: {}\n  a ran on `cheap` instead of `m`",
            f["reason"].as_str().unwrap()
        )),
        "{text}"
    );
}

/// A shared resume holds only what is left to run, as a local one: with
/// room for one task's high end and not two, a resume that runs one task
/// again goes through; one that runs both is refused with the whole high
/// end.
#[test]
fn a_shared_resume_holds_only_what_is_left_to_run() {
    let Some(url) = pg::fresh_db("shared_resume_hold") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write_plan(dir, json!({"period": "month", "usd": 0}));
    let high = ctx_test_support::refused_high_end(&run(dir, &url, &[]).stderr);
    write_plan(dir, json!({"period": "month", "usd": 1}));
    let first = run(dir, &url, &["--format", "json"]);
    assert_eq!(first.code, Some(0), "{}", first.stderr);
    let id = shared_cli::run_id_from_text(&first.stderr);
    let usd = spent(&first).saturating_add(Usd::from_picos(high.picos() / 4 * 3));
    let budget = format!("nightly={usd}/month");
    let one = run(
        dir,
        &url,
        &["--budget", &budget, "--resume", &id, "--rerun", "a"],
    );
    assert_eq!(one.code, Some(0), "{}", one.stderr);
    assert_eq!(models(dir).len(), 3, "a ran again, b was reused");
    let all = run(
        dir,
        &url,
        &[
            "--budget", &budget, "--resume", &id, "--rerun", "a", "--rerun", "b",
        ],
    );
    assert_eq!(all.code, Some(3), "{}", all.stderr);
    assert_eq!(ctx_test_support::refused_high_end(&all.stderr), high);
}
