//! The ledger store: accounts, keys, sessions, credit holds, usage rows and credit-ledger
//! entries, on SQLite (the embedded default) or Postgres, with the same SQL where the dialects
//! agree.
//!
//! Credits never go below zero and are never lost or doubled:
//! - a hold is one statement that debits `min(balance, wanted)` only where `balance >= minimum`
//!   and records the hold (no row lock outlives the statement, none is held across the
//!   upstream call);
//! - a settlement is one statement that deletes the hold, refunds it less the charge and
//!   writes the usage row (one round trip, no lock upgrade, so no settlement deadlock). On
//!   Postgres these are data-modifying CTEs; on SQLite an `INSERT … SELECT` whose trigger
//!   (migration 0002) moves the money inside the same statement;
//! - a hold left by a crashed instance expires and is refunded by whichever instance deletes it
//!   first; a settlement that finds its hold gone charges the balance directly, clamped at zero.
//!
//! Postgres statements that must return a value computed from the old row (the amount actually
//! held or charged) write it to `accounts.scratch` in the same `UPDATE` and read it back with
//! `RETURNING`: every `SET` expression is evaluated against the old row.

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::Row;
use tollgate_filters::credits::HoldPlan;

#[derive(Debug)]
pub struct StoreError(pub String);

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        StoreError(e.to_string())
    }
}

impl From<sqlx::migrate::MigrateError> for StoreError {
    fn from(e: sqlx::migrate::MigrateError) -> Self {
        StoreError(e.to_string())
    }
}

impl From<StoreError> for tollgate_filters::GatewayError {
    fn from(e: StoreError) -> Self {
        tracing::error!("store error: {e}");
        tollgate_filters::GatewayError::internal("the ledger store failed; retry with backoff")
    }
}

pub type Result<T> = std::result::Result<T, StoreError>;

#[derive(Clone)]
pub enum Ledger {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

/// Runs the same code against whichever pool this is; the body is compiled once per backend.
macro_rules! on_pool {
    ($self:expr, $p:ident => $body:expr) => {
        match $self {
            Ledger::Sqlite($p) => $body,
            Ledger::Postgres($p) => $body,
        }
    };
}

#[derive(Debug, Clone)]
pub struct Account {
    pub user_id: String,
    pub email: Option<String>,
    pub plan: String,
    pub balance: i64,
    pub requests_per_hour: Option<i64>,
    pub requests_per_day: Option<i64>,
    pub created_at: i64,
}

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
    pub name: String,
    pub prefix: String,
    pub created_at: i64,
    pub last_used_at: Option<i64>,
    pub revoked: bool,
}

/// What a key lookup tells the request pipeline.
#[derive(Debug, Clone)]
pub struct KeyAuth {
    pub key_id: String,
    pub account_id: String,
    pub plan: String,
    pub requests_per_hour: Option<i64>,
    pub requests_per_day: Option<i64>,
}

/// Everything a settlement writes.
#[derive(Debug, Clone)]
pub struct Settlement {
    pub hold_id: String,
    pub request_id: String,
    pub account_id: String,
    pub key_id: Option<String>,
    pub model_requested: String,
    pub model_used: Option<String>,
    pub provider: Option<String>,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
    pub cost: i64,
    pub status: i64,
    pub latency_ms: i64,
    pub now_ms: i64,
}

/// One round of a credit lease: see [`Ledger::lease_sync`].
#[derive(Debug)]
pub struct LeaseRound<'a> {
    pub lease_id: &'a str,
    pub account_id: &'a str,
    /// Settlements metered against the lease (cost = the amount charged), each with the
    /// balance its response reported.
    pub rows: &'a [(Settlement, i64)],
    pub topup: i64,
    pub topup_min_balance: i64,
    pub release: bool,
    /// Without `release`: return this much of the lease to the balance and keep the rest.
    pub give_back: i64,
    pub expires_at: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseSynced {
    /// The lease's row was gone (refunded by the reaper); the batch was charged directly.
    pub lost: bool,
    /// What the rows written in this round charged.
    pub charged: i64,
    pub topped_up: i64,
    pub released: bool,
    /// The account's balance in the database (outside every lease) after the round.
    pub balance: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settled {
    pub charged: i64,
    pub balance: i64,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct UsageRow {
    pub request_id: String,
    pub model_requested: String,
    pub model_used: Option<String>,
    pub provider: Option<String>,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
    pub credits: i64,
    pub status: i64,
    pub latency_ms: i64,
    pub created_at: i64,
}

#[derive(Debug, Clone)]
pub struct UsageAgg {
    pub key: String,
    pub requests: i64,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
    pub credits: i64,
}

fn account_from(row: &impl AccountRowExt) -> Result<Account> {
    row.account()
}

/// Row decoding shared by both backends.
trait AccountRowExt {
    fn account(&self) -> Result<Account>;
}

macro_rules! impl_account_row {
    ($row:ty) => {
        impl AccountRowExt for $row {
            fn account(&self) -> Result<Account> {
                Ok(Account {
                    user_id: self.try_get("user_id")?,
                    email: self.try_get("email")?,
                    plan: self.try_get("plan")?,
                    balance: self.try_get("balance")?,
                    requests_per_hour: self.try_get("requests_per_hour")?,
                    requests_per_day: self.try_get("requests_per_day")?,
                    created_at: self.try_get("created_at")?,
                })
            }
        }
    };
}
impl_account_row!(sqlx::sqlite::SqliteRow);
impl_account_row!(sqlx::postgres::PgRow);

const ACCOUNT_COLS: &str =
    "user_id, email, plan, balance, requests_per_hour, requests_per_day, created_at";

impl Ledger {
    /// Connects, creating the SQLite file (and its directory) when needed, and migrates.
    pub async fn connect(url: &str) -> Result<Ledger> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let pool = PgPoolOptions::new()
                .max_connections(16)
                .acquire_timeout(Duration::from_secs(10))
                .connect(url)
                .await?;
            sqlx::migrate!("./migrations/postgres").run(&pool).await?;
            Ok(Ledger::Postgres(pool))
        } else if url.starts_with("sqlite:") {
            let opts = SqliteConnectOptions::from_str(url)?
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Normal)
                .busy_timeout(Duration::from_secs(30))
                .foreign_keys(true);
            if let Some(parent) = opts.get_filename().parent() {
                if !parent.as_os_str().is_empty() {
                    std::fs::create_dir_all(parent).map_err(|e| {
                        StoreError(format!("cannot create {}: {e}", parent.display()))
                    })?;
                }
            }
            let pool = SqlitePoolOptions::new()
                .max_connections(4)
                .acquire_timeout(Duration::from_secs(30))
                .connect_with(opts)
                .await?;
            sqlx::migrate!("./migrations/sqlite").run(&pool).await?;
            Ok(Ledger::Sqlite(pool))
        } else {
            Err(StoreError(format!(
                "unsupported database_url `{url}`: use sqlite://… or postgres://…"
            )))
        }
    }

    pub fn backend(&self) -> &'static str {
        match self {
            Ledger::Sqlite(_) => "sqlite",
            Ledger::Postgres(_) => "postgres",
        }
    }

    pub async fn ping(&self) -> bool {
        on_pool!(self, p => sqlx::query("SELECT 1").execute(p).await.is_ok())
    }

    /// A new account with its signup grant (as a ledger entry) and first key, atomically.
    /// `Ok(None)` when the e-mail is taken.
    pub async fn create_account(
        &self,
        user_id: &str,
        email: Option<&str>,
        password_hash: Option<&str>,
        grant: i64,
        key: Option<&NewKey>,
        now: i64,
    ) -> Result<Option<Account>> {
        on_pool!(self, p => {
            let mut tx = p.begin().await?;
            let inserted = sqlx::query(
                "INSERT INTO accounts (user_id, email, password_hash, plan, balance, created_at) VALUES ($1, $2, $3, 'free', $4, $5)",
            )
            .bind(user_id).bind(email).bind(password_hash).bind(grant).bind(now)
            .execute(&mut *tx)
            .await;
            if let Err(e) = inserted {
                if e.as_database_error().is_some_and(|d| d.is_unique_violation()) {
                    return Ok(None);
                }
                return Err(e.into());
            }
            sqlx::query("INSERT INTO credit_ledger (account_id, delta, reason, actor, created_at) VALUES ($1, $2, 'signup grant', 'system', $3)")
                .bind(user_id).bind(grant).bind(now)
                .execute(&mut *tx).await?;
            if let Some(k) = key {
                sqlx::query("INSERT INTO api_keys (id, account_id, name, prefix, hash, created_at) VALUES ($1, $2, $3, $4, $5, $6)")
                    .bind(&k.id).bind(user_id).bind(&k.name).bind(&k.prefix).bind(&k.hash).bind(now)
                    .execute(&mut *tx).await?;
            }
            tx.commit().await?;
            Ok(Some(Account {
                user_id: user_id.to_owned(),
                email: email.map(str::to_owned),
                plan: "free".into(),
                balance: grant,
                requests_per_hour: None,
                requests_per_day: None,
                created_at: now,
            }))
        })
    }

    pub async fn account(&self, user_id: &str) -> Result<Option<Account>> {
        let sql = format!("SELECT {ACCOUNT_COLS} FROM accounts WHERE user_id = $1");
        on_pool!(self, p => {
            match sqlx::query(&sql).bind(user_id).fetch_optional(p).await? {
                Some(row) => Ok(Some(account_from(&row)?)),
                None => Ok(None),
            }
        })
    }

    /// `(user_id, password_hash)` for a login.
    pub async fn login_lookup(&self, email: &str) -> Result<Option<(String, Option<String>)>> {
        on_pool!(self, p => {
            let row = sqlx::query("SELECT user_id, password_hash FROM accounts WHERE email = $1")
                .bind(email).fetch_optional(p).await?;
            match row {
                Some(r) => Ok(Some((r.try_get("user_id")?, r.try_get("password_hash")?))),
                None => Ok(None),
            }
        })
    }

    pub async fn insert_key(&self, account_id: &str, k: &NewKey, now: i64) -> Result<()> {
        on_pool!(self, p => {
            sqlx::query("INSERT INTO api_keys (id, account_id, name, prefix, hash, created_at) VALUES ($1, $2, $3, $4, $5, $6)")
                .bind(&k.id).bind(account_id).bind(&k.name).bind(&k.prefix).bind(&k.hash).bind(now)
                .execute(p).await?;
            Ok(())
        })
    }

    pub async fn list_keys(&self, account_id: &str) -> Result<Vec<KeyRow>> {
        on_pool!(self, p => {
            let rows = sqlx::query("SELECT id, name, prefix, created_at, last_used_at, revoked_at FROM api_keys WHERE account_id = $1 ORDER BY created_at, id")
                .bind(account_id).fetch_all(p).await?;
            rows.iter().map(|r| Ok(KeyRow {
                id: r.try_get("id")?,
                name: r.try_get("name")?,
                prefix: r.try_get("prefix")?,
                created_at: r.try_get("created_at")?,
                last_used_at: r.try_get("last_used_at")?,
                revoked: r.try_get::<Option<i64>, _>("revoked_at")?.is_some(),
            })).collect()
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
            let row = sqlx::query("UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $1) WHERE id = $2 AND account_id = $3 RETURNING hash")
                .bind(now).bind(key_id).bind(account_id).fetch_optional(p).await?;
            match row {
                Some(r) => Ok(Some(r.try_get("hash")?)),
                None => Ok(None),
            }
        })
    }

    /// The live key with this hash; revoked keys are not returned.
    pub async fn key_auth(&self, hash: &str) -> Result<Option<KeyAuth>> {
        on_pool!(self, p => {
            let row = sqlx::query(
                "SELECT k.id, k.account_id, a.plan, a.requests_per_hour, a.requests_per_day FROM api_keys k JOIN accounts a ON a.user_id = k.account_id WHERE k.hash = $1 AND k.revoked_at IS NULL",
            )
            .bind(hash).fetch_optional(p).await?;
            match row {
                Some(r) => Ok(Some(KeyAuth {
                    key_id: r.try_get("id")?,
                    account_id: r.try_get("account_id")?,
                    plan: r.try_get("plan")?,
                    requests_per_hour: r.try_get("requests_per_hour")?,
                    requests_per_day: r.try_get("requests_per_day")?,
                })),
                None => Ok(None),
            }
        })
    }

    pub async fn touch_key(&self, key_id: &str, now: i64) -> Result<()> {
        on_pool!(self, p => {
            sqlx::query("UPDATE api_keys SET last_used_at = $1 WHERE id = $2").bind(now).bind(key_id).execute(p).await?;
            Ok(())
        })
    }

    pub async fn create_session(
        &self,
        id_hash: &str,
        account_id: &str,
        expires_at: i64,
    ) -> Result<()> {
        on_pool!(self, p => {
            sqlx::query("INSERT INTO sessions (id_hash, account_id, expires_at) VALUES ($1, $2, $3)")
                .bind(id_hash).bind(account_id).bind(expires_at).execute(p).await?;
            Ok(())
        })
    }

    pub async fn session_account(&self, id_hash: &str, now: i64) -> Result<Option<String>> {
        on_pool!(self, p => {
            let row = sqlx::query("SELECT account_id FROM sessions WHERE id_hash = $1 AND expires_at > $2")
                .bind(id_hash).bind(now).fetch_optional(p).await?;
            match row {
                Some(r) => Ok(Some(r.try_get("account_id")?)),
                None => Ok(None),
            }
        })
    }

    pub async fn delete_session(&self, id_hash: &str) -> Result<()> {
        on_pool!(self, p => {
            sqlx::query("DELETE FROM sessions WHERE id_hash = $1").bind(id_hash).execute(p).await?;
            Ok(())
        })
    }

    /// Places a hold of up to `plan.wanted`, at least `plan.minimum`, in one statement.
    /// Returns `(held, balance_after)`, or `None` when the balance is below the minimum.
    pub async fn hold(
        &self,
        hold_id: &str,
        account_id: &str,
        plan: &HoldPlan,
        expires_at: i64,
    ) -> Result<Option<(i64, i64)>> {
        let row = match self {
            // The INSERT reads the account under SQLite's write lock and the `holds_debit`
            // trigger applies the debit, all in one atomic statement.
            Ledger::Sqlite(p) => {
                sqlx::query(
                    "INSERT INTO holds (id, account_id, amount, expires_at, balance_after) \
                     SELECT $1, user_id, MIN(balance, $2), $3, balance - MIN(balance, $2) FROM accounts WHERE user_id = $4 AND balance >= $5 \
                     RETURNING amount, balance_after",
                )
                .bind(hold_id).bind(plan.wanted).bind(expires_at).bind(account_id).bind(plan.minimum)
                .fetch_optional(p).await?
                .map(|r| Ok::<_, StoreError>((r.try_get("amount")?, r.try_get("balance_after")?)))
                .transpose()?
            }
            // The conditional UPDATE re-checks the balance under the row lock; the INSERT
            // records the hold; one statement, one round trip.
            Ledger::Postgres(p) => {
                sqlx::query(
                    "WITH a AS (UPDATE accounts SET scratch = LEAST(balance, $2), balance = balance - LEAST(balance, $2) \
                       WHERE user_id = $4 AND balance >= $5 RETURNING scratch, balance) \
                     INSERT INTO holds (id, account_id, amount, expires_at, balance_after) \
                     SELECT $1, $4, scratch, $3, balance FROM a RETURNING amount, balance_after",
                )
                .bind(hold_id).bind(plan.wanted).bind(expires_at).bind(account_id).bind(plan.minimum)
                .fetch_optional(p).await?
                .map(|r| Ok::<_, StoreError>((r.try_get("amount")?, r.try_get("balance_after")?)))
                .transpose()?
            }
        };
        Ok(row)
    }

    /// Settles a hold to the actual cost and writes the request's one usage row, in one
    /// statement: refund the hold less the charge (clamped so the balance stays ≥ 0), delete
    /// the hold, insert the usage row. A hold already refunded by the reaper counts as 0.
    pub async fn settle(&self, s: &Settlement) -> Result<Settled> {
        // The hold id is the request id (one hold per request), which the SQLite trigger uses.
        debug_assert_eq!(s.hold_id, s.request_id);
        let row: (i64, i64) = match self {
            Ledger::Sqlite(p) => {
                let row = sqlx::query(
                    "INSERT INTO usage (request_id, account_id, key_id, model_requested, model_used, provider, prompt_tokens, completion_tokens, credits, status, latency_ms, created_at, balance_after) \
                     SELECT $1, a.user_id, $2, $3, $4, $5, $6, $7, MIN($8, a.balance + COALESCE(h.amount, 0)), $9, $10, $11, \
                            a.balance + COALESCE(h.amount, 0) - MIN($8, a.balance + COALESCE(h.amount, 0)) \
                     FROM accounts a LEFT JOIN holds h ON h.id = $1 WHERE a.user_id = $12 \
                     RETURNING credits, balance_after",
                )
                .bind(&s.request_id).bind(&s.key_id).bind(&s.model_requested).bind(&s.model_used).bind(&s.provider)
                .bind(s.prompt_tokens).bind(s.completion_tokens).bind(s.cost.max(0)).bind(s.status).bind(s.latency_ms).bind(s.now_ms)
                .bind(&s.account_id)
                .fetch_one(p).await?;
                (row.try_get("credits")?, row.try_get("balance_after")?)
            }
            Ledger::Postgres(p) => {
                let row = sqlx::query(
                    "WITH h AS (DELETE FROM holds WHERE id = $1 RETURNING amount), \
                          held AS (SELECT COALESCE((SELECT amount FROM h), 0) AS amount), \
                          a AS (UPDATE accounts SET scratch = LEAST($8, balance + (SELECT amount FROM held)), \
                                  balance = balance + (SELECT amount FROM held) - LEAST($8, balance + (SELECT amount FROM held)) \
                                WHERE user_id = $12 RETURNING scratch, balance) \
                     INSERT INTO usage (request_id, account_id, key_id, model_requested, model_used, provider, prompt_tokens, completion_tokens, credits, status, latency_ms, created_at, balance_after) \
                     SELECT $1, $12, $2, $3, $4, $5, $6, $7, a.scratch, $9, $10, $11, a.balance FROM a \
                     RETURNING credits, balance_after",
                )
                .bind(&s.request_id).bind(&s.key_id).bind(&s.model_requested).bind(&s.model_used).bind(&s.provider)
                .bind(s.prompt_tokens).bind(s.completion_tokens).bind(s.cost.max(0)).bind(s.status).bind(s.latency_ms).bind(s.now_ms)
                .bind(&s.account_id)
                .fetch_one(p).await?;
                (row.try_get("credits")?, row.try_get("balance_after")?)
            }
        };
        Ok(Settled {
            charged: row.0,
            balance: row.1,
        })
    }

    /// One round of a credit lease (src/leases.rs), in one transaction: write the batch of
    /// usage rows metered against the lease and take their charges out of the lease's row
    /// (the balance paid for them when the lease was taken), renew the lease's expiry, then
    /// either return what is left of it to the balance (`release`) or `give_back` of it, or move `topup` more into
    /// it where the balance stays at least `topup_min_balance`. Rows already written (a retry
    /// after a lost commit acknowledgement) are skipped and not charged again. A lease that the
    /// reaper already refunded (`lost`) has its batch charged to the balance, clamped at zero.
    pub async fn lease_sync(&self, r: &LeaseRound<'_>) -> Result<LeaseSynced> {
        on_pool!(self, p => {
            let mut tx = p.begin().await?;
            let mut charged = 0i64;
            for chunk in r.rows.chunks(500) {
                let mut q = sqlx::QueryBuilder::new(
                    "INSERT INTO usage (request_id, account_id, key_id, model_requested, model_used, provider, prompt_tokens, completion_tokens, credits, status, latency_ms, created_at, balance_after, lease_id) ",
                );
                q.push_values(chunk, |mut b, (s, balance_after)| {
                    b.push_bind(&s.request_id).push_bind(&s.account_id).push_bind(&s.key_id)
                        .push_bind(&s.model_requested).push_bind(&s.model_used).push_bind(&s.provider)
                        .push_bind(s.prompt_tokens).push_bind(s.completion_tokens).push_bind(s.cost)
                        .push_bind(s.status).push_bind(s.latency_ms).push_bind(s.now_ms)
                        .push_bind(*balance_after).push_bind(r.lease_id);
                });
                q.push(" ON CONFLICT (request_id) DO NOTHING RETURNING credits");
                // Not kept in the statement cache: each batch size is a different statement,
                // and a cache of up to 100 of them per connection held ~100 MB on SQLite.
                for row in q.build().persistent(false).fetch_all(&mut *tx).await? {
                    charged += row.try_get::<i64, _>("credits")?;
                }
            }
            let kept = sqlx::query("UPDATE holds SET amount = amount - $1, expires_at = $2 WHERE id = $3 RETURNING amount")
                .bind(charged).bind(r.expires_at).bind(r.lease_id)
                .fetch_optional(&mut *tx).await?;
            let lost = kept.is_none();
            if lost {
                sqlx::query("UPDATE accounts SET balance = CASE WHEN balance >= $1 THEN balance - $1 ELSE 0 END WHERE user_id = $2")
                    .bind(charged).bind(r.account_id).execute(&mut *tx).await?;
            }
            let mut topped_up = 0;
            let mut released = false;
            if !lost && r.release {
                let row = sqlx::query("DELETE FROM holds WHERE id = $1 RETURNING amount")
                    .bind(r.lease_id).fetch_one(&mut *tx).await?;
                let amount: i64 = row.try_get("amount")?;
                sqlx::query("UPDATE accounts SET balance = balance + $1 WHERE user_id = $2")
                    .bind(amount).bind(r.account_id).execute(&mut *tx).await?;
                released = true;
            } else if !lost && r.give_back > 0 {
                sqlx::query("UPDATE holds SET amount = amount - $1 WHERE id = $2")
                    .bind(r.give_back).bind(r.lease_id).execute(&mut *tx).await?;
                sqlx::query("UPDATE accounts SET balance = balance + $1 WHERE user_id = $2")
                    .bind(r.give_back).bind(r.account_id).execute(&mut *tx).await?;
            } else if !lost && r.topup > 0 {
                let moved = sqlx::query("UPDATE accounts SET balance = balance - $1 WHERE user_id = $2 AND balance >= $3")
                    .bind(r.topup).bind(r.account_id).bind(r.topup_min_balance)
                    .execute(&mut *tx).await?;
                if moved.rows_affected() == 1 {
                    sqlx::query("UPDATE holds SET amount = amount + $1 WHERE id = $2")
                        .bind(r.topup).bind(r.lease_id).execute(&mut *tx).await?;
                    topped_up = r.topup;
                }
            }
            let balance: i64 = sqlx::query("SELECT balance FROM accounts WHERE user_id = $1")
                .bind(r.account_id).fetch_one(&mut *tx).await?.try_get("balance")?;
            tx.commit().await?;
            Ok(LeaseSynced { lost, charged, topped_up, released, balance })
        })
    }

    /// Refunds holds past their expiry (left by a crashed instance). Each hold is deleted and
    /// refunded in one transaction, so two instances reaping at once refund it once.
    pub async fn release_expired_holds(&self, now: i64) -> Result<u64> {
        on_pool!(self, p => {
            let ids: Vec<String> = sqlx::query("SELECT id FROM holds WHERE expires_at < $1 LIMIT 500")
                .bind(now).fetch_all(p).await?
                .iter().map(|r| r.try_get("id")).collect::<std::result::Result<_, _>>()?;
            let mut released = 0;
            for id in ids {
                let mut tx = p.begin().await?;
                let row = sqlx::query("DELETE FROM holds WHERE id = $1 RETURNING account_id, amount")
                    .bind(&id).fetch_optional(&mut *tx).await?;
                if let Some(r) = row {
                    let account: String = r.try_get("account_id")?;
                    let amount: i64 = r.try_get("amount")?;
                    sqlx::query("UPDATE accounts SET balance = balance + $1 WHERE user_id = $2")
                        .bind(amount).bind(&account).execute(&mut *tx).await?;
                    released += 1;
                }
                tx.commit().await?;
            }
            Ok(released)
        })
    }

    /// An admin adjustment, recorded as a ledger entry. `Ok(None)`: no such account, or the
    /// adjustment would take the balance below zero.
    pub async fn adjust_credits(
        &self,
        account_id: &str,
        delta: i64,
        reason: &str,
        actor: &str,
        now: i64,
    ) -> Result<Option<i64>> {
        on_pool!(self, p => {
            let mut tx = p.begin().await?;
            let row = sqlx::query("UPDATE accounts SET balance = balance + $1 WHERE user_id = $2 AND balance + $1 >= 0 RETURNING balance")
                .bind(delta).bind(account_id).fetch_optional(&mut *tx).await?;
            let Some(row) = row else { return Ok(None) };
            let balance: i64 = row.try_get("balance")?;
            sqlx::query("INSERT INTO credit_ledger (account_id, delta, reason, actor, created_at) VALUES ($1, $2, $3, $4, $5)")
                .bind(account_id).bind(delta).bind(reason).bind(actor).bind(now)
                .execute(&mut *tx).await?;
            tx.commit().await?;
            Ok(Some(balance))
        })
    }

    pub async fn set_plan(
        &self,
        account_id: &str,
        plan: &str,
        per_hour: Option<i64>,
        per_day: Option<i64>,
    ) -> Result<bool> {
        on_pool!(self, p => {
            let r = sqlx::query("UPDATE accounts SET plan = $1, requests_per_hour = $2, requests_per_day = $3 WHERE user_id = $4")
                .bind(plan).bind(per_hour).bind(per_day).bind(account_id).execute(p).await?;
            Ok(r.rows_affected() == 1)
        })
    }

    pub async fn credit_ledger_sum(&self, account_id: &str) -> Result<i64> {
        on_pool!(self, p => {
            let r = sqlx::query("SELECT COALESCE(SUM(delta), 0) AS s FROM credit_ledger WHERE account_id = $1")
                .bind(account_id).fetch_one(p).await?;
            Ok(r.try_get::<i64, _>("s")?)
        })
    }

    /// Usage grouped by day (Unix day number) or by model since `since_ms`.
    pub async fn usage_by(
        &self,
        account_id: &str,
        since_ms: i64,
        by_day: bool,
    ) -> Result<Vec<UsageAgg>> {
        let key = if by_day {
            "CAST(created_at / 86400000 AS TEXT)"
        } else {
            "COALESCE(model_used, model_requested)"
        };
        let sql = format!(
            "SELECT {key} AS k, COUNT(*) AS n, CAST(COALESCE(SUM(prompt_tokens), 0) AS BIGINT) AS pt, CAST(COALESCE(SUM(completion_tokens), 0) AS BIGINT) AS ct, CAST(COALESCE(SUM(credits), 0) AS BIGINT) AS cr FROM usage WHERE account_id = $1 AND created_at >= $2 GROUP BY k ORDER BY k"
        );
        on_pool!(self, p => {
            let rows = sqlx::query(&sql).bind(account_id).bind(since_ms).fetch_all(p).await?;
            rows.iter().map(|r| Ok(UsageAgg {
                key: r.try_get("k")?,
                requests: r.try_get("n")?,
                prompt_tokens: r.try_get("pt")?,
                completion_tokens: r.try_get("ct")?,
                credits: r.try_get("cr")?,
            })).collect()
        })
    }

    pub async fn recent_usage(&self, account_id: &str, limit: i64) -> Result<Vec<UsageRow>> {
        on_pool!(self, p => {
            let rows = sqlx::query("SELECT request_id, model_requested, model_used, provider, prompt_tokens, completion_tokens, credits, status, latency_ms, created_at FROM usage WHERE account_id = $1 ORDER BY created_at DESC, request_id DESC LIMIT $2")
                .bind(account_id).bind(limit).fetch_all(p).await?;
            rows.iter().map(|r| Ok(UsageRow {
                request_id: r.try_get("request_id")?,
                model_requested: r.try_get("model_requested")?,
                model_used: r.try_get("model_used")?,
                provider: r.try_get("provider")?,
                prompt_tokens: r.try_get("prompt_tokens")?,
                completion_tokens: r.try_get("completion_tokens")?,
                credits: r.try_get("credits")?,
                status: r.try_get("status")?,
                latency_ms: r.try_get("latency_ms")?,
                created_at: r.try_get("created_at")?,
            })).collect()
        })
    }

    /// Sum of usage credits and count of rows for an account (tests and admin view).
    pub async fn usage_totals(&self, account_id: &str) -> Result<(i64, i64)> {
        on_pool!(self, p => {
            let r = sqlx::query("SELECT COUNT(*) AS n, CAST(COALESCE(SUM(credits), 0) AS BIGINT) AS s FROM usage WHERE account_id = $1")
                .bind(account_id).fetch_one(p).await?;
            Ok((r.try_get("n")?, r.try_get("s")?))
        })
    }
}
