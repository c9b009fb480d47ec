//! Prompt-cache breakpoints the gateway adds for a client that set none (issue 53): Anthropic
//! caches a prompt only up to a block marked `cache_control`, so a client that never marks
//! pays the full input rate on every turn of a long conversation. [`add_breakpoints`] marks
//! the three places whose prefix the next request repeats: the last tool, the last system
//! block and the last message's last block (Anthropic's cache order is tools, system,
//! messages, and it looks back from a mark for the longest prefix it holds, so the next turn
//! reads everything up to this turn's last message).
//!
//! The body is edited where it lies: each mark is spliced into the bytes the writer produced,
//! so nothing else of the body changes (numbers, key order and unknown members included).

use serde_json::value::RawValue;

use crate::json::raw::{self, Kind};

/// The most `cache_control` marks Anthropic accepts in one request.
pub const MAX_BREAKPOINTS: usize = 4;

/// What a mark is: a five-minute cache entry, the lifetime Anthropic bills at its plain write
/// rate (a one-hour mark costs more and is the client's choice).
const MARK: &str = r#""cache_control":{"type":"ephemeral"}"#;

/// One change to the body: the bytes `start..end` replaced by `text`.
struct Edit {
    start: usize,
    end: usize,
    text: String,
}

/// The Messages `body` with breakpoints added, or `None` when it gets none: the client marked
/// something itself (its marks are its choice, and one more of ours could pass the limit of
/// [`MAX_BREAKPOINTS`]), the body is not a Messages object, or nothing in it can carry a mark.
pub fn add_breakpoints(body: &[u8]) -> Option<Vec<u8>> {
    let members = raw::parse_object(body).ok()?;
    if count_marks(&members) > 0 {
        return None;
    }
    let base = body.as_ptr() as usize;
    let at = |v: &RawValue| v.get().as_ptr() as usize - base;
    let mut edits: Vec<Edit> = Vec::new();
    if let Some(tool) = raw::get(&members, "tools")
        .and_then(raw::array)
        .and_then(|t| t.last().copied())
    {
        edits.extend(mark_object(tool, at(tool)));
    }
    if let Some(system) = raw::get(&members, "system") {
        edits.extend(mark_content(system, at(system)));
    }
    if let Some(message) = raw::get(&members, "messages")
        .and_then(raw::array)
        .and_then(|m| m.last().copied())
        .and_then(raw::object)
    {
        if let Some(content) = raw::get(&message, "content") {
            edits.extend(mark_content(content, at(content)));
        }
    }
    if edits.is_empty() {
        return None;
    }
    edits.sort_by_key(|e| e.start);
    let mut out = Vec::with_capacity(body.len() + edits.len() * (MARK.len() + 32));
    let mut from = 0;
    for e in &edits {
        out.extend_from_slice(&body[from..e.start]);
        out.extend_from_slice(e.text.as_bytes());
        from = e.end;
    }
    out.extend_from_slice(&body[from..]);
    Some(out)
}

/// The mark for a `system` or message `content` at byte `start`: a string becomes one text
/// block carrying it; an array's last block that may carry one gets it.
fn mark_content(v: &RawValue, start: usize) -> Option<Edit> {
    match raw::kind(v) {
        // Anthropic refuses a mark on an empty text.
        Kind::String if raw::as_str(v).is_some_and(|s| !s.is_empty()) => Some(Edit {
            start,
            end: start + v.get().len(),
            text: format!(r#"[{{"type":"text","text":{},{MARK}}}]"#, v.get()),
        }),
        Kind::Array => {
            let blocks = raw::array(v)?;
            let base = v.get().as_ptr() as usize;
            let last = *blocks.last()?;
            if !markable(last) {
                return None;
            }
            mark_object(last, start + (last.get().as_ptr() as usize - base))
        }
        _ => None,
    }
}

/// Whether a content block may carry a mark: not a thinking block (Anthropic refuses marks on
/// them) and not an empty text.
fn markable(block: &RawValue) -> bool {
    let Some(b) = raw::object(block) else {
        return false;
    };
    match raw::get(&b, "type").and_then(raw::as_str).as_deref() {
        Some("thinking" | "redacted_thinking") => false,
        Some("text") => raw::get(&b, "text")
            .and_then(raw::as_str)
            .is_some_and(|t| !t.is_empty()),
        Some(_) => true,
        None => false,
    }
}

/// The mark added as the last member of the object at byte `start`.
fn mark_object(v: &RawValue, start: usize) -> Option<Edit> {
    let members = raw::object(v)?;
    let close = start + v.get().len() - 1;
    let text = match members.is_empty() {
        true => MARK.to_owned(),
        false => format!(",{MARK}"),
    };
    Some(Edit {
        start: close,
        end: close,
        text,
    })
}

/// How many `cache_control` marks a Messages body carries where Anthropic reads them: on
/// tools, system blocks, message blocks and the blocks of a tool result, and the request's
/// own (Anthropic's automatic caching, which marks the last block it can).
pub fn count_breakpoints(body: &[u8]) -> usize {
    raw::parse_object(body).map_or(0, |m| count_marks(&m))
}

fn count_marks(members: &raw::MemberList<'_>) -> usize {
    fn marked(v: &RawValue) -> bool {
        raw::object(v).is_some_and(|o| raw::get(&o, "cache_control").is_some())
    }
    fn blocks(v: Option<&RawValue>) -> Vec<&RawValue> {
        v.and_then(raw::array).unwrap_or_default()
    }
    let count = |v: Option<&RawValue>| blocks(v).into_iter().filter(|b| marked(b)).count();
    let mut n = count(raw::get(members, "tools"))
        + count(raw::get(members, "system"))
        + usize::from(raw::get_set(members, "cache_control").is_some());
    for m in blocks(raw::get(members, "messages"))
        .into_iter()
        .filter_map(raw::object)
    {
        for b in blocks(raw::get(&m, "content")) {
            n += usize::from(marked(b));
            n += count(raw::object(b).and_then(|o| raw::get(&o, "content")));
        }
    }
    n
}
