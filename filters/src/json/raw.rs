//! Reading JSON where it lies: a request's members and their parts as `&RawValue` slices of
//! the body, decoded only where a rule reads them. What the gateway merely passes on (message
//! texts, tool schemas, unknown fields) is never copied into a tree, and the upstream body is
//! spliced from the same slices (`splice.rs`).
//!
//! The accessors mirror `serde_json::Value`'s (`as_str`, `as_u64`, …) so that each check keeps
//! the meaning it had on the tree; a duplicated key resolves to its last occurrence, as
//! `serde_json::Map` does.

use std::borrow::Cow;

use serde::de::IgnoredAny;
use serde_json::value::RawValue;

use crate::json::splice::Members;

/// One member list: keys (borrowed unless escaped) and raw values, in the body's order.
pub type MemberList<'a> = Vec<(Cow<'a, str>, &'a RawValue)>;

/// The JSON type of a raw value, read off its first byte (a `RawValue` holds no leading
/// whitespace).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Null,
    Bool,
    Number,
    String,
    Array,
    Object,
}

pub fn kind(v: &RawValue) -> Kind {
    match v.get().as_bytes().first() {
        Some(b'n') => Kind::Null,
        Some(b't' | b'f') => Kind::Bool,
        Some(b'"') => Kind::String,
        Some(b'[') => Kind::Array,
        Some(b'{') => Kind::Object,
        _ => Kind::Number,
    }
}

pub fn is_null(v: &RawValue) -> bool {
    kind(v) == Kind::Null
}

pub fn is_string(v: &RawValue) -> bool {
    kind(v) == Kind::String
}

/// The value of `name` among `members`: the last one, as a JSON map keeps it.
pub fn get<'a>(members: &[(Cow<'a, str>, &'a RawValue)], name: &str) -> Option<&'a RawValue> {
    members.iter().rev().find(|(k, _)| k == name).map(|m| m.1)
}

/// `get` that treats a JSON `null` as absent, as most of the rules do.
pub fn get_set<'a>(members: &[(Cow<'a, str>, &'a RawValue)], name: &str) -> Option<&'a RawValue> {
    get(members, name).filter(|v| !is_null(v))
}

/// The text of a string value, borrowed unless it had escapes to undo.
pub fn as_str(v: &RawValue) -> Option<Cow<'_, str>> {
    if !is_string(v) {
        return None;
    }
    serde_json::from_str::<Cow<'_, str>>(v.get()).ok()
}

pub fn as_bool(v: &RawValue) -> Option<bool> {
    match v.get() {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    }
}

/// Any number as `f64`, as `Value::as_f64` gives it.
pub fn as_f64(v: &RawValue) -> Option<f64> {
    if kind(v) != Kind::Number {
        return None;
    }
    serde_json::from_str::<f64>(v.get()).ok()
}

/// A number written as a non-negative integer, as `Value::as_u64` gives it (`1.0` is not).
pub fn as_u64(v: &RawValue) -> Option<u64> {
    if kind(v) != Kind::Number {
        return None;
    }
    serde_json::from_str::<u64>(v.get()).ok()
}

/// The elements of an array value.
pub fn array(v: &RawValue) -> Option<Vec<&RawValue>> {
    if kind(v) != Kind::Array {
        return None;
    }
    serde_json::from_str(v.get()).ok()
}

/// The members of an object value.
pub fn object(v: &RawValue) -> Option<MemberList<'_>> {
    if kind(v) != Kind::Object {
        return None;
    }
    serde_json::from_str::<Members<'_>>(v.get())
        .ok()
        .map(|m| m.0)
}

/// The members of `body` if it is a JSON object; the error says what `serde_json` would have
/// said of the whole body, so malformed JSON is reported as before the typed parse.
pub fn parse_object(body: &[u8]) -> Result<MemberList<'_>, ObjectError> {
    let first = body.iter().find(|b| !b.is_ascii_whitespace());
    if first == Some(&b'{') {
        return match serde_json::from_slice::<Members<'_>>(body) {
            Ok(m) => Ok(m.0),
            Err(e) => Err(ObjectError::Malformed(e)),
        };
    }
    // Not an object: whether it is JSON at all decides the message.
    match serde_json::from_slice::<IgnoredAny>(body) {
        Ok(_) => Err(ObjectError::NotAnObject),
        Err(e) => Err(ObjectError::Malformed(e)),
    }
}

/// Why a body is not a JSON object.
#[derive(Debug)]
pub enum ObjectError {
    Malformed(serde_json::Error),
    NotAnObject,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> &RawValue {
        serde_json::from_str(s).unwrap()
    }

    #[test]
    fn accessors_read_as_value_would() {
        assert_eq!(as_u64(raw("7")), Some(7));
        assert_eq!(as_u64(raw("1.0")), None);
        assert_eq!(as_u64(raw("-3")), None);
        assert_eq!(as_f64(raw("1")), Some(1.0));
        assert_eq!(as_f64(raw("\"1\"")), None);
        assert_eq!(as_str(raw(r#""a\"b""#)).as_deref(), Some("a\"b"));
        assert_eq!(as_bool(raw("false")), Some(false));
        assert_eq!(array(raw("[1, {\"a\":2}]")).map(|a| a.len()), Some(2));
        let o = object(raw(r#"{"a":1,"a":null, "b":[]}"#)).unwrap();
        assert_eq!(get(&o, "a").map(RawValue::get), Some("null"));
        assert!(get_set(&o, "a").is_none());
        assert_eq!(kind(get(&o, "b").unwrap()), Kind::Array);
    }

    #[test]
    fn a_body_that_is_not_an_object_is_told_apart_from_malformed_json() {
        assert!(matches!(
            parse_object(b" [1]"),
            Err(ObjectError::NotAnObject)
        ));
        assert!(matches!(
            parse_object(b"[1"),
            Err(ObjectError::Malformed(_))
        ));
        assert!(matches!(
            parse_object(b"{\"a\":}"),
            Err(ObjectError::Malformed(_))
        ));
        assert_eq!(parse_object(b"{\"a\":1} ").unwrap().len(), 1);
    }
}
