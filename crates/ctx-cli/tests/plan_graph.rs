//! `ctx plan graph`: mermaid, dot and json renderings of a plan's DAG.

use ctx_test_support::{run, write};
use serde_json::Value;

fn graph(args: &[&str]) -> (i32, String, String) {
    run(&[&["plan", "graph"], args].concat())
}

const DIAMOND: &str = r#"{"schema_version": 1, "sub_tasks": [
  {"id": "a", "description": "Start", "tool_or_prompt": {"name": "inference", "params": {"prompt": "p", "estimated_ms": 10}}},
  {"id": "b", "description": "Quick \"side\"", "dependencies": ["a"], "tool_or_prompt": {"name": "inference", "params": {"prompt": "p", "estimated_ms": 10}}},
  {"id": "c", "description": "Slow side", "dependencies": ["a"], "tool_or_prompt": {"name": "inference", "params": {"prompt": "p", "estimated_ms": 900}}},
  {"id": "d", "description": "Join", "dependencies": ["b", "c"], "tool_or_prompt": {"name": "inference", "params": {"prompt": "p", "estimated_ms": 10}}}
]}"#;

#[test]
fn json_has_order_levels_critical_path_and_priorities() {
    let (code, out, err) = graph(&["fixtures/tetris/plan.yaml", "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let j: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["order"].as_array().unwrap().len(), 9);
    let levels = j["levels"].as_array().unwrap();
    assert!(levels.len() >= 3);
    let path: Vec<&str> = j["critical_path"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let weight_of = |id: &str| {
        j["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["id"] == id)
            .unwrap()["weight"]
            .as_u64()
            .unwrap()
    };
    let total: u64 = path.iter().map(|id| weight_of(id)).sum();
    assert_eq!(j["critical_path_length"].as_u64().unwrap(), total);
    // The first task of the path has the highest priority of all.
    let top = j["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["priority"].as_u64().unwrap())
        .max();
    assert_eq!(top, Some(total));
    assert_eq!(path.last(), Some(&"9"));
    for t in j["tasks"].as_array().unwrap() {
        assert!(t["priority"].as_u64().unwrap() >= 1);
        assert!(t["level"].is_u64());
        assert_eq!(t["critical"], path.contains(&t["id"].as_str().unwrap()));
    }
}

#[test]
fn estimated_ms_weighs_the_critical_path() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "p.json", DIAMOND);
    let (code, out, _) = graph(&[&p, "--format", "json"]);
    assert_eq!(code, 0);
    let j: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["weighting"], "estimated_ms");
    assert_eq!(j["critical_path"], serde_json::json!(["a", "c", "d"]));
    assert_eq!(j["critical_path_length"], 920);
    assert_eq!(j["levels"], serde_json::json!([["a"], ["b", "c"], ["d"]]));
    assert_eq!(j["tasks"][1]["priority"], 20);
}

#[test]
fn mermaid_and_dot_draw_every_edge_and_escape_labels() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "p.json", DIAMOND);
    let (code, m, _) = graph(&[&p]);
    assert_eq!(code, 0);
    assert!(m.starts_with("flowchart TD\n"));
    assert!(
        m.contains("%% critical path (estimated_ms, length 920): a -> c -> d"),
        "{m}"
    );
    for edge in ["t0 --> t1", "t0 --> t2", "t1 --> t3", "t2 --> t3"] {
        assert!(m.contains(edge), "{edge}\n{m}");
    }
    assert!(m.contains("Quick #quot;side#quot;"), "{m}");
    assert!(m.contains("class t0,t2,t3 critical"), "{m}");

    let (code, d, _) = graph(&[&p, "--format", "dot"]);
    assert_eq!(code, 0);
    assert!(d.starts_with("digraph plan {\n") && d.ends_with("}\n"));
    assert!(d.contains(r#""a" -> "c" [penwidth=2];"#), "{d}");
    assert!(d.contains(r#""a" -> "b";"#), "{d}");
    assert!(d.contains(r#"Quick \"side\""#), "{d}");
    // Exactly the path's nodes are bold and exactly its edges are thick:
    // a -> c -> d, not b, and not the edge b -> d into a path node.
    let bold: Vec<&str> = d
        .lines()
        .filter(|l| l.contains("style=bold"))
        .map(|l| l.trim().split(' ').next().unwrap_or(""))
        .collect();
    assert_eq!(bold, [r#""a""#, r#""c""#, r#""d""#], "{d}");
    let thick: Vec<&str> = d
        .lines()
        .filter(|l| l.contains("-> ") && l.contains("penwidth=2"))
        .map(str::trim)
        .collect();
    assert_eq!(
        thick,
        [r#""a" -> "c" [penwidth=2];"#, r#""c" -> "d" [penwidth=2];"#],
        "{d}"
    );
    // Mermaid numbers links in the order written; the path's are styled.
    let links: Vec<&str> = m.lines().filter(|l| l.contains(" --> ")).collect();
    let styled: Vec<usize> = m
        .lines()
        .find_map(|l| l.trim().strip_prefix("linkStyle "))
        .and_then(|l| l.split(' ').next())
        .map(|l| l.split(',').map(|n| n.parse().unwrap()).collect())
        .unwrap_or_default();
    let styled_links: Vec<&str> = styled.iter().map(|&k| links[k].trim()).collect();
    assert_eq!(styled_links, ["t0 --> t2", "t2 --> t3"], "{m}");
}

#[test]
fn invalid_plans_exit_2_with_their_problems() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "cycle.json",
        r#"{"schema_version": 1, "sub_tasks": [
  {"id": "a", "description": "A", "dependencies": ["b"], "tool_or_prompt": {"name": "inference", "params": {"prompt": "p"}}},
  {"id": "b", "description": "B", "dependencies": ["a"], "tool_or_prompt": {"name": "inference", "params": {"prompt": "p"}}}
]}"#,
    );
    let (code, out, err) = graph(&[&p, "--format", "json"]);
    assert_eq!(code, 2);
    assert!(out.is_empty());
    assert!(err.contains("invalid plan"), "{err}");
    assert!(err.contains(r#""a" -> "b" -> "a""#), "{err}");
    let (code, _, err) = graph(&["does-not-exist.yaml"]);
    assert_eq!(code, 2);
    assert!(err.contains("does-not-exist.yaml"), "{err}");
}
