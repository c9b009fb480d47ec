//! Whole replies both ways, on shapes from the public API references.

use serde_json::{json, Value};

use super::completion::{completion_to_message, message_to_completion, rewrite_message};
use crate::Usage;

const TEXT_MESSAGE: &str = r#"{
  "content": [{"text": "Hi! My name is Claude.", "type": "text"}],
  "id": "msg_013Zva2CMHLNnXjNJJKqJ2EF",
  "model": "claude-sonnet-4-5-20250929",
  "role": "assistant",
  "stop_reason": "end_turn",
  "stop_sequence": null,
  "type": "message",
  "usage": {"input_tokens": 2095, "output_tokens": 503,
            "cache_creation_input_tokens": 2051, "cache_read_input_tokens": 10}
}"#;

const TOOLS_MESSAGE: &str = r#"{
  "id": "msg_01Aq9w938a90dw8q", "type": "message", "role": "assistant",
  "model": "claude-sonnet-4-5-20250929",
  "content": [
    {"type": "thinking", "thinking": "Two lookups.", "signature": "sig"},
    {"type": "text", "text": "I'll check both."},
    {"type": "tool_use", "id": "toolu_01A", "name": "get_weather", "input": {"location": "San Francisco, CA"}},
    {"type": "tool_use", "id": "toolu_01B", "name": "get_time", "input": {"timezone": "America/Los_Angeles"}}
  ],
  "stop_reason": "tool_use", "stop_sequence": null,
  "usage": {"input_tokens": 500, "output_tokens": 120}
}"#;

#[test]
fn text_message_to_completion() {
    let (out, usage) = message_to_completion(TEXT_MESSAGE.as_bytes(), "ours", 42).unwrap();
    assert_eq!(
        usage,
        Usage {
            prompt_tokens: 2095 + 2051 + 10,
            completion_tokens: 503,
            cache_read_tokens: 10,
            cache_write_tokens: 2051,
            ..Usage::default()
        }
    );
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["id"], "chatcmpl-msg_013Zva2CMHLNnXjNJJKqJ2EF");
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(
        (v["created"].as_u64(), v["model"].as_str()),
        (Some(42), Some("ours"))
    );
    let c = &v["choices"][0];
    assert_eq!(c["index"], 0);
    assert_eq!(
        c["message"],
        json!({"role":"assistant","content":"Hi! My name is Claude."})
    );
    assert_eq!(c["finish_reason"], "stop");
    assert_eq!(v["usage"]["prompt_tokens"], 4156);
    assert_eq!(v["usage"]["total_tokens"], 4156 + 503);
    assert_eq!(v["usage"]["prompt_tokens_details"]["cached_tokens"], 10);
}

#[test]
fn parallel_tool_use_message_to_completion() {
    let (out, usage) = message_to_completion(TOOLS_MESSAGE.as_bytes(), "ours", 1).unwrap();
    assert_eq!((usage.prompt_tokens, usage.completion_tokens), (500, 120));
    let v: Value = serde_json::from_slice(&out).unwrap();
    let m = &v["choices"][0]["message"];
    assert_eq!(m["content"], "I'll check both.");
    let calls = m["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0]["id"], "toolu_01A");
    assert_eq!(calls[0]["type"], "function");
    assert_eq!(calls[0]["function"]["name"], "get_weather");
    assert_eq!(
        calls[0]["function"]["arguments"],
        r#"{"location":"San Francisco, CA"}"#
    );
    assert_eq!(calls[1]["function"]["name"], "get_time");
    assert_eq!(v["choices"][0]["finish_reason"], "tool_calls");
    assert!(v["usage"].get("prompt_tokens_details").is_none());

    // Only tool calls: content is null.
    let only_tools = TOOLS_MESSAGE.replace(r#"{"type": "text", "text": "I'll check both."},"#, "");
    let (out, _) = message_to_completion(only_tools.as_bytes(), "ours", 1).unwrap();
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert!(v["choices"][0]["message"]["content"].is_null());
}

#[test]
fn message_to_completion_refuses_what_is_not_a_message() {
    for bad in [
        "<html>",
        "[1]",
        r#"{"type":"error","error":{"type":"api_error","message":"x"}}"#,
        r#"{"type":"message","content":"hi","usage":{"input_tokens":1,"output_tokens":1}}"#,
        r#"{"type":"message","content":[]}"#,
    ] {
        assert!(
            message_to_completion(bad.as_bytes(), "m", 0).is_err(),
            "{bad}"
        );
    }
}

#[test]
fn rewrite_message_changes_only_the_model() {
    let (out, usage) = rewrite_message(TOOLS_MESSAGE.as_bytes(), "ours").unwrap();
    assert_eq!(usage.completion_tokens, 120);
    let mut expected: Value = serde_json::from_str(TOOLS_MESSAGE).unwrap();
    expected["model"] = "ours".into();
    let got: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(got, expected);
    let text = String::from_utf8(out).unwrap();
    assert!(text.starts_with(r#"{"id":"msg_01Aq9w938a90dw8q","type":"message""#));
    assert!(rewrite_message(br#"{"type":"message","content":[]}"#, "m").is_err());
    assert!(rewrite_message(b"nope", "m").is_err());
}

#[test]
fn completion_to_message_with_usage() {
    let raw = br#"{"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion","created":1741570283,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"message":{"role":"assistant","content":"Let me look.","tool_calls":[{"id":"call_abc","type":"function","function":{"name":"get_weather","arguments":"{\"location\":\"Boston\"}"}},{"id":"call_def","type":"function","function":{"name":"broken","arguments":"{not json"}}],"refusal":null},"logprobs":null,"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":1117,"completion_tokens":46,"total_tokens":1163}}"#;
    let (out, usage, counted) =
        completion_to_message(raw, "ours", |_| panic!("must not count")).unwrap();
    assert!(!counted);
    assert_eq!((usage.prompt_tokens, usage.completion_tokens), (1117, 46));
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(
        v,
        json!({
            "id": "msg_chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
            "type": "message", "role": "assistant", "model": "ours",
            "content": [
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "call_abc", "name": "get_weather", "input": {"location": "Boston"}},
                {"type": "tool_use", "id": "call_def", "name": "broken", "input": {"_raw": "{not json"}},
            ],
            "stop_reason": "tool_use", "stop_sequence": null,
            "usage": {"input_tokens": 1117, "output_tokens": 46},
        })
    );
}

#[test]
fn completion_to_message_counts_without_usage() {
    let raw = br#"{"id":"c2","object":"chat.completion","created":1,"model":"x","choices":[{"index":0,"message":{"role":"assistant","content":"hello world"},"finish_reason":"length"},{"index":1,"message":{"role":"assistant","content":"ignored"},"finish_reason":"stop"}],"usage":null}"#;
    let mut seen = String::new();
    let (out, usage, counted) = completion_to_message(raw, "ours", |text| {
        seen = text.to_owned();
        Usage {
            prompt_tokens: 5,
            completion_tokens: 2,
            ..Usage::default()
        }
    })
    .unwrap();
    assert!(counted);
    assert_eq!(seen, "hello world");
    assert_eq!(usage.completion_tokens, 2);
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["stop_reason"], "max_tokens");
    assert_eq!(v["content"], json!([{"type":"text","text":"hello world"}]));
    assert_eq!(v["usage"], json!({"input_tokens":5,"output_tokens":2}));
    for bad in [&b"x"[..], br#"{"choices":{}}"#, br#"{"choices":[]}"#] {
        assert!(completion_to_message(bad, "m", |_| Usage::default()).is_err());
    }
}

#[test]
fn tool_calls_answered_with_stop_still_stop_for_the_tools() {
    // vLLM and Ollama send tool calls with finish_reason "stop".
    let completion = json!({"id": "x", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": null,
            "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}});
    let raw = serde_json::to_vec(&completion).unwrap();
    let (out, _, _) = completion_to_message(&raw, "ours", |_| Usage::default()).unwrap();
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["stop_reason"], "tool_use");
}
