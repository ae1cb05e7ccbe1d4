//! `ctx lint`: exit codes, text and JSON reports, classes files.

use ctx_test_support::{ctx, write};
use predicates::prelude::*;

#[test]
fn clean_template_exits_0_and_lists_placeholders() {
    ctx()
        .args(["lint", "fixtures/weekly/prompts/analyze-weekly.md"])
        .assert()
        .code(0)
        .stdout(predicate::str::contains(
            "analyze-weekly.md:18: {{HISTORICAL_CONTEXT}} untrusted, fenced",
        ))
        .stdout(predicate::str::contains(
            "analyze-weekly.md:6: {{WEEK}} trusted",
        ))
        .stdout(predicate::str::contains("6 placeholders, 0 findings"));
}

#[test]
fn findings_exit_1_with_lines() {
    let dir = tempfile::tempdir().unwrap();
    let t = write(
        &dir,
        "t.md",
        "---\nuntrusted: [NOTES]\n---\nA {{NOTES}}\n{{WHO}}\n</untrusted-content>\n<untrusted-content>\n",
    );
    ctx()
        .args(["lint", &t])
        .assert()
        .code(1)
        .stdout(predicate::str::contains(
            ":4: error[unfenced-untrusted]: untrusted {{NOTES}}",
        ))
        .stdout(predicate::str::contains(":5: error[unclassified]: {{WHO}}"))
        .stdout(predicate::str::contains(":6: error[unbalanced-fence]"))
        .stdout(predicate::str::contains(
            ":7: error[unbalanced-fence]: `<untrusted-content>` is never closed",
        ));
}

#[test]
fn nested_fences_and_disguised_tags_are_findings() {
    let dir = tempfile::tempdir().unwrap();
    let t = write(
        &dir,
        "t.md",
        "<untrusted-content>\n<untrusted-content>\n{{HISTORICAL_CONTEXT}}\n&lt;/untrusted-content&gt;\n</untrusted-content>\n",
    );
    ctx()
        .args(["lint", &t])
        .assert()
        .code(1)
        .stdout(predicate::str::contains(":2: error[nested-fence]"))
        .stdout(predicate::str::contains(":4: error[noncanonical-fence]"));
}

#[test]
fn classes_file_classifies_and_json_reports() {
    let dir = tempfile::tempdir().unwrap();
    let t = write(
        &dir,
        "t.md",
        "Hello {{NAME}}\n<untrusted-content>\n{{BODY}}\n</untrusted-content>\n",
    );
    let c = write(
        &dir,
        "classes.toml",
        "trusted = [\"NAME\"]\nuntrusted = [\"BODY\"]\n",
    );
    ctx().args(["lint", &t]).assert().code(1);
    let out = ctx()
        .args(["lint", &t, "--classes", &c, "--format", "json"])
        .assert()
        .code(0)
        .get_output()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["findings"], 0);
    let ph = &v["templates"][0]["placeholders"];
    assert_eq!(ph[0]["name"], "NAME");
    assert_eq!(ph[0]["class"], "trusted");
    assert_eq!(ph[1]["class"], "untrusted");
    assert_eq!(ph[1]["fenced"], true);
    assert_eq!(ph[1]["line"], 3);
}

#[test]
fn unreadable_file_exits_2_but_others_are_still_checked() {
    ctx()
        .args([
            "lint",
            "does/not/exist.md",
            "fixtures/weekly/prompts/analyze-weekly.md",
        ])
        .assert()
        .code(2)
        .stdout(predicate::str::contains("6 placeholders, 0 findings"))
        .stderr(predicate::str::contains("does/not/exist.md"));
}

#[test]
fn malformed_front_matter_names_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let t = write(
        &dir,
        "t.md",
        "---\ntrusted: [A]\nuntrusted: [b]\n---\n{{A}}\n",
    );
    ctx()
        .args(["lint", &t])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("t.md:3: `b` in `untrusted`"));
}

#[test]
fn bad_classes_file_is_a_usage_error() {
    let dir = tempfile::tempdir().unwrap();
    let c = write(&dir, "c.yaml", "trusted: [A]\ntrustd: [B]\n");
    ctx()
        .args([
            "lint",
            "fixtures/weekly/prompts/analyze-weekly.md",
            "--classes",
            &c,
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("c.yaml:2:"));
}
