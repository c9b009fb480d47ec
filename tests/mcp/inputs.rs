//! A 2025-era agent calling a 2026-07-28 tool server that asks for input first: the server's
//! input requests reach the agent as requests on the call's stream, its answers go back in the
//! call's retry, and the call completes, charged once. An answer sent to the other instance
//! reaches the call through Redis (Postgres + Redis), or is refused there (409) without Redis;
//! an answer refused by the agent fails the call, free; an agent without an event stream gets
//! the input-required result as the server wrote it, free.

use serde_json::{json, Value};
use tollgate_testkit::*;

use crate::asks::{answer, pair, post, Stream, SSE};
use crate::common::{api, live_service, uniq};

async fn service(gw: &Gateway) -> (FakeToolServer, String) {
    let tools = FakeToolServer::stateless().await;
    tools.set_mode(ToolMode::InputRequired);
    let slug = uniq("inputs");
    live_service(gw, &slug, &tools.url(), 3).await;
    (tools, slug)
}

#[tokio::test]
async fn a_2026_servers_input_requests_are_put_to_a_2025_agent_and_the_call_retried() {
    let (_f, one, two) = pair(10).await;
    let (tools, slug) = service(&one).await;
    let redis = one.redis_prefix().is_some();
    let before = one.balance(&one.key).await;
    for (path, name) in [
        (format!("/mcp/{slug}"), "echo".to_owned()),
        ("/mcp".to_owned(), format!("{slug}__echo")),
    ] {
        let mut s = Stream::call(one.addr, &path, &one.key, &name, SSE).await;
        let first = s.next().await;
        let second = s.next().await;
        let mut asked: Vec<Value> = vec![first, second];
        asked.sort_by_key(|r| r["method"].as_str().unwrap().to_owned());
        assert_eq!(asked[0]["method"], "elicitation/create", "{asked:?}");
        assert_eq!(asked[0]["params"]["message"], "Your name?");
        assert_eq!(asked[1]["method"], "sampling/createMessage", "{asked:?}");
        assert!(asked[0]["id"].as_str().unwrap().starts_with("tg1."));
        let name = answer(
            &asked[0]["id"],
            json!({"action": "accept", "content": {"name": "Ada"}}),
        );
        // On another instance than the call's: passed on through Redis, or without it refused
        // by name (the documented stickiness) and then sent where the call is.
        let r = post(two.addr, &path, &one.key, &name).await;
        if redis {
            assert_eq!(r.status, 202, "{}", r.text());
        } else {
            assert_eq!(r.status, 409, "{}", r.text());
            assert!(
                r.text().contains("instance that holds the call"),
                "{}",
                r.text()
            );
            let r = post(one.addr, &path, &one.key, &name).await;
            assert_eq!(r.status, 202, "{}", r.text());
        }
        let line = answer(
            &asked[1]["id"],
            json!({"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"}),
        );
        assert_eq!(post(one.addr, &path, &one.key, &line).await.status, 202);
        let done = s.next().await;
        assert_eq!(done["id"], 9, "{done}");
        let got: Value =
            serde_json::from_str(done["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(got["name"]["content"]["name"], "Ada", "{got}");
        assert_eq!(got["line"]["content"]["text"], "hi", "{got}");
        if !redis {
            // Answered once: the same id again finds no call waiting.
            assert_eq!(post(one.addr, &path, &one.key, &name).await.status, 409);
        }
    }
    // Two calls, each sent twice to the server (asked, then retried), each charged once.
    assert_eq!(tools.calls(), 4);
    assert_eq!(before - one.balance(&one.key).await, 6_000_000);
}

#[tokio::test]
async fn refused_input_fails_the_call_and_no_stream_gets_the_result_as_written() {
    let (_f, one, _two) = pair(10).await;
    let (_tools, slug) = service(&one).await;
    let path = format!("/mcp/{slug}");
    let before = one.balance(&one.key).await;
    let mut s = Stream::call(one.addr, &path, &one.key, "echo", SSE).await;
    let asked = [s.next().await, s.next().await];
    let refusal = json!({"jsonrpc": "2.0", "id": asked[0]["id"],
        "error": {"code": -1, "message": "User rejected"}})
    .to_string();
    let r = post(one.addr, &path, &one.key, refusal.as_bytes()).await;
    assert_eq!(r.status, 202, "{}", r.text());
    let done = s.next().await;
    assert_eq!(done["error"]["code"], -32003, "{done}");
    assert!(done["error"]["message"]
        .as_str()
        .unwrap()
        .contains("User rejected"));
    // No event stream: the input-required result as the server wrote it, not charged.
    let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "x"}}});
    let r = api(&one, "POST", &path, &one.key, &body).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["result"]["resultType"], "input_required");
    assert_eq!(before - one.balance(&one.key).await, 0);
}
