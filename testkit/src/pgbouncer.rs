//! Debian's PgBouncer (`/usr/sbin/pgbouncer`, apt package `pgbouncer`) in transaction mode in
//! front of the run's Postgres, on a free port with an ini of its own: what managed Postgres
//! offers as its pooler. Each transaction (and each statement outside one) may run on another
//! server connection, so anything a client leaves on its session (named prepared statements,
//! session advisory locks) is seen by, or lost to, other clients.
//!
//! PgBouncer refuses to run as root: then it runs as the `postgres` system user (`-u`), as
//! the private Postgres clusters do.

use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = "/usr/sbin/pgbouncer";

/// Server connections per database and user: far fewer than the gateways' pools (16 each),
/// so their statements really share server connections.
pub const POOL_SIZE: usize = 4;

/// A running PgBouncer; stopped and its directory removed when dropped.
pub struct PgBouncer {
    child: Child,
    dir: PathBuf,
    port: u16,
    user: String,
    database: String,
}

impl PgBouncer {
    /// Starts PgBouncer in transaction mode in front of `upstream` (a `postgres://user@host:port/db`
    /// URL with trust authentication) and waits until it accepts connections. `Err` says why it
    /// cannot run here (callers `return skip(…)`).
    pub fn start(upstream: &str) -> Result<PgBouncer, String> {
        if !std::path::Path::new(BIN).is_file() {
            return Err(format!("no {BIN} (apt package pgbouncer)"));
        }
        let (user, host, port, database) = parse(upstream)
            .ok_or_else(|| format!("cannot read a user, host, port and database in {upstream}"))?;
        let dir = crate::gateway::temp_dir();
        let listen = crate::gateway::free_port();
        // `auth_type = any`: the client's user name is ignored and the server login is the one
        // named here (the run's Postgres trusts it). extra_float_digits is a startup parameter
        // sqlx may send that PgBouncer 1.18 does not know.
        let ini = format!(
            "[databases]\n{database} = host={host} port={port} dbname={database} user={user}\n\n\
             [pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {listen}\nunix_socket_dir =\n\
             auth_type = any\npool_mode = transaction\ndefault_pool_size = {POOL_SIZE}\n\
             max_client_conn = 1000\nlogfile = {log}\npidfile = {pid}\n\
             ignore_startup_parameters = extra_float_digits\n",
            log = dir.join("pgbouncer.log").display(),
            pid = dir.join("pgbouncer.pid").display(),
        );
        let ini_path = dir.join("pgbouncer.ini");
        std::fs::write(&ini_path, ini).map_err(|e| format!("write the ini: {e}"))?;
        let mut cmd = Command::new(BIN);
        if is_root() {
            // The log and pid files are written by the user it switches to.
            let chown = Command::new("chown")
                .arg("-R")
                .arg("postgres:")
                .arg(&dir)
                .output()
                .map_err(|e| format!("chown: {e}"))?;
            if !chown.status.success() {
                return Err("running as root and cannot hand the directory to `postgres`".into());
            }
            cmd.args(["-u", "postgres"]);
        }
        let child = cmd
            .arg(&ini_path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("start {BIN}: {e}"))?;
        let mut bouncer = PgBouncer {
            child,
            dir,
            port: listen,
            user,
            database,
        };
        let start = Instant::now();
        while TcpStream::connect(("127.0.0.1", listen)).is_err() {
            if let Ok(Some(status)) = bouncer.child.try_wait() {
                return Err(format!("pgbouncer exited with {status}: {}", bouncer.log()));
            }
            if start.elapsed() > Duration::from_secs(10) {
                return Err(format!("pgbouncer did not listen: {}", bouncer.log()));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(bouncer)
    }

    /// The URL clients use: the same database and user, through PgBouncer.
    pub fn url(&self) -> String {
        format!(
            "postgres://{}@127.0.0.1:{}/{}",
            self.user, self.port, self.database
        )
    }

    /// PgBouncer's own log (its errors, and the servers' errors it passes on).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("pgbouncer.log")).unwrap_or_default()
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// (user, host, port, database) of `postgres://user[:password]@host[:port]/database[?…]`.
fn parse(url: &str) -> Option<(String, String, u16, String)> {
    let rest = url
        .strip_prefix("postgres://")
        .or_else(|| url.strip_prefix("postgresql://"))?;
    let (auth, rest) = rest.split_once('@')?;
    let user = auth.split(':').next()?.to_string();
    let (hostport, db) = rest.split_once('/')?;
    let db = db.split('?').next()?.to_string();
    let (host, port) = match hostport.rsplit_once(':') {
        Some((h, p)) => (h.to_string(), p.parse().ok()?),
        None => (hostport.to_string(), 5432),
    };
    (!user.is_empty() && !db.is_empty()).then_some((user, host, port, db))
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}
