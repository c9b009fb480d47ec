//! An entry's key: sha256 over the wallet, the front door, `stream`, the model asked and the
//! body's members that change the output, written canonically (object members sorted, no
//! whitespace), so that two requests that differ only in member order or spacing share it.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Members that do not change what the model answers: who the caller says it is, its labels,
/// what usage a stream reports (the replay writes that for the request at hand), the
/// gateway's own extension.
const IGNORED: [&str; 4] = ["user", "metadata", "stream_options", "tollgate"];

/// The key (hex), or `None` when `body` is not a JSON object.
pub fn of(wallet: &str, door: &str, stream: bool, model: &str, body: &[u8]) -> Option<String> {
    let Ok(Value::Object(members)) = serde_json::from_slice::<Value>(body) else {
        return None;
    };
    let mut h = Sha256::new();
    for part in [wallet, door, if stream { "stream" } else { "json" }, model] {
        h.update(part.len().to_le_bytes());
        h.update(part.as_bytes());
    }
    let mut names: Vec<&String> = members
        .keys()
        .filter(|k| !IGNORED.contains(&k.as_str()))
        .collect();
    names.sort();
    let mut out = Vec::with_capacity(body.len());
    for name in names {
        write_canonical(&Value::String(name.clone()), &mut out);
        out.push(b':');
        write_canonical(&members[name.as_str()], &mut out);
        out.push(b',');
    }
    h.update(&out);
    Some(hex(&h.finalize()))
}

/// `v` as JSON with every object's members sorted by name.
fn write_canonical(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Object(m) => {
            let mut names: Vec<&String> = m.keys().collect();
            names.sort();
            out.push(b'{');
            for (i, name) in names.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(&Value::String(name.clone()), out);
                out.push(b':');
                write_canonical(&m[name.as_str()], out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(item, out);
            }
            out.push(b']');
        }
        // Writing a scalar into a Vec cannot fail.
        scalar => {
            let _ = serde_json::to_writer(&mut *out, scalar);
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(HEX[usize::from(b >> 4)]));
        s.push(char::from(HEX[usize::from(b & 0xf)]));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::of;

    fn k(wallet: &str, body: &str) -> String {
        of(wallet, "chat_completions", false, "m", body.as_bytes()).unwrap()
    }

    #[test]
    fn member_order_and_spacing_do_not_matter() {
        let a = k(
            "w",
            r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"seed":1}"#,
        );
        let b = k(
            "w",
            r#"{ "seed": 1, "messages": [ {"content":"hi", "role":"user"} ], "model":"m" }"#,
        );
        assert_eq!(a, b);
    }

    #[test]
    fn the_wallet_and_what_changes_output_do() {
        let body = r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
        assert_ne!(k("w", body), k("v", body));
        let hotter =
            r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"temperature":0.5}"#;
        assert_ne!(k("w", body), k("w", hotter));
        let labelled = r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"user":"u1","metadata":{"a":"b"}}"#;
        assert_eq!(k("w", body), k("w", labelled));
        let streamed = of("w", "chat_completions", true, "m", body.as_bytes()).unwrap();
        assert_ne!(k("w", body), streamed);
        assert!(of("w", "d", false, "m", b"[1]").is_none());
    }
}
