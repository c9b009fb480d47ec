//! `[response_cache]`: how long a cached reply is kept, how large one and all may be, and what
//! a hit is charged (docs/caching.md, "Response cache").

use std::time::Duration;

use serde::Deserialize;

use super::error::{err, ConfigError};

/// A week: a reply older than that is stale for any caller who asked for an exact repeat.
const MAX_TTL_SECS: u64 = 7 * 86_400;
/// One entry past this is a reply no chat model writes.
const MAX_ENTRY_BYTES: u64 = 64 * 1024 * 1024;
/// The store is Redis' memory or the ledger's disk: past this it crowds out what they are for.
const MAX_TOTAL_BYTES: u64 = 64 * 1024 * 1024 * 1024;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ResponseCacheSection {
    pub ttl_secs: u64,
    pub max_entry_bytes: u64,
    pub max_total_bytes: u64,
    pub charge_fraction: f64,
}

impl Default for ResponseCacheSection {
    fn default() -> Self {
        ResponseCacheSection {
            ttl_secs: 3600,
            max_entry_bytes: 1024 * 1024,
            max_total_bytes: 256 * 1024 * 1024,
            charge_fraction: 0.0,
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub struct ResponseCache {
    pub ttl: Duration,
    /// A reply larger than this (its stored entry) is not stored.
    pub max_entry_bytes: usize,
    /// Entries past this in total are evicted, oldest first.
    pub max_total_bytes: u64,
    /// What a hit is charged of its reply's list price, in millionths (an integer: money).
    pub charge_ppm: u32,
}

impl ResponseCacheSection {
    pub(super) fn validate(&self, errs: &mut Vec<ConfigError>) -> ResponseCache {
        if !(1..=MAX_TTL_SECS).contains(&self.ttl_secs) {
            errs.push(err(
                "response_cache.ttl_secs",
                format!("must be from 1 to {MAX_TTL_SECS} seconds (a week)"),
            ));
        }
        if !(1024..=MAX_ENTRY_BYTES).contains(&self.max_entry_bytes) {
            errs.push(err(
                "response_cache.max_entry_bytes",
                format!("must be from 1024 to {MAX_ENTRY_BYTES} bytes (64 MiB)"),
            ));
        }
        if !(self.max_entry_bytes..=MAX_TOTAL_BYTES).contains(&self.max_total_bytes) {
            errs.push(err(
                "response_cache.max_total_bytes",
                format!(
                    "must be at least max_entry_bytes and at most {MAX_TOTAL_BYTES} bytes (64 GiB)"
                ),
            ));
        }
        if !(0.0..=1.0).contains(&self.charge_fraction) {
            errs.push(err(
                "response_cache.charge_fraction",
                "must be from 0 (a hit is free) to 1 (a hit costs what the reply cost)",
            ));
        }
        ResponseCache {
            ttl: Duration::from_secs(self.ttl_secs.clamp(1, MAX_TTL_SECS)),
            max_entry_bytes: self.max_entry_bytes.clamp(1024, MAX_ENTRY_BYTES) as usize,
            max_total_bytes: self.max_total_bytes.min(MAX_TOTAL_BYTES),
            charge_ppm: (self.charge_fraction.clamp(0.0, 1.0) * 1e6).round() as u32,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::parse;

    fn errors(section: &str) -> Vec<String> {
        match parse(&format!("[response_cache]\n{section}")) {
            Ok(_) => Vec::new(),
            Err(errs) => errs.iter().map(|e| e.to_string()).collect(),
        }
    }

    #[test]
    fn absurd_values_are_refused_by_name() {
        for (line, key) in [
            ("ttl_secs = 0", "response_cache.ttl_secs"),
            ("ttl_secs = 99999999", "response_cache.ttl_secs"),
            ("max_entry_bytes = 10", "response_cache.max_entry_bytes"),
            ("max_total_bytes = 2048", "response_cache.max_total_bytes"),
            ("charge_fraction = 1.5", "response_cache.charge_fraction"),
            ("charge_fraction = -0.1", "response_cache.charge_fraction"),
            ("charge_fraction = nan", "response_cache.charge_fraction"),
        ] {
            let e = errors(line);
            assert!(e.iter().any(|e| e.starts_with(key)), "{line}: {e:?}");
        }
        assert!(errors("ttl_secs = 60\ncharge_fraction = 0.25").is_empty());
        let e = errors("tll_secs = 60");
        assert!(e.iter().any(|e| e.contains("tll_secs")), "{e:?}");
    }

    #[test]
    fn the_fraction_is_kept_in_millionths() {
        let c = parse("[response_cache]\ncharge_fraction = 0.25\n").unwrap();
        assert_eq!(c.response_cache.charge_ppm, 250_000);
        let d = parse("").unwrap();
        assert_eq!(d.response_cache.charge_ppm, 0);
        assert_eq!(d.response_cache.ttl.as_secs(), 3600);
    }
}
