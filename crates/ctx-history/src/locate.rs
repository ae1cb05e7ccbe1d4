//! Finding each source's file under the content root for a given date.
//!
//! * `fixed`: the path itself.
//! * `period`: the path is a template with `{YYYY}`, `{MM}` and/or `{DD}`
//!   (`monthly/{YYYY}/{MM}.md`). Every existing file matching the template
//!   is a candidate; the one of the period containing the date wins, else
//!   the latest earlier one. Later periods are never used.
//! * `before`: the path is a directory searched recursively for `.md`,
//!   `.markdown` and `.mdx` files; each is dated by, in order, its
//!   front-matter `date`, an ISO week in its name (`2026-W33.md`, or
//!   `W33.md` inside a `2026` folder; a week counts as dated on its Sunday,
//!   so it is "before" a date only once it has ended), or a `YYYY-MM-DD` in
//!   its name. The latest one dated strictly before the date wins (ties:
//!   the greater path). Files with no date are skipped with a warning.
//!   Symbolic links to directories are not followed (one warning each); a
//!   link to a file is read like the file.
//!
//! A `before` search reads the head of every report in the directory, so
//! one broken file must not stop it: a file whose front matter cannot be
//! read (never closed, malformed YAML/TOML) or that is not UTF-8 is dated
//! by its name alone. If that file is the one chosen, its error is
//! returned — the report the date asks for is never silently replaced by an
//! older one. Otherwise it is skipped with a warning naming the file and
//! line (and with no date in its name it is skipped with a warning too).

use std::path::{Path, PathBuf};

use chrono::{Datelike, NaiveDate, NaiveDateTime, Weekday};

use crate::config::{Select, SourceConfig};
use crate::error::HistoryError;
use crate::markdown::{read_markdown, split_front_matter};
use crate::warning::Warning;

const PLACEHOLDERS: [&str; 3] = ["{YYYY}", "{MM}", "{DD}"];

/// Whether a path template has a date placeholder.
pub fn has_placeholders(template: &str) -> bool {
    PLACEHOLDERS.iter().any(|p| template.contains(p))
}

pub(crate) fn strip_root(template: &str) -> &str {
    let t = template.strip_prefix("{root}").unwrap_or(template);
    t.trim_start_matches('/')
}

/// Checks a path template: only `{root}` (leading), `{YYYY}`, `{MM}` and
/// `{DD}` placeholders.
pub fn check_template(template: &str) -> Result<(), String> {
    let mut rest = strip_root(template);
    while let Some(open) = rest.find('{') {
        let tail = rest.get(open..).unwrap_or("");
        match PLACEHOLDERS.iter().find(|p| tail.starts_with(**p)) {
            Some(p) => rest = tail.get(p.len()..).unwrap_or(""),
            None => {
                let end = tail.find('}').map_or(tail.len(), |i| i + 1);
                return Err(format!(
                    "unknown placeholder `{}` (known: {{root}} at the start, {{YYYY}}, {{MM}}, {{DD}})",
                    tail.get(..end).unwrap_or(tail)
                ));
            }
        }
    }
    Ok(())
}

/// Parses `--date`: a date (`2026-08-20`) or an ISO 8601 date-time
/// (`2026-08-20T09:30:00Z`, `2026-08-20T09:30:00+02:00`,
/// `2026-08-20T09:30`). The calendar date is taken as written, whatever
/// the offset.
///
/// ```
/// use ctx_history::parse_date;
/// let d = parse_date("2026-08-20T23:30:00-05:00").unwrap();
/// assert_eq!(d.to_string(), "2026-08-20");
/// assert!(parse_date("20 Aug").is_err());
/// ```
pub fn parse_date(text: &str) -> Result<NaiveDate, HistoryError> {
    let t = text.trim();
    let bad = || HistoryError::Request {
        field: "date",
        message: format!("`{text}` is not a date (YYYY-MM-DD) or an ISO 8601 date-time"),
    };
    if let Ok(d) = NaiveDate::parse_from_str(t, "%Y-%m-%d") {
        return Ok(d);
    }
    if let Ok(dt) = chrono::DateTime::parse_from_rfc3339(t) {
        return Ok(dt.naive_local().date());
    }
    for f in [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%d %H:%M",
    ] {
        if let Ok(dt) = NaiveDateTime::parse_from_str(t, f) {
            return Ok(dt.date());
        }
    }
    Err(bad())
}

/// Today's date in UTC, the default `--date`.
pub fn today_utc() -> NaiveDate {
    chrono::Utc::now().date_naive()
}

/// A date written at the start of a front-matter value: `2026-08-14`,
/// `2026-08-14T10:00:00Z`, `2026-08-14 10:00`, `2026/08/14`, and the
/// month-first `08-14-2026` / `08/14/2026` of Docusaurus sites (read month
/// first, as JavaScript's `Date` does; day first only when the first number
/// cannot be a month).
fn leading_date(text: &str) -> Option<NaiveDate> {
    let head = text.trim().get(..10)?;
    [
        "%Y-%m-%d", "%Y/%m/%d", "%m-%d-%Y", "%m/%d/%Y", "%d-%m-%Y", "%d/%m/%Y",
    ]
    .iter()
    .find_map(|f| NaiveDate::parse_from_str(head, f).ok())
}

/// `YYYY-MM-DD` anywhere in a file name.
fn date_in_name(name: &str) -> Option<NaiveDate> {
    let b = name.as_bytes();
    (0..b.len().saturating_sub(9)).find_map(|i| {
        let w = b.get(i..i + 10)?;
        let shape = w.iter().enumerate().all(|(j, c)| match j {
            4 | 7 => *c == b'-',
            _ => c.is_ascii_digit(),
        });
        let boundary_before = i == 0 || !b.get(i - 1).is_some_and(u8::is_ascii_digit);
        let boundary_after = !b.get(i + 10).is_some_and(u8::is_ascii_digit);
        if shape && boundary_before && boundary_after {
            NaiveDate::parse_from_str(name.get(i..i + 10)?, "%Y-%m-%d").ok()
        } else {
            None
        }
    })
}

/// The Sunday of an ISO week named in a file name (`2026-W33`) or, for a
/// name `W33`/`w33`, in a parent folder named by a year.
fn iso_week_in_name(stem: &str, parent: Option<&str>) -> Option<NaiveDate> {
    let b = stem.as_bytes();
    for i in 0..b.len() {
        if !matches!(b.get(i), Some(b'W' | b'w')) {
            continue;
        }
        let digits: String = stem
            .get(i + 1..)?
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        if digits.is_empty() || digits.len() > 2 {
            continue;
        }
        let week: u32 = digits.parse().ok()?;
        // `2026-W33`: a year right before.
        let year = if i >= 5 && b.get(i - 1) == Some(&b'-') {
            stem.get(i - 5..i - 1).and_then(|y| y.parse::<i32>().ok())
        } else if i == 0 && digits.len() + 1 == stem.len() {
            parent.and_then(|p| (p.len() == 4).then(|| p.parse::<i32>().ok()).flatten())
        } else {
            None
        };
        if let Some(y) = year {
            return NaiveDate::from_isoywd_opt(y, week, Weekday::Sun);
        }
    }
    None
}

/// How much of a file discovery reads first: front matter sits at the
/// top, so the date of a report rarely needs more.
const HEAD_BYTES: usize = 8 * 1024;

/// The date a report is filed under, from its front matter or its name;
/// `None` when neither says.
///
/// Only the head of the file is read when its front matter closes within
/// it (discovery looks at every report of an archive, and a ten-year
/// archive is tens of megabytes); otherwise the whole file is.
///
/// A file read whole is read no further than `max_file_bytes`
/// ([`HistoryError::TooLarge`] past it).
pub fn report_date(path: &Path, max_file_bytes: u64) -> Result<Option<NaiveDate>, HistoryError> {
    use std::io::Read;
    let io = |e: std::io::Error| HistoryError::Io {
        path: path.to_path_buf(),
        source: e,
    };
    let mut head = Vec::with_capacity(HEAD_BYTES);
    let file = std::fs::File::open(path).map_err(io)?;
    file.take(HEAD_BYTES as u64 + 1)
        .read_to_end(&mut head)
        .map_err(io)?;
    let truncated = head.len() > HEAD_BYTES;
    let from_head = if truncated {
        head.truncate(HEAD_BYTES);
        // A multi-byte character may straddle the cut: keep what decodes.
        let valid = match std::str::from_utf8(&head) {
            Ok(_) => head.len(),
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            Err(_) => 0, // invalid UTF-8 inside the head: read it all below
        };
        head.truncate(valid);
        let text = std::str::from_utf8(&head).unwrap_or("");
        match split_front_matter(text, path) {
            Ok(doc) => match &doc.front_matter {
                // Closed inside the head (and not merely ended by the cut).
                Some(fm) if fm.block_range.end < text.len() && !text.is_empty() => Some(
                    doc.metadata(path)?
                        .text("date")
                        .as_deref()
                        .and_then(leading_date),
                ),
                Some(_) => None,
                None if text.is_empty() => None,
                None => Some(None),
            },
            Err(_) => None,
        }
    } else {
        None
    };
    let fm_date = match from_head {
        Some(d) => d,
        None => {
            let text = read_markdown(path, max_file_bytes)?;
            let doc = split_front_matter(&text, path)?;
            if doc.front_matter.is_some() {
                doc.metadata(path)?
                    .text("date")
                    .as_deref()
                    .and_then(leading_date)
            } else {
                None
            }
        }
    };
    if let Some(d) = fm_date {
        return Ok(Some(d));
    }
    Ok(name_date(path))
}

/// The date in a report's file name: an ISO week (`2026-W33.md`, or
/// `W33.md` in a year folder) or a `YYYY-MM-DD`.
fn name_date(path: &Path) -> Option<NaiveDate> {
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    let parent = path
        .parent()
        .and_then(|p| p.file_name())
        .and_then(|s| s.to_str());
    iso_week_in_name(stem, parent).or_else(|| date_in_name(stem))
}

/// Whether a discovery error is about the file's text (its front matter
/// or encoding) rather than about reading the disk: such a file is an
/// unrelated broken file until it is chosen.
fn is_unreadable_report(e: &HistoryError) -> bool {
    matches!(
        e,
        HistoryError::UnclosedFrontMatter { .. }
            | HistoryError::FrontMatter { .. }
            | HistoryError::InvalidUtf8 { .. }
            | HistoryError::TooLarge { .. }
    )
}

/// Where a source was looked for and what was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Located {
    /// The file to read.
    Found(PathBuf),
    /// Nothing usable; the path (or pattern) looked at.
    Missing(PathBuf),
    /// The file is a symbolic link (or under one) that leads outside the
    /// content root, and links are not followed there (a warning says so).
    Outside(PathBuf),
}

/// The archive being read and how far its links may lead.
///
/// An archive can come from someone else: a link `rolling/last-month.md ->
/// ~/.ssh/id_ed25519` would otherwise be read into the digest and from
/// there into a prompt. So a file is read only when its real path (links
/// resolved) is inside the content root's, unless the caller asks
/// (`--follow-symlinks`) — then links lead anywhere, as before.
#[derive(Debug, Clone)]
pub struct Scope {
    /// The content root, links resolved.
    canonical_root: PathBuf,
    /// Whether links may lead outside it.
    follow_symlinks: bool,
    /// The largest file read; a larger one is skipped with a warning.
    max_file_bytes: u64,
}

impl Scope {
    /// The scope of `root` (which must exist).
    pub fn new(root: &Path, follow_symlinks: bool) -> Result<Scope, HistoryError> {
        let canonical_root = root.canonicalize().map_err(|e| HistoryError::Io {
            path: root.to_path_buf(),
            source: e,
        })?;
        Ok(Scope {
            canonical_root,
            follow_symlinks,
            max_file_bytes: crate::markdown::DEFAULT_MAX_FILE_BYTES,
        })
    }

    /// The same scope reading files of at most `bytes` bytes (the
    /// default is [`DEFAULT_MAX_FILE_BYTES`](crate::markdown::DEFAULT_MAX_FILE_BYTES)).
    pub fn with_max_file_bytes(mut self, bytes: u64) -> Scope {
        self.max_file_bytes = bytes;
        self
    }

    /// The largest file read.
    pub fn max_file_bytes(&self) -> u64 {
        self.max_file_bytes
    }

    /// Whether the existing file `p` is within the size limit, warning
    /// (and so skipping it) when not. Its size is read from its metadata;
    /// the read itself is bounded too, for a file that grows meanwhile.
    fn fits(&self, p: &Path, warnings: &mut Vec<Warning>) -> bool {
        let bytes = std::fs::metadata(p).map_or(0, |m| m.len());
        self.fits_size(p, bytes, warnings)
    }

    /// [`fits`](Self::fits) for a file whose size is known.
    fn fits_size(&self, p: &Path, bytes: u64, warnings: &mut Vec<Warning>) -> bool {
        let ok = bytes <= self.max_file_bytes;
        if !ok {
            warnings.push(Warning::FileTooLarge {
                path: p.display().to_string(),
                bytes,
                limit: self.max_file_bytes,
            });
        }
        ok
    }

    /// Whether the existing path `p` may be read: links are followed, or
    /// its real path is inside the root.
    fn allows(&self, p: &Path) -> bool {
        self.follow_symlinks
            || p.canonicalize()
                .is_ok_and(|c| c.starts_with(&self.canonical_root))
    }

    /// [`allows`](Self::allows), warning when not.
    fn check(&self, p: &Path, warnings: &mut Vec<Warning>) -> bool {
        let ok = self.allows(p);
        if !ok {
            warnings.push(Warning::SymlinkNotFollowed {
                path: p.display().to_string(),
                reason: "symbolic link leading outside the content root; not followed (following links is off)".into(),
            });
        }
        ok
    }
}

fn is_markdown(path: &Path) -> bool {
    path.extension().and_then(|e| e.to_str()).is_some_and(|e| {
        ["md", "markdown", "mdx"]
            .iter()
            .any(|m| e.eq_ignore_ascii_case(m))
    })
}

fn read_dir_sorted(dir: &Path) -> Result<Vec<PathBuf>, HistoryError> {
    let entries = std::fs::read_dir(dir).map_err(|e| HistoryError::Io {
        path: dir.to_path_buf(),
        source: e,
    })?;
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| HistoryError::Io {
            path: dir.to_path_buf(),
            source: e,
        })?;
        out.push(entry.path());
    }
    out.sort();
    Ok(out)
}

/// Matches one path component against a template component, returning the
/// placeholder values captured (year, month, day).
fn match_component(template: &str, name: &str, caps: &mut [Option<u32>; 3]) -> bool {
    let mut t = template;
    let mut n = name;
    while !t.is_empty() {
        if let Some((idx, p)) = PLACEHOLDERS
            .iter()
            .enumerate()
            .find(|(_, p)| t.starts_with(**p))
        {
            let width = if idx == 0 { 4 } else { 2 };
            let Some(digits) = n.get(..width) else {
                return false;
            };
            if !digits.bytes().all(|b| b.is_ascii_digit()) {
                return false;
            }
            let Ok(v) = digits.parse::<u32>() else {
                return false;
            };
            if caps[idx].is_some_and(|old| old != v) {
                return false;
            }
            caps[idx] = Some(v);
            t = t.get(p.len()..).unwrap_or("");
            n = n.get(width..).unwrap_or("");
        } else {
            let Some(c) = t.chars().next() else { break };
            if !n.starts_with(c) {
                return false;
            }
            t = t.get(c.len_utf8()..).unwrap_or("");
            n = n.get(c.len_utf8()..).unwrap_or("");
        }
    }
    n.is_empty()
}

fn period_candidates(
    dir: &Path,
    parts: &[&str],
    caps: [Option<u32>; 3],
    out: &mut Vec<([Option<u32>; 3], PathBuf)>,
) -> Result<(), HistoryError> {
    let Some((first, rest)) = parts.split_first() else {
        return Ok(());
    };
    let last = rest.is_empty();
    if !has_placeholders(first) {
        let p = dir.join(first);
        if last {
            if p.is_file() {
                out.push((caps, p));
            }
        } else if p.is_dir() {
            period_candidates(&p, rest, caps, out)?;
        }
        return Ok(());
    }
    if !dir.is_dir() {
        return Ok(());
    }
    for p in read_dir_sorted(dir)? {
        let Some(name) = p.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let mut c = caps;
        if !match_component(first, name, &mut c) {
            continue;
        }
        if last && p.is_file() {
            out.push((c, p));
        } else if !last && p.is_dir() {
            period_candidates(&p, rest, c, out)?;
        }
    }
    Ok(())
}

/// Every markdown file under `dir`, in sorted path order (depth first).
///
/// Symbolic links to directories are not followed: a link back up the
/// tree (`weekly/archive -> ..`) would list every report again at each
/// level and two such links make the walk exponential. Each one is
/// reported in `warnings`. A link to a file is kept (it is read like the
/// file); a dangling link is skipped with a warning.
fn collect_markdown(
    dir: &Path,
    scope: &Scope,
    out: &mut Vec<PathBuf>,
    warnings: &mut Vec<Warning>,
) -> Result<(), HistoryError> {
    for p in read_dir_sorted(dir)? {
        let own = std::fs::symlink_metadata(&p).map_err(|e| HistoryError::Io {
            path: p.clone(),
            source: e,
        })?;
        let link = own.file_type().is_symlink();
        // What is not a link is what its own metadata says: one `lstat`
        // per entry instead of four (issue 26: `ctx history` spent more
        // system calls on these than on reading). A link is followed.
        if !link {
            if own.is_dir() {
                collect_markdown(&p, scope, out, warnings)?;
            } else if own.is_file() && is_markdown(&p) && scope.fits_size(&p, own.len(), warnings) {
                out.push(p);
            }
            continue;
        }
        if p.is_dir() {
            warnings.push(Warning::SymlinkNotFollowed {
                path: p.display().to_string(),
                reason: "symbolic link to a directory; not followed".into(),
            });
        } else if is_markdown(&p) {
            if p.is_file() {
                if scope.check(&p, warnings) && scope.fits(&p, warnings) {
                    out.push(p);
                }
            } else {
                warnings.push(Warning::SymlinkNotFollowed {
                    path: p.display().to_string(),
                    reason: "symbolic link to nothing readable; skipped".into(),
                });
            }
        }
    }
    Ok(())
}

/// Finds `source`'s file under `root` for `date`. `previous` (from
/// `--previous-summary`) replaces the search of a `before` source.
/// Problems that do not stop the digest (an undated report) are pushed to
/// `warnings`. Files are read only as far as `scope` allows (see
/// [`Scope`]); `previous`, named by the caller, is exempt, but must be a
/// regular file.
pub fn locate(
    source: &SourceConfig,
    root: &Path,
    scope: &Scope,
    date: NaiveDate,
    previous: Option<&Path>,
    warnings: &mut Vec<Warning>,
) -> Result<Located, HistoryError> {
    let rel = strip_root(&source.path);
    let select = match source.select {
        Select::Auto if has_placeholders(rel) => Select::Period,
        Select::Auto => Select::Fixed,
        s => s,
    };
    match select {
        Select::Fixed | Select::Auto => {
            let p = root.join(rel);
            Ok(if !p.is_file() {
                Located::Missing(p)
            } else if scope.check(&p, warnings) {
                Located::Found(p)
            } else {
                Located::Outside(p)
            })
        }
        Select::Period => locate_period(rel, root, scope, date, warnings),
        Select::Before => {
            if let Some(p) = previous {
                crate::error::require_file(p, "previous summary")?;
                return Ok(Located::Found(p.to_path_buf()));
            }
            locate_before(rel, root, scope, date, warnings)
        }
    }
}

/// A `{YYYY}`/`{MM}`/`{DD}` path (`rel`, under `root`): the file of the
/// latest period not after `date`, at the precision the pattern uses.
/// When there is none, the path `date`'s period would have is the one
/// reported missing.
fn locate_period(
    rel: &str,
    root: &Path,
    scope: &Scope,
    date: NaiveDate,
    warnings: &mut Vec<Warning>,
) -> Result<Located, HistoryError> {
    let parts: Vec<&str> = rel.split('/').filter(|s| !s.is_empty()).collect();
    let mut found = Vec::new();
    period_candidates(root, &parts, [None; 3], &mut found)?;
    let uses = [0, 1, 2].map(|i| rel.contains(PLACEHOLDERS[i]));
    let key_of_date = [
        uses[0].then_some(date.year().max(0) as u32),
        uses[1].then_some(date.month()),
        uses[2].then_some(date.day()),
    ];
    let best = found
        .into_iter()
        .filter(|(caps, _)| *caps <= key_of_date)
        .max_by(|a, b| a.cmp(b));
    Ok(match best {
        Some((_, p)) if !scope.check(&p, warnings) => Located::Outside(p),
        Some((_, p)) => Located::Found(p),
        None => {
            let expected = rel
                .replace("{YYYY}", &format!("{:04}", date.year()))
                .replace("{MM}", &format!("{:02}", date.month()))
                .replace("{DD}", &format!("{:02}", date.day()));
            Located::Missing(root.join(expected))
        }
    })
}

/// A markdown file and its date, if any; and its error when it could not
/// be read, dated then by its name alone.
type Dated = (PathBuf, Option<NaiveDate>, Option<HistoryError>);

/// A `before` source with no `--previous-summary`: the latest report
/// strictly before `date` in the directory `rel` (under `root`). The
/// chosen report's read error is returned; the reports left out that
/// could not be read or dated are warned about.
fn locate_before(
    rel: &str,
    root: &Path,
    scope: &Scope,
    date: NaiveDate,
    warnings: &mut Vec<Warning>,
) -> Result<Located, HistoryError> {
    let dir = root.join(rel);
    if !dir.is_dir() {
        return Ok(Located::Missing(dir));
    }
    if !scope.check(&dir, warnings) {
        return Ok(Located::Outside(dir));
    }
    let mut files = Vec::new();
    collect_markdown(&dir, scope, &mut files, warnings)?;
    // Date every file first (a broken one by its name alone, keeping
    // its error), choose, then warn in path order about the files
    // left out: the chosen one's error is returned instead.
    let mut dated: Vec<Dated> = Vec::new();
    for f in files {
        match report_date(&f, scope.max_file_bytes()) {
            Ok(d) => dated.push((f, d, None)),
            Err(e) if is_unreadable_report(&e) => {
                let d = name_date(&f);
                dated.push((f, d, Some(e)));
            }
            Err(e) => return Err(e),
        }
    }
    match choose_report(dated, date, warnings) {
        Some((_, Some(e))) => Err(e),
        Some((p, None)) => Ok(Located::Found(p)),
        None => Ok(Located::Missing(dir)),
    }
}

/// The latest of the `dated` reports strictly before `date`, with its
/// read error if it had one. The others that could not be read or have
/// no date are warned about, in path order.
fn choose_report(
    dated: Vec<Dated>,
    date: NaiveDate,
    warnings: &mut Vec<Warning>,
) -> Option<(PathBuf, Option<HistoryError>)> {
    let best = dated
        .iter()
        .enumerate()
        .filter_map(|(i, (f, d, _))| d.filter(|d| *d < date).map(|d| (d, f, i)))
        .max()
        .map(|(_, _, i)| i);
    let mut chosen = None;
    for (i, (f, d, error)) in dated.into_iter().enumerate() {
        if Some(i) == best {
            chosen = Some((f, error));
            continue;
        }
        let message = match (d, error) {
            (None, Some(e)) => format!("{e}; no date in its name, skipped"),
            (Some(_), Some(e)) => format!("{e}; not the chosen report, skipped"),
            (None, None) => format!(
                "{}: no date (front-matter `date`, ISO week or YYYY-MM-DD in the name); skipped",
                f.display()
            ),
            (Some(_), None) => continue,
        };
        warnings.push(Warning::SkippedReport {
            path: f.display().to_string(),
            message,
        });
    }
    chosen
}

#[cfg(test)]
#[path = "locate_tests.rs"]
mod tests;
