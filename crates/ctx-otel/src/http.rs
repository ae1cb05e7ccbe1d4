//! The OTLP exporters' HTTP client: the workspace's reqwest 0.13 with
//! rustls and `ring` (the OpenAI engine's stack), so tracing adds no second
//! HTTP or TLS implementation. opentelemetry-http's own reqwest support is
//! for reqwest 0.12.
//!
//! The SDK's batch processor and metric reader export from threads of
//! their own, blocking on the export future; reqwest needs a Tokio
//! reactor. So the client owns a one-thread runtime and each request runs
//! there: the run's own runtime never carries telemetry, and a slow
//! collector occupies only that thread.

use std::sync::Arc;
use std::time::Duration;

use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};

/// reqwest on a runtime of its own.
#[derive(Debug, Clone)]
pub(crate) struct OtlpHttp {
    client: reqwest::Client,
    runtime: Arc<tokio::runtime::Runtime>,
}

impl OtlpHttp {
    /// Each request bounded by `timeout`.
    pub(crate) fn new(timeout: Duration) -> std::io::Result<OtlpHttp> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("ctx-otlp")
            .enable_all()
            .build()?;
        // As the OpenAI engine does: reqwest is built without a default
        // crypto provider, `ring` is installed (the first install wins).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .user_agent(concat!("ctx/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(std::io::Error::other)?;
        Ok(OtlpHttp {
            client,
            runtime: Arc::new(runtime),
        })
    }
}

impl OtlpHttp {
    /// Runs `future` to its end on the client's runtime, from a thread
    /// outside any runtime (a one-off send).
    pub(crate) fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }
}

#[async_trait::async_trait]
impl HttpClient for OtlpHttp {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let request = reqwest::Request::try_from(request)?;
        let client = self.client.clone();
        let answer = self.runtime.spawn(async move {
            let response = client.execute(request).await?;
            let status = response.status();
            let headers = response.headers().clone();
            let body = response.bytes().await?;
            Ok::<_, reqwest::Error>((status, headers, body))
        });
        let (status, headers, body) = answer.await??;
        let mut response = Response::builder().status(status).body(body)?;
        *response.headers_mut() = headers;
        Ok(response)
    }
}
