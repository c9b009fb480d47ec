//! Organizations (issue 51): an organization is an account row (its wallet, plan and limits)
//! with a name, members with a role, invitations, and keys owned by members.

use sqlx::Row;
use tollgate_filters::budget::Period;

use super::store::{on_pool, Ledger, Result};

/// What a member may do: an owner everything (billing, members), an admin members, keys,
/// caps and usage, a member their own keys and usage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    Member,
    Admin,
    Owner,
}

impl Role {
    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "owner" => Some(Role::Owner),
            "admin" => Some(Role::Admin),
            "member" => Some(Role::Member),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Owner => "owner",
            Role::Admin => "admin",
            Role::Member => "member",
        }
    }
}

fn role_of(text: &str) -> Result<Role> {
    Role::parse(text).ok_or_else(|| super::store::StoreError(format!("unknown role `{text}`")))
}

#[derive(Debug, Clone)]
pub struct Org {
    pub id: String,
    pub name: String,
    pub plan: String,
    pub balance: i64,
    pub created_at: i64,
    /// The models its keys may use (ids, aliases, tiers); `None`: all.
    pub allowed_models: Option<Vec<String>>,
}

#[derive(Debug, Clone)]
pub struct Member {
    pub account_id: String,
    pub email: Option<String>,
    pub role: Role,
    pub joined_at: i64,
    /// Its credit cap (µcr per period), when it has one.
    pub cap: Option<(i64, Period)>,
}

#[derive(Debug, Clone)]
pub struct Invitation {
    pub id: String,
    pub org_id: String,
    pub email: String,
    pub role: Role,
    pub invited_by: String,
    pub created_at: i64,
    pub expires_at: i64,
    pub accepted_at: Option<i64>,
}

/// Why an invitation could not be accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// No invitation has this token, or it was withdrawn.
    Unknown,
    Used,
    Expired,
    /// The invitation is for another e-mail.
    OtherEmail,
}

const ORG: &str = "SELECT o.id, o.name, o.created_at, o.allowed_models, a.plan, a.balance FROM organizations o JOIN accounts a ON a.user_id = o.id";

fn org_of<R: Row>(r: &R) -> std::result::Result<Org, sqlx::Error>
where
    for<'c> &'c str: sqlx::ColumnIndex<R>,
    for<'q> i64: sqlx::Decode<'q, R::Database> + sqlx::Type<R::Database>,
    for<'q> String: sqlx::Decode<'q, R::Database> + sqlx::Type<R::Database>,
    for<'q> Option<String>: sqlx::Decode<'q, R::Database> + sqlx::Type<R::Database>,
{
    Ok(Org {
        id: r.try_get("id")?,
        name: r.try_get("name")?,
        plan: r.try_get("plan")?,
        balance: r.try_get("balance")?,
        created_at: r.try_get("created_at")?,
        allowed_models: r
            .try_get::<Option<String>, _>("allowed_models")?
            .and_then(|t| serde_json::from_str(&t).ok()),
    })
}

impl Ledger {
    /// A new organization `id` named `name`, with an empty wallet on the free plan and
    /// `owner` as its owner, in one transaction.
    pub async fn create_org(&self, id: &str, name: &str, owner: &str, now: i64) -> Result<Org> {
        on_pool!(self, p => {
            let mut tx = p.begin().await?;
            sqlx::query("INSERT INTO accounts (user_id, email, password_hash, plan, balance, created_at) VALUES ($1, NULL, NULL, 'free', 0, $2)")
                .bind(id).bind(now).execute(&mut *tx).await?;
            sqlx::query("INSERT INTO organizations (id, name, created_at) VALUES ($1, $2, $3)")
                .bind(id).bind(name).bind(now).execute(&mut *tx).await?;
            sqlx::query("INSERT INTO org_members (org_id, account_id, role, joined_at) VALUES ($1, $2, 'owner', $3)")
                .bind(id).bind(owner).bind(now).execute(&mut *tx).await?;
            tx.commit().await?;
            Ok(Org { id: id.to_owned(), name: name.to_owned(), plan: "free".into(), balance: 0, created_at: now, allowed_models: None })
        })
    }

    pub async fn org(&self, id: &str) -> Result<Option<Org>> {
        on_pool!(self, p => {
            let row = sqlx::query(&format!("{ORG} WHERE o.id = $1")).bind(id).fetch_optional(p).await?;
            Ok(row.as_ref().map(org_of).transpose()?)
        })
    }

    /// Whether `id` is an organization's account (it cannot own organizations or join one).
    pub async fn is_org(&self, id: &str) -> Result<bool> {
        on_pool!(self, p => {
            let row = sqlx::query("SELECT id FROM organizations WHERE id = $1").bind(id).fetch_optional(p).await?;
            Ok(row.is_some())
        })
    }

    /// `account`'s role in organization `org`; `None`: not a member (or no such organization).
    pub async fn role(&self, org: &str, account: &str) -> Result<Option<Role>> {
        on_pool!(self, p => {
            let row = sqlx::query("SELECT role FROM org_members WHERE org_id = $1 AND account_id = $2")
                .bind(org).bind(account).fetch_optional(p).await?;
            row.map(|r| role_of(&r.try_get::<String, _>("role")?)).transpose()
        })
    }

    /// The organizations `account` belongs to, with its role in each, oldest first.
    pub async fn orgs_of(&self, account: &str) -> Result<Vec<(Org, Role)>> {
        on_pool!(self, p => {
            let rows = sqlx::query("SELECT o.id, o.name, o.created_at, o.allowed_models, a.plan, a.balance, m.role FROM organizations o JOIN accounts a ON a.user_id = o.id JOIN org_members m ON m.org_id = o.id WHERE m.account_id = $1 ORDER BY o.created_at, o.id")
                .bind(account).fetch_all(p).await?;
            rows.iter().map(|r| Ok((org_of(r)?, role_of(&r.try_get::<String, _>("role")?)?))).collect()
        })
    }

    pub async fn members(&self, org: &str) -> Result<Vec<Member>> {
        on_pool!(self, p => {
            let rows = sqlx::query("SELECT m.account_id, a.email, m.role, m.joined_at, m.cap_micros, m.cap_period FROM org_members m JOIN accounts a ON a.user_id = m.account_id WHERE m.org_id = $1 ORDER BY m.joined_at, m.account_id")
                .bind(org).fetch_all(p).await?;
            rows.iter().map(|r| Ok(Member {
                account_id: r.try_get("account_id")?,
                email: r.try_get("email")?,
                role: role_of(&r.try_get::<String, _>("role")?)?,
                joined_at: r.try_get("joined_at")?,
                cap: match r.try_get::<Option<i64>, _>("cap_micros")? {
                    Some(c) => {
                        let p: Option<String> = r.try_get("cap_period")?;
                        Some((c, p.as_deref().and_then(Period::parse).unwrap_or(Period::Lifetime)))
                    }
                    None => None,
                },
            })).collect()
        })
    }

    /// Sets a member's role (never the owner's, nor to owner: ownership is transferred);
    /// false when `account` is no such member.
    pub async fn set_role(&self, org: &str, account: &str, role: Role) -> Result<bool> {
        on_pool!(self, p => {
            let done = sqlx::query("UPDATE org_members SET role = $1 WHERE org_id = $2 AND account_id = $3 AND role <> 'owner' AND $1 <> 'owner'")
                .bind(role.as_str()).bind(org).bind(account).execute(p).await?;
            Ok(done.rows_affected() == 1)
        })
    }

    /// Sets (or with `None` clears) the organization's model allowlist (a JSON array); returns
    /// the hashes of its live keys, to evict from the key caches.
    pub async fn set_org_models(&self, org: &str, models: Option<&str>) -> Result<Vec<String>> {
        on_pool!(self, p => {
            sqlx::query("UPDATE organizations SET allowed_models = $1 WHERE id = $2")
                .bind(models).bind(org).execute(p).await?;
            let rows = sqlx::query("SELECT hash FROM api_keys WHERE account_id = $1 AND revoked_at IS NULL")
                .bind(org).fetch_all(p).await?;
            rows.iter().map(|r| Ok(r.try_get("hash")?)).collect()
        })
    }

    /// Sets (or with `None` clears) a member's credit cap; returns the hashes of its live
    /// organization keys (to evict from the key caches: the cap rides on each key's lookup),
    /// or `None` when `account` is no such member.
    pub async fn set_cap(
        &self,
        org: &str,
        account: &str,
        cap: Option<(i64, Period)>,
    ) -> Result<Option<Vec<String>>> {
        on_pool!(self, p => {
            let done = sqlx::query("UPDATE org_members SET cap_micros = $1, cap_period = $2 WHERE org_id = $3 AND account_id = $4")
                .bind(cap.map(|c| c.0)).bind(cap.map(|c| c.1.as_str())).bind(org).bind(account).execute(p).await?;
            if done.rows_affected() == 0 {
                return Ok(None);
            }
            let rows = sqlx::query("SELECT hash FROM api_keys WHERE account_id = $1 AND owner_id = $2 AND revoked_at IS NULL")
                .bind(org).bind(account).fetch_all(p).await?;
            rows.iter().map(|r| Ok(r.try_get("hash")?)).collect::<Result<Vec<String>>>().map(Some)
        })
    }

    /// Removes a member (never the owner) and revokes the organization keys it owns, in one
    /// transaction; returns their hashes (to evict from the key caches), or `None` when
    /// `account` is no such member.
    pub async fn remove_member(
        &self,
        org: &str,
        account: &str,
        now: i64,
    ) -> Result<Option<Vec<String>>> {
        on_pool!(self, p => {
            let mut tx = p.begin().await?;
            let gone = sqlx::query("DELETE FROM org_members WHERE org_id = $1 AND account_id = $2 AND role <> 'owner'")
                .bind(org).bind(account).execute(&mut *tx).await?;
            if gone.rows_affected() == 0 {
                return Ok(None);
            }
            let rows = sqlx::query("UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $1) WHERE account_id = $2 AND owner_id = $3 RETURNING hash")
                .bind(now).bind(org).bind(account).fetch_all(&mut *tx).await?;
            tx.commit().await?;
            rows.iter().map(|r| Ok(r.try_get("hash")?)).collect::<Result<Vec<String>>>().map(Some)
        })
    }

    /// Makes member `to` the owner and the owner `from` an admin, in one transaction; false
    /// when `from` is not the owner or `to` not a member.
    pub async fn transfer_org(&self, org: &str, from: &str, to: &str) -> Result<bool> {
        on_pool!(self, p => {
            let mut tx = p.begin().await?;
            let demoted = sqlx::query("UPDATE org_members SET role = 'admin' WHERE org_id = $1 AND account_id = $2 AND role = 'owner' AND EXISTS (SELECT 1 FROM org_members WHERE org_id = $1 AND account_id = $3)")
                .bind(org).bind(from).bind(to).execute(&mut *tx).await?;
            if demoted.rows_affected() == 0 || from == to {
                return Ok(false);
            }
            sqlx::query("UPDATE org_members SET role = 'owner' WHERE org_id = $1 AND account_id = $2")
                .bind(org).bind(to).execute(&mut *tx).await?;
            tx.commit().await?;
            Ok(true)
        })
    }

    pub async fn invite(&self, inv: &Invitation, token_hash: &str) -> Result<()> {
        on_pool!(self, p => {
            sqlx::query("INSERT INTO org_invitations (id, org_id, email, role, token_hash, invited_by, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)")
                .bind(&inv.id).bind(&inv.org_id).bind(&inv.email).bind(inv.role.as_str()).bind(token_hash)
                .bind(&inv.invited_by).bind(inv.created_at).bind(inv.expires_at)
                .execute(p).await?;
            Ok(())
        })
    }

    /// The organization's open invitations (not accepted, not withdrawn), newest first.
    pub async fn invitations(&self, org: &str) -> Result<Vec<Invitation>> {
        on_pool!(self, p => {
            let rows = sqlx::query("SELECT id, org_id, email, role, invited_by, created_at, expires_at, accepted_at FROM org_invitations WHERE org_id = $1 AND accepted_at IS NULL AND revoked_at IS NULL ORDER BY created_at DESC, id")
                .bind(org).fetch_all(p).await?;
            rows.iter().map(|r| Ok(Invitation {
                id: r.try_get("id")?,
                org_id: r.try_get("org_id")?,
                email: r.try_get("email")?,
                role: role_of(&r.try_get::<String, _>("role")?)?,
                invited_by: r.try_get("invited_by")?,
                created_at: r.try_get("created_at")?,
                expires_at: r.try_get("expires_at")?,
                accepted_at: r.try_get("accepted_at")?,
            })).collect()
        })
    }

    /// Accepts the invitation with this token for `account` (whose e-mail is `email`): marks
    /// it used and adds the membership (an existing member keeps its role), in one
    /// transaction; the invitation is used once, whoever races for it.
    pub async fn accept_invitation(
        &self,
        token_hash: &str,
        account: &str,
        email: &str,
        now: i64,
    ) -> Result<std::result::Result<(String, Role), Refused>> {
        on_pool!(self, p => {
            let mut tx = p.begin().await?;
            // The write first: it takes SQLite's write lock at the transaction's start (see
            // keys.rs, rotate_key) and makes the token single-use under any race.
            let taken = sqlx::query("UPDATE org_invitations SET accepted_at = $1, accepted_by = $2 WHERE token_hash = $3 AND accepted_at IS NULL AND revoked_at IS NULL AND expires_at > $1 AND lower(email) = lower($4) RETURNING org_id, role")
                .bind(now).bind(account).bind(token_hash).bind(email).fetch_all(&mut *tx).await?;
            let Some(row) = taken.into_iter().next() else {
                let why = sqlx::query("SELECT email, expires_at, accepted_at, revoked_at FROM org_invitations WHERE token_hash = $1")
                    .bind(token_hash).fetch_optional(&mut *tx).await?;
                let refused = match why {
                    None => Refused::Unknown,
                    Some(r) if r.try_get::<Option<i64>, _>("revoked_at")?.is_some() => Refused::Unknown,
                    Some(r) if r.try_get::<Option<i64>, _>("accepted_at")?.is_some() => Refused::Used,
                    Some(r) if r.try_get::<i64, _>("expires_at")? <= now => Refused::Expired,
                    Some(_) => Refused::OtherEmail,
                };
                return Ok(Err(refused));
            };
            let org: String = row.try_get("org_id")?;
            let role = role_of(&row.try_get::<String, _>("role")?)?;
            sqlx::query("INSERT INTO org_members (org_id, account_id, role, joined_at) VALUES ($1, $2, $3, $4) ON CONFLICT (org_id, account_id) DO NOTHING")
                .bind(&org).bind(account).bind(role.as_str()).bind(now).execute(&mut *tx).await?;
            tx.commit().await?;
            Ok(Ok((org, role)))
        })
    }

    /// Withdraws an open invitation; false when the organization has no such open one.
    pub async fn withdraw_invitation(&self, org: &str, id: &str, now: i64) -> Result<bool> {
        on_pool!(self, p => {
            let done = sqlx::query("UPDATE org_invitations SET revoked_at = $1 WHERE org_id = $2 AND id = $3 AND accepted_at IS NULL AND revoked_at IS NULL")
                .bind(now).bind(org).bind(id).execute(p).await?;
            Ok(done.rows_affected() == 1)
        })
    }

    /// Whether cache breakpoints are on for an organization's wallet (any account row).
    pub async fn cache_breakpoints(&self, account_id: &str) -> Result<bool> {
        on_pool!(self, p => {
            let row = sqlx::query("SELECT cache_breakpoints FROM accounts WHERE user_id = $1")
                .bind(account_id).fetch_optional(p).await?;
            match row {
                Some(r) => Ok(r.try_get::<i64, _>("cache_breakpoints")? != 0),
                None => Ok(false),
            }
        })
    }

    /// Turns an organization's cache breakpoints on or off; `false`: there is no such account.
    pub async fn set_cache_breakpoints(&self, account_id: &str, on: bool) -> Result<bool> {
        on_pool!(self, p => {
            let changed = sqlx::query("UPDATE accounts SET cache_breakpoints = $1 WHERE user_id = $2")
                .bind(i64::from(on)).bind(account_id).execute(p).await?.rows_affected();
            Ok(changed > 0)
        })
    }
}
