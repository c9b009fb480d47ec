//! The chat request's validation and its upstream body.

use serde_json::{json, Value};

use super::request::{parse_chat_request, upstream_body};

fn bytes(v: Value) -> Vec<u8> {
    serde_json::to_vec(&v).unwrap()
}

fn msg() -> Value {
    json!([{"role":"user","content":"hi"}])
}

fn err_of(v: Value) -> String {
    parse_chat_request(&bytes(v)).unwrap_err().message
}

#[test]
fn accepts_minimal_and_openai_extras() {
    let b1 = bytes(json!({"model":"m","messages":msg()}));
    let r = parse_chat_request(&b1).unwrap();
    assert_eq!(r.model, "m");
    assert!(!r.stream);
    let b2 = bytes(json!({
        "model":"m","stream":true,"stream_options":{"include_usage":true},
        "messages":[
            {"role":"developer","content":"be brief"},
            {"role":"user","content":[{"type":"text","text":"hi"}]},
            {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},
            {"role":"tool","tool_call_id":"c1","content":"42"}
        ],
        "top_p":0.5,"seed":7,"stop":["x"],"response_format":{"type":"json_object"},
        "tool_choice":{"type":"function","function":{"name":"f"}},
        "tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{},"required":[]}}}],
        "max_completion_tokens": 5
    }));
    let r = parse_chat_request(&b2).unwrap();
    assert!(r.stream && r.client_wants_usage);
    assert_eq!(r.max_tokens, Some(5));
}

#[test]
fn each_bad_field_is_named() {
    assert!(parse_chat_request(b"{not json")
        .unwrap_err()
        .message
        .starts_with("body:"));
    assert!(parse_chat_request(b"[1]")
        .unwrap_err()
        .message
        .starts_with("body:"));
    assert!(err_of(json!({"messages":msg()})).starts_with("model:"));
    assert!(err_of(json!({"model":5,"messages":msg()})).starts_with("model:"));
    assert!(err_of(json!({"model":"m".repeat(257),"messages":msg()})).starts_with("model:"));
    assert!(parse_chat_request(
        &serde_json::to_vec(&json!({"model":"m".repeat(256),"messages":msg()})).unwrap()
    )
    .is_ok());
    assert!(err_of(json!({"model":"m"})).starts_with("messages:"));
    assert!(err_of(json!({"model":"m","messages":[]})).starts_with("messages:"));
    assert!(
        err_of(json!({"model":"m","messages":[{"role":"wizard","content":"x"}]}))
            .starts_with("messages[0].role")
    );
    assert!(
        err_of(json!({"model":"m","messages":[{"content":"x"}]})).starts_with("messages[0].role")
    );
    assert!(err_of(json!({"model":"m","messages":[{"role":"user"}]}))
        .starts_with("messages[0].content"));
    assert!(
        err_of(json!({"model":"m","messages":[{"role":"user","content":3}]}))
            .starts_with("messages[0].content")
    );
    for t in [json!(-0.1), json!(2.5), json!("hot")] {
        assert!(
            err_of(json!({"model":"m","messages":msg(),"temperature":t}))
                .starts_with("temperature")
        );
    }
    for n in [json!(0), json!(-3), json!(1.5), json!("9")] {
        assert!(
            err_of(json!({"model":"m","messages":msg(),"max_tokens":n})).starts_with("max_tokens")
        );
    }
    for n in [json!(0), json!(129), json!(1.5), json!("2")] {
        assert!(err_of(json!({"model":"m","messages":msg(),"n":n})).starts_with("n:"));
    }
    let parsed = |n: serde_json::Value| {
        parse_chat_request(
            &serde_json::to_vec(&json!({"model":"m","messages":msg(),"n":n})).unwrap(),
        )
        .map(|r| r.n)
    };
    assert_eq!(parsed(json!(null)), Ok(1));
    assert_eq!(parsed(json!(128)), Ok(128));
    assert!(err_of(json!({"model":"m","messages":msg(),"stream":"yes"})).starts_with("stream"));
    assert!(err_of(json!({"model":"m","messages":msg(),"tools":{}})).starts_with("tools"));
    assert!(
        err_of(json!({"model":"m","messages":msg(),"tools":[{"type":"function"}]}))
            .starts_with("tools[0].function")
    );
    assert!(err_of(
        json!({"model":"m","messages":msg(),"tools":[{"type":"x","function":{"name":"f"}}]})
    )
    .starts_with("tools[0].type"));
    assert!(err_of(json!({"model":"m","messages":msg(),"tools":[{"type":"function","function":{"name":"f","parameters":{"required":"a"}}}]}))
        .starts_with("tools[0].function.parameters.required"));
    assert!(
        err_of(json!({"model":"m","messages":msg(),"tool_choice":"always"}))
            .starts_with("tool_choice")
    );
    assert!(
        err_of(json!({"model":"m","messages":msg(),"tool_choice":7})).starts_with("tool_choice")
    );
}

#[test]
fn upstream_body_sets_model_usage_and_max_tokens() {
    let b3 =
        bytes(json!({"model":"alias","messages":msg(),"stream":true,"max_tokens":100,"seed":1}));
    let r = parse_chat_request(&b3).unwrap();
    let out: Value = serde_json::from_slice(&upstream_body(&r, "up-1", Some(40))).unwrap();
    assert_eq!(out["model"], "up-1");
    assert_eq!(out["max_tokens"], 40);
    assert_eq!(out["stream_options"]["include_usage"], true);
    assert_eq!(out["seed"], 1);
    let b4 = bytes(json!({"model":"alias","messages":msg()}));
    let r = parse_chat_request(&b4).unwrap();
    let out: Value = serde_json::from_slice(&upstream_body(&r, "up-1", None)).unwrap();
    assert!(out.get("stream_options").is_none());
    assert!(out.get("max_tokens").is_none());
    assert_eq!(out["messages"], msg());

    // The newer field is kept and capped; no max_tokens is invented beside it. The
    // client's own stream options are kept and usage is added; odd keys survive intact.
    let b5 = bytes(
        json!({"model":"a","messages":msg(),"stream":true,"max_completion_tokens":500,
        "stream_options":{"include_usage":false,"x":1},"we\"ird\u{e9}":[1,{"a":null}]}),
    );
    let r = parse_chat_request(&b5).unwrap();
    let raw = upstream_body(&r, "up-2", Some(64));
    let out: Value = serde_json::from_slice(&raw).unwrap();
    assert_eq!(out["model"], "up-2");
    assert_eq!(out["max_completion_tokens"], 64);
    assert!(out.get("max_tokens").is_none());
    assert_eq!(out["stream_options"], json!({"include_usage":true,"x":1}));
    assert_eq!(out["we\"ird\u{e9}"], json!([1,{"a":null}]));
    assert_eq!(out.as_object().unwrap().len(), 6);

    // A stream_options that is not an object is replaced; max_tokens is added when absent.
    let b6 = bytes(json!({"model":"a","messages":msg(),"stream":true,"stream_options":null}));
    let r = parse_chat_request(&b6).unwrap();
    let out: Value = serde_json::from_slice(&upstream_body(&r, "u", Some(7))).unwrap();
    assert_eq!(out["stream_options"], json!({"include_usage":true}));
    assert_eq!(out["max_tokens"], 7);
}

#[test]
fn the_upstream_body_is_the_client_body_with_members_spliced() {
    // Order, spacing and members the gateway does not know are the client's own.
    let raw = br#"{ "messages" : [{"role":"user","content":"h\u00e9"}], "model":"alias", "x":{"y":[1,2]}, "stream":true, "stream_options":{"include_usage" : false, "z":1} }"#;
    let r = parse_chat_request(raw).unwrap();
    assert_eq!(r.model, "alias");
    assert_eq!(r.messages.len(), 1);
    let out = String::from_utf8(upstream_body(&r, "up", Some(9))).unwrap();
    assert_eq!(
        out,
        r#"{ "messages" : [{"role":"user","content":"h\u00e9"}], "model":"up", "x":{"y":[1,2]}, "stream":true, "stream_options":{"include_usage" : true, "z":1} ,"max_tokens":9}"#
    );
    // Escaped keys are matched by their text; a repeated key resolves to its last value.
    let raw = br#"{"mod\u0065l":"m","messages":[{"role":"user","content":"hi"}],"n":3,"n":null}"#;
    let r = parse_chat_request(raw).unwrap();
    assert_eq!((r.model.as_ref(), r.n), ("m", 1));
    let out: Value = serde_json::from_slice(&upstream_body(&r, "up", None)).unwrap();
    assert_eq!(out["model"], "up");
}
