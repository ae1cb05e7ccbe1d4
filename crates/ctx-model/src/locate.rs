//! Where a field is in the plan's text, so validation problems can carry a
//! line and column like parse errors do.
//!
//! [`validate`](crate::validate()) works on the parsed [`Plan`](crate::Plan)
//! and names fields by path (`sub_tasks[1].dependencies[0]`). A
//! [`FieldLocator`] walks the raw YAML event stream of the same text (JSON
//! is YAML's flow syntax, so one walker serves both) and records where each
//! path's value starts. Aliases are not expanded and nothing recurses, so
//! locating is as safe on hostile input as parsing is.

use std::collections::HashMap;

use serde_saphyr::granit_parser::{Event, Parser};

/// Positions of every value in a plan's text, by field path.
#[derive(Debug, Clone, Default)]
pub struct FieldLocator {
    positions: HashMap<String, (u64, u64)>,
    /// Where each mapping key is written, by the path it names; what an
    /// unknown field points at (its value may be far below it).
    keys: HashMap<String, (u64, u64)>,
}

#[derive(Debug)]
enum KeyState {
    /// The next node is a key.
    Key,
    /// A complex (collection) key is being read.
    KeyCollection,
    /// The next node is the value of `key`.
    Value,
}

#[derive(Debug)]
enum Frame {
    Map {
        key: Option<String>,
        state: KeyState,
    },
    Seq {
        index: usize,
    },
}

impl FieldLocator {
    /// Walks `text` once. Best effort: on a syntax error it keeps what it
    /// found before it (a text that parsed as a plan has none).
    ///
    /// ```
    /// let text = "schema_version: 1\nsub_tasks:\n  - id: a\n    dependencies: [b, c]\n";
    /// let at = ctx_model::FieldLocator::new(text);
    /// assert_eq!(at.locate("sub_tasks[0].dependencies[1]"), Some((4, 23)));
    /// // A path that is not written (a default) falls back to its parent.
    /// assert_eq!(at.locate("sub_tasks[0].entity_context"), Some((3, 5)));
    /// ```
    pub fn new(text: &str) -> FieldLocator {
        let mut positions = HashMap::new();
        let mut keys = HashMap::new();
        let mut stack: Vec<Frame> = Vec::new();
        for item in Parser::new_from_str(text) {
            let Ok((event, span)) = item else { break };
            let at = (span.start.line() as u64, span.start.col() as u64 + 1);
            match event {
                Event::Scalar(value, ..) => {
                    if let Some(Frame::Map { key, state }) = stack.last_mut()
                        && matches!(state, KeyState::Key)
                    {
                        *key = Some(value.into_owned());
                        *state = KeyState::Value;
                        keys.entry(path_of(&stack)).or_insert(at);
                        continue;
                    }
                    positions.entry(path_of(&stack)).or_insert(at);
                    finish_value(&mut stack);
                }
                Event::Alias(_) => {
                    if let Some(Frame::Map { key, state }) = stack.last_mut()
                        && matches!(state, KeyState::Key)
                    {
                        *key = Some("*".into());
                        *state = KeyState::Value;
                        continue;
                    }
                    positions.entry(path_of(&stack)).or_insert(at);
                    finish_value(&mut stack);
                }
                Event::SequenceStart(..) | Event::MappingStart(..) => {
                    let in_key = match stack.last_mut() {
                        Some(Frame::Map { key, state }) if matches!(state, KeyState::Key) => {
                            *key = None;
                            *state = KeyState::KeyCollection;
                            true
                        }
                        _ => false,
                    };
                    if !in_key {
                        positions.entry(path_of(&stack)).or_insert(at);
                    }
                    stack.push(if matches!(event, Event::MappingStart(..)) {
                        Frame::Map {
                            key: None,
                            state: KeyState::Key,
                        }
                    } else {
                        Frame::Seq { index: 0 }
                    });
                }
                Event::SequenceEnd | Event::MappingEnd => {
                    stack.pop();
                    match stack.last_mut() {
                        Some(Frame::Map { state, .. })
                            if matches!(state, KeyState::KeyCollection) =>
                        {
                            *state = KeyState::Value;
                        }
                        _ => finish_value(&mut stack),
                    }
                }
                _ => {}
            }
        }
        FieldLocator { positions, keys }
    }

    /// The 1-based line and column where `field`'s value starts; for a
    /// field not written in the text (a default), its nearest written
    /// ancestor's. `None` when not even the top level was found.
    pub fn locate(&self, field: &str) -> Option<(u64, u64)> {
        let mut path = field;
        loop {
            if let Some(&at) = self.positions.get(path) {
                return Some(at);
            }
            if path.is_empty() {
                return None;
            }
            // Drop the last segment: `.key` or `[i]`.
            let cut = path.rfind(['.', '[']).unwrap_or(0);
            path = &path[..cut];
        }
    }
}

impl FieldLocator {
    /// Where the key naming `field` is written (`dependancies` in
    /// `dependancies: [a]`), else where [`locate`](Self::locate) finds it.
    ///
    /// ```
    /// let text = "schema_version: 1\nsub_tasks:\n  - id: a\n    dependancies:\n      - b\n";
    /// let at = ctx_model::FieldLocator::new(text);
    /// assert_eq!(at.locate_key("sub_tasks[0].dependancies"), Some((4, 5)));
    /// assert_eq!(at.locate("sub_tasks[0].dependancies"), Some((5, 7)));
    /// ```
    pub fn locate_key(&self, field: &str) -> Option<(u64, u64)> {
        self.keys.get(field).copied().or_else(|| self.locate(field))
    }

    /// Where a problem points: the key of an unknown field, the value of
    /// any other field.
    pub fn locate_problem(&self, problem: &crate::Problem) -> Option<(u64, u64)> {
        if problem.code == crate::ProblemCode::UnknownField {
            self.locate_key(&problem.field)
        } else {
            self.locate(&problem.field)
        }
    }
}

fn finish_value(stack: &mut [Frame]) {
    match stack.last_mut() {
        Some(Frame::Map { state, .. }) => *state = KeyState::Key,
        Some(Frame::Seq { index }) => *index += 1,
        None => {}
    }
}

/// The path of the value about to be read: `sub_tasks[1].dependencies`.
fn path_of(stack: &[Frame]) -> String {
    let mut out = String::new();
    for frame in stack {
        match frame {
            Frame::Map { key, .. } => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key.as_deref().unwrap_or("?"));
            }
            Frame::Seq { index } => {
                out.push_str(&format!("[{index}]"));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_paths() {
        let text = "schema_version: 1\nentities:\n  - name: A\n  - name: B\n    grounded_values: [x, y]\nsub_tasks:\n  - id: a\n    description: A\n    dependencies:\n      - b\n      - c\n    tool_or_prompt:\n      name: inference\n      params: {prompt: go}\nconfig:\n  tokenizer: gpt2\n";
        let at = FieldLocator::new(text);
        assert_eq!(at.locate("schema_version"), Some((1, 17)));
        assert_eq!(at.locate("entities[1]"), Some((4, 5)));
        assert_eq!(at.locate("entities[1].name"), Some((4, 11)));
        assert_eq!(at.locate("entities[1].grounded_values[1]"), Some((5, 26)));
        assert_eq!(at.locate("sub_tasks[0].dependencies[1]"), Some((11, 9)));
        assert_eq!(
            at.locate("sub_tasks[0].tool_or_prompt.params.prompt"),
            Some((14, 24))
        );
        assert_eq!(at.locate("config.tokenizer"), Some((16, 14)));
        // Not written: the nearest ancestor.
        assert_eq!(at.locate("config.max_prompt_tokens"), Some((16, 3)));
        assert_eq!(
            at.locate("sub_tasks[0].entity_context[3].entity_name"),
            Some((7, 5))
        );
    }

    #[test]
    fn json_paths() {
        let text = "{\n  \"schema_version\": 1,\n  \"sub_tasks\": [\n    {\"id\": \"a\", \"dependencies\": [\"b\", \"c\"]}\n  ]\n}\n";
        let at = FieldLocator::new(text);
        assert_eq!(at.locate("sub_tasks[0].dependencies[1]"), Some((4, 39)));
        assert_eq!(at.locate("sub_tasks[0].id"), Some((4, 12)));
    }

    #[test]
    fn odd_input_never_panics() {
        for text in [
            "",
            "- a\n- b",
            "? [a, b]\n: c\nd: *x\n",
            "a: [\n",
            "&a x: *a\n",
        ] {
            let at = FieldLocator::new(text);
            let _ = at.locate("sub_tasks[0].id");
            let _ = at.locate("");
        }
        let complex = FieldLocator::new("? [a, b]\n: c\nd: e\n");
        assert_eq!(complex.locate("d"), Some((3, 4)));
    }
}
