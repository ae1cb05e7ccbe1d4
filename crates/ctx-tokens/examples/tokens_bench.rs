//! Measures the exact counters for `cargo xtask bench-tokens`
//! (docs/performance.md, "Token counting"):
//!
//! * `first <tokenizer> <static|tiktoken-rs>`: in this fresh process, the
//!   time from `main` to the first exact count of a short text returning,
//!   and the peak resident set (`VmHWM`) afterwards, in kB;
//! * `throughput <tokenizer> <static|tiktoken-rs> <dir>...`: counts every
//!   file under the directories (after one warm-up pass) and prints MB/s,
//!   checking on the way that both implementations agree.
//!
//! Output is one `key=value` line, for the xtask to parse.

use std::path::{Path, PathBuf};
use std::time::Instant;

use ctx_tokens::{BpeCounter, TokenCounter, Tokenizer};

fn reference(t: Tokenizer) -> tiktoken_rs::CoreBPE {
    let built = match t {
        Tokenizer::Cl100kBase => tiktoken_rs::cl100k_base(),
        Tokenizer::O200kBase => tiktoken_rs::o200k_base(),
        Tokenizer::O200kHarmony => tiktoken_rs::o200k_harmony(),
        Tokenizer::P50kBase => tiktoken_rs::p50k_base(),
        Tokenizer::R50kBase => tiktoken_rs::r50k_base(),
        Tokenizer::Estimate => {
            eprintln!("estimate has no reference implementation");
            std::process::exit(2);
        }
    };
    built.unwrap_or_else(|e| {
        eprintln!("tiktoken-rs: {e}");
        std::process::exit(1)
    })
}

fn peak_rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    paths.sort();
    for p in paths {
        if p.is_dir() {
            files_under(&p, out);
        } else {
            out.push(p);
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: tokens_bench first|throughput <tokenizer> <static|tiktoken-rs> [dir...]";
    if args.len() < 3 {
        eprintln!("{usage}");
        std::process::exit(2);
    }
    let tokenizer: Tokenizer = args[1].parse().unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(2)
    });
    let reference_impl = match args[2].as_str() {
        "static" => false,
        "tiktoken-rs" => true,
        other => {
            eprintln!("unknown implementation `{other}`; {usage}");
            std::process::exit(2);
        }
    };
    match args[0].as_str() {
        "first" => {
            let start = Instant::now();
            let text = "Exact counts, caps that hold: the first one in a fresh process.";
            let n = if reference_impl {
                reference(tokenizer).encode_ordinary(text).len()
            } else {
                BpeCounter::new(tokenizer).count(text)
            };
            let micros = start.elapsed().as_secs_f64() * 1e6;
            println!("tokens={n} first_us={micros:.0} peak_kb={}", peak_rss_kb());
        }
        "throughput" => {
            let mut files = Vec::new();
            for dir in &args[3..] {
                files_under(Path::new(dir), &mut files);
            }
            let texts: Vec<String> = files
                .iter()
                .filter_map(|f| std::fs::read(f).ok())
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .collect();
            let bytes: usize = texts.iter().map(String::len).sum();
            let ours = BpeCounter::new(tokenizer);
            let bpe = reference_impl.then(|| reference(tokenizer));
            let count = |t: &str| match &bpe {
                Some(b) => b.encode_ordinary(t).len(),
                None => ours.count(t),
            };
            let warm: usize = texts.iter().map(|t| count(t)).sum();
            let start = Instant::now();
            let tokens: usize = texts.iter().map(|t| count(t)).sum();
            let secs = start.elapsed().as_secs_f64();
            assert_eq!(warm, tokens, "counts are deterministic");
            println!(
                "files={} bytes={bytes} tokens={tokens} secs={secs:.3} mb_per_s={:.1}",
                texts.len(),
                bytes as f64 / 1e6 / secs
            );
        }
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    }
}
