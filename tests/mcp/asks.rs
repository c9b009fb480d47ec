//! A tool server's requests to the agent during a call (sampling, elicitation) relayed on the
//! call's event stream with sealed ids, and the agent's answers delivered to the server's
//! session from any instance: answered on the second instance (Postgres + Redis when set), the
//! call completes and is charged once; forged, altered, foreign, expired and malformed answers
//! are refused; an agent that never answers has its call time out, free; an agent that cannot
//! be asked has the server answered with errors at once.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tollgate_testkit::*;

use crate::common::{api, live_service, uniq};

const SECRET: &str = "relay-secret-for-the-tests-0123456789abcdef";

/// Two instances of one deployment (same ledger, same counters, same relay secret).
pub async fn pair(call_timeout: u64) -> (FakeOpenAi, Gateway, Gateway) {
    let fake = FakeOpenAi::start("p").await;
    let cfg = format!(
        "{}[mcp]\nallow_private_upstreams = true\ncall_timeout = {call_timeout}\n",
        one_model_config(&fake, "m-2024-01-01")
    );
    let opts = Opts {
        env: vec![("TOLLGATE_MCP_RELAY_SECRET".into(), SECRET.into())],
        ..Opts::default()
    };
    let one = Gateway::start_opts(tollgate_bin!(), &cfg, opts).await;
    let two = one.second(tollgate_bin!(), &cfg).await;
    (fake, one, two)
}

/// A call whose answer is read as it comes, event by event.
pub struct Stream {
    sock: TcpStream,
    buf: Vec<u8>,
    /// Bytes of `buf` already read as events.
    seen: usize,
}

impl Stream {
    pub async fn call(addr: SocketAddr, path: &str, key: &str, name: &str, accept: &str) -> Stream {
        let body = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
            "params": {"name": name, "arguments": {"text": "x"}}})
        .to_string();
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {key}\r\nContent-Type: application/json\r\nAccept: {accept}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let mut sock = TcpStream::connect(addr).await.unwrap();
        sock.write_all(head.as_bytes()).await.unwrap();
        Stream {
            sock,
            buf: Vec::new(),
            seen: 0,
        }
    }

    /// The next event's data, as JSON (each event is written in one piece, so it is whole in
    /// the bytes whatever the chunking around it).
    pub async fn next(&mut self) -> Value {
        loop {
            let text = String::from_utf8_lossy(&self.buf[self.seen..]).into_owned();
            if let Some(at) = text.find("data: ") {
                if let Some(end) = text[at..].find("\n\n") {
                    self.seen += text[..at + end].len() + 2;
                    return serde_json::from_str(&text[at + 6..at + end]).unwrap();
                }
            }
            let mut chunk = [0u8; 8192];
            let n = tokio::time::timeout(Duration::from_secs(20), self.sock.read(&mut chunk))
                .await
                .expect("an event in time")
                .unwrap();
            assert!(n > 0, "the stream ended: {text}");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

/// POSTs an agent's message; the response.
pub async fn post(addr: SocketAddr, path: &str, key: &str, body: &[u8]) -> Response {
    let auth = format!("Bearer {key}");
    let h = [
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
    ];
    request(addr, "POST", path, &h, body).await
}

pub fn answer(id: &Value, result: Value) -> Vec<u8> {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
        .to_string()
        .into_bytes()
}

pub const SSE: &str = "application/json, text/event-stream";

#[tokio::test]
async fn the_servers_requests_are_answered_through_either_instance_and_the_call_charged_once() {
    let (_f, one, two) = pair(10).await;
    let tools = FakeToolServer::sse().await;
    tools.set_mode(ToolMode::Ask);
    let slug = uniq("asks");
    let (_, dev_key) = live_service(&one, &slug, &tools.url(), 5).await;
    let before = one.balance(&one.key).await;
    let dev_before = one.balance(&dev_key).await;

    for (path, name) in [
        (format!("/mcp/{slug}"), "echo".to_owned()),
        ("/mcp".to_owned(), format!("{slug}__echo")),
    ] {
        let mut s = Stream::call(one.addr, &path, &one.key, &name, SSE).await;
        let sampling = s.next().await;
        assert_eq!(sampling["method"], "sampling/createMessage", "{sampling}");
        let id = &sampling["id"];
        assert!(id.as_str().unwrap().starts_with("tg1."), "{id}");
        // Answered on the other instance, which never saw the call.
        let r = post(
            two.addr,
            &path,
            &one.key,
            &answer(id, json!({"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"})),
        )
        .await;
        assert_eq!(r.status, 202, "{}", r.text());
        let elicit = s.next().await;
        assert_eq!(elicit["method"], "elicitation/create", "{elicit}");
        assert_eq!(elicit["params"]["message"], "Your name?");
        let r = post(
            one.addr,
            &path,
            &one.key,
            &answer(
                &elicit["id"],
                json!({"action": "accept", "content": {"name": "Ada"}}),
            ),
        )
        .await;
        assert_eq!(r.status, 202, "{}", r.text());
        let done = s.next().await;
        assert_eq!(done["id"], 9, "{done}");
        let text: Value =
            serde_json::from_str(done["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
        assert_eq!(text["sampled"]["content"]["text"], "hi");
        assert_eq!(text["elicited"]["content"]["name"], "Ada");
    }
    // The server got each answer under its own id, in the session it asked in.
    let answers = tools.answers();
    assert_eq!(answers.len(), 4);
    for (i, (sid, id, _)) in answers.iter().enumerate() {
        assert_eq!(*id, json!(i), "{answers:?}");
        assert!(sid.starts_with("sess-"), "{answers:?}");
    }
    // Two calls, each charged once; the developer paid 80% (rounded up) of each.
    assert_eq!(before - one.balance(&one.key).await, 10_000_000);
    assert_eq!(one.balance(&dev_key).await - dev_before, 8_000_000);
}

#[tokio::test]
async fn forged_foreign_and_malformed_answers_are_refused() {
    let (_f, one, two) = pair(10).await;
    let tools = FakeToolServer::sse().await;
    tools.set_mode(ToolMode::Ask);
    let slug = uniq("askbad");
    live_service(&one, &slug, &tools.url(), 2).await;
    let (_, other_key) = one.signup(&unique_email()).await;
    let path = format!("/mcp/{slug}");
    let before = one.balance(&one.key).await;

    let mut s = Stream::call(one.addr, &path, &one.key, "echo", SSE).await;
    let sampling = s.next().await;
    let id = sampling["id"].as_str().unwrap().to_owned();
    let ok = json!({"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"});
    // Another account's key: refused, whichever instance.
    for gw in [&one, &two] {
        let r = post(gw.addr, &path, &other_key, &answer(&json!(id), ok.clone())).await;
        assert_eq!(r.status, 403, "{}", r.text());
        assert_eq!(r.json()["error"]["data"]["type"], "permission_error");
    }
    // An altered id (one character of its sealed route changed), or one cut short.
    let mut altered: Vec<char> = id.chars().collect();
    altered[20] = if altered[20] == 'A' { 'B' } else { 'A' };
    let altered: String = altered.into_iter().collect();
    let r = post(
        two.addr,
        &path,
        &one.key,
        &answer(&json!(altered), ok.clone()),
    )
    .await;
    assert_eq!(r.status, 403, "{}", r.text());
    let r = post(
        two.addr,
        &path,
        &one.key,
        &answer(&json!(&id[..id.len() - 3]), ok.clone()),
    )
    .await;
    assert!(matches!(r.status, 400 | 403), "{}", r.text());
    // Ids the gateway never sent: a number, another string.
    for foreign in [json!(0), json!("abc")] {
        let r = post(two.addr, &path, &one.key, &answer(&foreign, ok.clone())).await;
        assert_eq!(r.status, 400, "{}", r.text());
        assert_eq!(r.json()["error"]["code"], -32600);
        assert!(r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("answers no request"));
    }
    // Sent to another service's endpoint.
    let r = post(
        two.addr,
        "/mcp/other-svc",
        &one.key,
        &answer(&json!(id), ok.clone()),
    )
    .await;
    assert!(matches!(r.status, 400 | 404), "{}", r.text());
    // Not JSON-RPC at all.
    for body in [
        &b"{not json"[..],
        br#"{"id":"x","result":{}}"#,
        br#"{"jsonrpc":"2.0","id":"x"}"#,
    ] {
        let r = post(two.addr, &path, &one.key, body).await;
        assert_eq!(r.status, 400, "{}", r.text());
        assert!(r.json()["error"]["code"].is_i64());
    }
    // Nothing of that reached the server; the real answer still completes the call.
    assert!(tools.answers().is_empty());
    let r = post(two.addr, &path, &one.key, &answer(&json!(id), ok)).await;
    assert_eq!(r.status, 202, "{}", r.text());
    let elicit = s.next().await;
    let r = post(
        two.addr,
        &path,
        &one.key,
        &answer(&elicit["id"], json!({"action": "decline"})),
    )
    .await;
    assert_eq!(r.status, 202);
    let done = s.next().await;
    assert!(done["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("decline"));
    assert_eq!(before - one.balance(&one.key).await, 2_000_000);
    assert!(one.is_healthy().await && two.is_healthy().await);
}

#[tokio::test]
async fn an_agent_that_never_answers_has_its_call_time_out_free() {
    let (_f, one, two) = pair(2).await;
    let tools = FakeToolServer::sse().await;
    tools.set_mode(ToolMode::Ask);
    let slug = uniq("asknone");
    live_service(&one, &slug, &tools.url(), 2).await;
    let path = format!("/mcp/{slug}");
    let before = one.balance(&one.key).await;
    let mut s = Stream::call(one.addr, &path, &one.key, "echo", SSE).await;
    let sampling = s.next().await;
    let done = s.next().await;
    assert_eq!(done["id"], 9);
    assert_eq!(done["error"]["code"], -32003, "{done}");
    assert_eq!(before - one.balance(&one.key).await, 0);
    // Past the call's time, its answer is refused (the id has expired).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let r = post(
        two.addr,
        &path,
        &one.key,
        &answer(&sampling["id"], json!({})),
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("is over"), "{}", r.text());
}

#[tokio::test]
async fn an_agent_that_cannot_be_asked_has_the_server_refused_at_once() {
    let (_f, one, _two) = pair(10).await;
    let tools = FakeToolServer::sse().await;
    tools.set_mode(ToolMode::Ask);
    let slug = uniq("asknot");
    live_service(&one, &slug, &tools.url(), 2).await;
    let before = one.balance(&one.key).await;
    // No event stream accepted: one JSON reply; the server's requests got errors meanwhile.
    let body = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "x"}}});
    let r = api(&one, "POST", &format!("/mcp/{slug}"), &one.key, &body).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let text: Value =
        serde_json::from_str(r.json()["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text["sampled"]["code"], -32601, "{text}");
    assert!(text["elicited"]["message"]
        .as_str()
        .unwrap()
        .contains("elicitation/create"));
    // The call completed: charged as any.
    assert_eq!(before - one.balance(&one.key).await, 2_000_000);
    // A 2026-07-28 client (asked with input-required results in its era, not requests) with
    // an event stream: the same, its answer in its era's shape.
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"sampling": {}, "elicitation": {}}});
    let body = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "x"}, "_meta": meta}})
    .to_string();
    let auth = format!("Bearer {}", one.key);
    let h = [
        ("Authorization", auth.as_str()),
        ("Content-Type", "application/json"),
        ("Accept", SSE),
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "echo"),
    ];
    let r = request(
        one.addr,
        "POST",
        &format!("/mcp/{slug}"),
        &h,
        body.as_bytes(),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["result"]["resultType"], "complete", "{v}");
    let text: Value =
        serde_json::from_str(v["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text["sampled"]["code"], -32601, "{text}");
    assert_eq!(before - one.balance(&one.key).await, 4_000_000);
}

#[tokio::test]
async fn subscriptions_listen_is_refused_by_name() {
    let (_f, one, _two) = pair(10).await;
    let tools = FakeToolServer::sse().await;
    let slug = uniq("listen");
    live_service(&one, &slug, &tools.url(), 2).await;
    for path in [format!("/mcp/{slug}"), "/mcp".to_owned()] {
        let body =
            json!({"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen", "params": {}});
        let r = api(&one, "POST", &path, &one.key, &body).await;
        assert_eq!(r.status, 200);
        assert_eq!(r.json()["error"]["code"], -32601);
        assert!(r.text().contains("subscriptions/listen is not offered"));
        let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}});
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen",
            "params": {"_meta": meta}})
        .to_string();
        let auth = format!("Bearer {}", one.key);
        let h = [
            ("Authorization", auth.as_str()),
            ("Content-Type", "application/json"),
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "subscriptions/listen"),
        ];
        let r = request(one.addr, "POST", &path, &h, body.as_bytes()).await;
        assert_eq!(r.status, 404, "{}", r.text());
        assert!(r.text().contains("subscriptions/listen is not offered"));
    }
    // Nothing reached the tool server.
    assert_eq!(tools.calls(), 0);
}
