//! # ctx-engine-openai (in progress)
