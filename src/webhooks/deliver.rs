//! Delivery: every instance polls the outbox; each endpoint's lowest pending delivery that is
//! due is claimed by one instance (`locked_until`), POSTed signed to the endpoint's checked
//! address, and marked delivered only after a 2xx (at least once: a receiver dedupes by
//! `Tollgate-Event-Id`). Anything else is tried again after a backoff that doubles with
//! jitter, until `give_up_after_hours` after the event, when it is marked failed and the
//! endpoint's next event goes. Until then the endpoint's later events wait: in order.

use std::sync::Arc;
use std::time::Duration;

use tollgate_filters::webhook::{backoff_ms, sign, SIGNATURE_HEADER};

use super::target;
use crate::config::Webhooks;
use crate::ledger::webhooks::Claimed;
use crate::ledger::Ledger;
use crate::runtime::Shared;
use crate::upstream::outbound;

/// Deliveries claimed in one round, at most.
const ROUND: i64 = 64;

/// One round: the due deliveries claimed and attempted together (each endpoint has at most
/// one due, so they are all to different endpoints).
pub async fn round(shared: &Arc<Shared>, ledger: &Ledger) {
    let cfg = shared.runtime.load().config.webhooks.clone();
    let now = crate::clock::now_ms();
    let due = match ledger.due_deliveries(now, ROUND).await {
        Ok(d) => d,
        Err(e) => {
            tracing::warn!("could not read the webhook deliveries due: {e}");
            return;
        }
    };
    // Held long enough for the attempt's deadline and its record, with room to spare.
    let hold_ms = i64::try_from(cfg.timeout.as_millis()).unwrap_or(60_000) * 2 + 5_000;
    let mut attempts = tokio::task::JoinSet::new();
    for (endpoint, seq) in due {
        match ledger
            .claim_delivery(&endpoint, seq, now, now + hold_ms)
            .await
        {
            Ok(Some(c)) => {
                let (shared, ledger, cfg) = (shared.clone(), ledger.clone(), cfg.clone());
                attempts.spawn(async move { attempt(&shared, &ledger, c, &cfg).await });
            }
            Ok(None) => {}
            Err(e) => tracing::warn!("could not claim a webhook delivery: {e}"),
        }
    }
    while attempts.join_next().await.is_some() {}
}

/// One attempt and its record.
async fn attempt(shared: &Shared, ledger: &Ledger, c: Claimed, cfg: &Webhooks) {
    let sent = send(shared, &c, cfg).await;
    let now = crate::clock::now_ms();
    let (delivered, status, error) = match &sent {
        Ok(s) if (200..300).contains(s) => (true, Some(i64::from(*s)), None),
        Ok(s) => (
            false,
            Some(i64::from(*s)),
            Some(format!("answered HTTP {s}")),
        ),
        Err(e) => (false, None, Some(e.clone())),
    };
    let give_up_ms = i64::try_from(cfg.give_up_after.as_millis()).unwrap_or(i64::MAX);
    let next_at = if delivered || now - c.created_at >= give_up_ms {
        None
    } else {
        let tries = u32::try_from(c.attempts + 1).unwrap_or(u32::MAX);
        let wait = backoff_ms(tries, cfg.retry_base_ms, cfg.max_backoff_ms, rand::random());
        Some(now + i64::try_from(wait).unwrap_or(i64::MAX / 4))
    };
    let outcome = match (delivered, next_at) {
        (true, _) => "delivered",
        (false, Some(_)) => "retried",
        (false, None) => "failed",
    };
    shared
        .webhooks
        .deliveries
        .with_label_values(&[outcome])
        .inc();
    if !delivered {
        tracing::info!(endpoint = %c.endpoint_id, event = %c.event_id, attempt = c.attempts + 1, outcome, "webhook delivery failed: {}", error.as_deref().unwrap_or(""));
    }
    let at = (c.endpoint_id.as_str(), c.seq);
    if let Err(e) = ledger
        .record_attempt(at, delivered, (status, error.as_deref()), next_at, now)
        .await
    {
        // The claim lapses and the delivery is tried again: at least once.
        tracing::warn!(endpoint = %c.endpoint_id, event = %c.event_id, "could not record a webhook attempt: {e}");
    }
}

/// POSTs the event, signed now, to the address its URL resolves to (checked again); the
/// receiver's status.
async fn send(shared: &Shared, c: &Claimed, cfg: &Webhooks) -> Result<u16, String> {
    let addr = target::resolve(&c.url, cfg.allow_private_targets, cfg.timeout).await?;
    let sig = sign(&c.secret, crate::clock::now_secs(), c.payload.as_bytes());
    let headers = [
        ("Content-Type", "application/json"),
        ("User-Agent", "Tollgate-Webhooks/1"),
        ("Tollgate-Event-Id", c.event_id.as_str()),
        ("Tollgate-Event-Type", c.event_type.as_str()),
        (SIGNATURE_HEADER, sig.as_str()),
    ];
    let limits = (cfg.timeout, cfg.max_response_bytes);
    outbound::call_at(
        shared,
        "the endpoint",
        Some(addr),
        ("POST", &c.url),
        &headers,
        c.payload.as_bytes(),
        limits,
    )
    .await
    .map(|r| r.status)
}

/// The delivery loop of one instance: the watched wallets refreshed and a round run every
/// `poll_interval_ms`, until shutdown.
pub async fn run(
    shared: Arc<Shared>,
    ledger: Ledger,
    mut shutdown: pingora::server::ShutdownWatch,
) {
    loop {
        if let Err(e) = shared.webhooks.refresh(&ledger).await {
            tracing::warn!("could not read which wallets have webhook endpoints: {e}");
        }
        round(&shared, &ledger).await;
        let every = shared.runtime.load().config.webhooks.poll_interval;
        tokio::select! {
            _ = shutdown.changed() => return,
            _ = tokio::time::sleep(every.max(Duration::from_millis(50))) => {}
        }
    }
}
