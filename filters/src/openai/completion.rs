//! Rewriting an upstream's non-streaming chat completion for the client.

use serde_json::Value;

use crate::json::splice::{splice_members, Members};
use crate::Usage;

/// Rewrites a non-streaming completion for the client: the model used, and a usage object
/// when the upstream omitted it: `count` gets the completion's text (content and tool calls)
/// and returns the usage to report, so the caller decides where the tokenizer runs. Returns
/// the body, its usage, and whether that usage was counted.
///
/// The reply is not parsed into a tree and written again: its top-level members are located
/// in place and the bytes are copied with `model` and `object` replaced (and `usage` added
/// when counted), so the cost is one scan and one copy whatever the reply's size.
pub fn rewrite_completion(
    raw: &[u8],
    model: &str,
    count: impl FnOnce(&str) -> Usage,
) -> Result<(Vec<u8>, Usage, bool), String> {
    let Ok(Members(members)) = serde_json::from_slice::<Members<'_>>(raw) else {
        return Err("upstream reply is not a JSON object".into());
    };
    let member = |name: &str| members.iter().find(|(k, _)| k == name).map(|(_, v)| *v);
    let Some(choices) = member("choices").filter(|v| v.get().starts_with('[')) else {
        return Err("upstream reply has no choices array".into());
    };
    let (usage, counted) = match member("usage").and_then(|u| Usage::from_raw(u.get())) {
        Some(u) => (u, false),
        None => {
            let choices: Value = serde_json::from_str(choices.get()).map_err(|e| e.to_string())?;
            let mut text = String::new();
            for c in choices.as_array().into_iter().flatten() {
                if let Some(m) = c.get("message") {
                    collect_message_text(m, &mut text);
                }
            }
            (count(&text), true)
        }
    };

    // Serializing a string cannot fail.
    let model_json = serde_json::to_string(model).unwrap_or_default();
    // Written only when counted: most providers report their usage, and the reply keeps it.
    let usage_json = if counted {
        usage.json_text()
    } else {
        String::new()
    };
    let mut set: Vec<(&str, &[u8])> = vec![
        ("model", model_json.as_bytes()),
        ("object", b"\"chat.completion\""),
    ];
    if counted {
        // Replaces an unusable usage (null, malformed) or adds the missing one.
        set.push(("usage", usage_json.as_bytes()));
    }
    let mut out = Vec::with_capacity(raw.len() + usage_json.len() + model_json.len() + 32);
    splice_members(raw, &members, &set, &mut out);
    Ok((out, usage, counted))
}

fn collect_message_text(m: &Value, text: &mut String) {
    if let Some(s) = m.get("content").and_then(Value::as_str) {
        text.push_str(s);
    }
    for call in m
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(f) = call.get("function") {
            for k in ["name", "arguments"] {
                if let Some(s) = f.get(k).and_then(Value::as_str) {
                    text.push_str(s);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts as the gateway does: the given prompt, the completion by the tokenizer.
    fn count_as(prompt: u64) -> impl FnOnce(&str) -> Usage {
        move |text| Usage {
            prompt_tokens: prompt,
            completion_tokens: crate::tokens::count_text(text),
            ..Usage::default()
        }
    }

    #[test]
    fn completion_rewrite_fills_usage() {
        let raw = br#"{"id":"c","object":"chat.completion","created":1,"model":"up","choices":[{"index":0,"message":{"role":"assistant","content":"hello world"},"finish_reason":"stop"}]}"#;
        let (out, usage, counted) = rewrite_completion(raw, "pinned", count_as(8)).unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert!(counted);
        assert_eq!(
            usage,
            Usage {
                prompt_tokens: 8,
                completion_tokens: 2,
                ..Usage::default()
            }
        );
        assert_eq!(v["usage"]["total_tokens"], 10);
        assert_eq!(v["model"], "pinned");
        assert!(rewrite_completion(b"<html>", "m", count_as(0)).is_err());
        assert!(rewrite_completion(b"{\"x\":1}", "m", count_as(0)).is_err());
        assert!(rewrite_completion(b"[1,2]", "m", count_as(0)).is_err());
        assert!(rewrite_completion(b"{\"choices\":{}}", "m", count_as(0)).is_err());
        assert!(rewrite_completion(b"{\"choices\":[]", "m", count_as(0)).is_err());
    }

    #[test]
    fn completion_rewrite_splices_only_model_and_object() {
        // Everything but the two replaced values comes through byte for byte, including
        // spacing, key order, escaped keys and numbers serde_json would print differently.
        let raw = br#" { "id" : "c", "model":"up-\u00e9", "x\"y":1.50e0, "choices":[{"index":0,"message":{"content":"hi"}}], "object":"chat.completion", "usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4,"details":{"a":[1]}} }
"#;
        let (out, usage, counted) = rewrite_completion(raw, "pin\"ned", count_as(99)).unwrap();
        assert!(!counted);
        assert_eq!(
            usage,
            Usage {
                prompt_tokens: 3,
                completion_tokens: 1,
                ..Usage::default()
            }
        );
        let text = String::from_utf8(out).unwrap();
        let expected = String::from_utf8(raw.to_vec())
            .unwrap()
            .replace(r#""up-\u00e9""#, r#""pin\"ned""#);
        assert_eq!(text, expected);
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["model"], "pin\"ned");
        assert_eq!(v["x\"y"], 1.5);

        // Missing model and object are added; an unusable usage is replaced by the count.
        let raw = br#"{"choices":[{"message":{"content":"one two three"}}],"usage":null}"#;
        let (out, usage, counted) = rewrite_completion(raw, "m", count_as(5)).unwrap();
        assert!(counted);
        assert_eq!(
            usage,
            Usage {
                prompt_tokens: 5,
                completion_tokens: 3,
                ..Usage::default()
            }
        );
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["model"], "m");
        assert_eq!(v["object"], "chat.completion");
        assert_eq!(v["usage"]["total_tokens"], 8);
        assert_eq!(v.as_object().unwrap().len(), 4);

        // Tool-call arguments count as output when the upstream reports no usage.
        let raw = br#"{"choices":[{"message":{"content":null,"tool_calls":[{"function":{"name":"get","arguments":"{\"a\":1}"}}]}}]}"#;
        let (_, usage, counted) = rewrite_completion(raw, "m", count_as(0)).unwrap();
        assert!(counted);
        assert!(usage.completion_tokens > 0);
    }
}
