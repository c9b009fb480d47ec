use serde_json::{json, Value};

use super::breakpoints::{add_breakpoints, count_breakpoints, MAX_BREAKPOINTS};
use super::request::openai_to_messages;
use crate::openai::request::parse_chat_request;

const MARK: &str = "ephemeral";

fn marked(body: &Value) -> Value {
    let bytes = serde_json::to_vec(body).unwrap();
    let out = add_breakpoints(&bytes).expect("breakpoints added");
    serde_json::from_slice(&out).expect("still JSON")
}

#[test]
fn a_string_system_prompt_becomes_one_marked_text_block() {
    let out = marked(
        &json!({"model": "c", "max_tokens": 5, "system": "Be brief.",
        "messages": [{"role": "user", "content": "Hi"}]}),
    );
    assert_eq!(
        out["system"],
        json!([{"type": "text", "text": "Be brief.", "cache_control": {"type": MARK}}])
    );
    assert_eq!(
        out["messages"][0]["content"],
        json!([{"type": "text", "text": "Hi", "cache_control": {"type": MARK}}])
    );
    assert_eq!(out["max_tokens"], 5);
}

#[test]
fn the_last_tool_system_block_and_message_block_are_marked() {
    let out = marked(&json!({"model": "c", "max_tokens": 5,
        "tools": [{"name": "a", "input_schema": {"type": "object"}},
                  {"name": "b", "input_schema": {"type": "object"}}],
        "system": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}],
        "messages": [{"role": "user", "content": "Hi"},
                     {"role": "assistant", "content": [{"type": "text", "text": "Hello"}]},
                     {"role": "user", "content": [{"type": "text", "text": "A"}, {"type": "text", "text": "B"}]}]}));
    assert!(out["tools"][0].get("cache_control").is_none());
    assert_eq!(out["tools"][1]["cache_control"]["type"], MARK);
    assert!(out["system"][0].get("cache_control").is_none());
    assert_eq!(out["system"][1]["cache_control"]["type"], MARK);
    assert_eq!(out["messages"][0]["content"], "Hi");
    assert!(out["messages"][1]["content"][0]
        .get("cache_control")
        .is_none());
    assert_eq!(
        out["messages"][2]["content"][1]["cache_control"]["type"],
        MARK
    );
    assert!(out["messages"][2]["content"][0]
        .get("cache_control")
        .is_none());
    assert_eq!(count_breakpoints(&serde_json::to_vec(&out).unwrap()), 3);
}

#[test]
fn a_client_mark_anywhere_means_none_are_added() {
    let nested = json!({"model": "c", "max_tokens": 5, "system": "S",
        "messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t",
            "content": [{"type": "text", "text": "r", "cache_control": {"type": MARK}}]}]}]});
    let tool = json!({"model": "c", "max_tokens": 5, "system": "S",
        "tools": [{"name": "a", "input_schema": {}, "cache_control": {"type": MARK, "ttl": "1h"}}],
        "messages": [{"role": "user", "content": "Hi"}]});
    let automatic = json!({"model": "c", "max_tokens": 5, "system": "S",
        "cache_control": {"type": MARK}, "messages": [{"role": "user", "content": "Hi"}]});
    for body in [nested, tool, automatic] {
        assert!(add_breakpoints(&serde_json::to_vec(&body).unwrap()).is_none());
    }
}

#[test]
fn thinking_and_empty_texts_are_never_marked() {
    let body = json!({"model": "c", "max_tokens": 5, "system": "",
        "messages": [{"role": "user", "content": "Hi"},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "x", "signature": "s"}]}]});
    assert!(add_breakpoints(&serde_json::to_vec(&body).unwrap()).is_none());
}

#[test]
fn the_body_is_kept_byte_for_byte_around_the_marks() {
    let body = br#"{"model":"c","max_tokens":5,"x":1.50,"system":"S","messages":[{"role":"user","content":[ {"type":"text","text":"Hi"} ]}]}"#;
    let out = add_breakpoints(body).unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        r#"{"model":"c","max_tokens":5,"x":1.50,"system":[{"type":"text","text":"S","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":[ {"type":"text","text":"Hi","cache_control":{"type":"ephemeral"}} ]}]}"#
    );
}

#[test]
fn a_translated_chat_request_gets_its_marks() {
    let chat = json!({"model": "m", "messages": [{"role": "system", "content": "S"},
        {"role": "user", "content": "Hi"}],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]});
    let raw = serde_json::to_vec(&chat).unwrap();
    let req = parse_chat_request(&raw).unwrap();
    let body = openai_to_messages(&req, "up", 10).unwrap();
    let out: Value = serde_json::from_slice(&add_breakpoints(&body).unwrap()).unwrap();
    assert_eq!(out["system"][0]["cache_control"]["type"], MARK);
    assert_eq!(out["tools"][0]["cache_control"]["type"], MARK);
    assert_eq!(
        out["messages"][0]["content"][0]["cache_control"]["type"],
        MARK
    );
}

/// xorshift64*: small, seeded, enough to pick cases.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn text(&mut self) -> String {
        const PIECES: [&str; 7] = ["a", "é", "🦀", "\"", "cache_control", " ", "\\"];
        (0..self.below(4))
            .map(|_| PIECES[self.below(7) as usize])
            .collect()
    }
    /// A client's own mark, now and then.
    fn maybe_mark(&mut self, mut block: Value) -> Value {
        if self.below(12) == 0 {
            block["cache_control"] = json!({"type": MARK});
        }
        block
    }
    fn block(&mut self) -> Value {
        let b = match self.below(5) {
            0 => json!({"type": "thinking", "thinking": self.text(), "signature": "s"}),
            1 => json!({"type": "tool_use", "id": "t", "name": "f", "input": {"n": 1e3}}),
            2 => {
                let inner: Vec<Value> = (0..self.below(3))
                    .map(|_| {
                        let t = json!({"type": "text", "text": self.text()});
                        self.maybe_mark(t)
                    })
                    .collect();
                json!({"type": "tool_result", "tool_use_id": "t", "content": inner})
            }
            _ => json!({"type": "text", "text": self.text()}),
        };
        self.maybe_mark(b)
    }
    fn content(&mut self) -> Value {
        match self.below(3) {
            0 => Value::String(self.text()),
            _ => Value::Array((0..self.below(4)).map(|_| self.block()).collect()),
        }
    }
    fn body(&mut self) -> Value {
        let mut b = json!({"model": "c", "max_tokens": 1 + self.below(100), "temperature": 0.5});
        if self.below(2) == 0 {
            let tools: Vec<Value> = (0..self.below(4))
                .map(|i| {
                    let t = json!({"name": format!("t{i}"), "input_schema": {"type": "object"}});
                    self.maybe_mark(t)
                })
                .collect();
            b["tools"] = Value::Array(tools);
        }
        if self.below(2) == 0 {
            b["system"] = self.content();
        }
        let messages: Vec<Value> = (0..1 + self.below(4))
            .map(|i| {
                let role = ["user", "assistant"][i as usize % 2];
                json!({"role": role, "content": self.content()})
            })
            .collect();
        b["messages"] = Value::Array(messages);
        b
    }
}

/// The body with every `cache_control` removed and string contents as one text block: what
/// the marks must leave unchanged.
fn without_marks(mut v: Value) -> Value {
    let unmark = |b: &mut Value| {
        if let Some(o) = b.as_object_mut() {
            o.remove("cache_control");
            if let Some(inner) = o.get_mut("content").and_then(Value::as_array_mut) {
                inner
                    .iter_mut()
                    .for_each(|i| drop(i.as_object_mut().map(|i| i.remove("cache_control"))));
            }
        }
    };
    let as_blocks = |c: &mut Value| {
        if let Some(s) = c.as_str().filter(|s| !s.is_empty()) {
            *c = json!([{"type": "text", "text": s}]);
        }
    };
    if let Some(s) = v.get_mut("system") {
        as_blocks(s);
    }
    for key in ["tools", "system"] {
        if let Some(a) = v.get_mut(key).and_then(Value::as_array_mut) {
            a.iter_mut().for_each(unmark);
        }
    }
    if let Some(ms) = v.get_mut("messages").and_then(Value::as_array_mut) {
        for m in ms {
            as_blocks(&mut m["content"]);
            if let Some(a) = m["content"].as_array_mut() {
                a.iter_mut().for_each(unmark);
            }
        }
    }
    v
}

#[test]
fn marks_never_pass_the_limit_keep_a_clients_own_and_change_nothing_else() {
    let mut rng = Rng(0x5eed_b9ea_c0ff_ee01);
    let (mut added, mut kept) = (0, 0);
    for case in 0..5_000 {
        let body = rng.body();
        let bytes = serde_json::to_vec(&body).unwrap();
        let before = count_breakpoints(&bytes);
        match add_breakpoints(&bytes) {
            None => kept += 1,
            Some(out) => {
                added += 1;
                assert_eq!(before, 0, "case {case}: a client's marks were added to");
                let n = count_breakpoints(&out);
                assert!((1..=MAX_BREAKPOINTS).contains(&n), "case {case}: {n} marks");
                let out: Value = serde_json::from_slice(&out).expect("still JSON");
                assert_eq!(
                    without_marks(out.clone()),
                    without_marks(body.clone()),
                    "case {case}"
                );
                // The last tool is always marked (any tool may carry one).
                if let Some(t) = body["tools"].as_array().and_then(|t| t.last()) {
                    assert!(t.is_object());
                    assert_eq!(
                        out["tools"].as_array().unwrap().last().unwrap()["cache_control"]["type"],
                        MARK
                    );
                }
                // The system prompt's and the last message's last block, where they may
                // carry one.
                let last = |c: &Value| c.as_array().and_then(|a| a.last()).cloned();
                let system = body.get("system").cloned().unwrap_or(Value::Null);
                let message = body["messages"].as_array().unwrap().last().unwrap();
                for (before, after) in [
                    (system, out.get("system").cloned().unwrap_or(Value::Null)),
                    (
                        message["content"].clone(),
                        out["messages"].as_array().unwrap().last().unwrap()["content"].clone(),
                    ),
                ] {
                    let want = match &before {
                        Value::String(s) => !s.is_empty(),
                        Value::Array(_) => last(&before).is_some_and(|b| {
                            !matches!(b["type"].as_str(), Some("thinking"))
                                && (b["type"] != "text" || b["text"] != "")
                        }),
                        _ => false,
                    };
                    let got = last(&after).is_some_and(|b| b.get("cache_control").is_some());
                    assert_eq!(want, got, "case {case}: {before} became {after}");
                }
            }
        }
        if before > 0 {
            assert!(add_breakpoints(&bytes).is_none(), "case {case}");
        }
    }
    // Both branches were exercised many times.
    assert!(added > 1_000 && kept > 500, "added {added}, kept {kept}");
}
