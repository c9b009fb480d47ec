//! `[timeouts]`: seconds, fractions allowed (so tests can use short ones). SPEC.md, Limits.

use std::time::Duration;

use serde::Deserialize;

use super::error::{secs, ConfigError};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TimeoutsSection {
    pub connect: f64,
    pub response: f64,
    pub stream_chunk: f64,
    pub client_idle: f64,
    /// The whole request body must arrive within this (a slow sender is cut off).
    pub request_body: f64,
    /// A stream write the client does not take within this ends the stream (client gone).
    pub client_write: f64,
}

impl Default for TimeoutsSection {
    fn default() -> Self {
        TimeoutsSection {
            connect: 10.0,
            response: 25.0,
            stream_chunk: 25.0,
            client_idle: 30.0,
            request_body: 30.0,
            client_write: 30.0,
        }
    }
}

#[derive(Debug, Clone)]
pub struct Timeouts {
    pub connect: Duration,
    /// A non-streaming request's whole response, failovers included.
    pub response: Duration,
    /// Upstream silence between stream chunks (and before the first).
    pub stream_chunk: Duration,
    /// The client never sees this much silence on a stream: an SSE comment comes first.
    pub client_idle: Duration,
    /// Receiving a whole request body (slowloris).
    pub request_body: Duration,
    /// One write of a stream to the client (a client that stopped reading).
    pub client_write: Duration,
}

impl TimeoutsSection {
    pub(super) fn validate(&self, errs: &mut Vec<ConfigError>) -> Timeouts {
        Timeouts {
            connect: secs("timeouts.connect", self.connect, errs),
            response: secs("timeouts.response", self.response, errs),
            stream_chunk: secs("timeouts.stream_chunk", self.stream_chunk, errs),
            client_idle: secs("timeouts.client_idle", self.client_idle, errs),
            request_body: secs("timeouts.request_body", self.request_body, errs),
            client_write: secs("timeouts.client_write", self.client_write, errs),
        }
    }
}
