use serde_json::json;
use serde_json::value::RawValue;

use super::*;
use crate::json::raw;

#[test]
fn messages_are_read_strictly() {
    let req = parse_message(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#).unwrap();
    assert!(
        matches!(&req, Incoming::Request { id, method, params: None } if *id == json!(1) && method == "tools/list"),
        "{req:?}"
    );
    // `null` params are no params; an escaped method name is read as its text.
    let req = parse_message(br#"{"jsonrpc":"2.0","id":"a","method":"tools\/call","params":null}"#)
        .unwrap();
    assert!(
        matches!(req, Incoming::Request { method, params: None, .. } if method == "tools/call")
    );
    assert!(matches!(
        parse_message(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#).unwrap(),
        Incoming::Notification { method } if method == "notifications/initialized"
    ));
    assert!(matches!(
        parse_message(br#"{"jsonrpc":"2.0","id":3,"result":{}}"#).unwrap(),
        Incoming::Response { id } if id == json!(3)
    ));
    for (raw, code, said) in [
        (&b"{"[..], PARSE_ERROR, "not JSON"),
        (b"{\"jsonrpc\":\"2.0\",}", PARSE_ERROR, "not JSON"),
        (b"[]", INVALID_REQUEST, "batches"),
        (
            br#" [{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
            INVALID_REQUEST,
            "batches",
        ),
        (b"3", INVALID_REQUEST, "must be an object"),
        (br#"{"id":1,"method":"ping"}"#, INVALID_REQUEST, "jsonrpc"),
        (
            br#"{"jsonrpc":2,"id":1,"method":"ping"}"#,
            INVALID_REQUEST,
            "jsonrpc",
        ),
        (
            br#"{"jsonrpc":"2.0","id":1}"#,
            INVALID_REQUEST,
            "method is required",
        ),
        (
            br#"{"jsonrpc":"2.0","id":1,"method":7}"#,
            INVALID_REQUEST,
            "method must be a string",
        ),
        (
            br#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#,
            INVALID_REQUEST,
            "id must be",
        ),
        (
            br#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
            INVALID_REQUEST,
            "id must be",
        ),
        (
            br#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#,
            INVALID_REQUEST,
            "id must be",
        ),
        (
            br#"{"jsonrpc":"2.0","id":1,"method":"x","params":3}"#,
            INVALID_REQUEST,
            "params must be",
        ),
        (
            br#"{"jsonrpc":"2.0","id":1,"method":"x","params":"p"}"#,
            INVALID_REQUEST,
            "params must be",
        ),
    ] {
        let e = parse_message(raw).unwrap_err();
        assert_eq!(e.code, code, "{raw:?}");
        assert!(e.message.contains(said), "{raw:?}: {}", e.message);
    }
    // A repeated member counts once, as the last one, as a JSON map keeps it.
    let req = parse_message(br#"{"jsonrpc":"1.0","jsonrpc":"2.0","id":1,"id":2,"method":"ping"}"#)
        .unwrap();
    assert!(matches!(req, Incoming::Request { id, .. } if id == json!(2)));
}

#[test]
fn a_tool_call_reaches_the_server_as_sent_but_for_its_name() {
    let body = br#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"s__echo", "arguments":{"text":"h\u00e9", "n":1e400, "k":[1, 2]},"_meta":{"progressToken":7},"name":"s__echo"}}"#;
    let Incoming::Request {
        params: Some(params),
        ..
    } = parse_message(body).unwrap()
    else {
        panic!("a request with params")
    };
    let members = raw::object(params).unwrap();
    let out = tool_call_params(params, &members, "echo");
    // Every byte of the agent's params is kept, but each `name`, which is the tool's own.
    assert_eq!(
        String::from_utf8(out.clone()).unwrap(),
        r#"{"name":"echo", "arguments":{"text":"h\u00e9", "n":1e400, "k":[1, 2]},"_meta":{"progressToken":7},"name":"echo"}"#
    );
    let msg = request_json(Some(1), "tools/call", Some(&out));
    let mut want = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":"#.to_vec();
    want.extend_from_slice(&out);
    want.push(b'}');
    assert_eq!(msg, want);
    // A number no f64 holds (1e400) was kept: a tree of it could not even be built.
    assert!(serde_json::from_slice::<serde_json::Value>(&msg).is_err());
    // Without params, none are sent (JSON-RPC has no null params); a notification has no id.
    assert_eq!(
        request_json(None, "notifications/initialized", None),
        br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#
    );
    assert_eq!(
        request_json(Some(0), "ping", Some(b"{}")),
        br#"{"jsonrpc":"2.0","id":0,"method":"ping","params":{}}"#
    );
    let r = serde_json::from_str::<Box<RawValue>>(r#"{"a":1}"#).unwrap();
    assert_eq!(
        result_json(&json!(5), &r),
        br#"{"jsonrpc":"2.0","id":5,"result":{"a":1}}"#
    );
}

#[test]
fn the_gateways_errors_keep_their_status_and_type_over_json_rpc() {
    use crate::error::{ErrorKind, GatewayError};
    let rows = [
        (
            GatewayError::invalid("params.name: required"),
            INVALID_PARAMS,
            400,
            "invalid_request",
        ),
        (
            GatewayError::new(ErrorKind::RateLimited { retry_after: 4 }, "slow down"),
            RATE_LIMITED,
            429,
            "rate_limit_exceeded",
        ),
        (
            GatewayError::new(ErrorKind::InsufficientCredits, "cannot pay"),
            INSUFFICIENT_CREDITS,
            402,
            "insufficient_credits",
        ),
        (
            GatewayError::upstream("tool server down"),
            UPSTREAM_ERROR,
            502,
            "upstream_error",
        ),
        (
            GatewayError::new(ErrorKind::ServiceUnavailable, "ledger away"),
            INTERNAL_ERROR,
            503,
            "service_unavailable",
        ),
    ];
    for (e, code, status, ty) in rows {
        let r = RpcError::from_error(json!(7), &e);
        let v: Value = serde_json::from_slice(&r.to_json()).unwrap();
        assert_eq!(v["id"], 7);
        assert_eq!(v["error"]["code"], code, "{e}");
        assert_eq!(v["error"]["message"], e.message);
        assert_eq!(v["error"]["data"]["code"], status, "{e}");
        assert_eq!(v["error"]["data"]["type"], ty, "{e}");
    }
    let r = RpcError::from_error(
        Value::Null,
        &GatewayError::new(ErrorKind::RateLimited { retry_after: 4 }, "x"),
    );
    assert_eq!(r.data.unwrap()["retry_after"], 4);
}
