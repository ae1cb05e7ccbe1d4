//! # ctx-history: bounded digests of markdown report archives
//!
//! A weekly analysis pipeline publishes markdown reports — weekly, monthly,
//! yearly, a rolling four-week report — and wants the next analysis prompt
//! to open with a short `HISTORICAL CONTEXT` digest of them. This crate
//! builds that digest, and guarantees its size: at most `max_words`
//! whitespace-separated words and at most `token_cap` tokens of a real
//! tokenizer, for every input.
//!
//! The pieces, each usable alone:
//!
//! * [`markdown`]: front matter (YAML `---`, TOML `+++`, Pelican
//!   `Key: value`) split off with verbatim byte offsets and located
//!   errors; sections cut verbatim from pulldown-cmark offsets. The
//!   section extractor ([`markdown::extract_sections`]) is shared with
//!   `ctx-prompt`.
//! * [`config`]: which sources, where, which sections, what targets, floors
//!   and priorities. [`HistoryConfig::default()`] is exactly the original
//!   design.
//! * [`locate`]: finding the previous weekly report and the monthly and
//!   yearly files for a date.
//! * [`compress`]: cutting text to a word target at sentence boundaries;
//!   only a source's first unit, when it alone is too large, is cut inside
//!   (at a word boundary, code fences closed).
//! * [`warning`]: the typed warnings of an assembly (a source dropped for
//!   lack of room, a link not followed, a skipped report).
//! * [`digest`]: [`assemble_digest`], which puts it all together, fits
//!   the caps in reverse priority and hands the room left back in priority
//!   order.
//!
//! ```
//! use ctx_history::{assemble_digest, parse_date, DigestRequest, HistoryConfig};
//!
//! let root = tempfile::tempdir().unwrap();
//! std::fs::create_dir_all(root.path().join("rolling")).unwrap();
//! std::fs::write(
//!     root.path().join("rolling/last-month.md"),
//!     "---\ntitle: Rolling\n---\nDemand held up. Margins thinned.\n",
//! ).unwrap();
//!
//! let config = HistoryConfig::default();
//! let request = DigestRequest::new(&config, root.path(), parse_date("2026-08-20").unwrap());
//! use ctx_tokens::TokenizerExt;
//! let counter = ctx_tokens::Tokenizer::Cl100kBase.counter();
//! let digest = assemble_digest(&config, &request, &*counter).unwrap();
//! assert_eq!(
//!     digest.markdown,
//!     "### Rolling Last 4 Weeks\n\nDemand held up. Margins thinned.\n"
//! );
//! assert!(digest.words <= 1500 && digest.tokens <= 13_500);
//! // The other three sources are reported missing, never an error.
//! assert_eq!(digest.sources.len(), 4);
//! ```

pub mod compress;
pub mod config;
pub mod digest;
pub mod error;
pub mod locate;
pub mod markdown;
pub mod warning;

pub use config::{
    DEFAULT_TOKENIZER, HistoryConfig, InvalidConfig, Select, SourceConfig, token_cap,
};
pub use digest::{Digest, DigestRequest, Slack, SourceReport, SourceStatus, assemble_digest};
pub use error::HistoryError;
pub use locate::{parse_date, today_utc};
pub use warning::Warning;
