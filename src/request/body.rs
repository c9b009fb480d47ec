//! Reading request bodies, bounded, and pulling typed fields out of JSON with errors that name
//! the field.

use std::time::Duration;

use crate::request::Session;
use bytes::BytesMut;
use serde_json::{Map, Value};
use tollgate_filters::GatewayError;

/// Reads the whole body within `deadline`, refusing more than `max` bytes without buffering
/// them. A client that sends slower than that is cut off (400), so it cannot hold a worker's
/// attention, or a connection, for as long as it likes.
pub async fn read(
    session: &mut Session,
    max: usize,
    deadline: Duration,
) -> Result<BytesMut, GatewayError> {
    match tokio::time::timeout(deadline, read_all(session, max)).await {
        Ok(r) => r,
        Err(_) => Err(GatewayError::invalid(format!(
            "body: not received within {} s",
            deadline.as_secs_f64()
        ))),
    }
}

/// Reads the body of a request to the gateway's own API or a model endpoint within the
/// server's limits: `[server] max_body_bytes`, received within `[timeouts] request_body`.
pub async fn read_within(
    session: &mut Session,
    config: &crate::config::Config,
) -> Result<BytesMut, GatewayError> {
    read(
        session,
        config.server.max_body_bytes,
        config.timeouts.request_body,
    )
    .await
}

async fn read_all(session: &mut Session, max: usize) -> Result<BytesMut, GatewayError> {
    let too_big = || GatewayError::invalid(format!("body: larger than the limit of {max} bytes"));
    if let Some(len) = session
        .req_header()
        .headers
        .get("content-length")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<usize>().ok())
    {
        if len > max {
            return Err(too_big());
        }
    }
    let mut buf = BytesMut::new();
    loop {
        match session.read_request_body().await {
            Ok(Some(chunk)) => {
                if buf.len() + chunk.len() > max {
                    return Err(too_big());
                }
                buf.extend_from_slice(&chunk);
            }
            Ok(None) => break,
            Err(e) => {
                return Err(GatewayError::invalid(format!(
                    "body: could not be read ({e})"
                )))
            }
        }
    }
    if buf.is_empty() {
        return Err(GatewayError::invalid("body: is empty; send a JSON object"));
    }
    Ok(buf)
}

/// Reads a small JSON object body (account and admin endpoints).
pub async fn json_object(
    session: &mut Session,
    max: usize,
    deadline: Duration,
) -> Result<Map<String, Value>, GatewayError> {
    let raw = read(session, max, deadline).await?;
    match serde_json::from_slice::<Value>(&raw) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(GatewayError::invalid("body: must be a JSON object")),
        Err(e) => Err(GatewayError::invalid(format!("body: malformed JSON ({e})"))),
    }
}

pub fn string<'a>(m: &'a Map<String, Value>, field: &str) -> Result<&'a str, GatewayError> {
    match m.get(field) {
        Some(Value::String(s)) => Ok(s),
        None | Some(Value::Null) => Err(GatewayError::invalid(format!("{field}: is required"))),
        Some(_) => Err(GatewayError::invalid(format!("{field}: must be a string"))),
    }
}

pub fn opt_string<'a>(
    m: &'a Map<String, Value>,
    field: &str,
) -> Result<Option<&'a str>, GatewayError> {
    match m.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(GatewayError::invalid(format!("{field}: must be a string"))),
    }
}

/// An optional positive integer (a limit).
pub fn opt_positive(m: &Map<String, Value>, field: &str) -> Result<Option<i64>, GatewayError> {
    match m.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_i64() {
            Some(n) if n > 0 => Ok(Some(n)),
            _ => Err(GatewayError::invalid(format!(
                "{field}: must be a positive integer or null"
            ))),
        },
    }
}
