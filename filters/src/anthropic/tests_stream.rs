//! Anthropic upstream streams (to an OpenAI client and passed through) against hand-written
//! streams shaped like those of Anthropic's streaming reference.

use serde_json::{json, Value};

use super::stream::{Passthrough, ToOpenAi};
use crate::openai::stream::StreamStep;
use crate::translator::StreamTranslator;
use crate::Usage;

/// An Anthropic stream as (event, data) pairs: text, thinking, two parallel tool calls whose
/// argument fragments interleave, a ping, an unknown event, usage with cache counts.
fn anthropic_stream() -> Vec<(&'static str, &'static str)> {
    vec![
        (
            "message_start",
            r#"{"type":"message_start","message":{"id":"msg_014p7gG3wDgGV9EUtLvnow3U","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","stop_sequence":null,"usage":{"input_tokens":472,"cache_creation_input_tokens":100,"cache_read_input_tokens":2000,"output_tokens":2},"content":[],"stop_reason":null}}"#,
        ),
        (
            "content_block_start",
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Need weather."}}"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCgIYAhIM"}}"#,
        ),
        (
            "content_block_stop",
            r#"{"type":"content_block_stop","index":0}"#,
        ),
        (
            "content_block_start",
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}"#,
        ),
        ("ping", r#"{"type": "ping"}"#),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Okay, let me"}}"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":" check."}}"#,
        ),
        (
            "content_block_stop",
            r#"{"type":"content_block_stop","index":1}"#,
        ),
        (
            "content_block_start",
            r#"{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_01T1x1fJ34qAmk2tNTrN7Up6","name":"get_weather","input":{}}}"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}}"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"location\": \"San Fra"}}"#,
        ),
        (
            "content_block_start",
            r#"{"type":"content_block_start","index":3,"content_block":{"type":"tool_use","id":"toolu_02","name":"get_time","input":{}}}"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":"{\"tz\":"}}"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"ncisco, CA\"}"}}"#,
        ),
        (
            "content_block_delta",
            r#"{"type":"content_block_delta","index":3,"delta":{"type":"input_json_delta","partial_json":"\"PST\"}"}}"#,
        ),
        (
            "content_block_stop",
            r#"{"type":"content_block_stop","index":2}"#,
        ),
        (
            "content_block_stop",
            r#"{"type":"content_block_stop","index":3}"#,
        ),
        ("some_future_event", r#"{"type":"some_future_event","x":1}"#),
        (
            "message_delta",
            r#"{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":89}}"#,
        ),
        ("message_stop", r#"{"type":"message_stop"}"#),
    ]
}

pub(super) fn emitted(step: StreamStep) -> Vec<u8> {
    match step {
        StreamStep::Emit(b) => b,
        other => panic!("expected emit, got {other:?}"),
    }
}

/// OpenAI chunks of SSE bytes (`[DONE]` as the string "[DONE]").
fn openai_chunks(bytes: &[u8]) -> Vec<Value> {
    String::from_utf8(bytes.to_vec())
        .unwrap()
        .split("\n\n")
        .filter(|s| !s.is_empty())
        .map(|s| {
            let d = s.strip_prefix("data: ").unwrap();
            serde_json::from_str(d).unwrap_or_else(|_| Value::String(d.into()))
        })
        .collect()
}

/// Anthropic events of SSE bytes as (name, data).
pub(super) fn anthropic_events(bytes: &[u8]) -> Vec<(String, Value)> {
    String::from_utf8(bytes.to_vec())
        .unwrap()
        .split("\n\n")
        .filter(|s| !s.is_empty())
        .map(|s| {
            let (name, data) = s.split_once('\n').unwrap();
            let name = name.strip_prefix("event: ").unwrap().to_owned();
            let data: Value = serde_json::from_str(data.strip_prefix("data: ").unwrap()).unwrap();
            assert_eq!(data["type"], name.as_str());
            (name, data)
        })
        .collect()
}

#[test]
fn to_openai_translates_a_full_stream() {
    let mut t = ToOpenAi::new("ours-1", true, 1_700_000_000);
    let mut out = Vec::new();
    let mut done = false;
    for (i, (event, data)) in anthropic_stream().into_iter().enumerate() {
        match t.on_event(Some(event), data) {
            StreamStep::Emit(b) => out.extend(b),
            StreamStep::Done => done = true,
            other => panic!("{other:?}"),
        }
        if i == 0 {
            // The role chunk alone is not output.
            assert!(!t.has_output() && !out.is_empty());
        }
        if i == 4 {
            assert!(!t.has_output(), "thinking is not OpenAI output");
        }
        assert_eq!(t.upstream_usage().is_some(), i >= 20);
    }
    assert!(done && t.finished() && t.has_output());
    let usage = t.upstream_usage().unwrap();
    assert_eq!(
        usage,
        Usage {
            prompt_tokens: 472 + 100 + 2000,
            completion_tokens: 89,
            cache_read_tokens: 2000,
            cache_write_tokens: 100,
            ..Usage::default()
        }
    );
    out.extend(t.close(usage, None));
    let chunks = openai_chunks(&out);
    assert_eq!(chunks.last().unwrap(), "[DONE]");
    let chunks = &chunks[..chunks.len() - 1];
    for c in chunks {
        assert_eq!(c["id"], "chatcmpl-msg_014p7gG3wDgGV9EUtLvnow3U");
        assert_eq!(c["object"], "chat.completion.chunk");
        assert_eq!(c["model"], "ours-1");
        assert_eq!(c["created"], 1_700_000_000);
    }
    assert_eq!(
        chunks[0]["choices"][0]["delta"],
        json!({"role":"assistant","content":""})
    );

    let mut content = String::new();
    let mut calls: Vec<(String, String, String)> = Vec::new();
    for c in chunks
        .iter()
        .filter(|c| c["choices"].as_array().is_some_and(|a| !a.is_empty()))
    {
        let d = &c["choices"][0]["delta"];
        content.push_str(d["content"].as_str().unwrap_or_default());
        for call in d["tool_calls"].as_array().into_iter().flatten() {
            let k = call["index"].as_u64().unwrap() as usize;
            if k == calls.len() {
                assert_eq!(call["type"], "function");
                calls.push((
                    call["id"].as_str().unwrap().into(),
                    String::new(),
                    String::new(),
                ));
            }
            let f = &call["function"];
            calls[k].1.push_str(f["name"].as_str().unwrap_or_default());
            calls[k]
                .2
                .push_str(f["arguments"].as_str().unwrap_or_default());
        }
    }
    assert_eq!(content, "Okay, let me check.");
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].0, "toolu_01T1x1fJ34qAmk2tNTrN7Up6");
    assert_eq!(calls[0].1, "get_weather");
    let args: Value = serde_json::from_str(&calls[0].2).unwrap();
    assert_eq!(args, json!({"location": "San Francisco, CA"}));
    assert_eq!(
        (calls[1].0.as_str(), calls[1].1.as_str()),
        ("toolu_02", "get_time")
    );
    assert_eq!(calls[1].2, r#"{"tz":"PST"}"#);

    let fin = &chunks[chunks.len() - 2];
    assert_eq!(fin["choices"][0]["finish_reason"], "tool_calls");
    assert_eq!(fin["choices"][0]["delta"], json!({}));
    let finishes = chunks
        .iter()
        .filter(|c| !c["choices"][0]["finish_reason"].is_null())
        .count();
    assert_eq!(finishes, 1);
    let last = &chunks[chunks.len() - 1];
    assert_eq!(last["choices"], json!([]));
    assert_eq!(last["usage"]["prompt_tokens"], 2572);
    assert_eq!(last["usage"]["completion_tokens"], 89);
    assert_eq!(last["usage"]["total_tokens"], 2661);
    assert_eq!(
        last["usage"]["prompt_tokens_details"]["cached_tokens"],
        2000
    );
    assert!(t.delivered_text().contains("Okay, let me check."));
    assert!(t.delivered_text().contains("San Fra"));
}

#[test]
fn to_openai_error_first_is_an_upstream_error_before_output() {
    let mut t = ToOpenAi::new("m", false, 0);
    let step = t.on_event(
        Some("error"),
        r#"{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}"#,
    );
    assert_eq!(
        step,
        StreamStep::UpstreamError(json!({"type": "overloaded_error", "message": "Overloaded"}))
    );
    assert!(!t.has_output());
    let StreamStep::UpstreamError(e) = t.on_event(None, "<html>") else {
        panic!("garbage must be an upstream error")
    };
    assert_eq!(
        e["message"],
        "upstream sent a stream event that is not a JSON object"
    );
    assert_eq!(
        t.on_event(Some("ping"), r#"{"type":"ping"}"#),
        StreamStep::Emit(Vec::new())
    );
}

#[test]
fn to_openai_close_without_finish_and_newer_usage_counts() {
    let mut t = ToOpenAi::new("m", false, 5);
    let stream = anthropic_stream();
    for (event, data) in &stream[..9] {
        emitted(t.on_event(Some(event), data));
    }
    assert!(t.has_output() && !t.finished());
    assert_eq!(t.upstream_usage(), None);
    let chunks = openai_chunks(&t.close(Usage::default(), None));
    assert_eq!(
        chunks.len(),
        2,
        "a finish and [DONE], no usage chunk: {chunks:?}"
    );
    assert_eq!(chunks[0]["choices"][0]["finish_reason"], "stop");

    // A message_delta that carries the prompt's counts too (newer API versions) wins.
    let mut t = ToOpenAi::new("m", false, 5);
    emitted(t.on_event(Some("message_start"), stream[0].1));
    emitted(t.on_event(
        Some("message_delta"),
        r#"{"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"input_tokens":10,"cache_read_input_tokens":0,"output_tokens":3}}"#,
    ));
    let u = t.upstream_usage().unwrap();
    assert_eq!(
        (u.prompt_tokens, u.cache_write_tokens, u.completion_tokens),
        (110, 100, 3)
    );
}

/// A passthrough fed the whole sample stream.
fn fed_the_sample_stream() -> Passthrough {
    let mut t = Passthrough::new("m");
    for (event, data) in anthropic_stream() {
        t.on_event(Some(event), data);
    }
    t
}

#[test]
fn passthrough_copies_events_but_the_model() {
    let mut t = Passthrough::new("ours \"2\"");
    let mut out = Vec::new();
    let mut done = false;
    let mut delta = None;
    for (i, (event, data)) in anthropic_stream().into_iter().enumerate() {
        match t.on_event(Some(event), data) {
            StreamStep::Emit(b) => {
                let text = String::from_utf8(b.clone()).unwrap();
                let expected = format!("event: {event}\ndata: {data}\n\n");
                if event == "message_delta" {
                    assert!(text.is_empty(), "held back for the close, with the cost");
                    delta = Some(data);
                } else if i == 0 {
                    let with_ours = data.replace(
                        r#""model":"claude-sonnet-4-5-20250929""#,
                        r#""model":"ours \"2\"""#,
                    );
                    assert_eq!(text, format!("event: {event}\ndata: {with_ours}\n\n"));
                    assert!(!t.has_output());
                } else {
                    assert_eq!(text, expected, "event {i} copied byte for byte");
                }
                out.extend(b);
            }
            StreamStep::Done => done = true,
            other => panic!("{other:?}"),
        }
        if i == 1 {
            assert!(!t.has_output(), "an empty thinking block is not output yet");
        }
        if i == 2 {
            assert!(
                t.has_output(),
                "thinking text is output for an Anthropic client"
            );
        }
    }
    assert!(done && t.finished());
    assert!(!String::from_utf8(out).unwrap().contains("message_stop"));
    let usage = t.upstream_usage().unwrap();
    assert_eq!(usage.prompt_tokens, 2572);
    // Without a cost (a guest's stream) the held `message_delta` goes out as it came.
    let mut guest = fed_the_sample_stream();
    let tail = String::from_utf8(guest.close(usage, None)).unwrap();
    assert!(tail.starts_with(&format!(
        "event: message_delta\ndata: {}\n\n",
        delta.unwrap()
    )));
    let rates = crate::credits::Rates {
        input: 3_000_000,
        output: 15_000_000,
        ..Default::default()
    };
    let cost = crate::cost::Cost::new(crate::credits::cost_at(usage, &rates), usage, &rates);
    let tail = anthropic_events(&t.close(usage, Some(&cost)));
    assert_eq!(tail.len(), 2);
    assert_eq!(tail[0].0, "message_delta");
    let u = &tail[0].1["usage"];
    assert_eq!(u["output_tokens"], 89, "the upstream's usage kept: {u}");
    assert_eq!(u["cost"], cost.charged as f64 / 1e6);
    assert!(u["cost_details"]["output"].as_f64().unwrap() > 0.0);
    assert_eq!(tail[1].0, "message_stop");

    // A multi-line data field keeps its framing.
    let mut t = Passthrough::new("m");
    let b = emitted(t.on_event(Some("ping"), "{\"type\":\n\"ping\"}"));
    assert_eq!(b, b"event: ping\ndata: {\"type\":\ndata: \"ping\"}\n\n");
}

#[test]
fn passthrough_close_ends_an_unfinished_stream_and_reports_errors() {
    let mut t = Passthrough::new("m");
    let stream = anthropic_stream();
    for (event, data) in &stream[..8] {
        emitted(t.on_event(Some(event), data));
    }
    assert!(!t.finished());
    let usage = Usage {
        completion_tokens: 7,
        ..Usage::default()
    };
    let tail = anthropic_events(&t.close(usage, None));
    let names: Vec<&str> = tail.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["content_block_stop", "message_delta", "message_stop"]
    );
    assert_eq!(tail[0].1["index"], 1);
    assert_eq!(tail[1].1["delta"]["stop_reason"], "end_turn");
    assert_eq!(tail[1].1["usage"]["output_tokens"], 7);

    let mut t = Passthrough::new("m");
    let step = t.on_event(
        Some("error"),
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
    );
    assert!(matches!(step, StreamStep::UpstreamError(e) if e["type"] == "overloaded_error"));
    assert!(!t.has_output());
}
