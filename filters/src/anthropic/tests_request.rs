//! OpenAI chat requests translated for the Messages API.

use serde_json::{json, Value};

use super::request::{check_translatable, openai_to_messages};
use crate::openai::request::{parse_chat_request, ChatRequest};
use crate::ErrorKind;

/// A request borrows its body; a test's bodies are small and leaked so that it can be
/// returned alone.
fn chat(v: Value) -> ChatRequest<'static> {
    let raw = Box::leak(serde_json::to_vec(&v).unwrap().into_boxed_slice());
    parse_chat_request(raw).unwrap()
}

fn translate(v: Value) -> Value {
    let req = chat(v);
    check_translatable(&req).unwrap();
    serde_json::from_slice(&openai_to_messages(&req, "claude-up", 256).unwrap()).unwrap()
}

fn translate_err(v: Value) -> String {
    let e = openai_to_messages(&chat(v), "claude-up", 256).unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidRequest);
    e.message
}

fn user() -> Value {
    json!({"role":"user","content":"hi"})
}

#[test]
fn system_and_developer_become_the_system_prompt() {
    let out = translate(json!({"model":"m","max_tokens":9,"stream":true,"messages":[
        {"role":"system","content":"Be brief."},
        {"role":"developer","content":"Use French."},
        user(),
    ]}));
    assert_eq!(out["system"], "Be brief.\n\nUse French.");
    assert_eq!(
        out["messages"],
        json!([{"role":"user","content":[{"type":"text","text":"hi"}]}])
    );
    assert_eq!(
        (out["model"].as_str(), out["max_tokens"].as_u64()),
        (Some("claude-up"), Some(256))
    );
    assert_eq!(out["stream"], true);
    let keys: Vec<&String> = out.as_object().unwrap().keys().collect();
    assert_eq!(keys.len(), 5, "{keys:?}");

    // Array content anywhere makes the system prompt an array of text blocks.
    let out = translate(json!({"model":"m","messages":[
        {"role":"system","content":"A"},
        {"role":"system","content":[{"type":"text","text":"B","cache_control":{"type":"ephemeral"}}]},
        user(),
    ]}));
    assert_eq!(
        out["system"],
        json!([{"type":"text","text":"A"},{"type":"text","text":"B","cache_control":{"type":"ephemeral"}}])
    );
    assert!(out.get("stream").is_none());
}

#[test]
fn tool_round_trip_merges_into_alternating_turns() {
    let out = translate(json!({"model":"m","messages":[
        {"role":"user","content":"Weather in Paris and Rome?"},
        {"role":"assistant","content":"Checking.","tool_calls":[
            {"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},
            {"id":"call_2","type":"function","function":{"name":"get_weather","arguments":""}}
        ]},
        {"role":"tool","tool_call_id":"call_1","content":"18C"},
        {"role":"tool","tool_call_id":"call_2","content":[{"type":"text","text":"21C"}]},
        {"role":"user","content":"And tomorrow?"},
        {"role":"assistant","content":""},
        {"role":"user","content":"?"},
    ]}));
    assert_eq!(
        out["messages"],
        json!([
            {"role":"user","content":[{"type":"text","text":"Weather in Paris and Rome?"}]},
            {"role":"assistant","content":[
                {"type":"text","text":"Checking."},
                {"type":"tool_use","id":"call_1","name":"get_weather","input":{"city":"Paris"}},
                {"type":"tool_use","id":"call_2","name":"get_weather","input":{}}
            ]},
            {"role":"user","content":[
                {"type":"tool_result","tool_use_id":"call_1","content":"18C"},
                {"type":"tool_result","tool_use_id":"call_2","content":[{"type":"text","text":"21C"}]},
                {"type":"text","text":"And tomorrow?"},
                {"type":"text","text":"?"}
            ]}
        ])
    );
    let bad = translate_err(json!({"model":"m","messages":[user(),
        {"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{oops"}}]}]}));
    assert!(
        bad.starts_with("messages[1].tool_calls[0].function.arguments:"),
        "{bad}"
    );
}

#[test]
fn images_by_data_url_and_by_http_url() {
    let out = translate(json!({"model":"m","messages":[{"role":"user","content":[
        {"type":"text","text":"What is this?"},
        {"type":"text","text":""},
        {"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="},"cache_control":{"type":"ephemeral"}},
        {"type":"image_url","image_url":{"url":"https://example.com/cat.jpg","detail":"high"}}
    ]}]}));
    assert_eq!(
        out["messages"][0]["content"],
        json!([
            {"type":"text","text":"What is this?"},
            {"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="},"cache_control":{"type":"ephemeral"}},
            {"type":"image","source":{"type":"url","url":"https://example.com/cat.jpg"}}
        ])
    );
    let e = translate_err(json!({"model":"m","messages":[{"role":"user","content":[
        {"type":"text","text":"x"},{"type":"input_audio","input_audio":{"data":"","format":"wav"}}]}]}));
    assert!(e.starts_with("messages[0].content[1].type:"), "{e}");
    let e = translate_err(json!({"model":"m","messages":[{"role":"user","content":[
        {"type":"image_url","image_url":{"url":"ftp://x/y.png"}}]}]}));
    assert!(
        e.starts_with("messages[0].content[0].image_url.url:"),
        "{e}"
    );
}

#[test]
fn tools_and_tool_choice_variants() {
    let tools = json!([
        {"type":"function","function":{"name":"get_weather","description":"Weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}},
        {"type":"function","function":{"name":"now"}}
    ]);
    let with = |extra: Value| {
        let mut req = json!({"model":"m","messages":[user()],"tools":tools});
        for (k, v) in extra.as_object().unwrap() {
            req[k] = v.clone();
        }
        translate(req)
    };
    let out = with(json!({}));
    assert_eq!(
        out["tools"],
        json!([
            {"name":"get_weather","description":"Weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}},
            {"name":"now","input_schema":{"type":"object","properties":{}}}
        ])
    );
    assert!(out.get("tool_choice").is_none());
    for (choice, expected) in [
        (json!("auto"), json!({"type":"auto"})),
        (json!("none"), json!({"type":"none"})),
        (json!("required"), json!({"type":"any"})),
        (
            json!({"type":"function","function":{"name":"now"}}),
            json!({"type":"tool","name":"now"}),
        ),
    ] {
        assert_eq!(with(json!({"tool_choice":choice}))["tool_choice"], expected);
    }
    let out = with(json!({"parallel_tool_calls":false}));
    assert_eq!(
        out["tool_choice"],
        json!({"type":"auto","disable_parallel_tool_use":true})
    );
    let out = with(json!({"parallel_tool_calls":false,"tool_choice":"required"}));
    assert_eq!(
        out["tool_choice"],
        json!({"type":"any","disable_parallel_tool_use":true})
    );
    // Without tools there is no tool_choice to send.
    let out = translate(json!({"model":"m","messages":[user()],"tool_choice":"none"}));
    assert!(out.get("tool_choice").is_none() && out.get("tools").is_none());
}

#[test]
fn sampling_fields_stop_and_user() {
    let out = translate(
        json!({"model":"m","messages":[user()],"stop":"END","temperature":1.7,
        "top_p":0.9,"user":"u-42","n":1,"logprobs":false,"presence_penalty":0,"frequency_penalty":0.0,
        "response_format":{"type":"text"},"metadata":{"a":"b"},"store":true,"modalities":["text"]}),
    );
    assert_eq!(out["stop_sequences"], json!(["END"]));
    assert_eq!(out["temperature"], 1.0);
    assert_eq!(out.get("top_p"), None, "temperature wins");
    assert_eq!(out["metadata"], json!({"user_id":"u-42"}));
    assert_eq!(out.as_object().unwrap().len(), 6, "{out}");
    let out =
        translate(json!({"model":"m","messages":[user()],"stop":["a","b"],"temperature":0.3}));
    assert_eq!(out["stop_sequences"], json!(["a", "b"]));
    assert_eq!(out["temperature"], 0.3);
}

#[test]
fn untranslatable_fields_are_refused_by_name() {
    for (field, value) in [
        ("n", json!(2)),
        ("logprobs", json!(true)),
        ("top_logprobs", json!(3)),
        ("response_format", json!({"type":"json_object"})),
        ("logit_bias", json!({"50256": -100})),
        ("seed", json!(7)),
        ("presence_penalty", json!(0.5)),
        ("frequency_penalty", json!(-1)),
        ("audio", json!({"voice":"alloy","format":"wav"})),
        ("modalities", json!(["text", "audio"])),
        ("prediction", json!({"type":"content","content":"x"})),
        ("functions", json!([{"name":"f"}])),
    ] {
        let mut req = json!({"model":"m","messages":[user()]});
        req[field] = value;
        let e = check_translatable(&chat(req)).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidRequest);
        assert!(e.message.starts_with(&format!("{field}:")), "{}", e.message);
        assert!(
            e.message.contains("Anthropic Messages API"),
            "{}",
            e.message
        );
    }
    // Neutral values pass.
    let req = chat(json!({"model":"m","messages":[user()],"seed":null,"logit_bias":{},"n":1}));
    check_translatable(&req).unwrap();
}

#[test]
fn conversations_anthropic_cannot_take() {
    let e = translate_err(json!({"model":"m","messages":[
        {"role":"system","content":"s"},{"role":"assistant","content":"Hello!"},user()]}));
    assert_eq!(
        e,
        "messages: the first non-system message must be from the user for this model"
    );
    let e = translate_err(json!({"model":"m","messages":[{"role":"system","content":"s"}]}));
    assert_eq!(e, "messages: at least one user message is required");
    let e = translate_err(json!({"model":"m","messages":[user(),
        {"role":"function","name":"f","content":"x"}]}));
    assert!(e.starts_with("messages[1].role:"), "{e}");
}

#[test]
fn top_p_gives_way_to_temperature_and_a_neutral_one_is_dropped() {
    let send = |extra: serde_json::Value| {
        let mut body =
            serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        let raw = serde_json::to_vec(&body).unwrap();
        let req = crate::openai::request::parse_chat_request(&raw).unwrap();
        let out = super::request::openai_to_messages(&req, "up", 10).unwrap();
        serde_json::from_slice::<serde_json::Value>(&out).unwrap()
    };
    let v = send(serde_json::json!({"temperature": 0.5, "top_p": 0.9}));
    assert_eq!(
        (v["temperature"].as_f64(), v.get("top_p")),
        (Some(0.5), None)
    );
    assert!(send(serde_json::json!({"top_p": 1})).get("top_p").is_none());
    assert_eq!(send(serde_json::json!({"top_p": 0.9}))["top_p"], 0.9);
}

#[test]
fn tools_other_than_functions_and_openai_only_options_are_refused() {
    for (field, value) in [
        ("reasoning_effort", serde_json::json!("high")),
        ("web_search_options", serde_json::json!({})),
        ("tools", serde_json::json!([{"type": "web_search"}])),
    ] {
        let mut body =
            serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
        body[field] = value;
        let raw = serde_json::to_vec(&body).unwrap();
        let req = crate::openai::request::parse_chat_request(&raw);
        let Ok(req) = req else { continue };
        let e = super::request::check_translatable(&req).unwrap_err();
        assert!(e.message.starts_with(field), "{}", e.message);
    }
}
