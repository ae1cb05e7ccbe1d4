//! `command`: any program that reads a prompt on stdin and writes the
//! output on stdout (`ollama run`, `llm`, a script) becomes an engine.

use std::process::Stdio;
use std::time::Duration;

use ctx_model::Attempt;
use tokio::io::AsyncWriteExt;

use crate::engine::{BoxFuture, EngineError, InferenceEngine, InferenceRequest, InferenceResponse};

/// How many trailing lines of stderr a failure carries.
pub const STDERR_TAIL_LINES: usize = 10;

/// Runs `sh -c COMMAND` once per task.
///
/// * The final prompt is written to the command's stdin, which is then
///   closed; a command that does not read stdin is fine.
/// * stdout, decoded as UTF-8 (invalid bytes become U+FFFD), is the output.
/// * The environment carries `CTX_TASK_ID` (the task's id) and `CTX_MODEL`
///   (the task's `params.model`, empty when the task names none).
/// * A non-zero exit, or death by a signal, fails the task with the last
///   [`STDERR_TAIL_LINES`] lines of stderr.
/// * With a timeout, a command still running when it expires is killed and
///   the task fails with `timed out after ...`.
///
/// ## Killing
///
/// The command runs in its own process group. When the future is dropped
/// before the command has exited (a timeout, or a cancelled run), the whole
/// group is sent `SIGKILL`, so a pipeline such as `sleep 60; llm` leaves no
/// orphan behind; tokio's `kill_on_drop` covers the shell itself on
/// platforms without process groups.
#[derive(Debug, Clone)]
pub struct CommandEngine {
    command: String,
    timeout: Option<Duration>,
}

impl CommandEngine {
    /// The engine's name as `--engine` takes it.
    pub const NAME: &'static str = "command";

    /// An engine running `command` with no timeout.
    pub fn new(command: impl Into<String>) -> CommandEngine {
        CommandEngine {
            command: command.into(),
            timeout: None,
        }
    }

    /// Kills the command when it runs longer than `timeout`.
    pub fn with_timeout(mut self, timeout: Option<Duration>) -> CommandEngine {
        self.timeout = timeout;
        self
    }

    /// The shell command line.
    pub fn command(&self) -> &str {
        &self.command
    }

    async fn run_once(&self, request: &InferenceRequest) -> Result<String, (String, String)> {
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
        #[cfg(unix)]
        cmd.process_group(0);
        let mut child = cmd.spawn().map_err(|e| {
            (
                "spawn_error".to_string(),
                format!("cannot start `sh -c {}`: {e}", self.command),
            )
        })?;
        let mut guard = GroupKill { pid: child.id() };
        let stdin = child.stdin.take();
        let prompt = request.prompt.as_bytes();
        let write = async move {
            if let Some(mut stdin) = stdin {
                // A command that never reads stdin closes the pipe: not an
                // error of the task.
                let _ = stdin.write_all(prompt).await;
                let _ = stdin.shutdown().await;
            }
        };
        let run = async {
            let ((), out) = tokio::join!(write, child.wait_with_output());
            out
        };
        let out = match self.timeout {
            Some(limit) => match tokio::time::timeout(limit, run).await {
                Ok(out) => out,
                Err(_) => {
                    // `run` is dropped here: the guard kills the group.
                    return Err((
                        "timeout".into(),
                        format!(
                            "command timed out after {} and was killed",
                            fmt_duration(limit)
                        ),
                    ));
                }
            },
            None => run.await,
        };
        let out = out.map_err(|e| ("io_error".to_string(), format!("command I/O: {e}")))?;
        guard.pid = None;
        if out.status.success() {
            return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
        }
        let tail = stderr_tail(&out.stderr);
        let (outcome, what) = match out.status.code() {
            Some(code) => (
                format!("exit_{code}"),
                format!("command exited with status {code}"),
            ),
            None => {
                #[cfg(unix)]
                let sig = std::os::unix::process::ExitStatusExt::signal(&out.status).unwrap_or(0);
                #[cfg(not(unix))]
                let sig = 0;
                (
                    format!("signal_{sig}"),
                    format!("command killed by signal {sig}"),
                )
            }
        };
        let message = if tail.is_empty() {
            format!("{what} (stderr was empty)")
        } else {
            format!("{what}; stderr:\n{tail}")
        };
        Err((outcome, message))
    }
}

impl InferenceEngine for CommandEngine {
    fn name(&self) -> &str {
        Self::NAME
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
                    attempts: vec![Attempt {
                        number: 1,
                        duration_ms,
                        outcome: "ok".into(),
                        error: None,
                        backoff_ms: None,
                    }],
                    ..InferenceResponse::default()
                }),
                Err((outcome, message)) => Err(EngineError {
                    attempts: vec![Attempt {
                        number: 1,
                        duration_ms,
                        outcome,
                        error: Some(message.clone()),
                        backoff_ms: None,
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

/// The last [`STDERR_TAIL_LINES`] non-empty lines of `stderr`, at most 4 KB.
fn stderr_tail(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let start = lines.len().saturating_sub(STDERR_TAIL_LINES);
    let mut tail = lines[start..].join("\n");
    if tail.len() > 4096 {
        let mut cut = tail.len() - 4096;
        while !tail.is_char_boundary(cut) {
            cut += 1;
        }
        tail = format!("...{}", &tail[cut..]);
    }
    tail
}

fn fmt_duration(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{:.3}s", d.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctx_model::Params;

    fn request(id: &str, prompt: &str) -> InferenceRequest {
        InferenceRequest {
            task_id: id.into(),
            prompt: prompt.into(),
            params: Params {
                model: Some("m1".into()),
                ..Params::default()
            },
            prompt_tokens: 1,
        }
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
    async fn timeout_kills_the_whole_group() {
        let dir = std::env::temp_dir().join(format!("ctx-cmd-timeout-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let marker = dir.join("survived");
        // The grandchild would write the marker after 1 s unless killed.
        let cmd = format!("(sleep 1; touch '{}') & sleep 5", marker.display());
        let e = CommandEngine::new(cmd).with_timeout(Some(Duration::from_millis(200)));
        let started = std::time::Instant::now();
        let err = e.infer(&request("t", "")).await.unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(3));
        assert_eq!(err.message, "command timed out after 0.200s and was killed");
        assert_eq!(err.attempts[0].outcome, "timeout");
        std::thread::sleep(Duration::from_millis(1500));
        assert!(!marker.exists(), "grandchild survived the timeout");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn tail_keeps_char_boundaries() {
        let s = "é".repeat(5000);
        let t = stderr_tail(s.as_bytes());
        assert!(t.starts_with("..."));
        assert!(t.len() <= 4096 + 3);
    }
}
