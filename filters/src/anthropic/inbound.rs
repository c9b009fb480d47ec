//! The inbound Messages API: a client's Anthropic request, validated as Anthropic validates
//! it, and mirrored into an OpenAI chat request so the gateway can route, hold credits and
//! reach OpenAI-compatible providers with the same pipeline. Anthropic providers get the
//! client's body instead ([`MessagesRequest::passthrough_body`]), so nothing the mirror cannot
//! carry (prompt caching, thinking, `top_k`, document blocks) is lost on the way to them.
//!
//! The body is read once, in place, as the OpenAI path reads its own (`crate::json::raw`):
//! the top-level members, the messages and their content blocks are `&RawValue` slices of the
//! client's bytes, decoded only where a rule reads them. The checks live in `validate.rs`, the
//! mirror in `mirror.rs`; both read what validation located (`validate::Inbound`).

use serde_json::value::RawValue;
use serde_json::Value;

use super::mirror::{openai_body, openai_messages};
use super::validate::{validate, Inbound};
use crate::json::raw::{self, MemberList, ObjectError};
use crate::openai::request::{parse_chat_request, ChatRequest};
use crate::GatewayError;

/// A validated Messages request, borrowing from the client's body.
#[derive(Debug, Clone)]
pub struct MessagesRequest<'a> {
    /// The same conversation as an OpenAI chat body, read through [`MessagesRequest::chat`].
    pub chat_body: Vec<u8>,
    /// The body as received.
    raw: &'a [u8],
    body: Inbound<'a>,
}

impl<'a> MessagesRequest<'a> {
    /// The OpenAI mirror as a chat request borrowing from [`Self::chat_body`] (a request
    /// cannot own the bytes it borrows from, so it is parsed where it is used).
    pub fn chat(&self) -> Result<ChatRequest<'_>, GatewayError> {
        let mut chat = parse_chat_request(&self.chat_body)?;
        // An Anthropic client gets its usage in message_delta, never as an OpenAI usage chunk.
        chat.client_wants_usage = false;
        chat.raw_len = self.raw.len();
        Ok(chat)
    }

    /// A top-level member as sent (the last one when the key is repeated).
    pub fn get(&self, name: &str) -> Option<&'a RawValue> {
        raw::get(&self.body.members, name)
    }

    /// `thinking.budget_tokens` when it is a non-negative integer.
    pub fn thinking_budget(&self) -> Option<u64> {
        let thinking = raw::object(self.get("thinking")?)?;
        raw::as_u64(raw::get(&thinking, "budget_tokens")?)
    }

    /// Refuses (400) what the mirror had to leave out; see `mirror.rs`.
    pub fn check_openai_translatable(&self) -> Result<(), GatewayError> {
        super::mirror::check_openai_translatable(&self.body)
    }

    /// The body for an Anthropic provider: the client's members in its order, with the model
    /// and `max_tokens` the pipeline chose; everything else (cache_control, thinking, top_k,
    /// unknown blocks) copied byte for byte. A repeated top-level key is written once, with
    /// the value validation read (the last), so the provider cannot read another one.
    pub fn passthrough_body(&self, upstream_model: &str, max_tokens: u64) -> Vec<u8> {
        let members = &self.body.members;
        let mut out = Vec::with_capacity(self.raw.len() + upstream_model.len() + 32);
        out.push(b'{');
        let mut first = true;
        let mut member = |out: &mut Vec<u8>, key: &str| {
            if !std::mem::take(&mut first) {
                out.push(b',');
            }
            // Writing into a Vec cannot fail.
            let _ = serde_json::to_writer(&mut *out, key);
            out.push(b':');
        };
        // Which members are the last of their key (sorted, so a body of many keys stays cheap).
        let mut keep = vec![true; members.len()];
        let mut order: Vec<usize> = (0..members.len()).collect();
        order.sort_by(|&a, &b| members[a].0.cmp(&members[b].0));
        for w in order.windows(2) {
            if members[w[0]].0 == members[w[1]].0 {
                keep[w[0]] = false;
            }
        }
        for (i, (k, v)) in members.iter().enumerate() {
            if !keep[i] {
                continue;
            }
            member(&mut out, k);
            match k.as_ref() {
                "model" => drop(serde_json::to_writer(&mut out, upstream_model)),
                "max_tokens" => out.extend_from_slice(max_tokens.to_string().as_bytes()),
                _ => out.extend_from_slice(v.get().as_bytes()),
            }
        }
        // Validation requires both, so they were written above; kept whole for safety.
        if self.get("model").is_none() {
            member(&mut out, "model");
            let _ = serde_json::to_writer(&mut out, upstream_model);
        }
        if self.get("max_tokens").is_none() {
            member(&mut out, "max_tokens");
            out.extend_from_slice(max_tokens.to_string().as_bytes());
        }
        out.push(b'}');
        out
    }
}

fn bad(field: &str, what: &str) -> GatewayError {
    GatewayError::invalid(format!("{field}: {what}"))
}

/// Parses and validates a `POST /v1/messages` body. The mirror is validated as any chat
/// request is when [`MessagesRequest::chat`] reads it.
pub fn parse_messages_request(raw: &[u8]) -> Result<MessagesRequest<'_>, GatewayError> {
    let body = validate(raw, members(raw)?, false)?;
    let mut chat_body = Vec::with_capacity(raw.len() + 64);
    openai_body(&body, &mut chat_body);
    Ok(MessagesRequest {
        chat_body,
        raw,
        body,
    })
}

/// For `POST /v1/messages/count_tokens`: validates as [`parse_messages_request`] does, but
/// with no `max_tokens` required, and returns the OpenAI-form messages for
/// [`crate::tokens::count_prompt`]; tool definitions, which Anthropic counts as prompt, come
/// as one more system message holding their JSON text.
pub fn count_tokens_messages(raw: &[u8]) -> Result<Value, GatewayError> {
    let body = validate(raw, members(raw)?, true)?;
    let mut json = Vec::with_capacity(raw.len());
    openai_messages(&body, &mut json);
    let mut messages: Vec<Value> =
        serde_json::from_slice(&json).map_err(|e| GatewayError::internal(e.to_string()))?;
    if let Some(tools) = body.get("tools").filter(|t| !raw::is_null(t)) {
        // The JSON text as a tree writes it (sorted keys, no spaces), for a stable count.
        let tools: Value = serde_json::from_str(tools.get()).unwrap_or_default();
        messages.push(serde_json::json!({ "role": "system", "content": tools.to_string() }));
    }
    Ok(Value::Array(messages))
}

fn members(raw: &[u8]) -> Result<MemberList<'_>, GatewayError> {
    raw::parse_object(raw).map_err(|e| match e {
        ObjectError::Malformed(e) => bad("body", &format!("malformed JSON ({e})")),
        ObjectError::NotAnObject => bad("body", "must be a JSON object"),
    })
}
