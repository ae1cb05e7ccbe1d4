//! The engine against in-process HTTP servers on 127.0.0.1: wiremock for
//! well-formed exchanges, a raw TCP server for broken ones (bodies cut
//! short, stalled streams). Backoffs are milliseconds so the suite is fast.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ctx_engine::{EngineError, InferenceEngine, InferenceRequest, InferenceResponse};
use ctx_engine_openai::{
    ApiKey, EngineEvent, OpenAiConfig, OpenAiEngine, RequestDefaults, RetryPolicy,
};
use ctx_model::{Params, TokenUsage};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

const KEY: &str = "sk-test-SECRET-0123456789";

fn config(base_url: String) -> OpenAiConfig {
    OpenAiConfig {
        base_url,
        api_key: ApiKey::new(KEY),
        defaults: RequestDefaults {
            model: Some("test-model".into()),
            ..RequestDefaults::default()
        },
        request_timeout: Duration::from_secs(5),
        idle_timeout: Duration::from_secs(5),
        retry: RetryPolicy {
            max_attempts: 4,
            initial_backoff: Duration::from_millis(5),
            max_backoff: Duration::from_millis(20),
            max_retry_after: Duration::from_secs(60),
        },
        ..OpenAiConfig::default()
    }
}

fn engine(cfg: OpenAiConfig) -> OpenAiEngine {
    OpenAiEngine::new(cfg).expect("engine")
}

fn request(id: &str) -> InferenceRequest {
    InferenceRequest {
        task_id: id.into(),
        prompt: "## Outputs from Dependent Tasks\n\nsomething\n\n---\n\nWrite a haiku.".into(),
        params: Params {
            prompt: "Write a haiku.".into(),
            ..Params::default()
        },
        prompt_tokens: 12,
        max_output_bytes: ctx_engine::DEFAULT_MAX_OUTPUT_BYTES,
        purpose: Default::default(),
        cache_breakpoints: None,
        canary: None,
        response_schema: None,
    }
}

fn completion(content: &str) -> Value {
    json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "test-model-2026-01-01",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25,
                  "prompt_tokens_details": {"cached_tokens": 16}}
    })
}

async fn server() -> MockServer {
    MockServer::start().await
}

fn base(server: &MockServer) -> String {
    format!("{}/v1", server.uri())
}

fn outcomes(attempts: &[ctx_model::Attempt]) -> Vec<String> {
    attempts.iter().map(|a| a.outcome.to_string()).collect()
}

fn assert_no_key(what: &str, text: &str) {
    assert!(!text.contains(KEY), "{what} leaks the API key: {text}");
}

fn assert_clean(result: &Result<InferenceResponse, EngineError>) {
    assert_no_key("result", &format!("{result:?}"));
}

#[tokio::test]
async fn success_records_usage_model_and_one_attempt() {
    let s = server().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion("An old silent pond")))
        .expect(1)
        .mount(&s)
        .await;
    let mut req = request("t1");
    req.params.temperature = Some(0.25);
    req.params.system = Some("You are terse.".into());
    req.params
        .extra
        .insert("presence_penalty".into(), json!(0.5));
    let r = engine(config(base(&s))).infer(&req).await.unwrap();
    assert_eq!(r.output, "An old silent pond");
    assert_eq!(r.model.as_deref(), Some("test-model-2026-01-01"));
    assert_eq!(r.finish_reason, Some(ctx_engine::FinishReason::Stop));
    assert_eq!(
        r.usage,
        Some(TokenUsage {
            prompt_tokens: 20,
            completion_tokens: 5,
            total_tokens: 25,
            cached_tokens: Some(16),
            cache_write_tokens: None,
            partial: false,
            prompt_counted: false,
            service_tier: None,
        })
    );
    assert_eq!(outcomes(&r.attempts), ["ok"]);
    assert_eq!(r.attempts[0].number, 1);

    let received = s.received_requests().await.unwrap();
    let sent: Value = serde_json::from_slice(&received[0].body).unwrap();
    assert_eq!(sent["model"], "test-model");
    assert_eq!(sent["temperature"], 0.25);
    assert_eq!(sent["presence_penalty"], 0.5);
    assert_eq!(
        sent["messages"][0],
        json!({"role": "system", "content": "You are terse."})
    );
    assert_eq!(sent["messages"][1]["content"], req.prompt.as_str());
    assert!(sent.get("stream").is_none());
    assert_eq!(
        received[0]
            .headers
            .get("authorization")
            .unwrap()
            .to_str()
            .unwrap(),
        format!("Bearer {KEY}")
    );
}

#[tokio::test]
async fn no_key_sends_no_authorization_and_task_model_wins() {
    let s = server().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion("ok")))
        .mount(&s)
        .await;
    let mut cfg = config(base(&s));
    cfg.api_key = None;
    let mut req = request("t1");
    req.params.model = Some("task-model".into());
    engine(cfg).infer(&req).await.unwrap();
    let received = s.received_requests().await.unwrap();
    assert!(received[0].headers.get("authorization").is_none());
    let sent: Value = serde_json::from_slice(&received[0].body).unwrap();
    assert_eq!(sent["model"], "task-model");
}

#[tokio::test]
async fn missing_model_names_the_task_and_sends_nothing() {
    let s = server().await;
    let mut cfg = config(base(&s));
    cfg.defaults.model = None;
    let e = engine(cfg).infer(&request("design")).await.unwrap_err();
    assert_eq!(
        e.message,
        "task `design`: no model: set `params.model` in the plan or give the engine a default model"
    );
    assert!(e.attempts.is_empty());
    assert!(s.received_requests().await.unwrap().is_empty());
}

fn sse_body(chunks: &[Value]) -> String {
    let mut body = String::from(": keep-alive\n\n");
    for c in chunks {
        body.push_str(&format!("data: {c}\n\n"));
    }
    body.push_str("data: [DONE]\n\n");
    body
}

fn chunk(content: Option<&str>, finish: Option<&str>) -> Value {
    json!({"id": "c", "object": "chat.completion.chunk", "model": "streamer-1",
           "choices": [{"index": 0, "delta": content.map_or(json!({}), |c| json!({"content": c})), "finish_reason": finish}]})
}

#[tokio::test]
async fn streaming_assembles_output_usage_and_progress() {
    let s = server().await;
    let body = sse_body(&[
        chunk(Some(""), None),
        chunk(Some("Hello"), None),
        chunk(Some(", wörld"), None),
        chunk(None, Some("length")),
        json!({"id": "c", "model": "streamer-1", "choices": [],
               "usage": {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12}}),
    ]);
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("content-type", "text/event-stream")
                .set_body_string(body),
        )
        .mount(&s)
        .await;
    let mut cfg = config(base(&s));
    cfg.stream = true;
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = events.clone();
    let e = engine(cfg).with_observer(Arc::new(move |ev: &EngineEvent| {
        sink.lock().unwrap().push(ev.clone());
    }));
    let r = e.infer(&request("s")).await.unwrap();
    assert_eq!(r.output, "Hello, wörld");
    assert_eq!(r.finish_reason, Some(ctx_engine::FinishReason::Length));
    assert_eq!(r.model.as_deref(), Some("streamer-1"));
    assert_eq!(r.usage.unwrap().total_tokens, 12);
    assert_eq!(outcomes(&r.attempts), ["ok"]);
    let sent: Value =
        serde_json::from_slice(&s.received_requests().await.unwrap()[0].body).unwrap();
    assert_eq!(sent["stream"], true);
    assert_eq!(sent["stream_options"], json!({"include_usage": true}));
    let events = events.lock().unwrap();
    assert!(
        events
            .iter()
            .any(|e| matches!(e, EngineEvent::Streaming { chars: 12, .. })),
        "{events:?}"
    );
}

/// A chunk of choice `index` of an `n > 1` stream.
fn chunk_of(index: u32, content: Option<&str>, finish: Option<&str>) -> Value {
    let mut c = chunk(content, finish);
    c["choices"][0]["index"] = json!(index);
    c
}

#[tokio::test]
async fn streaming_with_n_2_returns_the_first_choice_alone() {
    let s = server().await;
    let body = sse_body(&[
        chunk_of(0, Some(""), None),
        chunk_of(1, Some(""), None),
        chunk_of(0, Some("A"), None),
        chunk_of(1, Some("B"), None),
        chunk_of(0, Some("lpha"), None),
        chunk_of(1, Some("eta"), Some("length")),
        chunk_of(0, None, Some("stop")),
        json!({"id": "c", "model": "streamer-1", "choices": [],
               "usage": {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13}}),
    ]);
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("content-type", "text/event-stream")
                .set_body_string(body),
        )
        .expect(1)
        .mount(&s)
        .await;
    let mut cfg = config(base(&s));
    cfg.stream = true;
    let chars = Arc::new(Mutex::new(Vec::new()));
    let sink = chars.clone();
    let e = engine(cfg).with_observer(Arc::new(move |ev: &EngineEvent| {
        if let EngineEvent::Streaming { chars, .. } = ev {
            sink.lock().unwrap().push(*chars);
        }
    }));
    let mut req = request("n2");
    req.params.extra.insert("n".into(), json!(2));
    let r = e.infer(&req).await.unwrap();
    // Not "ABlphaeta": choice 1 is neither spliced in nor its finish
    // reason taken.
    assert_eq!(r.output, "Alpha");
    assert_eq!(r.finish_reason, Some(ctx_engine::FinishReason::Stop));
    assert_eq!(r.usage.unwrap().total_tokens, 13);
    assert_eq!(outcomes(&r.attempts), ["ok"]);
    // Progress counts choice 0's characters only.
    assert_eq!(chars.lock().unwrap().last(), Some(&5));
    let sent: Value =
        serde_json::from_slice(&s.received_requests().await.unwrap()[0].body).unwrap();
    assert_eq!(sent["n"], 2);
    assert_eq!(sent["stream"], true);
}

#[tokio::test]
async fn streaming_request_answered_with_plain_json_still_works() {
    let s = server().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion("plain")))
        .mount(&s)
        .await;
    let mut cfg = config(base(&s));
    cfg.stream = true;
    let r = engine(cfg).infer(&request("s")).await.unwrap();
    assert_eq!(r.output, "plain");
}

#[tokio::test]
async fn rate_limited_429_honours_retry_after_then_succeeds() {
    let s = server().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(429)
                .insert_header("retry-after-ms", "300")
                .set_body_json(json!({"error": {"message": "Rate limit reached for requests", "type": "requests", "code": "rate_limit_exceeded"}})),
        )
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&s)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion("after the wait")))
        .with_priority(2)
        .mount(&s)
        .await;
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = events.clone();
    let e = engine(config(base(&s))).with_observer(Arc::new(move |ev: &EngineEvent| {
        sink.lock().unwrap().push(ev.clone());
    }));
    let started = Instant::now();
    let r = e.infer(&request("t")).await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(r.output, "after the wait");
    assert_eq!(outcomes(&r.attempts), ["http_429", "ok"]);
    assert_eq!(r.attempts[0].backoff_ms, Some(300));
    let error = r.attempts[0].error.as_deref().unwrap();
    assert!(error.contains("429"), "{error}");
    assert!(error.contains("Rate limit reached"), "{error}");
    assert_eq!(r.attempts[1].number, 2);
    let events = events.lock().unwrap();
    assert_eq!(
        *events,
        [EngineEvent::Retrying {
            task_id: "t".into(),
            failed_attempt: 1,
            max_attempts: 4,
            delay: Duration::from_millis(300),
            outcome: "http_429".into(),
        }]
    );
}

#[tokio::test]
async fn retry_after_in_seconds_is_honoured() {
    let s = server().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(503).insert_header("retry-after", "1"))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&s)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion("ok")))
        .with_priority(2)
        .mount(&s)
        .await;
    let started = Instant::now();
    let r = engine(config(base(&s))).infer(&request("t")).await.unwrap();
    assert!(started.elapsed() >= Duration::from_secs(1));
    assert_eq!(outcomes(&r.attempts), ["http_503", "ok"]);
    assert_eq!(r.attempts[0].backoff_ms, Some(1000));
}

#[tokio::test]
async fn server_error_twice_then_success() {
    let s = server().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(500).set_body_string("upstream exploded"))
        .up_to_n_times(2)
        .with_priority(1)
        .mount(&s)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion("third time")))
        .with_priority(2)
        .mount(&s)
        .await;
    let r = engine(config(base(&s))).infer(&request("t")).await.unwrap();
    assert_eq!(r.output, "third time");
    assert_eq!(outcomes(&r.attempts), ["http_500", "http_500", "ok"]);
    assert_eq!(
        r.attempts.iter().map(|a| a.number).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    // Full jitter stays under the doubling cap: 5 ms, then 10 ms.
    assert!(r.attempts[0].backoff_ms.unwrap() <= 5);
    assert!(r.attempts[1].backoff_ms.unwrap() <= 10);
    assert!(
        r.attempts[0]
            .error
            .as_deref()
            .unwrap()
            .contains("upstream exploded")
    );
}

#[tokio::test]
async fn server_errors_exhaust_max_attempts() {
    let s = server().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(502))
        .expect(3)
        .mount(&s)
        .await;
    let mut cfg = config(base(&s));
    cfg.retry.max_attempts = 3;
    let e = engine(cfg).infer(&request("t")).await.unwrap_err();
    assert_eq!(outcomes(&e.attempts), ["http_502"; 3]);
    assert!(
        e.message
            .starts_with("HTTP 502 Bad Gateway from http://127.0.0.1:"),
        "{}",
        e.message
    );
    assert!(
        e.message.ends_with("(gave up after 3 attempts)"),
        "{}",
        e.message
    );
    assert_eq!(e.attempts[2].backoff_ms, None);
}

#[tokio::test]
async fn unauthorized_fails_at_once_without_leaking_the_key() {
    let s = server().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(401).set_body_json(json!({"error": {
            "message": format!("Incorrect API key provided: {KEY}. You can find your API key at ..."),
            "type": "invalid_request_error", "code": "invalid_api_key"}})))
        .expect(1)
        .mount(&s)
        .await;
    let result = engine(config(base(&s))).infer(&request("t")).await;
    assert_clean(&result);
    let e = result.unwrap_err();
    assert_eq!(outcomes(&e.attempts), ["http_401"]);
    assert!(
        e.message
            .starts_with("HTTP 401 Unauthorized from http://127.0.0.1:"),
        "{}",
        e.message
    );
    assert!(
        e.message.contains("Incorrect API key provided: <redacted>"),
        "{}",
        e.message
    );
    assert!(e.message.ends_with("(invalid_api_key)"), "{}", e.message);
}

#[tokio::test]
async fn permanent_client_errors_fail_at_once() {
    for (status, body, outcome) in [
        (
            400,
            json!({"error": {"message": "This model's maximum context length is 2048 tokens", "code": "context_length_exceeded"}}),
            "http_400",
        ),
        (
            404,
            json!({"error": {"message": "The model `nope` does not exist", "code": "model_not_found"}}),
            "http_404",
        ),
        (403, json!({"error": "forbidden"}), "http_403"),
        (
            429,
            json!({"error": {"message": "You exceeded your current quota", "type": "insufficient_quota", "code": "insufficient_quota"}}),
            "http_429",
        ),
        (
            500,
            json!({"detail": "Requested tokens (5000) exceed context window of 2048"}),
            "http_500",
        ),
    ] {
        let s = server().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(status).set_body_json(body))
            .expect(1)
            .mount(&s)
            .await;
        let e = engine(config(base(&s)))
            .infer(&request("t"))
            .await
            .unwrap_err();
        assert_eq!(outcomes(&e.attempts), [outcome], "{status}: {}", e.message);
        assert!(!e.message.contains("gave up"), "{}", e.message);
    }
}

#[tokio::test]
async fn request_timeout_is_retried_then_fails() {
    let s = server().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(completion("too late"))
                .set_delay(Duration::from_secs(3)),
        )
        .mount(&s)
        .await;
    let mut cfg = config(base(&s));
    cfg.request_timeout = Duration::from_millis(150);
    cfg.retry.max_attempts = 2;
    let started = Instant::now();
    let e = engine(cfg).infer(&request("t")).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_eq!(outcomes(&e.attempts), ["timeout", "timeout"]);
    assert!(
        e.message.contains("within 150 ms (request_timeout)"),
        "{}",
        e.message
    );
}

#[tokio::test]
async fn malformed_json_fails_at_once() {
    let s = server().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("content-type", "application/json")
                .set_body_string("{\"choices\": [oops]}"),
        )
        .expect(1)
        .mount(&s)
        .await;
    let e = engine(config(base(&s)))
        .infer(&request("t"))
        .await
        .unwrap_err();
    assert_eq!(outcomes(&e.attempts), ["malformed"]);
    assert!(
        e.message
            .starts_with("malformed JSON from http://127.0.0.1:"),
        "{}",
        e.message
    );
    assert!(e.message.contains("{\"choices\": [oops]}"), "{}", e.message);
}

#[tokio::test]
async fn empty_choices_fail_at_once() {
    let s = server().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"id": "x", "choices": []})))
        .expect(1)
        .mount(&s)
        .await;
    let e = engine(config(base(&s)))
        .infer(&request("t"))
        .await
        .unwrap_err();
    assert_eq!(outcomes(&e.attempts), ["empty_choices"]);
    assert!(e.message.ends_with("has no choices"), "{}", e.message);
}

#[tokio::test]
async fn connection_refused_names_the_url_and_os_error_after_retries() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut cfg = config(format!("http://127.0.0.1:{port}/v1"));
    cfg.retry.max_attempts = 3;
    let result = engine(cfg).infer(&request("t")).await;
    assert_clean(&result);
    let e = result.unwrap_err();
    assert_eq!(outcomes(&e.attempts), ["connect"; 3]);
    let want = format!("cannot connect to http://127.0.0.1:{port}/v1/chat/completions: ");
    assert!(e.message.starts_with(&want), "{}", e.message);
    assert!(e.message.contains("Connection refused"), "{}", e.message);
    assert!(
        e.message.ends_with("(gave up after 3 attempts)"),
        "{}",
        e.message
    );
}

/// A raw HTTP/1.1 server: answers each connection with `script`, a list of
/// byte strings written with `pause` between them, then holds the
/// connection open for `hold` (or closes at once).
async fn raw_server(
    script: Vec<Vec<u8>>,
    pause: Duration,
    hold: Duration,
) -> (String, Arc<Mutex<u32>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let count = Arc::new(Mutex::new(0));
    let seen = count.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            *seen.lock().unwrap() += 1;
            let script = script.clone();
            tokio::spawn(async move {
                read_request(&mut socket).await;
                for (i, part) in script.iter().enumerate() {
                    if i > 0 {
                        tokio::time::sleep(pause).await;
                    }
                    if socket.write_all(part).await.is_err() {
                        return;
                    }
                }
                tokio::time::sleep(hold).await;
            });
        }
    });
    (format!("http://{addr}/v1"), count)
}

/// Reads one request (headers and a Content-Length body).
async fn read_request(socket: &mut tokio::net::TcpStream) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let Ok(n) = socket.read(&mut chunk).await else {
            return;
        };
        if n == 0 {
            return;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            if buf.len() >= end + 4 + len {
                return;
            }
        }
    }
}

#[tokio::test]
async fn body_cut_short_is_retried_and_reported() {
    let head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 500\r\nconnection: close\r\n\r\n".to_vec();
    let partial = br#"{"choices":[{"index":0,"message":{"content":"half"#.to_vec();
    let (url, count) = raw_server(vec![head, partial], Duration::ZERO, Duration::ZERO).await;
    let mut cfg = config(url);
    cfg.retry.max_attempts = 2;
    let e = engine(cfg).infer(&request("t")).await.unwrap_err();
    assert_eq!(outcomes(&e.attempts), ["truncated", "truncated"]);
    assert!(e.message.contains("cut short"), "{}", e.message);
    assert_eq!(*count.lock().unwrap(), 2);
}

#[tokio::test]
async fn stalled_stream_hits_the_idle_timeout() {
    let head =
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
            .to_vec();
    let first = format!("data: {}\n\n", chunk(Some("partial"), None));
    let first = format!("{:x}\r\n{first}\r\n", first.len()).into_bytes();
    let (url, _) = raw_server(vec![head, first], Duration::ZERO, Duration::from_secs(10)).await;
    let mut cfg = config(url);
    cfg.stream = true;
    cfg.idle_timeout = Duration::from_millis(200);
    cfg.retry.max_attempts = 2;
    let started = Instant::now();
    let e = engine(cfg).infer(&request("t")).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(outcomes(&e.attempts), ["idle_timeout", "idle_timeout"]);
    assert!(
        e.message.contains("no data for 200 ms (idle_timeout)"),
        "{}",
        e.message
    );
}

#[tokio::test]
async fn stream_closed_before_done_is_truncated() {
    let head =
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n".to_vec();
    let body = format!("data: {}\n\ndata: {{\"choi", chunk(Some("partial"), None)).into_bytes();
    let (url, _) = raw_server(vec![head, body], Duration::from_millis(10), Duration::ZERO).await;
    let mut cfg = config(url);
    cfg.stream = true;
    cfg.retry.max_attempts = 1;
    let e = engine(cfg).infer(&request("t")).await.unwrap_err();
    assert_eq!(outcomes(&e.attempts), ["truncated"]);
    assert!(
        e.message
            .contains("ended before `data: [DONE]` after 7 characters"),
        "{}",
        e.message
    );
}

#[tokio::test]
async fn stream_arriving_in_small_pieces() {
    let head =
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n".to_vec();
    let body = sse_body(&[
        chunk(Some("héllo "), None),
        chunk(Some("there"), Some("stop")),
    ])
    .replace('\n', "\r\n");
    let mut script = vec![head];
    script.extend(body.as_bytes().chunks(7).map(<[u8]>::to_vec));
    let (url, _) = raw_server(script, Duration::from_millis(1), Duration::ZERO).await;
    let mut cfg = config(url);
    cfg.stream = true;
    let r = engine(cfg).infer(&request("t")).await.unwrap();
    assert_eq!(r.output, "héllo there");
    assert_eq!(r.finish_reason, Some(ctx_engine::FinishReason::Stop));
    assert_eq!(r.usage, None);
}

#[tokio::test]
async fn error_event_inside_a_stream_fails_the_task() {
    let s = server().await;
    let body = format!(
        "data: {}\n\ndata: {}\n\n",
        chunk(Some("par"), None),
        json!({"error": {"message": "model crashed", "type": "invalid_request_error"}})
    );
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("content-type", "text/event-stream")
                .set_body_string(body),
        )
        .expect(1)
        .mount(&s)
        .await;
    let mut cfg = config(base(&s));
    cfg.stream = true;
    let e = engine(cfg).infer(&request("t")).await.unwrap_err();
    assert_eq!(outcomes(&e.attempts), ["stream_error"]);
    assert!(e.message.ends_with("model crashed"), "{}", e.message);
}

#[tokio::test]
async fn requests_per_minute_pace_dispatch() {
    let s = server().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion("ok")))
        .mount(&s)
        .await;
    let mut cfg = config(base(&s));
    cfg.requests_per_minute = Some(120); // 2 per second, a burst of 2
    let paced = Arc::new(Mutex::new(Vec::new()));
    let sink = paced.clone();
    let e = engine(cfg).with_observer(Arc::new(move |ev: &EngineEvent| {
        if let EngineEvent::Paced { wait, .. } = ev {
            sink.lock().unwrap().push(*wait);
        }
    }));
    let started = Instant::now();
    for i in 0..4 {
        e.infer(&request(&format!("t{i}"))).await.unwrap();
    }
    // 4 requests from a bucket of 2 refilling at 2/s: not before 1 s,
    // however fast or slow the server is.
    assert!(
        started.elapsed() >= Duration::from_millis(990),
        "{:?}",
        started.elapsed()
    );
    let paced = paced.lock().unwrap();
    assert!(!paced.is_empty());
    assert!(
        paced.iter().all(|w| *w <= Duration::from_millis(500)),
        "{paced:?}"
    );
}

#[tokio::test]
async fn tokens_per_minute_count_prompt_and_max_tokens() {
    let s = server().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion("ok")))
        .mount(&s)
        .await;
    let mut cfg = config(base(&s));
    cfg.tokens_per_minute = Some(1200); // 20 tokens/s, a bucket of 20
    cfg.defaults.max_tokens = Some(8); // 12 prompt + 8 = 20 per request
    let paced = Arc::new(Mutex::new(Vec::new()));
    let sink = paced.clone();
    let e = engine(cfg).with_observer(Arc::new(move |ev: &EngineEvent| {
        if let EngineEvent::Paced { wait, .. } = ev {
            sink.lock().unwrap().push(*wait);
        }
    }));
    let started = Instant::now();
    e.infer(&request("a")).await.unwrap();
    e.infer(&request("b")).await.unwrap();
    // 40 tokens from a bucket of 20 refilling at 20/s: not before 1 s.
    assert!(
        started.elapsed() >= Duration::from_millis(990),
        "{:?}",
        started.elapsed()
    );
    assert!(paced.lock().unwrap().len() <= 1);
    // Without max_tokens only the prompt counts: 12 + 12 tokens from a
    // bucket of 20 need 0.2 s of refill.
    let mut cfg = config(base(&s));
    cfg.tokens_per_minute = Some(1200);
    let e = engine(cfg);
    let started = Instant::now();
    e.infer(&request("c")).await.unwrap();
    e.infer(&request("d")).await.unwrap();
    assert!(
        started.elapsed() >= Duration::from_millis(190),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn tokens_per_minute_reserve_max_completion_tokens_from_params() {
    let s = server().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion("ok")))
        .expect(2)
        .mount(&s)
        .await;
    let mut cfg = config(base(&s));
    cfg.tokens_per_minute = Some(1200); // 20 tokens/s, a bucket of 20
    cfg.defaults.max_tokens = Some(1); // `--max-tokens 1`, overridden below
    let e = engine(cfg);
    let reasoning = |id: &str| {
        let mut req = request(id);
        // 12 prompt + 28 = 40 per request, twice the bucket.
        req.params
            .extra
            .insert("max_completion_tokens".into(), json!(28));
        req
    };
    let started = Instant::now();
    e.infer(&reasoning("a")).await.unwrap();
    e.infer(&reasoning("b")).await.unwrap();
    // The first request takes the full bucket and owes 20; the second
    // waits for 20 of debt plus a full bucket: 2 s at 20/s. Reserving
    // `--max-tokens` (12 + 1 = 13 each) would have waited 0.3 s.
    assert!(
        started.elapsed() >= Duration::from_millis(1990),
        "{:?}",
        started.elapsed()
    );
    for received in s.received_requests().await.unwrap() {
        let sent: Value = serde_json::from_slice(&received.body).unwrap();
        assert_eq!(sent["max_completion_tokens"], 28);
        assert!(sent.get("max_tokens").is_none(), "{sent}");
    }
}

#[tokio::test]
async fn concurrent_tasks_share_one_engine() {
    let s = server().await;
    Mock::given(method("POST"))
        .respond_with(move |req: &Request| {
            let body: Value = serde_json::from_slice(&req.body).unwrap();
            let prompt = body["messages"][0]["content"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            ResponseTemplate::new(200)
                .set_body_json(completion(&format!("echo: {prompt}")))
                .set_delay(Duration::from_millis(50))
        })
        .expect(8)
        .mount(&s)
        .await;
    let e = Arc::new(engine(config(base(&s))));
    let mut handles = Vec::new();
    for i in 0..8 {
        let e = e.clone();
        handles.push(tokio::spawn(async move {
            let mut req = request(&format!("t{i}"));
            req.prompt = format!("prompt {i}");
            e.infer(&req).await.unwrap().output
        }));
    }
    for (i, h) in handles.into_iter().enumerate() {
        assert_eq!(h.await.unwrap(), format!("echo: prompt {i}"));
    }
}

#[tokio::test]
async fn bad_configuration_is_refused() {
    let mut cfg = config("ftp://example/v1".into());
    assert!(
        OpenAiEngine::new(cfg.clone())
            .unwrap_err()
            .to_string()
            .contains("not http or https")
    );
    cfg.base_url = "http://127.0.0.1:1/v1".into();
    cfg.retry.max_attempts = 0;
    let err = OpenAiEngine::new(cfg.clone()).unwrap_err();
    assert_eq!(err.to_string(), "retry.max_attempts: must be at least 1");
    assert!(matches!(
        err,
        ctx_engine_openai::ConfigError::Setting {
            field: ctx_engine_openai::Setting::MaxAttempts,
            ..
        }
    ));
    cfg.retry.max_attempts = 1;
    cfg.api_key = ApiKey::new("sk-line\nbreak");
    assert!(
        OpenAiEngine::new(cfg.clone())
            .unwrap_err()
            .to_string()
            .contains("API key")
    );
    cfg.api_key = None;
    cfg.tokens_per_minute = Some(0);
    assert_eq!(
        OpenAiEngine::new(cfg).unwrap_err().to_string(),
        "tokens_per_minute: must be at least 1 (leave it out for no limit)"
    );
}

#[tokio::test]
async fn dropping_the_future_closes_the_connection() {
    // A server that never answers, and reports when the client hangs up.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let (closed_tx, closed_rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        read_request(&mut socket).await;
        let mut byte = [0u8; 1];
        // Blocks until the client closes its end.
        let n = socket.read(&mut byte).await.unwrap_or(0);
        let _ = closed_tx.send(n);
    });
    let e = engine(config(url));
    let req = request("t");
    let call = tokio::time::timeout(Duration::from_millis(200), e.infer(&req)).await;
    assert!(call.is_err(), "the server never answers");
    // The timed-out future was dropped: the request is aborted.
    let n = tokio::time::timeout(Duration::from_secs(5), closed_rx)
        .await
        .expect("connection closed after the drop")
        .unwrap();
    assert_eq!(n, 0);
}

/// A server that answers with a stream of content chunks that never ends
/// (a chunk every millisecond, so the idle timeout never fires). Reports
/// when the client hangs up.
async fn endless_stream_server() -> (String, tokio::sync::oneshot::Receiver<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let (closed_tx, closed_rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        read_request(&mut socket).await;
        let head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
        if socket.write_all(head).await.is_err() {
            return;
        }
        let content = "y".repeat(4000);
        let event = format!(
            "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{content}\"}}}}]}}\n\n"
        );
        let chunk = format!("{:x}\r\n{event}\r\n", event.len());
        loop {
            if socket.write_all(chunk.as_bytes()).await.is_err() {
                let _ = closed_tx.send(());
                return;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    });
    (url, closed_rx)
}

#[tokio::test]
async fn an_endless_stream_is_cut_at_the_output_bound() {
    // Before the bound, this grew memory until the allocator aborted: the
    // idle timeout never fires while chunks keep arriving.
    let (url, closed) = endless_stream_server().await;
    let mut cfg = config(url);
    cfg.stream = true;
    cfg.idle_timeout = Duration::from_millis(500);
    let mut req = request("t");
    req.max_output_bytes = 1 << 20;
    let started = Instant::now();
    let e = engine(cfg).infer(&req).await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(20));
    // Not retried: the same request would stream the same flood.
    assert_eq!(outcomes(&e.attempts), ["output_too_large"]);
    assert!(
        e.message.ends_with(
            "output exceeded the limit of 1048576 bytes (max_output_bytes); the stream was dropped"
        ),
        "{}",
        e.message
    );
    // The connection was closed, so the server stops too.
    tokio::time::timeout(Duration::from_secs(5), closed)
        .await
        .expect("the client hung up")
        .unwrap();
}

#[tokio::test]
async fn a_whole_answer_past_the_output_bound_fails() {
    let s = server().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion(&"z".repeat(2000))))
        .mount(&s)
        .await;
    let mut req = request("t");
    req.max_output_bytes = 1000;
    let e = engine(config(base(&s))).infer(&req).await.unwrap_err();
    assert_eq!(outcomes(&e.attempts), ["output_too_large"]);
    assert_eq!(
        e.message,
        "output exceeded the limit of 1000 bytes (max_output_bytes)"
    );
    req.max_output_bytes = 2000;
    let r = engine(config(base(&s))).infer(&req).await.unwrap();
    assert_eq!(r.output.len(), 2000);
    // A body far past the bound is not read to its end.
    let big = "w".repeat(300_000);
    let s = server().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion(&big)))
        .mount(&s)
        .await;
    req.max_output_bytes = 1000;
    let e = engine(config(base(&s))).infer(&req).await.unwrap_err();
    assert_eq!(outcomes(&e.attempts), ["output_too_large"]);
    assert!(
        e.message.contains("is larger than 66786 bytes"),
        "{}",
        e.message
    );
}

fn schema_request(id: &str) -> InferenceRequest {
    let mut r = request(id);
    r.response_schema = Some(json!({"type": "object", "required": ["score"]}));
    r
}

/// Answers 400 to a body with `response_format`, else a completion.
struct RejectsResponseFormat;

impl wiremock::Respond for RejectsResponseFormat {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        if body.get("response_format").is_some() {
            ResponseTemplate::new(400).set_body_json(json!({"error": {
                "message": "Unrecognized request argument supplied: response_format",
                "type": "invalid_request_error"}}))
        } else {
            ResponseTemplate::new(200).set_body_json(completion("{\"score\": 1}"))
        }
    }
}

#[tokio::test]
async fn a_schema_is_sent_as_strict_response_format() {
    let s = server().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion("{\"score\": 1}")))
        .mount(&s)
        .await;
    let e = engine(config(base(&s)));
    e.infer(&schema_request("t")).await.unwrap();
    // Without a schema, none is sent.
    e.infer(&request("u")).await.unwrap();
    let received = s.received_requests().await.unwrap();
    let body: Value = serde_json::from_slice(&received[0].body).unwrap();
    assert_eq!(
        body["response_format"],
        json!({"type": "json_schema", "json_schema": {"name": "task_output", "strict": true,
               "schema": {"type": "object", "required": ["score"]}}})
    );
    let body: Value = serde_json::from_slice(&received[1].body).unwrap();
    assert!(body.get("response_format").is_none());

    // `never` leaves it out; a plan's own response_format wins.
    let e = engine(OpenAiConfig {
        structured_output: ctx_engine_openai::StructuredOutput::Never,
        ..config(base(&s))
    });
    e.infer(&schema_request("v")).await.unwrap();
    let mut own = schema_request("w");
    own.params
        .extra
        .insert("response_format".into(), json!({"type": "json_object"}));
    engine(config(base(&s))).infer(&own).await.unwrap();
    let received = s.received_requests().await.unwrap();
    let never: Value = serde_json::from_slice(&received[2].body).unwrap();
    assert!(never.get("response_format").is_none());
    let own: Value = serde_json::from_slice(&received[3].body).unwrap();
    assert_eq!(own["response_format"], json!({"type": "json_object"}));
}

#[tokio::test]
async fn a_rejected_response_format_falls_back_once_for_the_run_with_one_warning() {
    let s = server().await;
    Mock::given(method("POST"))
        .respond_with(RejectsResponseFormat)
        .mount(&s)
        .await;
    let events: Arc<Mutex<Vec<EngineEvent>>> = Arc::default();
    let seen = Arc::clone(&events);
    let e = engine(config(base(&s))).with_observer(Arc::new(move |ev: &EngineEvent| {
        seen.lock().unwrap().push(ev.clone())
    }));
    let first = e.infer(&schema_request("a")).await.unwrap();
    assert_eq!(first.output, "{\"score\": 1}");
    assert_eq!(outcomes(&first.attempts), ["http_400", "ok"]);
    assert_eq!(first.attempts[1].number, 2);
    let second = e.infer(&schema_request("b")).await.unwrap();
    assert_eq!(outcomes(&second.attempts), ["ok"]);
    // Three requests: the rejected one, its retry, and b without the field.
    assert_eq!(s.received_requests().await.unwrap().len(), 3);
    let warnings: Vec<EngineEvent> = events
        .lock()
        .unwrap()
        .iter()
        .filter(|e| matches!(e, EngineEvent::StructuredOutputRejected { .. }))
        .cloned()
        .collect();
    assert_eq!(warnings.len(), 1);

    // `always` does not fall back: the task fails with the server's word.
    let e = engine(OpenAiConfig {
        structured_output: ctx_engine_openai::StructuredOutput::Always,
        ..config(base(&s))
    });
    let err = e.infer(&schema_request("c")).await.unwrap_err();
    assert!(err.message.contains("response_format"), "{}", err.message);
}

/// Answers 400 to a body with `response_format`, else 500.
struct RejectsResponseFormatThenFails;

impl wiremock::Respond for RejectsResponseFormatThenFails {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        if body.get("response_format").is_some() {
            RejectsResponseFormat.respond(request)
        } else {
            ResponseTemplate::new(500).set_body_json(json!({"error": {"message": "down"}}))
        }
    }
}

/// The request sent again without `response_format` is an attempt of the
/// same call: `--max-attempts` counts it, so a call makes at most that
/// many requests (each may be billed, and `--max-cost` reserves that
/// many). Before, the fallback started a fresh count: 1 + 3 requests.
#[tokio::test]
async fn the_structured_output_fallback_counts_within_max_attempts() {
    let s = server().await;
    Mock::given(method("POST"))
        .respond_with(RejectsResponseFormatThenFails)
        .mount(&s)
        .await;
    let mut cfg = config(base(&s));
    cfg.retry.max_attempts = 3;
    let err = engine(cfg).infer(&schema_request("a")).await.unwrap_err();
    assert_eq!(
        outcomes(&err.attempts),
        ["http_400", "http_500", "http_500"]
    );
    let numbers: Vec<u32> = err.attempts.iter().map(|a| a.number).collect();
    assert_eq!(numbers, [1, 2, 3]);
    assert_eq!(s.received_requests().await.unwrap().len(), 3);

    // One attempt allowed: the rejected request was it.
    let s = server().await;
    Mock::given(method("POST"))
        .respond_with(RejectsResponseFormat)
        .mount(&s)
        .await;
    let mut cfg = config(base(&s));
    cfg.retry.max_attempts = 1;
    let err = engine(cfg).infer(&schema_request("b")).await.unwrap_err();
    assert_eq!(outcomes(&err.attempts), ["http_400"]);
    assert_eq!(s.received_requests().await.unwrap().len(), 1);
}

/// A `usage` with only `total_tokens` is recorded at the worst case the
/// request allows (as much completion as `n` choices of the cap sent),
/// flagged partial; before, it was 0 prompt and 0 completion tokens,
/// which priced the call at $0. The server is ctx-test-support's honest
/// one (the budget property's), counting words as tokens.
#[tokio::test]
async fn a_usage_with_only_total_tokens_is_its_worst_case_and_flagged() {
    use ctx_test_support::openai_server::{Behaviour, HonestServer, UsageShape};
    let s = HonestServer::start(Behaviour {
        usage: UsageShape::TotalOnly,
        ..Behaviour::honest(Arc::new(|t: &str| t.split_whitespace().count() as u64))
    })
    .await;
    let mut req = request("t");
    req.params.max_tokens = Some(50);
    req.params.extra.insert("n".into(), json!(3));
    req.params
        .extra
        .insert("max_completion_tokens".into(), json!(100));
    let r = engine(config(s.base_url.clone()))
        .infer(&req)
        .await
        .unwrap();
    let usage = r.usage.unwrap();
    // The server generated 3 × 100 tokens (it honours the cap it was
    // sent: max_completion_tokens, not max_tokens) and read a prompt of
    // 10 words + 3 + 3 framing: total 316, of which 300 completion.
    assert_eq!(
        (
            usage.prompt_tokens,
            usage.completion_tokens,
            usage.total_tokens,
            usage.partial
        ),
        (16, 300, 316, true)
    );
    assert_eq!(r.output.split_whitespace().count(), 100);
    assert_eq!(s.requests(), 1);
}

/// Breakpoints for an Anthropic model go into the request as LiteLLM takes
/// them: the system message and the user message as content parts, each
/// part before a breakpoint marked `cache_control: {type: ephemeral}`, the
/// parts joined giving the prompt back. A model breakpoints are not for
/// gets the plain strings.
#[tokio::test]
async fn cache_breakpoints_become_content_parts_for_anthropic_models() {
    use ctx_model::prompt_cache::BreakpointModels;
    let s = server().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion("ok")))
        .expect(2)
        .mount(&s)
        .await;
    let mut req = request("t1");
    req.params.system = Some("You are terse.".into());
    let blocks_end = req.prompt.len() - "Write a haiku.".len();
    req.cache_breakpoints = Some(ctx_engine::CacheBreakpoints {
        models: BreakpointModels::Anthropic,
        system: true,
        prompt_offsets: vec![blocks_end],
    });
    req.params.model = Some("anthropic/claude-sonnet-4-5".into());
    engine(config(base(&s))).infer(&req).await.unwrap();
    req.params.model = Some("gpt-4o-mini".into());
    engine(config(base(&s))).infer(&req).await.unwrap();

    let received = s.received_requests().await.unwrap();
    let body = |i: usize| -> Value { serde_json::from_slice(&received[i].body).unwrap() };
    let ephemeral = json!({"type": "ephemeral"});
    assert_eq!(
        body(0)["messages"],
        json!([
            {"role": "system", "content": [
                {"type": "text", "text": "You are terse.", "cache_control": ephemeral}]},
            {"role": "user", "content": [
                {"type": "text", "text": &req.prompt[..blocks_end], "cache_control": ephemeral},
                {"type": "text", "text": "Write a haiku."}]}
        ])
    );
    assert_eq!(
        body(1)["messages"],
        json!([
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": req.prompt}
        ])
    );
}

/// With `--stream`, the warm-up signal fires at the answer's first chunk,
/// while the rest is still coming (here half a second later); without
/// streaming the engine leaves it to its caller, who fires it when the
/// response arrives.
#[tokio::test]
async fn streaming_fires_the_first_token_signal_at_the_first_chunk() {
    let head =
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
            .to_vec();
    let piece = |text: String| format!("{:x}\r\n{text}\r\n", text.len()).into_bytes();
    let first = piece(format!("data: {}\n\n", chunk(Some("Hel"), None)));
    let rest = piece(format!(
        "data: {}\n\ndata: [DONE]\n\n",
        chunk(Some("lo"), Some("stop"))
    ));
    let end = b"0\r\n\r\n".to_vec();
    let (url, _) = raw_server(
        vec![head, first, rest, end],
        Duration::from_millis(500),
        Duration::ZERO,
    )
    .await;
    let mut cfg = config(url);
    cfg.stream = true;
    let fired_at = Arc::new(Mutex::new(None));
    let at = fired_at.clone();
    let signal = ctx_engine::FirstToken::new(move || {
        at.lock().unwrap().get_or_insert_with(Instant::now);
    });
    let e = engine(cfg);
    let request = request("w");
    let r = e.infer_with_first_token(&request, &signal).await.unwrap();
    let returned = Instant::now();
    assert_eq!(r.output, "Hello");
    let fired = fired_at.lock().unwrap().expect("the signal fired");
    assert!(
        returned.duration_since(fired) >= Duration::from_millis(300),
        "fired {:?} before the answer ended",
        returned.duration_since(fired)
    );

    let s = server().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion("whole")))
        .mount(&s)
        .await;
    let whole = ctx_engine::FirstToken::new(|| {});
    let r = engine(config(base(&s)))
        .infer_with_first_token(&request, &whole)
        .await
        .unwrap();
    assert_eq!(r.output, "whole");
    assert!(!whole.has_fired(), "left to the caller");
}

/// A server with no flex capacity for the first `busy` flex requests: it
/// answers them "429 resource unavailable", as OpenAI does, and every
/// answer it gives names the tier it billed (`service_tier`).
fn flex_server(busy: usize, seen: Arc<Mutex<Vec<Option<String>>>>) -> impl wiremock::Respond {
    let flex_seen = Arc::new(Mutex::new(0usize));
    move |req: &Request| {
        let body: Value = serde_json::from_slice(&req.body).unwrap();
        let tier = body["service_tier"].as_str().map(str::to_string);
        seen.lock().unwrap().push(tier.clone());
        if tier.as_deref() == Some("flex") {
            let mut n = flex_seen.lock().unwrap();
            *n += 1;
            if *n <= busy {
                return ResponseTemplate::new(429).set_body_json(json!({"error": {
                    "message": "Resource unavailable. Please try again later.",
                    "type": "rate_limit_error", "code": "resource_unavailable"}}));
            }
        }
        let mut answer = completion("ok");
        answer["service_tier"] = json!(tier.as_deref().unwrap_or("default"));
        ResponseTemplate::new(200).set_body_json(answer)
    }
}

fn flex_request() -> InferenceRequest {
    let mut r = request("t");
    r.params.extra.insert("service_tier".into(), json!("flex"));
    r
}

#[tokio::test]
async fn a_flex_call_records_the_tier_the_server_billed() {
    let s = server().await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    Mock::given(method("POST"))
        .respond_with(flex_server(0, Arc::clone(&seen)))
        .mount(&s)
        .await;
    let r = engine(config(base(&s)))
        .infer(&flex_request())
        .await
        .unwrap();
    assert_eq!(
        r.usage.unwrap().service_tier,
        Some(ctx_model::ServiceTier::Flex)
    );
    // `--service-tier` goes to a task that names none; a task's own wins.
    let mut cfg = config(base(&s));
    cfg.defaults.service_tier = Some("flex".into());
    let r = engine(cfg.clone()).infer(&request("t")).await.unwrap();
    assert_eq!(
        r.usage.unwrap().service_tier,
        Some(ctx_model::ServiceTier::Flex)
    );
    let mut own = request("t");
    own.params
        .extra
        .insert("service_tier".into(), json!("default"));
    engine(cfg).infer(&own).await.unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        [
            Some("flex".into()),
            Some("flex".into()),
            Some("default".into())
        ]
    );
}

#[tokio::test]
async fn no_flex_capacity_sends_the_last_attempt_at_the_standard_tier() {
    let s = server().await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    Mock::given(method("POST"))
        .respond_with(flex_server(usize::MAX, Arc::clone(&seen)))
        .mount(&s)
        .await;
    let events = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&events);
    let observer: ctx_engine_openai::Observer =
        Arc::new(move |e: &EngineEvent| log.lock().unwrap().push(e.clone()));
    let r = engine(config(base(&s)))
        .with_observer(observer)
        .infer(&flex_request())
        .await
        .unwrap();
    assert_eq!(
        outcomes(&r.attempts),
        ["http_429", "http_429", "http_429", "ok"]
    );
    assert_eq!(
        r.usage.unwrap().service_tier,
        Some(ctx_model::ServiceTier::Default),
        "billed at the standard tier"
    );
    let tiers = seen.lock().unwrap().clone();
    assert_eq!(
        tiers[..3],
        [
            Some("flex".into()),
            Some("flex".into()),
            Some("flex".into())
        ]
    );
    assert_eq!(tiers[3].as_deref(), Some("default"));
    assert!(events.lock().unwrap().contains(&EngineEvent::FlexFallback {
        task_id: "t".into(),
        attempt: 4
    }));
    // Without the fallback every attempt stays at flex, and the call fails.
    let mut cfg = config(base(&s));
    cfg.flex_fallback = ctx_engine_openai::FlexFallback::None;
    let e = engine(cfg).infer(&flex_request()).await.unwrap_err();
    assert_eq!(e.attempts.len(), 4);
    assert!(e.message.contains("Resource unavailable"), "{}", e.message);
    assert!(
        seen.lock().unwrap()[4..]
            .iter()
            .all(|t| t.as_deref() == Some("flex"))
    );
}

#[tokio::test]
async fn a_429_of_another_kind_is_not_a_flex_fallback() {
    let s = server().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(429)
                .set_body_json(json!({"error": {"message": "Rate limit reached"}})),
        )
        .mount(&s)
        .await;
    let e = engine(config(base(&s)))
        .infer(&flex_request())
        .await
        .unwrap_err();
    assert_eq!(e.attempts.len(), 4);
    let requests = s.received_requests().await.unwrap();
    let tiers: Vec<Value> = requests
        .iter()
        .map(|r| serde_json::from_slice::<Value>(&r.body).unwrap()["service_tier"].clone())
        .collect();
    assert_eq!(tiers, vec![json!("flex"); 4]);
}
