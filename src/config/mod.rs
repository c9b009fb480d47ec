//! The TOML config (DESIGN.md, Config): one file per section. Each section is a serde struct
//! that refuses unknown keys, validated into a typed value; every problem is reported with its
//! key path, so `check-config` prints them all at once instead of one per run. Nothing reads
//! the TOML after [`validate`].

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use tollgate_filters::route::Catalog;

pub mod abuse;
pub mod billing;
pub mod error;
pub mod mcp;
pub mod models;
pub mod oauth;
pub mod plans;
pub mod provider_tls;
pub mod providers;
pub mod request_log;
pub mod response_cache;
pub mod responses;
pub mod routing;
pub mod server;
pub mod sticky;
pub mod storage;
pub mod telemetry;
pub mod timeouts;
pub mod webhooks;

pub use abuse::Abuse;
pub use billing::Billing;
use error::err;
pub use error::ConfigError;
pub use mcp::Mcp;
pub use plans::Plans;
pub use providers::{EndpointUrl, Provider, ProviderKind};
pub use response_cache::ResponseCache;
pub use responses::Responses;
pub use routing::Routing;
pub use server::Server;
pub use storage::{FailureMode, Storage};
pub use telemetry::Telemetry;
pub use timeouts::Timeouts;
pub use webhooks::Webhooks;

/// The file as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct ConfigFile {
    server: server::ServerSection,
    storage: storage::StorageSection,
    responses: responses::ResponsesSection,
    response_cache: response_cache::ResponseCacheSection,
    timeouts: timeouts::TimeoutsSection,
    providers: Vec<providers::ProviderSection>,
    models: Vec<models::ModelSection>,
    aliases: BTreeMap<String, String>,
    alias_changes: Vec<models::AliasChangeSection>,
    plans: BTreeMap<String, plans::PlanSection>,
    billing: Option<billing::BillingSection>,
    mcp: mcp::McpSection,
    abuse: abuse::AbuseSection,
    oauth: oauth::OAuthSection,
    routing: routing::RoutingSection,
    telemetry: telemetry::TelemetrySection,
    webhooks: webhooks::WebhooksSection,
}

/// A validated config: what the gateway runs on.
#[derive(Debug, Clone)]
pub struct Config {
    pub server: Server,
    pub storage: Storage,
    pub timeouts: Timeouts,
    pub providers: Vec<Provider>,
    pub catalog: Catalog,
    pub plans: Plans,
    /// `None`: no `[billing]` section; nothing is sold.
    pub billing: Option<Billing>,
    pub mcp: Mcp,
    pub abuse: Abuse,
    pub responses: Responses,
    pub response_cache: ResponseCache,
    pub oauth: oauth::OAuth,
    pub routing: Routing,
    pub telemetry: Telemetry,
    pub webhooks: Webhooks,
}

pub fn load_file(path: &Path) -> Result<Config, Vec<ConfigError>> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        vec![ConfigError {
            path: path.display().to_string(),
            message: format!("cannot read: {e}"),
        }]
    })?;
    parse(&text)
}

pub fn parse(text: &str) -> Result<Config, Vec<ConfigError>> {
    let file: ConfigFile = toml::from_str(text).map_err(|e| {
        let span = e
            .span()
            .map(|s| {
                let line = text[..s.start.min(text.len())].lines().count().max(1);
                format!("line {line}")
            })
            .unwrap_or_else(|| "config".into());
        vec![err(span, e.message().to_string())]
    })?;
    validate(&file)
}

fn validate(file: &ConfigFile) -> Result<Config, Vec<ConfigError>> {
    let mut errs = Vec::new();
    let server = file.server.validate(&mut errs);
    let providers = providers::validate(&file.providers, server.listen, &mut errs);
    let model_ids: Vec<&str> = file.models.iter().map(|m| m.id.as_str()).collect();
    let config = Config {
        billing: file
            .billing
            .as_ref()
            .map(|b| b.validate(&server.public_url, &mut errs)),
        server,
        timeouts: file.timeouts.validate(&mut errs),
        storage: file.storage.validate(&mut errs),
        providers,
        catalog: models::validate(
            &file.models,
            &file.aliases,
            &file.alias_changes,
            &file.providers,
            &mut errs,
        ),
        plans: plans::validate(&file.plans, &mut errs),
        mcp: file.mcp.validate(&mut errs),
        abuse: file.abuse.validate(&mut errs),
        responses: file.responses.validate(&mut errs),
        response_cache: file.response_cache.validate(&mut errs),
        oauth: file.oauth.validate(&mut errs),
        routing: file.routing.validate(&file.plans, &model_ids, &mut errs),
        telemetry: file.telemetry.validate(&mut errs),
        webhooks: file.webhooks.validate(&mut errs),
    };
    if errs.is_empty() {
        Ok(config)
    } else {
        Err(errs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operations_keys_out_of_range_are_refused_by_name() {
        let errs =
            parse("[server]\ndns_refresh_secs = 0\n[storage]\npostgres_pooler = \"statement\"\n")
                .map(|_| ())
                .unwrap_err();
        let text: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
        assert!(
            text.iter()
                .any(|e| e.starts_with("server.dns_refresh_secs")),
            "{text:?}"
        );
        assert!(
            text.iter()
                .any(|e| e.starts_with("storage.postgres_pooler")),
            "{text:?}"
        );
        let ok = parse(
            "[server]\nupgrade_socket = \"off\"\n[storage]\npostgres_pooler = \"transaction\"\n",
        )
        .unwrap();
        assert!(ok.server.upgrade_socket.is_none());
        assert!(ok.storage.transaction_pooler);
    }

    #[test]
    fn reports_every_error_with_its_path() {
        let text = r#"
storage = { in_flight_ttl_secs = 0.5 }
mcp = { allowed_hosts = [""], allowed_origins = ["https://a b"] }
[server]
listen = "nowhere"
[timeouts]
connect = -1
[[providers]]
name = "p"
kind = "grpc"
endpoints = ["ftp://x"]
[[models]]
id = "m"
provider = "q"
tier = "cheap"
input_credits_per_1k = 1
output_credits_per_1k = 1
deprecated_at = "2027-01-01"
retires_at = "2027-01-15"
replacement = "zzz"
[aliases]
"a" = "nope"
"#;
        let errs = parse(text).unwrap_err();
        let paths: Vec<_> = errs.iter().map(|e| e.path.as_str()).collect();
        for p in [
            "server.listen",
            "timeouts.connect",
            "providers[0].kind",
            "providers[0].endpoints[0]",
            "models[0].provider",
            "models[0].tier",
            "models[0].retires_at",
            "models[0].replacement",
            "storage.in_flight_ttl_secs",
            "mcp.allowed_hosts",
            "mcp.allowed_origins",
            "aliases.\"a\"",
        ] {
            assert!(paths.contains(&p), "missing {p} in {paths:?}");
        }
    }

    #[test]
    fn lease_settings_are_checked() {
        let errs =
            parse("[storage]\nlease_sync_ms = 0\nlease_idle_secs = -1\nlease_holds = 2000000\nrate_limit_reserve = 1001\n")
                .unwrap_err();
        let paths: Vec<_> = errs.iter().map(|e| e.path.as_str()).collect();
        for p in [
            "storage.lease_sync_ms",
            "storage.lease_idle_secs",
            "storage.lease_holds",
            "storage.rate_limit_reserve",
        ] {
            assert!(paths.contains(&p), "missing {p} in {paths:?}");
        }
        assert!(
            parse("[storage]\nlease_holds = 0\n").is_ok(),
            "0 turns leases off"
        );
        assert!(parse("[storage]\nrate_limit_reserve = 1000\n").is_ok());
        // The key's old name is still read.
        let old = parse("[storage]\nrate_limit_lease = 7\n").expect("the old name");
        assert_eq!(old.storage.rate_limit_reserve, 7);
    }

    #[test]
    fn store_fault_settings_are_checked() {
        let errs = parse("[storage]\nacquire_timeout_ms = 0\nmax_unsettled = 0\n").unwrap_err();
        let paths: Vec<_> = errs.iter().map(|e| e.path.as_str()).collect();
        assert!(paths.contains(&"storage.acquire_timeout_ms"), "{paths:?}");
        assert!(paths.contains(&"storage.max_unsettled"), "{paths:?}");
        assert!(parse("[storage]\nacquire_timeout_ms = 60001\n").is_err());
        let c = parse("[storage]\nacquire_timeout_ms = 500\n").unwrap();
        assert_eq!(
            c.storage.acquire_timeout,
            std::time::Duration::from_millis(500)
        );
        assert!(
            parse("[storage]\nacquire_timeout_ms = \"2s\"\n").is_err(),
            "a number"
        );
    }

    #[test]
    fn unknown_keys_and_syntax_errors_are_refused() {
        assert!(parse("[server]\nlisten_on = \"x\"").is_err());
        assert!(parse("[[models]\n").is_err());
        // [billing] and [mcp] are typed: a misspelt key there is refused too.
        assert!(parse("[billing]\nsecret_key = \"sk\"").is_err());
        assert!(parse("[mcp]\nmax_credits = 5").is_err());
    }

    #[test]
    fn billing_and_mcp_sections_are_checked() {
        let errs = parse(
            "[billing]\n[billing.credit_packs.small]\ncredits = 0\nstripe_price = \"price_1\"\n[mcp]\ncall_timeout = 0\n",
        )
        .unwrap_err();
        let paths: Vec<_> = errs.iter().map(|e| e.path.as_str()).collect();
        for p in ["billing.credit_packs.small.credits", "mcp.call_timeout"] {
            assert!(paths.contains(&p), "missing {p} in {paths:?}");
        }
        let c = parse(
            "[billing]\n[billing.credit_packs.small]\ncredits = 1000\nstripe_price = \"price_1\"\n",
        )
        .unwrap();
        let b = c.billing.unwrap();
        assert_eq!(b.credit_packs["small"].credits, 1_000_000_000);
        assert_eq!(c.mcp.developer_share_percent, 80);
        // Checkout's URLs default under the public URL.
        assert_eq!(
            b.success_url,
            "http://127.0.0.1:8080/dashboard/billing?paid=1"
        );
    }

    #[test]
    fn billing_server_and_demo_keys_are_checked() {
        let errs = parse(
            "[server]
admin_emails = [\"not-an-address\"]
log_format = \"xml\"
             [billing]
stripe_api_base = \"ftp://x\"
api_timeout = 0
             [billing.credit_packs.small]
credits = 10
stripe_price = \" \"
             [[providers]]
name = \"p\"
kind = \"openai\"
",
        )
        .unwrap_err();
        let paths: Vec<_> = errs.iter().map(|e| e.path.as_str()).collect();
        for p in [
            "server.admin_emails[0]",
            "server.log_format",
            "billing.stripe_api_base",
            "billing.api_timeout",
            "billing.credit_packs.small.stripe_price",
            "providers[0].endpoints",
        ] {
            assert!(paths.contains(&p), "missing {p} in {paths:?}");
        }
        // A demo provider needs no endpoints: the gateway's own listener, loopback for 0.0.0.0.
        let c = parse("[server]\nlisten = \"0.0.0.0:9000\"\nadmin_emails = [\"Ops@Example.com\"]\n[[providers]]\nname = \"d\"\nkind = \"demo\"\n").unwrap();
        assert_eq!(c.providers[0].endpoints[0].authority(), "127.0.0.1:9000");
        assert_eq!(c.providers[0].endpoints[0].base_path, "/_demo");
        assert_eq!(c.server.admin_emails, ["ops@example.com"]);
    }

    #[test]
    fn abuse_limits_and_the_new_deadlines_are_checked() {
        let errs = parse(
            "[timeouts]\nrequest_body = 0\nclient_write = -2\n[abuse]\nsignups_per_hour = 0\nlogins_per_day = 0\ninvalid_keys_per_minute = 0\n",
        )
        .unwrap_err();
        let paths: Vec<_> = errs.iter().map(|e| e.path.as_str()).collect();
        for p in [
            "timeouts.request_body",
            "timeouts.client_write",
            "abuse.signups_per_hour",
            "abuse.logins_per_day",
            "abuse.invalid_keys_per_minute",
        ] {
            assert!(paths.contains(&p), "missing {p} in {paths:?}");
        }
        assert!(
            parse("[abuse]\nsignups_per_minute = 3\n").is_err(),
            "unknown key"
        );
        let c = parse("[abuse]\nsignups_per_hour = 2\n").unwrap();
        assert_eq!(c.abuse.signups.per_hour, Some(2));
        assert_eq!(c.abuse.signups.per_day, Some(20), "the default");
        assert_eq!(c.abuse.invalid_keys_per_minute, 60, "the default");
        // The connection bound: 0 is derived at start; anything but a count is refused.
        assert_eq!(
            parse("[server]\nmax_connections = 0\n")
                .unwrap()
                .server
                .max_connections,
            None
        );
        assert_eq!(
            parse("[server]\nmax_connections = 9\n")
                .unwrap()
                .server
                .max_connections,
            Some(9)
        );
        assert!(parse("[server]\nmax_connections = -1\n").is_err());
        assert!(parse("[server]\nmax_connections = \"many\"\n").is_err());
    }

    #[test]
    fn values_are_typed_at_load() {
        let c = parse("[storage]\nredis_failure_mode = \"fail_closed\"\nredis_url = \"\"\n[[providers]]\nname = \"p\"\nendpoints = [\"http://127.0.0.1:1\"]\n").unwrap();
        assert_eq!(c.storage.redis_failure_mode, FailureMode::FailClosed);
        assert_eq!(c.storage.redis_url, None);
        assert_eq!(c.providers[0].kind, ProviderKind::OpenAi);
        assert!(parse("[storage]\nredis_failure_mode = \"sometimes\"\n").is_err());
    }

    #[test]
    fn anthropic_providers_and_cache_rates_are_read_and_checked() {
        let base = "[[providers]]\nname = \"a\"\nkind = \"anthropic\"\nendpoints = [\"https://api.anthropic.com\"]\n[[models]]\nid = \"c\"\nprovider = \"a\"\ntier = \"normal\"\ninput_credits_per_1k = 3\noutput_credits_per_1k = 15\n";
        let c = parse(&format!(
            "{base}cache_read_credits_per_1k = 0.3\ncache_write_credits_per_1k = 3.75\n"
        ))
        .unwrap();
        assert_eq!(c.providers[0].kind, ProviderKind::Anthropic);
        let m = c.catalog.model(0);
        assert_eq!(m.cache_read_micros_per_1k, Some(300_000));
        assert_eq!(m.cache_write_micros_per_1k, Some(3_750_000));
        assert_eq!(m.prompt_rate_bound(), 3_750_000);
        let c = parse(base).unwrap();
        assert_eq!(c.catalog.model(0).cache_read_micros_per_1k, None);
        let err = format!(
            "{:?}",
            parse(&format!("{base}cache_write_credits_per_1k = -1\n")).unwrap_err()
        );
        assert!(
            err.contains("models[0].cache_write_credits_per_1k"),
            "{err}"
        );
        let err = format!(
            "{:?}",
            parse(&base.replace("anthropic", "grpc")).unwrap_err()
        );
        assert!(
            err.contains("anthropic"),
            "the supported kinds are named: {err}"
        );
    }

    #[test]
    fn mcp_limits_are_checked_with_their_key_paths() {
        let c = parse("[mcp]\nrefresh_secs = 30\ndeveloper_share_percent = 70\n").unwrap();
        assert_eq!(c.mcp.refresh, std::time::Duration::from_secs(30));
        assert_eq!(c.mcp.developer_share_percent, 70);
        let err = format!(
            "{:?}",
            parse(
                "[mcp]\ndeveloper_share_percent = 101\nmax_result_bytes = 10\nrefresh_secs = 0\n"
            )
            .unwrap_err()
        );
        for key in [
            "mcp.developer_share_percent",
            "mcp.max_result_bytes",
            "mcp.refresh_secs",
        ] {
            assert!(err.contains(key), "{key}: {err}");
        }
        assert!(
            parse("[mcp]\nshare = 1\n").is_err(),
            "unknown keys are refused"
        );
    }

    #[test]
    fn embedded_default_is_valid() {
        let text = include_str!("../../conf/tollgate.toml");
        if let Err(e) = parse(text) {
            panic!("conf/tollgate.toml: {e:?}");
        }
        let text = include_str!("../../conf/production.example.toml");
        if let Err(e) = parse(text) {
            panic!("conf/production.example.toml: {e:?}");
        }
    }
}
