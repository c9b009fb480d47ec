use serde_json::{json, Value};

use super::reply::{completion_to_gemini, error_body};
use super::request::parse_gemini_request;
use super::stream::GeminiStream;
use super::{split_method, Method};
use crate::openai::request::parse_chat_request;
use crate::openai::stream::{StreamRewriter, StreamStep};
use crate::translator::StreamTranslator;
use crate::GatewayError;

fn chat(body: Value) -> Value {
    let req = parse_gemini_request(body.to_string().as_bytes()).unwrap();
    let out = req.chat_body("m", false);
    parse_chat_request(&out).unwrap();
    serde_json::from_slice(&out).unwrap()
}

#[test]
fn contents_become_chat_messages_and_calls_pair_with_their_responses() {
    let c = chat(json!({
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "contents": [
            {"role": "user", "parts": [{"text": "Weather in Paris and Oslo?"},
                {"inlineData": {"mimeType": "image/png", "data": "AAAA"}}]},
            {"role": "model", "parts": [{"text": "Checking."},
                {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}},
                {"functionCall": {"name": "get_weather", "args": {"city": "Oslo"}}}]},
            {"role": "user", "parts": [
                {"functionResponse": {"name": "get_weather", "response": {"sky": "sun"}}},
                {"functionResponse": {"name": "get_weather", "response": {"sky": "rain"}}}]},
        ],
        "tools": [{"functionDeclarations": [{"name": "get_weather", "description": "d",
            "parameters": {"type": "OBJECT", "properties": {"city": {"type": "STRING"}}}}]}],
        "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}},
        "generationConfig": {"temperature": 0.3, "topP": 0.9, "maxOutputTokens": 77, "stopSequences": ["END"]},
    }));
    let m = c["messages"].as_array().unwrap();
    assert_eq!(m[0], json!({"role": "system", "content": "Be brief."}));
    assert_eq!(
        m[1]["content"][1]["image_url"]["url"],
        "data:image/png;base64,AAAA"
    );
    assert_eq!(m[2]["role"], "assistant");
    assert_eq!(m[2]["content"], "Checking.");
    assert_eq!(m[2]["tool_calls"][0]["id"], "call_get_weather_0");
    assert_eq!(
        m[2]["tool_calls"][1]["function"]["arguments"],
        "{\"city\":\"Oslo\"}"
    );
    assert_eq!(
        m[3],
        json!({"role": "tool", "tool_call_id": "call_get_weather_0", "content": "{\"sky\":\"sun\"}"})
    );
    assert_eq!(m[4]["tool_call_id"], "call_get_weather_1");
    assert_eq!(
        c["tools"][0]["function"]["parameters"],
        json!({"type": "object", "properties": {"city": {"type": "string"}}})
    );
    assert_eq!(
        c["tool_choice"],
        json!({"type": "function", "function": {"name": "get_weather"}})
    );
    assert_eq!(
        (c["temperature"].as_f64(), c["max_tokens"].as_u64()),
        (Some(0.3), Some(77))
    );
    assert_eq!(c["stop"], json!(["END"]));
}

#[test]
fn structured_output_and_json_schema_tools_are_carried() {
    let c = chat(json!({"contents": [{"parts": [{"text": "x"}]}],
        "tools": [{"functionDeclarations": [{"name": "f", "parametersJsonSchema": {"type": "object", "properties": {}}}]}],
        "generationConfig": {"responseMimeType": "application/json",
            "responseSchema": {"type": "OBJECT", "properties": {"city": {"type": "STRING"}}}}}));
    assert_eq!(c["tools"][0]["function"]["parameters"]["type"], "object");
    assert_eq!(
        c["response_format"]["json_schema"]["schema"]["properties"]["city"]["type"],
        "string"
    );
    let c = chat(
        json!({"contents": [{"parts": [{"text": "x"}]}], "generationConfig": {"responseMimeType": "application/json"}}),
    );
    assert_eq!(c["response_format"], json!({"type": "json_object"}));
}

#[test]
fn bad_requests_are_refused_by_name() {
    for (body, field) in [
        (json!({}), "contents"),
        (json!({"contents": []}), "contents"),
        (
            json!({"contents": [{"role": "assistant", "parts": [{"text": "x"}]}]}),
            "contents[0].role",
        ),
        (json!({"contents": [{"role": "user"}]}), "contents[0].parts"),
        (
            json!({"contents": [{"parts": [{"fileData": {"fileUri": "gs://x"}}]}]}),
            "contents[0].parts[0]",
        ),
        (
            json!({"contents": [{"parts": [{"text": 5}]}]}),
            "contents[0].parts[0].text",
        ),
        (
            json!({"contents": [{"parts": [{"inlineData": {"mimeType": "audio/wav", "data": "AA"}}]}]}),
            "contents[0].parts[0].inlineData.mimeType",
        ),
        (
            json!({"contents": [{"parts": [{"text": "x"}]}], "tools": [{"googleSearch": {}}]}),
            "tools[0].googleSearch",
        ),
        (
            json!({"contents": [{"parts": [{"text": "x"}]}], "generationConfig": {"temperature": 9}}),
            "generationConfig.temperature",
        ),
        (
            json!({"contents": [{"parts": [{"text": "x"}]}], "generationConfig": {"maxOutputTokens": 0}}),
            "generationConfig.maxOutputTokens",
        ),
    ] {
        let e = parse_gemini_request(body.to_string().as_bytes()).unwrap_err();
        assert_eq!(e.param.as_deref(), Some(field), "{body}: {}", e.message);
    }
    assert!(parse_gemini_request(b"[").is_err());
}

#[test]
fn a_chat_completion_becomes_a_gemini_response() {
    let completion = json!({"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"content": "Hi",
        "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{\"a\":1}"}}]}}],
        "usage": {"prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6}});
    let r = completion_to_gemini(completion.to_string().as_bytes(), "m", "rid").unwrap();
    let parts = &r["candidates"][0]["content"]["parts"];
    assert_eq!(parts[0]["text"], "Hi");
    assert_eq!(
        parts[1]["functionCall"],
        json!({"name": "f", "args": {"a": 1}})
    );
    assert_eq!(r["candidates"][0]["finishReason"], "STOP");
    assert_eq!(
        r["usageMetadata"],
        json!({"promptTokenCount": 4, "candidatesTokenCount": 2, "totalTokenCount": 6})
    );
    assert_eq!(r["modelVersion"], "m");
    let (code, body) = error_body(&GatewayError::invalid("contents: is required"));
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        (code, body["error"]["status"].as_str()),
        (400, Some("INVALID_ARGUMENT"))
    );
}

fn chunk(delta: Value, finish: Option<&str>) -> String {
    json!({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}).to_string()
}

fn run(sse: bool) -> (Vec<u8>, &'static str) {
    let mut s = GeminiStream::new(Box::new(StreamRewriter::new("m", true)), "m", "rid", sse);
    let mut out = Vec::new();
    for c in [
        chunk(json!({"role": "assistant", "content": ""}), None),
        chunk(json!({"content": "He"}), None),
        chunk(json!({"content": "llo"}), None),
        chunk(json!({"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "f", "arguments": "{\"a\":"}}]}), None),
        chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]}), None),
        chunk(json!({}), Some("tool_calls")),
        json!({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8}}).to_string(),
    ] {
        if let StreamStep::Emit(b) = s.on_event(None, &c) {
            out.extend(b);
        }
    }
    let usage = s.upstream_usage().unwrap();
    out.extend(s.close(usage, None));
    (out, s.content_type())
}

#[test]
fn a_stream_is_text_chunks_then_the_calls_finish_and_usage() {
    let (out, ty) = run(true);
    assert_eq!(ty, "text/event-stream");
    let events: Vec<Value> = String::from_utf8(out)
        .unwrap()
        .split("\n\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    assert_eq!(events.len(), 3);
    assert_eq!(
        events[0]["candidates"][0]["content"]["parts"][0]["text"],
        "He"
    );
    let last = &events[2]["candidates"][0];
    assert_eq!(
        last["content"]["parts"][0]["functionCall"],
        json!({"name": "f", "args": {"a": 1}})
    );
    assert_eq!(last["finishReason"], "STOP");
    assert_eq!(events[2]["usageMetadata"]["totalTokenCount"], 8);

    let (out, ty) = run(false);
    assert_eq!(ty, "application/json");
    let array: Vec<Value> = serde_json::from_slice(&out).unwrap();
    assert_eq!(array.len(), 3);
    assert_eq!(
        array[1]["candidates"][0]["content"]["parts"][0]["text"],
        "llo"
    );
}

#[test]
fn a_broken_stream_ends_with_googles_error_and_a_closed_array() {
    let mut s = GeminiStream::new(Box::new(StreamRewriter::new("m", true)), "m", "rid", false);
    let StreamStep::Emit(mut out) = s.on_event(None, &chunk(json!({"content": "Hi"}), None)) else {
        panic!()
    };
    out.extend(s.error_event(&GatewayError::upstream("broke off")));
    let array: Vec<Value> = serde_json::from_slice(&out).unwrap();
    assert_eq!(array[1]["error"]["status"], "UNAVAILABLE");
}

#[test]
fn methods_are_read_from_the_model_segment() {
    assert_eq!(
        split_method("gemini-2.5-pro:generateContent"),
        Some(("gemini-2.5-pro", Method::Generate))
    );
    assert_eq!(
        split_method("m:streamGenerateContent"),
        Some(("m", Method::Stream))
    );
    assert_eq!(
        split_method("m:countTokens"),
        Some(("m", Method::CountTokens))
    );
    assert_eq!(split_method("m:embedContent"), None);
    assert_eq!(split_method(":generateContent"), None);
    assert_eq!(split_method("m"), None);
}
