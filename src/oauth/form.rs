//! `application/x-www-form-urlencoded`: the OAuth token and revocation bodies and the
//! authorization request's query (read), and the redirect back to a client (written).

use std::collections::HashMap;

use super::error::OAuthError;

/// The pairs of a form or query string, percent-decoded (`+` is a space). A parameter sent
/// twice is refused (RFC 6749 3.1: "parameters MUST NOT be included more than once").
pub fn parse(text: &str) -> Result<HashMap<String, String>, OAuthError> {
    let mut out = HashMap::new();
    for pair in text.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let k = decode(k).ok_or_else(|| OAuthError::request("malformed percent-encoding"))?;
        let v = decode(v).ok_or_else(|| OAuthError::request("malformed percent-encoding"))?;
        if out.insert(k.clone(), v).is_some() {
            return Err(OAuthError::request(format!("`{k}` is sent more than once")));
        }
    }
    Ok(out)
}

fn decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 2;
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

/// Percent-encodes everything but RFC 3986's unreserved characters.
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `uri` with `pairs` added to its query (a registered redirect URI may have one already).
pub fn with_query(uri: &str, pairs: &[(&str, &str)]) -> String {
    let mut out = uri.to_owned();
    let mut sep = if uri.contains('?') { '&' } else { '?' };
    for (k, v) in pairs {
        out.push(sep);
        out.push_str(&encode(k));
        out.push('=');
        out.push_str(&encode(v));
        sep = '&';
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_are_decoded_and_repeats_refused() {
        let f = parse("a=1&redirect_uri=http%3A%2F%2Flocalhost%3A3%2Fcb&s=x+y").unwrap();
        assert_eq!(f["redirect_uri"], "http://localhost:3/cb");
        assert_eq!(f["s"], "x y");
        assert!(parse("a=1&a=2").is_err());
        assert!(parse("a=%zz").is_err());
        assert!(parse("a=%4").is_err());
        assert_eq!(parse("").unwrap().len(), 0);
    }

    #[test]
    fn redirects_keep_an_existing_query_and_encode_values() {
        assert_eq!(
            with_query("http://l/cb?x=1", &[("code", "a b"), ("state", "s&t")]),
            "http://l/cb?x=1&code=a%20b&state=s%26t"
        );
        assert_eq!(with_query("http://l/cb", &[("c", "1")]), "http://l/cb?c=1");
    }
}
