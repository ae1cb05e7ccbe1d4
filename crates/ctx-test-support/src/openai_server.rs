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
//! Batches: the Files and Batches API ([`crate::openai_batches`]), whose
//! requests are answered and billed by the same responder at the batch
//! tier, on a clock and with knobs the test controls.
//!
//! A plain tokio TCP server (one request per connection, `Connection:
//! close`), so the crate needs no HTTP framework.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::openai_batches::{Desk, Reply, Responder};
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
    /// Answers that open with a text, by prompt: a request whose messages
    /// contain a key (the first in this list that matches) is answered
    /// with its text, then words up to the cap as always, so a plan's
    /// checks (a required heading) can pass. The text counts toward the
    /// cap; one longer than the cap is sent whole.
    pub answers: Vec<(String, String)>,
}

impl Behaviour {
    /// A server counting with `count` that reports `usage` in full,
    /// takes `response_format` and always has flex capacity.
    pub fn honest(count: Count) -> Behaviour {
        Behaviour {
            count,
            usage: UsageShape::Full,
            rejects_response_format: false,
            flex_busy: 0,
            answers: Vec::new(),
        }
    }
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
    desk: Arc<Mutex<Desk>>,
}

/// What a connection is served with.
struct Shared {
    behaviour: Behaviour,
    bills: Arc<Mutex<Vec<Bill>>>,
    flex_refused: AtomicUsize,
    desk: Arc<Mutex<Desk>>,
    delay: std::time::Duration,
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
        let shared = Arc::new(Shared {
            behaviour,
            bills: Arc::default(),
            flex_refused: AtomicUsize::new(0),
            desk: Arc::default(),
            delay,
        });
        let (bills, desk) = (Arc::clone(&shared.bills), Arc::clone(&shared.desk));
        let seen = Arc::clone(&requests);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                seen.fetch_add(1, Ordering::Relaxed);
                let shared = Arc::clone(&shared);
                tokio::spawn(async move { serve(stream, &shared).await });
            }
        });
        HonestServer {
            base_url: format!("http://{addr}/v1"),
            requests,
            bills,
            desk,
        }
    }

    fn desk<T>(&self, f: impl FnOnce(&mut Desk) -> T) -> T {
        let mut desk = self.desk.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut desk)
    }

    /// Moves the batch clock on: a batch unfinished 24 hours after its
    /// creation expires when next read.
    pub fn advance_clock(&self, by: std::time::Duration) {
        self.desk(|d| d.advance_clock(by.as_secs()));
    }

    /// How many requests a batch answers each time it is read
    /// (unlimited at first); 0 holds every batch `in_progress`.
    pub fn set_batch_pace(&self, per_read: usize) {
        self.desk(|d| d.set_pace(per_read));
    }

    /// Batches answer `n` more requests in all, then stay `in_progress`
    /// (until the clock expires them or they are cancelled).
    pub fn hold_batches_after(&self, n: usize) {
        self.desk(|d| d.hold_after(n));
    }

    /// The next `n` batch requests are answered `500 server_error`.
    pub fn fail_batch_requests(&self, n: usize) {
        self.desk(|d| d.fail_requests(n));
    }

    /// Cancels batch `id` as someone else would (the API's cancel);
    /// whether it could.
    pub fn cancel_batch(&self, id: &str) -> bool {
        self.desk(|d| d.cancel(id).status == 200)
    }

    /// From now on the Files and Batches endpoints answer 404, as on a
    /// server without the Batch API.
    pub fn close_batch_api(&self) {
        self.desk(Desk::close);
    }

    /// Every batch created so far, in creation order.
    pub fn batch_ids(&self) -> Vec<String> {
        self.desk(|d| d.batch_ids())
    }

    /// Batch `id`'s status, as it is (reading it through the API moves it
    /// on).
    pub fn batch_status(&self, id: &str) -> Option<String> {
        self.desk(|d| d.batch_status(id))
    }

    /// The ids of the files the server holds.
    pub fn file_ids(&self) -> Vec<String> {
        self.desk(|d| d.file_ids())
    }

    /// The input file a batch was created from.
    pub fn batch_input(&self, id: &str) -> Option<Vec<u8>> {
        self.desk(|d| d.batch_input(id))
    }

    /// `ctx run plan.json --no-store --format json` in `dir` against this
    /// server (`--engine openai`, retries waiting at most 5 ms), with
    /// `extra` flags.
    pub fn ctx_run(&self, dir: &crate::Dir, extra: &[&str]) -> crate::Out {
        let mut cmd = dir.ctx();
        cmd.args(["run", "plan.json", "--no-store", "--format", "json"])
            .args(["--engine", "openai", "--base-url", &self.base_url])
            .args(["--retry-initial-ms", "1", "--retry-max-ms", "5"])
            .args(extra);
        crate::Out::of(&mut cmd)
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

async fn serve(mut stream: TcpStream, shared: &Shared) {
    let Some(request) = read_request(&mut stream).await else {
        return;
    };
    let responder = Responder {
        behaviour: &shared.behaviour,
        bills: &shared.bills,
    };
    let routed = {
        let mut desk = shared.desk.lock().unwrap_or_else(|e| e.into_inner());
        desk.route(
            &request.method,
            &request.path,
            &request.content_type,
            &request.body,
            &responder,
        )
    };
    let reply = match routed {
        Some(reply) => reply,
        None => chat_completion(&request.body, shared),
    };
    if !shared.delay.is_zero() {
        tokio::time::sleep(shared.delay).await;
    }
    let head = format!(
        "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        reply.status,
        match reply.status {
            200 => "OK",
            404 => "Not Found",
            409 => "Conflict",
            429 => "Too Many Requests",
            500 => "Internal Server Error",
            _ => "Bad Request",
        },
        reply.content_type,
        reply.body.len()
    );
    let _ = stream.write_all(head.as_bytes()).await;
    let _ = stream.write_all(&reply.body).await;
    let _ = stream.shutdown().await;
}

/// A chat completion's answer, billed.
fn chat_completion(body: &[u8], shared: &Shared) -> Reply {
    let behaviour = &shared.behaviour;
    let (status, answer, bill) = match serde_json::from_slice::<Value>(body) {
        Ok(request) if no_flex_capacity(&request, behaviour, &shared.flex_refused) => (
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
    if let (Some(bill), Ok(mut bills)) = (bill, shared.bills.lock()) {
        bills.push(bill);
    }
    Reply {
        status,
        content_type: "application/json",
        body: answer.to_string().into_bytes(),
    }
}

/// One HTTP/1.1 request: its method, path, content type and body.
struct HttpRequest {
    method: String,
    path: String,
    content_type: String,
    body: Vec<u8>,
}

/// One HTTP/1.1 request, its body read by its `Content-Length`.
async fn read_request(stream: &mut TcpStream) -> Option<HttpRequest> {
    let mut data = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&data[..end]).to_string();
            let header = |name: &str| {
                head.lines()
                    .find_map(|l| {
                        let (key, value) = l.split_once(':')?;
                        key.trim()
                            .eq_ignore_ascii_case(name)
                            .then(|| value.trim().to_string())
                    })
                    .unwrap_or_default()
            };
            let length: usize = header("content-length").parse().unwrap_or(0);
            while data.len() < end + 4 + length {
                let n = stream.read(&mut buf).await.ok()?;
                if n == 0 {
                    return None;
                }
                data.extend_from_slice(&buf[..n]);
            }
            let mut line = head.lines().next().unwrap_or_default().split(' ');
            return Some(HttpRequest {
                method: line.next().unwrap_or_default().to_string(),
                path: line.next().unwrap_or_default().to_string(),
                content_type: header("content-type"),
                body: data[end + 4..end + 4 + length].to_vec(),
            });
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
pub(crate) fn respond(request: &Value, b: &Behaviour) -> (u16, Value, Option<Bill>) {
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
    let opening = b.answers.iter().find(|(key, _)| {
        messages
            .iter()
            .any(|m| m["content"].as_str().unwrap_or("").contains(key.as_str()))
    });
    let opening = opening.map(|(_, text)| text.as_str());
    let text = answer_of(opening.unwrap_or(""), cap, &count);
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

/// `opening`, then the longest run of repeated words that keeps the
/// answer within `cap` tokens.
fn answer_of(opening: &str, cap: u64, count: &dyn Fn(&str) -> u64) -> String {
    let mut words = cap as usize;
    loop {
        let text = format!("{opening}{}", " yes".repeat(words));
        if count(&text) <= cap || words == 0 {
            return text;
        }
        words -= 1;
    }
}
