//! The inbound Messages API: validation, the OpenAI mirror, passthrough and token counting.

use serde_json::{json, Value};

use super::request::{count_tokens_messages, parse_messages_request, MessagesRequest};
use crate::ErrorKind;

fn body(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).unwrap()
}

/// The request, its OpenAI mirror validated as the pipeline validates it.
fn parse(raw: &[u8]) -> Result<MessagesRequest<'_>, crate::GatewayError> {
    let m = parse_messages_request(raw)?;
    m.chat()?;
    Ok(m)
}

fn base() -> Value {
    json!({"model":"claude-sonnet-4-5","max_tokens":1024,
        "messages":[{"role":"user","content":"Hello, Claude"}]})
}

fn chat_body(v: &Value) -> Value {
    serde_json::from_slice(&parse(&body(v)).unwrap().chat_body).unwrap()
}

#[test]
fn a_text_request_mirrors_into_openai_form() {
    let mut v = base();
    v["system"] = json!([{"type":"text","text":"You are terse."},
        {"type":"text","text":"Answer in French.","cache_control":{"type":"ephemeral"}}]);
    v["temperature"] = json!(0.5);
    v["top_k"] = json!(40);
    v["stop_sequences"] = json!(["\n\nHuman:"]);
    v["metadata"] = json!({"user_id":"u-1"});
    let raw = serde_json::to_vec(&v).unwrap();
    let r = parse_messages_request(&raw).unwrap();
    let chat = r.chat().unwrap();
    assert_eq!(chat.model, "claude-sonnet-4-5");
    assert_eq!(chat.max_tokens, Some(1024));
    assert!(!chat.stream && !chat.client_wants_usage);
    assert_eq!(chat.raw_len, raw.len());
    let same: Value =
        serde_json::from_slice(&r.passthrough_body("claude-sonnet-4-5", 1024)).unwrap();
    assert_eq!(same, v);
    let b: Value = serde_json::from_slice(&r.chat_body).unwrap();
    assert_eq!(
        b["messages"],
        json!([{"role":"system","content":"You are terse.\n\nAnswer in French."},
               {"role":"user","content":"Hello, Claude"}])
    );
    assert_eq!(b["stop"], json!(["\n\nHuman:"]));
    assert_eq!(b["temperature"], 0.5);
    assert_eq!(b["user"], "u-1");
    assert!(b.get("top_k").is_none() && b.get("stream").is_none());
}

#[test]
fn a_streamed_tool_conversation_mirrors_into_openai_form() {
    let v = json!({
    "model":"claude-sonnet-4-5","max_tokens":512,"stream":true,
    "tools":[{"name":"get_weather","description":"Get the weather",
              "input_schema":{"type":"object","properties":{"location":{"type":"string"}},"required":["location"]}}],
    "tool_choice":{"type":"any","disable_parallel_tool_use":true},
    "messages":[
        {"role":"user","content":[
            {"type":"text","text":"Weather in SF? See:"},
            {"type":"image","source":{"type":"base64","media_type":"image/jpeg","data":"/9j/4AAQ"}}]},
        {"role":"assistant","content":[
            {"type":"thinking","thinking":"call the tool","signature":"sig"},
            {"type":"text","text":"Let me check."},
            {"type":"tool_use","id":"toolu_01","name":"get_weather","input":{"location":"SF"}}]},
        {"role":"user","content":[
            {"type":"text","text":"Thanks"},
            {"type":"tool_result","tool_use_id":"toolu_01","content":[{"type":"text","text":"15C"},{"type":"text","text":"foggy"}]}]}
    ]});
    let raw = body(&v);
    let r = parse(&raw).unwrap();
    let chat = r.chat().unwrap();
    assert!(chat.stream);
    assert!(
        !chat.client_wants_usage,
        "the usage chunk is the gateway's, not the client's"
    );
    let b: Value = serde_json::from_slice(&r.chat_body).unwrap();
    assert_eq!(b["stream_options"], json!({"include_usage":true}));
    assert_eq!(
        b["messages"],
        json!([
            {"role":"user","content":[
                {"type":"text","text":"Weather in SF? See:"},
                {"type":"image_url","image_url":{"url":"data:image/jpeg;base64,/9j/4AAQ"}}]},
            {"role":"assistant","content":"Let me check.","tool_calls":[
                {"id":"toolu_01","type":"function","function":{"name":"get_weather","arguments":"{\"location\":\"SF\"}"}}]},
            {"role":"tool","tool_call_id":"toolu_01","content":"15C\n\nfoggy"},
            {"role":"user","content":"Thanks"}
        ])
    );
    assert_eq!(
        b["tools"],
        json!([{"type":"function","function":{"name":"get_weather","description":"Get the weather",
            "parameters":{"type":"object","properties":{"location":{"type":"string"}},"required":["location"]}}}])
    );
    assert_eq!(b["tool_choice"], "required");
    assert_eq!(b["parallel_tool_calls"], false);
    assert!(r.check_openai_translatable().is_ok());
}

#[test]
fn tool_choice_variants_mirror() {
    for (choice, expected) in [
        (json!({"type":"auto"}), json!("auto")),
        (json!({"type":"none"}), json!("none")),
        (
            json!({"type":"tool","name":"f"}),
            json!({"type":"function","function":{"name":"f"}}),
        ),
    ] {
        let mut v = base();
        v["tools"] = json!([{"name":"f","input_schema":{"type":"object"}}]);
        v["tool_choice"] = choice;
        let b = chat_body(&v);
        assert_eq!(b["tool_choice"], expected);
        assert!(b.get("parallel_tool_calls").is_none());
    }
}

#[test]
fn each_bad_input_is_refused_by_name() {
    let bad = |edit: &dyn Fn(&mut Value), field: &str| {
        let mut v = base();
        edit(&mut v);
        let raw = body(&v);
        let e = parse(&raw)
            .err()
            .unwrap_or_else(|| panic!("{field} accepted: {v}"));
        assert_eq!(e.kind, ErrorKind::InvalidRequest);
        assert!(
            e.message.starts_with(&format!("{field}:")),
            "{field}: {}",
            e.message
        );
    };
    for raw in [&b"{nope"[..], b"[1]"] {
        let e = parse_messages_request(raw).unwrap_err();
        assert!(e.message.starts_with("body:"), "{}", e.message);
    }
    let m = |content: Value| {
        move |v: &mut Value| v["messages"] = json!([{"role":"user","content":content.clone()}])
    };
    bad(
        &|v| {
            v.as_object_mut().unwrap().remove("model");
        },
        "model",
    );
    bad(&|v| v["model"] = json!(""), "model");
    bad(&|v| v["model"] = json!(7), "model");
    bad(&|v| v["model"] = json!("m".repeat(257)), "model");
    bad(
        &|v| {
            v.as_object_mut().unwrap().remove("max_tokens");
        },
        "max_tokens",
    );
    for n in [json!(0), json!(-1), json!(1.5), json!("10")] {
        bad(&|v| v["max_tokens"] = n.clone(), "max_tokens");
    }
    bad(
        &|v| {
            v.as_object_mut().unwrap().remove("messages");
        },
        "messages",
    );
    bad(&|v| v["messages"] = json!({}), "messages");
    bad(&|v| v["messages"] = json!([]), "messages");
    bad(
        &|v| v["messages"] = json!([{"role":"tool","content":"x"}]),
        "messages[0].role",
    );
    bad(
        &|v| v["messages"] = json!([{"content":"x"}]),
        "messages[0].role",
    );
    bad(&m(json!(5)), "messages[0].content");
    bad(&m(json!([{"text":"no type"}])), "messages[0].content");
    bad(&m(json!(["str"])), "messages[0].content");
    bad(
        &m(json!([{"type":"text","text":5}])),
        "messages[0].content[0].text",
    );
    bad(
        &m(json!([{"type":"text","text":"ok"},{"type":"image"}])),
        "messages[0].content[1].source",
    );
    bad(
        &m(json!([{"type":"tool_use","name":"f","input":{}}])),
        "messages[0].content[0].id",
    );
    bad(
        &m(json!([{"type":"tool_use","id":"t","input":{}}])),
        "messages[0].content[0].name",
    );
    bad(
        &m(json!([{"type":"tool_result","content":"x"}])),
        "messages[0].content[0].tool_use_id",
    );
    bad(&|v| v["system"] = json!(5), "system");
    bad(
        &|v| v["system"] = json!([{"type":"image","source":{}}]),
        "system",
    );
    bad(&|v| v["stream"] = json!("yes"), "stream");
    bad(&|v| v["temperature"] = json!(1.5), "temperature");
    bad(&|v| v["temperature"] = json!("warm"), "temperature");
    bad(&|v| v["tools"] = json!({}), "tools");
    bad(
        &|v| v["tools"] = json!([{"description":"no name"}]),
        "tools[0].name",
    );
    bad(&|v| v["stop_sequences"] = json!("END"), "stop_sequences");
    bad(
        &|v| v["tool_choice"] = json!({"type":"sometimes"}),
        "tool_choice",
    );
}

#[test]
fn passthrough_body_keeps_what_anthropic_understands() {
    let v = json!({"model":"alias","max_tokens":4096,"top_k":5,
        "thinking":{"type":"enabled","budget_tokens":2048},
        "system":[{"type":"text","text":"big doc","cache_control":{"type":"ephemeral","ttl":"5m"}}],
        "messages":[{"role":"user","content":[
            {"type":"document","source":{"type":"text","media_type":"text/plain","data":"x"}},
            {"type":"text","text":"Summarize","cache_control":{"type":"ephemeral"}}]}]});
    let raw = body(&v);
    let r = parse(&raw).unwrap();
    let out: Value = serde_json::from_slice(&r.passthrough_body("claude-up-1", 1000)).unwrap();
    let mut expected = v.clone();
    expected["model"] = json!("claude-up-1");
    expected["max_tokens"] = json!(1000);
    assert_eq!(out, expected);
    // The document block has no OpenAI form.
    let e = r.check_openai_translatable().unwrap_err();
    assert!(
        e.message.starts_with("messages[0].content[0].type:"),
        "{}",
        e.message
    );
    assert!(parse(&body(&base()))
        .unwrap()
        .check_openai_translatable()
        .is_ok());
}

#[test]
fn count_tokens_messages_needs_no_max_tokens() {
    let v = json!({"model":"claude-sonnet-4-5","system":"Be nice.",
        "tools":[{"name":"f","input_schema":{"type":"object"}}],
        "messages":[{"role":"user","content":"Hello"}]});
    let msgs = count_tokens_messages(&serde_json::to_vec(&v).unwrap()).unwrap();
    let list = msgs.as_array().unwrap();
    assert_eq!(list.len(), 3);
    assert_eq!(list[0], json!({"role":"system","content":"Be nice."}));
    assert_eq!(list[1], json!({"role":"user","content":"Hello"}));
    assert_eq!(list[2]["role"], "system");
    assert!(list[2]["content"]
        .as_str()
        .unwrap()
        .contains("input_schema"));
    assert!(crate::tokens::count_prompt(&msgs) > 0);
    let e = count_tokens_messages(br#"{"model":"m","messages":[]}"#).unwrap_err();
    assert!(e.message.starts_with("messages:"));
}

#[test]
fn server_tools_mcp_servers_and_unknown_cache_ttls_are_refused() {
    for (body, field) in [
        (
            serde_json::json!({"tools": [{"type": "web_search_20250305", "name": "web_search"}]}),
            "tools[0].type",
        ),
        (
            serde_json::json!({"mcp_servers": [{"type": "url", "url": "https://x", "name": "x"}]}),
            "mcp_servers",
        ),
        (serde_json::json!({"container": "c"}), "container"),
        (
            serde_json::json!({"system": [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral", "ttl": "2h"}}]}),
            "body.system[0].cache_control.ttl",
        ),
    ] {
        let mut b = serde_json::json!({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]});
        for (k, v) in body.as_object().unwrap() {
            b[k] = v.clone();
        }
        let e = super::request::parse_messages_request(&serde_json::to_vec(&b).unwrap())
            .err()
            .unwrap();
        assert!(e.message.starts_with(field), "{field}: {}", e.message);
    }
    // Anthropic's two lifetimes pass: the default (no ttl, or 5m) and an hour, whose writes
    // are billed at their own rate.
    for ttl in ["5m", "1h"] {
        let ok = serde_json::json!({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": [
            {"type": "text", "text": "hi", "cache_control": {"type": "ephemeral", "ttl": ttl}}]}]});
        assert!(super::request::parse_messages_request(&serde_json::to_vec(&ok).unwrap()).is_ok());
    }
}

#[test]
fn the_passthrough_body_is_the_clients_bytes_with_two_members_set() {
    // Order, spacing inside values and escapes survive; a repeated top-level key is written
    // once, with the value validation read (the last), so the provider cannot read another.
    let raw = br#"{"top_k":5, "model":"alias","messages":[{"role":"user","content":"caf\u00e9 \"x\""}],"max_tokens":10,"stream":false,"stream":true}"#;
    let r = parse(raw).unwrap();
    assert!(r.chat().unwrap().stream);
    let out = String::from_utf8(r.passthrough_body("claude-up-1", 7)).unwrap();
    assert_eq!(
        out,
        r#"{"top_k":5,"model":"claude-up-1","messages":[{"role":"user","content":"caf\u00e9 \"x\""}],"max_tokens":7,"stream":true}"#
    );
    assert_eq!(r.thinking_budget(), None);
}

#[test]
fn an_unknown_cache_ttl_is_found_however_the_key_is_written() {
    // The quick scan for the key's name must not miss a key spelled with escapes.
    let raw = br#"{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"text","text":"a","cache\u005fcontrol":{"type":"ephemeral","ttl":"1d"}}]}]}"#;
    let e = parse_messages_request(raw).err().unwrap();
    assert!(
        e.message
            .starts_with("body.messages[0].content[0].cache_control.ttl:"),
        "{}",
        e.message
    );
    // A mention in a text is no cache_control: the walk finds nothing and the request passes.
    let raw = br#"{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"what is cache_control?"}]}"#;
    assert!(parse(raw).is_ok());
}

#[test]
fn a_body_of_many_members_is_validated_and_passed_through() {
    let mut v = base();
    for i in 0..5000 {
        v[format!("x{i}")] = json!(i);
    }
    let raw = body(&v);
    let r = parse(&raw).unwrap();
    let out: Value = serde_json::from_slice(&r.passthrough_body("up", 5)).unwrap();
    assert_eq!(out.as_object().unwrap().len(), 5003);
    assert_eq!(out["x4999"], 4999);
}
