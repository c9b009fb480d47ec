//! Events sent to customers (issue 52): endpoints, the events written once each by their
//! dedupe key, and the outbox of deliveries, numbered per endpoint.
//!
//! An event is written with its deliveries in one transaction whose first statement is the
//! event's `INSERT … ON CONFLICT (dedupe) DO NOTHING`: a second instance writing the same event
//! finds the key taken and writes nothing (on Postgres it waits on the unique index until the
//! first commits). Each delivery takes the endpoint's next number from an `UPDATE … RETURNING`
//! of the endpoint's row, which holds that row until the commit, so numbers are given in
//! commit order. A delivery is claimed for one attempt by a conditional `UPDATE` of its
//! `locked_until`: one instance wins, and only an endpoint's lowest pending number is due.

use sqlx::Row;

use super::store::{on_pool, Result};
use super::Ledger;

#[derive(Debug, Clone)]
pub struct Endpoint {
    pub id: String,
    pub wallet_id: String,
    pub is_org: bool,
    pub url: String,
    pub description: Option<String>,
    pub events: Vec<String>,
    pub secret: String,
    pub enabled: bool,
    /// µcr.
    pub balance_threshold: Option<i64>,
    pub balance_low: bool,
    pub created_at: i64,
}

impl Endpoint {
    pub fn wants(&self, event_type: &str) -> bool {
        self.events.iter().any(|e| e == event_type)
    }
}

/// A change of an endpoint; `None` leaves a field as it is (`Some(None)` clears one that may
/// be empty).
#[derive(Debug, Clone, Default)]
pub struct EndpointChange {
    pub url: Option<String>,
    pub events: Option<Vec<String>>,
    pub enabled: Option<bool>,
    pub description: Option<Option<String>>,
    pub balance_threshold: Option<Option<i64>>,
}

/// An event to write: its id, type, wallet, dedupe key and the body every delivery sends.
#[derive(Debug, Clone)]
pub struct NewEvent {
    pub id: String,
    pub wallet_id: String,
    pub event_type: String,
    pub dedupe: String,
    pub payload: String,
    pub created_at: i64,
}

/// One delivery, claimed for an attempt, with what the attempt needs.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub endpoint_id: String,
    pub seq: i64,
    pub event_id: String,
    pub event_type: String,
    pub payload: String,
    pub url: String,
    pub secret: String,
    pub attempts: i64,
    pub created_at: i64,
}

/// A delivery as its log shows it.
#[derive(Debug, Clone)]
pub struct DeliveryRow {
    pub seq: i64,
    pub event_id: String,
    pub event_type: String,
    pub status: String,
    pub attempts: i64,
    pub next_at: i64,
    pub last_status: Option<i64>,
    pub last_error: Option<String>,
    pub created_at: i64,
    pub finished_at: Option<i64>,
}

/// A key with an expiry, for `key.expiring` and `key.expired`.
#[derive(Debug, Clone)]
pub struct ExpiringKey {
    pub id: String,
    pub wallet_id: String,
    pub name: String,
    pub prefix: String,
    pub owner_id: Option<String>,
    pub expires_at: i64,
}

/// A payment applied to a wallet, for `payment.received`.
#[derive(Debug, Clone)]
pub struct PaymentRow {
    pub account_id: String,
    pub kind: String,
    pub plan: Option<String>,
    pub credits_pack: Option<String>,
    pub credits: i64,
    pub amount: Option<i64>,
    pub currency: Option<String>,
}

const COLS: &str = "id, wallet_id, is_org, url, description, events, secret, enabled, balance_threshold, balance_low, created_at";

fn endpoint_of<R: Row>(r: &R) -> std::result::Result<Endpoint, sqlx::Error>
where
    for<'c> &'c str: sqlx::ColumnIndex<R>,
    for<'q> i64: sqlx::Decode<'q, R::Database> + sqlx::Type<R::Database>,
    for<'q> Option<i64>: sqlx::Decode<'q, R::Database> + sqlx::Type<R::Database>,
    for<'q> String: sqlx::Decode<'q, R::Database> + sqlx::Type<R::Database>,
    for<'q> Option<String>: sqlx::Decode<'q, R::Database> + sqlx::Type<R::Database>,
{
    Ok(Endpoint {
        id: r.try_get("id")?,
        wallet_id: r.try_get("wallet_id")?,
        is_org: r.try_get::<i64, _>("is_org")? != 0,
        url: r.try_get("url")?,
        description: r.try_get("description")?,
        events: serde_json::from_str(&r.try_get::<String, _>("events")?).unwrap_or_default(),
        secret: r.try_get("secret")?,
        enabled: r.try_get::<i64, _>("enabled")? != 0,
        balance_threshold: r.try_get("balance_threshold")?,
        balance_low: r.try_get::<i64, _>("balance_low")? != 0,
        created_at: r.try_get("created_at")?,
    })
}

fn delivery_of<R: Row>(r: &R) -> std::result::Result<DeliveryRow, sqlx::Error>
where
    for<'c> &'c str: sqlx::ColumnIndex<R>,
    for<'q> i64: sqlx::Decode<'q, R::Database> + sqlx::Type<R::Database>,
    for<'q> Option<i64>: sqlx::Decode<'q, R::Database> + sqlx::Type<R::Database>,
    for<'q> String: sqlx::Decode<'q, R::Database> + sqlx::Type<R::Database>,
    for<'q> Option<String>: sqlx::Decode<'q, R::Database> + sqlx::Type<R::Database>,
{
    Ok(DeliveryRow {
        seq: r.try_get("seq")?,
        event_id: r.try_get("event_id")?,
        event_type: r.try_get("type")?,
        status: r.try_get("status")?,
        attempts: r.try_get("attempts")?,
        next_at: r.try_get("next_at")?,
        last_status: r.try_get("last_status")?,
        last_error: r.try_get("last_error")?,
        created_at: r.try_get("created_at")?,
        finished_at: r.try_get("finished_at")?,
    })
}

impl Ledger {
    pub async fn create_endpoint(&self, e: &Endpoint) -> Result<()> {
        let events = serde_json::to_string(&e.events).unwrap_or_else(|_| "[]".into());
        on_pool!(self, p => {
            sqlx::query("INSERT INTO webhook_endpoints (id, wallet_id, is_org, url, description, events, secret, enabled, balance_threshold, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)")
                .bind(&e.id).bind(&e.wallet_id).bind(i64::from(e.is_org)).bind(&e.url)
                .bind(&e.description).bind(&events).bind(&e.secret).bind(i64::from(e.enabled))
                .bind(e.balance_threshold).bind(e.created_at)
                .execute(p).await?;
            Ok(())
        })
    }

    pub async fn endpoint(&self, id: &str) -> Result<Option<Endpoint>> {
        on_pool!(self, p => {
            let row = sqlx::query(&format!("SELECT {COLS} FROM webhook_endpoints WHERE id = $1"))
                .bind(id).fetch_optional(p).await?;
            Ok(row.as_ref().map(endpoint_of).transpose()?)
        })
    }

    /// A wallet's endpoints, oldest first.
    pub async fn endpoints(&self, wallet: &str) -> Result<Vec<Endpoint>> {
        on_pool!(self, p => {
            let rows = sqlx::query(&format!("SELECT {COLS} FROM webhook_endpoints WHERE wallet_id = $1 ORDER BY created_at, id"))
                .bind(wallet).fetch_all(p).await?;
            Ok(rows.iter().map(endpoint_of).collect::<std::result::Result<_, _>>()?)
        })
    }

    /// The wallets with an enabled endpoint (each instance's cache of whom to watch).
    pub async fn watched_wallets(&self) -> Result<Vec<String>> {
        on_pool!(self, p => {
            let rows = sqlx::query("SELECT DISTINCT wallet_id FROM webhook_endpoints WHERE enabled = 1")
                .fetch_all(p).await?;
            rows.iter().map(|r| Ok(r.try_get("wallet_id")?)).collect()
        })
    }

    /// Applies `c` to endpoint `id`; false when there is no such endpoint.
    pub async fn update_endpoint(&self, id: &str, c: &EndpointChange) -> Result<bool> {
        let events = c
            .events
            .as_ref()
            .map(|e| serde_json::to_string(e).unwrap_or_else(|_| "[]".into()));
        let (set_desc, desc) = (c.description.is_some(), c.description.clone().flatten());
        let (set_thr, thr) = (c.balance_threshold.is_some(), c.balance_threshold.flatten());
        on_pool!(self, p => {
            let done = sqlx::query("UPDATE webhook_endpoints SET url = COALESCE($1, url), events = COALESCE($2, events), enabled = COALESCE($3, enabled), description = CASE WHEN $4 = 1 THEN $5 ELSE description END, balance_threshold = CASE WHEN $6 = 1 THEN $7 ELSE balance_threshold END, balance_low = CASE WHEN $6 = 1 THEN 0 ELSE balance_low END WHERE id = $8")
                .bind(&c.url).bind(&events).bind(c.enabled.map(i64::from))
                .bind(i64::from(set_desc)).bind(&desc)
                .bind(i64::from(set_thr)).bind(thr).bind(id)
                .execute(p).await?;
            Ok(done.rows_affected() == 1)
        })
    }

    pub async fn set_endpoint_secret(&self, id: &str, secret: &str) -> Result<bool> {
        on_pool!(self, p => {
            let done = sqlx::query("UPDATE webhook_endpoints SET secret = $1 WHERE id = $2")
                .bind(secret).bind(id).execute(p).await?;
            Ok(done.rows_affected() == 1)
        })
    }

    /// Deletes an endpoint and its deliveries (its events stay: their dedupe keys still hold).
    pub async fn delete_endpoint(&self, id: &str) -> Result<bool> {
        on_pool!(self, p => {
            let mut tx = p.begin().await?;
            sqlx::query("DELETE FROM webhook_deliveries WHERE endpoint_id = $1")
                .bind(id).execute(&mut *tx).await?;
            let done = sqlx::query("DELETE FROM webhook_endpoints WHERE id = $1")
                .bind(id).execute(&mut *tx).await?;
            tx.commit().await?;
            Ok(done.rows_affected() == 1)
        })
    }

    /// Writes `ev` once (by its dedupe key) with a delivery to each of `endpoints`, in one
    /// transaction; false when the key was taken (nothing written).
    pub async fn write_event(&self, ev: &NewEvent, endpoints: &[String]) -> Result<bool> {
        on_pool!(self, p => {
            let mut tx = p.begin().await?;
            let first = sqlx::query("INSERT INTO webhook_events (id, wallet_id, type, dedupe, payload, created_at) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (dedupe) DO NOTHING")
                .bind(&ev.id).bind(&ev.wallet_id).bind(&ev.event_type).bind(&ev.dedupe)
                .bind(&ev.payload).bind(ev.created_at)
                .execute(&mut *tx).await?;
            if first.rows_affected() != 1 {
                tx.rollback().await?;
                return Ok(false);
            }
            for e in endpoints {
                let rows = sqlx::query("UPDATE webhook_endpoints SET last_seq = last_seq + 1 WHERE id = $1 RETURNING last_seq")
                    .bind(e).fetch_all(&mut *tx).await?;
                let Some(seq) = rows.first().map(|r| r.try_get::<i64, _>("last_seq")).transpose()? else {
                    continue;
                };
                sqlx::query("INSERT INTO webhook_deliveries (endpoint_id, seq, event_id, status, next_at, created_at) VALUES ($1, $2, $3, 'pending', $4, $4)")
                    .bind(e).bind(seq).bind(&ev.id).bind(ev.created_at)
                    .execute(&mut *tx).await?;
            }
            tx.commit().await?;
            Ok(true)
        })
    }

    /// The deliveries due at `now`: each enabled endpoint's lowest pending number, when its
    /// time has come and no instance holds it; at most `limit`.
    pub async fn due_deliveries(&self, now: i64, limit: i64) -> Result<Vec<(String, i64)>> {
        on_pool!(self, p => {
            let rows = sqlx::query("SELECT d.endpoint_id, d.seq FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id WHERE e.enabled = 1 AND d.status = 'pending' AND d.next_at <= $1 AND d.locked_until <= $1 AND d.seq = (SELECT MIN(o.seq) FROM webhook_deliveries o WHERE o.endpoint_id = d.endpoint_id AND o.status = 'pending') ORDER BY d.next_at LIMIT $2")
                .bind(now).bind(limit).fetch_all(p).await?;
            rows.iter().map(|r| Ok((r.try_get("endpoint_id")?, r.try_get("seq")?))).collect()
        })
    }

    /// Claims delivery (`endpoint`, `seq`) for one attempt until `until`; `None` when another
    /// instance holds it or it is no longer pending.
    pub async fn claim_delivery(
        &self,
        endpoint: &str,
        seq: i64,
        now: i64,
        until: i64,
    ) -> Result<Option<Claimed>> {
        on_pool!(self, p => {
            let done = sqlx::query("UPDATE webhook_deliveries SET locked_until = $1 WHERE endpoint_id = $2 AND seq = $3 AND status = 'pending' AND locked_until <= $4")
                .bind(until).bind(endpoint).bind(seq).bind(now).execute(p).await?;
            if done.rows_affected() != 1 {
                return Ok(None);
            }
            let row = sqlx::query("SELECT d.event_id, d.attempts, v.type, v.payload, v.created_at, e.url, e.secret FROM webhook_deliveries d JOIN webhook_events v ON v.id = d.event_id JOIN webhook_endpoints e ON e.id = d.endpoint_id WHERE d.endpoint_id = $1 AND d.seq = $2")
                .bind(endpoint).bind(seq).fetch_optional(p).await?;
            let Some(r) = row else { return Ok(None) };
            Ok(Some(Claimed {
                endpoint_id: endpoint.to_owned(),
                seq,
                event_id: r.try_get("event_id")?,
                event_type: r.try_get("type")?,
                payload: r.try_get("payload")?,
                url: r.try_get("url")?,
                secret: r.try_get("secret")?,
                attempts: r.try_get("attempts")?,
                created_at: r.try_get("created_at")?,
            }))
        })
    }

    /// Records an attempt: `delivered` (a 2xx), else its status or error, and then either the
    /// next try at `next_at` or, with `next_at` `None`, the delivery given up.
    pub async fn record_attempt(
        &self,
        (endpoint, seq): (&str, i64),
        delivered: bool,
        (status, error): (Option<i64>, Option<&str>),
        next_at: Option<i64>,
        now: i64,
    ) -> Result<()> {
        let state = match (delivered, next_at) {
            (true, _) => "delivered",
            (false, Some(_)) => "pending",
            (false, None) => "failed",
        };
        let finished = (state != "pending").then_some(now);
        on_pool!(self, p => {
            sqlx::query("UPDATE webhook_deliveries SET status = $1, attempts = attempts + 1, last_status = $2, last_error = $3, next_at = $4, locked_until = 0, finished_at = $5 WHERE endpoint_id = $6 AND seq = $7 AND status = 'pending'")
                .bind(state).bind(status).bind(error).bind(next_at.unwrap_or(now)).bind(finished)
                .bind(endpoint).bind(seq).execute(p).await?;
            Ok(())
        })
    }

    /// An endpoint's deliveries, newest first, at most `limit`.
    pub async fn deliveries(&self, endpoint: &str, limit: i64) -> Result<Vec<DeliveryRow>> {
        on_pool!(self, p => {
            let rows = sqlx::query("SELECT d.seq, d.event_id, v.type, d.status, d.attempts, d.next_at, d.last_status, d.last_error, d.created_at, d.finished_at FROM webhook_deliveries d JOIN webhook_events v ON v.id = d.event_id WHERE d.endpoint_id = $1 ORDER BY d.seq DESC LIMIT $2")
                .bind(endpoint).bind(limit).fetch_all(p).await?;
            Ok(rows.iter().map(delivery_of).collect::<std::result::Result<_, _>>()?)
        })
    }

    /// Marks endpoint `id` below its threshold, when it was not: true once per episode (the
    /// caller then writes the event, its dedupe key naming the episode returned).
    pub async fn enter_balance_low(&self, id: &str) -> Result<Option<i64>> {
        on_pool!(self, p => {
            let rows = sqlx::query("UPDATE webhook_endpoints SET balance_low = 1, balance_episode = balance_episode + 1 WHERE id = $1 AND balance_low = 0 RETURNING balance_episode")
                .bind(id).fetch_all(p).await?;
            Ok(rows.first().map(|r| r.try_get::<i64, _>("balance_episode")).transpose()?)
        })
    }

    /// The balance is back at or above endpoint `id`'s threshold: the next fall is an event.
    pub async fn rearm_balance_low(&self, id: &str) -> Result<()> {
        on_pool!(self, p => {
            sqlx::query("UPDATE webhook_endpoints SET balance_low = 0 WHERE id = $1 AND balance_low = 1")
                .bind(id).execute(p).await?;
            Ok(())
        })
    }

    /// Live keys of watched wallets expiring between `from` and `to` (ms).
    pub async fn expiring_keys(&self, from: i64, to: i64) -> Result<Vec<ExpiringKey>> {
        on_pool!(self, p => {
            let rows = sqlx::query("SELECT k.id, k.account_id, k.name, k.prefix, k.owner_id, k.expires_at FROM api_keys k WHERE k.revoked_at IS NULL AND k.expires_at IS NOT NULL AND k.expires_at > $1 AND k.expires_at <= $2 AND k.account_id IN (SELECT wallet_id FROM webhook_endpoints WHERE enabled = 1)")
                .bind(from).bind(to).fetch_all(p).await?;
            rows.iter().map(|r| Ok(ExpiringKey {
                id: r.try_get("id")?,
                wallet_id: r.try_get("account_id")?,
                name: r.try_get("name")?,
                prefix: r.try_get("prefix")?,
                owner_id: r.try_get("owner_id")?,
                expires_at: r.try_get("expires_at")?,
            })).collect()
        })
    }

    /// What a Stripe event granted (a checkout or a renewal), if it granted anything.
    pub async fn payment_of_event(&self, event_id: &str) -> Result<Option<PaymentRow>> {
        on_pool!(self, p => {
            let row = sqlx::query("SELECT account_id, kind, plan, credits_pack, credits, amount, currency FROM payments WHERE event_id = $1 AND kind IN ('checkout', 'renewal') ORDER BY created_at LIMIT 1")
                .bind(event_id).fetch_optional(p).await?;
            row.map(|r| Ok(PaymentRow {
                account_id: r.try_get("account_id")?,
                kind: r.try_get("kind")?,
                plan: r.try_get("plan")?,
                credits_pack: r.try_get("credits_pack")?,
                credits: r.try_get("credits")?,
                amount: r.try_get("amount")?,
                currency: r.try_get("currency")?,
            })).transpose()
        })
    }
}
