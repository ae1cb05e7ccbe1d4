//! `ctx run --engine openai` and `ctx engines`, against a scripted HTTP
//! server on 127.0.0.1 (std only: a thread per connection answering from a
//! queue of canned responses and recording every request).

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use assert_cmd::Command;
use ctx_test_support::task;
use serde_json::{Value, json};

const KEY: &str = "sk-cli-test-SECRET-9f8e7d6c5b4a";

/// Where `ctx run` runs: a scratch folder, so the run stores it writes by
/// default (`.ctx/runs`) land under target/, never in the repo.
fn root() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("engine_openai");
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn ctx() -> Command {
    let mut c = Command::cargo_bin("ctx").expect("ctx binary");
    c.current_dir(root())
        .env_remove("OPENAI_BASE_URL")
        .env_remove("OPENAI_API_KEY")
        .env("NO_PROXY", "127.0.0.1");
    c
}

/// One recorded request.
#[derive(Debug, Clone)]
struct Seen {
    head: String,
    body: Value,
}

impl Seen {
    fn prompt(&self) -> String {
        self.body["messages"]
            .as_array()
            .and_then(|m| m.last())
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default()
            .to_string()
    }
    fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
        })
    }
}

/// A canned response: raw HTTP, or a function of the request.
type Responder = Box<dyn Fn(&Seen) -> String + Send + Sync>;

struct Server {
    url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Server {
    /// Answers requests in order from `script`; the last entry repeats.
    fn start(script: Vec<Responder>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let queue = Arc::new(Mutex::new(VecDeque::from(script)));
        let log = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let log = log.clone();
                let queue = queue.clone();
                std::thread::spawn(move || serve(stream, &log, &queue));
            }
        });
        Server { url, seen }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

fn serve(mut stream: TcpStream, log: &Mutex<Vec<Seen>>, queue: &Mutex<VecDeque<Responder>>) {
    stream.set_read_timeout(Some(Duration::from_secs(10))).ok();
    loop {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 8192];
        let (head, body) = loop {
            let Ok(n) = stream.read(&mut chunk) else {
                return;
            };
            if n == 0 {
                return;
            }
            buf.extend_from_slice(&chunk[..n]);
            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buf[..end]).into_owned();
                let len: usize = head
                    .lines()
                    .find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.eq_ignore_ascii_case("content-length")
                            .then(|| v.trim().parse().ok())?
                    })
                    .unwrap_or(0);
                if buf.len() >= end + 4 + len {
                    break (head, buf[end + 4..end + 4 + len].to_vec());
                }
            }
        };
        let seen = Seen {
            head,
            body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        };
        log.lock().unwrap().push(seen.clone());
        let response = {
            let mut q = queue.lock().unwrap();
            let responder = if q.len() > 1 { q.pop_front() } else { None };
            match responder {
                Some(r) => r(&seen),
                None => q.front().map(|r| r(&seen)).unwrap_or_default(),
            }
        };
        if stream.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}

fn http(status: &str, headers: &[(&str, &str)], body: &str) -> String {
    let mut r = format!("HTTP/1.1 {status}\r\ncontent-length: {}\r\n", body.len());
    for (k, v) in headers {
        r.push_str(&format!("{k}: {v}\r\n"));
    }
    r.push_str("\r\n");
    r.push_str(body);
    r
}

/// Answers with `answer to: <last line of the prompt>`, and usage.
fn echo(finish: &'static str) -> Responder {
    Box::new(move |seen: &Seen| {
        let prompt = seen.prompt();
        let last = prompt.lines().last().unwrap_or_default().to_string();
        let body = json!({
            "model": format!("{}-served", seen.body["model"].as_str().unwrap_or("?")),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": format!("answer to: {last}")}, "finish_reason": finish}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 4, "total_tokens": 15, "prompt_tokens_details": {"cached_tokens": 3}}
        });
        http(
            "200 OK",
            &[("content-type", "application/json")],
            &body.to_string(),
        )
    })
}

fn fixed(text: String) -> Responder {
    Box::new(move |_| text.clone())
}

/// a -> b, a -> c; b names its own model.
fn write_plan(dir: &Path) -> PathBuf {
    let path = dir.join("plan.json");
    let text = r#"{"schema_version": 1, "sub_tasks": [
  {"id": "a", "description": "First", "tool_or_prompt": {"name": "inference", "params": {"prompt": "Say a.", "temperature": 0.3}}},
  {"id": "b", "description": "Second", "dependencies": ["a"], "tool_or_prompt": {"name": "inference", "params": {"prompt": "Say b.", "model": "task-model", "max_tokens": 7}}},
  {"id": "c", "description": "Third", "dependencies": ["a"], "tool_or_prompt": {"name": "inference", "params": {"prompt": "Say c."}}}
]}"#;
    std::fs::write(&path, text).unwrap();
    path
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
    json: Value,
}

fn run(plan: &Path, args: &[&str], envs: &[(&str, &str)]) -> Run {
    let mut c = ctx();
    c.arg("run")
        .arg(plan)
        .args(["--engine", "openai", "--format", "json"])
        .args(args);
    for (k, v) in envs {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let json = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout,
        stderr,
        json,
    }
}

/// Every file under `dir`, and the run's stdout and stderr, free of `KEY`.
fn assert_key_nowhere(run: &Run, dir: &Path) {
    assert!(!run.stdout.contains(KEY), "stdout leaks the key");
    assert!(!run.stderr.contains(KEY), "stderr leaks the key");
    let mut stack = vec![dir.to_path_buf()];
    let mut files = 0;
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                files += 1;
                let bytes = std::fs::read(&path).unwrap();
                let text = String::from_utf8_lossy(&bytes);
                assert!(!text.contains(KEY), "{} leaks the key", path.display());
            }
        }
    }
    assert!(files > 0, "nothing was written under {}", dir.display());
}

#[test]
fn a_plan_runs_with_accounting_params_and_dependency_outputs() {
    let server = Server::start(vec![echo("stop")]);
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(dir.path());
    let out = dir.path().join("out");
    let r = run(
        &plan,
        &[
            "--base-url",
            &server.url,
            "--model",
            "cli-model",
            "--temperature",
            "0.9",
            "--seed",
            "5",
            "--system",
            "Be brief.",
            "--out",
            out.to_str().unwrap(),
        ],
        &[("OPENAI_API_KEY", KEY)],
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let a = task(&r.json, "a");
    assert_eq!(a["status"], "completed");
    assert_eq!(a["output"], "answer to: Say a.");
    assert_eq!(a["metadata"]["model"], "cli-model-served");
    assert_eq!(a["metadata"]["finish_reason"], "stop");
    assert_eq!(
        a["metadata"]["tokens_used"],
        json!({"prompt_tokens": 11, "completion_tokens": 4, "total_tokens": 15, "cached_tokens": 3})
    );
    assert_eq!(a["metadata"]["attempts"][0]["outcome"], "ok");
    assert_eq!(task(&r.json, "b")["metadata"]["model"], "task-model-served");

    let seen = server.seen();
    assert_eq!(seen.len(), 3);
    for s in &seen {
        assert_eq!(
            s.header("authorization").as_deref(),
            Some(format!("Bearer {KEY}").as_str())
        );
        assert_eq!(
            s.body["messages"][0],
            json!({"role": "system", "content": "Be brief."})
        );
        assert_eq!(s.body["seed"], 5);
    }
    let by_prompt = |end: &str| {
        seen.iter()
            .find(|s| s.prompt().ends_with(end))
            .unwrap()
            .clone()
    };
    // Task params win over CLI defaults.
    assert_eq!(by_prompt("Say a.").body["temperature"], 0.3);
    assert_eq!(by_prompt("Say b.").body["temperature"], 0.9);
    assert_eq!(by_prompt("Say b.").body["model"], "task-model");
    assert_eq!(by_prompt("Say b.").body["max_tokens"], 7);
    assert_eq!(by_prompt("Say c.").body["model"], "cli-model");
    // Downstream prompts carry the real upstream output.
    for end in ["Say b.", "Say c."] {
        let p = by_prompt(end).prompt();
        assert!(p.contains("### Task a: First"), "{p}");
        assert!(p.contains("answer to: Say a."), "{p}");
    }
    assert_key_nowhere(&r, &out);
}

#[test]
fn streaming_through_the_cli() {
    let stream: Responder = Box::new(|seen: &Seen| {
        let last = seen.prompt().lines().last().unwrap_or_default().to_string();
        let mut body = String::new();
        for piece in ["streamed ", "answer to: ", &last] {
            body.push_str(&format!(
                "data: {}\n\n",
                json!({"model": "s", "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": null}]})
            ));
        }
        body.push_str(&format!(
            "data: {}\n\n",
            json!({"model": "s", "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]})
        ));
        body.push_str(&format!(
            "data: {}\n\ndata: [DONE]\n\n",
            json!({"model": "s", "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 32, "total_tokens": 41}})
        ));
        http("200 OK", &[("content-type", "text/event-stream")], &body)
    });
    let server = Server::start(vec![stream]);
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(dir.path());
    let r = run(
        &plan,
        &["--base-url", &server.url, "--model", "m", "--stream"],
        &[],
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let b = task(&r.json, "b");
    assert_eq!(b["output"], "streamed answer to: Say b.");
    assert_eq!(b["metadata"]["finish_reason"], "length");
    assert_eq!(b["metadata"]["tokens_used"]["completion_tokens"], 32);
    assert!(
        task(&r.json, "b")["prompt"]
            .as_str()
            .unwrap()
            .contains("streamed answer to: Say a.")
    );
    for s in server.seen() {
        assert_eq!(s.body["stream"], true);
        assert_eq!(s.body["stream_options"], json!({"include_usage": true}));
        assert!(s.header("authorization").is_none(), "no key set, no header");
    }
}

#[test]
fn rate_limit_then_success_is_retried_and_shown() {
    let limited = http(
        "429 Too Many Requests",
        &[
            ("retry-after-ms", "50"),
            ("content-type", "application/json"),
        ],
        r#"{"error": {"message": "Rate limit reached", "code": "rate_limit_exceeded"}}"#,
    );
    let server = Server::start(vec![fixed(limited), echo("stop")]);
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(dir.path());
    let r = run(
        &plan,
        &[
            "--base-url",
            &server.url,
            "--model",
            "m",
            "--concurrency",
            "1",
        ],
        &[],
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let a = task(&r.json, "a");
    let attempts = a["metadata"]["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 2, "{attempts:?}");
    assert_eq!(attempts[0]["outcome"], "http_429");
    assert_eq!(attempts[0]["backoff_ms"], 50);
    assert!(
        attempts[0]["error"]
            .as_str()
            .unwrap()
            .contains("Rate limit reached")
    );
    assert_eq!(attempts[1]["outcome"], "ok");
    assert!(
        r.stderr
            .contains("task a: attempt 1/4 failed (http_429); retrying in 50 ms"),
        "{}",
        r.stderr
    );
}

#[test]
fn unreachable_server_fails_the_first_task_with_url_and_os_error() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/v1");
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(dir.path());
    let mut c = ctx();
    c.arg("run")
        .arg(&plan)
        .args(["--engine", "openai", "--base-url", &url, "--model", "m"])
        .args(["--max-attempts", "2", "--retry-initial-ms", "1"]);
    let out = c.output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let table = String::from_utf8_lossy(&out.stdout);
    let want = format!("failed a: cannot connect to {url}/chat/completions: ");
    assert!(table.contains(&want), "{table}");
    assert!(table.contains("Connection refused"), "{table}");
    assert!(table.contains("(gave up after 2 attempts)"), "{table}");
    assert!(
        table.contains("3 tasks: 0 completed, 1 failed, 2 skipped"),
        "{table}"
    );
}

#[test]
fn a_task_without_a_model_fails_alone() {
    let server = Server::start(vec![echo("stop")]);
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(dir.path());
    // No --model: only b names one; a fails, so c (and b) are skipped.
    let r = run(&plan, &["--base-url", &server.url], &[]);
    assert_eq!(r.code, 1);
    let a = task(&r.json, "a");
    assert_eq!(a["status"], "failed");
    assert_eq!(
        a["error"],
        "task `a`: no model: set `params.model` in the plan or give the engine a default model"
    );
    assert!(server.seen().is_empty());
}

#[test]
fn a_model_the_server_lacks_fails_that_task_not_the_run() {
    let lacks: Responder = Box::new(|seen: &Seen| {
        if seen.body["model"] == "task-model" {
            http(
                "404 Not Found",
                &[("content-type", "application/json")],
                r#"{"error": {"message": "The model `task-model` does not exist", "code": "model_not_found"}}"#,
            )
        } else {
            echo("stop")(seen)
        }
    });
    let server = Server::start(vec![lacks]);
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(dir.path());
    let r = run(&plan, &["--base-url", &server.url, "--model", "m"], &[]);
    assert_eq!(r.code, 1);
    assert_eq!(task(&r.json, "a")["status"], "completed");
    assert_eq!(task(&r.json, "c")["status"], "completed");
    let b = task(&r.json, "b");
    assert_eq!(b["status"], "failed");
    let err = b["error"].as_str().unwrap();
    assert!(
        err.starts_with("HTTP 404 Not Found from http://127.0.0.1:"),
        "{err}"
    );
    assert!(
        err.contains("The model `task-model` does not exist"),
        "{err}"
    );
    assert_eq!(b["metadata"]["attempts"].as_array().unwrap().len(), 1);
}

#[test]
fn the_key_appears_in_no_artifact_even_when_the_server_echoes_it() {
    let echoed = http(
        "401 Unauthorized",
        &[("content-type", "application/json")],
        &json!({"error": {"message": format!("Incorrect API key provided: {KEY}."), "code": "invalid_api_key"}}).to_string(),
    );
    let server = Server::start(vec![fixed(echoed)]);
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(dir.path());
    let out = dir.path().join("out");
    for format in ["json", "text"] {
        let mut c = ctx();
        c.arg("run")
            .arg(&plan)
            .args([
                "--engine",
                "openai",
                "--base-url",
                &server.url,
                "--model",
                "m",
            ])
            .args([
                "--api-key-env",
                "MY_PROVIDER_KEY",
                "--format",
                format,
                "--out",
            ])
            .arg(&out)
            .env("MY_PROVIDER_KEY", KEY);
        let o = c.output().unwrap();
        let r = Run {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
            json: Value::Null,
        };
        assert_eq!(r.code, 1);
        assert!(
            r.stdout.contains("Incorrect API key provided: <redacted>."),
            "{}",
            r.stdout
        );
        assert_key_nowhere(&r, &out);
    }
    // The key did reach the server, in the header only.
    let seen = server.seen();
    assert!(!seen.is_empty());
    assert!(seen.iter().all(|s| s.header("authorization").as_deref() == Some(format!("Bearer {KEY}").as_str())));
}

#[test]
fn bad_engine_settings_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(dir.path());
    let cases: [(&[&str], &str); 4] = [
        (
            &["--api-key-env", "CTX_TEST_UNSET_VAR"],
            "--api-key-env CTX_TEST_UNSET_VAR: the variable is not set",
        ),
        (
            &["--base-url", "ftp://example.com/v1"],
            "scheme `ftp` is not http or https",
        ),
        (
            &["--max-attempts", "0"],
            "--max-attempts: must be at least 1",
        ),
        (
            &["--idle-timeout", "0"],
            "--idle-timeout: must be greater than zero",
        ),
    ];
    for (args, message) in cases {
        let out = ctx()
            .arg("run")
            .arg(&plan)
            .args(["--engine", "openai"])
            .args(args)
            .env_remove("CTX_TEST_UNSET_VAR")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(message), "{args:?}: {stderr}");
    }
}

#[test]
fn base_url_comes_from_the_environment() {
    let server = Server::start(vec![echo("stop")]);
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(dir.path());
    let r = run(
        &plan,
        &["--model", "m"],
        &[("OPENAI_BASE_URL", &server.url)],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(server.seen().len(), 3);
}

#[test]
fn engines_lists_each_engine_and_what_it_reads() {
    let out = ctx()
        .arg("engines")
        .env("OPENAI_API_KEY", KEY)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("dry-run (default)\n"), "{text}");
    for needle in [
        "\ncommand\n",
        "\nopenai\n",
        "--base-url URL",
        "--api-key-env VAR",
        "--stream",
        "--rpm N",
    ] {
        assert!(text.contains(needle), "{needle}: {text}");
    }
    assert!(text.contains("OPENAI_API_KEY   API key"), "{text}");
    assert!(text.contains("(set)"), "{text}");
    assert!(!text.contains(KEY));

    let out = ctx()
        .args(["engines", "--format", "json"])
        .output()
        .unwrap();
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    let openai = &json["engines"][2];
    assert_eq!(openai["name"], "openai");
    assert!(
        openai["flags"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["name"] == "--max-attempts N" && f["default"] == "4")
    );
    assert!(
        openai["environment"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "OPENAI_API_KEY" && e["set"] == false)
    );
}

#[test]
fn text_summary_flags_outputs_cut_at_max_tokens() {
    // Task `b` (and only b) is answered with finish_reason "length".
    let cut: Responder = Box::new(|seen: &Seen| {
        let finish = if seen.prompt().ends_with("Say b.") {
            "length"
        } else {
            "stop"
        };
        echo(finish)(seen)
    });
    let server = Server::start(vec![cut]);
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(dir.path());
    let out = ctx()
        .arg("run")
        .arg(&plan)
        .args([
            "--engine",
            "openai",
            "--base-url",
            &server.url,
            "--model",
            "m",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let table = String::from_utf8_lossy(&out.stdout);
    let row_b = table.lines().find(|l| l.starts_with("b ")).unwrap();
    assert!(row_b.contains("completed (cut at max_tokens)"), "{table}");
    let row_c = table.lines().find(|l| l.starts_with("c ")).unwrap();
    assert!(!row_c.contains("cut at max_tokens"), "{table}");
    assert!(
        table.contains("warning: output cut short by max_tokens (finish_reason \"length\"): b\n"),
        "{table}"
    );
}

/// A server whose every answer is a stream of content that never ends (a
/// chunk each millisecond, so `--idle-timeout` never fires).
fn endless_stream_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            std::thread::spawn(move || {
                stream.set_read_timeout(Some(Duration::from_secs(10))).ok();
                let mut buf = Vec::new();
                let mut chunk = [0u8; 8192];
                // The request: headers, then as much body as they announce.
                loop {
                    let Ok(n) = stream.read(&mut chunk) else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                        let len: usize = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse().ok())
                            .unwrap_or(0);
                        if buf.len() >= end + 4 + len {
                            break;
                        }
                    }
                }
                let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
                if stream.write_all(head.as_bytes()).is_err() {
                    return;
                }
                let event = format!(
                    "data: {}\n\n",
                    json!({"choices": [{"index": 0, "delta": {"content": "y".repeat(4000)}}]})
                );
                let chunk = format!("{:x}\r\n{event}\r\n", event.len());
                while stream.write_all(chunk.as_bytes()).is_ok() {
                    std::thread::sleep(Duration::from_millis(1));
                }
            });
        }
    });
    url
}

#[test]
fn an_endless_stream_fails_its_task_at_the_output_bound() {
    // Before the bound: memory grew until the allocator aborted ctx.
    let url = endless_stream_server();
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(dir.path());
    let started = std::time::Instant::now();
    let r = run(
        &plan,
        &[
            "--no-store",
            "--base-url",
            &url,
            "--model",
            "m",
            "--stream",
            "--max-output-bytes",
            "200000",
        ],
        &[],
    );
    assert!(started.elapsed() < Duration::from_secs(30));
    assert_eq!(r.code, 1, "{}", r.stderr);
    let a = task(&r.json, "a");
    assert_eq!(a["status"], "failed");
    assert!(
        a["error"].as_str().unwrap().ends_with(
            "output exceeded the limit of 200000 bytes (max_output_bytes); the stream was dropped"
        ),
        "{a}"
    );
    assert_eq!(a["metadata"]["attempts"][0]["outcome"], "output_too_large");
    assert_eq!(task(&r.json, "b")["status"], "skipped");
}

/// Costs from the server's usage: 11 prompt tokens of which 3 cached, 4
/// completion tokens. The 429 before a's answer returned no usage and may
/// have been billed, so it is charged its high end: a's prompt as sent
/// (ctx's exact count plus the chat framing allowance, 8 tokens for the
/// message and 8 for the reply) plus max_tokens. `--max-cost` reserves
/// each task's high end and holds.
#[test]
fn usage_is_priced_and_a_budget_holds() {
    let limited = http(
        "429 Too Many Requests",
        &[
            ("retry-after-ms", "5"),
            ("content-type", "application/json"),
        ],
        r#"{"error": {"message": "Rate limit reached"}}"#,
    );
    let server = Server::start(vec![fixed(limited), echo("stop")]);
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(dir.path());
    let r = run(
        &plan,
        &[
            "--base-url",
            &server.url,
            "--model",
            "m",
            "--max-tokens",
            "20",
            "--price",
            "m=1,2,0.5",
            "--price",
            "task-model=1,2,0.5",
            "--max-cost",
            "1",
            "--concurrency",
            "1",
            "--no-store",
        ],
        &[],
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    // 8 × $1 + 3 × $0.5 + 4 × $2 per million = $0.0000175.
    let one_call = 0.0000175;
    for id in ["b", "c"] {
        let cost = task(&r.json, id)["cost_usd"].as_f64().unwrap();
        assert!((cost - one_call).abs() < 1e-15, "{id}: {cost}");
    }
    let a = task(&r.json, "a");
    let prompt = a["metadata"]["prompt_tokens"].as_f64().unwrap();
    let cost = a["cost_usd"].as_f64().unwrap();
    let expected = one_call + (prompt + 16.0 + 20.0 * 2.0) / 1e6;
    assert!((cost - expected).abs() < 1e-15, "a: {cost} != {expected}");
    let spent = r.json["spent_usd"].as_f64().unwrap();
    assert!((spent - (cost + 2.0 * one_call)).abs() < 1e-15, "{spent}");
    assert_eq!(r.json["budget_usd"], 1.0);
    assert_eq!(r.json["needed_usd"], 0.0);
    // The server was asked for at most max_tokens: b's own 7, else 20.
    let seen = server.seen.lock().unwrap();
    for s in seen.iter() {
        let max = s.body["max_tokens"].as_u64();
        assert!(max == Some(20) || max == Some(7), "{:?}", s.body);
    }
}

#[test]
fn an_llm_summary_goes_through_the_server() {
    let server = Server::start(vec![echo("stop")]);
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.json");
    std::fs::write(
        &plan,
        r#"{"schema_version": 1,
  "config": {"dependency": {"max_output_length": 5, "summarize_strategy": "llm", "summary_model": "small-model", "summary_max_tokens": 40}},
  "sub_tasks": [
  {"id": "a", "description": "First", "tool_or_prompt": {"name": "inference", "params": {"prompt": "Say a."}}},
  {"id": "b", "description": "Second", "dependencies": ["a"], "tool_or_prompt": {"name": "inference", "params": {"prompt": "Say b."}}}
]}"#,
    )
    .unwrap();
    let r = run(
        &plan,
        &[
            "--base-url",
            &server.url,
            "--model",
            "cli-model",
            "--no-store",
        ],
        &[("OPENAI_API_KEY", KEY)],
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let seen = server.seen();
    assert_eq!(seen.len(), 3);
    let summary_call = &seen[1];
    assert_eq!(summary_call.body["model"], "small-model");
    assert_eq!(summary_call.body["max_tokens"], 40);
    let p = summary_call.prompt();
    assert!(p.contains("## The step\n\nFirst\n"), "{p}");
    assert!(
        p.contains("<untrusted-content>\nanswer to: Say a.\n</untrusted-content>"),
        "{p}"
    );
    // The echo answers the last line of the summary prompt, over 40
    // tokens: the summary is cut to summary_max_tokens.
    let a = task(&r.json, "a");
    let summary = a["summary"].as_str().unwrap();
    assert!(
        summary.starts_with("answer to: Write a summary of at most 40 tokens"),
        "{summary}"
    );
    assert!(summary.ends_with("..."), "{summary}");
    assert_eq!(a["metadata"]["summary"]["calls"][0]["cut"], true);
    assert_eq!(
        a["metadata"]["summary"]["calls"][0]["model"],
        "small-model-served"
    );
    assert_eq!(
        a["metadata"]["summary"]["calls"][0]["tokens_used"]["completion_tokens"],
        4
    );
    assert!(
        seen[2]
            .prompt()
            .contains(&format!("**Output:**\n{summary}\n"))
    );
    assert_eq!(
        r.json["summaries"],
        json!({"calls": 1, "cached": 0, "fallbacks": 0, "prompt_tokens": 11, "completion_tokens": 4, "time_ms": r.json["summaries"]["time_ms"]})
    );
}

/// No terminal escape from someone else's text reaches the terminal: a
/// server error carrying OSC 52 (a clipboard write), OSC 0 (the window
/// title) and CSI (clear screen), and a command's stderr carrying the
/// same, are shown escaped in the summary and on stderr (issue 20).
#[test]
fn escape_sequences_in_server_errors_and_stderr_are_escaped() {
    let hostile =
        "\u{1b}]52;c;cHduZWQ=\u{7} \u{1b}]0;owned\u{7} \u{1b}[2J \u{9b}31m end\u{202e}txt";
    let body =
        json!({"error": {"message": format!("bad model {hostile}"), "code": "model_not_found"}})
            .to_string();
    let server = Server::start(vec![fixed(http(
        "404 Not Found",
        &[("content-type", "application/json")],
        &body,
    ))]);
    let dir = tempfile::tempdir().unwrap();
    let plan = write_plan(dir.path());
    let assert_clean = |what: &str, text: &str| {
        for bad in ['\u{1b}', '\u{7}', '\u{9b}', '\u{202e}'] {
            assert!(!text.contains(bad), "{what} holds {bad:?}: {text}");
        }
    };
    let out = ctx()
        .arg("run")
        .arg(&plan)
        .args([
            "--engine",
            "openai",
            "--base-url",
            &server.url,
            "--model",
            "m",
        ])
        .args(["--no-store", "--max-attempts", "1"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(
        stdout.contains("bad model \\u{1b}]52;c;cHduZWQ=\\u{7}"),
        "{stdout}"
    );
    assert_clean("stdout", &stdout);
    assert_clean("stderr", &stderr);

    let script = "printf 'oops \\033]52;c;eA==\\007 \\033[2J\\n' >&2; exit 3";
    let out = ctx()
        .arg("run")
        .arg(&plan)
        .args(["--engine", "command", "--command", script, "--no-store"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
    assert!(stdout.contains("oops \\u{1b}]52;c;eA==\\u{7}"), "{stdout}");
    assert_clean("stdout", &stdout);
    assert_clean("stderr", &stderr);
}

/// Answers like [`echo`], with a usage that says nothing about the cache.
fn echo_without_cache_counts() -> Responder {
    Box::new(|seen: &Seen| {
        let body = json!({
            "model": seen.body["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 4, "total_tokens": 15}
        });
        http(
            "200 OK",
            &[("content-type", "application/json")],
            &body.to_string(),
        )
    })
}

/// [`write_plan`]'s plan run against `server` in a scratch directory
/// (its run store under `dir/.ctx/runs`), both models priced at $1 in, $2
/// out and $0.5 for a cache read per million tokens.
struct PricedRun {
    dir: tempfile::TempDir,
    plan: String,
    url: String,
    /// `ctx run --format json`'s object.
    json: Value,
    /// The run's id.
    id: String,
}

impl PricedRun {
    fn start(server: &Server) -> PricedRun {
        let dir = tempfile::tempdir().unwrap();
        let plan = write_plan(dir.path()).to_str().unwrap().to_string();
        let mut run = PricedRun {
            dir,
            plan,
            url: server.url.clone(),
            json: Value::Null,
            id: String::new(),
        };
        let (stdout, stderr) = run.ctx(&["--format", "json"], true);
        run.json = serde_json::from_str(&stdout).unwrap();
        run.id = ctx_test_support::run_id(&stderr);
        run
    }

    /// `ctx ARGS` in the scratch directory, after `ctx run PLAN` and its
    /// flags when `run`; its stdout and stderr.
    fn ctx(&self, args: &[&str], run: bool) -> (String, String) {
        let mut c = ctx();
        c.current_dir(self.dir.path());
        if run {
            c.args([
                "run",
                &self.plan,
                "--engine",
                "openai",
                "--base-url",
                &self.url,
            ])
            .args(["--model", "cli-model", "--price", "cli-model=1,2,0.5"])
            .args(["--price", "task-model=1,2,0.5"]);
        }
        let out = c.args(args).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{args:?}\n{stdout}\n{stderr}");
        (stdout, stderr)
    }
}

#[test]
fn cached_tokens_and_their_saving_are_shown_where_costs_are() {
    // Every answer: 11 prompt tokens, 3 of them read from the cache.
    let server = Server::start(vec![echo("stop")]);
    let run = PricedRun::start(&server);
    let json = &run.json;
    // 3 cache reads × ($1 − $0.5) per million = $0.0000015 a call.
    for id in ["a", "b", "c"] {
        let t = task(json, id);
        assert_eq!(t["cached_tokens"], 3, "{t}");
        // 3 of the 11 prompt tokens the server reported.
        assert_eq!(t["cached_fraction"], 3.0 / 11.0, "{t}");
        assert_eq!(t["cache_write_tokens"], Value::Null, "{t}");
        assert_eq!(t["cache_saving_usd"], 0.0000015, "{t}");
        // The stored record is unchanged: an unreported count left out.
        assert!(
            t["metadata"]["tokens_used"]
                .get("cache_write_tokens")
                .is_none()
        );
    }
    assert_eq!(json["cached_tokens"], 9);
    assert_eq!(json["cached_fraction"], 9.0 / 33.0);
    assert_eq!(json["cache_write_tokens"], Value::Null);
    assert_eq!(json["cache_saving_usd"], 0.0000045);
    let id = &run.id;

    let (show, _) = run.ctx(&["runs", "show", id, "--format", "json"], false);
    let show: Value = serde_json::from_str(&show).unwrap();
    assert_eq!(show["cached_tokens"], 9);
    assert_eq!(show["cached_fraction"], 9.0 / 33.0);
    assert_eq!(show["cache_saving_usd"], 0.0000045);
    assert_eq!(show["tasks"][0]["cached_tokens"], 3);
    assert_eq!(show["tasks"][0]["cache_write_tokens"], Value::Null);
    let (show, _) = run.ctx(&["runs", "show", id], false);
    assert!(
        show.contains("cache    9 of 33 prompt tokens read (27.3%), saved $0.000005\n"),
        "{show}"
    );
    let (one, _) = run.ctx(&["runs", "show", id, "--task", "b"], false);
    assert!(
        one.contains("cache    3 of 11 prompt tokens read (27.3%), saved $0.000002\n"),
        "{one}"
    );

    let (export, _) = run.ctx(&["runs", "export", id, "--format", "json"], false);
    let export: Value = serde_json::from_str(&export).unwrap();
    assert_eq!(export["cache_saving_usd"], 0.0000045);
    assert_eq!(export["cached_fraction"], 9.0 / 33.0);
    assert_eq!(task(&export, "b")["cached_tokens"], 3);
    let (csv, _) = run.ctx(&["runs", "export", id, "--format", "csv"], false);
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let row: Vec<&str> = lines.next().unwrap().split(',').collect();
    let cell = |name: &str| row[header.iter().position(|h| *h == name).unwrap()];
    assert_eq!(
        (
            cell("cached_tokens"),
            cell("cached_fraction"),
            cell("cache_write_tokens"),
            cell("cache_saving_usd")
        ),
        ("3", (3.0f64 / 11.0).to_string().as_str(), "", "0.0000015")
    );

    // The HTML report: the totals' line and each task's fact.
    run.ctx(&["runs", "report", id, "-o", "report.html"], false);
    let html = std::fs::read_to_string(run.dir.path().join("report.html")).unwrap();
    assert!(
        html.contains(
            "<dt>Prompt cache</dt><dd>9 of 33 prompt tokens read (27.3%), saved $0.000005</dd>"
        ),
        "{html}"
    );
    assert_eq!(
        html.matches("prompt cache 3 of 11 prompt tokens read (27.3%), saved $0.000002")
            .count(),
        3
    );

    let (text, _) = run.ctx(&[], true);
    // The summary's last line, after `spent`.
    assert!(
        text.ends_with("prompt cache: 9 of 33 prompt tokens read (27.3%), saved $0.000005\n"),
        "{text}"
    );
}

#[test]
fn a_server_that_reports_no_cache_counts_gives_null_and_not_reported() {
    let server = Server::start(vec![echo_without_cache_counts()]);
    let run = PricedRun::start(&server);
    let json = &run.json;
    for key in [
        "cached_tokens",
        "cached_fraction",
        "cache_write_tokens",
        "cache_saving_usd",
    ] {
        assert_eq!(json.get(key), Some(&Value::Null), "{key}");
        assert_eq!(task(json, "a").get(key), Some(&Value::Null), "{key}");
    }
    let id = &run.id;
    let (show, _) = run.ctx(&["runs", "show", id], false);
    assert!(show.contains("cache    not reported\n"), "{show}");
    let (export, _) = run.ctx(&["runs", "export", id, "--format", "json"], false);
    let export: Value = serde_json::from_str(&export).unwrap();
    assert_eq!(export.get("cached_fraction"), Some(&Value::Null));
    assert_eq!(task(&export, "b").get("cached_tokens"), Some(&Value::Null));
    let (csv, _) = run.ctx(&["runs", "export", id, "--format", "csv"], false);
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let row: Vec<&str> = lines.next().unwrap().split(',').collect();
    for name in [
        "cached_tokens",
        "cached_fraction",
        "cache_write_tokens",
        "cache_saving_usd",
    ] {
        assert_eq!(
            row[header.iter().position(|h| *h == name).unwrap()],
            "",
            "{name}"
        );
    }
    run.ctx(&["runs", "report", id, "-o", "report.html"], false);
    let html = std::fs::read_to_string(run.dir.path().join("report.html")).unwrap();
    assert!(
        html.contains("<dt>Prompt cache</dt><dd>not reported</dd>"),
        "{html}"
    );
    assert_eq!(html.matches("prompt cache not reported").count(), 3);
    assert!(!html.contains("0 tokens read"));
    let (text, _) = run.ctx(&[], true);
    assert!(text.ends_with("prompt cache: not reported\n"), "{text}");
}

/// The user message's text, whether sent as a string or as content parts
/// (joined), and the number of parts marked `cache_control`.
fn user_content(seen: &Seen) -> (String, usize, Option<Vec<Value>>) {
    let content = &seen.body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .unwrap()["content"];
    match content {
        Value::Array(parts) => (
            parts
                .iter()
                .map(|p| p["text"].as_str().unwrap_or_default())
                .collect(),
            parts
                .iter()
                .filter(|p| p.get("cache_control").is_some())
                .count(),
            Some(parts.clone()),
        ),
        other => (other.as_str().unwrap_or_default().to_string(), 0, None),
    }
}

/// Judge and summary calls carry Anthropic breakpoints on the wire under
/// `config.cache_breakpoints` (issue 24): a judge's after its rubric, a
/// focused summary's after its instructions and after the output; a model
/// not served by Anthropic gets plain strings; no request carries more
/// than 4 `cache_control` marks.
#[test]
fn judge_and_summary_calls_send_cache_control_to_anthropic_models() {
    const RUBRIC: &str = "Does the answer stay on topic?";
    let server = Server::start(vec![Box::new(|seen: &Seen| {
        let (text, _, _) = user_content(seen);
        let answer = if text.contains("strict reviewer") {
            r#"{"pass": true, "reason": "on topic"}"#.to_string()
        } else {
            "a long answer that needs a summary".to_string()
        };
        let body = json!({
            "model": seen.body["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 4, "total_tokens": 15}
        });
        http(
            "200 OK",
            &[("content-type", "application/json")],
            &body.to_string(),
        )
    })]);
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.json");
    std::fs::write(
        &plan,
        format!(
            r#"{{"schema_version": 1,
  "config": {{"cache_breakpoints": {{"after": ["shared"]}}, "checks": [{{"judge": "{RUBRIC}"}}],
    "dependency": {{"max_output_length": 5, "summarize_strategy": "llm", "summary_focus": "dependent"}}}},
  "sub_tasks": [
  {{"id": "a", "description": "First", "tool_or_prompt": {{"name": "inference", "params": {{"prompt": "Say a.", "model": "anthropic/claude-haiku-4-5"}}}}}},
  {{"id": "b", "description": "Second", "dependencies": ["a"], "tool_or_prompt": {{"name": "inference", "params": {{"prompt": "Say b.", "model": "anthropic/claude-haiku-4-5"}}}}}},
  {{"id": "c", "description": "Third", "dependencies": ["a"], "tool_or_prompt": {{"name": "inference", "params": {{"prompt": "Say c.", "model": "gpt-4o-mini"}}}}}}
]}}"#
        ),
    )
    .unwrap();
    let r = run(
        &plan,
        &["--base-url", &server.url, "--no-store"],
        &[("OPENAI_API_KEY", KEY)],
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let seen = server.seen();
    // a, its judge, two summaries of a (for b and c), b, c and their judges.
    assert_eq!(seen.len(), 8, "{seen:#?}");
    let (mut judges, mut summaries) = (0, 0);
    for s in &seen {
        let (text, marks, parts) = user_content(s);
        assert!(marks <= 4, "{parts:?}");
        let anthropic = s.body["model"] == "anthropic/claude-haiku-4-5";
        if text.contains("strict reviewer") {
            judges += 1;
            if !anthropic {
                assert_eq!(marks, 0, "{text}");
                continue;
            }
            let parts = parts.expect("content parts");
            assert_eq!(marks, 1, "{parts:?}");
            let first = parts[0]["text"].as_str().unwrap();
            assert!(parts[0].get("cache_control").is_some());
            assert!(
                first.contains(RUBRIC) && first.ends_with("<untrusted-content>\n"),
                "{first}"
            );
            assert!(parts[1].get("cache_control").is_none());
        } else if text.contains("You are summarising") {
            summaries += 1;
            let parts = parts.expect("content parts");
            assert_eq!(marks, 2, "{parts:?}");
            assert!(
                parts[0]["text"]
                    .as_str()
                    .unwrap()
                    .ends_with("## The step\n\n")
            );
            assert!(
                parts[1]["text"]
                    .as_str()
                    .unwrap()
                    .contains("a long answer that needs a summary\n</untrusted-content>"),
                "{parts:?}"
            );
            // The dependent's prompt follows the second break.
            let rest = parts[2]["text"].as_str().unwrap();
            assert!(
                rest.starts_with("Say b.") || rest.starts_with("Say c."),
                "{rest}"
            );
        }
    }
    assert_eq!((judges, summaries), (3, 2));
}

/// A server that quotes the request back in its errors: a 400 whose
/// message echoes the prompt (as some servers and proxies do), and a
/// rejection of `response_format` that does the same. A secret variable's
/// value is in the prompt the server got, and in no file, summary, JSON,
/// export, report or line printed: the error is stored and shown masked,
/// the notice of the rejected structured output printed masked.
#[test]
fn a_server_error_that_echoes_the_prompt_leaks_no_secret() {
    const SECRET: &str = "sk-live-51a7c3e9";
    let quoting: Responder = Box::new(|seen: &Seen| {
        let what = if seen.body.get("response_format").is_some() {
            "response_format json_schema is not supported for"
        } else {
            "invalid request"
        };
        let body = json!({"error": {"message": format!("{what}: {}", seen.prompt())}});
        http(
            "400 Bad Request",
            &[("content-type", "application/json")],
            &body.to_string(),
        )
    });
    let server = Server::start(vec![quoting]);
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.yaml");
    std::fs::write(
        &plan,
        "schema_version: 1\nvariables:\n  - name: TOKEN\n    class: trusted\n    secret: true\n\
         sub_tasks:\n  - id: a\n    description: A\n    checks:\n      - json_schema: {type: object}\n    \
         tool_or_prompt:\n      name: inference\n      params:\n        prompt: \"Key {{TOKEN}}.\"\n",
    )
    .unwrap();
    let var = format!("TOKEN={SECRET}");
    let mut printed = String::new();
    for format in ["text", "json"] {
        let o = ctx()
            .arg("run")
            .arg(&plan)
            .args([
                "--engine",
                "openai",
                "--base-url",
                &server.url,
                "--model",
                "m",
            ])
            .args(["--max-attempts", "2", "--var", &var, "--format", format])
            .args(["--root"])
            .arg(dir.path().join("runs"))
            .arg("--out")
            .arg(dir.path().join("out"))
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1));
        printed.push_str(&String::from_utf8_lossy(&o.stdout));
        printed.push_str(&String::from_utf8_lossy(&o.stderr));
    }
    // The server was sent the secret, and quoted it back.
    assert!(server.seen().iter().all(|s| s.prompt().contains(SECRET)));
    assert!(
        printed.contains("invalid request: Key [secret TOKEN]."),
        "{printed}"
    );
    assert!(
        printed.contains("response_format json_schema is not supported for: Key [secret TOKEN].); structured output is off"),
        "{printed}"
    );
    assert!(!printed.contains(SECRET), "{printed}");
    assert_eq!(
        ctx_test_support::files_containing(dir.path(), SECRET),
        Vec::<PathBuf>::new()
    );
}
