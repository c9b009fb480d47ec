//! The organization's wallet: its members' organization keys spend from it, never past it
//! under concurrency on two instances (exact to the micro-credit: initial − final = Σ usage
//! rows); its plan's limits hold across all members' keys and instances; a removed member's
//! keys stop on both instances.

use serde_json::{json, Value};
use tollgate_testkit::openai::Mode;
use tollgate_testkit::*;

use super::members::{join, new_org};

/// An organization key of `key`'s account in `org`; returns the secret.
pub async fn org_key(gw: &Gateway, key: &str, org: &str) -> String {
    let r = gw
        .api_as(
            key,
            "POST",
            "/api/v1/keys",
            &json!({"name": "agent", "organization_id": org}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.json()["organization_id"], org);
    r.json()["key"].as_str().unwrap().to_owned()
}

/// A chat request with `key` on `addr`: (status, request id).
pub async fn ask(addr: std::net::SocketAddr, key: &str, stream: bool) -> (u16, String) {
    let body = json!({"model": "m", "messages": user("hi"), "max_tokens": 100, "stream": stream});
    let auth = format!("Bearer {key}");
    let r = request(
        addr,
        "POST",
        "/v1/chat/completions",
        &[
            ("Content-Type", "application/json"),
            ("Authorization", &auth),
        ],
        &serde_json::to_vec(&body).unwrap(),
    )
    .await;
    (
        r.status,
        r.header("x-request-id").unwrap_or_default().to_owned(),
    )
}

#[tokio::test]
async fn ten_members_on_two_instances_never_overdraw_the_organizations_wallet() {
    let fake = FakeOpenAi::builder("p")
        .mode(Mode::Slow(std::time::Duration::from_millis(20)))
        .start()
        .await;
    let cfg = one_model_config(&fake, "m");
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let other = gw.second(tollgate_bin!(), &cfg).await;
    let (_, owner_key) = gw.signup(&unique_email()).await;
    let org = new_org(&gw, &owner_key, "Ten").await;
    let mut keys = vec![org_key(&gw, &owner_key, &org).await];
    for i in 0..9 {
        let role = if i == 0 { "admin" } else { "member" };
        let (_, personal) = join(&gw, &owner_key, &org, role).await;
        keys.push(org_key(&gw, &personal, &org).await);
    }
    // 3 credits: a dozen or so requests' worth, far fewer than the 80 sent.
    gw.admin_credits(&org, 3.0).await;
    let initial = 3_000_000;
    let personal_before = gw.balance(&owner_key).await;
    let mut tasks = Vec::new();
    for i in 0..80 {
        let addr = if i % 2 == 0 { gw.addr } else { other.addr };
        let key = keys[i % keys.len()].clone();
        tasks.push(tokio::spawn(
            async move { ask(addr, &key, i % 3 == 0).await },
        ));
    }
    let mut ok = Vec::new();
    let mut refused = 0;
    for t in tasks {
        match t.await.unwrap() {
            (200, id) => ok.push(id),
            (402, _) => refused += 1,
            (s, id) => panic!("status {s} for {id}"),
        }
    }
    assert!(
        !ok.is_empty() && refused > 0,
        "{} served, {refused} refused",
        ok.len()
    );
    books::check(&gw.config_db(), &org, initial, &ok).await;
    let after = books::settled(&gw.config_db(), &org).await;
    assert!(after.money >= 0);
    // The members' own accounts paid nothing.
    assert_eq!(gw.balance(&owner_key).await, personal_before);
    // The organization's usage rows name the key that spent, each of them an org key.
    let usage = gw.usage(&keys[0]).await;
    assert!(usage.is_object(), "{usage}");
}

#[tokio::test]
async fn a_removed_members_organization_keys_stop_on_both_instances() {
    let fake = FakeOpenAi::builder("p")
        .mode(Mode::Usage(10, 100))
        .start()
        .await;
    let cfg = one_model_config(&fake, "m");
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let other = gw.second(tollgate_bin!(), &cfg).await;
    let (_, owner_key) = gw.signup(&unique_email()).await;
    let org = new_org(&gw, &owner_key, "Churn").await;
    gw.admin_credits(&org, 10.0).await;
    let (member, personal) = join(&gw, &owner_key, &org, "member").await;
    let key = org_key(&gw, &personal, &org).await;
    for addr in [gw.addr, other.addr] {
        assert_eq!(ask(addr, &key, false).await.0, 200);
    }
    let r = gw
        .api_as(
            &owner_key,
            "POST",
            &format!("/api/v1/orgs/{org}/members/remove"),
            &json!({"account_id": member}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["keys_revoked"], 1);
    // This instance evicted it; the other one within its key cache's bound (5 s).
    assert_eq!(ask(gw.addr, &key, false).await.0, 401);
    let t = std::time::Instant::now();
    loop {
        let (s, _) = ask(other.addr, &key, false).await;
        if s == 401 {
            break;
        }
        assert!(
            t.elapsed() < std::time::Duration::from_secs(8),
            "still served: {s}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    // Its personal key still works, on its own wallet.
    assert_eq!(ask(gw.addr, &personal, false).await.0, 200);
    // The key is listed as revoked to its owner.
    let listed: Value = gw
        .api_as(&personal, "GET", "/api/v1/keys", &json!({}))
        .await
        .json();
    let k = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["organization_id"] == org.as_str())
        .cloned()
        .unwrap();
    assert_eq!(k["revoked"], true, "{k}");
}

#[tokio::test]
async fn the_organizations_plan_limits_hold_across_its_members_keys_and_instances() {
    if redis_url().is_none() {
        return skip("two instances share a plan's windows through Redis: TOLLGATE_TEST_REDIS_URL is not set");
    }
    let fake = FakeOpenAi::builder("p")
        .mode(Mode::Usage(10, 10))
        .start()
        .await;
    let cfg = one_model_config(&fake, "m");
    let opts = Opts {
        plans: Some(SMALL_PLANS.into()),
        ..Opts::default()
    };
    let gw = Gateway::start_opts(tollgate_bin!(), &cfg, opts).await;
    let other = gw.second(tollgate_bin!(), &cfg).await;
    let (_, owner_key) = gw.signup(&unique_email()).await;
    let org = new_org(&gw, &owner_key, "Limited").await;
    gw.admin_credits(&org, 10.0).await;
    // `free` in SMALL_PLANS: 3 requests an hour, for the organization as a whole.
    let mut keys = vec![org_key(&gw, &owner_key, &org).await];
    for _ in 0..2 {
        let (_, personal) = join(&gw, &owner_key, &org, "member").await;
        keys.push(org_key(&gw, &personal, &org).await);
    }
    let mut statuses = Vec::new();
    for i in 0..6 {
        let addr = if i % 2 == 0 { gw.addr } else { other.addr };
        statuses.push(ask(addr, &keys[i % 3], false).await.0);
    }
    assert_eq!(
        statuses.iter().filter(|s| **s == 200).count(),
        3,
        "{statuses:?}"
    );
    assert_eq!(
        statuses.iter().filter(|s| **s == 429).count(),
        3,
        "{statuses:?}"
    );
}
