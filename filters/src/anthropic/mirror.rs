//! The OpenAI mirror of an inbound Messages request: the same conversation as an OpenAI chat
//! body, so routing, credit holds and OpenAI-compatible providers see one request shape; and
//! [`check_openai_translatable`], for what that mirror had to leave out.
//!
//! The mirror is written as bytes from the slices validation located: a value carried over
//! (a text, a schema, a number) is copied as the client wrote it, and texts that are joined
//! are joined inside their JSON string (escapes are self-contained, so the inner bytes of
//! two strings concatenate into a valid one).

use serde_json::value::RawValue;
use serde_json::Value;

use super::validate::{Content, ContentBlock, Inbound};
use crate::json::raw;
use crate::GatewayError;

/// Refuses (400) what [`super::MessagesRequest::chat`] had to leave out, for a request about
/// to go to an OpenAI-compatible provider: content blocks other than text, images (base64 or
/// URL) and tool results of text, and server tools. Anthropic providers get the original body
/// and need no such check. Thinking blocks in assistant turns are not refused: they are the
/// model's own past reasoning, and OpenAI-compatible models take none.
pub(super) fn check_openai_translatable(b: &Inbound<'_>) -> Result<(), GatewayError> {
    let refuse = |field: String, what: &str| {
        GatewayError::invalid(format!(
            "{field}: {what} is not supported for this model: its provider (OpenAI-compatible \
             chat API) has no equivalent"
        ))
    };
    for (i, turn) in b.turns.iter().enumerate() {
        let Content::Blocks(blocks) = &turn.content else {
            continue;
        };
        for (j, block) in blocks.iter().enumerate() {
            let at = format!("messages[{i}].content[{j}]");
            if turn.system && block.ty != "text" {
                return Err(refuse(
                    format!("{at}.type"),
                    "a system turn's non-text block",
                ));
            }
            match block.ty.as_ref() {
                "text" | "tool_use" | "thinking" | "redacted_thinking" => {}
                "image" => {
                    let src = member(block.get("source"), "type").and_then(raw::as_str);
                    if !matches!(src.as_deref(), Some("base64" | "url")) {
                        return Err(refuse(format!("{at}.source.type"), "this image source"));
                    }
                }
                "tool_result" => {
                    let content = block.get("content").and_then(raw::array);
                    for (k, c) in content.into_iter().flatten().enumerate() {
                        if block_type(c).as_deref() != Some("text") {
                            return Err(refuse(format!("{at}.content[{k}].type"), "non-text"));
                        }
                    }
                }
                other => return Err(refuse(format!("{at}.type"), &format!("\"{other}\""))),
            }
        }
    }
    for (i, t) in b.tools.iter().enumerate() {
        let ty = raw::get(t, "type").and_then(raw::as_str);
        if !matches!(ty.as_deref(), None | Some("custom")) {
            return Err(refuse(format!("tools[{i}].type"), "a server tool"));
        }
    }
    Ok(())
}

/// Member `name` of `v` when `v` is an object.
fn member<'a>(v: Option<&'a RawValue>, name: &str) -> Option<&'a RawValue> {
    raw::get(&raw::object(v?)?, name)
}

/// The `type` of a block given as a raw value.
fn block_type(v: &RawValue) -> Option<std::borrow::Cow<'_, str>> {
    member(Some(v), "type").and_then(raw::as_str)
}

/// The inner bytes of a JSON string value (between its quotes, escapes kept); empty for
/// anything else, as the tree's `as_str().unwrap_or_default()` was.
fn inner(v: Option<&RawValue>) -> &str {
    match v {
        Some(v) if raw::is_string(v) => {
            let s = v.get();
            &s[1..s.len() - 1]
        }
        _ => "",
    }
}

/// Writes the texts as one JSON string, `sep` (already escaped) between them.
fn joined(out: &mut Vec<u8>, texts: &[&RawValue], sep: &str) {
    out.push(b'"');
    for (i, t) in texts.iter().enumerate() {
        if i > 0 {
            out.extend_from_slice(sep.as_bytes());
        }
        out.extend_from_slice(inner(Some(t)).as_bytes());
    }
    out.push(b'"');
}

/// Whether [`joined`] would write an empty string.
fn joins_empty(texts: &[&RawValue], sep: &str) -> bool {
    match texts {
        [] => true,
        [t] => inner(Some(t)).is_empty(),
        _ => sep.is_empty() && texts.iter().all(|t| inner(Some(t)).is_empty()),
    }
}

/// The texts of the text blocks of `v` (`v` itself when a string).
fn texts_of(v: Option<&RawValue>) -> Vec<&RawValue> {
    let Some(v) = v else {
        return Vec::new();
    };
    match raw::kind(v) {
        raw::Kind::String => vec![v],
        raw::Kind::Array => raw::array(v)
            .unwrap_or_default()
            .into_iter()
            .filter(|b| block_type(b).as_deref() == Some("text"))
            .filter_map(|b| member(Some(b), "text").filter(|t| raw::is_string(t)))
            .collect(),
        _ => Vec::new(),
    }
}

/// A text block's text, as sent (validation made sure it is a string).
fn text<'a>(b: &ContentBlock<'a>) -> &'a str {
    b.get("text").map_or("null", RawValue::get)
}

/// A JSON object under construction: members separated as they are added.
struct Obj<'o> {
    out: &'o mut Vec<u8>,
    first: bool,
}

impl<'o> Obj<'o> {
    fn new(out: &'o mut Vec<u8>) -> Self {
        out.push(b'{');
        Obj { out, first: true }
    }

    /// Starts member `key`; its value is written next.
    fn key(&mut self, key: &str) -> &mut Vec<u8> {
        if !std::mem::take(&mut self.first) {
            self.out.push(b',');
        }
        self.out.push(b'"');
        self.out.extend_from_slice(key.as_bytes());
        self.out.extend_from_slice(b"\":");
        self.out
    }

    fn raw(&mut self, key: &str, json: &str) {
        self.key(key).extend_from_slice(json.as_bytes());
    }

    fn end(self) {
        self.out.push(b'}');
    }
}

/// The OpenAI form of a validated Messages body.
pub(super) fn openai_body(b: &Inbound<'_>, out: &mut Vec<u8>) {
    let mut o = Obj::new(out);
    for k in ["model", "max_tokens", "temperature", "top_p"] {
        if let Some(v) = raw::get_set(&b.members, k) {
            o.raw(k, v.get());
        }
    }
    openai_messages(b, o.key("messages"));
    if b.get("stream").and_then(raw::as_bool) == Some(true) {
        o.raw("stream", "true");
        o.raw("stream_options", r#"{"include_usage":true}"#);
    }
    if let Some(s) = raw::get_set(&b.members, "stop_sequences") {
        o.raw("stop", s.get());
    }
    if !b.tools.is_empty() {
        let out = o.key("tools");
        out.push(b'[');
        for (i, t) in b.tools.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(br#"{"type":"function","function":"#);
            let mut f = Obj::new(out);
            f.raw("name", raw::get(t, "name").map_or("null", RawValue::get));
            if let Some(d) = raw::get(t, "description").filter(|d| raw::is_string(d)) {
                f.raw("description", d.get());
            }
            if let Some(s) = raw::get(t, "input_schema") {
                f.raw("parameters", s.get());
            }
            f.end();
            out.push(b'}');
        }
        out.push(b']');
    }
    if let Some(c) = b.get("tool_choice").and_then(raw::object) {
        let choice = match raw::get(&c, "type").and_then(raw::as_str).as_deref() {
            Some("any") => r#""required""#.to_owned(),
            Some("none") => r#""none""#.to_owned(),
            Some("tool") => {
                let name = raw::get(&c, "name").map_or("null", RawValue::get);
                format!(r#"{{"type":"function","function":{{"name":{name}}}}}"#)
            }
            _ => r#""auto""#.to_owned(),
        };
        o.raw("tool_choice", &choice);
        if raw::get(&c, "disable_parallel_tool_use").and_then(raw::as_bool) == Some(true) {
            o.raw("parallel_tool_calls", "false");
        }
    }
    if let Some(u) = member(b.get("metadata"), "user_id").filter(|u| raw::is_string(u)) {
        o.raw("user", u.get());
    }
    o.end();
}

/// The OpenAI-form messages of a validated Messages body, system prompt first.
pub(super) fn openai_messages(b: &Inbound<'_>, out: &mut Vec<u8>) {
    out.push(b'[');
    let mut list = List { out, first: true };
    if !joins_empty(&b.system, "\\n\\n") {
        let mut m = Obj::new(list.next());
        m.raw("role", r#""system""#);
        joined(m.key("content"), &b.system, "\\n\\n");
        m.end();
    }
    for turn in &b.turns {
        match &turn.content {
            Content::Text(s) => {
                let mut m = Obj::new(list.next());
                let role = if turn.assistant {
                    r#""assistant""#
                } else if turn.system {
                    r#""system""#
                } else {
                    r#""user""#
                };
                m.raw("role", role);
                m.raw("content", s.get());
                m.end();
            }
            Content::Blocks(blocks) if turn.assistant => assistant_message(blocks, list.next()),
            Content::Blocks(blocks) if turn.system => {
                // A system turn's text blocks, joined, where the turn stands.
                let texts: Vec<&RawValue> = blocks
                    .iter()
                    .filter(|b| b.ty == "text")
                    .filter_map(|b| b.get("text"))
                    .collect();
                let mut m = Obj::new(list.next());
                m.raw("role", r#""system""#);
                joined(m.key("content"), &texts, "\\n\\n");
                m.end();
            }
            Content::Blocks(blocks) => user_messages(blocks, &mut list),
        }
    }
    list.out.push(b']');
}

/// The elements of a JSON array under construction.
struct List<'o> {
    out: &'o mut Vec<u8>,
    first: bool,
}

impl List<'_> {
    fn next(&mut self) -> &mut Vec<u8> {
        if !std::mem::take(&mut self.first) {
            self.out.push(b',');
        }
        self.out
    }
}

/// An Anthropic user turn: its tool results as `tool` messages (OpenAI wants them right after
/// the assistant's calls), then one user message with the rest.
fn user_messages(blocks: &[ContentBlock<'_>], list: &mut List<'_>) {
    let mut parts: Vec<&ContentBlock<'_>> = Vec::new();
    for b in blocks {
        match b.ty.as_ref() {
            "tool_result" => {
                let mut m = Obj::new(list.next());
                m.raw("role", r#""tool""#);
                m.raw(
                    "tool_call_id",
                    b.get("tool_use_id").map_or("null", RawValue::get),
                );
                joined(m.key("content"), &texts_of(b.get("content")), "\\n\\n");
                m.end();
            }
            "text" => parts.push(b),
            "image" => {
                let source = member(b.get("source"), "type").and_then(raw::as_str);
                // Other sources (files) have no OpenAI form: check_openai_translatable.
                if matches!(source.as_deref(), Some("base64" | "url")) {
                    parts.push(b);
                }
            }
            // Documents and newer blocks: see check_openai_translatable.
            _ => {}
        }
    }
    match parts.as_slice() {
        [] => {}
        [p] if p.ty == "text" => {
            let mut m = Obj::new(list.next());
            m.raw("role", r#""user""#);
            m.raw("content", text(p));
            m.end();
        }
        _ => {
            let mut m = Obj::new(list.next());
            m.raw("role", r#""user""#);
            let out = m.key("content");
            out.push(b'[');
            for (i, p) in parts.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                if p.ty == "text" {
                    out.extend_from_slice(br#"{"type":"text","text":"#);
                    out.extend_from_slice(text(p).as_bytes());
                    out.push(b'}');
                } else {
                    out.extend_from_slice(br#"{"type":"image_url","image_url":{"url":""#);
                    image_url(p, out);
                    out.extend_from_slice(b"\"}}");
                }
            }
            out.push(b']');
            m.end();
        }
    }
}

/// The inner bytes of an image block's URL: a data URL for base64 data, else the URL given.
fn image_url(b: &ContentBlock<'_>, out: &mut Vec<u8>) {
    let source = b.get("source").and_then(raw::object).unwrap_or_default();
    let s = |k: &str| inner(raw::get(&source, k));
    let base64 = raw::get(&source, "type").and_then(raw::as_str).as_deref() == Some("base64");
    if base64 {
        out.extend_from_slice(b"data:");
        out.extend_from_slice(s("media_type").as_bytes());
        out.extend_from_slice(b";base64,");
        out.extend_from_slice(s("data").as_bytes());
    } else {
        out.extend_from_slice(s("url").as_bytes());
    }
}

/// An Anthropic assistant turn: text as content, tool_use blocks as tool calls; thinking is
/// dropped (no OpenAI-compatible model takes another's reasoning back).
fn assistant_message(blocks: &[ContentBlock<'_>], out: &mut Vec<u8>) {
    let texts: Vec<&RawValue> = blocks
        .iter()
        .filter(|b| b.ty == "text")
        .filter_map(|b| b.get("text"))
        .collect();
    let calls: Vec<&ContentBlock<'_>> = blocks.iter().filter(|b| b.ty == "tool_use").collect();
    let mut m = Obj::new(out);
    m.raw("role", r#""assistant""#);
    if !calls.is_empty() && joins_empty(&texts, "") {
        m.raw("content", "null");
    } else {
        joined(m.key("content"), &texts, "");
    }
    if !calls.is_empty() {
        let out = m.key("tool_calls");
        out.push(b'[');
        for (i, c) in calls.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            let mut call = Obj::new(out);
            call.raw("id", c.get("id").map_or("null", RawValue::get));
            call.raw("type", r#""function""#);
            let f = call.key("function");
            let mut f = Obj::new(f);
            f.raw("name", c.get("name").map_or("null", RawValue::get));
            // The arguments as a tree writes them (no spaces, sorted keys), as before.
            let input: Value = c
                .get("input")
                .and_then(|i| serde_json::from_str(i.get()).ok())
                .unwrap_or_else(|| Value::Object(Default::default()));
            // Writing into a Vec cannot fail.
            let _ = serde_json::to_writer(f.key("arguments"), &input.to_string());
            f.end();
            call.end();
        }
        out.push(b']');
    }
    m.end();
}
