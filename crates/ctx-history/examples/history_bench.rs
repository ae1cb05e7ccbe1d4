//! Benchmark helper for `cargo xtask bench-history`.
//!
//! * `history_bench generate DIR WEEKS ROLLING_WORDS WEEKLY_WORDS` writes a
//!   deterministic archive: WEEKS weekly reports ending 2026-08-14 (front
//!   matter, the design's sections plus filler sections), the monthly and
//!   yearly files they span, and a rolling report of ROLLING_WORDS words.
//! * `history_bench meter DIR DATE TOKENIZER BUDGET...` assembles the digest
//!   at each prompt budget through a `MeteredCounter` and prints, per
//!   budget, the digest's words and tokens, the bytes sent to the
//!   tokenizer, the bytes of the extracted sections, their ratio, and the
//!   in-process time of one assembly (tokenizer tables already built).

use std::path::Path;
use std::time::Instant;

use ctx_history::{DigestRequest, HistoryConfig, assemble_digest, parse_date, token_cap};
use ctx_tokens::{MeteredCounter, TokenCounter, Tokenizer, TokenizerExt};

const VOCAB: &[&str] = &[
    "latency",
    "review",
    "release",
    "storage",
    "planner",
    "the",
    "team",
    "measured",
    "quotas",
    "growth",
    "held",
    "slipped",
    "contributors",
    "benchmark",
    "regression",
    "upgrade",
    "users",
    "reported",
    "a",
    "of",
    "and",
    "in",
    "with",
    "clusters",
    "fixed",
    "tests",
    "owner",
    "week",
    "month",
    "risk",
    "signal",
    "noise",
    "data",
    "query",
    "index",
    "metadata",
    "compaction",
    "write",
    "path",
    "lock",
    "v1.2",
    "e.g.",
];

struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) as usize
    }
    fn sentence(&mut self) -> String {
        let n = 6 + self.next() % 18;
        let mut words: Vec<&str> = (0..n).map(|_| VOCAB[self.next() % VOCAB.len()]).collect();
        let first = words[0].to_string();
        let mut cap = first.clone();
        if let Some(c) = cap.get_mut(0..1) {
            c.make_ascii_uppercase();
        }
        words[0] = &cap;
        let mut s = words.join(" ");
        s.push('.');
        s
    }
    fn paragraphs(&mut self, words: usize) -> String {
        let mut out = String::new();
        let mut count = 0;
        while count < words {
            let s = self.sentence();
            count += s.split_whitespace().count();
            out.push_str(&s);
            out.push(if matches!(self.next() % 5, 0) {
                '\n'
            } else {
                ' '
            });
            if matches!(self.next() % 6, 0) {
                out.push('\n');
            }
        }
        out.trim_end().to_string() + "\n"
    }
}

fn write(path: &Path, text: &str) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("create dir");
    }
    std::fs::write(path, text).expect("write");
}

fn generate(dir: &Path, weeks: usize, rolling_words: usize, weekly_words: usize) {
    let _ = std::fs::remove_dir_all(dir);
    let mut rng = Lcg(42);
    let last = chrono_like_date(2026, 8, 14);
    let mut months = std::collections::BTreeSet::new();
    for w in 0..weeks {
        let (y, m, d) = days_before(last, 7 * w);
        months.insert((y, m));
        let per = weekly_words / 6;
        let mut text = format!(
            "---\ntitle: \"Weekly {w}\"\ndate: {y:04}-{m:02}-{d:02}\nsummary: \"{}\"\ntags: [bench]\n---\n\n# Weekly\n\n",
            rng.sentence()
        );
        for name in [
            "Headline",
            "Signal & Noise",
            "Raw Numbers",
            "Blind Spots",
            "Appendix",
            "The Week Ahead",
        ] {
            text.push_str(&format!("## {name}\n\n{}\n", rng.paragraphs(per)));
            if name == "Appendix" {
                text.push_str("```json\n{\"##\": \"not a heading\"}\n```\n\n");
            }
        }
        write(
            &dir.join(format!("weekly/{y:04}/{y:04}-{m:02}-{d:02}.md")),
            &text,
        );
    }
    let years: std::collections::BTreeSet<u32> = months.iter().map(|(y, _)| *y).collect();
    for (y, m) in &months {
        let mut text = format!("---\ndate: {y:04}-{m:02}-28\n---\n\n");
        for name in [
            "Month Overview",
            "Numbers",
            "Trends Observed",
            "Key Takeaways",
        ] {
            text.push_str(&format!("## {name}\n\n{}\n", rng.paragraphs(400)));
        }
        write(&dir.join(format!("monthly/{y:04}/{m:02}.md")), &text);
    }
    for y in &years {
        let mut text = String::from("---\ntitle: year\n---\n\n");
        for name in ["Narrative", "Arc", "Open Questions"] {
            text.push_str(&format!("## {name}\n\n{}\n", rng.paragraphs(800)));
        }
        write(&dir.join(format!("yearly/{y:04}.md")), &text);
    }
    let mut rolling = String::from("---\ntitle: rolling\n---\n\n");
    let sections = (rolling_words / 2000).max(1);
    for i in 0..sections {
        rolling.push_str(&format!(
            "## Part {i}\n\n{}\n",
            rng.paragraphs(rolling_words / sections)
        ));
    }
    write(&dir.join("rolling/last-month.md"), &rolling);
}

/// A calendar date.
fn chrono_like_date(y: u32, m: u32, d: u32) -> chrono::NaiveDate {
    chrono::NaiveDate::from_ymd_opt(y as i32, m, d).expect("valid date")
}

/// (year, month, day) of `days` before `from`.
fn days_before(from: chrono::NaiveDate, days: usize) -> (u32, u32, u32) {
    use chrono::Datelike;
    let d = from - chrono::Duration::days(days as i64);
    (d.year() as u32, d.month(), d.day())
}

fn meter(dir: &Path, date: &str, tokenizer: &str, budgets: &[usize]) {
    let config = HistoryConfig::default();
    let tokenizer: Tokenizer = tokenizer.parse().expect("tokenizer");
    let shared = tokenizer.counter();
    // Build the table once so that the in-process time is assembly alone.
    let _ = shared.count("warm up");
    for &budget in budgets {
        let counter = MeteredCounter::new(shared.clone());
        let mut request = DigestRequest::new(&config, dir, parse_date(date).expect("date"));
        request.token_cap = token_cap(budget, config.share);
        let start = Instant::now();
        let d = assemble_digest(&config, &request, &counter).expect("digest");
        let elapsed = start.elapsed();
        let extracted: usize = d.sources.iter().map(|s| s.extracted_bytes).sum();
        let exact = shared.count(&d.markdown);
        assert!(exact <= request.token_cap && d.words <= request.max_words);
        println!(
            "budget={budget} cap={} words={} tokens={exact} slack_tokens={} tokenized_bytes={} calls={} extracted_bytes={extracted} ratio={:.3} assemble_ms={:.2}",
            request.token_cap,
            d.words,
            request.token_cap - exact,
            counter.bytes_counted(),
            counter.calls(),
            counter.bytes_counted() as f64 / extracted.max(1) as f64,
            elapsed.as_secs_f64() * 1000.0
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["generate", dir, weeks, rolling, weekly] => generate(
            Path::new(dir),
            weeks.parse().expect("weeks"),
            rolling.parse().expect("rolling words"),
            weekly.parse().expect("weekly words"),
        ),
        ["meter", dir, date, tokenizer, budgets @ ..] => {
            let budgets: Vec<usize> = budgets.iter().map(|b| b.parse().expect("budget")).collect();
            meter(Path::new(dir), date, tokenizer, &budgets);
        }
        _ => {
            eprintln!(
                "usage: history_bench generate DIR WEEKS ROLLING_WORDS WEEKLY_WORDS | meter DIR DATE TOKENIZER BUDGET..."
            );
            std::process::exit(2);
        }
    }
}
