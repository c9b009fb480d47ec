//! The fake Anthropic's prompt cache ([`crate::anthropic::AnthropicMode::PromptCache`]), as
//! Anthropic documents its own: the prompt is a row of blocks in the cache's order (tools,
//! system, then each message's blocks), a `cache_control` mark writes the prefix up to its
//! block, and a later request reads the longest remembered prefix found at one of its marks or
//! up to 20 blocks before one. Tokens are one per 4 bytes of a block's JSON; Anthropic's
//! minimum cacheable length is not modelled (the gateway's threshold is what the tests pin).

use std::collections::HashSet;

use serde_json::Value;

/// How far back from a mark Anthropic looks for a cached prefix, in blocks.
const LOOKBACK: usize = 20;

/// What one request was billed as: Anthropic's three prompt counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CacheUsage {
    pub input: u64,
    pub write: u64,
    pub read: u64,
}

#[derive(Default)]
pub struct PromptCache {
    /// Prefixes written, as the joined text of their blocks.
    prefixes: HashSet<String>,
}

impl PromptCache {
    /// The usage of `body`, and its marked prefixes remembered.
    pub fn serve(&mut self, body: &Value) -> CacheUsage {
        let blocks = blocks(body);
        let mut prefix = vec![body["model"].to_string()];
        let mut tokens = vec![0u64];
        for (text, _) in &blocks {
            prefix.push(format!("{}\u{1}{text}", prefix.last().map_or("", |p| p)));
            tokens.push(tokens.last().copied().unwrap_or(0) + (text.len() as u64).div_ceil(4));
        }
        let marks: Vec<usize> = (0..blocks.len())
            .filter(|&i| blocks[i].1)
            .map(|i| i + 1)
            .collect();
        // The longest prefix remembered at a mark or within the lookback before one.
        let read_at = marks
            .iter()
            .flat_map(|&m| (m.saturating_sub(LOOKBACK).max(1)..=m).rev())
            .filter(|&n| self.prefixes.contains(&prefix[n]))
            .max()
            .unwrap_or(0);
        let write_to = marks.iter().copied().max().unwrap_or(0);
        for &m in &marks {
            self.prefixes.insert(prefix[m].clone());
        }
        let total = tokens[blocks.len()];
        let read = tokens[read_at];
        let write = tokens[write_to].saturating_sub(read);
        CacheUsage {
            input: total - read - write,
            write,
            read,
        }
    }
}

/// The prompt's blocks in the cache's order, each as its JSON text without its marks (the
/// role in front of a message's; a string content as its one text block), and whether it
/// carried one.
fn blocks(body: &Value) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    let mut push = |prefix: &str, b: &Value| {
        let mut b = b.clone();
        let marked = unmark(&mut b);
        out.push((format!("{prefix}{b}"), marked));
    };
    for t in body["tools"].as_array().into_iter().flatten() {
        push("tool:", t);
    }
    match &body["system"] {
        Value::String(s) => push("system:", &text_block(s)),
        Value::Array(a) => a.iter().for_each(|b| push("system:", b)),
        _ => {}
    }
    for m in body["messages"].as_array().into_iter().flatten() {
        let role = format!("{}:", m["role"].as_str().unwrap_or("?"));
        match &m["content"] {
            Value::Array(a) => a.iter().for_each(|b| push(&role, b)),
            Value::String(s) => push(&role, &text_block(s)),
            c => push(&role, c),
        }
    }
    out
}

/// A string content as the one text block it means.
fn text_block(s: &str) -> Value {
    serde_json::json!({"type": "text", "text": s})
}

/// Removes a block's `cache_control` (and its tool result's blocks'); whether it had one.
fn unmark(b: &mut Value) -> bool {
    let Some(o) = b.as_object_mut() else {
        return false;
    };
    let marked = o.remove("cache_control").is_some();
    if let Some(inner) = o.get_mut("content").and_then(Value::as_array_mut) {
        for i in inner {
            if let Some(i) = i.as_object_mut() {
                i.remove("cache_control");
            }
        }
    }
    marked
}
