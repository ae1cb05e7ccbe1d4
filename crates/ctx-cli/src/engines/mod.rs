//! Choosing and building the `InferenceEngine` a run uses (`--engine`).
//! The executor sees only the trait; this is the edge that knows names,
//! flags and environment variables.

pub mod openai;
