//! One-pass rendering with neutralized untrusted values and the seam scan.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

use crate::fence::{self, FENCE_CLOSE, FENCE_OPEN, FenceNonce, TagKind};

use super::*;

/// Why a template did not render.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// The template has lint findings; nothing was rendered.
    #[error("{}: {} lint finding(s); fix them before rendering", .0.path, .0.findings.len())]
    Lint(LintReport),
    /// Placeholders without a value, or values no placeholder uses.
    #[error("{}", values_message(path, missing, unused))]
    Values {
        /// The template.
        path: String,
        /// `(name, first line)` of each placeholder without a value.
        missing: Vec<(String, usize)>,
        /// Names given values that the template never uses.
        unused: Vec<String>,
    },
    /// A trusted value holds a fence tag (it would open or close a fence).
    #[error(
        "{path}:{line}: trusted value of {{{{{name}}}}} contains a fence tag; classify it untrusted or remove the tag"
    )]
    TrustedFenceTag {
        /// The template.
        path: String,
        /// Its first line.
        line: usize,
        /// The placeholder.
        name: String,
    },
    /// The template asks for `fence: nonce` and no nonce was given.
    #[error("{path}: the template asks for `fence: nonce`, but no nonce was given to render it")]
    NonceMissing {
        /// The template.
        path: String,
    },
    /// The rendered text does not have exactly the template's fence tags,
    /// or exactly the control tokens of the template and its trusted
    /// values.
    #[error("{path}: the rendered prompt has {found} {what} where the template has {expected}")]
    FenceBroken {
        /// The template.
        path: String,
        /// `fence tags` or `control tokens`.
        what: &'static str,
        /// Tags in the template.
        expected: usize,
        /// Tags in the output.
        found: usize,
    },
}

/// One line per missing and per unused value. It names no flag: a front
/// end adds how its users give a value (ctx's CLI says `give --var
/// NAME=VALUE`), from the variant's fields.
fn values_message(path: &str, missing: &[(String, usize)], unused: &[String]) -> String {
    let mut lines: Vec<String> = missing
        .iter()
        .map(|(n, l)| format!("{path}:{l}: no value for {{{{{n}}}}}"))
        .collect();
    lines.extend(
        unused
            .iter()
            .map(|n| format!("{path}: the value for {n} is not used by the template")),
    );
    lines.join("\n")
}

/// A value as inserted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderedValue {
    /// The placeholder name.
    pub name: String,
    /// Its class.
    pub class: Class,
    /// How many times it was inserted.
    pub occurrences: usize,
    /// The text inserted (neutralized when untrusted).
    pub text: String,
}

/// A rendered template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    /// The prompt: the body with every placeholder filled.
    pub text: String,
    /// The body with every placeholder removed: the template's own text.
    pub template_text: String,
    /// Each distinct value, sorted by name.
    pub values: Vec<RenderedValue>,
}

/// Lints, then fills every placeholder of `template` in one pass: a value
/// that contains `{{X}}` stays literal. Untrusted values are neutralized.
///
/// A value neutralized alone can still complete a tag with what sits next
/// to it: `{{A}}{{B}}` with `<|im_` and `start|>`, `{{A}}{{A}}` with
/// `|><|im_start`, `<{{A}}` with `/untrusted-content>`. So the joined
/// prompt is scanned again, and every tag that touches an untrusted
/// occurrence is rewritten on the untrusted side of the seam (the template
/// text and trusted values are never changed). Such an occurrence then
/// differs from [`RenderedValue::text`], which is the value neutralized
/// alone. Last, the prompt must hold exactly the template's fence tags, and
/// exactly the template's control tokens plus those inside trusted values;
/// otherwise nothing is rendered ([`RenderError::FenceBroken`]). That
/// refuses a trusted value that completes a control token with its
/// neighbours, and an untrusted value that breaks a token the template
/// writes around it (`<|{{A}}|>` with A = `<`).
///
/// A template with `fence: nonce` needs [`render_with_nonce`];
/// `render` refuses it ([`RenderError::NonceMissing`]).
pub fn render(
    template: &Template,
    file: &Classes,
    values: &BTreeMap<String, String>,
) -> Result<Rendered, RenderError> {
    render_with_nonce(template, file, values, None)
}

/// [`render`], with the nonce that a `fence: nonce` template's fence tags
/// carry (see [`FenceStyle`]). The caller draws it: `ctx render` takes 16
/// bytes from the operating system; tests pin one. The prompt starts with
/// [`FenceNonce::preamble`], and every fence tag the template writes
/// becomes [`FenceNonce::open_tag`] / [`FenceNonce::close_tag`]; values
/// are neutralized exactly as without a nonce. A plain template ignores
/// the nonce.
pub fn render_with_nonce(
    template: &Template,
    file: &Classes,
    values: &BTreeMap<String, String>,
    nonce: Option<&FenceNonce>,
) -> Result<Rendered, RenderError> {
    let report = lint(template, file);
    if !report.is_clean() {
        return Err(RenderError::Lint(report));
    }
    let nonce = match (template.fence, nonce) {
        (FenceStyle::Plain, _) => None,
        (FenceStyle::Nonce, Some(n)) => Some(n),
        (FenceStyle::Nonce, None) => {
            return Err(RenderError::NonceMissing {
                path: template.path.clone(),
            });
        }
    };
    let seen = occurrences(template);
    let names = template.names();
    check_values(template, &names, values, &seen)?;
    let inserted = inserted_values(template, file, values, &names, &seen)?;
    let (mut segments, template_text) = body_segments(template, &inserted, nonce);
    let text = neutralize_seams(&mut segments);
    check_tags(template, &text, &inserted)?;
    Ok(Rendered {
        text,
        template_text,
        values: inserted.into_values().collect(),
    })
}

/// Each distinct placeholder name's first line and number of
/// occurrences, in one pass: looking them up per name would be quadratic
/// in a template of many distinct names.
fn occurrences(template: &Template) -> BTreeMap<&str, (usize, usize)> {
    let mut seen: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for p in &template.placeholders {
        seen.entry(p.name.as_str()).or_insert((p.line, 0)).1 += 1;
    }
    seen
}

/// Refuses values that do not match the placeholders: every name needs a
/// value (reported by first line, then name), and every value a name.
fn check_values(
    template: &Template,
    names: &BTreeSet<&str>,
    values: &BTreeMap<String, String>,
    seen: &BTreeMap<&str, (usize, usize)>,
) -> Result<(), RenderError> {
    let mut missing = Vec::new();
    for name in names {
        if !values.contains_key(*name) {
            let line = seen.get(*name).map_or(0, |s| s.0);
            missing.push(((*name).to_string(), line));
        }
    }
    let unused: Vec<String> = values
        .keys()
        .filter(|k| !names.contains(k.as_str()))
        .cloned()
        .collect();
    if !missing.is_empty() || !unused.is_empty() {
        missing.sort_by_key(|(n, l)| (*l, n.clone()));
        return Err(RenderError::Values {
            path: template.path.clone(),
            missing,
            unused,
        });
    }
    Ok(())
}

/// Each name's value as it is inserted: neutralized when untrusted (a
/// name of no class is untrusted); a trusted value as given, refused
/// when it holds a fence tag, since it would open or close a fence.
fn inserted_values<'t>(
    template: &'t Template,
    file: &Classes,
    values: &BTreeMap<String, String>,
    names: &BTreeSet<&'t str>,
    seen: &BTreeMap<&str, (usize, usize)>,
) -> Result<BTreeMap<&'t str, RenderedValue>, RenderError> {
    let mut inserted: BTreeMap<&str, RenderedValue> = BTreeMap::new();
    for name in names {
        let (class, _) = template.class_of(name, file);
        let class = class.unwrap_or(Class::Untrusted);
        let raw = values.get(*name).map_or("", String::as_str);
        let text = match class {
            Class::Untrusted => fence::neutralize(raw),
            Class::Trusted => {
                if fence::find_tags(raw)
                    .iter()
                    .any(|t| t.kind != TagKind::Control)
                {
                    let line = seen.get(*name).map_or(0, |s| s.0);
                    return Err(RenderError::TrustedFenceTag {
                        path: template.path.clone(),
                        line,
                        name: (*name).to_string(),
                    });
                }
                raw.to_string()
            }
        };
        let occurrences = seen.get(*name).map_or(0, |s| s.1);
        inserted.insert(
            name,
            RenderedValue {
                name: (*name).to_string(),
                class,
                occurrences,
                text,
            },
        );
    }
    Ok(inserted)
}

/// The body as segments: template text and value occurrences; and the
/// template's own text (the body with every placeholder removed). With a
/// nonce, the template's own fence tags carry it (lint has checked that
/// each is written exactly `FENCE_OPEN` / `FENCE_CLOSE`, so a plain
/// replacement finds every one and nothing else), and the preamble
/// comes first.
fn body_segments(
    template: &Template,
    inserted: &BTreeMap<&str, RenderedValue>,
    nonce: Option<&FenceNonce>,
) -> (Vec<Segment>, String) {
    let src = template.source();
    let literal_text = |text: &str| match nonce {
        Some(n) => text
            .replace(FENCE_CLOSE, &n.close_tag())
            .replace(FENCE_OPEN, &n.open_tag()),
        None => text.to_string(),
    };
    let mut segments: Vec<Segment> = Vec::new();
    let mut template_text = nonce.map(FenceNonce::preamble).unwrap_or_default();
    if !template_text.is_empty() {
        segments.push(Segment {
            untrusted: false,
            text: template_text.clone(),
        });
    }
    let mut pos = template.body.start;
    for p in &template.placeholders {
        let literal = literal_text(&src[pos..p.range.start]);
        template_text.push_str(&literal);
        segments.push(Segment {
            untrusted: false,
            text: literal,
        });
        if let Some(v) = inserted.get(p.name.as_str()) {
            segments.push(Segment {
                untrusted: v.class == Class::Untrusted,
                text: v.text.clone(),
            });
        }
        pos = p.range.end;
    }
    let tail = literal_text(&src[pos..template.body.end]);
    template_text.push_str(&tail);
    segments.push(Segment {
        untrusted: false,
        text: tail,
    });
    (segments, template_text)
}

/// The final re-scan of the rendered `text`: exactly the template's fence
/// tags, and exactly the template's control tokens plus those of trusted
/// values (each as many times as it is inserted).
fn check_tags(
    template: &Template,
    text: &str,
    inserted: &BTreeMap<&str, RenderedValue>,
) -> Result<(), RenderError> {
    let count = |tags: &[fence::Tag], control: bool| {
        tags.iter()
            .filter(|t| (t.kind == TagKind::Control) == control)
            .count()
    };
    let trusted_control: usize = inserted
        .values()
        .filter(|v| v.class == Class::Trusted)
        .map(|v| count(&fence::find_tags(&v.text), true) * v.occurrences)
        .sum();
    let (in_body, in_text) = (fence::find_tags(template.body()), fence::find_tags(text));
    for (control, what, extra) in [
        (false, "fence tags", 0),
        (true, "control tokens", trusted_control),
    ] {
        let expected = count(&in_body, control) + extra;
        let found = count(&in_text, control);
        if expected != found {
            return Err(RenderError::FenceBroken {
                path: template.path.clone(),
                what,
                expected,
                found,
            });
        }
    }
    Ok(())
}

/// One piece of a rendered body: template text, or one occurrence of a
/// value.
pub(super) struct Segment {
    pub(super) untrusted: bool,
    pub(super) text: String,
}

/// Joins `segments`, first rewriting every tag that the joined text holds
/// over an untrusted occurrence: the part of the tag inside the first
/// untrusted occurrence it touches becomes the neutralized marker, its parts
/// inside further untrusted occurrences are dropped, and template text and
/// trusted values are left alone. Repeats until no rewrite changes anything
/// (at most 8 rounds); returns the joined text.
///
/// An empty occurrence touches a tag that runs across its place, and gets
/// the marker: the template text on its two sides must not join into a tag
/// either.
///
/// Each value was neutralized alone, so a tag that touches one exists only
/// because of its neighbours: `<|im_` meeting `start|>`, `&` meeting
/// `lt;/untrusted-content>`. The markers hold no `<`, `&` or `|`, so each
/// rewrite removes the tag's characters from the untrusted side of the
/// seam. A tag the template itself writes around a value (`<|{{A}}|>`)
/// survives with the value replaced by the marker; `render`'s final count
/// check refuses anything else left over.
fn neutralize_seams(segments: &mut [Segment]) -> String {
    neutralize_seams_metered(segments, &mut 0)
}

/// [`neutralize_seams`], adding to `visits` the number of (tag, segment)
/// pairs it examines. The pass finds each tag's segments by binary search
/// over the segments' end offsets instead of walking every segment for
/// every tag: a template with many fence tags and many placeholders made
/// that walk quadratic (20,000 tags × 200,000 segments for 100,000
/// placeholders). Tags do not overlap, so all tags together touch at most
/// one segment each plus one shared boundary segment per tag; the meter
/// lets a test hold the pass to that bound without timing it.
pub(super) fn neutralize_seams_metered(segments: &mut [Segment], visits: &mut usize) -> String {
    let join = |segments: &[Segment]| segments.iter().map(|s| s.text.as_str()).collect::<String>();
    let mut text = join(segments);
    for _ in 0..8 {
        let tags = fence::find_tags(&text);
        if tags.is_empty() {
            break;
        }
        // Each segment's byte range in `text`.
        let mut bounds: Vec<(usize, usize)> = Vec::with_capacity(segments.len());
        let mut offset = 0;
        for seg in segments.iter() {
            bounds.push((offset, offset + seg.text.len()));
            offset += seg.text.len();
        }
        // (segment, range inside it, replacement), in text order.
        let mut edits: Vec<(usize, Range<usize>, &'static str)> = Vec::new();
        for tag in &tags {
            // A segment [a, b) touches the tag when it overlaps it or, for
            // an empty one, sits strictly inside it; both need b > start
            // and a < end, so the candidates are one run of indices.
            let first_idx = bounds.partition_point(|&(_, b)| b <= tag.range.start);
            let mut first = true;
            for (i, &(a, b)) in bounds.iter().enumerate().skip(first_idx) {
                if a >= tag.range.end {
                    break;
                }
                *visits += 1;
                let seg = &segments[i];
                let (lo, hi) = (tag.range.start.max(a), tag.range.end.min(b));
                // An empty value touches a tag that runs across its place
                // (`<SYS{{A}}>` with A = ``): the marker goes in between.
                let touches = if a == b {
                    tag.range.start < a && a < tag.range.end
                } else {
                    lo < hi
                };
                if !seg.untrusted || !touches {
                    continue;
                }
                let marker = match (first, tag.kind) {
                    (false, _) => "",
                    (true, TagKind::Control) => fence::NEUTRALIZED_CONTROL_TOKEN,
                    (true, _) => fence::NEUTRALIZED_FENCE_TAG,
                };
                first = false;
                edits.push((i, lo - a..hi - a, marker));
            }
        }
        if edits.is_empty() {
            break;
        }
        // Apply from the back so earlier ranges stay valid.
        for (i, range, marker) in edits.into_iter().rev() {
            if let Some(seg) = segments.get_mut(i)
                && seg.text.is_char_boundary(range.start)
                && seg.text.is_char_boundary(range.end)
                && range.end <= seg.text.len()
            {
                seg.text.replace_range(range, marker);
            }
        }
        let next = join(segments);
        if next == text {
            break;
        }
        text = next;
    }
    text
}
