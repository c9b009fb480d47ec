//! A provider that serves the Responses API itself (`responses_api = true`): `/v1/responses`
//! reaches it in its own shape (the model and output cap set, a `previous_response_id` chain
//! written into `input`, `store: false`), and its reply and events come back with the
//! gateway's response id and model, the closing event after the settlement; charged exactly.
//! Runs on SQLite, and on Postgres + Redis when set.

use serde_json::{json, Value};
use tollgate_testkit::*;

async fn post(gw: &Gateway, body: &Value) -> Response {
    let auth = format!("Bearer {}", gw.key);
    gw.with_auth("POST", "/v1/responses", &auth, body.to_string().as_bytes())
        .await
}

fn native_requests(f: &FakeOpenAi) -> Vec<Value> {
    f.requests()
        .into_iter()
        .filter(|r| r.path.ends_with("/v1/responses"))
        .map(|r| r.json())
        .collect()
}

#[tokio::test]
async fn a_native_responses_provider_gets_the_request_in_its_own_shape() {
    let fake = FakeOpenAi::start("p").await;
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}",
        provider("p", &[&fake], "responses_api = true"),
        model("m", "p", "economy", "")
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let db = gw.config_db();
    let initial = books::read(&db, &gw.user_id).await.money;
    let per_request = FakeOpenAi::PROMPT_TOKENS as i64 * 1_000 + fake.reply_words() as i64 * 2_000;
    let mut ok = Vec::new();

    let r = post(&gw, &json!({"model": "m", "input": "hi", "instructions": "Be brief.", "max_output_tokens": 100})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let first = r.json();
    let id = first["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("resp_") && id != "resp_fake", "{id}");
    assert_eq!(first["model"], "m");
    assert_eq!(first["output"][0]["content"][0]["text"], fake.reply_text());
    assert_eq!(first["usage"]["input_tokens"], FakeOpenAi::PROMPT_TOKENS);
    let sent = native_requests(&fake)
        .pop()
        .expect("the provider's own route");
    assert_eq!(
        (
            sent["model"].as_str(),
            sent["max_output_tokens"].as_u64(),
            sent["store"].as_bool()
        ),
        (Some("up-m"), Some(100), Some(false))
    );
    assert_eq!(sent["instructions"], "Be brief.");
    assert_eq!(sent["input"], "hi");
    assert!(fake
        .requests()
        .iter()
        .all(|r| !r.path.ends_with("chat/completions")));
    ok.push(r.header("x-request-id").unwrap().to_owned());

    // The gateway keeps the chain: the provider gets the conversation, never the gateway's id.
    let r = post(
        &gw,
        &json!({"model": "m", "input": "again", "previous_response_id": id}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let sent = native_requests(&fake).pop().unwrap();
    assert!(sent.get("previous_response_id").is_none(), "{sent}");
    let input = sent["input"].as_array().unwrap();
    assert_eq!(input.len(), 3, "{sent}");
    assert_eq!(input[1]["content"][0]["text"], fake.reply_text());
    assert_eq!(input[2]["content"][0]["text"], "again");
    ok.push(r.header("x-request-id").unwrap().to_owned());

    // Streamed: the provider's events with the gateway's id, response.completed last.
    let r = post(&gw, &json!({"model": "m", "input": "hi", "stream": true})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let events: Vec<Value> = r
        .sse_data()
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    assert_eq!(events[0]["type"], "response.created");
    let last = events.last().unwrap();
    assert_eq!(last["type"], "response.completed");
    let stream_id = last["response"]["id"].as_str().unwrap().to_owned();
    assert_eq!(events[0]["response"]["id"], stream_id.as_str());
    assert_ne!(stream_id, "resp_fake");
    assert_eq!(last["response"]["model"], "m");
    let text: String = events
        .iter()
        .filter(|e| e["type"] == "response.output_text.delta")
        .map(|e| e["delta"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(text, fake.reply_text());
    ok.push(r.header("x-request-id").unwrap().to_owned());
    let got = gw
        .with_auth(
            "GET",
            &format!("/v1/responses/{stream_id}"),
            &format!("Bearer {}", gw.key),
            b"",
        )
        .await;
    assert_eq!(got.status, 200, "{}", got.text());
    // The stored response is the streamed one but for the cost, known only after it was
    // stored (docs/api.md, "Cost in every response").
    let mut streamed = last["response"].clone();
    let usage = streamed["usage"].as_object_mut().unwrap();
    assert!(usage.remove("cost").is_some() && usage.remove("cost_details").is_some());
    assert_eq!(got.json(), streamed);

    books::check(&db, &gw.user_id, initial, &ok).await;
    assert_eq!(
        initial - books::settled(&db, &gw.user_id).await.money,
        3 * per_request
    );
}
