//! Credit holds and their settlement, one statement each (see the module doc of `ledger`),
//! and the reaper's refund of holds left by a crashed instance.

use sqlx::Row;
use tollgate_filters::credits::HoldSize;

use super::store::{on_pool, Ledger, Result, StoreError};

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
    /// What the hold decided for later candidates (topped up, lowered, skipped), if anything.
    pub hold_note: Option<String>,
    /// A tool call (kind `tool`): the service, the tool and the developer's share.
    pub tool: Option<ToolCharge>,
    /// What the request saved against list price, and whether it was a response cache hit.
    pub saving: Saving,
}

/// What a usage row saved against list price: a response cache hit's list cost less its charge,
/// else what the provider's cache reads took off the input rate (µcr).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Saving {
    pub cache_hit: bool,
    pub credits: i64,
}

/// What a tool call's usage row records besides the chat columns.
#[derive(Debug, Clone)]
pub struct ToolCharge {
    pub slug: String,
    pub tool: String,
    pub developer_id: String,
    /// µcr credited to the developer when the call is charged its price (0 for a failed call).
    pub developer_credits: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settled {
    pub charged: i64,
    pub balance: i64,
}

/// The settlement statement of each backend ($1 request, $2 key, $3–$5 models and provider,
/// $6–$7 tokens, $8 cost, $9 status, $10 latency, $11 time, $12 account, $13 hold note,
/// $14–$18 the tool call's kind, slug, tool, developer and developer credits, $19–$20 the
/// response cache hit and what the row saved).
const SETTLE_SQLITE: &str = "INSERT INTO usage_settlements (request_id, account_id, key_id, model_requested, model_used, provider, prompt_tokens, completion_tokens, credits, status, latency_ms, created_at, balance_after, hold_note, kind, tool_slug, tool_name, developer_id, developer_credits, cache_hit, saved_credits) \
     SELECT $1, a.user_id, $2, $3, $4, $5, $6, $7, MIN($8, a.balance + COALESCE(h.amount, 0)), $9, $10, $11, \
            a.balance + COALESCE(h.amount, 0) - MIN($8, a.balance + COALESCE(h.amount, 0)), $13, $14, $15, $16, $17, $18, $19, $20 \
     FROM accounts a LEFT JOIN holds h ON h.id = $1 WHERE a.user_id = $12 \
     RETURNING credits, balance_after";
const SETTLE_POSTGRES: &str = "WITH h AS (DELETE FROM holds WHERE id = $1 RETURNING amount), \
          held AS (SELECT COALESCE((SELECT amount FROM h), 0) AS amount), \
          a AS (UPDATE accounts SET scratch = LEAST($8, balance + (SELECT amount FROM held)), \
                  balance = balance + (SELECT amount FROM held) - LEAST($8, balance + (SELECT amount FROM held)) \
                WHERE user_id = $12 RETURNING scratch, balance) \
     INSERT INTO usage (request_id, account_id, key_id, model_requested, model_used, provider, prompt_tokens, completion_tokens, credits, status, latency_ms, created_at, balance_after, hold_note, kind, tool_slug, tool_name, developer_id, developer_credits, cache_hit, saved_credits) \
     SELECT $1, $12, $2, $3, $4, $5, $6, $7, a.scratch, $9, $10, $11, a.balance, $13, $14, $15, $16, $17, $18, $19, $20 FROM a \
     RETURNING credits, balance_after";

/// Runs the settlement statement on `$p` (a pool), in a transaction with the developer's
/// credit when `$pays` names a tool call that earns; evaluates to `(charged, balance)`.
macro_rules! settle_on {
    ($p:expr, $sql:expr, $s:expr, $pays:expr) => {{
        let s = $s;
        let tool = s.tool.as_ref();
        let q = sqlx::query($sql)
            .bind(&s.request_id).bind(&s.key_id).bind(&s.model_requested).bind(&s.model_used).bind(&s.provider)
            .bind(s.prompt_tokens).bind(s.completion_tokens).bind(s.cost.max(0)).bind(s.status).bind(s.latency_ms).bind(s.now_ms)
            .bind(&s.account_id).bind(&s.hold_note)
            .bind(if tool.is_some() { "tool" } else { "chat" })
            .bind(tool.map(|t| t.slug.as_str())).bind(tool.map(|t| t.tool.as_str()))
            .bind(tool.map(|t| t.developer_id.as_str())).bind(tool.map(|t| t.developer_credits))
            .bind(i64::from(s.saving.cache_hit)).bind(s.saving.credits);
        match $pays {
            None => {
                // Run to its end (the `ledger` module doc): fetching one row of an
                // autocommit statement would drop a failed commit on SQLite.
                let row = q.fetch_all($p).await?.into_iter().next().ok_or(sqlx::Error::RowNotFound)?;
                (row.try_get("credits")?, row.try_get("balance_after")?)
            }
            Some(t) => {
                let mut tx = $p.begin().await?;
                let row = q.fetch_one(&mut *tx).await?;
                let charged: i64 = row.try_get("credits")?;
                // Only a call charged its full price pays the developer.
                if charged >= s.cost {
                    sqlx::query("UPDATE accounts SET balance = balance + $1 WHERE user_id = $2")
                        .bind(t.developer_credits).bind(&t.developer_id).execute(&mut *tx).await?;
                    sqlx::query("INSERT INTO credit_ledger (account_id, delta, reason, actor, created_at) VALUES ($1, $2, 'mcp_earning', $3, $4)")
                        .bind(&t.developer_id).bind(t.developer_credits).bind(format!("mcp:{}", t.slug)).bind(s.now_ms)
                        .execute(&mut *tx).await?;
                }
                let balance = row.try_get("balance_after")?;
                tx.commit().await?;
                (charged, balance)
            }
        }
    }};
}

impl Ledger {
    /// Places a hold of up to `size.wanted`, at least `size.minimum`, in one statement.
    /// Returns `(held, balance_after)`, or `None` when the balance is below the minimum.
    pub async fn hold(
        &self,
        hold_id: &str,
        account_id: &str,
        size: &HoldSize,
        expires_at: i64,
    ) -> Result<Option<(i64, i64)>> {
        super::breaker::check()?;
        let row = match self {
            // The INSERT reads the account under SQLite's write lock and the `holds_debit`
            // trigger applies the debit, all in one atomic statement.
            Ledger::Sqlite(p) => {
                sqlx::query(
                    "INSERT INTO holds (id, account_id, amount, expires_at, balance_after) \
                     SELECT $1, user_id, MIN(balance, $2), $3, balance - MIN(balance, $2) FROM accounts WHERE user_id = $4 AND balance >= $5 \
                     RETURNING amount, balance_after",
                )
                .bind(hold_id).bind(size.wanted).bind(expires_at).bind(account_id).bind(size.minimum)
                .fetch_all(p).await?.into_iter().next()
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
                .bind(hold_id).bind(size.wanted).bind(expires_at).bind(account_id).bind(size.minimum)
                .fetch_all(p).await?.into_iter().next()
                .map(|r| Ok::<_, StoreError>((r.try_get("amount")?, r.try_get("balance_after")?)))
                .transpose()?
            }
        };
        Ok(row)
    }

    /// Adds `extra` to a hold in flight (before a failover to a pricier model), taking it from
    /// the balance, in one transaction: the hold row is updated first (on Postgres that locks
    /// it against the reaper), and only while it has not expired; the balance pays only what it
    /// has. False, and nothing changed, when either refuses.
    pub async fn top_up_hold(
        &self,
        hold_id: &str,
        account_id: &str,
        extra: i64,
        now_ms: i64,
    ) -> Result<bool> {
        super::breaker::check()?;
        on_pool!(self, p => {
            let mut tx = p.begin().await?;
            let grown = sqlx::query("UPDATE holds SET amount = amount + $1 WHERE id = $2 AND account_id = $3 AND expires_at > $4")
                .bind(extra).bind(hold_id).bind(account_id).bind(now_ms)
                .execute(&mut *tx).await?;
            if grown.rows_affected() != 1 {
                return Ok(false);
            }
            let paid = sqlx::query("UPDATE accounts SET balance = balance - $1 WHERE user_id = $2 AND balance >= $1")
                .bind(extra).bind(account_id)
                .execute(&mut *tx).await?;
            if paid.rows_affected() != 1 {
                return Ok(false);
            }
            tx.commit().await?;
            Ok(true)
        })
    }

    /// Settles a hold to the actual cost and writes the request's one usage row, in one
    /// statement: refund the hold less the charge (clamped so the balance stays ≥ 0), delete
    /// the hold, insert the usage row. A hold already refunded by the reaper counts as 0. A
    /// paid tool call also credits its developer's share, in the same transaction.
    pub async fn settle(&self, s: &Settlement) -> Result<Settled> {
        super::breaker::check()?;
        // The hold id is the request id (one hold per request), which the SQLite trigger uses.
        debug_assert_eq!(s.hold_id, s.request_id);
        let pays = s
            .tool
            .as_ref()
            .filter(|t| t.developer_credits > 0 && s.cost > 0);
        let row: (i64, i64) = match self {
            Ledger::Sqlite(p) => settle_on!(p, SETTLE_SQLITE, s, pays),
            Ledger::Postgres(p) => settle_on!(p, SETTLE_POSTGRES, s, pays),
        };
        Ok(Settled {
            charged: row.0,
            balance: row.1,
        })
    }

    /// [`Ledger::settle`] for a settlement that failed before (a retry): `None`, and nothing
    /// written, when its usage row is already there (the earlier commit went through and only
    /// its acknowledgement was lost), so a retry never charges twice. Only the one retry pass
    /// of this instance writes a given request's settlement, so the check cannot race.
    pub async fn settle_once(&self, s: &Settlement) -> Result<Option<Settled>> {
        let written = on_pool!(self, p => sqlx::query("SELECT 1 FROM usage WHERE request_id = $1")
            .bind(&s.request_id).fetch_optional(p).await?.is_some());
        if written {
            return Ok(None);
        }
        self.settle(s).await.map(Some)
    }

    /// Deletes a hold and refunds it, whatever its expiry: one whose write reported an error
    /// (it may have committed). False when there was none.
    pub async fn cancel_hold(&self, hold_id: &str) -> Result<bool> {
        on_pool!(self, p => {
            let mut tx = p.begin().await?;
            let row = sqlx::query("DELETE FROM holds WHERE id = $1 RETURNING account_id, amount")
                .bind(hold_id).fetch_optional(&mut *tx).await?;
            let Some(r) = row else { return Ok(false) };
            let account: String = r.try_get("account_id")?;
            let amount: i64 = r.try_get("amount")?;
            sqlx::query("UPDATE accounts SET balance = balance + $1 WHERE user_id = $2")
                .bind(amount).bind(&account).execute(&mut *tx).await?;
            tx.commit().await?;
            Ok(true)
        })
    }

    /// Refunds holds past their expiry (left by a crashed instance). Each hold is deleted and
    /// refunded in one transaction of its own, its expiry checked again in the `DELETE`, so two
    /// instances reaping at once refund it once and a lease renewed meanwhile is kept.
    pub async fn release_expired_holds(&self, now: i64) -> Result<u64> {
        on_pool!(self, p => {
            let ids: Vec<String> = sqlx::query("SELECT id FROM holds WHERE expires_at < $1 LIMIT 500")
                .bind(now).fetch_all(p).await?
                .iter().map(|r| r.try_get("id")).collect::<std::result::Result<_, _>>()?;
            let mut released = 0;
            for id in ids {
                // Each hold on its own: one that fails is logged and left for the next round.
                let one = async {
                    let mut tx = p.begin().await?;
                    // Expiry checked again: a lease renewed since the SELECT is not reaped.
                    let row = sqlx::query("DELETE FROM holds WHERE id = $1 AND expires_at < $2 RETURNING account_id, amount")
                        .bind(&id).bind(now).fetch_optional(&mut *tx).await?;
                    let mut n = 0;
                    if let Some(r) = row {
                        let account: String = r.try_get("account_id")?;
                        let amount: i64 = r.try_get("amount")?;
                        sqlx::query("UPDATE accounts SET balance = balance + $1 WHERE user_id = $2")
                            .bind(amount).bind(&account).execute(&mut *tx).await?;
                        n = 1;
                    }
                    tx.commit().await?;
                    Ok::<u64, StoreError>(n)
                };
                match one.await {
                    Ok(n) => released += n,
                    Err(e) => tracing::error!(hold = %id, "could not refund an expired hold: {e}"),
                }
            }
            Ok(released)
        })
    }
}
