//! Who reads which record: another account's request id is 404 (as one that never was), with a
//! key or a session; an organization's owner lists and opens its members' requests, a member
//! only its own keys', and an organization key its member's; the operator any account's.

use serde_json::json;
use tollgate_testkit::*;

use super::common::*;

#[tokio::test]
async fn another_wallets_record_is_404_and_members_see_their_own() {
    let fake = FakeOpenAi::start("p").await;
    let gw = gateway(&fake, "").await;
    let (_, id, _) = chat(&gw, &gw.key, "m", "mine", false).await;
    record(&gw, &gw.key, &id).await;
    let (stranger_id, stranger) = gw.signup(&unique_email()).await;
    let r = gw
        .api_as(
            &stranger,
            "GET",
            &format!("/api/v1/requests/{id}"),
            &json!({}),
        )
        .await;
    r.error(404, "not_found");
    assert!(ids(&list(&gw, &stranger, "").await.json()).is_empty());
    let email = unique_email();
    gw.signup(&email).await;
    let cookie = gw.login(&email).await;
    let r = request(
        gw.addr,
        "GET",
        &format!("/api/v1/requests/{id}"),
        &[("Cookie", &cookie)],
        b"",
    )
    .await;
    assert_eq!(r.status, 404, "{}", r.text());
    // The owner, with a session, reads its own.
    let own_email = unique_email();
    let (_, own_key) = gw.signup(&own_email).await;
    let (_, own_id, _) = chat(&gw, &own_key, "m", "own", false).await;
    record(&gw, &own_key, &own_id).await;
    let cookie = gw.login(&own_email).await;
    let r = request(
        gw.addr,
        "GET",
        "/api/v1/requests",
        &[("Cookie", &cookie)],
        b"",
    )
    .await;
    assert_eq!(ids(&r.json()), vec![own_id.clone()]);

    // An organization: the owner and two members, each with an organization key.
    let (owner_id, owner) = gw.signup(&unique_email()).await;
    let org = gw
        .api_as(&owner, "POST", "/api/v1/orgs", &json!({"name": "Team"}))
        .await
        .json()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    gw.admin_credits(&org, 100.0).await;
    let mut members = Vec::new();
    for _ in 0..2 {
        let email = unique_email();
        let (uid, key) = gw.signup(&email).await;
        let inv = gw
            .api_as(
                &owner,
                "POST",
                &format!("/api/v1/orgs/{org}/invitations"),
                &json!({"email": email, "role": "member"}),
            )
            .await;
        assert_eq!(inv.status, 201, "{}", inv.text());
        let token = inv.json()["token"].as_str().unwrap().to_owned();
        let ok = gw
            .api_as(
                &key,
                "POST",
                "/api/v1/invitations/accept",
                &json!({"token": token}),
            )
            .await;
        assert_eq!(ok.status, 200, "{}", ok.text());
        members.push((uid, key));
    }
    let org_key = |key: String| {
        let gw = &gw;
        let org = org.clone();
        async move {
            let r = gw
                .api_as(
                    &key,
                    "POST",
                    "/api/v1/keys",
                    &json!({"name": "k", "organization_id": org}),
                )
                .await;
            assert_eq!(r.status, 201, "{}", r.text());
            r.json()["key"].as_str().unwrap().to_owned()
        }
    };
    let (alice_key, bob_key) = (
        org_key(members[0].1.clone()).await,
        org_key(members[1].1.clone()).await,
    );
    let (_, a, _) = chat(&gw, &alice_key, "m", "alice", false).await;
    let (_, b, _) = chat(&gw, &bob_key, "m", "bob", false).await;
    let a_rec = record(&gw, &alice_key, &a).await;
    assert_eq!(a_rec["member_id"], members[0].0.as_str());
    record(&gw, &bob_key, &b).await;
    let q = format!("organization_id={org}");
    // The owner sees both, and opens either.
    assert_eq!(
        ids(&list(&gw, &owner, &q).await.json()),
        vec![b.clone(), a.clone()]
    );
    for id in [&a, &b] {
        let r = gw
            .api_as(&owner, "GET", &format!("/api/v1/requests/{id}"), &json!({}))
            .await;
        assert_eq!(r.status, 200, "{}", r.text());
    }
    // Alice (personal key, or its organization key) sees only her own.
    let alice = &members[0].1;
    assert_eq!(ids(&list(&gw, alice, &q).await.json()), vec![a.clone()]);
    assert_eq!(
        ids(&list(&gw, &alice_key, "").await.json()),
        vec![a.clone()]
    );
    gw.api_as(alice, "GET", &format!("/api/v1/requests/{b}"), &json!({}))
        .await
        .error(404, "not_found");
    gw.api_as(
        &alice_key,
        "GET",
        &format!("/api/v1/requests/{b}"),
        &json!({}),
    )
    .await
    .error(404, "not_found");
    let r = gw
        .api_as(alice, "GET", &format!("/api/v1/requests/{a}"), &json!({}))
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    // A member may not turn the organization's payload logging on.
    gw.api_as(
        alice,
        "PATCH",
        &format!("/api/v1/orgs/{org}"),
        &json!({"log_payloads": true}),
    )
    .await
    .error(403, "permission_error");
    // Outsiders: the organization does not exist for them.
    list(&gw, &stranger, &q).await.error(404, "not_found");
    gw.api_as(
        &stranger,
        "GET",
        &format!("/api/v1/requests/{a}"),
        &json!({}),
    )
    .await
    .error(404, "not_found");
    // The owner's personal listing is its own wallet's, not the organization's.
    assert!(ids(&list(&gw, &owner, "").await.json()).is_empty());
    assert_ne!(owner_id, stranger_id);

    // The operator reads any account's, and one record.
    let admin = |path: String| {
        let gw = &gw;
        async move { gw.api_as(ADMIN_TOKEN, "GET", &path, &json!({})).await }
    };
    let r = admin(format!("/api/v1/admin/requests?account_id={org}")).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(ids(&r.json()), vec![b.clone(), a.clone()]);
    let r = admin(format!("/api/v1/admin/requests/{a}")).await;
    assert_eq!(r.json()["id"], a.as_str());
    // Not to a customer's key.
    gw.api_as(
        &owner,
        "GET",
        &format!("/api/v1/admin/requests?account_id={org}"),
        &json!({}),
    )
    .await
    .error(401, "authentication_error");
}
