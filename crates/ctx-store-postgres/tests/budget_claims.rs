//! A budget's reservation taken by the claim itself (schema 12), its
//! top-up, its settlement, the wake-up of a task waiting for the budget,
//! and the budget's purses (schema 13), against a real PostgreSQL (see
//! tests/support).

mod support;

use std::time::Duration;

use ctx_model::money::Usd;
use ctx_model::{TaskExecutionResult, TaskStatus};
use ctx_store_postgres::{
    Claim, Commit, PgStore, RegisterRun, Reopen, Reservation, StoreOptions, StoreUrl,
};
use ctx_test_support::plan;

const LEASE: Duration = Duration::from_secs(30);

fn open(url: &str) -> PgStore {
    PgStore::open(
        &StoreUrl::parse(url, |_| None).unwrap(),
        StoreOptions::default(),
    )
    .unwrap()
}

/// `id` completed at `picos`.
fn cost(id: &str, picos: u128) -> TaskExecutionResult {
    let mut r = TaskExecutionResult::new(id, TaskStatus::Completed);
    r.output = format!("out {id}");
    r.metadata.cost_usd = Some(Usd::from_picos(picos));
    r
}

/// Independent tasks `a`, `b`, ... (first claimed first), registered
/// under `budget` with each task's recorded high end.
fn register(
    rt: &tokio::runtime::Runtime,
    store: &PgStore,
    highs: &[Option<u128>],
    budget: u128,
) -> (ctx_model::Plan, String) {
    let ids: Vec<String> = (0..highs.len())
        .map(|i| match u8::try_from(i).ok().filter(|&i| i < 26) {
            Some(i) if highs.len() <= 26 => char::from(b'a' + i).to_string(),
            _ => format!("t{i:04}"),
        })
        .collect();
    let tasks: Vec<(&str, &[&str])> = ids.iter().map(|i| (i.as_str(), &[][..])).collect();
    let p = plan(&tasks);
    let priorities: Vec<u64> = (0..highs.len() as u64).rev().collect();
    let highs: Vec<Option<Usd>> = highs.iter().map(|h| h.map(Usd::from_picos)).collect();
    let run = rt
        .block_on(store.register_run(&RegisterRun {
            plan: &p,
            priorities: &priorities,
            engine: "dry-run",
            plan_source: None,
            inputs: None,
            budget: Some(Usd::from_picos(budget)),
            highs: &highs,
        }))
        .unwrap();
    (p, run)
}

/// The next task of `run`, claimed by `w`.
fn claim(rt: &tokio::runtime::Runtime, store: &PgStore, run: &str) -> Claim {
    rt.block_on(store.claim(Some(run), "w", LEASE))
        .unwrap()
        .unwrap()
}

/// The run's `budget_wait` flag, read by hand: whether any of its
/// purses is marked.
fn budget_wait(url: &str, run: &str) -> Option<bool> {
    support::with_client(url, async |c| {
        c.query_one(
            "SELECT bool_or(budget_wait) FROM ctx_budget_purses WHERE run_id = $1",
            &[&run],
        )
        .await
        .unwrap()
        .get(0)
    })
}

/// The claim reserves the high ends its tasks recorded, all of a run's
/// at once and only while they fit; a task claimed without one (none
/// recorded, or no room) reserves with `reserve` as before; each commit
/// settles its claim's reservation once, retried or not.
#[test]
fn a_claim_reserves_the_recorded_high_ends_while_they_fit() {
    let Some(url) = support::fresh_db("claim_reserves") else {
        return;
    };
    let store = open(&url);
    let rt = support::runtime();
    let (_, run) = register(&rt, &store, &[Some(4), Some(4), Some(4), None], 10);
    let held = || rt.block_on(store.budget(&run)).unwrap().unwrap().1;
    let usd = Usd::from_picos;
    let two: Vec<Claim> = rt
        .block_on(store.claim_many(Some(&run), "w", LEASE, 2))
        .unwrap()
        .into_iter()
        .map(|c| c.claim)
        .collect();
    assert_eq!(
        two.iter().map(|c| c.reserved).collect::<Vec<_>>(),
        [Some(usd(4)), Some(usd(4))]
    );
    assert_eq!(held(), usd(8));
    // `c`'s 4 does not fit beside them: claimed with nothing reserved.
    let c = claim(&rt, &store, &run);
    assert_eq!((c.task_id.as_str(), c.reserved), ("c", None));
    assert_eq!(held(), usd(8));
    // `a` commits at 1: its 4 settled once, however often it is sent.
    for _ in 0..2 {
        rt.block_on(store.complete(&two[0], &cost("a", 1))).unwrap();
        assert_eq!(held(), usd(5));
    }
    // `c` reserves by hand now that there is room.
    assert_eq!(
        rt.block_on(store.reserve(&c, usd(4))).unwrap(),
        Reservation::Reserved
    );
    assert_eq!(held(), usd(9));
    // `d` recorded no high end: its claim reserves nothing.
    let d = claim(&rt, &store, &run);
    assert_eq!((d.task_id.as_str(), d.reserved), ("d", None));
    assert_eq!(held(), usd(9));
    for (claim, id) in [(&two[1], "b"), (&c, "c")] {
        assert_eq!(
            rt.block_on(store.complete(claim, &cost(id, 2))).unwrap(),
            Commit::Committed
        );
    }
    assert_eq!(held(), usd(5), "1 + 2 + 2");
}

/// A worker whose high end is larger than the recorded one tops the
/// claim's reservation up to it; one that does not fit gives back what
/// the claim reserved (nothing ran under it), and `release_for_budget`
/// leaves nothing held either. A resume records the high ends anew.
#[test]
fn a_claims_reservation_is_topped_up_or_given_back_whole() {
    let Some(url) = support::fresh_db("claim_top_up") else {
        return;
    };
    let store = open(&url);
    let rt = support::runtime();
    let (p, run) = register(&rt, &store, &[Some(3), Some(3)], 10);
    let held = || rt.block_on(store.budget(&run)).unwrap().unwrap().1;
    let usd = Usd::from_picos;
    let claim = || claim(&rt, &store, &run);
    let a = claim();
    assert_eq!(a.reserved, Some(usd(3)));
    assert_eq!(
        rt.block_on(store.reserve(&a, usd(5))).unwrap(),
        Reservation::Reserved
    );
    assert_eq!(held(), usd(5), "topped up from 3 to 5");
    let b = claim();
    assert_eq!(held(), usd(8));
    // b's worker asks for 6: 5 + 6 > 10, and a's 5 may settle at less.
    assert_eq!(
        rt.block_on(store.reserve(&b, usd(6))).unwrap(),
        Reservation::Full { waiting: true }
    );
    assert_eq!(held(), usd(5), "b's 3 given back");
    assert_eq!(budget_wait(&url, &run), Some(true));
    assert!(rt.block_on(store.release_for_budget(&b)).unwrap());
    assert_eq!(held(), usd(5));
    // a's commit settles its topped-up 5 at its cost, and wakes b.
    rt.block_on(store.complete(&a, &cost("a", 1))).unwrap();
    assert_eq!(held(), usd(1));
    assert_eq!(budget_wait(&url, &run), Some(false));
    // A claim given back for the budget with its reservation still
    // held gives it back too.
    let b = claim();
    assert_eq!((b.task_id.as_str(), b.reserved), ("b", Some(usd(3))));
    assert_eq!(held(), usd(4));
    assert!(rt.block_on(store.release_for_budget(&b)).unwrap());
    assert_eq!(held(), usd(1));
    // A resume records the high ends it is given.
    rt.block_on(store.reopen_run(
        &run,
        &Reopen {
            plan: &p,
            priorities: &[1, 0],
            engine: "dry-run",
            plan_source: None,
            rerun: &[],
            keep: &[],
            fresh: &[],
            inputs: None,
            budget: Some(usd(10)),
            highs: &[Some(usd(2)), Some(usd(7))],
        },
    ))
    .unwrap();
    let b = claim();
    assert_eq!((b.task_id.as_str(), b.reserved), ("b", Some(usd(7))));
    assert_eq!(held(), usd(8));
}

/// A commit under a budget wakes the idle workers only when a task
/// waits for the budget: the reservation that did not fit marks the
/// run, the next settling commit notifies once and clears the mark.
#[test]
fn a_budgeted_commit_wakes_workers_only_when_a_task_waits_for_budget() {
    let Some(url) = support::fresh_db("budget_wake") else {
        return;
    };
    let store = open(&url);
    let rt = support::runtime();
    let (_, run) = register(&rt, &store, &[Some(4), Some(4), Some(4), Some(4)], 9);
    let listener = store.listen();
    let woke = |limit: Duration| {
        rt.block_on(async { tokio::time::timeout(limit, listener.ready()).await.is_ok() })
    };
    assert!(woke(Duration::from_secs(10)), "no wake-up on connecting");
    let claim = || claim(&rt, &store, &run);
    let (a, b) = (claim(), claim());
    while woke(Duration::from_millis(300)) {}
    // Nobody waits: a's commit settles its reservation silently.
    rt.block_on(store.complete(&a, &cost("a", 4))).unwrap();
    assert!(
        !woke(Duration::from_millis(500)),
        "a commit nobody waits on"
    );
    assert_eq!(budget_wait(&url, &run), None);
    // c does not fit beside b (4 + 4 + 4 > 9) and waits.
    let c = claim();
    assert_eq!(c.reserved, None);
    assert_eq!(
        rt.block_on(store.reserve(&c, Usd::from_picos(4))).unwrap(),
        Reservation::Full { waiting: true }
    );
    assert!(rt.block_on(store.release_for_budget(&c)).unwrap());
    assert!(
        !woke(Duration::from_millis(500)),
        "given back for the budget"
    );
    rt.block_on(store.complete(&b, &cost("b", 1))).unwrap();
    assert!(
        woke(Duration::from_secs(5)),
        "no wake-up when b's commit made room for c"
    );
    // Woken once: the next settling commit is silent again.
    let c = claim();
    assert_eq!(
        (c.task_id.as_str(), c.reserved),
        ("c", Some(Usd::from_picos(4)))
    );
    while woke(Duration::from_millis(300)) {}
    rt.block_on(store.complete(&c, &cost("c", 1))).unwrap();
    assert!(!woke(Duration::from_millis(500)), "woken twice");
    assert_eq!(budget_wait(&url, &run), None);
}

/// Each purse's share and what it holds, in purse order, read by hand.
fn purses(url: &str, run: &str) -> Vec<(u128, u128)> {
    support::with_client(url, async |c| purses_of(c, run).await)
}

/// [`purses`], on a client of the caller's.
async fn purses_of(c: &tokio_postgres::Client, run: &str) -> Vec<(u128, u128)> {
    c.query(
        "SELECT share_picos::text, held_picos::text FROM ctx_budget_purses
          WHERE run_id = $1 ORDER BY purse",
        &[&run],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| {
        let n = |i: usize| r.get::<_, String>(i).parse::<u128>().unwrap();
        (n(0), n(1))
    })
    .collect()
}

/// A budget that holds many high ends is split into purses whose shares
/// sum to it; a claim reserves in one purse within its share; a
/// reservation that fits no single purse but fits the run locks them
/// all, is taken, and splits what is left evenly again; one that does
/// not fit the run is refused.
#[test]
fn a_reservation_that_fits_no_purse_alone_splits_the_runs_slack_again() {
    let Some(url) = support::fresh_db("purse_split") else {
        return;
    };
    let store = open(&url);
    let rt = support::runtime();
    // 85 holds the high end 10 eight times: two purses of four.
    let (_, run) = register(&rt, &store, &[Some(10); 8], 85);
    let split = purses(&url, &run);
    assert_eq!(split, vec![(43, 0), (42, 0)], "shares sum to the budget");
    let claims: Vec<Claim> = (0..8).map(|_| claim(&rt, &store, &run)).collect();
    assert!(
        claims
            .iter()
            .all(|c| c.reserved == Some(Usd::from_picos(10)))
    );
    assert_eq!(purses(&url, &run), vec![(43, 40), (42, 40)]);
    // 4 more fits the run (80 + 4 ≤ 85), and no purse alone (3 and 2 left).
    assert_eq!(
        rt.block_on(store.reserve(&claims[0], Usd::from_picos(14)))
            .unwrap(),
        Reservation::Reserved
    );
    let after = purses(&url, &run);
    assert_eq!(after.iter().map(|p| p.1).sum::<u128>(), 84);
    assert_eq!(
        after.iter().map(|p| p.0).sum::<u128>(),
        85,
        "shares {after:?}"
    );
    assert!(after.iter().all(|(share, held)| held <= share));
    // 2 more does not fit the run: refused, and the claim's 10 given back.
    assert_eq!(
        rt.block_on(store.reserve(&claims[1], Usd::from_picos(12)))
            .unwrap(),
        Reservation::Full { waiting: true }
    );
    assert_eq!(
        rt.block_on(store.budget(&run)).unwrap().unwrap().1,
        Usd::from_picos(74)
    );
    // Commits settle in the purse their claim reserved in.
    for c in &claims[2..] {
        rt.block_on(store.complete(c, &cost(&c.task_id, 1)))
            .unwrap();
    }
    assert_eq!(
        rt.block_on(store.budget(&run)).unwrap().unwrap().1,
        Usd::from_picos(20)
    );
}

/// Many claimers, each with its own connection, under a budget split
/// into the most purses that binds: every task costs its whole high end,
/// so exactly the budget's worth of tasks runs, and the purses never
/// hold more than the budget together, whichever purse each claim found
/// free.
#[test]
fn many_claimers_spend_exactly_the_budget_across_purses() {
    let Some(url) = support::fresh_db("purse_claimers") else {
        return;
    };
    let rt = support::runtime();
    let store = open(&url);
    // 1,000 holds the high end 10 a hundred times: 16 purses.
    let (_, run) = register(&rt, &store, &[Some(10); 160], 1_000);
    assert_eq!(purses(&url, &run).len(), 16);
    let ran: usize = std::thread::scope(|s| {
        let workers: Vec<_> = (0..8)
            .map(|w| {
                let (url, run) = (&url, &run);
                s.spawn(move || {
                    let store = open(url);
                    let rt = support::runtime();
                    let mut ran = 0;
                    while let Some(c) = rt
                        .block_on(store.claim(Some(run), &format!("w{w}"), LEASE))
                        .unwrap()
                    {
                        if c.reserved.is_none() {
                            let r = rt.block_on(store.reserve(&c, Usd::from_picos(10))).unwrap();
                            if r != Reservation::Reserved {
                                assert!(rt.block_on(store.release_for_budget(&c)).unwrap());
                                break;
                            }
                        }
                        rt.block_on(store.complete(&c, &cost(&c.task_id, 10)))
                            .unwrap();
                        ran += 1;
                    }
                    ran
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).sum()
    });
    assert_eq!(ran, 100, "the budget's worth of tasks");
    let held = rt.block_on(store.budget(&run)).unwrap().unwrap().1;
    assert_eq!(held, Usd::from_picos(1_000));
}

/// One step of [`the_purses_hold_exactly_what_claims_reserved_and_commits_settled`].
#[derive(Debug, Clone)]
enum Step {
    /// Worker `w` claims the next task, and reserves the task's high end
    /// when the claim reserved nothing (gives it back when that does not
    /// fit).
    Claim(u8),
    /// The `i`-th live claim (modulo) tops its reservation up by `extra`.
    TopUp(usize, u128),
    /// The `i`-th live claim commits at `percent` % of its reservation.
    Commit(usize, u128),
}

fn step() -> impl proptest::strategy::Strategy<Value = Step> {
    use proptest::prelude::*;
    prop_oneof![
        3 => (0u8..6).prop_map(Step::Claim),
        1 => (any::<usize>(), 1u128..40).prop_map(|(i, e)| Step::TopUp(i, e)),
        2 => (any::<usize>(), 0u128..=100).prop_map(|(i, p)| Step::Commit(i, p)),
    ]
}

/// Checks a run's `purses` against the books kept beside them: they
/// hold exactly what the live claims reserved plus what the commits
/// settled, never more than the budget; each holds within its share, and
/// the shares sum to the budget.
fn check_books(purses: &[(u128, u128)], budget: u128, live: &[(Claim, u128)], settled: u128) {
    let held: u128 = purses.iter().map(|p| p.1).sum();
    let reserved: u128 = live.iter().map(|l| l.1).sum();
    assert_eq!(held, reserved + settled, "purses {purses:?}");
    assert!(held <= budget, "held {held} of {budget}: {purses:?}");
    assert!(
        purses.iter().all(|(share, held)| held <= share),
        "{purses:?}"
    );
    assert_eq!(
        purses.iter().map(|p| p.0).sum::<u128>(),
        budget,
        "{purses:?}"
    );
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 24, ..Default::default() })]

    /// Any interleaving of claims by several workers (each starting at
    /// its own purse), top-ups and commits at any cost up to the
    /// reservation: the run's purses hold exactly the live reservations
    /// plus the settled costs, never more than the budget.
    #[test]
    fn the_purses_hold_exactly_what_claims_reserved_and_commits_settled(
        budget in 20u128..2_000,
        highs in proptest::collection::vec(1u128..30, 30),
        steps in proptest::collection::vec(step(), 1..60),
    ) {
        static DB: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
        let Some(url) = DB.get_or_init(|| support::fresh_db("purse_books")).clone() else {
            return Ok(());
        };
        let store = open(&url);
        let rt = support::runtime();
        let recorded: Vec<Option<u128>> = highs.iter().copied().map(Some).collect();
        let (_, run) = register(&rt, &store, &recorded, budget);
        let (client, _driver) = rt.block_on(support::connect(&url));
        let mut live: Vec<(Claim, u128)> = Vec::new();
        let mut settled = 0;
        for s in steps {
            match s {
                Step::Claim(w) => {
                    let Some(c) = rt.block_on(store.claim(Some(&run), &format!("w{w}"), LEASE)).unwrap() else {
                        continue;
                    };
                    let high = highs[c.task_id[1..].parse::<usize>().unwrap()];
                    match c.reserved {
                        Some(r) => live.push((c, r.picos())),
                        None => match rt.block_on(store.reserve(&c, Usd::from_picos(high))).unwrap() {
                            Reservation::Reserved => live.push((c, high)),
                            _ => assert!(rt.block_on(store.release_for_budget(&c)).unwrap()),
                        },
                    }
                }
                Step::TopUp(i, extra) if !live.is_empty() => {
                    let i = i % live.len();
                    let to = live[i].1 + extra;
                    match rt.block_on(store.reserve(&live[i].0, Usd::from_picos(to))).unwrap() {
                        Reservation::Reserved => live[i].1 = to,
                        _ => {
                            let (c, _) = live.remove(i);
                            assert!(rt.block_on(store.release_for_budget(&c)).unwrap());
                        }
                    }
                }
                Step::Commit(i, percent) if !live.is_empty() => {
                    let (c, r) = live.remove(i % live.len());
                    let spent = r * percent / 100;
                    rt.block_on(store.complete(&c, &cost(&c.task_id, spent))).unwrap();
                    settled += spent;
                }
                _ => {}
            }
            let purses = rt.block_on(purses_of(&client, &run));
            check_books(&purses, budget, &live, settled);
        }
    }
}
