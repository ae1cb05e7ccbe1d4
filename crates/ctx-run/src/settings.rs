//! The settings a caller gives one run on top of its plan, checked once
//! here with typed errors: the CLI turns its flags into these and adds
//! the flag's name when it prints an error, an embedder sets them in code.
//! The defaults are ctx-deps' ([`ctx_deps::ExecutorOptions::default`]).
//!
//! The store a run goes to is chosen here too, once, from the store flags
//! and the environment ([`StoreFlags::resolve`], in the manner of uv's
//! settings: flags win over the environment, which wins over the
//! default): in memory, a SQLite run directory, or a shared store's URL
//! ([`StoreChoice`]). Every refusal of a flag that does not fit the store
//! is made in that one place.

use std::path::PathBuf;
use std::time::Duration;

use ctx_model::{Plan, SummarizeStrategy};
use ctx_store_sqlite::RunRoot;
use ctx_tokens::Tokenizer;

use crate::{RunStore, Start};

/// The variable that names the store when `--store` is not given.
pub const STORE_ENV: &str = "CTX_STORE";

/// Where a run's results go, chosen once ([`StoreFlags::resolve`]).
#[derive(Debug, Clone)]
pub enum StoreChoice {
    /// In memory or in a SQLite run directory: a [`crate::RunSession`].
    Local(RunStore),
    /// A shared store (a postgres:// URL): the run is registered there
    /// for workers (ctx-worker's shared session).
    Shared(SharedStore),
}

/// A run on a shared store, as chosen.
#[derive(Debug, Clone, PartialEq)]
pub struct SharedStore {
    /// The store's postgres:// URL.
    pub url: String,
    /// Resume this run instead of registering a new one.
    pub resume: Option<String>,
    /// Work on the run here too; `false`: only follow it (`--no-local`).
    pub work_here: bool,
    /// This machine's input-hash cache, when asked for (`--cache`).
    pub cache: Option<RunRoot>,
}

/// The store flags of `ctx run`, as given.
#[derive(Debug, Clone, Default)]
pub struct StoreFlags {
    /// `--store`: `sqlite` or a postgres:// URL.
    pub store: Option<String>,
    /// `--no-store`: in memory.
    pub no_store: bool,
    /// `--root DIR`.
    pub root: Option<PathBuf>,
    /// `--run-dir DIR`.
    pub run_dir: Option<PathBuf>,
    /// `--resume RUN`.
    pub resume: Option<String>,
    /// `--cache`.
    pub cache: bool,
    /// `--no-local`.
    pub no_local: bool,
    /// `--batch`: the engine sends through a provider's batch API, whose
    /// batches only the local store journals.
    pub batch: bool,
}

/// A store flag that does not fit the store chosen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The store named is neither `sqlite` nor a postgres:// URL (shown
    /// without its password).
    #[error("`{shown}` is neither `sqlite` nor a postgres:// URL")]
    Unknown {
        /// The value, redacted.
        shown: String,
    },
    /// A setting only the local SQLite store has (a run directory).
    #[error("a run directory exists only in the local SQLite store, not in a shared store")]
    RunDirOnShared,
    /// Provider batches (`--batch`) are journaled only in the local
    /// store: a shared store's workers could not take them up.
    #[error(
        "provider batches are journaled only in the local SQLite store: a shared store's \
         workers could not take up a batch another process sent"
    )]
    BatchOnShared,
    /// Following a run others work on needs a shared store.
    #[error("only following a run needs a shared store")]
    FollowWithoutShared,
    /// A command that works only on a shared store was given none.
    #[error("no shared store was given")]
    NoSharedStore,
}

/// The store `flag` names, else the environment's ([`STORE_ENV`], read
/// through `env`): `None` for the local SQLite store (`sqlite`, or neither
/// given), the URL of a shared store, or [`StoreError::Unknown`].
pub fn shared_url(
    flag: Option<&str>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Option<String>, StoreError> {
    let value = match flag {
        Some(v) => Some(v.to_string()),
        None => env(STORE_ENV).filter(|v| !v.is_empty()),
    };
    match value {
        None => Ok(None),
        Some(v) if v == "sqlite" => Ok(None),
        Some(v) if ctx_store::url::is_postgres_url(&v) => Ok(Some(v)),
        Some(v) => Err(StoreError::Unknown {
            shown: ctx_store::url::redact(&v),
        }),
    }
}

impl StoreFlags {
    /// The store these flags and the environment (read through `env`)
    /// choose, or the first flag that does not fit it.
    pub fn resolve(&self, env: impl Fn(&str) -> Option<String>) -> Result<StoreChoice, StoreError> {
        let root = || {
            RunRoot::new(
                self.root
                    .clone()
                    .unwrap_or_else(|| PathBuf::from(ctx_store_sqlite::DEFAULT_ROOT)),
            )
        };
        let shared = if self.no_store {
            None
        } else {
            shared_url(self.store.as_deref(), env)?
        };
        let Some(url) = shared else {
            if self.no_local {
                return Err(StoreError::FollowWithoutShared);
            }
            if self.no_store {
                return Ok(StoreChoice::Local(RunStore::Memory));
            }
            let start = match (&self.resume, &self.run_dir) {
                (Some(run), _) => Start::Resume(run.clone()),
                (None, Some(dir)) => Start::NewIn(dir.clone()),
                (None, None) => Start::New,
            };
            return Ok(StoreChoice::Local(RunStore::Sqlite {
                root: root(),
                start,
                cache: self.cache,
            }));
        };
        if self.run_dir.is_some() {
            return Err(StoreError::RunDirOnShared);
        }
        if self.batch {
            return Err(StoreError::BatchOnShared);
        }
        Ok(StoreChoice::Shared(SharedStore {
            url,
            resume: self.resume.clone(),
            work_here: !self.no_local,
            cache: self.cache.then(root),
        }))
    }
}

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
    /// `config.cache_warm_up`.
    CacheWarmUp,
}

impl Setting {
    /// The setting's name as plans and docs spell it.
    pub fn name(self) -> &'static str {
        match self {
            Setting::MaxPromptTokens => "max_prompt_tokens",
            Setting::MaxCheckAttempts => "max_check_attempts",
            Setting::MaxOutputBytes => "max_output_bytes",
            Setting::TaskTimeout => "task_timeout",
            Setting::CacheWarmUp => "cache_warm_up",
        }
    }
}

/// A setting out of its range.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", self.message(self.setting().name()))]
pub enum SettingError {
    /// Zero where at least 1 is needed.
    Zero(Setting),
    /// A count under the least the setting allows (`cache_warm_up`: 2).
    TooFew {
        /// Which setting.
        setting: Setting,
        /// The value given.
        value: usize,
        /// The least allowed.
        least: usize,
    },
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
            SettingError::Zero(s)
            | SettingError::Seconds { setting: s, .. }
            | SettingError::TooFew { setting: s, .. } => *s,
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
            SettingError::TooFew {
                setting: Setting::CacheWarmUp,
                value,
                least,
            } => format!(
                "{name} {value}: must be at least {least} (the call that warms the cache and one that uses it)"
            ),
            SettingError::TooFew { value, least, .. } => {
                format!("{name} {value}: must be at least {least}")
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
    /// Replaces `config.cache_warm_up` (at least 2).
    pub cache_warm_up: Option<usize>,
    /// Replaces `config.budget`'s name, amount and period (`--budget
    /// NAME=USD/PERIOD`), keeping its fallbacks.
    pub budget: Option<ctx_model::PeriodBudget>,
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
        let least = ctx_model::prompt_cache::MIN_WARM_UP_CALLS;
        if let Some(value) = self.cache_warm_up.filter(|&k| k < least) {
            return Err(SettingError::TooFew {
                setting: Setting::CacheWarmUp,
                value,
                least,
            });
        }
        if let Some(k) = self.cache_warm_up {
            plan.config.cache_warm_up = Some(k);
        }
        if let Some(b) = &self.budget {
            // The flag names the budget, its amount and its period; the
            // plan's cheaper tiers stay (a flag cannot spell them).
            let fallback = plan
                .config
                .budget
                .take()
                .map(|old| old.fallback)
                .unwrap_or_default();
            plan.config.budget = Some(ctx_model::PeriodBudget {
                fallback,
                ..b.clone()
            });
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
            cache_warm_up: Some(4),
            budget: Some("team=2.5/week".parse().unwrap()),
        };
        o.apply(&mut p).unwrap();
        assert_eq!(p.config.max_prompt_tokens, 50);
        assert_eq!(p.config.max_check_attempts, 3);
        assert_eq!(p.config.cache_warm_up, Some(4));
        assert_eq!(p.config.tokenizer.as_deref(), Some("o200k_base"));
        assert_eq!(
            p.config.dependency.summarize_strategy,
            SummarizeStrategy::Llm
        );
        assert_eq!(p.sub_tasks[0].dependency.summarize_strategy, None);
        // `--budget` replaces the name, amount and period, and keeps the
        // plan's cheaper tiers.
        let mut p = plan();
        p.config.budget = Some(
            serde_json::from_str(
                r#"{"period": "month", "usd": 9, "name": "old", "fallback": [{"above": 0.8, "model": "small"}]}"#,
            )
            .unwrap(),
        );
        o.apply(&mut p).unwrap();
        let b = p.config.budget.unwrap();
        assert_eq!(
            (b.name.as_deref(), b.usd.to_string(), b.period.as_str()),
            (Some("team"), "2.5".to_string(), "week")
        );
        assert_eq!(b.fallback.len(), 1);
        assert_eq!(b.fallback[0].model, "small");

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
        let one = PlanOverrides {
            cache_warm_up: Some(1),
            ..PlanOverrides::default()
        };
        assert_eq!(
            one.apply(&mut p).unwrap_err().to_string(),
            "cache_warm_up 1: must be at least 2 (the call that warms the cache and one that uses it)"
        );
        assert_eq!(p, before);
    }

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            pairs
                .iter()
                .find(|(name, _)| *name == k)
                .map(|(_, v)| v.to_string())
        }
    }

    fn resolve(
        flags: StoreFlags,
        vars: &'static [(&'static str, &'static str)],
    ) -> Result<StoreChoice, StoreError> {
        flags.resolve(env(vars))
    }

    /// The flag wins over `CTX_STORE`, which wins over the default (a run
    /// directory under `.ctx/runs`); `sqlite` and an empty variable are
    /// the local store; a refused value is shown without its password.
    #[test]
    fn the_store_is_the_flag_else_the_environment_else_sqlite() {
        let url = "postgres://u:p@h/d";
        let local = resolve(StoreFlags::default(), &[]).unwrap();
        let StoreChoice::Local(RunStore::Sqlite { root, start, cache }) = local else {
            panic!("{local:?}")
        };
        assert_eq!(
            root.path(),
            std::path::Path::new(ctx_store_sqlite::DEFAULT_ROOT)
        );
        assert_eq!((start, cache), (Start::New, false));
        let from_env =
            resolve(StoreFlags::default(), &[(STORE_ENV, "postgres://u:p@h/d")]).unwrap();
        let StoreChoice::Shared(shared) = from_env else {
            panic!("{from_env:?}")
        };
        assert_eq!(shared.url, url);
        assert!(shared.work_here);
        let flag_wins = StoreFlags {
            store: Some("sqlite".into()),
            ..StoreFlags::default()
        };
        assert!(matches!(
            resolve(flag_wins, &[(STORE_ENV, "postgres://u:p@h/d")]).unwrap(),
            StoreChoice::Local(_)
        ));
        assert!(matches!(
            resolve(StoreFlags::default(), &[(STORE_ENV, "")]).unwrap(),
            StoreChoice::Local(_)
        ));
        let e = shared_url(Some("mysql://u:hunter2@h/d"), env(&[])).unwrap_err();
        assert_eq!(
            e,
            StoreError::Unknown {
                shown: "mysql://u@h/d".into()
            }
        );
        assert!(!e.to_string().contains("hunter2"));
    }

    /// `--no-store` is memory whatever the environment says; a resume, a
    /// run directory and the cache go to the local store; on a shared
    /// store the cache is this machine's root and `--no-local` follows.
    #[test]
    fn each_store_takes_its_own_flags() {
        let memory = StoreFlags {
            no_store: true,
            ..StoreFlags::default()
        };
        assert!(matches!(
            resolve(memory, &[(STORE_ENV, "postgres://h/d")]).unwrap(),
            StoreChoice::Local(RunStore::Memory)
        ));
        let resume = StoreFlags {
            resume: Some("r1".into()),
            root: Some("runs".into()),
            cache: true,
            ..StoreFlags::default()
        };
        let StoreChoice::Local(RunStore::Sqlite { root, start, cache }) =
            resume.resolve(env(&[])).unwrap()
        else {
            panic!()
        };
        assert_eq!(root.path(), std::path::Path::new("runs"));
        assert_eq!((start, cache), (Start::Resume("r1".into()), true));
        let shared = StoreFlags {
            store: Some("postgresql://h/d".into()),
            resume: Some("r1".into()),
            cache: true,
            no_local: true,
            ..StoreFlags::default()
        };
        let StoreChoice::Shared(s) = resolve(shared, &[]).unwrap() else {
            panic!()
        };
        assert_eq!(s.resume.as_deref(), Some("r1"));
        assert!(!s.work_here);
        assert_eq!(
            s.cache.map(|r| r.path().to_path_buf()),
            Some(std::path::PathBuf::from(ctx_store_sqlite::DEFAULT_ROOT))
        );
    }

    /// What does not fit the store is refused, each with its own error.
    #[test]
    fn flags_that_do_not_fit_the_store_are_refused() {
        let shared = || StoreFlags {
            store: Some("postgres://h/d".into()),
            ..StoreFlags::default()
        };
        let run_dir = StoreFlags {
            run_dir: Some("d".into()),
            ..shared()
        };
        assert_eq!(
            resolve(run_dir, &[]).unwrap_err(),
            StoreError::RunDirOnShared
        );
        let follow = StoreFlags {
            no_local: true,
            ..StoreFlags::default()
        };
        assert_eq!(
            resolve(follow, &[]).unwrap_err(),
            StoreError::FollowWithoutShared
        );
        let bad = StoreFlags {
            store: Some("redis://h".into()),
            ..StoreFlags::default()
        };
        assert!(matches!(
            resolve(bad, &[]).unwrap_err(),
            StoreError::Unknown { .. }
        ));
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
