//! The Prometheus registry and every metric the gateway records (a leaf: it imports nothing
//! of the crate). `server.rs` serves it on `server.metrics_listen` at `/metrics`.

use prometheus::core::Collector;
use prometheus::{
    HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGaugeVec, Opts, Registry,
};

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
    /// Streams: seconds from the request to its first output, by model and provider.
    pub ttft: HistogramVec,
    /// Streams: seconds per output token after the first, by model and provider.
    pub tpot: HistogramVec,
    /// Seconds the serving upstream leg took, by model and provider.
    pub upstream_duration: HistogramVec,
    /// Tokens served, by model, provider and type (`input`, `output`).
    pub tokens: IntCounterVec,
    /// Micro-credits charged, by model (a tool call's: `{slug}__{tool}`).
    pub credits_charged: IntCounterVec,
    /// Spans a collector accepted.
    pub trace_spans_exported: IntCounter,
    /// Spans dropped, by reason (`queue_full`, `export_failed`).
    pub trace_spans_dropped: IntCounterVec,
    /// Opted-in requests by what the response cache did (`hit`, `miss`, `bypass`).
    pub response_cache: IntCounterVec,
}

impl Metrics {
    pub fn new() -> Metrics {
        let registry = Registry::new();
        let traffic = Traffic::new(&registry);
        let admission = Admission::new(&registry);
        let money = Money::new(&registry);
        let tools = Tools::new(&registry);
        let resumes = Resumes::new(&registry);
        let genai = GenAi::new(&registry);
        Metrics {
            registry,
            requests: traffic.requests,
            latency: traffic.latency,
            upstream_attempts: traffic.upstream_attempts,
            failovers: traffic.failovers,
            upstream_healthy: traffic.upstream_healthy,
            reloads: traffic.reloads,
            dns_resolutions: traffic.dns_resolutions,
            response_cache: traffic.response_cache,
            ratelimit: admission.ratelimit,
            ratelimit_store_errors: admission.ratelimit_store_errors,
            ratelimit_leased: admission.ratelimit_leased,
            key_lookups: admission.key_lookups,
            credit_holds: money.credit_holds,
            usage_over_hold: money.usage_over_hold,
            credits_uncharged: money.credits_uncharged,
            ledger_queued: money.ledger_queued,
            settlement_retries: money.settlement_retries,
            mcp_calls: tools.mcp_calls,
            mcp_call_latency: tools.mcp_call_latency,
            mcp_events: tools.mcp_events,
            resumes: resumes.resumes,
            resume_seam: resumes.resume_seam,
            ttft: genai.ttft,
            tpot: genai.tpot,
            upstream_duration: genai.upstream_duration,
            tokens: genai.tokens,
            credits_charged: genai.credits_charged,
            trace_spans_exported: genai.trace_spans_exported,
            trace_spans_dropped: genai.trace_spans_dropped,
        }
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

// The families below are only how `Metrics::new` is put together: each registers its own
// metrics (the exposition sorts families by name, so registration order shows nowhere), and
// `Metrics` keeps its fields flat, as every recorder reads them.

/// What was served, how fast, and by which upstream; the configuration and the DNS behind it.
struct Traffic {
    requests: IntCounterVec,
    latency: HistogramVec,
    upstream_attempts: IntCounterVec,
    failovers: IntCounterVec,
    upstream_healthy: IntGaugeVec,
    reloads: IntCounterVec,
    dns_resolutions: IntCounterVec,
    response_cache: IntCounterVec,
}

impl Traffic {
    fn new(r: &Registry) -> Traffic {
        Traffic {
            requests: register(
                r,
                counter(
                    "tollgate_requests_total",
                    "Requests served, by route, model, provider and status",
                    &["route", "model", "provider", "status"],
                ),
            ),
            latency: register(
                r,
                histogram(
                    "tollgate_request_duration_seconds",
                    "Time from request to last byte, by route, model and provider",
                    vec![
                        0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
                    ],
                    &["route", "model", "provider"],
                ),
            ),
            upstream_attempts: register(
                r,
                counter(
                    "tollgate_upstream_attempts_total",
                    "Upstream attempts by provider and outcome",
                    &["provider", "outcome"],
                ),
            ),
            failovers: register(
                r,
                counter(
                    "tollgate_failovers_total",
                    "Attempts abandoned for the next candidate, by model and reason",
                    &["model", "reason"],
                ),
            ),
            upstream_healthy: register(
                r,
                gauge(
                    "tollgate_upstream_healthy",
                    "1 when an endpoint is healthy and not ejected",
                    &["provider", "endpoint"],
                ),
            ),
            reloads: register(
                r,
                counter(
                    "tollgate_config_reloads_total",
                    "SIGHUP reloads by result",
                    &["result"],
                ),
            ),
            response_cache: register(
                r,
                counter(
                    "tollgate_response_cache_total",
                    "Requests opted in to the response cache, by result: hit, miss, bypass",
                    &["result"],
                ),
            ),
            dns_resolutions: register(r, counter("tollgate_dns_resolutions_total", "Background resolutions of a provider's endpoint names, by provider and result: same, changed, failed", &["provider", "result"])),
        }
    }
}

/// Who was let in: rate-limit decisions and the stores behind them, API key lookups.
struct Admission {
    ratelimit: IntCounterVec,
    ratelimit_store_errors: IntCounterVec,
    ratelimit_leased: IntCounterVec,
    key_lookups: IntCounterVec,
}

impl Admission {
    fn new(r: &Registry) -> Admission {
        Admission {
            ratelimit: register(
                r,
                counter(
                    "tollgate_ratelimit_total",
                    "Rate-limit decisions by plan",
                    &["plan", "decision"],
                ),
            ),
            ratelimit_store_errors: register(
                r,
                counter(
                    "tollgate_ratelimit_store_errors_total",
                    "Rate-limit checks that could not reach Redis, by failure mode",
                    &["mode"],
                ),
            ),
            ratelimit_leased: register(
                r,
                counter(
                    "tollgate_ratelimit_leased_total",
                    "Requests admitted from a reservation of admissions (no Redis round trip), by plan",
                    &["plan"],
                ),
            ),
            key_lookups: register(r, counter("tollgate_key_lookups_total", "API key lookups in the ledger (a key not cached on this instance), by result: found, unknown, error", &["result"])),
        }
    }
}

/// Credits: holds, what usage cost beyond them or could not be charged, and charges waiting
/// for the ledger.
struct Money {
    credit_holds: IntCounterVec,
    usage_over_hold: IntCounterVec,
    credits_uncharged: IntCounterVec,
    ledger_queued: IntGaugeVec,
    settlement_retries: IntCounterVec,
}

impl Money {
    fn new(r: &Registry) -> Money {
        Money {
            credit_holds: register(
                r,
                counter(
                    "tollgate_credit_holds_total",
                    "Credit holds placed, by where: lease (in memory) or database",
                    &["where"],
                ),
            ),
            usage_over_hold: register(r, counter("tollgate_usage_over_hold_total", "Requests whose reported usage cost more than their credit hold (the rest charged from the balance), by model", &["model"])),
            credits_uncharged: register(r, counter("tollgate_credits_uncharged_micros_total", "Micro-credits of served usage that could not be charged because the balance ran out, by model", &["model"])),
            ledger_queued: register(r, gauge("tollgate_ledger_queued", "Charges waiting in memory for the ledger (failed settlements being retried, leased usage rows not yet written)", &["what"])),
            settlement_retries: register(
                r,
                counter(
                    "tollgate_settlement_retries_total",
                    "Retries of settlements that failed after serving, by result",
                    &["result"],
                ),
            ),
        }
    }
}

/// Tool calls through `/mcp` and the marketplace's events.
struct Tools {
    mcp_calls: IntCounterVec,
    mcp_call_latency: HistogramVec,
    mcp_events: IntCounterVec,
}

impl Tools {
    fn new(r: &Registry) -> Tools {
        Tools {
            mcp_calls: register(
                r,
                counter(
                    "tollgate_mcp_calls_total",
                    "Tool calls through /mcp, by service and outcome",
                    &["slug", "outcome"],
                ),
            ),
            mcp_call_latency: register(
                r,
                histogram(
                    "tollgate_mcp_call_duration_seconds",
                    "Time a tool server took to answer a call",
                    vec![0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0],
                    &["slug"],
                ),
            ),
            mcp_events: register(
                r,
                counter(
                    "tollgate_mcp_events_total",
                    "Tool-server registrations and state changes (each refreshes the tool cache)",
                    &["slug", "event"],
                ),
            ),
        }
    }
}

/// Streams cut after their first token and their continuations.
struct Resumes {
    resumes: IntCounterVec,
    resume_seam: HistogramVec,
}

impl Resumes {
    fn new(r: &Registry) -> Resumes {
        Resumes {
            resumes: register(
                r,
                counter(
                    "tollgate_stream_resumes_total",
                    "Streams cut after their first token, by reason and outcome",
                    &["reason", "outcome"],
                ),
            ),
            resume_seam: register(
                r,
                histogram(
                    "tollgate_stream_resume_seam_seconds",
                    "Time from a stream's cut to its continuation's first output",
                    vec![0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0],
                    &["model"],
                ),
            ),
        }
    }
}

/// What LLM serving is judged by (the buckets follow the OpenTelemetry GenAI metrics'
/// advice, docs/operations.md), and the export of traces.
struct GenAi {
    ttft: HistogramVec,
    tpot: HistogramVec,
    upstream_duration: HistogramVec,
    tokens: IntCounterVec,
    credits_charged: IntCounterVec,
    trace_spans_exported: IntCounter,
    trace_spans_dropped: IntCounterVec,
}

impl GenAi {
    fn new(r: &Registry) -> GenAi {
        let by = &["model", "provider"];
        GenAi {
            ttft: register(
                r,
                histogram(
                    "tollgate_time_to_first_token_seconds",
                    "Streams: time from the request to its first output, by model and provider",
                    vec![
                        0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5,
                        5.0, 7.5, 10.0, 30.0,
                    ],
                    by,
                ),
            ),
            tpot: register(
                r,
                histogram(
                    "tollgate_time_per_output_token_seconds",
                    "Streams: time per output token after the first, by model and provider",
                    vec![
                        0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5,
                    ],
                    by,
                ),
            ),
            upstream_duration: register(
                r,
                histogram(
                    "tollgate_upstream_duration_seconds",
                    "Time the serving upstream leg took, by model and provider",
                    vec![
                        0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48,
                        40.96, 81.92,
                    ],
                    by,
                ),
            ),
            tokens: register(
                r,
                counter(
                    "tollgate_tokens_total",
                    "Tokens served, by model, provider and type: input, output",
                    &["model", "provider", "type"],
                ),
            ),
            credits_charged: register(
                r,
                counter(
                    "tollgate_credits_charged_micros_total",
                    "Micro-credits charged, by model (a tool call's: slug__tool)",
                    &["model"],
                ),
            ),
            trace_spans_exported: register(
                r,
                IntCounter::new(
                    "tollgate_trace_spans_exported_total",
                    "Trace spans a collector accepted",
                )
                .expect("static metric definition"),
            ),
            trace_spans_dropped: register(
                r,
                counter(
                    "tollgate_trace_spans_dropped_total",
                    "Trace spans dropped, by reason: queue_full, export_failed",
                    &["reason"],
                ),
            ),
        }
    }
}

/// `metric`, registered; each name is registered once, so it cannot fail.
fn register<C: Collector + Clone + 'static>(registry: &Registry, metric: C) -> C {
    registry
        .register(Box::new(metric.clone()))
        .expect("unique metric");
    metric
}

/// A counter family; its definition is static, so it cannot fail.
fn counter(name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    IntCounterVec::new(Opts::new(name, help), labels).expect("static metric definition")
}

/// A gauge family; its definition is static, so it cannot fail.
fn gauge(name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    IntGaugeVec::new(Opts::new(name, help), labels).expect("static metric definition")
}

/// A histogram family with its buckets; its definition is static, so it cannot fail.
fn histogram(name: &str, help: &str, buckets: Vec<f64>, labels: &[&str]) -> HistogramVec {
    HistogramVec::new(HistogramOpts::new(name, help).buckets(buckets), labels)
        .expect("static metric definition")
}
