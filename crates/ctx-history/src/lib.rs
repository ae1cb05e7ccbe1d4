//! # ctx-history (in progress)
