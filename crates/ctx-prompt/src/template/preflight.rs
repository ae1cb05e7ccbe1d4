//! The token preflight: each component counted, the total against a budget.

use serde::Serialize;

use ctx_tokens::TokenCounter;

use super::*;

/// What a preflight component is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ComponentKind {
    /// The template's own text.
    Template,
    /// A `--var` value.
    Variable,
    /// The historical digest (`{{HISTORICAL_CONTEXT}}`).
    HistoricalContext,
}

/// One row of the preflight table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Component {
    /// `template`, or the placeholder name.
    pub name: String,
    /// What it is.
    pub kind: ComponentKind,
    /// The placeholder's class (none for the template text).
    pub class: Option<Class>,
    /// Its tokens (times its occurrences for a value used more than once).
    pub tokens: usize,
}

/// The preflight: each component's tokens, the exact total, the budget.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Preflight {
    /// The tokenizer's name.
    pub tokenizer: String,
    /// Template text first, then each value by name.
    pub components: Vec<Component>,
    /// The exact count of the whole rendered prompt (it can differ from the
    /// sum of the components by a few tokens where pieces join).
    pub total_tokens: usize,
    /// The budget, when one was given.
    pub budget: Option<usize>,
}

impl Preflight {
    /// Whether the total is over the budget.
    pub fn over_budget(&self) -> bool {
        self.budget.is_some_and(|b| self.total_tokens > b)
    }

    /// The table as aligned text, one component a line, then the total.
    pub fn table(&self) -> String {
        let mut rows: Vec<(String, String, String)> = self
            .components
            .iter()
            .map(|c| {
                let kind = match c.kind {
                    ComponentKind::Template => "template".to_string(),
                    ComponentKind::Variable => {
                        format!("variable, {}", c.class.map_or("?", Class::as_str))
                    }
                    ComponentKind::HistoricalContext => {
                        format!("historical context, {}", c.class.map_or("?", Class::as_str))
                    }
                };
                (c.name.clone(), kind, c.tokens.to_string())
            })
            .collect();
        rows.push((
            "total".into(),
            self.tokenizer.clone(),
            self.total_tokens.to_string(),
        ));
        if let Some(b) = self.budget {
            rows.push(("budget".into(), String::new(), b.to_string()));
        }
        let rows: Vec<[String; 3]> = rows.into_iter().map(|(a, b, c)| [a, b, c]).collect();
        ctx_table::render(
            &["component", "kind", "tokens"],
            &[false, false, true],
            &rows,
        )
    }
}

/// Counts each component of `rendered` and the whole prompt with
/// `counter`, against `budget`.
pub fn preflight(
    rendered: &Rendered,
    counter: &dyn TokenCounter,
    budget: Option<usize>,
) -> Preflight {
    let mut components = vec![Component {
        name: "template".into(),
        kind: ComponentKind::Template,
        class: None,
        tokens: counter.count(&rendered.template_text),
    }];
    for v in &rendered.values {
        components.push(Component {
            name: v.name.clone(),
            kind: if v.name == HISTORICAL_CONTEXT {
                ComponentKind::HistoricalContext
            } else {
                ComponentKind::Variable
            },
            class: Some(v.class),
            tokens: counter.count(&v.text) * v.occurrences,
        });
    }
    Preflight {
        tokenizer: counter.name().to_string(),
        components,
        total_tokens: counter.count(&rendered.text),
        budget,
    }
}
