//! The login throttle per e-mail address: at most `[abuse] login_failures_per_email` wrong
//! passwords in 15 minutes, wherever they come from.
//!
//! The attempt is reserved before the password is verified, in one atomic check-and-count of
//! the shared limiter (Redis when configured, never from a reservation), so concurrent
//! guesses on one or many instances cannot all pass a check that none has yet recorded. A
//! login that succeeds clears the e-mail's count; the rest leave with their window (Redis
//! expires the keys, the background sweep prunes the in-process ones).

use tollgate_filters::ratelimit::Window;
use tollgate_filters::{ErrorKind, GatewayError};

use crate::config::abuse::LOGIN_FAILURE_WINDOW_MS;
use crate::runtime::Shared;

fn ident(email: &str) -> String {
    // Hashed: the shared store need not hold account e-mails.
    format!("loginfail:{}", tollgate_filters::keys::hash(email))
}

fn windows(shared: &Shared) -> [Window; 1] {
    [Window {
        window_ms: LOGIN_FAILURE_WINDOW_MS,
        limit: shared.runtime.load().config.abuse.login_failures_per_email,
    }]
}

/// Reserves one password check for `email`; 429 when its failures fill the window.
pub async fn reserve(shared: &Shared, email: &str, request_id: &str) -> Result<(), GatewayError> {
    let d = shared
        .limiter
        .check_exact(
            &ident(email),
            &windows(shared),
            request_id,
            "login_email",
            &shared.metrics,
        )
        .await?;
    if d.admitted {
        return Ok(());
    }
    Err(GatewayError::new(
        ErrorKind::RateLimited {
            retry_after: d.retry_after_secs(),
        },
        format!(
            "too many failed logins for this e-mail; retry after {} s",
            d.retry_after_secs()
        ),
    ))
}

/// The password was right: the e-mail's failures are forgotten.
pub async fn succeeded(shared: &Shared, email: &str) {
    shared.limiter.forget(&ident(email), &windows(shared)).await;
}
