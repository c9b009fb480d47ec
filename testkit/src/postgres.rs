//! A Postgres cluster of a test's own (`initdb` + `pg_ctl`), on its own port and temporary
//! directory, for the database failure tests: stop it to see what the gateway does without its
//! database, start it again on the same data and port to see it recover. The shared
//! `TOLLGATE_TEST_DATABASE_URL` server is never touched.
//!
//! Postgres refuses to run as root, and tests and CI run as root: then every server command runs
//! as the `postgres` system user (`runuser`, else `su`) and the directory is handed to that user.

use std::ffi::OsStr;
use std::fs::File;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long the server gets to come up or go down.
const READY_TIMEOUT: Duration = Duration::from_secs(20);

/// A running private Postgres cluster with trust authentication, listening on `127.0.0.1`
/// only; stopped at once and its directory removed when dropped.
pub struct PrivatePostgres {
    dir: PathBuf,
    port: u16,
    bin: PathBuf,
    /// The user the server runs as when the test runs as root.
    as_user: Option<&'static str>,
}

impl PrivatePostgres {
    /// Creates a cluster in a fresh temporary directory on a free port, starts it and waits
    /// until it accepts connections; `None` when the Postgres binaries are missing or it does
    /// not come up within 20 s (callers `return skip("…")`). [`PrivatePostgres::try_start`]
    /// says why.
    pub fn start() -> Option<PrivatePostgres> {
        Self::try_start().ok()
    }

    /// [`PrivatePostgres::start`], with the reason when it cannot run here.
    pub fn try_start() -> Result<PrivatePostgres, String> {
        let bin = find_bin_dir().ok_or("no initdb and pg_ctl on PATH or in /usr/lib/postgresql")?;
        let as_user = if is_root() {
            if !Command::new("id")
                .args(["-u", "postgres"])
                .output()
                .is_ok_and(|o| o.status.success())
            {
                return Err(
                    "running as root and there is no `postgres` user to run Postgres".into(),
                );
            }
            Some("postgres")
        } else {
            None
        };
        // Built before anything runs: from here on, dropping it on the way out stops whatever
        // was started and removes the directory.
        let pg = PrivatePostgres {
            dir: crate::gateway::temp_dir(),
            port: crate::gateway::free_port(),
            bin,
            as_user,
        };
        if let Some(user) = as_user {
            let chown = Command::new("chown")
                .arg(format!("{user}:"))
                .arg(&pg.dir)
                .output()
                .map_err(|e| format!("chown: {e}"))?;
            if !chown.status.success() {
                return Err(format!(
                    "chown {user}: {}: {}",
                    pg.dir.display(),
                    String::from_utf8_lossy(&chown.stderr).trim()
                ));
            }
        }
        let data = pg.data_dir();
        let initdb = pg.command(
            "initdb",
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "-U".as_ref(),
                "postgres".as_ref(),
                "--auth=trust".as_ref(),
                "--no-sync".as_ref(),
                "--locale=C".as_ref(),
                "--encoding=UTF8".as_ref(),
            ],
        );
        pg.run(initdb, Duration::from_secs(120))
            .map_err(|e| format!("initdb failed: {e}"))?;
        let conf = format!(
            "\n# PrivatePostgres\nport = {}\nlisten_addresses = '127.0.0.1'\n\
             unix_socket_directories = '{}'\nfsync = off\nsynchronous_commit = off\n\
             full_page_writes = off\nshared_buffers = 16MB\nmax_connections = 50\n",
            pg.port,
            pg.dir.display()
        );
        let conf_path = pg.data_dir().join("postgresql.conf");
        let mut text = std::fs::read_to_string(&conf_path)
            .map_err(|e| format!("{}: {e}", conf_path.display()))?;
        text.push_str(&conf);
        std::fs::write(&conf_path, text).map_err(|e| format!("{}: {e}", conf_path.display()))?;
        pg.try_start_again()?;
        Ok(pg)
    }

    /// `postgres://postgres@127.0.0.1:PORT/postgres` (trust authentication, no password).
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// The port it listens on, on `127.0.0.1`.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's log so far, to show when a test fails.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    /// Stops the server (`pg_ctl stop -m fast`: connections are cut, nothing is lost) and waits
    /// until its port refuses connections. Panics when it does not go down.
    pub fn stop(&self) {
        self.pg_ctl_stop("fast").unwrap_or_else(|e| panic!("{e}"));
        let t = Instant::now();
        while TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
            assert!(
                t.elapsed() < READY_TIMEOUT,
                "private Postgres on port {} still accepts connections after pg_ctl stop",
                self.port
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Starts the stopped server again on the same data and port and waits until it accepts
    /// connections. Panics, with the server's log, when it does not come up within 20 s.
    pub fn start_again(&self) {
        self.try_start_again().unwrap_or_else(|e| panic!("{e}"));
    }

    fn try_start_again(&self) -> Result<(), String> {
        let (data, log) = (self.data_dir(), self.dir.join("server.log"));
        let secs = READY_TIMEOUT.as_secs().to_string();
        let start = self.command(
            "pg_ctl",
            &[
                "start".as_ref(),
                "-D".as_ref(),
                data.as_os_str(),
                "-l".as_ref(),
                log.as_os_str(),
                "-w".as_ref(),
                "-t".as_ref(),
                secs.as_ref(),
            ],
        );
        self.run(start, READY_TIMEOUT + Duration::from_secs(5))
            .map_err(|e| format!("pg_ctl start failed: {e}\n{}", self.log()))?;
        let t = Instant::now();
        while !self.accepts() {
            if t.elapsed() > READY_TIMEOUT {
                return Err(format!(
                    "private Postgres on port {} did not accept connections within {:?}\n{}",
                    self.port,
                    READY_TIMEOUT,
                    self.log()
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(())
    }

    /// Whether the server takes connections: the port answers, and `pg_isready` says so when
    /// there is one.
    fn accepts(&self) -> bool {
        if TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            return false;
        }
        let isready = [self.bin.join("pg_isready"), PathBuf::from("pg_isready")];
        for bin in isready {
            match Command::new(&bin)
                .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
                .args(["-U", "postgres", "-d", "postgres", "-t", "2"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
            {
                Ok(s) => return s.success(),
                Err(_) => continue,
            }
        }
        true
    }

    fn pg_ctl_stop(&self, mode: &str) -> Result<(), String> {
        let data = self.data_dir();
        let secs = READY_TIMEOUT.as_secs().to_string();
        let stop = self.command(
            "pg_ctl",
            &[
                "stop".as_ref(),
                "-D".as_ref(),
                data.as_os_str(),
                "-m".as_ref(),
                mode.as_ref(),
                "-w".as_ref(),
                "-t".as_ref(),
                secs.as_ref(),
            ],
        );
        self.run(stop, READY_TIMEOUT + Duration::from_secs(5))
            .map_err(|e| format!("pg_ctl stop -m {mode} failed: {e}"))
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// One of the cluster's programs with its arguments, run as the server's user, in the
    /// cluster's directory (that user may not be able to enter the test's own).
    fn command(&self, program: &str, args: &[&OsStr]) -> Command {
        let program = self.bin.join(program);
        let mut cmd = match self.as_user {
            Some(user) if on_path("runuser") => {
                let mut c = Command::new("runuser");
                c.args(["-u", user, "--"]).arg(program).args(args);
                c
            }
            // No runuser: `su USER -s /bin/sh -c 'exec PROGRAM ARGS…'`, quoted for the shell.
            Some(user) => {
                let quote = |s: &OsStr| format!("'{}'", s.to_string_lossy().replace('\'', "'\\''"));
                let mut line = format!("exec {}", quote(program.as_os_str()));
                for a in args {
                    line.push(' ');
                    line.push_str(&quote(a));
                }
                let mut c = Command::new("su");
                c.args([user, "-s", "/bin/sh", "-c", &line]);
                c
            }
            None => {
                let mut c = Command::new(program);
                c.args(args);
                c
            }
        };
        cmd.current_dir(&self.dir).stdin(Stdio::null());
        cmd
    }

    /// Runs `cmd` to its end with its output in a file (never a pipe: the server `pg_ctl`
    /// leaves behind must not hold it open), killing it after `timeout`.
    fn run(&self, mut cmd: Command, timeout: Duration) -> Result<(), String> {
        let out_path = self.dir.join("command.out");
        let out = File::create(&out_path).map_err(|e| format!("{}: {e}", out_path.display()))?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        cmd.stdout(out).stderr(err);
        let mut child = cmd.spawn().map_err(|e| format!("{cmd:?}: {e}"))?;
        let t = Instant::now();
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if t.elapsed() > timeout => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(format!("{cmd:?} still running after {timeout:?}"));
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
                Err(e) => return Err(e.to_string()),
            }
        };
        let output = std::fs::read_to_string(&out_path).unwrap_or_default();
        if status.success() {
            Ok(())
        } else {
            Err(format!("{status}: {}", output.trim()))
        }
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        let data = self.data_dir();
        if data.exists() {
            let _ = self.pg_ctl_stop("immediate");
            // pg_ctl could not stop it (or never knew of it): kill the postmaster itself; its
            // backends follow it out.
            if let Some(pid) = std::fs::read_to_string(data.join("postmaster.pid"))
                .ok()
                .and_then(|s| s.lines().next()?.trim().parse::<u32>().ok())
            {
                let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
                if comm.trim() == "postgres" || comm.trim() == "postmaster" {
                    let _ = Command::new("kill")
                        .args(["-KILL", &pid.to_string()])
                        .status();
                    let t = Instant::now();
                    while Path::new(&format!("/proc/{pid}")).exists()
                        && t.elapsed() < Duration::from_secs(5)
                    {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                }
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
}

/// The directory holding `initdb` and `pg_ctl`: the one on `PATH` (symlinks followed, so
/// `pg_isready` is found beside them), else the newest `/usr/lib/postgresql/*/bin`.
fn find_bin_dir() -> Option<PathBuf> {
    let has_both = |d: &Path| d.join("initdb").is_file() && d.join("pg_ctl").is_file();
    let on_path = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p).find_map(|d| {
            let initdb = std::fs::canonicalize(d.join("initdb")).ok()?;
            let dir = initdb.parent()?.to_path_buf();
            has_both(&dir).then_some(dir)
        })
    });
    on_path.or_else(|| {
        let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
            .ok()?
            .flatten()
            .filter_map(|e| {
                let v = e.file_name().to_string_lossy().parse::<u32>().ok()?;
                let bin = e.path().join("bin");
                has_both(&bin).then_some((v, bin))
            })
            .collect();
        versions.sort();
        versions.pop().map(|(_, bin)| bin)
    })
}
