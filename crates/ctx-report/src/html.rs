//! The page: one self-contained HTML document with inline CSS, two inline
//! SVG drawings and one small inline script.
//!
//! Drawn from askama templates (`templates/page.html` and the templates it
//! includes), compiled with the crate: a field or method a template names
//! that does not exist is a compile error, and every `{{ value }}` is
//! escaped by [`crate::escape::Html`] unless the template says `|safe`,
//! which it says once, of [`SCRIPT`]. The code computes what the page
//! shows (`Page` and its parts in `table.rs`, `details.rs`,
//! `timeline.rs`, `dag.rs`); the templates hold the markup.
//!
//! Safety: the page carries a Content-Security-Policy that forbids every
//! network fetch and allows exactly one script, ours, by its SHA-256. So
//! even if some content escaped escaping, an injected `<script>` or
//! `onerror=` could not run; escaping is the first wall, the policy the
//! second. The script records script errors and policy violations into
//! the page (visible, and readable by the browser test) and opens a task's
//! `<details>` when a bar or node linking to it is clicked.

use askama::Template;
use base64::Engine as _;
use sha2::{Digest, Sha256};

use crate::analysis::Analysis;
use crate::dag::Dag;
use crate::input::{RunReportInput, RunStatus};
use crate::timeline::Timeline;

/// The page's only script. Task content never goes in here.
pub const SCRIPT: &str = r#"(function () {
  var pending = [];
  function show() {
    var box = document.getElementById("report-errors");
    if (!box) return;
    var list = box.getElementsByTagName("ul")[0];
    while (pending.length) {
      var li = document.createElement("li");
      li.textContent = pending.shift();
      list.appendChild(li);
    }
    if (list.children.length) box.hidden = false;
  }
  function record(message) { pending.push(String(message)); show(); }
  window.addEventListener("error", function (e) { record("script error: " + e.message); });
  document.addEventListener("securitypolicyviolation", function (e) {
    record("blocked by the content security policy: " + e.violatedDirective);
  });
  function openTarget() {
    var el = location.hash ? document.getElementById(location.hash.slice(1)) : null;
    if (el && el.tagName === "DETAILS") el.open = true;
  }
  window.addEventListener("hashchange", openTarget);
  document.addEventListener("DOMContentLoaded", function () {
    show();
    openTarget();
    document.documentElement.setAttribute("data-report-script", "ran");
  });
})();"#;

/// `'sha256-…'` of [`SCRIPT`], for the Content-Security-Policy.
pub fn script_hash() -> String {
    format!("'sha256-{}'", script_digest())
}

/// The base64 SHA-256 of [`SCRIPT`] (letters, digits, `+`, `/`, `=`).
fn script_digest() -> String {
    base64::engine::general_purpose::STANDARD.encode(Sha256::digest(SCRIPT.as_bytes()))
}

/// The page's template and what it draws from: the input, its analysis
/// and the two drawings laid out. The methods the templates call are
/// beside the parts they draw (`totals.rs`, `table.rs`, `details.rs`).
#[derive(Template)]
#[template(path = "page.html")]
pub(crate) struct Page<'a> {
    pub(crate) input: &'a RunReportInput,
    pub(crate) a: &'a Analysis,
    script_digest: String,
    timeline: Timeline<'a>,
    dag: Dag<'a>,
}

/// Renders the run as one self-contained HTML document. Deterministic:
/// the same input gives the same bytes (nothing reads the clock or the
/// environment; maps are never iterated for output).
pub fn render_html(input: &RunReportInput) -> String {
    let a = Analysis::of(input);
    let text_bytes: usize = input
        .tasks
        .iter()
        .map(|t| t.output.len() + t.prompt.as_ref().map_or(0, String::len))
        .sum();
    let mut out =
        String::with_capacity(64 * 1024 + input.tasks.len() * 3 * 1024 + text_bytes * 11 / 10);
    let page = Page {
        input,
        a: &a,
        script_digest: script_digest(),
        timeline: Timeline::new(input, &a),
        dag: Dag::new(input, &a),
    };
    // Writing into a `String` fails only if a value's `Display` does, and
    // none of the page's does.
    page.render_into(&mut out)
        .expect("the page's values always display");
    out
}

impl<'a> Page<'a> {
    fn timeline(&self) -> &Timeline<'a> {
        &self.timeline
    }

    fn dag(&self) -> &Dag<'a> {
        &self.dag
    }

    pub(crate) fn running(&self) -> bool {
        self.input.status == RunStatus::Running
    }

    /// The run's state as the header's badge says it.
    fn run_label(&self) -> &'static str {
        match self.input.status {
            RunStatus::Running => "in progress",
            s => s.as_str(),
        }
    }

    fn started(&self) -> String {
        self.input
            .started_at
            .map_or_else(|| "unknown".into(), |t| t.to_rfc3339())
    }

    /// The time a running run is shown as of: the end of the time axis.
    fn as_of(&self) -> crate::input::Timestamp {
        crate::input::Timestamp::from_unix_ms(self.a.horizon_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::TaskState;

    #[test]
    fn script_hash_is_a_sha256_source_expression() {
        let h = script_hash();
        assert!(h.starts_with("'sha256-") && h.ends_with("='"), "{h}");
        // 32 bytes in base64 are 44 characters.
        assert_eq!(h.len(), "'sha256-'".len() + 44);
    }

    #[test]
    fn unused_state_is_still_styled() {
        let style = include_str!("../templates/page.html");
        for s in TaskState::ALL {
            assert!(style.contains(&format!(".st-{}", s.as_str())), "{s:?}");
            assert!(style.contains(&format!("td.s-{}", s.as_str())), "{s:?}");
        }
    }

    #[test]
    fn the_page_carries_the_script_the_policy_admits_unescaped() {
        let run = RunReportInput {
            run_id: "r".into(),
            plan: String::new(),
            status: RunStatus::Completed,
            started_at: None,
            ended_at: None,
            as_of: None,
            tasks: Vec::new(),
            published: Vec::new(),
            fallback: None,
            decisions: Vec::new(),
        };
        let html = render_html(&run);
        assert!(html.contains(&format!("<script>{SCRIPT}</script>")));
        assert!(html.contains(&format!("script-src {};", script_hash())));
    }
}
