//! The fake collector of `tests/tracing.rs`: one tiny HTTP/1.1 server that
//! is both the OpenAI-compatible endpoint a traced run calls and the OTLP
//! collector it exports to, keeping every byte it received, and the
//! decoding of what it received with the OTLP protobuf definitions
//! (opentelemetry-proto), so the tests check the wire format too.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::KeyValue;
pub use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
pub use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;

/// One HTTP request the server received.
#[derive(Debug, Clone)]
pub struct Seen {
    pub path: String,
    pub headers: HashMap<String, String>,
    /// The whole request as received: request line, headers, body.
    pub raw: Vec<u8>,
    pub body: Vec<u8>,
}

/// A tiny HTTP/1.1 server that is both an OpenAI-compatible endpoint
/// (`/v1/chat/completions`, answering `ok`) and an OTLP collector
/// (`/v1/traces`, `/v1/metrics`, answering an empty success), or, `mute`,
/// one that reads requests and never answers.
pub struct Server {
    pub url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Server {
    pub fn start(mute: bool) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let log = Arc::clone(&seen);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let log = Arc::clone(&log);
                std::thread::spawn(move || serve(stream, &log, mute));
            }
        });
        Server { url, seen }
    }

    pub fn seen(&self, path: &str) -> Vec<Seen> {
        let seen = self.seen.lock().unwrap();
        seen.iter().filter(|s| s.path == path).cloned().collect()
    }

    /// Every request to `path`, decoded as the OTLP message `M`.
    fn decoded<M: Message + Default>(&self, path: &str) -> Vec<M> {
        self.seen(path)
            .iter()
            .map(|s| M::decode(s.body.as_slice()).unwrap())
            .collect()
    }

    /// Every span exported to `/v1/traces` so far.
    pub fn spans(&self) -> Vec<Span> {
        self.decoded::<ExportTraceServiceRequest>("/v1/traces")
            .into_iter()
            .flat_map(|r| r.resource_spans)
            .flat_map(|r| r.scope_spans)
            .flat_map(|s| s.spans)
            .collect()
    }

    /// The names of the metrics exported to `/v1/metrics` so far.
    pub fn metric_names(&self) -> Vec<String> {
        self.decoded::<ExportMetricsServiceRequest>("/v1/metrics")
            .into_iter()
            .flat_map(|r| r.resource_metrics)
            .flat_map(|r| r.scope_metrics)
            .flat_map(|s| s.metrics)
            .map(|m| m.name)
            .collect()
    }

    /// Forgets what was received.
    pub fn clear(&self) {
        self.seen.lock().unwrap().clear();
    }
}

fn serve(stream: TcpStream, log: &Mutex<Vec<Seen>>, mute: bool) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut out = stream;
    loop {
        let mut raw = Vec::new();
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        raw.extend_from_slice(line.as_bytes());
        let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
        let mut headers = HashMap::new();
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            raw.extend_from_slice(h.as_bytes());
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
            }
        }
        let len: usize = headers
            .get("content-length")
            .and_then(|l| l.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0; len];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        raw.extend_from_slice(&body);
        let streamed = serde_json::from_slice::<serde_json::Value>(&body)
            .is_ok_and(|b| b["stream"] == serde_json::Value::Bool(true));
        log.lock().unwrap().push(Seen {
            path: path.clone(),
            headers,
            raw,
            body,
        });
        if mute {
            std::thread::sleep(Duration::from_secs(600));
            return;
        }
        let (kind, answer) = if path == "/v1/chat/completions" && streamed {
            ("text/event-stream", STREAMED_ANSWER.as_bytes().to_vec())
        } else if path == "/v1/chat/completions" {
            let a = r#"{"id":"chatcmpl-1","object":"chat.completion","model":"served-model","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}}"#;
            ("application/json", a.as_bytes().to_vec())
        } else {
            ("application/x-protobuf", Vec::new())
        };
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: {kind}\r\ncontent-length: {}\r\n\r\n",
            answer.len()
        );
        if out.write_all(head.as_bytes()).is_err() || out.write_all(&answer).is_err() {
            return;
        }
    }
}

/// The `--stream` answer: `ok` in two chunks, then usage, each chunk
/// repeating the response id.
const STREAMED_ANSWER: &str = concat!(
    "data: {\"id\":\"chatcmpl-s7\",\"model\":\"served-model\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"o\"}}]}\n\n",
    "data: {\"id\":\"chatcmpl-s7\",\"model\":\"served-model\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"k\"},\"finish_reason\":\"stop\"}]}\n\n",
    "data: {\"id\":\"chatcmpl-s7\",\"model\":\"served-model\",\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":3,\"total_tokens\":15}}\n\n",
    "data: [DONE]\n\n",
);

pub fn attr<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a AnyValue> {
    attrs
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| v.value.as_ref())
}

pub fn str_attr<'a>(span: &'a Span, key: &str) -> Option<&'a str> {
    match attr(&span.attributes, key)? {
        AnyValue::StringValue(s) => Some(s),
        _ => None,
    }
}

pub fn int_attr(span: &Span, key: &str) -> Option<i64> {
    match attr(&span.attributes, key)? {
        AnyValue::IntValue(n) => Some(*n),
        _ => None,
    }
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
