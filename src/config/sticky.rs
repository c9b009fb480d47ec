//! `[routing.sticky]`: cache-aware (sticky) routing (docs/caching.md, "Sticky routing"): whether the turns
//! of a conversation go back to the endpoint and model whose prompt cache holds it, from what
//! size of prompt, and how many conversations an instance without Redis remembers. How long a
//! provider keeps a prompt cached is its own key, `[[providers]] cache_ttl_secs`.

use serde::Deserialize;

use super::error::{err, ConfigError};

/// The largest `min_prompt_tokens` accepted: far above any provider's minimum cacheable prompt.
const MAX_MIN_PROMPT_TOKENS: u64 = 1_000_000;
/// The most conversations one instance remembers in-process.
const MAX_ENTRIES: usize = 10_000_000;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StickySection {
    pub enabled: bool,
    /// Below this estimated prompt size (tokens) a request that names no session keeps plain
    /// round robin: providers cache nothing shorter.
    pub min_prompt_tokens: u64,
    /// Conversations remembered in-process (without Redis); past it new ones are not
    /// remembered until expired ones are swept.
    pub max_entries: usize,
}

impl Default for StickySection {
    fn default() -> Self {
        StickySection {
            enabled: true,
            min_prompt_tokens: 1024,
            max_entries: 100_000,
        }
    }
}

/// The validated `[routing.sticky]`.
#[derive(Debug, Clone, Copy)]
pub struct Sticky {
    pub enabled: bool,
    pub min_prompt_tokens: u64,
    pub max_entries: usize,
}

impl Default for Sticky {
    fn default() -> Self {
        let s = StickySection::default();
        Sticky {
            enabled: s.enabled,
            min_prompt_tokens: s.min_prompt_tokens,
            max_entries: s.max_entries,
        }
    }
}

impl StickySection {
    pub(super) fn validate(&self, errs: &mut Vec<ConfigError>) -> Sticky {
        if self.min_prompt_tokens > MAX_MIN_PROMPT_TOKENS {
            errs.push(err(
                "routing.sticky.min_prompt_tokens",
                format!("must be from 0 to {MAX_MIN_PROMPT_TOKENS}"),
            ));
        }
        if !(1..=MAX_ENTRIES).contains(&self.max_entries) {
            errs.push(err(
                "routing.sticky.max_entries",
                format!("must be from 1 to {MAX_ENTRIES}"),
            ));
        }
        Sticky {
            enabled: self.enabled,
            min_prompt_tokens: self.min_prompt_tokens.min(MAX_MIN_PROMPT_TOKENS),
            max_entries: self.max_entries.clamp(1, MAX_ENTRIES),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::config::parse;

    #[test]
    fn defaults_and_absurd_values_refused_by_name() {
        let c = parse("").unwrap();
        let s = c.routing.sticky;
        assert!(s.enabled);
        assert_eq!((s.min_prompt_tokens, s.max_entries), (1024, 100_000));
        let errs =
            parse("[routing.sticky]\nmin_prompt_tokens = 99999999\nmax_entries = 0\n").unwrap_err();
        let paths: Vec<_> = errs.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "routing.sticky.min_prompt_tokens",
                "routing.sticky.max_entries"
            ]
        );
        assert!(parse("[routing.sticky]\nenabled = \"yes\"\n").is_err());
        assert!(parse("[routing.sticky]\nttl = 5\n").is_err(), "unknown key");
        let c = parse("[routing.sticky]\nenabled = false\nmin_prompt_tokens = 0\n").unwrap();
        assert!(!c.routing.sticky.enabled);
        assert_eq!(c.routing.sticky.min_prompt_tokens, 0);
    }
}
