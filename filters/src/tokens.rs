//! Token counting with a real BPE tokenizer (o200k_base), used only when an upstream reports
//! no usage. Counting characters would bill a Chinese prompt at a fraction of an English one.
//!
//! BPE merging is quadratic in the length of one pre-tokenized piece, and a run of one letter
//! is one piece: 300 KB of `a` would take seconds. So text is encoded in segments of at most
//! [`SEGMENT_BYTES`], cut before a whitespace where there is one (where the tokenizer's own
//! pieces begin, so ordinary text counts the same), and only the first [`EXACT_BYTES`] of a
//! text are counted exactly; the rest counts one token per 3 bytes. Callers run this off the
//! async threads.

use serde_json::Value;

fn bpe() -> &'static tiktoken_rs::CoreBPE {
    tiktoken_rs::o200k_base_singleton()
}

/// The longest segment handed to the tokenizer at once.
pub const SEGMENT_BYTES: usize = 256;
/// Text beyond this many bytes is counted as one token per 3 bytes.
pub const EXACT_BYTES: usize = 256 * 1024;

/// Tokens in a piece of text.
pub fn count_text(text: &str) -> u64 {
    let exact = &text[..floor_char_boundary(text, EXACT_BYTES)];
    let rest = (text.len() - exact.len()) as u64;
    let mut n = 0u64;
    let mut left = exact;
    while !left.is_empty() {
        let cut = segment_end(left);
        n += bpe().encode_ordinary(&left[..cut]).len() as u64;
        left = &left[cut..];
    }
    n + rest.div_ceil(3)
}

/// Where the first segment of `text` ends: all of it when short, else before the last
/// whitespace within [`SEGMENT_BYTES`], else at [`SEGMENT_BYTES`] (on a character boundary).
fn segment_end(text: &str) -> usize {
    if text.len() <= SEGMENT_BYTES {
        return text.len();
    }
    let window = &text[..floor_char_boundary(text, SEGMENT_BYTES)];
    match window.rfind(char::is_whitespace) {
        Some(p) if p > 0 => p,
        _ if window.is_empty() => text.chars().next().map_or(text.len(), char::len_utf8),
        _ => window.len(),
    }
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    if i >= s.len() {
        return s.len();
    }
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// [`count_prompt`] of the `messages` member as sent (JSON text): the fallback count runs
/// off the proxy thread, which takes an owned copy of that text rather than the request.
pub fn count_prompt_json(messages: &str) -> u64 {
    serde_json::from_str::<Value>(messages).map_or(0, |m| count_prompt(&m))
}

/// Tokens of a chat prompt, following OpenAI's published accounting for chat models:
/// 3 tokens of framing per message, the role and the content, and 3 tokens priming the reply.
pub fn count_prompt(messages: &Value) -> u64 {
    let Some(list) = messages.as_array() else {
        return 0;
    };
    let mut n = 3;
    for m in list {
        n += 3;
        if let Some(role) = m.get("role").and_then(Value::as_str) {
            n += count_text(role);
        }
        if let Some(name) = m.get("name").and_then(Value::as_str) {
            n += 1 + count_text(name);
        }
        match m.get("content") {
            Some(Value::String(s)) => n += count_text(s),
            Some(Value::Array(parts)) => {
                for p in parts {
                    if let Some(t) = p.get("text").and_then(Value::as_str) {
                        n += count_text(t);
                    }
                }
            }
            _ => {}
        }
        if let Some(calls) = m.get("tool_calls") {
            n += count_text(&calls.to_string());
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn counts_are_bpe_not_characters() {
        assert_eq!(count_text(""), 0);
        assert_eq!(count_text("hello"), 1);
        assert_eq!(count_text("hello world"), 2);
        // Many characters, few tokens: a repeated common word.
        let long = "the ".repeat(100);
        assert!(count_text(&long) <= 101);
        assert!(count_text(&long) >= 99);
    }

    #[test]
    fn segmenting_keeps_ordinary_text_counts() {
        let text = "The quick brown fox jumps over the lazy dog, and then again. ".repeat(200);
        let whole = bpe().encode_ordinary(&text).len() as u64;
        let counted = count_text(&text);
        // Cut before spaces, where the tokenizer's own pieces begin: the same count, or a hair
        // above where a cut lands inside a piece.
        assert!(
            counted >= whole && counted <= whole + whole / 50,
            "{whole} vs {counted}"
        );
        let cjk = "统一码联盟的工作".repeat(500);
        let whole = bpe().encode_ordinary(&cjk).len() as u64;
        assert!(count_text(&cjk) >= whole);
    }

    #[test]
    fn hostile_runs_and_huge_texts_are_bounded() {
        // One 300 KB piece: counted in 256-byte segments, the part past 256 KiB at bytes / 3.
        let run = "a".repeat(300_000);
        let n = count_text(&run);
        let past = (300_000 - EXACT_BYTES) as u64;
        assert!(n > past.div_ceil(3) && n < 300_000, "{n}");
        // Multi-byte characters at every cut.
        let e = "é".repeat(200_000);
        assert!(count_text(&e) > 0);
        assert_eq!(segment_end("a"), 1);
        assert_eq!(segment_end(&format!("{} b", "a".repeat(300))), 256);
        assert_eq!(
            segment_end(&format!("{} {}", "a".repeat(100), "b".repeat(300))),
            100
        );
    }

    #[test]
    fn prompt_accounting() {
        let msgs = json!([{"role":"user","content":"hello"}]);
        // 3 reply priming + 3 framing + "user" (1) + "hello" (1)
        assert_eq!(count_prompt(&msgs), 8);
        let parts = json!([{"role":"user","content":[{"type":"text","text":"hello"}]}]);
        assert_eq!(count_prompt(&parts), 8);
    }
}
