//! A config problem with the key path it sits at, and the checks several sections share.

use std::time::Duration;

/// One problem in a config file, with the key path it sits at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub path: String,
    pub message: String,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

pub(super) fn err(path: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError {
        path: path.into(),
        message: message.into(),
    }
}

/// Seconds as written (fractions allowed) to a duration above zero and below a day.
pub(super) fn secs(path: &str, v: f64, errs: &mut Vec<ConfigError>) -> Duration {
    if !(v.is_finite() && v > 0.0 && v < 86_400.0) {
        errs.push(err(path, "must be a number of seconds above 0"));
        return Duration::from_secs(1);
    }
    Duration::from_secs_f64(v)
}
