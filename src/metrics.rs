//! The Prometheus registry and every metric the gateway records (a leaf: it imports nothing
//! of the crate). `server.rs` serves it on `server.metrics_listen` at `/metrics`.

use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry};

pub struct Metrics {
    pub registry: Registry,
    /// Requests by route, model used, provider and HTTP status.
    pub requests: IntCounterVec,
    pub latency: HistogramVec,
    pub upstream_attempts: IntCounterVec,
    pub failovers: IntCounterVec,
    pub upstream_healthy: IntGaugeVec,
    pub reloads: IntCounterVec,
    pub ratelimit: IntCounterVec,
    pub ratelimit_store_errors: IntCounterVec,
    pub credit_holds: IntCounterVec,
    pub ratelimit_leased: IntCounterVec,
    pub usage_over_hold: IntCounterVec,
}

impl Metrics {
    pub fn new() -> Metrics {
        let registry = Registry::new();
        let requests = IntCounterVec::new(
            Opts::new(
                "tollgate_requests_total",
                "Requests served, by route, model, provider and status",
            ),
            &["route", "model", "provider", "status"],
        )
        .expect("static metric definition");
        let latency = HistogramVec::new(
            HistogramOpts::new(
                "tollgate_request_duration_seconds",
                "Time from request to last byte",
            )
            .buckets(vec![
                0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
            ]),
            &["route", "model"],
        )
        .expect("static metric definition");
        let upstream_attempts = IntCounterVec::new(
            Opts::new(
                "tollgate_upstream_attempts_total",
                "Upstream attempts by provider and outcome",
            ),
            &["provider", "outcome"],
        )
        .expect("static metric definition");
        let failovers = IntCounterVec::new(
            Opts::new(
                "tollgate_failovers_total",
                "Attempts abandoned for the next candidate, by model and reason",
            ),
            &["model", "reason"],
        )
        .expect("static metric definition");
        let upstream_healthy = IntGaugeVec::new(
            Opts::new(
                "tollgate_upstream_healthy",
                "1 when an endpoint is healthy and not ejected",
            ),
            &["provider", "endpoint"],
        )
        .expect("static metric definition");
        let reloads = IntCounterVec::new(
            Opts::new("tollgate_config_reloads_total", "SIGHUP reloads by result"),
            &["result"],
        )
        .expect("static metric definition");
        let ratelimit = IntCounterVec::new(
            Opts::new("tollgate_ratelimit_total", "Rate-limit decisions by plan"),
            &["plan", "decision"],
        )
        .expect("static metric definition");
        let ratelimit_store_errors = IntCounterVec::new(
            Opts::new(
                "tollgate_ratelimit_store_errors_total",
                "Rate-limit checks that could not reach Redis, by failure mode",
            ),
            &["mode"],
        )
        .expect("static metric definition");
        let credit_holds = IntCounterVec::new(
            Opts::new(
                "tollgate_credit_holds_total",
                "Credit holds placed, by where: lease (in memory) or database",
            ),
            &["where"],
        )
        .expect("static metric definition");
        let ratelimit_leased = IntCounterVec::new(
            Opts::new(
                "tollgate_ratelimit_leased_total",
                "Requests admitted from an admission lease (no Redis round trip), by plan",
            ),
            &["plan"],
        )
        .expect("static metric definition");
        let usage_over_hold = IntCounterVec::new(
            Opts::new(
                "tollgate_usage_over_hold_total",
                "Requests whose reported usage cost more than their credit hold (charged the hold), by model",
            ),
            &["model"],
        )
        .expect("static metric definition");
        for c in [
            &usage_over_hold,
            &ratelimit_leased,
            &credit_holds,
            &requests,
            &upstream_attempts,
            &failovers,
            &reloads,
            &ratelimit,
            &ratelimit_store_errors,
        ] {
            registry
                .register(Box::new(c.clone()))
                .expect("unique metric");
        }
        registry
            .register(Box::new(latency.clone()))
            .expect("unique metric");
        registry
            .register(Box::new(upstream_healthy.clone()))
            .expect("unique metric");
        Metrics {
            registry,
            requests,
            latency,
            upstream_attempts,
            failovers,
            upstream_healthy,
            reloads,
            ratelimit,
            ratelimit_store_errors,
            credit_holds,
            ratelimit_leased,
            usage_over_hold,
        }
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}
