//! A customer's webhook receiver: a real HTTP server that records every delivery (headers and
//! body) and answers 200, or 503 while told to, or is down altogether (its port closed, its
//! connections dropped) until brought up again on the same port.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::openai::{read_request, write_json, Recorded};

/// One delivery as the receiver got it, and the status it answered.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub request: Recorded,
    pub answered: u16,
}

impl Delivery {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.request
            .headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.request.body).unwrap_or(Value::Null)
    }

    /// `Tollgate-Event-Id`.
    pub fn event_id(&self) -> String {
        self.header("tollgate-event-id").unwrap_or("").to_owned()
    }
}

#[derive(Default)]
struct State {
    got: Mutex<Vec<Delivery>>,
    status: Mutex<u16>,
}

pub struct Receiver {
    pub addr: SocketAddr,
    state: Arc<State>,
    server: Mutex<Option<JoinHandle<()>>>,
}

impl Receiver {
    /// Up on a port of its own, answering 200.
    pub async fn start() -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(State {
            status: Mutex::new(200),
            ..State::default()
        });
        let r = Receiver {
            addr,
            state,
            server: Mutex::new(None),
        };
        r.serve(listener);
        r
    }

    fn serve(&self, listener: TcpListener) {
        let st = self.state.clone();
        let task = tokio::spawn(async move {
            let mut conns = tokio::task::JoinSet::new();
            while let Ok((mut sock, _)) = listener.accept().await {
                let st = st.clone();
                conns.spawn(async move {
                    let mut buf = Vec::new();
                    while let Some(req) = read_request(&mut sock, &mut buf).await {
                        let status = *st.status.lock().unwrap();
                        st.got.lock().unwrap().push(Delivery {
                            request: req,
                            answered: status,
                        });
                        if write_json(&mut sock, status, b"{}").await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        *self.server.lock().unwrap() = Some(task);
    }

    /// The URL of `path` on it.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// What it answers from now on (200, 503, …).
    pub fn answer(&self, status: u16) {
        *self.state.status.lock().unwrap() = status;
    }

    /// Its port closed and its open connections dropped.
    pub fn down(&self) {
        if let Some(t) = self.server.lock().unwrap().take() {
            t.abort();
        }
    }

    /// Listening again on the same port.
    pub async fn up(&self) {
        let start = Instant::now();
        let listener = loop {
            match TcpListener::bind(self.addr).await {
                Ok(l) => break l,
                Err(e) if start.elapsed() < Duration::from_secs(10) => {
                    let _ = e;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("the receiver could not listen on {} again: {e}", self.addr),
            }
        };
        self.serve(listener);
    }

    /// Every request it got, in order.
    pub fn all(&self) -> Vec<Delivery> {
        self.state.got.lock().unwrap().clone()
    }

    /// The deliveries it answered with a 2xx, in order.
    pub fn accepted(&self) -> Vec<Delivery> {
        self.all()
            .into_iter()
            .filter(|d| (200..300).contains(&d.answered))
            .collect()
    }

    /// Waits until it accepted deliveries for which `done` holds, or panics after `within`.
    pub async fn wait_until(
        &self,
        within: Duration,
        what: &str,
        done: impl Fn(&[Delivery]) -> bool,
    ) -> Vec<Delivery> {
        let start = Instant::now();
        loop {
            let got = self.accepted();
            if done(&got) {
                return got;
            }
            assert!(
                start.elapsed() < within,
                "the receiver did not get {what} within {within:?}; it got: {:?}",
                got.iter().map(|d| d.json()).collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits for an accepted delivery of `event_type` and returns it.
    pub async fn wait_for(&self, event_type: &str, within: Duration) -> Delivery {
        let got = self
            .wait_until(within, event_type, |d| {
                d.iter().any(|d| d.json()["type"] == event_type)
            })
            .await;
        got.into_iter()
            .find(|d| d.json()["type"] == event_type)
            .unwrap()
    }

    /// The accepted deliveries of `event_type`.
    pub fn of_type(&self, event_type: &str) -> Vec<Delivery> {
        self.accepted()
            .into_iter()
            .filter(|d| d.json()["type"] == event_type)
            .collect()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.down();
    }
}
