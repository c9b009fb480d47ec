//! API keys: issued, listed, revoked (here at once, on another instance within 5 s), and every
//! malformed, unknown or missing key refused; no key is the guest tier. Runs on SQLite, and on
//! Postgres when `TOLLGATE_TEST_DATABASE_URL` is set.

use std::time::{Duration, Instant};

use serde_json::json;
use tollgate_testkit::*;

#[tokio::test]
async fn keys_are_issued_listed_and_revoked_and_bad_keys_are_refused() {
    let (_f, gw) = paid_and_free(tollgate_bin!()).await;
    let auth = format!("Bearer {}", gw.key);
    let r = gw
        .with_auth("POST", "/api/v1/keys", &auth, br#"{"name":"ci"}"#)
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let new = r.json();
    let new_key = new["key"].as_str().unwrap().to_string();
    assert_eq!(new["name"], "ci");
    let ok = gw
        .chat_as(
            Some(&new_key),
            &json!({"model":"paid-2024-01-01","messages":user("hi")}),
        )
        .await;
    assert_eq!(ok.status, 200);
    let list = gw.with_auth("GET", "/api/v1/keys", &auth, b"").await.json();
    assert_eq!(list["data"].as_array().unwrap().len(), 2);

    // Bad input.
    gw.with_auth("POST", "/api/v1/keys", &auth, br#"{"name":5}"#)
        .await
        .error(400, "invalid_request");
    gw.with_auth("POST", "/api/v1/keys", &auth, b"{nope")
        .await
        .error(400, "invalid_request");
    gw.with_auth(
        "POST",
        "/api/v1/keys",
        &auth,
        format!("{{\"name\":\"{}\"}}", "n".repeat(200)).as_bytes(),
    )
    .await
    .error(400, "invalid_request");
    gw.with_auth("DELETE", "/api/v1/keys/key_doesnotexist", &auth, b"")
        .await
        .error(404, "not_found");
    // Someone else's key cannot be revoked.
    let (_, other) = gw.signup(&unique_email()).await;
    let id = new["id"].as_str().unwrap();
    gw.with_auth(
        "DELETE",
        &format!("/api/v1/keys/{id}"),
        &format!("Bearer {other}"),
        b"",
    )
    .await
    .error(404, "not_found");

    let r = gw
        .with_auth("DELETE", &format!("/api/v1/keys/{id}"), &auth, b"")
        .await;
    assert_eq!(r.status, 200);
    let revoked = gw
        .chat_as(
            Some(&new_key),
            &json!({"model":"paid-2024-01-01","messages":user("hi")}),
        )
        .await;
    revoked.error(401, "authentication_error");
    let list = gw.with_auth("GET", "/api/v1/keys", &auth, b"").await.json();
    let row = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["id"] == id)
        .unwrap()
        .clone();
    assert_eq!(row["revoked"], true);

    // Malformed, unknown, wrong scheme, missing.
    let body = json!({"model":"paid-2024-01-01","messages":user("hi")});
    for bad in [
        "Bearer nope",
        "Bearer tg_0000000000000000000000000000000000000000",
        "Basic dXNlcjpwYXNz",
        "Bearer ",
    ] {
        let b = serde_json::to_vec(&body).unwrap();
        request(
            gw.addr,
            "POST",
            "/v1/chat/completions",
            &[("Authorization", bad)],
            &b,
        )
        .await
        .error(401, "authentication_error");
    }
    // No key: the guest tier gets guest models only.
    gw.chat_as(None, &body)
        .await
        .error(401, "authentication_error");
    let g = gw
        .chat_as(
            None,
            &json!({"model":"free-2024-01-01","messages":user("hi")}),
        )
        .await;
    assert_eq!(g.status, 200);
    assert!(g.header("x-credits-remaining").is_none());
    let g = gw
        .chat_as(None, &json!({"model":"normal","messages":user("hi")}))
        .await;
    assert_eq!(g.json()["model"], "free-2024-01-01");
    request(gw.addr, "GET", "/api/v1/keys", &[], b"")
        .await
        .error(401, "authentication_error");
    request(gw.addr, "GET", "/api/v1/usage", &[], b"")
        .await
        .error(401, "authentication_error");
}

#[tokio::test]
async fn revoked_key_is_refused_on_a_second_instance_within_5_seconds() {
    let fake = FakeOpenAi::start("p").await;
    let cfg = one_model_config(&fake, "m");
    let a = Gateway::start(tollgate_bin!(), &cfg).await;
    let b = a.second(tollgate_bin!(), &cfg).await;
    let body = json!({"model":"m","messages":user("hi")});
    // B has the key cached as valid.
    assert_eq!(b.chat_as(Some(&a.key), &body).await.status, 200);
    let list = request(
        a.addr,
        "GET",
        "/api/v1/keys",
        &[("Authorization", &format!("Bearer {}", a.key))],
        b"",
    )
    .await
    .json();
    let id = list["data"][0]["id"].as_str().unwrap().to_string();
    let r = request(
        a.addr,
        "DELETE",
        &format!("/api/v1/keys/{id}"),
        &[("Authorization", &format!("Bearer {}", a.key))],
        b"",
    )
    .await;
    assert_eq!(r.status, 200);
    let t = Instant::now();
    assert_eq!(
        a.chat_as(Some(&a.key), &body).await.status,
        401,
        "refused at once where revoked"
    );
    loop {
        if b.chat_as(Some(&a.key), &body).await.status == 401 {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "still accepted after 5 s on the other instance"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
