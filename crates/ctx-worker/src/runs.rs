//! A shared store's runs as `ctx runs` reads and prunes them, and the
//! reads `ctx run --store URL` makes before a resume: the store opened
//! from its URL, the listing and page in the shapes ctx-run gives a local
//! store's ([`ctx_run::list`], [`ctx_run::show`]), the stored plan, the
//! resume decisions.

use ctx_model::Plan;
use ctx_run::list::{RowFacts, RunList, RunRow};
use ctx_run::show::StoreFacts;
use ctx_store::{ResumePlan, RunHistory};
use ctx_store_postgres::{
    Error as PgError, GcReport, PgRunView, PgStore, RunInfo, StoreOptions, StoreUrl,
};

use crate::shared::SharedError;

/// Opens the store at `url`, the PG* variables filling what it leaves
/// out. Blocks. The store runs its statements on the runtime this is
/// called in (the process's one, when it is multi-threaded: `ctx` enters
/// its own before opening), else on a small one of its own.
pub fn open(url: &str) -> Result<PgStore, PgError> {
    let parsed = StoreUrl::parse(url, |k| std::env::var(k).ok())?;
    let options = StoreOptions {
        runtime: tokio::runtime::Handle::try_current().ok(),
        ..StoreOptions::default()
    };
    PgStore::open(&parsed, options)
}

/// Every run of the store at `url`, as `ctx runs list` shows them.
pub async fn list(url: &str) -> Result<RunList, SharedError> {
    let store = open_off_runtime(url).await?;
    let runs = store.runs(None).await?;
    Ok(RunList::new(
        runs.into_iter().map(row).collect(),
        store.display_url().to_string(),
        true,
    ))
}

fn row(r: RunInfo) -> RunRow {
    RunRow {
        state: r.listed_state().to_string(),
        id: r.run_id,
        created_at: r.created_at,
        plan: r.plan_source,
        counts: r.counts,
        facts: RowFacts::Shared {
            finished_at: r.finished_at,
            engine: r.engine,
            plan_hash: r.plan_hash,
            late_commits: r.late_commits,
            reclaims: r.reclaims,
        },
    }
}

/// The run `run_id` of the store at `url` read through the seam both
/// stores share, and the facts only a shared store has (its claims in
/// place of sessions): what `ctx runs show` prints.
pub async fn show(url: &str, run_id: &str) -> Result<(PgRunView, StoreFacts), SharedError> {
    let store = open_off_runtime(url).await?;
    let info = store.runs(Some(run_id)).await?;
    let rows = store.tasks(run_id).await?;
    let info = info.into_iter().next().ok_or_else(|| PgError::NoRun {
        url: store.display_url().to_string(),
        run_id: run_id.to_string(),
    })?;
    let facts = StoreFacts::Shared {
        created_at: info.created_at,
        late_commits: info.late_commits,
        reclaims: info.reclaims,
        claims: rows.into_iter().map(|r| (r.task_id, r.attempt)).collect(),
    };
    let view = tokio::task::spawn_blocking({
        let run_id = run_id.to_string();
        move || store.view(&run_id)
    })
    .await??;
    Ok((view, facts))
}

/// The run `run_id` of the store at `url`, for reading through the seam
/// both stores share (`ctx runs report|export`, resume planning). Blocks.
pub fn view(url: &str, run_id: &str) -> Result<PgRunView, PgError> {
    open(url)?.view(run_id)
}

/// `ctx runs approve/reject RUN TASK --store URL`: the decision recorded
/// with the shared run `run_id` (from any machine: an approval wakes the
/// workers, which then claim the task), or why not (the store's
/// `Error::Decision`, nothing written).
pub async fn decide(
    url: &str,
    run_id: &str,
    req: &ctx_store::DecisionRequest,
) -> Result<ctx_model::approval::Decision, SharedError> {
    let store = open_off_runtime(url).await?;
    Ok(store.decide(run_id, req).await?)
}

/// The store at `url` and the ids of its runs, oldest first (by creation
/// time, then id, as [`list`] orders them), for reading each through the
/// seam both stores share with [`PgStore::view`] (off the runtime): what
/// `ctx spend --store URL` sums.
pub async fn run_ids(url: &str) -> Result<(PgStore, Vec<String>), SharedError> {
    let store = open_off_runtime(url).await?;
    let mut runs = store.runs(None).await?;
    runs.sort_by(|a, b| (&a.created_at, &a.run_id).cmp(&(&b.created_at, &b.run_id)));
    Ok((store, runs.into_iter().map(|r| r.run_id).collect()))
}

/// Removes the closed runs beyond the newest `keep` (and the open ones
/// too with `force`): `ctx runs gc --store URL`.
pub async fn gc(url: &str, keep: usize, force: bool) -> Result<GcReport, SharedError> {
    let store = open_off_runtime(url).await?;
    Ok(store.gc(keep, force).await?)
}

/// The plan stored for `run_id` and the path it was given as, for a
/// resume without a plan file: for a run whose plan was filled, the plan
/// before filling, with what filled it (`inputs`), filled again by the
/// resume.
pub async fn stored_plan(url: &str, run_id: &str) -> Result<ctx_run::StoredPlan, SharedError> {
    let store = open_off_runtime(url).await?;
    let inputs = store.inputs(run_id).await?;
    // The stored plan has the items of its expanded maps appended; a
    // resume starts from the plan as written.
    let plan = match &inputs {
        Some(i) => i.plan.clone(),
        None => ctx_model::map::without_items(&store.plan(run_id).await?),
    };
    let source = store
        .runs(Some(run_id))
        .await?
        .into_iter()
        .next()
        .and_then(|r| r.plan_source);
    Ok(ctx_run::StoredPlan {
        plan,
        run_id: run_id.to_string(),
        source,
        inputs,
    })
}

/// What `run_id`'s plan was filled from, for a resume given the plan file
/// (`None`: nothing to fill).
pub async fn stored_inputs(
    url: &str,
    run_id: &str,
) -> Result<Option<ctx_store::RunInputs>, SharedError> {
    let store = open_off_runtime(url).await?;
    Ok(store.inputs(run_id).await?)
}

/// What a resume of `run_id` with `plan` on the engine `label`, forcing
/// `rerun` (`--rerun`, [`ResumePlan::force`]), would reuse and run again,
/// and why; nothing is written. Blocks.
pub fn resume_plan(
    url: &str,
    run_id: &str,
    plan: &Plan,
    label: &str,
    rerun: &[String],
) -> Result<ResumePlan, SharedError> {
    let view = view(url, run_id)?;
    // The stored plan is redacted: compare like with like.
    let plan = ctx_store::redact_plan(plan);
    let mut decided = view.resume_plan(&plan, label)?;
    decided.force(&plan, rerun);
    Ok(decided)
}

/// [`open`] on the blocking pool.
async fn open_off_runtime(url: &str) -> Result<PgStore, SharedError> {
    let url = url.to_string();
    Ok(tokio::task::spawn_blocking(move || open(&url)).await??)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A shared run's row says what only a shared store knows (engine,
    /// plan hash, late commits, reclaims, when it finished) and its state
    /// as the listing spells it.
    #[test]
    fn a_listed_run_keeps_the_shared_stores_facts() {
        let mut counts = ctx_store::StatusCounts::default();
        counts.add(ctx_model::TaskStatus::Completed);
        counts.add(ctx_model::TaskStatus::Failed);
        let info = RunInfo {
            run_id: "r1".into(),
            created_at: "2026-01-01T00:00:00Z".into(),
            finished_at: Some("2026-01-01T00:01:00Z".into()),
            open: false,
            engine: "command".into(),
            plan_source: Some("plan.yaml".into()),
            plan_hash: "abc".into(),
            task_count: 2,
            counts,
            late_commits: 1,
            reclaims: 2,
        };
        let state = info.listed_state().to_string();
        let r = row(info);
        assert_eq!((r.id.as_str(), r.state.as_str()), ("r1", state.as_str()));
        assert_eq!(r.plan.as_deref(), Some("plan.yaml"));
        assert_eq!(r.counts, counts);
        let RowFacts::Shared {
            finished_at,
            engine,
            plan_hash,
            late_commits,
            reclaims,
        } = r.facts
        else {
            panic!("a shared row")
        };
        assert_eq!(finished_at.as_deref(), Some("2026-01-01T00:01:00Z"));
        assert_eq!((engine.as_str(), plan_hash.as_str()), ("command", "abc"));
        assert_eq!((late_commits, reclaims), (1, 2));
    }

    /// A URL that cannot be read is the store's error, before any
    /// connection is tried.
    #[test]
    fn a_bad_url_is_refused_without_connecting() {
        let e = open("postgres://u:hunter2@h:notaport/d").unwrap_err();
        assert!(matches!(e, PgError::Url { .. }), "{e:?}");
        assert!(!e.to_string().contains("hunter2"), "{e}");
    }
}
