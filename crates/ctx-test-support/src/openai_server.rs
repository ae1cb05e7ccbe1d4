//! An OpenAI-compatible chat-completions server on 127.0.0.1 that bills
//! honestly, for tests that drive the real OpenAI engine
//! (`ctx-engine-openai`'s HTTP tests, the budget property of `ctx run
//! --max-cost`).
//!
//! "Honestly" means what a real provider does with the request ctx sends:
//! it generates up to the cap the request carries (`max_completion_tokens`,
//! else `max_tokens`) for each of the completions it asks for (`n`,
//! `best_of`), and its `usage` counts every one of them, plus the prompt
//! as it read it: every message's content and a framing of 3 tokens per
//! message and 3 for the reply (OpenAI's own counting). It always writes
//! the whole cap (the worst case a budget must cover). It can report
//! `usage` in full, with `total_tokens` only, or not at all, and can
//! reject `response_format` as some servers do.
//!
//! Service tiers as OpenAI's chat completions have them: every answer
//! names the tier it billed (`service_tier`: the request's, `default`
//! when it named none), and a server without flex capacity
//! ([`Behaviour::flex_busy`]) answers a flex request "429 Resource
//! unavailable" (`code: resource_unavailable`), billing nothing.
//!
//! A plain tokio TCP server (one request per connection, `Connection:
//! close`), so the crate needs no HTTP framework.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How the server reports `usage`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsageShape {
    /// `prompt_tokens`, `completion_tokens` and `total_tokens`.
    Full,
    /// `total_tokens` alone.
    TotalOnly,
    /// No `usage` at all.
    Absent,
}

/// A token counter: the server counts with the tokenizer the test's plan
/// uses (the crate does not depend on ctx-tokens).
pub type Count = Arc<dyn Fn(&str) -> u64 + Send + Sync>;

/// What the server does.
#[derive(Clone)]
pub struct Behaviour {
    /// Counts tokens.
    pub count: Count,
    /// How `usage` is reported.
    pub usage: UsageShape,
    /// Answer 400 naming `response_format` to a request that carries it.
    pub rejects_response_format: bool,
    /// How many flex requests find no flex capacity (answered 429
    /// resource unavailable) before flex requests are served.
    pub flex_busy: usize,
}

/// What the server billed for one request it answered: the model asked
/// for, prompt tokens read and completion tokens generated (every
/// completion). A rejected request bills nothing here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bill {
    /// `model` of the request.
    pub model: String,
    /// Prompt tokens, framing included.
    pub prompt_tokens: u64,
    /// Completion tokens over every completion generated.
    pub completion_tokens: u64,
    /// The tier it billed at (`default` for a request that named none).
    pub service_tier: String,
}

/// A running server; it stops with the runtime.
pub struct HonestServer {
    /// `http://127.0.0.1:PORT/v1`, the engine's base URL.
    pub base_url: String,
    requests: Arc<AtomicUsize>,
    bills: Arc<Mutex<Vec<Bill>>>,
}

impl HonestServer {
    /// Starts the server on the current tokio runtime.
    pub async fn start(behaviour: Behaviour) -> HonestServer {
        HonestServer::start_slow(behaviour, std::time::Duration::ZERO).await
    }

    /// [`start`](Self::start), answering each request `delay` after it
    /// was read: a call in flight that long, for tests that kill its
    /// client mid-call. The request is billed when it is read, as a
    /// provider bills a generation its client stopped waiting for.
    pub async fn start_slow(behaviour: Behaviour, delay: std::time::Duration) -> HonestServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let requests = Arc::new(AtomicUsize::new(0));
        let bills: Arc<Mutex<Vec<Bill>>> = Arc::default();
        let seen = Arc::clone(&requests);
        let billed = Arc::clone(&bills);
        let flex_refused = Arc::new(AtomicUsize::new(0));
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                seen.fetch_add(1, Ordering::Relaxed);
                let behaviour = behaviour.clone();
                let billed = Arc::clone(&billed);
                let flex_refused = Arc::clone(&flex_refused);
                tokio::spawn(async move {
                    serve(stream, &behaviour, &billed, &flex_refused, delay).await
                });
            }
        });
        HonestServer {
            base_url: format!("http://{addr}/v1"),
            requests,
            bills,
        }
    }

    /// Every request billed so far.
    pub fn bills(&self) -> Vec<Bill> {
        self.bills.lock().map(|b| b.clone()).unwrap_or_default()
    }

    /// Requests received so far.
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::Relaxed)
    }
}

async fn serve(
    mut stream: TcpStream,
    behaviour: &Behaviour,
    bills: &Mutex<Vec<Bill>>,
    flex_refused: &AtomicUsize,
    delay: std::time::Duration,
) {
    let Some(body) = read_request(&mut stream).await else {
        return;
    };
    let (status, answer, bill) = match serde_json::from_slice::<Value>(&body) {
        Ok(request) if no_flex_capacity(&request, behaviour, flex_refused) => (
            429,
            json!({"error": {"message": "Resource unavailable. Please try again later.",
                             "type": "rate_limit_error", "code": "resource_unavailable"}}),
            None,
        ),
        Ok(request) => respond(&request, behaviour),
        Err(e) => (
            400,
            json!({"error": {"message": format!("bad JSON: {e}")}}),
            None,
        ),
    };
    if let (Some(bill), Ok(mut bills)) = (bill, bills.lock()) {
        bills.push(bill);
    }
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let text = answer.to_string();
    let head = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        match status {
            200 => "OK",
            429 => "Too Many Requests",
            _ => "Bad Request",
        },
        text.len()
    );
    let _ = stream.write_all(head.as_bytes()).await;
    let _ = stream.write_all(text.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// The body of one HTTP/1.1 request (read by its `Content-Length`).
async fn read_request(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let mut data = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&data[..end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            while data.len() < end + 4 + length {
                let n = stream.read(&mut buf).await.ok()?;
                if n == 0 {
                    return None;
                }
                data.extend_from_slice(&buf[..n]);
            }
            return Some(data[end + 4..end + 4 + length].to_vec());
        }
        let n = stream.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        data.extend_from_slice(&buf[..n]);
    }
}

/// Whether `request` asks for flex while the server has none left to
/// sell (the first [`Behaviour::flex_busy`] flex requests).
fn no_flex_capacity(request: &Value, b: &Behaviour, refused: &AtomicUsize) -> bool {
    request["service_tier"].as_str() == Some("flex")
        && refused
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < b.flex_busy).then_some(n + 1)
            })
            .is_ok()
}

fn number(v: Option<&Value>) -> Option<u64> {
    v.and_then(|v| v.as_u64().or_else(|| v.as_f64().map(|f| f.ceil() as u64)))
}

/// The status and body answering `request`, and what it billed.
fn respond(request: &Value, b: &Behaviour) -> (u16, Value, Option<Bill>) {
    if b.rejects_response_format && request.get("response_format").is_some() {
        return (
            400,
            json!({"error": {"message": "Unrecognized request argument supplied: response_format",
                             "type": "invalid_request_error"}}),
            None,
        );
    }
    let count = |s: &str| (b.count)(s);
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let prompt: u64 = messages
        .iter()
        .map(|m| count(m["content"].as_str().unwrap_or("")) + 3)
        .sum::<u64>()
        + 3;
    let cap = number(request.get("max_completion_tokens"))
        .or_else(|| number(request.get("max_tokens")))
        .unwrap_or(256);
    let generated = [number(request.get("n")), number(request.get("best_of"))]
        .into_iter()
        .flatten()
        .max()
        .unwrap_or(1)
        .max(1);
    let text = answer_of(cap, &count);
    let completion = count(&text) * generated;
    let choices: Vec<Value> = (0..number(request.get("n")).unwrap_or(1).max(1))
        .map(|i| json!({"index": i, "message": {"role": "assistant", "content": text}, "finish_reason": "length"}))
        .collect();
    let tier = request["service_tier"]
        .as_str()
        .unwrap_or("default")
        .to_string();
    let mut body = json!({"id": "c", "object": "chat.completion", "model": request["model"],
                          "service_tier": tier, "choices": choices});
    match b.usage {
        UsageShape::Full => {
            body["usage"] = json!({"prompt_tokens": prompt, "completion_tokens": completion,
                                   "total_tokens": prompt + completion});
        }
        UsageShape::TotalOnly => body["usage"] = json!({"total_tokens": prompt + completion}),
        UsageShape::Absent => {}
    }
    let bill = Bill {
        model: request["model"].as_str().unwrap_or("").to_string(),
        prompt_tokens: prompt,
        completion_tokens: completion,
        service_tier: tier,
    };
    (200, body, Some(bill))
}

/// The longest answer of repeated words within `cap` tokens.
fn answer_of(cap: u64, count: &dyn Fn(&str) -> u64) -> String {
    let mut words = cap as usize;
    loop {
        let text = " yes".repeat(words);
        if count(&text) <= cap || words == 0 {
            return text;
        }
        words -= 1;
    }
}
