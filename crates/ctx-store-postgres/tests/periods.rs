//! The period-budget ledger against a real PostgreSQL (see tests/support).

mod support;

use ctx_model::money::Usd;
use ctx_store::period::{PeriodGrant, PeriodKey, PeriodState};
use ctx_store_postgres::{PgStore, StoreOptions, StoreUrl};

fn open(url: &str) -> PgStore {
    PgStore::open(
        &StoreUrl::parse(url, |_| None).unwrap(),
        StoreOptions::default(),
    )
    .unwrap()
}

fn d(s: &str) -> Usd {
    Usd::parse(s).unwrap()
}

/// Eight holders, each on its own connection, ask at once for $1 of a $3
/// budget: exactly three are granted (each hold sees the holds committed
/// before it). A settlement replaces a hold by what was spent, once, and
/// frees the rest for the next run; a period with no run is empty.
#[test]
fn concurrent_holds_never_pass_the_budget_and_a_settlement_counts_once() {
    let Some(url) = support::fresh_db("periods") else {
        return;
    };
    let key = PeriodKey {
        name: "nightly".into(),
        start: "2026-12-01".into(),
    };
    let rt = support::runtime();
    let first = open(&url);
    let empty = rt.block_on(first.period_state(&key, d("3"))).unwrap();
    assert_eq!(
        empty,
        PeriodState {
            spent: Usd::ZERO,
            held: Usd::ZERO,
            left: d("3")
        }
    );
    let stores: Vec<PgStore> = (0..8).map(|_| open(&url)).collect();
    let grants: Vec<PeriodGrant> = rt.block_on(async {
        let mut set = tokio::task::JoinSet::new();
        for (i, store) in stores.iter().enumerate() {
            let (store, key) = (store.clone(), key.clone());
            set.spawn(async move {
                store
                    .period_reserve(&key, d("3"), &format!("run{i}"), d("1"))
                    .await
                    .unwrap()
            });
        }
        set.join_all().await
    });
    let held = grants
        .iter()
        .filter(|g| matches!(g, PeriodGrant::Held(_)))
        .count();
    assert_eq!(held, 3, "{grants:?}");
    for g in &grants {
        if let PeriodGrant::Refused(s) = g {
            assert_eq!((s.held, s.left), (d("3"), Usd::ZERO));
        }
    }
    let holders: Vec<String> = (0..8).map(|i| format!("run{i}")).collect();
    rt.block_on(async {
        for h in &holders {
            // A holder without a hold settles nothing; one with a hold
            // settles at $0.25, and a second settlement adds nothing.
            first.period_settle(&key, h, d("0.25")).await.unwrap();
            first.period_settle(&key, h, d("0.25")).await.unwrap();
        }
    });
    let after = rt.block_on(first.period_state(&key, d("3"))).unwrap();
    assert_eq!(
        (after.spent, after.held, after.left),
        (d("0.75"), Usd::ZERO, d("2.25"))
    );
    // Another period of the same budget is whole.
    let next = PeriodKey {
        start: "2027-01-01".into(),
        ..key
    };
    assert_eq!(
        rt.block_on(first.period_state(&next, d("3")))
            .unwrap()
            .spent,
        Usd::ZERO
    );
}
