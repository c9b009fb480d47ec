//! Anthropic's checks of a Messages body, each naming the field, run on the members located in
//! place (`crate::json::raw`); what they locate (messages, blocks, system texts, tools) is
//! kept in an [`Inbound`] for the mirror. Each rule keeps the meaning it had on a JSON tree: a
//! repeated key counts by its last occurrence, `null` is absent where Anthropic treats it so.

use std::borrow::Cow;

use serde_json::value::RawValue;

use crate::json::raw::{self, Kind, MemberList};
use crate::GatewayError;

const MAX_MODEL_BYTES: usize = 256;

/// What validation located in a Messages body: its members, and the parts the mirror and the
/// translatability check read again, so that nothing is parsed twice.
#[derive(Debug, Clone)]
pub(super) struct Inbound<'a> {
    /// The top-level members in the body's order (a repeated key: the last one counts).
    pub members: MemberList<'a>,
    pub turns: Vec<Turn<'a>>,
    /// The texts of `system` (one for a string, one per text block for an array).
    pub system: Vec<&'a RawValue>,
    /// Each tool's members (validation made sure each is an object).
    pub tools: Vec<MemberList<'a>>,
}

/// One message of the conversation.
#[derive(Debug, Clone)]
pub(super) struct Turn<'a> {
    pub assistant: bool,
    /// A `system` turn inside `messages` (today's API: instructions given mid-conversation,
    /// which Claude Code sends).
    pub system: bool,
    pub content: Content<'a>,
}

#[derive(Debug, Clone)]
pub(super) enum Content<'a> {
    /// A string content, as sent.
    Text(&'a RawValue),
    Blocks(Vec<ContentBlock<'a>>),
}

/// A content block: its decoded `type` and its members as sent.
#[derive(Debug, Clone)]
pub(super) struct ContentBlock<'a> {
    pub ty: Cow<'a, str>,
    pub members: MemberList<'a>,
}

impl<'a> ContentBlock<'a> {
    pub fn get(&self, name: &str) -> Option<&'a RawValue> {
        raw::get(&self.members, name)
    }
}

impl Inbound<'_> {
    pub fn get(&self, name: &str) -> Option<&RawValue> {
        raw::get(&self.members, name)
    }
}

fn bad(field: &str, what: &str) -> GatewayError {
    GatewayError::invalid(format!("{field}: {what}"))
}

/// Validates the members of the body `raw`. `counting` (count_tokens): no `max_tokens` is
/// needed, and any thinking budget below `u32::MAX` passes, as there is no output to size.
/// The checks run in a fixed order, so a body with several faults is always told the same one.
pub(super) fn validate<'a>(
    raw: &'a [u8],
    members: MemberList<'a>,
    counting: bool,
) -> Result<Inbound<'a>, GatewayError> {
    check_model(&members)?;
    let max_tokens = if counting {
        u64::from(u32::MAX)
    } else {
        check_max_tokens(&members)?
    };
    let turns = check_messages(&members)?;
    let system = match raw::get_set(&members, "system") {
        None => Vec::new(),
        Some(s) if raw::is_string(s) => vec![s],
        Some(s) => system_texts(s)
            .ok_or_else(|| bad("system", "must be a string or an array of text blocks"))?,
    };
    check_sampling(&members)?;
    let tools = match raw::get_set(&members, "tools") {
        None => Vec::new(),
        Some(v) => check_tools(v)?,
    };
    check_thinking_budget(&members, max_tokens)?;
    refuse_unmetered(&members)?;
    if let Some(path) = unknown_cache_ttl(raw, &members, counting) {
        return Err(bad(
            &path,
            "must be \"5m\" or \"1h\" (the cache lifetimes Anthropic offers)",
        ));
    }
    if let Some(c) = raw::get_set(&members, "tool_choice") {
        check_tool_choice(c)?;
    }
    Ok(Inbound {
        members,
        turns,
        system,
        tools,
    })
}

fn check_model(members: &MemberList<'_>) -> Result<(), GatewayError> {
    match raw::get(members, "model").map(|v| (raw::kind(v), v)) {
        None | Some((Kind::Null, _)) => Err(bad("model", "is required")),
        Some((Kind::String, v)) => match raw::as_str(v) {
            Some(s) if s.trim().is_empty() => Err(bad("model", "must not be empty")),
            // A model name goes into logs, metrics labels and the ledger: no novel-length ones.
            Some(s) if s.len() > MAX_MODEL_BYTES => Err(bad("model", "must be at most 256 bytes")),
            Some(_) => Ok(()),
            None => Err(bad("model", "must be a string")),
        },
        Some(_) => Err(bad("model", "must be a string")),
    }
}

fn check_max_tokens(members: &MemberList<'_>) -> Result<u64, GatewayError> {
    match raw::get_set(members, "max_tokens") {
        None => Err(bad("max_tokens", "is required")),
        Some(v) => match raw::as_u64(v) {
            Some(n) if n > 0 => Ok(n),
            _ => Err(bad("max_tokens", "must be a positive integer")),
        },
    }
}

/// `messages`: a non-empty array, each message checked in order.
fn check_messages<'a>(members: &MemberList<'a>) -> Result<Vec<Turn<'a>>, GatewayError> {
    let msgs = match raw::get_set(members, "messages").map(|v| (raw::kind(v), v)) {
        None => return Err(bad("messages", "is required")),
        Some((Kind::Array, v)) => raw::array(v).unwrap_or_default(),
        Some(_) => return Err(bad("messages", "must be an array")),
    };
    if msgs.is_empty() {
        return Err(bad("messages", "must contain at least one message"));
    }
    let mut turns = Vec::with_capacity(msgs.len());
    for (i, m) in msgs.into_iter().enumerate() {
        turns.push(check_message(i, m)?);
    }
    Ok(turns)
}

/// `stream`, `temperature` and `stop_sequences`.
fn check_sampling(members: &MemberList<'_>) -> Result<(), GatewayError> {
    if !matches!(
        raw::get(members, "stream").map(raw::kind),
        None | Some(Kind::Null | Kind::Bool)
    ) {
        return Err(bad("stream", "must be a boolean"));
    }
    if let Some(t) = raw::get_set(members, "temperature") {
        if !raw::as_f64(t).is_some_and(|t| (0.0..=1.0).contains(&t)) {
            return Err(bad("temperature", "must be a number between 0 and 1"));
        }
    }
    if let Some(s) = raw::get_set(members, "stop_sequences") {
        if !raw::array(s).is_some_and(|a| a.iter().all(|s| raw::is_string(s))) {
            return Err(bad("stop_sequences", "must be an array of strings"));
        }
    }
    Ok(())
}

/// `thinking.budget_tokens` must leave room for an answer within `max_tokens`.
fn check_thinking_budget(members: &MemberList<'_>, max_tokens: u64) -> Result<(), GatewayError> {
    let budget = raw::get(members, "thinking")
        .and_then(raw::object)
        .and_then(|t| raw::get(&t, "budget_tokens"));
    if let Some(budget) = budget {
        if raw::as_u64(budget).is_none_or(|n| n >= max_tokens) {
            return Err(bad(
                "thinking.budget_tokens",
                "must be an integer below max_tokens",
            ));
        }
    }
    Ok(())
}

/// Features Anthropic bills per use, outside the tokens the gateway meters: not offered rather
/// than given away.
fn refuse_unmetered(members: &MemberList<'_>) -> Result<(), GatewayError> {
    for field in ["mcp_servers", "container"] {
        if raw::get_set(members, field).is_some() {
            return Err(bad(
                field,
                "not offered through the gateway (billed by Anthropic per use, not metered here)",
            ));
        }
    }
    Ok(())
}

fn check_tool_choice(c: &RawValue) -> Result<(), GatewayError> {
    let c = raw::object(c);
    let ty = c
        .as_ref()
        .and_then(|c| raw::get(c, "type"))
        .and_then(raw::as_str);
    let named = || {
        c.as_ref()
            .and_then(|c| raw::get(c, "name"))
            .is_some_and(raw::is_string)
    };
    match ty.as_deref() {
        Some("auto" | "any" | "none") => Ok(()),
        Some("tool") if named() => Ok(()),
        _ => Err(bad(
            "tool_choice",
            "must be {\"type\": \"auto\"|\"any\"|\"none\"} or {\"type\": \"tool\", \"name\": …}",
        )),
    }
}

/// The texts of an array of text blocks; `None` if it is not one.
fn system_texts(s: &RawValue) -> Option<Vec<&RawValue>> {
    let blocks = raw::array(s)?;
    let mut texts = Vec::with_capacity(blocks.len());
    for b in blocks {
        let b = raw::object(b)?;
        let is_text = raw::get(&b, "type").and_then(raw::as_str).as_deref() == Some("text");
        match raw::get(&b, "text") {
            Some(t) if is_text && raw::is_string(t) => texts.push(t),
            _ => return None,
        }
    }
    Some(texts)
}

fn check_tools(v: &RawValue) -> Result<Vec<MemberList<'_>>, GatewayError> {
    let Some(list) = raw::array(v) else {
        return Err(bad("tools", "must be an array"));
    };
    let mut tools = Vec::with_capacity(list.len());
    for (i, t) in list.into_iter().enumerate() {
        // A tool that is not an object has no name: the name check below refuses it.
        let t = raw::object(t).unwrap_or_default();
        // Server tools (web search, code execution…) are billed by Anthropic per use, which
        // the gateway does not meter: not offered rather than given away.
        if let Some(ty) = raw::get_set(&t, "type") {
            if raw::as_str(ty).as_deref() != Some("custom") {
                return Err(bad(
                    &format!("tools[{i}].type"),
                    "server tools are not offered through the gateway; define the tool yourself",
                ));
            }
        }
        if !raw::get(&t, "name").is_some_and(raw::is_string) {
            return Err(bad(&format!("tools[{i}].name"), "must be a string"));
        }
        if !matches!(
            raw::get(&t, "input_schema").map(raw::kind),
            None | Some(Kind::Object)
        ) {
            return Err(bad(
                &format!("tools[{i}].input_schema"),
                "must be an object",
            ));
        }
        tools.push(t);
    }
    Ok(tools)
}

/// Where a `cache_control` asks for a TTL other than Anthropic's two (`5m`, the default, and
/// `1h`, whose writes are billed at `cache_write_1h_credits_per_1k`), if anywhere. The walk
/// visits objects in key order, so the path named is the one a sorted JSON map would have
/// found first.
fn unknown_cache_ttl(raw: &[u8], members: &MemberList<'_>, counting: bool) -> Option<String> {
    // A body that never spells the key (a key written with \u escapes would not show) has
    // none: the common case costs one scan, not a walk of every nested value.
    if memchr::memmem::find(raw, b"cache_control").is_none()
        && memchr::memmem::find(raw, b"\\u").is_none()
    {
        return None;
    }
    let mut members = members.clone();
    if counting {
        // Counting ignores `max_tokens`, whatever it holds.
        members.retain(|(k, _)| k != "max_tokens");
    }
    ttl_in_object(members, "body")
}

fn ttl_in_object(mut members: MemberList<'_>, at: &str) -> Option<String> {
    if let Some(cc) = raw::get(&members, "cache_control").and_then(raw::object) {
        if let Some(ttl) = raw::get(&cc, "ttl") {
            if !matches!(raw::as_str(ttl).as_deref(), Some("5m" | "1h")) {
                return Some(format!("{at}.cache_control.ttl"));
            }
        }
    }
    // Key order, the last of a repeated key kept (as a JSON map holds them).
    members.reverse();
    members.sort_by(|a, b| a.0.cmp(&b.0));
    members.dedup_by(|a, b| a.0 == b.0);
    members
        .iter()
        .find_map(|(k, v)| ttl_in_value(v, &format!("{at}.{k}")))
}

fn ttl_in_value(v: &RawValue, at: &str) -> Option<String> {
    match raw::kind(v) {
        Kind::Object => ttl_in_object(raw::object(v)?, at),
        Kind::Array => raw::array(v)?
            .into_iter()
            .enumerate()
            .find_map(|(i, v)| ttl_in_value(v, &format!("{at}[{i}]"))),
        _ => None,
    }
}

fn check_message(i: usize, m: &RawValue) -> Result<Turn<'_>, GatewayError> {
    let Some(m) = raw::object(m) else {
        return Err(bad(&format!("messages[{i}]"), "must be an object"));
    };
    let (assistant, system) = match raw::get(&m, "role").and_then(raw::as_str).as_deref() {
        Some("user") => (false, false),
        Some("assistant") => (true, false),
        Some("system") => (false, true),
        _ => {
            return Err(bad(
                &format!("messages[{i}].role"),
                "must be \"user\", \"assistant\" or \"system\"",
            ))
        }
    };
    let no_blocks = || {
        bad(
            &format!("messages[{i}].content"),
            "must be a string or an array of content blocks with a type",
        )
    };
    let blocks = match raw::get(&m, "content") {
        Some(c) if raw::is_string(c) => {
            return Ok(Turn {
                assistant,
                system,
                content: Content::Text(c),
            })
        }
        Some(c) if raw::kind(c) == Kind::Array => raw::array(c).unwrap_or_default(),
        _ => return Err(no_blocks()),
    };
    let mut typed = Vec::with_capacity(blocks.len());
    for b in blocks {
        let members = raw::object(b).ok_or_else(no_blocks)?;
        let ty: Cow<'_, str> = raw::get(&members, "type")
            .and_then(raw::as_str)
            .ok_or_else(no_blocks)?;
        typed.push(ContentBlock { ty, members });
    }
    for (j, b) in typed.iter().enumerate() {
        let at = |f: &str| format!("messages[{i}].content[{j}].{f}");
        let is_str = |k: &str| b.get(k).is_some_and(raw::is_string);
        match b.ty.as_ref() {
            "text" if !is_str("text") => return Err(bad(&at("text"), "must be a string")),
            "image" if b.get("source").map(raw::kind) != Some(Kind::Object) => {
                return Err(bad(&at("source"), "must be an object"))
            }
            "tool_use" if !is_str("id") => return Err(bad(&at("id"), "must be a string")),
            "tool_use" if !is_str("name") => return Err(bad(&at("name"), "must be a string")),
            "tool_result" if !is_str("tool_use_id") => {
                return Err(bad(&at("tool_use_id"), "must be a string"))
            }
            _ => {}
        }
    }
    Ok(Turn {
        assistant,
        system,
        content: Content::Blocks(typed),
    })
}
