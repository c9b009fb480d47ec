//! Stripe webhook events applied exactly once: each runs in one transaction that first records
//! the event by its id (`INSERT … ON CONFLICT DO NOTHING`), so a redelivered or concurrently
//! delivered event finds the row taken and changes nothing. The first statement is that write,
//! which also takes SQLite's write lock before anything is read; on Postgres a concurrent
//! delivery waits on the id's unique index until the first commits, then does nothing.
//!
//! A grant is also once per thing paid for (`payments.source`: the Checkout Session, the renewal
//! invoice), so two different events about one session cannot grant twice either.

use std::collections::BTreeMap;

use sqlx::Row;

use super::store::{on_pool, Result};
use super::Ledger;

/// The outcome of one delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// The event id was recorded before: nothing changed.
    Duplicate,
    Done {
        account_id: Option<String>,
        matched_by: Option<&'static str>,
        outcome: String,
    },
}

/// A paid Checkout Session, as the webhook read it.
#[derive(Debug, Clone, Default)]
pub struct CheckoutPaid {
    pub event_id: String,
    pub event_type: String,
    pub session_id: String,
    pub client_reference_id: Option<String>,
    pub session_key: Option<String>,
    /// The payer's e-mail, normalised as sign-up normalises e-mails.
    pub payer_email: Option<String>,
    /// The plan bought (its grant in `grant`), or none for a credit pack.
    pub plan: Option<String>,
    pub credits_pack: Option<String>,
    /// µcr to grant.
    pub grant: i64,
    pub amount: Option<i64>,
    pub currency: Option<String>,
    pub customer: Option<String>,
    pub subscription: Option<String>,
    pub payment_intent: Option<String>,
    pub invoice: Option<String>,
    /// The id a new anonymous account gets if steps a–c match nothing.
    pub anonymous_id: String,
}

/// A subscription's renewal invoice (`invoice.paid`, `billing_reason = subscription_cycle`).
#[derive(Debug, Clone, Default)]
pub struct Renewal {
    pub event_id: String,
    pub invoice_id: String,
    pub customer: Option<String>,
    pub subscription: Option<String>,
    /// The plan the invoice's price maps to, if any (else the account's plan).
    pub plan: Option<String>,
    pub amount: Option<i64>,
    pub currency: Option<String>,
    pub payment_intent: Option<String>,
    pub renews_at: Option<i64>,
}

/// `customer.subscription.updated` / `.deleted`.
#[derive(Debug, Clone, Default)]
pub struct SubscriptionChange {
    pub event_id: String,
    pub event_type: String,
    pub subscription: String,
    pub customer: Option<String>,
    pub status: Option<String>,
    /// The plan the subscription's price maps to, if any.
    pub plan: Option<String>,
    pub renews_at: Option<i64>,
    pub deleted: bool,
}

/// `charge.refunded` / `charge.dispute.created`: take back what the payment granted.
#[derive(Debug, Clone, Default)]
pub struct Clawback {
    pub event_id: String,
    pub event_type: String,
    /// `refund` or `dispute`.
    pub kind: &'static str,
    pub payment_intent: Option<String>,
    pub invoice: Option<String>,
    /// The charge's amount and the amount refunded so far (a refund takes back that share of
    /// the grant; a dispute takes back all of it).
    pub amount: Option<i64>,
    pub amount_refunded: Option<i64>,
    pub currency: Option<String>,
}

/// Records the event (first statement of the transaction); evaluates to `false` for a duplicate.
macro_rules! claim_event {
    ($tx:expr, $id:expr, $ty:expr, $now:expr) => {{
        let r = sqlx::query("INSERT INTO stripe_events (id, type, outcome, created_at) VALUES ($1, $2, 'applying', $3) ON CONFLICT (id) DO NOTHING")
            .bind($id).bind($ty).bind($now).execute(&mut *$tx).await?;
        r.rows_affected() == 1
    }};
}

/// Writes the event's outcome, commits, and evaluates to `Applied::Done`.
macro_rules! finish {
    ($tx:expr, $id:expr, $account:expr, $matched:expr, $outcome:expr) => {{
        let account: Option<String> = $account;
        let matched: Option<&'static str> = $matched;
        let outcome: String = $outcome;
        sqlx::query(
            "UPDATE stripe_events SET account_id = $1, matched_by = $2, outcome = $3 WHERE id = $4",
        )
        .bind(&account)
        .bind(matched)
        .bind(&outcome)
        .bind($id)
        .execute(&mut *$tx)
        .await?;
        $tx.commit().await?;
        Ok(Applied::Done {
            account_id: account,
            matched_by: matched,
            outcome,
        })
    }};
}

/// One credit-ledger entry and the balance change it records (a grant: positive).
macro_rules! grant {
    ($tx:expr, $account:expr, $delta:expr, $reason:expr, $now:expr) => {{
        sqlx::query("UPDATE accounts SET balance = balance + $1 WHERE user_id = $2")
            .bind($delta).bind($account).execute(&mut *$tx).await?;
        sqlx::query("INSERT INTO credit_ledger (account_id, delta, reason, actor, created_at) VALUES ($1, $2, $3, 'stripe', $4)")
            .bind($account).bind($delta).bind($reason).bind($now).execute(&mut *$tx).await?;
    }};
}

/// Puts the account on `plan` with the plan's own limits (per-account numbers cleared), unless
/// it is on that plan already (then an operator's per-account limits stay).
const SET_PLAN: &str = "UPDATE accounts SET plan = $1, requests_per_hour = NULL, requests_per_day = NULL WHERE user_id = $2 AND plan <> $1";

impl Ledger {
    /// Records an event that changes nothing (unhandled type, unpaid session, no plan found).
    pub async fn record_event(
        &self,
        id: &str,
        ty: &str,
        outcome: &str,
        now: i64,
    ) -> Result<Applied> {
        on_pool!(self, p => {
            let mut tx = p.begin().await?;
            if !claim_event!(tx, id, ty, now) {
                return Ok(Applied::Duplicate);
            }
            finish!(tx, id, None, None, outcome.to_owned())
        })
    }

    /// A paid checkout: the account by SPEC.md's steps (a) client_reference_id, (b) session_key,
    /// (c) exact payer e-mail, (d) a new anonymous account; then plan, credits and Stripe ids.
    pub async fn apply_checkout(&self, c: &CheckoutPaid, now: i64) -> Result<Applied> {
        on_pool!(self, p => {
            let mut tx = p.begin().await?;
            if !claim_event!(tx, &c.event_id, &c.event_type, now) {
                return Ok(Applied::Duplicate);
            }
            let mut found: Option<(String, &'static str)> = None;
            if let Some(id) = &c.client_reference_id {
                let r = sqlx::query("SELECT user_id FROM accounts WHERE user_id = $1 AND claimed_by IS NULL")
                    .bind(id).fetch_optional(&mut *tx).await?;
                if let Some(r) = r {
                    found = Some((r.try_get("user_id")?, "client_reference_id"));
                }
            }
            if let (None, Some(k)) = (&found, &c.session_key) {
                let r = sqlx::query("SELECT account_id FROM checkouts WHERE session_key = $1")
                    .bind(k).fetch_optional(&mut *tx).await?;
                if let Some(r) = r {
                    found = Some((r.try_get("account_id")?, "session_key"));
                }
            }
            if let (None, Some(e)) = (&found, &c.payer_email) {
                let r = sqlx::query("SELECT user_id FROM accounts WHERE email = $1")
                    .bind(e).fetch_optional(&mut *tx).await?;
                if let Some(r) = r {
                    found = Some((r.try_get("user_id")?, "email"));
                }
            }
            let (account, matched) = match found {
                Some(f) => f,
                None => {
                    sqlx::query("INSERT INTO accounts (user_id, plan, balance, created_at, payer_email) VALUES ($1, 'free', 0, $2, $3)")
                        .bind(&c.anonymous_id).bind(now).bind(c.payer_email.as_deref().unwrap_or(""))
                        .execute(&mut *tx).await?;
                    (c.anonymous_id.clone(), "anonymous")
                }
            };
            let inserted = sqlx::query("INSERT INTO payments (source, event_id, account_id, kind, plan, credits_pack, credits, amount, currency, payment_intent, invoice_id, created_at) \
                                        VALUES ($1, $2, $3, 'checkout', $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT (source) DO NOTHING")
                .bind(&c.session_id).bind(&c.event_id).bind(&account).bind(&c.plan).bind(&c.credits_pack).bind(c.grant)
                .bind(c.amount).bind(&c.currency).bind(&c.payment_intent).bind(&c.invoice).bind(now)
                .execute(&mut *tx).await?;
            if inserted.rows_affected() == 0 {
                let outcome = format!("checkout {} was already applied", c.session_id);
                return finish!(tx, &c.event_id, Some(account), Some(matched), outcome);
            }
            if let Some(plan) = &c.plan {
                sqlx::query(SET_PLAN).bind(plan).bind(&account).execute(&mut *tx).await?;
            }
            sqlx::query("UPDATE accounts SET stripe_customer_id = COALESCE($1, stripe_customer_id), stripe_subscription_id = COALESCE($2, stripe_subscription_id), \
                         subscription_status = CASE WHEN $2 IS NULL THEN subscription_status ELSE 'active' END WHERE user_id = $3")
                .bind(&c.customer).bind(&c.subscription).bind(&account).execute(&mut *tx).await?;
            let what = match (&c.plan, &c.credits_pack) {
                (Some(p), _) => format!("plan {p}"),
                (None, Some(k)) => format!("credit pack {k}"),
                (None, None) => "payment".to_owned(),
            };
            if c.grant > 0 {
                let reason = format!("stripe {what}: checkout {} (event {})", c.session_id, c.event_id);
                grant!(tx, &account, c.grant, &reason, now);
            }
            let outcome = format!("{what} applied to {account} (matched by {matched})");
            finish!(tx, &c.event_id, Some(account), Some(matched), outcome)
        })
    }

    /// A renewal grants the plan's credits again (`grants`: plan → µcr).
    pub async fn apply_renewal(
        &self,
        r: &Renewal,
        grants: &BTreeMap<String, i64>,
        now: i64,
    ) -> Result<Applied> {
        on_pool!(self, p => {
            let mut tx = p.begin().await?;
            if !claim_event!(tx, &r.event_id, "invoice.paid", now) {
                return Ok(Applied::Duplicate);
            }
            // Only the account's own current subscription renews it, and only for a price we
            // sell: another subscription of the same customer grants nothing.
            let row = sqlx::query("SELECT user_id FROM accounts WHERE stripe_subscription_id = $1 AND claimed_by IS NULL")
                .bind(&r.subscription).fetch_optional(&mut *tx).await?;
            let Some(row) = row else {
                return finish!(tx, &r.event_id, None, None, "no account has this subscription".to_owned());
            };
            let account: String = row.try_get("user_id")?;
            let Some(plan) = r.plan.clone() else {
                return finish!(tx, &r.event_id, Some(account), None, "the invoice is for no price we sell: nothing granted".to_owned());
            };
            let credits = grants.get(&plan).copied().unwrap_or(0);
            let inserted = sqlx::query("INSERT INTO payments (source, event_id, account_id, kind, plan, credits, amount, currency, payment_intent, invoice_id, created_at) \
                                        VALUES ($1, $2, $3, 'renewal', $4, $5, $6, $7, $8, $1, $9) ON CONFLICT (source) DO NOTHING")
                .bind(&r.invoice_id).bind(&r.event_id).bind(&account).bind(&plan).bind(credits)
                .bind(r.amount).bind(&r.currency).bind(&r.payment_intent).bind(now)
                .execute(&mut *tx).await?;
            if inserted.rows_affected() == 0 {
                return finish!(tx, &r.event_id, Some(account), None, format!("invoice {} was already applied", r.invoice_id));
            }
            sqlx::query(SET_PLAN).bind(&plan).bind(&account).execute(&mut *tx).await?;
            sqlx::query("UPDATE accounts SET subscription_status = 'active', renews_at = COALESCE($1, renews_at) WHERE user_id = $2")
                .bind(r.renews_at).bind(&account).execute(&mut *tx).await?;
            if credits > 0 {
                let reason = format!("stripe renewal of plan {plan}: invoice {} (event {})", r.invoice_id, r.event_id);
                grant!(tx, &account, credits, &reason, now);
            }
            finish!(tx, &r.event_id, Some(account), None, format!("renewal of plan {plan} applied"))
        })
    }

    /// A subscription's first invoice was paid: its PaymentIntent is recorded on the checkout's
    /// payment (found by the invoice the session named), so a refund or dispute of it finds it.
    pub async fn record_first_invoice(
        &self,
        event_id: &str,
        invoice: &str,
        intent: Option<&str>,
        now: i64,
    ) -> Result<Applied> {
        on_pool!(self, p => {
            let mut tx = p.begin().await?;
            if !claim_event!(tx, event_id, "invoice.paid", now) {
                return Ok(Applied::Duplicate);
            }
            let done = sqlx::query("UPDATE payments SET payment_intent = COALESCE(payment_intent, $1) WHERE invoice_id = $2 AND kind = 'checkout'")
                .bind(intent).bind(invoice).execute(&mut *tx).await?;
            let outcome = if done.rows_affected() > 0 {
                "first invoice of a subscription: granted by its checkout; its payment recorded for refunds".to_owned()
            } else {
                "first invoice of a subscription: nothing to grant (the checkout grants)".to_owned()
            };
            finish!(tx, event_id, None, None, outcome)
        })
    }

    /// A subscription changed plan or status, or ended (back to `free`; credits stay).
    pub async fn apply_subscription(&self, s: &SubscriptionChange, now: i64) -> Result<Applied> {
        on_pool!(self, p => {
            let mut tx = p.begin().await?;
            if !claim_event!(tx, &s.event_id, &s.event_type, now) {
                return Ok(Applied::Duplicate);
            }
            // Only the account's current subscription moves it: the end of an older one must
            // not take a newer plan away.
            let row = sqlx::query("SELECT user_id, subscription_status FROM accounts WHERE stripe_subscription_id = $1 AND claimed_by IS NULL")
                .bind(&s.subscription).fetch_optional(&mut *tx).await?;
            let Some(row) = row else {
                return finish!(tx, &s.event_id, None, None, "no account has this subscription".to_owned());
            };
            let account: String = row.try_get("user_id")?;
            let status: Option<String> = row.try_get("subscription_status")?;
            // An update that arrives after the end (out of order, or retried) brings nothing back.
            if status.as_deref() == Some("canceled") {
                return finish!(tx, &s.event_id, Some(account), None, "the subscription has ended: nothing changed".to_owned());
            }
            if s.deleted {
                sqlx::query(SET_PLAN).bind(crate::config::plans::FREE).bind(&account).execute(&mut *tx).await?;
                sqlx::query("UPDATE accounts SET subscription_status = 'canceled', renews_at = NULL WHERE user_id = $1")
                    .bind(&account).execute(&mut *tx).await?;
                return finish!(tx, &s.event_id, Some(account), None, "subscription ended: plan free".to_owned());
            }
            let active = matches!(s.status.as_deref(), Some("active" | "trialing"));
            let mut outcome = format!("subscription {}", s.status.as_deref().unwrap_or("updated"));
            if let (true, Some(plan)) = (active, &s.plan) {
                sqlx::query(SET_PLAN).bind(plan).bind(&account).execute(&mut *tx).await?;
                outcome = format!("{outcome}: plan {plan}");
            }
            sqlx::query("UPDATE accounts SET subscription_status = COALESCE($1, subscription_status), renews_at = COALESCE($2, renews_at) WHERE user_id = $3")
                .bind(&s.status).bind(s.renews_at).bind(&account).execute(&mut *tx).await?;
            finish!(tx, &s.event_id, Some(account), None, outcome)
        })
    }

    /// Takes back what a refunded or disputed payment granted, clamped at the balance.
    pub async fn apply_clawback(&self, c: &Clawback, now: i64) -> Result<Applied> {
        on_pool!(self, p => {
            let mut tx = p.begin().await?;
            if !claim_event!(tx, &c.event_id, &c.event_type, now) {
                return Ok(Applied::Duplicate);
            }
            let row = sqlx::query("SELECT source, account_id, credits FROM payments WHERE kind IN ('checkout', 'renewal') \
                                   AND ((payment_intent = $1 AND $1 IS NOT NULL) OR (invoice_id = $2 AND $2 IS NOT NULL)) ORDER BY created_at LIMIT 1")
                .bind(&c.payment_intent).bind(&c.invoice).fetch_optional(&mut *tx).await?;
            let Some(row) = row else {
                return finish!(tx, &c.event_id, None, None, "no payment of ours matches this charge".to_owned());
            };
            let source: String = row.try_get("source")?;
            let account: String = row.try_get("account_id")?;
            let granted: i64 = row.try_get("credits")?;
            // Locks the payment's row (Postgres; SQLite holds the write lock already) so that two
            // refunds of one payment at once read each other's take-back, never both "none yet".
            sqlx::query("UPDATE payments SET refers_to = refers_to WHERE source = $1")
                .bind(&source).execute(&mut *tx).await?;
            let taken = sqlx::query("SELECT CAST(COALESCE(SUM(credits), 0) AS BIGINT) AS s FROM payments WHERE refers_to = $1")
                .bind(&source).fetch_one(&mut *tx).await?;
            let taken: i64 = -taken.try_get::<i64, _>("s")?;
            let due = match (c.kind, c.amount, c.amount_refunded) {
                ("refund", Some(a), Some(r)) if a > 0 && r < a => {
                    i64::try_from(i128::from(granted) * i128::from(r.max(0)) / i128::from(a)).unwrap_or(granted)
                }
                _ => granted,
            };
            let want = due - taken;
            if want <= 0 {
                return finish!(tx, &c.event_id, Some(account), None, format!("nothing more to take back for {source}"));
            }
            let r = sqlx::query("UPDATE accounts SET scratch = CASE WHEN balance < $1 THEN balance ELSE $1 END, \
                                 balance = CASE WHEN balance < $1 THEN 0 ELSE balance - $1 END WHERE user_id = $2 RETURNING scratch")
                .bind(want).bind(&account).fetch_one(&mut *tx).await?;
            let took: i64 = r.try_get("scratch")?;
            sqlx::query("INSERT INTO payments (source, event_id, account_id, kind, credits, amount, currency, payment_intent, invoice_id, refers_to, created_at) \
                         VALUES ($1, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10)")
                .bind(&c.event_id).bind(&account).bind(c.kind).bind(-took).bind(c.amount_refunded.or(c.amount))
                .bind(&c.currency).bind(&c.payment_intent).bind(&c.invoice).bind(&source).bind(now)
                .execute(&mut *tx).await?;
            let reason = format!("stripe {}: {source} (event {}), {took} of {want} µcr taken back", c.kind, c.event_id);
            sqlx::query("INSERT INTO credit_ledger (account_id, delta, reason, actor, created_at) VALUES ($1, $2, $3, 'stripe', $4)")
                .bind(&account).bind(-took).bind(&reason).bind(now).execute(&mut *tx).await?;
            tracing::warn!(account = %account, event = %c.event_id, "{reason}");
            finish!(tx, &c.event_id, Some(account), None, reason)
        })
    }
}
