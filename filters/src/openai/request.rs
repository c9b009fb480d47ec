//! Validation of a chat-completions body (SPEC.md, Chat completion request) and its rewrite
//! for an upstream.
//!
//! The table's fields are checked strictly and named in the error; fields beyond the table
//! that real OpenAI clients send (`top_p`, `seed`, `response_format`, roles `tool` and
//! `developer`, …) pass through untouched, so new OpenAI parameters keep working.
//!
//! The request is parsed once into [`ChatRequest`], which borrows from the body: the fields the
//! pipeline reads are decoded, everything else (message texts, tools, unknown members) stays a
//! `&RawValue` slice of the body. No `serde_json::Value` tree is built: a chat body is mostly
//! text the gateway only passes on, and the tree cost an allocation per string and per member.
//! The upstream body is the client's bytes with a few top-level members spliced in.

use std::borrow::Cow;

use serde_json::value::RawValue;

use super::tools::{check_tool_choice, check_tools, field_err};
use crate::json::raw::{self, Kind, MemberList, ObjectError};
use crate::json::splice::splice_members;
use crate::GatewayError;

const ROLES: &[&str] = &[
    "system",
    "user",
    "assistant",
    "tool",
    "developer",
    "function",
];
/// The longest model name accepted.
const MAX_MODEL_BYTES: usize = 256;
/// The most completions (`n`) one request may ask for.
const MAX_CHOICES: u64 = 128;

/// A validated request, borrowed from its body: the fields the pipeline needs, decoded, and
/// the body's members as sent, to pass on.
#[derive(Debug, Clone)]
pub struct ChatRequest<'a> {
    pub model: Cow<'a, str>,
    pub stream: bool,
    /// The client asked for a usage chunk (`stream_options.include_usage`).
    pub client_wants_usage: bool,
    /// `max_tokens`, or the newer `max_completion_tokens`.
    pub max_tokens: Option<u64>,
    /// `n`: completions asked for (1 when absent).
    pub n: u64,
    /// The conversation, each message validated.
    pub messages: Vec<Message<'a>>,
    /// The body's top-level members in order, values as sent.
    pub members: MemberList<'a>,
    /// The body the members were read from (the upstream body is spliced from it).
    pub raw: &'a [u8],
    /// Size of the body as the client sent it (an Anthropic client's: before its mirroring),
    /// for the prompt estimate.
    pub raw_len: usize,
}

/// One validated message; its parts stay as sent.
#[derive(Debug, Clone)]
pub struct Message<'a> {
    /// One of the accepted roles.
    pub role: &'static str,
    /// A string or an array of typed parts; `None` or `null` only on a tool-calling turn.
    pub content: Option<&'a RawValue>,
    /// An array when present (checked).
    pub tool_calls: Option<&'a RawValue>,
    pub function_call: Option<&'a RawValue>,
    /// A string for role `tool` (checked).
    pub tool_call_id: Option<&'a RawValue>,
}

impl<'a> ChatRequest<'a> {
    /// A top-level member as sent; the last one when the key is repeated.
    pub fn get(&self, name: &str) -> Option<&'a RawValue> {
        raw::get(&self.members, name)
    }

    fn has(&self, name: &str) -> bool {
        self.members.iter().any(|(k, _)| k == name)
    }
}

/// Parses and validates a request body; the request borrows from `raw`. The fields are checked
/// in a fixed order, so a body with several faults is always told the same one.
pub fn parse_chat_request(raw: &[u8]) -> Result<ChatRequest<'_>, GatewayError> {
    let members = raw::parse_object(raw).map_err(|e| match e {
        ObjectError::Malformed(e) => GatewayError::invalid(format!("body: malformed JSON ({e})")),
        ObjectError::NotAnObject => GatewayError::invalid("body: must be a JSON object"),
    })?;
    let model = check_model(&members)?;
    let messages = check_messages(&members)?;
    check_sampling(&members)?;
    let max_tokens = check_max_tokens(&members)?;
    let stream = match raw::get_set(&members, "stream") {
        None => false,
        Some(v) => raw::as_bool(v).ok_or_else(|| field_err("stream", "must be a boolean"))?,
    };
    let client_wants_usage = check_stream_options(&members)?;
    if let Some(tools) = raw::get(&members, "tools") {
        check_tools(tools)?;
    }
    if let Some(tc) = raw::get(&members, "tool_choice") {
        check_tool_choice(tc)?;
    }
    let n = match raw::get_set(&members, "n") {
        None => 1,
        // OpenAI's own bound; every choice is held for max_tokens.
        Some(v) => match raw::as_u64(v) {
            Some(n @ 1..=MAX_CHOICES) => n,
            _ => return Err(field_err("n", "must be an integer from 1 to 128")),
        },
    };
    check_stop(&members)?;
    Ok(ChatRequest {
        model,
        stream,
        client_wants_usage,
        max_tokens,
        n,
        messages,
        members,
        raw,
        raw_len: raw.len(),
    })
}

fn check_model<'a>(members: &MemberList<'a>) -> Result<Cow<'a, str>, GatewayError> {
    match raw::get(members, "model").map(|v| (raw::kind(v), v)) {
        None | Some((Kind::Null, _)) => Err(field_err("model", "is required")),
        Some((Kind::String, v)) => match raw::as_str(v) {
            Some(s) if s.trim().is_empty() => Err(field_err("model", "must not be empty")),
            // A model name goes into logs, metrics labels and the ledger: no novel-length ones.
            Some(s) if s.len() > MAX_MODEL_BYTES => {
                Err(field_err("model", "must be at most 256 bytes"))
            }
            Some(s) => Ok(s),
            None => Err(field_err("model", "must be a string")),
        },
        Some(_) => Err(field_err("model", "must be a string")),
    }
}

/// `messages`: a non-empty array, each message checked in order.
fn check_messages<'a>(members: &MemberList<'a>) -> Result<Vec<Message<'a>>, GatewayError> {
    match raw::get(members, "messages").map(|v| (raw::kind(v), v)) {
        None | Some((Kind::Null, _)) => Err(field_err("messages", "is required")),
        Some((Kind::Array, v)) => {
            let msgs = raw::array(v).unwrap_or_default();
            if msgs.is_empty() {
                return Err(field_err("messages", "must contain at least one message"));
            }
            let mut out = Vec::with_capacity(msgs.len());
            for (i, m) in msgs.into_iter().enumerate() {
                out.push(check_message(i, m)?);
            }
            Ok(out)
        }
        Some(_) => Err(field_err("messages", "must be an array")),
    }
}

/// `temperature` and `top_p` (`null` is absent).
fn check_sampling(members: &MemberList<'_>) -> Result<(), GatewayError> {
    if let Some(t) = raw::get(members, "temperature") {
        match raw::as_f64(t) {
            Some(x) if (0.0..=2.0).contains(&x) => {}
            Some(_) => return Err(field_err("temperature", "must be between 0.0 and 2.0")),
            None if raw::is_null(t) => {}
            None => return Err(field_err("temperature", "must be a number")),
        }
    }
    if let Some(t) = raw::get(members, "top_p") {
        match raw::as_f64(t) {
            Some(x) if (0.0..=1.0).contains(&x) => {}
            None if raw::is_null(t) => {}
            _ => return Err(field_err("top_p", "must be a number between 0 and 1")),
        }
    }
    Ok(())
}

/// `max_tokens` and the newer `max_completion_tokens`: the smaller of them when both are sent.
fn check_max_tokens(members: &MemberList<'_>) -> Result<Option<u64>, GatewayError> {
    let mut max_tokens = None;
    for key in ["max_tokens", "max_completion_tokens"] {
        let Some(v) = raw::get_set(members, key) else {
            continue;
        };
        match raw::as_u64(v) {
            Some(n) if n > 0 => max_tokens = Some(max_tokens.map_or(n, |m: u64| m.min(n))),
            _ => return Err(field_err(key, "must be a positive integer")),
        }
    }
    Ok(max_tokens)
}

/// Whether the client asked for a usage chunk (`stream_options.include_usage`).
fn check_stream_options(members: &MemberList<'_>) -> Result<bool, GatewayError> {
    let Some(v) = raw::get_set(members, "stream_options") else {
        return Ok(false);
    };
    let o = raw::object(v).ok_or_else(|| field_err("stream_options", "must be an object"))?;
    match raw::get_set(&o, "include_usage") {
        None => Ok(false),
        Some(v) => raw::as_bool(v)
            .ok_or_else(|| field_err("stream_options.include_usage", "must be a boolean")),
    }
}

fn check_stop(members: &MemberList<'_>) -> Result<(), GatewayError> {
    let Some(stop) = raw::get(members, "stop") else {
        return Ok(());
    };
    let ok = match raw::kind(stop) {
        Kind::Null | Kind::String => true,
        Kind::Array => raw::array(stop).is_some_and(|a| a.iter().all(|s| raw::is_string(s))),
        _ => false,
    };
    if !ok {
        return Err(field_err("stop", "must be a string or an array of strings"));
    }
    Ok(())
}

fn check_message(i: usize, m: &RawValue) -> Result<Message<'_>, GatewayError> {
    let field = |f: &str| format!("messages[{i}].{f}");
    let Some(o) = raw::object(m) else {
        return Err(field_err(&format!("messages[{i}]"), "must be an object"));
    };
    let get = |k: &str| raw::get(&o, k);
    let role = match get("role") {
        Some(r) if raw::is_string(r) => raw::as_str(r).unwrap_or_default(),
        None => return Err(field_err(&field("role"), "is required")),
        Some(_) => return Err(field_err(&field("role"), "must be a string")),
    };
    let Some(role) = ROLES.iter().copied().find(|r| *r == role) else {
        return Err(field_err(
            &field("role"),
            "must be one of system, user, assistant, tool, developer",
        ));
    };
    let (content, tool_calls, function_call) =
        (get("content"), get("tool_calls"), get("function_call"));
    let content_ok = match content.map(raw::kind) {
        Some(Kind::String) => true,
        Some(Kind::Array) => content.and_then(raw::array).is_some_and(|parts| {
            parts.iter().all(|p| {
                raw::object(p)
                    .and_then(|p| raw::get(&p, "type"))
                    .is_some_and(raw::is_string)
            })
        }),
        // An assistant turn that only calls tools carries no content.
        None | Some(Kind::Null) => {
            role == "assistant" && (tool_calls.is_some() || function_call.is_some())
        }
        Some(_) => false,
    };
    if !content_ok {
        return Err(match content.map(raw::kind) {
            None | Some(Kind::Null) => field_err(&field("content"), "is required"),
            _ => field_err(
                &field("content"),
                "must be a string or an array of content parts with a type",
            ),
        });
    }
    if tool_calls.is_some_and(|c| raw::kind(c) != Kind::Array) {
        return Err(field_err(&field("tool_calls"), "must be an array"));
    }
    let tool_call_id = get("tool_call_id");
    if role == "tool" && !tool_call_id.is_some_and(raw::is_string) {
        return Err(field_err(
            &field("tool_call_id"),
            "is required for role tool",
        ));
    }
    Ok(Message {
        role,
        content,
        tool_calls,
        function_call,
        tool_call_id,
    })
}

/// The body sent to an OpenAI-compatible upstream for one attempt: the candidate's upstream
/// model name, `max_tokens` as the pipeline decided, and, for streams, a request for the usage
/// chunk so that metering never depends on counting.
pub fn upstream_body(
    req: &ChatRequest<'_>,
    upstream_model: &str,
    max_tokens: Option<u64>,
) -> Vec<u8> {
    // The client's bytes with those members spliced in: this runs for every request and every
    // failover attempt, and everything else passes through as sent.
    let mut model = Vec::with_capacity(upstream_model.len() + 2);
    // Writing into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut model, upstream_model);
    let limit = max_tokens.map(|n| n.to_string());
    let mut set: Vec<(&str, &[u8])> = Vec::with_capacity(4);
    set.push(("model", &model));
    if let Some(n) = &limit {
        // The newer field is kept and capped; no max_tokens is invented beside it.
        if req.has("max_completion_tokens") {
            set.push(("max_completion_tokens", n.as_bytes()));
        }
        if req.has("max_tokens") || !req.has("max_completion_tokens") {
            set.push(("max_tokens", n.as_bytes()));
        }
    }
    let stream_options = req.stream.then(|| usage_options(req.get("stream_options")));
    if let Some(o) = &stream_options {
        set.push(("stream_options", o));
    }
    let mut out = Vec::with_capacity(req.raw.len() + upstream_model.len() + 64);
    splice_members(req.raw, &req.members, &set, &mut out);
    out
}

/// The client's `stream_options` with `include_usage` set, or just that when it sent none.
fn usage_options(client: Option<&RawValue>) -> Vec<u8> {
    let mut out = Vec::with_capacity(client.map_or(0, |o| o.get().len()) + 24);
    match client.and_then(|o| Some((o, raw::object(o)?))) {
        Some((o, members)) => splice_members(
            o.get().as_bytes(),
            &members,
            &[("include_usage", b"true")],
            &mut out,
        ),
        None => out.extend_from_slice(br#"{"include_usage":true}"#),
    }
    out
}
