//! The kit's private services work: a Postgres of a test's own stops, refuses, starts again
//! and answers; a small tmpfs fills up to ENOSPC and takes writes again once freed.

use std::net::TcpStream;
use std::process::Command;
use tollgate_testkit::services::skip;
use tollgate_testkit::{is_enospc, PrivatePostgres, SmallTmpfs};

/// `select 1` through psql, as a client would; `None` when there is no psql.
fn psql_select_1(pg: &PrivatePostgres) -> Option<bool> {
    let out = Command::new("psql")
        .args(["-h", "127.0.0.1", "-p", &pg.port().to_string()])
        .args(["-U", "postgres", "-d", "postgres", "-Atc", "select 1"])
        .env("PGCONNECT_TIMEOUT", "5")
        .output()
        .ok()?;
    Some(out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "1")
}

#[test]
fn private_postgres_stops_and_starts_again() {
    let pg = match PrivatePostgres::try_start() {
        Ok(pg) => pg,
        Err(why) => return skip(&format!("no private Postgres: {why}")),
    };
    assert_eq!(
        pg.url(),
        format!("postgres://postgres@127.0.0.1:{}/postgres", pg.port())
    );
    let Some(answered) = psql_select_1(&pg) else {
        return skip("no psql");
    };
    assert!(answered, "select 1 failed; server log:\n{}", pg.log());

    pg.stop();
    assert!(TcpStream::connect(("127.0.0.1", pg.port())).is_err());
    assert_eq!(psql_select_1(&pg), Some(false));

    pg.start_again();
    assert_eq!(psql_select_1(&pg), Some(true), "server log:\n{}", pg.log());

    // Dropped: no server is left on the port.
    let port = pg.port();
    drop(pg);
    assert!(TcpStream::connect(("127.0.0.1", port)).is_err());
}

#[test]
fn small_tmpfs_fills_up_and_frees() {
    let fs = match SmallTmpfs::mount(256) {
        Ok(fs) => fs,
        Err(why) => return skip(&why),
    };
    let dir = fs.path().to_path_buf();
    fs.try_write("before", 4096)
        .expect("a write on the empty tmpfs");

    let filled = fs.fill().expect("fill");
    assert!(
        filled > 100 * 1024 && filled <= 256 * 1024,
        "filled {filled} bytes"
    );
    let err = fs
        .try_write("full", 4096)
        .expect_err("a write on the full tmpfs");
    assert!(is_enospc(&err), "{err:?}");
    let err = fs
        .try_write("one-byte", 1)
        .expect_err("one byte on the full tmpfs");
    assert!(is_enospc(&err), "{err:?}");

    fs.free();
    fs.try_write("after", 64 * 1024)
        .expect("a write once the filler is gone");

    // Dropped: unmounted and the mount point removed.
    drop(fs);
    assert!(!dir.exists(), "{} left behind", dir.display());
}
