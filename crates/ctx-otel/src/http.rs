//! The OTLP exporters' HTTP client: the workspace's reqwest 0.13 with
//! rustls and `ring` (the OpenAI engine's stack), so tracing adds no second
//! HTTP or TLS implementation. opentelemetry-http's own reqwest support is
//! for reqwest 0.12.
//!
//! The SDK's batch processor and metric reader export from threads of
//! their own, blocking on the export future; reqwest needs a Tokio
//! reactor. So each request is spawned on the runtime the client is
//! handed, the process's one (issue 36: a `ctx run --store postgres://…
//! --otlp` once had three): a request is async I/O, so a slow collector
//! holds no thread of it, and the exporter's threads wait on the answer.

use std::sync::Arc;
use std::time::Duration;

use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};

/// reqwest on a runtime of its own.
#[derive(Debug, Clone)]
pub(crate) struct OtlpHttp {
    /// Built on the client's own runtime as soon as it exists, not on the
    /// command's thread: a reqwest client with rustls reads the system's
    /// root certificates, which took 150 ms of a debug `ctx run`'s start.
    client: Arc<tokio::sync::OnceCell<reqwest::Client>>,
    timeout: Duration,
    /// Every endpoint is `http://`: no root certificates are loaded (they
    /// were 154 M of the 160 M instructions tracing added to a debug run).
    plain: bool,
    runtime: tokio::runtime::Handle,
}

impl OtlpHttp {
    /// Each request bounded by `timeout`, run on `runtime`; `plain`: every
    /// endpoint is `http://`, so no TLS roots are needed.
    pub(crate) fn new(timeout: Duration, plain: bool, runtime: tokio::runtime::Handle) -> OtlpHttp {
        let http = OtlpHttp {
            client: Arc::default(),
            timeout,
            plain,
            runtime,
        };
        let early = http.clone();
        http.runtime.spawn(async move {
            let _ = early.client().await;
        });
        http
    }
}

impl OtlpHttp {
    /// The client, built once (on a blocking thread of the client's runtime).
    async fn client(&self) -> Result<reqwest::Client, HttpError> {
        let (timeout, plain) = (self.timeout, self.plain);
        let client = self
            .client
            .get_or_try_init(|| async move {
                tokio::task::spawn_blocking(move || {
                    // As the OpenAI engine does: reqwest is built without a
                    // default crypto provider, `ring` is installed (the
                    // first install wins).
                    let _ = rustls::crypto::ring::default_provider().install_default();
                    let builder = reqwest::Client::builder()
                        .timeout(timeout)
                        .connect_timeout(timeout)
                        .user_agent(concat!("ctx/", env!("CARGO_PKG_VERSION")));
                    let builder = if plain {
                        builder.tls_certs_only(Vec::new())
                    } else {
                        builder
                    };
                    builder.build()
                })
                .await
                .map_err(|e| -> HttpError { Box::new(e) })?
                .map_err(|e| -> HttpError { Box::new(e) })
            })
            .await?;
        Ok(client.clone())
    }

    /// Runs `future` to its end on the client's runtime, from a thread
    /// outside any runtime (a one-off send; inside one, the caller would
    /// block a thread the future may need, and tokio refuses).
    pub(crate) fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }
}

#[async_trait::async_trait]
impl HttpClient for OtlpHttp {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let request = reqwest::Request::try_from(request)?;
        let http = self.clone();
        let answer = self.runtime.spawn(async move {
            let client = http.client().await?;
            let response = client.execute(request).await.map_err(in_words)?;
            let status = response.status();
            let headers = response.headers().clone();
            let body = response.bytes().await.map_err(in_words)?;
            Ok::<_, HttpError>((status, headers, body))
        });
        let (status, headers, body) = answer.await??;
        let mut response = Response::builder().status(status).body(body)?;
        *response.headers_mut() = headers;
        Ok(response)
    }
}

/// A failed send in words: the error and each of its causes, joined by
/// `: `. The OTLP exporter reports an error with `{:?}`, and reqwest's
/// `Debug` is a dump of its fields; this one's `Debug` is its words, so
/// the warning at exit reads "error sending request for url (…): …:
/// Connection refused".
struct SendError(String);

impl std::fmt::Debug for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SendError {}

fn in_words(e: reqwest::Error) -> HttpError {
    let mut words = e.to_string();
    let mut cause = std::error::Error::source(&e);
    while let Some(c) = cause {
        let next = c.to_string();
        if !words.ends_with(&next) {
            words.push_str(": ");
            words.push_str(&next);
        }
        cause = c.source();
    }
    Box::new(SendError(words))
}

#[cfg(test)]
mod send_error_tests {
    #[test]
    fn a_refused_connection_reads_as_words_not_a_struct_dump() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let _ = rustls::crypto::ring::default_provider().install_default();
        // Port 9 (discard) on loopback: nothing listens in the test.
        let e = rt
            .block_on(reqwest::Client::new().get("http://127.0.0.1:9/").send())
            .unwrap_err();
        let shown = format!("{:?}", super::in_words(e));
        assert!(shown.starts_with("error sending request"), "{shown}");
        assert!(!shown.contains("kind:"), "{shown}");
    }
}
