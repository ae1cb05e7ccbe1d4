//! The plan problems that need the template language: each template field
//! of a plan linted as `ctx lint` lints a template, with the plan's
//! `variables:` as its classes.

use ctx_model::{Class, HISTORICAL_CONTEXT, Plan, Problem, ProblemCode};

use crate::template::{Classes, FindingKind, Template, lint};

use super::fields::{field_classes, map_item_of_field};
use super::{TemplateField, plan_classes, template_fields};

/// Every problem of `plan`'s templates, in field order:
///
/// * a placeholder that names no declared variable
///   ([`ProblemCode::UndeclaredVariable`]);
/// * every rule of `ctx lint` ([`ProblemCode::TemplateLint`]): an
///   untrusted placeholder outside an `<untrusted-content>` fence, an
///   unbalanced, nested or non-canonical fence, a malformed placeholder;
/// * a `publish` path holding an untrusted variable
///   ([`ProblemCode::UntrustedPublishVariable`]), or a secret one (a path
///   is printed and stored in clear: [`ProblemCode::InvalidPublishPath`]);
/// * `{{HISTORICAL_CONTEXT}}` used while the plan names no
///   `history.content_root` and `content_root_given` is false (a caller
///   with a `--content-root` flag passes true)
///   ([`ProblemCode::NoContentRoot`]).
///
/// A text with no `{{NAME}}` placeholder is not a template and is not
/// linted: a plan written before variables existed, whose prompts may
/// show braces or fence tags as text, reads as it did.
pub fn template_problems(plan: &Plan, content_root_given: bool) -> Vec<Problem> {
    let classes = plan_classes(plan);
    let mut out = Vec::new();
    let mut digest_reported = false;
    for tf in template_fields(plan) {
        if tf.template.placeholders.is_empty() {
            continue;
        }
        let item = map_item_of_field(plan, &tf).map(str::to_string);
        let classes = match &item {
            Some(_) => field_classes(plan, &tf, Class::Untrusted),
            None => classes.clone(),
        };
        let TemplateField {
            field,
            task,
            template,
            publish,
        } = tf;
        let found = if publish {
            publish_problems(plan, &template, &classes)
        } else {
            let mut found = lint_problems(&template, &classes, item.as_deref());
            let uses_digest = template.names().contains(HISTORICAL_CONTEXT);
            let has_root = content_root_given
                || plan
                    .history
                    .as_ref()
                    .is_some_and(|h| h.content_root.is_some());
            if uses_digest && !has_root && !digest_reported {
                digest_reported = true;
                found.push((
                    ProblemCode::NoContentRoot,
                    format!(
                        "{{{{{HISTORICAL_CONTEXT}}}}} is used, but no archive fills it: set `history.content_root`"
                    ),
                ));
            }
            found
        };
        let task_id = task.map(|i| plan.sub_tasks[i].id.clone());
        out.extend(found.into_iter().map(|(code, message)| Problem {
            code,
            task_id: task_id.clone(),
            field: field.clone(),
            message,
        }));
    }
    out
}

/// The problems of a `publish` path: each placeholder must name a
/// declared variable that is trusted (a path is written to the file
/// system) and not secret (a path is printed and stored in clear).
fn publish_problems(
    plan: &Plan,
    template: &Template,
    classes: &Classes,
) -> Vec<(ProblemCode, String)> {
    let mut found = Vec::new();
    for p in &template.placeholders {
        match template.class_of(&p.name, classes).0 {
            None => found.push((
                ProblemCode::UndeclaredVariable,
                format!("{{{{{}}}}} names no declared variable", p.name),
            )),
            Some(Class::Untrusted) => found.push((
                ProblemCode::UntrustedPublishVariable,
                format!(
                    "{{{{{}}}}} is untrusted; a publish path may hold trusted variables only",
                    p.name
                ),
            )),
            Some(Class::Trusted)
                if plan.variables.iter().any(|v| v.name == p.name && v.secret) =>
            {
                found.push((
                    ProblemCode::InvalidPublishPath,
                    format!(
                        "{{{{{}}}}} is secret; a publish path is printed and stored, so it may not hold one",
                        p.name
                    ),
                ))
            }
            Some(Class::Trusted) => {}
        }
    }
    found
}

/// The problems `ctx lint` finds in a prompt template: undeclared names
/// (each once), the map's `item` outside a fence (said once, as such,
/// rather than again as an unfenced untrusted placeholder), and every
/// other finding but an unclassified name, which is the undeclared one.
fn lint_problems(
    template: &Template,
    classes: &Classes,
    item: Option<&str>,
) -> Vec<(ProblemCode, String)> {
    let mut found = Vec::new();
    let multiline = template.source().contains('\n');
    let at = |line: usize| {
        if multiline {
            format!(" (line {line} of the text)")
        } else {
            String::new()
        }
    };
    let report = lint(template, classes);
    let mut undeclared: Vec<&str> = Vec::new();
    for p in &report.placeholders {
        if p.class.is_none() && !undeclared.contains(&p.name.as_str()) {
            undeclared.push(&p.name);
            found.push((
                ProblemCode::UndeclaredVariable,
                format!(
                    "{{{{{}}}}} names no declared variable (declare it under `variables:`){}",
                    p.name,
                    at(p.line)
                ),
            ));
        }
    }
    let mut bare_items = 0;
    for p in &report.placeholders {
        if Some(p.name.as_str()) == item && !p.fenced {
            bare_items += 1;
            found.push((
                ProblemCode::BareItemPlaceholder,
                format!(
                    "the item {{{{{}}}}} is outside an `<untrusted-content>` fence: an item is always untrusted{}",
                    p.name,
                    at(p.line)
                ),
            ));
        }
    }
    for f in &report.findings {
        let about_item = bare_items > 0
            && f.kind == FindingKind::UnfencedUntrusted
            && item.is_some_and(|i| f.message.contains(&format!("{{{{{i}}}}}")));
        if f.kind != FindingKind::Unclassified && !about_item {
            found.push((
                ProblemCode::TemplateLint,
                format!("{}: {}{}", f.kind.as_str(), f.message, at(f.line)),
            ));
        }
    }
    found
}
