//! Stored responses: `previous_response_id` rebuilds the conversation (billed as prompt) on
//! every instance, `GET`/`DELETE /v1/responses/{id}` and `input_items`, another account's id is
//! 404, `store: false` keeps nothing, a link past retention is a 400 naming it; and bad input on
//! `/v1/responses` refused in the Responses error shape with nothing charged. Runs on SQLite,
//! and on Postgres + Redis when set.

use serde_json::{json, Value};
use tollgate_testkit::*;

async fn post(gw: &Gateway, key: &str, body: &Value) -> Response {
    let auth = format!("Bearer {key}");
    gw.with_auth("POST", "/v1/responses", &auth, body.to_string().as_bytes())
        .await
}

/// A response as stored: the reply but for the cost in its usage, known only after it was
/// stored (docs/api.md, "Cost in every response").
fn without_cost(reply: &Value) -> Value {
    let mut r = reply.clone();
    let usage = r["usage"].as_object_mut().unwrap();
    assert!(usage.remove("cost").is_some() && usage.remove("cost_details").is_some());
    r
}

async fn call(gw: &Gateway, key: &str, method: &str, path: &str) -> Response {
    gw.with_auth(method, path, &format!("Bearer {key}"), b"")
        .await
}

#[tokio::test]
async fn a_chain_of_stored_responses_is_the_next_requests_conversation_on_every_instance() {
    let fake = FakeOpenAi::start("p").await;
    let cfg = one_model_config(&fake, "m");
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let other = gw.second(tollgate_bin!(), &cfg).await;
    let key = gw.key.clone();

    let first = post(
        &gw,
        &key,
        &json!({"model": "m", "input": "My name is Ada.", "instructions": "Be brief."}),
    )
    .await;
    assert_eq!(first.status, 200, "{}", first.text());
    let first = first.json();
    let id1 = first["id"].as_str().unwrap().to_owned();
    assert_eq!(first["store"], true);

    // The next turn on the other instance: the chain's input and output come first; the first
    // turn's instructions do not carry over (as OpenAI does).
    let second = post(
        &other,
        &key,
        &json!({"model": "m", "input": "What is my name?", "previous_response_id": id1}),
    )
    .await;
    assert_eq!(second.status, 200, "{}", second.text());
    let second = second.json();
    assert_eq!(second["previous_response_id"], id1.as_str());
    let sent = fake.requests().last().unwrap().json();
    assert_eq!(
        sent["messages"],
        json!([{"role": "user", "content": "My name is Ada."},
               {"role": "assistant", "content": fake.reply_text()},
               {"role": "user", "content": "What is my name?"}])
    );
    let id2 = second["id"].as_str().unwrap().to_owned();

    // A third turn walks the whole chain.
    let third = post(&gw, &key, &json!({"model": "m", "input": [{"role": "user", "content": "And again?"}], "previous_response_id": id2})).await;
    assert_eq!(third.status, 200, "{}", third.text());
    assert_eq!(
        fake.requests().last().unwrap().json()["messages"]
            .as_array()
            .unwrap()
            .len(),
        5
    );

    // Read back on either instance; the input items with ids, newest first by default.
    let got = call(&other, &key, "GET", &format!("/v1/responses/{id1}")).await;
    assert_eq!(got.status, 200, "{}", got.text());
    assert_eq!(got.json(), without_cost(&first));
    let items = call(
        &gw,
        &key,
        "GET",
        &format!("/v1/responses/{id2}/input_items"),
    )
    .await;
    assert_eq!(items.status, 200, "{}", items.text());
    let items = items.json();
    assert_eq!(items["object"], "list");
    assert_eq!(items["data"][0]["content"][0]["text"], "What is my name?");
    assert!(items["data"][0]["id"].as_str().unwrap().starts_with("msg_"));
    assert_eq!(items["has_more"], false);
    let asc = call(
        &gw,
        &key,
        "GET",
        &format!("/v1/responses/{id2}/input_items?order=asc&limit=1"),
    )
    .await
    .json();
    assert_eq!(asc["data"].as_array().unwrap().len(), 1);
    call(
        &gw,
        &key,
        "GET",
        &format!("/v1/responses/{id2}/input_items?limit=0"),
    )
    .await
    .error(400, "invalid_request");

    // Another account sees none of it: 404 to read, delete or continue.
    let (_, stranger) = gw.signup(&unique_email()).await;
    call(&gw, &stranger, "GET", &format!("/v1/responses/{id1}"))
        .await
        .error(404, "not_found");
    call(&gw, &stranger, "DELETE", &format!("/v1/responses/{id1}"))
        .await
        .error(404, "not_found");
    let before = fake.chat_count();
    let r = post(
        &gw,
        &stranger,
        &json!({"model": "m", "input": "x", "previous_response_id": id1}),
    )
    .await;
    let e = r.error(404, "not_found");
    assert_eq!(e["error"]["param"], Value::Null);
    assert_eq!(fake.chat_count(), before, "nothing reached the provider");

    // Deleted: gone on every instance, and a chain through it is told so.
    let d = call(&gw, &key, "DELETE", &format!("/v1/responses/{id1}")).await;
    assert_eq!(
        d.json(),
        json!({"id": id1, "object": "response.deleted", "deleted": true})
    );
    call(&other, &key, "GET", &format!("/v1/responses/{id1}"))
        .await
        .error(404, "not_found");
    let r = post(
        &gw,
        &key,
        &json!({"model": "m", "input": "x", "previous_response_id": id2}),
    )
    .await;
    let e = r.error(400, "invalid_request");
    assert_eq!(e["error"]["param"], "previous_response_id");
    assert!(
        e["error"]["message"].as_str().unwrap().contains(&id1),
        "{e}"
    );

    // store: false keeps nothing.
    let r = post(
        &gw,
        &key,
        &json!({"model": "m", "input": "x", "store": false}),
    )
    .await
    .json();
    assert_eq!(r["store"], false);
    call(
        &gw,
        &key,
        "GET",
        &format!("/v1/responses/{}", r["id"].as_str().unwrap()),
    )
    .await
    .error(404, "not_found");

    // Past retention: the chain is refused by name, the response no longer readable.
    books::expire_responses(&gw.config_db(), &gw.user_id).await;
    let r = post(
        &gw,
        &key,
        &json!({"model": "m", "input": "x", "previous_response_id": id2}),
    )
    .await;
    let e = r.error(400, "invalid_request");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no longer stored"),
        "{e}"
    );
    call(&gw, &key, "GET", &format!("/v1/responses/{id2}"))
        .await
        .error(404, "not_found");
}

#[tokio::test]
async fn bad_responses_requests_are_refused_in_the_responses_shape_and_nothing_is_charged() {
    let fake = FakeOpenAi::start("p").await;
    let cfg = format!("{}[[models]]\nid = \"emb\"\nprovider = \"p\"\nkind = \"embedding\"\ninput_credits_per_1k = 1\noutput_credits_per_1k = 0\n", one_model_config(&fake, "m"));
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let key = gw.key.clone();
    let before = books::read(&gw.config_db(), &gw.user_id).await;
    let cases: Vec<(Vec<u8>, u16, &str, Option<&str>)> = vec![
        (b"{not json".to_vec(), 400, "invalid_request", None),
        (b"[]".to_vec(), 400, "invalid_request", None),
        (
            json!({"input": "x"}).to_string().into_bytes(),
            400,
            "invalid_request",
            Some("model"),
        ),
        (
            json!({"model": "m", "input": [{"type": "computer_call"}]})
                .to_string()
                .into_bytes(),
            400,
            "invalid_request",
            Some("input[0].type"),
        ),
        (
            json!({"model": "m", "input": [{"role": "user"}]})
                .to_string()
                .into_bytes(),
            400,
            "invalid_request",
            Some("input[0].content"),
        ),
        (
            json!({"model": "m", "input": [{"type": "function_call_output", "output": "x"}]})
                .to_string()
                .into_bytes(),
            400,
            "invalid_request",
            Some("input[0].call_id"),
        ),
        (
            json!({"model": "m", "input": "x", "tools": [{"type": "computer_use_preview"}]})
                .to_string()
                .into_bytes(),
            400,
            "invalid_request",
            Some("tools[0].type"),
        ),
        (
            // A hosted tool forced on a model served through chat completions.
            json!({"model": "m", "input": "x", "tools": [{"type": "file_search"}], "tool_choice": {"type": "file_search"}})
                .to_string()
                .into_bytes(),
            400,
            "invalid_request",
            Some("tool_choice"),
        ),
        (
            json!({"model": "m", "input": "x", "tool_choice": "sometimes"})
                .to_string()
                .into_bytes(),
            400,
            "invalid_request",
            Some("tool_choice"),
        ),
        (
            json!({"model": "m", "input": "x", "prompt": {"id": "pmpt_1"}})
                .to_string()
                .into_bytes(),
            400,
            "invalid_request",
            Some("prompt"),
        ),
        (
            json!({"model": "emb", "input": "x"})
                .to_string()
                .into_bytes(),
            400,
            "invalid_request",
            Some("model"),
        ),
        (
            json!({"model": "nope", "input": "x"})
                .to_string()
                .into_bytes(),
            404,
            "model_not_found",
            None,
        ),
    ];
    for (body, status, ty, param) in cases {
        let r = gw
            .with_auth("POST", "/v1/responses", &format!("Bearer {key}"), &body)
            .await;
        let e = r.error(status, ty);
        if let Some(p) = param {
            assert_eq!(e["error"]["param"], p, "{e}");
        }
    }
    // Over max_body_bytes (8 MiB in tests): refused from Content-Length alone.
    let head = format!("POST /v1/responses HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\nContent-Length: {}\r\n\r\n", 9 * 1024 * 1024);
    let e = raw_request(gw.addr, head.as_bytes())
        .await
        .error(400, "invalid_request");
    assert!(
        e["error"]["message"].as_str().unwrap().contains("limit"),
        "{e}"
    );
    // A guest may not continue a chain, nor read a stored response.
    let r = request(
        gw.addr,
        "POST",
        "/v1/responses",
        &[("Content-Type", "application/json")],
        json!({"model": "m", "input": "x", "previous_response_id": "resp_1"})
            .to_string()
            .as_bytes(),
    )
    .await;
    r.error(401, "authentication_error");
    get(gw.addr, "/v1/responses/resp_1")
        .await
        .error(401, "authentication_error");
    assert!(gw.is_healthy().await);
    assert_eq!(fake.chat_count(), 0, "nothing reached the provider");
    let after = books::settled(&gw.config_db(), &gw.user_id).await;
    assert_eq!(after.money, before.money, "nothing charged");
    assert_eq!(after.rows.len(), before.rows.len(), "no usage row");
}

#[tokio::test]
async fn concurrent_stored_responses_are_each_readable_once_answered() {
    // Responses are committed in groups; each answer still waits for its own commit.
    let fake = FakeOpenAi::start("p").await;
    let gw = Gateway::start(tollgate_bin!(), &one_model_config(&fake, "m")).await;
    let (addr, auth) = (gw.addr, format!("Bearer {}", gw.key));
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..30 {
        let auth = auth.clone();
        tasks.spawn(async move {
            let headers = [
                ("Authorization", auth.as_str()),
                ("Content-Type", "application/json"),
            ];
            let body = json!({"model": "m", "input": format!("turn {i}")}).to_string();
            let r = request(addr, "POST", "/v1/responses", &headers, body.as_bytes()).await;
            assert_eq!(r.status, 200, "{}", r.text());
            let id = r.json()["id"].as_str().unwrap().to_owned();
            // Read at once: the answer came only after its row committed.
            let got = request(addr, "GET", &format!("/v1/responses/{id}"), &headers, b"").await;
            assert_eq!(got.status, 200, "{id} not yet stored: {}", got.text());
            id
        });
    }
    let mut ids = Vec::new();
    while let Some(id) = tasks.join_next().await {
        ids.push(id.unwrap());
    }
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 30);
}

/// A request sent with `host` as its `Host` header (a gateway behind a load balancer sees the
/// public name, not its own address).
async fn behind(gw: &Gateway, host: &str, method: &str, path: &str, body: &[u8]) -> Response {
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        gw.key,
        body.len()
    );
    let mut raw = head.into_bytes();
    raw.extend_from_slice(body);
    raw_request(gw.addr, &raw).await
}

#[tokio::test]
async fn a_stored_response_is_read_behind_any_host_its_post_was_served_under() {
    // The MCP endpoints' DNS-rebinding check once applied to every key-only route: the POST
    // answered 200 behind a load balancer's name and the GET of its id 403.
    let fake = FakeOpenAi::start("p").await;
    let gw = Gateway::start(tollgate_bin!(), &one_model_config(&fake, "m")).await;
    let host = "api.example.com";
    let body = json!({"model": "m", "input": "hello"}).to_string();
    let posted = behind(&gw, host, "POST", "/v1/responses", body.as_bytes()).await;
    assert_eq!(posted.status, 200, "{}", posted.text());
    let id = posted.json()["id"].as_str().unwrap().to_owned();
    let got = behind(&gw, host, "GET", &format!("/v1/responses/{id}"), b"").await;
    assert_eq!(got.status, 200, "{}", got.text());
    assert_eq!(got.json()["id"], id.as_str());
    let items = behind(
        &gw,
        host,
        "GET",
        &format!("/v1/responses/{id}/input_items"),
        b"",
    )
    .await;
    assert_eq!(items.status, 200, "{}", items.text());
    let deleted = behind(&gw, host, "DELETE", &format!("/v1/responses/{id}"), b"").await;
    assert_eq!(deleted.status, 200, "{}", deleted.text());
    // The MCP endpoint behind the same name is still refused: the check is its own.
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}})
    .to_string();
    let mcp = behind(&gw, host, "POST", "/mcp", init.as_bytes()).await;
    assert_eq!(mcp.status, 403, "{}", mcp.text());
    assert_eq!(
        mcp.json()["error"]["type"],
        "permission_error",
        "{}",
        mcp.text()
    );
}
