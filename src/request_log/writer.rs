//! The request log's writer, a background service: installs the bounded queue the request path
//! offers records to, then takes them off in batches, redacts and caps their payloads, and
//! inserts each batch in one statement. A batch the ledger refuses is tried once more, then
//! dropped and counted: a record is a report, never money, and must not pile up in memory.
//! And the retention sweep the reaper runs ([`expire`]).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;
use prometheus::{IntCounter, Opts};
use serde_json::json;
use tokio::sync::mpsc;
use tollgate_filters::redact::{cap, redact};

use super::{LegRecord, Queue, Record, QUEUE};
use crate::config::request_log::RequestLog;
use crate::ledger::request_log::LogRow;
use crate::ledger::Ledger;
use crate::runtime::Shared;

pub struct RequestLogService(pub Arc<Shared>);

fn counter(shared: &Shared, name: &str, help: &str) -> IntCounter {
    let c = IntCounter::with_opts(Opts::new(name, help)).expect("static metric definition");
    // Registered once per process (the service starts once).
    let _ = shared.metrics.registry.register(Box::new(c.clone()));
    c
}

#[async_trait]
impl BackgroundService for RequestLogService {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let cfg = self.0.runtime.load().config.telemetry.request_log.clone();
        if !cfg.enabled {
            return;
        }
        let (tx, mut rx) = mpsc::channel(cfg.queue);
        let dropped = counter(
            &self.0,
            "tollgate_request_log_dropped_total",
            "Request-log records dropped because the writer's queue was full",
        );
        let failed = counter(
            &self.0,
            "tollgate_request_log_write_errors_total",
            "Request-log records lost because the ledger refused their batch twice",
        );
        if QUEUE.set(Queue { tx, dropped }).is_err() {
            return;
        }
        let ledger = loop {
            if let Some(l) = self.0.ledger.get() {
                break l.clone();
            }
            tokio::select! {
                _ = shutdown.changed() => return,
                _ = tokio::time::sleep(Duration::from_millis(50)) => {}
            }
        };
        let mut batch = Vec::with_capacity(cfg.batch);
        loop {
            let stopping = tokio::select! {
                _ = shutdown.changed() => true,
                n = rx.recv_many(&mut batch, cfg.batch) => n == 0,
            };
            if stopping {
                // What is queued still goes out, a batch at a time.
                while !rx.is_empty() {
                    rx.recv_many(&mut batch, cfg.batch).await;
                    write(&self.0, &ledger, &cfg, &mut batch, &failed).await;
                }
                write(&self.0, &ledger, &cfg, &mut batch, &failed).await;
                return;
            }
            // A short wait lets the batch fill under load: one statement and one commit for
            // many records rather than for each (docs/performance.md, issue 52).
            if batch.len() < cfg.batch {
                tokio::time::sleep(GATHER).await;
                while batch.len() < cfg.batch {
                    match rx.try_recv() {
                        Ok(r) => batch.push(r),
                        Err(_) => break,
                    }
                }
            }
            write(&self.0, &ledger, &cfg, &mut batch, &failed).await;
        }
    }
}

/// How long the writer waits for a batch to fill after its first record.
const GATHER: Duration = Duration::from_millis(200);

/// Writes `batch` (emptied), trying once more after a second when the ledger refuses it.
async fn write(
    shared: &Shared,
    ledger: &Ledger,
    cfg: &RequestLog,
    batch: &mut Vec<Record>,
    failed: &IntCounter,
) {
    if batch.is_empty() {
        return;
    }
    let rt = shared.runtime.load();
    let secrets: Vec<&str> = rt
        .config
        .providers
        .iter()
        .filter_map(|p| p.api_key.as_deref())
        .collect();
    let rows: Vec<LogRow> = batch
        .drain(..)
        .map(|r| row(r, cfg.max_payload_bytes, &secrets))
        .collect();
    for attempt in 0..2 {
        match ledger.insert_request_log(&rows).await {
            Ok(()) => return,
            Err(e) if attempt == 0 => {
                tracing::warn!("request log: writing {} records: {e}", rows.len());
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Err(e) => {
                tracing::error!("request log: {} records lost: {e}", rows.len());
                failed.inc_by(rows.len() as u64);
            }
        }
    }
}

/// A record as stored: its legs as compact JSON, its payloads redacted and capped at `max`.
pub fn row(r: Record, max: usize, secrets: &[&str]) -> LogRow {
    let legs: Vec<serde_json::Value> = r.legs.iter().map(leg_json).collect();
    let (mut request_body, mut request_truncated) = (None, None);
    let (mut response_body, mut response_truncated) = (None, None);
    if let Some(p) = r.payloads {
        (request_body, request_truncated) = body(p.request, p.request_len, max, secrets);
        (response_body, response_truncated) = body(p.response, p.response_len, max, secrets);
    }
    LogRow {
        request_id: r.request_id,
        created_at: r.started_ms,
        account_id: r.account_id,
        key_id: r.key_id,
        member_id: r.member_id,
        door: r.door.to_owned(),
        route: r.route.to_owned(),
        model_requested: r.model_requested,
        model_used: r.model_used,
        provider: r.provider,
        status: i64::from(r.status),
        prompt_tokens: r.tokens.map(|t| t.0 as i64),
        completion_tokens: r.tokens.map(|t| t.1 as i64),
        cost_micros: r.cost,
        latency_ms: r.latency_ms,
        ttft_ms: r.ttft_ms,
        legs: serde_json::Value::from(legs).to_string(),
        error: r.error.map(|e| redact(&e, secrets)),
        request_body,
        response_body,
        request_truncated,
        response_truncated,
    }
}

fn leg_json(l: &LegRecord) -> serde_json::Value {
    json!({"model": l.model, "provider": l.provider, "endpoint": l.endpoint,
           "outcome": l.outcome, "reason": l.reason, "detail": l.detail,
           "start_ms": l.start_ms, "duration_ms": l.duration_ms, "continuation": l.continuation})
}

/// A captured body redacted, then cut at `max`: the text and whether it was cut (here or at
/// the capture, which kept only the cap and a margin).
fn body(
    kept: Option<Bytes>,
    whole: usize,
    max: usize,
    secrets: &[&str],
) -> (Option<String>, Option<bool>) {
    let Some(kept) = kept else {
        return (None, None);
    };
    let clean = redact(&String::from_utf8_lossy(&kept), secrets);
    let (text, cut) = cap(clean, max);
    (Some(text), Some(cut || whole > kept.len()))
}

/// The retention sweep, run by the reaper: payloads older than `payload_retention_days`
/// nulled, records older than `retention_days` deleted, a bounded number per round.
pub async fn expire(ledger: &Ledger, cfg: &RequestLog, now_ms: i64) {
    const BATCH: i64 = 1000;
    const ROUNDS: usize = 20;
    let payloads_before = now_ms - cfg.payload_retention_secs * 1000;
    let records_before = now_ms - cfg.retention_secs * 1000;
    for _ in 0..ROUNDS {
        match ledger
            .expire_request_log(payloads_before, records_before, BATCH)
            .await
        {
            Ok((n, d)) if (n as i64) < BATCH && (d as i64) < BATCH => return,
            Ok(_) => {}
            Err(e) => {
                tracing::error!("could not expire request-log records: {e}");
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::payloads::Payloads;

    fn record(payloads: Option<Payloads>) -> Record {
        Record {
            request_id: "req_1".into(),
            started_ms: 5,
            account_id: "usr_1".into(),
            key_id: "key_1".into(),
            member_id: None,
            door: "chat_completions",
            route: "chat",
            model_requested: Some("m".into()),
            model_used: Some("m".into()),
            provider: Some("p".into()),
            status: 200,
            tokens: Some((3, 4)),
            cost: Some(7),
            latency_ms: 9,
            ttft_ms: None,
            legs: vec![LegRecord {
                model: "m".into(),
                provider: "p".into(),
                endpoint: "127.0.0.1:1".into(),
                outcome: "failover",
                reason: Some("5xx"),
                detail: Some("503".into()),
                start_ms: 0,
                duration_ms: 2,
                continuation: false,
            }],
            error: None,
            payloads: payloads.map(Box::new),
        }
    }

    #[test]
    fn payloads_are_redacted_then_capped_and_legs_are_compact_json() {
        let key = "tg_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcd";
        let body = format!("{{\"content\":\"{key} and sk-provider-secret\"}}");
        let mut p = Payloads::new(1024);
        (p.request, p.request_len) = p.keep(body.as_bytes());
        let long = "x".repeat(3000);
        (p.response, p.response_len) = p.keep(long.as_bytes());
        let r = row(record(Some(p)), 1024, &["sk-provider-secret"]);
        assert_eq!(
            r.request_body.as_deref(),
            Some("{\"content\":\"[redacted] and [redacted]\"}")
        );
        assert_eq!(r.request_truncated, Some(false));
        assert_eq!(r.response_body.as_ref().map(String::len), Some(1024));
        assert_eq!(r.response_truncated, Some(true));
        let legs: serde_json::Value = serde_json::from_str(&r.legs).unwrap();
        assert_eq!(legs[0]["reason"], "5xx");
        assert_eq!(legs[0]["outcome"], "failover");
        let none = row(record(None), 1024, &[]);
        assert_eq!((none.request_body, none.request_truncated), (None, None));
    }

    #[test]
    fn a_key_across_the_cap_is_redacted_before_the_cut() {
        let key = "tg_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcd";
        let body = format!("{}{key}{}", "a".repeat(1020), "b".repeat(5000));
        let mut p = Payloads::new(1024);
        (p.request, p.request_len) = p.keep(body.as_bytes());
        let r = row(record(Some(p)), 1024, &[]);
        let text = r.request_body.unwrap();
        assert!(!text.contains("tg_A"), "{}", &text[1000..]);
        assert!(text.ends_with("aaaa[red"));
        assert_eq!(r.request_truncated, Some(true));
    }
}
