//! `[[models]]` and `[aliases]`: the catalog of pinned model ids with their rates, tiers and
//! deprecation dates, validated into a [`Catalog`].

use std::collections::BTreeMap;

use serde::Deserialize;
use tollgate_filters::changelog::{AliasChange, MIN_ALIAS_NOTICE_SECS};
use tollgate_filters::route::{Catalog, ModelKind, ModelSpec, Tier, MIN_NOTICE_SECS};
use tollgate_filters::time::{parse_date, parse_instant};

use super::error::{err, ConfigError};
use super::providers::ProviderSection;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSection {
    pub id: String,
    pub provider: String,
    #[serde(default)]
    pub upstream_model: Option<String>,
    /// `chat` (the default) or `embedding`.
    #[serde(default)]
    pub kind: Option<String>,
    /// A chat model's tier; an embedding model has none.
    #[serde(default)]
    pub tier: Option<String>,
    pub input_credits_per_1k: f64,
    pub output_credits_per_1k: f64,
    /// Prompt tokens read from the provider's cache (Anthropic's cache reads, OpenAI's cached
    /// input); default: the input rate.
    #[serde(default)]
    pub cache_read_credits_per_1k: Option<f64>,
    /// The same rate under OpenAI's name (`prompt_tokens_details.cached_tokens`): one rate,
    /// two spellings; a model sets at most one of them.
    #[serde(default)]
    pub cached_input_credits_per_1k: Option<f64>,
    /// Prompt tokens written to the provider's cache for five minutes (Anthropic); default:
    /// the input rate.
    #[serde(default)]
    pub cache_write_credits_per_1k: Option<f64>,
    /// Prompt tokens written to the cache for an hour (Anthropic's `ttl: "1h"`); default: the
    /// five-minute write rate.
    #[serde(default)]
    pub cache_write_1h_credits_per_1k: Option<f64>,
    #[serde(default = "default_max_output")]
    pub max_output_tokens: u64,
    /// Serves OpenAI's legacy `POST /v1/completions` (passed on as the client wrote it).
    #[serde(default)]
    pub completions: bool,
    /// Long prompts to it get prompt-cache marks when the client set none (an Anthropic-kind
    /// provider's models only).
    #[serde(default)]
    pub cache_breakpoints: bool,
    #[serde(default)]
    pub guest: bool,
    #[serde(default)]
    pub deprecated_at: Option<String>,
    #[serde(default)]
    pub retires_at: Option<String>,
    #[serde(default)]
    pub replacement: Option<String>,
}

/// `[[alias_changes]]`: an alias re-pointed at `to` from `at` (a date or a UTC time), announced
/// in the changelog from `announced`, which must be at least 14 days earlier.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AliasChangeSection {
    pub alias: String,
    pub to: String,
    pub at: String,
    pub announced: String,
}

fn default_max_output() -> u64 {
    4096
}

/// Credits per 1K tokens as written in the config, to integer micro-credits.
fn micros(path: &str, v: f64, errs: &mut Vec<ConfigError>) -> u64 {
    if !(v.is_finite() && (0.0..=1_000_000.0).contains(&v)) {
        errs.push(err(path, "must be a number from 0 to 1000000"));
        return 0;
    }
    (v * 1_000_000.0).round() as u64
}

/// The cache-read rate, under either of its names (`cache_read_credits_per_1k`, or OpenAI's
/// `cached_input_credits_per_1k`); both set is an error, even when equal, so a reader of the
/// file never wonders which one applies.
fn cache_read(
    m: &ModelSection,
    at: &dyn Fn(&str) -> String,
    errs: &mut Vec<ConfigError>,
) -> Option<u64> {
    match (m.cache_read_credits_per_1k, m.cached_input_credits_per_1k) {
        (Some(_), Some(_)) => {
            errs.push(err(
                at("cached_input_credits_per_1k"),
                "is another name for cache_read_credits_per_1k: set one of them",
            ));
            None
        }
        (Some(v), None) => Some(micros(&at("cache_read_credits_per_1k"), v, errs)),
        (None, Some(v)) => Some(micros(&at("cached_input_credits_per_1k"), v, errs)),
        (None, None) => None,
    }
}

/// The catalog: each model checked, then the aliases, then the scheduled alias changes (the
/// errors in that order).
pub(super) fn validate(
    models: &[ModelSection],
    aliases: &BTreeMap<String, String>,
    changes: &[AliasChangeSection],
    providers: &[ProviderSection],
    errs: &mut Vec<ConfigError>,
) -> Catalog {
    let mut specs = Vec::new();
    for i in 0..models.len() {
        specs.push(model_spec(models, i, providers, errs));
    }
    let alias_list = alias_targets(models, aliases, errs);
    let scheduled = alias_changes(models, changes, errs);
    Catalog::new(specs, alias_list).with_changes(scheduled)
}

/// `models[i]` checked (against the models before it for duplicates, and against all of them
/// for its replacement) and written as a [`ModelSpec`].
fn model_spec(
    models: &[ModelSection],
    i: usize,
    providers: &[ProviderSection],
    errs: &mut Vec<ConfigError>,
) -> ModelSpec {
    let m = &models[i];
    let at = |k: &str| format!("models[{i}].{k}");
    check_id(models, i, &at, errs);
    let provider = providers.iter().find(|p| p.name == m.provider);
    if provider.is_none() {
        errs.push(err(
            at("provider"),
            format!("unknown provider `{}`", m.provider),
        ));
    }
    let provider_kind = provider.map(|p| p.kind.as_str());
    let kind = model_kind(m, provider_kind, &at, errs);
    let tier = model_tier(m, kind, &at, errs);
    if m.completions && (kind == ModelKind::Embedding || provider_kind != Some("openai")) {
        errs.push(err(
            at("completions"),
            "only a chat model of an openai provider can serve legacy completions",
        ));
    }
    if m.cache_breakpoints && (kind == ModelKind::Embedding || provider_kind != Some("anthropic")) {
        errs.push(err(
            at("cache_breakpoints"),
            "only a chat model of an anthropic provider takes cache breakpoints",
        ));
    }
    if m.max_output_tokens == 0 {
        errs.push(err(at("max_output_tokens"), "must be at least 1"));
    }
    let (deprecated_at, retires_at) = lifecycle(m, &at, errs);
    if let Some(rep) = &m.replacement {
        if !models.iter().any(|q| &q.id == rep) || rep == &m.id {
            errs.push(err(at("replacement"), format!("unknown model `{rep}`")));
        }
    }
    ModelSpec {
        id: m.id.clone(),
        kind,
        provider: m.provider.clone(),
        upstream_model: m.upstream_model.clone().unwrap_or_else(|| m.id.clone()),
        tier,
        input_micros_per_1k: micros(&at("input_credits_per_1k"), m.input_credits_per_1k, errs),
        output_micros_per_1k: micros(&at("output_credits_per_1k"), m.output_credits_per_1k, errs),
        cache_read_micros_per_1k: cache_read(m, &at, errs),
        cache_write_micros_per_1k: m
            .cache_write_credits_per_1k
            .map(|v| micros(&at("cache_write_credits_per_1k"), v, errs)),
        cache_write_1h_micros_per_1k: m
            .cache_write_1h_credits_per_1k
            .map(|v| micros(&at("cache_write_1h_credits_per_1k"), v, errs)),
        max_output_tokens: m.max_output_tokens,
        completions: m.completions,
        cache_breakpoints: m.cache_breakpoints,
        guest: m.guest,
        self_hosted: provider.is_some_and(|p| p.self_hosted),
        demo: provider.is_some_and(|p| p.kind == "demo"),
        deprecated_at,
        retires_at,
        replacement: m.replacement.clone(),
    }
}

/// A model id is a word that names one model: not a tier, not taken by an earlier model.
fn check_id(
    models: &[ModelSection],
    i: usize,
    at: &dyn Fn(&str) -> String,
    errs: &mut Vec<ConfigError>,
) {
    let id = &models[i].id;
    if id.is_empty() || id.chars().any(char::is_whitespace) {
        errs.push(err(at("id"), "must be non-empty without spaces"));
    }
    if Tier::parse(id).is_some() {
        errs.push(err(at("id"), "must not be a tier name"));
    }
    if models[..i].iter().any(|q| &q.id == id) {
        errs.push(err(at("id"), format!("duplicate model `{id}`")));
    }
}

/// `kind` (chat when unset); an anthropic provider has no embeddings to serve.
fn model_kind(
    m: &ModelSection,
    provider_kind: Option<&str>,
    at: &dyn Fn(&str) -> String,
    errs: &mut Vec<ConfigError>,
) -> ModelKind {
    let kind = match m.kind.as_deref() {
        None => ModelKind::Chat,
        Some(k) => ModelKind::parse(k).unwrap_or_else(|| {
            errs.push(err(at("kind"), "must be chat or embedding"));
            ModelKind::Chat
        }),
    };
    if kind == ModelKind::Embedding && provider_kind == Some("anthropic") {
        errs.push(err(
            at("kind"),
            "an anthropic provider serves no embeddings (the Messages API has none)",
        ));
    }
    kind
}

/// `tier`: required of a chat model; an embedding model has none.
fn model_tier(
    m: &ModelSection,
    kind: ModelKind,
    at: &dyn Fn(&str) -> String,
    errs: &mut Vec<ConfigError>,
) -> Tier {
    match (m.tier.as_deref(), kind) {
        (Some(t), _) => Tier::parse(t).unwrap_or_else(|| {
            errs.push(err(at("tier"), "must be economy, normal or powerful"));
            Tier::Normal
        }),
        // Never a tier's pick: the value is not read.
        (None, ModelKind::Embedding) => Tier::Normal,
        (None, ModelKind::Chat) => {
            errs.push(err(at("tier"), "is required for a chat model"));
            Tier::Normal
        }
    }
}

/// `deprecated_at` and `retires_at`: dates, a retirement announced by a deprecation at least
/// 30 days before it.
fn lifecycle(
    m: &ModelSection,
    at: &dyn Fn(&str) -> String,
    errs: &mut Vec<ConfigError>,
) -> (Option<i64>, Option<i64>) {
    let date = |k: &str, v: &Option<String>, errs: &mut Vec<ConfigError>| {
        v.as_ref().and_then(|s| {
            let d = parse_date(s);
            if d.is_none() {
                errs.push(err(at(k), "must be a date YYYY-MM-DD"));
            }
            d
        })
    };
    let deprecated_at = date("deprecated_at", &m.deprecated_at, errs);
    let retires_at = date("retires_at", &m.retires_at, errs);
    match (deprecated_at, retires_at) {
        (Some(d), Some(r)) if r - d < MIN_NOTICE_SECS => errs.push(err(
            at("retires_at"),
            "must be at least 30 days after deprecated_at",
        )),
        (None, Some(_)) => errs.push(err(
            at("deprecated_at"),
            "is required with retires_at (30 days of notice)",
        )),
        _ => {}
    }
    (deprecated_at, retires_at)
}

/// `[aliases]`: each a name of its own (not a tier, not a model id) pointing at a model.
fn alias_targets(
    models: &[ModelSection],
    aliases: &BTreeMap<String, String>,
    errs: &mut Vec<ConfigError>,
) -> Vec<(String, String)> {
    let mut alias_list = Vec::new();
    for (a, target) in aliases {
        let at = format!("aliases.\"{a}\"");
        if Tier::parse(a).is_some() {
            errs.push(err(&at, "must not be a tier name"));
        } else if models.iter().any(|m| &m.id == a) {
            errs.push(err(&at, "must not shadow a model id"));
        } else if !models.iter().any(|m| &m.id == target) {
            errs.push(err(&at, format!("points at unknown model `{target}`")));
        }
        alias_list.push((a.clone(), target.clone()));
    }
    alias_list
}

/// `[[alias_changes]]`: each re-points an alias at a known model, announced at least 14 days
/// ahead; a change whose times do not parse is left out.
fn alias_changes(
    models: &[ModelSection],
    changes: &[AliasChangeSection],
    errs: &mut Vec<ConfigError>,
) -> Vec<AliasChange> {
    let mut scheduled = Vec::new();
    for (i, c) in changes.iter().enumerate() {
        let at = |k: &str| format!("alias_changes[{i}].{k}");
        if Tier::parse(&c.alias).is_some() || models.iter().any(|m| m.id == c.alias) {
            errs.push(err(at("alias"), "must be an alias, not a model id or tier"));
        }
        if !models.iter().any(|m| m.id == c.to) {
            errs.push(err(at("to"), format!("unknown model `{}`", c.to)));
        }
        let when = |k: &str, v: &str, errs: &mut Vec<ConfigError>| {
            let t = parse_instant(v);
            if t.is_none() {
                errs.push(err(
                    at(k),
                    "must be a date YYYY-MM-DD or a UTC time YYYY-MM-DDTHH:MM:SSZ",
                ));
            }
            t
        };
        let (Some(t), Some(announced)) = (
            when("at", &c.at, errs),
            when("announced", &c.announced, errs),
        ) else {
            continue;
        };
        if t - announced < MIN_ALIAS_NOTICE_SECS {
            errs.push(err(
                at("at"),
                format!("must be at least 14 days after announced ({})", c.announced),
            ));
        }
        scheduled.push(AliasChange {
            alias: c.alias.clone(),
            to: c.to.clone(),
            at: t,
            announced,
        });
    }
    scheduled
}

#[cfg(test)]
mod tests {
    use crate::config::parse;

    fn paths(toml: &str) -> Vec<String> {
        parse(toml).map_or_else(|e| e.into_iter().map(|e| e.path).collect(), |_| Vec::new())
    }

    const PROVIDERS: &str = "[[providers]]\nname = \"o\"\nendpoints = [\"http://127.0.0.1:9\"]\n\n[[providers]]\nname = \"a\"\nkind = \"anthropic\"\nendpoints = [\"http://127.0.0.1:9\"]\n\n";

    fn model(id: &str, provider: &str, extra: &str) -> String {
        format!("[[models]]\nid = \"{id}\"\nprovider = \"{provider}\"\ninput_credits_per_1k = 1\noutput_credits_per_1k = 0\n{extra}\n")
    }

    #[test]
    fn kinds_are_checked() {
        let ok = format!(
            "{PROVIDERS}{}{}",
            model("emb", "o", "kind = \"embedding\""),
            model("c", "o", "tier = \"economy\""),
        );
        assert_eq!(paths(&ok), Vec::<String>::new());
        let c = parse(&ok).unwrap();
        let emb = c.catalog.model(0);
        assert_eq!(emb.kind, tollgate_filters::route::ModelKind::Embedding);
        assert_eq!(
            c.catalog.model(1).kind,
            tollgate_filters::route::ModelKind::Chat
        );
        let bad = format!(
            "{PROVIDERS}{}{}{}",
            model("e1", "a", "kind = \"embedding\""),
            model("e2", "o", "kind = \"vector\""),
            model("c1", "o", ""),
        );
        let p = paths(&bad);
        for want in ["models[0].kind", "models[1].kind", "models[2].tier"] {
            assert!(p.iter().any(|x| x == want), "missing {want} in {p:?}");
        }
    }
}

#[cfg(test)]
mod cache_rate_tests {
    use crate::config::parse;

    const BASE: &str = "[[providers]]\nname = \"o\"\nendpoints = [\"http://127.0.0.1:9\"]\n\n[[models]]\nid = \"m\"\nprovider = \"o\"\ntier = \"economy\"\ninput_credits_per_1k = 2.5\noutput_credits_per_1k = 10\n";

    /// The key paths of the errors `extra` makes.
    fn errors(extra: &str) -> Vec<String> {
        let errs = parse(&format!("{BASE}{extra}")).err().unwrap_or_default();
        errs.into_iter().map(|e| e.path).collect()
    }

    #[test]
    fn cached_input_is_the_cache_read_rate_under_openais_name() {
        let c = parse(&format!("{BASE}cached_input_credits_per_1k = 1.25\n")).unwrap();
        let m = c.catalog.model(0);
        assert_eq!(m.cache_read_micros_per_1k, Some(1_250_000));
        assert_eq!(m.rates().cache_read, Some(1_250_000));
        let e = errors("cached_input_credits_per_1k = 1.25\ncache_read_credits_per_1k = 1.25\n");
        assert_eq!(e, ["models[0].cached_input_credits_per_1k"]);
    }

    #[test]
    fn one_hour_cache_writes_have_their_own_rate_and_bound_the_hold() {
        let c = parse(&format!(
            "{BASE}cache_write_credits_per_1k = 3.125\ncache_write_1h_credits_per_1k = 5\n"
        ))
        .unwrap();
        let m = c.catalog.model(0);
        assert_eq!(m.cache_write_1h_micros_per_1k, Some(5_000_000));
        assert_eq!(m.rates().cache_write_1h, Some(5_000_000));
        assert_eq!(m.prompt_rate_bound(), 5_000_000);
    }

    #[test]
    fn negative_or_absurd_cache_rates_are_refused_with_their_key_paths() {
        for key in [
            "cached_input_credits_per_1k",
            "cache_read_credits_per_1k",
            "cache_write_credits_per_1k",
            "cache_write_1h_credits_per_1k",
        ] {
            for bad in ["-1", "1e9", "nan", "inf"] {
                let e = errors(&format!("{key} = {bad}\n"));
                assert_eq!(e, [format!("models[0].{key}")], "{key} = {bad}");
            }
        }
    }
}

#[cfg(test)]
mod completions_tests {
    use crate::config::parse;

    #[test]
    fn only_chat_models_of_openai_providers_serve_legacy_completions() {
        let providers = "[[providers]]\nname = \"o\"\nendpoints = [\"http://127.0.0.1:9\"]\n\n[[providers]]\nname = \"a\"\nkind = \"anthropic\"\nendpoints = [\"http://127.0.0.1:9\"]\n\n";
        let m = |id: &str, p: &str, extra: &str| {
            format!("[[models]]\nid = \"{id}\"\nprovider = \"{p}\"\ntier = \"economy\"\ninput_credits_per_1k = 1\noutput_credits_per_1k = 1\n{extra}\n")
        };
        let ok = parse(&format!("{providers}{}", m("i", "o", "completions = true"))).unwrap();
        assert!(ok.catalog.model(0).completions);
        let errs = parse(&format!(
            "{providers}{}{}",
            m("c", "a", "completions = true"),
            m("e", "o", "completions = true\nkind = \"embedding\"")
        ))
        .unwrap_err();
        let paths: Vec<_> = errs.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["models[0].completions", "models[1].completions"]);
    }
}

#[cfg(test)]
mod cache_breakpoints_tests {
    use crate::config::parse;

    #[test]
    fn only_chat_models_of_anthropic_providers_take_cache_breakpoints() {
        let providers = "[[providers]]\nname = \"o\"\nendpoints = [\"http://127.0.0.1:9\"]\n\n[[providers]]\nname = \"a\"\nkind = \"anthropic\"\nendpoints = [\"http://127.0.0.1:9\"]\n\n";
        let m = |id: &str, p: &str, extra: &str| {
            format!("[[models]]\nid = \"{id}\"\nprovider = \"{p}\"\ntier = \"economy\"\ninput_credits_per_1k = 1\noutput_credits_per_1k = 1\n{extra}\n")
        };
        let ok = parse(&format!(
            "{providers}{}{}",
            m("c", "a", "cache_breakpoints = true"),
            m("d", "a", "")
        ))
        .unwrap();
        assert!(ok.catalog.model(0).cache_breakpoints);
        assert!(!ok.catalog.model(1).cache_breakpoints);
        let errs = parse(&format!(
            "{providers}{}",
            m("g", "o", "cache_breakpoints = true")
        ))
        .unwrap_err();
        let paths: Vec<_> = errs.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["models[0].cache_breakpoints"]);
        // Not a boolean: refused by TOML, the message naming the line and the type.
        let errs = parse(&format!(
            "{providers}{}",
            m("c", "a", "cache_breakpoints = \"yes\"")
        ))
        .unwrap_err();
        assert!(errs[0].path.starts_with("line "), "{errs:?}");
    }
}
