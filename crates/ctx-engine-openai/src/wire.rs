//! The chat-completions wire format: the request body ctx sends and the
//! parts of the answers it reads.
//!
//! Answers are read from `serde_json::Value` rather than strict structs:
//! servers that call themselves OpenAI-compatible differ in small ways
//! (`total_tokens` missing, `content` as an array of parts, extra fields),
//! and a field of an unexpected type should cost that field, not the task.
//! What *is* required is checked and named in the error: a JSON object, a
//! non-empty `choices`.

use ctx_engine::InferenceRequest;
use ctx_model::{Params, ServiceTier, TokenUsage};
use serde_json::{Map, Value, json};

use crate::config::RequestDefaults;
use crate::retry::ApiErrorInfo;

/// `response_format` for a JSON Schema: strict, so a server that supports
/// it constrains decoding to the schema. The name is fixed: it only labels
/// the schema for the server.
pub(crate) fn response_format(schema: &Value) -> Value {
    json!({
        "type": "json_schema",
        "json_schema": {"name": "task_output", "strict": true, "schema": schema}
    })
}

/// `text` as OpenAI-format content parts cut at `offsets` (ascending byte
/// offsets on character boundaries), each part that ends at an offset
/// marked `cache_control: {type: ephemeral}`: the form in which LiteLLM
/// passes Anthropic's prompt-cache breakpoints through. The parts
/// concatenate to `text`, so the model reads the same prompt; an offset
/// out of range or off a boundary is skipped, and the rest of the text
/// after the last offset is a plain part.
pub(crate) fn cached_parts(text: &str, offsets: &[usize]) -> Value {
    let mut parts = Vec::new();
    let mut start = 0;
    for &end in offsets {
        if end <= start || end > text.len() || !text.is_char_boundary(end) {
            continue;
        }
        parts.push(json!({"type": "text", "text": &text[start..end], "cache_control": {"type": "ephemeral"}}));
        start = end;
    }
    if start < text.len() || parts.is_empty() {
        parts.push(json!({"type": "text", "text": &text[start..]}));
    }
    Value::Array(parts)
}

/// Keys ctx sets itself; `params.extra` cannot override them.
const RESERVED: [&str; 4] = ["model", "messages", "stream", "stream_options"];

/// The JSON body for one task: task params win over CLI defaults, and
/// every key of `params.extra` is passed through unless ctx owns it.
/// `breakpoints` apply when they are for `model` ([`cached_parts`]).
/// The system message is the task's or the default one, ended by the
/// request's canary sentence when it has one
/// ([`InferenceRequest::system_with_canary`]).
pub(crate) fn request_body(
    request: &InferenceRequest,
    model: &str,
    defaults: &RequestDefaults,
    stream: bool,
) -> Value {
    let (prompt, params) = (request.prompt.as_str(), &request.params);
    let breakpoints = request.cache_breakpoints.as_ref();
    let mut body = Map::new();
    for (key, value) in &params.extra {
        if !RESERVED.contains(&key.as_str()) {
            body.insert(key.clone(), value.clone());
        }
    }
    body.insert("model".into(), json!(model));
    let breakpoints = breakpoints.filter(|b| b.models.applies_to(model));
    let mut messages = Vec::new();
    let system = params.system.as_ref().or(defaults.system.as_ref());
    if let Some(system) = request.system_with_canary(system.map(String::as_str)) {
        let content = match breakpoints {
            Some(b) if b.system => cached_parts(&system, &[system.len()]),
            _ => json!(system),
        };
        messages.push(json!({"role": "system", "content": content}));
    }
    let content = match breakpoints {
        Some(b) if !b.prompt_offsets.is_empty() => cached_parts(prompt, &b.prompt_offsets),
        _ => json!(prompt),
    };
    messages.push(json!({"role": "user", "content": content}));
    body.insert("messages".into(), Value::Array(messages));

    let mut set = |key: &str, value: Option<Value>| {
        if let Some(value) = value {
            body.insert(key.to_string(), value);
        }
    };
    set(
        "temperature",
        params
            .temperature
            .or(defaults.temperature)
            .map(|v| json!(v)),
    );
    set("top_p", params.top_p.or(defaults.top_p).map(|v| json!(v)));
    set("seed", params.seed.or(defaults.seed).map(|v| json!(v)));
    set(
        "stop",
        params
            .stop
            .as_ref()
            .or(defaults.stop.as_ref())
            .filter(|s| !s.is_empty())
            .map(|v| json!(v)),
    );
    // `--service-tier` for a task whose params name none.
    if let (false, Some(tier)) = (body.contains_key("service_tier"), &defaults.service_tier) {
        body.insert("service_tier".into(), json!(tier));
    }
    // Exactly one cap key goes out, the one `completion_cap` chose (and
    // pacing reserves): never both, never one the pacer does not know of.
    for key in ctx_model::billing::CAP_KEYS {
        body.remove(key);
    }
    if let Some(cap) = completion_cap(params, defaults) {
        body.insert(cap.key.to_string(), cap.value);
    }
    if stream {
        body.insert("stream".into(), json!(true));
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    Value::Object(body)
}

/// The cap on generated tokens a request carries: ctx-model's rule
/// ([`Params::completion_cap`]), which `--max-cost` reserves by too.
/// [`request_body`] sends it and the engine's `--tpm` pacing reserves it,
/// so the body, the pacing and the budget can never disagree.
pub(crate) fn completion_cap(
    params: &Params,
    defaults: &RequestDefaults,
) -> Option<ctx_model::billing::CompletionCap> {
    params.completion_cap(defaults.max_tokens)
}

/// A finished chat completion, whichever way it arrived.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Completion {
    pub output: String,
    /// The response's `id` (`chatcmpl-…`), the span's `gen_ai.response.id`.
    pub id: Option<String>,
    pub model: Option<String>,
    pub usage: Option<ReportedUsage>,
    pub finish_reason: Option<String>,
    /// When a stream's first event arrived (`None` for a whole body): the
    /// engine turns it into the span's time to first chunk.
    pub first_chunk: Option<std::time::Instant>,
    /// The tier the server says it billed (`service_tier` of the answer,
    /// or of any chunk of a stream).
    pub service_tier: Option<ServiceTier>,
}

/// The `service_tier` an answer (or a stream's chunk) names.
fn service_tier_of(value: &Value) -> Option<ServiceTier> {
    value
        .get("service_tier")
        .and_then(Value::as_str)
        .filter(|t| !t.is_empty())
        .map(ServiceTier::from_name)
}

/// `body` (a request as [`request_body`] encoded it) at the standard tier,
/// when it asked for flex: what [`crate::FlexFallback::Standard`] sends
/// as a call's last attempt. `None` for a request at any other tier.
pub(crate) fn at_standard_tier(body: &[u8]) -> Option<Vec<u8>> {
    let mut value: Value = serde_json::from_slice(body).ok()?;
    let object = value.as_object_mut()?;
    if object.get("service_tier").and_then(Value::as_str) != Some("flex") {
        return None;
    }
    object.insert("service_tier".into(), json!("default"));
    serde_json::to_vec(&value).ok()
}

/// Why a body was not a usable completion.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum BodyError {
    /// Not JSON, or not an object.
    Malformed(String),
    /// `choices` missing or empty.
    EmptyChoices,
    /// A 2xx answer that carries an `error` object instead.
    Api(ApiErrorInfo),
}

/// A response body or stream event as the server sent it: a JSON object,
/// unless it is an API error (`{"error": {...}}`), which either form may
/// carry instead of an answer.
fn response_object(value: Value) -> Result<Value, BodyError> {
    if !value.is_object() {
        return Err(BodyError::Malformed("expected a JSON object".into()));
    }
    if let Some(info) = value
        .get("error")
        .filter(|e| !e.is_null())
        .and_then(|_| ApiErrorInfo::from_value(&value))
    {
        return Err(BodyError::Api(info));
    }
    Ok(value)
}

/// The text of a choice: the `content` of its `message` (a response) or
/// `delta` (a stream chunk), else the legacy completions API's `text`,
/// else nothing (a chunk that only carries a role or a finish reason).
fn choice_text(choice: &Value, part: &str) -> String {
    choice
        .get(part)
        .and_then(|m| m.get("content"))
        .map(content_text)
        .or_else(|| {
            choice
                .get("text")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .unwrap_or_default()
}

/// Parses a non-streaming response body.
pub(crate) fn parse_completion(body: &[u8]) -> Result<Completion, BodyError> {
    let value = response_object(
        serde_json::from_slice(body).map_err(|e| BodyError::Malformed(e.to_string()))?,
    )?;
    let choice = value
        .get("choices")
        .and_then(Value::as_array)
        .and_then(|c| first_choice(c))
        .ok_or(BodyError::EmptyChoices)?;
    let output = choice_text(choice, "message");
    Ok(Completion {
        output,
        id: id_of(&value),
        model: model_of(&value),
        usage: value.get("usage").and_then(usage_of),
        finish_reason: finish_reason_of(choice),
        first_chunk: None,
        service_tier: service_tier_of(&value),
    })
}

/// Whether a streamed choice belongs to the first completion: its `index`
/// is 0, or absent (servers that only ever stream one choice may leave it
/// out).
///
/// With `n > 1` each chunk carries one choice of one completion, so
/// [`first_choice`]'s fallback to "whichever comes first" would splice the
/// completions together (`A` from index 0, then `B` from index 1, read as
/// `AB`); the stream keeps index 0 alone, as a whole body does.
fn is_first_choice(choice: &Value) -> bool {
    match choice.get("index") {
        None | Some(Value::Null) => true,
        Some(index) => index.as_u64() == Some(0) || index.as_f64() == Some(0.0),
    }
}

/// The choice with `index` 0, else the first.
fn first_choice(choices: &[Value]) -> Option<&Value> {
    choices
        .iter()
        .find(|c| c.get("index").and_then(Value::as_u64) == Some(0))
        .or_else(|| choices.first())
}

/// `content` as a string, or an array of `{type: text, text}` parts.
fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str).or_else(|| p.as_str()))
            .collect(),
        _ => String::new(),
    }
}

fn model_of(value: &Value) -> Option<String> {
    non_empty_str(value, "model")
}

/// The response id: a whole body's `id`, or any stream chunk's (each
/// chunk of one completion repeats it).
fn id_of(value: &Value) -> Option<String> {
    non_empty_str(value, "id")
}

fn non_empty_str(value: &Value, key: &str) -> Option<String> {
    value
        .get(key)
        .and_then(Value::as_str)
        .filter(|m| !m.is_empty())
        .map(str::to_string)
}

fn finish_reason_of(choice: &Value) -> Option<String> {
    choice
        .get("finish_reason")
        .and_then(Value::as_str)
        .filter(|r| !r.is_empty())
        .map(str::to_string)
}

/// A `usage` object as the server sent it: each count it reported, and
/// only those.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ReportedUsage {
    pub prompt: Option<u64>,
    pub completion: Option<u64>,
    pub total: Option<u64>,
    pub cached: Option<u64>,
    pub cache_write: Option<u64>,
}

/// What a request is known to have sent and allowed, for reading a
/// partial `usage` at its worst case ([`ReportedUsage::resolve`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RequestBounds {
    /// ctx's exact count of the prompt it sent.
    pub prompt_tokens: u64,
    /// The most completion tokens the request could be billed (its cap
    /// times its completions), when it has one.
    pub completion_tokens: Option<u64>,
}

impl ReportedUsage {
    /// The usage to record. Complete when the server gave two of the
    /// three counts (the third follows). Otherwise it is the worst case
    /// the report allows, marked [`TokenUsage::partial`], never a zero
    /// that prices the call at $0:
    /// * only `total_tokens`: as much of it completion as the request
    ///   allowed (output is the dearer side for every priced model), the
    ///   rest prompt;
    /// * only `prompt_tokens`: the completion at the request's bound
    ///   (else `output_bytes`: a token is at least one byte);
    /// * only `completion_tokens`: the prompt ctx counted.
    pub(crate) fn resolve(self, bounds: RequestBounds, output_bytes: u64) -> TokenUsage {
        let complete = |prompt: u64, completion: u64, total: Option<u64>| TokenUsage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: total.unwrap_or(prompt.saturating_add(completion)),
            cached_tokens: self.cached,
            cache_write_tokens: self.cache_write,
            partial: false,
            prompt_counted: false,
            service_tier: None,
        };
        let partial = |prompt: u64, completion: u64| TokenUsage {
            partial: true,
            ..complete(prompt, completion, None)
        };
        let counted = |completion: u64| TokenUsage {
            prompt_counted: true,
            ..partial(bounds.prompt_tokens, completion)
        };
        let most_completion = bounds.completion_tokens.unwrap_or(output_bytes);
        match (self.prompt, self.completion, self.total) {
            (Some(p), Some(c), total) => complete(p, c, total),
            (Some(p), None, Some(t)) if t >= p => complete(p, t - p, Some(t)),
            (None, Some(c), Some(t)) if t >= c => complete(t - c, c, Some(t)),
            (None, None, Some(t)) => {
                let c = t.min(most_completion);
                partial(t - c, c)
            }
            (Some(p), _, _) => partial(p, most_completion),
            (None, Some(c), _) => counted(c),
            (None, None, None) => counted(most_completion),
        }
    }
}

/// The usage to record for an answered request: the server's report
/// read by [`ReportedUsage::resolve`]; with no report at all, `None`
/// (ctx then counts the prompt it sent and the output it got) unless the
/// request asked for more than one completion. Then the server billed
/// choices ctx never saw (`unseen_completion` tokens at most: the cap for
/// each), so the usage is the worst case, flagged partial: ctx's prompt
/// count, and the kept output (a token is at least one byte, so at most
/// `output_bytes` tokens, and at most the cap) plus the unseen choices.
/// Counting only the kept output let a budgeted run spend past its
/// budget against a server that bills `n` choices and reports no usage.
pub(crate) fn usage_to_record(
    reported: Option<ReportedUsage>,
    bounds: RequestBounds,
    output_bytes: u64,
    unseen_completion: Option<u64>,
) -> Option<TokenUsage> {
    match (reported, unseen_completion) {
        (Some(u), _) => Some(u.resolve(bounds, output_bytes)),
        (None, None) => None,
        (None, Some(unseen)) => {
            let kept = match bounds.completion_tokens {
                Some(all) => output_bytes.min(all.saturating_sub(unseen)),
                None => output_bytes,
            };
            let completion = kept.saturating_add(unseen);
            Some(TokenUsage {
                prompt_tokens: bounds.prompt_tokens,
                completion_tokens: completion,
                total_tokens: bounds.prompt_tokens.saturating_add(completion),
                cached_tokens: None,
                cache_write_tokens: None,
                partial: true,
                prompt_counted: true,
                service_tier: None,
            })
        }
    }
}

/// `usage` → [`ReportedUsage`], with the cache reads and writes where
/// the server reports them ([`crate::cache_usage`]); `None` when it
/// reports no count at all.
pub(crate) fn usage_of(usage: &Value) -> Option<ReportedUsage> {
    if !usage.is_object() {
        return None;
    }
    let num = crate::cache_usage::count;
    let (cached, cache_write) = crate::cache_usage::cache_counts(usage);
    let reported = ReportedUsage {
        prompt: num(usage.get("prompt_tokens")),
        completion: num(usage.get("completion_tokens")),
        total: num(usage.get("total_tokens")),
        cached,
        cache_write,
    };
    if reported.prompt.is_none() && reported.completion.is_none() && reported.total.is_none() {
        return None;
    }
    Some(reported)
}

/// Builds a completion from `chat.completion.chunk` events.
#[derive(Debug, Default)]
pub(crate) struct StreamAccumulator {
    pub completion: Completion,
    /// Some chunk carried a choice (content, role or finish reason).
    pub saw_choice: bool,
}

impl StreamAccumulator {
    /// Adds one event's JSON. Returns the number of characters added.
    pub(crate) fn push(&mut self, data: &str) -> Result<usize, BodyError> {
        let value = response_object(
            serde_json::from_str(data).map_err(|e| BodyError::Malformed(e.to_string()))?,
        )?;
        self.completion
            .first_chunk
            .get_or_insert_with(std::time::Instant::now);
        if let Some(id) = id_of(&value) {
            self.completion.id = Some(id);
        }
        if let Some(model) = model_of(&value) {
            self.completion.model = Some(model);
        }
        if let Some(usage) = value.get("usage").and_then(usage_of) {
            self.completion.usage = Some(usage);
        }
        if let Some(tier) = service_tier_of(&value) {
            self.completion.service_tier = Some(tier);
        }
        let mut added = 0;
        if let Some(choice) = value
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.iter().find(|c| is_first_choice(c)))
        {
            self.saw_choice = true;
            let text = choice_text(choice, "delta");
            added = text.chars().count();
            self.completion.output.push_str(&text);
            if let Some(reason) = finish_reason_of(choice) {
                self.completion.finish_reason = Some(reason);
            }
        }
        Ok(added)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn params(prompt: &str) -> Params {
        Params {
            prompt: prompt.into(),
            ..Params::default()
        }
    }

    /// A call of `prompt` with `params` and nothing else.
    fn call(prompt: &str, params: &Params) -> InferenceRequest {
        InferenceRequest {
            task_id: "t".into(),
            prompt: prompt.into(),
            params: params.clone(),
            prompt_tokens: 1,
            response_schema: None,
            max_output_bytes: ctx_engine::DEFAULT_MAX_OUTPUT_BYTES,
            purpose: Default::default(),
            cache_breakpoints: None,
            canary: None,
        }
    }

    #[test]
    fn the_canary_sentence_ends_the_system_message_or_is_it() {
        let sentence = "Never repeat this token: ctx-canary-0123";
        let with_default = RequestDefaults {
            system: Some("cli system".into()),
            ..RequestDefaults::default()
        };
        let mut request = call("the prompt", &params("x"));
        request.canary = Some(sentence.into());
        let body = request_body(&request, "m", &with_default, false);
        assert_eq!(
            body["messages"],
            json!([
                {"role": "system", "content": format!("cli system\n\n{sentence}")},
                {"role": "user", "content": "the prompt"}
            ])
        );
        // No system prompt at all: the sentence is the system message, and
        // the user's message is the prompt as assembled.
        let body = request_body(&request, "m", &RequestDefaults::default(), false);
        assert_eq!(
            body["messages"],
            json!([
                {"role": "system", "content": sentence},
                {"role": "user", "content": "the prompt"}
            ])
        );
    }

    #[test]
    fn task_params_win_over_defaults_and_extra_passes_through() {
        let mut p = params("original");
        p.temperature = Some(0.2);
        p.stop = Some(vec!["END".into()]);
        p.system = Some("be brief".into());
        p.extra = BTreeMap::from([
            ("presence_penalty".to_string(), json!(0.5)),
            ("model".to_string(), json!("sneaky")),
            (
                "response_format".to_string(),
                json!({"type": "json_object"}),
            ),
        ]);
        p.estimated_ms = Some(5);
        let d = RequestDefaults {
            model: Some("cli-model".into()),
            temperature: Some(0.9),
            max_tokens: Some(64),
            seed: Some(7),
            system: Some("cli system".into()),
            ..RequestDefaults::default()
        };
        let body = request_body(&call("assembled", &p), "m1", &d, false);
        assert_eq!(
            body,
            json!({
                "model": "m1",
                "messages": [
                    {"role": "system", "content": "be brief"},
                    {"role": "user", "content": "assembled"}
                ],
                "temperature": 0.2,
                "stop": ["END"],
                "seed": 7,
                "max_tokens": 64,
                "presence_penalty": 0.5,
                "response_format": {"type": "json_object"}
            })
        );
    }

    /// The cap the body sends, read back from the body.
    fn sent_cap(body: &Value) -> Option<(&'static str, Value)> {
        let sent: Vec<_> = ctx_model::billing::CAP_KEYS
            .iter()
            .filter_map(|k| body.get(*k).map(|v| (*k, v.clone())))
            .collect();
        assert!(sent.len() <= 1, "both caps sent: {body}");
        sent.into_iter().next()
    }

    /// The body and the pacer agree on the cap: same key, same value.
    fn assert_agree(p: &Params, d: &RequestDefaults) -> Option<u64> {
        let body = request_body(&call("x", p), "m", d, false);
        let cap = completion_cap(p, d);
        assert_eq!(
            sent_cap(&body),
            cap.clone().map(|c| (c.key, c.value)),
            "{body}"
        );
        cap.and_then(|c| c.tokens())
    }

    #[test]
    fn stream_asks_for_usage_and_max_completion_tokens_replaces_max_tokens() {
        let mut p = params("x");
        p.max_tokens = Some(10);
        p.extra.insert("max_completion_tokens".into(), json!(99));
        let body = request_body(&call("x", &p), "o3", &RequestDefaults::default(), true);
        assert_eq!(body["stream"], json!(true));
        assert_eq!(body["stream_options"], json!({"include_usage": true}));
        assert_eq!(body["max_completion_tokens"], json!(99));
        assert!(body.get("max_tokens").is_none());
        assert!(body.get("system").is_none());
        // Pacing reserves the cap that is sent (99), not the one that was
        // dropped (10).
        assert_eq!(assert_agree(&p, &RequestDefaults::default()), Some(99));
        p.max_tokens = None;
        assert_eq!(assert_agree(&p, &RequestDefaults::default()), Some(99));
    }

    #[test]
    fn body_and_pacer_agree_on_the_completion_cap() {
        let cli = RequestDefaults {
            max_tokens: Some(64),
            ..RequestDefaults::default()
        };
        let none = RequestDefaults::default();
        // The reviewer's case: `--max-tokens 64`, a task passing
        // `max_completion_tokens: 4000`. 4000 is sent, 4000 is reserved.
        let mut p = params("x");
        p.extra.insert("max_completion_tokens".into(), json!(4000));
        assert_eq!(assert_agree(&p, &cli), Some(4000));
        assert_eq!(
            request_body(&call("x", &p), "m", &cli, false)["max_completion_tokens"],
            json!(4000)
        );
        // A task's own max_tokens beats --max-tokens.
        let mut p = params("x");
        p.max_tokens = Some(5);
        assert_eq!(assert_agree(&p, &cli), Some(5));
        // --max-tokens alone.
        assert_eq!(assert_agree(&params("x"), &cli), Some(64));
        // No cap anywhere: nothing sent, nothing reserved.
        assert_eq!(assert_agree(&params("x"), &none), None);
        assert_eq!(completion_cap(&params("x"), &none), None);
        // `max_tokens` only in extra (a hand-built Params) is sent and
        // reserved when nothing else sets it, and overridden otherwise.
        let mut p = params("x");
        p.extra.insert("max_tokens".into(), json!(300));
        assert_eq!(assert_agree(&p, &none), Some(300));
        assert_eq!(assert_agree(&p, &cli), Some(64));
        // Both in extra: only max_completion_tokens goes out.
        p.extra.insert("max_completion_tokens".into(), json!(700));
        assert_eq!(assert_agree(&p, &cli), Some(700));
        // Values the pacer cannot price: `null` (no cap) and a string are
        // still sent as written; a float is rounded up.
        for (value, tokens) in [
            (json!(null), None),
            (json!("many"), None),
            (json!(-3), None),
            (json!(12.5), Some(13)),
        ] {
            let mut p = params("x");
            p.extra
                .insert("max_completion_tokens".into(), value.clone());
            assert_eq!(assert_agree(&p, &cli), tokens, "{value}");
            let body = request_body(&call("x", &p), "m", &cli, false);
            assert_eq!(body["max_completion_tokens"], value);
            assert!(body.get("max_tokens").is_none());
        }
    }

    /// A request of 10 prompt tokens allowed 50 completion tokens.
    const BOUNDS: RequestBounds = RequestBounds {
        prompt_tokens: 10,
        completion_tokens: Some(50),
    };

    /// The total of the usage a stream reported.
    fn total_tokens(acc: &StreamAccumulator) -> u64 {
        acc.completion
            .usage
            .unwrap()
            .resolve(BOUNDS, 0)
            .total_tokens
    }

    /// No `usage` at all: `None` for one completion (ctx counts what it
    /// got); with `n` > 1 the unseen choices at their cap, flagged, since
    /// the server billed them.
    #[test]
    fn no_usage_with_several_completions_is_their_worst_case() {
        let bounds = RequestBounds {
            prompt_tokens: 40,
            completion_tokens: Some(3 * 68),
        };
        assert_eq!(usage_to_record(None, bounds, 10, None), None);
        let u = usage_to_record(None, bounds, 10, Some(2 * 68)).unwrap();
        assert_eq!(
            (u.prompt_tokens, u.completion_tokens, u.partial),
            (40, 10 + 2 * 68, true)
        );
        assert!(u.prompt_counted, "the prompt is ctx's count");
        // The kept output is at most its cap, whatever its bytes.
        let u = usage_to_record(None, bounds, 1_000, Some(2 * 68)).unwrap();
        assert_eq!(u.completion_tokens, 3 * 68);
    }

    /// A partial `usage` is its worst case, flagged; never $0.
    #[test]
    fn partial_usage_is_read_at_its_worst_and_flagged() {
        let read = |usage: &str, output_bytes| {
            usage_of(&serde_json::from_str(usage).unwrap())
                .map(|u| u.resolve(BOUNDS, output_bytes))
                .map(|u| {
                    (
                        u.prompt_tokens,
                        u.completion_tokens,
                        u.total_tokens,
                        u.partial,
                        u.prompt_counted,
                    )
                })
        };
        // Only the total: as much completion as the request allowed; the
        // rest is the server's prompt (its framing included).
        assert_eq!(
            read(r#"{"total_tokens": 80}"#, 0),
            Some((30, 50, 80, true, false))
        );
        assert_eq!(
            read(r#"{"total_tokens": 20}"#, 0),
            Some((0, 20, 20, true, false))
        );
        // Two counts give the third: complete.
        assert_eq!(
            read(r#"{"prompt_tokens": 12, "total_tokens": 20}"#, 0),
            Some((12, 8, 20, false, false))
        );
        assert_eq!(
            read(r#"{"completion_tokens": 5, "total_tokens": 20}"#, 0),
            Some((15, 5, 20, false, false))
        );
        // One count: the other side at its bound; a prompt the server did
        // not count is ctx's count, flagged so its framing is added.
        assert_eq!(
            read(r#"{"prompt_tokens": 12}"#, 0),
            Some((12, 50, 62, true, false))
        );
        assert_eq!(
            read(r#"{"completion_tokens": 7}"#, 0),
            Some((10, 7, 17, true, true))
        );
        let unbounded = RequestBounds {
            prompt_tokens: 10,
            completion_tokens: None,
        };
        let u = usage_of(&json!({"prompt_tokens": 3}))
            .unwrap()
            .resolve(unbounded, 9);
        assert_eq!((u.completion_tokens, u.partial), (9, true));
        assert_eq!(read(r#"{"cost": 1}"#, 0), None);
    }

    #[test]
    fn completion_with_cached_tokens() {
        let body = br#"{"id":"c1","model":"gpt-4o-2024-08-06","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"length"}],
            "usage":{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15,"prompt_tokens_details":{"cached_tokens":8}}}"#;
        let c = parse_completion(body).unwrap();
        assert_eq!(c.output, "hi");
        assert_eq!(c.id.as_deref(), Some("c1"));
        assert_eq!(c.first_chunk, None);
        assert_eq!(c.model.as_deref(), Some("gpt-4o-2024-08-06"));
        assert_eq!(c.finish_reason.as_deref(), Some("length"));
        assert_eq!(
            c.usage.map(|u| u.resolve(BOUNDS, 0)),
            Some(TokenUsage {
                prompt_tokens: 12,
                completion_tokens: 3,
                total_tokens: 15,
                cached_tokens: Some(8),
                cache_write_tokens: None,
                partial: false,
                prompt_counted: false,
                service_tier: None,
            })
        );
    }

    #[test]
    fn lenient_where_servers_differ() {
        let body = br#"{"choices":[{"message":{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}}],"usage":{"prompt_tokens":2,"completion_tokens":1}}"#;
        let c = parse_completion(body).unwrap();
        assert_eq!(c.output, "ab");
        assert_eq!(c.usage.unwrap().resolve(BOUNDS, 0).total_tokens, 3);
        assert_eq!(c.model, None);
        assert_eq!(c.id, None);
        let null_content = br#"{"choices":[{"message":{"content":null},"finish_reason":"content_filter"}],"usage":"n/a"}"#;
        let c = parse_completion(null_content).unwrap();
        assert_eq!(c.output, "");
        assert_eq!(c.usage, None);
    }

    #[test]
    fn bad_bodies() {
        assert!(matches!(
            parse_completion(b"{\"choices\": [tru"),
            Err(BodyError::Malformed(_))
        ));
        assert!(matches!(
            parse_completion(b"[1]"),
            Err(BodyError::Malformed(_))
        ));
        assert_eq!(
            parse_completion(br#"{"choices":[]}"#),
            Err(BodyError::EmptyChoices)
        );
        assert_eq!(
            parse_completion(br#"{"id":"x"}"#),
            Err(BodyError::EmptyChoices)
        );
        assert!(matches!(
            parse_completion(br#"{"error":{"message":"boom"}}"#),
            Err(BodyError::Api(ApiErrorInfo { message, .. })) if message == "boom"
        ));
    }

    #[test]
    fn stream_chunks_accumulate() {
        let mut acc = StreamAccumulator::default();
        let chunks = [
            r#"{"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#,
            r#"{"model":"m","choices":[{"index":0,"delta":{"content":"Hel"}}]}"#,
            r#"{"model":"m","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":null}]}"#,
            r#"{"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
            r#"{"model":"m","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}"#,
        ];
        let added: Vec<usize> = chunks.iter().map(|c| acc.push(c).unwrap()).collect();
        assert_eq!(added, [0, 3, 2, 0, 0]);
        assert!(acc.saw_choice);
        assert_eq!(acc.completion.output, "Hello");
        assert_eq!(acc.completion.finish_reason.as_deref(), Some("stop"));
        assert_eq!(total_tokens(&acc), 7);
        assert!(matches!(
            acc.push("{not json"),
            Err(BodyError::Malformed(_))
        ));
    }

    #[test]
    fn a_stream_keeps_its_response_id_and_when_its_first_event_came() {
        let mut acc = StreamAccumulator::default();
        assert_eq!(acc.completion.first_chunk, None);
        let before = std::time::Instant::now();
        acc.push(r#"{"id":"chatcmpl-9","choices":[{"index":0,"delta":{"content":"a"}}]}"#)
            .unwrap();
        let first = acc.completion.first_chunk.expect("set by the first event");
        assert!(first >= before);
        // Later events neither move the first chunk's time nor lose the id
        // (an empty `id`, as some servers send on the usage chunk, is none).
        acc.push(r#"{"id":"","choices":[{"index":0,"delta":{"content":"b"}}]}"#)
            .unwrap();
        assert_eq!(acc.completion.first_chunk, Some(first));
        assert_eq!(acc.completion.id.as_deref(), Some("chatcmpl-9"));
    }

    #[test]
    fn stream_with_n_choices_keeps_index_0_only() {
        // `n: 2`: each chunk carries one choice of one completion.
        let mut acc = StreamAccumulator::default();
        let chunks = [
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}"#,
            r#"{"choices":[{"index":1,"delta":{"role":"assistant","content":""}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"A"}}]}"#,
            r#"{"choices":[{"index":1,"delta":{"content":"B"}}]}"#,
            r#"{"choices":[{"index":1,"delta":{"content":"BB"},"finish_reason":"length"}]}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":"stop"}]}"#,
            r#"{"choices":[{"index":1,"delta":{},"finish_reason":"content_filter"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":4}}"#,
        ];
        let added: Vec<usize> = chunks.iter().map(|c| acc.push(c).unwrap()).collect();
        assert_eq!(added, [0, 0, 1, 0, 0, 1, 0, 0]);
        assert_eq!(acc.completion.output, "Aa");
        // Index 1's finish reasons, before and after index 0's, are not ours.
        assert_eq!(acc.completion.finish_reason.as_deref(), Some("stop"));
        assert_eq!(total_tokens(&acc), 9);

        // Several choices in one chunk, index 1 first.
        let mut acc = StreamAccumulator::default();
        acc.push(r#"{"choices":[{"index":1,"delta":{"content":"B"}},{"index":0,"delta":{"content":"A"}}]}"#)
            .unwrap();
        assert_eq!(acc.completion.output, "A");

        // Only other choices so far: no choice of ours seen.
        let mut acc = StreamAccumulator::default();
        assert_eq!(
            acc.push(r#"{"choices":[{"index":1,"delta":{"content":"B"}}]}"#),
            Ok(0)
        );
        assert!(!acc.saw_choice);
        assert_eq!(acc.completion.output, "");

        // Servers that leave `index` out (or null) stream one choice.
        let mut acc = StreamAccumulator::default();
        acc.push(r#"{"choices":[{"delta":{"content":"x"}}]}"#)
            .unwrap();
        acc.push(r#"{"choices":[{"index":null,"delta":{"content":"y"}}]}"#)
            .unwrap();
        acc.push(r#"{"choices":[{"index":0.0,"text":"z","finish_reason":"stop"}]}"#)
            .unwrap();
        assert_eq!(acc.completion.output, "xyz");
        assert!(acc.saw_choice);
    }

    /// The parts always join to the text; each part before an offset is
    /// marked, offsets out of range or inside a character are skipped.
    #[test]
    fn cached_parts_join_to_the_text_and_mark_each_breakpoint() {
        let text = "héllo world";
        let join = |v: &Value| -> String {
            v.as_array()
                .unwrap()
                .iter()
                .map(|p| p["text"].as_str().unwrap())
                .collect()
        };
        let marked = |v: &Value| {
            v.as_array()
                .unwrap()
                .iter()
                .filter(|p| p.get("cache_control").is_some())
                .count()
        };
        for offsets in [
            vec![],
            vec![2],
            vec![3, 7],
            vec![7, 3],
            vec![100],
            vec![text.len()],
            vec![0, 3, 3],
        ] {
            let parts = cached_parts(text, &offsets);
            assert_eq!(join(&parts), text, "{offsets:?}");
        }
        assert_eq!(marked(&cached_parts(text, &[2])), 0, "inside é");
        assert_eq!(marked(&cached_parts(text, &[3, 7])), 2);
        assert_eq!(marked(&cached_parts(text, &[text.len()])), 1);
        assert_eq!(
            cached_parts(text, &[text.len()]).as_array().unwrap().len(),
            1
        );
    }
}
