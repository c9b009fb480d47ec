//! Key rotation (issue 29, part): a successor with the same settings, shown once; the old key
//! works through the grace period on every instance, then stops; bad input named. Runs on
//! SQLite, and on Postgres + Redis when set (two instances on one ledger).

use std::time::Duration;

use serde_json::{json, Value};
use tollgate_testkit::*;

/// `gw`'s API with `key`.
async fn api(gw: &Gateway, method: &str, path: &str, key: &str, body: &Value) -> Response {
    gw.api_as(key, method, path, body).await
}

#[tokio::test]
async fn a_rotated_key_works_through_its_grace_then_only_the_successor_does() {
    let fake = FakeOpenAi::start("p").await;
    let cfg = one_model_config(&fake, "m");
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let other = gw.second(tollgate_bin!(), &cfg).await;
    let r = api(
        &gw,
        "POST",
        "/api/v1/keys",
        &gw.key,
        &json!({"name": "ci", "allowed_models": ["m"]}),
    )
    .await;
    let (old, old_id) = (
        r.json()["key"].as_str().unwrap().to_owned(),
        r.json()["id"].as_str().unwrap().to_owned(),
    );
    let chat = json!({"model": "m", "messages": user("hi")});
    for g in [&gw, &other] {
        assert_eq!(g.chat_as(Some(&old), &chat).await.status, 200);
    }

    let r = api(
        &gw,
        "POST",
        &format!("/api/v1/keys/{old_id}/rotate"),
        &gw.key,
        &json!({"grace_seconds": 2}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let v = r.json();
    let new = v["key"].as_str().unwrap().to_owned();
    assert_ne!(new, old);
    assert_eq!(
        (v["name"].as_str(), &v["allowed_models"]),
        (Some("ci"), &json!(["m"]))
    );
    assert_eq!(v["replaces"]["id"], old_id.as_str());
    // Both work during the grace period, on both instances.
    for g in [&gw, &other] {
        assert_eq!(g.chat_as(Some(&old), &chat).await.status, 200);
        assert_eq!(g.chat_as(Some(&new), &chat).await.status, 200);
    }
    // Past the grace period and the other instance's key cache (4 s), which still holds the
    // old key as it was before the rotation.
    tokio::time::sleep(Duration::from_millis(4_600)).await;
    for g in [&gw, &other] {
        g.chat_as(Some(&old), &chat)
            .await
            .error(401, "authentication_error");
        assert_eq!(g.chat_as(Some(&new), &chat).await.status, 200);
    }
    // The successor keeps the allowlist.
    let listed = api(&gw, "GET", "/v1/models", &new, &json!({})).await.json();
    assert_eq!(listed["data"].as_array().unwrap().len(), 2, "{listed}");

    // Grace 0: the old key stops at once on the instance that rotated it.
    let new_id = v["id"].as_str().unwrap().to_owned();
    let r = api(
        &gw,
        "POST",
        &format!("/api/v1/keys/{new_id}/rotate"),
        &gw.key,
        &json!({"grace_seconds": 0}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text());
    gw.chat_as(Some(&new), &chat)
        .await
        .error(401, "authentication_error");
    assert_eq!(
        gw.chat_as(Some(r.json()["key"].as_str().unwrap()), &chat)
            .await
            .status,
        200
    );

    // Bad input: nothing rotated.
    let path = format!("/api/v1/keys/{new_id}/rotate");
    for g in [
        json!({"grace_seconds": -1}),
        json!({"grace_seconds": "1d"}),
        json!({"grace_seconds": 99_999_999}),
    ] {
        let e = api(&gw, "POST", &path, &gw.key, &g)
            .await
            .error(400, "invalid_request");
        assert_eq!(e["error"]["param"], "grace_seconds");
    }
    api(
        &gw,
        "POST",
        "/api/v1/keys/key_nope/rotate",
        &gw.key,
        &json!({}),
    )
    .await
    .error(404, "not_found");
    let (_, stranger) = gw.signup(&unique_email()).await;
    api(&gw, "POST", &path, &stranger, &json!({}))
        .await
        .error(404, "not_found");
    let keys = api(&gw, "GET", "/api/v1/keys", &gw.key, &json!({}))
        .await
        .json();
    assert_eq!(
        keys["data"].as_array().unwrap().len(),
        4,
        "the signup key, ci and two successors"
    );
}
