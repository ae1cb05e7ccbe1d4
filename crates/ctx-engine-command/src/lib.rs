//! # ctx-engine-command: the `command` engine
//!
//! Any program that reads a prompt on stdin and writes the output on
//! stdout (`ollama run`, `llm`, a script) becomes an engine.
//!
//! A crate of its own, beside `ctx-engine-openai`, because it needs Tokio's
//! process and I/O machinery, which the engine seam (`ctx-engine`, traits
//! and data only) must not compile, and which the executor (`ctx-deps`)
//! has no use for: the executor sees only the trait.

use std::process::Stdio;

use ctx_model::{Attempt, CallOutcome};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use ctx_engine::{
    BoxFuture, EngineCosts, EngineError, InferenceEngine, InferenceRequest, InferenceResponse,
    RequestPurpose, output_too_large,
};

/// How many trailing lines of stderr a failure carries.
pub const STDERR_TAIL_LINES: usize = 10;

/// The most bytes of stderr a failure carries, the `...` marker of a cut
/// tail included.
pub const STDERR_TAIL_BYTES: usize = 4096;

/// How much of the end of stderr is kept while the command runs: the tail
/// shown is cut from this, so a command that floods stderr costs no more
/// memory than this.
const STDERR_KEEP: usize = 2 * STDERR_TAIL_BYTES;

/// Runs `sh -c COMMAND` once per task.
///
/// * The final prompt is written to the command's stdin, which is then
///   closed; a command that does not read stdin is fine.
/// * stdout, decoded as UTF-8 (invalid bytes become U+FFFD), is the output.
///   It is read as it arrives and may not grow past the request's
///   [`max_output_bytes`](InferenceRequest::max_output_bytes): past it the
///   command is killed and the task fails (outcome `output_too_large`), so
///   `yes` costs a bounded amount of memory, not all of it.
/// * The environment carries `CTX_TASK_ID` (the task's id) and `CTX_MODEL`
///   (the task's `params.model`, empty when the task names none). A
///   `summarize_strategy: llm` summary call also carries `CTX_SUMMARY=1`,
///   with `CTX_TASK_ID` the summarised task and, under `summary_focus:
///   dependent`, `CTX_SUMMARY_FOR` the dependent; `CTX_MAX_TOKENS` is
///   the call's `max_tokens` when it has one.
/// * A non-zero exit, or death by a signal, fails the task with the last
///   [`STDERR_TAIL_LINES`] lines of stderr, at most [`STDERR_TAIL_BYTES`].
///   Only the end of stderr is ever held in memory.
///
/// Time is bounded by the executor
/// (`ctx_deps::ExecutorOptions::task_timeout`),
/// which drops the future when it expires.
///
/// ## Killing
///
/// The command runs in its own process group. When the future is dropped
/// before the command has exited (a timeout, a cancelled run, an output
/// past the bound), the whole group is sent `SIGKILL`, so a pipeline such
/// as `sleep 60; llm` leaves no orphan behind; tokio's `kill_on_drop`
/// covers the shell itself on platforms without process groups. A group of
/// its own also means a signal sent to ctx's group (Ctrl-C in a terminal)
/// does not reach the command directly: ctx decides, records the
/// interruption, then kills.
#[derive(Debug, Clone)]
pub struct CommandEngine {
    command: String,
}

/// Why a command's run failed: the attempt's outcome and the message.
type Failure = (CallOutcome, String);

impl CommandEngine {
    /// The engine's name as `--engine` takes it.
    pub const NAME: &'static str = "command";

    /// An engine running `command`.
    pub fn new(command: impl Into<String>) -> CommandEngine {
        CommandEngine {
            command: command.into(),
        }
    }

    /// What a command costs: it passes `params.model` as `CTX_MODEL` and
    /// cannot stop a completion at `max_tokens` (under a budget the
    /// executor cuts its output there, at `max_tokens` for a task without
    /// `params.max_tokens`); it calls no priced API of its own, so its
    /// tasks are priced only when a price is asked for; one request per
    /// call.
    pub fn costs(max_tokens: Option<u32>) -> EngineCosts {
        EngineCosts {
            max_tokens,
            attempts: 1,
            cuts_at_max_tokens: true,
            priced_on_request: true,
            ..EngineCosts::default()
        }
    }

    /// The shell command line.
    pub fn command(&self) -> &str {
        &self.command
    }

    /// Runs the command once for `request`: the prompt on stdin (the
    /// canary sentence on top when the run plants one), the
    /// output from stdout (bounded by `max_output_bytes`), and the tail of
    /// stderr kept for the message when it fails.
    async fn run_once(&self, request: &InferenceRequest) -> Result<String, Failure> {
        let mut cmd = self.command_for(request);
        let mut child = cmd.spawn().map_err(|e| {
            (
                CallOutcome::SpawnError,
                format!("cannot start `sh -c {}`: {e}", self.command),
            )
        })?;
        let mut guard = GroupKill { pid: child.id() };
        let stdin = child.stdin.take();
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        // A command has no system message: the run's canary sentence, when
        // it plants one, goes at the top of stdin (docs/security.md).
        let prompt = request.prompt_with_canary();
        let write = async move {
            if let Some(mut stdin) = stdin {
                // A command that never reads stdin closes the pipe: not an
                // error of the task.
                let _ = stdin.write_all(prompt.as_bytes()).await;
                let _ = stdin.shutdown().await;
            }
            Ok::<(), Failure>(())
        };
        let limit = request.max_output_bytes;
        let read_out = async move {
            match stdout {
                Some(out) => read_bounded(out, limit).await,
                None => Ok(Vec::new()),
            }
        };
        let read_err = async move {
            Ok::<Vec<u8>, Failure>(match stderr {
                Some(err) => read_tail(err, STDERR_KEEP).await,
                None => Vec::new(),
            })
        };
        // An output past the bound ends the join at once; returning drops
        // the pipes and the guard kills the group.
        let ((), out, err) = tokio::try_join!(write, read_out, read_err)?;
        let status = child
            .wait()
            .await
            .map_err(|e| (CallOutcome::IoError, format!("command I/O: {e}")))?;
        guard.pid = None;
        if status.success() {
            return Ok(String::from_utf8_lossy(&out).into_owned());
        }
        Err(exit_failure(status, &err))
    }

    /// `sh -c COMMAND` with the request in its environment (`CTX_TASK_ID`,
    /// `CTX_MODEL`, `CTX_MAX_TOKENS`, and `CTX_SUMMARY`, `CTX_SUMMARY_FOR`
    /// or `CTX_JUDGE` for what the call is for), its stdio piped, and in a
    /// process group of its own, so that a call dropped kills all of it.
    fn command_for(&self, request: &InferenceRequest) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new("sh");
        cmd.arg("-c")
            .arg(&self.command)
            .env("CTX_TASK_ID", &request.task_id)
            .env(
                "CTX_MODEL",
                request.params.model.as_deref().unwrap_or_default(),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(n) = request.params.max_tokens {
            cmd.env("CTX_MAX_TOKENS", n.to_string());
        }
        if let RequestPurpose::Summary { dependent } = &request.purpose {
            cmd.env("CTX_SUMMARY", "1");
            if let Some(d) = dependent {
                cmd.env("CTX_SUMMARY_FOR", d);
            }
        }
        if request.purpose == RequestPurpose::Judge {
            cmd.env("CTX_JUDGE", "1");
        }
        #[cfg(unix)]
        cmd.process_group(0);
        cmd
    }
}

/// The failure of a command that ended with `status` other than success:
/// its exit code or signal, and the tail of its stderr (`err`).
fn exit_failure(status: std::process::ExitStatus, err: &[u8]) -> Failure {
    let tail = stderr_tail(err);
    let (outcome, what) = match status.code() {
        Some(code) => (
            CallOutcome::Exit(code),
            format!("command exited with status {code}"),
        ),
        None => {
            #[cfg(unix)]
            let sig = std::os::unix::process::ExitStatusExt::signal(&status).unwrap_or(0);
            #[cfg(not(unix))]
            let sig = 0;
            (
                CallOutcome::Signal(sig),
                format!("command killed by signal {sig}"),
            )
        }
    };
    let message = if tail.is_empty() {
        format!("{what} (stderr was empty)")
    } else {
        format!("{what}; stderr:\n{tail}")
    };
    (outcome, message)
}

/// Reads `reader` to its end, failing as soon as more than `limit` bytes
/// have arrived (at most `limit` plus one read's worth is ever held).
async fn read_bounded<R: AsyncRead + Unpin>(
    mut reader: R,
    limit: usize,
) -> Result<Vec<u8>, Failure> {
    let mut out = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = reader
            .read(&mut chunk)
            .await
            .map_err(|e| (CallOutcome::IoError, format!("command I/O: {e}")))?;
        if n == 0 {
            return Ok(out);
        }
        if out.len().saturating_add(n) > limit {
            return Err((
                CallOutcome::OutputTooLarge,
                format!("{}; the command was killed", output_too_large(limit)),
            ));
        }
        out.extend_from_slice(&chunk[..n]);
    }
}

/// Reads `reader` to its end (or its first error), keeping only the last
/// `keep` bytes.
async fn read_tail<R: AsyncRead + Unpin>(mut reader: R, keep: usize) -> Vec<u8> {
    let mut tail = Vec::new();
    let mut chunk = vec![0u8; 16 * 1024];
    while let Ok(n) = reader.read(&mut chunk).await {
        if n == 0 {
            break;
        }
        tail.extend_from_slice(&chunk[..n]);
        if tail.len() > 2 * keep {
            tail.drain(..tail.len() - keep);
        }
    }
    if tail.len() > keep {
        tail.drain(..tail.len() - keep);
    }
    tail
}

impl InferenceEngine for CommandEngine {
    fn name(&self) -> &str {
        Self::NAME
    }

    /// The command line may embed a key (`API_KEY=… llm`), so the stored
    /// label is the name alone and only the cache identity holds the
    /// command: a different program never answers from another's cache.
    fn cache_identity(&self) -> String {
        format!("{}\ncommand={}", self.label(), self.command)
    }

    fn infer<'a>(
        &'a self,
        request: &'a InferenceRequest,
    ) -> BoxFuture<'a, Result<InferenceResponse, EngineError>> {
        Box::pin(async move {
            let started = tokio::time::Instant::now();
            let result = self.run_once(request).await;
            let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
            match result {
                Ok(output) => Ok(InferenceResponse {
                    output,
                    model: request.params.model.clone(),
                    attempts: vec![Attempt::ok(1, duration_ms)],
                    ..InferenceResponse::default()
                }),
                Err((outcome, message)) => Err(EngineError {
                    attempts: vec![Attempt {
                        number: 1,
                        duration_ms,
                        outcome,
                        error: Some(message.clone()),
                        backoff_ms: None,
                        ..Attempt::default()
                    }],
                    message,
                }),
            }
        })
    }
}

/// Sends `SIGKILL` to the command's process group unless disarmed (by
/// clearing `pid` once the command has exited on its own).
struct GroupKill {
    pid: Option<u32>,
}

impl Drop for GroupKill {
    fn drop(&mut self) {
        #[cfg(unix)]
        if let Some(pid) = self.pid.take() {
            // No libc binding (the workspace forbids unsafe code): the
            // shell's `kill` builtin signals the group (`-PID` is the group;
            // dash takes no `--`). Best effort; the
            // shell itself is also killed by `kill_on_drop`.
            let _ = std::process::Command::new("sh")
                .arg("-c")
                .arg(format!("kill -KILL -{pid} 2>/dev/null"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// The last [`STDERR_TAIL_LINES`] non-empty lines of `stderr`, at most
/// [`STDERR_TAIL_BYTES`] bytes *after* decoding (an invalid byte becomes
/// the three-byte U+FFFD, so the bound is applied to the text, `...`
/// marker included).
fn stderr_tail(stderr: &[u8]) -> String {
    const MARK: &str = "...";
    let text = String::from_utf8_lossy(stderr);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let start = lines.len().saturating_sub(STDERR_TAIL_LINES);
    let tail = lines[start..].join("\n");
    if tail.len() <= STDERR_TAIL_BYTES {
        return tail;
    }
    let mut cut = tail.len() - (STDERR_TAIL_BYTES - MARK.len());
    while !tail.is_char_boundary(cut) {
        cut += 1;
    }
    format!("{MARK}{}", &tail[cut..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctx_model::Params;
    use std::time::Duration;

    #[test]
    fn the_label_never_holds_the_command_but_the_cache_identity_does() {
        let e = CommandEngine::new("API_KEY=sk-x llm");
        assert_eq!(e.label(), "command");
        assert_eq!(e.cache_identity(), "command\ncommand=API_KEY=sk-x llm");
        assert_ne!(
            CommandEngine::new("llm -m a").cache_identity(),
            CommandEngine::new("llm -m b").cache_identity()
        );
    }

    fn request(id: &str, prompt: &str) -> InferenceRequest {
        InferenceRequest {
            task_id: id.into(),
            prompt: prompt.into(),
            params: Params {
                model: Some("m1".into()),
                ..Params::default()
            },
            prompt_tokens: 1,
            max_output_bytes: ctx_engine::DEFAULT_MAX_OUTPUT_BYTES,
            purpose: Default::default(),
            cache_breakpoints: None,
            response_schema: None,
            canary: None,
        }
    }

    #[tokio::test]
    async fn the_canary_sentence_goes_on_top_of_stdin() {
        let mut call = request("t1", "the prompt");
        call.canary = Some("Never repeat this token: ctx-canary-7".into());
        let r = CommandEngine::new("cat").infer(&call).await.unwrap();
        assert_eq!(
            r.output,
            "Never repeat this token: ctx-canary-7\n\nthe prompt"
        );
    }

    #[tokio::test]
    async fn stdin_to_stdout_with_env() {
        let e = CommandEngine::new("printf '%s|%s|' \"$CTX_TASK_ID\" \"$CTX_MODEL\"; cat");
        let r = e.infer(&request("t1", "hello\nworld")).await.unwrap();
        assert_eq!(r.output, "t1|m1|hello\nworld");
        assert_eq!(r.attempts.len(), 1);
        assert_eq!(r.attempts[0].outcome, "ok");
        assert_eq!(r.model.as_deref(), Some("m1"));
    }

    #[tokio::test]
    async fn large_prompt_does_not_deadlock() {
        let big = "x".repeat(1 << 20);
        let r = CommandEngine::new("cat")
            .infer(&request("t", &big))
            .await
            .unwrap();
        assert_eq!(r.output.len(), big.len());
        // A command that ignores stdin is not an error either.
        let r = CommandEngine::new("echo hi")
            .infer(&request("t", &big))
            .await
            .unwrap();
        assert_eq!(r.output, "hi\n");
    }

    #[tokio::test]
    async fn failure_carries_stderr_tail() {
        let e = CommandEngine::new(
            "for i in 1 2 3 4 5 6 7 8 9 10 11 12; do echo line$i >&2; done; exit 3",
        );
        let err = e.infer(&request("t", "")).await.unwrap_err();
        assert!(
            err.message
                .starts_with("command exited with status 3; stderr:\n"),
            "{}",
            err.message
        );
        assert!(err.message.ends_with("line12"));
        assert!(!err.message.contains("line2\n"));
        assert!(err.message.contains("line3\n"));
        assert_eq!(err.attempts[0].outcome, "exit_3");
        let err = CommandEngine::new("false")
            .infer(&request("t", ""))
            .await
            .unwrap_err();
        assert_eq!(
            err.message,
            "command exited with status 1 (stderr was empty)"
        );
    }

    #[tokio::test]
    async fn dropping_the_future_kills_the_whole_group() {
        let dir = std::env::temp_dir().join(format!("ctx-cmd-drop-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let marker = dir.join("survived");
        // The grandchild would write the marker after 1 s unless killed.
        let cmd = format!("(sleep 1; touch '{}') & sleep 5", marker.display());
        let e = CommandEngine::new(cmd);
        let req = request("t", "");
        let started = std::time::Instant::now();
        // What the executor's task timeout and a cancelled run both do.
        let call = tokio::time::timeout(Duration::from_millis(200), e.infer(&req)).await;
        assert!(call.is_err());
        assert!(started.elapsed() < Duration::from_secs(3));
        std::thread::sleep(Duration::from_millis(1500));
        assert!(!marker.exists(), "grandchild survived the drop");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn endless_output_is_cut_at_the_bound_and_the_group_killed() {
        // `yes` never stops: before the bound, memory grew until the
        // allocator aborted the process.
        let dir = std::env::temp_dir().join(format!("ctx-cmd-yes-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let marker = dir.join("survived");
        let cmd = format!("(sleep 1; touch '{}') & yes", marker.display());
        let mut req = request("t", "");
        req.max_output_bytes = 1 << 20;
        let started = std::time::Instant::now();
        let err = CommandEngine::new(cmd).infer(&req).await.unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(
            err.message,
            "output exceeded the limit of 1048576 bytes (max_output_bytes); the command was killed"
        );
        assert_eq!(err.attempts[0].outcome, "output_too_large");
        std::thread::sleep(Duration::from_millis(1500));
        assert!(!marker.exists(), "the group outlived the cut");
        let _ = std::fs::remove_dir_all(&dir);

        // Exactly at the bound is fine.
        let mut req = request("t", "abcd");
        req.max_output_bytes = 4;
        assert_eq!(
            CommandEngine::new("cat").infer(&req).await.unwrap().output,
            "abcd"
        );
        req.max_output_bytes = 3;
        assert!(CommandEngine::new("cat").infer(&req).await.is_err());
    }

    #[tokio::test]
    async fn a_flood_of_stderr_keeps_only_its_tail() {
        let e = CommandEngine::new(
            "head -c 50000000 /dev/zero | tr '\\0' x >&2; echo >&2; echo last >&2; exit 4",
        );
        let err = e.infer(&request("t", "")).await.unwrap_err();
        assert!(
            err.message.ends_with("\nlast"),
            "{}",
            &err.message[err.message.len() - 40..]
        );
        assert!(
            err.message.len() <= STDERR_TAIL_BYTES + 100,
            "{}",
            err.message.len()
        );
    }

    #[test]
    fn tail_keeps_char_boundaries_and_the_byte_bound() {
        let s = "é".repeat(5000);
        let t = stderr_tail(s.as_bytes());
        assert!(t.starts_with("..."));
        assert!(t.len() <= STDERR_TAIL_BYTES, "{}", t.len());
        // Invalid bytes expand threefold when decoded: the bound is on the
        // decoded text.
        let t = stderr_tail(&[0xff; STDERR_KEEP]);
        assert!(t.starts_with("..."));
        assert!(t.len() <= STDERR_TAIL_BYTES, "{}", t.len());
        assert!(t.ends_with('\u{fffd}'));
        assert_eq!(stderr_tail(b"a\n\n  \nb\n"), "a\nb");
    }
}
