//! Reading markdown reports: front matter, headings and sections, all as
//! verbatim byte ranges of the file.
//!
//! # Why our own front-matter split
//!
//! `gray_matter` (the design card's choice) rebuilds the body line by line
//! (trimmed, CRLF turned into LF), so byte offsets into its output do not
//! match the file; a front matter that never closes comes back as "no
//! front matter" instead of an error; and its errors carry no location.
//! This module therefore splits the block off itself — a leading `---`
//! (YAML) or `+++` (TOML) line up to the matching closing line, aware of a
//! UTF-8 byte-order mark and of CRLF line ends — and hands the verbatim
//! block to `serde-saphyr` (YAML) or `toml`, whose error positions are
//! shifted to lines of the file.
//!
//! A third form is recognised for Pelican archives (This Week in Rust):
//! `Key: value` lines at the very top of the file, ended by a blank line.
//! It is taken as metadata only when every line of that first block has the
//! shape `Word: value` and one of the keys is `Title` or `Date`, so an
//! ordinary first paragraph such as `Note: this is a draft` is not eaten.
//!
//! # Why sections are cut from pulldown-cmark offsets
//!
//! A `^## ` line scan misses setext headings (`Title` over `---`) and
//! wrongly matches `##` lines inside code fences. pulldown-cmark's
//! [`into_offset_iter`](pulldown_cmark::Parser::into_offset_iter) gives each
//! heading's byte range; a section is cut from its heading's line start to
//! the line start of the next heading of the same or a higher level, so
//! `&source[section.range]` is exactly the text of the file. The body is
//! parsed *without* pulldown-cmark's YAML metadata-block option: in 0.13 it
//! opens a metadata block at any unindented `---` line followed by text,
//! anywhere in the file, and swallows everything up to the next `---`.
//!
//! Headings inside block quotes and list items are **not** section
//! boundaries: a `## Note` quoted from another report, or a heading-shaped
//! line in a list item, belongs to the section it sits in. Headings in
//! fenced or indented code blocks and in HTML blocks (including comments)
//! are not headings at all.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::Path;

use pulldown_cmark::{Event, HeadingLevel, Options, Parser, Tag, TagEnd};

use crate::error::{HistoryError, line_of};

/// The parser options used everywhere in this crate: GitHub-flavoured
/// tables and strikethrough, and never the metadata-block extensions.
pub(crate) fn parser_options() -> Options {
    Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH
}

/// Decodes a file's bytes, or fails naming the file, the offset and the
/// line of the first invalid byte.
pub fn decode_utf8<'a>(bytes: &'a [u8], path: &Path) -> Result<&'a str, HistoryError> {
    std::str::from_utf8(bytes).map_err(|e| HistoryError::InvalidUtf8 {
        path: path.to_path_buf(),
        offset: e.valid_up_to(),
        line: line_of(bytes, e.valid_up_to()),
    })
}

/// The most bytes of one archive file read by default: 4 MiB, ten times
/// a 50,000-word rolling report. Digesting a file costs about 27 bytes of
/// memory per byte, so the limit also bounds a digest's memory (a 100 MiB
/// file took 2.7 GB before there was one).
pub const DEFAULT_MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// Reads the regular file at `path` whole, reading no more than `limit`
/// bytes: a larger file is [`HistoryError::TooLarge`] (also when it grows
/// past the limit while being read), a directory, FIFO or device is
/// [`HistoryError::NotAFile`] (`role` names what the file was given as),
/// refused before it is opened, since opening a FIFO blocks.
pub fn read_bounded(path: &Path, limit: u64, role: &'static str) -> Result<Vec<u8>, HistoryError> {
    use std::io::Read;
    let io = |e: std::io::Error| HistoryError::Io {
        path: path.to_path_buf(),
        source: e,
    };
    let too_large = || HistoryError::TooLarge {
        path: path.to_path_buf(),
        limit,
    };
    crate::error::require_file(path, role)?;
    let file = std::fs::File::open(path).map_err(io)?;
    let size = file.metadata().map_err(io)?.len();
    if size > limit {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > limit {
        return Err(too_large());
    }
    Ok(bytes)
}

/// Reads an archive file as UTF-8 text, at most `limit` bytes of it
/// ([`read_bounded`]), naming the file on any failure.
pub fn read_markdown(path: &Path, limit: u64) -> Result<String, HistoryError> {
    let bytes = read_bounded(path, limit, "archive file")?;
    decode_utf8(&bytes, path)?;
    // Checked just above; `from_utf8` cannot fail here, but stay total.
    String::from_utf8(bytes).map_err(|e| HistoryError::InvalidUtf8 {
        path: path.to_path_buf(),
        offset: e.utf8_error().valid_up_to(),
        line: 1,
    })
}

/// Which syntax a front-matter block is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FrontMatterFormat {
    /// `---` … `---` (or `...`).
    Yaml,
    /// `+++` … `+++`.
    Toml,
    /// Pelican `Key: value` lines ended by a blank line.
    Pelican,
}

impl FrontMatterFormat {
    fn name(self) -> &'static str {
        match self {
            FrontMatterFormat::Yaml => "YAML",
            FrontMatterFormat::Toml => "TOML",
            FrontMatterFormat::Pelican => "Pelican",
        }
    }
}

/// A front-matter block as it stands in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrontMatter<'a> {
    /// The syntax.
    pub format: FrontMatterFormat,
    /// The text between the delimiter lines, verbatim (line ends included).
    pub raw: &'a str,
    /// Where [`raw`](Self::raw) is in the file.
    pub raw_range: Range<usize>,
    /// The whole block: opening line through the closing line's line end.
    pub block_range: Range<usize>,
    /// 1-based line of the first line of [`raw`](Self::raw) in the file.
    pub first_line: usize,
}

/// A markdown file split into front matter and body, as byte ranges of the
/// original text (byte-order mark included in the offsets).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Document<'a> {
    /// The whole file.
    pub source: &'a str,
    /// The front-matter block, if any.
    pub front_matter: Option<FrontMatter<'a>>,
    /// Where the body is in [`source`](Self::source).
    pub body_range: Range<usize>,
}

/// Lines of `text` from byte `from`: (line start, content end without the
/// line break, next line start).
fn lines_from(text: &str, from: usize) -> impl Iterator<Item = (usize, usize, usize)> + '_ {
    let bytes = text.as_bytes();
    let mut pos = from;
    std::iter::from_fn(move || {
        if pos >= bytes.len() {
            return None;
        }
        let start = pos;
        let nl = bytes
            .get(start..)
            .and_then(|rest| rest.iter().position(|&b| b == b'\n'))
            .map(|i| start + i);
        let (content_end, next) = match nl {
            Some(i) => (i, i + 1),
            None => (bytes.len(), bytes.len()),
        };
        let content_end = if content_end > start && bytes.get(content_end - 1) == Some(&b'\r') {
            content_end - 1
        } else {
            content_end
        };
        pos = next;
        Some((start, content_end, next))
    })
}

fn is_delimiter(line: &str, delim: &str) -> bool {
    line.strip_prefix(delim)
        .is_some_and(|rest| rest.chars().all(|c| c == ' ' || c == '\t'))
}

/// Splits `source` into front matter and body. `path` only names the file
/// in errors.
///
/// * A leading UTF-8 byte-order mark is skipped (offsets still count it).
/// * `---` opens YAML front matter closed by `---` or `...`; `+++` opens
///   TOML closed by `+++`; delimiter lines may carry trailing blanks and
///   end in LF or CRLF. A block that never closes is
///   [`HistoryError::UnclosedFrontMatter`].
/// * Pelican `Key: value` metadata is recognised as described in the
///   [module documentation](self).
/// * A file without any of these is all body.
///
/// The metadata is not parsed here; see [`Document::metadata`].
///
/// ```
/// use ctx_history::markdown::{split_front_matter, FrontMatterFormat};
/// let src = "\u{feff}---\r\ndate: 2026-08-14\r\n---\r\n## A\r\n";
/// let doc = split_front_matter(src, "w.md".as_ref()).unwrap();
/// let fm = doc.front_matter.as_ref().unwrap();
/// assert_eq!(fm.format, FrontMatterFormat::Yaml);
/// assert_eq!(fm.raw, "date: 2026-08-14\r\n");
/// assert_eq!(doc.body(), "## A\r\n");
/// ```
pub fn split_front_matter<'a>(source: &'a str, path: &Path) -> Result<Document<'a>, HistoryError> {
    let start = if source.starts_with('\u{feff}') { 3 } else { 0 };
    let all_body = Document {
        source,
        front_matter: None,
        body_range: start..source.len(),
    };
    let mut lines = lines_from(source, start);
    let Some((l0, c0, n0)) = lines.next() else {
        return Ok(all_body);
    };
    let first = source.get(l0..c0).unwrap_or("");
    let (format, close): (FrontMatterFormat, &[&str]) = if is_delimiter(first, "---") {
        (FrontMatterFormat::Yaml, &["---", "..."])
    } else if is_delimiter(first, "+++") {
        (FrontMatterFormat::Toml, &["+++"])
    } else {
        return Ok(split_pelican(source, start).unwrap_or(all_body));
    };
    for (ls, ce, next) in lines {
        let line = source.get(ls..ce).unwrap_or("");
        if close.iter().any(|d| is_delimiter(line, d)) {
            return Ok(Document {
                source,
                front_matter: Some(FrontMatter {
                    format,
                    raw: source.get(n0..ls).unwrap_or(""),
                    raw_range: n0..ls,
                    block_range: l0..next,
                    first_line: 2,
                }),
                body_range: next..source.len(),
            });
        }
    }
    Err(HistoryError::UnclosedFrontMatter {
        path: path.to_path_buf(),
        line: 1,
        delimiter: if format == FrontMatterFormat::Yaml {
            "---"
        } else {
            "+++"
        },
    })
}

/// `Key: value` with a one-word key (letters, digits, `_`, `-`).
fn pelican_pair(line: &str) -> Option<(&str, &str)> {
    let (key, value) = line.split_once(':')?;
    let mut chars = key.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    let value_ok = value.is_empty() || value.starts_with([' ', '\t']);
    (first_ok && rest_ok && value_ok).then_some((key, value.trim()))
}

fn split_pelican(source: &str, start: usize) -> Option<Document<'_>> {
    let mut saw_key = false;
    let mut end = None;
    for (ls, ce, next) in lines_from(source, start) {
        let line = source.get(ls..ce)?;
        if line.trim().is_empty() {
            end = Some((ls, next));
            break;
        }
        let (key, _) = pelican_pair(line)?;
        saw_key |= key.eq_ignore_ascii_case("title") || key.eq_ignore_ascii_case("date");
    }
    if !saw_key {
        return None;
    }
    let (raw_end, body_start) = end.unwrap_or((source.len(), source.len()));
    Some(Document {
        source,
        front_matter: Some(FrontMatter {
            format: FrontMatterFormat::Pelican,
            raw: source.get(start..raw_end)?,
            raw_range: start..raw_end,
            block_range: start..body_start,
            first_line: 1,
        }),
        body_range: body_start..source.len(),
    })
}

/// Parsed front-matter fields, keyed by name. Values are kept as JSON
/// values (TOML dates become their RFC 3339 text, Pelican values strings).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Metadata {
    fields: BTreeMap<String, serde_json::Value>,
}

impl Metadata {
    /// The value of `name`: an exact key first, else the first key equal
    /// to it ignoring ASCII case.
    pub fn get(&self, name: &str) -> Option<&serde_json::Value> {
        self.fields.get(name).or_else(|| {
            self.fields
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v)
        })
    }

    /// The value of `name` as one line of text: strings as they are,
    /// numbers and booleans printed, lists joined with `, `; `None` for a
    /// missing, null, empty or table value.
    pub fn text(&self, name: &str) -> Option<String> {
        fn flat(v: &serde_json::Value) -> Option<String> {
            match v {
                serde_json::Value::String(s) => Some(s.trim().to_string()),
                serde_json::Value::Number(n) => Some(n.to_string()),
                serde_json::Value::Bool(b) => Some(b.to_string()),
                serde_json::Value::Array(items) => {
                    let parts: Vec<String> = items.iter().filter_map(flat).collect();
                    Some(parts.join(", "))
                }
                _ => None,
            }
        }
        self.get(name).and_then(flat).filter(|s| !s.is_empty())
    }

    /// Every field, sorted by name.
    pub fn fields(&self) -> &BTreeMap<String, serde_json::Value> {
        &self.fields
    }
}

fn toml_to_json(v: toml::Value) -> serde_json::Value {
    match v {
        toml::Value::String(s) => serde_json::Value::String(s),
        toml::Value::Integer(i) => serde_json::Value::from(i),
        toml::Value::Float(f) => serde_json::Number::from_f64(f)
            .map(serde_json::Value::Number)
            .unwrap_or(serde_json::Value::Null),
        toml::Value::Boolean(b) => serde_json::Value::Bool(b),
        toml::Value::Datetime(d) => serde_json::Value::String(d.to_string()),
        toml::Value::Array(a) => {
            serde_json::Value::Array(a.into_iter().map(toml_to_json).collect())
        }
        toml::Value::Table(t) => {
            serde_json::Value::Object(t.into_iter().map(|(k, v)| (k, toml_to_json(v))).collect())
        }
    }
}

impl<'a> Document<'a> {
    /// The body: everything after the front matter (and after a byte-order
    /// mark), verbatim.
    pub fn body(&self) -> &'a str {
        self.source.get(self.body_range.clone()).unwrap_or("")
    }

    /// Parses the front matter (an empty [`Metadata`] when there is none).
    /// Errors name `path` and the line of the file where the parser
    /// stopped.
    pub fn metadata(&self, path: &Path) -> Result<Metadata, HistoryError> {
        let Some(fm) = &self.front_matter else {
            return Ok(Metadata::default());
        };
        if fm.raw.trim().is_empty() {
            return Ok(Metadata::default());
        }
        let fail = |line: usize, message: String| HistoryError::FrontMatter {
            path: path.to_path_buf(),
            line,
            format: fm.format.name(),
            message,
        };
        let fields = match fm.format {
            FrontMatterFormat::Yaml => {
                let value: serde_json::Value = serde_saphyr::from_str(fm.raw).map_err(|e| {
                    let line = e
                        .location()
                        .map(|l| fm.first_line + (l.line() as usize).saturating_sub(1))
                        .unwrap_or(fm.first_line);
                    fail(line, first_line_of(&e.to_string()))
                })?;
                match value {
                    serde_json::Value::Object(map) => map.into_iter().collect(),
                    serde_json::Value::Null => BTreeMap::new(),
                    _ => {
                        return Err(fail(
                            fm.first_line,
                            "front matter must be a mapping of fields".into(),
                        ));
                    }
                }
            }
            FrontMatterFormat::Toml => {
                let table: toml::Table = toml::from_str(fm.raw).map_err(|e| {
                    let line = e
                        .span()
                        .map(|s| fm.first_line + line_of(fm.raw.as_bytes(), s.start) - 1)
                        .unwrap_or(fm.first_line);
                    fail(line, e.message().trim().to_string())
                })?;
                table
                    .into_iter()
                    .map(|(k, v)| (k, toml_to_json(v)))
                    .collect()
            }
            FrontMatterFormat::Pelican => fm
                .raw
                .lines()
                .filter_map(pelican_pair)
                .map(|(k, v)| {
                    (
                        k.to_ascii_lowercase(),
                        serde_json::Value::String(v.to_string()),
                    )
                })
                .collect(),
        };
        Ok(Metadata { fields })
    }

    /// The top-level sections of the body at heading `level` (1–6), with
    /// ranges into [`source`](Self::source).
    pub fn sections(&self, level: u8) -> Vec<Section<'a>> {
        let offset = self.body_range.start;
        sections(self.body(), level)
            .into_iter()
            .map(|s| s.shifted(self.source, offset))
            .collect()
    }
}

/// The first line of a parser message (serde-saphyr appends a snippet whose
/// line numbers are relative to the fragment, which would mislead).
fn first_line_of(message: &str) -> String {
    message.lines().next().unwrap_or(message).trim().to_string()
}

/// A heading as pulldown-cmark sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heading {
    /// 1 for `#`, 2 for `##` or a `---` setext underline, ...
    pub level: u8,
    /// The heading text, inline markup removed (text and code spans).
    pub title: String,
    /// From the heading's line start to the line start after it (the
    /// underline included for setext headings).
    pub range: Range<usize>,
    /// Inside a block quote or list item (not a section boundary).
    pub nested: bool,
}

fn level_number(l: HeadingLevel) -> u8 {
    match l {
        HeadingLevel::H1 => 1,
        HeadingLevel::H2 => 2,
        HeadingLevel::H3 => 3,
        HeadingLevel::H4 => 4,
        HeadingLevel::H5 => 5,
        HeadingLevel::H6 => 6,
    }
}

/// Start of the line holding byte `pos`. Line ends are LF, CRLF or a lone
/// CR, as in CommonMark.
fn line_start(text: &str, pos: usize) -> usize {
    text.as_bytes()
        .get(..pos)
        .and_then(|b| b.iter().rposition(|&c| c == b'\n' || c == b'\r'))
        .map_or(0, |i| i + 1)
}

/// Start of the line after the one holding byte `pos - 1` (`pos` itself
/// when it already starts a line).
fn next_line_start(text: &str, pos: usize) -> usize {
    let b = text.as_bytes();
    let at_line_start = |p: usize| match b.get(p.wrapping_sub(1)) {
        Some(b'\n') => true,
        Some(b'\r') => b.get(p) != Some(&b'\n'),
        _ => false,
    };
    if pos > 0 && at_line_start(pos) {
        return pos.min(text.len());
    }
    let Some(i) = b
        .get(pos..)
        .and_then(|r| r.iter().position(|&c| c == b'\n' || c == b'\r'))
    else {
        return text.len();
    };
    let end = pos + i;
    if b.get(end) == Some(&b'\r') && b.get(end + 1) == Some(&b'\n') {
        end + 2
    } else {
        end + 1
    }
}

/// Every heading of `text` (a body without front matter), in order.
pub fn headings(text: &str) -> Vec<Heading> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut current: Option<Heading> = None;
    for (event, range) in Parser::new_ext(text, parser_options()).into_offset_iter() {
        match event {
            Event::Start(Tag::BlockQuote(_) | Tag::Item | Tag::FootnoteDefinition(_)) => depth += 1,
            Event::End(TagEnd::BlockQuote(_) | TagEnd::Item | TagEnd::FootnoteDefinition) => {
                depth = depth.saturating_sub(1)
            }
            Event::Start(Tag::Heading { level, .. }) => {
                current = Some(Heading {
                    level: level_number(level),
                    title: String::new(),
                    range: line_start(text, range.start)..next_line_start(text, range.end),
                    nested: depth > 0,
                });
            }
            Event::Text(t) | Event::Code(t) => {
                if let Some(h) = current.as_mut() {
                    h.title.push_str(&t);
                }
            }
            Event::SoftBreak | Event::HardBreak => {
                if let Some(h) = current.as_mut() {
                    h.title.push(' ');
                }
            }
            Event::End(TagEnd::Heading(_)) => out.extend(current.take()),
            _ => {}
        }
    }
    out
}

/// A section: a heading and everything up to the next heading of the same
/// or a higher level.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section<'a> {
    /// The heading text as written (markup removed).
    pub title: String,
    /// [`normalize_name`] of the title: what names are matched against.
    pub key: String,
    /// The heading level.
    pub level: u8,
    /// The whole section, heading line included, in the text it was cut
    /// from.
    pub range: Range<usize>,
    /// The heading line(s) alone.
    pub heading_range: Range<usize>,
    /// `&text[range]`, verbatim.
    pub text: &'a str,
}

impl<'a> Section<'a> {
    fn shifted(self, source: &'a str, offset: usize) -> Section<'a> {
        let range = self.range.start + offset..self.range.end + offset;
        Section {
            text: source.get(range.clone()).unwrap_or(""),
            range,
            heading_range: self.heading_range.start + offset..self.heading_range.end + offset,
            ..self
        }
    }

    /// The section without its heading line(s).
    pub fn content(&self) -> &'a str {
        let skip = self.heading_range.end - self.heading_range.start;
        self.text.get(skip..).unwrap_or("")
    }
}

/// The sections of `text` at heading `level` (clamped to 1–6), in document
/// order, with ranges into `text`. Headings nested in block quotes or list
/// items neither start nor end sections.
///
/// ```
/// use ctx_history::markdown::sections;
/// let md = "intro\n\n## One\nfirst\n```\n## not a heading\n```\n### Sub\nx\n\nTwo\n---\nsecond\n# Top\n";
/// let s = sections(md, 2);
/// assert_eq!(s.len(), 2);
/// assert_eq!(s[0].text, "## One\nfirst\n```\n## not a heading\n```\n### Sub\nx\n\n");
/// assert_eq!(s[1].title, "Two");
/// assert_eq!(s[1].text, "Two\n---\nsecond\n");
/// ```
pub fn sections(text: &str, level: u8) -> Vec<Section<'_>> {
    let level = level.clamp(1, 6);
    let heads: Vec<Heading> = headings(text).into_iter().filter(|h| !h.nested).collect();
    let mut out = Vec::new();
    for (i, h) in heads.iter().enumerate() {
        if h.level != level {
            continue;
        }
        let end = heads
            .get(i + 1..)
            .and_then(|rest| rest.iter().find(|n| n.level <= level))
            .map_or(text.len(), |n| n.range.start);
        let range = h.range.start..end.max(h.range.end);
        out.push(Section {
            key: normalize_name(&h.title),
            title: h.title.trim().to_string(),
            level: h.level,
            text: text.get(range.clone()).unwrap_or(""),
            heading_range: h.range.clone(),
            range,
        });
    }
    out
}

/// The form heading names are compared in: surrounding whitespace and
/// trailing `#`s and `:` removed, inner whitespace (tabs, non-breaking
/// spaces) collapsed to one space, typographic quotes made ASCII, and
/// lower-cased (Unicode).
///
/// ```
/// use ctx_history::markdown::normalize_name;
/// assert_eq!(normalize_name("  Signal  &\tNoise ## "), "signal & noise");
/// assert_eq!(normalize_name("The Week’s Ahead:"), "the week's ahead");
/// ```
pub fn normalize_name(name: &str) -> String {
    let mut s = name.trim();
    loop {
        let t = s
            .trim_end_matches('#')
            .trim_end()
            .trim_end_matches(':')
            .trim_end();
        if t.len() == s.len() {
            break;
        }
        s = t;
    }
    let mut out = String::with_capacity(s.len());
    for word in s.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        for c in word.chars() {
            match c {
                '\u{2018}' | '\u{2019}' | '\u{201b}' => out.push('\''),
                '\u{201c}' | '\u{201d}' => out.push('"'),
                c => out.extend(c.to_lowercase()),
            }
        }
    }
    out
}

/// The first section whose name matches `name` (see [`normalize_name`]).
/// When a file repeats a heading, the first one wins.
pub fn find_section<'s, 'a>(sections: &'s [Section<'a>], name: &str) -> Option<&'s Section<'a>> {
    let key = normalize_name(name);
    sections.iter().find(|s| s.key == key)
}

/// The sections matching `names`, in the order of `names`, each at most
/// once; names with no matching section are left out. This is the
/// extractor behind both `ctx history` and the `extract_key_sections`
/// strategy of `ctx-prompt`.
///
/// ```
/// use ctx_history::markdown::extract_sections;
/// let md = "## Blind Spots\nb\n## Signal & Noise\ns\n";
/// let got = extract_sections(md, 2, &["signal & noise", "Missing", "BLIND SPOTS"]);
/// let titles: Vec<_> = got.iter().map(|s| s.title.as_str()).collect();
/// assert_eq!(titles, ["Signal & Noise", "Blind Spots"]);
/// ```
pub fn extract_sections<'a, S: AsRef<str>>(
    text: &'a str,
    level: u8,
    names: &[S],
) -> Vec<Section<'a>> {
    let all = sections(text, level);
    let mut out: Vec<Section<'a>> = Vec::new();
    for name in names {
        let found = find_section(&all, name.as_ref());
        if let Some(s) = found.filter(|s| !out.iter().any(|o| o.range == s.range)) {
            out.push(s.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p() -> &'static Path {
        Path::new("t.md")
    }

    #[test]
    fn no_front_matter() {
        let d = split_front_matter("# hi\n", p()).unwrap();
        assert!(d.front_matter.is_none());
        assert_eq!(d.body(), "# hi\n");
        let d = split_front_matter("", p()).unwrap();
        assert_eq!(d.body(), "");
    }

    #[test]
    fn unclosed_is_an_error_naming_the_file() {
        let e = split_front_matter("---\ntitle: x\n## body\n", p()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "t.md:1: front matter opened with `---` is never closed"
        );
        let e = split_front_matter("+++\n", p()).unwrap_err();
        assert!(e.to_string().contains("`+++`"));
    }

    #[test]
    fn toml_front_matter_and_located_errors() {
        let src = "+++\ndate = 2026-08-14\nsummary = \"x\"\n+++\nbody\n";
        let d = split_front_matter(src, p()).unwrap();
        let m = d.metadata(p()).unwrap();
        assert_eq!(m.text("date").as_deref(), Some("2026-08-14"));
        assert_eq!(m.text("Summary").as_deref(), Some("x"));
        let bad = "+++\nok = 1\nbroken = \n+++\n";
        let e = split_front_matter(bad, p())
            .unwrap()
            .metadata(p())
            .unwrap_err();
        assert!(
            e.to_string()
                .starts_with("t.md:3: malformed TOML front matter"),
            "{e}"
        );
    }

    #[test]
    fn yaml_errors_are_located_in_the_file() {
        let bad = "---\ntitle: a\nsummary: [unclosed\n---\nbody\n";
        let e = split_front_matter(bad, p())
            .unwrap()
            .metadata(p())
            .unwrap_err();
        let msg = e.to_string();
        assert!(msg.starts_with("t.md:"), "{msg}");
        assert!(msg.contains("malformed YAML front matter"), "{msg}");
        let dup = "---\na: 1\na: 2\n---\n";
        let e = split_front_matter(dup, p())
            .unwrap()
            .metadata(p())
            .unwrap_err();
        assert!(e.to_string().starts_with("t.md:3:"), "{e}");
    }

    #[test]
    fn yaml_values() {
        let src = "---\ndate: 2026-08-14\nsummary: Rates held.\ntags: [a, b]\n...\nrest";
        let d = split_front_matter(src, p()).unwrap();
        let m = d.metadata(p()).unwrap();
        assert_eq!(m.text("date").as_deref(), Some("2026-08-14"));
        assert_eq!(m.text("tags").as_deref(), Some("a, b"));
        assert_eq!(d.body(), "rest");
    }

    #[test]
    fn pelican_metadata() {
        let src = "Title: Issue 5\nNumber: 5\nDate: 2025-01-01\n\nHello\n## A\n";
        let d = split_front_matter(src, p()).unwrap();
        assert_eq!(
            d.front_matter.as_ref().unwrap().format,
            FrontMatterFormat::Pelican
        );
        assert_eq!(d.body(), "Hello\n## A\n");
        assert_eq!(
            d.metadata(p()).unwrap().text("date").as_deref(),
            Some("2025-01-01")
        );
        // An ordinary first paragraph is not metadata.
        let d = split_front_matter("Note: a draft\n\ntext\n", p()).unwrap();
        assert!(d.front_matter.is_none());
    }

    #[test]
    fn sections_are_verbatim_with_crlf_and_bom() {
        let src = "\u{feff}---\r\nsummary: s\r\n---\r\n## One\r\nA.\r\n\r\n  ## Two ##\r\nB.\r\n";
        let d = split_front_matter(src, p()).unwrap();
        let s = d.sections(2);
        assert_eq!(s.len(), 2);
        assert_eq!(&src[s[0].range.clone()], "## One\r\nA.\r\n\r\n");
        assert_eq!(s[1].text, "  ## Two ##\r\nB.\r\n");
        assert_eq!(s[1].title, "Two");
        assert_eq!(s[1].content(), "B.\r\n");
    }

    #[test]
    fn nested_and_code_headings_are_not_boundaries() {
        let md = "## A\n> ## Quoted\n- item\n\n  ## in item\n\n    ## indented code\n<!--\n## comment\n-->\n## B\n";
        let s = sections(md, 2);
        assert_eq!(
            s.iter().map(|s| s.title.as_str()).collect::<Vec<_>>(),
            ["A", "B"]
        );
    }

    #[test]
    fn lone_carriage_returns_end_lines() {
        // Found by the markdown_sections fuzz target.
        let src = "\r#\r#";
        let s = sections(src, 1);
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].range, 1..3);
        assert_eq!(s[1].range, 3..4);
        let s = sections("a\r\n## B\r\nx\r## C\rY", 2);
        assert_eq!(
            s.iter().map(|s| s.text).collect::<Vec<_>>(),
            ["## B\r\nx\r", "## C\rY"]
        );
    }

    #[test]
    fn heading_text_includes_code_spans() {
        let s = sections("## The `ctx` *tool*\nx\n", 2);
        assert_eq!(s[0].title, "The ctx tool");
        assert_eq!(s[0].key, "the ctx tool");
    }

    #[test]
    fn invalid_utf8_names_the_file() {
        let e = decode_utf8(b"ok\n\xff", p()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "t.md: not valid UTF-8 (first bad byte at offset 3, line 2)"
        );
    }
}
