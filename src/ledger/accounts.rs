//! Accounts: creation with the signup grant, lookups, plan and limits, admin adjustments
//! (each a `credit_ledger` entry).

use sqlx::Row;

use super::keys::NewKey;
use super::store::{on_pool, Ledger, Result};
use crate::config::plans::FREE;

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
                "INSERT INTO accounts (user_id, email, password_hash, plan, balance, created_at) VALUES ($1, $2, $3, $6, $4, $5)",
            )
            .bind(user_id).bind(email).bind(password_hash).bind(grant).bind(now).bind(FREE)
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
                plan: FREE.into(),
                balance: grant,
                requests_per_hour: None,
                requests_per_day: None,
                created_at: now,
            }))
        })
    }

    pub async fn account(&self, user_id: &str) -> Result<Option<Account>> {
        super::breaker::check()?;
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
}
