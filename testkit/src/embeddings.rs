//! The fake provider's `/v1/embeddings`: deterministic vectors (the same input gives the same
//! vector, on every endpoint), floats or base64 as asked, and a token count per input (a
//! string counts one token per 4 bytes, at least 1; a token array its length), so a test can
//! check the charge against the usage it was told.

use serde_json::{json, Value};

/// Dimensions when the request names none.
pub const DEFAULT_DIMENSIONS: usize = 8;

fn inputs(body: &Value) -> Vec<Value> {
    match &body["input"] {
        Value::Array(items) if items.first().is_some_and(Value::is_number) => {
            vec![body["input"].clone()]
        }
        Value::Array(items) => items.clone(),
        other => vec![other.clone()],
    }
}

/// Tokens the fake says an input has.
pub fn tokens_of(input: &Value) -> u64 {
    match input {
        Value::String(s) => (s.len() as u64 / 4).max(1),
        Value::Array(t) => t.len() as u64,
        _ => 0,
    }
}

/// The vector of one input: a function of its text, so every endpoint agrees.
pub fn vector(input: &Value, dims: usize) -> Vec<f32> {
    let seed = input
        .to_string()
        .bytes()
        .fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(b as u64));
    (0..dims)
        .map(|j| ((seed.wrapping_add(j as u64 * 13) % 1000) as f32) / 1000.0)
        .collect()
}

fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for c in bytes.chunks(3) {
        let n = (c[0] as u32) << 16
            | (*c.get(1).unwrap_or(&0) as u32) << 8
            | *c.get(2).unwrap_or(&0) as u32;
        for i in 0..4 {
            if i <= c.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The reply to `body`; `prompt_tokens` overrides the count, `usage` false leaves it out.
pub fn reply(body: &Value, prompt_tokens: Option<u64>, usage: bool) -> Value {
    let dims = body["dimensions"]
        .as_u64()
        .map_or(DEFAULT_DIMENSIONS, |d| d as usize);
    let b64 = body["encoding_format"] == "base64";
    let items = inputs(body);
    let data: Vec<Value> = items
        .iter()
        .enumerate()
        .map(|(i, input)| {
            let v = vector(input, dims);
            let embedding = if b64 {
                let bytes: Vec<u8> = v.iter().flat_map(|f| f.to_le_bytes()).collect();
                json!(base64(&bytes))
            } else {
                json!(v)
            };
            json!({"object": "embedding", "index": i, "embedding": embedding})
        })
        .collect();
    let n = prompt_tokens.unwrap_or_else(|| items.iter().map(tokens_of).sum());
    let mut r = json!({"object": "list", "data": data, "model": body["model"]});
    if usage {
        r["usage"] = json!({"prompt_tokens": n, "total_tokens": n});
    }
    r
}
