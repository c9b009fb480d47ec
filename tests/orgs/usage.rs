//! An organization's usage per member and per key (JSON and CSV): an owner or admin sees
//! everyone's, a member its own (through the organization's API and through its
//! organization key's `/api/v1/usage`).

use serde_json::json;
use tollgate_testkit::openai::Mode;
use tollgate_testkit::*;

use super::members::{join, new_org};
use super::wallet::{ask, org_key};

#[tokio::test]
async fn owners_see_every_members_usage_and_members_only_their_own() {
    let fake = FakeOpenAi::builder("p")
        .mode(Mode::Usage(10, 100))
        .start()
        .await;
    let gw = Gateway::start(tollgate_bin!(), &one_model_config(&fake, "m")).await;
    let (owner, owner_key) = gw.signup(&unique_email()).await;
    let org = new_org(&gw, &owner_key, "Report, \"Inc\"").await;
    gw.admin_credits(&org, 20.0).await;
    let (alice, alice_personal) = join(&gw, &owner_key, &org, "member").await;
    let (bob, bob_personal) = join(&gw, &owner_key, &org, "member").await;
    let (a, b) = (
        org_key(&gw, &alice_personal, &org).await,
        org_key(&gw, &bob_personal, &org).await,
    );
    let o = org_key(&gw, &owner_key, &org).await;
    for (key, n) in [(&a, 3), (&b, 1), (&o, 2)] {
        for _ in 0..n {
            assert_eq!(ask(gw.addr, key, false).await.0, 200);
        }
    }
    let path = format!("/api/v1/orgs/{org}/usage");
    let v = gw.api_as(&owner_key, "GET", &path, &json!({})).await.json();
    let requests = |who: &str| {
        v["by_member"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["account_id"] == who)
            .map(|m| m["requests"].as_i64().unwrap())
    };
    assert_eq!(
        (requests(&alice), requests(&bob), requests(&owner)),
        (Some(3), Some(1), Some(2)),
        "{v}"
    );
    let total: i64 = v["by_key"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| micros(&k["credits"]))
        .sum();
    let books = books::settled(&gw.config_db(), &org).await;
    assert_eq!(total, books.rows.iter().map(|(_, c)| c).sum::<i64>());
    // CSV: a header and one line per key.
    let auth = format!("Bearer {owner_key}");
    let r = request(
        gw.addr,
        "GET",
        &format!("{path}?format=csv"),
        &[("Authorization", &auth)],
        b"",
    )
    .await;
    assert_eq!(r.status, 200);
    assert!(r.header("content-type").unwrap().starts_with("text/csv"));
    let text = r.text();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "key_id,key_name,account_id,email,requests,prompt_tokens,completion_tokens,credits"
    );
    assert_eq!(lines.len(), 4, "{text}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains(&alice) && l.contains(",3,30,300,")),
        "{text}"
    );
    // A member sees its own only, here and through its organization key.
    let v = gw
        .api_as(&alice_personal, "GET", &path, &json!({}))
        .await
        .json();
    assert_eq!(v["by_member"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["by_member"][0]["account_id"], alice.as_str());
    assert_eq!(v["by_key"].as_array().unwrap().len(), 1);
    let own = gw.usage(&a).await;
    assert_eq!(own["recent"].as_array().unwrap().len(), 3, "{own}");
    // Others and bad queries.
    let (_, stranger) = gw.signup(&unique_email()).await;
    gw.api_as(&stranger, "GET", &path, &json!({}))
        .await
        .error(404, "not_found");
    gw.api_as(&owner_key, "GET", &format!("{path}?format=xml"), &json!({}))
        .await
        .error(400, "invalid_request");
    // An organization key issues no keys.
    gw.api_as(&a, "POST", "/api/v1/keys", &json!({"name": "x"}))
        .await
        .error(403, "permission_error");
}
