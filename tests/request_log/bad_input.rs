//! Bad input on every new endpoint and parameter: a 400 whose JSON error names the parameter
//! or field, the service still healthy, nothing changed (payload logging stays as it was).

use serde_json::json;
use tollgate_testkit::*;

use super::common::*;

#[tokio::test]
async fn bad_input_is_refused_naming_its_field_and_changes_nothing() {
    let fake = FakeOpenAi::start("p").await;
    let gw = gateway(&fake, "").await;
    let key = gw.key.clone();
    let (_, id, _) = chat(&gw, &key, "m", "hello", false).await;
    record(&gw, &key, &id).await;
    for (query, field) in [
        ("limit=0", "limit"),
        ("limit=5000", "limit"),
        ("limit=ten", "limit"),
        ("since=2026-02-30", "since"),
        ("until=tomorrow", "until"),
        ("since=2026-01-02&until=2026-01-01", "until"),
        ("status=teapot", "status"),
        ("status=99", "status"),
        ("cursor=nonsense", "cursor"),
        ("format=xml", "format"),
        ("sort=asc", "sort"),
        ("account_id=usr_x", "account_id"),
        ("model=", "model"),
        ("model=%ZZ", "model"),
    ] {
        let v = list(&gw, &key, query).await.error(400, "invalid_request");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(
            message.starts_with(&format!("{field}: ")),
            "{query}: {message}"
        );
    }
    // The operator's listing: whose is required, and a caller's organization is no parameter.
    let admin = |q: &'static str| {
        let gw = &gw;
        async move {
            gw.api_as(
                ADMIN_TOKEN,
                "GET",
                &format!("/api/v1/admin/requests{q}"),
                &json!({}),
            )
            .await
            .error(400, "invalid_request")
        }
    };
    assert!(admin("").await["error"]["message"]
        .as_str()
        .unwrap()
        .starts_with("account_id: "));
    assert!(admin("?organization_id=o").await["error"]["message"]
        .as_str()
        .unwrap()
        .starts_with("organization_id: "));
    assert!(admin("?account_id=u&limit=-1").await["error"]["message"]
        .as_str()
        .unwrap()
        .starts_with("limit: "));
    // One record takes no parameters.
    let v = gw
        .api_as(
            &key,
            "GET",
            &format!("/api/v1/requests/{id}?format=jsonl"),
            &json!({}),
        )
        .await;
    assert!(v.error(400, "invalid_request")["error"]["message"]
        .as_str()
        .unwrap()
        .starts_with("format: "));

    // The switches: wrong types, unknown fields, nothing at all.
    let (key_id, _) = new_key(&gw, &key, json!({"name": "k"})).await;
    let org = gw
        .api_as(&key, "POST", "/api/v1/orgs", &json!({"name": "O"}))
        .await
        .json()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    for path in [
        "/api/v1/auth/me".to_owned(),
        format!("/api/v1/keys/{key_id}"),
        format!("/api/v1/orgs/{org}"),
    ] {
        for (body, field) in [
            (json!({"log_payloads": "yes"}), "log_payloads"),
            (json!({"log_payloads": 1}), "log_payloads"),
            (json!({"log_payloads": null}), "log_payloads"),
            (json!({"log_payload": true}), "log_payload"),
        ] {
            let r = gw.api_as(&key, "PATCH", &path, &body).await;
            let v = r.error(400, "invalid_request");
            let message = v["error"]["message"].as_str().unwrap();
            assert!(
                message.starts_with(&format!("{field}: ")),
                "{path} {body}: {message}"
            );
        }
        let r = gw
            .with_auth("PATCH", &path, &format!("Bearer {key}"), b"{not json")
            .await;
        r.error(400, "invalid_request");
    }
    let r = gw
        .api_as(&key, "PATCH", "/api/v1/auth/me", &json!({}))
        .await;
    assert!(r.error(400, "invalid_request")["error"]["message"]
        .as_str()
        .unwrap()
        .starts_with("log_payloads: "));
    // Nothing changed.
    assert_eq!(gw.me(&key).await["log_payloads"], false);
    assert_eq!(
        gw.api_as(&key, "GET", &format!("/api/v1/orgs/{org}"), &json!({}))
            .await
            .json()["log_payloads"],
        false
    );
    let keys = gw
        .api_as(&key, "GET", "/api/v1/keys", &json!({}))
        .await
        .json();
    assert!(
        keys["data"]
            .as_array()
            .unwrap()
            .iter()
            .all(|k| k["log_payloads"] == false),
        "{keys}"
    );
    let (_, id, _) = chat(&gw, &key, "m", "still nothing kept", false).await;
    assert_eq!(record(&gw, &key, &id).await["payload_stored"], false);
    assert!(gw.is_healthy().await);
}
