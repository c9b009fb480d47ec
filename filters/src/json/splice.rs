//! Copying a JSON object with some of its top-level members replaced, without building a tree:
//! the members are located in place by the parser and the bytes copied around them. Shared by
//! the stream and completion rewrites, whose chunks and replies are copied byte for byte but
//! for `model`, `object` and, when counted, `usage`.

use std::borrow::Cow;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

/// Copies the JSON object `raw`, whose top-level `members` were located by [`Members`], into
/// `out` with the value of each member named in `set` replaced by the given JSON text; names
/// in `set` that the object lacks are added at its end. Everything else is copied as is.
pub(crate) fn splice_members(
    raw: &[u8],
    members: &[(Cow<'_, str>, &RawValue)],
    set: &[(&str, &[u8])],
    out: &mut Vec<u8>,
) {
    let mut pos = 0;
    for (k, v) in members {
        if let Some((_, json)) = set.iter().find(|(name, _)| name == k) {
            let start = offset_in(raw, v.get());
            out.extend_from_slice(&raw[pos..start]);
            out.extend_from_slice(json);
            pos = start + v.get().len();
        }
    }
    // The object parsed, so its last non-space byte is its closing brace.
    let close = raw.iter().rposition(|&b| b == b'}').unwrap_or(raw.len());
    out.extend_from_slice(&raw[pos..close]);
    let mut empty = members.is_empty();
    for (name, json) in set {
        if !members.iter().any(|(k, _)| k == name) {
            if !std::mem::take(&mut empty) {
                out.push(b',');
            }
            // Writing into a Vec cannot fail.
            let _ = serde_json::to_writer(&mut *out, name);
            out.push(b':');
            out.extend_from_slice(json);
        }
    }
    out.extend_from_slice(&raw[close..]);
}

/// Where `part`, a slice borrowed from `whole` by the parser, starts in it.
fn offset_in(whole: &[u8], part: &str) -> usize {
    (part.as_ptr() as usize).saturating_sub(whole.as_ptr() as usize)
}

/// The top-level members of a JSON object, keys and raw values borrowed from the input.
pub(crate) struct Members<'a>(pub(crate) Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'de> Deserialize<'de> for Members<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> Visitor<'de> for Visit {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members<'de>, A::Error> {
                let mut out = Vec::with_capacity(8);
                while let Some(Key(k)) = map.next_key()? {
                    out.push((k, map.next_value()?));
                }
                Ok(Members(out))
            }
        }
        d.deserialize_map(Visit)
    }
}

/// An object key: borrowed unless it had escapes to undo.
#[derive(serde::Deserialize)]
struct Key<'a>(#[serde(borrow)] Cow<'a, str>);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splicing_replaces_present_members_and_adds_missing_ones() {
        let splice = |raw: &str, set: &[(&str, &[u8])]| {
            let Members(m) = serde_json::from_str(raw).unwrap();
            let mut out = Vec::new();
            splice_members(raw.as_bytes(), &m, set, &mut out);
            String::from_utf8(out).unwrap()
        };
        assert_eq!(
            splice("{}", &[("a", b"1"), ("b", b"2")]),
            r#"{"a":1,"b":2}"#
        );
        assert_eq!(splice(" { } ", &[("a", b"1")]), r#" { "a":1} "#);
        assert_eq!(
            splice(r#"{"b":[1, 2],"a" : "x"}"#, &[("a", b"null"), ("c", b"3")]),
            r#"{"b":[1, 2],"a" : null,"c":3}"#
        );
        // Duplicate members are all replaced; nothing is added for them.
        assert_eq!(
            splice(r#"{"a":1,"a":2}"#, &[("a", b"0")]),
            r#"{"a":0,"a":0}"#
        );
    }
}
