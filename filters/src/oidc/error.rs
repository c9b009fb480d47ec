//! Why an OpenID Connect step was refused.

/// Why a discovery document, key set, token response or ID token was refused. The messages
/// never quote the token: it is a credential and ends up in logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OidcError {
    /// Not the shape the specs describe; the text says which part.
    Malformed(&'static str),
    /// A discovery endpoint that is not an http(s) URL; names the member.
    BadEndpoint(&'static str),
    /// The ID token's `alg` is neither RS256 nor ES256 (`none`, HS256 and the rest are
    /// refused outright so a public key can never be used as an HMAC secret).
    UnsupportedAlg,
    /// No key of the set has the token's `kid` (and algorithm): the caller refetches the
    /// JWKS once, since the provider may have rotated its keys.
    UnknownKey,
    BadSignature,
    WrongIssuer,
    /// `aud` does not name our client, or `azp` names another.
    WrongAudience,
    Expired,
    /// `iat` or `nbf` lies in the future beyond the leeway.
    NotYetValid,
    WrongNonce,
    /// The token endpoint answered with an OAuth `error` member.
    Provider {
        error: String,
        description: Option<String>,
    },
}

impl std::fmt::Display for OidcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OidcError::Malformed(what) => write!(f, "malformed OpenID Connect data: {what}"),
            OidcError::BadEndpoint(member) => {
                write!(f, "the discovery document's {member} is not an http(s) URL")
            }
            OidcError::UnsupportedAlg => {
                f.write_str("the ID token's algorithm is not accepted (only RS256 and ES256)")
            }
            OidcError::UnknownKey => {
                f.write_str("the ID token's signing key is not in the provider's key set")
            }
            OidcError::BadSignature => f.write_str("the ID token's signature does not verify"),
            OidcError::WrongIssuer => f.write_str("the issuer is not the configured provider"),
            OidcError::WrongAudience => {
                f.write_str("the ID token was not issued to this client (aud/azp)")
            }
            OidcError::Expired => f.write_str("the ID token has expired"),
            OidcError::NotYetValid => f.write_str("the ID token is not valid yet (iat/nbf)"),
            OidcError::WrongNonce => f.write_str("the ID token's nonce is not this login's"),
            OidcError::Provider { error, description } => {
                write!(f, "the provider refused the code: {error}")?;
                match description {
                    Some(d) => write!(f, " ({d})"),
                    None => Ok(()),
                }
            }
        }
    }
}

impl std::error::Error for OidcError {}
