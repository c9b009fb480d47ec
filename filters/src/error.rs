//! The gateway's error type and its one mapping to HTTP (SPEC.md, Errors).
//!
//! Handlers return a [`GatewayError`]; only [`GatewayError::status`] and
//! [`GatewayError::to_json`] decide what the client sees.

use std::fmt;

/// What went wrong, as the client is told. One variant per `error.type` of SPEC.md, plus
/// `NotFound` for paths the gateway does not serve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorKind {
    InvalidRequest,
    Authentication,
    InsufficientCredits,
    ModelNotFound,
    /// `retry_after` is whole seconds until a request would be admitted (at least 1).
    RateLimited {
        retry_after: u64,
    },
    Internal,
    Upstream,
    /// Every upstream was overloaded (Anthropic's 529 or `overloaded_error`): 502
    /// `upstream_error` on the OpenAI surface, 529 `overloaded_error` on the Messages API.
    Overloaded,
    ServiceUnavailable,
    NotFound,
    MethodNotAllowed,
    /// The resource exists already (a taken e-mail or slug).
    Conflict,
    /// A tool server failed the live check at registration (the reason in the message).
    ToolServerCheckFailed,
    /// The request came through a host or from a page the endpoint does not serve (the MCP
    /// endpoints' DNS-rebinding protection).
    Forbidden,
}

/// `Retry-After` of a 503: the stores' acquire timeout is 2 s by default, and a store back
/// from an outage serves again within a few seconds.
pub const SERVICE_UNAVAILABLE_RETRY_SECS: u64 = 2;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GatewayError {
    pub kind: ErrorKind,
    pub message: String,
    /// The request field at fault (`messages[0].content`, `email`), as OpenAI's `error.param`:
    /// a form shows the message next to that field without reading it out of the message.
    pub param: Option<String>,
}

/// The field an invalid-request message names. Every such message starts with the path of
/// the field at fault and a colon (`max_tokens: must be …`); `body:` (the request as a whole)
/// and header names (`Stripe-Signature:`) name no field. Gemini's fields are camelCase
/// (`generationConfig.maxOutputTokens`).
fn field_of(message: &str) -> Option<String> {
    let (head, _) = message.split_once(": ")?;
    let path = head
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '[' | ']'));
    let starts = head.starts_with(|c: char| c.is_ascii_lowercase() || c == '_');
    (path && starts && head != "body").then(|| head.to_owned())
}

impl GatewayError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        let message = message.into();
        // A request's own fault names its field; a taken e-mail or slug is a field's too.
        let param = match kind {
            ErrorKind::InvalidRequest | ErrorKind::Conflict => field_of(&message),
            _ => None,
        };
        GatewayError {
            kind,
            message,
            param,
        }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidRequest, message)
    }

    pub fn upstream(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Upstream, message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal, message)
    }

    /// The one exhaustive mapping from error kind to HTTP status and `error.type`.
    pub fn status_and_type(&self) -> (u16, &'static str) {
        match self.kind {
            ErrorKind::InvalidRequest => (400, "invalid_request"),
            ErrorKind::Authentication => (401, "authentication_error"),
            ErrorKind::InsufficientCredits => (402, "insufficient_credits"),
            ErrorKind::ModelNotFound => (404, "model_not_found"),
            ErrorKind::NotFound => (404, "not_found"),
            ErrorKind::MethodNotAllowed => (405, "invalid_request"),
            ErrorKind::Forbidden => (403, "permission_error"),
            ErrorKind::Conflict => (409, "conflict"),
            ErrorKind::ToolServerCheckFailed => (422, "tool_server_check_failed"),
            ErrorKind::RateLimited { .. } => (429, "rate_limit_exceeded"),
            ErrorKind::Internal => (500, "internal_error"),
            ErrorKind::Upstream | ErrorKind::Overloaded => (502, "upstream_error"),
            ErrorKind::ServiceUnavailable => (503, "service_unavailable"),
        }
    }

    pub fn status(&self) -> u16 {
        self.status_and_type().0
    }

    pub fn retry_after(&self) -> Option<u64> {
        match self.kind {
            ErrorKind::RateLimited { retry_after } => Some(retry_after.max(1)),
            _ => None,
        }
    }

    /// The `Retry-After` header's seconds: a rate limit's wait, and for a 503 (a store or the
    /// limiter that cannot answer right now; they recover within seconds) a short one, so
    /// that clients back off instead of retrying at once. Only a rate limit puts it in the
    /// body too (SPEC.md: `error.retry_after` is present on rate-limit errors).
    pub fn retry_after_header(&self) -> Option<u64> {
        match self.kind {
            ErrorKind::ServiceUnavailable => Some(SERVICE_UNAVAILABLE_RETRY_SECS),
            _ => self.retry_after(),
        }
    }

    /// The `{"error":{…}}` object of SPEC.md as a JSON value.
    pub fn to_value(&self) -> serde_json::Value {
        let (code, ty) = self.status_and_type();
        let mut inner = serde_json::json!({
            "type": ty,
            "message": self.message,
            "code": code,
        });
        if let Some(r) = self.retry_after() {
            inner["retry_after"] = r.into();
        }
        if let Some(p) = &self.param {
            inner["param"] = p.as_str().into();
        }
        serde_json::json!({ "error": inner })
    }

    pub fn to_json(&self) -> Vec<u8> {
        // Serializing a Value built from strings and integers cannot fail.
        serde_json::to_vec(&self.to_value()).unwrap_or_default()
    }
}

impl fmt::Display for GatewayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (code, ty) = self.status_and_type();
        write!(f, "{code} {ty}: {}", self.message)
    }
}

impl std::error::Error for GatewayError {}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows of `(kind, status, error.type)`. The kinds of the rows also make a match with no
    /// wildcard, so a kind added to [`ErrorKind`] without a row here does not compile, and a
    /// kind listed twice is an unreachable pattern.
    macro_rules! spec_table {
        (
            $($kind:ident $({ $($field:ident: $value:expr),* })? => $status:literal $ty:literal,)*
        ) => {{
            #[deny(unreachable_patterns)]
            fn _every_kind_has_one_row(kind: &ErrorKind) {
                match kind {
                    $(ErrorKind::$kind { .. } => {})*
                }
            }
            [$((ErrorKind::$kind $({ $($field: $value),* })?, $status, $ty)),*]
        }};
    }

    #[test]
    fn every_kind_maps_to_spec_status_and_type() {
        let rows = spec_table! {
            InvalidRequest => 400 "invalid_request",
            Authentication => 401 "authentication_error",
            InsufficientCredits => 402 "insufficient_credits",
            ModelNotFound => 404 "model_not_found",
            NotFound => 404 "not_found",
            MethodNotAllowed => 405 "invalid_request",
            Forbidden => 403 "permission_error",
            Conflict => 409 "conflict",
            ToolServerCheckFailed => 422 "tool_server_check_failed",
            RateLimited { retry_after: 3 } => 429 "rate_limit_exceeded",
            Internal => 500 "internal_error",
            Upstream => 502 "upstream_error",
            Overloaded => 502 "upstream_error",
            ServiceUnavailable => 503 "service_unavailable",
        };
        for (kind, status, ty) in rows {
            let e = GatewayError::new(kind.clone(), "m");
            let v = e.to_value();
            assert_eq!(e.status(), status, "{kind:?}");
            assert_eq!(v["error"]["type"], ty, "{kind:?}");
            assert_eq!(v["error"]["code"], status, "{kind:?}");
            assert_eq!(v["error"]["message"], "m", "{kind:?}");
        }
    }

    #[test]
    fn retry_after_only_on_rate_limit_and_at_least_one() {
        let e = GatewayError::new(ErrorKind::RateLimited { retry_after: 0 }, "slow down");
        assert_eq!(e.to_value()["error"]["retry_after"], 1);
        let e = GatewayError::invalid("x");
        assert!(e.to_value()["error"].get("retry_after").is_none());
        assert_eq!(e.retry_after_header(), None);
    }

    #[test]
    fn an_invalid_request_names_its_field_as_param() {
        let p = |m: &str| GatewayError::invalid(m).to_value()["error"]["param"].clone();
        assert_eq!(p("email: must be an e-mail address"), "email");
        assert_eq!(
            p("messages[2].content[0].type: unknown"),
            "messages[2].content[0].type"
        );
        assert_eq!(p("max_tokens: must be positive"), "max_tokens");
        // The body as a whole, a header, or a sentence: no field.
        assert!(p("body: malformed JSON (eof)").is_null());
        assert!(p("Stripe-Signature: no v1 entry").is_null());
        assert!(p("the upstream said no: 400").is_null());
        assert!(p("no colon at all").is_null());
        let e = GatewayError::new(ErrorKind::Conflict, "slug: `x` is taken");
        assert_eq!(e.to_value()["error"]["param"], "slug");
        let e = GatewayError::upstream("model: not served");
        assert!(e.to_value()["error"].get("param").is_none());
    }

    #[test]
    fn a_503_carries_a_retry_after_header_but_no_body_field() {
        let e = GatewayError::new(ErrorKind::ServiceUnavailable, "store down");
        assert_eq!(e.retry_after_header(), Some(SERVICE_UNAVAILABLE_RETRY_SECS));
        assert!(e.to_value()["error"].get("retry_after").is_none());
        let e = GatewayError::new(ErrorKind::RateLimited { retry_after: 7 }, "slow");
        assert_eq!(e.retry_after_header(), Some(7));
    }
}
