//! The Messages API as Claude Code sends it today: a `system` turn inside `messages`, adaptive
//! thinking, context management and output config; mirrored for OpenAI-compatible providers
//! and passed through whole to Anthropic ones.

use serde_json::{json, Value};

use super::request::parse_messages_request;

fn claude_code_body() -> Value {
    json!({"model": "gpt-x", "max_tokens": 32000, "stream": true,
        "system": [{"type": "text", "text": "You are a coding agent."}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Say hello", "cache_control": {"type": "ephemeral"}}]},
            {"role": "system", "content": "Available agent types: claude."},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm", "signature": "sig"},
                                              {"type": "text", "text": "Hello."}]},
            {"role": "system", "content": [{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Really."}]},
            {"role": "user", "content": "Again"}],
        "thinking": {"type": "adaptive"},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        "output_config": {"effort": "high"},
        "tools": [{"name": "Bash", "input_schema": {"type": "object", "properties": {}}}]})
}

#[test]
fn system_turns_are_system_messages_where_they_stand_in_the_mirror() {
    let raw = serde_json::to_vec(&claude_code_body()).unwrap();
    let m = parse_messages_request(&raw).unwrap();
    m.check_openai_translatable().unwrap();
    let chat = m.chat().unwrap();
    let roles: Vec<&str> = chat.messages.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        ["system", "user", "system", "assistant", "system", "user"]
    );
    let mirror: Value = serde_json::from_slice(&m.chat_body).unwrap();
    assert_eq!(
        mirror["messages"][2]["content"],
        "Available agent types: claude."
    );
    assert_eq!(mirror["messages"][4]["content"], "Be brief.\n\nReally.");
    // What only Anthropic's models take is left out of the chat request.
    for k in ["thinking", "context_management", "output_config"] {
        assert!(mirror.get(k).is_none(), "{k}");
    }
}

#[test]
fn an_anthropic_provider_gets_every_member_as_sent() {
    let v = claude_code_body();
    let raw = serde_json::to_vec(&v).unwrap();
    let m = parse_messages_request(&raw).unwrap();
    let out: Value = serde_json::from_slice(&m.passthrough_body("claude-up", 32000)).unwrap();
    assert_eq!(out["messages"], v["messages"]);
    for k in [
        "thinking",
        "context_management",
        "output_config",
        "system",
        "tools",
    ] {
        assert_eq!(out[k], v[k], "{k}");
    }
    assert_eq!(out["model"], "claude-up");
}

#[test]
fn roles_tollgate_does_not_know_and_non_text_system_turns_are_refused_by_name() {
    let mut v = claude_code_body();
    v["messages"][1]["role"] = json!("tool");
    let e = parse_messages_request(&serde_json::to_vec(&v).unwrap()).unwrap_err();
    assert_eq!(e.param.as_deref(), Some("messages[1].role"));
    let mut v = claude_code_body();
    v["messages"][1]["content"] = json!([{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA"}}]);
    let raw = serde_json::to_vec(&v).unwrap();
    let m = parse_messages_request(&raw).unwrap();
    let e = m.check_openai_translatable().unwrap_err();
    assert_eq!(e.param.as_deref(), Some("messages[1].content[0].type"));
}
