//! Building a [`TaskReport`] from the types the executor and the store
//! use (`ctx_model::SubTask`, `TaskExecutionResult`), so `ctx runs report`
//! is a direct mapping.
//!
//! Two things the result itself does not hold come from the store: the
//! task's start (the `recorded_at` of the first `in_progress` row of its
//! execution, which its `started_seq` points at) and its end (the
//! `recorded_at` of its latest row). A task's cost is its stored `metadata.cost_usd` (absent, and
//! shown as "unknown", when its price was not known). Per-dependency cuts
//! are not stored yet; they stay empty (shown as "not recorded").

use ctx_model::{Attempt, SubTask, TaskExecutionResult, TaskStatus};

use crate::input::{
    AttemptOutcome, AttemptReport, CheckAttemptReport, CheckReport, RunStatus, TaskReport,
    TaskState, Timestamp,
};

/// The prefix the executor gives the error of a task cancelled by Ctrl-C
/// (`interrupted: cancelled while running, after 1200 ms`).
const INTERRUPTED_PREFIX: &str = "interrupted:";

/// The report's state for a stored status. A task stored `in_progress` is
/// in progress only while its run is running; otherwise its process was
/// stopped under it (a crash), which is an interruption. A task the
/// executor failed because Ctrl-C cancelled it is an interruption too.
pub fn task_state(status: Option<TaskStatus>, error: Option<&str>, run: RunStatus) -> TaskState {
    match status {
        None | Some(TaskStatus::Pending) => TaskState::Pending,
        Some(TaskStatus::InProgress) if run == RunStatus::Running => TaskState::InProgress,
        Some(TaskStatus::InProgress) => TaskState::Interrupted,
        Some(TaskStatus::Completed) => TaskState::Completed,
        Some(TaskStatus::Failed) if error.is_some_and(|e| e.starts_with(INTERRUPTED_PREFIX)) => {
            TaskState::Interrupted
        }
        Some(TaskStatus::Failed) => TaskState::Failed,
        Some(TaskStatus::Skipped) => TaskState::Skipped,
    }
}

/// The report's attempts for an engine's attempt list.
///
/// Engines record each call's duration and the backoff after it, not wall
/// times, so the calls are laid end to end from the task's start
/// (`start`, call, backoff, call, ...); without a start they carry no
/// times. Calls are numbered by their place in the list (1 first), across
/// check attempts. The class `ok` on the last call is a success and on an earlier
/// one means its output was rejected (a check failure); a class starting
/// with `check` is a check failure; any other class is a retry when
/// another call followed, an error when it was the last.
pub fn attempts(list: &[Attempt], start: Option<Timestamp>) -> Vec<AttemptReport> {
    let mut cursor = start.map(Timestamp::unix_ms);
    list.iter()
        .enumerate()
        .map(|(i, a)| {
            let last = i + 1 == list.len();
            let outcome = if a.outcome.as_str().starts_with("check") {
                AttemptOutcome::CheckFailure
            } else if a.outcome == ctx_model::CallOutcome::Ok {
                if last {
                    AttemptOutcome::Success
                } else {
                    AttemptOutcome::CheckFailure
                }
            } else if last {
                AttemptOutcome::Error
            } else {
                AttemptOutcome::Retry
            };
            let started = cursor;
            let ended = started.map(|s| s.saturating_add(clamp_ms(a.duration_ms)));
            cursor = ended.map(|e| e.saturating_add(clamp_ms(a.backoff_ms.unwrap_or(0))));
            AttemptReport {
                // Engines number the calls of one request from 1; a task
                // whose checks failed makes a request per check attempt,
                // so its list restarts at 1. The list is the task's calls
                // in order: its position is the call's number.
                number: u32::try_from(i + 1).unwrap_or(u32::MAX),
                started_at: started.map(Timestamp::from_unix_ms),
                ended_at: ended.map(Timestamp::from_unix_ms),
                outcome,
                class: Some(a.outcome.to_string()),
                error: a.error.clone(),
                batch_id: a.batch_id.clone(),
                service_tier: a.service_tier,
                tier_fallback: a.tier_fallback,
            }
        })
        .collect()
}

fn clamp_ms(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}

impl TaskReport {
    /// A plan task with its latest stored result (`None` when it has none),
    /// the start and end of the execution that produced that result, and
    /// the run's status (which decides whether a stored `in_progress` is
    /// still running).
    ///
    /// The prompt token count is ctx's own (the one the cap is enforced
    /// on), falling back to the engine's usage; completion tokens are the
    /// engine's. A task that is in progress or never started has no end.
    pub fn from_model(
        task: &SubTask,
        result: Option<&TaskExecutionResult>,
        started_at: Option<Timestamp>,
        ended_at: Option<Timestamp>,
        run: RunStatus,
    ) -> TaskReport {
        let status = task_state(
            result.map(|r| r.status),
            result.and_then(|r| r.error.as_deref()),
            run,
        );
        let mut report = TaskReport::new(task.id.clone(), status);
        report.description = task.description.clone();
        report.dependencies = task.dependencies.clone();
        let Some(r) = result else {
            return report;
        };
        let never_started = matches!(status, TaskState::Pending | TaskState::Skipped);
        if !never_started {
            report.started_at = started_at;
            if status != TaskState::InProgress {
                report.ended_at = ended_at;
            }
        }
        let m = &r.metadata;
        report.attempts = attempts(&m.attempts, report.started_at);
        report.model = m.model.clone();
        report.prompt_tokens = m
            .prompt_tokens
            .map(|t| t as u64)
            .or(m.tokens_used.map(|u| u.prompt_tokens));
        report.completion_tokens = m.tokens_used.map(|u| u.completion_tokens);
        report.cached = m.cached;
        report.cost_usd = m.cost_usd.map(|c| c.to_f64());
        report.cached_tokens = m.tokens_used.and_then(|u| u.cached_tokens);
        report.usage_prompt_tokens = m.tokens_used.map(|u| u.prompt_tokens);
        report.cache_write_tokens = m.tokens_used.and_then(|u| u.cache_write_tokens);
        report.service_tier = m
            .tokens_used
            .and_then(|u| u.service_tier)
            .filter(|t| *t != ctx_model::ServiceTier::Default)
            .map(|t| t.to_string());
        report.cache_saving_usd = m.cache_saving_usd.map(|s| {
            let magnitude = s.magnitude().to_f64();
            if s.is_negative() {
                -magnitude
            } else {
                magnitude
            }
        });
        report.prompt = r.prompt.clone();
        report.output = r.output.clone();
        report.error = r.error.clone();
        report.check_attempts = m
            .check_attempts
            .iter()
            .map(|c| CheckAttemptReport {
                number: c.number,
                checks: c
                    .checks
                    .iter()
                    .map(|k| CheckReport {
                        kind: k.kind.as_str().to_string(),
                        passed: k.passed,
                        message: k.message.clone(),
                        detail: k.detail.clone(),
                    })
                    .collect(),
                error: c.error.clone(),
            })
            .collect();
        report
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctx_model::{ResultMetadata, TokenUsage};

    fn attempt(n: u32, outcome: &str, ms: u64, backoff: Option<u64>) -> Attempt {
        Attempt {
            number: n,
            duration_ms: ms,
            outcome: outcome.into(),
            error: (outcome != "ok").then(|| format!("{outcome} happened")),
            backoff_ms: backoff,
            ..Attempt::default()
        }
    }

    #[test]
    fn attempts_are_laid_end_to_end_and_classified() {
        let list = [
            attempt(1, "http_429", 100, Some(400)),
            attempt(2, "ok", 200, None),
            attempt(3, "check_failed", 300, None),
            attempt(4, "ok", 50, None),
        ];
        let got = attempts(&list, Some(Timestamp::from_unix_ms(1_000)));
        let outcomes: Vec<_> = got.iter().map(|a| a.outcome).collect();
        assert_eq!(
            outcomes,
            [
                AttemptOutcome::Retry,
                AttemptOutcome::CheckFailure,
                AttemptOutcome::CheckFailure,
                AttemptOutcome::Success
            ]
        );
        let times: Vec<_> = got
            .iter()
            .map(|a| {
                (
                    a.started_at.unwrap().unix_ms(),
                    a.ended_at.unwrap().unix_ms(),
                )
            })
            .collect();
        assert_eq!(
            times,
            [
                (1_000, 1_100),
                (1_500, 1_700),
                (1_700, 2_000),
                (2_000, 2_050)
            ]
        );
        assert_eq!(got[0].error.as_deref(), Some("http_429 happened"));
        let last_fails = attempts(&[attempt(1, "timeout", 10, None)], None);
        assert_eq!(last_fails[0].outcome, AttemptOutcome::Error);
        assert_eq!(last_fails[0].started_at, None);
    }

    /// Each check attempt is a request whose engine numbers its calls from
    /// 1: two requests of one call each are stored as [1, 1].
    #[test]
    fn calls_are_numbered_across_check_attempts() {
        let list = [
            attempt(1, "check_failed", 100, None),
            attempt(1, "ok", 100, None),
        ];
        let got = attempts(&list, Some(Timestamp::from_unix_ms(0)));
        let numbers: Vec<u32> = got.iter().map(|a| a.number).collect();
        assert_eq!(numbers, [1, 2]);
    }

    #[test]
    fn check_attempts_carry_kind_verdict_and_message() {
        let task: SubTask = serde_json::from_value(serde_json::json!({
            "id": "css", "description": "Style",
            "tool_or_prompt": {"name": "inference", "params": {"prompt": "CSS."}}
        }))
        .unwrap();
        let mut r = TaskExecutionResult::new("css", TaskStatus::Failed);
        // As the store holds them (ctx-checks' results, by kind name).
        r.metadata.check_attempts = serde_json::from_value(serde_json::json!([
            {"number": 1, "prompt": "CSS.", "prompt_tokens": 2, "output": "x",
             "checks": [
                {"kind": "not_contains", "passed": true, "message": "no TODO"},
                {"kind": "judge", "passed": false, "message": "the judge said: <no>"}
             ]},
            {"number": 2, "prompt": "CSS.", "prompt_tokens": 2, "output": "",
             "error": "timed out"}
        ]))
        .unwrap();
        let report = TaskReport::from_model(&task, Some(&r), None, None, RunStatus::Failed);
        assert_eq!(
            report.check_attempts,
            [
                CheckAttemptReport {
                    number: 1,
                    checks: vec![
                        CheckReport {
                            kind: "not_contains".into(),
                            passed: true,
                            message: "no TODO".into(),
                            detail: None,
                        },
                        CheckReport {
                            kind: "judge".into(),
                            passed: false,
                            message: "the judge said: <no>".into(),
                            detail: None,
                        },
                    ],
                    error: None,
                },
                CheckAttemptReport {
                    number: 2,
                    checks: Vec::new(),
                    error: Some("timed out".into()),
                },
            ]
        );
    }

    #[test]
    fn states_follow_the_run() {
        use TaskStatus as S;
        assert_eq!(
            task_state(None, None, RunStatus::Failed),
            TaskState::Pending
        );
        assert_eq!(
            task_state(Some(S::InProgress), None, RunStatus::Running),
            TaskState::InProgress
        );
        assert_eq!(
            task_state(Some(S::InProgress), None, RunStatus::Crashed),
            TaskState::Interrupted
        );
        assert_eq!(
            task_state(
                Some(S::Failed),
                Some("interrupted: cancelled while running, after 5 ms"),
                RunStatus::Interrupted
            ),
            TaskState::Interrupted
        );
        assert_eq!(
            task_state(Some(S::Failed), Some("exit 1"), RunStatus::Failed),
            TaskState::Failed
        );
    }

    #[test]
    fn from_model_maps_the_result() {
        let task: SubTask = serde_json::from_value(serde_json::json!({
            "id": "b", "description": "Do b", "dependencies": ["a"],
            "tool_or_prompt": {"name": "inference", "params": {"prompt": "p"}}
        }))
        .unwrap();
        let mut r = TaskExecutionResult::new("b", TaskStatus::Completed);
        r.output = "out".into();
        r.prompt = Some("the prompt".into());
        r.metadata = ResultMetadata {
            prompt_tokens: Some(12),
            tokens_used: Some(TokenUsage {
                prompt_tokens: 13,
                completion_tokens: 7,
                total_tokens: 20,
                cached_tokens: None,
                cache_write_tokens: None,
                partial: false,
                prompt_counted: false,
                service_tier: None,
            }),
            cached: true,
            attempts: vec![attempt(1, "ok", 40, None)],
            ..ResultMetadata::default()
        };
        let s = Some(Timestamp::from_unix_ms(10));
        let e = Some(Timestamp::from_unix_ms(60));
        let t = TaskReport::from_model(&task, Some(&r), s, e, RunStatus::Completed);
        assert_eq!(t.status, TaskState::Completed);
        assert_eq!(t.dependencies, ["a"]);
        assert_eq!((t.prompt_tokens, t.completion_tokens), (Some(12), Some(7)));
        assert_eq!((t.started_at, t.ended_at), (s, e));
        assert!(t.cached);
        assert_eq!(t.attempts[0].ended_at, Some(Timestamp::from_unix_ms(50)));
        assert_eq!(t.cost_usd, None);
        let mut priced = r.clone();
        // As the store reads it back from its JSON.
        priced.metadata = serde_json::from_str(r#"{"cost_usd": 0.000366}"#).unwrap();
        let t = TaskReport::from_model(&task, Some(&priced), s, e, RunStatus::Completed);
        assert_eq!(t.cost_usd, Some(0.000366));
        assert_eq!((t.cached_tokens, t.cache_saving_usd), (None, None));
        // The prompt cache's figures as the store reads them back; a
        // negative saving (writes dearer than the reads saved) stays so.
        priced.metadata = serde_json::from_str(
            r#"{"tokens_used": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11,
                "cached_tokens": 0, "cache_write_tokens": 8}, "cache_saving_usd": -0.00075}"#,
        )
        .unwrap();
        let t = TaskReport::from_model(&task, Some(&priced), s, e, RunStatus::Completed);
        assert_eq!((t.cached_tokens, t.cache_write_tokens), (Some(0), Some(8)));
        assert_eq!(t.cache_saving_usd, Some(-0.00075));
        assert_eq!(t.service_tier, None);
        // The tier the server billed: named when it is not the standard.
        for (tier, shown) in [("flex", Some("flex")), ("default", None)] {
            priced.metadata = serde_json::from_str(&format!(
                r#"{{"tokens_used": {{"prompt_tokens": 10, "completion_tokens": 1,
                    "total_tokens": 11, "service_tier": "{tier}"}}}}"#
            ))
            .unwrap();
            let t = TaskReport::from_model(&task, Some(&priced), s, e, RunStatus::Completed);
            assert_eq!(t.service_tier.as_deref(), shown, "{tier}");
        }

        let running = TaskExecutionResult::new("b", TaskStatus::InProgress);
        let t = TaskReport::from_model(&task, Some(&running), s, e, RunStatus::Running);
        assert_eq!(
            (t.status, t.started_at, t.ended_at),
            (TaskState::InProgress, s, None)
        );
        let t = TaskReport::from_model(&task, None, s, e, RunStatus::Running);
        assert_eq!((t.status, t.started_at), (TaskState::Pending, None));
    }
}
