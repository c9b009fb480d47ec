//! Login and logout (`POST /api/v1/auth/login`, `/logout`): the dashboard's session cookie,
//! given after the password is verified under the per-e-mail throttle, and taken back.

use crate::request::Session;
use serde_json::json;
use tollgate_filters::{ErrorKind, GatewayError};

use super::signup::credentials;
use super::{passwords, random_id, throttle, SESSION_COOKIE, SESSION_TTL_SECS};
use crate::auth::caller;
use crate::request::ctx::RequestCtx;
use crate::request::respond;
use crate::runtime::Shared;

pub async fn login(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
) -> Result<(), GatewayError> {
    let ledger = shared.ledger()?;
    let (email, password) = credentials(shared, session).await?;
    let password = password.as_str();
    // Reserved before the (slow) verification, so concurrent guesses cannot all pass.
    throttle::reserve(shared, &email, &ctx.request_id).await?;
    let found = ledger.login_lookup(&email).await?;
    // An unknown e-mail is verified against a dummy hash: the same time as a real check, so
    // timing does not reveal which e-mails have accounts.
    let stored = found.as_ref().and_then(|(_, h)| h.as_deref());
    let ok = passwords::verify(shared, password, stored).await;
    let Some((user_id, _)) = found.filter(|_| ok) else {
        return Err(GatewayError::new(
            ErrorKind::Authentication,
            "wrong e-mail or password",
        ));
    };
    throttle::succeeded(shared, &email).await;
    let sid = random_id(43)?;
    let expires = crate::clock::now_ms() + SESSION_TTL_SECS * 1000;
    ledger
        .create_session(&tollgate_filters::keys::hash(&sid), &user_id, expires)
        .await?;
    let cookie = session_cookie(shared, &sid, SESSION_TTL_SECS);
    respond::json(
        session,
        ctx,
        200,
        &json!({"user_id": user_id, "email": email}),
        &[("Set-Cookie", cookie)],
    )
    .await;
    Ok(())
}

/// The `Set-Cookie` value of a dashboard session (an empty `sid` with `max_age` 0 clears it).
/// `Secure` whenever the gateway is served over https (`server.public_url`), so the browser
/// never sends the session over plain HTTP.
fn session_cookie(shared: &Shared, sid: &str, max_age: i64) -> String {
    let https = shared
        .runtime
        .load()
        .config
        .server
        .public_url
        .starts_with("https://");
    let secure = if https { "; Secure" } else { "" };
    format!("{SESSION_COOKIE}={sid}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age}{secure}")
}

pub async fn logout(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
) -> Result<(), GatewayError> {
    let ledger = shared.ledger()?;
    if let Some(sid) = caller::session_cookie(session) {
        ledger
            .delete_session(&tollgate_filters::keys::hash(&sid))
            .await?;
    }
    let clear = session_cookie(shared, "", 0);
    respond::json(
        session,
        ctx,
        200,
        &json!({"logged_out": true}),
        &[("Set-Cookie", clear)],
    )
    .await;
    Ok(())
}
