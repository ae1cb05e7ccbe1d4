//! What a report is drawn from: a run and its tasks, as plain data.
//!
//! The types mirror what the run store keeps (`ctx runs show/export`) so the
//! CLI maps a stored run onto them field by field, and they deserialize from
//! JSON so a report can be drawn from a file without a store
//! (`cargo run -p ctx-report --example render_report -- run.json out.html`).
//! Unknown fields are errors: a misspelt `compeltion_tokens` would otherwise
//! silently render as "unknown".

use std::fmt;

use serde::{Deserialize, Serialize};

/// A point in time, in milliseconds since the Unix epoch (UTC).
///
/// The store writes RFC 3339 strings (`2026-11-30T10:13:08.299Z`); JSON input
/// may give either that or an integer number of milliseconds. It is written
/// back as RFC 3339 with milliseconds, so a round trip is lossless.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(i64);

/// A timestamp string that is not RFC 3339.
#[derive(Debug, thiserror::Error)]
#[error("`{text}` is not an RFC 3339 time (like 2026-11-30T10:13:08.299Z): {source}")]
pub struct TimestampError {
    /// The text that was given.
    pub text: String,
    /// chrono's reason.
    #[source]
    pub source: chrono::ParseError,
}

impl Timestamp {
    /// The time `ms` milliseconds after the Unix epoch.
    pub const fn from_unix_ms(ms: i64) -> Self {
        Timestamp(ms)
    }

    /// Milliseconds since the Unix epoch.
    pub const fn unix_ms(self) -> i64 {
        self.0
    }

    /// Parses an RFC 3339 time with any offset.
    pub fn parse_rfc3339(text: &str) -> Result<Self, TimestampError> {
        chrono::DateTime::parse_from_rfc3339(text)
            .map(|t| Timestamp(t.timestamp_millis()))
            .map_err(|source| TimestampError {
                text: text.to_string(),
                source,
            })
    }

    /// RFC 3339 in UTC with milliseconds; times chrono cannot represent
    /// (beyond year ±262,000) are written as `@<ms>`.
    pub fn to_rfc3339(self) -> String {
        match chrono::DateTime::from_timestamp_millis(self.0) {
            Some(t) => t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            None => format!("@{}", self.0),
        }
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

impl Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_rfc3339())
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Timestamp;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an RFC 3339 time string or milliseconds since the Unix epoch")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Timestamp, E> {
                Timestamp::parse_rfc3339(v).map_err(E::custom)
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Timestamp, E> {
                Ok(Timestamp(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Timestamp, E> {
                i64::try_from(v)
                    .map(Timestamp)
                    .map_err(|_| E::custom(format!("{v} ms is out of range")))
            }
        }
        d.deserialize_any(V)
    }
}

/// Where a whole run stands, as `ctx runs list` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// A process is executing it now: the report is a snapshot.
    Running,
    /// Every task completed.
    Completed,
    /// Finished with failed, skipped or unrun tasks.
    Failed,
    /// Stopped by Ctrl-C.
    Interrupted,
    /// The process died without recording an end.
    Crashed,
}

impl RunStatus {
    /// The status as written in JSON and in the report.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Completed => "completed",
            RunStatus::Failed => "failed",
            RunStatus::Interrupted => "interrupted",
            RunStatus::Crashed => "crashed",
        }
    }
}

/// Where one task stands in the report.
///
/// `Interrupted` is separate from `Failed` because the task did nothing
/// wrong: the run was stopped (Ctrl-C, or a crash) while it was executing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    /// Finished with an output.
    Completed,
    /// Finished with an error.
    Failed,
    /// Stopped while executing, by Ctrl-C or because the process died.
    Interrupted,
    /// Executing when the report was drawn (the run is still going).
    InProgress,
    /// Never started: a dependency failed, the budget ran out, or the run
    /// was cancelled first.
    Skipped,
    /// Not started yet (the run is still going, or it ended before).
    Pending,
}

impl TaskState {
    /// Every state, in the order the report lists counts.
    pub const ALL: [TaskState; 6] = [
        TaskState::Completed,
        TaskState::Failed,
        TaskState::Interrupted,
        TaskState::InProgress,
        TaskState::Skipped,
        TaskState::Pending,
    ];

    /// The state as written in JSON and used as a CSS class suffix.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Completed => "completed",
            TaskState::Failed => "failed",
            TaskState::Interrupted => "interrupted",
            TaskState::InProgress => "in_progress",
            TaskState::Skipped => "skipped",
            TaskState::Pending => "pending",
        }
    }

    /// The state as a person reads it.
    pub fn label(self) -> &'static str {
        match self {
            TaskState::Completed => "completed",
            TaskState::Failed => "failed",
            TaskState::Interrupted => "interrupted",
            TaskState::InProgress => "in progress",
            TaskState::Skipped => "skipped",
            TaskState::Pending => "pending",
        }
    }
}

/// How one engine call of a task ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttemptOutcome {
    /// The call succeeded and its output was accepted.
    Success,
    /// The call failed in a way the engine retries (timeout, HTTP 429, ...).
    Retry,
    /// The call returned an output that a check rejected; the task was
    /// asked again with the check's feedback.
    CheckFailure,
    /// The call failed and was not retried.
    Error,
}

impl AttemptOutcome {
    /// The outcome as written in JSON and used as a CSS class suffix.
    pub fn as_str(self) -> &'static str {
        match self {
            AttemptOutcome::Success => "success",
            AttemptOutcome::Retry => "retry",
            AttemptOutcome::CheckFailure => "check_failure",
            AttemptOutcome::Error => "error",
        }
    }

    /// The outcome as a person reads it.
    pub fn label(self) -> &'static str {
        match self {
            AttemptOutcome::Success => "success",
            AttemptOutcome::Retry => "retried",
            AttemptOutcome::CheckFailure => "check failed",
            AttemptOutcome::Error => "error",
        }
    }
}

/// A whole run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunReportInput {
    /// The run id (`20261130T101308.299Z-7ab97002`).
    pub run_id: String,
    /// The plan's name: its path as given, or its goal.
    #[serde(default)]
    pub plan: String,
    /// Where the run stands.
    pub status: RunStatus,
    /// When the run (its first session) started; the earliest task start
    /// when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Timestamp>,
    /// When the run's last session ended; absent while running or after a
    /// crash (the latest task time is used then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<Timestamp>,
    /// When this snapshot was read. A task still in progress is drawn up to
    /// this time; absent, up to the latest time in the input. It is an input
    /// (never the clock) so the same input gives the same bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_of: Option<Timestamp>,
    /// Every task of the plan, in plan order.
    #[serde(default)]
    pub tasks: Vec<TaskReport>,
    /// The files the run published (`ctx run --publish-root`), in plan
    /// order; a section of their own when there are any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub published: Vec<Published>,
    /// The cheaper tier of its period budget the run ran on (`config.budget.fallback`);
    /// a section of its own when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<FallbackNote>,
    /// Every decision on the run's approval gates, oldest first
    /// (`ctx runs approve`, `ctx runs reject`); a section of its own when
    /// there are any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decisions: Vec<Decision>,
}

/// A decision on an approval gate (the vocabulary's type).
pub use ctx_model::approval::Decision;

/// Why a run ran on a cheaper model, and which tasks did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FallbackNote {
    /// Why, in words: the budget, its use when the run started, the
    /// threshold.
    pub reason: String,
    /// The model the tasks ran on.
    pub model: String,
    /// Each task moved to it, in plan order.
    #[serde(default)]
    pub tasks: Vec<FallbackTaskNote>,
}

/// One task a [`FallbackNote`] moved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FallbackTaskNote {
    /// The task's id.
    pub task_id: String,
    /// The model it would have called otherwise (absent: the engine's
    /// default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
}

/// One published output: the task, the file and its manifest line
/// (the vocabulary's type).
pub use ctx_model::Published;

/// One task of the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskReport {
    /// The task's id in the plan.
    pub id: String,
    /// The plan's description of the task.
    #[serde(default)]
    pub description: String,
    /// The ids of the tasks it depends on, as declared.
    #[serde(default)]
    pub dependencies: Vec<String>,
    /// For an item of a map task (`TASK[3]`): the map task's id. The page
    /// groups items under their map task, in the timeline and in the task
    /// table. Absent for any other task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item_of: Option<String>,
    /// Where it stands.
    pub status: TaskState,
    /// When the execution that produced its current result started; absent
    /// for a task that never started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Timestamp>,
    /// When that execution ended; absent while in progress, after an
    /// interruption without a stored end, and for a task never started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<Timestamp>,
    /// Every engine call made for it, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attempts: Vec<AttemptReport>,
    /// The model that answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Tokens in the prompt sent, as ctx counted them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<u64>,
    /// For each dependency whose output went into the prompt: how much of it
    /// was kept. Empty when nothing is known about cuts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dependency_cuts: Vec<DependencyCut>,
    /// Tokens generated, as the engine reported them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_tokens: Option<u64>,
    /// What the task cost in US dollars; absent when the price is unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// Prompt tokens the provider read from its prompt cache, as the
    /// server reported them; absent when it reported none ("not
    /// reported", never 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
    /// The prompt tokens of the usage the engine reported (the cached
    /// tokens are a part of them, the base of their share); absent when it
    /// reported none. Unlike `prompt_tokens`, never ctx's own count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage_prompt_tokens: Option<u64>,
    /// Prompt tokens the provider wrote to its prompt cache, as reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<u64>,
    /// What the prompt cache saved in US dollars (negative when cache
    /// writes cost more than the reads saved); absent when not reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_saving_usd: Option<f64>,
    /// The service tier the server billed the task's call at when it named
    /// one other than the standard (`flex`, `batch`, `priority`, ...): the
    /// page says so beside the cost, which is priced at that tier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_tier: Option<String>,
    /// The output was reused from the cache instead of calling the engine.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cached: bool,
    /// The exact prompt sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// The output.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub output: String,
    /// Why it failed, was skipped or was interrupted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// For a task with checks: each attempt and what every check said
    /// about its output, in order. Empty for a task without checks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub check_attempts: Vec<CheckAttemptReport>,
}

/// One attempt of a checked task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckAttemptReport {
    /// 1 for the first attempt.
    pub number: u32,
    /// What each check said about the attempt's output; empty when the
    /// call failed before there was an output to check.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<CheckReport>,
    /// The engine's error, when the call failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One check's verdict on one attempt's output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckReport {
    /// The check's kind as a plan names it (`contains`, `judge`).
    pub kind: String,
    /// Whether the output passed it.
    pub passed: bool,
    /// On failure, why (the check's own `message` when it has one); on
    /// success, what was verified.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// On failure, what the check found missing when `message` is the
    /// plan's own and says something else (`no "10 x 20"`): the page shows
    /// both, so a reader sees what to fix, not only the plan's wording.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl TaskReport {
    /// A task with `status` and nothing else known yet.
    pub fn new(id: impl Into<String>, status: TaskState) -> Self {
        TaskReport {
            id: id.into(),
            description: String::new(),
            dependencies: Vec::new(),
            item_of: None,
            status,
            started_at: None,
            ended_at: None,
            attempts: Vec::new(),
            model: None,
            prompt_tokens: None,
            dependency_cuts: Vec::new(),
            completion_tokens: None,
            cost_usd: None,
            cached_tokens: None,
            usage_prompt_tokens: None,
            cache_write_tokens: None,
            cache_saving_usd: None,
            service_tier: None,
            cached: false,
            prompt: None,
            output: String::new(),
            error: None,
            check_attempts: Vec::new(),
        }
    }
}

/// How much of one dependency's output a task's prompt kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DependencyCut {
    /// The dependency's task id.
    pub task_id: String,
    /// Tokens of its output that went into the prompt.
    pub kept_tokens: u64,
    /// Tokens of its whole output.
    pub original_tokens: u64,
}

/// One engine call made for a task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttemptReport {
    /// 1 for the first call.
    pub number: u32,
    /// When the call started, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Timestamp>,
    /// When the call ended, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<Timestamp>,
    /// How it ended.
    pub outcome: AttemptOutcome,
    /// The engine's short class of the outcome (`ok`, `timeout`, `http_429`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    /// The failure's message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The provider batch the call went in (`ctx run --batch`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_id: Option<String>,
    /// The tier the server says it billed the call at, when it answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_tier: Option<ServiceTier>,
    /// Why the call went at the standard tier when a cheaper one was
    /// asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tier_fallback: Option<TierFallback>,
}

/// The tier a call was billed at, and why a call fell back to the
/// standard tier (the vocabulary's types).
pub use ctx_model::{ServiceTier, TierFallback};

/// JSON that is not a [`RunReportInput`].
#[derive(Debug, thiserror::Error)]
#[error("{origin}:{line}:{column}: {path}: {source}")]
pub struct InputError {
    /// Where the JSON came from (a path, or `<input>`).
    pub origin: String,
    /// 1-based line of the problem.
    pub line: usize,
    /// 1-based column of the problem.
    pub column: usize,
    /// The field path (`tasks[3].status`), `.` for the top level.
    pub path: String,
    /// serde_json's reason.
    #[source]
    pub source: serde_json::Error,
}

impl RunReportInput {
    /// Reads a run from JSON; errors name `origin`, the line, column and
    /// field path.
    pub fn from_json(text: &str, origin: &str) -> Result<Self, InputError> {
        let de = &mut serde_json::Deserializer::from_str(text);
        serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            let source = e.into_inner();
            InputError {
                origin: origin.to_string(),
                line: source.line(),
                column: source.column(),
                path,
                source,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_read_strings_and_integers_and_write_rfc3339() {
        let t: Timestamp = serde_json::from_str("\"2026-11-30T10:13:08.299+01:00\"").unwrap();
        assert_eq!(t.to_rfc3339(), "2026-11-30T09:13:08.299Z");
        let u: Timestamp = serde_json::from_str(&t.unix_ms().to_string()).unwrap();
        assert_eq!(t, u);
        assert_eq!(
            serde_json::to_string(&t).unwrap(),
            "\"2026-11-30T09:13:08.299Z\""
        );
        assert!(serde_json::from_str::<Timestamp>("\"yesterday\"").is_err());
        assert!(serde_json::from_str::<Timestamp>("18446744073709551615").is_err());
        assert_eq!(
            Timestamp::from_unix_ms(i64::MAX).to_rfc3339(),
            format!("@{}", i64::MAX)
        );
    }

    #[test]
    fn json_errors_name_line_column_and_field() {
        let text = "{\n  \"run_id\": \"r\",\n  \"status\": \"running\",\n  \"tasks\": [{\"id\": \"a\", \"status\": \"done\"}]\n}";
        let e = RunReportInput::from_json(text, "run.json").unwrap_err();
        assert_eq!(e.line, 4);
        assert!(e.path.starts_with("tasks[0].status"), "{}", e.path);
        assert!(e.to_string().starts_with("run.json:4:"), "{e}");
        let e = RunReportInput::from_json(
            r#"{"run_id": "r", "status": "running", "tasks": [{"id": "a", "status": "completed", "compeltion_tokens": 3}]}"#,
            "x",
        )
        .unwrap_err();
        assert!(e.to_string().contains("compeltion_tokens"), "{e}");
    }

    #[test]
    fn input_round_trips_through_json() {
        let mut t = TaskReport::new("a", TaskState::Completed);
        t.started_at = Some(Timestamp::from_unix_ms(1_000));
        t.ended_at = Some(Timestamp::from_unix_ms(2_500));
        t.cost_usd = Some(0.25);
        t.attempts.push(AttemptReport {
            number: 1,
            started_at: t.started_at,
            ended_at: t.ended_at,
            outcome: AttemptOutcome::Success,
            class: Some("ok".into()),
            error: None,
            batch_id: Some("batch_1".into()),
            service_tier: Some(ServiceTier::Batch),
            tier_fallback: None,
        });
        let input = RunReportInput {
            run_id: "r".into(),
            plan: "plan.yaml".into(),
            status: RunStatus::Completed,
            started_at: Some(Timestamp::from_unix_ms(0)),
            ended_at: Some(Timestamp::from_unix_ms(3_000)),
            as_of: None,
            tasks: vec![t],
            published: Vec::new(),
            fallback: None,
            decisions: Vec::new(),
        };
        let text = serde_json::to_string(&input).unwrap();
        assert_eq!(RunReportInput::from_json(&text, "x").unwrap(), input);
    }
}
