//! Single sign-on (issue 51): an organization's OpenID provider settings, the sign-ins on
//! their way through it, and the accounts and memberships a first sign-in creates.

use sqlx::Row;

use super::orgs::Role;
use super::store::{on_pool, Ledger, Result};

#[derive(Debug, Clone)]
pub struct SsoSettings {
    pub org_id: String,
    pub issuer: String,
    pub client_id: String,
    pub client_secret: String,
    pub allowed_domains: Vec<String>,
    pub default_role: Role,
    pub required: bool,
}

/// A sign-in started: what the callback checks the provider's answer against.
#[derive(Debug, Clone)]
pub struct PendingLogin {
    pub org_id: String,
    pub nonce: String,
    pub verifier: String,
}

impl Ledger {
    pub async fn set_sso(&self, s: &SsoSettings, now: i64) -> Result<()> {
        let domains = serde_json::json!(s.allowed_domains).to_string();
        on_pool!(self, p => {
            sqlx::query("INSERT INTO org_sso (org_id, issuer, client_id, client_secret, allowed_domains, default_role, required, updated_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (org_id) DO UPDATE SET issuer = $2, client_id = $3, client_secret = $4, \
                 allowed_domains = $5, default_role = $6, required = $7, updated_at = $8")
                .bind(&s.org_id).bind(&s.issuer).bind(&s.client_id).bind(&s.client_secret).bind(domains)
                .bind(s.default_role.as_str()).bind(i64::from(s.required)).bind(now)
                .execute(p).await?;
            Ok(())
        })
    }

    pub async fn sso(&self, org: &str) -> Result<Option<SsoSettings>> {
        on_pool!(self, p => {
            let row = sqlx::query("SELECT org_id, issuer, client_id, client_secret, allowed_domains, default_role, required FROM org_sso WHERE org_id = $1")
                .bind(org).fetch_optional(p).await?;
            let Some(r) = row else { return Ok(None) };
            let domains: String = r.try_get("allowed_domains")?;
            let role: String = r.try_get("default_role")?;
            Ok(Some(SsoSettings {
                org_id: r.try_get("org_id")?,
                issuer: r.try_get("issuer")?,
                client_id: r.try_get("client_id")?,
                client_secret: r.try_get("client_secret")?,
                allowed_domains: serde_json::from_str(&domains).unwrap_or_default(),
                default_role: Role::parse(&role).unwrap_or(Role::Member),
                required: r.try_get::<i64, _>("required")? != 0,
            }))
        })
    }

    pub async fn begin_login(
        &self,
        state_hash: &str,
        l: &PendingLogin,
        expires_at: i64,
    ) -> Result<()> {
        on_pool!(self, p => {
            sqlx::query("INSERT INTO sso_logins (state_hash, org_id, nonce, verifier, expires_at) VALUES ($1, $2, $3, $4, $5)")
                .bind(state_hash).bind(&l.org_id).bind(&l.nonce).bind(&l.verifier).bind(expires_at)
                .execute(p).await?;
            // Sign-ins abandoned at the provider are dropped here, a few at a time.
            sqlx::query("DELETE FROM sso_logins WHERE expires_at < $1").bind(expires_at - 3_600_000).execute(p).await?;
            Ok(())
        })
    }

    /// Takes the sign-in with this state, once: a second callback with it finds nothing.
    pub async fn take_login(&self, state_hash: &str, now: i64) -> Result<Option<PendingLogin>> {
        on_pool!(self, p => {
            let rows = sqlx::query("DELETE FROM sso_logins WHERE state_hash = $1 RETURNING org_id, nonce, verifier, expires_at")
                .bind(state_hash).fetch_all(p).await?;
            let Some(r) = rows.into_iter().next() else { return Ok(None) };
            if r.try_get::<i64, _>("expires_at")? <= now {
                return Ok(None);
            }
            Ok(Some(PendingLogin {
                org_id: r.try_get("org_id")?,
                nonce: r.try_get("nonce")?,
                verifier: r.try_get("verifier")?,
            }))
        })
    }

    /// The account with this e-mail, made (without a password) when there is none, a member of
    /// `org` (with `role` when it was not one), and a dashboard session for it made by this
    /// organization's sign-on, in one transaction. Returns the account id.
    pub async fn sso_sign_in(
        &self,
        (new_id, email): (&str, &str),
        (org, role): (&str, Role),
        (session_hash, expires_at): (&str, i64),
        now: i64,
    ) -> Result<String> {
        on_pool!(self, p => {
            let mut tx = p.begin().await?;
            sqlx::query("INSERT INTO accounts (user_id, email, password_hash, plan, balance, created_at) VALUES ($1, $2, NULL, 'free', 0, $3) ON CONFLICT (email) DO NOTHING")
                .bind(new_id).bind(email).bind(now).execute(&mut *tx).await?;
            let account: String = sqlx::query("SELECT user_id FROM accounts WHERE email = $1")
                .bind(email).fetch_one(&mut *tx).await?.try_get("user_id")?;
            sqlx::query("INSERT INTO org_members (org_id, account_id, role, joined_at) VALUES ($1, $2, $3, $4) ON CONFLICT (org_id, account_id) DO NOTHING")
                .bind(org).bind(&account).bind(role.as_str()).bind(now).execute(&mut *tx).await?;
            sqlx::query("INSERT INTO sessions (id_hash, account_id, expires_at, sso_org) VALUES ($1, $2, $3, $4)")
                .bind(session_hash).bind(&account).bind(expires_at).bind(org).execute(&mut *tx).await?;
            tx.commit().await?;
            Ok(account)
        })
    }

    /// The organization whose sign-on made this live session, if one did.
    pub async fn session_sso_org(&self, session_hash: &str) -> Result<Option<String>> {
        on_pool!(self, p => {
            let row = sqlx::query("SELECT sso_org FROM sessions WHERE id_hash = $1")
                .bind(session_hash).fetch_optional(p).await?;
            Ok(row.map(|r| r.try_get::<Option<String>, _>("sso_org")).transpose()?.flatten())
        })
    }
}
