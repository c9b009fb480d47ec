//! A key's model allowlist (issue 29, part): a model outside it does not exist for that key
//! (404 `model_not_found`, left out of `/v1/models`), on every front door, and failover never
//! leaves it; a tier in the list allows its models; bad lists are a 400 naming the entry.
//! Runs on SQLite, and on Postgres + Redis when set.

use serde_json::{json, Value};
use tollgate_testkit::openai::Mode;
use tollgate_testkit::*;

/// `gw`'s API with `key`.
async fn api(gw: &Gateway, method: &str, path: &str, key: &str, body: &Value) -> Response {
    gw.api_as(key, method, path, body).await
}

#[tokio::test]
async fn a_key_sees_and_uses_only_its_models_and_never_fails_over_beyond_them() {
    let (a, b) = (FakeOpenAi::start("a").await, FakeOpenAi::start("b").await);
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}{}{}{}[aliases]\n\"small\" = \"m1\"\n",
        provider("p", &[&a], ""),
        provider("q", &[&b], ""),
        model("m1", "p", "economy", ""),
        model("m2", "q", "economy", ""),
        model("big", "q", "powerful", ""),
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let r = api(
        &gw,
        "POST",
        "/api/v1/keys",
        &gw.key,
        &json!({"name": "agent", "allowed_models": ["small"]}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json()["allowed_models"], json!(["small"]));
    let (key, id) = (
        r.json()["key"].as_str().unwrap().to_owned(),
        r.json()["id"].as_str().unwrap().to_owned(),
    );
    let chat = |m: &str| json!({"model": m, "messages": user("hi")});

    // Its model, by id or alias, works; another is as if it did not exist, on every front door.
    assert_eq!(gw.chat_as(Some(&key), &chat("m1")).await.status, 200);
    assert_eq!(gw.chat_as(Some(&key), &chat("small")).await.status, 200);
    let e = gw
        .chat_as(Some(&key), &chat("m2"))
        .await
        .error(404, "model_not_found");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("does not exist"),
        "{e}"
    );
    gw.chat_as(Some(&key), &chat("powerful"))
        .await
        .error(404, "model_not_found");
    let r = api(
        &gw,
        "POST",
        "/v1/responses",
        &key,
        &json!({"model": "big", "input": "x"}),
    )
    .await;
    r.error(404, "model_not_found");
    let listed = api(&gw, "GET", "/v1/models", &key, &json!({})).await.json();
    let names: Vec<&str> = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["id"].as_str())
        .collect();
    assert_eq!(names, ["m1", "small", "economy"]);

    // Its model fails: the sibling of its tier is not tried.
    a.set_mode(Mode::Status(500));
    let before = b.chat_count();
    gw.chat_as(Some(&key), &chat("m1"))
        .await
        .error(502, "upstream_error");
    assert_eq!(b.chat_count(), before, "failover left the allowlist");
    // The account's other key is not limited: it fails over as usual.
    assert_eq!(gw.chat(chat("m1")).await.json()["model"], "m2");

    // A tier in the list allows its models; null lifts the limit.
    let r = api(
        &gw,
        "PATCH",
        &format!("/api/v1/keys/{id}"),
        &gw.key,
        &json!({"allowed_models": ["economy"]}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        gw.chat_as(Some(&key), &chat("m1")).await.json()["model"],
        "m2"
    );
    gw.chat_as(Some(&key), &chat("big"))
        .await
        .error(404, "model_not_found");
    api(
        &gw,
        "PATCH",
        &format!("/api/v1/keys/{id}"),
        &gw.key,
        &json!({"allowed_models": null}),
    )
    .await;
    assert_eq!(gw.chat_as(Some(&key), &chat("big")).await.status, 200);
}

#[tokio::test]
async fn bad_allowlists_are_refused_by_name_and_change_nothing() {
    let fake = FakeOpenAi::start("p").await;
    let gw = Gateway::start(tollgate_bin!(), &one_model_config(&fake, "m")).await;
    for (body, field) in [
        (json!({"allowed_models": []}), "allowed_models"),
        (json!({"allowed_models": "m"}), "allowed_models"),
        (
            json!({"allowed_models": ["m", "nope"]}),
            "allowed_models[1]",
        ),
        (json!({"allowed_models": ["m", 5]}), "allowed_models[1]"),
    ] {
        let e = api(&gw, "POST", "/api/v1/keys", &gw.key, &body)
            .await
            .error(400, "invalid_request");
        assert_eq!(e["error"]["param"], field, "{e}");
    }
    let list = api(&gw, "GET", "/api/v1/keys", &gw.key, &json!({}))
        .await
        .json();
    assert_eq!(
        list["data"].as_array().unwrap().len(),
        1,
        "no key was issued"
    );
    let id = list["data"][0]["id"].as_str().unwrap().to_owned();
    // One bad setting in a PATCH: neither is written.
    let r = api(
        &gw,
        "PATCH",
        &format!("/api/v1/keys/{id}"),
        &gw.key,
        &json!({"allowed_models": ["nope"], "expires_at": null}),
    )
    .await;
    r.error(400, "invalid_request");
    let list = api(&gw, "GET", "/api/v1/keys", &gw.key, &json!({}))
        .await
        .json();
    assert_eq!(list["data"][0]["allowed_models"], Value::Null);
    assert_eq!(
        gw.chat(json!({"model": "m", "messages": user("hi")}))
            .await
            .status,
        200
    );
}
