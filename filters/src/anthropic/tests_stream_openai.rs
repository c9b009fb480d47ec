//! OpenAI-compatible upstream streams to an Anthropic client ([`FromOpenAi`]), on chunks shaped
//! like those of OpenAI's streaming reference.

use serde_json::{json, Value};

use super::stream::{FromOpenAi, ToOpenAi};
use super::tests_stream::{anthropic_events, emitted};
use crate::openai::stream::StreamStep;
use crate::translator::StreamTranslator;
use crate::Usage;

#[test]
fn from_openai_translates_a_text_stream() {
    let chunks = [
        r#"{"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","system_fingerprint":"fp_44709d6fcb","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}"#,
        r#"{"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}]}"#,
        r#"{"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":" there"},"logprobs":null,"finish_reason":null}]}"#,
        r#"{"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]}"#,
        r#"{"id":"chatcmpl-123","object":"chat.completion.chunk","created":1694268190,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}"#,
    ];
    let mut t = FromOpenAi::new("ours");
    let mut out = Vec::new();
    for (i, c) in chunks.iter().enumerate() {
        out.extend(emitted(t.on_event(None, c)));
        assert_eq!(t.has_output(), i >= 1, "chunk {i}");
        assert_eq!(t.finished(), i >= 3, "chunk {i}");
    }
    assert_eq!(t.on_event(None, "[DONE]"), StreamStep::Done);
    let usage = t.upstream_usage().unwrap();
    assert_eq!((usage.prompt_tokens, usage.completion_tokens), (9, 2));
    out.extend(t.close(usage, None));
    let events = anthropic_events(&out);
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    let start = &events[0].1["message"];
    assert_eq!(start["id"], "msg_chatcmpl-123");
    assert_eq!(start["model"], "ours");
    assert_eq!(start["content"], json!([]));
    assert_eq!(
        events[1].1["content_block"],
        json!({"type":"text","text":""})
    );
    assert_eq!(
        events[2].1["delta"],
        json!({"type":"text_delta","text":"Hello"})
    );
    assert!(events[1..5].iter().all(|(_, d)| d["index"] == 0));
    assert_eq!(events[5].1["delta"]["stop_reason"], "end_turn");
    assert_eq!(
        events[5].1["usage"],
        json!({"input_tokens":9,"output_tokens":2})
    );
    assert_eq!(t.delivered_text(), "Hello there");
}

#[test]
fn from_openai_translates_parallel_tool_calls() {
    let c = |delta: &str, finish: &str| {
        format!(
            r#"{{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{{"index":0,"delta":{delta},"finish_reason":{finish}}}]}}"#
        )
    };
    let chunks = [
        c(r#"{"role":"assistant","content":null}"#, "null"),
        c(r#"{"content":"Checking."}"#, "null"),
        c(
            r#"{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"get_weather","arguments":""}}]}"#,
            "null",
        ),
        c(
            r#"{"tool_calls":[{"index":0,"function":{"arguments":"{\"location\":"}}]}"#,
            "null",
        ),
        c(
            r#"{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]}"#,
            "null",
        ),
        c(
            r#"{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"get_time","arguments":"{\"tz\":\"CET\"}"}}]}"#,
            "null",
        ),
        c("{}", r#""tool_calls""#),
    ];
    let mut t = FromOpenAi::new("ours");
    let mut out = Vec::new();
    for chunk in &chunks {
        out.extend(emitted(t.on_event(None, chunk)));
    }
    assert!(t.finished() && t.upstream_usage().is_none());
    out.extend(t.close(
        Usage {
            prompt_tokens: 20,
            completion_tokens: 12,
            ..Usage::default()
        },
        None,
    ));
    let events = anthropic_events(&out);
    let starts: Vec<&Value> = events
        .iter()
        .filter(|(n, _)| n == "content_block_start")
        .map(|(_, d)| d)
        .collect();
    assert_eq!(starts.len(), 3);
    assert_eq!(starts[1]["index"], 1);
    assert_eq!(
        starts[1]["content_block"],
        json!({"type":"tool_use","id":"call_a","name":"get_weather","input":{}})
    );
    assert_eq!(starts[2]["index"], 2);
    assert_eq!(starts[2]["content_block"]["id"], "call_b");
    let args = |index: u64| -> String {
        events
            .iter()
            .filter(|(n, d)| n == "content_block_delta" && d["index"] == index)
            .map(|(_, d)| {
                assert_eq!(d["delta"]["type"], "input_json_delta");
                d["delta"]["partial_json"].as_str().unwrap().to_owned()
            })
            .collect()
    };
    assert_eq!(args(1), r#"{"location":"Paris"}"#);
    assert_eq!(args(2), r#"{"tz":"CET"}"#);
    // Every block started is stopped once, before the next starts.
    let mut open: Option<u64> = None;
    for (n, d) in &events {
        match n.as_str() {
            "content_block_start" => assert!(open.replace(d["index"].as_u64().unwrap()).is_none()),
            "content_block_stop" => assert_eq!(open.take(), d["index"].as_u64()),
            _ => {}
        }
    }
    assert!(open.is_none());
    let delta = &events[events.len() - 2].1;
    assert_eq!(delta["delta"]["stop_reason"], "tool_use");
    assert_eq!(
        delta["usage"],
        json!({"input_tokens":20,"output_tokens":12})
    );
}

#[test]
fn from_openai_errors_and_empty_streams() {
    let mut t = FromOpenAi::new("m");
    let step = t.on_event(
        None,
        r#"{"error":{"message":"rate limited","type":"rate_limit"}}"#,
    );
    assert!(matches!(step, StreamStep::UpstreamError(e) if e["message"] == "rate limited"));
    assert!(matches!(
        t.on_event(None, "nope"),
        StreamStep::UpstreamError(_)
    ));
    assert!(!t.has_output());
    // Closed with nothing received, the client still gets a well-formed message.
    let names: Vec<String> = anthropic_events(&t.close(Usage::default(), None))
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(names, ["message_start", "message_delta", "message_stop"]);
    let err = crate::GatewayError::new(crate::ErrorKind::Overloaded, "busy");
    assert!(t.error_event(&err).starts_with(b"event: error\ndata: "));
    assert!(ToOpenAi::new("m", false, 0)
        .error_event(&err)
        .starts_with(b"data: {\"error\""));
}
