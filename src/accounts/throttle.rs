//! The login throttle: failed logins per e-mail and per client IP.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tollgate_filters::{ErrorKind, GatewayError};

/// Failed logins per e-mail and per client IP in a sliding 15-minute window.
#[derive(Default)]
pub struct LoginThrottle {
    failures: Mutex<HashMap<String, Vec<Instant>>>,
}

const THROTTLE_WINDOW: Duration = Duration::from_secs(15 * 60);
const MAX_FAILS_PER_EMAIL: usize = 5;
const MAX_FAILS_PER_IP: usize = 20;

impl LoginThrottle {
    fn keys(email: &str, ip: Option<IpAddr>) -> [(String, usize); 2] {
        [
            (format!("e:{email}"), MAX_FAILS_PER_EMAIL),
            (
                format!("i:{}", ip.map(|i| i.to_string()).unwrap_or_default()),
                MAX_FAILS_PER_IP,
            ),
        ]
    }

    /// 429 when this e-mail or IP has failed too often recently.
    pub fn check(&self, email: &str, ip: Option<IpAddr>) -> Result<(), GatewayError> {
        let now = Instant::now();
        let Ok(mut map) = self.failures.lock() else {
            return Ok(());
        };
        for (k, max) in Self::keys(email, ip) {
            if let Some(v) = map.get_mut(&k) {
                v.retain(|t| now.duration_since(*t) < THROTTLE_WINDOW);
                if v.len() >= max {
                    let oldest = v.first().copied().unwrap_or(now);
                    let retry = THROTTLE_WINDOW
                        .saturating_sub(now.duration_since(oldest))
                        .as_secs()
                        .max(1);
                    return Err(GatewayError::new(
                        ErrorKind::RateLimited { retry_after: retry },
                        "too many failed logins; wait before trying again",
                    ));
                }
            }
        }
        Ok(())
    }

    pub fn failed(&self, email: &str, ip: Option<IpAddr>) {
        let now = Instant::now();
        if let Ok(mut map) = self.failures.lock() {
            for (k, _) in Self::keys(email, ip) {
                map.entry(k).or_default().push(now);
            }
        }
    }

    pub fn succeeded(&self, email: &str) {
        if let Ok(mut map) = self.failures.lock() {
            map.remove(&format!("e:{email}"));
        }
    }
}
