//! The model catalog and route candidates (SPEC.md, Versioning; DESIGN.md, Routing).
//!
//! A request names a pinned id, an alias or a tier. Its candidates are the ordered list of
//! models to try: the named model, then the rest of its tier in config order, then every model
//! of a self-hosted provider. Models whose provider has no usable endpoint are left out; which
//! providers are usable is the caller's health snapshot, so choosing candidates stays pure.

use std::collections::HashMap;

use crate::{ErrorKind, GatewayError};

/// Retired pinned ids are served by their replacement for this long, then answer 404.
pub const RETIRED_GRACE_SECS: i64 = 90 * 86_400;
/// Minimum notice between `deprecated_at` and `retires_at`.
pub const MIN_NOTICE_SECS: i64 = 30 * 86_400;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tier {
    Economy,
    Normal,
    Powerful,
}

impl Tier {
    pub const ALL: [Tier; 3] = [Tier::Economy, Tier::Normal, Tier::Powerful];

    pub fn parse(s: &str) -> Option<Tier> {
        match s {
            "economy" => Some(Tier::Economy),
            "normal" => Some(Tier::Normal),
            "powerful" => Some(Tier::Powerful),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Economy => "economy",
            Tier::Normal => "normal",
            Tier::Powerful => "powerful",
        }
    }
}

#[derive(Debug, Clone)]
pub struct ModelSpec {
    pub id: String,
    /// Chat models answer the chat, Messages and Responses APIs; embedding models only
    /// `/v1/embeddings`, and are never a chat candidate or a tier's pick.
    pub kind: ModelKind,
    pub provider: String,
    pub upstream_model: String,
    pub tier: Tier,
    /// Micro-credits per 1K tokens.
    pub input_micros_per_1k: u64,
    pub output_micros_per_1k: u64,
    /// Prompt-cache rates (Anthropic's caching, OpenAI's cached input); `None`: those tokens
    /// cost the input rate.
    pub cache_read_micros_per_1k: Option<u64>,
    pub cache_write_micros_per_1k: Option<u64>,
    /// One-hour cache writes (Anthropic's `ttl: "1h"`); `None`: the cache-write rate.
    pub cache_write_1h_micros_per_1k: Option<u64>,
    pub max_output_tokens: u64,
    /// Serves OpenAI's legacy `POST /v1/completions` (`[[models]] completions = true`).
    pub completions: bool,
    /// Its long prompts get the gateway's prompt-cache marks when the client set none
    /// (`[[models]] cache_breakpoints = true`, Anthropic-kind providers only).
    pub cache_breakpoints: bool,
    pub guest: bool,
    pub self_hosted: bool,
    /// Served by the demo provider: a candidate only when asked for by name (never a failover
    /// target or a tier's pick, so a real request never gets a canned reply).
    pub demo: bool,
    pub deprecated_at: Option<i64>,
    pub retires_at: Option<i64>,
    pub replacement: Option<String>,
}

/// What a model serves (`[[models]] kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelKind {
    Chat,
    Embedding,
}

impl ModelKind {
    pub fn parse(s: &str) -> Option<ModelKind> {
        match s {
            "chat" => Some(ModelKind::Chat),
            "embedding" => Some(ModelKind::Embedding),
            _ => None,
        }
    }
}

impl ModelSpec {
    /// The highest rate a prompt token may cost (input, cache write or cache read): what the
    /// hold sizes the prompt at, so a cached prompt never costs more than was held.
    pub fn prompt_rate_bound(&self) -> u64 {
        [
            self.cache_write_micros_per_1k,
            self.cache_write_1h_micros_per_1k,
            self.cache_read_micros_per_1k,
        ]
        .into_iter()
        .flatten()
        .fold(self.input_micros_per_1k, u64::max)
    }

    pub fn rates(&self) -> crate::credits::Rates {
        crate::credits::Rates {
            input: self.input_micros_per_1k,
            output: self.output_micros_per_1k,
            cache_read: self.cache_read_micros_per_1k,
            cache_write: self.cache_write_micros_per_1k,
            cache_write_1h: self.cache_write_1h_micros_per_1k,
        }
    }

    pub fn retired(&self, now: i64) -> bool {
        self.retires_at.is_some_and(|r| now >= r)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Model(usize),
    Tier(Tier),
}

/// Deprecation notice for the response headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Notice {
    pub deprecated_at: i64,
    pub retires_at: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolution {
    pub target: Target,
    pub notice: Option<Notice>,
}

/// `[[alias_changes]]`: `alias` points at `to` from `at` on (the changelog lists it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AliasChange {
    pub alias: String,
    pub to: String,
    /// Unix seconds.
    pub at: i64,
    /// Unix seconds; the changelog lists the change from then on.
    pub announced: i64,
}

#[derive(Debug, Clone, Default)]
pub struct Catalog {
    models: Vec<ModelSpec>,
    index: HashMap<String, usize>,
    aliases: Vec<(String, String)>,
    alias_index: HashMap<String, String>,
    /// Scheduled alias changes, oldest `at` first (see `changelog`).
    changes: Vec<AliasChange>,
}

impl Catalog {
    /// Builds a catalog. The config layer has already checked ids are unique and that aliases
    /// and replacements point at known models.
    pub fn new(models: Vec<ModelSpec>, aliases: Vec<(String, String)>) -> Catalog {
        let index = models
            .iter()
            .enumerate()
            .map(|(i, m)| (m.id.clone(), i))
            .collect();
        let alias_index = aliases.iter().cloned().collect();
        Catalog {
            models,
            index,
            aliases,
            alias_index,
            changes: Vec::new(),
        }
    }

    /// The catalog with scheduled alias changes: each alias points at its latest change whose
    /// `at` has come, from that second on, without a reload.
    pub fn with_changes(mut self, mut changes: Vec<AliasChange>) -> Catalog {
        changes.sort_by_key(|c| c.at);
        self.changes = changes;
        self
    }

    pub fn alias_changes(&self) -> &[AliasChange] {
        &self.changes
    }

    /// What an alias names at `now` (`None`: not an alias, or one that starts later).
    pub fn alias_target(&self, alias: &str, now: i64) -> Option<&str> {
        self.changes
            .iter()
            .rev()
            .find(|c| c.alias == alias && c.at <= now)
            .map(|c| c.to.as_str())
            .or_else(|| self.alias_index.get(alias).map(String::as_str))
    }

    /// Every alias and its target at `now`, in config order (aliases a change introduces last).
    pub fn aliases_at(&self, now: i64) -> Vec<(&str, &str)> {
        let mut names: Vec<&str> = self.aliases.iter().map(|(a, _)| a.as_str()).collect();
        for c in &self.changes {
            if !names.contains(&c.alias.as_str()) {
                names.push(&c.alias);
            }
        }
        names
            .into_iter()
            .filter_map(|a| Some((a, self.alias_target(a, now)?)))
            .collect()
    }

    pub fn models(&self) -> &[ModelSpec] {
        &self.models
    }

    pub fn model(&self, i: usize) -> &ModelSpec {
        &self.models[i]
    }

    pub fn aliases(&self) -> &[(String, String)] {
        &self.aliases
    }

    pub fn aliases_of<'a>(&'a self, id: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.aliases
            .iter()
            .filter(move |(_, t)| t == id)
            .map(|(a, _)| a.as_str())
    }

    /// What a requested name means at `now`.
    pub fn resolve(&self, name: &str, now: i64) -> Result<Resolution, GatewayError> {
        if let Some(t) = Tier::parse(name) {
            return Ok(Resolution {
                target: Target::Tier(t),
                notice: None,
            });
        }
        let id = self.alias_target(name, now).unwrap_or(name);
        let not_found = || {
            GatewayError::new(
                ErrorKind::ModelNotFound,
                format!("model `{name}` does not exist; see GET /v1/models"),
            )
        };
        let mut idx = *self.index.get(id).ok_or_else(not_found)?;
        // Follow replacements of retired ids (bounded: a chain longer than the catalog is a loop).
        for _ in 0..=self.models.len() {
            let m = &self.models[idx];
            let Some(retires_at) = m.retires_at.filter(|r| now >= *r) else {
                let notice = match (m.deprecated_at, m.retires_at) {
                    (Some(d), Some(r)) if now >= d => Some(Notice {
                        deprecated_at: d,
                        retires_at: r,
                    }),
                    _ => None,
                };
                return Ok(Resolution {
                    target: Target::Model(idx),
                    notice,
                });
            };
            let replacement = m.replacement.as_deref();
            let rep_idx = replacement.and_then(|r| self.index.get(r));
            match rep_idx {
                Some(&r) if now < retires_at + RETIRED_GRACE_SECS => idx = r,
                _ => {
                    let date = crate::time::format_date(retires_at);
                    let msg = match replacement {
                        Some(r) => {
                            format!("model `{name}` was retired on {date}; use `{r}` instead")
                        }
                        None => format!("model `{name}` was retired on {date}"),
                    };
                    return Err(GatewayError::new(ErrorKind::ModelNotFound, msg));
                }
            }
        }
        Err(not_found())
    }

    /// The ordered candidates for a resolution. `usable` says whether a model's provider has
    /// an endpoint that is healthy and not ejected; `guest_only` keeps only guest models.
    pub fn candidates(
        &self,
        target: Target,
        now: i64,
        guest_only: bool,
        usable: impl Fn(&ModelSpec) -> bool,
    ) -> Vec<usize> {
        let mut out: Vec<usize> = Vec::with_capacity(4);
        let ok = |m: &ModelSpec| {
            !m.retired(now) && (!guest_only || m.guest) && !m.demo && m.kind == ModelKind::Chat
        };
        let tier = match target {
            Target::Model(i) => {
                out.push(i);
                // The demo answers for itself alone: no real model stands in for it, nor it for one.
                if self.models[i].demo {
                    out.retain(|&i| usable(&self.models[i]));
                    return out;
                }
                self.models[i].tier
            }
            Target::Tier(t) => t,
        };
        for (i, m) in self.models.iter().enumerate() {
            if m.tier == tier && ok(m) && !out.contains(&i) {
                out.push(i);
            }
        }
        for (i, m) in self.models.iter().enumerate() {
            if m.self_hosted && ok(m) && !out.contains(&i) {
                out.push(i);
            }
        }
        out.retain(|&i| usable(&self.models[i]));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(id: &str, provider: &str, tier: Tier) -> ModelSpec {
        ModelSpec {
            id: id.into(),
            kind: ModelKind::Chat,
            provider: provider.into(),
            upstream_model: id.into(),
            tier,
            input_micros_per_1k: 1,
            output_micros_per_1k: 1,
            cache_read_micros_per_1k: None,
            cache_write_micros_per_1k: None,
            cache_write_1h_micros_per_1k: None,
            max_output_tokens: 100,
            completions: false,
            cache_breakpoints: false,
            guest: false,
            self_hosted: false,
            demo: false,
            deprecated_at: None,
            retires_at: None,
            replacement: None,
        }
    }

    fn catalog() -> Catalog {
        let mut local = spec("local-1", "local", Tier::Normal);
        local.self_hosted = true;
        let mut old = spec("old-2020-01-01", "a", Tier::Economy);
        old.deprecated_at = Some(1000);
        old.retires_at = Some(1000 + MIN_NOTICE_SECS);
        old.replacement = Some("e1".into());
        Catalog::new(
            vec![
                spec("e1", "a", Tier::Economy),
                spec("e2", "b", Tier::Economy),
                spec("p1", "a", Tier::Powerful),
                local,
                old,
            ],
            vec![("econ".into(), "e2".into())],
        )
    }

    #[test]
    fn a_demo_model_is_a_candidate_only_by_name() {
        let mut demo = spec("demo", "d", Tier::Economy);
        demo.demo = true;
        let c = Catalog::new(vec![spec("e1", "a", Tier::Economy), demo], Vec::new());
        let all = |_: &ModelSpec| true;
        assert_eq!(
            c.candidates(Target::Tier(Tier::Economy), 0, false, all),
            [0]
        );
        assert_eq!(c.candidates(Target::Model(0), 0, false, all), [0]);
        assert_eq!(c.candidates(Target::Model(1), 0, false, all), [1]);
    }

    #[test]
    fn an_embedding_model_is_never_a_chat_candidate() {
        let mut e = spec("emb", "a", Tier::Economy);
        e.kind = ModelKind::Embedding;
        e.self_hosted = true;
        let c = Catalog::new(vec![spec("e1", "a", Tier::Economy), e], Vec::new());
        let all = |_: &ModelSpec| true;
        assert_eq!(
            c.candidates(Target::Tier(Tier::Economy), 0, false, all),
            [0]
        );
        assert_eq!(c.candidates(Target::Model(0), 0, false, all), [0]);
        assert_eq!(ModelKind::parse("embedding"), Some(ModelKind::Embedding));
        assert_eq!(ModelKind::parse("Chat"), None);
    }

    #[test]
    fn resolves_ids_aliases_and_tiers() {
        let c = catalog();
        assert_eq!(c.resolve("e1", 0).unwrap().target, Target::Model(0));
        assert_eq!(c.resolve("econ", 0).unwrap().target, Target::Model(1));
        assert_eq!(
            c.resolve("powerful", 0).unwrap().target,
            Target::Tier(Tier::Powerful)
        );
        let e = c.resolve("nope", 0).unwrap_err();
        assert_eq!(e.kind, ErrorKind::ModelNotFound);
    }

    #[test]
    fn candidates_in_order_tier_then_self_hosted() {
        let c = catalog();
        let all = |_: &ModelSpec| true;
        assert_eq!(
            c.candidates(Target::Model(1), 0, false, all),
            vec![1, 0, 4, 3]
        );
        assert_eq!(c.candidates(Target::Model(2), 0, false, all), vec![2, 3]);
        assert_eq!(
            c.candidates(Target::Tier(Tier::Economy), 0, false, all),
            vec![0, 1, 4, 3]
        );
        // Unusable providers are skipped.
        assert_eq!(
            c.candidates(Target::Model(0), 0, false, |m: &ModelSpec| m.provider
                != "a"),
            vec![1, 3]
        );
        // Retired models leave the tier.
        let later = 1000 + MIN_NOTICE_SECS;
        assert_eq!(
            c.candidates(Target::Tier(Tier::Economy), later, false, all),
            vec![0, 1, 3]
        );
        // Guests only see guest models.
        assert!(c
            .candidates(Target::Tier(Tier::Economy), 0, true, all)
            .is_empty());
    }

    #[test]
    fn deprecation_notice_replacement_and_removal() {
        let c = catalog();
        assert_eq!(c.resolve("old-2020-01-01", 0).unwrap().notice, None);
        let n = c.resolve("old-2020-01-01", 1000).unwrap().notice.unwrap();
        assert_eq!(n.retires_at, 1000 + MIN_NOTICE_SECS);
        let retired = 1000 + MIN_NOTICE_SECS;
        assert_eq!(
            c.resolve("old-2020-01-01", retired).unwrap().target,
            Target::Model(0)
        );
        let gone = retired + RETIRED_GRACE_SECS;
        let e = c.resolve("old-2020-01-01", gone).unwrap_err();
        assert_eq!(e.kind, ErrorKind::ModelNotFound);
        assert!(e.message.contains("`e1`"), "{}", e.message);
    }
}
