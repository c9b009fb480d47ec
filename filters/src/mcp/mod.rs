//! The MCP tool marketplace's pure parts (DESIGN.md, Rules: MCP): JSON-RPC 2.0 messages as the
//! agent endpoint reads and writes them, protocol version negotiation (both eras: [`era`]), slugs and the
//! `{slug}__{tool}` names of `/mcp`, a key's tool allowlist, tool definitions and call results
//! as the live check and billing judge them, the developer's share, and which addresses an
//! upstream may not have.

use std::net::IpAddr;

use serde_json::value::RawValue;
use serde_json::Value;

use crate::json::raw;

pub mod ask;
pub mod era;
mod message;
mod state;
#[cfg(test)]
mod tests_message;
pub use message::{
    parse_message, request_json, result_json, tool_call_params, Incoming, RpcError,
    INSUFFICIENT_CREDITS, INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND,
    PARSE_ERROR, RATE_LIMITED, UPSTREAM_ERROR,
};
pub use state::{Move, ServiceState};

/// Protocol versions the agent endpoint speaks, newest first.
pub const PROTOCOL_VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// The version to answer `initialize` with: the client's when spoken here, else the newest.
pub fn negotiate(requested: Option<&str>) -> &'static str {
    requested
        .and_then(|r| PROTOCOL_VERSIONS.iter().find(|v| **v == r))
        .copied()
        .unwrap_or(PROTOCOL_VERSIONS[0])
}

/// `^[a-z0-9][a-z0-9-]{1,62}$`
pub fn valid_slug(s: &str) -> bool {
    let b = s.as_bytes();
    (2..=63).contains(&b.len())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
}

/// The developer's share of a call's price, rounded up: `(price × percent + 99) / 100`.
pub fn developer_share(price: u64, percent: u64) -> u64 {
    price.saturating_mul(percent).div_ceil(100)
}

/// A tool's name on `/mcp`: `{slug}__{tool}`.
pub fn joined_name(slug: &str, tool: &str) -> String {
    // Joined, not `format!`ted: this runs for every tool call.
    [slug, "__", tool].concat()
}

/// `{slug}__{tool}` split at the first `__` (a slug has no underscore, a tool name may).
pub fn split_name(name: &str) -> Option<(&str, &str)> {
    let (slug, tool) = name.split_once("__")?;
    (valid_slug(slug) && !tool.is_empty()).then_some((slug, tool))
}

/// An entry of a key's tool allowlist: a whole service (`slug`, tool `None`) or one of its
/// tools (`slug__tool`). `None` when it is neither.
pub fn allowlist_entry(entry: &str) -> Option<(&str, Option<&str>)> {
    match split_name(entry) {
        Some((slug, tool)) => Some((slug, Some(tool))),
        None => valid_slug(entry).then_some((entry, None)),
    }
}

/// Whether a key's tool allowlist (`None`: every tool) lets it use `tool` of service `slug`.
pub fn tool_allowed(allowed: Option<&[String]>, slug: &str, tool: &str) -> bool {
    allowed.is_none_or(|list| {
        list.iter().any(|e| match allowlist_entry(e) {
            Some((s, t)) => s == slug && t.is_none_or(|t| t == tool),
            None => false,
        })
    })
}

/// Whether a key's tool allowlist lets it use any tool of service `slug`.
pub fn service_allowed(allowed: Option<&[String]>, slug: &str) -> bool {
    allowed.is_none_or(|list| {
        list.iter()
            .any(|e| allowlist_entry(e).is_some_and(|(s, _)| s == slug))
    })
}

/// The tools of a `tools/list` result, each checked: a name of 1–128 characters from
/// `[A-Za-z0-9_.-]` and an object `inputSchema`. `Err` says what is wrong, in words.
pub fn checked_tools(result: &Value) -> Result<Vec<Value>, String> {
    let Some(tools) = result.get("tools").and_then(Value::as_array) else {
        return Err("its tools/list result has no tools array".into());
    };
    if tools.is_empty() {
        return Err("it offers no tools".into());
    }
    for (i, t) in tools.iter().enumerate() {
        let name = t.get("name").and_then(Value::as_str).unwrap_or_default();
        let ok_name = (1..=128).contains(&name.len())
            && name
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.'));
        if !ok_name {
            return Err(format!("tool {i} has no valid name"));
        }
        if !t.get("inputSchema").is_some_and(Value::is_object) {
            return Err(format!("tool `{name}` has no inputSchema object"));
        }
    }
    Ok(tools.clone())
}

/// Whether a `tools/call` result is a success worth its price: an object with a `content`
/// array and no `isError: true`. `Err` is why not.
pub fn call_succeeded(result: &RawValue) -> Result<(), &'static str> {
    let members = raw::object(result).unwrap_or_default();
    // A 2026-07-28 server asking the client for input has not done the call yet: the client
    // retries it with the input, and that call is the one charged.
    if raw::get(&members, "resultType")
        .and_then(raw::as_str)
        .as_deref()
        == Some("input_required")
    {
        return Err("the tool asks the client for input first (input_required)");
    }
    if raw::get(&members, "isError").and_then(raw::as_bool) == Some(true) {
        return Err("the tool reported an error (isError)");
    }
    if raw::get(&members, "content").map(raw::kind) != Some(raw::Kind::Array) {
        return Err("the result has no content array");
    }
    Ok(())
}

/// The capabilities an endpoint declares: `tools` always (listed from the gateway's own
/// copy, whose changes it does not announce), and on `/mcp/{slug}` what the tool server itself
/// declared of what is passed through to it (`server`: its declared capabilities, `null` on
/// `/mcp` or when unknown): `prompts`, `resources`, `completions`, `logging`. A list-change
/// notification would come on a stream the gateway does not open, so none is announced; nor,
/// to a 2026-07-28 agent (`stateless`), resource subscriptions (`subscriptions/listen` is not
/// offered). A 2025 agent's `resources/subscribe` is passed through as the server answers it.
pub fn declared_capabilities(server: &Value, stateless: bool) -> Value {
    let mut out = serde_json::Map::new();
    out.insert("tools".into(), serde_json::json!({"listChanged": false}));
    for name in ["prompts", "resources", "completions", "logging"] {
        if let Some(Value::Object(c)) = server.get(name) {
            let mut c = c.clone();
            if c.contains_key("listChanged") {
                c.insert("listChanged".into(), false.into());
            }
            if stateless {
                c.remove("subscribe");
            }
            out.insert(name.into(), Value::Object(c));
        }
    }
    Value::Object(out)
}

/// Why an address may not be a tool server's (SSRF guard), or `None` for a public one.
pub fn private_reason(ip: IpAddr) -> Option<&'static str> {
    match ip.to_canonical() {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            if v4.is_loopback() {
                Some("a loopback address")
            } else if v4.is_unspecified() || o[0] == 0 {
                Some("an unspecified address")
            } else if o == [169, 254, 169, 254] || o == [100, 100, 100, 200] {
                Some("a cloud metadata address")
            } else if v4.is_private() {
                Some("a private address")
            } else if v4.is_link_local() {
                Some("a link-local address")
            } else if o[0] == 100 && (64..128).contains(&o[1]) {
                Some("a carrier-grade NAT address")
            } else if v4.is_broadcast() || v4.is_multicast() || o[0] >= 240 {
                Some("a reserved address")
            } else {
                None
            }
        }
        IpAddr::V6(v6) => {
            let s = v6.segments();
            if v6.is_loopback() {
                Some("a loopback address")
            } else if v6.is_unspecified() {
                Some("an unspecified address")
            } else if s[0] == 0xfd00 && s[1..7] == [0; 6] && s[7] == 0x00fe {
                Some("a cloud metadata address")
            } else if s[0] & 0xfe00 == 0xfc00 {
                Some("a unique-local address")
            } else if s[0] & 0xffc0 == 0xfe80 {
                Some("a link-local address")
            } else if s[0] & 0xff00 == 0xff00 {
                Some("a reserved address")
            } else {
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn slugs_names_and_shares() {
        for ok in ["ab", "weather", "a-1", "0x", &"a".repeat(63)] {
            assert!(valid_slug(ok), "{ok}");
        }
        for bad in ["a", "-ab", "Ab", "a_b", "a b", &"a".repeat(64), ""] {
            assert!(!valid_slug(bad), "{bad}");
        }
        assert_eq!(
            split_name("weather__get_forecast"),
            Some(("weather", "get_forecast"))
        );
        assert_eq!(split_name("weather__"), None);
        assert_eq!(split_name("nounderscore"), None);
        for (price, share) in [(1, 1), (7, 6), (59, 48), (60, 48), (0, 0), (10, 8)] {
            assert_eq!(developer_share(price, 80), share, "{price}");
        }
        assert_eq!(negotiate(Some("2025-03-26")), "2025-03-26");
        assert_eq!(negotiate(Some("1999-01-01")), "2025-11-25");
        assert_eq!(negotiate(None), "2025-11-25");
    }

    #[test]
    fn a_tool_allowlist_names_services_and_tools() {
        assert_eq!(allowlist_entry("wx"), Some(("wx", None)));
        assert_eq!(allowlist_entry("wx__get_f"), Some(("wx", Some("get_f"))));
        assert_eq!(allowlist_entry("Wx"), None);
        assert_eq!(allowlist_entry("wx__"), None);
        let list = ["wx".to_owned(), "calc__add".to_owned()];
        let some = Some(&list[..]);
        assert!(tool_allowed(None, "any", "thing"));
        assert!(tool_allowed(some, "wx", "echo"));
        assert!(tool_allowed(some, "calc", "add"));
        assert!(!tool_allowed(some, "calc", "echo"));
        assert!(!tool_allowed(some, "calcx", "add"));
        assert!(service_allowed(some, "calc") && service_allowed(some, "wx"));
        assert!(!service_allowed(some, "other"));
        assert!(service_allowed(None, "other"));
    }

    #[test]
    fn tools_and_results_are_judged() {
        let good = json!({"tools":[{"name":"get_forecast","description":"d","inputSchema":{"type":"object"}}]});
        assert_eq!(checked_tools(&good).unwrap().len(), 1);
        assert!(checked_tools(&json!({"tools":[]})).is_err());
        assert!(checked_tools(&json!({"tools":[{"name":"a b","inputSchema":{}}]})).is_err());
        assert!(checked_tools(&json!({"tools":[{"name":"a"}]})).is_err());
        assert!(checked_tools(&json!({})).is_err());
        let judged = |s: &str| call_succeeded(&serde_json::from_str::<Box<RawValue>>(s).unwrap());
        assert!(judged(r#"{"content":[{"type":"text","text":"x"}]}"#).is_ok());
        assert!(judged(r#"{"content":[],"isError":true}"#).is_err());
        assert!(judged(r#"{"content":[],"isError":false}"#).is_ok());
        assert!(judged(r#"{"structured":1}"#).is_err());
        assert!(judged(r#"{"content":{}}"#).is_err());
        assert!(judged("null").is_err());
        // A 2026 server asking for input first: not the call that is charged.
        assert!(judged(r#"{"resultType":"input_required","inputRequests":{"a":{"method":"elicitation/create","params":{}}},"content":[]}"#).is_err());
        assert!(judged(r#"{"resultType":"complete","content":[]}"#).is_ok());
        // The result is copied as sent, the id written as JSON.
        let r = serde_json::from_str::<Box<RawValue>>(r#"{"content": [ ], "x":1e400}"#).unwrap();
        assert_eq!(
            result_json(&json!("a\"b"), &r),
            br#"{"jsonrpc":"2.0","id":"a\"b","result":{"content": [ ], "x":1e400}}"#
        );
    }

    #[test]
    fn declared_capabilities_are_the_servers_passed_through_ones() {
        let tools_only = json!({"tools": {"listChanged": false}});
        assert_eq!(declared_capabilities(&Value::Null, false), tools_only);
        let server = json!({"tools": {"listChanged": true}, "prompts": {"listChanged": true},
            "resources": {"subscribe": true}, "logging": {}, "experimental": {"x": {}},
            "completions": "not an object"});
        assert_eq!(
            declared_capabilities(&server, false),
            json!({"tools": {"listChanged": false}, "prompts": {"listChanged": false},
                "resources": {"subscribe": true}, "logging": {}})
        );
        // No subscriptions in 2026-07-28 (`subscriptions/listen` is refused).
        assert_eq!(declared_capabilities(&server, true)["resources"], json!({}));
    }

    #[test]
    fn private_addresses_are_named() {
        for (ip, private) in [
            ("127.0.0.1", true),
            ("10.1.2.3", true),
            ("172.16.0.1", true),
            ("192.168.1.1", true),
            ("169.254.169.254", true),
            ("169.254.1.1", true),
            ("100.64.0.1", true),
            ("0.0.0.0", true),
            ("::1", true),
            ("fd00::1", true),
            ("fe80::1", true),
            ("::ffff:127.0.0.1", true),
            ("8.8.8.8", false),
            ("100.128.0.1", false),
            ("2606:4700::1111", false),
        ] {
            let ip: IpAddr = ip.parse().unwrap();
            assert_eq!(private_reason(ip).is_some(), private, "{ip}");
        }
    }
}
