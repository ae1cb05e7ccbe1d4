//! The prompt's shape: entity lines and the blocks joined as section 8 of
//! the design has them (see the parent module's documentation).

use ctx_model::ResolvedEntity;

use super::{DEPENDENCY_HEADING, ENTITY_HEADING};

/// One entity line as it appears in the entity block (no line break).
///
/// ```
/// use ctx_model::{Relevance, ResolvedEntity};
/// let e = ResolvedEntity {
///     name: "Board".into(),
///     entity_type: Some("constraint".into()),
///     grounded_value: Some("10 x 20".into()),
///     intent_relevance: Some("constraint".into()),
///     relevance: Relevance::High,
/// };
/// assert_eq!(ctx_prompt::entity_line(&e, true), "- Board [constraint]: 10 x 20 (constraint)");
/// assert_eq!(ctx_prompt::entity_line(&e, false), "- Board: 10 x 20 (constraint)");
/// ```
pub fn entity_line(entity: &ResolvedEntity, include_entity_type: bool) -> String {
    let mut line = format!("- {}", entity.name);
    if include_entity_type
        && let Some(t) = entity
            .entity_type
            .as_deref()
            .filter(|t| !t.trim().is_empty())
    {
        line.push_str(" [");
        line.push_str(t);
        line.push(']');
    }
    if let Some(v) = entity.grounded_value.as_deref() {
        line.push_str(": ");
        line.push_str(v);
    }
    if let Some(r) = entity
        .intent_relevance
        .as_deref()
        .filter(|r| !r.trim().is_empty())
    {
        line.push_str(" (");
        line.push_str(r);
        line.push(')');
    }
    line
}

/// A dependency as assembled: its heading and the output text as it
/// currently stands.
pub(super) struct DepPart<'a> {
    pub(super) task_id: &'a str,
    pub(super) description: &'a str,
    /// After the summarize strategy; what the cap starts from.
    pub(super) base: String,
    /// Tokens of `base`.
    pub(super) base_tokens: usize,
    /// What is rendered now (`base`, or a prefix of it plus `...`).
    pub(super) current: String,
    pub(super) cut: bool,
}

/// The prompt: the kept entity lines in `entity_order` (indexes into
/// `entities`; the layout's order, see `layout`), the dependency block,
/// the task's own prompt.
pub(super) fn render(
    entities: &[(String, bool)],
    entity_order: &[usize],
    deps: &[DepPart<'_>],
    prompt: &str,
) -> String {
    let mut out = entity_block(entities, entity_order);
    if !deps.is_empty() {
        out.push_str(DEPENDENCY_HEADING);
        for d in deps {
            out.push_str("\n\n### Task ");
            out.push_str(d.task_id);
            out.push_str(": ");
            out.push_str(d.description);
            out.push_str("\n**Output:**\n");
            out.push_str(&d.current);
            out.push_str("\n\n---");
        }
        out.push_str("\n\n");
    }
    out.push_str(prompt);
    out
}

/// The entity block as [`render`] begins a prompt with it, its blank line
/// included; empty when no entity is kept.
pub(super) fn entity_block(entities: &[(String, bool)], entity_order: &[usize]) -> String {
    let mut out = String::new();
    let kept: Vec<&str> = entity_order
        .iter()
        .map(|&i| &entities[i])
        .filter(|(_, keep)| *keep)
        .map(|(l, _)| l.as_str())
        .collect();
    if !kept.is_empty() {
        out.push_str(ENTITY_HEADING);
        for line in kept {
            out.push('\n');
            out.push_str(line);
        }
        out.push_str("\n\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entity_line_variants() {
        let mut e = ResolvedEntity {
            name: "N".into(),
            entity_type: Some("kind".into()),
            grounded_value: None,
            intent_relevance: None,
            relevance: ctx_model::Relevance::Low,
        };
        assert_eq!(entity_line(&e, true), "- N [kind]");
        assert_eq!(entity_line(&e, false), "- N");
        e.intent_relevance = Some("partial".into());
        assert_eq!(entity_line(&e, true), "- N [kind] (partial)");
        e.grounded_value = Some("v".into());
        assert_eq!(entity_line(&e, true), "- N [kind]: v (partial)");
    }
}
