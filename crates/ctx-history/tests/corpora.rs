//! The markdown reader on real public archives nobody here wrote
//! (../shared/corpora, relative to the repository root): every file is
//! read without error or panic, sections are verbatim slices that never
//! start inside a code fence, and a digest can be assembled from each
//! archive. Skipped with a message when the corpora are absent, except in
//! CI, where that fails (`ctx_test_support::corpora`).

use std::path::{Path, PathBuf};

use ctx_history::compress::Compressible;
use ctx_history::markdown::{FrontMatterFormat, decode_utf8, split_front_matter};
use ctx_history::{
    DigestRequest, HistoryConfig, Select, SourceConfig, assemble_digest, parse_date,
};
use ctx_tokens::{TokenCounter, Tokenizer, TokenizerExt};

fn markdown_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for p in paths {
        if p.is_dir() {
            markdown_files(&p, out);
        } else if p
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| matches!(e, "md" | "markdown" | "mdx"))
        {
            out.push(p);
        }
    }
}

/// Byte ranges of fenced code blocks found by a plain line scan (fences at
/// the start of a line, up to three spaces of indent, outside block quotes
/// and lists: the cases that hide heading-like lines in these archives).
fn fenced_regions(text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut open: Option<(usize, char, usize)> = None;
    let mut pos = 0;
    for line in text.split_inclusive('\n') {
        let indent = line.len() - line.trim_start_matches(' ').len();
        let t = line.trim_start_matches(' ');
        let fence_char = t.chars().next().filter(|c| *c == '`' || *c == '~');
        let run = fence_char.map_or(0, |c| t.chars().take_while(|x| *x == c).count());
        match (open, fence_char) {
            (None, Some(c)) if indent <= 3 && run >= 3 => open = Some((pos, c, run)),
            (Some((start, c, n)), Some(d))
                if d == c && run >= n && t.trim_end().chars().all(|x| x == c) =>
            {
                out.push((start, pos + line.len()));
                open = None;
            }
            _ => {}
        }
        pos += line.len();
    }
    if let Some((start, _, _)) = open {
        out.push((start, text.len()));
    }
    out
}

struct Tally {
    files: usize,
    sections: usize,
    pelican: usize,
    yaml: usize,
    none: usize,
    duplicate_names: usize,
}

fn check_corpus(dir: &Path) -> Tally {
    let mut files = Vec::new();
    markdown_files(dir, &mut files);
    assert!(!files.is_empty(), "{}: no markdown files", dir.display());
    let mut t = Tally {
        files: 0,
        sections: 0,
        pelican: 0,
        yaml: 0,
        none: 0,
        duplicate_names: 0,
    };
    for path in &files {
        let bytes = std::fs::read(path).unwrap();
        let text = decode_utf8(&bytes, path).unwrap_or_else(|e| panic!("{e}"));
        let doc = split_front_matter(text, path).unwrap_or_else(|e| panic!("{e}"));
        let meta = doc.metadata(path).unwrap_or_else(|e| panic!("{e}"));
        match doc.front_matter.as_ref().map(|f| f.format) {
            Some(FrontMatterFormat::Pelican) => {
                t.pelican += 1;
                assert!(
                    meta.text("title").is_some() || meta.text("date").is_some(),
                    "{}",
                    path.display()
                );
            }
            Some(_) => t.yaml += 1,
            None => t.none += 1,
        }
        let body_start = doc.body_range.start;
        // HTML comments that start a line (HTML blocks): heading-like lines
        // inside them are not headings.
        let mut comments = Vec::new();
        let mut from = 0;
        let body = doc.body();
        while let Some(i) = body.get(from..).and_then(|r| r.find("<!--")) {
            let start = from + i;
            let end = body
                .get(start..)
                .and_then(|r| r.find("-->"))
                .map_or(body.len(), |j| start + j + 3);
            let at_line_start = start == 0 || body.as_bytes()[start - 1] == b'\n';
            if at_line_start {
                comments.push((start + body_start, end + body_start));
            }
            from = end.max(start + 4);
        }
        let fences: Vec<(usize, usize)> = fenced_regions(doc.body())
            .into_iter()
            .map(|(a, b)| (a + body_start, b + body_start))
            .collect();
        for level in [2u8, 3] {
            let secs = doc.sections(level);
            let mut last_end = body_start;
            let mut names = std::collections::BTreeSet::new();
            for s in &secs {
                // Verbatim, in order, non-overlapping, inside the body.
                assert_eq!(&text[s.range.clone()], s.text, "{}", path.display());
                assert!(
                    s.range.start >= last_end && s.range.end <= text.len(),
                    "{}",
                    path.display()
                );
                assert!(s.range.start == body_start || text.as_bytes()[s.range.start - 1] == b'\n');
                last_end = s.range.end;
                // Never a heading inside a code fence.
                assert!(
                    !fences
                        .iter()
                        .any(|(a, b)| s.range.start > *a && s.range.start < *b),
                    "{}: section `{}` starts inside a code fence",
                    path.display(),
                    s.title
                );
                assert!(
                    !comments
                        .iter()
                        .any(|(a, b)| s.range.start > *a && s.range.start < *b),
                    "{}: section `{}` starts inside an HTML comment",
                    path.display(),
                    s.title
                );
                if !names.insert(s.key.clone()) {
                    t.duplicate_names += 1;
                }
            }
            t.sections += secs.len();
        }
        // Compression keeps code blocks whole at every size we try.
        let c = Compressible::from_body(doc.body(), 2);
        assert_eq!(
            c.words(c.len()),
            c.render(c.len()).split_whitespace().count(),
            "{}",
            path.display()
        );
        for k in [1, c.len() / 3, c.len() / 2] {
            let r = c.render(k);
            let opened = fenced_regions(&r)
                .iter()
                .filter(|(_, b)| *b == r.len())
                .count();
            let unclosed_in_source = fenced_regions(doc.body())
                .iter()
                .any(|(_, b)| *b == doc.body().len());
            assert!(
                opened == 0 || unclosed_in_source,
                "{} k={k}: a code fence was cut open:\n{r}",
                path.display()
            );
        }
        t.files += 1;
    }
    t
}

#[test]
fn this_week_in_rust() {
    let Some(root) = ctx_test_support::corpora("this_week_in_rust") else {
        return;
    };
    let t = check_corpus(&root.join("this-week-in-rust/content"));
    eprintln!(
        "this-week-in-rust: {} files, {} sections, {} Pelican, {} without metadata, {} duplicate names",
        t.files, t.sections, t.pelican, t.none, t.duplicate_names
    );
    assert!(
        t.pelican > 400,
        "Pelican metadata recognised in most issues"
    );
    assert!(t.duplicate_names > 0);
}

#[test]
fn this_week_in_react() {
    let Some(root) = ctx_test_support::corpora("this_week_in_react") else {
        return;
    };
    let t = check_corpus(&root.join("this-week-in-react/website"));
    eprintln!(
        "this-week-in-react: {} files, {} sections, {} YAML",
        t.files, t.sections, t.yaml
    );
    assert!(t.yaml > 150);
}

#[test]
fn nushell_blog() {
    let Some(root) = ctx_test_support::corpora("nushell_blog") else {
        return;
    };
    let t = check_corpus(&root.join("nushell-blog/blog"));
    eprintln!(
        "nushell-blog: {} files, {} sections, {} without front matter",
        t.files, t.sections, t.none
    );
    assert!(t.sections > 500);
}

/// A digest of a real archive: the latest issue before a date, named
/// sections with a whole-body fallback, under a tight exact cap.
#[test]
fn digests_of_real_archives() {
    let Some(root) = ctx_test_support::corpora("digests_of_real_archives") else {
        return;
    };
    let cases = [
        (
            "this-week-in-rust/content",
            vec!["Crate of the Week", "Quote of the Week"],
            "2025-06-01",
        ),
        (
            "this-week-in-react/website/newsletter",
            vec!["💡 Worth Knowing", "Other Content"],
            "2024-01-01",
        ),
        (
            "nushell-blog/blog",
            vec!["Highlights", "Breaking changes"],
            "2024-01-01",
        ),
    ];
    let counter = Tokenizer::Cl100kBase.counter();
    for (dir, names, date) in cases {
        let config = HistoryConfig {
            sources: vec![SourceConfig {
                key: "latest".into(),
                label: "Latest Issue".into(),
                path: ".".into(),
                select: Select::Before,
                target_words: 300,
                floor_words: 50,
                priority: None,
                sections: vec![names.iter().map(|s| s.to_string()).collect()],
                summary_field: Some("title".into()),
                summary_line: "- Title: {summary}".into(),
                optional: false,
            }],
            ..HistoryConfig::default()
        };
        let mut request = DigestRequest::new(&config, root.join(dir), parse_date(date).unwrap());
        request.token_cap = 200;
        let d =
            assemble_digest(&config, &request, &*counter).unwrap_or_else(|e| panic!("{dir}: {e}"));
        assert!(counter.count(&d.markdown) <= 200, "{dir}");
        assert!(!d.markdown.is_empty(), "{dir}: {:?}", d.sources);
        eprintln!(
            "{dir}: {:?} {} words {} tokens",
            d.sources[0].path, d.words, d.tokens
        );
    }
}
