//! The opt-in output cache (`--cache`): [`ResultCache`], an index at the
//! store root, and [`CachingEngine`], an [`InferenceEngine`] decorator that
//! answers from it.
//!
//! # Key
//!
//! `SHA-256(engine identity, model, system prompt, sampling parameters,
//! final prompt[, response schema])`, each field length-prefixed,
//! parameters as canonical JSON without `prompt`, `estimated_ms` and secret
//! keys. The response schema (structured output, from a task's
//! `json_schema` check) is a field only when the request carries one, as
//! canonical JSON: two requests that differ only in their schema ask the
//! engine for differently shaped answers and must not share an entry,
//! while the key of a request without a schema stays what it was before
//! schemas existed, so caches written by older versions still hit. The final prompt
//! already contains the upstream outputs, so a changed task misses, and its
//! dependents miss exactly when its new output differs from the old.
//!
//! # Where
//!
//! One `cache.sqlite` at the store root rather than a scan of every run:
//! a hit is one primary-key lookup whatever the number of runs. It is WAL
//! with a busy timeout, so several ctx processes share it safely; writes
//! are single `INSERT OR REPLACE` statements. Its `synchronous` is
//! `NORMAL`: losing the last entries on power loss costs a re-run, never a
//! wrong answer. `ctx runs gc` deletes the entries of the runs it removes,
//! so the cache answers only from runs still kept.
//!
//! # Caveat
//!
//! An output sampled at temperature > 0 is one draw, not a function of the
//! prompt; with `--cache` every later identical request gets that same
//! draw. That is why the cache is off by default.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use ctx_engine::{
    BoxFuture, EngineError, FirstToken, InferenceEngine, InferenceRequest, InferenceResponse,
};
use ctx_model::{FinishReason, Params, TokenUsage};
use rusqlite::{Connection, OptionalExtension, params};

use crate::error::{Error, Result};
use crate::id::now_rfc3339;
use crate::schema::{self, CACHE_APPLICATION_ID, CACHE_MIGRATIONS};
use ctx_store::fingerprint::{canonical_json, sampling_params, sha256_fields};

/// The cache's file name at the store root.
pub const CACHE_FILE: &str = "cache.sqlite";

/// The cache key of a request: see the module docs.
pub fn cache_key(
    engine_identity: &str,
    params: &Params,
    final_prompt: &str,
    response_schema: Option<&serde_json::Value>,
) -> String {
    let sampling = canonical_json(&sampling_params(params));
    let schema = response_schema.map(canonical_json);
    let mut fields: Vec<&[u8]> = vec![
        b"ctx-cache-v1",
        engine_identity.as_bytes(),
        params.model.as_deref().unwrap_or("").as_bytes(),
        params.system.as_deref().unwrap_or("").as_bytes(),
        sampling.as_bytes(),
        final_prompt.as_bytes(),
    ];
    if let Some(schema) = &schema {
        // A tag first, so no schema text can collide with a field layout.
        fields.push(b"response_schema");
        fields.push(schema.as_bytes());
    }
    sha256_fields(&fields)
}

/// A cached engine answer.
#[derive(Debug, Clone, PartialEq)]
pub struct CachedOutput {
    /// The output text.
    pub output: String,
    /// The model the engine reported.
    pub model: Option<String>,
    /// The usage the engine reported when it generated the output.
    pub usage: Option<TokenUsage>,
    /// Why generation stopped (stored as the server's text).
    pub finish_reason: Option<FinishReason>,
    /// The run that produced it.
    pub run_id: Option<String>,
    /// The task that produced it.
    pub task_id: String,
}

/// The cache index (`cache.sqlite` at the store root).
#[derive(Debug)]
pub struct ResultCache {
    conn: Mutex<Connection>,
    path: PathBuf,
}

impl ResultCache {
    /// Opens (creating if needed) the cache at `path`. A foreign, corrupt
    /// or newer file is reported and left untouched.
    pub fn open(path: &Path) -> Result<ResultCache> {
        let conn = schema::open_shared(path, CACHE_APPLICATION_ID, CACHE_MIGRATIONS)?;
        Ok(ResultCache {
            conn: Mutex::new(conn),
            path: path.to_path_buf(),
        })
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The entry under `key`.
    pub fn get(&self, key: &str) -> Result<Option<CachedOutput>> {
        let conn = self.conn();
        let row = conn
            .prepare_cached(
                "SELECT output, response_model, usage_json, finish_reason, run_id, task_id
                 FROM entries WHERE key = ?1",
            )
            .and_then(|mut s| {
                s.query_row([key], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, Option<String>>(1)?,
                        r.get::<_, Option<String>>(2)?,
                        r.get::<_, Option<String>>(3)?,
                        r.get::<_, Option<String>>(4)?,
                        r.get::<_, String>(5)?,
                    ))
                })
                .optional()
            })
            .map_err(Error::sql(&self.path))?;
        let Some((output, model, usage, finish_reason, run_id, task_id)) = row else {
            return Ok(None);
        };
        let usage = match usage {
            Some(u) => Some(serde_json::from_str(&u).map_err(|e| Error::BadRow {
                path: self.path.clone(),
                task_id: task_id.clone(),
                field: "entries.usage_json",
                detail: e.to_string(),
            })?),
            None => None,
        };
        Ok(Some(CachedOutput {
            output,
            model,
            usage,
            finish_reason: finish_reason.map(FinishReason::from),
            run_id,
            task_id,
        }))
    }

    /// Records `entry` under `key` (replacing an older entry). `engine` and
    /// `model` are kept for inspection only.
    pub fn put(
        &self,
        key: &str,
        engine: &str,
        model: Option<&str>,
        entry: &CachedOutput,
    ) -> Result<()> {
        let usage = entry
            .usage
            .as_ref()
            .and_then(|u| serde_json::to_string(u).ok());
        self.conn()
            .prepare_cached(
                "INSERT OR REPLACE INTO entries
                   (key, engine, model, output, response_model, usage_json, finish_reason,
                    run_id, task_id, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            )
            .and_then(|mut s| {
                s.execute(params![
                    key,
                    engine,
                    model,
                    entry.output,
                    entry.model,
                    usage,
                    entry.finish_reason.as_ref().map(FinishReason::as_str),
                    entry.run_id,
                    entry.task_id,
                    now_rfc3339()
                ])
            })
            .map(drop)
            .map_err(Error::sql(&self.path))
    }

    /// Deletes the entries produced by `run_id` (used by `gc`).
    pub fn remove_run(&self, run_id: &str) -> Result<usize> {
        self.conn()
            .execute("DELETE FROM entries WHERE run_id = ?1", [run_id])
            .map_err(Error::sql(&self.path))
    }

    /// How many entries the cache holds.
    pub fn len(&self) -> Result<usize> {
        self.conn()
            .query_row("SELECT count(*) FROM entries", [], |r| r.get::<_, i64>(0))
            .map(|n| usize::try_from(n).unwrap_or(0))
            .map_err(Error::sql(&self.path))
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }
}

/// Hits, misses and failures of a [`CachingEngine`], for the run summary.
#[derive(Debug, Default)]
pub struct CacheStats {
    hits: AtomicU64,
    misses: AtomicU64,
    errors: AtomicU64,
    last_error: Mutex<Option<String>>,
}

impl CacheStats {
    /// Requests answered from the cache.
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }
    /// Requests passed to the inner engine.
    pub fn misses(&self) -> u64 {
        self.misses.load(Ordering::Relaxed)
    }
    /// Cache reads or writes that failed (the request then went to, or
    /// its answer stayed with, the inner engine: a cache failure never
    /// fails a task).
    pub fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }
    /// The last cache failure's message.
    pub fn last_error(&self) -> Option<String> {
        self.last_error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
    fn error(&self, e: &dyn std::fmt::Display) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        *self.last_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(e.to_string());
    }
}

/// Runs a cache read or write on Tokio's blocking pool when there is a
/// runtime (a write may wait up to the busy timeout for another process's
/// lock, and an fsync as long as the disk takes: neither may stall the
/// runtime thread that dispatches other tasks), inline when there is none
/// ([`ctx_store::off_runtime`]). `Err` is a failure of the call itself,
/// said as text for [`CacheStats`].
async fn cache_call<T: Send + 'static>(
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> std::result::Result<T, String> {
    match ctx_store::off_runtime(f).await {
        Ok(r) => r.map_err(|e| e.to_string()),
        Err(e) => Err(format!(
            "the cache call on the blocking pool did not return: {e}"
        )),
    }
}

/// An engine that answers from a [`ResultCache`] when it can and asks the
/// inner engine (recording the answer) when it cannot.
///
/// `identity` distinguishes engines of one name configured differently
/// (e.g. two `--command` strings): the CLI should pass the engine name plus
/// any non-secret setting that changes outputs. It only enters a hash; it
/// is never stored.
pub struct CachingEngine<E: ?Sized = dyn InferenceEngine> {
    inner: Arc<E>,
    cache: Arc<ResultCache>,
    identity: String,
    run_id: Option<String>,
    stats: Arc<CacheStats>,
}

impl<E: InferenceEngine + ?Sized> CachingEngine<E> {
    /// Wraps `inner`; entries it records name `run_id` as their origin.
    pub fn new(
        inner: Arc<E>,
        cache: Arc<ResultCache>,
        identity: impl Into<String>,
        run_id: Option<String>,
    ) -> Self {
        CachingEngine {
            inner,
            cache,
            identity: identity.into(),
            run_id,
            stats: Arc::default(),
        }
    }

    /// Hit and miss counts, shared (clone the `Arc` before handing the
    /// engine to the executor).
    pub fn stats(&self) -> Arc<CacheStats> {
        Arc::clone(&self.stats)
    }
}

impl<E: InferenceEngine + ?Sized> InferenceEngine for CachingEngine<E> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn answers_prompts(&self) -> bool {
        self.inner.answers_prompts()
    }

    fn label(&self) -> String {
        self.inner.label()
    }

    fn cache_identity(&self) -> String {
        self.inner.cache_identity()
    }

    fn default_model(&self) -> Option<&str> {
        self.inner.default_model()
    }

    fn infer<'a>(
        &'a self,
        request: &'a InferenceRequest,
    ) -> BoxFuture<'a, Result<InferenceResponse, EngineError>> {
        Box::pin(self.cached(request, None))
    }

    /// A miss hands the signal on to the engine; a hit returns at once
    /// (its caller fires the signal then).
    fn infer_with_first_token<'a>(
        &'a self,
        request: &'a InferenceRequest,
        first_token: &'a FirstToken,
    ) -> BoxFuture<'a, Result<InferenceResponse, EngineError>> {
        Box::pin(self.cached(request, Some(first_token)))
    }
}

impl<E: InferenceEngine + ?Sized> CachingEngine<E> {
    /// The stored answer to `request`, else the engine's (with
    /// `first_token` when a warm-up call carries one), stored.
    async fn cached(
        &self,
        request: &InferenceRequest,
        first_token: Option<&FirstToken>,
    ) -> Result<InferenceResponse, EngineError> {
        let key = cache_key(
            &self.identity,
            &request.params,
            &request.prompt,
            request.response_schema.as_ref(),
        );
        let cache = Arc::clone(&self.cache);
        let get_key = key.clone();
        match cache_call(move || cache.get(&get_key)).await {
            Ok(Some(hit)) => {
                self.stats.hits.fetch_add(1, Ordering::Relaxed);
                return Ok(InferenceResponse {
                    output: hit.output,
                    model: hit.model,
                    usage: hit.usage,
                    finish_reason: hit.finish_reason,
                    attempts: Vec::new(),
                    cached: true,
                });
            }
            Ok(None) => {}
            Err(e) => self.stats.error(&e),
        }
        self.stats.misses.fetch_add(1, Ordering::Relaxed);
        let response = match first_token {
            Some(signal) => self.inner.infer_with_first_token(request, signal).await?,
            None => self.inner.infer(request).await?,
        };
        if !response.cached {
            let entry = CachedOutput {
                output: response.output.clone(),
                model: response.model.clone(),
                usage: response.usage,
                finish_reason: response.finish_reason.clone(),
                run_id: self.run_id.clone(),
                task_id: request.task_id.clone(),
            };
            let cache = Arc::clone(&self.cache);
            let engine = self.inner.name().to_string();
            let model = request.params.model.clone();
            let put = move || cache.put(&key, &engine, model.as_deref(), &entry);
            if let Err(e) = cache_call(put).await {
                self.stats.error(&e);
            }
        }
        Ok(response)
    }
}
