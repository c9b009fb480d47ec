//! The query of a request-log listing (`GET /api/v1/requests`, `GET /api/v1/admin/requests`):
//! each parameter checked, an unknown or bad one refused naming it.

use crate::GatewayError;

/// The most records one page holds.
pub const MAX_LIMIT: i64 = 1000;
/// A page's size when `limit` is not given.
pub const DEFAULT_LIMIT: i64 = 100;

/// Which statuses a listing keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// One HTTP status.
    Code(i64),
    /// Every refusal and failure (400 and up).
    Error,
    /// Every success (below 400).
    Ok,
}

/// A listing's wire: one JSON page, or JSON lines with the payloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Json,
    JsonLines,
}

/// Where a page starts: after the record of this time (ms) and request id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    pub created_at: i64,
    pub request_id: String,
}

impl Cursor {
    /// As the next page's `cursor=` names it.
    pub fn encode(&self) -> String {
        format!("{}_{}", self.created_at, self.request_id)
    }

    fn decode(s: &str) -> Option<Cursor> {
        let (at, id) = s.split_once('_')?;
        let ok_id = !id.is_empty()
            && id.len() <= 100
            && id
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-');
        Some(Cursor {
            created_at: at.parse().ok().filter(|t: &i64| *t >= 0)?,
            request_id: ok_id.then(|| id.to_owned())?,
        })
    }
}

/// A listing's query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    pub model: Option<String>,
    pub status: Option<Status>,
    pub key_id: Option<String>,
    /// Milliseconds, inclusive.
    pub since_ms: Option<i64>,
    /// Milliseconds, exclusive.
    pub until_ms: Option<i64>,
    pub limit: i64,
    pub cursor: Option<Cursor>,
    pub format: Format,
    /// An organization's records (its members see their own keys' only).
    pub organization_id: Option<String>,
    /// The operator's listing: whose records.
    pub account_id: Option<String>,
}

/// Which listing a query is of: the operator's names an account, a caller's may name one of
/// its organizations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Of {
    Caller,
    Operator,
}

/// Parses a listing's query string (`None`: none sent).
pub fn parse(query: Option<&str>, of: Of) -> Result<Query, GatewayError> {
    let mut q = Query {
        model: None,
        status: None,
        key_id: None,
        since_ms: None,
        until_ms: None,
        limit: DEFAULT_LIMIT,
        cursor: None,
        format: Format::Json,
        organization_id: None,
        account_id: None,
    };
    let mut seen: Vec<String> = Vec::new();
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (name, raw) = pair.split_once('=').unwrap_or((pair, ""));
        let name = decode(name).ok_or_else(|| bad("query", "is not valid percent-encoding"))?;
        let value = decode(raw).ok_or_else(|| bad(&name, "is not valid percent-encoding"))?;
        if seen.contains(&name) {
            return Err(bad(&name, "is given twice"));
        }
        seen.push(name.clone());
        set(&mut q, &name, value, of)?;
    }
    if let (Some(s), Some(u)) = (q.since_ms, q.until_ms) {
        if s >= u {
            return Err(bad("until", "must be later than since"));
        }
    }
    if of == Of::Operator && q.account_id.is_none() {
        return Err(bad("account_id", "is required: whose requests to list"));
    }
    Ok(q)
}

fn set(q: &mut Query, name: &str, value: String, of: Of) -> Result<(), GatewayError> {
    match (name, of) {
        ("model", _) => q.model = Some(text(name, value)?),
        ("key_id", _) => q.key_id = Some(text(name, value)?),
        ("status", _) => q.status = Some(status(&value)?),
        ("since", _) => q.since_ms = Some(instant(name, &value)?),
        ("until", _) => q.until_ms = Some(instant(name, &value)?),
        ("limit", _) => {
            q.limit = value
                .parse::<i64>()
                .ok()
                .filter(|n| (1..=MAX_LIMIT).contains(n))
                .ok_or_else(|| {
                    bad(
                        name,
                        &format!("must be a whole number from 1 to {MAX_LIMIT}"),
                    )
                })?
        }
        ("cursor", _) => {
            q.cursor =
                Some(Cursor::decode(&value).ok_or_else(|| {
                    bad(name, "is not a cursor this listing gave (its next_cursor)")
                })?)
        }
        ("format", _) => {
            q.format = match value.as_str() {
                "json" => Format::Json,
                "jsonl" => Format::JsonLines,
                _ => return Err(bad(name, "must be json or jsonl")),
            }
        }
        ("organization_id", Of::Caller) => q.organization_id = Some(text(name, value)?),
        ("account_id", Of::Operator) => q.account_id = Some(text(name, value)?),
        _ => {
            let known = match of {
                Of::Caller => "organization_id, ",
                Of::Operator => "account_id, ",
            };
            return Err(bad(
                name,
                &format!("is not a parameter of this listing ({known}model, status, key_id, since, until, limit, cursor, format)"),
            ));
        }
    }
    Ok(())
}

fn bad(name: &str, what: &str) -> GatewayError {
    GatewayError::invalid(format!("{name}: {what}"))
}

/// A name or id: 1 to 200 printable characters.
fn text(name: &str, value: String) -> Result<String, GatewayError> {
    if value.is_empty() || value.len() > 200 || value.chars().any(char::is_control) {
        return Err(bad(name, "must be 1 to 200 printable characters"));
    }
    Ok(value)
}

fn status(value: &str) -> Result<Status, GatewayError> {
    match value {
        "error" => Ok(Status::Error),
        "ok" => Ok(Status::Ok),
        v => v
            .parse::<i64>()
            .ok()
            .filter(|c| (100..=599).contains(c) && v.len() == 3)
            .map(Status::Code)
            .ok_or_else(|| bad("status", "must be an HTTP status (100 to 599), ok or error")),
    }
}

/// Unix seconds, `YYYY-MM-DD` or `YYYY-MM-DDTHH:MM:SSZ` (UTC), in milliseconds.
fn instant(name: &str, value: &str) -> Result<i64, GatewayError> {
    let secs = if !value.is_empty() && value.bytes().all(|c| c.is_ascii_digit()) {
        value.parse::<i64>().ok().filter(|s| *s <= 253_402_300_799)
    } else {
        crate::time::parse_instant(value)
    };
    secs.map(|s| s * 1000).ok_or_else(|| {
        bad(
            name,
            "must be Unix seconds, YYYY-MM-DD or YYYY-MM-DDTHH:MM:SSZ (UTC)",
        )
    })
}

/// `%XX` and `+` decoded; `None` for a bad escape or bytes that are not UTF-8.
fn decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(q: &str) -> Query {
        parse(Some(q), Of::Caller).unwrap()
    }

    fn err(q: &str, of: Of) -> String {
        parse(Some(q), of).unwrap_err().message
    }

    #[test]
    fn every_parameter_is_read() {
        let q = ok("model=gpt-4o%2Dmini&status=error&key_id=key_1&since=2026-01-02&until=1767400000&limit=5&format=jsonl&organization_id=org_1&cursor=1767300000000_req_00ab");
        assert_eq!(q.model.as_deref(), Some("gpt-4o-mini"));
        assert_eq!(q.status, Some(Status::Error));
        assert_eq!(q.key_id.as_deref(), Some("key_1"));
        assert_eq!(q.since_ms, Some(1_767_312_000_000));
        assert_eq!(q.until_ms, Some(1_767_400_000_000));
        assert_eq!(q.limit, 5);
        assert_eq!(q.format, Format::JsonLines);
        assert_eq!(q.organization_id.as_deref(), Some("org_1"));
        let c = q.cursor.unwrap();
        assert_eq!(
            (c.created_at, c.request_id.as_str()),
            (1_767_300_000_000, "req_00ab")
        );
        assert_eq!(Cursor::decode(&c.encode()), Some(c));
        assert_eq!(ok("status=402").status, Some(Status::Code(402)));
        assert_eq!(ok("").limit, DEFAULT_LIMIT);
        assert_eq!(parse(None, Of::Caller).unwrap().format, Format::Json);
    }

    #[test]
    fn bad_input_names_its_parameter() {
        for (q, field) in [
            ("limit=0", "limit"),
            ("limit=1001", "limit"),
            ("limit=x", "limit"),
            ("status=teapot", "status"),
            ("status=1000", "status"),
            ("since=2026-13-01", "since"),
            ("until=yesterday", "until"),
            ("since=2026-01-02&until=2026-01-01", "until"),
            ("cursor=abc", "cursor"),
            ("cursor=1_a%20b", "cursor"),
            ("format=csv", "format"),
            ("colour=red", "colour"),
            ("account_id=u1", "account_id"),
            ("model=", "model"),
            ("model=%zz", "model"),
            ("limit=1&limit=2", "limit"),
        ] {
            let m = err(q, Of::Caller);
            assert!(m.starts_with(&format!("{field}: ")), "{q}: {m}");
        }
        assert!(err("organization_id=o", Of::Operator).starts_with("organization_id: "));
        assert!(err("", Of::Operator).starts_with("account_id: "));
        assert_eq!(
            parse(Some("account_id=u_1"), Of::Operator)
                .unwrap()
                .account_id
                .as_deref(),
            Some("u_1")
        );
    }
}
