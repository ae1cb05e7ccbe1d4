//! Store calls off the async runtime (the `tokio` feature).
//!
//! [`ExecutionStore`](crate::ExecutionStore) is synchronous on purpose
//! (every backend we ship answers in microseconds to milliseconds, and a
//! synchronous trait is the easiest to implement). But "milliseconds"
//! includes an fsync per commit in the durable SQLite store, a write that
//! waits up to the busy timeout for another process's lock, or a network
//! round trip: run on a Tokio worker thread, such a call stalls every task
//! that thread would otherwise poll, and on a current-thread runtime the
//! whole executor, dispatching included. So async callers of a store (the
//! executor in ctx-deps, the output cache in ctx-store-sqlite) run each
//! call through [`off_runtime`]. The cost is one thread hand-off per call,
//! nothing next to an fsync or an LLM call.
//!
//! Behind a cargo feature so that a store implementation, which is
//! synchronous, compiles no async runtime.

/// Runs `call` on Tokio's blocking pool and awaits it when there is a
/// runtime; inline when there is none (a synchronous caller, a test).
/// `Err` is the blocking task's failure (it panicked or the runtime shut
/// down), never the call's own error, which is in `T`.
pub async fn off_runtime<T, F>(call: F) -> Result<T, tokio::task::JoinError>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => handle.spawn_blocking(call).await,
        Err(_) => Ok(call()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
            .block_on(f)
    }

    #[test]
    fn on_a_runtime_the_call_runs_on_another_thread() {
        let caller = std::thread::current().id();
        let ran_on = block_on(off_runtime(|| std::thread::current().id())).expect("joined");
        assert_ne!(ran_on, caller);
    }

    #[test]
    fn without_a_runtime_the_call_runs_inline() {
        let caller = std::thread::current().id();
        let fut = off_runtime(|| std::thread::current().id());
        // Polled without a runtime: a trivial executor that polls once.
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        let mut fut = std::pin::pin!(fut);
        match fut.as_mut().poll(&mut cx) {
            std::task::Poll::Ready(r) => assert_eq!(r.expect("inline"), caller),
            std::task::Poll::Pending => panic!("an inline call is ready at once"),
        }
    }

    #[test]
    fn a_panicking_call_is_an_error_not_a_panic() {
        let err = block_on(off_runtime(|| -> u8 { panic!("boom") })).unwrap_err();
        assert!(err.is_panic());
    }
}
