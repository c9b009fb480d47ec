//! The gateway's errors in Anthropic's shape, for clients of the inbound Messages API
//! (https://docs.anthropic.com/en/api/errors): `{"type":"error","error":{"type","message"}}`
//! with Anthropic's statuses, so Anthropic SDKs retry and raise as they would against
//! Anthropic itself.

use serde_json::Value;

use crate::{ErrorKind, GatewayError};

/// The HTTP status and Anthropic `error.type` of `err`.
pub fn error_type(err: &GatewayError) -> (u16, &'static str) {
    match err.kind {
        ErrorKind::InvalidRequest => (400, "invalid_request_error"),
        ErrorKind::MethodNotAllowed => (405, "invalid_request_error"),
        ErrorKind::Authentication => (401, "authentication_error"),
        ErrorKind::InsufficientCredits => (402, "billing_error"),
        ErrorKind::ModelNotFound => (404, "not_found_error"),
        ErrorKind::NotFound => (404, "not_found_error"),
        ErrorKind::Forbidden => (403, "permission_error"),
        ErrorKind::Conflict => (409, "invalid_request_error"),
        ErrorKind::ToolServerCheckFailed => (422, "invalid_request_error"),
        ErrorKind::RateLimited { .. } => (429, "rate_limit_error"),
        ErrorKind::Internal => (500, "api_error"),
        ErrorKind::Upstream => (502, "api_error"),
        ErrorKind::Overloaded => (529, "overloaded_error"),
        // Anthropic SDKs retry overloaded_error; a gateway with no capacity is the same case.
        ErrorKind::ServiceUnavailable => (503, "overloaded_error"),
    }
}

fn error_value(err: &GatewayError) -> Value {
    let (_, ty) = error_type(err);
    let mut inner = serde_json::json!({ "type": ty, "message": err.message });
    // Not in Anthropic's shape, but the header alone is easy to miss in a client's logs.
    if let Some(r) = err.retry_after() {
        inner["retry_after"] = r.into();
    }
    serde_json::json!({ "type": "error", "error": inner })
}

/// The response body for `err`.
pub fn error_body(err: &GatewayError) -> Vec<u8> {
    // Serializing a Value built from strings and integers cannot fail.
    serde_json::to_vec(&error_value(err)).unwrap_or_default()
}

/// `err` as an `event: error` SSE event, for a stream that broke after it began.
pub fn error_event(err: &GatewayError) -> Vec<u8> {
    super::named_event("error", &error_value(err))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_an_anthropic_status_and_type() {
        let rows = [
            (ErrorKind::InvalidRequest, 400, "invalid_request_error"),
            (ErrorKind::MethodNotAllowed, 405, "invalid_request_error"),
            (ErrorKind::Authentication, 401, "authentication_error"),
            (ErrorKind::InsufficientCredits, 402, "billing_error"),
            (ErrorKind::ModelNotFound, 404, "not_found_error"),
            (ErrorKind::NotFound, 404, "not_found_error"),
            (ErrorKind::Conflict, 409, "invalid_request_error"),
            (
                ErrorKind::RateLimited { retry_after: 0 },
                429,
                "rate_limit_error",
            ),
            (ErrorKind::Internal, 500, "api_error"),
            (ErrorKind::Upstream, 502, "api_error"),
            (ErrorKind::Overloaded, 529, "overloaded_error"),
            (ErrorKind::ServiceUnavailable, 503, "overloaded_error"),
        ];
        for (kind, status, ty) in rows {
            let e = GatewayError::new(kind.clone(), "msg \"q\"");
            assert_eq!(error_type(&e), (status, ty), "{kind:?}");
            let v: Value = serde_json::from_slice(&error_body(&e)).unwrap();
            assert_eq!(v["type"], "error");
            assert_eq!(v["error"]["type"], ty);
            assert_eq!(v["error"]["message"], "msg \"q\"");
            let retry = v["error"].get("retry_after").cloned();
            if matches!(kind, ErrorKind::RateLimited { .. }) {
                assert_eq!(retry, Some(1.into()));
            } else {
                assert_eq!(retry, None);
            }
        }
    }

    #[test]
    fn error_event_is_a_named_sse_event() {
        let e = GatewayError::new(ErrorKind::Overloaded, "busy");
        let text = String::from_utf8(error_event(&e)).unwrap();
        let data = text
            .strip_prefix("event: error\ndata: ")
            .and_then(|t| t.strip_suffix("\n\n"))
            .unwrap();
        let v: Value = serde_json::from_str(data).unwrap();
        assert_eq!(v["error"]["type"], "overloaded_error");
    }
}
