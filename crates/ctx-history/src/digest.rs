//! Assembling the digest: extraction, compression to targets, and fitting
//! both caps.
//!
//! # Shape
//!
//! Each kept source is `### {label}`, a blank line, and its text; sources
//! are separated by one blank line, in priority order, and the digest ends
//! with one line break. With no source at all the digest is empty (not
//! even a line break).
//!
//! # Fitting
//!
//! 1. Every source is compressed to its word target.
//! 2. If the digest is within `max_words` and the counter's cheap
//!    [`upper_bound`](TokenCounter::upper_bound) is within `token_cap`, it
//!    is done: no tokenizer is built.
//! 3. Otherwise sources are reduced in reverse priority, each as far as
//!    needed before the next is touched: the largest [level] of it that
//!    fits is found by binary search. A source that would fall below its
//!    floor is dropped whole instead — except the highest-priority source
//!    still present, which is cut down to one word of its first unit and
//!    dropped only when not even that fits.
//! 4. If a cap binds (a source was cut below its target or dropped), the
//!    room left is handed back in priority order: kept sources grow past
//!    their targets, dropped ones come back with the whole units that fit
//!    (see `grow`). Without this a source dropped below its floor left
//!    its room unused, and one oversized source emptied the digest.
//! 5. Token sizes during the search are the sums of per-unit counts (each
//!    unit is tokenized at most once), since BPE counts of a join are not
//!    the sums of its parts. The final digest is then counted exactly,
//!    once; if it is over, the search repeats with the cap lowered by the
//!    excess, until the exact count holds. The word count is exact at every
//!    step. Both caps therefore hold for every input, budget 0 included.
//!
//! [level]: crate::compress::Compressible::max_level

use std::path::{Path, PathBuf};

use chrono::NaiveDate;
use serde::Serialize;

use ctx_tokens::TokenCounter;

use crate::compress::{Compressible, Level, MarkTokens, body_parts, count_words};
use crate::config::{HistoryConfig, SourceConfig};
use crate::error::HistoryError;
use crate::locate::{Located, Scope, locate};
use crate::markdown::{extract_sections, read_markdown, split_front_matter};
use crate::warning::Warning;

/// What to assemble, and under which caps.
#[derive(Debug, Clone)]
pub struct DigestRequest {
    /// The archive (`--content-root`).
    pub content_root: PathBuf,
    /// The analysis date (`--date`): reports strictly before it count as
    /// previous; the month and year of it select monthly and yearly files.
    pub date: NaiveDate,
    /// The previous weekly report, when the caller already knows it
    /// (`--previous-summary`); replaces the search of `before` sources.
    pub previous_summary: Option<PathBuf>,
    /// Word cap of the whole digest.
    pub max_words: usize,
    /// Token cap of the whole digest; see [`token_cap`](crate::token_cap).
    pub token_cap: usize,
    /// Count the final digest and each source exactly for the report even
    /// when the caps are far away (costs building the tokenizer). When
    /// false, reported token figures may be upper bounds (see
    /// [`Digest::tokens_exact`]).
    pub exact_counts: bool,
    /// Read files whose symbolic links lead outside the content root
    /// (`--follow-symlinks`); see [`Scope`].
    pub follow_symlinks: bool,
    /// The largest archive file read, in bytes (`--max-file-bytes`,
    /// default [`DEFAULT_MAX_FILE_BYTES`](crate::markdown::DEFAULT_MAX_FILE_BYTES)).
    /// A larger file is skipped with a [`Warning::FileTooLarge`], as an
    /// unreadable report is, and never read past the limit.
    pub max_file_bytes: u64,
    /// Applied to each source's text (its body and summary line, not its
    /// front matter) before it is cut, so the caps hold for the text as
    /// rewritten. The CLI passes `ctx-prompt`'s fence neutralizer here (this
    /// crate cannot depend on `ctx-prompt`, which uses its section
    /// extractor): the replacement is longer than the tag it replaces, and
    /// rewriting after fitting could push a digest at a binding cap over
    /// it.
    pub rewrite: Option<fn(&str) -> String>,
}

impl DigestRequest {
    /// A request with the caps of `config` (its `max_words` and
    /// `floor(prompt_budget × share)`), no previous-summary override and
    /// exact counts off.
    pub fn new(config: &HistoryConfig, content_root: impl Into<PathBuf>, date: NaiveDate) -> Self {
        DigestRequest {
            content_root: content_root.into(),
            date,
            previous_summary: None,
            max_words: config.max_words,
            token_cap: config.token_cap(),
            exact_counts: false,
            follow_symlinks: false,
            max_file_bytes: crate::markdown::DEFAULT_MAX_FILE_BYTES,
            rewrite: None,
        }
    }
}

/// What happened to a source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceStatus {
    /// In the digest whole.
    Included,
    /// In the digest, cut.
    Compressed,
    /// Found but left out (over the caps, or no text).
    Dropped,
    /// No file found.
    Missing,
}

/// The report on one source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SourceReport {
    /// The source's key.
    pub key: String,
    /// Its label.
    pub label: String,
    /// The file read (relative to the content root when inside it), or the
    /// path looked for when missing.
    pub path: Option<String>,
    /// What happened.
    pub status: SourceStatus,
    /// Words of its text in the digest (heading line excluded).
    pub words: usize,
    /// Tokens of its text in the digest (heading line excluded); exact when
    /// [`Digest::tokens_exact`].
    pub tokens: usize,
    /// Titles of the named sections found (empty when the whole body was
    /// used).
    pub sections: Vec<String>,
    /// Words of the extracted text before any compression.
    pub extracted_words: usize,
    /// Bytes of the extracted text before any compression.
    pub extracted_bytes: usize,
    /// Why the whole body was used, why it was dropped, ...
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// How much of each cap is left.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Slack {
    /// `max_words - words`.
    pub words: usize,
    /// `token_cap - tokens`.
    pub tokens: usize,
}

/// An assembled digest and its report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Digest {
    /// The digest (empty when no source exists).
    pub markdown: String,
    /// Whitespace-separated words of [`markdown`](Self::markdown).
    pub words: usize,
    /// Tokens of [`markdown`](Self::markdown).
    pub tokens: usize,
    /// Whether [`tokens`](Self::tokens) is an exact count (else the
    /// counter's upper bound, already within the cap).
    pub tokens_exact: bool,
    /// The word cap applied.
    pub max_words: usize,
    /// The token cap applied.
    pub token_cap: usize,
    /// The tokenizer's name.
    pub tokenizer: String,
    /// One report per configured source, in priority order.
    pub sources: Vec<SourceReport>,
    /// What is left of each cap.
    pub slack: Slack,
    /// Things worth telling that did not stop assembly: skipped reports,
    /// links not followed, sources dropped for lack of room.
    pub warnings: Vec<Warning>,
}

impl Digest {
    /// Replaces the digest's text by `markdown` (the same digest after a
    /// rewrite, such as a last neutralizing pass) and recounts what the
    /// report says of it: words, tokens (exact or the counter's upper
    /// bound, as before) and the slack of each cap, so the figures always
    /// describe the text they come with.
    pub fn replace_markdown(&mut self, markdown: String, counter: &dyn TokenCounter) {
        self.words = count_words(&markdown);
        self.tokens = if self.tokens_exact {
            counter.count(&markdown)
        } else {
            counter.upper_bound(&markdown)
        };
        self.slack.words = self.max_words.saturating_sub(self.words);
        self.slack.tokens = self.token_cap.saturating_sub(self.tokens);
        self.markdown = markdown;
    }
}

/// A source that was found and has text.
struct Prepared {
    index: usize,
    header: String,
    body: Compressible,
    /// The size kept ([`Compressible::level`]); `None` = dropped.
    level: Option<usize>,
    /// Units kept beyond the level's best `k` (indices), added to fill
    /// room.
    extra: Vec<usize>,
    /// The level after compression to the word target.
    level_target: usize,
    floor: usize,
    cache: Vec<Option<usize>>,
    cut_cache: Vec<(usize, usize)>,
}

impl Prepared {
    fn set(&mut self, level: Option<usize>) {
        self.level = level;
        self.extra.clear();
    }

    fn render(&self) -> Option<String> {
        self.level.map(|l| self.body.render_level(l, &self.extra))
    }
}

fn display_path(root: &Path, p: &Path) -> String {
    p.strip_prefix(root)
        .unwrap_or(p)
        .to_string_lossy()
        .replace('\\', "/")
}

/// Assembles the digest of `request.content_root` as `config` describes,
/// within `request.max_words` words and `request.token_cap` tokens of
/// `counter`.
///
/// Missing files are reported, never errors. Errors: a missing content
/// root, an unreadable or non-UTF-8 file, malformed front matter.
pub fn assemble_digest(
    config: &HistoryConfig,
    request: &DigestRequest,
    counter: &dyn TokenCounter,
) -> Result<Digest, HistoryError> {
    let root = &request.content_root;
    if !root.is_dir() {
        return Err(HistoryError::MissingContentRoot { path: root.clone() });
    }
    let Gathered {
        mut reports,
        mut prepared,
        mut warnings,
    } = gather_sources(config, request)?;

    let fitted = fit(&mut prepared, request, counter);

    let tokens_exact = fitted.exact.is_some() || request.exact_counts;
    let tokens = match fitted.exact {
        Some(t) => t,
        None if request.exact_counts && !fitted.markdown.is_empty() => {
            counter.count(&fitted.markdown)
        }
        None => counter.upper_bound(&fitted.markdown),
    };
    report_fitted(
        &prepared,
        &mut reports,
        &mut warnings,
        counter,
        tokens_exact,
    );
    let words = count_words(&fitted.markdown);
    Ok(Digest {
        slack: Slack {
            words: request.max_words.saturating_sub(words),
            tokens: request.token_cap.saturating_sub(tokens),
        },
        words,
        tokens,
        tokens_exact,
        max_words: request.max_words,
        token_cap: request.token_cap,
        tokenizer: counter.name().to_string(),
        sources: reports,
        warnings,
        markdown: fitted.markdown,
    })
}

/// The sources as read, before the fit.
struct Gathered {
    /// One report per source, in priority order.
    reports: Vec<SourceReport>,
    /// The sources found with text, at their word targets.
    prepared: Vec<Prepared>,
    /// The warnings so far, in the order they arose.
    warnings: Vec<Warning>,
}

/// Locates and reads every source in priority order: a report for each
/// (missing, refused as a link outside, skipped, or read), and the ones
/// with text prepared for the fit. When no source file exists at all it
/// warns, naming the paths looked for: a wrong `--content-root` otherwise
/// gives an empty digest and no word of why.
fn gather_sources(
    config: &HistoryConfig,
    request: &DigestRequest,
) -> Result<Gathered, HistoryError> {
    let root = &request.content_root;
    let scope =
        Scope::new(root, request.follow_symlinks)?.with_max_file_bytes(request.max_file_bytes);
    let mut gathered = Gathered {
        reports: Vec::new(),
        prepared: Vec::new(),
        warnings: Vec::new(),
    };
    // Whether any source file exists (read or refused as a link outside).
    let mut found_any = false;
    for source in config.sources_by_priority() {
        let located = locate(
            source,
            root,
            &scope,
            request.date,
            request.previous_summary.as_deref(),
            &mut gathered.warnings,
        )?;
        let mut report = SourceReport {
            key: source.key.clone(),
            label: source.label.clone(),
            path: None,
            status: SourceStatus::Missing,
            words: 0,
            tokens: 0,
            sections: Vec::new(),
            extracted_words: 0,
            extracted_bytes: 0,
            note: None,
        };
        match located {
            Located::Missing(p) => {
                report.path = Some(display_path(root, &p));
                report.note = Some("no file found".into());
            }
            Located::Outside(p) => {
                found_any = true;
                report.path = Some(display_path(root, &p));
                report.note =
                    Some("symbolic link leading outside the content root; not followed".into());
            }
            Located::Found(p) => {
                found_any = true;
                report.path = Some(display_path(root, &p));
                let found = Found {
                    source,
                    path: &p,
                    index: gathered.reports.len(),
                };
                if let Some(prepared) =
                    read_found(config, request, &found, &mut report, &mut gathered.warnings)?
                {
                    gathered.prepared.push(prepared);
                }
            }
        }
        gathered.reports.push(report);
    }

    if !found_any && !gathered.reports.is_empty() {
        gathered.warnings.push(Warning::NoRecognisedSource {
            content_root: root.display().to_string(),
            looked_for: config
                .sources_by_priority()
                .iter()
                .map(|s| crate::locate::strip_root(&s.path).to_string())
                .collect(),
        });
    }
    Ok(gathered)
}

/// A source whose file was found.
struct Found<'a> {
    source: &'a SourceConfig,
    /// The file to read.
    path: &'a Path,
    /// The index of its report.
    index: usize,
}

/// Reads a found source into its report (the sections found, the size
/// extracted, and why it is dropped when it is) and, when it has text,
/// prepares it for the fit at its word target. A file larger than
/// `max_file_bytes` is skipped with a warning, as one is in discovery:
/// the rest of the digest stands.
fn read_found(
    config: &HistoryConfig,
    request: &DigestRequest,
    found: &Found<'_>,
    report: &mut SourceReport,
    warnings: &mut Vec<Warning>,
) -> Result<Option<Prepared>, HistoryError> {
    let source = found.source;
    let extracted = extract(
        source,
        found.path,
        config.heading_level,
        request.rewrite,
        request.max_file_bytes,
    );
    let (body, sections, note) = match extracted {
        Err(HistoryError::TooLarge { path, limit }) => {
            warnings.push(Warning::FileTooLarge {
                bytes: std::fs::metadata(&path).map_or(0, |m| m.len()),
                path: path.display().to_string(),
                limit,
            });
            report.status = SourceStatus::Dropped;
            report.note = Some(format!("larger than {limit} bytes; skipped"));
            return Ok(None);
        }
        other => other?,
    };
    report.sections = sections;
    report.note = note;
    report.extracted_words = body.words(body.len());
    report.extracted_bytes = body.render(body.len()).len();
    if body.is_empty() {
        report.status = SourceStatus::Dropped;
        report.note = Some("no text".into());
        return Ok(None);
    }
    let level = body.level_for_words(source.target_words);
    Ok(Some(Prepared {
        index: found.index,
        header: format!("### {}\n\n", source.label.trim()),
        floor: source.floor_words,
        body,
        level: Some(level),
        extra: Vec::new(),
        level_target: level,
        cache: Vec::new(),
        cut_cache: Vec::new(),
    }))
}

/// Writes what the fit did to each prepared source into its report:
/// dropped (with a warning), included whole or compressed, and the words
/// and tokens of the text kept, counted exactly when the digest's total
/// is exact so the parts and the whole are of one kind.
fn report_fitted(
    prepared: &[Prepared],
    reports: &mut [SourceReport],
    warnings: &mut Vec<Warning>,
    counter: &dyn TokenCounter,
    tokens_exact: bool,
) {
    for p in prepared {
        let Some(report) = reports.get_mut(p.index) else {
            continue;
        };
        // A level that renders nothing is a drop.
        let level = p
            .level
            .filter(|&l| !p.body.render_level(l, &p.extra).is_empty());
        match level {
            None => {
                report.status = SourceStatus::Dropped;
                report.note.get_or_insert_with(|| "over the caps".into());
                warnings.push(Warning::SourceDropped {
                    source: report.key.clone(),
                    path: report.path.clone().unwrap_or_default(),
                    extracted_words: report.extracted_words,
                });
            }
            Some(level) => {
                let text = p.body.render_level(level, &p.extra);
                report.status = match p.body.level(level) {
                    Level::Units(k) if k >= p.body.len() => SourceStatus::Included,
                    Level::Cut(_) => {
                        let cut = "its first unit cut inside at a word boundary";
                        report.note = Some(match report.note.take() {
                            Some(n) => format!("{n}; {cut}"),
                            None => cut.into(),
                        });
                        SourceStatus::Compressed
                    }
                    _ => SourceStatus::Compressed,
                };
                report.words = count_words(&text);
                report.tokens = if tokens_exact {
                    counter.count(&text)
                } else {
                    counter.upper_bound(&text)
                };
            }
        }
    }
}

/// Reads a source file and builds its compressible text: the summary line
/// (when configured and present), then the first alternative of named
/// sections of which at least one exists, else the whole body.
fn extract(
    source: &SourceConfig,
    path: &Path,
    level: u8,
    rewrite: Option<fn(&str) -> String>,
    max_file_bytes: u64,
) -> Result<(Compressible, Vec<String>, Option<String>), HistoryError> {
    let text = read_markdown(path, max_file_bytes)?;
    let doc = split_front_matter(&text, path)?;
    let mut parts: Vec<String> = Vec::new();
    let mut note = None;
    if let Some(field) = &source.summary_field {
        // Parse the front matter only when a field is wanted.
        let meta = doc.metadata(path)?;
        match meta.text(field) {
            Some(v) => parts.push(
                source
                    .summary_line
                    .replace("{summary}", &v.replace('\n', " ")),
            ),
            None => note = Some(format!("no front-matter `{field}`")),
        }
    }
    let body = doc.body();
    let mut found = Vec::new();
    for alternative in &source.sections {
        let secs = extract_sections(body, level, alternative);
        if !secs.is_empty() {
            found = secs.iter().map(|s| s.title.clone()).collect();
            parts.extend(secs.iter().map(|s| s.text.to_string()));
            break;
        }
    }
    if found.is_empty() {
        if !source.sections.is_empty() {
            note = Some(match note {
                Some(n) => format!("{n}; no named section found, whole body used"),
                None => "no named section found, whole body used".into(),
            });
        }
        // The summary line (if any) first, then the body split at its
        // headings.
        parts.extend(body_parts(body, level).into_iter().map(str::to_string));
    }
    // Only what was extracted is rewritten, part by part (a section never
    // holds half a tag of another), not the whole file.
    if let Some(f) = rewrite {
        parts = parts.iter().map(|p| f(p)).collect();
    }
    let all: Vec<&str> = parts.iter().map(String::as_str).collect();
    let compressible = Compressible::new(&all);
    Ok((compressible, found, note))
}

struct Fitted {
    markdown: String,
    /// The exact count, when one was needed for the cap.
    exact: Option<usize>,
}

fn render_all(prepared: &[Prepared]) -> String {
    let mut out = String::new();
    for p in prepared {
        let Some(text) = p.render() else { continue };
        if text.is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push_str("\n\n");
        }
        out.push_str(&p.header);
        out.push_str(&text);
    }
    if !out.is_empty() {
        out.push('\n');
    }
    out
}

/// The caps, and how to judge a candidate against them.
struct Judge<'c> {
    counter: &'c dyn TokenCounter,
    max_words: usize,
    token_cap: usize,
    /// The token limit the additive estimate must meet (lowered when an
    /// exact count comes out over).
    effective: usize,
    marks: Option<MarkTokens>,
    separator: Option<usize>,
    header_tokens: Vec<Option<usize>>,
}

impl Judge<'_> {
    fn words(&self, prepared: &[Prepared]) -> usize {
        let mut n = 0;
        for p in prepared {
            if let Some(level) = p.level {
                n += count_words(&p.header) + p.body.words_level(level, &p.extra);
            }
        }
        n
    }

    fn approx_tokens(&mut self, prepared: &mut [Prepared]) -> usize {
        let counter = self.counter;
        let marks = *self.marks.get_or_insert_with(|| MarkTokens::new(counter));
        let sep = *self.separator.get_or_insert_with(|| counter.count("\n\n"));
        self.header_tokens.resize(prepared.len(), None);
        let mut n = 0;
        let mut first = true;
        for (i, p) in prepared.iter_mut().enumerate() {
            let Some(level) = p.level else { continue };
            if !first {
                n += sep;
            }
            first = false;
            let h = match self.header_tokens.get(i).copied().flatten() {
                Some(h) => h,
                None => {
                    let h = counter.count(&p.header);
                    if let Some(slot) = self.header_tokens.get_mut(i) {
                        *slot = Some(h);
                    }
                    h
                }
            };
            n += h + p.body.approx_tokens_level(
                level,
                &p.extra,
                counter,
                (&mut p.cache, &mut p.cut_cache),
                &marks,
            );
        }
        n + 1 // the final line break
    }

    /// Whether the current choice fits: words exactly, tokens by the cheap
    /// bound of the rendered digest or else the additive estimate.
    fn fits(&mut self, prepared: &mut [Prepared]) -> bool {
        if self.words(prepared) > self.max_words {
            return false;
        }
        let md = render_all(prepared);
        if self.counter.upper_bound(&md) <= self.token_cap && self.effective == self.token_cap {
            return true;
        }
        self.approx_tokens(prepared) <= self.effective
    }
}

/// Fits the sources to both caps; see the module documentation.
fn fit(prepared: &mut [Prepared], request: &DigestRequest, counter: &dyn TokenCounter) -> Fitted {
    let mut judge = Judge {
        counter,
        max_words: request.max_words,
        token_cap: request.token_cap,
        effective: request.token_cap,
        marks: None,
        separator: None,
        header_tokens: Vec::new(),
    };
    loop {
        if let Some(j) = reduce(prepared, &mut judge) {
            let upto = prepared
                .get(j)
                .map_or(0, |p| units_of(&p.body, p.level_target));
            fill(prepared, &mut judge, j, upto);
        }
        if prepared
            .iter()
            .any(|p| p.level.is_none_or(|l| l < p.level_target))
        {
            grow(prepared, &mut judge);
        }
        let markdown = render_all(prepared);
        if markdown.is_empty() {
            return Fitted {
                markdown,
                exact: None,
            };
        }
        if counter.upper_bound(&markdown) <= request.token_cap {
            return Fitted {
                markdown,
                exact: None,
            };
        }
        let exact = counter.count(&markdown);
        if exact <= request.token_cap {
            return Fitted {
                markdown,
                exact: Some(exact),
            };
        }
        // The additive estimate undershot: lower its limit by the excess.
        judge.effective = judge
            .effective
            .saturating_sub((exact - request.token_cap).max(1));
    }
}

fn p_len(prepared: &[Prepared], j: usize) -> usize {
    prepared.get(j).map_or(0, |p| p.body.len())
}

/// Whole units a level keeps (0 for a cut or nothing).
fn units_of(body: &Compressible, level: usize) -> usize {
    match body.level(level) {
        Level::Units(k) => k,
        Level::Cut(_) | Level::Empty => 0,
    }
}

/// The largest level in `[lo, hi]` at which source `j` fits, given that
/// `lo` fits (sizes grow with the level). Units kept beyond the level
/// (`extra`) stay.
///
/// The search gallops up from `lo` (lo+1, lo+2, lo+4, ...) and then
/// bisects the last step, rather than bisecting `[lo, hi]` from its
/// middle: each probe tokenizes the units it adds, and growing a source
/// past its target starts far below `hi` — a middle probe would tokenize
/// half of a long source that can only grow a little.
fn largest_fitting(
    prepared: &mut [Prepared],
    judge: &mut Judge<'_>,
    j: usize,
    lo: usize,
    hi: usize,
) -> usize {
    let mut probe_fits = |prepared: &mut [Prepared], level: usize| {
        if let Some(p) = prepared.get_mut(j) {
            p.level = Some(level);
        }
        judge.fits(prepared)
    };
    // `good` fits; `bad` does not, or is past `hi`.
    let (mut good, mut bad) = (lo, hi.saturating_add(1));
    let mut step = 1usize;
    while good + 1 < bad {
        let probe = good.saturating_add(step).min(bad - 1);
        if probe_fits(prepared, probe) {
            good = probe;
            step = step.saturating_mul(2);
        } else {
            bad = probe;
            break;
        }
    }
    while good + 1 < bad {
        let mid = good + (bad - good) / 2;
        if probe_fits(prepared, mid) {
            good = mid
        } else {
            bad = mid
        }
    }
    if let Some(p) = prepared.get_mut(j) {
        p.level = Some(good);
    }
    good
}

/// Cuts or drops sources, lowest priority first, until the judge is
/// satisfied; returns the index of the source it cut (not dropped), if any.
///
/// A source is cut no lower than its floor, and never inside a unit
/// unless it was already a cut (its first unit alone is over its target);
/// below that it is dropped. The highest-priority source still present is
/// the exception: it is cut as far as the caps require, inside its first
/// unit if need be, and dropped only when not one word of it fits.
fn reduce(prepared: &mut [Prepared], judge: &mut Judge<'_>) -> Option<usize> {
    for j in (0..prepared.len()).rev() {
        if judge.fits(prepared) {
            return None;
        }
        let Some(current) = prepared.get(j).and_then(|p| p.level) else {
            continue;
        };
        if current == 0 {
            // Only units added to fill room (`extra`) are kept: there is
            // nothing smaller to cut to.
            if let Some(p) = prepared.get_mut(j) {
                p.set(None);
            }
            continue;
        }
        let is_top = prepared.iter().take(j).all(|p| p.level.is_none());
        let lowest = {
            let Some(p) = prepared.get(j) else { continue };
            if is_top {
                1
            } else {
                let first = match p.body.level(current) {
                    Level::Cut(_) => 1,
                    _ => p.body.level_of_units(1),
                };
                // The smallest level that keeps the floor (or the whole of
                // a source already smaller than its floor).
                let need = p.floor.min(p.body.words_level(current, &[]));
                let (mut lo, mut hi) = (first.min(current), current);
                while lo < hi {
                    let mid = (lo + hi) / 2;
                    if p.body.words_level(mid, &[]) >= need {
                        hi = mid
                    } else {
                        lo = mid + 1
                    }
                }
                lo
            }
        };
        if let Some(p) = prepared.get_mut(j) {
            p.set(Some(lowest));
        }
        if !judge.fits(prepared) {
            if let Some(p) = prepared.get_mut(j) {
                p.set(None);
            }
            continue;
        }
        largest_fitting(prepared, judge, j, lowest, current);
        return Some(j);
    }
    None
}

/// When a cap binds, hands the room left back, in priority order: each
/// kept source grows past its word target as far as it fits, then keeps
/// later units that still fit; a dropped source comes back with as many
/// whole units as fit (its floor no longer applies: a shorter piece that
/// fits beats nothing). Only the highest-priority source present may come
/// back cut inside its first unit, so the room is used without fragments
/// of lower sources.
///
/// This is what keeps a binding cap nearly full: before it, a source that
/// could not keep its floor was dropped whole and its room left unused,
/// and one oversized source dropped emptied the digest.
fn grow(prepared: &mut [Prepared], judge: &mut Judge<'_>) {
    for j in 0..prepared.len() {
        let is_top = prepared.iter().take(j).all(|p| p.level.is_none());
        let Some(p) = prepared.get_mut(j) else {
            continue;
        };
        let max = p.body.max_level();
        let current = match p.level {
            Some(l) => l,
            None => {
                let lowest = if is_top { 1 } else { p.body.level_of_units(1) };
                if lowest > max {
                    continue;
                }
                p.set(Some(lowest));
                if !judge.fits(prepared) {
                    // Its best-ranked unit is too large (a block that
                    // cannot be cut): later units alone may still fit.
                    let len = p_len(prepared, j);
                    if let Some(p) = prepared.get_mut(j) {
                        p.set(Some(0));
                    }
                    fill(prepared, judge, j, len);
                    if let Some(p) = prepared.get_mut(j).filter(|p| p.extra.is_empty()) {
                        p.set(None);
                    }
                    continue;
                }
                lowest
            }
        };
        let level = largest_fitting(prepared, judge, j, current, max);
        let (kept, len) = prepared
            .get(j)
            .map_or((0, 0), |p| (units_of(&p.body, level), p.body.len()));
        if kept < len {
            fill(prepared, judge, j, len);
        }
    }
}

/// After source `j` was cut to its best `k` units, keeps later-ranked units
/// of it, up to rank `upto`, that still fit, one by one (a long sentence
/// that did not fit must not waste the room shorter ones after it would
/// use). At most `MAX_FILL` of them are tried against the caps.
fn fill(prepared: &mut [Prepared], judge: &mut Judge<'_>, j: usize, upto: usize) {
    const MAX_FILL: usize = 64;
    let Some(p) = prepared.get(j) else { return };
    let Some(level) = p.level else { return };
    let k = match p.body.level(level) {
        Level::Units(k) => k,
        Level::Empty => 0,
        Level::Cut(_) => return,
    };
    let candidates: Vec<usize> = (k..upto)
        .filter_map(|r| p.body.unit_at_rank(r))
        .filter(|u| !p.extra.contains(u))
        .collect();
    let mut tries = 0;
    // The room left, recomputed only when a unit is kept: a unit larger
    // than it is skipped without rendering the digest (the additive
    // estimate is what the judge compares with `effective` too). Every
    // unit tokenized counts as a try, so a source of many units that do
    // not fit is not tokenized whole; and once less than 1% of a cap is
    // left, filling stops.
    let mut word_room = judge.max_words.saturating_sub(judge.words(prepared));
    let mut token_room = judge
        .effective
        .saturating_sub(judge.approx_tokens(prepared));
    let counter = judge.counter;
    for unit in candidates {
        let nearly_full = token_room * 100 <= judge.effective || word_room * 100 <= judge.max_words;
        if tries >= MAX_FILL || nearly_full {
            break;
        }
        let Some(p) = prepared.get_mut(j) else { return };
        if p.body.unit_words(unit) > word_room {
            continue;
        }
        tries += 1;
        if p.body.unit_tokens(unit, counter, &mut p.cache) > token_room {
            continue;
        }
        p.extra.push(unit);
        if judge.fits(prepared) {
            word_room = judge.max_words.saturating_sub(judge.words(prepared));
            token_room = judge
                .effective
                .saturating_sub(judge.approx_tokens(prepared));
        } else if let Some(p) = prepared.get_mut(j) {
            p.extra.pop();
        }
    }
}
