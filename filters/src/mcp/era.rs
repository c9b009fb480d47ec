//! The two eras of the protocol on the agent endpoints. A 2025 client opens with `initialize`
//! and sends its version in the `MCP-Protocol-Version` header after; a 2026-07-28 client is
//! stateless: every request carries its version, capabilities and client info in
//! `params._meta`, the same version in the header, and the method (and tool, prompt or
//! resource name) in `Mcp-Method` / `Mcp-Name`, and results say their `resultType`. This
//! module tells the eras apart and checks a 2026 request as the specification's error rules
//! say (`_meta` missing: -32602; a header that disagrees with the body: -32020; a version not
//! spoken: -32022 with the ones that are; a method the era removed: -32601), each with the
//! HTTP status of [`http_status`].

use base64::Engine;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use super::message::{RpcError, INVALID_PARAMS, METHOD_NOT_FOUND};
use crate::json::raw;

/// The stateless protocol version.
pub const STATELESS: &str = "2026-07-28";
/// Every version the endpoints speak, newest first: the stateless one, then those of
/// `initialize`.
pub const ALL_VERSIONS: &[&str] = &["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"];

pub const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// A header disagrees with the body, or one the era requires is missing.
pub const HEADER_MISMATCH: i64 = -32020;
/// The request's protocol version is not spoken here.
pub const UNSUPPORTED_VERSION: i64 = -32022;

/// Methods of the 2025 protocol that a 2026 request may not use.
const REMOVED: &[&str] = &[
    "initialize",
    "ping",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
];

/// The routing headers of a request, as sent.
#[derive(Debug, Default, Clone, Copy)]
pub struct Headers<'a> {
    pub version: Option<&'a str>,
    pub method: Option<&'a str>,
    pub name: Option<&'a str>,
}

/// Which era a request belongs to: 2026 when it says so (the header, its `_meta`, or
/// `server/discover`, which only that era has), else 2025.
pub fn is_stateless(method: &str, params: Option<&RawValue>, headers: &Headers<'_>) -> bool {
    method == "server/discover"
        || headers.version == Some(STATELESS)
        || meta(params).is_some_and(|m| raw::get(&m, META_VERSION).is_some())
}

/// The `_meta` members of `params`.
fn meta(params: Option<&RawValue>) -> Option<raw::MemberList<'_>> {
    let members = raw::object(params?)?;
    raw::object(raw::get(&members, "_meta")?)
}

/// Checks a 2026 request: `Err` is the error to answer with (its id set by the caller).
pub fn check(
    method: &str,
    params: Option<&RawValue>,
    headers: &Headers<'_>,
) -> Result<(), RpcError> {
    let invalid = |why: &str| Err(RpcError::new(Value::Null, INVALID_PARAMS, why));
    let Some(meta) = meta(params) else {
        return invalid("params._meta: a 2026-07-28 request carries its protocol version and client capabilities there");
    };
    let Some(version) = raw::get(&meta, META_VERSION).and_then(raw::as_str) else {
        return invalid("params._meta: io.modelcontextprotocol/protocolVersion is required");
    };
    if raw::get(&meta, META_CAPABILITIES).is_none_or(|c| raw::object(c).is_none()) {
        return invalid(
            "params._meta: io.modelcontextprotocol/clientCapabilities (an object) is required",
        );
    }
    let mismatch = |what: String| Err(RpcError::new(Value::Null, HEADER_MISMATCH, what));
    match headers.version {
        None => return mismatch("the MCP-Protocol-Version header is required".into()),
        Some(h) if h != version => {
            return mismatch(format!(
                "MCP-Protocol-Version `{h}` is not the body's `{version}`"
            ))
        }
        _ => {}
    }
    if let Some(h) = headers.method {
        if decoded(h).as_deref() != Some(method) {
            return mismatch(format!("Mcp-Method `{h}` is not the body's `{method}`"));
        }
    }
    if let Some(h) = headers.name {
        let members = params.and_then(raw::object).unwrap_or_default();
        let key = if method == "resources/read" {
            "uri"
        } else {
            "name"
        };
        let body = raw::get(&members, key).and_then(raw::as_str);
        if decoded(h).as_deref() != body.as_deref() {
            return mismatch(format!("Mcp-Name `{h}` is not the body's params.{key}"));
        }
    }
    if version != STATELESS {
        return Err(RpcError::new(
            Value::Null,
            UNSUPPORTED_VERSION,
            format!("protocol version `{version}` is not spoken here"),
        )
        .with_data(json!({"supported": [STATELESS], "requested": version})));
    }
    if REMOVED.contains(&method) {
        return Err(RpcError::new(
            Value::Null,
            METHOD_NOT_FOUND,
            format!("method `{method}` is not part of protocol version {STATELESS}"),
        ));
    }
    Ok(())
}

/// A header value, decoded when sent as `=?base64?…?=` (a value that is not plain ASCII).
fn decoded(h: &str) -> Option<String> {
    match h
        .strip_prefix("=?base64?")
        .and_then(|r| r.strip_suffix("?="))
    {
        Some(b) => {
            let bytes = base64::engine::general_purpose::STANDARD.decode(b).ok()?;
            String::from_utf8(bytes).ok()
        }
        None => Some(h.to_owned()),
    }
}

/// `params` (a JSON object's text, or none) as a 2026 request to a tool server carries it: its
/// members as they are, and in its `_meta` the protocol version, the client's capabilities and
/// the gateway as the client (what the agent put in `_meta` kept, the version and
/// capabilities set). `None` when `params` is not an object.
pub fn with_meta(params: Option<&[u8]>, version: &str) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(params.unwrap_or(b"{}")).ok()?;
    let value: &RawValue = serde_json::from_str(text).ok()?;
    let members = raw::object(value)?;
    let mut meta: serde_json::Map<String, Value> = raw::get(&members, "_meta")
        .and_then(|m| serde_json::from_str(m.get()).ok())
        .unwrap_or_default();
    meta.insert(META_VERSION.into(), STATELESS.into());
    meta.entry(META_CAPABILITIES).or_insert_with(|| json!({}));
    meta.entry("io.modelcontextprotocol/clientInfo")
        .or_insert_with(|| json!({"name": "tollgate", "version": version}));
    let mut out = Vec::with_capacity(text.len() + 160);
    out.push(b'{');
    for (k, v) in members.iter().filter(|(k, _)| k != "_meta") {
        // A key from a parsed object always serializes.
        let _ = serde_json::to_writer(&mut out, k.as_ref());
        out.push(b':');
        out.extend_from_slice(v.get().as_bytes());
        out.push(b',');
    }
    out.extend_from_slice(b"\"_meta\":");
    let _ = serde_json::to_writer(&mut out, &meta);
    out.push(b'}');
    Some(out)
}

/// A value for `Mcp-Method` / `Mcp-Name`: as it is when plain ASCII, else `=?base64?…?=`.
pub fn header_value(v: &str) -> String {
    let plain = !v.is_empty()
        && v.bytes().all(|b| (0x20..0x7f).contains(&b))
        && !v.starts_with(' ')
        && !v.ends_with(' ')
        && !v.starts_with("=?");
    if plain {
        v.to_owned()
    } else {
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(v)
        )
    }
}

/// The HTTP status of a JSON-RPC error answered to a 2026 request (a 2025 request's errors
/// are 200, as before).
pub fn http_status(code: i64) -> u16 {
    match code {
        -32700 | -32600 | -32602 | HEADER_MISMATCH | -32021 | UNSUPPORTED_VERSION => 400,
        METHOD_NOT_FOUND => 404,
        _ => 200,
    }
}

/// A result as the 2026 era writes it: `resultType` (a 2025 tool server's result is complete),
/// the gateway in `_meta`, and on the cacheable lists how long a client may keep it and for
/// whom (`private`: what a key sees depends on the key).
pub fn stateless_result(method: &str, mut result: Value, ttl_ms: u64, version: &str) -> Value {
    let Some(o) = result.as_object_mut() else {
        return result;
    };
    o.entry("resultType").or_insert_with(|| "complete".into());
    let cacheable = matches!(
        method,
        "tools/list"
            | "prompts/list"
            | "resources/list"
            | "resources/templates/list"
            | "resources/read"
    );
    if cacheable && o.get("resultType").and_then(Value::as_str) == Some("complete") {
        o.entry("ttlMs").or_insert_with(|| ttl_ms.into());
        o.entry("cacheScope").or_insert_with(|| "private".into());
    }
    let meta = o.entry("_meta").or_insert_with(|| json!({}));
    if let Some(m) = meta.as_object_mut() {
        m.insert(
            META_SERVER_INFO.into(),
            json!({"name": "tollgate", "version": version}),
        );
    }
    result
}

/// The answer to `server/discover`: every version spoken, what the endpoint offers
/// (`capabilities`, [`super::declared_capabilities`]), and the gateway.
pub fn discover_result(version: &str, ttl_ms: u64, capabilities: Value) -> Value {
    json!({
        "resultType": "complete",
        "supportedVersions": ALL_VERSIONS,
        "capabilities": capabilities,
        "ttlMs": ttl_ms,
        "cacheScope": "public",
        "_meta": {META_SERVER_INFO: {"name": "tollgate", "version": version}},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(v: Value) -> Box<RawValue> {
        serde_json::value::to_raw_value(&v).unwrap()
    }

    fn meta(version: &str) -> Value {
        json!({META_VERSION: version, META_CAPABILITIES: {}, "io.modelcontextprotocol/clientInfo": {"name": "c", "version": "1"}})
    }

    const H: Headers<'static> = Headers {
        version: Some(STATELESS),
        method: None,
        name: None,
    };

    #[test]
    fn the_eras_are_told_apart() {
        let p = params(json!({"_meta": meta(STATELESS)}));
        assert!(is_stateless("tools/list", Some(&p), &Headers::default()));
        assert!(is_stateless("server/discover", None, &Headers::default()));
        assert!(is_stateless("tools/list", None, &H));
        let old = Headers {
            version: Some("2025-06-18"),
            ..Headers::default()
        };
        assert!(!is_stateless("tools/list", Some(&params(json!({}))), &old));
        assert!(!is_stateless("initialize", None, &Headers::default()));
    }

    #[test]
    fn a_stateless_request_is_checked_as_the_specification_says() {
        let code = |m: &str, p: Value, h: Headers<'_>| {
            check(m, Some(&params(p)), &h).err().map(|e| e.code)
        };
        let ok = json!({"_meta": meta(STATELESS), "name": "wx__forecast"});
        assert_eq!(code("tools/call", ok.clone(), H), None);
        assert_eq!(code("tools/list", json!({}), H), Some(INVALID_PARAMS));
        assert_eq!(
            code("tools/list", json!({"_meta": {META_CAPABILITIES: {}}}), H),
            Some(INVALID_PARAMS)
        );
        assert_eq!(
            code("tools/list", json!({"_meta": {META_VERSION: STATELESS}}), H),
            Some(INVALID_PARAMS)
        );
        let none = Headers::default();
        assert_eq!(code("tools/call", ok.clone(), none), Some(HEADER_MISMATCH));
        let other = Headers {
            method: Some("tools/list"),
            ..H
        };
        assert_eq!(code("tools/call", ok.clone(), other), Some(HEADER_MISMATCH));
        let named = Headers {
            method: Some("tools/call"),
            name: Some("wx__forecast"),
            ..H
        };
        assert_eq!(code("tools/call", ok.clone(), named), None);
        let b64 = Headers {
            name: Some("=?base64?d3hfX2ZvcmVjYXN0?="),
            ..H
        };
        assert_eq!(code("tools/call", ok.clone(), b64), None);
        let wrong = Headers {
            name: Some("wx__other"),
            ..H
        };
        assert_eq!(code("tools/call", ok, wrong), Some(HEADER_MISMATCH));
        // The header's version first: one that disagrees with the body is a mismatch.
        let future = json!({"_meta": meta("v999.0.0")});
        assert_eq!(code("tools/list", future.clone(), H), Some(HEADER_MISMATCH));
        let said = Headers {
            version: Some("v999.0.0"),
            ..H
        };
        let e = check("tools/list", Some(&params(future)), &said).unwrap_err();
        assert_eq!(e.code, UNSUPPORTED_VERSION);
        assert_eq!(e.data.unwrap()["supported"], json!([STATELESS]));
        for m in REMOVED {
            assert_eq!(
                code(m, json!({"_meta": meta(STATELESS)}), H),
                Some(METHOD_NOT_FOUND),
                "{m}"
            );
        }
    }

    #[test]
    fn a_request_to_a_stateless_tool_server_carries_the_era_in_its_meta() {
        let out = with_meta(
            Some(br#"{"name":"echo","arguments":{"text":"x"},"_meta":{"progressToken":3}}"#),
            "1",
        )
        .unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["name"], "echo");
        assert_eq!(v["arguments"]["text"], "x");
        assert_eq!(v["_meta"]["progressToken"], 3);
        assert_eq!(v["_meta"][META_VERSION], STATELESS);
        assert!(v["_meta"][META_CAPABILITIES].is_object());
        let v: Value = serde_json::from_slice(&with_meta(None, "1").unwrap()).unwrap();
        assert_eq!(
            v["_meta"]["io.modelcontextprotocol/clientInfo"]["name"],
            "tollgate"
        );
        assert!(with_meta(Some(b"[1]"), "1").is_none());
        assert_eq!(header_value("tools/call"), "tools/call");
        assert_eq!(header_value("météo"), "=?base64?bcOpdMOpbw==?=");
        assert_eq!(decoded(&header_value("météo")).as_deref(), Some("météo"));
    }

    #[test]
    fn errors_have_their_statuses_and_results_their_shape() {
        assert_eq!(http_status(INVALID_PARAMS), 400);
        assert_eq!(http_status(HEADER_MISMATCH), 400);
        assert_eq!(http_status(UNSUPPORTED_VERSION), 400);
        assert_eq!(http_status(METHOD_NOT_FOUND), 404);
        assert_eq!(http_status(-32002), 200);
        let r = stateless_result("tools/list", json!({"tools": []}), 600_000, "1");
        assert_eq!(r["resultType"], "complete");
        assert_eq!(r["ttlMs"], 600_000);
        assert_eq!(r["cacheScope"], "private");
        assert_eq!(r["_meta"][META_SERVER_INFO]["name"], "tollgate");
        let r = stateless_result("tools/call", json!({"content": []}), 600_000, "1");
        assert!(r.get("ttlMs").is_none());
        let d = discover_result("1", 3_600_000, json!({"tools": {}}));
        assert_eq!(d["supportedVersions"][0], STATELESS);
        assert_eq!(d["capabilities"], json!({"tools": {}}));
    }
}
