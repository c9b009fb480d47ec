//! Password hashing (argon2id, off the proxy threads is the caller's concern) and the dummy
//! hash that makes a login for an unknown e-mail take as long as a real one.

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use tollgate_filters::GatewayError;

use super::{random_bytes, random_id};

pub fn hash_password(password: &str) -> Result<String, GatewayError> {
    let salt = SaltString::encode_b64(&random_bytes(16))
        .map_err(|e| GatewayError::internal(e.to_string()))?;
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| GatewayError::internal(format!("password hashing failed: {e}")))
}

pub fn verify_password(password: &str, stored: &str) -> bool {
    PasswordHash::new(stored)
        .map(|h| {
            Argon2::default()
                .verify_password(password.as_bytes(), &h)
                .is_ok()
        })
        .unwrap_or(false)
}

/// An argon2id hash of a random password, made once, verified against when the e-mail is
/// unknown so that the answer takes as long as for a real account.
pub fn dummy_hash() -> &'static str {
    static HASH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HASH.get_or_init(|| {
        let random = random_id(32).unwrap_or_else(|_| "tollgate-dummy-password".into());
        hash_password(&random).unwrap_or_default()
    })
}
