//! Why an attempt at an upstream did not serve, and what that means for the next one: the
//! [`Failover`] reasons (with their metric labels and the words a client may read), and the
//! mapping of an upstream's status to failing over or to the client's own error. Every front
//! door's forwarding loop (chat, embeddings) decides with these.

use std::time::Duration;

use bytes::BytesMut;
use tollgate_filters::GatewayError;

use super::wire::Response;
use super::{Endpoint, Pool};
use crate::metrics::Metrics;

/// Why one attempt did not produce a response.
pub enum AttemptError {
    /// Nothing reached the client: try the next endpoint or candidate.
    Failover { reason: Failover, detail: String },
    /// The upstream refused the request itself (a 400-class answer another provider would
    /// give too): tell the client.
    Client(GatewayError),
}

/// Why a candidate (or one endpoint of it) was left for the next one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failover {
    Connect,
    Send,
    Read,
    /// The upstream went silent or dropped the connection before the stream's first output.
    TimeoutOrRead,
    Timeout,
    ServerError,
    RateLimited,
    /// A 4xx other than a rejection of the request itself (our key, the model upstream).
    Refused,
    BadReply,
    ErrorEvent,
    EarlyEof,
    /// Anthropic's 529 or `overloaded_error`.
    Overloaded,
    /// The candidate's wire format cannot carry this request.
    Untranslatable,
    /// The credit hold cannot buy one output token of the candidate.
    Unaffordable,
    /// The request to the upstream could not be written (a header the wire refuses).
    RequestBuild,
    /// The response head for the client could not be built.
    Internal,
}

impl Failover {
    pub const ALL: [Failover; 16] = [
        Failover::Connect,
        Failover::Send,
        Failover::Read,
        Failover::TimeoutOrRead,
        Failover::Timeout,
        Failover::ServerError,
        Failover::RateLimited,
        Failover::Refused,
        Failover::BadReply,
        Failover::ErrorEvent,
        Failover::EarlyEof,
        Failover::Overloaded,
        Failover::Untranslatable,
        Failover::Unaffordable,
        Failover::RequestBuild,
        Failover::Internal,
    ];

    /// The `reason` label of `tollgate_failovers_total` and `tollgate_upstream_attempts_total`
    /// (unchanged since these were strings).
    pub fn label(self) -> &'static str {
        match self {
            Failover::Connect => "connect",
            Failover::Send => "send",
            Failover::Read => "read",
            Failover::TimeoutOrRead => "timeout_or_read",
            Failover::Timeout => "timeout",
            Failover::ServerError => "5xx",
            Failover::RateLimited => "429",
            Failover::Refused => "4xx",
            Failover::BadReply => "bad_reply",
            Failover::ErrorEvent => "error_event",
            Failover::EarlyEof => "early_eof",
            Failover::Overloaded => "overloaded",
            Failover::Untranslatable => "untranslatable",
            Failover::Unaffordable => "unaffordable",
            Failover::RequestBuild => "request_build",
            Failover::Internal => "internal",
        }
    }

    /// What it means, in words a client may read: never an address or a provider's own error
    /// text (those go to the log).
    pub fn words(self) -> &'static str {
        match self {
            Failover::Connect => "could not be connected to",
            Failover::Send | Failover::Read | Failover::TimeoutOrRead => {
                "dropped the connection or went silent"
            }
            Failover::Timeout => "did not answer in time",
            Failover::ServerError => "answered with a server error",
            Failover::RateLimited => "was rate limited",
            Failover::Refused => "refused the gateway's request",
            Failover::BadReply => "sent a reply that is not a valid completion",
            Failover::ErrorEvent => "sent an error instead of output",
            Failover::EarlyEof => "closed the stream before any output",
            Failover::Overloaded => "was overloaded",
            Failover::Untranslatable => "cannot take this request in its wire format",
            Failover::Unaffordable => "costs more than the credit hold can pay",
            Failover::RequestBuild | Failover::Internal => "failed",
        }
    }
}

pub fn failover(reason: Failover, detail: impl std::fmt::Display) -> AttemptError {
    AttemptError::Failover {
        reason,
        detail: detail.to_string(),
    }
}

/// Maps an upstream's non-200 status: 400-class rejections of the request go to the client,
/// everything else (5xx, 429, auth failures of our key, unknown model upstream) fails over.
pub async fn check_status(up: &mut Response, deadline: Duration) -> Result<(), AttemptError> {
    let status = up.status();
    if status == 200 {
        return Ok(());
    }
    let reason = match status {
        429 => Failover::RateLimited,
        // Anthropic's "overloaded": fail over, and say so if every candidate was.
        529 => Failover::Overloaded,
        500..=599 => Failover::ServerError,
        _ => Failover::Refused,
    };
    if matches!(status, 400 | 413 | 422) {
        // Read a bounded amount of the reason for the client, for a bounded time.
        let mut buf = BytesMut::new();
        let read = async {
            while let Ok(Some(b)) = up.read_body().await {
                buf.extend_from_slice(&b);
                if buf.len() > 64 * 1024 {
                    break;
                }
            }
        };
        let _ = tokio::time::timeout(deadline, read).await;
        let msg = serde_json::from_slice::<serde_json::Value>(&buf)
            .ok()
            .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
            .unwrap_or_else(|| String::from_utf8_lossy(&buf[..buf.len().min(512)]).into_owned());
        return Err(AttemptError::Client(GatewayError::invalid(format!(
            "upstream rejected the request: {msg}"
        ))));
    }
    Err(failover(reason, format!("upstream answered {status}")))
}

/// Records an attempt that reached its upstream and was answered (`outcome` "ok", or
/// "rejected" for a refusal of the request itself): the endpoint is healthy.
pub fn record_answered(m: &Metrics, pool: &Pool, endpoint: &Endpoint, outcome: &str) {
    pool.record_success(endpoint);
    m.upstream_attempts
        .with_label_values(&[&pool.provider.name, outcome])
        .inc();
}

/// Records an attempt that failed over: the metrics, the endpoint's failure (ejected after
/// enough in a row), and the log line with the detail. Returns what the client may be told.
pub fn record_failover(
    m: &Metrics,
    pool: &Pool,
    endpoint: &Endpoint,
    model: &str,
    request_id: &str,
    reason: Failover,
    detail: &str,
) -> String {
    let provider = &pool.provider.name;
    m.upstream_attempts
        .with_label_values(&[provider, reason.label()])
        .inc();
    m.failovers
        .with_label_values(&[model, reason.label()])
        .inc();
    if pool.record_failure(endpoint) {
        tracing::warn!(provider = %provider, endpoint = %endpoint.addr, "endpoint ejected after consecutive failures");
    }
    if reason == Failover::Connect && is_tls_failure(detail) {
        // A certificate the provider's trust refuses (unknown CA, another name, expired) is a
        // configuration problem, not a passing fault: a warning naming the provider and the
        // server name, with rustls' reason (in Pingora's context). Nothing was sent.
        tracing::warn!(request_id, model, provider = %provider, endpoint = %endpoint.addr, server_name = %endpoint.url.host, reason = reason.label(), %detail, "TLS handshake with the provider failed, nothing sent; failing over");
    } else {
        tracing::info!(request_id, model, endpoint = %endpoint.addr, reason = reason.label(), %detail, "failing over");
    }
    // The address and the provider's own text are in the log line above.
    format!("{model} {}", reason.words())
}

/// Whether a connect failure's text is Pingora's TLS handshake or certificate error (its
/// `ErrorType` is only in the text by then). Read on the failure path only.
fn is_tls_failure(detail: &str) -> bool {
    detail.contains("TLSHandshakeFailure") || detail.contains("InvalidCert")
}

#[cfg(test)]
mod tests {
    use super::Failover::{self, *};

    #[test]
    fn each_failover_has_its_own_label_and_words_a_client_may_read() {
        let all = Failover::ALL;
        let labels: std::collections::HashSet<&str> = all.iter().map(|f| f.label()).collect();
        assert_eq!(labels.len(), all.len(), "metric labels are distinct");
        for f in all {
            assert!(!f.words().is_empty());
            // Words for a client: no address, no status code of the provider's own.
            assert!(!f.words().contains("://"), "{f:?}");
        }
        assert_eq!(ServerError.label(), "5xx");
        assert_eq!(RateLimited.label(), "429");
    }

    #[test]
    fn a_tls_failure_is_told_from_other_connect_failures_by_pingoras_error_type() {
        use pingora::{Error, ErrorType};
        let tls = Error::explain(
            ErrorType::TLSHandshakeFailure,
            "TLS connect() failed: invalid peer certificate: UnknownIssuer, SNI: localhost",
        );
        assert!(super::is_tls_failure(&tls.to_string()));
        let refused = Error::explain(ErrorType::ConnectRefused, "refused");
        assert!(!super::is_tls_failure(&refused.to_string()));
    }
}
