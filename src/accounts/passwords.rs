//! Password hashing (argon2id) on the blocking pool, at most one per core at a time, so a burst
//! of signups or logins never stalls a proxy thread; and the dummy hash that makes a login for
//! an unknown e-mail take as long as a real one.

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use tollgate_filters::GatewayError;

use super::{random_bytes, random_id};
use crate::runtime::Shared;

/// Runs `f` (a hash or a verification) on the blocking pool behind `shared.hashing`.
async fn off_thread<T: Send + 'static>(
    shared: &Shared,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, GatewayError> {
    let _permit = shared.hashing.acquire().await.ok();
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| GatewayError::internal(format!("password hashing failed: {e}")))
}

/// [`hash_password`] off the proxy threads.
pub async fn hash(shared: &Shared, password: &str) -> Result<String, GatewayError> {
    let password = password.to_owned();
    off_thread(shared, move || hash_password(&password)).await?
}

/// [`verify_password`] off the proxy threads; `None` stored (an unknown e-mail) verifies
/// against the dummy hash and is false.
pub async fn verify(shared: &Shared, password: &str, stored: Option<&str>) -> bool {
    let (password, stored) = (password.to_owned(), stored.map(str::to_owned));
    off_thread(shared, move || match stored {
        Some(h) => verify_password(&password, &h),
        None => {
            let _ = verify_password(&password, dummy_hash());
            false
        }
    })
    .await
    .unwrap_or(false)
}

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
