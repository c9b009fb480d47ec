//! # Tollgate
//!
//! A metered LLM API gateway on Pingora: one OpenAI-compatible chat-completions API (and
//! Anthropic's Messages API) in front of many providers, with health-checked failover across
//! upstream pools, usage billed in credits, a marketplace of paid MCP tool servers, and plans
//! sold through Stripe.
//!
//! # Layout: three walks
//!
//! Every walk starts in the same place. [`server`] assembled the Pingora server from the
//! validated [`config`] (one file per TOML section) and the [`runtime`] (the config snapshot
//! swapped on SIGHUP, and the state every service shares), beside the [`background`] services
//! (store connections, health checks, reload, lease rounds, the retry of unwritten settlements,
//! the hold reaper). [`proxy`] is the Pingora adapter (Tollgate is Pingora's HTTP
//! server application): it reads each request, and [`proxy::routes`] finds its row in the one route table
//! ([`proxy::table`]: 404 and 405 follow from it, and who may call and which limit applies), [`auth`] says who is calling (key,
//! session, guest, admin token), and [`limits`] admits it against its plan's windows
//! (in-process or Redis) when its row says so.
//!
//! ## A chat request: `POST /v1/chat/completions`
//! 1. Its front door in [`fronts`] reads the body into the internal chat request
//!    ([`fronts::chat_completions`]; [`fronts::messages`] for a client that speaks Anthropic's
//!    wire, [`fronts::responses`], [`fronts::gemini`], [`fronts::completions`] for the
//!    others), and [`pipeline`] resolves the model and orders the route candidates.
//! 2. [`metering`] places a keyed request's credit hold: against this instance's credit lease
//!    of the account when it can pay ([`metering::leases`]), else as a hold row in the
//!    [`ledger`]. The request owns it as its charge ([`metering::charge`], the context's one
//!    metered slot), topped up before a failover to a pricier candidate.
//! 3. [`pipeline::forward`] tries the candidates over the [`upstream`] pools, one
//!    [`pipeline::attempt`] per candidate and endpoint: [`upstream::provider`] says what each
//!    provider kind means on the wire, [`upstream::wire`] makes the exchange,
//!    [`pipeline::translate`] picks the translation between the client's wire and the
//!    provider's, [`pipeline::stream`] relays streams. An attempt
//!    returns what it served; it neither settles nor sends the answer's last bytes. A turn of
//!    a conversation goes first where its prompt is cached ([`routing`]: sticky routing).
//! 4. The pipeline settles the charge once, to what was served, through [`metering`], which
//!    charges it to the lease in memory (the usage row goes with the next lease round) or to
//!    the [`ledger`] directly; a settlement the ledger could not take waits in
//!    [`metering::unsettled`] and is retried. Then it answers: a JSON reply with the balance
//!    after the charge, or a stream's closing events. The proxy settles after the handler only
//!    what a dropped future left.
//! 5. [`request::respond`] answers (every error through `GatewayError`; [`request`] is the
//!    plumbing every handler shares: the context, body reads, responses); [`proxy::access_log`]
//!    counts the request in [`metrics`] and hands its log line to [`logging`]'s writer thread;
//!    [`telemetry`] observes its latency histograms and, when it is sampled or failed, queues
//!    its spans (the client's trace continued, one span per upstream leg, the settlement) for
//!    the OTLP exporter.
//!
//! ## A tool call: `tools/call` through `POST /mcp`
//! [`mcp`] is the tool marketplace: developers register paid tool servers and the operator
//! approves them ([`mcp::developer`], [`mcp::operator`]); agents call their tools through `/mcp`.
//!
//! 1. The route table lets only API keys in (or an OAuth access token, which acts as its
//!    grant's key: [`oauth`] is the authorization server MCP clients sign in with) and leaves
//!    the plan's limit to the call itself.
//! 2. [`mcp::endpoint`] reads the JSON-RPC message, finds the tool among the live services
//!    ([`tool_servers::cache`], re-read from the [`ledger`] after a short time) and admits the call
//!    against the caller's plan in [`limits`].
//! 3. [`metering::tool`] holds the tool's price, on the same credit leases as chat.
//! 4. [`tool_servers`] calls the tool server as an MCP client (the SSRF-checked address, its
//!    session, a bounded read); the result goes back to the agent as the server sent it.
//! 5. A call that succeeded is charged its price and its developer credited a share in the
//!    same write; a failed call is charged nothing.
//!
//! ## A Stripe webhook event: `POST /api/v1/billing/webhook`
//! [`payments`] sells plans and credit packs through Stripe Checkout (the money that comes
//! in; what a request costs is [`metering`]); nothing is granted until Stripe's event says it
//! was paid.
//!
//! 1. Anyone may call it: [`payments::webhook`] checks Stripe's signature over the raw body
//!    before anything is parsed (with the [`clock`]'s now).
//!    The event is parsed into the one action it asks for ([`tollgate_filters::stripe::Action`]).
//! 2. It finds what was bought: the checkout [`payments::checkout`] created for the caller
//!    ([`ledger::payments`]), else the session's metadata, else its line items read from
//!    Stripe ([`payments::stripe_api`]).
//! 3. [`ledger::payment_events`] applies the event once, in one transaction with its record:
//!    plan and credits granted, renewed or taken back. A payment no account can be found for
//!    lands on an anonymous account, which the operator assigns ([`payments::unclaimed`]).
//! 4. The account's cached keys ([`auth::key_cache`]) are dropped, so its next request
//!    reads the new plan.
//!
//! Beside the walks: the other doors of [`fronts`] (each parses its wire into the chat walk and
//! shapes its answer; [`fronts::embeddings`] takes the chat walk's steps with a prompt-only
//! hold, and failover only across the model's own endpoints), [`models`] (the model lists,
//! pricing and changelog), [`demo`] (the built-in demo provider), [`accounts`]
//! (signup, login, sessions, keys, usage), [`orgs`] (organizations: a shared wallet that
//! is an account of its own, members with roles, invitations), [`request_log`] (every
//! metered request's record, and its payloads where payload logging is on), [`response_cache`]
//! (the exact response cache: a repeated request answered from a stored reply, in the chat
//! walk between the hold and forwarding), [`webhooks`] (events sent
//! to customers' endpoints: registered, noticed off the request path, signed, delivered in
//! order), [`admin`] (the admin API), [`dashboard`] (the pricing page and the app, served by the gateway itself). The logic
//! that needs no I/O (validation, translation, SSE, routing, credit arithmetic, the Stripe
//! signature, errors) lives in [`tollgate_filters`].
#![forbid(unsafe_code)]

pub mod accounts;
pub mod admin;
pub mod auth;
pub mod background;
pub mod clock;
pub mod config;
pub mod dashboard;
pub mod demo;
pub mod fronts;
pub mod ledger;
pub mod limits;
pub mod logging;
pub mod mcp;
pub mod metering;
pub mod metrics;
pub mod models;
pub mod oauth;
pub mod orgs;
pub mod payments;
pub mod pipeline;
pub mod proxy;
pub mod request;
pub mod request_log;
pub mod response_cache;
pub mod routing;
pub mod runtime;
pub mod server;
pub mod telemetry;
pub mod tool_servers;
pub mod upstream;
pub mod webhooks;

/// The tours cannot drift: every `pub mod` of a crate root and of `ledger` is named in its
/// module doc as an intra-doc link, and every file under `src/` is named in the README's
/// architecture map.
#[cfg(test)]
mod tour_tests {
    use std::path::Path;

    /// The `pub mod NAME;` lines of `source` whose `[`NAME`]` its `//!` doc does not name.
    fn unnamed_mods(source: &str) -> Vec<String> {
        let doc: String = source
            .lines()
            .filter_map(|l| l.trim_start().strip_prefix("//!"))
            .collect::<Vec<_>>()
            .join("\n");
        source
            .lines()
            .filter_map(|l| l.trim().strip_prefix("pub mod ")?.strip_suffix(';'))
            .filter(|name| !doc.contains(&format!("[`{name}`]")))
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn the_crate_tour_names_every_module() {
        let missing = unnamed_mods(include_str!("lib.rs"));
        assert!(
            missing.is_empty(),
            "src/lib.rs's tour does not name {missing:?}"
        );
    }

    #[test]
    fn the_ledger_layout_names_every_module() {
        let missing = unnamed_mods(include_str!("ledger/mod.rs"));
        assert!(
            missing.is_empty(),
            "src/ledger/mod.rs's # Layout does not name {missing:?}"
        );
    }

    /// The README's `## Architecture` section, up to the next `## ` heading.
    fn architecture(readme: &str) -> &str {
        let start = readme
            .find("\n## Architecture\n")
            .expect("README.md has an ## Architecture section");
        let rest = &readme[start + 1..];
        let end = rest[3..].find("\n## ").map_or(rest.len(), |i| i + 3);
        &rest[..end]
    }

    /// Whether the map names `path` (relative to `src/`): a top-level file by its path
    /// (`src/clock.rs`); a folder's `mod.rs` by the folder (`src/limits/`); any other file by
    /// its path in the diagram (`pipeline/forward.rs`) or in its folder's own table row (the row
    /// whose first cell names `src/limits/`), as `shadow.rs` or as `` `shadow` ``. Naming the
    /// folder alone does not name its files.
    fn names(map: &str, path: &str) -> bool {
        let Some((folder, file)) = path.rsplit_once('/') else {
            return map.contains(&format!("src/{path}"));
        };
        if file == "mod.rs" {
            return map.contains(&format!("`src/{folder}/`"));
        }
        let stem = file.trim_end_matches(".rs");
        map.contains(&format!("{folder}/{file}"))
            || map
                .lines()
                .filter(|row| {
                    row.split('|')
                        .nth(1)
                        .is_some_and(|cell| cell.contains(&format!("`src/{folder}/`")))
                })
                .any(|row| row.contains(file) || row.contains(&format!("`{stem}`")))
    }

    fn rust_files(dir: &Path, under: &str, found: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).expect("src/ is readable") {
            let path = entry.expect("a directory entry").path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let rel = if under.is_empty() {
                name.clone()
            } else {
                format!("{under}/{name}")
            };
            if path.is_dir() {
                rust_files(&path, &rel, found);
            } else if name.ends_with(".rs") {
                found.push(rel);
            }
        }
    }

    #[test]
    fn the_readme_architecture_map_names_every_source_file() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
        let map = architecture(&readme);
        let mut files = Vec::new();
        rust_files(&root.join("src"), "", &mut files);
        files.sort();
        let missing: Vec<&String> = files.iter().filter(|f| !names(map, f)).collect();
        assert!(
            missing.is_empty(),
            "README.md's ## Architecture does not name these files of src/: {missing:?}"
        );
    }

    /// GitHub's anchor of a heading: lower case, punctuation dropped but `-` and `_`, each
    /// space a `-`.
    fn slug(heading: &str) -> String {
        heading
            .trim()
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
            .map(|c| if c == ' ' { '-' } else { c })
            .collect()
    }

    /// The lines of a Markdown file outside its fenced code blocks.
    fn prose(md: &str) -> Vec<&str> {
        let mut fenced = false;
        md.lines()
            .filter(|line| {
                if line.trim_start().starts_with("```") {
                    fenced = !fenced;
                    return false;
                }
                !fenced
            })
            .collect()
    }

    /// The anchors of a Markdown file's headings; a repeated heading's get `-1`, `-2`, … as on
    /// GitHub.
    fn anchors(md: &str) -> Vec<String> {
        let mut seen = std::collections::HashMap::<String, usize>::new();
        prose(md)
            .into_iter()
            .filter_map(|line| {
                let text = line.trim_start_matches('#');
                let level = line.len() - text.len();
                ((1..=6).contains(&level) && text.starts_with(' ')).then(|| slug(text))
            })
            .map(|anchor| {
                let n = seen.entry(anchor.clone()).or_insert(0);
                let unique = if *n == 0 {
                    anchor
                } else {
                    format!("{anchor}-{n}")
                };
                *n += 1;
                unique
            })
            .collect()
    }

    /// The targets of a Markdown file's links and images, `](target)`, outside code blocks.
    fn link_targets(md: &str) -> Vec<String> {
        prose(md)
            .into_iter()
            .flat_map(|line| line.split("](").skip(1))
            .filter_map(|rest| rest.split_once(')'))
            .filter_map(|(target, _)| target.split_whitespace().next().map(str::to_owned))
            .collect()
    }

    /// The README is the manual and stays short; the long references are `docs/*.md`, each
    /// linked from it, and no relative link of the README or a docs page points at a file or a
    /// heading that is not there (a section that moved takes its links along).
    #[test]
    fn the_readme_is_short_and_its_docs_links_hold() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let read = |path: &Path| {
            std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        };
        let readme = read(&root.join("README.md"));
        let lines = readme.lines().count();
        assert!(
            lines <= 900,
            "README.md has {lines} lines, more than 900: move a reference to docs/"
        );

        let mut pages: Vec<String> = std::fs::read_dir(root.join("docs"))
            .expect("docs/ is readable")
            .map(|entry| {
                entry
                    .expect("a directory entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .filter(|name| name.ends_with(".md"))
            .collect();
        pages.sort();
        let readme_targets = link_targets(&readme);
        let unlinked: Vec<&String> = pages
            .iter()
            .filter(|page| {
                let target = format!("docs/{page}");
                !readme_targets
                    .iter()
                    .any(|t| t.split('#').next() == Some(target.as_str()))
            })
            .collect();
        assert!(
            unlinked.is_empty(),
            "README.md does not link these docs pages: {unlinked:?}"
        );

        let mut broken = Vec::new();
        let files = std::iter::once("README.md".to_owned())
            .chain(pages.iter().map(|p| format!("docs/{p}")));
        for file in files {
            let source = root.join(&file);
            let dir = source.parent().expect("a file has a folder");
            for target in link_targets(&read(&source)) {
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                let (path, anchor) = target.split_once('#').unwrap_or((target.as_str(), ""));
                let linked = if path.is_empty() {
                    source.clone()
                } else {
                    dir.join(path)
                };
                if !linked.exists() {
                    broken.push(format!("{file}: {target} (no such file)"));
                } else if !anchor.is_empty()
                    && linked.extension().is_some_and(|e| e == "md")
                    && !anchors(&read(&linked)).iter().any(|a| a == anchor)
                {
                    broken.push(format!("{file}: {target} (no such heading)"));
                }
            }
        }
        assert!(
            broken.is_empty(),
            "links to nothing:\n{}",
            broken.join("\n")
        );
    }
}
