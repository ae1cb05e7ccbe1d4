//! Placeholder classes: trusted or untrusted, from front matter and a classes file.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use super::*;

/// Who could have written a placeholder's value: the plan model's, so a
/// plan's `variables:` and a template's front matter speak one word.
pub use ctx_model::variables::Class;

/// Names classified trusted or untrusted by one source (front matter or a
/// classes file).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Classes {
    pub(super) map: BTreeMap<String, Class>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ClassLists {
    #[serde(default)]
    pub(super) untrusted: Vec<String>,
    #[serde(default)]
    pub(super) trusted: Vec<String>,
    #[serde(default)]
    #[allow(dead_code)]
    pub(super) description: Option<String>,
    #[serde(default)]
    pub(super) fence: Option<FenceStyle>,
}

/// The line of `raw` (which starts on `first_line`) where `key:` or
/// `key =` is written, else `first_line`.
fn key_line(raw: &str, first_line: usize, key: &str) -> usize {
    raw.lines()
        .position(|l| {
            let l = l.trim_start();
            l.strip_prefix(key)
                .is_some_and(|r| r.trim_start().starts_with([':', '=']))
        })
        .map_or(first_line, |i| first_line + i)
}

impl Classes {
    /// The class this source gives `name`, if any.
    pub fn get(&self, name: &str) -> Option<Class> {
        self.map.get(name).copied()
    }

    /// A source that classifies each `(name, class)` pair; a later pair
    /// wins. A plan's `variables:` become one this way.
    pub fn from_pairs<I: IntoIterator<Item = (String, Class)>>(pairs: I) -> Classes {
        Classes {
            map: pairs.into_iter().collect(),
        }
    }

    /// Every classified name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, Class)> {
        self.map.iter().map(|(k, v)| (k.as_str(), *v))
    }

    pub(super) fn from_lists(
        lists: ClassLists,
        path: &str,
        raw: &str,
        first_line: usize,
    ) -> Result<Classes, TemplateError> {
        let mut map = BTreeMap::new();
        for (class, names, key) in [
            (Class::Untrusted, &lists.untrusted, "untrusted"),
            (Class::Trusted, &lists.trusted, "trusted"),
        ] {
            for name in names {
                let line = key_line(raw, first_line, key);
                if !is_valid_name(name) {
                    return Err(TemplateError::Malformed {
                        path: path.to_string(),
                        line,
                        message: format!(
                            "`{name}` in `{key}` is not a placeholder name ([A-Z][A-Z0-9_]*)"
                        ),
                    });
                }
                if let Some(prev) = map.insert(name.clone(), class)
                    && prev != class
                {
                    return Err(TemplateError::Malformed {
                        path: path.to_string(),
                        line,
                        message: format!("`{name}` is listed both as trusted and as untrusted"),
                    });
                }
            }
        }
        Ok(Classes { map })
    }

    /// Reads a classes file: YAML (or JSON) with `untrusted: [..]` and
    /// `trusted: [..]`, or the same keys in TOML when `path` ends in
    /// `.toml`.
    pub fn parse_file(text: &str, path: &Path) -> Result<Classes, TemplateError> {
        let shown = path.display().to_string();
        let is_toml = path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("toml"));
        let lists = parse_lists(text, &shown, 1, is_toml)?;
        if lists.fence.is_some() {
            return Err(TemplateError::Malformed {
                line: key_line(text, 1, "fence"),
                path: shown,
                message: "`fence` belongs in a template's front matter, not in a classes file"
                    .to_string(),
            });
        }
        Classes::from_lists(lists, &shown, text, 1)
    }
}

pub(super) fn parse_lists(
    raw: &str,
    path: &str,
    first_line: usize,
    is_toml: bool,
) -> Result<ClassLists, TemplateError> {
    if raw.trim().is_empty() {
        return Ok(ClassLists::default());
    }
    if is_toml {
        toml::from_str(raw).map_err(|e| TemplateError::Malformed {
            path: path.to_string(),
            line: e
                .span()
                .map_or(first_line, |s| first_line + line_of(raw, s.start) - 1),
            message: e.message().trim().to_string(),
        })
    } else {
        serde_saphyr::from_str(raw).map_err(|e| TemplateError::Malformed {
            path: path.to_string(),
            line: e.location().map_or(first_line, |l| {
                first_line + (l.line() as usize).saturating_sub(1)
            }),
            message: e
                .to_string()
                .lines()
                .next()
                .unwrap_or("malformed")
                .trim()
                .to_string(),
        })
    }
}
