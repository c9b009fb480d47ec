//! Members, roles and invitations: who may do what, single-use invitations for one e-mail,
//! and bad input refused with nothing half-written.

use serde_json::{json, Value};
use tollgate_testkit::*;

/// An organization created by `key`'s account; returns its id.
pub async fn new_org(gw: &Gateway, key: &str, name: &str) -> String {
    let r = gw
        .api_as(key, "POST", "/api/v1/orgs", &json!({"name": name}))
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let v = r.json();
    assert_eq!(v["role"], "owner");
    assert_eq!(v["plan"], "free");
    assert_eq!(v["credits"], json!(0.0));
    v["id"].as_str().unwrap().to_owned()
}

/// Invites `email` as `role` with `key`; returns the invitation's token.
pub async fn invite(gw: &Gateway, key: &str, org: &str, email: &str, role: &str) -> String {
    let path = format!("/api/v1/orgs/{org}/invitations");
    let r = gw
        .api_as(key, "POST", &path, &json!({"email": email, "role": role}))
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let v = r.json();
    assert!(
        v["url"]
            .as_str()
            .unwrap()
            .contains("/dashboard/join?token="),
        "{v}"
    );
    v["token"].as_str().unwrap().to_owned()
}

pub async fn accept(gw: &Gateway, key: &str, token: &str) -> Response {
    gw.api_as(
        key,
        "POST",
        "/api/v1/invitations/accept",
        &json!({"token": token}),
    )
    .await
}

/// A member of `org` with `role`: signed up, invited by `owner_key`, accepted; returns
/// (account id, its personal key).
pub async fn join(gw: &Gateway, owner_key: &str, org: &str, role: &str) -> (String, String) {
    let email = unique_email();
    let (uid, key) = gw.signup(&email).await;
    let token = invite(gw, owner_key, org, &email, role).await;
    let r = accept(gw, &key, &token).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["role"], role);
    (uid, key)
}

async fn roles(gw: &Gateway, key: &str, org: &str) -> Vec<(String, String)> {
    let r = gw
        .api_as(
            key,
            "GET",
            &format!("/api/v1/orgs/{org}/members"),
            &json!({}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let mut out: Vec<(String, String)> = r.json()["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["account_id"].as_str().unwrap().to_owned(),
                m["role"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    out.sort();
    out
}

#[tokio::test]
async fn invitations_are_single_use_for_one_email_and_roles_hold_on_every_endpoint() {
    let (_f, gw) = paid_and_free(tollgate_bin!()).await;
    let (owner, owner_key) = gw.signup(&unique_email()).await;
    let org = new_org(&gw, &owner_key, "Acme Ltd").await;
    let (admin, admin_key) = join(&gw, &owner_key, &org, "admin").await;
    let (member, member_key) = join(&gw, &admin_key, &org, "member").await;
    let listed = gw
        .api_as(&member_key, "GET", "/api/v1/orgs", &json!({}))
        .await
        .json();
    assert_eq!(listed["data"][0]["id"], org.as_str());
    assert_eq!(listed["data"][0]["role"], "member");
    assert_eq!(roles(&gw, &member_key, &org).await.len(), 3);

    // An invitation: once, before it expires, by its e-mail only.
    let email = unique_email();
    let (_, other_key) = gw.signup(&unique_email()).await;
    let (_, invited_key) = gw.signup(&email).await;
    let token = invite(&gw, &owner_key, &org, &email, "member").await;
    accept(&gw, &other_key, &token)
        .await
        .error(403, "permission_error");
    accept(&gw, &owner_key, &token)
        .await
        .error(403, "permission_error");
    assert_eq!(accept(&gw, &invited_key, &token).await.status, 200);
    accept(&gw, &invited_key, &token)
        .await
        .error(409, "conflict");
    accept(&gw, &other_key, "inv_nosuchtoken")
        .await
        .error(404, "not_found");
    // Expired: an invitation of one day, a day later.
    let email2 = unique_email();
    let (_, late_key) = gw.signup(&email2).await;
    let r = gw
        .api_as(
            &owner_key,
            "POST",
            &format!("/api/v1/orgs/{org}/invitations"),
            &json!({"email": email2, "expires_in_days": 1}),
        )
        .await;
    let late = r.json()["token"].as_str().unwrap().to_owned();
    age_invitations(&gw, &org).await;
    let e = accept(&gw, &late_key, &late)
        .await
        .error(400, "invalid_request");
    assert!(
        e["error"]["message"].as_str().unwrap().contains("expired"),
        "{e}"
    );
    // Withdrawn.
    let email3 = unique_email();
    let (_, w_key) = gw.signup(&email3).await;
    let r = gw
        .api_as(
            &admin_key,
            "POST",
            &format!("/api/v1/orgs/{org}/invitations"),
            &json!({"email": email3}),
        )
        .await;
    let (w_token, w_id) = (
        r.json()["token"].as_str().unwrap().to_owned(),
        r.json()["id"].as_str().unwrap().to_owned(),
    );
    let open = gw
        .api_as(
            &admin_key,
            "GET",
            &format!("/api/v1/orgs/{org}/invitations"),
            &json!({}),
        )
        .await
        .json();
    assert!(
        open["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["id"] == w_id.as_str()),
        "{open}"
    );
    let r = gw
        .api_as(
            &admin_key,
            "POST",
            &format!("/api/v1/orgs/{org}/invitations/withdraw"),
            &json!({"id": w_id}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    accept(&gw, &w_key, &w_token).await.error(404, "not_found");

    // A member cannot invite, change roles, remove others or see invitations.
    let post = |k: &str, path: String, body: Value| {
        let (gw, k) = (&gw, k.to_owned());
        async move { gw.api_as(&k, "POST", &path, &body).await }
    };
    post(
        &member_key,
        format!("/api/v1/orgs/{org}/invitations"),
        json!({"email": unique_email()}),
    )
    .await
    .error(403, "permission_error");
    gw.api_as(
        &member_key,
        "GET",
        &format!("/api/v1/orgs/{org}/invitations"),
        &json!({}),
    )
    .await
    .error(403, "permission_error");
    gw.api_as(
        &member_key,
        "PATCH",
        &format!("/api/v1/orgs/{org}/members"),
        &json!({"account_id": admin, "role": "member"}),
    )
    .await
    .error(403, "permission_error");
    post(
        &member_key,
        format!("/api/v1/orgs/{org}/members/remove"),
        json!({"account_id": admin}),
    )
    .await
    .error(403, "permission_error");
    post(
        &member_key,
        format!("/api/v1/orgs/{org}/transfer"),
        json!({"account_id": member}),
    )
    .await
    .error(403, "permission_error");
    // An admin cannot remove the owner, change the owner's role or transfer ownership.
    post(
        &admin_key,
        format!("/api/v1/orgs/{org}/members/remove"),
        json!({"account_id": owner}),
    )
    .await
    .error(403, "permission_error");
    gw.api_as(
        &admin_key,
        "PATCH",
        &format!("/api/v1/orgs/{org}/members"),
        &json!({"account_id": owner, "role": "member"}),
    )
    .await
    .error(403, "permission_error");
    post(
        &admin_key,
        format!("/api/v1/orgs/{org}/transfer"),
        json!({"account_id": admin}),
    )
    .await
    .error(403, "permission_error");
    // The owner cannot leave.
    post(&owner_key, format!("/api/v1/orgs/{org}/leave"), json!({}))
        .await
        .error(403, "permission_error");

    // An admin promotes the member; the owner transfers ownership to it, and becomes an admin.
    let r = gw
        .api_as(
            &admin_key,
            "PATCH",
            &format!("/api/v1/orgs/{org}/members"),
            &json!({"account_id": member, "role": "admin"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = post(
        &owner_key,
        format!("/api/v1/orgs/{org}/transfer"),
        json!({"account_id": member}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let now = roles(&gw, &owner_key, &org).await;
    assert!(now.contains(&(owner.clone(), "admin".into())), "{now:?}");
    assert!(now.contains(&(member.clone(), "owner".into())), "{now:?}");
    assert_eq!(now.iter().filter(|(_, r)| r == "owner").count(), 1);
    // The old owner leaves; it no longer sees the organization.
    assert_eq!(
        post(&owner_key, format!("/api/v1/orgs/{org}/leave"), json!({}))
            .await
            .status,
        200
    );
    gw.api_as(
        &owner_key,
        "GET",
        &format!("/api/v1/orgs/{org}"),
        &json!({}),
    )
    .await
    .error(404, "not_found");
    assert_eq!(
        gw.api_as(&owner_key, "GET", "/api/v1/orgs", &json!({}))
            .await
            .json()["data"],
        json!([])
    );
    assert!(gw.is_healthy().await);
}

/// Moves the organization's invitations past their expiry, as a day would.
async fn age_invitations(gw: &Gateway, org: &str) {
    let url = gw.config_db();
    let sql = "UPDATE org_invitations SET expires_at = 1 WHERE org_id = $1";
    if url.starts_with("sqlite:") {
        let p = sqlx::SqlitePool::connect(&url).await.unwrap();
        sqlx::query(sql).bind(org).execute(&p).await.unwrap();
    } else {
        let p = sqlx::PgPool::connect(&url).await.unwrap();
        sqlx::query(sql).bind(org).execute(&p).await.unwrap();
    }
}

#[tokio::test]
async fn bad_input_is_refused_and_other_organizations_do_not_exist_for_the_caller() {
    let (_f, gw) = paid_and_free(tollgate_bin!()).await;
    let (_, owner_key) = gw.signup(&unique_email()).await;
    let org = new_org(&gw, &owner_key, "Mine").await;
    let (_, stranger_key) = gw.signup(&unique_email()).await;
    let theirs = new_org(&gw, &stranger_key, "Theirs").await;

    // Another organization, or one that does not exist: 404 alike, on every endpoint.
    for target in [theirs.as_str(), "org_nosuchthing"] {
        for (method, path, body) in [
            ("GET", format!("/api/v1/orgs/{target}"), json!({})),
            ("GET", format!("/api/v1/orgs/{target}/members"), json!({})),
            (
                "PATCH",
                format!("/api/v1/orgs/{target}/members"),
                json!({"account_id": "x", "role": "member"}),
            ),
            (
                "POST",
                format!("/api/v1/orgs/{target}/members/remove"),
                json!({"account_id": "x"}),
            ),
            ("POST", format!("/api/v1/orgs/{target}/leave"), json!({})),
            (
                "POST",
                format!("/api/v1/orgs/{target}/transfer"),
                json!({"account_id": "x"}),
            ),
            (
                "POST",
                format!("/api/v1/orgs/{target}/invitations"),
                json!({"email": "a@b.example"}),
            ),
            (
                "GET",
                format!("/api/v1/orgs/{target}/invitations"),
                json!({}),
            ),
            (
                "POST",
                format!("/api/v1/orgs/{target}/invitations/withdraw"),
                json!({"id": "x"}),
            ),
            (
                "POST",
                "/api/v1/keys".to_owned(),
                json!({"organization_id": target}),
            ),
        ] {
            let r = gw.api_as(&owner_key, method, &path, &body).await;
            let e = r.error(404, "not_found");
            assert!(!e.to_string().contains("Theirs"), "{method} {path}: {e}");
        }
    }
    // Bad bodies: unknown fields, wrong types, bad roles, malformed e-mails, empty names.
    let invitations = format!("/api/v1/orgs/{org}/invitations");
    let members = format!("/api/v1/orgs/{org}/members");
    for (method, path, body) in [
        ("POST", "/api/v1/orgs", json!({})),
        ("POST", "/api/v1/orgs", json!({"name": ""})),
        ("POST", "/api/v1/orgs", json!({"name": "x".repeat(101)})),
        ("POST", "/api/v1/orgs", json!({"name": 5})),
        (
            "POST",
            "/api/v1/orgs",
            json!({"name": "x", "plan": "business"}),
        ),
        (
            "POST",
            invitations.as_str(),
            json!({"email": "not-an-email"}),
        ),
        (
            "POST",
            invitations.as_str(),
            json!({"email": "a@b.example", "role": "owner"}),
        ),
        (
            "POST",
            invitations.as_str(),
            json!({"email": "a@b.example", "role": "boss"}),
        ),
        (
            "POST",
            invitations.as_str(),
            json!({"email": "a@b.example", "expires_in_days": 0}),
        ),
        (
            "POST",
            invitations.as_str(),
            json!({"email": "a@b.example", "expires_in_days": 31}),
        ),
        (
            "POST",
            invitations.as_str(),
            json!({"email": "a@b.example", "extra": true}),
        ),
        (
            "PATCH",
            members.as_str(),
            json!({"account_id": "x", "role": "owner"}),
        ),
        ("PATCH", members.as_str(), json!({"account_id": "x"})),
        ("POST", "/api/v1/invitations/accept", json!({})),
        ("POST", "/api/v1/invitations/accept", json!({"token": 7})),
        ("POST", "/api/v1/keys", json!({"organization_id": 7})),
    ] {
        let r = gw.api_as(&owner_key, method, path, &body).await;
        r.error(400, "invalid_request");
    }
    for raw in [&b"nope"[..], b"[1]", b""] {
        gw.with_auth("POST", "/api/v1/orgs", &format!("Bearer {owner_key}"), raw)
            .await
            .error(400, "invalid_request");
    }
    // Unknown members: 404 naming them, nothing changed.
    gw.api_as(
        &owner_key,
        "PATCH",
        &members,
        &json!({"account_id": "usr_nobody", "role": "admin"}),
    )
    .await
    .error(404, "not_found");
    gw.api_as(
        &owner_key,
        "POST",
        &format!("/api/v1/orgs/{org}/members/remove"),
        &json!({"account_id": "usr_nobody"}),
    )
    .await
    .error(404, "not_found");
    // Without credentials: 401.
    request(gw.addr, "GET", "/api/v1/orgs", &[], b"")
        .await
        .error(401, "authentication_error");
    // Nothing half-written: one organization each, no invitation.
    let mine = gw
        .api_as(&owner_key, "GET", "/api/v1/orgs", &json!({}))
        .await
        .json();
    assert_eq!(mine["data"].as_array().unwrap().len(), 1, "{mine}");
    let open = gw
        .api_as(&owner_key, "GET", &invitations, &json!({}))
        .await
        .json();
    assert_eq!(open["data"], json!([]));
    // An organization's key manages no organization.
    let r = gw
        .api_as(
            &owner_key,
            "POST",
            "/api/v1/keys",
            &json!({"name": "org", "organization_id": org}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let org_key = r.json()["key"].as_str().unwrap().to_owned();
    gw.api_as(&org_key, "POST", "/api/v1/orgs", &json!({"name": "nested"}))
        .await
        .error(403, "permission_error");
    assert!(gw.is_healthy().await);
}
