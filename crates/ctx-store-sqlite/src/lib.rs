//! # ctx-store-sqlite (in progress)
