//! The provider's signing keys (JWKS) and the ID token check: signature first, with the
//! algorithm fixed by the key (never chosen by the token alone), then the claims OpenID
//! Connect Core §3.1.3.7 requires of a code-flow client.

use super::error::OidcError;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use ring::signature::{
    RsaPublicKeyComponents, UnparsedPublicKey, ECDSA_P256_SHA256_FIXED, RSA_PKCS1_2048_8192_SHA256,
};
use serde::Deserialize;

/// Clock skew tolerated between the provider and us, in seconds.
pub const DEFAULT_LEEWAY_SECS: i64 = 60;

/// A bound on what is decoded at all: real ID tokens are a few KiB, and a larger one is only
/// someone making us spend memory.
const MAX_TOKEN_LEN: usize = 64 * 1024;

/// The signature algorithms accepted. Asymmetric only: an HMAC algorithm would take the
/// provider's public key as a shared secret that anyone has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alg {
    Rs256,
    Es256,
}

impl Alg {
    /// The JOSE name (`RS256`, `ES256`).
    pub fn name(self) -> &'static str {
        match self {
            Alg::Rs256 => "RS256",
            Alg::Es256 => "ES256",
        }
    }

    fn from_name(name: &str) -> Option<Alg> {
        match name {
            "RS256" => Some(Alg::Rs256),
            "ES256" => Some(Alg::Es256),
            _ => None,
        }
    }
}

/// A verification key's material, decoded from base64url.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JwkKey {
    /// Modulus and exponent, big-endian without leading zeros (as ring wants them).
    Rsa { n: Vec<u8>, e: Vec<u8> },
    /// The uncompressed P-256 point: `0x04 || x || y` (65 bytes).
    EcP256 { point: Vec<u8> },
}

/// One signing key of the provider's set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Jwk {
    pub kid: Option<String>,
    pub key: JwkKey,
}

impl Jwk {
    /// The one algorithm this key verifies: the key's type decides, not the token.
    pub fn alg(&self) -> Alg {
        match self.key {
            JwkKey::Rsa { .. } => Alg::Rs256,
            JwkKey::EcP256 { .. } => Alg::Es256,
        }
    }

    fn verifies(&self, message: &[u8], signature: &[u8]) -> bool {
        match &self.key {
            JwkKey::Rsa { n, e } => RsaPublicKeyComponents { n, e }
                .verify(&RSA_PKCS1_2048_8192_SHA256, message, signature)
                .is_ok(),
            JwkKey::EcP256 { point } => UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, point)
                .verify(message, signature)
                .is_ok(),
        }
    }
}

/// A JSON Web Key Set reduced to the keys we can verify with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Jwks {
    keys: Vec<Jwk>,
}

/// A key as published; every member optional so one odd key is skipped, not fatal.
#[derive(Deserialize)]
struct RawJwk {
    kty: Option<String>,
    kid: Option<String>,
    #[serde(rename = "use")]
    use_: Option<String>,
    alg: Option<String>,
    n: Option<String>,
    e: Option<String>,
    crv: Option<String>,
    x: Option<String>,
    y: Option<String>,
}

impl RawJwk {
    fn into_jwk(self) -> Option<Jwk> {
        // An encryption key is never a signing key, even with the right type.
        if self.use_.as_deref().is_some_and(|u| u != "sig") {
            return None;
        }
        let alg_is = |want: &str| self.alg.as_deref().is_none_or(|a| a == want);
        let key = match self.kty.as_deref()? {
            "RSA" if alg_is("RS256") => {
                let n = strip_leading_zeros(URL_SAFE_NO_PAD.decode(self.n.as_ref()?).ok()?);
                let e = strip_leading_zeros(URL_SAFE_NO_PAD.decode(self.e.as_ref()?).ok()?);
                if n.is_empty() || e.is_empty() {
                    return None;
                }
                JwkKey::Rsa { n, e }
            }
            "EC" if alg_is("ES256") && self.crv.as_deref() == Some("P-256") => {
                let x = URL_SAFE_NO_PAD.decode(self.x.as_ref()?).ok()?;
                let y = URL_SAFE_NO_PAD.decode(self.y.as_ref()?).ok()?;
                if x.len() != 32 || y.len() != 32 {
                    return None;
                }
                let mut point = Vec::with_capacity(65);
                point.push(0x04);
                point.extend_from_slice(&x);
                point.extend_from_slice(&y);
                JwkKey::EcP256 { point }
            }
            _ => return None,
        };
        Some(Jwk { kid: self.kid, key })
    }
}

/// Some publishers prefix a zero octet to the modulus (RFC 7518 §6.3.1.1 notes it); ring
/// wants the minimal encoding.
fn strip_leading_zeros(mut bytes: Vec<u8>) -> Vec<u8> {
    let zeros = bytes.iter().take_while(|&&b| b == 0).count();
    bytes.drain(..zeros);
    bytes
}

impl Jwks {
    /// Parses `{"keys":[…]}`, keeping RSA (RS256) and EC P-256 (ES256) signature keys and
    /// skipping the others silently: a provider may publish key types we do not use.
    pub fn parse(bytes: &[u8]) -> Result<Jwks, OidcError> {
        #[derive(Deserialize)]
        struct Set {
            keys: Vec<serde_json::Value>,
        }
        let set: Set = serde_json::from_slice(bytes)
            .map_err(|_| OidcError::Malformed("the JWKS is not {\"keys\":[…]}"))?;
        let keys = set
            .keys
            .into_iter()
            .filter_map(|k| serde_json::from_value::<RawJwk>(k).ok())
            .filter_map(RawJwk::into_jwk)
            .collect();
        Ok(Jwks { keys })
    }

    pub fn keys(&self) -> &[Jwk] {
        &self.keys
    }

    /// The key for a token's `kid` and algorithm. Without a `kid`, the only key of that
    /// algorithm (none when several could be meant).
    pub fn find(&self, kid: Option<&str>, alg: Alg) -> Option<&Jwk> {
        let mut of_alg = self.keys.iter().filter(|k| k.alg() == alg);
        match kid {
            Some(kid) => of_alg.find(|k| k.kid.as_deref() == Some(kid)),
            None => {
                let only = of_alg.next()?;
                of_alg.next().is_none().then_some(only)
            }
        }
    }
}

/// What this login expects of its ID token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expect {
    /// The discovery document's `issuer`, which `iss` must equal exactly.
    pub issuer: String,
    pub client_id: String,
    /// The nonce sent in this login's authorization request.
    pub nonce: String,
    pub leeway_secs: i64,
}

impl Expect {
    /// With the default leeway ([`DEFAULT_LEEWAY_SECS`]).
    pub fn new(
        issuer: impl Into<String>,
        client_id: impl Into<String>,
        nonce: impl Into<String>,
    ) -> Expect {
        Expect {
            issuer: issuer.into(),
            client_id: client_id.into(),
            nonce: nonce.into(),
            leeway_secs: DEFAULT_LEEWAY_SECS,
        }
    }
}

/// The verified claims the gateway uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claims {
    pub sub: String,
    pub email: Option<String>,
    pub email_verified: Option<bool>,
    pub name: Option<String>,
    pub exp: i64,
    pub iat: i64,
}

impl Claims {
    /// The e-mail only when the provider says it verified it: an unverified address proves
    /// nothing about the user's domain.
    pub fn verified_email(&self) -> Option<&str> {
        match self.email_verified {
            Some(true) => self.email.as_deref(),
            _ => None,
        }
    }
}

#[derive(Deserialize)]
struct Header {
    alg: String,
    #[serde(default)]
    kid: Option<String>,
    #[serde(default)]
    crit: Option<serde_json::Value>,
}

/// `aud` is a string or an array of strings (RFC 7519 §4.1.3).
#[derive(Deserialize)]
#[serde(untagged)]
enum Audience {
    One(String),
    Many(Vec<String>),
}

/// The payload's members as typed as the specs make them; derived, so a duplicated member
/// is an error rather than a parser's silent choice.
#[derive(Deserialize)]
struct RawClaims {
    iss: Option<String>,
    sub: Option<String>,
    aud: Option<Audience>,
    azp: Option<String>,
    exp: Option<serde_json::Number>,
    iat: Option<serde_json::Number>,
    nbf: Option<serde_json::Number>,
    nonce: Option<String>,
    email: Option<String>,
    // Some providers send "true" as a string.
    email_verified: Option<serde_json::Value>,
    name: Option<String>,
}

fn decode_part(part: &str) -> Result<Vec<u8>, OidcError> {
    URL_SAFE_NO_PAD
        .decode(part)
        .map_err(|_| OidcError::Malformed("an ID token part is not base64url without padding"))
}

/// Verifies an ID token's signature against `jwks`, then its claims against `expect` at
/// `now_secs` (Unix seconds). The payload is read only once the signature holds.
pub fn verify_id_token(
    token: &str,
    jwks: &Jwks,
    expect: &Expect,
    now_secs: i64,
) -> Result<Claims, OidcError> {
    if token.len() > MAX_TOKEN_LEN {
        return Err(OidcError::Malformed("the ID token is too long"));
    }
    let mut parts = token.split('.');
    let (Some(h), Some(p), Some(s), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(OidcError::Malformed("an ID token has three parts"));
    };
    let header: Header = serde_json::from_slice(&decode_part(h)?)
        .map_err(|_| OidcError::Malformed("the ID token's header is not a JOSE header"))?;
    // We understand no critical extension, and RFC 7515 §4.1.11 says refuse then.
    if header.crit.is_some() {
        return Err(OidcError::Malformed("the ID token's header has crit"));
    }
    let alg = Alg::from_name(&header.alg).ok_or(OidcError::UnsupportedAlg)?;
    let payload = decode_part(p)?;
    let signature = decode_part(s)?;
    let key = jwks
        .find(header.kid.as_deref(), alg)
        .ok_or(OidcError::UnknownKey)?;
    let signed = &token.as_bytes()[..h.len() + 1 + p.len()];
    if !key.verifies(signed, &signature) {
        return Err(OidcError::BadSignature);
    }
    let claims: RawClaims = serde_json::from_slice(&payload)
        .map_err(|_| OidcError::Malformed("the ID token's claims are not the JSON expected"))?;
    check_claims(claims, expect, now_secs)
}

/// A NumericDate may have a fraction (RFC 7519 §2); whole seconds are enough here. `as`
/// saturates, so an absurd date cannot wrap.
fn seconds(n: &serde_json::Number) -> i64 {
    n.as_i64()
        .unwrap_or_else(|| n.as_f64().map_or(i64::MAX, |f| f.floor() as i64))
}

fn check_claims(c: RawClaims, expect: &Expect, now: i64) -> Result<Claims, OidcError> {
    if c.iss.as_deref() != Some(expect.issuer.as_str()) {
        return Err(OidcError::WrongIssuer);
    }
    let audiences = match c.aud {
        Some(Audience::One(a)) => vec![a],
        Some(Audience::Many(a)) => a,
        None => Vec::new(),
    };
    if !audiences.contains(&expect.client_id) {
        return Err(OidcError::WrongAudience);
    }
    // Core §3.1.3.7: with several audiences azp must name us; when present, always.
    let azp_ok = match c.azp.as_deref() {
        Some(azp) => azp == expect.client_id,
        None => audiences.len() == 1,
    };
    if !azp_ok {
        return Err(OidcError::WrongAudience);
    }
    let leeway = expect.leeway_secs.max(0);
    let exp = seconds(
        c.exp
            .as_ref()
            .ok_or(OidcError::Malformed("the ID token has no exp"))?,
    );
    if exp <= now.saturating_sub(leeway) {
        return Err(OidcError::Expired);
    }
    let iat = seconds(
        c.iat
            .as_ref()
            .ok_or(OidcError::Malformed("the ID token has no iat"))?,
    );
    let latest = now.saturating_add(leeway);
    if iat > latest || c.nbf.as_ref().is_some_and(|nbf| seconds(nbf) > latest) {
        return Err(OidcError::NotYetValid);
    }
    // An empty expected nonce would accept a token minted without one for any login.
    if expect.nonce.is_empty() || c.nonce.as_deref() != Some(expect.nonce.as_str()) {
        return Err(OidcError::WrongNonce);
    }
    let sub = c.sub.filter(|s| !s.is_empty());
    let sub = sub.ok_or(OidcError::Malformed("the ID token has no sub"))?;
    let email_verified = match c.email_verified {
        Some(serde_json::Value::Bool(b)) => Some(b),
        Some(serde_json::Value::String(s)) if s == "true" => Some(true),
        Some(serde_json::Value::String(s)) if s == "false" => Some(false),
        _ => None,
    };
    Ok(Claims {
        sub,
        email: c.email,
        email_verified,
        name: c.name,
        exp,
        iat,
    })
}
