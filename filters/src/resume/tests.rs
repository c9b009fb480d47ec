use serde_json::{json, Value};

use super::request::{
    anthropic_continuation, header_value, openai_continuation, take_extension, Continuation,
};
use super::*;
use crate::anthropic::stream::{Passthrough, ToOpenAi};
use crate::openai::stream::StreamRewriter;

fn emit(t: &mut dyn StreamTranslator, event: Option<&str>, data: Value) -> String {
    match t.on_event(event, &data.to_string()) {
        StreamStep::Emit(b) => String::from_utf8(b).unwrap(),
        other => panic!("{other:?}"),
    }
}

fn chunk(id: &str, delta: Value) -> Value {
    json!({"id": id, "object": "chat.completion.chunk", "created": 7, "model": "up",
        "choices": [{"index": 0, "delta": delta, "finish_reason": null}]})
}

fn datas(s: &str) -> Vec<Value> {
    s.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

#[test]
fn a_chat_leg_continues_with_the_first_id_and_no_second_opening() {
    let mut s = Seamed::new(Frame::Chat, Box::new(StreamRewriter::new("m1", true)));
    emit(
        &mut s,
        None,
        chunk("first", json!({"role": "assistant", "content": ""})),
    );
    emit(&mut s, None, chunk("first", json!({"content": "Hello "})));
    assert!(s.resumable());
    assert!(s.resume(Box::new(ToOpenAi::new("m2", true, 9))));
    let start = json!({"type":"message_start","message":{"id":"msg_2","usage":{"input_tokens":5,"output_tokens":1}}});
    assert_eq!(emit(&mut s, Some("message_start"), start), "");
    let block =
        json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}});
    assert_eq!(emit(&mut s, Some("content_block_start"), block), "");
    let d = json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"world"}});
    let out = datas(&emit(&mut s, Some("content_block_delta"), d));
    assert_eq!(out[0]["id"], "first");
    assert_eq!(out[0]["created"], 7);
    assert_eq!(out[0]["model"], "m2");
    assert_eq!(out[0]["choices"][0]["delta"]["content"], "world");
    assert_eq!(
        s.delivered_text(),
        "world",
        "each leg is counted on its own"
    );
    let total = Usage {
        prompt_tokens: 30,
        completion_tokens: 4,
        ..Usage::default()
    };
    let tail = s.close(total, None);
    let tail = String::from_utf8(tail).unwrap();
    assert_eq!(tail.matches("[DONE]").count(), 1);
    let usage = datas(&tail)
        .into_iter()
        .find(|c| c["usage"].is_object())
        .unwrap();
    assert_eq!(usage["usage"]["prompt_tokens"], 30);
    assert_eq!(usage["usage"]["total_tokens"], 34);
    assert_eq!(usage["id"], "first");
}

#[test]
fn a_tool_call_or_a_finish_is_not_resumable() {
    let mut s = Seamed::new(Frame::Chat, Box::new(StreamRewriter::new("m1", false)));
    emit(&mut s, None, chunk("c", json!({"content": "Let me look."})));
    assert!(s.resumable());
    let call = json!({"tool_calls": [{"index": 0, "id": "call_1", "function": {"name": "f", "arguments": "{\"a"}}]});
    emit(&mut s, None, chunk("c", call));
    assert!(!s.resumable());

    let mut s = Seamed::new(Frame::Chat, Box::new(StreamRewriter::new("m1", false)));
    emit(
        &mut s,
        None,
        chunk("c", json!({"content": "say \"tool_calls\": [1]"})),
    );
    assert!(s.resumable(), "text naming tool_calls is text");
    let mut fin = chunk("c", json!({}));
    fin["choices"][0]["finish_reason"] = json!("stop");
    emit(&mut s, None, fin);
    assert!(!s.resumable());

    let s = Seamed::new(Frame::Chat, Box::new(StreamRewriter::new("m1", false)));
    assert!(!s.resumable(), "nothing to continue");
}

#[test]
fn a_messages_leg_folds_its_text_block_into_the_open_one() {
    let mut s = Seamed::new(Frame::Messages, Box::new(Passthrough::new("m1")));
    let start = json!({"type":"message_start","message":{"id":"msg_1","model":"x","usage":{"input_tokens":5,"output_tokens":1}}});
    emit(&mut s, Some("message_start"), start.clone());
    let block =
        json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}});
    emit(&mut s, Some("content_block_start"), block.clone());
    let d = |t: &str| json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":t}});
    emit(&mut s, Some("content_block_delta"), d("Hello "));
    assert!(s.resumable());
    assert!(s.resume(Box::new(Passthrough::new("m2"))));
    assert_eq!(emit(&mut s, Some("message_start"), start), "");
    assert_eq!(emit(&mut s, Some("content_block_start"), block), "");
    assert_eq!(emit(&mut s, Some("ping"), json!({"type":"ping"})), "");
    let out = emit(&mut s, Some("content_block_delta"), d("world"));
    assert!(out.starts_with("event: content_block_delta\n"), "{out}");
    assert!(out.contains("\"world\""));
    let tool = json!({"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"f","input":{}}});
    let out = emit(&mut s, Some("content_block_start"), tool);
    assert!(out.contains("\"index\":1"), "{out}");
    let delta = json!({"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}});
    emit(&mut s, Some("message_delta"), delta);
    let total = Usage {
        prompt_tokens: 12,
        completion_tokens: 3,
        ..Usage::default()
    };
    let tail = String::from_utf8(s.close(total, None)).unwrap();
    assert!(tail.contains("\"output_tokens\":3"), "{tail}");
    assert!(tail.contains("\"input_tokens\":12"), "{tail}");
    assert_eq!(tail.matches("message_stop").count(), 2, "{tail}");
}

#[test]
fn thinking_is_not_resumable() {
    let mut s = Seamed::new(Frame::Messages, Box::new(Passthrough::new("m1")));
    let block = json!({"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}});
    emit(&mut s, Some("content_block_start"), block);
    let d = json!({"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}});
    emit(&mut s, Some("content_block_delta"), d);
    assert!(!s.resumable());
}

#[test]
fn the_opt_in_is_checked_and_taken_out_of_the_body() {
    assert!(header_value("on").unwrap());
    assert!(!header_value("OFF").unwrap());
    assert!(header_value("maybe").is_err());
    assert_eq!(take_extension(br#"{"model":"m"}"#).unwrap(), None);
    let e = take_extension(br#"{"model":"m","tollgate":{"resume":true},"n":1}"#)
        .unwrap()
        .unwrap();
    assert_eq!(e.resume, Some(true));
    assert_eq!(e.body, br#"{"model":"m","n":1}"#);
    for bad in [
        r#"{"tollgate":true}"#,
        r#"{"tollgate":{"resume":"yes"}}"#,
        r#"{"tollgate":{"resum":true}}"#,
    ] {
        let err = take_extension(bad.as_bytes()).unwrap_err();
        assert_eq!(err.status(), 400, "{bad}");
    }
}

#[test]
fn continuation_bodies_carry_the_partial_answer() {
    let body = br#"{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}"#;
    let v: Value = serde_json::from_slice(
        &openai_continuation(body, "Hello ", Continuation::ContinueFinalMessage).unwrap(),
    )
    .unwrap();
    assert_eq!(
        v["messages"][1],
        json!({"role":"assistant","content":"Hello "})
    );
    assert_eq!(v["continue_final_message"], true);
    assert_eq!(v["add_generation_prompt"], false);
    let v: Value =
        serde_json::from_slice(&openai_continuation(body, "Hi", Continuation::Prompt).unwrap())
            .unwrap();
    assert_eq!(v["messages"][2]["content"], request::CONTINUE_PROMPT);
    assert!(v.get("continue_final_message").is_none());
    let v: Value =
        serde_json::from_slice(&openai_continuation(body, "Hi", Continuation::Prefix).unwrap())
            .unwrap();
    assert_eq!(v["messages"][1]["prefix"], true);

    let a = br#"{"model":"c","messages":[{"role":"user","content":"hi"}],"thinking":{"type":"enabled"}}"#;
    let v: Value = serde_json::from_slice(&anthropic_continuation(a, "Hello  ").unwrap()).unwrap();
    assert_eq!(
        v["messages"][1],
        json!({"role":"assistant","content":"Hello"})
    );
    assert!(v.get("thinking").is_none());
    assert!(anthropic_continuation(a, "  ").is_err());
}
