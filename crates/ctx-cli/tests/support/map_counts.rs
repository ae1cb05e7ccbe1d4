//! A map task's item counts as every output shows them (`map: {items,
//! completed, failed}`), asserted once for both stores: run_map.rs runs
//! the map in a run directory, shared_map.rs on the shared store.

use ctx_test_support::{Dir, task};

/// Asserts that map task `scan` of run `id` (read with `store`, the flags
/// that name its store) shows `items`, `completed`, `failed` in `ctx runs
/// show` (its ITEMS column, `N (F failed)`, and its JSON) and `ctx runs
/// export` (JSON and CSV), and that task `src`, no map, shows none.
pub fn assert_shown(
    dir: &Dir,
    id: &str,
    store: &[&str],
    (items, completed, failed): (u64, u64, u64),
) {
    let counts = serde_json::json!({"items": items, "completed": completed, "failed": failed});
    let cmd = |args: &[&str]| {
        let mut all: Vec<&str> = args.to_vec();
        all.push(id);
        all.extend_from_slice(store);
        let out = dir.run(&all);
        assert_eq!(out.code, 0, "{all:?}: {}", out.stderr);
        out
    };
    let shown = cmd(&["runs", "show"]);
    let row: Vec<&str> = shown
        .stdout
        .lines()
        .find(|l| l.starts_with("scan "))
        .unwrap_or_else(|| panic!("scan in {}", shown.stdout))
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    let cell = match failed {
        0 => items.to_string(),
        f => format!("{items} ({f} failed)"),
    };
    assert!(shown.stdout.contains("  ITEMS  "), "{}", shown.stdout);
    assert_eq!(row[2], cell, "{}", shown.stdout);
    for args in [
        ["runs", "show", "--format", "json"],
        ["runs", "export", "--format", "json"],
    ] {
        let json = cmd(&args).json();
        assert_eq!(task(&json, "scan")["map"], counts, "{args:?}");
        assert!(task(&json, "src").get("map").is_none(), "{args:?}");
    }
    let csv = cmd(&["runs", "export", "--format", "csv"]).stdout;
    let mut lines = csv.lines();
    let header = lines.next().unwrap();
    assert!(
        header.ends_with(",error,map_items,map_completed,map_failed,service_tier,batch_id,call_service_tier,tier_fallback"),
        "{header}"
    );
    let scan: Vec<&str> = lines.filter(|l| l.contains(",scan,")).collect();
    assert_eq!(scan.len(), 1, "{csv}");
    assert!(
        scan[0].ends_with(&format!(",{items},{completed},{failed},,,,")),
        "{}",
        scan[0]
    );
    let src = csv.lines().find(|l| l.contains(",src,")).unwrap();
    assert!(src.ends_with(",,,,,"), "{src}");
}
