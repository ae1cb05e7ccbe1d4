//! [`RunRoot`]: the directory that holds runs (`.ctx/runs` by default) and
//! the cache index; resolving `RUN` arguments, listing, garbage collection.

use std::path::{Path, PathBuf};

use crate::cache::ResultCache;
use crate::error::{Error, Result};
use crate::id::is_run_id;
use crate::lock;
use crate::schema::STORE_FILE;
use crate::store::{NewRun, SqliteStore};
use crate::view::{RunState, RunView, StatusCounts};
use ctx_store::ResumePlan;

/// The default store root, relative to the working directory.
pub const DEFAULT_ROOT: &str = ".ctx/runs";

/// The directory holding run directories and `cache.sqlite`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRoot {
    path: PathBuf,
}

/// Where [`RunRoot::start`] puts the run `ctx run` is about to execute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartAt<'a> {
    /// A new run in `root/{new run id}` (the default).
    NewRun,
    /// A new run in this directory (`--run-dir DIR`).
    NewRunIn(&'a Path),
    /// Resume this run (`--resume RUN`: a run id or a run directory).
    Resume(&'a str),
}

/// One line of `ctx runs list`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunSummary {
    /// The run's id.
    pub id: String,
    /// Its directory.
    pub dir: PathBuf,
    /// The plan's path as given at the last session, else its `goal`.
    pub plan: Option<String>,
    /// When the run was created (RFC 3339, UTC).
    pub created_at: String,
    /// How many sessions (1 + resumes) it had.
    pub sessions: usize,
    /// Where it stands.
    pub state: RunState,
    /// Status counts over the plan's tasks.
    pub counts: StatusCounts,
}

/// A directory under the root that looks like a run but could not be read.
#[derive(Debug)]
pub struct UnreadableRun {
    /// The directory.
    pub dir: PathBuf,
    /// Why.
    pub error: Error,
}

/// What [`RunRoot::gc`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GcReport {
    /// Run ids removed (with their cache entries).
    pub removed: Vec<String>,
    /// Run ids kept because they are among the newest `keep`.
    pub kept: Vec<String>,
    /// Run ids that would have been removed but are being executed.
    pub running: Vec<String>,
    /// Runs that would have been removed but whose store cannot be read
    /// (corrupt, foreign, from a newer ctx), with why: kept, since what
    /// cannot be read cannot be judged disposable, unless `force`.
    pub unreadable: Vec<(String, String)>,
}

impl RunRoot {
    /// A root at `path` (nothing is created until a run is).
    pub fn new(path: impl Into<PathBuf>) -> RunRoot {
        RunRoot { path: path.into() }
    }

    /// The root's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Starts a new run in `root/{new run id}`.
    pub fn create(&self, new: &NewRun<'_>) -> Result<SqliteStore> {
        SqliteStore::create(&self.path, new)
    }

    /// Opens the store `ctx run` executes into: a new run, a new run in a
    /// given directory, or a resumed run (then with its [`ResumePlan`];
    /// give the executor `reuse_completed: true` and
    /// [`ResumePlan::forced_ids`] as `force_rerun`).
    pub fn start(
        &self,
        at: StartAt<'_>,
        new: &NewRun<'_>,
    ) -> Result<(SqliteStore, Option<ResumePlan>)> {
        match at {
            StartAt::NewRun => Ok((self.create(new)?, None)),
            StartAt::NewRunIn(dir) => Ok((SqliteStore::create_in(dir, new)?, None)),
            StartAt::Resume(run) => {
                let (store, plan) = SqliteStore::resume(&self.resolve(run)?, new)?;
                Ok((store, Some(plan)))
            }
        }
    }

    /// The directory `run` names: `root/run` when that is a directory (a
    /// run id), else `run` itself as a path when it is a directory, else
    /// [`Error::NotFound`].
    pub fn resolve(&self, run: &str) -> Result<PathBuf> {
        let under = self.path.join(run);
        if !run.is_empty() && under.is_dir() {
            return Ok(under);
        }
        let as_path = PathBuf::from(run);
        if !run.is_empty() && as_path.is_dir() {
            return Ok(as_path);
        }
        Err(Error::NotFound {
            run: run.to_string(),
            root: self.path.clone(),
        })
    }

    /// Opens `run` (id or directory) read-only.
    pub fn open(&self, run: &str) -> Result<RunView> {
        RunView::open(&self.resolve(run)?)
    }

    /// Opens the cache index `root/cache.sqlite`, creating it if needed.
    pub fn cache(&self) -> Result<ResultCache> {
        std::fs::create_dir_all(&self.path).map_err(Error::io(&self.path))?;
        ResultCache::open(&self.path.join(crate::cache::CACHE_FILE))
    }

    /// Opens the period-budget ledger `root/budgets.sqlite`, creating it
    /// if needed.
    pub fn period_ledger(&self) -> Result<crate::PeriodLedger> {
        std::fs::create_dir_all(&self.path).map_err(Error::io(&self.path))?;
        crate::PeriodLedger::open(&self.path.join(crate::BUDGET_FILE))
    }

    /// Every run directly under the root (directories holding a
    /// `store.sqlite`), oldest first by id, plus the ones that could not be
    /// read. A missing root has no runs.
    pub fn list(&self) -> Result<(Vec<RunSummary>, Vec<UnreadableRun>)> {
        let mut ok = Vec::new();
        let mut bad = Vec::new();
        for dir in self.run_dirs(|d| d.join(STORE_FILE).is_file())? {
            match summarize(&dir) {
                Ok(s) => ok.push(s),
                // A run being created right now: its schema is not
                // committed yet, but its lock is held. Not an error.
                Err(_) if lock::probe(&dir).is_some() => {}
                Err(error) => bad.push(UnreadableRun { dir, error }),
            }
        }
        ok.sort_by(|a: &RunSummary, b| a.id.cmp(&b.id));
        Ok((ok, bad))
    }

    /// Every run under the root opened read-only, one at a time as the
    /// iterator is advanced (so a thousand runs never hold a thousand open
    /// databases), in the order of [`list`](Self::list); a run that cannot
    /// be opened is an [`UnreadableRun`], and one being created right now
    /// (its lock held, its schema not committed yet) is left out, as `list`
    /// leaves it out. A missing root has no runs. `ctx spend` reads
    /// through it.
    pub fn open_each(
        &self,
    ) -> Result<impl Iterator<Item = std::result::Result<RunView, UnreadableRun>>> {
        let dirs = self.run_dirs(|d| d.join(STORE_FILE).is_file())?;
        Ok(dirs
            .into_iter()
            .filter_map(|dir| match RunView::open(&dir) {
                Ok(view) => Some(Ok(view)),
                Err(_) if lock::probe(&dir).is_some() => None,
                Err(error) => Some(Err(UnreadableRun { dir, error })),
            }))
    }

    /// Removes all but the newest `keep` runs (by id, i.e. creation time),
    /// with their cache entries. Only directories whose name is a run id
    /// are considered (a `--run-dir` elsewhere is never touched); a run
    /// whose lock is held is never removed. A run whose store cannot be
    /// read (a newer ctx's, a damaged one someone may want to rescue) is
    /// kept and listed in [`GcReport::unreadable`] unless `force`. Each
    /// removal happens while holding the run's lock, so a resume cannot
    /// start on it meanwhile.
    pub fn gc(&self, keep: usize, force: bool) -> Result<GcReport> {
        let mut ids: Vec<(String, PathBuf)> = self
            .run_dirs(|d| {
                d.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(is_run_id)
            })?
            .into_iter()
            .filter_map(|d| Some((d.file_name()?.to_str()?.to_string(), d)))
            .collect();
        ids.sort();
        ids.reverse();
        let mut report = GcReport::default();
        let cache_path = self.path.join(crate::cache::CACHE_FILE);
        let cache = if cache_path.is_file() {
            Some(ResultCache::open(&cache_path)?)
        } else {
            None
        };
        for (i, (id, dir)) in ids.into_iter().enumerate() {
            if i < keep {
                report.kept.push(id);
                continue;
            }
            // Read before the lock is taken: opening an older store
            // migrates it, which takes the lock itself.
            if !force {
                let readable = RunView::open(&dir).and_then(|view| view.plan().map(drop));
                if let Err(e) = readable {
                    if lock::try_take(&dir)?.is_none() {
                        // Being created or run right now: not unreadable.
                        report.running.push(id);
                    } else {
                        report.unreadable.push((id, e.to_string()));
                    }
                    continue;
                }
            }
            let Some(lock) = lock::try_take(&dir)? else {
                report.running.push(id);
                continue;
            };
            if let Some(cache) = &cache {
                cache.remove_run(&id)?;
            }
            std::fs::remove_dir_all(&dir).map_err(Error::io(&dir))?;
            drop(lock);
            report.removed.push(id);
        }
        report.kept.reverse();
        report.removed.reverse();
        report.running.reverse();
        report.unreadable.reverse();
        Ok(report)
    }

    fn run_dirs(&self, keep: impl Fn(&Path) -> bool) -> Result<Vec<PathBuf>> {
        let entries = match std::fs::read_dir(&self.path) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(Error::io(&self.path)(e)),
        };
        let mut out = Vec::new();
        for entry in entries {
            let entry = entry.map_err(Error::io(&self.path))?;
            let path = entry.path();
            if path.is_dir() && keep(&path) {
                out.push(path);
            }
        }
        out.sort();
        Ok(out)
    }
}

impl Default for RunRoot {
    fn default() -> Self {
        RunRoot::new(DEFAULT_ROOT)
    }
}

fn summarize(dir: &Path) -> Result<RunSummary> {
    let view = RunView::open(dir)?;
    let sessions = view.sessions()?;
    let plan = view.plan()?;
    Ok(RunSummary {
        id: view.run_id().to_string(),
        dir: dir.to_path_buf(),
        plan: sessions
            .last()
            .and_then(|s| s.plan_source.clone())
            .or(plan.goal),
        created_at: view.created_at()?,
        sessions: sessions.len(),
        state: view.state()?,
        counts: view.status_counts()?,
    })
}
