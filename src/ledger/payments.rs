//! Payments' tables, read side and the operator's moves: the checkouts we created, an account's
//! subscription and payment history, anonymous accounts and their assignment. Webhook events
//! are applied by `payment_events.rs`, each in one transaction with its event record.

use sqlx::Row;

use super::store::{on_pool, Result};
use super::Ledger;

/// A Checkout Session we created (`POST /api/v1/billing/checkout`).
#[derive(Debug, Clone)]
pub struct Checkout {
    pub id: String,
    pub session_key: String,
    pub account_id: String,
    pub plan: Option<String>,
    pub credits_pack: Option<String>,
    pub mode: String,
}

/// An account's subscription as the webhook last left it.
#[derive(Debug, Clone, Default)]
pub struct Subscription {
    pub customer_id: Option<String>,
    pub subscription_id: Option<String>,
    pub status: Option<String>,
    /// Unix ms of the current period's end.
    pub renews_at: Option<i64>,
}

/// One applied payment (or take-back).
#[derive(Debug, Clone)]
pub struct Payment {
    pub source: String,
    pub event_id: String,
    pub kind: String,
    pub plan: Option<String>,
    pub credits_pack: Option<String>,
    pub credits: i64,
    pub amount: Option<i64>,
    pub currency: Option<String>,
    pub created_at: i64,
}

/// An anonymous account (identity step d) not yet assigned.
#[derive(Debug, Clone)]
pub struct Unclaimed {
    pub user_id: String,
    pub payer_email: Option<String>,
    pub plan: String,
    pub balance: i64,
    pub created_at: i64,
}

/// What an assignment moved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Assigned {
    Moved {
        credits: i64,
        plan: String,
    },
    /// No unclaimed anonymous account by that id.
    NoSuchAnonymous,
    /// No (real, unclaimed) target account.
    NoSuchTarget,
}

impl Ledger {
    pub async fn record_checkout(&self, c: &Checkout, now: i64) -> Result<()> {
        on_pool!(self, p => {
            sqlx::query("INSERT INTO checkouts (id, session_key, account_id, plan, credits_pack, mode, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)")
                .bind(&c.id).bind(&c.session_key).bind(&c.account_id).bind(&c.plan).bind(&c.credits_pack).bind(&c.mode).bind(now)
                .execute(p).await?;
            Ok(())
        })
    }

    /// Our checkout by its session id, else by its `session_key`.
    pub async fn checkout(&self, id: &str, session_key: Option<&str>) -> Result<Option<Checkout>> {
        on_pool!(self, p => {
            let row = sqlx::query("SELECT id, session_key, account_id, plan, credits_pack, mode FROM checkouts WHERE id = $1 OR session_key = $2 ORDER BY CASE WHEN id = $1 THEN 0 ELSE 1 END LIMIT 1")
                .bind(id).bind(session_key).fetch_optional(p).await?;
            let Some(r) = row else { return Ok(None) };
            Ok(Some(Checkout {
                id: r.try_get("id")?,
                session_key: r.try_get("session_key")?,
                account_id: r.try_get("account_id")?,
                plan: r.try_get("plan")?,
                credits_pack: r.try_get("credits_pack")?,
                mode: r.try_get("mode")?,
            }))
        })
    }

    /// Whether an event id has been recorded (a redelivery need not fetch anything).
    pub async fn event_seen(&self, id: &str) -> Result<bool> {
        on_pool!(self, p => {
            let r = sqlx::query("SELECT 1 AS one FROM stripe_events WHERE id = $1").bind(id).fetch_optional(p).await?;
            Ok(r.is_some())
        })
    }

    /// The account's Stripe customer and subscription.
    pub async fn subscription(&self, account_id: &str) -> Result<Subscription> {
        on_pool!(self, p => {
            let row = sqlx::query("SELECT stripe_customer_id, stripe_subscription_id, subscription_status, renews_at FROM accounts WHERE user_id = $1")
                .bind(account_id).fetch_optional(p).await?;
            let Some(r) = row else { return Ok(Subscription::default()) };
            Ok(Subscription {
                customer_id: r.try_get("stripe_customer_id")?,
                subscription_id: r.try_get("stripe_subscription_id")?,
                status: r.try_get("subscription_status")?,
                renews_at: r.try_get("renews_at")?,
            })
        })
    }

    /// The account's payments, newest first.
    pub async fn payments(&self, account_id: &str) -> Result<Vec<Payment>> {
        on_pool!(self, p => {
            let rows = sqlx::query("SELECT source, event_id, kind, plan, credits_pack, credits, amount, currency, created_at FROM payments WHERE account_id = $1 ORDER BY created_at DESC, source DESC LIMIT 200")
                .bind(account_id).fetch_all(p).await?;
            rows.iter().map(|r| Ok(Payment {
                source: r.try_get("source")?,
                event_id: r.try_get("event_id")?,
                kind: r.try_get("kind")?,
                plan: r.try_get("plan")?,
                credits_pack: r.try_get("credits_pack")?,
                credits: r.try_get("credits")?,
                amount: r.try_get("amount")?,
                currency: r.try_get("currency")?,
                created_at: r.try_get("created_at")?,
            })).collect()
        })
    }

    /// Anonymous accounts not yet assigned, oldest first.
    pub async fn unclaimed(&self) -> Result<Vec<Unclaimed>> {
        on_pool!(self, p => {
            let rows = sqlx::query("SELECT user_id, payer_email, plan, balance, created_at FROM accounts WHERE email IS NULL AND password_hash IS NULL AND payer_email IS NOT NULL AND claimed_by IS NULL ORDER BY created_at, user_id")
                .fetch_all(p).await?;
            rows.iter().map(|r| Ok(Unclaimed {
                user_id: r.try_get("user_id")?,
                payer_email: r.try_get("payer_email")?,
                plan: r.try_get("plan")?,
                balance: r.try_get("balance")?,
                created_at: r.try_get("created_at")?,
            })).collect()
        })
    }

    /// Moves an anonymous account's credits, paid plan and Stripe ids to `target` in one
    /// transaction, with a ledger entry on each side; the anonymous account is marked claimed.
    pub async fn assign_unclaimed(&self, anon: &str, target: &str, now: i64) -> Result<Assigned> {
        on_pool!(self, p => {
            let mut tx = p.begin().await?;
            // Claiming first takes the row (and on SQLite the write lock): a second assignment
            // of the same account finds nothing to claim.
            let row = sqlx::query("UPDATE accounts SET claimed_by = $1, scratch = balance, balance = 0 \
                                   WHERE user_id = $2 AND email IS NULL AND password_hash IS NULL AND payer_email IS NOT NULL AND claimed_by IS NULL \
                                   RETURNING scratch, plan, stripe_customer_id, stripe_subscription_id, subscription_status, renews_at")
                .bind(target).bind(anon).fetch_optional(&mut *tx).await?;
            let Some(r) = row else { return Ok(Assigned::NoSuchAnonymous) };
            let credits: i64 = r.try_get("scratch")?;
            let plan: String = r.try_get("plan")?;
            let customer: Option<String> = r.try_get("stripe_customer_id")?;
            let sub: Option<String> = r.try_get("stripe_subscription_id")?;
            let status: Option<String> = r.try_get("subscription_status")?;
            let renews: Option<i64> = r.try_get("renews_at")?;
            // The anonymous account keeps nothing that names a Stripe object: later renewals,
            // cancellations and refunds find the account it was assigned to.
            sqlx::query("UPDATE accounts SET plan = 'free', stripe_customer_id = NULL, stripe_subscription_id = NULL, subscription_status = NULL, renews_at = NULL WHERE user_id = $1")
                .bind(anon).execute(&mut *tx).await?;
            let paid_plan = (plan != crate::config::plans::FREE).then_some(plan.clone());
            let moved = sqlx::query("UPDATE accounts SET balance = balance + $1, plan = COALESCE($2, plan), \
                                     requests_per_hour = CASE WHEN $2 IS NULL THEN requests_per_hour ELSE NULL END, \
                                     requests_per_day = CASE WHEN $2 IS NULL THEN requests_per_day ELSE NULL END, \
                                     stripe_customer_id = COALESCE($3, stripe_customer_id), stripe_subscription_id = COALESCE($4, stripe_subscription_id), \
                                     subscription_status = COALESCE($5, subscription_status), renews_at = COALESCE($6, renews_at) \
                                     WHERE user_id = $7 AND claimed_by IS NULL AND password_hash IS NOT NULL")
                .bind(credits).bind(&paid_plan).bind(&customer).bind(&sub).bind(&status).bind(renews).bind(target)
                .execute(&mut *tx).await?;
            if moved.rows_affected() != 1 {
                return Ok(Assigned::NoSuchTarget);
            }
            let reason = format!("assigned from anonymous account {anon}");
            let back = format!("assigned to account {target}");
            for (acct, delta, why) in [(anon, -credits, &back), (target, credits, &reason)] {
                sqlx::query("INSERT INTO credit_ledger (account_id, delta, reason, actor, created_at) VALUES ($1, $2, $3, 'admin', $4)")
                    .bind(acct).bind(delta).bind(why).bind(now).execute(&mut *tx).await?;
            }
            sqlx::query("UPDATE payments SET account_id = $1 WHERE account_id = $2")
                .bind(target).bind(anon).execute(&mut *tx).await?;
            tx.commit().await?;
            Ok(Assigned::Moved { credits, plan })
        })
    }
}
