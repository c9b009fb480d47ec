//! Account endpoints: signup, login, logout, me, keys and usage (`/api/v1/auth/*`,
//! `/api/v1/keys*`, `/api/v1/usage`). Authenticated by an API key or a dashboard session.

use pingora::proxy::Session;
use serde_json::json;
use tollgate_filters::credits::to_credits;
use tollgate_filters::{ErrorKind, GatewayError};

use super::{body, respond, Gateway, RequestCtx};
use crate::auth::{self, Caller, SESSION_COOKIE, SESSION_TTL_SECS};
use crate::store::Account;

/// Account bodies are small; anything larger is garbage.
const MAX_ACCOUNT_BODY: usize = 16 * 1024;
const SIGNUP_GRANT_MICROS: i64 = 100 * 1_000_000;

fn normalise_email(raw: &str) -> Result<String, GatewayError> {
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

pub fn account_json(a: &Account) -> serde_json::Value {
    json!({"user_id": a.user_id, "credits": to_credits(a.balance), "plan": a.plan, "email": a.email})
}

pub async fn signup(
    gw: &Gateway,
    session: &mut Session,
    ctx: &mut RequestCtx,
) -> Result<(), GatewayError> {
    let ledger = gw.ledger()?;
    let m = body::json_object(session, MAX_ACCOUNT_BODY).await?;
    let email = normalise_email(body::string(&m, "email")?)?;
    let password = body::string(&m, "password")?;
    check_password(password)?;
    let hash = auth::hash_password(password)?;
    let user_id = format!("usr_{}", auth::random_id(16)?);
    let (secret, key) = auth::new_key("default")?;
    let now = crate::now_ms();
    let Some(account) = ledger
        .create_account(
            &user_id,
            Some(&email),
            Some(&hash),
            SIGNUP_GRANT_MICROS,
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

pub async fn login(
    gw: &Gateway,
    session: &mut Session,
    ctx: &mut RequestCtx,
) -> Result<(), GatewayError> {
    let ledger = gw.ledger()?;
    let m = body::json_object(session, MAX_ACCOUNT_BODY).await?;
    let email = normalise_email(body::string(&m, "email")?)?;
    let password = body::string(&m, "password")?;
    let ip = super::client_ip(session, &gw.shared.runtime.load().config.trusted_proxies);
    gw.shared.throttle.check(&email, ip)?;
    let found = ledger.login_lookup(&email).await?;
    let ok = match &found {
        Some((_, Some(h))) => auth::verify_password(password, h),
        _ => {
            // Spend the same time as a real check so unknown e-mails are not revealed by timing.
            let _ = auth::verify_password(password, dummy_hash());
            false
        }
    };
    let Some((user_id, _)) = found.filter(|_| ok) else {
        gw.shared.throttle.failed(&email, ip);
        return Err(GatewayError::new(
            ErrorKind::Authentication,
            "wrong e-mail or password",
        ));
    };
    gw.shared.throttle.succeeded(&email);
    let sid = auth::random_id(43)?;
    let expires = crate::now_ms() + SESSION_TTL_SECS * 1000;
    ledger
        .create_session(&tollgate_filters::keys::hash(&sid), &user_id, expires)
        .await?;
    let cookie = format!(
        "{SESSION_COOKIE}={sid}; Path=/; HttpOnly; SameSite=Strict; Max-Age={SESSION_TTL_SECS}"
    );
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

/// An argon2id hash of a random password, made once, verified against when the e-mail is
/// unknown so that the answer takes as long as for a real account.
fn dummy_hash() -> &'static str {
    static HASH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HASH.get_or_init(|| {
        let random = auth::random_id(32).unwrap_or_else(|_| "tollgate-dummy-password".into());
        auth::hash_password(&random).unwrap_or_default()
    })
}

pub async fn logout(
    gw: &Gateway,
    session: &mut Session,
    ctx: &mut RequestCtx,
) -> Result<(), GatewayError> {
    let ledger = gw.ledger()?;
    if let Some(sid) = super::session_cookie(session) {
        ledger
            .delete_session(&tollgate_filters::keys::hash(&sid))
            .await?;
    }
    let clear = format!("{SESSION_COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0");
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

pub async fn me(
    gw: &Gateway,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
) -> Result<(), GatewayError> {
    let account_id = require_account(caller)?;
    let ledger = gw.ledger()?;
    // This instance's leased settlements written first, its lease's unheld part shown.
    let round = gw.shared.leases.flush(ledger, account_id).await?;
    let mut a = ledger.account(account_id).await?.ok_or_else(gone)?;
    a.balance += gw.shared.leases.available(account_id);
    drop(round);
    respond::json(session, ctx, 200, &account_json(&a), &[]).await;
    Ok(())
}

fn gone() -> GatewayError {
    GatewayError::new(ErrorKind::Authentication, "the account no longer exists")
}

pub fn require_account(caller: &Caller) -> Result<&str, GatewayError> {
    caller.account_id().ok_or_else(|| {
        GatewayError::new(
            ErrorKind::Authentication,
            "authentication required: send Authorization: Bearer <API key>",
        )
    })
}

pub async fn list_keys(
    gw: &Gateway,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
) -> Result<(), GatewayError> {
    let account_id = require_account(caller)?;
    let keys = gw.ledger()?.list_keys(account_id).await?;
    let data: Vec<_> = keys
        .iter()
        .map(|k| {
            json!({"id": k.id, "name": k.name, "prefix": k.prefix, "created_at": k.created_at / 1000,
                   "last_used_at": k.last_used_at.map(|t| t / 1000), "revoked": k.revoked})
        })
        .collect();
    respond::json(
        session,
        ctx,
        200,
        &json!({"object": "list", "data": data}),
        &[],
    )
    .await;
    Ok(())
}

pub async fn create_key(
    gw: &Gateway,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
) -> Result<(), GatewayError> {
    let account_id = require_account(caller)?.to_owned();
    let ledger = gw.ledger()?;
    let m = body::json_object(session, MAX_ACCOUNT_BODY).await?;
    let name = body::opt_string(&m, "name")?.unwrap_or("unnamed").trim();
    if name.is_empty() || name.len() > 100 {
        return Err(GatewayError::invalid("name: must be 1 to 100 characters"));
    }
    let (secret, key) = auth::new_key(name)?;
    let now = crate::now_ms();
    ledger.insert_key(&account_id, &key, now).await?;
    let v = json!({"id": key.id, "name": key.name, "prefix": key.prefix, "created_at": now / 1000, "key": secret});
    respond::json(session, ctx, 201, &v, &[]).await;
    Ok(())
}

pub async fn revoke_key(
    gw: &Gateway,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
    key_id: &str,
) -> Result<(), GatewayError> {
    let account_id = require_account(caller)?;
    let Some(hash) = gw
        .ledger()?
        .revoke_key(account_id, key_id, crate::now_ms())
        .await?
    else {
        return Err(GatewayError::new(
            ErrorKind::NotFound,
            format!("no key `{key_id}` on this account"),
        ));
    };
    gw.shared.keys.evict(&hash);
    respond::json(
        session,
        ctx,
        200,
        &json!({"id": key_id, "revoked": true}),
        &[],
    )
    .await;
    Ok(())
}

pub async fn usage(
    gw: &Gateway,
    session: &mut Session,
    ctx: &mut RequestCtx,
    caller: &Caller,
) -> Result<(), GatewayError> {
    let account_id = require_account(caller)?;
    let ledger = gw.ledger()?;
    drop(gw.shared.leases.flush(ledger, account_id).await?);
    let since = crate::now_ms() - 30 * 86_400_000;
    let agg =
        |rows: Vec<crate::store::UsageAgg>, key: &str, by_day: bool| -> Vec<serde_json::Value> {
            rows.into_iter()
                .map(|r| {
                    let k: serde_json::Value = if by_day {
                        let day = r.key.parse::<i64>().unwrap_or(0);
                        tollgate_filters::time::format_date(day * 86_400).into()
                    } else {
                        r.key.into()
                    };
                    json!({key: k, "requests": r.requests, "prompt_tokens": r.prompt_tokens,
                       "completion_tokens": r.completion_tokens, "credits": to_credits(r.credits)})
                })
                .collect()
        };
    let by_day = agg(ledger.usage_by(account_id, since, true).await?, "day", true);
    let by_model = agg(
        ledger.usage_by(account_id, since, false).await?,
        "model",
        false,
    );
    let recent: Vec<_> = ledger
        .recent_usage(account_id, 50)
        .await?
        .into_iter()
        .map(|u| {
            json!({"request_id": u.request_id, "model_requested": u.model_requested, "model_used": u.model_used,
                   "provider": u.provider, "prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
                   "credits": to_credits(u.credits), "status": u.status, "latency_ms": u.latency_ms, "created_at": u.created_at / 1000})
        })
        .collect();
    respond::json(
        session,
        ctx,
        200,
        &json!({"by_day": by_day, "by_model": by_model, "recent": recent}),
        &[],
    )
    .await;
    Ok(())
}
