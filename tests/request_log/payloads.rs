//! Payloads are stored only where payload logging is on: off by default; on for one key (its
//! requests', not another key's of the same account); on for the account (every key's); on
//! for an organization (its keys'). Never a key: a prompt holding the caller's own key and the
//! provider's key is stored with both redacted, and no stored column of the wallet holds
//! either. Capped at `max_payload_bytes` with the truncated flag; a stream's reply stored as
//! the text its client received.

use serde_json::json;
use tollgate_testkit::*;

use super::common::*;

#[tokio::test]
async fn payloads_are_stored_only_where_turned_on_and_never_hold_a_key() {
    let fake = FakeOpenAi::start("p").await;
    let gw = gateway(&fake, "").await;
    let main = gw.key.clone();
    let (first_id, first) = new_key(&gw, &main, json!({"name": "first"})).await;
    let (_, second) = new_key(&gw, &main, json!({"name": "second"})).await;

    // Off by default.
    let (_, id, _) = chat(&gw, &first, "m", "nothing kept", false).await;
    let r = record(&gw, &first, &id).await;
    assert_eq!(r["payload_stored"], false, "{r}");
    assert!(
        r["request_body"].is_null() && r["response_body"].is_null(),
        "{r}"
    );

    // On for one key: its requests' payloads, redacted.
    let v = gw
        .api_as(
            &main,
            "PATCH",
            &format!("/api/v1/keys/{first_id}"),
            &json!({"log_payloads": true}),
        )
        .await;
    assert_eq!(v.status, 200, "{}", v.text());
    assert_eq!(v.json()["log_payloads"], true);
    let listed = gw
        .api_as(&main, "GET", "/api/v1/keys", &json!({}))
        .await
        .json();
    let shown = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["id"] == first_id.as_str())
        .cloned()
        .unwrap();
    assert_eq!(shown["log_payloads"], true, "{listed}");
    let secret_prompt =
        format!("my key is {first} and the provider's is {PROVIDER_KEY}, keep them");
    let (status, id, reply) = chat(&gw, &first, "m", &secret_prompt, false).await;
    assert_eq!(status, 200, "{}", reply.text());
    let r = record(&gw, &first, &id).await;
    assert_eq!(r["payload_stored"], true, "{r}");
    let req = r["request_body"].as_str().unwrap();
    assert!(
        req.contains("my key is [redacted] and the provider's is [redacted], keep them"),
        "{req}"
    );
    assert!(
        !req.contains(&first[3..]) && !req.contains(PROVIDER_KEY),
        "{req}"
    );
    assert_eq!(r["request_truncated"], false);
    // The reply as the client got it (its cost spliced in).
    let resp: serde_json::Value =
        serde_json::from_str(r["response_body"].as_str().unwrap()).unwrap();
    assert_eq!(
        resp["choices"][0]["message"]["content"],
        reply.json()["choices"][0]["message"]["content"]
    );
    assert_eq!(r["response_truncated"], false);

    // Another key of the same account: nothing.
    let (_, id, _) = chat(&gw, &second, "m", "not this one", false).await;
    assert_eq!(record(&gw, &second, &id).await["payload_stored"], false);

    // Capped at max_payload_bytes, the flag set.
    let long = "x".repeat(4000);
    let (_, id, _) = chat(&gw, &first, "m", &long, false).await;
    let r = record(&gw, &first, &id).await;
    assert!(r["request_body"].as_str().unwrap().len() <= 1024, "{r}");
    assert_eq!(r["request_truncated"], true);

    // A stream: the text its client received, reassembled.
    let (status, id, _) = chat(&gw, &first, "m", "a stream", true).await;
    assert_eq!(status, 200);
    let r = record(&gw, &first, &id).await;
    assert_eq!(
        r["response_body"].as_str(),
        Some(fake.reply_text().as_str()),
        "{r}"
    );

    // On for the account: every key's.
    let v = gw
        .api_as(
            &main,
            "PATCH",
            "/api/v1/auth/me",
            &json!({"log_payloads": true}),
        )
        .await;
    assert_eq!(v.status, 200, "{}", v.text());
    assert_eq!(gw.me(&main).await["log_payloads"], true);
    let (_, id, _) = chat(&gw, &second, "m", "now kept", false).await;
    let r = record(&gw, &second, &id).await;
    assert!(
        r["request_body"].as_str().unwrap().contains("now kept"),
        "{r}"
    );

    // Nothing stored holds a key: not the callers', not the provider's.
    let text = stored_text(&gw.config_db(), &gw.user_id).await;
    assert!(text.contains("now kept"), "the rows were read");
    for secret in [&main[3..], &first[3..], &second[3..], PROVIDER_KEY] {
        assert!(!text.contains(secret), "a stored row holds a key");
    }
    // And the provider did get its key: it is redacted from storage, not from the wire.
    let sent = fake.requests();
    assert!(sent
        .iter()
        .any(|r| r.header("authorization") == Some(&format!("Bearer {PROVIDER_KEY}"))));
}

#[tokio::test]
async fn an_organizations_payload_logging_covers_its_keys() {
    let fake = FakeOpenAi::start("p").await;
    let gw = gateway(&fake, "").await;
    let (_, owner) = gw.signup(&unique_email()).await;
    let r = gw
        .api_as(&owner, "POST", "/api/v1/orgs", &json!({"name": "Logs"}))
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let org = r.json()["id"].as_str().unwrap().to_owned();
    gw.admin_credits(&org, 100.0).await;
    let r = gw
        .api_as(
            &owner,
            "POST",
            "/api/v1/keys",
            &json!({"name": "o", "organization_id": org}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let org_key = r.json()["key"].as_str().unwrap().to_owned();
    let (_, id, _) = chat(&gw, &org_key, "m", "before", false).await;
    assert_eq!(record(&gw, &org_key, &id).await["payload_stored"], false);
    let path = format!("/api/v1/orgs/{org}");
    let v = gw
        .api_as(&owner, "PATCH", &path, &json!({"log_payloads": true}))
        .await;
    assert_eq!(v.status, 200, "{}", v.text());
    assert_eq!(
        gw.api_as(&owner, "GET", &path, &json!({})).await.json()["log_payloads"],
        true
    );
    let (_, id, _) = chat(&gw, &org_key, "m", "after", false).await;
    let r = record(&gw, &org_key, &id).await;
    assert!(r["request_body"].as_str().unwrap().contains("after"), "{r}");
    assert_eq!(r["account_id"], org.as_str());
    // The owner's own account is not the organization's: its personal requests keep nothing.
    let (_, id, _) = chat(&gw, &owner, "m", "personal", false).await;
    assert_eq!(record(&gw, &owner, &id).await["payload_stored"], false);
}
