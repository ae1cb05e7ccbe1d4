//! The output cache: keys, the decorator engine, sharing between
//! connections, gc.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use ctx_engine::{BoxFuture, EngineError, InferenceEngine, InferenceRequest, InferenceResponse};
use ctx_model::{Params, TokenUsage};
use ctx_store_sqlite::{
    CACHE_FILE, CachedOutput, CachingEngine, ResultCache, RunRoot, cache_key, sha256_hex,
};

/// Answers `echo:{prompt}` and counts its calls.
#[derive(Default)]
struct Counting {
    calls: AtomicUsize,
    fail: Mutex<bool>,
}

impl InferenceEngine for Counting {
    fn name(&self) -> &str {
        "counting"
    }
    fn infer<'a>(
        &'a self,
        request: &'a InferenceRequest,
    ) -> BoxFuture<'a, Result<InferenceResponse, EngineError>> {
        Box::pin(async move {
            self.calls.fetch_add(1, Ordering::SeqCst);
            if *self.fail.lock().unwrap() {
                return Err(EngineError::new("boom"));
            }
            Ok(InferenceResponse {
                output: format!("echo:{}", request.prompt),
                model: Some("m-reported".into()),
                usage: Some(TokenUsage {
                    prompt_tokens: 1,
                    completion_tokens: 2,
                    total_tokens: 3,
                    cached_tokens: None,
                    cache_write_tokens: None,
                    partial: false,
                    prompt_counted: false,
                    service_tier: None,
                }),
                finish_reason: Some("stop".into()),
                ..InferenceResponse::default()
            })
        })
    }
    /// Fires the warm-up signal as a streaming engine would, then answers.
    fn infer_with_first_token<'a>(
        &'a self,
        request: &'a InferenceRequest,
        first_token: &'a ctx_engine::FirstToken,
    ) -> BoxFuture<'a, Result<InferenceResponse, EngineError>> {
        first_token.fire();
        self.infer(request)
    }
}

fn request(prompt: &str, params: Params) -> InferenceRequest {
    InferenceRequest {
        task_id: "t".into(),
        prompt: prompt.into(),
        params,
        prompt_tokens: 1,
        max_output_bytes: ctx_engine::DEFAULT_MAX_OUTPUT_BYTES,
        purpose: Default::default(),
        cache_breakpoints: None,
        canary: None,
        response_schema: None,
    }
}

fn params() -> Params {
    Params {
        prompt: "template".into(),
        model: Some("m".into()),
        temperature: Some(0.0),
        ..Params::default()
    }
}

fn block<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(f)
}

#[test]
fn key_covers_engine_model_params_and_final_prompt_only() {
    let base = cache_key("command:abc", &params(), "final", None);
    assert_eq!(base, cache_key("command:abc", &params(), "final", None));
    assert_ne!(base, cache_key("command:xyz", &params(), "final", None));
    assert_ne!(base, cache_key("command:abc", &params(), "final!", None));
    let mut p = params();
    p.model = Some("other".into());
    assert_ne!(base, cache_key("command:abc", &p, "final", None));
    let mut p = params();
    p.temperature = Some(0.7);
    assert_ne!(base, cache_key("command:abc", &p, "final", None));
    let mut p = params();
    p.system = Some("be terse".into());
    assert_ne!(base, cache_key("command:abc", &p, "final", None));
    // The template is inside the final prompt already; scheduling hints
    // and credentials do not change the answer.
    let mut p = params();
    p.prompt = "another template".into();
    p.estimated_ms = Some(10);
    p.extra.insert("api_key".into(), serde_json::json!("sk-1"));
    assert_eq!(base, cache_key("command:abc", &p, "final", None));
}

#[test]
fn key_covers_the_response_schema_only_when_there_is_one() {
    // Without a schema the key is the pre-schema key, byte for byte: the
    // six length-prefixed fields, nothing appended.
    let sampling =
        ctx_store::fingerprint::canonical_json(&ctx_store::fingerprint::sampling_params(&params()));
    let old = ctx_store::fingerprint::sha256_fields(&[
        b"ctx-cache-v1",
        b"command:abc",
        b"m",
        b"",
        sampling.as_bytes(),
        b"final",
    ]);
    assert_eq!(cache_key("command:abc", &params(), "final", None), old);
    let a = serde_json::json!({"type": "object", "required": ["score"]});
    let b = serde_json::json!({"type": "object", "required": ["grade"]});
    let with_a = cache_key("command:abc", &params(), "final", Some(&a));
    assert_ne!(with_a, old);
    assert_ne!(
        with_a,
        cache_key("command:abc", &params(), "final", Some(&b))
    );
    // Canonical: key order inside the schema does not matter.
    let a2 = serde_json::json!({"required": ["score"], "type": "object"});
    assert_eq!(
        with_a,
        cache_key("command:abc", &params(), "final", Some(&a2))
    );
}

/// A warm-up call's signal reaches the engine on a miss; a hit returns
/// without the engine (its caller fires the signal then).
#[test]
fn a_miss_hands_the_first_token_signal_to_the_engine() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = Arc::new(RunRoot::new(tmp.path()).cache().unwrap());
    let inner = Arc::new(Counting::default());
    let engine = CachingEngine::new(inner.clone(), cache, "counting", None);
    let miss = ctx_engine::FirstToken::new(|| {});
    let r = block(engine.infer_with_first_token(&request("warm", params()), &miss)).unwrap();
    assert!(!r.cached);
    assert!(miss.has_fired(), "the engine fired it");
    let hit = ctx_engine::FirstToken::new(|| {});
    let r = block(engine.infer_with_first_token(&request("warm", params()), &hit)).unwrap();
    assert!(r.cached);
    assert!(!hit.has_fired());
    assert_eq!(inner.calls.load(Ordering::SeqCst), 1);
}

#[test]
fn requests_differing_only_in_schema_do_not_share_an_entry() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = Arc::new(RunRoot::new(tmp.path()).cache().unwrap());
    let inner = Arc::new(Counting::default());
    let engine = CachingEngine::new(inner.clone(), cache, "counting", Some("run-1".into()));
    let mut with_schema = request("hello", params());
    with_schema.response_schema = Some(serde_json::json!({"type": "object"}));
    assert!(
        !block(engine.infer(&request("hello", params())))
            .unwrap()
            .cached
    );
    assert!(!block(engine.infer(&with_schema)).unwrap().cached);
    assert!(block(engine.infer(&with_schema)).unwrap().cached);
    assert!(
        block(engine.infer(&request("hello", params())))
            .unwrap()
            .cached
    );
    assert_eq!(inner.calls.load(Ordering::SeqCst), 2);
}

#[test]
fn hits_skip_the_engine_and_are_marked_cached() {
    let tmp = tempfile::tempdir().unwrap();
    let root = RunRoot::new(tmp.path());
    let cache = Arc::new(root.cache().unwrap());
    let inner = Arc::new(Counting::default());
    let engine = CachingEngine::new(
        inner.clone(),
        cache.clone(),
        "counting",
        Some("run-1".into()),
    );
    let stats = engine.stats();

    let first = block(engine.infer(&request("hello", params()))).unwrap();
    assert!(!first.cached);
    let second = block(engine.infer(&request("hello", params()))).unwrap();
    assert!(second.cached);
    assert_eq!(second.output, "echo:hello");
    assert_eq!(second.model.as_deref(), Some("m-reported"));
    assert_eq!(second.usage, first.usage);
    assert!(second.attempts.is_empty());
    assert_eq!(inner.calls.load(Ordering::SeqCst), 1);

    // Another prompt misses; a failure is not cached.
    *inner.fail.lock().unwrap() = true;
    assert!(block(engine.infer(&request("other", params()))).is_err());
    *inner.fail.lock().unwrap() = false;
    assert!(
        !block(engine.infer(&request("other", params())))
            .unwrap()
            .cached
    );
    assert_eq!(inner.calls.load(Ordering::SeqCst), 3);
    assert_eq!((stats.hits(), stats.misses(), stats.errors()), (1, 3, 0));

    // A second engine (another process, another run) sees the entries.
    let engine2 = CachingEngine::new(
        inner.clone() as Arc<dyn InferenceEngine>,
        Arc::new(ResultCache::open(&tmp.path().join(CACHE_FILE)).unwrap()),
        "counting",
        Some("run-2".into()),
    );
    assert!(
        block(engine2.infer(&request("other", params())))
            .unwrap()
            .cached
    );
    assert_eq!(inner.calls.load(Ordering::SeqCst), 3);
}

#[test]
fn concurrent_writers_share_one_cache() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join(CACHE_FILE);
    let handles: Vec<_> = (0..4)
        .map(|w| {
            let path = path.clone();
            std::thread::spawn(move || {
                let cache = ResultCache::open(&path).unwrap();
                for i in 0..50 {
                    let entry = CachedOutput {
                        output: format!("{w}-{i}"),
                        model: None,
                        usage: None,
                        finish_reason: None,
                        run_id: Some(format!("run-{w}")),
                        task_id: format!("t{i}"),
                    };
                    cache
                        .put(
                            &sha256_hex(format!("{w}-{i}").as_bytes()),
                            "e",
                            None,
                            &entry,
                        )
                        .unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let cache = ResultCache::open(&path).unwrap();
    assert_eq!(cache.len().unwrap(), 200);
    let hit = cache.get(&sha256_hex(b"2-7")).unwrap().unwrap();
    assert_eq!(hit.output, "2-7");
    assert_eq!(cache.remove_run("run-2").unwrap(), 50);
    assert_eq!(cache.len().unwrap(), 150);
}

#[test]
fn a_foreign_cache_file_is_refused_untouched() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join(CACHE_FILE);
    std::fs::write(&path, "not sqlite at all, just text\n".repeat(40)).unwrap();
    let before = std::fs::read(&path).unwrap();
    let err = ResultCache::open(&path).unwrap_err().to_string();
    assert!(
        err.contains("cache.sqlite") && err.contains("not a SQLite database"),
        "{err}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

/// The state a second process finds while the first is creating the cache:
/// the file exists with a WAL header but no schema yet. Opening it must
/// initialise it, not refuse it as foreign (the race
/// `concurrent_writers_share_one_cache` hit now and then).
#[test]
fn a_cache_being_created_by_another_process_is_joined() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join(CACHE_FILE);
    let creator = rusqlite::Connection::open(&path).unwrap();
    let mode: String = creator
        .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    assert!(std::fs::metadata(&path).unwrap().len() > 0);
    let cache = ResultCache::open(&path).unwrap();
    assert_eq!(cache.len().unwrap(), 0);
    drop(creator);
    // A database that holds someone else's table is still refused.
    let other = tmp.path().join("other.sqlite");
    let conn = rusqlite::Connection::open(&other).unwrap();
    conn.execute_batch("CREATE TABLE notes (body TEXT);")
        .unwrap();
    drop(conn);
    let err = ResultCache::open(&other).unwrap_err().to_string();
    assert!(err.contains("another application"), "{err}");
}

/// A cache write that waits for another process's lock runs on the
/// blocking pool: while it waits, other tasks on the same (single-threaded)
/// runtime go on. Another connection holds cache.sqlite's write lock until
/// it has seen the runtime make progress (or three seconds pass); written
/// inline, the write would hold the runtime's only thread until then.
#[test]
fn a_cache_write_waiting_for_a_lock_does_not_stall_the_runtime() {
    use std::sync::atomic::AtomicBool;
    use std::time::{Duration, Instant};

    let tmp = tempfile::tempdir().unwrap();
    let root = RunRoot::new(tmp.path());
    let cache = Arc::new(root.cache().unwrap());
    let engine = CachingEngine::new(Arc::new(Counting::default()), cache, "counting", None);
    let ticks = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicBool::new(false));

    let locker = rusqlite::Connection::open(tmp.path().join(CACHE_FILE)).unwrap();
    locker.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let seen = Arc::clone(&ticks);
    let holder = std::thread::spawn(move || {
        let t0 = Instant::now();
        while seen.load(Ordering::SeqCst) < 1_000 && t0.elapsed() < Duration::from_secs(3) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let progressed = seen.load(Ordering::SeqCst) >= 1_000;
        locker.execute_batch("COMMIT").unwrap();
        progressed
    });

    let response = block(async {
        let (t, d) = (Arc::clone(&ticks), Arc::clone(&done));
        let ticker = tokio::spawn(async move {
            while !d.load(Ordering::SeqCst) {
                t.fetch_add(1, Ordering::SeqCst);
                tokio::task::yield_now().await;
            }
        });
        let r = engine.infer(&request("hello", params())).await;
        done.store(true, Ordering::SeqCst);
        ticker.await.unwrap();
        r
    })
    .unwrap();
    assert!(
        holder.join().unwrap(),
        "the runtime made no progress while the cache write waited for the lock"
    );
    assert!(!response.cached);
    assert_eq!(
        engine.stats().errors(),
        0,
        "{:?}",
        engine.stats().last_error()
    );
    // The write went through once the lock was released.
    assert!(
        block(engine.infer(&request("hello", params())))
            .unwrap()
            .cached
    );
}
