//! Providers that move: an endpoint's name resolved again in the background, followed within
//! `dns_refresh_secs` without a reload; a name unresolvable at start served once it resolves;
//! every address of a name taking traffic, and one going dark failed over to the other.
//!
//! The names live in the real `/etc/hosts` (the system resolver reads it on every lookup), one
//! test-unique name per test, removed when the test ends.

use std::time::{Duration, Instant};

use serde_json::json;
use tollgate_testkit::*;

/// Lines of `/etc/hosts` for one test's name, rewritten in place (the file may be a bind
/// mount that a rename would not replace) and removed on drop.
struct HostsName {
    name: String,
}

static HOSTS: std::sync::Mutex<()> = std::sync::Mutex::new(());
const HOSTS_FILE: &str = "/etc/hosts";

impl HostsName {
    fn new(tag: &str) -> HostsName {
        let name = format!("tg-{tag}-{}.test", std::process::id());
        let h = HostsName { name };
        h.set(&[]);
        h
    }

    /// Points the name at these addresses (none: the name does not resolve).
    fn set(&self, addrs: &[&str]) {
        let _g = HOSTS.lock().unwrap_or_else(|p| p.into_inner());
        let text = std::fs::read_to_string(HOSTS_FILE).expect("read /etc/hosts");
        let marker = format!(" {} # tollgate test", self.name);
        let mut lines: Vec<String> = text
            .lines()
            .filter(|l| !l.ends_with(&marker))
            .map(str::to_owned)
            .collect();
        for a in addrs {
            lines.push(format!("{a}{marker}"));
        }
        std::fs::write(HOSTS_FILE, lines.join("\n") + "\n").expect(
            "this test edits /etc/hosts (run as root, as CI does) to move a provider's name",
        );
    }
}

impl Drop for HostsName {
    fn drop(&mut self) {
        self.set(&[]);
    }
}

fn config(name: &str, port: u16, health: &str) -> String {
    format!(
        "{FAST_TIMEOUTS}[[providers]]\nname = \"p\"\nendpoints = [\"http://{name}:{port}\"]\n{health}\n{}",
        model("m", "p", "economy", "")
    )
}

fn opts() -> Opts {
    Opts {
        server_extra: "dns_refresh_secs = 1".into(),
        ..Opts::default()
    }
}

/// Two fakes on one port, on 127.0.0.1 and 127.0.0.2: where the name points decides which one
/// answers.
async fn two_fakes() -> (u16, FakeOpenAi, FakeOpenAi) {
    let port = free_port();
    let a = FakeOpenAi::builder("a")
        .listen(&format!("127.0.0.1:{port}"))
        .start()
        .await;
    let b = FakeOpenAi::builder("b")
        .listen(&format!("127.0.0.2:{port}"))
        .start()
        .await;
    (port, a, b)
}

async fn chat(gw: &Gateway) -> Response {
    gw.chat(json!({"model": "m", "messages": user("hi")})).await
}

#[tokio::test]
async fn a_name_moved_to_another_address_is_followed_without_a_reload() {
    let (port, a, b) = two_fakes().await;
    let host = HostsName::new("moved");
    host.set(&["127.0.0.1"]);
    let gw = Gateway::start_opts(tollgate_bin!(), &config(&host.name, port, ""), opts()).await;
    let r = chat(&gw).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!((a.chat_count(), b.chat_count()), (1, 0));

    host.set(&["127.0.0.2"]);
    let moved = Instant::now();
    let mut followed = None;
    while moved.elapsed() < Duration::from_secs(6) {
        let r = chat(&gw).await;
        assert_eq!(r.status, 200, "served throughout the move: {}", r.text());
        if b.chat_count() > 0 {
            followed = Some(moved.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let followed = followed.expect("the new address took traffic within 6 s");
    // dns_refresh_secs = 1, and the service looks every 250 ms.
    assert!(
        followed < Duration::from_millis(2500),
        "followed after {followed:?}"
    );
    let before = a.chat_count();
    for _ in 0..5 {
        assert_eq!(chat(&gw).await.status, 200);
    }
    assert_eq!(
        a.chat_count(),
        before,
        "the old address takes no more traffic"
    );
    assert!(
        gw.log().contains("endpoint addresses changed"),
        "{}",
        gw.log()
    );
    assert!(
        gw.metric("tollgate_dns_resolutions_total{provider=\"p\",result=\"changed\"}")
            .await
            >= 1.0
    );
}

#[tokio::test]
async fn a_name_unresolvable_at_start_serves_once_it_resolves() {
    let (port, a, _b) = two_fakes().await;
    let host = HostsName::new("late");
    let gw = Gateway::start_opts(
        tollgate_bin!(),
        &config(
            &host.name,
            port,
            "[providers.health_check]\ninterval_ms = 200\n",
        ),
        opts(),
    )
    .await;
    let r = chat(&gw).await;
    assert_ne!(r.status, 200, "nothing to serve it yet");
    assert!(r.status >= 500, "{} {}", r.status, r.text());
    assert!(gw.log().contains("cannot resolve"), "{}", gw.log());
    // Tried again, and counted, while it does not resolve.
    let failed = "tollgate_dns_resolutions_total{provider=\"p\",result=\"failed\"}";
    let start = Instant::now();
    while gw.metric(failed).await < 2.0 {
        assert!(start.elapsed() < Duration::from_secs(8), "no retry counted");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    host.set(&["127.0.0.1"]);
    let start = Instant::now();
    loop {
        let r = chat(&gw).await;
        if r.status == 200 {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "still {} after the name resolves: {}",
            r.status,
            r.text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(a.chat_count() >= 1);
    assert!(
        gw.log().contains("every endpoint name resolves again"),
        "{}",
        gw.log()
    );
}

#[tokio::test]
async fn both_addresses_of_a_name_take_traffic_and_one_going_dark_fails_over() {
    let (port, a, b) = two_fakes().await;
    let host = HostsName::new("two");
    host.set(&["127.0.0.1", "127.0.0.2"]);
    let gw = Gateway::start_opts(tollgate_bin!(), &config(&host.name, port, ""), opts()).await;
    for _ in 0..10 {
        let r = chat(&gw).await;
        assert_eq!(r.status, 200, "{}", r.text());
    }
    assert!(
        a.chat_count() >= 3 && b.chat_count() >= 3,
        "spread: {} / {}",
        a.chat_count(),
        b.chat_count()
    );

    b.set_mode(Mode::Status(503));
    let a_before = a.chat_count();
    for _ in 0..10 {
        let r = chat(&gw).await;
        assert_eq!(
            r.status,
            200,
            "failed over to the other address: {}",
            r.text()
        );
    }
    assert_eq!(
        a.chat_count(),
        a_before + 10,
        "every request answered by the address alive"
    );
}
