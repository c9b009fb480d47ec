//! Signup (`POST /api/v1/auth/signup`): an account, its free credits and its first key; and
//! the e-mail and password rules that login shares.

use crate::request::Session;
use tollgate_filters::{ErrorKind, GatewayError};

use super::{account_json, keys, passwords, random_id, MAX_ACCOUNT_BODY};
use crate::request::body;
use crate::request::ctx::RequestCtx;
use crate::request::respond;
use crate::runtime::Shared;

pub(crate) fn normalise_email(raw: &str) -> Result<String, GatewayError> {
    let e = raw.trim().to_lowercase();
    let bad = || GatewayError::invalid("email: must be an e-mail address like name@example.com");
    let (local, domain) = e.split_once('@').ok_or_else(bad)?;
    let ok = !local.is_empty()
        && e.len() <= 254
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !domain.contains('@')
        && !e.chars().any(|c| c.is_whitespace() || c.is_control());
    if ok {
        Ok(e)
    } else {
        Err(bad())
    }
}

fn check_password(p: &str) -> Result<(), GatewayError> {
    if p.chars().count() < 8 {
        return Err(GatewayError::invalid(
            "password: must be at least 8 characters",
        ));
    }
    if p.len() > 1024 {
        return Err(GatewayError::invalid(
            "password: must be at most 1024 bytes",
        ));
    }
    Ok(())
}

/// The `{email, password}` body of signup and login: the e-mail normalised, the password as
/// sent (its rules are signup's; login only verifies it).
pub(super) async fn credentials(
    shared: &Shared,
    session: &mut Session,
) -> Result<(String, String), GatewayError> {
    let m = body::json_object(
        session,
        MAX_ACCOUNT_BODY,
        shared.runtime.load().config.timeouts.request_body,
    )
    .await?;
    let email = normalise_email(body::string(&m, "email")?)?;
    Ok((email, body::string(&m, "password")?.to_owned()))
}

pub async fn signup(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
) -> Result<(), GatewayError> {
    let ledger = shared.ledger()?;
    let (email, password) = credentials(shared, session).await?;
    let password = password.as_str();
    check_password(password)?;
    let hash = passwords::hash(shared, password).await?;
    let user_id = format!("usr_{}", random_id(16)?);
    let (secret, key) = keys::new_key("default")?;
    let now = crate::clock::now_ms();
    let Some(account) = ledger
        .create_account(
            &user_id,
            Some(&email),
            Some(&hash),
            shared.runtime.load().config.plans.signup_grant(),
            Some(&key),
            now,
        )
        .await?
    else {
        return Err(GatewayError::new(
            ErrorKind::Conflict,
            "email: an account with this e-mail exists",
        ));
    };
    let mut v = account_json(&account);
    v["api_key"] = secret.into();
    v["key_id"] = key.id.into();
    respond::json(session, ctx, 201, &v, &[]).await;
    Ok(())
}
