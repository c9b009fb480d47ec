//! OpenID Connect without I/O, for an organization's single sign-on: the authorization code
//! flow with PKCE (S256) against a provider such as the npm `oidc-provider`.
//!
//! The caller does the fetching; this module judges what comes back:
//! - [`Discovery::parse`] reads `/.well-known/openid-configuration` and refuses a document
//!   that speaks for another issuer (a mix-up of providers) or names a non-HTTP endpoint;
//! - [`Jwks::parse`] keeps the provider's RS256 and ES256 signing keys;
//! - [`authorization_url`], [`token_request_body`] and [`parse_token_response`] write and
//!   read the two legs of the code flow, [`pkce_challenge`] derives the S256 challenge;
//! - [`verify_id_token`] checks the ID token's signature and claims (the clock passed in);
//! - [`email_domain`] and [`domain_allowed`] decide whether a verified e-mail belongs to the
//!   organization's domains.

mod error;
mod jwt;
#[cfg(test)]
mod tests;

pub use error::OidcError;
pub use jwt::{verify_id_token, Alg, Claims, Expect, Jwk, JwkKey, Jwks, DEFAULT_LEEWAY_SECS};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The members of an OpenID provider's discovery document the code flow needs; the others
/// are ignored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Discovery {
    pub issuer: String,
    pub authorization_endpoint: String,
    pub token_endpoint: String,
    pub jwks_uri: String,
    #[serde(default)]
    pub userinfo_endpoint: Option<String>,
    #[serde(default)]
    pub id_token_signing_alg_values_supported: Vec<String>,
    #[serde(default)]
    pub code_challenge_methods_supported: Vec<String>,
}

impl Discovery {
    /// Parses a discovery document fetched for `expected_issuer`. Its `issuer` must be that
    /// one (one trailing `/` ignored on both sides, as configurations differ on it): a
    /// document speaking for another issuer would let that issuer's tokens in. The `issuer`
    /// kept is the document's, which ID tokens' `iss` must equal exactly.
    pub fn parse(bytes: &[u8], expected_issuer: &str) -> Result<Discovery, OidcError> {
        let doc: Discovery = serde_json::from_slice(bytes)
            .map_err(|_| OidcError::Malformed("the discovery document lacks required members"))?;
        if trim_one_slash(&doc.issuer) != trim_one_slash(expected_issuer) {
            return Err(OidcError::WrongIssuer);
        }
        let endpoints = [
            ("issuer", Some(&doc.issuer)),
            ("authorization_endpoint", Some(&doc.authorization_endpoint)),
            ("token_endpoint", Some(&doc.token_endpoint)),
            ("jwks_uri", Some(&doc.jwks_uri)),
            ("userinfo_endpoint", doc.userinfo_endpoint.as_ref()),
        ];
        for (member, url) in endpoints {
            if url.is_some_and(|u| !is_http_url(u)) {
                return Err(OidcError::BadEndpoint(member));
            }
        }
        Ok(doc)
    }
}

fn trim_one_slash(s: &str) -> &str {
    s.strip_suffix('/').unwrap_or(s)
}

/// `http://` or `https://`, a host, no fragment (RFC 6749 §3.1 forbids one on endpoints) and
/// nothing a URL cannot hold unescaped (spaces, controls).
fn is_http_url(url: &str) -> bool {
    let Some(rest) = strip_prefix_ignore_case(url, "https://")
        .or_else(|| strip_prefix_ignore_case(url, "http://"))
    else {
        return false;
    };
    let host_len = rest.find(['/', '?']).unwrap_or(rest.len());
    host_len > 0 && !url.contains('#') && !url.chars().any(|c| c.is_whitespace() || c.is_control())
}

fn strip_prefix_ignore_case<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    if head.eq_ignore_ascii_case(prefix) {
        s.get(prefix.len()..)
    } else {
        None
    }
}

/// RFC 3986 percent-encoding of a query or form value: the unreserved characters stay, every
/// other byte of the UTF-8 becomes `%XX` (so `+`, `&`, `=` and spaces survive both query
/// strings and `application/x-www-form-urlencoded` bodies unambiguously).
pub fn percent_encode(value: &str) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = String::with_capacity(value.len());
    for &b in value.as_bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push('%');
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 0x0f)]));
        }
    }
    out
}

fn encode_pairs(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", percent_encode(k), percent_encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// The S256 PKCE challenge of `verifier` (RFC 7636 §4.2): base64url, no padding, of its
/// SHA-256.
pub fn pkce_challenge(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// A PKCE verifier from 32 random bytes the caller draws: 43 base64url characters, the
/// shortest RFC 7636 allows, carrying 256 bits.
pub fn pkce_verifier(random: &[u8; 32]) -> String {
    URL_SAFE_NO_PAD.encode(random)
}

/// Where to send the browser: the provider's authorization endpoint with a code request
/// (PKCE S256). `openid` is added to `scope` when missing, since without it the provider
/// answers plain OAuth and no ID token comes back.
pub fn authorization_url(
    discovery: &Discovery,
    client_id: &str,
    redirect_uri: &str,
    state: &str,
    nonce: &str,
    challenge: &str,
    scope: &str,
) -> String {
    let scope = if scope.split(' ').any(|s| s == "openid") {
        scope.to_string()
    } else {
        format!("openid {scope}").trim_end().to_string()
    };
    let query = encode_pairs(&[
        ("response_type", "code"),
        ("client_id", client_id),
        ("redirect_uri", redirect_uri),
        ("scope", &scope),
        ("state", state),
        ("nonce", nonce),
        ("code_challenge", challenge),
        ("code_challenge_method", "S256"),
    ]);
    let endpoint = &discovery.authorization_endpoint;
    // The endpoint may carry a query of its own (RFC 6749 §3.1 allows it), kept in front.
    let sep = if endpoint.ends_with(['?', '&']) {
        ""
    } else if endpoint.contains('?') {
        "&"
    } else {
        "?"
    };
    format!("{endpoint}{sep}{query}")
}

/// The `application/x-www-form-urlencoded` body that trades the code for tokens. The client's
/// authentication (a secret in HTTP Basic) is the caller's, in the request's headers.
pub fn token_request_body(
    code: &str,
    redirect_uri: &str,
    verifier: &str,
    client_id: &str,
) -> String {
    encode_pairs(&[
        ("grant_type", "authorization_code"),
        ("code", code),
        ("redirect_uri", redirect_uri),
        ("code_verifier", verifier),
        ("client_id", client_id),
    ])
}

/// The `id_token` of a token endpoint's reply, or the OAuth error it names.
pub fn parse_token_response(bytes: &[u8]) -> Result<String, OidcError> {
    let reply: serde_json::Value = serde_json::from_slice(bytes)
        .map_err(|_| OidcError::Malformed("the token response is not JSON"))?;
    let Some(reply) = reply.as_object() else {
        return Err(OidcError::Malformed(
            "the token response is not a JSON object",
        ));
    };
    if let Some(error) = reply.get("error") {
        let text = |v: &serde_json::Value| v.as_str().map(printable);
        return Err(OidcError::Provider {
            error: text(error).unwrap_or_else(|| "unknown error".to_string()),
            description: reply.get("error_description").and_then(text),
        });
    }
    match reply.get("id_token").and_then(serde_json::Value::as_str) {
        Some(token) if !token.is_empty() => Ok(token.to_string()),
        _ => Err(OidcError::Malformed("the token response has no id_token")),
    }
}

/// A provider's error text as a log line may carry it: no control characters, bounded.
fn printable(s: &str) -> String {
    s.chars().filter(|c| !c.is_control()).take(200).collect()
}

/// The lower-cased domain of an e-mail address: what follows its last `@` (a quoted local
/// part may hold `@` itself). `None` without a local part or a domain.
pub fn email_domain(email: &str) -> Option<String> {
    let (local, domain) = email.rsplit_once('@')?;
    if local.is_empty() || domain.is_empty() {
        return None;
    }
    Some(domain.to_lowercase())
}

/// Whether `email`'s domain is one of `allowed`, compared whole and case-insensitively. No
/// suffix matching: `evil-example.com` and `sub.example.com` are not `example.com` (a
/// subdomain may be another party's). An entry may be written with a leading `@`. The caller
/// checks first that the provider verified the address ([`Claims::verified_email`]).
pub fn domain_allowed(email: &str, allowed: &[String]) -> bool {
    let Some(domain) = email_domain(email) else {
        return false;
    };
    allowed.iter().any(|a| {
        let a = a.trim();
        let a = a.strip_prefix('@').unwrap_or(a);
        !a.is_empty() && a.to_lowercase() == domain
    })
}

/// The flow's plain parts; the ID token's tests, with real signatures, are in `tests.rs`.
#[cfg(test)]
mod flow_tests {
    use super::*;
    use serde_json::json;

    const ISSUER: &str = "https://id.example.com";
    const CLIENT: &str = "tollgate-web";
    const NONCE: &str = "n-0S6_WzA2Mj";

    #[test]
    fn oidc_discovery_checks_issuer_and_endpoints() {
        let doc = |issuer: &str, token_endpoint: &str| {
            json!({
                "issuer": issuer,
                "authorization_endpoint": "https://id.example.com/auth",
                "token_endpoint": token_endpoint,
                "jwks_uri": "https://id.example.com/jwks",
                "userinfo_endpoint": "https://id.example.com/me",
                "id_token_signing_alg_values_supported": ["RS256", "ES256"],
                "code_challenge_methods_supported": ["S256"],
                "claims_supported": ["sub", "email"],
            })
            .to_string()
        };
        let ok = doc(ISSUER, "https://id.example.com/token");
        let d = Discovery::parse(ok.as_bytes(), ISSUER).unwrap();
        assert_eq!(d.token_endpoint, "https://id.example.com/token");
        assert_eq!(
            d.userinfo_endpoint.as_deref(),
            Some("https://id.example.com/me")
        );
        assert_eq!(d.code_challenge_methods_supported, ["S256"]);
        // One trailing slash differs harmlessly, either side; the document's issuer is kept.
        let slashed = doc("https://id.example.com/", "http://localhost:3000/token");
        let d = Discovery::parse(slashed.as_bytes(), ISSUER).unwrap();
        assert_eq!(d.issuer, "https://id.example.com/");
        assert!(Discovery::parse(ok.as_bytes(), "https://id.example.com/").is_ok());
        for foreign in [
            "https://evil.example.com",
            "https://id.example.com.evil",
            "https://id.example.com//",
        ] {
            let d = doc(foreign, "https://id.example.com/token");
            assert_eq!(
                Discovery::parse(d.as_bytes(), ISSUER),
                Err(OidcError::WrongIssuer)
            );
        }
        for endpoint in [
            "javascript:alert(1)",
            "ftp://id.example.com/t",
            "https://",
            "/token",
            "https://id.example.com/t#x",
            "https://id .example.com",
        ] {
            let d = doc(ISSUER, endpoint);
            assert_eq!(
                Discovery::parse(d.as_bytes(), ISSUER),
                Err(OidcError::BadEndpoint("token_endpoint")),
                "{endpoint}"
            );
        }
        let missing =
            json!({"issuer": ISSUER, "token_endpoint": "https://id.example.com/t"}).to_string();
        assert!(matches!(
            Discovery::parse(missing.as_bytes(), ISSUER),
            Err(OidcError::Malformed(_))
        ));
    }

    #[test]
    fn oidc_pkce_matches_rfc_7636_appendix_b() {
        let challenge = pkce_challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk");
        assert_eq!(challenge, "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM");
        // Appendix B's verifier is its 32 octets in base64url.
        let octets: [u8; 32] = [
            116, 24, 223, 180, 151, 153, 224, 37, 79, 250, 96, 125, 216, 173, 187, 186, 22, 212,
            37, 77, 105, 214, 191, 240, 91, 88, 5, 88, 83, 132, 141, 121,
        ];
        assert_eq!(
            pkce_verifier(&octets),
            "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"
        );
    }

    fn percent_decode(s: &str) -> String {
        let b = s.as_bytes();
        let (mut out, mut i) = (Vec::new(), 0);
        while i < b.len() {
            match b[i] {
                b'%' => {
                    out.push(u8::from_str_radix(&s[i + 1..i + 3], 16).unwrap());
                    i += 3;
                }
                b'+' => {
                    out.push(b' ');
                    i += 1;
                }
                c => {
                    out.push(c);
                    i += 1;
                }
            }
        }
        String::from_utf8(out).unwrap()
    }

    fn pairs(query: &str) -> Vec<(String, String)> {
        query
            .split('&')
            .map(|kv| {
                let (k, v) = kv.split_once('=').unwrap();
                (percent_decode(k), percent_decode(v))
            })
            .collect()
    }

    #[test]
    fn oidc_urls_and_bodies_encode_and_round_trip() {
        let tricky = "a b&c=d+e/f?g#h%i~j.k_l-m é ✓ 𝄞";
        assert_eq!(
            percent_encode("a b&c=d+e/é~._-"),
            "a%20b%26c%3Dd%2Be%2F%C3%A9~._-"
        );
        let d = Discovery {
            issuer: ISSUER.into(),
            authorization_endpoint: "https://id.example.com/auth".into(),
            token_endpoint: "https://id.example.com/token".into(),
            jwks_uri: "https://id.example.com/jwks".into(),
            userinfo_endpoint: None,
            id_token_signing_alg_values_supported: vec![],
            code_challenge_methods_supported: vec![],
        };
        let redirect = "https://gw.example.com/sso/callback?org=a&b=c d";
        let url = authorization_url(
            &d,
            CLIENT,
            redirect,
            tricky,
            NONCE,
            "E9Mel",
            "email profile",
        );
        let (base, query) = url.split_once('?').unwrap();
        assert_eq!(base, "https://id.example.com/auth");
        assert!(!query.contains(' ') && !query.contains('+') && !query.contains('#'));
        let got = pairs(query);
        let want = [
            ("response_type", "code"),
            ("client_id", CLIENT),
            ("redirect_uri", redirect),
            ("scope", "openid email profile"),
            ("state", tricky),
            ("nonce", NONCE),
            ("code_challenge", "E9Mel"),
            ("code_challenge_method", "S256"),
        ];
        let want: Vec<_> = want
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(got, want);
        // An endpoint with its own query keeps it; a scope naming openid is left alone.
        let mut d2 = d.clone();
        d2.authorization_endpoint = "https://id.example.com/auth?tenant=x".into();
        let url = authorization_url(&d2, CLIENT, redirect, "s", "n", "c", "openid email");
        assert!(url.starts_with("https://id.example.com/auth?tenant=x&response_type=code&"));
        assert!(url.contains("&scope=openid%20email&"));
        let body = token_request_body(tricky, redirect, "dBjf-~._", CLIENT);
        assert!(body.starts_with("grant_type=authorization_code&code="));
        let got = pairs(&body);
        assert_eq!(got[1], ("code".to_string(), tricky.to_string()));
        assert_eq!(got[2], ("redirect_uri".to_string(), redirect.to_string()));
        assert_eq!(
            got[3],
            ("code_verifier".to_string(), "dBjf-~._".to_string())
        );
        assert_eq!(got[4], ("client_id".to_string(), CLIENT.to_string()));
    }

    #[test]
    fn oidc_token_response_yields_the_id_token_or_the_error() {
        let ok =
            br#"{"access_token":"at","token_type":"Bearer","expires_in":3600,"id_token":"h.p.s"}"#;
        assert_eq!(parse_token_response(ok), Ok("h.p.s".to_string()));
        let err = br#"{"error":"invalid_grant","error_description":"grant request is invalid"}"#;
        let e = parse_token_response(err).unwrap_err();
        assert_eq!(
            e,
            OidcError::Provider {
                error: "invalid_grant".into(),
                description: Some("grant request is invalid".into())
            }
        );
        assert!(e.to_string().contains("invalid_grant"));
        let e = parse_token_response(br#"{"error":"invalid_client\n"}"#).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the provider refused the code: invalid_client"
        );
        for bad in [
            &b"{}"[..],
            br#"{"id_token":""}"#,
            br#"{"id_token":5}"#,
            b"[]",
            b"<html>",
        ] {
            assert!(matches!(
                parse_token_response(bad),
                Err(OidcError::Malformed(_))
            ));
        }
    }

    #[test]
    fn oidc_email_domains_match_whole_and_case_insensitively() {
        assert_eq!(
            email_domain("Ada@Example.COM").as_deref(),
            Some("example.com")
        );
        assert_eq!(
            email_domain("\"a@b\"@example.com").as_deref(),
            Some("example.com")
        );
        for bad in ["", "ada", "@example.com", "ada@"] {
            assert_eq!(email_domain(bad), None, "{bad}");
        }
        let allowed = vec!["Example.com".to_string(), "@corp.example.org".to_string()];
        for yes in ["ada@example.com", "ADA@EXAMPLE.COM", "x@corp.example.org"] {
            assert!(domain_allowed(yes, &allowed), "{yes}");
        }
        for no in [
            "ada@evil-example.com",
            "ada@evilexample.com",
            "ada@sub.example.com",
            "ada@example.com.evil.net",
            "ada@example.org",
            "example.com@evil.net",
            "ada@example.com@evil.net",
            "ada@",
            "example.com",
        ] {
            assert!(!domain_allowed(no, &allowed), "{no}");
        }
        assert!(!domain_allowed("ada@example.com", &[]));
        assert!(!domain_allowed("ada@example.com", &[String::new()]));
        let claims = Claims {
            sub: "s".into(),
            email: Some("ada@example.com".into()),
            email_verified: Some(false),
            name: None,
            exp: 0,
            iat: 0,
        };
        assert_eq!(claims.verified_email(), None);
    }
}
