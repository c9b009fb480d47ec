//! The spans waiting for export: a bounded queue the request path only ever offers to (a
//! full queue drops the offer and counts it; nothing waits, nothing grows past its bound),
//! taken from in batches by the exporter (`background::traces`).

use std::sync::Mutex;

use tollgate_filters::trace::{ratio_threshold, Attribute, Span, Value};

use super::context::Sampler;
use crate::config::telemetry::Traces;
use crate::metrics::Metrics;

/// The tracer of a process with traces on: its sampler, its queue, what every export says of
/// its resource.
pub struct Tracer {
    pub sampler: Sampler,
    pub config: Traces,
    queue: Mutex<Vec<Span>>,
    /// Rung when a batch is waiting, so the exporter need not wait for its interval.
    pub wake: tokio::sync::Notify,
    /// `service.name`, `service.version`, `service.instance.id`.
    pub resource: Vec<Attribute>,
}

impl Tracer {
    pub fn new(config: &Traces, instance: &str) -> Tracer {
        Tracer {
            sampler: Sampler {
                threshold: ratio_threshold(config.sample_ratio),
            },
            queue: Mutex::new(Vec::with_capacity(config.batch_spans)),
            wake: tokio::sync::Notify::new(),
            resource: vec![
                Attribute::new("service.name", Value::Str(config.service_name.clone())),
                Attribute::new(
                    "service.version",
                    Value::Str(env!("CARGO_PKG_VERSION").into()),
                ),
                Attribute::new("service.instance.id", Value::Str(instance.into())),
            ],
            config: config.clone(),
        }
    }

    /// Queues one request's spans, or drops them all (counted) when they do not fit: a trace
    /// is exported whole or not at all.
    pub fn offer(&self, spans: Vec<Span>, m: &Metrics) {
        let n = spans.len();
        let waiting = {
            let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
            if q.len() + n > self.config.queue_spans {
                drop(q);
                m.trace_spans_dropped
                    .with_label_values(&["queue_full"])
                    .inc_by(n as u64);
                return;
            }
            q.extend(spans);
            q.len()
        };
        if waiting >= self.config.batch_spans {
            self.wake.notify_one();
        }
    }

    /// Up to `batch_spans` of the waiting spans, oldest first.
    pub fn take(&self) -> Vec<Span> {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        let n = q.len().min(self.config.batch_spans);
        q.drain(..n).collect()
    }

    pub fn waiting(&self) -> usize {
        self.queue.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}
