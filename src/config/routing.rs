//! `[routing]`: streams that survive a cut (docs/api.md, "Streams that survive a cut"): how many
//! times a stream may be resumed on another provider, which requests resume without asking,
//! and who pays for a continuation's prompt; and sticky routing (`[routing.sticky]`,
//! [`super::sticky`]).

use std::collections::BTreeMap;

use serde::Deserialize;

use super::error::{err, ConfigError};
use super::sticky::{Sticky, StickySection};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RoutingSection {
    /// Continuations one stream may have.
    pub max_resumes: u32,
    /// Every stream resumes unless its request says `X-Tollgate-Resume: off`.
    pub resume: bool,
    /// Plans whose keys' streams resume by default.
    pub resume_plans: Vec<String>,
    /// Models whose streams resume by default (pinned ids, as in `[[models]]`).
    pub resume_models: Vec<String>,
    /// Who pays a continuation's prompt (the conversation and the partial answer sent again):
    /// `customer` or `gateway`.
    pub resume_prompt_paid_by: String,
    /// The estimated prompt size from which the gateway adds prompt-cache marks to a request
    /// that opted in (a model's, key's or organization's `cache_breakpoints`).
    pub cache_breakpoint_min_tokens: u64,
    /// `[routing.sticky]`.
    pub sticky: StickySection,
}

/// Anthropic's smallest cacheable prompt for most models: a shorter one is not cached, mark
/// or no mark.
const DEFAULT_BREAKPOINT_MIN_TOKENS: u64 = 1024;
/// Above any context window offered: a larger threshold could never be reached.
const MAX_BREAKPOINT_MIN_TOKENS: u64 = 10_000_000;

impl Default for RoutingSection {
    fn default() -> Self {
        RoutingSection {
            max_resumes: 1,
            resume: false,
            resume_plans: Vec::new(),
            resume_models: Vec::new(),
            resume_prompt_paid_by: "customer".into(),
            cache_breakpoint_min_tokens: DEFAULT_BREAKPOINT_MIN_TOKENS,
            sticky: StickySection::default(),
        }
    }
}

/// The validated `[routing]`.
#[derive(Debug, Clone, Default)]
pub struct Routing {
    pub max_resumes: u32,
    pub resume: bool,
    pub resume_plans: Vec<String>,
    pub resume_models: Vec<String>,
    /// A continuation's prompt is the gateway's cost: its tokens are recorded, not charged.
    pub gateway_pays_resumed_prompt: bool,
    pub cache_breakpoint_min_tokens: u64,
    pub sticky: Sticky,
}

impl Routing {
    /// Whether a stream resumes when its request did not say: by the plan of its key or the
    /// model it asked for.
    pub fn resumes_by_default(&self, plan: Option<&str>, model: &str) -> bool {
        self.resume
            || plan.is_some_and(|p| self.resume_plans.iter().any(|x| x == p))
            || self.resume_models.iter().any(|m| m == model)
    }
}

impl RoutingSection {
    pub(super) fn validate<T>(
        &self,
        plans: &BTreeMap<String, T>,
        models: &[&str],
        errs: &mut Vec<ConfigError>,
    ) -> Routing {
        if self.max_resumes > 5 {
            errs.push(err("routing.max_resumes", "must be from 0 to 5"));
        }
        for p in self.resume_plans.iter().filter(|p| !plans.contains_key(*p)) {
            errs.push(err(
                "routing.resume_plans",
                format!("`{p}` is not a plan of [plans]"),
            ));
        }
        for m in self
            .resume_models
            .iter()
            .filter(|m| !models.contains(&m.as_str()))
        {
            errs.push(err(
                "routing.resume_models",
                format!("`{m}` is not a model of [[models]]"),
            ));
        }
        let gateway = match self.resume_prompt_paid_by.as_str() {
            "customer" => false,
            "gateway" => true,
            _ => {
                errs.push(err(
                    "routing.resume_prompt_paid_by",
                    "must be customer or gateway",
                ));
                false
            }
        };
        if !(1..=MAX_BREAKPOINT_MIN_TOKENS).contains(&self.cache_breakpoint_min_tokens) {
            errs.push(err(
                "routing.cache_breakpoint_min_tokens",
                format!("must be from 1 to {MAX_BREAKPOINT_MIN_TOKENS}"),
            ));
        }
        Routing {
            cache_breakpoint_min_tokens: self.cache_breakpoint_min_tokens,
            max_resumes: self.max_resumes.min(5),
            resume: self.resume,
            resume_plans: self.resume_plans.clone(),
            resume_models: self.resume_models.clone(),
            gateway_pays_resumed_prompt: gateway,
            sticky: self.sticky.validate(errs),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::config::parse;

    #[test]
    fn defaults_and_bad_values() {
        let c = parse("").unwrap();
        assert_eq!(c.routing.max_resumes, 1);
        assert!(!c.routing.resume);
        assert!(!c.routing.gateway_pays_resumed_prompt);
        assert!(!c.routing.resumes_by_default(Some("free"), "m"));
        let errs = parse(
            "[routing]\nmax_resumes = 9\nresume_plans = [\"nope\"]\nresume_models = [\"ghost\"]\nresume_prompt_paid_by = \"nobody\"\n",
        )
        .unwrap_err();
        let paths: Vec<_> = errs.iter().map(|e| e.path.as_str()).collect();
        for p in [
            "routing.max_resumes",
            "routing.resume_plans",
            "routing.resume_models",
            "routing.resume_prompt_paid_by",
        ] {
            assert!(paths.contains(&p), "missing {p} in {paths:?}");
        }
        assert!(parse("[routing]\nmax_resume = 1\n").is_err(), "unknown key");
        assert!(parse(
            "[[providers]]\nname = \"p\"\nendpoints = [\"http://h\"]\ncontinuation = \"guess\"\n"
        )
        .is_err());
        assert!(parse("[[providers]]\nname = \"p\"\nkind = \"anthropic\"\nendpoints = [\"http://h\"]\ncontinuation = \"prompt\"\n").is_err());
        let c = parse("[routing]\nresume_prompt_paid_by = \"gateway\"\nresume = true\n").unwrap();
        assert!(c.routing.gateway_pays_resumed_prompt);
        assert!(c.routing.resumes_by_default(None, "m"));
    }

    #[test]
    fn the_cache_breakpoint_threshold_defaults_to_anthropics_minimum_and_absurd_ones_are_refused() {
        let c = parse("").unwrap();
        assert_eq!(c.routing.cache_breakpoint_min_tokens, 1024);
        let c = parse("[routing]\ncache_breakpoint_min_tokens = 2048\n").unwrap();
        assert_eq!(c.routing.cache_breakpoint_min_tokens, 2048);
        for bad in ["0", "100000000"] {
            let errs =
                parse(&format!("[routing]\ncache_breakpoint_min_tokens = {bad}\n")).unwrap_err();
            let paths: Vec<_> = errs.iter().map(|e| e.path.as_str()).collect();
            assert_eq!(paths, ["routing.cache_breakpoint_min_tokens"], "{bad}");
        }
        // Negative or not a number: refused by TOML.
        for bad in ["-1", "\"many\""] {
            assert!(parse(&format!("[routing]\ncache_breakpoint_min_tokens = {bad}\n")).is_err());
        }
    }
}
