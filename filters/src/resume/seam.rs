//! The seam's rewrites of a later leg's output, per frame. A translator's output is whole SSE
//! events (`event:` line, `data:` lines, a blank line), so it is read event by event; only a
//! resumed stream's later legs pay for it.

use memchr::memmem;
use serde_json::{Map, Value};

use crate::anthropic::named_event;
use crate::openai::stream::sse_event;
use crate::Usage;

/// What the seam writes into a later leg's events.
pub(super) struct Stitch<'a> {
    pub id: Option<&'a Value>,
    pub created: Option<&'a Value>,
    pub text_index: u64,
    /// At the close: the whole stream's usage, for the closing usage.
    pub total: Option<Usage>,
}

/// One SSE event of a translator's output.
struct Event<'a> {
    raw: &'a str,
    name: Option<&'a str>,
    data: Option<String>,
}

fn events(out: &[u8]) -> Vec<Event<'_>> {
    let text = std::str::from_utf8(out).unwrap_or_default();
    text.split_inclusive("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|raw| {
            let mut name = None;
            let mut data: Option<String> = None;
            for line in raw.lines() {
                if let Some(n) = line.strip_prefix("event: ") {
                    name = Some(n.trim());
                } else if let Some(d) = line.strip_prefix("data: ") {
                    match &mut data {
                        Some(all) => {
                            all.push('\n');
                            all.push_str(d);
                        }
                        None => data = Some(d.to_owned()),
                    }
                }
            }
            Event { raw, name, data }
        })
        .collect()
}

fn object(data: Option<&str>) -> Option<Map<String, Value>> {
    match serde_json::from_str(data?) {
        Ok(Value::Object(o)) => Some(o),
        _ => None,
    }
}

/// The first chunk's `id` and `created`.
pub(super) fn chunk_ids(out: &[u8]) -> Option<(Value, Option<Value>)> {
    events(out).into_iter().find_map(|e| {
        let o = object(e.data.as_deref())?;
        Some((o.get("id")?.clone(), o.get("created").cloned()))
    })
}

/// Whether chunks carry a tool call: a `"tool_calls"` member holding a non-empty array (text
/// that mentions the name is escaped inside its string, so it does not match).
pub(super) fn has_tool_calls(out: &[u8]) -> bool {
    let needle = b"\"tool_calls\"";
    memmem::find_iter(out, needle).any(|at| {
        let mut rest = out[at + needle.len()..]
            .iter()
            .copied()
            .filter(|b| !b.is_ascii_whitespace());
        rest.next() == Some(b':') && rest.next() == Some(b'[') && rest.next() != Some(b']')
    })
}

/// Messages: each `content_block_start` of the output, as (index, block type); `None` when
/// there is none (the common case, found without parsing).
pub(super) fn block_starts(out: &[u8]) -> Option<Vec<(u64, String)>> {
    memmem::find(out, b"content_block_start")?;
    let found = events(out)
        .into_iter()
        .filter(|e| e.name == Some("content_block_start"))
        .filter_map(|e| {
            let o = object(e.data.as_deref())?;
            let index = o.get("index").and_then(Value::as_u64).unwrap_or(0);
            let ty = o.get("content_block")?.get("type")?.as_str()?.to_owned();
            Some((index, ty))
        })
        .collect();
    Some(found)
}

/// A chunk that only opens the message (a role, empty content): the client had its opening.
fn opening_only(o: &Map<String, Value>) -> bool {
    if o.get("usage").is_some_and(|u| !u.is_null()) {
        return false;
    }
    let Some(choices) = o.get("choices").and_then(Value::as_array) else {
        return false;
    };
    !choices.is_empty()
        && choices.iter().all(|c| {
            c.get("finish_reason").is_none_or(Value::is_null)
                && c.get("delta").and_then(Value::as_object).is_some_and(|d| {
                    d.iter().all(|(k, v)| match k.as_str() {
                        "role" => true,
                        "content" => v.is_null() || v.as_str() == Some(""),
                        _ => v.is_null(),
                    })
                })
        })
}

/// Chat chunks of a later leg: the first leg's id, no second opening, the sum in the usage.
pub(super) fn chat(out: &[u8], s: &Stitch<'_>) -> Vec<u8> {
    let mut done = Vec::with_capacity(out.len() + 32);
    for e in events(out) {
        let Some(mut o) = object(e.data.as_deref()) else {
            done.extend_from_slice(e.raw.as_bytes());
            continue;
        };
        if opening_only(&o) {
            continue;
        }
        if let Some(id) = s.id {
            o.insert("id".into(), id.clone());
        }
        if let Some(c) = s.created {
            o.insert("created".into(), c.clone());
        }
        if let (Some(t), Some(Value::Object(u))) = (s.total, o.get_mut("usage")) {
            u.insert("prompt_tokens".into(), t.prompt_tokens.into());
            u.insert("completion_tokens".into(), t.completion_tokens.into());
            u.insert("total_tokens".into(), t.total().into());
        }
        done.extend(sse_event(&Value::Object(o)));
    }
    done
}

/// Messages events of a later leg: no second `message_start`, its first text block folded
/// into the open one, block indices carried on, the sum in the closing usage.
pub(super) fn messages(
    out: &[u8],
    s: &Stitch<'_>,
    folded: &mut bool,
    not_text: &mut bool,
) -> Vec<u8> {
    let mut done = Vec::with_capacity(out.len() + 32);
    for e in events(out) {
        let (Some(name), Some(mut o)) = (e.name, object(e.data.as_deref())) else {
            done.extend_from_slice(e.raw.as_bytes());
            continue;
        };
        match name {
            "message_start" | "ping" => continue,
            "content_block_start" => {
                let text = o["content_block"]["type"] == "text";
                if text && !*folded {
                    *folded = true;
                    continue;
                }
                *not_text |= !text;
                shift(&mut o, s.text_index);
            }
            "content_block_delta" | "content_block_stop" => shift(&mut o, s.text_index),
            "message_delta" => {
                if let (Some(t), Some(Value::Object(u))) = (s.total, o.get_mut("usage")) {
                    u.insert("input_tokens".into(), t.prompt_tokens.into());
                    u.insert("output_tokens".into(), t.completion_tokens.into());
                }
            }
            _ => {}
        }
        done.extend(named_event(name, &Value::Object(o)));
    }
    done
}

fn shift(o: &mut Map<String, Value>, by: u64) {
    let index = o.get("index").and_then(Value::as_u64).unwrap_or(0);
    o.insert("index".into(), (index + by).into());
}
