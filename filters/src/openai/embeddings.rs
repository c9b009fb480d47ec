//! `POST /v1/embeddings` as OpenAI documents it: the request checked (each wrong field named),
//! its prompt tokens estimated for the hold, the upstream body (the client's with the
//! upstream model's name), and the reply with our model id and the provider's `usage`.
//!
//! Members beyond the documented ones pass through untouched, as on chat completions, so a
//! provider's own options (`input_type`, `truncate`) still reach it.

use std::borrow::Cow;

use serde_json::value::RawValue;

use crate::json::raw::{self, Kind, MemberList, ObjectError};
use crate::json::splice::splice_members;
use crate::GatewayError;

/// OpenAI's own limit on one request's inputs.
pub const MAX_INPUTS: usize = 2048;
const MAX_MODEL_BYTES: usize = 256;

/// A checked embeddings request, borrowed from its body (read in place: no tree is built of a
/// batch of texts the gateway only passes on).
#[derive(Debug, Clone)]
pub struct EmbeddingsRequest<'a> {
    pub model: Cow<'a, str>,
    /// The prompt tokens a provider most likely reports: exact for token arrays, an estimate
    /// for text (one token per 3 bytes, as for chat); the least a hold must cover.
    pub estimated_tokens: u64,
    /// The most prompt tokens any provider can report ([`token_bound`]): what the hold asks
    /// for, so that the provider's count is charged in full.
    pub bound_tokens: u64,
    /// The texts, for counting when the provider reports no usage (token arrays count as
    /// themselves: `token_inputs`).
    pub texts: Vec<Cow<'a, str>>,
    pub token_inputs: u64,
    /// The body's members as sent, and the body.
    members: MemberList<'a>,
    raw: &'a [u8],
}

fn bad(field: &str, what: &str) -> GatewayError {
    GatewayError::invalid(format!("{field}: {what}"))
}

/// A token array: non-empty, every element a token id.
fn tokens(field: &str, items: &[&RawValue]) -> Result<u64, GatewayError> {
    if items.is_empty() {
        return Err(bad(field, "must not be an empty token array"));
    }
    if !items
        .iter()
        .all(|t| raw::as_u64(t).is_some_and(|t| t <= u32::MAX as u64))
    {
        return Err(bad(field, "must hold token ids (integers from 0)"));
    }
    Ok(items.len() as u64)
}

/// A string member that is present and not null.
fn string<'a>(v: &'a RawValue, field: &str) -> Result<Cow<'a, str>, GatewayError> {
    raw::as_str(v).ok_or_else(|| bad(field, "must be a string"))
}

pub fn parse_embeddings_request(body: &[u8]) -> Result<EmbeddingsRequest<'_>, GatewayError> {
    let members = raw::parse_object(body).map_err(|e| match e {
        ObjectError::Malformed(e) => GatewayError::invalid(format!("body: malformed JSON ({e})")),
        ObjectError::NotAnObject => GatewayError::invalid("body: must be a JSON object"),
    })?;
    let get = |k: &str| raw::get(&members, k).filter(|v| !raw::is_null(v));
    let model = match get("model") {
        None => return Err(bad("model", "is required")),
        Some(v) => string(v, "model")?,
    };
    if model.trim().is_empty() {
        return Err(bad("model", "must not be empty"));
    }
    if model.len() > MAX_MODEL_BYTES {
        return Err(bad("model", "must be at most 256 bytes"));
    }
    let (mut texts, mut token_inputs) = (Vec::new(), 0u64);
    let input = get("input").ok_or_else(|| bad("input", "is required"))?;
    match raw::kind(input) {
        Kind::String => {
            let s = string(input, "input")?;
            if s.is_empty() {
                return Err(bad("input", "must not be an empty string"));
            }
            texts.push(s);
        }
        Kind::Array => {
            let items = raw::array(input).unwrap_or_default();
            if items.is_empty() {
                return Err(bad("input", "must not be an empty array"));
            }
            if items.len() > MAX_INPUTS {
                return Err(bad("input", "must hold at most 2048 inputs"));
            }
            if raw::kind(items[0]) == Kind::Number {
                // One token array.
                token_inputs = tokens("input", &items)?;
            } else {
                for (i, item) in items.into_iter().enumerate() {
                    let at = format!("input[{i}]");
                    match raw::kind(item) {
                        Kind::String => {
                            let s = string(item, &at)?;
                            if s.is_empty() {
                                return Err(bad(&at, "must not be an empty string"));
                            }
                            texts.push(s);
                        }
                        Kind::Array => {
                            token_inputs += tokens(&at, &raw::array(item).unwrap_or_default())?
                        }
                        _ => return Err(bad(&at, "must be a string or an array of token ids")),
                    }
                }
            }
        }
        _ => {
            return Err(bad(
                "input",
                "must be a string, an array of strings, or token arrays",
            ))
        }
    }
    if let Some(f) = get("encoding_format") {
        if !matches!(raw::as_str(f).as_deref(), Some("float" | "base64")) {
            return Err(bad("encoding_format", "must be \"float\" or \"base64\""));
        }
    }
    if let Some(d) = get("dimensions") {
        if !raw::as_u64(d).is_some_and(|d| (1..=65_536).contains(&d)) {
            return Err(bad("dimensions", "must be a positive integer"));
        }
    }
    if let Some(u) = get("user") {
        string(u, "user")?;
    }
    let text_bytes: u64 = texts.iter().map(|t| t.len() as u64).sum();
    Ok(EmbeddingsRequest {
        model,
        estimated_tokens: text_bytes.div_ceil(3).saturating_add(token_inputs),
        bound_tokens: token_bound(text_bytes, texts.len() as u64, token_inputs),
        texts,
        token_inputs,
        members,
        raw: body,
    })
}

/// The most tokens a provider can count for `texts` texts of `text_bytes` bytes in all and
/// `token_inputs` given token ids: a byte-level tokenizer (BPE as OpenAI's, SentencePiece with
/// byte fallback) never makes a text token shorter than one byte, and a provider may add
/// [`SPECIAL_TOKENS_PER_INPUT`] markers (begin, end) to each text.
pub fn token_bound(text_bytes: u64, texts: u64, token_inputs: u64) -> u64 {
    text_bytes
        .saturating_add(texts.saturating_mul(SPECIAL_TOKENS_PER_INPUT))
        .saturating_add(token_inputs)
}

/// Markers a provider's tokenizer may add to each input text.
pub const SPECIAL_TOKENS_PER_INPUT: u64 = 2;

/// The body for the provider: the client's bytes, naming the upstream model.
pub fn upstream_body(req: &EmbeddingsRequest<'_>, upstream_model: &str) -> Vec<u8> {
    let model = serde_json::to_vec(upstream_model).unwrap_or_default();
    let mut out = Vec::with_capacity(req.raw.len() + upstream_model.len());
    splice_members(req.raw, &req.members, &[("model", &model)], &mut out);
    out
}

/// Reads the provider's reply in place (no tree: a batch's vectors are most of it): `Err` when
/// it is not an embeddings list, else the `usage.prompt_tokens` it reports (`None`: to be
/// counted).
pub fn reply_usage(raw: &[u8]) -> Result<Option<u64>, String> {
    let members = raw::parse_object(raw).map_err(|e| match e {
        ObjectError::Malformed(e) => format!("not JSON ({e})"),
        ObjectError::NotAnObject => "not a JSON object".to_owned(),
    })?;
    if raw::get(&members, "data").map(raw::kind) != Some(Kind::Array) {
        return Err("no data list".into());
    }
    Ok(raw::get(&members, "usage")
        .and_then(raw::object)
        .and_then(|u| raw::get(&u, "prompt_tokens").and_then(raw::as_u64)))
}

/// The reply for the client: the provider's bytes but for `model` (ours) and `usage` (the
/// `prompt_tokens`, = `total_tokens`, the charge was computed from). `raw` passed
/// [`reply_usage`].
pub fn write_reply(raw: &[u8], model: &str, prompt_tokens: u64) -> Vec<u8> {
    let Ok(members) = raw::parse_object(raw) else {
        return raw.to_vec();
    };
    let model = serde_json::to_vec(model).unwrap_or_default();
    let usage = format!(r#"{{"prompt_tokens":{prompt_tokens},"total_tokens":{prompt_tokens}}}"#);
    let mut out = Vec::with_capacity(raw.len() + 64);
    splice_members(
        raw,
        &members,
        &[("model", &model), ("usage", usage.as_bytes())],
        &mut out,
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    use serde_json::Value;

    fn err(v: Value) -> String {
        parse_embeddings_request(v.to_string().as_bytes())
            .unwrap_err()
            .message
    }

    #[test]
    fn every_documented_input_shape_is_accepted_and_estimated() {
        // (body, estimated tokens, texts, token inputs)
        let rows = [
            (json!({"model": "e", "input": "abcdef"}), 2, 1, 0),
            (
                json!({"model": "e", "input": ["abc", "abcd"], "encoding_format": "base64",
                       "dimensions": 256, "user": "u", "input_type": "query"}),
                3,
                2,
                0,
            ),
            (json!({"model": "e", "input": [1, 2, 3]}), 3, 0, 3),
            (
                json!({"model": "e", "input": [[1, 2], [3], "abc"]}),
                4,
                1,
                3,
            ),
            (
                json!({"model": "e", "input": "caf\u{e9}", "user": null}),
                2,
                1,
                0,
            ),
        ];
        for (body, est, texts, toks) in rows {
            let b = body.to_string();
            let r = parse_embeddings_request(b.as_bytes()).unwrap();
            assert_eq!(
                (r.estimated_tokens, r.texts.len(), r.token_inputs),
                (est, texts, toks),
                "{body}"
            );
            assert!(r.bound_tokens >= r.estimated_tokens, "{body}");
            // The body reaches the provider as sent, but for the upstream model's name.
            let up: Value = serde_json::from_slice(&upstream_body(&r, "up-e")).unwrap();
            let mut want = body.clone();
            want["model"] = "up-e".into();
            assert_eq!(up, want);
        }
        let b = r#"{"model":"e","input":"caf\u00e9"}"#;
        assert_eq!(
            parse_embeddings_request(b.as_bytes()).unwrap().texts[0],
            "café"
        );
    }

    #[test]
    fn the_bound_covers_what_a_byte_level_tokenizer_counts_where_the_estimate_falls_short() {
        let base64_like = "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVowMTIzNDU2Nzg5K/8=".repeat(3);
        let texts = [
            "日本語のテキストは一バイトあたりのトークンが多い",
            "3.14159265358979323846264338327950288419716939937510",
            "fooBarBaz_qux42::Zed<T>::frob_9x(a1,b2)->c3",
            base64_like.as_str(),
            "\u{1F600}\u{1F680}🦀🦀🦀 ✓ ∑ ∫",
        ];
        let mut above_estimate = 0;
        for t in texts {
            let counted = crate::tokens::count_text(t);
            let bytes = t.len() as u64;
            assert!(counted <= token_bound(bytes, 1, 0), "{t}: {counted} tokens");
            if counted > bytes.div_ceil(3) {
                above_estimate += 1;
            }
        }
        // The inputs of the issue: the one-per-3-bytes estimate is below the real count.
        assert!(above_estimate >= 3, "{above_estimate}");
    }

    #[test]
    fn bad_input_names_its_field() {
        assert!(err(json!({"input": "x"})).starts_with("model: is required"));
        assert!(err(json!({"model": 3, "input": "x"})).starts_with("model: must be a string"));
        assert!(err(json!({"model": "e"})).starts_with("input: is required"));
        assert!(err(json!({"model": "e", "input": ""})).starts_with("input: must not be an empty"));
        assert!(err(json!({"model": "e", "input": []})).starts_with("input: must not be an empty"));
        assert!(err(json!({"model": "e", "input": {"a": 1}})).starts_with("input: must be"));
        assert!(err(json!({"model": "e", "input": ["a", 3]})).starts_with("input[1]: must be"));
        assert!(err(json!({"model": "e", "input": ["a", ""]})).starts_with("input[1]: must not"));
        assert!(err(json!({"model": "e", "input": [[1, -2]]}))
            .starts_with("input[0]: must hold token ids"));
        assert!(err(json!({"model": "e", "input": [[]]}))
            .starts_with("input[0]: must not be an empty token"));
        assert!(
            err(json!({"model": "e", "input": [1, "a"]})).starts_with("input: must hold token ids")
        );
        let many: Vec<&str> = vec!["a"; MAX_INPUTS + 1];
        assert!(err(json!({"model": "e", "input": many})).starts_with("input: must hold at most"));
        assert!(
            err(json!({"model": "e", "input": "x", "encoding_format": "int8"}))
                .starts_with("encoding_format:")
        );
        assert!(
            err(json!({"model": "e", "input": "x", "dimensions": 0})).starts_with("dimensions:")
        );
        assert!(
            err(json!({"model": "e", "input": "x", "dimensions": "5"})).starts_with("dimensions:")
        );
        assert!(err(json!({"model": "e", "input": "x", "user": 5})).starts_with("user:"));
        assert!(parse_embeddings_request(b"[1]")
            .unwrap_err()
            .message
            .starts_with("body:"));
        assert!(parse_embeddings_request(b"{")
            .unwrap_err()
            .message
            .starts_with("body: malformed"));
    }

    #[test]
    fn the_reply_names_our_model_and_the_charged_usage_and_keeps_the_rest_as_sent() {
        let raw = br#"{"object":"list","data":[{"object":"embedding","index":0,"embedding":"AAAAPw=="}],"model":"up-e","usage":{"prompt_tokens":7,"total_tokens":7}}"#;
        assert_eq!(reply_usage(raw), Ok(Some(7)));
        let out = write_reply(raw, "e", 7);
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["model"], "e");
        assert_eq!(v["usage"], json!({"prompt_tokens": 7, "total_tokens": 7}));
        // The vectors are copied byte for byte.
        let s = String::from_utf8(out).unwrap();
        assert!(s.contains(r#""data":[{"object":"embedding","index":0,"embedding":"AAAAPw=="}]"#));
        // No usage: counted, and written in.
        let raw = br#"{"data": [], "model": "up-e"}"#;
        assert_eq!(reply_usage(raw), Ok(None));
        let v: Value = serde_json::from_slice(&write_reply(raw, "e", 4)).unwrap();
        assert_eq!(v["usage"], json!({"prompt_tokens": 4, "total_tokens": 4}));
        assert!(reply_usage(b"{}").is_err());
        assert!(reply_usage(br#"{"data": {}}"#).is_err());
        assert!(reply_usage(b"<html>").is_err());
        assert!(reply_usage(b"[1]").is_err());
    }
}
