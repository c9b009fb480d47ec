//! API keys: only a SHA-256 hash is stored, with the first characters for display.

use sqlx::Row;
use tollgate_filters::budget::Period;

use super::store::{on_pool, Ledger, Result};

#[derive(Debug, Clone)]
pub struct NewKey {
    pub id: String,
    pub name: String,
    pub prefix: String,
    pub hash: String,
}

#[derive(Debug, Clone)]
pub struct KeyRow {
    pub id: String,
    /// The organization whose wallet it spends from; `None`: the person's own account.
    pub organization_id: Option<String>,
    pub name: String,
    pub prefix: String,
    pub created_at: i64,
    pub last_used_at: Option<i64>,
    pub revoked: bool,
    /// Milliseconds; `None`: never.
    pub expires_at: Option<i64>,
    /// The models it may use (ids, aliases, tiers); `None`: all.
    pub allowed_models: Option<Vec<String>>,
    /// The tool servers and tools it may use (`slug`, `slug__tool`); `None`: all.
    pub allowed_tools: Option<Vec<String>>,
    pub limits: KeyLimits,
    /// Its requests' payloads are stored in the request log (its own setting; its wallet's
    /// is the account's).
    pub log_payloads: bool,
    /// Its long Anthropic prompts get the gateway's cache marks (its own setting).
    pub cache_breakpoints: bool,
    /// Its requests use the response cache without asking.
    pub response_cache: bool,
}

/// A key's own budget and limits (issue 29), on top of its plan's; `None`: none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KeyLimits {
    /// A cap in µcr per `budget_period`.
    pub budget: Option<(i64, Period)>,
    pub requests_per_minute: Option<i64>,
    pub tokens_per_minute: Option<i64>,
    pub concurrent_requests: Option<i64>,
}

/// Every setting of a key that can be changed: `None` leaves one as it is, `Some(None)`
/// clears it.
#[derive(Debug, Clone, Default)]
pub struct KeyChange {
    pub expires_at: Option<Option<i64>>,
    /// A JSON array of model names.
    pub allowed_models: Option<Option<String>>,
    /// A JSON array of `slug` and `slug__tool` entries.
    pub allowed_tools: Option<Option<String>>,
    /// µcr per period.
    pub budget_micros: Option<Option<i64>>,
    /// `Some(None)`: a lifetime cap.
    pub budget_period: Option<Option<Period>>,
    pub requests_per_minute: Option<Option<i64>>,
    pub tokens_per_minute: Option<Option<i64>>,
    pub concurrent_requests: Option<Option<i64>>,
    /// Payload logging on this key.
    pub log_payloads: Option<bool>,
    /// Cache breakpoints on this key.
    pub cache_breakpoints: Option<bool>,
    /// The response cache on this key's requests without their asking.
    pub response_cache: Option<bool>,
}

impl KeyChange {
    pub fn is_empty(&self) -> bool {
        self.expires_at.is_none()
            && self.allowed_models.is_none()
            && self.allowed_tools.is_none()
            && self.budget_micros.is_none()
            && self.budget_period.is_none()
            && self.requests_per_minute.is_none()
            && self.tokens_per_minute.is_none()
            && self.concurrent_requests.is_none()
            && self.log_payloads.is_none()
            && self.cache_breakpoints.is_none()
            && self.response_cache.is_none()
    }
}

/// The condition that a key is the caller's, whose account is parameter `$n`: a key of its own
/// account, or an organization key it owns.
fn own_key(n: u8) -> String {
    format!("((account_id = ${n} AND owner_id IS NULL) OR owner_id = ${n})")
}

/// The columns of a key's settings, in the order [`limits_of`] reads them.
const SETTINGS: &str = "expires_at, allowed_models, allowed_tools, budget_micros, budget_period, requests_per_minute, tokens_per_minute, concurrent_requests";

fn limits_of<R: Row>(r: &R) -> std::result::Result<KeyLimits, sqlx::Error>
where
    for<'c> &'c str: sqlx::ColumnIndex<R>,
    for<'q> Option<i64>: sqlx::Decode<'q, R::Database> + sqlx::Type<R::Database>,
    for<'q> Option<String>: sqlx::Decode<'q, R::Database> + sqlx::Type<R::Database>,
{
    let amount: Option<i64> = r.try_get("budget_micros")?;
    let period: Option<String> = r.try_get("budget_period")?;
    Ok(KeyLimits {
        budget: amount.map(|a| {
            (
                a,
                period
                    .as_deref()
                    .and_then(Period::parse)
                    .unwrap_or(Period::Lifetime),
            )
        }),
        requests_per_minute: r.try_get("requests_per_minute")?,
        tokens_per_minute: r.try_get("tokens_per_minute")?,
        concurrent_requests: r.try_get("concurrent_requests")?,
    })
}

/// What a key lookup tells the request pipeline.
#[derive(Debug, Clone)]
pub struct KeyAuth {
    pub key_id: String,
    pub account_id: String,
    pub plan: String,
    pub requests_per_hour: Option<i64>,
    pub requests_per_day: Option<i64>,
    /// When the key stops working, in milliseconds; `None`: never.
    pub expires_at: Option<i64>,
    /// The models it may use (ids, aliases, tiers); `None`: all.
    pub allowed_models: Option<std::sync::Arc<[String]>>,
    /// The tool servers and tools it may use (`slug`, `slug__tool`); `None`: all.
    pub allowed_tools: Option<std::sync::Arc<[String]>>,
    pub limits: KeyLimits,
    /// On an organization key: the member who owns it, and its cap (boxed: most keys are
    /// personal, and the caller stays small).
    pub org_member: Option<Box<OrgMember>>,
    /// Its requests' payloads go to the request log: payload logging is on for the key or
    /// for its wallet (the account, or the organization).
    pub log_payloads: bool,
    /// Its long Anthropic prompts get the gateway's cache marks: on for the key or for its
    /// organization.
    pub cache_breakpoints: bool,
    /// Its requests use the response cache without asking (`response_cache` of the key).
    pub response_cache: bool,
}

/// The member who owns an organization key, and its credit cap per period in the
/// organization (issue 51): across all its organization keys, held like a key's budget
/// (`limits/budgets.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrgMember {
    pub org: String,
    pub account: String,
    /// µcr per period, when it has a cap.
    pub cap: Option<(i64, Period)>,
    /// The organization's model allowlist, on top of the key's own; `None`: all.
    pub allowed_models: Option<std::sync::Arc<[String]>>,
}

/// `allowed_models` and `allowed_tools` as stored: a JSON array of strings.
fn models_of(text: Option<String>) -> Option<Vec<String>> {
    text.and_then(|t| serde_json::from_str(&t).ok())
}

impl Ledger {
    pub async fn insert_key(&self, account_id: &str, k: &NewKey, now: i64) -> Result<()> {
        self.insert_key_with(account_id, None, k, now, &KeyChange::default())
            .await
    }

    /// A key of `account_id` with the settings `with` sets (the others none); `owner`: the
    /// member who owns an organization's key.
    pub async fn insert_key_with(
        &self,
        account_id: &str,
        owner: Option<&str>,
        k: &NewKey,
        now: i64,
        with: &KeyChange,
    ) -> Result<()> {
        on_pool!(self, p => {
            sqlx::query(&format!("INSERT INTO api_keys (id, account_id, name, prefix, hash, created_at, {SETTINGS}, owner_id, log_payloads, cache_breakpoints, response_cache) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)"))
                .bind(&k.id).bind(account_id).bind(&k.name).bind(&k.prefix).bind(&k.hash).bind(now)
                .bind(with.expires_at.flatten()).bind(with.allowed_models.clone().flatten())
                .bind(with.allowed_tools.clone().flatten())
                .bind(with.budget_micros.flatten()).bind(with.budget_period.flatten().map(Period::as_str))
                .bind(with.requests_per_minute.flatten()).bind(with.tokens_per_minute.flatten())
                .bind(with.concurrent_requests.flatten()).bind(owner)
                .bind(i64::from(with.log_payloads.unwrap_or(false)))
                .bind(i64::from(with.cache_breakpoints.unwrap_or(false)))
                .bind(i64::from(with.response_cache.unwrap_or(false)))
                .execute(p).await?;
            Ok(())
        })
    }

    /// Changes the settings `change` names of one of the account's keys, in one statement;
    /// returns its hash (for cache eviction) or `None` when the account has no such key.
    pub async fn change_key(
        &self,
        account_id: &str,
        key_id: &str,
        change: &KeyChange,
    ) -> Result<Option<String>> {
        let sets: [(&str, Option<Value>); 11] = [
            ("expires_at", change.expires_at.map(Value::Int)),
            (
                "allowed_models",
                change.allowed_models.clone().map(Value::Text),
            ),
            (
                "allowed_tools",
                change.allowed_tools.clone().map(Value::Text),
            ),
            ("budget_micros", change.budget_micros.map(Value::Int)),
            (
                "budget_period",
                change
                    .budget_period
                    .map(|p| Value::Text(p.map(|p| p.as_str().to_owned()))),
            ),
            (
                "requests_per_minute",
                change.requests_per_minute.map(Value::Int),
            ),
            (
                "tokens_per_minute",
                change.tokens_per_minute.map(Value::Int),
            ),
            (
                "concurrent_requests",
                change.concurrent_requests.map(Value::Int),
            ),
            (
                "log_payloads",
                change
                    .log_payloads
                    .map(|on| Value::Int(Some(i64::from(on)))),
            ),
            (
                "cache_breakpoints",
                change
                    .cache_breakpoints
                    .map(|on| Value::Int(Some(i64::from(on)))),
            ),
            (
                "response_cache",
                change
                    .response_cache
                    .map(|on| Value::Int(Some(i64::from(on)))),
            ),
        ];
        on_pool!(self, p => {
            let mut q = sqlx::QueryBuilder::new("UPDATE api_keys SET ");
            let mut first = true;
            for (column, value) in &sets {
                let Some(value) = value else { continue };
                if !first {
                    q.push(", ");
                }
                first = false;
                q.push(*column).push(" = ");
                match value {
                    Value::Int(v) => q.push_bind(*v),
                    Value::Text(v) => q.push_bind(v.clone()),
                };
            }
            if first {
                return Ok(None);
            }
            q.push(" WHERE id = ").push_bind(key_id);
            q.push(" AND ((account_id = ").push_bind(account_id).push(" AND owner_id IS NULL) OR owner_id = ").push_bind(account_id).push(") RETURNING hash");
            let row = q.build().fetch_all(p).await?.into_iter().next();
            match row {
                Some(r) => Ok(Some(r.try_get("hash")?)),
                None => Ok(None),
            }
        })
    }

    /// The keys of a person's account and the organization keys it owns.
    pub async fn list_keys(&self, account_id: &str) -> Result<Vec<KeyRow>> {
        on_pool!(self, p => {
            let rows = sqlx::query(&format!("SELECT id, account_id, owner_id, name, prefix, created_at, last_used_at, revoked_at, log_payloads, cache_breakpoints, response_cache, {SETTINGS} FROM api_keys WHERE (account_id = $1 AND owner_id IS NULL) OR owner_id = $1 ORDER BY created_at, id"))
                .bind(account_id).fetch_all(p).await?;
            rows.iter().map(|r| Ok(KeyRow {
                id: r.try_get("id")?,
                organization_id: match r.try_get::<Option<String>, _>("owner_id")? {
                    Some(_) => Some(r.try_get("account_id")?),
                    None => None,
                },
                name: r.try_get("name")?,
                prefix: r.try_get("prefix")?,
                created_at: r.try_get("created_at")?,
                last_used_at: r.try_get("last_used_at")?,
                revoked: r.try_get::<Option<i64>, _>("revoked_at")?.is_some(),
                expires_at: r.try_get("expires_at")?,
                allowed_models: models_of(r.try_get("allowed_models")?),
                allowed_tools: models_of(r.try_get("allowed_tools")?),
                limits: limits_of(r)?,
                log_payloads: r.try_get::<i64, _>("log_payloads")? != 0,
                cache_breakpoints: r.try_get::<i64, _>("cache_breakpoints")? != 0,
                response_cache: r.try_get::<i64, _>("response_cache")? != 0,
            })).collect()
        })
    }

    /// What one key's requests were charged since `since_ms`, from its usage rows (those
    /// written: a credit lease's rows wait up to one round). Read through the account's index
    /// (account, time): `usage` has none on keys, and one would cost every usage row a write.
    pub async fn key_spent(&self, key_id: &str, since_ms: i64) -> Result<i64> {
        on_pool!(self, p => {
            let row = sqlx::query("SELECT CAST(COALESCE(SUM(credits), 0) AS BIGINT) AS spent FROM usage \
                 WHERE account_id = (SELECT account_id FROM api_keys WHERE id = $1) AND key_id = $1 AND created_at >= $2")
                .bind(key_id).bind(since_ms).fetch_one(p).await?;
            Ok(row.try_get("spent")?)
        })
    }

    /// What a member's organization keys were charged since `since_ms` (its cap's spend), from
    /// the organization's usage rows, through its index (account, time).
    pub async fn member_spent(&self, org: &str, member: &str, since_ms: i64) -> Result<i64> {
        on_pool!(self, p => {
            let row = sqlx::query("SELECT CAST(COALESCE(SUM(credits), 0) AS BIGINT) AS spent FROM usage \
                 WHERE account_id = $1 AND created_at >= $3 AND key_id IN (SELECT id FROM api_keys WHERE account_id = $1 AND owner_id = $2)")
                .bind(org).bind(member).bind(since_ms).fetch_one(p).await?;
            Ok(row.try_get("spent")?)
        })
    }

    /// Revokes one of the account's keys; returns its hash (for cache eviction) or `None`
    /// when the account has no such key.
    pub async fn revoke_key(
        &self,
        account_id: &str,
        key_id: &str,
        now: i64,
    ) -> Result<Option<String>> {
        on_pool!(self, p => {
            let row = sqlx::query(&format!("UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $1) WHERE id = $2 AND {} RETURNING hash", own_key(3)))
                .bind(now).bind(key_id).bind(account_id).fetch_all(p).await?.into_iter().next();
            match row {
                Some(r) => Ok(Some(r.try_get("hash")?)),
                None => Ok(None),
            }
        })
    }

    /// The live key with this hash; revoked keys are not returned.
    pub async fn key_auth(&self, hash: &str) -> Result<Option<KeyAuth>> {
        super::breaker::check()?;
        on_pool!(self, p => {
            let row = sqlx::query(
                "SELECT k.id, k.account_id, k.expires_at, k.allowed_models, k.allowed_tools, k.budget_micros, k.budget_period, k.requests_per_minute, k.tokens_per_minute, k.concurrent_requests, \
                 k.log_payloads AS key_logs, a.log_payloads AS wallet_logs, k.cache_breakpoints AS key_marks, a.cache_breakpoints AS wallet_marks, k.response_cache, a.plan, a.requests_per_hour, a.requests_per_day, k.owner_id, m.cap_micros, m.cap_period, o.allowed_models AS org_models FROM api_keys k JOIN accounts a ON a.user_id = k.account_id \
                 LEFT JOIN org_members m ON m.org_id = k.account_id AND m.account_id = k.owner_id LEFT JOIN organizations o ON o.id = k.account_id WHERE k.hash = $1 AND k.revoked_at IS NULL",
            )
            .bind(hash).fetch_optional(p).await?;
            match row {
                Some(r) => {
                    let owner: Option<String> = r.try_get("owner_id")?;
                    let cap: Option<i64> = r.try_get("cap_micros")?;
                    let period: Option<String> = r.try_get("cap_period")?;
                    let org_member = match owner {
                        Some(account) => Some(Box::new(OrgMember {
                            org: r.try_get("account_id")?,
                            account,
                            cap: cap.map(|c| (c, period.as_deref().and_then(Period::parse).unwrap_or(Period::Lifetime))),
                            allowed_models: models_of(r.try_get("org_models")?).map(Into::into),
                        })),
                        None => None,
                    };
                    Ok(Some(KeyAuth {
                    key_id: r.try_get("id")?,
                    account_id: r.try_get("account_id")?,
                    plan: r.try_get("plan")?,
                    requests_per_hour: r.try_get("requests_per_hour")?,
                    requests_per_day: r.try_get("requests_per_day")?,
                    expires_at: r.try_get("expires_at")?,
                    allowed_models: models_of(r.try_get("allowed_models")?).map(Into::into),
                    allowed_tools: models_of(r.try_get("allowed_tools")?).map(Into::into),
                    limits: limits_of(&r)?,
                    org_member,
                    log_payloads: r.try_get::<i64, _>("key_logs")? != 0 || r.try_get::<i64, _>("wallet_logs")? != 0,
                    cache_breakpoints: r.try_get::<i64, _>("key_marks")? != 0 || r.try_get::<i64, _>("wallet_marks")? != 0,
                    response_cache: r.try_get::<i64, _>("response_cache")? != 0,
                }))
                }
                None => Ok(None),
            }
        })
    }

    /// Issues `new` as the successor of the account's live key `key_id`, with its name and
    /// settings, and sets the old one to expire at `until` (or its own expiry when that is
    /// sooner), in one transaction. Returns the old key's hash and its expiry now, or `None`
    /// when the account has no such live key.
    pub async fn rotate_key(
        &self,
        account_id: &str,
        key_id: &str,
        new: &NewKey,
        now: i64,
        until: i64,
    ) -> Result<Option<(String, i64, KeyRow)>> {
        // The first statement writes, so the transaction holds SQLite's write lock from its
        // start: a transaction that read first and then wrote would fail at once when another
        // connection committed in between (BUSY_SNAPSHOT), which a busy ledger does all the
        // time.
        on_pool!(self, p => {
            let mut tx = p.begin().await?;
            let copied = sqlx::query(&format!(
                "INSERT INTO api_keys (id, account_id, owner_id, name, prefix, hash, created_at, log_payloads, cache_breakpoints, response_cache, {SETTINGS}) \
                 SELECT $1, account_id, owner_id, name, $2, $3, $4, log_payloads, cache_breakpoints, response_cache, {SETTINGS} FROM api_keys \
                 WHERE id = $5 AND {} AND revoked_at IS NULL",
                own_key(6)
            ))
            .bind(&new.id).bind(&new.prefix).bind(&new.hash).bind(now).bind(key_id).bind(account_id)
            .execute(&mut *tx).await?;
            if copied.rows_affected() == 0 {
                return Ok(None);
            }
            let old = sqlx::query(
                "UPDATE api_keys SET expires_at = CASE WHEN expires_at IS NULL OR expires_at > $1 THEN $1 ELSE expires_at END \
                 WHERE id = $2 RETURNING hash, expires_at",
            )
            .bind(until).bind(key_id).fetch_all(&mut *tx).await?;
            let row = sqlx::query(&format!("SELECT name, account_id, owner_id, log_payloads, cache_breakpoints, response_cache, {SETTINGS} FROM api_keys WHERE id = $1"))
                .bind(&new.id).fetch_one(&mut *tx).await?;
            tx.commit().await?;
            let Some(old) = old.into_iter().next() else { return Ok(None) };
            let key = KeyRow {
                id: new.id.clone(),
                organization_id: match row.try_get::<Option<String>, _>("owner_id")? {
                    Some(_) => Some(row.try_get("account_id")?),
                    None => None,
                },
                name: row.try_get("name")?,
                prefix: new.prefix.clone(),
                created_at: now,
                last_used_at: None,
                revoked: false,
                expires_at: row.try_get("expires_at")?,
                allowed_models: models_of(row.try_get("allowed_models")?),
                allowed_tools: models_of(row.try_get("allowed_tools")?),
                limits: limits_of(&row)?,
                log_payloads: row.try_get::<i64, _>("log_payloads")? != 0,
                cache_breakpoints: row.try_get::<i64, _>("cache_breakpoints")? != 0,
                response_cache: row.try_get::<i64, _>("response_cache")? != 0,
            };
            Ok(Some((old.try_get("hash")?, old.try_get("expires_at")?, key)))
        })
    }

    pub async fn touch_key(&self, key_id: &str, now: i64) -> Result<()> {
        on_pool!(self, p => {
            sqlx::query("UPDATE api_keys SET last_used_at = $1 WHERE id = $2").bind(now).bind(key_id).execute(p).await?;
            Ok(())
        })
    }
}

/// A value bound in [`Ledger::change_key`]'s statement.
enum Value {
    Int(Option<i64>),
    Text(Option<String>),
}
