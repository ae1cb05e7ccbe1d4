//! `--otlp` and the `OTEL_*` environment on the real binary: the trace a
//! run exports, decoded with the OTLP protobuf definitions
//! (opentelemetry-proto), so this is also the check of the wire format;
//! the API key never in any exported byte; a collector that is down or
//! never answers changes nothing but one warning.

#[cfg(unix)]
#[path = "../../ctx-store-postgres/tests/support/mod.rs"]
mod pg;

#[path = "support/collector.rs"]
mod collector;

#[path = "support/batch_plan.rs"]
mod batch_plan;

use std::net::TcpListener;
use std::time::{Duration, Instant};

use collector::{AnyValue, Server, Span, attr, hex, int_attr, str_attr};
use ctx_test_support::Dir;

const KEY: &str = "sk-test-TRACING-4f1c9e2d7b";

/// The fake collector (also the model's endpoint) and a scratch directory
/// holding [`plan`]'s plan: every test's set-up.
fn collector_and_plan() -> (Server, Dir) {
    let dir = Dir::new();
    plan(&dir);
    (Server::start(false), dir)
}

fn plan(dir: &Dir) {
    dir.write(
        "plan.json",
        r#"{"schema_version": 1, "goal": "Trace me", "sub_tasks": [
  {"id": "a", "description": "First", "tool_or_prompt": {"name": "inference", "params": {"prompt": "Say a.", "temperature": 0.3}},
   "checks": [{"contains": "ok"}]},
  {"id": "b", "description": "Second", "dependencies": ["a"], "tool_or_prompt": {"name": "inference", "params": {"prompt": "Say b.", "model": "task-model", "max_tokens": 7}}}
]}"#,
    );
}

fn ctx_run(
    dir: &Dir,
    openai: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> (ctx_test_support::Out, Duration) {
    let mut cmd = dir.ctx();
    cmd.args(["run", "plan.json", "--engine", "openai", "--base-url"])
        .arg(format!("{openai}/v1"))
        .args(["--model", "cli-model"])
        .args(args)
        .env("OPENAI_API_KEY", KEY);
    for var in [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        "OTEL_EXPORTER_OTLP_TIMEOUT",
        "OTEL_SDK_DISABLED",
    ] {
        cmd.env_remove(var);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let started = Instant::now();
    let out = ctx_test_support::Out::of(&mut cmd);
    (out, started.elapsed())
}

/// [`ctx_run`] with `server` as both the model and, through
/// `OTEL_EXPORTER_OTLP_ENDPOINT`, the collector, and `env` besides.
fn traced_by_env(dir: &Dir, server: &Server, env: &[(&str, &str)]) -> ctx_test_support::Out {
    let endpoint = [("OTEL_EXPORTER_OTLP_ENDPOINT", server.url.as_str())];
    ctx_run(dir, &server.url, &[], &[&endpoint[..], env].concat()).0
}

#[test]
fn a_run_exports_its_trace_in_the_genai_conventions_and_never_the_key() {
    let (server, dir) = collector_and_plan();
    let out = traced_by_env(
        &dir,
        &server,
        &[
            ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true"),
            ("OTEL_SERVICE_NAME", "ctx-test"),
        ],
    );
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    assert!(!out.stderr.contains("tracing"), "{}", out.stderr);
    let run_id = out.run_id();

    let spans = server.spans();
    let named = |prefix: &str| -> Vec<&Span> {
        spans
            .iter()
            .filter(|s| s.name.starts_with(prefix))
            .collect()
    };
    let workflow = named("invoke_workflow");
    assert_eq!(workflow.len(), 1, "{spans:#?}");
    let workflow = workflow[0];
    assert_eq!(workflow.name, "invoke_workflow Trace me");
    assert_eq!(
        str_attr(workflow, "gen_ai.operation.name"),
        Some("invoke_workflow")
    );
    assert_eq!(str_attr(workflow, "ctx.run.id"), Some(run_id.as_str()));
    assert!(workflow.parent_span_id.is_empty());
    // The trace id is the run's, derived from its id.
    let ids = ctx_store::RunTraceIds::of(&run_id);
    assert_eq!(workflow.trace_id, ids.trace_id);
    assert_eq!(workflow.span_id, ids.root_span_id);
    assert!(spans.iter().all(|s| s.trace_id == ids.trace_id));

    let tasks = named("task ");
    assert_eq!(tasks.len(), 2);
    for t in &tasks {
        assert_eq!(t.parent_span_id, workflow.span_id);
        assert_eq!(str_attr(t, "ctx.task.status"), Some("completed"));
        assert_eq!(int_attr(t, "ctx.task.attempts"), Some(1));
    }
    let a = tasks.iter().find(|t| t.name == "task a").unwrap();
    let check = a
        .events
        .iter()
        .find(|e| e.name == "gen_ai.evaluation.result")
        .unwrap();
    assert!(
        matches!(attr(&check.attributes, "gen_ai.evaluation.score.label"), Some(AnyValue::StringValue(s)) if s == "pass")
    );

    let chats = named("chat ");
    assert_eq!(chats.len(), 2, "{chats:#?}");
    let chat_b = chats.iter().find(|c| c.name == "chat task-model").unwrap();
    let task_b = tasks.iter().find(|t| t.name == "task b").unwrap();
    assert_eq!(chat_b.parent_span_id, task_b.span_id);
    assert_eq!(chat_b.kind, 3, "SPAN_KIND_CLIENT");
    assert_eq!(str_attr(chat_b, "gen_ai.provider.name"), Some("openai"));
    assert_eq!(str_attr(chat_b, "gen_ai.request.model"), Some("task-model"));
    assert_eq!(int_attr(chat_b, "gen_ai.request.max_tokens"), Some(7));
    assert_eq!(
        str_attr(chat_b, "gen_ai.response.model"),
        Some("served-model")
    );
    assert_eq!(str_attr(chat_b, "gen_ai.response.id"), Some("chatcmpl-1"));
    // Not streamed: no time to first chunk.
    assert!(attr(&chat_b.attributes, "gen_ai.response.time_to_first_chunk").is_none());
    assert_eq!(int_attr(chat_b, "gen_ai.usage.input_tokens"), Some(12));
    assert_eq!(int_attr(chat_b, "gen_ai.usage.output_tokens"), Some(3));
    assert_eq!(str_attr(chat_b, "ctx.call.purpose"), Some("task"));
    // Content was asked for: the prompt is there, in the messages form.
    let input = str_attr(chat_b, "gen_ai.input.messages").unwrap();
    assert!(input.contains("Say b."), "{input}");

    // The request to the model carried the chat span's traceparent.
    let calls = server.seen("/v1/chat/completions");
    assert_eq!(calls.len(), 2);
    let parents: Vec<&str> = calls
        .iter()
        .filter_map(|c| c.headers.get("traceparent").map(String::as_str))
        .collect();
    let expected = format!("00-{}-{}-01", hex(&chat_b.trace_id), hex(&chat_b.span_id));
    assert!(
        parents.contains(&expected.as_str()),
        "{parents:?} vs {expected}"
    );

    // The two GenAI histograms.
    let metrics = server.metric_names();
    assert!(
        metrics.contains(&"gen_ai.client.token.usage".to_string()),
        "{metrics:?}"
    );
    assert!(
        metrics.contains(&"gen_ai.client.operation.duration".to_string()),
        "{metrics:?}"
    );

    // The key is in no byte sent to the collector: bodies, headers, paths.
    for s in server
        .seen("/v1/traces")
        .iter()
        .chain(&server.seen("/v1/metrics"))
    {
        let raw = String::from_utf8_lossy(&s.raw);
        assert!(!raw.contains(KEY), "the API key reached the collector");
        assert!(!raw.contains("TRACING-4f1c9e2d7b"));
    }
}

/// `ctx run --batch`: each batch is a span under the call that opened
/// its wave, with the batch's id, status and request counts.
#[test]
fn each_batch_is_a_span_with_its_id_and_counts() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let model = batch_plan::server(&rt);
    let collector = Server::start(false);
    let dir = Dir::new();
    batch_plan::write_plan(&dir);
    let base = model.base_url.trim_end_matches("/v1");
    let endpoint = [("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url.as_str())];
    let flags = ["--batch", "--batch-poll-ms", "2"];
    let (out, _) = ctx_run(&dir, base, &flags, &endpoint);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let spans = collector.spans();
    let batches: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name.starts_with("batch "))
        .collect();
    assert_eq!(batches.len(), 2, "{spans:#?}");
    let ids = model.batch_ids();
    for (span, requests) in batches.iter().zip([2, 1]) {
        assert_eq!(span.name, format!("batch {}", batch_plan::MODEL));
        let id = str_attr(span, "ctx.batch.id").unwrap();
        assert!(ids.iter().any(|b| b == id), "{id}");
        assert_eq!(str_attr(span, "ctx.batch.status"), Some("completed"));
        assert_eq!(int_attr(span, "ctx.batch.requests"), Some(requests));
        assert_eq!(int_attr(span, "ctx.batch.completed"), Some(requests));
        assert_eq!(int_attr(span, "ctx.batch.failed"), Some(0));
        assert_eq!(str_attr(span, "gen_ai.provider.name"), Some("openai"));
        let parent = spans
            .iter()
            .find(|s| s.span_id == span.parent_span_id)
            .unwrap();
        assert!(parent.name.starts_with("chat"), "{}", parent.name);
    }
}

#[test]
fn a_streamed_call_records_its_response_id_and_time_to_first_chunk() {
    let (server, dir) = collector_and_plan();
    let (out, _) = ctx_run(&dir, &server.url, &["--stream", "--otlp", &server.url], &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let spans = server.spans();
    let chats: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name.starts_with("chat "))
        .collect();
    assert_eq!(chats.len(), 2, "{spans:#?}");
    for chat in chats {
        assert_eq!(str_attr(chat, "gen_ai.response.id"), Some("chatcmpl-s7"));
        let Some(AnyValue::DoubleValue(first)) =
            attr(&chat.attributes, "gen_ai.response.time_to_first_chunk")
        else {
            panic!("no time to first chunk: {chat:#?}");
        };
        // Seconds, within the call's own span.
        let span_secs = (chat.end_time_unix_nano - chat.start_time_unix_nano) as f64 / 1e9;
        assert!(
            *first > 0.0 && *first <= span_secs,
            "{first} of {span_secs}"
        );
    }
}

/// The one `warning: tracing:` line a command printed (failing the test
/// when there are none or several).
fn one_tracing_warning(out: &ctx_test_support::Out) -> &str {
    let warnings: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.starts_with("warning: tracing:"))
        .collect();
    assert_eq!(warnings.len(), 1, "{}", out.stderr);
    warnings[0]
}

/// gRPC is not built in: asking for it is a warning that says so and
/// what to do, and the run goes on untraced (not a silent no-op).
#[test]
fn asking_for_grpc_is_one_clear_warning_and_no_export() {
    let (server, dir) = collector_and_plan();
    let out = traced_by_env(&dir, &server, &[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let warning = one_tracing_warning(&out);
    for words in ["grpc", "http/protobuf only", "nothing is exported"] {
        assert!(warning.contains(words), "{warning}");
    }
    assert!(server.seen("/v1/traces").is_empty());
}

#[test]
fn without_a_setting_nothing_is_exported() {
    let (server, dir) = collector_and_plan();
    let (out, _) = ctx_run(&dir, &server.url, &[], &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(server.seen("/v1/traces").is_empty());
    assert!(
        server
            .seen("/v1/chat/completions")
            .iter()
            .all(|c| !c.headers.contains_key("traceparent"))
    );
}

#[test]
fn a_collector_that_is_down_costs_one_warning_and_nothing_else() {
    let (openai, dir) = collector_and_plan();
    // A port that was free a moment ago: nothing listens there.
    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let (out, took) = ctx_run(
        &dir,
        &openai.url,
        &["--otlp", &format!("http://{closed}")],
        &[],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let warning = one_tracing_warning(&out);
    assert!(warning.contains("not delivered"), "{warning}");
    assert!(took < Duration::from_secs(5), "took {took:?}");
}

#[test]
fn a_collector_that_never_answers_delays_the_exit_by_the_timeout_at_most() {
    let (openai, dir) = collector_and_plan();
    let mute = Server::start(true);
    let (out, took) = ctx_run(
        &dir,
        &openai.url,
        &["--otlp", &mute.url],
        &[("OTEL_EXPORTER_OTLP_TIMEOUT", "700")],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stderr.matches("warning: tracing:").count(),
        1,
        "{}",
        out.stderr
    );
    // The run itself takes well under a second; the flush at most 0.7 s
    // more (twice that, for a loaded machine).
    assert!(took < Duration::from_millis(4000), "took {took:?}");
    assert!(!mute.seen("/v1/traces").is_empty());
}

#[test]
fn a_stored_run_exports_the_same_trace_to_a_collector_and_to_a_file() {
    let (server, dir) = collector_and_plan();
    // Traced live, to compare the export with.
    let (out, _) = ctx_run(&dir, &server.url, &["--otlp", &server.url], &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let run_id = out.run_id();
    let live = server.spans();
    server.clear();

    let sent = dir.run(&[
        "runs",
        "export",
        &run_id,
        "--format",
        "otlp",
        "--to",
        &server.url,
    ]);
    assert_eq!(sent.code, 0, "{}", sent.stderr);
    let exported = server.spans();
    let root = |spans: &[Span]| {
        spans
            .iter()
            .find(|s| s.parent_span_id.is_empty())
            .cloned()
            .unwrap()
    };
    let (live_root, exported_root) = (root(&live), root(&exported));
    assert_eq!(exported_root.trace_id, live_root.trace_id);
    assert_eq!(exported_root.span_id, live_root.span_id);
    assert_eq!(exported_root.name, "invoke_workflow Trace me");
    let tasks: Vec<&Span> = exported
        .iter()
        .filter(|s| s.name.starts_with("task "))
        .collect();
    assert_eq!(tasks.len(), 2);
    assert!(
        tasks
            .iter()
            .all(|t| t.parent_span_id == exported_root.span_id)
    );
    let chats: Vec<&Span> = exported
        .iter()
        .filter(|s| s.name.starts_with("chat "))
        .collect();
    assert_eq!(chats.len(), 2, "{exported:#?}");
    assert!(
        chats
            .iter()
            .all(|c| int_attr(c, "gen_ai.usage.input_tokens") == Some(12))
    );
    // The engine, from the stored engine label, as the live span has it.
    assert!(
        chats
            .iter()
            .all(|c| str_attr(c, "gen_ai.provider.name") == Some("openai")),
        "{chats:#?}"
    );
    // The recorded times: each call within its task.
    for c in &chats {
        let t = tasks
            .iter()
            .find(|t| t.span_id == c.parent_span_id)
            .unwrap();
        assert!(
            t.start_time_unix_nano <= c.start_time_unix_nano
                && c.end_time_unix_nano <= t.end_time_unix_nano
        );
    }

    // To a file: OTLP/JSON with the same ids, in hex.
    let file = dir.run(&[
        "runs",
        "export",
        &run_id,
        "--format",
        "otlp",
        "--to",
        "trace.json",
    ]);
    assert_eq!(file.code, 0, "{}", file.stderr);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("trace.json")).unwrap())
            .unwrap();
    let spans = json["resourceSpans"][0]["scopeSpans"][0]["spans"]
        .as_array()
        .unwrap();
    assert_eq!(spans.len(), exported.len());
    assert!(
        spans
            .iter()
            .all(|s| s["traceId"] == hex(&live_root.trace_id))
    );

    // --to is for otlp only; a collector that is down is exit 5 (an output not written).
    let wrong = dir.run(&["runs", "export", &run_id, "--to", "x.json"]);
    assert_eq!(wrong.code, 2, "{}", wrong.stderr);
    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let down = dir.run(&[
        "runs",
        "export",
        &run_id,
        "--format",
        "otlp",
        "--to",
        &format!("http://{closed}"),
    ]);
    assert_eq!(down.code, 5, "{}", down.stderr);
}

#[test]
fn captured_content_redacts_the_values_of_secret_variables() {
    let server = Server::start(false);
    let dir = Dir::new();
    dir.write(
        "plan.yaml",
        "schema_version: 1\nvariables:\n  - {name: TOKEN, class: trusted, secret: true}\nsub_tasks:\n  - id: a\n    description: A\n    tool_or_prompt: {name: inference, params: {prompt: \"Use {{TOKEN}} now.\"}}\n",
    );
    let mut cmd = dir.ctx();
    cmd.args([
        "run",
        "plan.yaml",
        "--no-store",
        "--engine",
        "openai",
        "--base-url",
    ])
    .arg(format!("{}/v1", server.url))
    .args(["--model", "m", "--var", "TOKEN=hunter2-zq9"])
    .env("OPENAI_API_KEY", KEY)
    .env("OTEL_EXPORTER_OTLP_ENDPOINT", &server.url)
    .env("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true");
    let out = ctx_test_support::Out::of(&mut cmd);
    assert_eq!(out.code, 0, "{}", out.stderr);
    // The model got the value; the collector did not.
    let calls = server.seen("/v1/chat/completions");
    assert!(String::from_utf8_lossy(&calls[0].body).contains("hunter2-zq9"));
    let spans = server.spans();
    let chat = spans.iter().find(|s| s.name == "chat m").unwrap();
    let input = str_attr(chat, "gen_ai.input.messages").unwrap();
    assert!(input.contains("Use [REDACTED] now."), "{input}");
    for s in server.seen("/v1/traces") {
        assert!(!String::from_utf8_lossy(&s.raw).contains("hunter2-zq9"));
    }
}

/// Two workers of a shared store, each a process of its own, and the
/// process that registered the run: one trace, the registering session's
/// `invoke_workflow` its root, every claim under it, from both workers.
#[cfg(unix)]
#[test]
fn a_shared_run_worked_by_two_workers_is_one_trace() {
    let Some(url) = pg::fresh_db("tracing_two_workers") else {
        return;
    };
    let server = Server::start(false);
    let dir = Dir::new();
    dir.write(
        "plan.json",
        r#"{"schema_version": 1, "goal": "Shared", "sub_tasks": [
  {"id": "a", "description": "A", "tool_or_prompt": {"name": "inference", "params": {"prompt": "Say a."}}},
  {"id": "b", "description": "B", "tool_or_prompt": {"name": "inference", "params": {"prompt": "Say b."}}},
  {"id": "c", "description": "C", "tool_or_prompt": {"name": "inference", "params": {"prompt": "Say c."}}},
  {"id": "d", "description": "D", "tool_or_prompt": {"name": "inference", "params": {"prompt": "Say d."}}}
]}"#,
    );
    let traced = |cmd: &mut assert_cmd::Command| {
        cmd.env_remove("CTX_STORE")
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", &server.url);
    };
    let mut register = std::process::Command::new(assert_cmd::cargo::cargo_bin("ctx"));
    register
        .current_dir(dir.path())
        .args(["run", "plan.json", "--store", &url, "--no-local"])
        .env_remove("CTX_STORE")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &server.url)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let follower = register.spawn().unwrap();
    let threads = thread_names_while_alive(follower.id());
    // Two workers at once, one task at a time each, each task 0.3 s: both
    // get work.
    let workers: Vec<std::thread::JoinHandle<ctx_test_support::Out>> = (0..2)
        .map(|_| {
            let mut cmd = dir.ctx();
            traced(&mut cmd);
            cmd.args([
                "worker",
                "--store",
                &url,
                "--until-idle",
                "--wait",
                "30",
                "--concurrency",
                "1",
            ])
            .args(["--engine", "command", "--command", "sleep 0.3; echo ok"]);
            std::thread::spawn(move || ctx_test_support::Out::of(&mut cmd))
        })
        .collect();
    for w in workers {
        let out = w.join().unwrap();
        assert_eq!(out.code, 0, "{}", out.stderr);
    }
    let follower = follower.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&follower.stderr);
    assert!(follower.status.success(), "{err}");
    // One runtime in the process (issue 36): the store's connections and
    // the exporter's requests run on the command's, which starts no
    // thread of its own kind (the store's was `ctx-store-postgres`, the
    // exporter's `ctx-otlp`; a thread's name is cut to 15 bytes).
    let threads = threads.join().unwrap();
    assert!(threads.contains("tokio-rt-worker"), "{threads:?}");
    assert!(
        !threads
            .iter()
            .any(|t| t.starts_with("ctx-store-postg") || t == "ctx-otlp"),
        "{threads:?}"
    );
    let run_id = err
        .lines()
        .find_map(|l| {
            l.strip_prefix("run ")
                .and_then(|r| r.split_once(" registered"))
                .map(|(id, _)| id.to_string())
        })
        .unwrap();

    let spans = server.spans();
    let ids = ctx_store::RunTraceIds::of(&run_id);
    assert!(
        spans.iter().all(|s| s.trace_id == ids.trace_id),
        "{spans:#?}"
    );
    let roots: Vec<&Span> = spans
        .iter()
        .filter(|s| s.parent_span_id.is_empty())
        .collect();
    assert_eq!(roots.len(), 1);
    assert_eq!(roots[0].name, "invoke_workflow Shared");
    assert_eq!(roots[0].span_id, ids.root_span_id);
    let claims: Vec<&Span> = spans
        .iter()
        .filter(|s| s.name.starts_with("claim "))
        .collect();
    assert_eq!(claims.len(), 4, "{claims:#?}");
    assert!(claims.iter().all(|c| c.parent_span_id == ids.root_span_id));
    let mut workers: Vec<&str> = claims
        .iter()
        .filter_map(|c| str_attr(c, "ctx.worker.id"))
        .collect();
    workers.sort();
    workers.dedup();
    assert_eq!(workers.len(), 2, "{workers:?}");
    // Each task's span, and its call's, under its claim.
    for c in &claims {
        let task = spans
            .iter()
            .find(|s| s.parent_span_id == c.span_id && s.name.starts_with("task "))
            .unwrap();
        let chat = spans
            .iter()
            .find(|s| s.parent_span_id == task.span_id)
            .unwrap();
        assert_eq!(str_attr(chat, "gen_ai.provider.name"), Some("command"));
    }
}

/// The names of `pid`'s threads, sampled every 20 ms from /proc until the
/// process is gone or a zombie.
#[cfg(unix)]
fn thread_names_while_alive(
    pid: u32,
) -> std::thread::JoinHandle<std::collections::BTreeSet<String>> {
    std::thread::spawn(move || {
        let mut names = std::collections::BTreeSet::new();
        let dir = format!("/proc/{pid}");
        loop {
            let status = std::fs::read_to_string(format!("{dir}/stat")).unwrap_or_default();
            if status.is_empty() || status.contains(") Z ") {
                return names;
            }
            for task in std::fs::read_dir(format!("{dir}/task"))
                .into_iter()
                .flatten()
                .flatten()
            {
                if let Ok(name) = std::fs::read_to_string(task.path().join("comm")) {
                    names.insert(name.trim_end().to_string());
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    })
}

/// A decision on a task's approval gate is a `ctx.approval` event on its
/// task span: live, when the approved task runs, and in a stored run's
/// export.
#[test]
fn an_approval_is_an_event_on_the_task_span_live_and_exported() {
    let (server, dir) = collector_and_plan();
    let text = std::fs::read_to_string(dir.path().join("plan.json")).unwrap();
    dir.write(
        "plan.json",
        &text.replace(
            r#""dependencies": ["a"],"#,
            r#""dependencies": ["a"], "approval": {"before": "run"},"#,
        ),
    );
    let otlp = ["--otlp", server.url.as_str()];
    let (held, _) = ctx_run(&dir, &server.url, &otlp, &[]);
    assert_eq!(held.code, 6, "{}\n{}", held.stdout, held.stderr);
    let run_id = held.run_id();
    let approved = dir.run(&["runs", "approve", &run_id, "b", "--by", "ana"]);
    assert_eq!(approved.code, 0, "{}", approved.stderr);
    server.clear();
    let resume = ["--otlp", server.url.as_str(), "--resume", run_id.as_str()];
    let (resumed, _) = ctx_run(&dir, &server.url, &resume, &[]);
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    let approval_of = |spans: &[Span]| {
        let b = spans.iter().find(|s| s.name == "task b").cloned().unwrap();
        let e = b.events.iter().find(|e| e.name == "ctx.approval").cloned();
        let e = e.unwrap_or_else(|| panic!("no ctx.approval event on {b:#?}"));
        for (key, value) in [
            ("ctx.approval.stage", "run"),
            ("ctx.approval.verdict", "approve"),
            ("ctx.approval.by", "ana"),
        ] {
            assert!(
                matches!(attr(&e.attributes, key), Some(AnyValue::StringValue(s)) if s == value),
                "{key}: {e:#?}"
            );
        }
    };
    approval_of(&server.spans());
    server.clear();
    let sent = dir.run(&[
        "runs",
        "export",
        &run_id,
        "--format",
        "otlp",
        "--to",
        &server.url,
    ]);
    assert_eq!(sent.code, 0, "{}", sent.stderr);
    approval_of(&server.spans());
}

/// A map task calls no engine, so no job holds its span: the executor
/// opens it as the map expands and closes it at the join. The approval
/// of a gated map task is an event on it, live.
#[test]
fn a_map_tasks_approval_is_an_event_on_its_span_live() {
    let (server, dir) = collector_and_plan();
    dir.write(
        "plan.json",
        r#"{"schema_version": 1, "goal": "Trace a map",
  "variables": [{"name": "LIST", "type": "json", "max_tokens": 100}],
  "sub_tasks": [
  {"id": "m", "description": "Each", "approval": {"before": "run", "message": "Look first"},
   "map": {"over": "LIST", "as": "ITEM", "max_items": 5},
   "tool_or_prompt": {"name": "inference", "params": {"prompt": "<untrusted-content>\n{{ITEM}}\n</untrusted-content>\nSay it."}}}
]}"#,
    );
    let var = ["--var", r#"LIST=["x","y"]"#];
    let otlp = ["--otlp", server.url.as_str(), var[0], var[1]];
    let (held, _) = ctx_run(&dir, &server.url, &otlp, &[]);
    assert_eq!(held.code, 6, "{}\n{}", held.stdout, held.stderr);
    let run_id = held.run_id();
    let approved = dir.run(&["runs", "approve", &run_id, "m", "--by", "ana"]);
    assert_eq!(approved.code, 0, "{}", approved.stderr);
    server.clear();
    let resume = [
        "--otlp",
        server.url.as_str(),
        "--resume",
        run_id.as_str(),
        var[0],
        var[1],
    ];
    let (resumed, _) = ctx_run(&dir, &server.url, &resume, &[]);
    assert_eq!(resumed.code, 0, "{}", resumed.stderr);
    let spans = server.spans();
    let m = spans.iter().find(|s| s.name == "task m").cloned();
    let m = m.unwrap_or_else(|| panic!("no span of the map task: {spans:#?}"));
    let e = m.events.iter().find(|e| e.name == "ctx.approval").cloned();
    let e = e.unwrap_or_else(|| panic!("no ctx.approval event on {m:#?}"));
    assert!(
        matches!(attr(&e.attributes, "ctx.approval.by"), Some(AnyValue::StringValue(s)) if s == "ana"),
        "{e:#?}"
    );
    assert!(
        matches!(attr(&m.attributes, "ctx.task.status"), Some(AnyValue::StringValue(s)) if s == "completed"),
        "the span closes at the join with the map's status: {m:#?}"
    );
    let items = spans
        .iter()
        .filter(|s| s.name.starts_with("task m["))
        .count();
    assert_eq!(items, 2, "each item keeps its own span");
}
