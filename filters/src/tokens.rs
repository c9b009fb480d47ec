//! Token counting with a real BPE tokenizer (o200k_base), used only when an upstream reports
//! no usage. Counting characters would bill a Chinese prompt at a fraction of an English one.

use serde_json::Value;

fn bpe() -> &'static tiktoken_rs::CoreBPE {
    tiktoken_rs::o200k_base_singleton()
}

/// Tokens in a piece of text.
pub fn count_text(text: &str) -> u64 {
    if text.is_empty() {
        return 0;
    }
    bpe().encode_ordinary(text).len() as u64
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
    fn prompt_accounting() {
        let msgs = json!([{"role":"user","content":"hello"}]);
        // 3 reply priming + 3 framing + "user" (1) + "hello" (1)
        assert_eq!(count_prompt(&msgs), 8);
        let parts = json!([{"role":"user","content":[{"type":"text","text":"hello"}]}]);
        assert_eq!(count_prompt(&parts), 8);
    }
}
