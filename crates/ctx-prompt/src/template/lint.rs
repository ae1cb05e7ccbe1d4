//! Lint: unfenced, unclassified and malformed placeholders, broken fences.

use std::collections::BTreeSet;
use std::ops::Range;

use serde::Serialize;

use crate::fence::{self, FENCE_CLOSE, FENCE_OPEN, TagKind};

use super::*;

/// What a lint finding is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FindingKind {
    /// An untrusted placeholder outside any fence.
    UnfencedUntrusted,
    /// A placeholder with no class.
    Unclassified,
    /// The front matter and the classes file disagree.
    ClassConflict,
    /// A closing tag without an opening one, or an opening one never closed.
    UnbalancedFence,
    /// A fence opened inside another.
    NestedFence,
    /// A fence tag not written exactly `<untrusted-content>` /
    /// `</untrusted-content>`.
    NoncanonicalFence,
    /// `{{ NAME }}`, `{{name}}` and the like.
    MalformedPlaceholder,
}

impl FindingKind {
    /// The kebab-case name used in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            FindingKind::UnfencedUntrusted => "unfenced-untrusted",
            FindingKind::Unclassified => "unclassified",
            FindingKind::ClassConflict => "class-conflict",
            FindingKind::UnbalancedFence => "unbalanced-fence",
            FindingKind::NestedFence => "nested-fence",
            FindingKind::NoncanonicalFence => "noncanonical-fence",
            FindingKind::MalformedPlaceholder => "malformed-placeholder",
        }
    }
}

/// One lint error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// 1-based line in the template file.
    pub line: usize,
    /// What it is about.
    pub kind: FindingKind,
    /// A sentence naming the placeholder or tag.
    pub message: String,
}

/// One placeholder occurrence as lint sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlaceholderReport {
    /// Its name.
    pub name: String,
    /// 1-based line.
    pub line: usize,
    /// Its class; `None` when unclassified.
    pub class: Option<Class>,
    /// Whether it sits inside an `<untrusted-content>` fence.
    pub fenced: bool,
}

/// What `ctx lint` found in several templates, as its `--format json`
/// prints it: keys in the order declared here (docs/prompts.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LintSummary {
    /// One report per template that could be read, in the order given.
    pub templates: Vec<LintReport>,
    /// The templates that could not be read or parsed.
    pub errors: Vec<UnreadTemplate>,
    /// The findings of every template.
    pub findings: usize,
}

impl LintSummary {
    /// The summary of `templates` and `errors`.
    pub fn new(templates: Vec<LintReport>, errors: Vec<UnreadTemplate>) -> LintSummary {
        let findings = templates.iter().map(|r| r.findings.len()).sum();
        LintSummary {
            templates,
            errors,
            findings,
        }
    }
}

/// A template lint could not read: its path and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnreadTemplate {
    /// The path as given.
    pub path: String,
    /// The read or parse error.
    pub message: String,
}

/// Everything lint found in one template.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LintReport {
    /// The template's path.
    pub path: String,
    /// Every placeholder occurrence, in order.
    pub placeholders: Vec<PlaceholderReport>,
    /// The errors, ordered by line.
    pub findings: Vec<Finding>,
}

impl LintReport {
    /// True when there are no findings.
    pub fn is_clean(&self) -> bool {
        self.findings.is_empty()
    }
}

/// Lints `template` with the classes of `file` (use
/// [`Classes::default`] when there is no classes file).
pub fn lint(template: &Template, file: &Classes) -> LintReport {
    let mut findings = Vec::new();
    let regions = fence_regions(template, &mut findings);
    let placeholders = placeholder_reports(template, file, &regions, &mut findings);
    for m in &template.malformed {
        findings.push(Finding {
            line: m.line,
            kind: FindingKind::MalformedPlaceholder,
            message: format!(
                "`{}` is not a placeholder (names are `{{{{[A-Z][A-Z0-9_]*}}}}`, no spaces)",
                m.text
            ),
        });
    }
    findings.sort_by_key(|f| (f.line, f.kind));
    LintReport {
        path: template.path.clone(),
        placeholders,
        findings,
    }
}

/// Checks the fence structure of `template`'s body, on the same skeleton
/// untrusted values are checked against, so a disguised tag in the
/// template is seen too: each tag written exactly, no fence inside
/// another, each closed. Returns the fenced regions (byte ranges of the
/// source between an opening tag and its closing one), sorted and
/// disjoint since fences do not nest.
fn fence_regions(template: &Template, findings: &mut Vec<Finding>) -> Vec<Range<usize>> {
    let src = template.source();
    let body_start = template.body.start;
    let mut regions: Vec<Range<usize>> = Vec::new();
    let mut open: Option<(usize, usize)> = None; // (line, end of open tag)
    let lines = LineIndex::new(src);
    for tag in fence::find_tags(template.body()) {
        let range = tag.range.start + body_start..tag.range.end + body_start;
        let line = lines.line(range.start);
        let written = &src[range.clone()];
        match tag.kind {
            TagKind::Control => continue,
            TagKind::FenceOpen => {
                if written != FENCE_OPEN {
                    findings.push(Finding {
                        line,
                        kind: FindingKind::NoncanonicalFence,
                        message: format!(
                            "fence tag `{}` must be written exactly `{FENCE_OPEN}`",
                            written.escape_debug()
                        ),
                    });
                }
                if let Some((outer, _)) = open {
                    findings.push(Finding {
                        line,
                        kind: FindingKind::NestedFence,
                        message: format!("`{FENCE_OPEN}` inside the fence opened on line {outer}"),
                    });
                } else {
                    open = Some((line, range.end));
                }
            }
            TagKind::FenceClose => {
                if written != FENCE_CLOSE {
                    findings.push(Finding {
                        line,
                        kind: FindingKind::NoncanonicalFence,
                        message: format!(
                            "fence tag `{}` must be written exactly `{FENCE_CLOSE}`",
                            written.escape_debug()
                        ),
                    });
                }
                match open.take() {
                    Some((_, start)) => regions.push(start..range.start),
                    None => findings.push(Finding {
                        line,
                        kind: FindingKind::UnbalancedFence,
                        message: format!("`{FENCE_CLOSE}` without an opening `{FENCE_OPEN}`"),
                    }),
                }
            }
        }
    }
    if let Some((line, _)) = open {
        findings.push(Finding {
            line,
            kind: FindingKind::UnbalancedFence,
            message: format!("`{FENCE_OPEN}` is never closed"),
        });
    }
    regions
}

/// Each placeholder occurrence's class and whether it is fenced, with a
/// finding for a class the front matter and the classes file disagree on
/// (once per name), an unclassified name, and an untrusted one outside
/// every fence.
fn placeholder_reports(
    template: &Template,
    file: &Classes,
    regions: &[Range<usize>],
    findings: &mut Vec<Finding>,
) -> Vec<PlaceholderReport> {
    let mut placeholders = Vec::new();
    let mut conflicts = BTreeSet::new();
    for p in &template.placeholders {
        let (class, conflict) = template.class_of(&p.name, file);
        // Fences do not nest, so `regions` is sorted and disjoint: only the
        // last one starting at or before the placeholder can hold it.
        let fenced = regions[..regions.partition_point(|r| r.start <= p.range.start)]
            .last()
            .is_some_and(|r| p.range.end <= r.end);
        if conflict && conflicts.insert(p.name.clone()) {
            findings.push(Finding {
                line: p.line,
                kind: FindingKind::ClassConflict,
                message: format!(
                    "{{{{{}}}}} is {} in the front matter but {} in the classes file (treated as untrusted)",
                    p.name,
                    template.classes.get(&p.name).map_or("?", Class::as_str),
                    file.get(&p.name).map_or("?", Class::as_str)
                ),
            });
        }
        match class {
            None => findings.push(Finding {
                line: p.line,
                kind: FindingKind::Unclassified,
                message: format!(
                    "{{{{{}}}}} is neither trusted nor untrusted (classify it in the front matter or a classes file)",
                    p.name
                ),
            }),
            Some(Class::Untrusted) if !fenced => findings.push(Finding {
                line: p.line,
                kind: FindingKind::UnfencedUntrusted,
                message: format!("untrusted {{{{{}}}}} is outside an `{FENCE_OPEN}` fence", p.name),
            }),
            _ => {}
        }
        placeholders.push(PlaceholderReport {
            name: p.name.clone(),
            line: p.line,
            class,
            fenced,
        });
    }
    placeholders
}
