//! Exports the queued spans (`telemetry::queue`) to the OTLP/HTTP collector: a batch each
//! `export_interval_ms`, or sooner when a batch is waiting, each export within
//! `export_timeout_ms`. A collector that is down, refuses or hangs costs a batch (dropped and
//! counted), never the request path, which only ever offers to the bounded queue.

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;
use tollgate_filters::trace::{export_request, Span};

use crate::runtime::Shared;
use crate::telemetry::queue::Tracer;
use crate::upstream::outbound;

/// Largest collector reply read (an `ExportTraceServiceResponse` is a few bytes).
const MAX_REPLY: usize = 64 * 1024;

/// Registered only when traces are on (`[telemetry] otlp_endpoint`).
pub struct TraceService(pub Arc<Shared>);

#[async_trait]
impl BackgroundService for TraceService {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let shared = &self.0;
        let Some(tracer) = shared.tracer.as_ref() else {
            return;
        };
        loop {
            tokio::select! {
                _ = shutdown.changed() => break,
                _ = tokio::time::sleep(tracer.config.export_interval) => {}
                _ = tracer.wake.notified() => {}
            }
            flush(shared, tracer).await;
        }
        // What is waiting at shutdown gets one try within the export timeout.
        let until = Instant::now() + tracer.config.export_timeout;
        let _ = tokio::time::timeout_at(until.into(), flush(shared, tracer)).await;
    }
}

/// Exports batches until fewer than a batch wait (the rest go with the next tick).
async fn flush(shared: &Shared, tracer: &Tracer) {
    loop {
        let batch = tracer.take();
        if batch.is_empty() {
            return;
        }
        let full = batch.len() >= tracer.config.batch_spans;
        export(shared, tracer, batch).await;
        if !full || tracer.waiting() < tracer.config.batch_spans {
            return;
        }
    }
}

async fn export(shared: &Shared, tracer: &Tracer, batch: Vec<Span>) {
    let c = &tracer.config;
    let body = export_request(
        &tracer.resource,
        ("tollgate", env!("CARGO_PKG_VERSION")),
        &batch,
    );
    let mut headers: Vec<(&str, &str)> = vec![("Content-Type", "application/x-protobuf")];
    headers.extend(c.headers.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    let limits = (c.export_timeout, MAX_REPLY);
    let sent = outbound::call(
        shared,
        "the trace collector",
        ("POST", &c.endpoint),
        &headers,
        &body,
        limits,
    )
    .await;
    let n = batch.len() as u64;
    let m = &shared.metrics;
    match sent {
        Ok(r) if (200..300).contains(&r.status) => m.trace_spans_exported.inc_by(n),
        other => {
            m.trace_spans_dropped
                .with_label_values(&["export_failed"])
                .inc_by(n);
            let why = match other {
                Ok(r) => format!("answered HTTP {}", r.status),
                Err(e) => e,
            };
            // At most one line a few seconds: a collector that is down stays quiet in the log.
            if quiet_enough() {
                tracing::warn!(spans = n, "trace export failed: {why}");
            }
        }
    }
}

/// Whether a failure may be logged now: one line per ten seconds at most.
fn quiet_enough() -> bool {
    use std::sync::atomic::{AtomicU64, Ordering};
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = crate::clock::now_secs().max(0) as u64;
    let last = LAST.load(Ordering::Relaxed);
    now >= last + 10
        && LAST
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
}
