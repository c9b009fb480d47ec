//! `POST /v1/completions` (legacy text completions): passed on to the models that serve them,
//! JSON and streamed, charged exactly like chat, failing over only to models that serve them;
//! a chat model that does not is a 400 naming the route to use; bad input refused with nothing
//! charged. Runs on SQLite, and on Postgres + Redis when set.

use serde_json::{json, Value};
use tollgate_testkit::openai::Mode;
use tollgate_testkit::*;

async fn complete(gw: &Gateway, body: &Value) -> Response {
    let auth = format!("Bearer {}", gw.key);
    gw.with_auth(
        "POST",
        "/v1/completions",
        &auth,
        body.to_string().as_bytes(),
    )
    .await
}

fn legacy_requests(f: &FakeOpenAi) -> Vec<Value> {
    f.requests()
        .into_iter()
        .filter(|r| r.path.ends_with("/v1/completions") && !r.path.ends_with("chat/completions"))
        .map(|r| r.json())
        .collect()
}

#[tokio::test]
async fn legacy_completions_are_passed_on_and_charged_like_chat() {
    let (a, b, c) = (
        FakeOpenAi::start("a").await,
        FakeOpenAi::start("b").await,
        FakeOpenAi::start("c").await,
    );
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}{}{}{}{}",
        provider("p", &[&a], ""),
        provider("q", &[&b], ""),
        provider("r", &[&c], ""),
        model("instruct", "p", "economy", "completions = true"),
        model("instruct-2", "q", "economy", "completions = true"),
        model("chat-only", "r", "economy", ""),
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let db = gw.config_db();
    let initial = books::read(&db, &gw.user_id).await.money;
    let (mut ok, mut spent) = (Vec::new(), 0i64);
    let cost = |u: &Value| {
        u["prompt_tokens"].as_i64().unwrap() * 1_000
            + u["completion_tokens"].as_i64().unwrap() * 2_000
    };

    // JSON: the client's members passed on, the model and the output cap set (16 by default).
    let r = complete(&gw, &json!({"model": "instruct", "prompt": "Once upon a time", "suffix": "The end.", "echo": false})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(
        (v["object"].as_str(), v["model"].as_str()),
        (Some("text_completion"), Some("instruct"))
    );
    assert_eq!(v["choices"][0]["text"], a.reply_text());
    let sent = legacy_requests(&a).pop().unwrap();
    assert_eq!(
        (sent["model"].as_str(), sent["max_tokens"].as_u64()),
        (Some("up-instruct"), Some(16))
    );
    assert_eq!(sent["suffix"], "The end.");
    spent += cost(&v["usage"]);
    ok.push(r.header("x-request-id").unwrap().to_owned());

    // A stream, usage asked for: chunks with the model used, the usage chunk, [DONE].
    let r = complete(
        &gw,
        &json!({"model": "instruct", "prompt": ["a", "b"], "stream": true, "max_tokens": 3,
        "stream_options": {"include_usage": true}}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let data = r.sse_data();
    assert_eq!(data.last().map(String::as_str), Some("[DONE]"));
    let chunks: Vec<Value> = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    assert!(chunks.iter().all(|c| c["model"] == "instruct"));
    let text: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["text"].as_str())
        .collect();
    assert_eq!(
        text,
        a.reply_text()
            .split_inclusive(' ')
            .take(3)
            .collect::<String>()
    );
    let usage = &chunks.last().unwrap()["usage"];
    assert_eq!(usage["completion_tokens"], 3);
    spent += cost(usage);
    ok.push(r.header("x-request-id").unwrap().to_owned());

    // The first model fails: a sibling that serves legacy completions takes it, never the chat-only one.
    a.set_mode(Mode::Status(500));
    let r = complete(&gw, &json!({"model": "instruct", "prompt": "x"})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["model"], "instruct-2");
    spent += cost(&r.json()["usage"]);
    ok.push(r.header("x-request-id").unwrap().to_owned());
    b.set_mode(Mode::Status(500));
    let r = complete(&gw, &json!({"model": "instruct", "prompt": "x"})).await;
    r.error(502, "upstream_error");
    assert!(
        c.requests().is_empty(),
        "a model without legacy completions was asked"
    );
    let failed = r.header("x-request-id").unwrap().to_owned();

    // Each served request has its row at its usage; the failed one a row at nothing.
    let books_now = books::settled(&db, &gw.user_id).await;
    assert_eq!(books_now.holds, 0);
    assert_eq!(initial - books_now.money, spent);
    for (id, charged) in &books_now.rows {
        assert_eq!(ok.contains(id), *charged > 0, "{id}: {charged}");
    }
    assert!(books_now
        .rows
        .iter()
        .any(|(id, c)| id == &failed && *c == 0));
    assert_eq!(books_now.rows.len(), ok.len() + 1);
}

#[tokio::test]
async fn bad_legacy_completions_are_refused_and_nothing_is_charged() {
    let fake = FakeOpenAi::start("p").await;
    let cfg = format!(
        "{}{}",
        one_model_config(&fake, "chat-only"),
        model("instruct", "p", "economy", "completions = true")
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let before = books::read(&gw.config_db(), &gw.user_id).await;
    for (body, status, ty, param) in [
        (
            json!({"model": "chat-only", "prompt": "x"}),
            400,
            "invalid_request",
            Some("model"),
        ),
        (
            json!({"model": "economy", "prompt": "x"}),
            400,
            "invalid_request",
            Some("model"),
        ),
        (
            json!({"model": "instruct"}),
            400,
            "invalid_request",
            Some("prompt"),
        ),
        (
            json!({"model": "instruct", "prompt": {"a": 1}}),
            400,
            "invalid_request",
            Some("prompt"),
        ),
        (
            json!({"model": "instruct", "prompt": "x", "max_tokens": -1}),
            400,
            "invalid_request",
            Some("max_tokens"),
        ),
        (
            json!({"model": "instruct", "prompt": "x", "n": 500}),
            400,
            "invalid_request",
            Some("n"),
        ),
        (
            json!({"model": "nope", "prompt": "x"}),
            404,
            "model_not_found",
            None,
        ),
    ] {
        let e = complete(&gw, &body).await.error(status, ty);
        if let Some(p) = param {
            assert_eq!(e["error"]["param"], p, "{e}");
        }
        if body["model"] == "chat-only" {
            assert!(
                e["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("/v1/chat/completions"),
                "{e}"
            );
        }
    }
    let e = gw
        .with_auth(
            "POST",
            "/v1/completions",
            &format!("Bearer {}", gw.key),
            b"{nope",
        )
        .await;
    e.error(400, "invalid_request");
    assert!(gw.is_healthy().await);
    assert!(fake.requests().is_empty(), "nothing reached the provider");
    let after = books::settled(&gw.config_db(), &gw.user_id).await;
    assert_eq!(
        (after.money, after.rows.len()),
        (before.money, before.rows.len())
    );
}
