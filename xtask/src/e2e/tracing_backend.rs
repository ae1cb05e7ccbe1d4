//! The real tracing backend of `cargo xtask e2e` (issue 25): MLflow's
//! tracking server (PyPI `mlflow`, pinned in
//! `scripts/e2e/requirements-mlflow.txt`, installed into
//! `target/e2e/venv-mlflow` like LiteLLM's virtualenv and reused while the
//! pin is unchanged). It takes OTLP/HTTP protobuf at `/v1/traces` into a
//! SQLite store of its own, offline, and maps the GenAI conventions onto
//! its own trace model, so what it shows is what a team running MLflow
//! would see of a ctx run.
//!
//! Three traces are checked through MLflow's own client API
//! (`scripts/e2e/check_trace.py`, run with the virtualenv's Python), each
//! found by the trace id `ctx runs show` gives:
//!
//! 1. the `--stream` Tetris run of the LiteLLM e2e, traced live: one
//!    `invoke_workflow` root, 9 task spans under it, a `chat` span per
//!    engine call with usage, the response id and the time to first chunk;
//! 2. the plain Tetris run, which ran untraced, sent after the fact with
//!    `ctx runs export RUN --format otlp --to URL`: the same shape, marked
//!    `ctx.exported`;
//! 3. a shared-store run (PostgreSQL, `scripts/postgres.sh`) whose four
//!    tasks two `ctx worker` processes took: one trace, one root, a claim
//!    span per task from both workers.
//!
//! MLflow starts while LiteLLM does, so on a warm virtualenv the backend
//! adds the three checks' time (a few seconds each, mostly importing
//! `mlflow`) and the shared run's (about 5 s) to the e2e step.

use super::{PipStep, Server, Venv, checked, free_port, tail};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const MLFLOW_REQUIREMENTS: &str = "scripts/e2e/requirements-mlflow.txt";
const CHECK_TRACE: &str = "scripts/e2e/check_trace.py";
/// MLflow's default experiment, which every fresh store has: where the
/// OTLP endpoint files the spans (its `x-mlflow-experiment-id` header).
const EXPERIMENT: &str = "0";

/// The MLflow tracking server, stopped when dropped.
pub(super) struct Backend {
    server: Server,
    venv: Venv,
    port: u16,
    dir: PathBuf,
    /// How long [`Backend::wait_ready`] waited: what the backend's start
    /// added to the e2e beyond LiteLLM's, which it overlaps.
    waited: Duration,
}

impl Backend {
    /// Installs MLflow on first use and starts its server on a fresh
    /// SQLite store under `work/mlflow`; [`Backend::wait_ready`] waits for it.
    pub(super) fn launch(root: &Path, work: &Path) -> Result<Backend, String> {
        let venv_dir = work.join("venv-mlflow");
        let log = work.join("venv-mlflow.log");
        if !venv_dir.join(".ctx-stamp").exists() {
            eprintln!(
                "==> e2e: installing MLflow into {} (first run: a few minutes; pip's log: {})",
                venv_dir.display(),
                log.display()
            );
        }
        let venv = Venv::ensure(
            &venv_dir,
            &[PipStep::requirements(&root.join(MLFLOW_REQUIREMENTS))],
            &log,
        )?;
        let dir = super::fresh_dir(&work.join("mlflow"))?;
        let port = free_port()?;
        let mut cmd = Command::new(venv.bin("mlflow"));
        cmd.arg("server")
            .arg("--backend-store-uri")
            .arg(format!("sqlite:///{}", dir.join("mlflow.db").display()))
            .arg("--default-artifact-root")
            .arg(dir.join("artifacts"))
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--workers", "1"])
            .current_dir(&dir)
            // No background job runner (its consumers are half a dozen
            // Python processes, for evaluation jobs the e2e never starts).
            .env("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "false")
            // Nothing to the network: no telemetry.
            .env("MLFLOW_DISABLE_TELEMETRY", "true")
            .env("DO_NOT_TRACK", "true")
            .env("NO_PROXY", "127.0.0.1,localhost");
        let server = Server::start("MLflow tracking server", cmd, &dir.join("server.log"), 900)?;
        Ok(Backend {
            server,
            venv,
            port,
            dir,
            waited: Duration::ZERO,
        })
    }

    /// Waits for the server's health endpoint.
    pub(super) fn wait_ready(&mut self) -> Result<(), String> {
        let started = Instant::now();
        self.server
            .wait_ready(self.port, "/health", Duration::from_secs(180))?;
        self.waited = started.elapsed();
        Ok(())
    }

    /// The base endpoint ctx is given (`--otlp`, `--to`).
    pub(super) fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Sends `cmd`'s trace to the backend, through the standard
    /// environment a user would set.
    pub(super) fn trace(&self, cmd: &mut Command) {
        cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", self.url())
            .env(
                "OTEL_EXPORTER_OTLP_HEADERS",
                format!("x-mlflow-experiment-id={EXPERIMENT}"),
            )
            .env("OTEL_SERVICE_NAME", "ctx-e2e")
            // A loaded CI machine: MLflow may take longer than the 5 s
            // default to file a batch, and a lost span fails the check.
            .env("OTEL_EXPORTER_OTLP_TIMEOUT", "30000")
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .env_remove("OTEL_EXPORTER_OTLP_PROTOCOL")
            .env_remove("OTEL_SDK_DISABLED");
    }

    /// Checks trace `trace_id` as MLflow holds it; `args` are
    /// check_trace.py's expectations. Its one-line summary on success.
    fn check(&self, what: &str, trace_id: &str, args: &[&str]) -> Result<String, String> {
        let mut cmd = Command::new(self.venv.python());
        cmd.arg(super::super::root().join(CHECK_TRACE))
            .args(["--tracking-uri", &self.url()])
            .args(["--trace-id", trace_id])
            .args(args)
            .env("NO_PROXY", "127.0.0.1,localhost");
        checked(&mut cmd, what)
            .map(|s| s.trim().to_string())
            .map_err(|e| format!("{e}\n{}", tail(&self.dir.join("server.log"), 20)))
    }

    pub(super) fn stop(&mut self) {
        self.server.stop();
    }
}

/// The three checks of the module comment, given the stderr of the two
/// Tetris runs recorded in `run_dir`'s store: the streamed one ran traced
/// (under [`Backend::trace`]), the plain one untraced.
pub(super) fn check_runs(
    backend: &Backend,
    ctx: &Path,
    run_dir: &Path,
    streamed_stderr: &Path,
    plain_stderr: &Path,
) -> Result<String, String> {
    let started = Instant::now();
    let mut lines = Vec::new();
    let tetris = super::super::root().join(super::TETRIS_PLAN);
    let tetris = tetris.to_string_lossy();

    // Each Tetris trace: the root, 9 tasks, their chat spans with usage.
    let check_tetris = |what: &str, trace: &str, extra: &[&str]| {
        let common = [
            "--plan",
            &tetris,
            "--tasks",
            "9",
            "--provider",
            "openai",
            "--usage",
        ];
        backend.check(what, trace, &[&common[..], extra].concat())
    };

    // 1. Live.
    let trace = trace_id(ctx, run_dir, &run_id(streamed_stderr)?, None)?;
    lines.push(check_tetris(
        "MLflow: the live --stream Tetris trace",
        &trace,
        &["--response-id", "--first-chunk"],
    )?);
    if let Some(png) = std::env::var_os(SCREENSHOT_VAR) {
        lines.push(screenshot(backend, &trace, Path::new(&png))?);
    }

    // 2. After the fact.
    let plain_id = run_id(plain_stderr)?;
    let trace = trace_id(ctx, run_dir, &plain_id, None)?;
    let mut export = Command::new(ctx);
    export
        .args(["runs", "export", &plain_id, "--format", "otlp", "--to"])
        .arg(backend.url())
        .current_dir(run_dir);
    backend.trace(&mut export);
    export.env_remove("OTEL_EXPORTER_OTLP_ENDPOINT");
    run_ok(&mut export, "ctx runs export --format otlp --to MLflow")?;
    lines.push(check_tetris(
        "MLflow: the exported plain Tetris trace",
        &trace,
        &["--exported"],
    )?);

    // 3. Two workers of a shared store.
    match shared_run(backend, ctx, run_dir)? {
        Some(line) => lines.push(line),
        None => lines
            .push("MLflow: no PostgreSQL server; the shared-store trace was not checked".into()),
    }
    lines.push(format!(
        "MLflow added {:.0} s: {:.0} s waiting for its start after LiteLLM's, {:.0} s of exports, checks and the shared run",
        (backend.waited + started.elapsed()).as_secs_f64(),
        backend.waited.as_secs_f64(),
        started.elapsed().as_secs_f64()
    ));
    Ok(lines.join("\n"))
}

/// Set to a PNG path, the e2e saves MLflow's view of the live Tetris
/// trace there (scripts/tracing-screenshot.sh: docs/tracing-mlflow.png).
const SCREENSHOT_VAR: &str = "CTX_E2E_TRACE_SCREENSHOT";

/// Headless Chromium (`CTX_CHROMIUM`, else the first on PATH, as the
/// browser tests find it) loads MLflow's page of trace `trace_id` and
/// saves it as `png`. The page is a single-page app that fetches the
/// trace after loading: the virtual-time budget lets it render first.
fn screenshot(backend: &Backend, trace_id: &str, png: &Path) -> Result<String, String> {
    let browser = std::env::var_os("CTX_CHROMIUM")
        .map(PathBuf::from)
        .or_else(|| {
            ["chromium", "chromium-browser", "google-chrome"]
                .iter()
                .find(|b| {
                    Command::new(b)
                        .arg("--version")
                        .stdout(Stdio::null())
                        .stderr(Stdio::null())
                        .status()
                        .is_ok_and(|s| s.success())
                })
                .map(PathBuf::from)
        })
        .ok_or(
            "no Chromium for the screenshot: run scripts/install-chromium.sh or set CTX_CHROMIUM",
        )?;
    let png = std::path::absolute(png).map_err(|e| format!("{}: {e}", png.display()))?;
    let page = format!(
        "{}/#/experiments/{EXPERIMENT}/traces?selectedEvaluationId=tr-{trace_id}",
        backend.url()
    );
    let profile = backend.dir.join("chromium-profile");
    let mut cmd = Command::new(&browser);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-extensions",
        "--hide-scrollbars",
        "--window-size=1600,1000",
        "--virtual-time-budget=30000",
    ])
    .arg(format!("--user-data-dir={}", profile.display()))
    .arg(format!("--screenshot={}", png.display()))
    .arg(&page);
    run_ok(&mut cmd, "the MLflow screenshot")?;
    Ok(format!(
        "MLflow's page of the live trace saved as {}",
        png.display()
    ))
}

/// Four independent tasks of 0.5 s each for two workers, one at a time
/// each: both get work.
const SHARED_PLAN: &str = r#"{"schema_version": 1, "goal": "Shared e2e", "sub_tasks": [
  {"id": "a", "description": "A", "tool_or_prompt": {"name": "inference", "params": {"prompt": "Say a."}}},
  {"id": "b", "description": "B", "tool_or_prompt": {"name": "inference", "params": {"prompt": "Say b."}}},
  {"id": "c", "description": "C", "tool_or_prompt": {"name": "inference", "params": {"prompt": "Say c."}}},
  {"id": "d", "description": "D", "tool_or_prompt": {"name": "inference", "params": {"prompt": "Say d."}}}
]}"#;

/// A run registered in a shared PostgreSQL store and worked by two `ctx
/// worker` processes (the command engine), all three traced: the backend
/// must hold one trace with both workers' claims. `None` when no server
/// could be started outside CI (in CI that is an error, as for the tests).
fn shared_run(backend: &Backend, ctx: &Path, run_dir: &Path) -> Result<Option<String>, String> {
    let root = super::super::root();
    let was_running = postgres_running(&root);
    let Some(url) = super::super::postgres(&root)? else {
        return Ok(None);
    };
    let result = shared_run_on(backend, ctx, run_dir, &url);
    if !was_running {
        super::super::stop_postgres(&root);
    }
    result.map(Some)
}

/// The ctx processes of the shared-store run: what each is started with.
struct SharedRun<'a> {
    backend: &'a Backend,
    ctx: &'a Path,
    /// The run's scratch folder: the plan, each process's stderr.
    dir: &'a Path,
    /// The PostgreSQL store.
    url: &'a str,
}

/// [`shared_run`] on the store at `url`: registers the run, lets two
/// workers take its tasks, and checks the one trace they make.
fn shared_run_on(
    backend: &Backend,
    ctx: &Path,
    run_dir: &Path,
    url: &str,
) -> Result<String, String> {
    let dir = super::fresh_dir(&run_dir.join("shared"))?;
    let plan = dir.join("plan.json");
    fs::write(&plan, SHARED_PLAN).map_err(|e| format!("{}: {e}", plan.display()))?;
    let shared = SharedRun {
        backend,
        ctx,
        dir: &dir,
        url,
    };
    let register_err = dir.join("register.stderr");
    let mut follower = shared.register(&plan, &register_err)?;
    let workers = shared.spawn_workers()?;
    for (mut child, err) in workers {
        let status = wait_within(&mut child, Duration::from_secs(120))?;
        if !status.success() {
            let _ = follower.kill();
            return Err(format!(
                "ctx worker exited with {status}\n{}",
                tail(&err, 20)
            ));
        }
    }
    let status = wait_within(&mut follower, Duration::from_secs(120))?;
    if !status.success() {
        return Err(format!(
            "ctx run --store exited with {status}\n{}",
            tail(&register_err, 20)
        ));
    }
    let id = registered_id(&register_err)?;
    let trace = trace_id(ctx, &dir, &id, Some(url))?;
    backend.check(
        "MLflow: the shared-store trace of two workers",
        &trace,
        &[
            "--plan",
            &plan.to_string_lossy(),
            "--tasks",
            "4",
            "--provider",
            "command",
            "--workers",
            "2",
        ],
    )
}

impl SharedRun<'_> {
    /// `ctx run PLAN --store URL --no-local`, traced, its stderr in
    /// `stderr`: it registers the run and follows it while the workers
    /// work it.
    fn register(&self, plan: &Path, stderr: &Path) -> Result<std::process::Child, String> {
        let mut register = Command::new(self.ctx);
        register
            .arg("run")
            .arg(plan)
            .args(["--store", self.url, "--no-local"])
            .current_dir(self.dir)
            .env_remove("CTX_STORE")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(fs::File::create(stderr).map_err(|e| e.to_string())?);
        self.backend.trace(&mut register);
        register
            .spawn()
            .map_err(|e| format!("ctx run --store: {e}"))
    }

    /// Two traced `ctx worker`s of the command engine, one task at a time
    /// each: each process with the file of its stderr.
    fn spawn_workers(&self) -> Result<Vec<(std::process::Child, PathBuf)>, String> {
        (0..2)
            .map(|n| {
                let mut cmd = Command::new(self.ctx);
                cmd.args([
                    "worker",
                    "--store",
                    self.url,
                    "--until-idle",
                    "--wait",
                    "60",
                ])
                .args(["--concurrency", "1", "--engine", "command"])
                .args(["--command", "sleep 0.5; echo ok"])
                .current_dir(self.dir)
                .env_remove("CTX_STORE")
                .stdin(Stdio::null());
                self.backend.trace(&mut cmd);
                let err = self.dir.join(format!("worker-{n}.stderr"));
                (cmd, err)
            })
            .map(|(mut cmd, err)| {
                let file = fs::File::create(&err).map_err(|e| e.to_string())?;
                cmd.stdout(Stdio::null()).stderr(file);
                cmd.spawn()
                    .map(|child| (child, err))
                    .map_err(|e| format!("ctx worker: {e}"))
            })
            .collect()
    }
}

/// The run id in the `run ID registered` line of `ctx run --store`'s
/// stderr.
fn registered_id(stderr: &Path) -> Result<String, String> {
    fs::read_to_string(stderr)
        .ok()
        .and_then(|text| {
            text.lines().find_map(|l| {
                l.strip_prefix("run ")
                    .and_then(|r| r.split_once(" registered"))
                    .map(|(id, _)| id.to_string())
            })
        })
        .ok_or_else(|| format!("no `run ID registered` line\n{}", tail(stderr, 20)))
}

/// Whether the checkout's test PostgreSQL server already answers (then
/// the e2e leaves it running).
fn postgres_running(root: &Path) -> bool {
    let out = Command::new("sh")
        .arg(root.join("scripts/postgres.sh"))
        .arg("url")
        .stderr(Stdio::null())
        .output();
    let Ok(out) = out else { return false };
    let url = String::from_utf8_lossy(&out.stdout);
    let port = url
        .trim()
        .rsplit_once(':')
        .and_then(|(_, rest)| rest.split('/').next())
        .and_then(|p| p.parse::<u16>().ok());
    port.is_some_and(|p| {
        std::net::TcpStream::connect_timeout(
            &std::net::SocketAddr::from(([127, 0, 0, 1], p)),
            Duration::from_secs(1),
        )
        .is_ok()
    })
}

fn wait_within(
    child: &mut std::process::Child,
    limit: Duration,
) -> Result<std::process::ExitStatus, String> {
    let deadline = Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Ok(status),
            Ok(None) if Instant::now() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "a ctx process did not finish within {} s",
                    limit.as_secs()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(100)),
            Err(e) => return Err(e.to_string()),
        }
    }
}

fn run_ok(cmd: &mut Command, what: &str) -> Result<String, String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{what}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{what}: exited with {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// The run id in a `ctx run`'s stderr (`run ID …`).
fn run_id(stderr: &Path) -> Result<String, String> {
    let text = fs::read_to_string(stderr).map_err(|e| format!("{}: {e}", stderr.display()))?;
    text.lines()
        .find_map(|l| l.strip_prefix("run "))
        .and_then(|rest| rest.split_whitespace().next())
        .map(str::to_string)
        .ok_or_else(|| format!("no run id in {}", stderr.display()))
}

/// The run's trace id, as `ctx runs show --format json` gives it.
fn trace_id(ctx: &Path, dir: &Path, run: &str, store: Option<&str>) -> Result<String, String> {
    let mut cmd = Command::new(ctx);
    cmd.args(["runs", "show", run, "--format", "json"])
        .current_dir(dir)
        .env_remove("CTX_STORE");
    if let Some(url) = store {
        cmd.args(["--store", url]);
    }
    let json = run_ok(&mut cmd, "ctx runs show")?;
    let value: serde_json::Value =
        serde_json::from_str(&json).map_err(|e| format!("ctx runs show --format json: {e}"))?;
    value["trace_id"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("ctx runs show gave no trace_id: {json}"))
}
