//! OAuth errors in RFC 6749's shape (`{"error":"invalid_grant","error_description":…}`), the
//! one place they are mapped to HTTP statuses; the OAuth endpoints answer with these instead of
//! the gateway's `{"error":{…}}` object, which OAuth clients do not read.

use crate::request::Session;
use serde_json::json;
use tollgate_filters::{ErrorKind, GatewayError};

use crate::ledger::StoreError;
use crate::request::ctx::RequestCtx;
use crate::request::respond;

/// The error codes of RFC 6749 (5.2, 4.1.2.1), RFC 7591 (3.2.2) and RFC 8707 (2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    InvalidRequest,
    InvalidClient,
    InvalidGrant,
    UnauthorizedClient,
    UnsupportedGrantType,
    UnsupportedResponseType,
    InvalidTarget,
    AccessDenied,
    InvalidRedirectUri,
    InvalidClientMetadata,
    ServerError,
    TemporarilyUnavailable,
}

impl Code {
    pub fn as_str(self) -> &'static str {
        match self {
            Code::InvalidRequest => "invalid_request",
            Code::InvalidClient => "invalid_client",
            Code::InvalidGrant => "invalid_grant",
            Code::UnauthorizedClient => "unauthorized_client",
            Code::UnsupportedGrantType => "unsupported_grant_type",
            Code::UnsupportedResponseType => "unsupported_response_type",
            Code::InvalidTarget => "invalid_target",
            Code::AccessDenied => "access_denied",
            Code::InvalidRedirectUri => "invalid_redirect_uri",
            Code::InvalidClientMetadata => "invalid_client_metadata",
            Code::ServerError => "server_error",
            Code::TemporarilyUnavailable => "temporarily_unavailable",
        }
    }
}

#[derive(Debug, Clone)]
pub struct OAuthError {
    pub code: Code,
    pub description: String,
}

impl OAuthError {
    pub fn new(code: Code, description: impl Into<String>) -> OAuthError {
        OAuthError {
            code,
            description: description.into(),
        }
    }

    pub fn request(description: impl Into<String>) -> OAuthError {
        OAuthError::new(Code::InvalidRequest, description)
    }

    pub fn grant(description: impl Into<String>) -> OAuthError {
        OAuthError::new(Code::InvalidGrant, description)
    }

    pub fn status(&self) -> u16 {
        match self.code {
            Code::InvalidClient => 401,
            Code::ServerError => 500,
            Code::TemporarilyUnavailable => 503,
            _ => 400,
        }
    }

    pub fn to_json(&self) -> serde_json::Value {
        json!({"error": self.code.as_str(), "error_description": self.description})
    }
}

impl From<GatewayError> for OAuthError {
    /// A gateway error met on an OAuth endpoint (a body too large or too slow, a store that
    /// cannot answer) in OAuth's words.
    fn from(e: GatewayError) -> Self {
        let code = match e.kind {
            ErrorKind::ServiceUnavailable => Code::TemporarilyUnavailable,
            ErrorKind::InvalidRequest => Code::InvalidRequest,
            _ => Code::ServerError,
        };
        OAuthError::new(code, e.message)
    }
}

impl From<StoreError> for OAuthError {
    fn from(e: StoreError) -> Self {
        GatewayError::from(e).into()
    }
}

/// Answers an OAuth endpoint's outcome: the JSON on success, else the RFC 6749 error. Token
/// responses must not be cached (RFC 6749 5.1).
pub async fn answer(
    session: &mut Session,
    ctx: &mut RequestCtx,
    outcome: Result<(u16, serde_json::Value), OAuthError>,
) -> Result<(), GatewayError> {
    let no_store = [("Cache-Control", "no-store".to_owned())];
    match outcome {
        Ok((status, body)) => respond::json(session, ctx, status, &body, &no_store).await,
        Err(e) => {
            ctx.error = Some(format!("{}: {}", e.code.as_str(), e.description));
            if e.status() == 400 {
                session.set_keepalive(None);
            }
            respond::json(session, ctx, e.status(), &e.to_json(), &no_store).await
        }
    }
    Ok(())
}
