//! Buying for an organization (issue 51): its owner's checkout names the organization
//! (`client_reference_id`), the paid event lands on the organization's wallet and plan, and a
//! redelivery changes nothing; no other member buys, and a stranger's organization does not
//! exist. The operator sets Business up by contract with the admin API, as for an account.

use serde_json::json;
use tollgate_testkit::*;

use crate::common::{
    applied, call, checkout, completed, deliver, field, gateway, PACK_GRANT, PRO_GRANT,
};

#[tokio::test]
async fn an_owner_buys_for_the_organization_once_and_nobody_else_can() {
    let stripe = FakeStripe::start().await;
    let gw = gateway(&stripe).await;
    let owner_email = unique_email();
    let (owner, owner_key) = gw.signup(&owner_email).await;
    let r = call(
        &gw,
        "POST",
        "/api/v1/orgs",
        &owner_key,
        &json!({"name": "Buyer"}),
    )
    .await;
    let org = r.json()["id"].as_str().unwrap().to_owned();
    // An admin joins (an invitation accepted).
    let admin_email = unique_email();
    let (_, admin_key) = gw.signup(&admin_email).await;
    let r = call(
        &gw,
        "POST",
        &format!("/api/v1/orgs/{org}/invitations"),
        &owner_key,
        &json!({"email": admin_email, "role": "admin"}),
    )
    .await;
    let token = r.json()["token"].as_str().unwrap().to_owned();
    let r = call(
        &gw,
        "POST",
        "/api/v1/invitations/accept",
        &admin_key,
        &json!({"token": token}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let buy = json!({"plan": "pro", "organization_id": org});
    call(&gw, "POST", "/api/v1/billing/checkout", &admin_key, &buy)
        .await
        .error(403, "permission_error");
    let (_, stranger) = gw.signup(&unique_email()).await;
    call(&gw, "POST", "/api/v1/billing/checkout", &stranger, &buy)
        .await
        .error(404, "not_found");

    let v = checkout(&gw, &owner_key, buy).await;
    let session_id = v["session_id"].as_str().unwrap().to_owned();
    let form = stripe.last_checkout();
    assert_eq!(
        field(&form, "client_reference_id").as_deref(),
        Some(org.as_str())
    );
    assert_eq!(
        field(&form, "customer_email").as_deref(),
        Some(owner_email.as_str())
    );
    let skey = field(&form, "metadata[session_key]").unwrap();
    let ev = completed(
        &session_id,
        json!({"client_reference_id": org, "metadata": {"session_key": skey, "plan": "pro"},
               "customer": "cus_org", "subscription": "sub_org"}),
    );
    let out = applied(&gw, &ev).await;
    assert!(
        out.contains("matched by client_reference_id") && out.contains(&org),
        "{out}"
    );
    let o = call(
        &gw,
        "GET",
        &format!("/api/v1/orgs/{org}"),
        &owner_key,
        &json!(null),
    )
    .await
    .json();
    assert_eq!(
        (o["plan"].as_str(), micros(&o["credits"])),
        (Some("pro"), PRO_GRANT),
        "{o}"
    );
    // The owner's own account is untouched.
    let me = gw.me(&owner_key).await;
    assert_eq!(
        (me["plan"].as_str(), micros(&me["credits"])),
        (Some("free"), 100_000_000)
    );
    // The same event again changes nothing.
    let r = deliver(&gw, &ev).await;
    assert_eq!(r.json()["duplicate"], true, "{}", r.text());
    let o = call(
        &gw,
        "GET",
        &format!("/api/v1/orgs/{org}"),
        &owner_key,
        &json!(null),
    )
    .await
    .json();
    assert_eq!(micros(&o["credits"]), PRO_GRANT);
    // A credit pack for it too.
    checkout(
        &gw,
        &owner_key,
        json!({"credits_pack": "small", "organization_id": org}),
    )
    .await;
    let skey = field(&stripe.last_checkout(), "metadata[session_key]").unwrap();
    applied(&gw, &completed("cs_org_pack", json!({"client_reference_id": org, "metadata": {"session_key": skey, "credits_pack": "small"}}))).await;
    let o = call(
        &gw,
        "GET",
        &format!("/api/v1/orgs/{org}"),
        &owner_key,
        &json!(null),
    )
    .await
    .json();
    assert_eq!(micros(&o["credits"]), PRO_GRANT + PACK_GRANT);
    // Business by contract: the operator's admin API, with the organization's own limits.
    gw.admin_plan(&org, "business", Some(50_000), None).await;
    let o = call(
        &gw,
        "GET",
        &format!("/api/v1/orgs/{org}"),
        &owner_key,
        &json!(null),
    )
    .await
    .json();
    assert_eq!(o["plan"], "business");
    let _ = owner;
}
