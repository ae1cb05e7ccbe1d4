//! The process's one async runtime, and the stop signals it turns into
//! cancellation.
//!
//! One runtime per process (issue 36): the commands run on it, and it is
//! handed to what would otherwise start its own: the PostgreSQL store
//! (opened inside it, it drives its connections here) and the OTLP
//! exporter (its HTTP requests run here). It is built on first use and
//! shut down by [`shutdown`] once the command and the telemetry flush are
//! done, which drops every task still spawned: a child process a run
//! leaves is killed then (the engines spawn them `kill_on_drop`).

use std::sync::{Arc, Mutex};

use crate::exit::{CliError, Exit};

/// The runtime, until [`shutdown`] takes it.
static RUNTIME: Mutex<Option<Arc<tokio::runtime::Runtime>>> = Mutex::new(None);

/// The process's runtime, built on first use: multi-threaded with every
/// driver enabled. A system that refuses its threads exits
/// [`Exit::System`] (71): nothing ran, and it is neither bad usage nor a
/// store's fault.
fn runtime() -> Result<Arc<tokio::runtime::Runtime>, CliError> {
    let mut slot = RUNTIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(rt) = slot.as_ref() {
        return Ok(Arc::clone(rt));
    }
    let built = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            CliError::with(Exit::System, format!("cannot start the async runtime: {e}"))
        })?;
    let rt = Arc::new(built);
    *slot = Some(Arc::clone(&rt));
    Ok(rt)
}

/// A handle to the process's runtime, for what runs on it without being
/// a command's future: the OTLP exporter, a store opened outside
/// [`block_on`].
pub(crate) fn handle() -> Result<tokio::runtime::Handle, CliError> {
    Ok(runtime()?.handle().clone())
}

/// Shuts the runtime down, after the command and the telemetry flush:
/// tasks still spawned are dropped, waiting at most a second for those
/// blocked in a system call.
pub(crate) fn shutdown() {
    let taken = RUNTIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take();
    if let Some(rt) = taken.and_then(|rt| Arc::try_unwrap(rt).ok()) {
        rt.shutdown_timeout(std::time::Duration::from_secs(1));
    }
}

/// Runs `fut` to its end on the process's runtime: the one way a command
/// that waits on no signal (a shared store's reads) runs async work.
pub(crate) fn block_on<F: std::future::Future>(fut: F) -> Result<F::Output, CliError> {
    Ok(runtime()?.block_on(fut))
}

/// The first stop signal, as a future [`until_stopped`] hands its work.
pub(crate) type Stop = std::pin::Pin<Box<dyn std::future::Future<Output = StopSignal> + Send>>;

/// Runs `work` to its end on the process's runtime, SIGINT, SIGTERM
/// and SIGHUP installed before it starts (see [`StopSignals`]) and handed
/// to it as the future of the first to arrive: the one way a command that
/// runs tasks (`ctx run`, `ctx eval`, `ctx worker`) runs them.
pub(crate) fn until_stopped<T, F, Fut>(work: F) -> Result<T, CliError>
where
    F: FnOnce(Stop) -> Fut,
    Fut: std::future::Future<Output = T>,
{
    block_on(async {
        let signals = StopSignals::install();
        work(Box::pin(signals.first())).await
    })
}

/// A signal that stops a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopSignal {
    /// SIGINT (Ctrl-C).
    Interrupt,
    /// SIGTERM (cron, systemd, Kubernetes, CI runners, `timeout`).
    Terminate,
    /// SIGHUP (the terminal went away).
    Hangup,
}

impl StopSignal {
    /// The signal's name.
    pub fn name(self) -> &'static str {
        match self {
            StopSignal::Interrupt => "SIGINT",
            StopSignal::Terminate => "SIGTERM",
            StopSignal::Hangup => "SIGHUP",
        }
    }

    /// The conventional exit code: 128 + the signal's number.
    pub fn exit(self) -> Exit {
        match self {
            StopSignal::Interrupt => Exit::Interrupted,
            StopSignal::Terminate => Exit::Terminated,
            StopSignal::Hangup => Exit::Hangup,
        }
    }
}

/// The handlers of SIGINT, SIGTERM and SIGHUP, installed before the first
/// task is dispatched: from then on none of them can end ctx before its
/// children (the default action would, leaving them orphaned). Once
/// installed, tokio keeps them for the process's life, so a second signal
/// during the clean-up does not kill ctx half-way either. A signal whose
/// handler cannot be installed is simply not waited for.
pub(crate) struct StopSignals {
    #[cfg(unix)]
    interrupt: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    terminate: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    hangup: Option<tokio::signal::unix::Signal>,
}

impl StopSignals {
    /// Installs the handlers; must run inside the runtime.
    pub(crate) fn install() -> StopSignals {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            StopSignals {
                interrupt: signal(SignalKind::interrupt()).ok(),
                terminate: signal(SignalKind::terminate()).ok(),
                hangup: signal(SignalKind::hangup()).ok(),
            }
        }
        #[cfg(not(unix))]
        StopSignals {}
    }

    /// Resolves with the first of the signals to arrive.
    pub(crate) async fn first(mut self) -> StopSignal {
        #[cfg(unix)]
        {
            async fn arrival(s: &mut Option<tokio::signal::unix::Signal>) {
                let arrived = match s {
                    Some(s) => s.recv().await.is_some(),
                    None => false,
                };
                if !arrived {
                    std::future::pending::<()>().await;
                }
            }
            tokio::select! {
                () = arrival(&mut self.interrupt) => StopSignal::Interrupt,
                () = arrival(&mut self.terminate) => StopSignal::Terminate,
                () = arrival(&mut self.hangup) => StopSignal::Hangup,
            }
        }
        #[cfg(not(unix))]
        {
            if tokio::signal::ctrl_c().await.is_err() {
                std::future::pending::<()>().await;
            }
            StopSignal::Interrupt
        }
    }
}
