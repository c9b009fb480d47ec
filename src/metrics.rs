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
    /// µcr a settlement could not charge because the balance ran out before the usage did.
    pub credits_uncharged: IntCounterVec,
    /// API key lookups in the ledger, by result (`found`, `unknown`, `error`).
    pub key_lookups: IntCounterVec,
    /// Tool calls by service and outcome (`ok`, `refused`, `upstream_error`, `tool_error`, …).
    pub mcp_calls: IntCounterVec,
    pub mcp_call_latency: HistogramVec,
    /// Marketplace events by service: registered, approve, reject, suspend, resume.
    pub mcp_events: IntCounterVec,
    /// Money waiting in memory for the ledger: `settlements` that failed after serving and are
    /// being retried, `lease_rows` metered against credit leases and not yet written.
    pub ledger_queued: IntGaugeVec,
    /// Retries of failed settlements by result (`committed`, `already`, `failed`).
    pub settlement_retries: IntCounterVec,
    /// Streams cut after their first token, by why (`closed`, `error_event`, `stall`, …) and
    /// what became of them (`resumed`, `not_text`, `unaffordable`, `no_candidate`, `failed`,
    /// `limit`).
    pub resumes: IntCounterVec,
    /// Seconds from a cut to the continuation's first output reaching the client.
    pub resume_seam: HistogramVec,
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
                "Requests admitted from a reservation of admissions (no Redis round trip), by plan",
            ),
            &["plan"],
        )
        .expect("static metric definition");
        let usage_over_hold = IntCounterVec::new(
            Opts::new(
                "tollgate_usage_over_hold_total",
                "Requests whose reported usage cost more than their credit hold (the rest charged from the balance), by model",
            ),
            &["model"],
        )
        .expect("static metric definition");
        let key_lookups = IntCounterVec::new(
            Opts::new(
                "tollgate_key_lookups_total",
                "API key lookups in the ledger (a key not cached on this instance), by result: found, unknown, error",
            ),
            &["result"],
        )
        .expect("static metric definition");
        let credits_uncharged = IntCounterVec::new(
            Opts::new(
                "tollgate_credits_uncharged_micros_total",
                "Micro-credits of served usage that could not be charged because the balance ran out, by model",
            ),
            &["model"],
        )
        .expect("static metric definition");
        let mcp_calls = IntCounterVec::new(
            Opts::new(
                "tollgate_mcp_calls_total",
                "Tool calls through /mcp, by service and outcome",
            ),
            &["slug", "outcome"],
        )
        .expect("static metric definition");
        let mcp_call_latency = HistogramVec::new(
            HistogramOpts::new(
                "tollgate_mcp_call_duration_seconds",
                "Time a tool server took to answer a call",
            )
            .buckets(vec![
                0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
            ]),
            &["slug"],
        )
        .expect("static metric definition");
        let mcp_events = IntCounterVec::new(
            Opts::new(
                "tollgate_mcp_events_total",
                "Tool-server registrations and state changes (each refreshes the tool cache)",
            ),
            &["slug", "event"],
        )
        .expect("static metric definition");
        let ledger_queued = IntGaugeVec::new(
            Opts::new(
                "tollgate_ledger_queued",
                "Charges waiting in memory for the ledger (failed settlements being retried, leased usage rows not yet written)",
            ),
            &["what"],
        )
        .expect("static metric definition");
        let settlement_retries = IntCounterVec::new(
            Opts::new(
                "tollgate_settlement_retries_total",
                "Retries of settlements that failed after serving, by result",
            ),
            &["result"],
        )
        .expect("static metric definition");
        let resumes = IntCounterVec::new(
            Opts::new(
                "tollgate_stream_resumes_total",
                "Streams cut after their first token, by reason and outcome",
            ),
            &["reason", "outcome"],
        )
        .expect("static metric definition");
        let resume_seam = HistogramVec::new(
            HistogramOpts::new(
                "tollgate_stream_resume_seam_seconds",
                "Time from a stream's cut to its continuation's first output",
            )
            .buckets(vec![0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0]),
            &["model"],
        )
        .expect("static metric definition");
        registry
            .register(Box::new(resume_seam.clone()))
            .expect("unique metric");
        registry
            .register(Box::new(mcp_call_latency.clone()))
            .expect("unique metric");
        registry
            .register(Box::new(ledger_queued.clone()))
            .expect("unique metric");
        for c in [
            &resumes,
            &settlement_retries,
            &mcp_calls,
            &mcp_events,
            &usage_over_hold,
            &credits_uncharged,
            &key_lookups,
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
            credits_uncharged,
            key_lookups,
            mcp_calls,
            mcp_call_latency,
            mcp_events,
            ledger_queued,
            settlement_retries,
            resumes,
            resume_seam,
        }
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}
