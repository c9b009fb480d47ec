//! The organization's model allowlist: every organization key uses only those models (within
//! the key's own list), on every instance within the key cache's bound; only an owner or
//! admin sets it, and a name the catalog does not know is refused by name.

use serde_json::json;
use tollgate_testkit::*;

use super::members::{join, new_org};
use super::wallet::org_key;

#[tokio::test]
async fn an_organizations_allowlist_bounds_every_organization_key() {
    let fake = FakeOpenAi::start("p").await;
    let cfg = format!(
        "{FAST_TIMEOUTS}{}{}{}",
        provider("p", &[&fake], ""),
        model("m", "p", "economy", ""),
        model("n", "p", "economy", ""),
    );
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let (_, owner_key) = gw.signup(&unique_email()).await;
    let org = new_org(&gw, &owner_key, "Allow").await;
    gw.admin_credits(&org, 10.0).await;
    let (_, member_key) = join(&gw, &owner_key, &org, "member").await;
    let key = org_key(&gw, &member_key, &org).await;
    let path = format!("/api/v1/orgs/{org}/models");
    gw.api_as(&member_key, "PUT", &path, &json!({"allowed_models": ["m"]}))
        .await
        .error(403, "permission_error");
    for bad in [
        json!({"allowed_models": ["nope"]}),
        json!({"allowed_models": []}),
        json!({"allowed_models": "m"}),
        json!({}),
    ] {
        let r = gw.api_as(&owner_key, "PUT", &path, &bad).await;
        let e = r.error(400, "invalid_request");
        if bad["allowed_models"][0] == "nope" {
            assert!(
                e["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("allowed_models[0]"),
                "{e}"
            );
        }
    }
    let r = gw
        .api_as(&owner_key, "PUT", &path, &json!({"allowed_models": ["m"]}))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["allowed_models"], json!(["m"]));
    let ask = |model: &str| json!({"model": model, "messages": user("hi"), "max_tokens": 5});
    assert_eq!(gw.chat_as(Some(&key), &ask("m")).await.status, 200);
    gw.chat_as(Some(&key), &ask("n"))
        .await
        .error(404, "model_not_found");
    let listed = gw
        .api_as(&key, "GET", "/v1/models", &json!({}))
        .await
        .json();
    let names: Vec<&str> = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["id"].as_str())
        .collect();
    assert!(names.contains(&"m") && !names.contains(&"n"), "{names:?}");
    // A key's own list within it: only what both allow.
    let r = gw
        .api_as(
            &member_key,
            "POST",
            "/api/v1/keys",
            &json!({"organization_id": org, "allowed_models": ["n"]}),
        )
        .await;
    let narrow = r.json()["key"].as_str().unwrap().to_owned();
    gw.chat_as(Some(&narrow), &ask("m"))
        .await
        .error(404, "model_not_found");
    gw.chat_as(Some(&narrow), &ask("n"))
        .await
        .error(404, "model_not_found");
    // Personal keys are not bound by it; lifting it frees the organization's.
    assert_eq!(gw.chat_as(Some(&member_key), &ask("n")).await.status, 200);
    let r = gw
        .api_as(&owner_key, "PUT", &path, &json!({"allowed_models": null}))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(gw.chat_as(Some(&key), &ask("n")).await.status, 200);
}
