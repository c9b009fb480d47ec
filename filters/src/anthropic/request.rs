//! Requests both ways.
//!
//! Here: an OpenAI chat request, already validated by [`crate::openai::request`], checked for
//! fields Anthropic cannot honour ([`check_translatable`]) and written as a Messages body
//! ([`openai_to_messages`]). A field that would change the reply and has no Anthropic
//! equivalent is refused rather than dropped, so a client never gets a reply that silently
//! ignored what it asked for; neutral values of those fields are accepted.
//!
//! The inbound Messages API ([`parse_messages_request`], [`MessagesRequest`],
//! [`count_tokens_messages`]) lives in `inbound.rs` and is re-exported here.

use serde_json::value::RawValue;

use super::blocks::{
    assistant_blocks, no_equivalent, text_blocks, user_blocks, Block, Body, Choice, Empty,
    Metadata, Schema, System, Tool, ToolContent, Turn,
};
pub use super::inbound::{count_tokens_messages, parse_messages_request, MessagesRequest};
use crate::json::raw::{self, Kind};
use crate::openai::request::{ChatRequest, Message};
use crate::GatewayError;

/// Fields of an OpenAI request that change the reply and have no Anthropic equivalent.
const NO_EQUIVALENT: &[&str] = &[
    "logprobs",
    "top_logprobs",
    "response_format",
    "logit_bias",
    "seed",
    "presence_penalty",
    "frequency_penalty",
    "audio",
    "modalities",
    "prediction",
    // The legacy form of tools: dropping them would answer without the functions offered.
    "functions",
    "function_call",
    // Reasoning and search options of OpenAI's own models; dropping them would answer as if
    // they had not been asked for.
    "reasoning_effort",
    "web_search_options",
];

/// Whether a (non-null) value of `field` asks for something: the neutral values are the
/// defaults OpenAI clients often send explicitly.
fn asks_for_something(field: &str, v: &RawValue) -> bool {
    let str_of = |v: &RawValue, k: &str| {
        raw::object(v).and_then(|o| raw::get(&o, k).and_then(raw::as_str).map(|s| s == "text"))
    };
    match field {
        "logprobs" => raw::as_bool(v) != Some(false),
        "response_format" => str_of(v, "type") != Some(true),
        "logit_bias" => raw::object(v).is_none_or(|o| !o.is_empty()),
        "presence_penalty" | "frequency_penalty" => raw::as_f64(v) != Some(0.0),
        "modalities" => !raw::array(v)
            .is_some_and(|a| a.len() == 1 && raw::as_str(a[0]).is_some_and(|s| s == "text")),
        _ => true,
    }
}

/// Refuses (400) OpenAI fields set to a value Anthropic cannot honour.
pub fn check_translatable(req: &ChatRequest<'_>) -> Result<(), GatewayError> {
    if req.n > 1 {
        return Err(no_equivalent("n"));
    }
    for field in NO_EQUIVALENT {
        if let Some(v) = req.get(field).filter(|v| !raw::is_null(v)) {
            if asks_for_something(field, v) {
                return Err(no_equivalent(field));
            }
        }
    }
    let tools = req.get("tools").and_then(raw::array).unwrap_or_default();
    let is_function = |t: &RawValue| {
        raw::object(t)
            .and_then(|t| {
                raw::get(&t, "type")
                    .and_then(raw::as_str)
                    .map(|s| s == "function")
            })
            .unwrap_or(false)
    };
    if let Some(i) = tools.iter().position(|t| !is_function(t)) {
        return Err(GatewayError::invalid(format!(
            "tools[{i}].type: only function tools have an equivalent in the Anthropic Messages API"
        )));
    }
    Ok(())
}

/// The Anthropic Messages body for a request that passed [`check_translatable`], written
/// from the typed request: texts, schemas and ids are copied from the client's body as sent.
pub fn openai_to_messages(
    req: &ChatRequest<'_>,
    upstream_model: &str,
    max_tokens: u64,
) -> Result<Vec<u8>, GatewayError> {
    let (system, messages) = translate_messages(&req.messages)?;
    let tools: Vec<Tool<'_>> = req
        .get("tools")
        .and_then(raw::array)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|t| raw::get(&raw::object(t)?, "function"))
        .map(tool)
        .collect();
    // Anthropic refuses a tool_choice without tools; OpenAI lets "none" or "auto" stand alone.
    let mut tool_choice = None;
    if !tools.is_empty() {
        let choice = |ty| Choice {
            r#type: ty,
            name: None,
            disable_parallel_tool_use: false,
        };
        tool_choice = match req.get("tool_choice") {
            Some(c) if raw::is_string(c) => match raw::as_str(c).as_deref() {
                Some("none") => Some(choice("none")),
                Some("required") => Some(choice("any")),
                _ => Some(choice("auto")),
            },
            Some(c) if raw::kind(c) == Kind::Object => raw::object(c)
                .and_then(|o| raw::object(raw::get(&o, "function")?))
                .and_then(|f| raw::get(&f, "name"))
                .map(|name| Choice {
                    name: Some(name),
                    ..choice("tool")
                }),
            _ => None,
        };
        if req.get("parallel_tool_calls").and_then(raw::as_bool) == Some(false) {
            let c = tool_choice.get_or_insert_with(|| choice("auto"));
            // Anthropic has the flag on auto, any and tool only; with "none" it is moot.
            c.disable_parallel_tool_use = c.r#type != "none";
        }
    }

    let stops = match req.get("stop") {
        Some(s) if raw::is_string(s) => vec![s],
        Some(s) => raw::array(s).unwrap_or_default(),
        None => Vec::new(),
    };
    // An empty stop sequence would end every reply at once; OpenAI ignores it, so do we.
    let stop_sequences = stops
        .into_iter()
        .filter(|s| raw::is_string(s) && s.get() != "\"\"")
        .collect();
    // OpenAI's range is 0–2, Anthropic's 0–1: clamp so requests valid for OpenAI still work.
    let temperature = req
        .get("temperature")
        .and_then(raw::as_f64)
        .map(|t| t.min(1.0));
    // Recent Claude models refuse temperature and top_p together: temperature wins, and a
    // neutral top_p of 1 (which OpenAI clients often send) is simply left out.
    let top_p = req
        .get("top_p")
        .filter(|p| raw::kind(p) == Kind::Number)
        .filter(|p| temperature.is_none() && raw::as_f64(p) != Some(1.0));
    let body = Body {
        model: upstream_model,
        max_tokens,
        messages,
        system,
        tools,
        tool_choice,
        stop_sequences,
        temperature,
        top_p,
        stream: req.get("stream").and_then(raw::as_bool),
        metadata: req
            .get("user")
            .filter(|u| raw::is_string(u))
            .map(|user_id| Metadata { user_id }),
    };
    serde_json::to_vec(&body).map_err(|e| GatewayError::internal(e.to_string()))
}

fn tool(f: &RawValue) -> Tool<'_> {
    let f = raw::object(f).unwrap_or_default();
    Tool {
        name: raw::get(&f, "name"),
        description: raw::get(&f, "description").filter(|d| raw::is_string(d)),
        input_schema: match raw::get(&f, "parameters").filter(|p| raw::kind(p) == Kind::Object) {
            Some(p) => Schema::Given(p),
            None => Schema::Empty {
                r#type: "object",
                properties: Empty {},
            },
        },
    }
}

/// The `system` value and the alternating `messages` of an OpenAI conversation.
fn translate_messages<'a>(
    msgs: &[Message<'a>],
) -> Result<(Option<System<'a>>, Vec<Turn<'a>>), GatewayError> {
    let mut system: Vec<Block<'a>> = Vec::new();
    let mut system_has_array = false;
    // (role, blocks) in order, before merging.
    let mut turns: Vec<(&'static str, Vec<Block<'a>>)> = Vec::new();
    for (i, m) in msgs.iter().enumerate() {
        let content = m.content;
        match m.role {
            "system" | "developer" => {
                system_has_array |= content.is_some_and(|c| raw::kind(c) == Kind::Array);
                system.extend(text_blocks(i, content, &["text"])?);
            }
            "user" => turns.push(("user", user_blocks(i, content)?)),
            "assistant" => turns.push(("assistant", assistant_blocks(i, m)?)),
            "tool" => {
                let content = match content.map(|c| (raw::kind(c), c)) {
                    Some((Kind::String, c)) => match raw::as_str(c) {
                        Some(s) if s.is_empty() => None,
                        s => s.map(ToolContent::Text),
                    },
                    _ => Some(ToolContent::Blocks(text_blocks(i, content, &["text"])?)),
                };
                let tool_use_id = m.tool_call_id;
                turns.push((
                    "user",
                    vec![Block::ToolResult {
                        tool_use_id,
                        content,
                    }],
                ));
            }
            role => {
                return Err(GatewayError::invalid(format!(
                    "messages[{i}].role: the legacy role \"{role}\" is not supported for this \
                     model: its provider (Anthropic Messages API) has no equivalent; use tool"
                )))
            }
        }
    }

    let system = match system.is_empty() {
        true => None,
        false if system_has_array => Some(System::Blocks(system)),
        false => Some(System::Text(
            system
                .iter()
                .filter_map(Block::text)
                .collect::<Vec<_>>()
                .join("\n\n"),
        )),
    };

    // Anthropic requires user and assistant turns to alternate and refuses empty content.
    let mut merged: Vec<(&'static str, Vec<Block<'a>>)> = Vec::new();
    for (role, blocks) in turns.into_iter().filter(|(_, b)| !b.is_empty()) {
        match merged.last_mut() {
            Some((r, prev)) if *r == role => prev.extend(blocks),
            _ => merged.push((role, blocks)),
        }
    }
    match merged.first() {
        None => {
            return Err(GatewayError::invalid(
                "messages: at least one user message is required",
            ))
        }
        Some(("assistant", _)) => {
            return Err(GatewayError::invalid(
                "messages: the first non-system message must be from the user for this model",
            ))
        }
        _ => {}
    }
    let messages = merged
        .into_iter()
        .map(|(role, mut blocks)| {
            // Anthropic wants the results of the previous turn's tool calls before anything
            // else in a user turn; a stable sort keeps each group's order.
            blocks.sort_by_key(|b| !matches!(b, Block::ToolResult { .. }));
            Turn {
                role,
                content: blocks,
            }
        })
        .collect();
    Ok((system, messages))
}
