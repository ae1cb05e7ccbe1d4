//! The Files and Batches API of the honest server
//! ([`crate::openai_server::HonestServer`]), as OpenAI's reference
//! documents it: <https://platform.openai.com/docs/api-reference/batch>,
//! <https://platform.openai.com/docs/api-reference/files> and the guide
//! <https://platform.openai.com/docs/guides/batch>.
//!
//! * `POST /v1/files` (multipart: `purpose=batch` and a `file` part) keeps
//!   an input file; `GET /v1/files/{id}`, `GET /v1/files/{id}/content` and
//!   `DELETE /v1/files/{id}` read and remove it. An input larger than
//!   [`MAX_FILE_BYTES`] is refused.
//! * `POST /v1/batches` (`input_file_id`, `endpoint:
//!   /v1/chat/completions`, `completion_window: 24h`) creates a batch in
//!   `validating`; `GET /v1/batches/{id}` reads it,
//!   `POST /v1/batches/{id}/cancel` cancels it, and `GET /v1/batches`
//!   lists every batch, newest first (one page: `has_more: false`),
//!   without moving them on.
//! * A batch moves one status per read of it, so a poller sees each one:
//!   `validating` → `in_progress` (or `failed`, with `errors.data` naming
//!   the line, when the file breaks a rule) → `finalizing` → `completed`.
//!   Validation is the provider's: every line JSON with a unique
//!   `custom_id`, `method: POST`, the batch's `url`, a `body` naming a
//!   `model`, one model per file, at most [`MAX_REQUESTS_PER_FILE`] lines.
//! * Each request is answered by the chat-completions responder itself
//!   ([`crate::openai_server`]'s `respond`) at `service_tier: "batch"`, so
//!   it is billed as a real-time request is, and recorded in `bills()`.
//!   An answer with status 200 is a line of the output file, any other of
//!   the error file; each line is `{id, custom_id, response: {status_code,
//!   request_id, body}, error}`.
//! * Expiry runs on the server's own clock ([`HonestServer::advance_clock`]):
//!   a batch unfinished 24 hours after creation is `expired`, what it
//!   answered in the output file and each request it did not in the error
//!   file (`error.code: batch_expired`). A cancelled batch goes
//!   `cancelling` → `cancelled`, keeping what it answered.
//!
//! Knobs: [`HonestServer::set_batch_pace`] (requests answered per read;
//! 0 holds a batch `in_progress`), [`HonestServer::hold_batches_after`]
//! (requests answered in all before every batch holds), [`HonestServer::fail_batch_requests`]
//! (the next requests answered `500 server_error`, a retryable failure),
//! [`HonestServer::cancel_batch`] (a cancellation by someone else),
//! [`HonestServer::close_batch_api`] (every Files and Batches call
//! answered 404 from then on, as a server without the Batch API).
//!
//! [`HonestServer::advance_clock`]: crate::openai_server::HonestServer::advance_clock
//! [`HonestServer::set_batch_pace`]: crate::openai_server::HonestServer::set_batch_pace
//! [`HonestServer::hold_batches_after`]: crate::openai_server::HonestServer::hold_batches_after
//! [`HonestServer::fail_batch_requests`]: crate::openai_server::HonestServer::fail_batch_requests
//! [`HonestServer::cancel_batch`]: crate::openai_server::HonestServer::cancel_batch
//! [`HonestServer::close_batch_api`]: crate::openai_server::HonestServer::close_batch_api

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use serde_json::{Value, json};

use crate::openai_server::{Behaviour, Bill, respond};

/// The most requests one batch input file may hold.
pub const MAX_REQUESTS_PER_FILE: usize = 50_000;
/// The largest batch input file, in bytes (200 MB).
pub const MAX_FILE_BYTES: usize = 200_000_000;
/// The completion window every batch has: 24 hours, in seconds.
pub const COMPLETION_WINDOW_SECS: u64 = 24 * 3600;
/// The endpoint batches are accepted for.
pub const BATCH_ENDPOINT: &str = "/v1/chat/completions";
/// The server clock's start, a Unix time in seconds.
const EPOCH: u64 = 1_700_000_000;

/// An HTTP answer of the Files and Batches API.
pub(crate) struct Reply {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
}

impl Reply {
    fn json(status: u16, value: &Value) -> Reply {
        Reply {
            status,
            content_type: "application/json",
            body: value.to_string().into_bytes(),
        }
    }

    fn error(status: u16, message: &str, code: &str) -> Reply {
        Reply::json(
            status,
            &json!({"error": {"message": message, "type": "invalid_request_error", "code": code}}),
        )
    }

    fn not_found(what: &str, id: &str) -> Reply {
        Reply::error(404, &format!("No such {what}: '{id}'"), "not_found")
    }
}

/// A stored file.
struct File {
    purpose: String,
    filename: String,
    bytes: Vec<u8>,
    created_at: u64,
}

/// A batch: the object the API shows, its input and its answers so far.
struct Batch {
    object: Value,
    input: Vec<u8>,
    requests: Vec<Value>,
    answered: usize,
    output: Vec<Value>,
    errors: Vec<Value>,
}

/// The server's files and batches, and the knobs tests turn.
pub(crate) struct Desk {
    clock: u64,
    next_id: u64,
    files: BTreeMap<String, File>,
    batches: BTreeMap<String, Batch>,
    per_read: usize,
    answers_left: usize,
    failures_left: usize,
    closed: bool,
}

impl Default for Desk {
    fn default() -> Desk {
        Desk {
            clock: EPOCH,
            next_id: 0,
            files: BTreeMap::new(),
            batches: BTreeMap::new(),
            per_read: usize::MAX,
            answers_left: usize::MAX,
            failures_left: 0,
            closed: false,
        }
    }
}

/// What one request needs to be answered: how the server behaves and
/// where it records bills.
pub(crate) struct Responder<'a> {
    pub behaviour: &'a Behaviour,
    pub bills: &'a Mutex<Vec<Bill>>,
}

impl Desk {
    /// Answers `method path` when it is a Files or Batches call; `None`
    /// for any other path (a chat completion).
    pub(crate) fn route(
        &mut self,
        method: &str,
        path: &str,
        content_type: &str,
        body: &[u8],
        responder: &Responder<'_>,
    ) -> Option<Reply> {
        let path = path.split('?').next().unwrap_or(path);
        let parts: Vec<&str> = path.trim_end_matches('/').split('/').collect();
        let reply = match (method, parts.as_slice()) {
            (_, ["", "v1", "files" | "batches", ..]) if self.closed => {
                Reply::error(404, &format!("no route {method} {path}"), "not_found")
            }
            ("GET", ["", "v1", "batches"]) => self.list(),
            ("POST", ["", "v1", "files"]) => self.upload(content_type, body),
            ("GET", ["", "v1", "files", id]) => self.file_object(id),
            ("GET", ["", "v1", "files", id, "content"]) => self.content(id),
            ("DELETE", ["", "v1", "files", id]) => self.delete(id),
            ("POST", ["", "v1", "batches"]) => self.create(body),
            ("GET", ["", "v1", "batches", id]) => self.retrieve(id, responder),
            ("POST", ["", "v1", "batches", id, "cancel"]) => self.cancel(id),
            (_, ["", "v1", "files" | "batches", ..]) => {
                Reply::error(404, &format!("no route {method} {path}"), "not_found")
            }
            _ => return None,
        };
        Some(reply)
    }

    fn id(&mut self, prefix: &str) -> String {
        self.next_id += 1;
        format!("{prefix}-{:06}", self.next_id)
    }

    /// Moves the server's clock on by `secs`.
    pub(crate) fn advance_clock(&mut self, secs: u64) {
        self.clock = self.clock.saturating_add(secs);
    }

    /// Requests answered per read of a batch (0 holds batches).
    pub(crate) fn set_pace(&mut self, per_read: usize) {
        self.per_read = per_read;
    }

    /// Batches answer `n` more requests in all, then hold.
    pub(crate) fn hold_after(&mut self, n: usize) {
        self.answers_left = n;
    }

    /// The next `n` batch requests fail with a 500.
    pub(crate) fn fail_requests(&mut self, n: usize) {
        self.failures_left = n;
    }

    /// Every batch's id, in creation order.
    pub(crate) fn batch_ids(&self) -> Vec<String> {
        self.batches.keys().cloned().collect()
    }

    /// A batch's status, without moving it on.
    pub(crate) fn batch_status(&self, id: &str) -> Option<String> {
        let batch = self.batches.get(id)?;
        batch.object["status"].as_str().map(str::to_string)
    }

    /// Every stored file's id.
    pub(crate) fn file_ids(&self) -> Vec<String> {
        self.files.keys().cloned().collect()
    }

    /// The input file's bytes a batch was created from.
    pub(crate) fn batch_input(&self, id: &str) -> Option<Vec<u8>> {
        self.batches.get(id).map(|b| b.input.clone())
    }

    fn upload(&mut self, content_type: &str, body: &[u8]) -> Reply {
        let Some(parts) = multipart(content_type, body) else {
            return Reply::error(400, "expected a multipart/form-data body", "invalid_body");
        };
        let purpose = parts
            .get("purpose")
            .map(|(_, v)| String::from_utf8_lossy(v).to_string());
        if purpose.as_deref() != Some("batch") {
            return Reply::error(
                400,
                "this server keeps files with purpose 'batch' only",
                "invalid_purpose",
            );
        }
        let Some((filename, bytes)) = parts.get("file") else {
            return Reply::error(400, "missing the 'file' part", "missing_file");
        };
        if bytes.len() > MAX_FILE_BYTES {
            return Reply::error(
                400,
                &format!("file is larger than {MAX_FILE_BYTES} bytes"),
                "file_too_large",
            );
        }
        let id = self.id("file");
        let file = File {
            purpose: "batch".into(),
            filename: filename.clone().unwrap_or_else(|| "upload".into()),
            bytes: bytes.clone(),
            created_at: self.clock,
        };
        let object = file_json(&id, &file);
        self.files.insert(id, file);
        Reply::json(200, &object)
    }

    fn file_object(&self, id: &str) -> Reply {
        match self.files.get(id) {
            Some(file) => Reply::json(200, &file_json(id, file)),
            None => Reply::not_found("file", id),
        }
    }

    fn content(&self, id: &str) -> Reply {
        match self.files.get(id) {
            Some(file) => Reply {
                status: 200,
                content_type: "application/octet-stream",
                body: file.bytes.clone(),
            },
            None => Reply::not_found("file", id),
        }
    }

    fn delete(&mut self, id: &str) -> Reply {
        match self.files.remove(id) {
            Some(_) => Reply::json(200, &json!({"id": id, "object": "file", "deleted": true})),
            None => Reply::not_found("file", id),
        }
    }

    fn create(&mut self, body: &[u8]) -> Reply {
        let Ok(request) = serde_json::from_slice::<Value>(body) else {
            return Reply::error(400, "the body is not JSON", "invalid_json");
        };
        let file_id = request["input_file_id"].as_str().unwrap_or_default();
        let Some(input) = self.files.get(file_id).map(|f| f.bytes.clone()) else {
            return Reply::error(
                400,
                &format!("invalid input_file_id '{file_id}'"),
                "invalid_file",
            );
        };
        if request["endpoint"].as_str() != Some(BATCH_ENDPOINT) {
            return Reply::error(
                400,
                &format!("endpoint must be {BATCH_ENDPOINT}"),
                "invalid_endpoint",
            );
        }
        if request["completion_window"].as_str() != Some("24h") {
            return Reply::error(400, "completion_window must be 24h", "invalid_window");
        }
        let id = self.id("batch");
        let object = json!({
            "id": id, "object": "batch", "endpoint": BATCH_ENDPOINT, "errors": null,
            "input_file_id": file_id, "completion_window": "24h", "status": "validating",
            "output_file_id": null, "error_file_id": null, "created_at": self.clock,
            "in_progress_at": null, "expires_at": self.clock + COMPLETION_WINDOW_SECS,
            "finalizing_at": null, "completed_at": null, "failed_at": null, "expired_at": null,
            "cancelling_at": null, "cancelled_at": null,
            "request_counts": {"total": 0, "completed": 0, "failed": 0},
            "metadata": request.get("metadata").cloned().unwrap_or(Value::Null),
        });
        let batch = Batch {
            object: object.clone(),
            input,
            requests: Vec::new(),
            answered: 0,
            output: Vec::new(),
            errors: Vec::new(),
        };
        self.batches.insert(id, batch);
        Reply::json(200, &object)
    }

    /// Cancels batch `id` (the API's cancel, or someone else's).
    pub(crate) fn cancel(&mut self, id: &str) -> Reply {
        let clock = self.clock;
        let Some(batch) = self.batches.get_mut(id) else {
            return Reply::not_found("batch", id);
        };
        let status = batch.object["status"].as_str().unwrap_or_default();
        if !matches!(status, "validating" | "in_progress" | "finalizing") {
            return Reply::error(
                409,
                &format!("cannot cancel a batch that is {status}"),
                "invalid_status",
            );
        }
        set_status(&mut batch.object, "cancelling", clock);
        Reply::json(200, &batch.object)
    }

    /// `GET /v1/batches`: every batch, newest first, as they are (a
    /// list does not move them on).
    fn list(&self) -> Reply {
        let data: Vec<&Value> = self.batches.values().rev().map(|b| &b.object).collect();
        Reply::json(
            200,
            &json!({"object": "list", "data": data, "has_more": false}),
        )
    }

    /// Answers 404 to every Files and Batches call from now on, as a
    /// server without the Batch API does.
    pub(crate) fn close(&mut self) {
        self.closed = true;
    }

    fn retrieve(&mut self, id: &str, responder: &Responder<'_>) -> Reply {
        if !self.batches.contains_key(id) {
            return Reply::not_found("batch", id);
        }
        self.step(id, responder);
        Reply::json(200, &self.batches[id].object)
    }

    /// One status further along, as the batch is read.
    fn step(&mut self, id: &str, responder: &Responder<'_>) {
        let clock = self.clock;
        let status = self.batches[id].object["status"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let expires_at = self.batches[id].object["expires_at"]
            .as_u64()
            .unwrap_or(u64::MAX);
        match status.as_str() {
            "validating" | "in_progress" if clock >= expires_at => self.expire(id),
            "validating" => self.validate(id),
            "in_progress" => self.answer(id, responder),
            "finalizing" => self.finish(id, "completed"),
            "cancelling" => self.finish(id, "cancelled"),
            _ => {}
        }
    }

    fn validate(&mut self, id: &str) {
        let clock = self.clock;
        let batch = self.batches.get_mut(id).expect("checked");
        match validate(&batch.input) {
            Ok(requests) => {
                batch.object["request_counts"]["total"] = json!(requests.len());
                batch.requests = requests;
                set_status(&mut batch.object, "in_progress", clock);
            }
            Err(errors) => {
                batch.object["errors"] = json!({"object": "list", "data": errors});
                set_status(&mut batch.object, "failed", clock);
            }
        }
    }

    /// Answers up to the pace's requests; all answered, the batch
    /// finalizes.
    fn answer(&mut self, id: &str, responder: &Responder<'_>) {
        let clock = self.clock;
        let mut failures_left = self.failures_left;
        let batch = self.batches.get_mut(id).expect("checked");
        let end = batch
            .answered
            .saturating_add(self.per_read.min(self.answers_left))
            .min(batch.requests.len());
        self.answers_left = self.answers_left.saturating_sub(end - batch.answered);
        for index in batch.answered..end {
            let request = &batch.requests[index];
            let (status, body) = if failures_left > 0 {
                failures_left -= 1;
                let body = json!({"error": {"message": "The server had an error while processing your request.",
                                            "type": "server_error", "code": null}});
                (500, body)
            } else {
                answer_one(request, responder)
            };
            let line = json!({
                "id": format!("batch_req_{index}"), "custom_id": request["custom_id"],
                "response": {"status_code": status, "request_id": format!("req_{index}"), "body": body},
                "error": null,
            });
            let (list, count) = if status == 200 {
                (&mut batch.output, "completed")
            } else {
                (&mut batch.errors, "failed")
            };
            list.push(line);
            let counts = &mut batch.object["request_counts"][count];
            *counts = json!(counts.as_u64().unwrap_or(0) + 1);
        }
        batch.answered = end;
        self.failures_left = failures_left;
        if end == batch.requests.len() {
            set_status(&mut batch.object, "finalizing", clock);
        }
    }

    /// The window passed: each request not answered is an error line.
    fn expire(&mut self, id: &str) {
        let batch = self.batches.get_mut(id).expect("checked");
        for request in &batch.requests[batch.answered..] {
            batch.errors.push(json!({
                "id": null, "custom_id": request["custom_id"], "response": null,
                "error": {"code": "batch_expired",
                          "message": "This request could not be executed before the completion window expired."},
            }));
        }
        let unanswered = (batch.requests.len() - batch.answered) as u64;
        let failed = &mut batch.object["request_counts"]["failed"];
        *failed = json!(failed.as_u64().unwrap_or(0) + unanswered);
        batch.answered = batch.requests.len();
        self.finish(id, "expired");
    }

    /// Writes the output and error files and ends the batch in `status`.
    fn finish(&mut self, id: &str, status: &str) {
        let batch = self.batches.get_mut(id).expect("checked");
        let output = jsonl(&std::mem::take(&mut batch.output));
        let errors = jsonl(&std::mem::take(&mut batch.errors));
        for (bytes, key) in [(output, "output_file_id"), (errors, "error_file_id")] {
            if bytes.is_empty() {
                continue;
            }
            let file_id = self.id("file");
            let file = File {
                purpose: "batch_output".into(),
                filename: format!("{id}_{key}.jsonl"),
                bytes,
                created_at: self.clock,
            };
            self.files.insert(file_id.clone(), file);
            let batch = self.batches.get_mut(id).expect("checked");
            batch.object[key] = json!(file_id);
        }
        let clock = self.clock;
        let batch = self.batches.get_mut(id).expect("checked");
        set_status(&mut batch.object, status, clock);
    }
}

/// Answers one batch line as the chat-completions endpoint would, at the
/// batch tier, recording the bill.
fn answer_one(request: &Value, responder: &Responder<'_>) -> (u16, Value) {
    let mut body = request["body"].clone();
    body["service_tier"] = json!("batch");
    let (status, answer, bill) = respond(&body, responder.behaviour);
    if let (Some(bill), Ok(mut bills)) = (bill, responder.bills.lock()) {
        bills.push(bill);
    }
    (status, answer)
}

/// Sets `status` and its timestamp (`{status}_at`).
fn set_status(object: &mut Value, status: &str, clock: u64) {
    object["status"] = json!(status);
    let at = format!("{status}_at");
    if object.get(&at).is_some() {
        object[at] = json!(clock);
    }
}

fn jsonl(lines: &[Value]) -> Vec<u8> {
    lines.iter().fold(Vec::new(), |mut out, line| {
        out.extend_from_slice(line.to_string().as_bytes());
        out.push(b'\n');
        out
    })
}

fn file_json(id: &str, file: &File) -> Value {
    json!({"id": id, "object": "file", "bytes": file.bytes.len(), "created_at": file.created_at,
           "filename": file.filename, "purpose": file.purpose})
}

/// The requests of an input file, or the errors that fail its batch,
/// each naming its line (1-based).
fn validate(input: &[u8]) -> Result<Vec<Value>, Vec<Value>> {
    let error = |line: usize, code: &str, message: String| json!({"code": code, "message": message, "param": null, "line": line});
    let text = String::from_utf8_lossy(input);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.is_empty() {
        return Err(vec![error(
            0,
            "empty_file",
            "the input file holds no requests".into(),
        )]);
    }
    if lines.len() > MAX_REQUESTS_PER_FILE {
        let message = format!("the input file holds more than {MAX_REQUESTS_PER_FILE} requests");
        return Err(vec![error(0, "too_many_requests", message)]);
    }
    let (mut ids, mut models, mut requests, mut errors) =
        (BTreeSet::new(), BTreeSet::new(), Vec::new(), Vec::new());
    for (index, line) in lines.iter().enumerate() {
        let number = index + 1;
        let problem = match serde_json::from_str::<Value>(line) {
            Err(e) => Some(("invalid_json_line", format!("line is not JSON: {e}"))),
            Ok(request) => {
                let problem = line_problem(&request, &mut ids, &mut models);
                if problem.is_none() {
                    requests.push(request);
                }
                problem
            }
        };
        if let Some((code, message)) = problem {
            errors.push(error(number, code, message));
        }
    }
    if errors.is_empty() {
        Ok(requests)
    } else {
        Err(errors)
    }
}

/// What is wrong with one parsed line, if anything.
fn line_problem(
    request: &Value,
    ids: &mut BTreeSet<String>,
    models: &mut BTreeSet<String>,
) -> Option<(&'static str, String)> {
    let Some(custom_id) = request["custom_id"].as_str() else {
        return Some(("missing_custom_id", "the line has no custom_id".into()));
    };
    if !ids.insert(custom_id.to_string()) {
        return Some((
            "duplicate_custom_id",
            format!("custom_id '{custom_id}' is used twice"),
        ));
    }
    if request["method"].as_str() != Some("POST") || request["url"].as_str() != Some(BATCH_ENDPOINT)
    {
        return Some((
            "invalid_url",
            format!("the line must POST to {BATCH_ENDPOINT}"),
        ));
    }
    let Some(model) = request["body"]["model"].as_str() else {
        return Some(("missing_model", "the body names no model".into()));
    };
    models.insert(model.to_string());
    (models.len() > 1).then(|| {
        (
            "mismatched_model",
            "every request of a batch must use the same model".into(),
        )
    })
}

/// The parts of a `multipart/form-data` body by name: the file name a
/// part gives, and its bytes.
type Parts = BTreeMap<String, (Option<String>, Vec<u8>)>;

fn multipart(content_type: &str, body: &[u8]) -> Option<Parts> {
    let boundary = content_type
        .split(';')
        .find_map(|p| p.trim().strip_prefix("boundary="))?
        .trim_matches('"');
    let delimiter = format!("--{boundary}").into_bytes();
    let mut parts = Parts::new();
    let mut rest = body;
    while let Some(start) = find(rest, &delimiter) {
        rest = &rest[start + delimiter.len()..];
        if rest.starts_with(b"--") {
            break;
        }
        let end = find(rest, &delimiter)?;
        let part = rest[..end].strip_prefix(b"\r\n")?;
        let part = part.strip_suffix(b"\r\n").unwrap_or(part);
        let head_end = find(part, b"\r\n\r\n")?;
        let head = String::from_utf8_lossy(&part[..head_end]).to_string();
        let field = |key: &str| {
            head.split(';')
                .find_map(|p| p.trim().strip_prefix(&format!("{key}=\"")))
                .and_then(|v| v.split('"').next())
                .map(str::to_string)
        };
        parts.insert(
            field("name")?,
            (field("filename"), part[head_end + 4..].to_vec()),
        );
        rest = &rest[end..];
    }
    Some(parts)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::openai_server::HonestServer;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn behaviour() -> Behaviour {
        Behaviour {
            rejects_response_format: true,
            ..Behaviour::honest(Arc::new(|t: &str| t.split_whitespace().count() as u64))
        }
    }

    /// One HTTP exchange: the status and the body.
    async fn call(
        base: &str,
        method: &str,
        path: &str,
        ctype: &str,
        body: &[u8],
    ) -> (u16, Vec<u8>) {
        let addr = base.trim_start_matches("http://").trim_end_matches("/v1");
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        stream.write_all(body).await.unwrap();
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await.unwrap();
        let end = find(&answer, b"\r\n\r\n").unwrap();
        let status = String::from_utf8_lossy(&answer[9..12]).parse().unwrap();
        (status, answer[end + 4..].to_vec())
    }

    async fn json_call(base: &str, method: &str, path: &str, body: &Value) -> (u16, Value) {
        let (status, bytes) = call(
            base,
            method,
            path,
            "application/json",
            body.to_string().as_bytes(),
        )
        .await;
        (status, serde_json::from_slice(&bytes).unwrap())
    }

    async fn upload(base: &str, purpose: &str, file: &[u8]) -> (u16, Value) {
        let mut body = Vec::new();
        body.extend_from_slice(
            format!("--XyZ\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\n{purpose}\r\n--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"in.jsonl\"\r\nContent-Type: application/jsonl\r\n\r\n").as_bytes(),
        );
        body.extend_from_slice(file);
        body.extend_from_slice(b"\r\n--XyZ--\r\n");
        let (status, bytes) = call(
            base,
            "POST",
            "/v1/files",
            "multipart/form-data; boundary=XyZ",
            &body,
        )
        .await;
        (status, serde_json::from_slice(&bytes).unwrap())
    }

    fn line(id: &str, model: &str, prompt: &str) -> String {
        json!({"custom_id": id, "method": "POST", "url": BATCH_ENDPOINT,
               "body": {"model": model, "messages": [{"role": "user", "content": prompt}], "max_tokens": 4}})
        .to_string()
    }

    async fn batch_of(server: &HonestServer, lines: &[String]) -> String {
        let input = lines.join("\n") + "\n";
        let (status, file) = upload(&server.base_url, "batch", input.as_bytes()).await;
        assert_eq!(status, 200, "{file}");
        let create = json!({"input_file_id": file["id"], "endpoint": BATCH_ENDPOINT, "completion_window": "24h"});
        let (status, batch) = json_call(&server.base_url, "POST", "/v1/batches", &create).await;
        assert_eq!(
            (status, batch["status"].as_str()),
            (200, Some("validating"))
        );
        batch["id"].as_str().unwrap().to_string()
    }

    async fn read(server: &HonestServer, id: &str) -> Value {
        json_call(
            &server.base_url,
            "GET",
            &format!("/v1/batches/{id}"),
            &Value::Null,
        )
        .await
        .1
    }

    async fn lines_of(server: &HonestServer, file: &Value) -> Vec<Value> {
        let path = format!("/v1/files/{}/content", file.as_str().unwrap());
        let (status, bytes) = call(&server.base_url, "GET", &path, "", b"").await;
        assert_eq!(status, 200);
        String::from_utf8(bytes)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[tokio::test]
    async fn a_batch_goes_through_each_status_and_bills_each_answer_at_the_batch_tier() {
        let server = HonestServer::start(behaviour()).await;
        let id = batch_of(
            &server,
            &[line("a", "m", "one two"), line("b", "m", "three")],
        )
        .await;
        let mut seen = Vec::new();
        for _ in 0..3 {
            seen.push(read(&server, &id).await["status"].clone());
        }
        assert_eq!(
            seen,
            [
                json!("in_progress"),
                json!("finalizing"),
                json!("completed")
            ]
        );
        let batch = read(&server, &id).await;
        assert_eq!(
            batch["request_counts"],
            json!({"total": 2, "completed": 2, "failed": 0})
        );
        assert!(batch["error_file_id"].is_null());
        let output = lines_of(&server, &batch["output_file_id"]).await;
        let ids: Vec<&str> = output
            .iter()
            .map(|l| l["custom_id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["a", "b"]);
        assert_eq!(output[0]["response"]["status_code"], 200);
        assert_eq!(output[0]["response"]["body"]["service_tier"], "batch");
        let bills = server.bills();
        assert_eq!(bills.len(), 2);
        assert!(bills.iter().all(|b| b.service_tier == "batch"));
        // 2 words + 3 framing + 3 for the reply.
        assert_eq!(bills[0].prompt_tokens, 8);
    }

    #[tokio::test]
    async fn files_are_read_and_deleted_and_only_batch_uploads_are_kept() {
        let server = HonestServer::start(behaviour()).await;
        let (status, file) = upload(&server.base_url, "batch", b"{}\n").await;
        assert_eq!((status, file["bytes"].as_u64()), (200, Some(3)));
        let id = file["id"].as_str().unwrap();
        let content_path = format!("/v1/files/{id}/content");
        let content = || call(&server.base_url, "GET", &content_path, "", b"");
        assert_eq!(content().await, (200, b"{}\n".to_vec()));
        let (status, gone) = json_call(
            &server.base_url,
            "DELETE",
            &format!("/v1/files/{id}"),
            &Value::Null,
        )
        .await;
        assert_eq!((status, gone["deleted"].as_bool()), (200, Some(true)));
        assert!(server.file_ids().is_empty());
        assert_eq!(content().await.0, 404);
        assert_eq!(upload(&server.base_url, "fine-tune", b"{}\n").await.0, 400);
        let bad = json!({"input_file_id": "file-none", "endpoint": BATCH_ENDPOINT, "completion_window": "24h"});
        assert_eq!(
            json_call(&server.base_url, "POST", "/v1/batches", &bad)
                .await
                .0,
            400
        );
    }

    #[tokio::test]
    async fn a_file_that_breaks_the_rules_fails_validation_naming_each_line() {
        let server = HonestServer::start(behaviour()).await;
        let wrong_url = line("c", "m", "x").replace(BATCH_ENDPOINT, "/v1/embeddings");
        let lines = [
            line("a", "m", "x"),
            line("a", "m", "y"),
            "not json".into(),
            wrong_url,
            line("d", "other", "z"),
        ];
        let id = batch_of(&server, &lines).await;
        let batch = read(&server, &id).await;
        assert_eq!(batch["status"], "failed");
        assert!(batch["failed_at"].is_u64());
        let found: Vec<(u64, &str)> = batch["errors"]["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| (e["line"].as_u64().unwrap(), e["code"].as_str().unwrap()))
            .collect();
        assert_eq!(
            found,
            [
                (2, "duplicate_custom_id"),
                (3, "invalid_json_line"),
                (4, "invalid_url"),
                (5, "mismatched_model")
            ]
        );
        assert!(server.bills().is_empty());
    }

    #[tokio::test]
    async fn per_request_errors_go_to_the_error_file() {
        let server = HonestServer::start(behaviour()).await;
        server.fail_batch_requests(1);
        let schema = json!({"custom_id": "s", "method": "POST", "url": BATCH_ENDPOINT,
                            "body": {"model": "m", "messages": [], "response_format": {"type": "json_object"}}});
        let id = batch_of(
            &server,
            &[line("a", "m", "x"), line("b", "m", "y"), schema.to_string()],
        )
        .await;
        for _ in 0..3 {
            read(&server, &id).await;
        }
        let batch = read(&server, &id).await;
        assert_eq!(batch["status"], "completed");
        assert_eq!(
            batch["request_counts"],
            json!({"total": 3, "completed": 1, "failed": 2})
        );
        let errors = lines_of(&server, &batch["error_file_id"]).await;
        let codes: Vec<(&str, u64)> = errors
            .iter()
            .map(|l| {
                (
                    l["custom_id"].as_str().unwrap(),
                    l["response"]["status_code"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(codes, [("a", 500), ("s", 400)]);
        assert_eq!(
            server.bills().len(),
            1,
            "only the answered request is billed"
        );
    }

    #[tokio::test]
    async fn a_held_batch_expires_on_the_clock_keeping_what_it_answered() {
        let server = HonestServer::start(behaviour()).await;
        server.hold_batches_after(1);
        let id = batch_of(
            &server,
            &[
                line("a", "m", "x"),
                line("b", "m", "y"),
                line("c", "m", "z"),
            ],
        )
        .await;
        for _ in 0..4 {
            assert_eq!(read(&server, &id).await["status"], "in_progress");
        }
        assert_eq!(read(&server, &id).await["request_counts"]["completed"], 1);
        server.advance_clock(Duration::from_secs(COMPLETION_WINDOW_SECS - 1));
        assert_eq!(read(&server, &id).await["status"], "in_progress");
        server.advance_clock(Duration::from_secs(1));
        let batch = read(&server, &id).await;
        assert_eq!(batch["status"], "expired");
        assert_eq!(
            batch["request_counts"],
            json!({"total": 3, "completed": 1, "failed": 2})
        );
        assert_eq!(
            lines_of(&server, &batch["output_file_id"]).await[0]["custom_id"],
            "a"
        );
        let expired = lines_of(&server, &batch["error_file_id"]).await;
        assert_eq!(expired.len(), 2);
        assert_eq!(expired[1]["error"]["code"], "batch_expired");
    }

    #[tokio::test]
    async fn a_cancelled_batch_keeps_its_answers_and_cannot_be_cancelled_twice() {
        let server = HonestServer::start(behaviour()).await;
        server.set_batch_pace(1);
        let id = batch_of(&server, &[line("a", "m", "x"), line("b", "m", "y")]).await;
        read(&server, &id).await;
        read(&server, &id).await;
        let path = format!("/v1/batches/{id}/cancel");
        let (status, batch) = json_call(&server.base_url, "POST", &path, &Value::Null).await;
        assert_eq!(
            (status, batch["status"].as_str()),
            (200, Some("cancelling"))
        );
        let batch = read(&server, &id).await;
        assert_eq!(batch["status"], "cancelled");
        assert_eq!(batch["request_counts"]["completed"], 1);
        assert!(batch["error_file_id"].is_null());
        assert_eq!(
            json_call(&server.base_url, "POST", &path, &Value::Null)
                .await
                .0,
            409
        );
        let other = batch_of(&server, &[line("c", "m", "x")]).await;
        assert!(server.cancel_batch(&other));
        assert_eq!(server.batch_status(&other).as_deref(), Some("cancelling"));
        assert_eq!(server.batch_ids(), [id, other]);
    }
}
