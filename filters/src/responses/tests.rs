use std::sync::Arc;

use serde_json::{json, Value};

use super::items::with_ids;
use super::reply::{completion_to_response, Head};
use super::request::parse_responses_request;
use super::stream::{Opening, ResponsesStream};
use crate::openai::request::parse_chat_request;
use crate::openai::stream::{StreamRewriter, StreamStep};
use crate::translator::StreamTranslator;
use crate::GatewayError;

fn chat(body: Value) -> Value {
    let req = parse_responses_request(body.to_string().as_bytes()).unwrap();
    let out = req.chat_body(&[]).unwrap();
    // The internal request is a valid chat request.
    parse_chat_request(&out).unwrap();
    serde_json::from_slice(&out).unwrap()
}

fn refused(body: Value) -> GatewayError {
    parse_responses_request(body.to_string().as_bytes()).expect_err(&body.to_string())
}

#[test]
fn a_string_input_is_one_user_message_after_the_instructions() {
    let c = chat(
        json!({"model": "m", "input": "hi", "instructions": "be brief",
        "max_output_tokens": 50, "temperature": 0.5}),
    );
    assert_eq!(
        c["messages"],
        json!([{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}])
    );
    assert_eq!(c["max_tokens"], 50);
    assert_eq!(c["temperature"], 0.5);
    assert!(c.get("stream").is_none());
}

#[test]
fn a_stream_asks_the_provider_for_its_usage() {
    let c = chat(json!({"model": "m", "input": "hi", "stream": true}));
    assert_eq!(c["stream"], true);
    assert_eq!(c["stream_options"], json!({"include_usage": true}));
}

#[test]
fn a_function_tool_round_trip_becomes_tool_calls_and_a_tool_message() {
    let c = chat(json!({
        "model": "m",
        "tools": [{"type": "function", "name": "get_weather", "description": "d",
                   "parameters": {"type": "object", "properties": {}}, "strict": true}],
        "tool_choice": {"type": "function", "name": "get_weather"},
        "input": [
            {"role": "developer", "content": "sys"},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "weather?"}]},
            {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"},
            {"type": "function_call", "call_id": "c2", "name": "get_weather", "arguments": "{}"},
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
            {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "rain"}]},
        ]
    }));
    assert_eq!(
        c["tools"],
        json!([{"type": "function", "function": {"name": "get_weather", "description": "d",
            "parameters": {"type": "object", "properties": {}}, "strict": true}}])
    );
    assert_eq!(
        c["tool_choice"],
        json!({"type": "function", "function": {"name": "get_weather"}})
    );
    assert_eq!(c["parallel_tool_calls"], true);
    let m = c["messages"].as_array().unwrap();
    assert_eq!(m[0], json!({"role": "system", "content": "sys"}));
    assert_eq!(m[1], json!({"role": "user", "content": "weather?"}));
    assert_eq!(m[2]["role"], "assistant");
    assert_eq!(m[2]["tool_calls"].as_array().unwrap().len(), 2);
    assert_eq!(m[2]["tool_calls"][1]["id"], "c2");
    assert_eq!(
        m[3],
        json!({"role": "tool", "tool_call_id": "c1", "content": "sunny"})
    );
    assert_eq!(m[4]["content"], "rain");
    assert_eq!(m.len(), 5);
}

#[test]
fn text_formats_become_response_formats() {
    let c = chat(
        json!({"model": "m", "input": "x", "text": {"format": {"type": "json_schema",
        "name": "person", "schema": {"type": "object"}, "strict": true}}}),
    );
    assert_eq!(
        c["response_format"],
        json!({"type": "json_schema", "json_schema": {"name": "person",
            "schema": {"type": "object"}, "strict": true}})
    );
    let c = chat(json!({"model": "m", "input": "x", "text": {"format": {"type": "json_object"}}}));
    assert_eq!(c["response_format"], json!({"type": "json_object"}));
    let c = chat(json!({"model": "m", "input": "x", "reasoning": {"effort": "low"}}));
    assert_eq!(c["reasoning_effort"], "low");
}

#[test]
fn images_go_as_image_url_parts() {
    let c = chat(json!({"model": "m", "input": [{"role": "user", "content": [
        {"type": "input_text", "text": "what is it"},
        {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "low"}]}]}));
    assert_eq!(
        c["messages"][0]["content"],
        json!([{"type": "text", "text": "what is it"},
               {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA", "detail": "low"}}])
    );
}

#[test]
fn what_a_chat_provider_cannot_honour_is_refused_by_name() {
    let cases = [
        (json!({"input": "x"}), "model"),
        (json!({"model": "m"}), "input"),
        (json!({"model": "m", "input": 3}), "input"),
        (
            json!({"model": "m", "input": [{"type": "computer_call"}]}),
            "input[0].type",
        ),
        (
            json!({"model": "m", "input": [{"role": "robot", "content": "x"}]}),
            "input[0].role",
        ),
        (
            json!({"model": "m", "input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]}),
            "input[0].content[0].type",
        ),
        (
            json!({"model": "m", "input": [{"role": "user", "content": [{"type": "input_image", "file_id": "f"}]}]}),
            "input[0].content[0].file_id",
        ),
        (
            json!({"model": "m", "input": [{"type": "function_call", "call_id": "c", "name": "f"}]}),
            "input[0].arguments",
        ),
        (
            json!({"model": "m", "input": [{"type": "item_reference", "id": "x"}]}),
            "input[0].type",
        ),
        (
            json!({"model": "m", "input": "x", "tools": [{"type": "local_shell"}]}),
            "tools[0].type",
        ),
        (
            json!({"model": "m", "input": "x", "tools": [{"type": "function"}]}),
            "tools[0].name",
        ),
        (
            json!({"model": "m", "input": "x", "include": ["file_search_call.results"]}),
            "include[0]",
        ),
        (
            json!({"model": "m", "input": "x", "temperature": 3}),
            "temperature",
        ),
        (
            json!({"model": "m", "input": "x", "max_output_tokens": 0}),
            "max_output_tokens",
        ),
        (
            json!({"model": "m", "input": "x", "text": {"format": {"type": "json_schema"}}}),
            "text.format.name",
        ),
        (
            json!({"model": "m", "input": "x", "background": true}),
            "background",
        ),
        (
            json!({"model": "m", "input": "x", "prompt": {"id": "p"}}),
            "prompt",
        ),
        (
            json!({"model": "m", "input": "x", "tools": [{"type": "namespace", "name": "ns",
                "tools": [{"type": "custom", "name": "c"}]}]}),
            "tools[0].tools[0].type",
        ),
        (
            json!({"model": "m", "input": "x", "metadata": {"k": 1}}),
            "metadata.k",
        ),
        (
            json!({"model": "m", "input": "x", "previous_response_id": 5}),
            "previous_response_id",
        ),
    ];
    for (body, field) in cases {
        let e = refused(body.clone());
        assert_eq!(e.param.as_deref(), Some(field), "{body}: {}", e.message);
    }
    assert!(parse_responses_request(b"[1]").is_err());
    assert!(parse_responses_request(b"{").is_err());
}

#[test]
fn members_the_gateway_does_not_know_are_let_through_unread() {
    let c = chat(
        json!({"model": "m", "input": "x", "client_metadata": {"a": "b"}, "prompt_cache_key": "k"}),
    );
    assert!(c.get("client_metadata").is_none() && c.get("prompt_cache_key").is_none());
}

#[test]
fn a_namespace_tools_functions_are_chat_tools_and_their_calls_name_the_namespace() {
    let body = json!({"model": "m", "tools": [{"type": "namespace", "name": "crm", "description": "d",
        "tools": [{"type": "function", "name": "find", "parameters": {"type": "object"}}]}],
        "input": [{"role": "user", "content": "x"},
                  {"type": "function_call", "call_id": "c1", "namespace": "crm", "name": "find", "arguments": "{}"},
                  {"type": "function_call_output", "call_id": "c1", "output": "none"}]});
    let c = chat(body.clone());
    assert_eq!(c["tools"][0]["function"]["name"], "crm__find");
    assert_eq!(
        c["messages"][1]["tool_calls"][0]["function"]["name"],
        "crm__find"
    );
    let f = parse_responses_request(body.to_string().as_bytes())
        .unwrap()
        .frame;
    let completion = json!({"choices": [{"finish_reason": "tool_calls", "message": {"content": null,
        "tool_calls": [{"id": "c2", "type": "function", "function": {"name": "crm__find", "arguments": "{}"}}]}}]});
    let r = completion_to_response(completion.to_string().as_bytes(), &f, &head()).unwrap();
    assert_eq!(
        (
            r["output"][0]["name"].as_str(),
            r["output"][0]["namespace"].as_str()
        ),
        (Some("find"), Some("crm"))
    );
}

#[test]
fn stored_items_get_ids_that_name_their_response() {
    let items = vec![
        json!({"type": "message", "role": "user", "content": "x"}),
        json!({"type": "function_call_output", "call_id": "c", "output": "o"}),
        json!({"id": "mine", "type": "message", "role": "user", "content": "y"}),
    ];
    let ids: Vec<_> = with_ids(&items, "resp_abc")
        .iter()
        .map(|i| i["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids, ["msg_abc_in0", "fco_abc_in1", "mine"]);
}

fn head() -> Head {
    Head {
        id: "resp_1".into(),
        created_at: 7,
        model: "served".into(),
    }
}

fn frame(body: Value) -> super::request::Frame {
    parse_responses_request(body.to_string().as_bytes())
        .unwrap()
        .frame
}

#[test]
fn a_chat_completion_becomes_a_response_object() {
    let f = frame(json!({"model": "m", "input": "x", "metadata": {"k": "v"}, "store": false}));
    let completion = json!({"id": "c", "object": "chat.completion", "model": "served",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant",
            "content": "let me look", "reasoning_content": "hmm",
            "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}},
                           {"id": "call_2", "type": "function", "function": {"name": "g", "arguments": "{}"}}]}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15,
                  "prompt_tokens_details": {"cached_tokens": 4},
                  "completion_tokens_details": {"reasoning_tokens": 2}}});
    let r = completion_to_response(completion.to_string().as_bytes(), &f, &head()).unwrap();
    assert_eq!(r["object"], "response");
    assert_eq!(r["id"], "resp_1");
    assert_eq!(r["status"], "completed");
    assert_eq!(r["model"], "served");
    assert_eq!(r["store"], false);
    assert_eq!(r["metadata"], json!({"k": "v"}));
    let out = r["output"].as_array().unwrap();
    assert_eq!(out[0]["type"], "reasoning");
    assert_eq!(out[0]["summary"][0]["text"], "hmm");
    assert_eq!(out[1]["type"], "message");
    assert_eq!(
        out[1]["content"][0],
        json!({"type": "output_text", "text": "let me look", "annotations": [], "logprobs": []})
    );
    assert_eq!(out[2]["type"], "function_call");
    assert_eq!(out[2]["call_id"], "call_1");
    assert_eq!(out[2]["arguments"], "{\"a\":1}");
    assert_eq!(out[3]["name"], "g");
    assert_eq!(
        r["usage"],
        json!({"input_tokens": 10, "input_tokens_details": {"cached_tokens": 4},
               "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 2}, "total_tokens": 15})
    );
    let cut = json!({"choices": [{"finish_reason": "length", "message": {"content": "ab"}}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1}});
    let r = completion_to_response(cut.to_string().as_bytes(), &f, &head()).unwrap();
    assert_eq!(r["status"], "incomplete");
    assert_eq!(r["incomplete_details"]["reason"], "max_output_tokens");
    assert!(completion_to_response(b"nope", &f, &head()).is_err());
}

/// Runs chat chunks through a Responses stream; returns the events as (name, data).
fn run_stream(chunks: &[Value]) -> (Vec<(String, Value)>, Option<Value>) {
    let mut s = stream();
    let mut out = Vec::new();
    for c in chunks {
        if let StreamStep::Emit(b) = s.on_event(None, &c.to_string()) {
            out.extend_from_slice(&b);
        }
    }
    assert!(matches!(s.on_event(None, "[DONE]"), StreamStep::Done));
    let usage = s.upstream_usage().unwrap_or_default();
    out.extend_from_slice(&s.close(usage, None));
    (parse_events(&out), s.take_object())
}

fn stream() -> ResponsesStream {
    let opening = Opening {
        frame: Arc::new(frame(json!({"model": "m", "input": "x", "stream": true}))),
        id: "resp_1".into(),
        created_at: 7,
    };
    ResponsesStream::new(
        Box::new(StreamRewriter::new("served", true)),
        &opening,
        "served",
    )
}

fn parse_events(bytes: &[u8]) -> Vec<(String, Value)> {
    let text = String::from_utf8(bytes.to_vec()).unwrap();
    text.split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| {
            let (name, data) = e.split_once('\n').unwrap();
            let name = name.strip_prefix("event: ").unwrap().to_owned();
            let data: Value = serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap();
            assert_eq!(data["type"], name.as_str());
            (name, data)
        })
        .collect()
}

fn chunk(delta: Value, finish: Option<&str>) -> Value {
    json!({"id": "c", "object": "chat.completion.chunk", "model": "up",
           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
}

#[test]
fn a_text_stream_becomes_typed_events_in_order() {
    let (events, object) = run_stream(&[
        chunk(json!({"role": "assistant", "content": ""}), None),
        chunk(json!({"content": "Hel"}), None),
        chunk(json!({"content": "lo"}), None),
        chunk(json!({}), Some("stop")),
        json!({"id": "c", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}),
    ]);
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed"
        ]
    );
    for (i, (_, d)) in events.iter().enumerate() {
        assert_eq!(d["sequence_number"], i);
    }
    assert_eq!(events[6].1["text"], "Hello");
    let done = &events[9].1["response"];
    assert_eq!(done["status"], "completed");
    assert_eq!(done["model"], "served");
    assert_eq!(done["output"][0]["content"][0]["text"], "Hello");
    assert_eq!(done["usage"]["input_tokens"], 3);
    assert_eq!(done["usage"]["total_tokens"], 5);
    assert_eq!(object.as_ref(), Some(done));
}

#[test]
fn tool_calls_split_across_deltas_and_parallel_calls_become_items() {
    let call = |i: u64, id: Option<&str>, name: Option<&str>, args: &str| {
        let mut f = json!({"arguments": args});
        if let Some(n) = name {
            f["name"] = json!(n);
        }
        let mut c = json!({"index": i, "function": f});
        if let Some(id) = id {
            c["id"] = json!(id);
            c["type"] = json!("function");
        }
        chunk(json!({"tool_calls": [c]}), None)
    };
    let (events, object) = run_stream(&[
        chunk(json!({"role": "assistant"}), None),
        call(0, Some("call_a"), Some("f"), ""),
        call(0, None, None, "{\"x\":"),
        call(0, None, None, "1}"),
        call(1, Some("call_b"), Some("g"), "{}"),
        chunk(json!({}), Some("tool_calls")),
        json!({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 9}}),
    ]);
    let done: Vec<&Value> = events
        .iter()
        .filter(|(n, _)| n == "response.function_call_arguments.done")
        .map(|(_, d)| d)
        .collect();
    assert_eq!(done.len(), 2);
    assert_eq!(done[0]["arguments"], "{\"x\":1}");
    assert_eq!(done[1]["arguments"], "{}");
    let deltas = events
        .iter()
        .filter(|(n, _)| n == "response.function_call_arguments.delta")
        .count();
    assert_eq!(deltas, 3);
    let object = object.unwrap();
    let out = object["output"].as_array().unwrap();
    assert_eq!(out.len(), 2);
    assert_eq!(out[0]["call_id"], "call_a");
    assert_eq!(out[0]["status"], "completed");
    assert_eq!(out[1]["name"], "g");
}

#[test]
fn a_stream_cut_after_output_ends_with_error_and_failed() {
    let mut s = stream();
    let first = s.on_event(None, &chunk(json!({"content": "Hi"}), None).to_string());
    assert!(s.has_output());
    let StreamStep::Emit(first) = first else {
        panic!("no events");
    };
    let n = parse_events(&first).len();
    let tail = s.error_event(&GatewayError::upstream("the stream broke off"));
    let events = parse_events(&tail);
    assert_eq!(events[0].0, "error");
    assert_eq!(events[0].1["sequence_number"], n);
    assert_eq!(events[1].0, "response.failed");
    assert_eq!(events[1].1["response"]["status"], "failed");
    assert_eq!(
        events[1].1["response"]["output"][0]["content"][0]["text"],
        "Hi"
    );
    assert!(s.take_object().is_some());
}

#[test]
fn hosted_tools_are_kept_for_a_responses_provider_and_left_out_for_a_chat_one() {
    // What Codex sends on its defaults, and the search it sends back in the next request.
    let body = json!({
        "model": "m",
        "input": [
            {"role": "user", "content": "news?"},
            {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "rust"}},
            {"role": "assistant", "content": "here"},
        ],
        "tools": [
            {"type": "function", "name": "shell", "parameters": {"type": "object", "properties": {}}},
            {"type": "web_search", "external_web_access": false},
            {"type": "web_search_preview_2025_03_11"},
        ],
        "tool_choice": "auto",
    });
    let raw = body.to_string();
    let req = parse_responses_request(raw.as_bytes()).unwrap();
    assert_eq!(
        req.hosted_tools,
        ["web_search", "web_search_preview_2025_03_11"]
    );
    assert!(req.check_bridgeable("m").is_ok());
    assert!(req
        .dropped_warning()
        .unwrap()
        .contains("web_search, web_search_preview_2025_03_11"));
    // The chat body has the function only, and no hosted call item.
    let chat: Value = serde_json::from_slice(&req.chat_body(&[]).unwrap()).unwrap();
    assert_eq!(chat["tools"].as_array().unwrap().len(), 1);
    assert_eq!(chat["tools"][0]["function"]["name"], "shell");
    assert_eq!(chat["messages"].as_array().unwrap().len(), 2, "{chat}");
    // The native body keeps them all.
    let native: Value = serde_json::from_slice(&req.native_body(&[], "up", 100)).unwrap();
    assert_eq!(native["tools"].as_array().unwrap().len(), 3);
    assert_eq!(native["tools"][1]["type"], "web_search");
    assert_eq!(native["input"][1]["type"], "web_search_call");
    // Forcing a hosted tool is for a Responses provider only.
    let forced = json!({"model": "m", "input": "x", "tools": [{"type": "web_search"}], "tool_choice": {"type": "web_search"}});
    let req = parse_responses_request(forced.to_string().as_bytes()).unwrap();
    let e = req.check_bridgeable("m").unwrap_err();
    assert!(e.message.starts_with("tool_choice:"), "{}", e.message);
    let native: Value = serde_json::from_slice(&req.native_body(&[], "up", 100)).unwrap();
    assert_eq!(native["tool_choice"]["type"], "web_search");
}
