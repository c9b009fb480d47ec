//! A fake Stripe API (the parts the gateway calls: Checkout Sessions, their line items, Billing
//! Portal sessions) that records what it received and can fail or hang, plus what Stripe
//! sends back: webhook events, signed with Stripe's scheme by code of our own here (the
//! official `stripe` SDK's verifier cross-checks it in `tests/sdk_stripe.rs`).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::openai::{read_request, Recorded};

/// The secret key the fake accepts; gateways started by the testkit get it in
/// `TOLLGATE_TEST_STRIPE_KEY`.
pub const FAKE_STRIPE_KEY: &str = "sk_test_tollgate_fake_0123456789";
/// The webhook signing secrets a test gateway holds (two: a rotation in progress), in
/// `TOLLGATE_TEST_STRIPE_WEBHOOK_SECRET`.
pub const WEBHOOK_SECRET: &str = "whsec_test_current_0123456789abcdef";
pub const WEBHOOK_SECRET_OLD: &str = "whsec_test_previous_0123456789abcdef";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StripeMode {
    Ok,
    /// Every call answers 500 with a Stripe error body.
    Fail,
    /// Every call is read and never answered.
    Hang,
}

#[derive(Default)]
struct State {
    mode: Mutex<Option<StripeMode>>,
    requests: Mutex<Vec<Recorded>>,
    /// Checkout Session id → its price, for line items.
    sessions: Mutex<HashMap<String, String>>,
    /// Checkout Session id → the session as created (for `GET` and the payment page).
    created: Mutex<HashMap<String, Value>>,
    /// Idempotency-Key → the session made with it.
    idempotent: Mutex<HashMap<String, Value>>,
}

#[derive(Clone)]
pub struct FakeStripe {
    pub addr: SocketAddr,
    state: Arc<State>,
}

/// `application/x-www-form-urlencoded` pairs, decoded.
pub fn form_pairs(body: &[u8]) -> Vec<(String, String)> {
    let text = String::from_utf8_lossy(body);
    text.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect()
}

fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => {
                let h = std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("");
                out.push(u8::from_str_radix(h, 16).unwrap_or(b'?'));
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
    String::from_utf8_lossy(&out).into_owned()
}

impl FakeStripe {
    pub async fn start() -> FakeStripe {
        let state = Arc::new(State::default());
        let addr = crate::accept::serve_fake("127.0.0.1:0", state.clone(), serve).await;
        FakeStripe { addr, state }
    }

    /// `stripe_api_base` for the gateway's `[billing]`.
    pub fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn set_mode(&self, m: StripeMode) {
        *self.state.mode.lock().unwrap() = Some(m);
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.state.requests.lock().unwrap().clone()
    }

    /// The form fields of the last Checkout Session created.
    pub fn last_checkout(&self) -> Vec<(String, String)> {
        self.requests()
            .iter()
            .rev()
            .find(|r| r.method == "POST" && r.path == "/v1/checkout/sessions")
            .map(|r| form_pairs(&r.body))
            .unwrap_or_default()
    }

    /// A session created elsewhere (a payment link): its line items name `price`.
    pub fn add_session(&self, id: &str, price: &str) {
        self.state
            .sessions
            .lock()
            .unwrap()
            .insert(id.to_owned(), price.to_owned());
    }
}

async fn reply(sock: &mut TcpStream, status: u16, body: &Value) -> std::io::Result<()> {
    let text = body.to_string();
    let head = format!(
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        text.len()
    );
    sock.write_all(head.as_bytes()).await?;
    sock.write_all(text.as_bytes()).await
}

fn field<'a>(pairs: &'a [(String, String)], k: &str) -> Option<&'a str> {
    pairs.iter().find(|(a, _)| a == k).map(|(_, v)| v.as_str())
}

async fn serve(mut sock: TcpStream, st: Arc<State>) -> std::io::Result<()> {
    let mut buf = Vec::new();
    while let Some(req) = read_request(&mut sock, &mut buf).await {
        st.requests.lock().unwrap().push(req.clone());
        let mode = st.mode.lock().unwrap().unwrap_or(StripeMode::Ok);
        match mode {
            StripeMode::Hang => {
                tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
                return Ok(());
            }
            StripeMode::Fail => {
                let e =
                    json!({"error": {"type": "api_error", "message": "fake Stripe is failing"}});
                reply(&mut sock, 500, &e).await?;
                continue;
            }
            StripeMode::Ok => {}
        }
        if let Some(id) = req.path.strip_prefix("/c/pay/") {
            // The hosted payment page a browser is sent to: the test pays by delivering the
            // signed webhook itself, then follows the success link.
            let s = st
                .created
                .lock()
                .unwrap()
                .get(id)
                .cloned()
                .unwrap_or(Value::Null);
            let back = s["success_url"].as_str().unwrap_or("/").to_owned();
            let html = format!("<!doctype html><html><head><meta charset=utf-8><title>Fake Checkout</title><link rel=icon href=\"data:,\"></head><body><h1>Fake Checkout</h1><p id=session>{id}</p><a id=paid href=\"{back}\">Back to the merchant</a></body></html>");
            let head = format!("HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\n\r\n", html.len());
            sock.write_all(head.as_bytes()).await?;
            sock.write_all(html.as_bytes()).await?;
            continue;
        }
        if req.header("authorization") != Some(&format!("Bearer {FAKE_STRIPE_KEY}")) {
            let e = json!({"error": {"type": "invalid_request_error", "message": "Invalid API Key provided"}});
            reply(&mut sock, 401, &e).await?;
            continue;
        }
        let pairs = form_pairs(&req.body);
        let path = req.path.split('?').next().unwrap_or("").to_owned();
        let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
        match (req.method.as_str(), segs.as_slice()) {
            ("POST", ["v1", "checkout", "sessions"]) => {
                let key = req.header("idempotency-key").map(str::to_owned);
                if let Some(prev) = key
                    .as_ref()
                    .and_then(|k| st.idempotent.lock().unwrap().get(k).cloned())
                {
                    reply(&mut sock, 200, &prev).await?;
                    continue;
                }
                let n = st.sessions.lock().unwrap().len() + 1;
                let id = format!("cs_test_{n}_{}", nanos());
                let price = field(&pairs, "line_items[0][price]")
                    .unwrap_or("")
                    .to_owned();
                st.sessions.lock().unwrap().insert(id.clone(), price);
                let metadata: serde_json::Map<String, Value> = pairs
                    .iter()
                    .filter_map(|(k, v)| {
                        let name = k.strip_prefix("metadata[")?.strip_suffix(']')?;
                        Some((name.to_owned(), Value::from(v.as_str())))
                    })
                    .collect();
                let host = req.header("host").unwrap_or("127.0.0.1").to_owned();
                let s = json!({"id": id, "object": "checkout.session", "url": format!("http://{host}/c/pay/{id}"),
                               "mode": field(&pairs, "mode"), "client_reference_id": field(&pairs, "client_reference_id"),
                               "customer_email": field(&pairs, "customer_email"), "metadata": metadata,
                               "success_url": field(&pairs, "success_url"), "cancel_url": field(&pairs, "cancel_url"),
                               "payment_status": "unpaid", "status": "open"});
                st.created.lock().unwrap().insert(id.clone(), s.clone());
                if let Some(k) = key {
                    st.idempotent.lock().unwrap().insert(k, s.clone());
                }
                reply(&mut sock, 200, &s).await?;
            }
            ("GET", ["v1", "checkout", "sessions", id, "line_items"]) => {
                let price = st.sessions.lock().unwrap().get(*id).cloned();
                match price {
                    Some(p) => {
                        let v = json!({"object": "list", "data": [{"object": "item", "price": {"id": p}, "quantity": 1}], "has_more": false});
                        reply(&mut sock, 200, &v).await?;
                    }
                    None => {
                        let e = json!({"error": {"type": "invalid_request_error", "message": format!("No such checkout.session: '{id}'")}});
                        reply(&mut sock, 404, &e).await?;
                    }
                }
            }
            ("GET", ["v1", "checkout", "sessions", id]) => {
                let found = st.created.lock().unwrap().get(*id).cloned();
                match found {
                    Some(s) => reply(&mut sock, 200, &s).await?,
                    None => {
                        let e = json!({"error": {"type": "invalid_request_error", "message": format!("No such checkout.session: '{id}'")}});
                        reply(&mut sock, 404, &e).await?;
                    }
                }
            }
            ("POST", ["v1", "billing_portal", "sessions"]) => {
                let customer = field(&pairs, "customer").unwrap_or("");
                let v = json!({"id": format!("bps_{}", nanos()), "object": "billing_portal.session", "customer": customer,
                               "url": format!("https://billing.stripe.test/p/session/{customer}")});
                reply(&mut sock, 200, &v).await?;
            }
            _ => {
                let e = json!({"error": {"type": "invalid_request_error", "message": "Unrecognized request URL"}});
                reply(&mut sock, 404, &e).await?;
            }
        }
    }
    Ok(())
}

fn nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

pub fn now_secs() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// The `Stripe-Signature` header for `payload` signed with `secret` at `t` (Unix seconds).
pub fn sign(payload: &[u8], secret: &str, t: i64) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("hmac key");
    mac.update(format!("{t}.").as_bytes());
    mac.update(payload);
    let hex: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("t={t},v1={hex}")
}

/// A whole event around `object`.
pub fn event(id: &str, ty: &str, object: Value) -> Value {
    json!({"id": id, "object": "event", "type": ty, "api_version": "2024-06-20", "created": now_secs(),
           "livemode": false, "data": {"object": object}})
}

/// A fresh event id.
pub fn event_id() -> String {
    format!("evt_test_{}", nanos())
}
