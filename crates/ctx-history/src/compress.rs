//! Compression of extracted text to a word target at sentence boundaries.
//!
//! The text of a source (its summary line and sections, or its whole body
//! split at its headings) is cut into **units** that partition it exactly:
//!
//! * a **sentence**: ends after `.`, `!` or `?` (and any closing quotes,
//!   brackets or emphasis marks) followed by whitespace and a character
//!   that is not a lower-case letter; not after an abbreviation (`e.g.`,
//!   `Dr.`, `vs.`, a single initial, a word with an inner dot such as
//!   `U.S.`), a list number (`3.`) or inside an inline code span or link
//!   text. A dot followed by a non-blank (`v1.2`, `example.com`) never ends
//!   a sentence. A blank line, and a line break before a list item, quote
//!   or heading, also end a unit, so each list item is a unit that starts
//!   with its marker;
//! * a **block** that must never be cut open: a fenced or indented code
//!   block, an HTML block, a table;
//! * a heading is glued to the unit after it, so a heading is kept exactly
//!   when something of its section is.
//!
//! Units are ranked round-robin over the sections — the first sentence of
//! every section, then the second of every section, and so on — with blocks
//! after all sentences. Compressing to `n` words keeps the longest prefix
//! of that ranking that fits `n`, shown in document order. Because a larger
//! `n` keeps a superset, every size is monotone in the prefix length,
//! which is what lets budget fitting binary-search cut points. Wherever a
//! kept unit is followed by a left-out one, an elision mark `…` (one
//! word) follows it.
//!
//! The one exception to "units are whole": the best-ranked unit may be cut
//! inside, at a word boundary, when it alone is larger than the room (see
//! [`Compressible::max_level`] and `cut_text`). A source that is one
//! long paragraph or one long code block would otherwise be all or
//! nothing, and nothing is what it used to get. Fenced code is closed
//! after the cut; HTML blocks and tables are never cut.

use std::ops::Range;

use pulldown_cmark::{Event, Parser, Tag, TagEnd};

use ctx_tokens::TokenCounter;

use crate::markdown::{parser_options, sections};

/// The elision mark.
pub const ELISION: &str = "…";

/// Abbreviations after which a dot does not end a sentence (lower case,
/// without the final dot).
const ABBREVIATIONS: &[&str] = &[
    "e.g", "i.e", "etc", "vs", "cf", "al", "dr", "mr", "mrs", "ms", "prof", "st", "jr", "sr",
    "inc", "ltd", "co", "corp", "no", "nos", "fig", "figs", "approx", "est", "dept", "jan", "feb",
    "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec", "mon", "tue", "wed",
    "thu", "fri", "sat", "sun", "vol", "pp", "p", "ca", "op", "ed", "eds", "rev", "gen", "gov",
    "sen", "rep", "mt", "ft", "u.s", "u.k", "a.m", "p.m",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Sentence,
    Block,
}

#[derive(Debug, Clone)]
struct Unit {
    text: String,
    words: usize,
    kind: Kind,
    /// Whether the unit may be cut inside (prose and code; not HTML
    /// blocks or tables, whose markup a cut would leave open).
    cuttable: bool,
}

/// A text ready to be cut to any size: its units and their ranking.
#[derive(Debug, Clone, Default)]
pub struct Compressible {
    units: Vec<Unit>,
    /// Position of each unit in `order`.
    rank: Vec<usize>,
    /// The best-ranked unit, when it may be cut inside, and the fewest
    /// words a cut of it keeps (its glued heading and fence line, plus
    /// one word of its text).
    first_cut: Option<(usize, usize)>,
}

/// What a [level](Compressible::max_level) keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Nothing.
    Empty,
    /// The best-ranked unit alone, cut inside after this many words.
    Cut(usize),
    /// The best `k` units whole.
    Units(usize),
}

/// Words as the word caps count them: whitespace-separated runs
/// ([`ctx_tokens::count_words`], the one definition, which a `max_words`
/// check uses too), for compression and the digest's own totals.
pub(crate) use ctx_tokens::count_words;

/// Byte ranges of the blocks of `text` that must stay whole (code, HTML,
/// tables) and of its headings, widened to whole lines.
/// A block's byte range and whether it may be cut inside (code: yes; HTML
/// blocks and tables: no).
type BlockRange = (Range<usize>, bool);

fn blocks_and_headings(text: &str) -> (Vec<BlockRange>, Vec<Range<usize>>) {
    let mut blocks: Vec<BlockRange> = Vec::new();
    let mut heads = Vec::new();
    let widen = |r: Range<usize>| {
        let s = text
            .as_bytes()
            .get(..r.start)
            .and_then(|b| b.iter().rposition(|&c| c == b'\n'))
            .map_or(0, |i| i + 1);
        let e = if r.end > 0 && text.as_bytes().get(r.end - 1) == Some(&b'\n') {
            r.end
        } else {
            text.as_bytes()
                .get(r.end..)
                .and_then(|b| b.iter().position(|&c| c == b'\n'))
                .map_or(text.len(), |i| r.end + i + 1)
        };
        s..e
    };
    for (event, range) in Parser::new_ext(text, parser_options()).into_offset_iter() {
        match event {
            Event::Start(tag @ (Tag::CodeBlock(_) | Tag::HtmlBlock | Tag::Table(_))) => {
                let cuttable = matches!(tag, Tag::CodeBlock(_));
                let r = widen(range);
                match blocks.last_mut() {
                    Some((last, c)) if r.start < last.end => {
                        last.end = last.end.max(r.end);
                        *c &= cuttable;
                    }
                    _ => blocks.push((r, cuttable)),
                }
            }
            Event::Start(Tag::Heading { .. }) => heads.push(widen(range)),
            Event::End(TagEnd::Heading(_)) => {}
            _ => {}
        }
    }
    (blocks, heads)
}

fn is_list_marker_line(line: &str) -> bool {
    let t = line.trim_start();
    if let Some(rest) = t.strip_prefix(['-', '*', '+']) {
        return rest.is_empty() || rest.starts_with([' ', '\t']);
    }
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    if (1..=9).contains(&digits) {
        let rest = t.get(digits..).unwrap_or("");
        if let Some(after) = rest.strip_prefix(['.', ')']) {
            return after.is_empty() || after.starts_with([' ', '\t']);
        }
    }
    false
}

fn starts_block(line: &str) -> bool {
    let t = line.trim_start();
    t.trim().is_empty() || is_list_marker_line(line) || t.starts_with('>') || t.starts_with('#')
}

/// The bytes [`prose_cuts`] acts on; it skips every other byte. All are
/// ASCII, so none is ever part of a multi-byte character.
static PROSE_MARKS: [bool; 256] = {
    let mut t = [false; 256];
    let marks = *b"\n`[].!?";
    let mut k = 0;
    while k < marks.len() {
        t[marks[k] as usize] = true;
        k += 1;
    }
    t
};

/// Cut points (byte offsets) inside a prose span of `text`.
///
/// Read a byte at a time, skipping straight to the next line break,
/// backtick, bracket or sentence terminator: ctx-history spends a good
/// share of `ctx history` here (issue 26), and ordinary prose holds one
/// such byte in dozens. The test `byte_scan_cuts_as_the_char_scan_did`
/// compares it with the char-by-char reading it replaced.
fn prose_cuts(text: &str, span: Range<usize>, cuts: &mut Vec<usize>) {
    let Some(s) = text.get(span.clone()) else {
        return;
    };
    let base = span.start;
    let bytes = s.as_bytes();
    let mut in_code = false;
    let mut bracket = 0usize;
    let mut line_start = 0usize;
    let mut i = 0usize;
    while let Some(skip) = bytes
        .get(i..)
        .and_then(|rest| rest.iter().position(|&b| PROSE_MARKS[b as usize]))
    {
        i += skip;
        let c = bytes[i];
        match c {
            b'\n' => {
                let next_line = s
                    .get(i + 1..)
                    .and_then(|r| r.split('\n').next())
                    .unwrap_or("");
                if starts_block(next_line) {
                    // End the unit at the line break, after trimming blanks.
                    let end = s.get(..i).map_or(i, |p| p.trim_end().len());
                    if end > 0 {
                        cuts.push(base + end);
                    }
                    in_code = false;
                    bracket = 0;
                }
                line_start = i + 1;
            }
            b'`' => in_code = !in_code,
            b'[' if !in_code => bracket += 1,
            b']' if !in_code => bracket = bracket.saturating_sub(1),
            b'.' | b'!' | b'?' if !in_code && bracket == 0 => {
                let end = terminators_end(s, i + 1);
                let ends = ends_sentence(s, line_start, i, end);
                i = end;
                if ends {
                    cuts.push(base + end);
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
}

/// Where the run of sentence terminators and closers starting at `from`
/// in `s` ends. They are swallowed: [`prose_cuts`] does not read them
/// again (a swallowed `]` closes no bracket).
fn terminators_end(s: &str, from: usize) -> usize {
    let mut end = from;
    while let Some(d) = s.get(end..).and_then(|r| r.chars().next()) {
        if matches!(
            d,
            '.' | '!' | '?' | ')' | '"' | '\'' | '\u{201d}' | '\u{2019}' | '*' | '_' | ']'
        ) {
            end += d.len_utf8();
        } else {
            break;
        }
    }
    end
}

/// Whether the terminator at `dot` in `s`, its run ending at `end`, ends
/// a sentence: whitespace follows, then an upper-case letter or the like
/// (not a lower-case one, nor the end of the span), and a dot does not
/// end an abbreviation of the line that starts at `line_start`.
fn ends_sentence(s: &str, line_start: usize, dot: usize, end: usize) -> bool {
    let after = s.get(end..).unwrap_or("");
    let Some(first_after) = after.chars().next() else {
        return false;
    };
    if !first_after.is_whitespace() {
        return false;
    }
    let next_char = after.trim_start().chars().next();
    if next_char.is_none_or(|n| n.is_lowercase()) {
        return false;
    }
    let bytes = s.as_bytes();
    let is_dot = bytes.get(dot) == Some(&b'.');
    !(is_dot && is_abbreviation(s.get(line_start..dot).unwrap_or(""), bytes, dot))
}

/// Whether the word ending right before the dot at `dot` is an
/// abbreviation, an initial or a list number.
fn is_abbreviation(line_before: &str, _bytes: &[u8], _dot: usize) -> bool {
    let word = line_before
        .rsplit(|c: char| c.is_whitespace())
        .next()
        .unwrap_or("")
        .trim_start_matches(['(', '"', '\'', '[', '*', '_', '\u{201c}', '\u{2018}']);
    if word.is_empty() {
        return false;
    }
    // The list is lower-case ASCII: an ASCII word compares without the
    // allocation of `to_lowercase` (called at every sentence end); any
    // other lower-cases first, as some non-ASCII letters become ASCII
    // (the Kelvin sign is `k`).
    let listed = if word.is_ascii() {
        ABBREVIATIONS.iter().any(|a| word.eq_ignore_ascii_case(a))
    } else {
        ABBREVIATIONS.contains(&word.to_lowercase().as_str())
    };
    if listed {
        return true;
    }
    let mut chars = word.chars();
    if let (Some(c), None) = (chars.next(), chars.next()) {
        // An initial: "J. Smith".
        return c.is_alphabetic() && c.is_uppercase();
    }
    if word.contains('.') && word.chars().any(char::is_alphabetic) && !word.contains("..") {
        return true; // "U.S", "e.g" written oddly
    }
    // A list number at the start of the line: "3. Item".
    line_before.trim_start().len() == word.len() && word.bytes().all(|b| b.is_ascii_digit())
}

impl Compressible {
    /// Builds the units of `parts` (each part one section: its text,
    /// heading included). Line ends are normalized to LF.
    pub fn new(parts: &[&str]) -> Compressible {
        let mut units: Vec<(Unit, usize)> = Vec::new();
        for (section, part) in parts.iter().enumerate() {
            let text = section_text(section, part);
            units.extend(section_units(&text).into_iter().map(|u| (u, section)));
        }
        let (order, rank) = round_robin(&units, parts.len());
        let units: Vec<Unit> = units.into_iter().map(|(u, _)| u).collect();
        let first_cut = order.first().and_then(|&i| {
            let u = units.get(i)?;
            let min = min_cut_words(&u.text);
            (u.cuttable && u.words > min).then_some((i, min))
        });
        Compressible {
            units,
            rank,
            first_cut,
        }
    }

    /// A whole body: split at its `level` headings (the text before the
    /// first heading is a section of its own) and built like [`new`](Self::new).
    pub fn from_body(body: &str, level: u8) -> Compressible {
        Compressible::new(&body_parts(body, level))
    }
}

/// The text of section number `section`: line ends normalized to LF,
/// trailing blanks trimmed, and every section after the first starting on
/// a fresh paragraph.
fn section_text(section: usize, part: &str) -> String {
    // Most sections hold no carriage return: no copy for them.
    let normalized = if part.contains('\r') {
        std::borrow::Cow::Owned(part.replace("\r\n", "\n").replace('\r', "\n"))
    } else {
        std::borrow::Cow::Borrowed(part)
    };
    let body = normalized.trim_end();
    // Sections after the first start on a fresh paragraph.
    if section == 0 {
        body.to_string()
    } else {
        format!("\n\n{body}")
    }
}

/// The cut points of a section's `text`, sorted and unique: its ends,
/// sentence ends in prose, both ends of each block, and before each
/// heading.
fn unit_cuts(text: &str, blocks: &[BlockRange], heads: &[Range<usize>]) -> Vec<usize> {
    let mut cuts = vec![0, text.len()];
    let mut pos = 0;
    for (b, _) in blocks {
        if b.start > pos {
            prose_cuts(text, pos..b.start, &mut cuts);
        }
        let before = text.get(..b.start).map_or(b.start, |p| p.trim_end().len());
        cuts.push(before);
        // End the block before its final line break, so what
        // follows starts on a new line of its own.
        let end = if b.end > b.start && text.as_bytes().get(b.end - 1) == Some(&b'\n') {
            b.end - 1
        } else {
            b.end
        };
        cuts.push(end);
        pos = b.end;
    }
    if pos < text.len() {
        prose_cuts(text, pos..text.len(), &mut cuts);
    }
    for h in heads {
        // Headings end a unit; what follows them joins them.
        let before = text.get(..h.start).map_or(h.start, |p| p.trim_end().len());
        cuts.push(before);
    }
    cuts.sort_unstable();
    cuts.dedup();
    cuts
}

/// The units of one section's `text`, in document order: the pieces
/// between its cuts, a blank piece joined to the next, a heading alone
/// joined to what follows it, and trailing blanks kept on the last unit.
fn section_units(text: &str) -> Vec<Unit> {
    let (blocks, heads) = blocks_and_headings(text);
    let cuts = unit_cuts(text, &blocks, &heads);
    let mut section_units: Vec<Unit> = Vec::new();
    let mut pending = String::new();
    for w in cuts.windows(2) {
        let (a, b) = (w[0], w[1]);
        let Some(piece) = text.get(a..b) else {
            continue;
        };
        pending.push_str(piece);
        let trimmed = pending.trim();
        if trimmed.is_empty() {
            continue;
        }
        // A unit that is only a heading waits for what follows it.
        let only_heading = heads
            .iter()
            .any(|h| text.get(h.clone()).is_some_and(|ht| ht.trim() == trimmed));
        if only_heading && b < text.len() {
            continue;
        }
        let mut overlapping = blocks.iter().filter(|(r, _)| r.start < b && a < r.end);
        let first = overlapping.next();
        let cuttable = first.is_none_or(|(_, c)| *c) && overlapping.all(|(_, c)| *c);
        section_units.push(Unit {
            words: count_words(&pending),
            kind: if first.is_some() {
                Kind::Block
            } else {
                Kind::Sentence
            },
            cuttable,
            text: std::mem::take(&mut pending),
        });
    }
    if !pending.trim().is_empty() {
        section_units.push(Unit {
            words: count_words(&pending),
            kind: Kind::Sentence,
            cuttable: true,
            text: std::mem::take(&mut pending),
        });
    } else if let Some(last) = section_units.last_mut() {
        last.text.push_str(&pending);
    }
    section_units
}

/// The units ranked round-robin, by (kind, index within its section and
/// kind, section): the first sentence of every section before any
/// section's second, sentences before blocks. Returns the unit indices
/// best first, and each unit's rank.
fn round_robin(units: &[(Unit, usize)], sections: usize) -> (Vec<usize>, Vec<usize>) {
    let mut seen: Vec<[usize; 2]> = vec![[0, 0]; sections];
    let mut keys: Vec<(u8, usize, usize, usize)> = Vec::with_capacity(units.len());
    for (idx, (u, s)) in units.iter().enumerate() {
        let k = if u.kind == Kind::Sentence { 0 } else { 1 };
        let n = seen.get_mut(*s).map(|c| {
            let v = c[k];
            c[k] += 1;
            v
        });
        keys.push((k as u8, n.unwrap_or(0), *s, idx));
    }
    let mut order: Vec<usize> = (0..units.len()).collect();
    order.sort_by_key(|&i| keys.get(i).copied());
    let mut rank = vec![0; units.len()];
    for (r, &i) in order.iter().enumerate() {
        if let Some(slot) = rank.get_mut(i) {
            *slot = r;
        }
    }
    (order, rank)
}

/// A whole body split into the parts [`Compressible::from_body`] builds
/// from: the text before the first `level` heading, then each section
/// (with any text between sections going with the next one).
pub fn body_parts(body: &str, level: u8) -> Vec<&str> {
    {
        let secs = sections(body, level);
        let mut parts: Vec<&str> = Vec::new();
        let first = secs.first().map_or(body.len(), |s| s.range.start);
        if let Some(pre) = body.get(..first).filter(|p| !p.trim().is_empty()) {
            parts.push(pre);
        }
        let mut pos = first;
        for s in &secs {
            // Text between sections (after a higher-level heading) goes
            // with the next section so nothing is lost.
            parts.push(body.get(pos..s.range.end).unwrap_or(""));
            pos = s.range.end;
        }
        if let Some(rest) = body.get(pos..).filter(|r| !r.trim().is_empty()) {
            parts.push(rest);
        }
        parts
    }
}

impl Compressible {
    /// How many units there are (the largest useful `k`).
    pub fn len(&self) -> usize {
        self.units.len()
    }

    /// Whether there is no text at all.
    pub fn is_empty(&self) -> bool {
        self.units.is_empty()
    }

    fn kept(&self, k: usize, extra: &[usize], i: usize) -> bool {
        self.rank.get(i).is_some_and(|&r| r < k) || extra.contains(&i)
    }

    /// The unit index ranked `r` (0 = best), if any.
    pub fn unit_at_rank(&self, r: usize) -> Option<usize> {
        self.rank.iter().position(|&x| x == r)
    }

    /// Words of unit `i` alone.
    pub fn unit_words(&self, i: usize) -> usize {
        self.units.get(i).map_or(0, |u| u.words)
    }

    fn marker_after(&self, i: usize) -> &'static str {
        match self.units.get(i) {
            Some(u) if u.kind == Kind::Block => "\n\n…",
            _ => " …",
        }
    }

    /// The text keeping the `k` best units, in document order, with
    /// elision marks, trimmed.
    pub fn render(&self, k: usize) -> String {
        self.render_with(k, &[])
    }

    /// [`render`](Self::render) with the units `extra` (indices) kept as
    /// well: how budget fitting fills the room a cut left with later units
    /// that still fit.
    pub fn render_with(&self, k: usize, extra: &[usize]) -> String {
        let mut out = String::new();
        for (i, u) in self.units.iter().enumerate() {
            if !self.kept(k, extra, i) {
                continue;
            }
            out.push_str(&u.text);
            if i + 1 < self.units.len() && !self.kept(k, extra, i + 1) {
                let trimmed = out.trim_end().len();
                out.truncate(trimmed);
                out.push_str(self.marker_after(i));
            }
        }
        out.trim().to_string()
    }

    /// Words of [`render(k)`](Self::render), without rendering.
    pub fn words(&self, k: usize) -> usize {
        self.words_with(k, &[])
    }

    /// [`words`](Self::words) with the units `extra` kept as well.
    pub fn words_with(&self, k: usize, extra: &[usize]) -> usize {
        let mut n = 0;
        for (i, u) in self.units.iter().enumerate() {
            if self.kept(k, extra, i) {
                n += u.words;
                if i + 1 < self.units.len() && !self.kept(k, extra, i + 1) {
                    n += 1;
                }
            }
        }
        n
    }

    /// The largest `k` whose text has at most `target` words; at least 1
    /// when there is any text (a single sentence longer than the target is
    /// still kept: targets are nominal, only the caps are hard).
    pub fn k_for_words(&self, target: usize) -> usize {
        let (mut lo, mut hi) = (0usize, self.len());
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if self.words(mid) <= target {
                lo = mid
            } else {
                hi = mid - 1
            }
        }
        lo.max(usize::from(!self.is_empty()))
    }

    /// An additive estimate of the tokens of [`render(k)`](Self::render):
    /// the sum of the kept units' own counts plus the marks. `cache` holds
    /// one count per unit, filled on first need, so each unit is sent to
    /// the tokenizer at most once however often this is asked.
    pub fn approx_tokens(
        &self,
        k: usize,
        extra: &[usize],
        counter: &dyn TokenCounter,
        cache: &mut Vec<Option<usize>>,
        marks: &MarkTokens,
    ) -> usize {
        cache.resize(self.units.len(), None);
        let mut n = 0;
        for (i, u) in self.units.iter().enumerate() {
            if !self.kept(k, extra, i) {
                continue;
            }
            let t = match cache.get(i).copied().flatten() {
                Some(t) => t,
                None => {
                    let t = counter.count(&u.text);
                    if let Some(slot) = cache.get_mut(i) {
                        *slot = Some(t);
                    }
                    t
                }
            };
            n += t;
            if i + 1 < self.units.len() && !self.kept(k, extra, i + 1) {
                n += if u.kind == Kind::Sentence {
                    marks.inline
                } else {
                    marks.block
                };
            }
        }
        n
    }
}

impl Compressible {
    /// How many sizes of an inside cut of the best-ranked unit there are
    /// (0 when it cannot be cut: an HTML block, a table, or a unit no
    /// longer than its heading and one word).
    pub fn cut_levels(&self) -> usize {
        self.first_cut
            .map_or(0, |(i, min)| self.unit_words(i).saturating_sub(min))
    }

    /// The largest level: every unit whole. Levels order every size this
    /// text can be cut to, smallest first: 0 is nothing, `1..=cut_levels()`
    /// cut the best-ranked unit inside after one more word each, and
    /// `cut_levels() + k` keeps the best `k` units whole. Sizes grow with
    /// the level, which is what lets budget fitting binary-search it.
    pub fn max_level(&self) -> usize {
        self.cut_levels() + self.len()
    }

    /// The level keeping the best `k` units whole.
    pub fn level_of_units(&self, k: usize) -> usize {
        if k == 0 { 0 } else { self.cut_levels() + k }
    }

    /// What `level` keeps.
    pub fn level(&self, level: usize) -> Level {
        let cuts = self.cut_levels();
        match (level, self.first_cut) {
            (0, _) => Level::Empty,
            (l, Some((_, min))) if l <= cuts => Level::Cut(min - 1 + l),
            (l, _) => Level::Units((l - cuts).min(self.len())),
        }
    }

    /// The text of `level`, with the units `extra` kept as well when it
    /// keeps whole units (see [`render_with`](Self::render_with)).
    pub fn render_level(&self, level: usize, extra: &[usize]) -> String {
        match self.level(level) {
            Level::Empty => self.render_with(0, extra),
            Level::Units(k) => self.render_with(k, extra),
            Level::Cut(w) => self.render_cut(w),
        }
    }

    fn render_cut(&self, w: usize) -> String {
        let Some(u) = self.first_cut.and_then(|(i, _)| self.units.get(i)) else {
            return String::new();
        };
        cut_text(u.text.trim(), w, u.kind == Kind::Block)
    }

    /// Words of [`render_level`](Self::render_level).
    pub fn words_level(&self, level: usize, extra: &[usize]) -> usize {
        match self.level(level) {
            Level::Empty => self.words_with(0, extra),
            Level::Units(k) => self.words_with(k, extra),
            Level::Cut(w) => count_words(&self.render_cut(w)),
        }
    }

    /// The largest level whose text has at most `target` words; at least
    /// 1 when there is any text. A best-ranked unit longer than the target
    /// is cut inside to it; one that cannot be cut (an HTML block, a
    /// table) is kept whole over the target (targets are nominal, only the
    /// caps are hard).
    pub fn level_for_words(&self, target: usize) -> usize {
        let (mut lo, mut hi) = (0usize, self.max_level());
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            if self.words_level(mid, &[]) <= target {
                lo = mid
            } else {
                hi = mid - 1
            }
        }
        lo.max(usize::from(!self.is_empty()))
    }

    /// Tokens of unit `i` alone, counted at most once (`cache` as for
    /// [`approx_tokens`](Self::approx_tokens)).
    pub fn unit_tokens(
        &self,
        i: usize,
        counter: &dyn TokenCounter,
        cache: &mut Vec<Option<usize>>,
    ) -> usize {
        cache.resize(self.units.len(), None);
        if let Some(t) = cache.get(i).copied().flatten() {
            return t;
        }
        let t = self.units.get(i).map_or(0, |u| counter.count(&u.text));
        if let Some(slot) = cache.get_mut(i) {
            *slot = Some(t);
        }
        t
    }

    /// [`approx_tokens`](Self::approx_tokens) of a level. A cut is counted
    /// whole (it is one piece of text); `cut_cache` keeps those counts by
    /// level.
    pub fn approx_tokens_level(
        &self,
        level: usize,
        extra: &[usize],
        counter: &dyn TokenCounter,
        caches: (&mut Vec<Option<usize>>, &mut Vec<(usize, usize)>),
        marks: &MarkTokens,
    ) -> usize {
        let (cache, cut_cache) = caches;
        match self.level(level) {
            Level::Empty => self.approx_tokens(0, extra, counter, cache, marks),
            Level::Units(k) => self.approx_tokens(k, extra, counter, cache, marks),
            Level::Cut(_) => {
                if let Some(&(_, t)) = cut_cache.iter().find(|(l, _)| *l == level) {
                    return t;
                }
                let t = counter.count(&self.render_level(level, &[]));
                cut_cache.push((level, t));
                t
            }
        }
    }
}

/// Words at the start of a unit that a cut inside it always keeps: the
/// lines of a heading glued to it and the opening line of a code fence,
/// plus one word of its own text (a cut that kept only a heading would
/// say nothing).
fn min_cut_words(text: &str) -> usize {
    let mut n = 0;
    for line in text.lines() {
        let t = line.trim_start();
        if t.is_empty() {
            continue;
        }
        if t.starts_with('#') {
            n += count_words(line);
            continue;
        }
        if fence_opener(t).is_some() {
            n += count_words(line);
        }
        break;
    }
    n + 1
}

/// The fence character and run length of a line opening a fenced code
/// block (three or more backticks or tildes), given without its indent.
fn fence_opener(trimmed: &str) -> Option<(char, usize)> {
    let c = trimmed.chars().next().filter(|c| matches!(c, '`' | '~'))?;
    let run = trimmed.chars().take_while(|&x| x == c).count();
    (run >= 3).then_some((c, run))
}

/// The first `w` words of `text`, cut at the word boundary, made whole
/// again and marked: a code fence the cut leaves open is closed (so what
/// follows is not read as code), an inline code span left open is closed,
/// and the elision mark `…` follows — after the closing fence, or on a
/// line of its own after a block, so it is never read as code.
pub(crate) fn cut_text(text: &str, w: usize, block: bool) -> String {
    let mut end = text.len();
    let mut count = 0;
    let mut in_word = false;
    for (i, c) in text.char_indices() {
        if c.is_whitespace() {
            if in_word {
                in_word = false;
                count += 1;
                if count == w {
                    end = i;
                    break;
                }
            }
        } else {
            in_word = true;
        }
    }
    let prefix = text.get(..end).unwrap_or(text).trim_end();
    let mut open: Option<(char, usize)> = None;
    for line in prefix.split('\n') {
        let t = line.trim_start();
        match open {
            None => open = fence_opener(t),
            Some((c, n)) => {
                let run = t.chars().take_while(|&x| x == c).count();
                if run >= n && t.get(run..).is_some_and(|r| r.trim().is_empty()) {
                    open = None;
                }
            }
        }
    }
    let mut out = prefix.to_string();
    if let Some((c, n)) = open {
        out.push('\n');
        out.extend(std::iter::repeat_n(c, n));
        out.push_str("\n\n");
        out.push_str(ELISION);
    } else if block {
        out.push_str("\n\n");
        out.push_str(ELISION);
    } else {
        // An inline code span the cut leaves open would swallow the mark.
        let paragraph = prefix.rsplit("\n\n").next().unwrap_or(prefix);
        if paragraph.matches('`').count() % 2 == 1 {
            out.push('`');
        }
        out.push(' ');
        out.push_str(ELISION);
    }
    out
}

/// Token costs of the elision marks under one counter.
#[derive(Debug, Clone, Copy)]
pub struct MarkTokens {
    inline: usize,
    block: usize,
}

impl MarkTokens {
    /// Counts the marks once.
    pub fn new(counter: &dyn TokenCounter) -> MarkTokens {
        MarkTokens {
            inline: counter.count(" …"),
            block: counter.count("\n\n…"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The char-by-char reading [`prose_cuts`] replaced (issue 26), kept
    /// as the definition the byte scan must agree with.
    fn prose_cuts_by_char(text: &str, span: Range<usize>, cuts: &mut Vec<usize>) {
        let Some(s) = text.get(span.clone()) else {
            return;
        };
        let base = span.start;
        let bytes = s.as_bytes();
        let mut in_code = false;
        let mut bracket = 0usize;
        let mut line_start = 0usize;
        let mut iter = s.char_indices().peekable();
        while let Some((i, c)) = iter.next() {
            match c {
                '\n' => {
                    let next_line = s
                        .get(i + 1..)
                        .and_then(|r| r.split('\n').next())
                        .unwrap_or("");
                    if starts_block(next_line) {
                        // End the unit at the line break, after trimming blanks.
                        let end = s.get(..i).map_or(i, |p| p.trim_end().len());
                        if end > 0 {
                            cuts.push(base + end);
                        }
                        in_code = false;
                        bracket = 0;
                    }
                    line_start = i + 1;
                }
                '`' => in_code = !in_code,
                '[' if !in_code => bracket += 1,
                ']' if !in_code => bracket = bracket.saturating_sub(1),
                '.' | '!' | '?' if !in_code && bracket == 0 => {
                    // Swallow further terminators and closers.
                    let mut end = i + c.len_utf8();
                    while let Some(&(j, d)) = iter.peek() {
                        if matches!(
                            d,
                            '.' | '!'
                                | '?'
                                | ')'
                                | '"'
                                | '\''
                                | '\u{201d}'
                                | '\u{2019}'
                                | '*'
                                | '_'
                                | ']'
                        ) {
                            end = j + d.len_utf8();
                            iter.next();
                        } else {
                            break;
                        }
                    }
                    let after = s.get(end..).unwrap_or("");
                    let Some(first_after) = after.chars().next() else {
                        continue;
                    };
                    if !first_after.is_whitespace() {
                        continue;
                    }
                    let next_char = after.trim_start().chars().next();
                    if next_char.is_none_or(|n| n.is_lowercase()) {
                        continue;
                    }
                    if c == '.' && is_abbreviation(s.get(line_start..i).unwrap_or(""), bytes, i) {
                        continue;
                    }
                    cuts.push(base + end);
                }
                _ => {}
            }
        }
    }

    proptest::proptest! {
        /// The byte scan cuts where the char-by-char reading did, on prose
        /// with every mark it reads, multi-byte closers and any Unicode.
        #[test]
        fn byte_scan_cuts_as_the_char_scan_did(
            text in proptest::prop_oneof![
                proptest::prelude::any::<String>(),
                "([A-Za-z\u{e9}\u{201d}\u{2019}\u{3000} .!?\\[\\]`*_)\"'\n#>0-9-]|e\\.g\\.|Mr\\.|3\\. ){0,60}",
                "(Word|word|J|e\\.g|Mr|3|[.!?]{1,3}|[\\]\\[`*_)\"'\u{201d}\u{2019}]| | |\n|\n\n|# |> |- ){0,80}",
            ]
        ) {
            let (mut fast, mut slow) = (Vec::new(), Vec::new());
            prose_cuts(&text, 0..text.len(), &mut fast);
            prose_cuts_by_char(&text, 0..text.len(), &mut slow);
            proptest::prop_assert_eq!(fast, slow);
        }
    }

    fn c(text: &str) -> Compressible {
        Compressible::new(&[text])
    }

    #[test]
    fn sentences_and_abbreviations() {
        let t =
            "Rates rose, e.g. in the U.S. market. Dr. Ames spoke on v1.2 today! Next came more.";
        let x = c(t);
        assert_eq!(x.len(), 3, "{:?}", x.units);
        assert_eq!(x.render(1), "Rates rose, e.g. in the U.S. market. …");
        assert_eq!(x.render(3), t);
        assert_eq!(x.words(1), 8);
    }

    #[test]
    fn lists_keep_their_markers() {
        let t = "Intro line.\n\n- first item. More\n- second item\n1. third\n";
        let x = c(t);
        assert_eq!(x.render(2), "Intro line.\n\n- first item. …");
        assert!(x.render(x.len()).ends_with("1. third"));
    }

    #[test]
    fn code_blocks_are_whole_or_absent() {
        let t = "## Notes\nA point. Another point.\n\n```\nfn a() {}.\n\nStill code. Yes.\n```\n\nAfter.\n";
        let x = c(t);
        for k in 0..=x.len() {
            let r = x.render(k);
            let fences = r.matches("```").count();
            assert!(fences == 0 || fences == 2, "{k}: {r}");
        }
        // Heading glued to its first sentence.
        assert_eq!(x.render(1), "## Notes\nA point. …");
    }

    #[test]
    fn round_robin_over_sections() {
        let x = Compressible::new(&["## A\nA1. A2. A3.", "## B\nB1. B2."]);
        assert_eq!(x.render(2), "## A\nA1. …\n\n## B\nB1. …");
    }

    #[test]
    fn monotone_words() {
        let x = Compressible::from_body("pre. text.\n\n## A\nOne. Two. Three.\n\n## B\nFour.\n", 2);
        let mut last = 0;
        for k in 0..=x.len() {
            let w = x.words(k);
            assert_eq!(w, count_words(&x.render(k)), "k={k}");
            assert!(w + 1 >= last);
            last = w;
        }
        assert_eq!(x.k_for_words(0), 1);
    }

    #[test]
    fn cuts_are_at_word_boundaries_and_closed() {
        assert_eq!(
            cut_text("alpha beta  gamma delta", 2, false),
            "alpha beta …"
        );
        assert_eq!(cut_text("a `b c` d", 2, false), "a `b` …");
        assert_eq!(
            cut_text("```rust\nlet a = 1;\nlet b = 2;\n```", 5, true),
            "```rust\nlet a = 1;\n```\n\n…"
        );
        assert_eq!(cut_text("~~~~\nx y\n~~~~", 2, true), "~~~~\nx\n~~~~\n\n…");
        // A heading glued to the unit is kept with at least one word.
        assert_eq!(min_cut_words("## Week 1\nword word"), 4);
        assert_eq!(min_cut_words("```\ncode"), 2);
    }

    #[test]
    fn levels_cut_the_first_unit_then_keep_whole_units() {
        let long = format!("{} end.", "word ".repeat(40).trim_end());
        let x = c(&format!("{long} Short one."));
        assert_eq!(x.cut_levels(), 40);
        assert_eq!(x.level(1), Level::Cut(1));
        assert_eq!(x.render_level(1, &[]), "word …");
        assert_eq!(x.level(41), Level::Units(1));
        assert_eq!(x.max_level(), 42);
        assert_eq!(x.level_for_words(10), 9);
        assert_eq!(x.words_level(9, &[]), 10);
        let mut last = 0;
        for l in 0..=x.max_level() {
            let w = x.words_level(l, &[]);
            assert_eq!(w, count_words(&x.render_level(l, &[])));
            assert!(w >= last, "{l}");
            last = w;
        }
        // An HTML block cannot be cut: no cut levels.
        let h = c("<div>\nmany words here\n</div>\n");
        assert_eq!(h.cut_levels(), 0);
    }
}
