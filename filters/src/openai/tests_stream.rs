//! The stream rewriter: model names, the usage chunk, the finish split, the fast path.

use super::stream::*;
use crate::cost::Cost;
use crate::Usage;
use serde_json::{json, Value};

fn emitted(step: StreamStep) -> Vec<Value> {
    let StreamStep::Emit(bytes) = step else {
        panic!("expected emit, got {step:?}")
    };
    String::from_utf8(bytes)
        .unwrap()
        .split("\n\n")
        .filter(|s| !s.is_empty())
        .map(|s| serde_json::from_str(s.strip_prefix("data: ").unwrap()).unwrap())
        .collect()
}

#[test]
fn rewrites_model_and_strips_usage_chunk() {
    let mut r = StreamRewriter::new("pinned-1", false);
    let c = emitted(r.on_event(r#"{"id":"x","object":"chat.completion.chunk","created":1,"model":"up","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}"#));
    assert_eq!(c[0]["model"], "pinned-1");
    let c = emitted(r.on_event(r#"{"id":"x","created":1,"model":"up","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}"#));
    assert!(c.is_empty());
    assert_eq!(
        r.upstream_usage(),
        Some(Usage {
            prompt_tokens: 3,
            completion_tokens: 1,
            ..Usage::default()
        })
    );
    assert_eq!(r.on_event("[DONE]"), StreamStep::Done);
    assert_eq!(r.delivered_text(), "hi");
}

#[test]
fn fast_path_matches_the_general_path() {
    let samples = [
        r#"{"id":"a","object":"chat.completion.chunk","created":7,"model":"up","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#,
        r#"{"id":"a","created":7,"model":"up","choices":[{"index":0,"delta":{"content":"caf\u00e9 \"q\"\n"},"logprobs":null,"finish_reason":null}],"system_fingerprint":"fp"}"#,
        r#"{ "choices" : [ {"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"get","arguments":"{\"a\":"}}]},"finish_reason":null}, {"index":1,"delta":{"content":"x"},"finish_reason":null} ] , "id":"b" }"#,
        // Not for the fast path: finish, missing finish_reason, usage, odd content.
        r#"{"id":"a","choices":[{"index":0,"delta":{"content":"end"},"finish_reason":"stop"}]}"#,
        r#"{"id":"a","choices":[{"index":0,"delta":{"content":"y"}}]}"#,
        r#"{"id":"a","choices":[{"index":0,"delta":{"content":"z"},"finish_reason":null}],"usage":null}"#,
        r#"{"id":"a","choices":[{"index":0,"delta":{"content":[1]},"finish_reason":null}]}"#,
        "{\"id\":\"a\",\n\"choices\":[{\"index\":0,\"delta\":{\"content\":\"w\"},\"finish_reason\":null}]}",
    ];
    for (i, sample) in samples.iter().enumerate() {
        let mut fast = StreamRewriter::new("pin", false);
        let mut general = StreamRewriter::new("pin", false);
        let expected = general.general_chunk(sample);
        let got = fast.on_event(sample);
        assert_eq!(emitted(got), emitted(expected), "sample {i}");
        assert_eq!(
            fast.delivered_text(),
            general.delivered_text(),
            "sample {i}"
        );
        assert_eq!(fast.finished(), general.finished(), "sample {i}");
        assert_eq!(fast.has_output(), general.has_output(), "sample {i}");
        let took_fast = StreamRewriter::new("pin", false)
            .fast_chunk(sample)
            .is_some();
        assert_eq!(took_fast, i < 3, "sample {i}");
    }
    // Content with escapes is counted as the text it encodes.
    let mut r = StreamRewriter::new("pin", false);
    r.on_event(samples[1]);
    assert_eq!(r.delivered_text(), "café \"q\"\n");
    // Untouched members come through byte for byte; each event is one line.
    let mut r = StreamRewriter::new("p\"n", false);
    let StreamStep::Emit(out) = r.on_event(samples[2]) else {
        panic!("expected emit")
    };
    let text = String::from_utf8(out).unwrap();
    assert!(text.starts_with(r#"data: { "choices" : [ {"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"get","arguments":"{\"a\":"}}]}"#));
    assert!(text.ends_with(
        r#""id":"b" ,"model":"p\"n","object":"chat.completion.chunk"}

"#
    ));
    // The id and created of fast-path chunks are used for synthesised chunks.
    let mut r = StreamRewriter::new("pin", true);
    r.on_event(samples[0]);
    let fin: Value = serde_json::from_slice(&r.synthetic_finish_chunk()[6..]).unwrap();
    assert_eq!(fin["id"], "a");
    assert_eq!(fin["created"], 7);
}

#[test]
fn keeps_usage_chunk_when_asked_and_sends_it_at_the_close_with_the_cost() {
    let mut r = StreamRewriter::new("m", true);
    let c = emitted(r.on_event(
        r#"{"id":"x","created":1,"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
    ));
    assert_eq!(c.len(), 1);
    // Held back: the cost is known only after the settlement.
    let c = emitted(r.on_event(r#"{"id":"x","created":1,"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4,"prompt_tokens_details":{"cached_tokens":2},"completion_tokens_details":{"reasoning_tokens":1}},"service_tier":"default"}"#));
    assert!(c.is_empty());
    let usage = r.upstream_usage().unwrap();
    assert_eq!((usage.cache_read_tokens, usage.reasoning_tokens), (2, 1));
    let rates = crate::credits::Rates {
        input: 1_000_000,
        output: 2_000_000,
        cache_read: Some(100_000),
        ..Default::default()
    };
    let cost = Cost::new(1_000 + 200 + 2_000, usage, &rates);
    let tail = r.close(usage, Some(&cost));
    let text = String::from_utf8(tail).unwrap();
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    let c = emitted(StreamStep::Emit(
        text.trim_end_matches("data: [DONE]\n\n")
            .as_bytes()
            .to_vec(),
    ));
    assert_eq!(c.len(), 1, "{text}");
    let u = &c[0]["usage"];
    assert_eq!(u["total_tokens"], 4);
    assert_eq!(u["prompt_tokens_details"]["cached_tokens"], 2);
    assert_eq!(u["completion_tokens_details"]["reasoning_tokens"], 1);
    assert_eq!(u["cost"], 0.0032);
    assert_eq!(u["cost_details"]["cache_read"], 0.0002);
    assert_eq!(c[0]["model"], "m");
    assert_eq!(c[0]["service_tier"], "default");

    // Usage riding on a content chunk: the content goes now, the usage at the close.
    let mut r = StreamRewriter::new("m", true);
    let c = emitted(r.on_event(r#"{"id":"y","created":2,"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}"#));
    assert!(c.iter().all(|c| c.get("usage").is_none()), "{c:?}");
    assert_eq!(c[0]["choices"][0]["delta"]["content"], "a");
    let text = String::from_utf8(r.close(usage, None)).unwrap();
    let c = emitted(StreamStep::Emit(
        text.trim_end_matches("data: [DONE]\n\n")
            .as_bytes()
            .to_vec(),
    ));
    assert_eq!(c[0]["choices"], json!([]));
    assert_eq!(c[0]["id"], "y");
    assert_eq!(c[0]["usage"]["total_tokens"], 4);
    assert!(c[0]["usage"].get("cost").is_none(), "a guest's: no cost");

    // No usage from the upstream: the counted one, with the cost.
    let mut r = StreamRewriter::new("m", true);
    r.on_event(r#"{"id":"z","created":3,"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}"#);
    let text = String::from_utf8(r.close(usage, Some(&cost))).unwrap();
    let c = emitted(StreamStep::Emit(
        text.trim_end_matches("data: [DONE]\n\n")
            .as_bytes()
            .to_vec(),
    ));
    assert_eq!(
        c[0]["choices"][0]["finish_reason"], "stop",
        "the finish it lacked"
    );
    assert_eq!(c[1]["usage"]["prompt_tokens"], 3);
    assert_eq!(c[1]["usage"]["cost"], 0.0032);
}

#[test]
fn splits_content_from_finish() {
    let mut r = StreamRewriter::new("m", false);
    let c = emitted(r.on_event(r#"{"id":"x","created":1,"choices":[{"index":0,"delta":{"content":"end"},"finish_reason":"stop"}]}"#));
    assert_eq!(c.len(), 2);
    assert_eq!(c[0]["choices"][0]["delta"]["content"], "end");
    assert!(c[0]["choices"][0]["finish_reason"].is_null());
    assert_eq!(c[1]["choices"][0]["delta"], json!({}));
    assert_eq!(c[1]["choices"][0]["finish_reason"], "stop");
    assert!(r.finished());
}

#[test]
fn error_events_and_garbage() {
    let mut r = StreamRewriter::new("m", false);
    assert!(matches!(
        r.on_event(r#"{"error":{"message":"overloaded"}}"#),
        StreamStep::UpstreamError(_)
    ));
    assert!(matches!(
        r.on_event("not json"),
        StreamStep::UpstreamError(_)
    ));
}

#[test]
fn only_content_a_tool_call_a_refusal_or_a_finish_counts_as_output() {
    let chunk = |delta: &str, finish: &str| {
        format!(
            r#"{{"id":"a","choices":[{{"index":0,"delta":{delta},"finish_reason":{finish}}}]}}"#
        )
    };
    let output_after = |events: &[String]| {
        let mut r = StreamRewriter::new("pin", false);
        for e in events {
            r.on_event(e);
        }
        r.has_output()
    };
    let role = chunk(r#"{"role":"assistant","content":""}"#, "null");
    assert!(!output_after(std::slice::from_ref(&role)));
    assert!(!output_after(&[
        role.clone(),
        chunk(r#"{"content":""}"#, "null")
    ]));
    assert!(output_after(&[
        role.clone(),
        chunk(r#"{"content":"Hi"}"#, "null")
    ]));
    assert!(output_after(&[chunk(r#"{"refusal":"no"}"#, "null")]));
    assert!(output_after(&[chunk(
        r#"{"tool_calls":[{"index":0,"function":{"name":"f","arguments":""}}]}"#,
        "null"
    )]));
    assert!(output_after(&[chunk("{}", r#""stop""#)]));
}
