//! The settings a caller gives one run on top of its plan, checked once
//! here with typed errors: the CLI turns its flags into these and adds
//! the flag's name when it prints an error, an embedder sets them in code.
//! The defaults are ctx-deps' ([`ctx_deps::ExecutorOptions::default`]).

use std::time::Duration;

use ctx_model::{Plan, SummarizeStrategy};
use ctx_tokens::Tokenizer;

/// A setting of a run, by the name plans and docs give it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    /// `config.max_prompt_tokens`.
    MaxPromptTokens,
    /// `config.max_check_attempts`.
    MaxCheckAttempts,
    /// The bound on one task's output in bytes.
    MaxOutputBytes,
    /// The bound on one task's engine call, in seconds.
    TaskTimeout,
}

impl Setting {
    /// The setting's name as plans and docs spell it.
    pub fn name(self) -> &'static str {
        match self {
            Setting::MaxPromptTokens => "max_prompt_tokens",
            Setting::MaxCheckAttempts => "max_check_attempts",
            Setting::MaxOutputBytes => "max_output_bytes",
            Setting::TaskTimeout => "task_timeout",
        }
    }
}

/// A setting out of its range.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", self.message(self.setting().name()))]
pub enum SettingError {
    /// Zero where at least 1 is needed.
    Zero(Setting),
    /// A number of seconds that is negative, not finite or too large.
    Seconds {
        /// Which setting.
        setting: Setting,
        /// The value given.
        value: f64,
        /// Why it is not a duration.
        reason: String,
    },
}

impl SettingError {
    /// The setting at fault.
    pub fn setting(&self) -> Setting {
        match self {
            SettingError::Zero(s) | SettingError::Seconds { setting: s, .. } => *s,
        }
    }

    /// The message with the setting called `name` (the CLI passes its
    /// flag, `--max-prompt-tokens`; [`Display`](std::fmt::Display) uses
    /// [`Setting::name`]).
    pub fn message(&self, name: &str) -> String {
        match self {
            SettingError::Zero(Setting::MaxCheckAttempts) => {
                format!("{name} must be at least 1 (the first attempt counts)")
            }
            SettingError::Zero(_) => format!("{name} must be at least 1"),
            SettingError::Seconds { value, reason, .. } => format!("{name} {value}: {reason}"),
        }
    }
}

/// Plan settings one run overrides: what `ctx run --max-prompt-tokens`,
/// `--max-check-attempts`, `--tokenizer` and `--summarize-strategy` set.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PlanOverrides {
    /// Replaces `config.max_prompt_tokens` (at least 1).
    pub max_prompt_tokens: Option<usize>,
    /// Replaces `config.max_check_attempts` (at least 1: the first
    /// attempt counts).
    pub max_check_attempts: Option<u32>,
    /// Replaces `config.tokenizer`: every task counts with it.
    pub tokenizer: Option<Tokenizer>,
    /// Replaces `config.dependency.summarize_strategy` and every task's
    /// own.
    pub summarize_strategy: Option<SummarizeStrategy>,
}

impl PlanOverrides {
    /// Applies the overrides to `plan`; nothing is changed when one is out
    /// of range. Apply them before a run starts: resume fingerprints are
    /// taken from the plan as it runs.
    pub fn apply(&self, plan: &mut Plan) -> Result<(), SettingError> {
        if self.max_prompt_tokens == Some(0) {
            return Err(SettingError::Zero(Setting::MaxPromptTokens));
        }
        if self.max_check_attempts == Some(0) {
            return Err(SettingError::Zero(Setting::MaxCheckAttempts));
        }
        if let Some(n) = self.max_prompt_tokens {
            plan.config.max_prompt_tokens = n;
        }
        if let Some(n) = self.max_check_attempts {
            plan.config.max_check_attempts = n;
        }
        if let Some(t) = self.tokenizer {
            plan.config.tokenizer = Some(t.as_str().to_string());
        }
        if let Some(strategy) = self.summarize_strategy {
            plan.config.dependency.summarize_strategy = strategy;
            for t in &mut plan.sub_tasks {
                t.dependency.summarize_strategy = None;
            }
        }
        Ok(())
    }
}

/// The task timeout from seconds: `0` is none (the executor's default is
/// [`ctx_deps::DEFAULT_TASK_TIMEOUT`]); fractions are allowed.
pub fn task_timeout_from_secs(secs: f64) -> Result<Option<Duration>, SettingError> {
    if secs == 0.0 {
        return Ok(None);
    }
    let bad = |reason: String| SettingError::Seconds {
        setting: Setting::TaskTimeout,
        value: secs,
        reason,
    };
    if !secs.is_finite() || secs < 0.0 {
        return Err(bad(
            "must be a positive number of seconds, or 0 for none".into()
        ));
    }
    Duration::try_from_secs_f64(secs)
        .map(Some)
        .map_err(|e| bad(e.to_string()))
}

/// The output bound in bytes: at least 1.
pub fn max_output_bytes(n: usize) -> Result<usize, SettingError> {
    if n == 0 {
        return Err(SettingError::Zero(Setting::MaxOutputBytes));
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> Plan {
        serde_json::from_str(
            r#"{"schema_version": 1, "sub_tasks": [{"id": "a", "description": "A",
              "dependency": {"summarize_strategy": "none"},
              "tool_or_prompt": {"name": "inference", "params": {"prompt": "p"}}}]}"#,
        )
        .unwrap()
    }

    #[test]
    fn overrides_replace_the_plan_s_settings_or_change_nothing() {
        let mut p = plan();
        let o = PlanOverrides {
            max_prompt_tokens: Some(50),
            max_check_attempts: Some(3),
            tokenizer: Some("o200k_base".parse().unwrap()),
            summarize_strategy: Some(SummarizeStrategy::Llm),
        };
        o.apply(&mut p).unwrap();
        assert_eq!(p.config.max_prompt_tokens, 50);
        assert_eq!(p.config.max_check_attempts, 3);
        assert_eq!(p.config.tokenizer.as_deref(), Some("o200k_base"));
        assert_eq!(
            p.config.dependency.summarize_strategy,
            SummarizeStrategy::Llm
        );
        assert_eq!(p.sub_tasks[0].dependency.summarize_strategy, None);

        let before = plan();
        let mut p = plan();
        let bad = PlanOverrides {
            max_prompt_tokens: Some(50),
            max_check_attempts: Some(0),
            ..PlanOverrides::default()
        };
        let e = bad.apply(&mut p).unwrap_err();
        assert_eq!(e, SettingError::Zero(Setting::MaxCheckAttempts));
        assert_eq!(p, before, "nothing is applied when one is out of range");
        assert_eq!(
            e.to_string(),
            "max_check_attempts must be at least 1 (the first attempt counts)"
        );
        assert_eq!(
            e.message("--max-check-attempts"),
            "--max-check-attempts must be at least 1 (the first attempt counts)"
        );
    }

    #[test]
    fn seconds_and_bytes_are_checked() {
        assert_eq!(task_timeout_from_secs(0.0), Ok(None));
        assert_eq!(
            task_timeout_from_secs(1.5),
            Ok(Some(Duration::from_millis(1500)))
        );
        for bad in [-1.0, f64::NAN, f64::INFINITY, 1e300] {
            let e = task_timeout_from_secs(bad).unwrap_err();
            assert_eq!(e.setting(), Setting::TaskTimeout);
            assert!(
                e.message("--task-timeout").starts_with("--task-timeout "),
                "{e}"
            );
        }
        assert_eq!(max_output_bytes(1), Ok(1));
        assert_eq!(
            max_output_bytes(0).unwrap_err().to_string(),
            "max_output_bytes must be at least 1"
        );
    }
}
