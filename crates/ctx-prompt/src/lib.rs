//! # ctx-prompt (in progress)
