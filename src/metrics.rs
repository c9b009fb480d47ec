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
    /// Background resolutions of a provider's host names, by result (`same`, `changed`,
    /// `failed`: some name did not resolve).
    pub dns_resolutions: IntCounterVec,
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
        let requests = counter(
            "tollgate_requests_total",
            "Requests served, by route, model, provider and status",
            &["route", "model", "provider", "status"],
        );
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
        let upstream_attempts = counter(
            "tollgate_upstream_attempts_total",
            "Upstream attempts by provider and outcome",
            &["provider", "outcome"],
        );
        let failovers = counter(
            "tollgate_failovers_total",
            "Attempts abandoned for the next candidate, by model and reason",
            &["model", "reason"],
        );
        let upstream_healthy = gauge(
            "tollgate_upstream_healthy",
            "1 when an endpoint is healthy and not ejected",
            &["provider", "endpoint"],
        );
        let reloads = counter(
            "tollgate_config_reloads_total",
            "SIGHUP reloads by result",
            &["result"],
        );
        let ratelimit = counter(
            "tollgate_ratelimit_total",
            "Rate-limit decisions by plan",
            &["plan", "decision"],
        );
        let ratelimit_store_errors = counter(
            "tollgate_ratelimit_store_errors_total",
            "Rate-limit checks that could not reach Redis, by failure mode",
            &["mode"],
        );
        let credit_holds = counter(
            "tollgate_credit_holds_total",
            "Credit holds placed, by where: lease (in memory) or database",
            &["where"],
        );
        let ratelimit_leased = counter(
            "tollgate_ratelimit_leased_total",
            "Requests admitted from a reservation of admissions (no Redis round trip), by plan",
            &["plan"],
        );
        let usage_over_hold = counter("tollgate_usage_over_hold_total", "Requests whose reported usage cost more than their credit hold (the rest charged from the balance), by model", &["model"]);
        let key_lookups = counter("tollgate_key_lookups_total", "API key lookups in the ledger (a key not cached on this instance), by result: found, unknown, error", &["result"]);
        let dns_resolutions = counter("tollgate_dns_resolutions_total", "Background resolutions of a provider's endpoint names, by provider and result: same, changed, failed", &["provider", "result"]);
        let credits_uncharged = counter("tollgate_credits_uncharged_micros_total", "Micro-credits of served usage that could not be charged because the balance ran out, by model", &["model"]);
        let mcp_calls = counter(
            "tollgate_mcp_calls_total",
            "Tool calls through /mcp, by service and outcome",
            &["slug", "outcome"],
        );
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
        let mcp_events = counter(
            "tollgate_mcp_events_total",
            "Tool-server registrations and state changes (each refreshes the tool cache)",
            &["slug", "event"],
        );
        let ledger_queued = gauge("tollgate_ledger_queued", "Charges waiting in memory for the ledger (failed settlements being retried, leased usage rows not yet written)", &["what"]);
        let settlement_retries = counter(
            "tollgate_settlement_retries_total",
            "Retries of settlements that failed after serving, by result",
            &["result"],
        );
        let resumes = counter(
            "tollgate_stream_resumes_total",
            "Streams cut after their first token, by reason and outcome",
            &["reason", "outcome"],
        );
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
            &dns_resolutions,
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
            dns_resolutions,
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

/// A counter family; its definition is static, so it cannot fail.
fn counter(name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    IntCounterVec::new(Opts::new(name, help), labels).expect("static metric definition")
}

/// A gauge family; its definition is static, so it cannot fail.
fn gauge(name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    IntGaugeVec::new(Opts::new(name, help), labels).expect("static metric definition")
}
