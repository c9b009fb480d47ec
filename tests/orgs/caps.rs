//! Caps per member: a credit cap per day, week or month across a member's organization keys,
//! held like the wallet (never overrun by concurrent requests on two instances); over it is
//! 402 `insufficient_credits` naming the cap and its reset. Only an owner or admin sets one.

use serde_json::{json, Value};
use tollgate_testkit::openai::Mode;
use tollgate_testkit::*;

use super::members::{join, new_org};
use super::wallet::{ask, org_key};

async fn set_cap(gw: &Gateway, key: &str, org: &str, body: Value) -> Response {
    gw.api_as(key, "PUT", &format!("/api/v1/orgs/{org}/caps"), &body)
        .await
}

#[tokio::test]
async fn a_members_cap_stops_its_keys_and_names_itself_and_its_reset() {
    let fake = FakeOpenAi::builder("p")
        .mode(Mode::Usage(10, 100))
        .start()
        .await;
    let gw = Gateway::start(tollgate_bin!(), &one_model_config(&fake, "m")).await;
    let (_, owner_key) = gw.signup(&unique_email()).await;
    let org = new_org(&gw, &owner_key, "Capped").await;
    gw.admin_credits(&org, 20.0).await;
    let (member, personal) = join(&gw, &owner_key, &org, "member").await;
    let (one, two) = (
        org_key(&gw, &personal, &org).await,
        org_key(&gw, &personal, &org).await,
    );
    let r = set_cap(
        &gw,
        &owner_key,
        &org,
        json!({"account_id": member, "cap_credits": 1, "period": "day"}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let m = r.json()["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["account_id"] == member.as_str())
        .cloned()
        .unwrap();
    assert_eq!(m["cap_credits"], json!(1.0));
    assert_eq!(m["cap_period"], "day");
    assert_eq!(m["cap_resets_at"].as_i64().unwrap() % 86_400, 0, "{m}");
    // 0.21 credits a request: five fit in one credit across both keys (the fifth lowered to
    // what is left), then 402.
    let mut served = 0;
    let refusal = loop {
        let key = if served % 2 == 0 { &one } else { &two };
        let body = json!({"model": "m", "messages": user("hi"), "max_tokens": 100});
        let r = gw.chat_as(Some(key), &body).await;
        if r.status != 200 {
            break r;
        }
        served += 1;
        assert!(served < 20, "the cap never held");
    };
    assert_eq!(served, 5);
    let e = refusal.error(402, "insufficient_credits");
    let msg = e["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("member cap")
            && msg.contains("1 credits per day")
            && msg.contains("resets at"),
        "{msg}"
    );
    // The wallet paid exactly the cap; the owner's organization key goes on.
    let owner_org_key = org_key(&gw, &owner_key, &org).await;
    assert_eq!(ask(gw.addr, &owner_org_key, false).await.0, 200);
    let books = books::settled(&gw.config_db(), &org).await;
    let charged: i64 = books.rows.iter().map(|(_, c)| c).sum();
    assert_eq!(20_000_000 - books.money, charged);
    // Removing the cap lets the member go on (this instance at once).
    let r = set_cap(
        &gw,
        &owner_key,
        &org,
        json!({"account_id": member, "cap_credits": null}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(ask(gw.addr, &one, false).await.0, 200);
}

#[tokio::test]
async fn only_owners_and_admins_set_caps_and_bad_caps_change_nothing() {
    let (_f, gw) = paid_and_free(tollgate_bin!()).await;
    let (_, owner_key) = gw.signup(&unique_email()).await;
    let org = new_org(&gw, &owner_key, "Rules").await;
    let (member, member_key) = join(&gw, &owner_key, &org, "member").await;
    let (_, admin_key) = join(&gw, &owner_key, &org, "admin").await;
    let ok = json!({"account_id": member, "cap_credits": 5, "period": "week"});
    set_cap(&gw, &member_key, &org, ok.clone())
        .await
        .error(403, "permission_error");
    assert_eq!(set_cap(&gw, &admin_key, &org, ok).await.status, 200);
    for bad in [
        json!({"account_id": member, "cap_credits": -1, "period": "day"}),
        json!({"account_id": member, "cap_credits": 5}),
        json!({"account_id": member, "cap_credits": 5, "period": "lifetime"}),
        json!({"account_id": member, "cap_credits": 5, "period": "year"}),
        json!({"account_id": member, "cap_credits": "5", "period": "day"}),
        json!({"account_id": member, "cap_credits": 5e10, "period": "day"}),
        json!({"cap_credits": 5, "period": "day"}),
        json!({"account_id": member, "cap_credits": 5, "period": "day", "x": 1}),
    ] {
        set_cap(&gw, &owner_key, &org, bad)
            .await
            .error(400, "invalid_request");
    }
    set_cap(
        &gw,
        &owner_key,
        &org,
        json!({"account_id": "usr_nobody", "cap_credits": 1, "period": "day"}),
    )
    .await
    .error(404, "not_found");
    let (_, stranger) = gw.signup(&unique_email()).await;
    set_cap(
        &gw,
        &stranger,
        &org,
        json!({"account_id": member, "cap_credits": 1, "period": "day"}),
    )
    .await
    .error(404, "not_found");
    // The admin's cap stands, unchanged by the refused ones.
    let list = gw
        .api_as(
            &owner_key,
            "GET",
            &format!("/api/v1/orgs/{org}/members"),
            &json!({}),
        )
        .await
        .json();
    let m = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["account_id"] == member.as_str())
        .cloned()
        .unwrap();
    assert_eq!(
        (m["cap_credits"].clone(), m["cap_period"].clone()),
        (json!(5.0), json!("week"))
    );
}

#[tokio::test]
async fn concurrent_requests_on_two_instances_never_overrun_a_members_cap() {
    if redis_url().is_none() {
        return skip(
            "two instances share a member's cap through Redis: TOLLGATE_TEST_REDIS_URL is not set",
        );
    }
    let fake = FakeOpenAi::builder("p")
        .mode(Mode::Slow(std::time::Duration::from_millis(20)))
        .start()
        .await;
    let cfg = one_model_config(&fake, "m");
    let gw = Gateway::start(tollgate_bin!(), &cfg).await;
    let other = gw.second(tollgate_bin!(), &cfg).await;
    let (_, owner_key) = gw.signup(&unique_email()).await;
    let org = new_org(&gw, &owner_key, "Race").await;
    gw.admin_credits(&org, 50.0).await;
    let (member, personal) = join(&gw, &owner_key, &org, "member").await;
    let keys = [
        org_key(&gw, &personal, &org).await,
        org_key(&gw, &personal, &org).await,
    ];
    let r = set_cap(
        &gw,
        &owner_key,
        &org,
        json!({"account_id": member, "cap_credits": 2.5, "period": "month"}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let mut tasks = Vec::new();
    for i in 0..50 {
        let addr = if i % 2 == 0 { gw.addr } else { other.addr };
        let key = keys[i % 2].clone();
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
    books::check(&gw.config_db(), &org, 50_000_000, &ok).await;
    let books = books::settled(&gw.config_db(), &org).await;
    let spent: i64 = books.rows.iter().map(|(_, c)| c).sum();
    assert!(spent <= 2_500_000, "the cap was overrun: {spent} µcr");
}
