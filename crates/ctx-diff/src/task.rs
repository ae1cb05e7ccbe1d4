//! One task compared: status, checks, output, causes and figures.

use ctx_model::checks::{CheckKind, CheckResult};
use ctx_model::money::{Saving, Usd};
use ctx_model::{TaskExecutionResult, TaskStatus};
use serde::Serialize;
use similar::TextDiff;

use crate::cause::{Cause, task_causes};
use crate::matching::Pair;
use crate::side::RunSide;

/// What happened to a task between the runs, the most telling first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// Its status differs.
    Status,
    /// Only in run B.
    New,
    /// Only in run A.
    Removed,
    /// Same status; a check flipped on the final attempt.
    Checks,
    /// Same status and checks; the output differs.
    Output,
    /// Nothing that is compared differs.
    Same,
}

impl Change {
    /// As printed.
    pub fn as_str(self) -> &'static str {
        match self {
            Change::Status => "status",
            Change::New => "new",
            Change::Removed => "removed",
            Change::Checks => "checks",
            Change::Output => "output",
            Change::Same => "same",
        }
    }
}

/// A figure in each run and the change (B less A); `null` where a run
/// has no figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Delta<T, D> {
    /// In run A.
    pub a: Option<T>,
    /// In run B.
    pub b: Option<T>,
    /// `b - a`, when both are known.
    pub delta: Option<D>,
}

/// A count or a time in both runs.
pub type Count = Delta<u64, i64>;
/// An amount in both runs. Its change is signed, so it is held as
/// ctx-model's one signed amount of money, [`Saving`] (`without - with`,
/// here `b - a`): exact picodollars, printed and serialized as every
/// other amount.
pub type Cost = Delta<Usd, Saving>;

/// `a` and `b` and their change.
pub fn count(a: Option<u64>, b: Option<u64>) -> Count {
    let signed = |x: u64| i64::try_from(x).unwrap_or(i64::MAX);
    Delta {
        a,
        b,
        delta: a.zip(b).map(|(a, b)| signed(b).saturating_sub(signed(a))),
    }
}

/// `a` and `b` and their change.
pub fn cost(a: Option<Usd>, b: Option<Usd>) -> Cost {
    Delta {
        a,
        b,
        delta: a.zip(b).map(|(a, b)| Saving::between(b, a)),
    }
}

/// One check whose verdict differs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Flip {
    /// Its position among the task's checks (1 = first).
    pub check: usize,
    /// Its kind.
    pub kind: CheckKind,
    /// Passed in A (`null`: not run there).
    pub a: Option<bool>,
    /// Passed in B (`null`: not run there).
    pub b: Option<bool>,
}

impl Flip {
    /// Passed in A and did not pass in B (failed, or was not run).
    pub fn is_regression(&self) -> bool {
        self.a == Some(true) && self.b != Some(true)
    }
}

/// The checks that flipped, on the first attempt and on the final one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CheckChanges {
    /// On each run's first attempt.
    pub first: Vec<Flip>,
    /// On each run's final attempt (what the task was judged by).
    #[serde(rename = "final")]
    pub last: Vec<Flip>,
}

/// The output compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OutputChange {
    /// Byte for byte the same (false when one run has a result and the
    /// other none; true when neither has).
    pub identical: bool,
    /// 0 to 1 (1: identical), four decimals; `null` when a run has no
    /// result for it.
    pub similarity: Option<f64>,
    /// The unified diff, A to B: only for the task asked for with
    /// `--task`.
    pub diff: Option<String>,
}

/// A task's status in each run (`null`: not in that run; `pending`: in
/// its plan, never started).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Statuses {
    /// In run A.
    pub a: Option<TaskStatus>,
    /// In run B.
    pub b: Option<TaskStatus>,
}

/// One task of either run, compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskDiff {
    /// The id it is shown under: B's, else A's.
    pub id: String,
    /// Its id in A (`null`: new); differs from `b_id` for a map item
    /// matched by content that moved in its list.
    pub a_id: Option<String>,
    /// Its id in B (`null`: removed).
    pub b_id: Option<String>,
    /// What happened to it.
    pub change: Change,
    /// Its status in each run.
    pub status: Statuses,
    /// Checks that flipped.
    pub checks: CheckChanges,
    /// Its output compared.
    pub output: OutputChange,
    /// Which of its inputs differ (empty: none, and the same output).
    pub causes: Vec<Cause>,
    /// Tokens used (the engine's total).
    pub tokens: Count,
    /// What it cost.
    pub cost_usd: Cost,
    /// Prompt tokens the provider's cache served.
    pub cached_tokens: Count,
    /// Engine calls made.
    pub attempts: Count,
    /// Wall time from dispatch to result, in milliseconds.
    pub time_ms: Count,
}

impl TaskDiff {
    /// Whether a check that passed in A did not pass in B (a task gone
    /// from B counts: its checks did not pass).
    pub fn check_regressed(&self) -> bool {
        self.checks.last.iter().any(Flip::is_regression)
    }

    /// Whether it completed in A and did not in B (gone included).
    pub fn status_regressed(&self) -> bool {
        self.status.a == Some(TaskStatus::Completed) && self.status.b != Some(TaskStatus::Completed)
    }
}

/// `pair` compared; `full` adds the unified diff.
pub fn task_diff(a: &RunSide, b: &RunSide, pair: &Pair, full: bool) -> TaskDiff {
    fn result<'s>(side: &'s RunSide, id: &Option<String>) -> Option<&'s TaskExecutionResult> {
        id.as_deref()
            .and_then(|id| side.latest.get(id))
            .map(|r| &r.result)
    }
    let (ra, rb) = (result(a, &pair.a), result(b, &pair.b));
    let status = |id: &Option<String>, r: Option<&TaskExecutionResult>| {
        id.as_ref()
            .map(|_| r.map_or(TaskStatus::Pending, |r| r.status))
    };
    let status = Statuses {
        a: status(&pair.a, ra),
        b: status(&pair.b, rb),
    };
    let output = output_change(ra, rb, full, pair);
    let checks = CheckChanges {
        first: flips(ra.map(first_checks), rb.map(first_checks)),
        last: flips(
            ra.map(|r| &r.metadata.checks[..]),
            rb.map(|r| &r.metadata.checks[..]),
        ),
    };
    let causes = match (&pair.a, &pair.b) {
        (Some(x), Some(y)) => task_causes(a, b, (x, y), !output.identical),
        _ => Vec::new(),
    };
    let change = match (&pair.a, &pair.b) {
        (None, _) => Change::New,
        (_, None) => Change::Removed,
        _ if status.a != status.b => Change::Status,
        _ if !checks.last.is_empty() => Change::Checks,
        _ if !output.identical => Change::Output,
        _ => Change::Same,
    };
    let figure = |f: fn(&TaskExecutionResult) -> Option<u64>| count(ra.and_then(f), rb.and_then(f));
    TaskDiff {
        id: pair.id().to_string(),
        a_id: pair.a.clone(),
        b_id: pair.b.clone(),
        change,
        status,
        checks,
        output,
        causes,
        tokens: figure(|r| r.metadata.tokens_used.as_ref().map(|t| t.total_tokens)),
        cost_usd: cost(
            ra.and_then(|r| r.metadata.cost_usd),
            rb.and_then(|r| r.metadata.cost_usd),
        ),
        cached_tokens: figure(|r| r.metadata.tokens_used.as_ref()?.cached_tokens),
        attempts: figure(|r| Some(r.metadata.attempts.len() as u64)),
        time_ms: figure(|r| r.metadata.execution_time_ms),
    }
}

fn first_checks(r: &TaskExecutionResult) -> &[CheckResult] {
    r.metadata
        .check_attempts
        .first()
        .map_or(&r.metadata.checks[..], |a| &a.checks[..])
}

/// The checks whose verdicts differ, by position. A check run on one
/// side only flips from or to "not run"; a task with no result on a side
/// ran none there.
fn flips(a: Option<&[CheckResult]>, b: Option<&[CheckResult]>) -> Vec<Flip> {
    let (a, b) = (a.unwrap_or_default(), b.unwrap_or_default());
    (0..a.len().max(b.len()))
        .filter_map(|i| {
            let (x, y) = (a.get(i), b.get(i));
            let kind = x.or(y)?.kind;
            let flip = Flip {
                check: i + 1,
                kind,
                a: x.map(|c| c.passed),
                b: y.map(|c| c.passed),
            };
            (flip.a != flip.b).then_some(flip)
        })
        .collect()
}

/// Texts longer than this (in bytes, either side) are compared line by
/// line instead of character by character, which keeps a large output's
/// comparison fast and still deterministic (no deadline).
const CHAR_DIFF_LIMIT: usize = 16 * 1024;

fn output_change(
    a: Option<&TaskExecutionResult>,
    b: Option<&TaskExecutionResult>,
    full: bool,
    pair: &Pair,
) -> OutputChange {
    let (Some(a), Some(b)) = (a, b) else {
        // No output on either side is no change; on one side only, one.
        return OutputChange {
            identical: a.is_none() && b.is_none(),
            similarity: None,
            diff: None,
        };
    };
    let (x, y) = (a.output.as_str(), b.output.as_str());
    if x == y {
        let diff = full.then(String::new);
        return OutputChange {
            identical: true,
            similarity: Some(1.0),
            diff,
        };
    }
    let ratio = if x.len().max(y.len()) <= CHAR_DIFF_LIMIT {
        TextDiff::from_chars(x, y).ratio()
    } else {
        TextDiff::from_lines(x, y).ratio()
    };
    let diff = full.then(|| {
        TextDiff::from_lines(x, y)
            .unified_diff()
            .context_radius(3)
            .header(
                &format!("a/{}", pair.a.as_deref().unwrap_or_default()),
                &format!("b/{}", pair.b.as_deref().unwrap_or_default()),
            )
            .to_string()
    });
    OutputChange {
        identical: false,
        similarity: Some((f64::from(ratio) * 10_000.0).round() / 10_000.0),
        diff,
    }
}
