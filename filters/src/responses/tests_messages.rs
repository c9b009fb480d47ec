//! Responses ⇄ Messages, as the pipeline composes them: a Responses request written as the
//! internal chat request and that as an Anthropic Messages body; an Anthropic reply and stream
//! read into chat (the internal shape) and written as a response object and Responses events.
//! Also a provider that serves the Responses API itself.

use std::sync::Arc;

use serde_json::{json, Value};

use super::native::{rewrite_native, NativeStream};
use super::reply::{completion_to_response, Head};
use super::request::parse_responses_request;
use super::stream::{Opening, ResponsesStream};
use crate::anthropic::completion::message_to_completion;
use crate::anthropic::request::openai_to_messages;
use crate::anthropic::stream::ToOpenAi;
use crate::openai::request::parse_chat_request;
use crate::openai::stream::StreamStep;
use crate::translator::StreamTranslator;
use crate::Usage;

fn head() -> Head {
    Head {
        id: "resp_x".into(),
        created_at: 1,
        model: "claude".into(),
    }
}

#[test]
fn a_responses_request_reaches_an_anthropic_provider_as_a_messages_body() {
    let body = json!({"model": "claude", "instructions": "Be brief.", "max_output_tokens": 300,
        "tools": [{"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}],
        "input": [{"role": "user", "content": "weather?"},
                  {"type": "function_call", "call_id": "toolu_1", "name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"},
                  {"type": "function_call_output", "call_id": "toolu_1", "output": "rain"}]});
    let req = parse_responses_request(body.to_string().as_bytes()).unwrap();
    let chat_body = req.chat_body(&[]).unwrap();
    let chat = parse_chat_request(&chat_body).unwrap();
    let m: Value =
        serde_json::from_slice(&openai_to_messages(&chat, "claude-up", 300).unwrap()).unwrap();
    assert_eq!(m["model"], "claude-up");
    assert_eq!(m["max_tokens"], 300);
    assert_eq!(m["system"], "Be brief.");
    assert_eq!(m["tools"][0]["name"], "get_weather");
    let msgs = m["messages"].as_array().unwrap();
    assert_eq!(msgs[1]["content"][0]["type"], "tool_use");
    assert_eq!(msgs[1]["content"][0]["input"], json!({"city": "Oslo"}));
    assert_eq!(msgs[2]["content"][0]["type"], "tool_result");
    assert_eq!(msgs[2]["content"][0]["tool_use_id"], "toolu_1");
}

#[test]
fn an_anthropic_reply_becomes_a_response_object() {
    let reply = json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-up",
        "content": [{"type": "text", "text": "Checking."},
                    {"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {"city": "Oslo"}}],
        "stop_reason": "tool_use", "usage": {"input_tokens": 20, "output_tokens": 9}});
    let (chat, usage) = message_to_completion(reply.to_string().as_bytes(), "claude", 1).unwrap();
    assert_eq!((usage.prompt_tokens, usage.completion_tokens), (20, 9));
    let f = parse_responses_request(br#"{"model":"claude","input":"x"}"#)
        .unwrap()
        .frame;
    let r = completion_to_response(&chat, &f, &head()).unwrap();
    assert_eq!(r["output"][0]["content"][0]["text"], "Checking.");
    assert_eq!(r["output"][1]["type"], "function_call");
    assert_eq!(r["output"][1]["call_id"], "toolu_2");
    assert_eq!(
        serde_json::from_str::<Value>(r["output"][1]["arguments"].as_str().unwrap()).unwrap(),
        json!({"city": "Oslo"})
    );
    assert_eq!(r["usage"]["input_tokens"], 20);
}

/// Parallel tool calls whose argument fragments interleave, after text.
fn anthropic_stream() -> Vec<(&'static str, Value)> {
    let delta = |i: u64, d: Value| json!({"type": "content_block_delta", "index": i, "delta": d});
    let start =
        |i: u64, b: Value| json!({"type": "content_block_start", "index": i, "content_block": b});
    vec![
        (
            "message_start",
            json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
            "model": "claude-up", "content": [], "stop_reason": null, "usage": {"input_tokens": 50, "output_tokens": 1}}}),
        ),
        (
            "content_block_start",
            start(0, json!({"type": "text", "text": ""})),
        ),
        (
            "content_block_delta",
            delta(0, json!({"type": "text_delta", "text": "Let me "})),
        ),
        (
            "content_block_delta",
            delta(0, json!({"type": "text_delta", "text": "check."})),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "content_block_start",
            start(
                1,
                json!({"type": "tool_use", "id": "toolu_a", "name": "get_weather", "input": {}}),
            ),
        ),
        (
            "content_block_delta",
            delta(
                1,
                json!({"type": "input_json_delta", "partial_json": "{\"city\": \"Os"}),
            ),
        ),
        (
            "content_block_start",
            start(
                2,
                json!({"type": "tool_use", "id": "toolu_b", "name": "get_time", "input": {}}),
            ),
        ),
        (
            "content_block_delta",
            delta(
                2,
                json!({"type": "input_json_delta", "partial_json": "{\"tz\": \"CET\"}"}),
            ),
        ),
        (
            "content_block_delta",
            delta(
                1,
                json!({"type": "input_json_delta", "partial_json": "lo\"}"}),
            ),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 1}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 2}),
        ),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 40}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ]
}

fn events(bytes: &[u8]) -> Vec<(String, Value)> {
    String::from_utf8(bytes.to_vec())
        .unwrap()
        .split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| {
            let (name, data) = e.split_once('\n').unwrap();
            (
                name.trim_start_matches("event: ").to_owned(),
                serde_json::from_str(data.trim_start_matches("data: ")).unwrap(),
            )
        })
        .collect()
}

#[test]
fn an_anthropic_stream_with_parallel_tool_calls_becomes_responses_events() {
    let opening = Opening {
        frame: Arc::new(
            parse_responses_request(br#"{"model":"claude","input":"x","stream":true}"#)
                .unwrap()
                .frame,
        ),
        id: "resp_x".into(),
        created_at: 1,
    };
    let inner = Box::new(ToOpenAi::new("claude", true, 1));
    let mut s = ResponsesStream::new(inner, &opening, "claude");
    let mut out = Vec::new();
    for (name, data) in anthropic_stream() {
        match s.on_event(Some(name), &data.to_string()) {
            StreamStep::Emit(b) => out.extend(b),
            StreamStep::Done => break,
            StreamStep::UpstreamError(e) => panic!("{e}"),
        }
    }
    assert!(s.finished());
    let usage = s.upstream_usage().expect("Anthropic's usage");
    assert_eq!((usage.prompt_tokens, usage.completion_tokens), (50, 40));
    out.extend(s.close(usage, None));
    let ev = events(&out);
    for (i, (_, d)) in ev.iter().enumerate() {
        assert_eq!(d["sequence_number"], i);
    }
    let done = &ev.last().unwrap().1["response"];
    assert_eq!(ev.last().unwrap().0, "response.completed");
    let output = done["output"].as_array().unwrap();
    assert_eq!(output[0]["content"][0]["text"], "Let me check.");
    let calls: Vec<(&str, Value)> = output[1..]
        .iter()
        .map(|c| {
            (
                c["call_id"].as_str().unwrap(),
                serde_json::from_str(c["arguments"].as_str().unwrap()).unwrap(),
            )
        })
        .collect();
    assert_eq!(
        calls,
        [
            ("toolu_a", json!({"city": "Oslo"})),
            ("toolu_b", json!({"tz": "CET"}))
        ]
    );
    assert_eq!(done["usage"]["output_tokens"], 40);
}

#[test]
fn a_native_provider_body_reply_and_stream_keep_the_gateways_id_and_chain() {
    let req = parse_responses_request(br#"{"model":"m","input":"next","previous_response_id":"resp_9","store":true,"include":["reasoning.encrypted_content"]}"#).unwrap();
    let history = vec![json!({"type": "message", "role": "user", "content": "first"})];
    let body: Value = serde_json::from_slice(&req.native_body(&history, "up-m", 64)).unwrap();
    assert_eq!(
        (
            body["model"].as_str(),
            body["max_output_tokens"].as_u64(),
            body["store"].as_bool()
        ),
        (Some("up-m"), Some(64), Some(false))
    );
    assert!(body.get("previous_response_id").is_none());
    assert_eq!(body["input"].as_array().unwrap().len(), 2);
    assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));

    let reply = json!({"id": "resp_up", "object": "response", "model": "up-m", "status": "completed",
        "output": [{"type": "message", "content": [{"type": "output_text", "text": "hey"}]}],
        "usage": {"input_tokens": 5, "output_tokens": 2, "input_tokens_details": {"cached_tokens": 1}}});
    let (r, usage, counted) =
        rewrite_native(reply.to_string().as_bytes(), &head(), |_| unreachable!()).unwrap();
    assert_eq!(
        (r["id"].as_str(), r["model"].as_str()),
        (Some("resp_x"), Some("claude"))
    );
    assert_eq!(
        (usage.prompt_tokens, usage.cache_read_tokens, counted),
        (5, 1, false)
    );
    let bare = json!({"object": "response", "output": [{"type": "message", "content": [{"type": "output_text", "text": "hey"}]}]});
    let (r, _, counted) = rewrite_native(bare.to_string().as_bytes(), &head(), |t| Usage {
        completion_tokens: t.len() as u64,
        ..Usage::default()
    })
    .unwrap();
    assert!(counted);
    assert_eq!(r["usage"]["output_tokens"], 3);
    assert!(rewrite_native(b"{\"object\":\"list\"}", &head(), |_| Usage::default()).is_err());

    let mut s = NativeStream::new(head());
    let created = json!({"type": "response.created", "sequence_number": 0, "response": {"id": "resp_up", "model": "up-m"}});
    let StreamStep::Emit(b) = s.on_event(None, &created.to_string()) else {
        panic!()
    };
    assert_eq!(events(&b)[0].1["response"]["id"], "resp_x");
    assert!(!s.has_output());
    let delta = json!({"type": "response.output_text.delta", "sequence_number": 1, "delta": "hey"});
    assert!(matches!(
        s.on_event(None, &delta.to_string()),
        StreamStep::Emit(_)
    ));
    assert!(s.has_output());
    let completed = json!({"type": "response.completed", "sequence_number": 2,
        "response": {"id": "resp_up", "model": "up-m", "usage": {"input_tokens": 5, "output_tokens": 1}}});
    assert!(
        matches!(s.on_event(None, &completed.to_string()), StreamStep::Done),
        "held back"
    );
    let tail = s.close(s.upstream_usage().unwrap(), None);
    assert_eq!(events(&tail)[0].1["response"]["id"], "resp_x");
    assert_eq!(s.take_object().unwrap()["model"], "claude");
    let failed = json!({"type": "response.failed", "response": {"error": {"message": "boom"}}});
    assert!(matches!(
        NativeStream::new(head()).on_event(None, &failed.to_string()),
        StreamStep::UpstreamError(_)
    ));
}
