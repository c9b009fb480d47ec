//! Real signatures throughout: ES256 keys generated per test, RS256 with a fixed test key
//! (ring cannot generate RSA keys).

use super::*;
use base64::engine::general_purpose::STANDARD;
use ring::rand::SystemRandom;
use ring::signature::{
    EcdsaKeyPair, KeyPair, RsaKeyPair, RsaPublicKeyComponents, ECDSA_P256_SHA256_FIXED_SIGNING,
    RSA_PKCS1_SHA256,
};
use serde_json::{json, Value};

/// A 2048-bit RSA private key (PKCS#8 DER, base64) made for these tests only; it signs
/// nothing anywhere else. Generated with
/// `openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 | openssl pkcs8 -topk8
/// -nocrypt -outform DER | base64 -w0`.
const RSA_TEST_KEY_PKCS8: &str = concat!(
    "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQDAJq0O9PBd17YVwXkTgBTS7HMQZE1LaDbHj9oq",
    "ukocBNDfno5STlwyctMrb7OqK02B25Yl4r3I2DhU/O7Oolnkeuv++uVk+MnWKS/BdSo+KOeVLio69vlLdVKKgTbQ",
    "L8Q2A9+OD4D/yrWc3RmtS2pSEmXFZFBhtWiWtIjQJpgneDq0abF3yuWGFP6kQhLQfw6cs+v3J5CwiqeHkN38SwuG",
    "xx4eCDkjIY5LfsxCIAd28V1e5PG5XyjHeX1emL9+dHwMR7Joby9DzNM5xakng0AO8dHL/GcMuADjGnpwxvW3Q3pA",
    "D0zA94Gp5U8QwqTFQ+RCXw4+jMWVvJ2UVTQJwZCTAgMBAAECggEAWJ19kjhD4gNpZf8j52paMCv7pMOdIfmdycr9",
    "wlbHdsSBz58/45Vfz6RE3vNU2FXAGPM7+5zmCYot8IP1XjZhXo2R6LWstTRHYQz9iSqPoLsckiAIOclMjxA8UMPm",
    "k3xz8LU4lDtyMoU53G3bOaBeGBuD89SffXA8G8SGk/g4k3qCTRH5NDH0tX8KUKQvXTNQeLNOYsdvFzEkGCBAbGwJ",
    "OlV9L322GoiflQ4Nr4Ogysbr6UcusppkXMmlYnnFGAtrjBL3U5NcraqhlSocIB8U0/Rjqb1drEMF+XQGzwH5R8Ri",
    "z8UD3N9FBmCKeg9jfUNKbxkLtLGP5xJ1jMmWAIxPAQKBgQDoZXn0o1GZmQphB8ZZh/JfXlQlCE3swxDRfnaPs1r9",
    "IDEJm+Obj4WKyc0uOCRWlvUrhZ7jl5iTmVxrn4k7R0hphLP3/oU0tkyDPmS6ZSX2xLsvHEM+m/u/T8B5hC96Fgfi",
    "jL+ack9BEvM5/k27mgAc+mKRKWS3r024xKq4EnrrGQKBgQDTqsingDhxIZePP6nvwFPruE+5vGMLEjNE8vnYALwa",
    "izAasz65SeWEItlNSfArQ6ngZg3hu8leo8NV8kt9BHuX0bhKSDbRNcHGkJ/NvaloTHBwSc1sY/2O/Pk9NJ1gLAbI",
    "/rr/rIwMOwPUEUn4pZVMEm0D8hRdYMn+KPtd7gp6iwKBgEKUkBQelkpDJk4WRCVyZWYdSE4zyt+CI1dhu+X/pJnQ",
    "lzwBhXwT6laQ6k/Lld2Y8jS923+o9vWSgn/y/QYWrhBNDKKIMPGhKNqRDZq5T98bDeW5Wyqc1ctBtgsaa9+2YBvv",
    "5xUAmuQx4a1DxlFxFYc31PVxvoFBoCrHbYG/CahBAoGBAMhMZ77h/gdIc4RyCVzAUmnQq1km5U63tV5802LNJzOz",
    "HR1XG3b5b8C/vYR/AE/gouOfj2laa68sJw+wzjCKym4bXlqkxYLqbOl7OE3YOXRiSVBo9oSohmwGBdEedgJpBy6y",
    "psCFRq3YNsI6bhZmksY+9XxzW0QV8G+b1mrHdJELAoGAE8c3pHxeDRv29c/o7UA5b3CquLFlOpS3hR0HJdJ4NJh1",
    "1bxNHdm5N1ok4JoPaK9Slg+f9wj4mKE1avUyY5Tz/SZ5Knt1w6cg22WWNJct216SS99Jnr4Pj66qBS4A3KVRB1vk",
    "Hs4EFP2OiBv30DWQxJBnJdgGwnuJ6msH7NKtg34=",
);

const ISSUER: &str = "https://id.example.com";
const CLIENT: &str = "tollgate-web";
const NONCE: &str = "n-0S6_WzA2Mj";
const NOW: i64 = 1_700_000_000;

fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

struct Fixture {
    rsa: RsaKeyPair,
    ec: EcdsaKeyPair,
    jwks_json: String,
    jwks: Jwks,
}

fn rsa_pair() -> RsaKeyPair {
    RsaKeyPair::from_pkcs8(&STANDARD.decode(RSA_TEST_KEY_PKCS8).unwrap()).unwrap()
}

fn ec_pair() -> EcdsaKeyPair {
    let rng = SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
    EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng).unwrap()
}

fn rsa_jwk(kp: &RsaKeyPair, kid: &str) -> Value {
    let c: RsaPublicKeyComponents<Vec<u8>> = kp.public().into();
    json!({"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256", "n": b64(&c.n), "e": b64(&c.e)})
}

fn ec_jwk(kp: &EcdsaKeyPair, kid: &str) -> Value {
    let p = kp.public_key().as_ref();
    json!({"kty": "EC", "kid": kid, "crv": "P-256", "x": b64(&p[1..33]), "y": b64(&p[33..65])})
}

fn fixture() -> Fixture {
    let (rsa, ec) = (rsa_pair(), ec_pair());
    let jwks_json = json!({"keys": [rsa_jwk(&rsa, "rsa-1"), ec_jwk(&ec, "ec-1")]}).to_string();
    let jwks = Jwks::parse(jwks_json.as_bytes()).unwrap();
    Fixture {
        rsa,
        ec,
        jwks_json,
        jwks,
    }
}

fn signing_input(header: &Value, claims: &Value) -> String {
    format!(
        "{}.{}",
        b64(header.to_string().as_bytes()),
        b64(claims.to_string().as_bytes())
    )
}

fn sign_rs(kp: &RsaKeyPair, header: &Value, claims: &Value) -> String {
    let input = signing_input(header, claims);
    let mut sig = vec![0; kp.public().modulus_len()];
    kp.sign(
        &RSA_PKCS1_SHA256,
        &SystemRandom::new(),
        input.as_bytes(),
        &mut sig,
    )
    .unwrap();
    format!("{input}.{}", b64(&sig))
}

fn sign_es(kp: &EcdsaKeyPair, header: &Value, claims: &Value) -> String {
    let input = signing_input(header, claims);
    let sig = kp.sign(&SystemRandom::new(), input.as_bytes()).unwrap();
    format!("{input}.{}", b64(sig.as_ref()))
}

/// A token over `claims`, signed as `alg` with the fixture's key of that alg.
fn token(f: &Fixture, alg: Alg, claims: &Value) -> String {
    match alg {
        Alg::Rs256 => sign_rs(
            &f.rsa,
            &json!({"alg": "RS256", "kid": "rsa-1", "typ": "JWT"}),
            claims,
        ),
        Alg::Es256 => sign_es(
            &f.ec,
            &json!({"alg": "ES256", "kid": "ec-1", "typ": "JWT"}),
            claims,
        ),
    }
}

fn good_claims() -> Value {
    json!({
        "iss": ISSUER, "aud": CLIENT, "sub": "user-42", "nonce": NONCE,
        "exp": NOW + 300, "iat": NOW - 5, "auth_time": NOW - 10,
        "email": "Ada@Example.com", "email_verified": true, "name": "Ada Lovelace",
    })
}

fn with(changes: Value) -> Value {
    let mut c = good_claims();
    for (k, v) in changes.as_object().unwrap() {
        if v.is_null() {
            c.as_object_mut().unwrap().remove(k);
        } else {
            c[k] = v.clone();
        }
    }
    c
}

fn verify(f: &Fixture, token: &str) -> Result<Claims, OidcError> {
    verify_id_token(token, &f.jwks, &Expect::new(ISSUER, CLIENT, NONCE), NOW)
}

const ALGS: [Alg; 2] = [Alg::Rs256, Alg::Es256];

#[test]
fn oidc_valid_tokens_of_each_alg_pass_and_return_the_claims() {
    let f = fixture();
    assert_eq!(f.jwks.keys().len(), 2);
    for alg in ALGS {
        let claims = verify(&f, &token(&f, alg, &good_claims())).unwrap();
        assert_eq!(
            claims,
            Claims {
                sub: "user-42".into(),
                email: Some("Ada@Example.com".into()),
                email_verified: Some(true),
                name: Some("Ada Lovelace".into()),
                exp: NOW + 300,
                iat: NOW - 5,
            },
            "{alg:?}"
        );
        assert_eq!(claims.verified_email(), Some("Ada@Example.com"));
    }
}

#[test]
fn oidc_tampered_payload_fails_the_signature() {
    let f = fixture();
    for alg in ALGS {
        let t = token(&f, alg, &good_claims());
        let parts: Vec<&str> = t.split('.').collect();
        let forged = b64(with(json!({"sub": "admin"})).to_string().as_bytes());
        let t = format!("{}.{forged}.{}", parts[0], parts[2]);
        assert_eq!(verify(&f, &t), Err(OidcError::BadSignature), "{alg:?}");
    }
    // Signed by a key of the right type and kid, but not the provider's.
    let stranger = ec_pair();
    let header = json!({"alg": "ES256", "kid": "ec-1"});
    let t = sign_es(&stranger, &header, &good_claims());
    assert_eq!(verify(&f, &t), Err(OidcError::BadSignature));
}

#[test]
fn oidc_claims_that_do_not_fit_are_refused() {
    let f = fixture();
    let cases = [
        (
            json!({"iss": "https://evil.example.com"}),
            OidcError::WrongIssuer,
        ),
        (
            json!({"iss": "https://id.example.com/"}),
            OidcError::WrongIssuer,
        ),
        (json!({"iss": null}), OidcError::WrongIssuer),
        (json!({"aud": "someone-else"}), OidcError::WrongAudience),
        (json!({"aud": ["someone-else"]}), OidcError::WrongAudience),
        (json!({"aud": []}), OidcError::WrongAudience),
        (json!({"aud": [CLIENT, "other"]}), OidcError::WrongAudience),
        (
            json!({"aud": [CLIENT, "other"], "azp": "other"}),
            OidcError::WrongAudience,
        ),
        (json!({"azp": "other"}), OidcError::WrongAudience),
        (json!({"exp": NOW - 61}), OidcError::Expired),
        (json!({"exp": NOW - 60}), OidcError::Expired),
        (json!({"iat": NOW + 61}), OidcError::NotYetValid),
        (json!({"nbf": NOW + 120}), OidcError::NotYetValid),
        (json!({"nonce": "another-login"}), OidcError::WrongNonce),
        (json!({"nonce": null}), OidcError::WrongNonce),
        (
            json!({"sub": ""}),
            OidcError::Malformed("the ID token has no sub"),
        ),
        (
            json!({"exp": null}),
            OidcError::Malformed("the ID token has no exp"),
        ),
    ];
    for alg in ALGS {
        for (changes, want) in &cases {
            let got = verify(&f, &token(&f, alg, &with(changes.clone())));
            assert_eq!(got.as_ref().err(), Some(want), "{alg:?} {changes}");
        }
    }
}

#[test]
fn oidc_leeway_and_audience_arrays_that_fit_pass() {
    let f = fixture();
    for changes in [
        json!({"exp": NOW - 30}),
        json!({"iat": NOW + 30, "nbf": NOW + 30}),
        json!({"aud": [CLIENT]}),
        json!({"aud": ["other", CLIENT], "azp": CLIENT}),
        json!({"exp": (NOW + 300) as f64 + 0.5, "email_verified": "true"}),
    ] {
        assert!(
            verify(&f, &token(&f, Alg::Es256, &with(changes.clone()))).is_ok(),
            "{changes}"
        );
    }
    // A leeway of zero is exact; an expected nonce that is empty never matches.
    let mut exact = Expect::new(ISSUER, CLIENT, NONCE);
    exact.leeway_secs = 0;
    let t = token(&f, Alg::Rs256, &with(json!({"exp": NOW})));
    assert_eq!(
        verify_id_token(&t, &f.jwks, &exact, NOW),
        Err(OidcError::Expired)
    );
    let t = token(&f, Alg::Rs256, &with(json!({"nonce": ""})));
    let no_nonce = Expect::new(ISSUER, CLIENT, "");
    assert_eq!(
        verify_id_token(&t, &f.jwks, &no_nonce, NOW),
        Err(OidcError::WrongNonce)
    );
}

#[test]
fn oidc_alg_none_and_hmac_are_refused() {
    let f = fixture();
    let payload = b64(good_claims().to_string().as_bytes());
    for alg in [
        "none", "None", "NONE", "HS256", "RS384", "PS256", "ES384", "EdDSA", "",
    ] {
        let header = b64(json!({"alg": alg, "kid": "rsa-1"}).to_string().as_bytes());
        for sig in ["", "c2ln"] {
            let t = format!("{header}.{payload}.{sig}");
            assert_eq!(
                verify(&f, &t),
                Err(OidcError::UnsupportedAlg),
                "{alg} {sig:?}"
            );
        }
    }
    // HS256 keyed with what an attacker knows of the provider's key: still refused.
    let c: RsaPublicKeyComponents<Vec<u8>> = f.rsa.public().into();
    let secrets: [&[u8]; 4] = [
        &c.n,
        f.rsa.public().as_ref(),
        f.jwks_json.as_bytes(),
        f.ec.public_key().as_ref(),
    ];
    for secret in secrets {
        for kid in ["rsa-1", "ec-1"] {
            let input = signing_input(&json!({"alg": "HS256", "kid": kid}), &good_claims());
            let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret);
            let tag = ring::hmac::sign(&key, input.as_bytes());
            let t = format!("{input}.{}", b64(tag.as_ref()));
            assert_eq!(verify(&f, &t), Err(OidcError::UnsupportedAlg));
        }
    }
    // No alg at all is no JOSE header.
    let header = b64(br#"{"kid":"rsa-1"}"#);
    assert!(matches!(
        verify(&f, &format!("{header}.{payload}.")),
        Err(OidcError::Malformed(_))
    ));
}

#[test]
fn oidc_unknown_kid_asks_for_a_refetch() {
    let f = fixture();
    let t = sign_es(
        &f.ec,
        &json!({"alg": "ES256", "kid": "rotated"}),
        &good_claims(),
    );
    assert_eq!(verify(&f, &t), Err(OidcError::UnknownKey));
    // The RSA key's kid under ES256: the key fixes the algorithm, the token cannot.
    let t = sign_es(
        &f.ec,
        &json!({"alg": "ES256", "kid": "rsa-1"}),
        &good_claims(),
    );
    assert_eq!(verify(&f, &t), Err(OidcError::UnknownKey));
    // Without a kid, the only key of the algorithm serves; of several, none is guessed.
    let t = sign_rs(&f.rsa, &json!({"alg": "RS256"}), &good_claims());
    assert!(verify(&f, &t).is_ok());
    let other = ec_pair();
    let two = json!({"keys": [ec_jwk(&f.ec, "a"), ec_jwk(&other, "b")]}).to_string();
    let two = Jwks::parse(two.as_bytes()).unwrap();
    let t = sign_es(&f.ec, &json!({"alg": "ES256"}), &good_claims());
    let expect = Expect::new(ISSUER, CLIENT, NONCE);
    assert_eq!(
        verify_id_token(&t, &two, &expect, NOW),
        Err(OidcError::UnknownKey)
    );
    assert!(two.find(Some("b"), Alg::Es256).is_some());
    assert!(two.find(Some("b"), Alg::Rs256).is_none());
}

#[test]
fn oidc_malformed_tokens_are_refused_without_echo() {
    let f = fixture();
    let good = token(&f, Alg::Es256, &good_claims());
    let parts: Vec<&str> = good.split('.').collect();
    let bad = [
        String::new(),
        format!("{}.{}", parts[0], parts[1]),
        format!("{good}.{}", parts[2]),
        format!("{}.{}!.{}", parts[0], parts[1], parts[2]),
        format!("{}.{}.{}==", parts[0], parts[1], parts[2]),
        format!("{}=.{}.{}", parts[0], parts[1], parts[2]),
        format!("{}.{}.{}", b64(b"not json"), parts[1], parts[2]),
        format!(
            "{}.{}.{}",
            b64(br#"{"alg":"ES256","crit":["exp"]}"#),
            parts[1],
            parts[2]
        ),
        "a".repeat(70_000),
    ];
    for t in &bad {
        match verify(&f, t) {
            Err(e @ OidcError::Malformed(_)) => {
                assert!(parts.iter().all(|p| !e.to_string().contains(p)), "{e}")
            }
            other => panic!("{t:.40}: {other:?}"),
        }
    }
    // A payload that verifies but is no claims object.
    let t = sign_es(
        &f.ec,
        &json!({"alg": "ES256", "kid": "ec-1"}),
        &json!(["x"]),
    );
    assert!(matches!(verify(&f, &t), Err(OidcError::Malformed(_))));
}

#[test]
fn oidc_jwks_keeps_signing_keys_and_skips_the_rest() {
    let f = fixture();
    let rsa = rsa_jwk(&f.rsa, "rsa");
    let ec = ec_jwk(&f.ec, "ec");
    let mut padded = rsa.clone();
    padded["kid"] = json!("padded");
    let c: RsaPublicKeyComponents<Vec<u8>> = f.rsa.public().into();
    padded["n"] = json!(b64(&[&[0u8][..], &c.n].concat()));
    let mut skip = vec![
        json!({"kty": "oct", "k": "c2VjcmV0", "kid": "hmac"}),
        json!({"kty": "OKP", "crv": "Ed25519", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}),
        json!({"kty": "EC", "crv": "P-384", "x": "AA", "y": "AA"}),
        json!({"kty": "EC", "crv": "P-256", "x": "AAAA", "y": "AAAA"}),
        json!({"kid": 7, "kty": "RSA"}),
        json!("not a key"),
    ];
    for (member, value) in [
        ("use", "enc"),
        ("alg", "RS384"),
        ("alg", "RSA-OAEP"),
        ("n", "!!"),
    ] {
        let mut k = rsa.clone();
        k[member] = json!(value);
        skip.push(k);
    }
    // Right lengths, wrong curve or algorithm: refused for that, not for the lengths.
    for (member, value) in [("alg", "ES384"), ("crv", "P-384"), ("use", "enc")] {
        let mut k = ec.clone();
        k[member] = json!(value);
        skip.push(k);
    }
    let mut keys = skip;
    keys.extend([rsa, ec, padded]);
    let set = Jwks::parse(json!({"keys": keys}).to_string().as_bytes()).unwrap();
    let kids: Vec<_> = set
        .keys()
        .iter()
        .map(|k| k.kid.as_deref().unwrap())
        .collect();
    assert_eq!(kids, ["rsa", "ec", "padded"]);
    assert_eq!(set.keys()[2].key, JwkKey::Rsa { n: c.n, e: c.e });
    assert_eq!(
        set.find(Some("ec"), Alg::Es256).map(Jwk::alg),
        Some(Alg::Es256)
    );
    assert!(Jwks::parse(b"{}").is_err());
    assert!(Jwks::parse(b"[]").is_err());
    assert!(Jwks::parse(br#"{"keys":[]}"#).unwrap().keys().is_empty());
}
