//! The services a run uses: Postgres and Redis when `TOLLGATE_TEST_DATABASE_URL` and
//! `TOLLGATE_TEST_REDIS_URL` name them, else SQLite and in-process counters; with
//! `TOLLGATE_TEST_REQUIRE_SERVICES=1` (CI) a missing one is a failure, never a quiet fallback.

use std::io::Write;
use std::path::Path;

/// Whether this run must have every service (`TOLLGATE_TEST_REQUIRE_SERVICES=1`).
pub fn services_required() -> bool {
    std::env::var("TOLLGATE_TEST_REQUIRE_SERVICES").is_ok_and(|v| v == "1")
}

/// The database every test of this run uses: Postgres when `TOLLGATE_TEST_DATABASE_URL` is
/// set, else a SQLite file under `dir`.
pub fn database_url(dir: &Path) -> String {
    match std::env::var("TOLLGATE_TEST_DATABASE_URL") {
        Ok(u) if !u.is_empty() => u,
        _ => {
            assert!(
                !services_required(),
                "TOLLGATE_TEST_REQUIRE_SERVICES=1 but TOLLGATE_TEST_DATABASE_URL is not set"
            );
            format!("sqlite://{}/ledger.db", dir.display())
        }
    }
}

/// `TOLLGATE_TEST_POOLER_URL`: the run's Postgres (`TOLLGATE_TEST_DATABASE_URL`) through a
/// transaction-mode pooler (CI's PgBouncer pass). Gateways then reach their ledger through it,
/// with `postgres_pooler = "transaction"`; the tests' own reads of the books go straight to
/// Postgres ([`crate::gateway::Gateway::config_db`]).
pub fn pooler_url() -> Option<String> {
    std::env::var("TOLLGATE_TEST_POOLER_URL")
        .ok()
        .filter(|u| !u.is_empty())
}

/// `TOLLGATE_TEST_REDIS_URL`, or `None` (in-process counters).
pub fn redis_url() -> Option<String> {
    match std::env::var("TOLLGATE_TEST_REDIS_URL") {
        Ok(u) if !u.is_empty() => Some(u),
        _ => {
            assert!(
                !services_required(),
                "TOLLGATE_TEST_REQUIRE_SERVICES=1 but TOLLGATE_TEST_REDIS_URL is not set"
            );
            None
        }
    }
}

/// Reports a test that cannot run here (a service or the SDK is missing): `SKIPPED: <why>` on
/// stderr, and a failure when `TOLLGATE_TEST_REQUIRE_SERVICES=1`. Call it as
/// `return skip("…");`.
///
/// The line is written to stderr directly: the test harness captures `eprintln!` and shows it
/// only for failures, so a skipped test would otherwise look like a passed one.
pub fn skip(why: &str) {
    assert!(
        !services_required(),
        "TOLLGATE_TEST_REQUIRE_SERVICES=1 but this test cannot run: {why}"
    );
    let _ = writeln!(std::io::stderr(), "SKIPPED: {why}");
}

/// A Python with the `mcp` 2.x SDK (2026-07-28 and both client modes): `TOLLGATE_TEST_PYTHON_MCP2`,
/// then the repo's `.venv-mcp2` (`./dev test` makes it; 1.x and 2.x cannot share one venv).
pub fn python_mcp2() -> Option<String> {
    let venv = concat!(env!("CARGO_MANIFEST_DIR"), "/../.venv-mcp2/bin/python").to_string();
    [std::env::var("TOLLGATE_TEST_PYTHON_MCP2").ok(), Some(venv)]
        .into_iter()
        .flatten()
        .find(|py| {
            std::process::Command::new(py)
                .args([
                    "-c",
                    "from mcp import Client; from mcp.server import MCPServer",
                ])
                .output()
                .is_ok_and(|o| o.status.success())
        })
}

/// A Python that can run `import_check` (e.g. `import openai, anthropic`) for the SDK
/// interoperability tests: `TOLLGATE_TEST_PYTHON`, then the repo's `.venv`, then `python3`.
pub fn python_with(import_check: &str) -> Option<String> {
    let venv = concat!(env!("CARGO_MANIFEST_DIR"), "/../.venv/bin/python").to_string();
    let candidates = [
        std::env::var("TOLLGATE_TEST_PYTHON").ok(),
        Some(venv),
        Some("python3".to_string()),
    ];
    candidates.into_iter().flatten().find(|py| {
        std::process::Command::new(py)
            .args(["-c", import_check])
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// A coding agent's binary for its interoperability test: the path in `env_var`, then the copy
/// `./dev test` installs under `.tools/` (`local`, relative to the repository). `None` when
/// neither answers `--version`.
fn agent(env_var: &str, local: &str) -> Option<String> {
    let local = format!("{}/../.tools/{local}", env!("CARGO_MANIFEST_DIR"));
    [std::env::var(env_var).ok(), Some(local)]
        .into_iter()
        .flatten()
        .find(|bin| {
            std::process::Command::new(bin)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
}

/// The Codex CLI (npm `@openai/codex`, whose Linux binary ships in the registry package):
/// `TOLLGATE_TEST_CODEX`, else `.tools/codex`.
pub fn codex() -> Option<String> {
    agent("TOLLGATE_TEST_CODEX", "codex/node_modules/.bin/codex")
}

/// Claude Code (npm `@anthropic-ai/claude-code`; its native binary ships in the platform
/// package beside it): `TOLLGATE_TEST_CLAUDE`, else `.tools/claude`.
pub fn claude_code() -> Option<String> {
    agent(
        "TOLLGATE_TEST_CLAUDE",
        "claude/node_modules/@anthropic-ai/claude-code-linux-x64/claude",
    )
}

/// The Gemini CLI (npm `@google/gemini-cli`, run by the machine's Node.js):
/// `TOLLGATE_TEST_GEMINI`, else `.tools/gemini`.
pub fn gemini_cli() -> Option<String> {
    agent("TOLLGATE_TEST_GEMINI", "gemini/node_modules/.bin/gemini")
}
