//! `ctx spend`: what stored runs spent, summed from each attempt's stored
//! cost, on run directories and on a shared PostgreSQL store (skipped
//! without `CTX_TEST_POSTGRES_URL`, failing in CI).

#![cfg(unix)]

#[path = "../../ctx-store-postgres/tests/support/mod.rs"]
mod pg;

use std::collections::BTreeMap;

use ctx_cost::Usd;
use ctx_test_support::{Dir, Out};
use serde_json::{Value, json};

/// Every command answers `hello world`.
const HELLO: &str = "cat >/dev/null; printf 'hello world'";

/// Prices for `m` and `n`; `mystery` has none.
const PRICES: [&str; 4] = ["--price", "m=1,2", "--price", "n=3,4"];

/// A plan of `(id, model)` tasks, each prompt `Say {id}.`.
fn write_plan(dir: &Dir, name: &str, tasks: &[(&str, &str)]) {
    let tasks: Vec<Value> = tasks
        .iter()
        .map(|(id, model)| {
            json!({"id": id, "description": id, "tool_or_prompt": {"name": "inference",
                "params": {"prompt": format!("Say {id}."), "model": model, "max_tokens": 50}}})
        })
        .collect();
    let plan = json!({"schema_version": 1, "config": {"tokenizer": "cl100k_base"},
        "sub_tasks": tasks});
    dir.write(name, &plan.to_string());
}

/// `ctx run PLAN --command HELLO` with the prices on `store`: the run's
/// id and its JSON.
fn run(dir: &Dir, plan: &str, store: &[&str]) -> (String, Value) {
    let mut args = vec!["run", plan, "--command", HELLO, "--format", "json"];
    args.extend_from_slice(&PRICES);
    args.extend_from_slice(store);
    let out = dir.run(&args);
    // `mystery` is unpriced: the run completes, its cost unknown.
    assert_eq!(out.code, 0, "{}", out.stderr);
    (out.run_id(), out.json())
}

/// An amount as ctx's JSON writes it, exactly.
fn usd(v: &Value) -> Usd {
    Usd::parse(&v.to_string()).unwrap_or_else(|e| panic!("{v}: {e}"))
}

/// What a run's JSON says each model's tasks cost (`None`: unpriced).
fn costs_by_model(run: &Value) -> Vec<(String, Option<Usd>)> {
    run["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let model = t["metadata"]["model"].as_str().unwrap().to_string();
            let cost = (!t["cost_usd"].is_null()).then(|| usd(&t["cost_usd"]));
            (model, cost)
        })
        .collect()
}

/// `ctx spend ARGS` on `store`.
fn spend(dir: &Dir, store: &[&str], args: &[&str]) -> Out {
    let mut all = vec!["spend"];
    all.extend_from_slice(args);
    all.extend_from_slice(store);
    dir.run(&all)
}

/// Each group's `(key, runs, attempts, spent_usd, unpriced_attempts,
/// unpriced_models)` and the total's, from `ctx spend --format json`.
fn groups(out: &Out) -> Vec<(String, u64, u64, Usd, u64, Value)> {
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v = out.json();
    v["groups"]
        .as_array()
        .unwrap()
        .iter()
        .chain([&v["total"]])
        .map(|g| {
            (
                g["key"].as_str().unwrap().to_string(),
                g["runs"].as_u64().unwrap(),
                g["attempts"].as_u64().unwrap(),
                usd(&g["spent_usd"]),
                g["unpriced_attempts"].as_u64().unwrap(),
                g["unpriced_models"].clone(),
            )
        })
        .collect()
}

/// Two runs of two plans: `one.json` (a on m, b on n, c on the unpriced
/// `mystery`) and `two.json` (a on m, d on n), on `store`. Returns each
/// run's id and JSON.
fn two_runs(dir: &Dir, store: &[&str]) -> [(String, Value); 2] {
    write_plan(dir, "one.json", &[("a", "m"), ("b", "n"), ("c", "mystery")]);
    write_plan(dir, "two.json", &[("a", "m"), ("d", "n")]);
    [run(dir, "one.json", store), run(dir, "two.json", store)]
}

/// The groups `--by` each grouping must give for [`two_runs`], computed
/// from what the runs themselves reported.
fn expected(runs: &[(String, Value); 2], by: &str) -> Vec<(String, u64, u64, Usd, u64, Value)> {
    let mut groups: BTreeMap<String, (u64, u64, Usd, u64, Vec<String>)> = BTreeMap::new();
    let mut total = (0, 0, Usd::ZERO, 0, Vec::new());
    for (i, (id, json)) in runs.iter().enumerate() {
        let day = format!("{}-{}-{}", &id[..4], &id[4..6], &id[6..8]);
        for (model, cost) in costs_by_model(json) {
            let key = match by {
                "plan" => ["one.json", "two.json"][i].to_string(),
                "model" => model.clone(),
                "day" => day.clone(),
                _ => id.clone(),
            };
            for g in [groups.entry(key).or_default(), &mut total] {
                g.1 += 1;
                match cost {
                    Some(c) => g.2 = g.2.saturating_add(c),
                    None => {
                        g.3 += 1;
                        if !g.4.contains(&model) {
                            g.4.push(model.clone());
                        }
                    }
                }
            }
        }
    }
    let runs_in = |key: &str| -> u64 {
        match by {
            "model" => 1 + u64::from(key != "mystery"),
            "day" => 2,
            _ => 1,
        }
    };
    groups
        .into_iter()
        .map(|(k, g)| (k.clone(), runs_in(&k), g.1, g.2, g.3, json!(g.4)))
        .chain([(
            "total".to_string(),
            2,
            total.1,
            total.2,
            total.3,
            json!(total.4),
        )])
        .collect()
}

#[test]
fn two_runs_sum_by_plan_model_day_and_run() {
    let dir = Dir::new();
    let store = ["--root", "runs"];
    let runs = two_runs(&dir, &store);
    let spent: Usd = runs
        .iter()
        .map(|(_, j)| usd(&j["spent_usd"]))
        .fold(Usd::ZERO, Usd::saturating_add);
    for by in ["plan", "model", "day", "run"] {
        let out = spend(&dir, &store, &["--by", by, "--format", "json"]);
        let got = groups(&out);
        assert_eq!(got, expected(&runs, by), "--by {by}");
        assert_eq!(
            got.last().unwrap().3,
            spent,
            "--by {by}: the runs' spent_usd"
        );
    }
}

#[test]
fn an_unpriced_model_is_counted_and_named_never_zero_dollars() {
    let dir = Dir::new();
    let store = ["--root", "runs"];
    two_runs(&dir, &store);
    let out = spend(&dir, &store, &["--by", "model"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let mystery = out
        .stdout
        .lines()
        .find(|l| l.starts_with("mystery"))
        .unwrap();
    assert_eq!(
        mystery.split_whitespace().collect::<Vec<_>>(),
        ["mystery", "1", "1", "unknown", "1"],
        "{}",
        out.stdout
    );
    assert!(!mystery.contains('$'), "{mystery}");
    let total = out.stdout.lines().find(|l| l.starts_with("total")).unwrap();
    assert!(total.contains(" + unknown"), "{total}");
    assert!(
        out.stdout.ends_with(
            "unpriced: 1 attempt on mystery: no price was known when it ran, so its cost is \
             unknown and not in SPENT\n"
        ),
        "{}",
        out.stdout
    );
}

#[test]
fn since_and_until_filter_each_attempt_by_its_start() {
    let dir = Dir::new();
    let store = ["--root", "runs"];
    let runs = two_runs(&dir, &store);
    // The second run's id is the instant it was created: its attempts
    // start after it, the first run's before it.
    let id = &runs[1].0;
    let created = format!(
        "{}-{}-{}T{}:{}:{}Z",
        &id[..4],
        &id[4..6],
        &id[6..8],
        &id[9..11],
        &id[11..13],
        &id[13..19]
    );
    let by_run = expected(&runs, "run");
    // Only one run in the period: the total is its row.
    let alone = |row: &(String, u64, u64, Usd, u64, Value)| {
        let mut total = row.clone();
        total.0 = "total".to_string();
        vec![row.clone(), total]
    };
    let after = spend(
        &dir,
        &store,
        &["--by", "run", "--since", &created, "--format", "json"],
    );
    assert_eq!(groups(&after), alone(&by_run[1]));
    let before = spend(
        &dir,
        &store,
        &["--by", "run", "--until", &created, "--format", "json"],
    );
    assert_eq!(groups(&before), alone(&by_run[0]));
    // A whole day: today's, by the first run's id.
    let today = format!("{}-{}-{}", &id[..4], &id[4..6], &id[6..8]);
    let day = groups(&spend(
        &dir,
        &store,
        &["--since", &today, "--until", &today, "--format", "json"],
    ));
    assert_eq!(day.last().unwrap().2, 5);
}

#[test]
fn a_period_with_no_runs_says_so_and_exits_0() {
    let dir = Dir::new();
    let store = ["--root", "runs"];
    two_runs(&dir, &store);
    let out = spend(
        &dir,
        &store,
        &["--since", "2001-01-01", "--until", "2001-01-31"],
    );
    assert_eq!(
        (out.code, out.stdout.as_str(), out.stderr.as_str()),
        (
            0,
            "no attempts recorded between 2001-01-01T00:00:00.000Z and \
             2001-02-01T00:00:00.000Z: 2 runs read from runs\n",
            ""
        )
    );
    // CSV and JSON keep their shape on stdout; the words go to stderr.
    let csv = spend(&dir, &store, &["--until", "2001-01-31", "--format", "csv"]);
    assert_eq!(csv.code, 0);
    assert_eq!(
        csv.stdout,
        "plan,runs,attempts,spent_usd,unpriced_attempts,unpriced_models\r\n"
    );
    assert!(
        csv.stderr.starts_with("no attempts recorded before"),
        "{}",
        csv.stderr
    );
    let json = spend(&dir, &store, &["--until", "2001-01-31", "--format", "json"]).json();
    assert_eq!(json["groups"], json!([]));
    assert_eq!(json["total"]["attempts"], 0);
    // No runs at all (a root that does not exist yet).
    let none = spend(&dir, &["--root", "nowhere"], &[]);
    assert_eq!(
        (none.code, none.stdout.as_str()),
        (0, "no attempts recorded: 0 runs read from nowhere\n")
    );
}

#[test]
fn a_malformed_or_reversed_period_is_a_usage_error_naming_the_flag() {
    let dir = Dir::new();
    for (args, message) in [
        (
            &["--since", "last tuesday"][..],
            "error: --since \"last tuesday\": not a date (YYYY-MM-DD, a whole UTC day) or an \
             RFC 3339 time (like 2026-12-01T09:30:00Z)\n",
        ),
        (
            &["--until", "2026-02-30"][..],
            "error: --until \"2026-02-30\": not a date (YYYY-MM-DD, a whole UTC day) or an \
             RFC 3339 time (like 2026-12-01T09:30:00Z)\n",
        ),
        (
            &["--since", "2026-12-02", "--until", "2026-12-01"][..],
            "error: --since 2026-12-02 is after --until 2026-12-01: the period is empty\n",
        ),
    ] {
        // Refused before any store is read: even a broken one.
        let out = spend(
            &dir,
            &["--store", "postgres://nobody@127.0.0.1:1/none"],
            args,
        );
        assert_eq!(
            (out.code, out.stdout.as_str(), out.stderr.as_str()),
            (2, "", message)
        );
    }
}

#[test]
fn json_and_csv_have_the_documented_shape() {
    let dir = Dir::new();
    let store = ["--root", "runs"];
    let runs = two_runs(&dir, &store);
    let out = spend(
        &dir,
        &store,
        &["--by", "plan", "--format", "json", "--since", "2001-01-01"],
    );
    // Keys in the documented order, read off the text itself.
    let at = |key: &str| out.stdout.find(&format!("\"{key}\":")).unwrap();
    let order = ["by", "since", "before", "runs_read", "groups", "total"];
    assert!(
        order.windows(2).all(|w| at(w[0]) < at(w[1])),
        "{}",
        out.stdout
    );
    let group = [
        "key",
        "runs",
        "attempts",
        "spent_usd",
        "unpriced_attempts",
        "unpriced_models",
    ];
    let total = &out.stdout[at("total")..];
    let at_total = |key: &str| total.find(&format!("\"{key}\":")).unwrap();
    assert!(
        group.windows(2).all(|w| at_total(w[0]) < at_total(w[1])),
        "{total}"
    );
    let v = out.json();
    assert_eq!(
        (&v["by"], &v["since"], &v["before"], &v["runs_read"]),
        (
            &json!("plan"),
            &json!("2001-01-01T00:00:00.000Z"),
            &Value::Null,
            &json!(2)
        )
    );
    assert_eq!(v["groups"].as_array().unwrap().len(), 2);
    let csv = spend(&dir, &store, &["--by", "model", "--format", "csv"]);
    assert_eq!(csv.code, 0, "{}", csv.stderr);
    let mut expected_csv =
        String::from("model,runs,attempts,spent_usd,unpriced_attempts,unpriced_models\r\n");
    for (key, runs_in, attempts, spent, unpriced, models) in &expected(&runs, "model")[..3] {
        let models: Vec<&str> = models
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m.as_str().unwrap())
            .collect();
        expected_csv.push_str(&format!(
            "{key},{runs_in},{attempts},{spent},{unpriced},{}\r\n",
            models.join(" ")
        ));
    }
    assert_eq!(csv.stdout, expected_csv);
    // Read back by the reference parser: six fields a record.
    let mut reader = csv::Reader::from_reader(csv.stdout.as_bytes());
    assert_eq!(
        reader
            .records()
            .map(|r| r.unwrap().len())
            .collect::<Vec<_>>(),
        [6, 6, 6]
    );
}

/// The same two runs on the shared store and in run directories give the
/// same sums, grouped every way but by run (ids differ) and by plan path.
#[test]
fn the_shared_store_gives_the_same_sums_as_run_directories() {
    let Some(url) = pg::fresh_db("spend") else {
        return;
    };
    let dir = Dir::new();
    let local = ["--root", "runs"];
    let shared = ["--store", url.as_str()];
    let local_runs = two_runs(&dir, &local);
    let shared_runs = two_runs(&dir, &shared);
    let figures = |runs: &[(String, Value); 2]| -> Vec<Vec<(String, Option<Usd>)>> {
        runs.iter().map(|(_, j)| costs_by_model(j)).collect()
    };
    assert_eq!(
        figures(&local_runs),
        figures(&shared_runs),
        "the runs cost the same"
    );
    for by in ["plan", "model", "run", "day"] {
        let args = ["--by", by, "--format", "json"];
        let on_pg = groups(&spend(&dir, &shared, &args));
        assert_eq!(
            on_pg,
            expected(&shared_runs, by),
            "--by {by} on the shared store"
        );
        let mut on_disk = groups(&spend(&dir, &local, &args));
        let mut on_pg = on_pg;
        if by == "run" {
            for g in on_disk.iter_mut().chain(on_pg.iter_mut()) {
                g.0 = String::new();
            }
        }
        assert_eq!(on_disk, on_pg, "--by {by}");
    }
}

/// A task whose output is summarised (`summarize_strategy: llm`) is stored
/// twice in its session: once completed, once again with its summary
/// call's cost added. Its cost counts once: `ctx spend`, the run's own
/// `spent_usd` and `runs show` all give the sum of the tasks' costs.
#[test]
fn a_summarised_task_counts_once() {
    let dir = Dir::new();
    let plan = json!({"schema_version": 1, "config": {"tokenizer": "cl100k_base",
        "dependency": {"max_output_length": 5, "summarize_strategy": "llm", "summary_max_tokens": 20}},
        "sub_tasks": [
            {"id": "a", "description": "a", "tool_or_prompt": {"name": "inference",
                "params": {"prompt": "Say a.", "model": "m", "max_tokens": 50}}},
            {"id": "b", "description": "b", "dependencies": ["a"], "tool_or_prompt": {"name": "inference",
                "params": {"prompt": "Say b.", "model": "n", "max_tokens": 50}}}]});
    dir.write("plan.json", &plan.to_string());
    let store = ["--root", "runs"];
    let (id, json) = run(&dir, "plan.json", &store);
    assert_eq!(json["summaries"]["calls"], 1, "{json}");
    let tasks: Usd = costs_by_model(&json)
        .into_iter()
        .map(|(_, c)| c.unwrap())
        .fold(Usd::ZERO, Usd::saturating_add);
    assert_eq!(usd(&json["spent_usd"]), tasks);
    let got = groups(&spend(&dir, &store, &["--format", "json"]));
    assert_eq!(got.last().unwrap().3, tasks);
    let show = dir.run(&["runs", "show", &id, "--root", "runs", "--format", "json"]);
    assert_eq!(show.code, 0, "{}", show.stderr);
    assert_eq!(usd(&show.json()["spent_usd"]), tasks, "{}", show.stdout);
}
