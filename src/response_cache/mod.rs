//! The exact response cache (docs/caching.md, "Response cache"; DESIGN.md: a response cache is scoped to
//! one wallet, opt-in, and a hit is a usage row marked as such).
//!
//! A request opts in with `X-Tollgate-Cache: on` or its body's `tollgate.cache`, or its key's
//! `response_cache` setting does; `Cache-Control: no-store` keeps it out of the cache both ways.
//! Its entry's key ([`key`]) is a hash over the wallet, the front door, `stream`, the model
//! asked and the request's members that change the output, canonicalized. What is kept is the
//! upstream's reply as it came ([`store`]: Redis when configured, else the ledger's table),
//! answered again through the door's own translation by `pipeline::cached`. Identical requests
//! in flight on one instance wait for the first ([`flight`]).

pub mod flight;
pub mod key;
pub mod store;

use tollgate_filters::openai::request::ChatRequest;
use tollgate_filters::GatewayError;

/// What a request said of the cache.
#[derive(Debug, Clone, Copy, Default)]
pub struct Ask<'a> {
    /// `X-Tollgate-Cache`, else the body's `tollgate.cache`; `None`: the key's setting.
    pub asked: Option<bool>,
    /// `Cache-Control: no-store`: neither read nor written.
    pub no_store: bool,
    /// The client's body as its door read it (without the `tollgate` extension), which the
    /// entry's key is over; `None`: a door that never caches.
    pub body: Option<&'a [u8]>,
}

impl<'a> Ask<'a> {
    /// The ask of a request with headers `cache` (`X-Tollgate-Cache`) and `cache_control`,
    /// body extension `ext` and body `body`.
    pub fn of(
        cache: Option<&str>,
        cache_control: Option<&str>,
        ext: Option<bool>,
        body: &'a [u8],
    ) -> Result<Ask<'a>, GatewayError> {
        let header = cache.map(header_value).transpose()?;
        let no_store = cache_control.is_some_and(|v| {
            v.split(',')
                .any(|d| d.trim().eq_ignore_ascii_case("no-store"))
        });
        Ok(Ask {
            asked: header.or(ext),
            no_store,
            body: Some(body),
        })
    }
}

/// The `X-Tollgate-Cache` header's value.
pub fn header_value(v: &str) -> Result<bool, GatewayError> {
    match v.trim().to_ascii_lowercase().as_str() {
        "on" | "true" | "1" => Ok(true),
        "off" | "false" | "0" => Ok(false),
        _ => Err(GatewayError::invalid("X-Tollgate-Cache: must be on or off")),
    }
}

/// What the cache does for one request.
#[derive(Debug, PartialEq, Eq)]
pub enum Decision {
    /// Not opted in: no cache, no header.
    Off,
    /// Opted in, but not cacheable (`no-store`, a sampled request the key's setting alone
    /// opted in, a guest): answered `X-Tollgate-Cache: bypass`.
    Bypass,
    /// Looked up (and filled on a miss) under this key.
    Use(Lookup),
}

/// A request the cache is consulted for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lookup {
    /// The entry's key, hex.
    pub key: String,
    /// The wallet the entry belongs to.
    pub wallet: String,
}

/// Whether and how request `req` of `door` uses the cache: `wallet` is its caller's (`None`:
/// a guest) and `key_setting` its key's `response_cache`. A sampled request
/// (`temperature` above 0) is cached only when it asked itself.
pub fn decide(
    ask: &Ask<'_>,
    req: &ChatRequest<'_>,
    door: &str,
    wallet: Option<&str>,
    key_setting: bool,
) -> Decision {
    let Some(body) = ask.body else {
        return Decision::Off;
    };
    if !ask.asked.unwrap_or(key_setting) {
        return Decision::Off;
    }
    let sampled = req
        .get("temperature")
        .and_then(|t| t.get().parse::<f64>().ok())
        .is_some_and(|t| t > 0.0);
    let Some(wallet) = wallet else {
        return Decision::Bypass;
    };
    if ask.no_store || (sampled && ask.asked != Some(true)) {
        return Decision::Bypass;
    }
    match key::of(wallet, door, req.stream, &req.model, body) {
        Some(key) => Decision::Use(Lookup {
            key,
            wallet: wallet.to_owned(),
        }),
        // A body that is not a JSON object was refused by its door already.
        None => Decision::Bypass,
    }
}

/// A miss being filled: stored once the request is settled, if its upstream's whole reply was
/// recorded. Its leader's place (single flight) is given up when it is stored, or dropped with
/// it.
pub struct Fill {
    pub lookup: Lookup,
    max_bytes: usize,
    /// The whole reply as it came: a JSON body, or a stream that ended cleanly on its first
    /// upstream (never a cut or resumed one); `None` until then, or when it outgrew the cap.
    raw: Option<Vec<u8>>,
    pub leading: Option<flight::Leading>,
}

/// An upstream reply recorded as it comes, up to the entry cap.
pub struct Recording {
    raw: Option<Vec<u8>>,
    max_bytes: usize,
}

impl Recording {
    /// Adds `bytes` of the reply; past the cap nothing is kept.
    pub fn record(&mut self, bytes: &[u8]) {
        if let Some(raw) = &mut self.raw {
            if raw.len() + bytes.len() > self.max_bytes {
                self.raw = None;
            } else {
                raw.extend_from_slice(bytes);
            }
        }
    }
}

impl Fill {
    pub fn new(lookup: Lookup, max_bytes: usize, leading: Option<flight::Leading>) -> Fill {
        Fill {
            lookup,
            max_bytes,
            raw: None,
            leading,
        }
    }

    /// A recording for one attempt's reply.
    pub fn recording(&self) -> Recording {
        Recording {
            raw: Some(Vec::new()),
            max_bytes: self.max_bytes,
        }
    }

    /// The attempt's whole reply was recorded.
    pub fn complete(&mut self, r: Recording) {
        self.raw = r.raw;
    }

    /// The recorded reply, when it is complete and within the cap.
    pub fn take(&mut self) -> Option<Vec<u8>> {
        self.raw.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tollgate_filters::openai::request::parse_chat_request;

    fn decide_on(body: &str, ask: Option<bool>, no_store: bool, setting: bool) -> Decision {
        let req = parse_chat_request(body.as_bytes()).unwrap();
        let a = Ask {
            asked: ask,
            no_store,
            body: Some(body.as_bytes()),
        };
        decide(&a, &req, "chat_completions", Some("acct"), setting)
    }

    const PLAIN: &str = r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
    const SAMPLED: &str =
        r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"temperature":0.7}"#;

    #[test]
    fn a_sampled_request_is_cached_only_when_it_asked() {
        assert!(matches!(
            decide_on(SAMPLED, Some(true), false, false),
            Decision::Use(_)
        ));
        assert_eq!(decide_on(SAMPLED, None, false, true), Decision::Bypass);
        assert!(matches!(
            decide_on(PLAIN, None, false, true),
            Decision::Use(_)
        ));
    }

    #[test]
    fn no_store_and_off_win() {
        assert_eq!(decide_on(PLAIN, Some(true), true, false), Decision::Bypass);
        assert_eq!(decide_on(PLAIN, Some(false), false, true), Decision::Off);
        assert_eq!(decide_on(PLAIN, None, false, false), Decision::Off);
    }

    #[test]
    fn bad_header_values_are_refused_by_name() {
        let e = Ask::of(Some("maybe"), None, None, b"{}").unwrap_err();
        assert!(e.message.contains("X-Tollgate-Cache"), "{}", e.message);
        let a = Ask::of(Some(" ON "), Some("max-age=0, No-Store"), None, b"{}").unwrap();
        assert_eq!((a.asked, a.no_store), (Some(true), true));
    }
}
