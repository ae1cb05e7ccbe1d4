//! `ctx runs list`: every stored run, one row each, as text or JSON.
//!
//! Both stores list through this one module, so a run directory root and a
//! shared PostgreSQL store print the same table (a shared list adds a LATE
//! column: results refused because their lease had lapsed) and the same
//! JSON keys. Each store turns its own rows into [`RunRow`]s; what only one
//! kind of store knows is in [`RowFacts`], as in [`crate::show`].
//!
//! JSON keys come in the order the fields are declared below (the rule of
//! every `--format json` output, docs/architecture.md "JSON output"):
//! `id`, `state`, `created_at`, `plan`, `counts`, then the store's own keys.

use ctx_store::StatusCounts;
use serde::Serialize;

use ctx_table::printable;

/// One stored run.
#[derive(Debug, Clone, Serialize)]
pub struct RunRow {
    /// The run's id.
    pub id: String,
    /// Where it stands. A run directory: `running`, `completed`, `failed`,
    /// `interrupted`, `crashed`; a shared run: `open` (waiting for a
    /// worker), `running`, `completed`, `failed`.
    pub state: String,
    /// When the run was created or registered (RFC 3339, UTC).
    pub created_at: String,
    /// The plan's path as given (a run directory falls back to its goal).
    pub plan: Option<String>,
    /// The plan's tasks per status.
    pub counts: StatusCounts,
    /// What only its kind of store knows.
    #[serde(flatten)]
    pub facts: RowFacts,
}

/// What one kind of store knows about a listed run.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum RowFacts {
    /// A run directory.
    Local {
        /// The directory.
        dir: String,
        /// Sessions: the first run and each resume.
        sessions: usize,
    },
    /// A run of a shared store.
    Shared {
        /// When its last task became terminal.
        finished_at: Option<String>,
        /// The engine label given at registration.
        engine: String,
        /// SHA-256 of the stored plan.
        plan_hash: String,
        /// Results refused because their lease had lapsed.
        late_commits: i64,
        /// Claims beyond the first, summed over tasks.
        reclaims: i64,
    },
}

/// Every run of one store, oldest first (by creation time, then id), the
/// same order for both stores. As JSON, `ctx runs list --format json`
/// prints its `runs` as an array.
#[derive(Debug, Clone)]
pub struct RunList {
    /// The runs.
    pub runs: Vec<RunRow>,
    /// Where they were read from, for the "no runs" line: the root
    /// directory, or the store's URL without its password.
    pub location: String,
    /// Whether the store is shared (adds the LATE column).
    pub shared: bool,
}

impl RunList {
    /// The list of `runs` read from `location`, put in the one order.
    pub fn new(mut runs: Vec<RunRow>, location: String, shared: bool) -> Self {
        runs.sort_by(|a, b| (&a.created_at, &a.id).cmp(&(&b.created_at, &b.id)));
        Self {
            runs,
            location,
            shared,
        }
    }

    /// The table `ctx runs list` prints, or a line saying there are no
    /// runs. Plans and ids are printed with control characters escaped.
    pub fn text(&self) -> String {
        if self.runs.is_empty() {
            let place = if self.shared { "in" } else { "under" };
            return format!("no runs {place} {}\n", self.location);
        }
        let mut header = vec![
            "RUN",
            "STATE",
            "STARTED",
            "TASKS",
            "COMPLETED",
            "FAILED",
            "SKIPPED",
            "NOT RUN",
        ];
        let mut right = vec![false, false, false, true, true, true, true, true];
        if self.shared {
            header.push("LATE");
            right.push(true);
        }
        header.push("PLAN");
        right.push(false);
        let rows: Vec<Vec<String>> = self
            .runs
            .iter()
            .map(|r| {
                let c = &r.counts;
                let mut row = vec![
                    printable(&r.id),
                    r.state.clone(),
                    r.created_at.clone(),
                    c.total().to_string(),
                    c.completed.to_string(),
                    c.failed.to_string(),
                    c.skipped.to_string(),
                    (c.pending + c.in_progress).to_string(),
                ];
                if let RowFacts::Shared { late_commits, .. } = &r.facts {
                    row.push(late_commits.to_string());
                }
                row.push(r.plan.as_deref().map_or_else(|| "-".into(), printable));
                row
            })
            .collect();
        ctx_table::render(&header, &right, &rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts() -> StatusCounts {
        StatusCounts {
            pending: 1,
            in_progress: 1,
            completed: 3,
            failed: 1,
            skipped: 2,
        }
    }

    fn local() -> RunList {
        RunList::new(
            vec![RunRow {
                id: "20261201T101500Z-3f2a".into(),
                state: "interrupted".into(),
                created_at: "2026-12-01T10:15:00Z".into(),
                plan: Some("plans/weekly.yaml".into()),
                counts: counts(),
                facts: RowFacts::Local {
                    dir: ".ctx/runs/20261201T101500Z-3f2a".into(),
                    sessions: 2,
                },
            }],
            ".ctx/runs".into(),
            false,
        )
    }

    fn shared() -> RunList {
        RunList::new(
            vec![RunRow {
                id: "20261201T101500Z-9c1d".into(),
                state: "running".into(),
                created_at: "2026-12-01T10:15:00Z".into(),
                plan: Some("plan\u{1b}[2J.yaml".into()),
                counts: counts(),
                facts: RowFacts::Shared {
                    finished_at: None,
                    engine: "command:./model.sh".into(),
                    plan_hash: "ab12".into(),
                    late_commits: 1,
                    reclaims: 2,
                },
            }],
            "postgres://ctx@db/ctx".into(),
            true,
        )
    }

    #[test]
    fn a_local_list() {
        let l = local();
        insta::assert_snapshot!(l.text());
        insta::assert_snapshot!(crate::json_text(&l.runs).unwrap());
    }

    /// A shared list adds LATE, escapes a plan path's control characters,
    /// and has the store's own keys after the common ones.
    #[test]
    fn a_shared_list() {
        let l = shared();
        insta::assert_snapshot!(l.text());
        insta::assert_snapshot!(crate::json_text(&l.runs).unwrap());
    }

    #[test]
    fn an_empty_list_says_where_it_looked() {
        let mut l = shared();
        l.runs.clear();
        assert_eq!(l.text(), "no runs in postgres://ctx@db/ctx\n");
        assert_eq!(crate::json_text(&l.runs).unwrap(), "[]\n");
    }

    /// Both stores list oldest first, whatever order they read in.
    #[test]
    fn runs_are_listed_oldest_first() {
        let mut newer = local().runs.remove(0);
        newer.id = "20261202T000000Z-0001".into();
        newer.created_at = "2026-12-02T00:00:00Z".into();
        let older = local().runs.remove(0);
        let l = RunList::new(vec![newer, older], ".ctx/runs".into(), false);
        let ids: Vec<&str> = l.runs.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["20261201T101500Z-3f2a", "20261202T000000Z-0001"]);
    }
}
