//! A `redis-server` of a test's own, on its own port, for the Redis failure tests: kill it to
//! see what the gateway does without Redis, start another on the same port to see it recover.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running private `redis-server`; killed when dropped or [`PrivateRedis::kill`]ed.
pub struct PrivateRedis {
    child: Child,
}

impl PrivateRedis {
    /// Starts `redis-server` on `127.0.0.1:port` without persistence and waits until it
    /// accepts connections; `None` when there is no `redis-server` or it does not come up.
    pub fn start(port: u16) -> Option<PrivateRedis> {
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        // Dropped on the way out if it never answers, so no stray server is left behind.
        let redis = PrivateRedis { child };
        let t = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if t.elapsed() > Duration::from_secs(5) {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Some(redis)
    }

    /// Kills the server at once (what a crashed or unreachable Redis looks like).
    pub fn kill(self) {}
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
