//! Key expiry (issue 29, first part): a key issued or changed with `expires_at` works until
//! then and is refused with 401 after it, on every instance (checked on each request, cached
//! key or not); bad settings are a 400 naming the field, with nothing changed. Runs on SQLite,
//! and on Postgres + Redis when set (two instances on one ledger).

use std::time::Duration;

use serde_json::{json, Value};
use tollgate_testkit::*;

/// `gw`'s API with `key`.
async fn api(gw: &Gateway, method: &str, path: &str, key: &str, body: &Value) -> Response {
    gw.api_as(key, method, path, body).await
}

#[tokio::test]
async fn an_expiring_key_stops_at_its_expiry_on_every_instance() {
    let fake = FakeOpenAi::start("p").await;
    let cfg = one_model_config(&fake, "m");
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let other = gw.second(tollgate_bin!(), &cfg).await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;

    let r = api(
        &gw,
        "POST",
        "/api/v1/keys",
        &gw.key,
        &json!({"name": "ci", "expires_at": now + 3}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let issued = r.json();
    assert_eq!(issued["expires_at"], now + 3);
    let (key, id) = (
        issued["key"].as_str().unwrap().to_owned(),
        issued["id"].as_str().unwrap().to_owned(),
    );
    let chat = json!({"model": "m", "messages": user("hi")});
    for g in [&gw, &other] {
        assert_eq!(g.chat_as(Some(&key), &chat).await.status, 200);
    }
    let list = api(&gw, "GET", "/api/v1/keys", &gw.key, &json!({}))
        .await
        .json();
    let row = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["id"] == id.as_str())
        .unwrap()
        .clone();
    assert_eq!(row["expires_at"], now + 3);

    // Past its expiry: 401 on both instances, though both have the key cached.
    tokio::time::sleep(Duration::from_millis(3_600)).await;
    for g in [&gw, &other] {
        let e = g
            .chat_as(Some(&key), &chat)
            .await
            .error(401, "authentication_error");
        assert!(
            e["error"]["message"].as_str().unwrap().contains("expired"),
            "{e}"
        );
    }

    // Changed back to never (PATCH): it works again.
    let r = api(
        &gw,
        "PATCH",
        &format!("/api/v1/keys/{id}"),
        &gw.key,
        &json!({"expires_at": null}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["expires_at"], Value::Null);
    assert_eq!(gw.chat_as(Some(&key), &chat).await.status, 200);
}

#[tokio::test]
async fn bad_key_settings_are_refused_by_name_and_change_nothing() {
    let fake = FakeOpenAi::start("p").await;
    let gw = Gateway::start(tollgate_bin!(), &one_model_config(&fake, "m")).await;
    let keys = |v: Value| v["data"].as_array().unwrap().len();
    let before = keys(
        api(&gw, "GET", "/api/v1/keys", &gw.key, &json!({}))
            .await
            .json(),
    );
    for body in [
        json!({"expires_at": 1}),
        json!({"expires_at": "tomorrow"}),
        json!({"expires_at": 1.5}),
    ] {
        let e = api(&gw, "POST", "/api/v1/keys", &gw.key, &body)
            .await
            .error(400, "invalid_request");
        assert_eq!(e["error"]["param"], "expires_at", "{e}");
    }
    assert_eq!(
        keys(
            api(&gw, "GET", "/api/v1/keys", &gw.key, &json!({}))
                .await
                .json()
        ),
        before
    );
    let id = api(&gw, "GET", "/api/v1/keys", &gw.key, &json!({}))
        .await
        .json()["data"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let path = format!("/api/v1/keys/{id}");
    api(&gw, "PATCH", &path, &gw.key, &json!({"expires_at": 5}))
        .await
        .error(400, "invalid_request");
    let e = api(&gw, "PATCH", &path, &gw.key, &json!({"budget": 5}))
        .await
        .error(400, "invalid_request");
    assert_eq!(e["error"]["param"], "budget");
    api(&gw, "PATCH", &path, &gw.key, &json!({}))
        .await
        .error(400, "invalid_request");
    let (_, stranger) = gw.signup(&unique_email()).await;
    api(&gw, "PATCH", &path, &stranger, &json!({"expires_at": null}))
        .await
        .error(404, "not_found");
    // The key was never changed: it still works.
    assert_eq!(
        gw.chat(json!({"model": "m", "messages": user("hi")}))
            .await
            .status,
        200
    );
}
