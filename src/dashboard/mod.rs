//! The pricing page and the dashboard app, served by the gateway itself: one HTML shell for
//! every page (the script renders the route from `location.pathname`) and a handful of
//! embedded assets. Nothing is loaded from another origin, and the Content-Security-Policy
//! says so: no inline script or style, no other origin to load from or send to.
//!
//! Assets are served under content-hashed names (`app.3f2a….js`) that may be cached forever;
//! the shell is `no-cache` and names the current hashes, so a new binary is picked up on the
//! next page load without any cache ever serving a stale script.

use std::sync::OnceLock;

use crate::request::Session;
use tollgate_filters::{ErrorKind, GatewayError};

use crate::request::ctx::RequestCtx;
use crate::request::respond;
use crate::runtime::Shared;

/// What the shell may load: its own assets only (the CSV download is a `blob:` link the user
/// follows, a navigation CSP does not govern).
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    img-src 'self' data:; connect-src 'self'; font-src 'self'; base-uri 'none'; \
    form-action 'self'; frame-ancestors 'none'";

/// The pages the app knows under `/dashboard/` (`ROUTES` in `assets/app.js` lists the same);
/// another name is answered 404 (with the shell still, so the app can say so and link back).
const PAGES: &[&str] = &[
    "keys",
    "usage",
    "requests",
    "billing",
    "developer",
    "operator",
    "authorize",
    "apps",
    "orgs",
    "join",
    "webhooks",
];

struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

macro_rules! asset {
    ($name:literal, $type:expr) => {
        Asset {
            name: $name,
            content_type: $type,
            body: include_bytes!(concat!("assets/", $name)),
        }
    };
}

const JS: &str = "text/javascript; charset=utf-8";

/// In the order the shell loads the scripts (`defer` keeps it): the core first, the router last.
const ASSETS: &[Asset] = &[
    asset!("app.css", "text/css; charset=utf-8"),
    asset!("favicon.svg", "image/svg+xml"),
    asset!("core.js", JS),
    asset!("chart.js", JS),
    asset!("pages-public.js", JS),
    asset!("pages-account.js", JS),
    asset!("pages-usage.js", JS),
    asset!("pages-requests.js", JS),
    asset!("pages-dev.js", JS),
    asset!("pages-ops.js", JS),
    asset!("pages-oauth.js", JS),
    asset!("pages-orgs.js", JS),
    asset!("pages-webhooks.js", JS),
    asset!("app.js", JS),
];

/// The shell; `{{name}}` stands for the versioned path of asset `name`.
const SHELL: &str = include_str!("assets/index.html");

/// The versioned names (parallel to [`ASSETS`]) and the shell naming them, made once.
struct Built {
    versioned: Vec<String>,
    html: Vec<u8>,
}

/// FNV-1a, 64 bits: a content hash for cache busting (not for security), stable across
/// builds and instances, so every instance serving the same assets names them alike.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn versioned_name(a: &Asset) -> String {
    let hash = fnv1a(a.body);
    match a.name.rsplit_once('.') {
        Some((stem, ext)) => format!("{stem}.{hash:016x}.{ext}"),
        None => format!("{}.{hash:016x}", a.name),
    }
}

fn built() -> &'static Built {
    static BUILT: OnceLock<Built> = OnceLock::new();
    BUILT.get_or_init(|| {
        let versioned: Vec<String> = ASSETS.iter().map(versioned_name).collect();
        let mut html = SHELL.to_owned();
        for (a, v) in ASSETS.iter().zip(&versioned) {
            html = html.replace(&format!("{{{{{}}}}}", a.name), &format!("/assets/{v}"));
        }
        Built {
            versioned,
            html: html.into_bytes(),
        }
    })
}

/// The asset a request names, and whether the name was the versioned one (cacheable forever).
fn lookup(name: &str) -> Option<(&'static Asset, bool)> {
    let b = built();
    ASSETS.iter().zip(&b.versioned).find_map(|(a, v)| {
        if v == name {
            Some((a, true))
        } else if a.name == name {
            Some((a, false))
        } else {
            None
        }
    })
}

/// Whether the shell answers `path` as a page the app knows (else 404, with the shell).
fn known_page(path: &str) -> bool {
    match path.strip_prefix("/dashboard/") {
        Some(page) => PAGES.contains(&page.trim_end_matches('/')),
        None => true,
    }
}

/// `GET /`, `/pricing`, `/dashboard`, `/dashboard/{page}`: the app's page.
pub async fn page(
    _shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
) -> Result<(), GatewayError> {
    let status = if known_page(session.req_header().uri.path()) {
        200
    } else {
        404
    };
    let headers = [
        ("Cache-Control", "no-cache".to_owned()),
        ("Content-Security-Policy", CSP.to_owned()),
        ("X-Content-Type-Options", "nosniff".to_owned()),
        ("Referrer-Policy", "same-origin".to_owned()),
        ("X-Frame-Options", "DENY".to_owned()),
    ];
    let body = built().html.clone();
    respond::send(
        session,
        ctx,
        status,
        "text/html; charset=utf-8",
        body,
        &headers,
    )
    .await;
    Ok(())
}

/// `GET /assets/{name}`: an embedded asset. A versioned name is immutable; the plain name is
/// served too (for a hand-typed link) but must be revalidated.
pub async fn asset(
    _shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    name: &str,
) -> Result<(), GatewayError> {
    let Some((a, versioned)) = lookup(name) else {
        return Err(GatewayError::new(
            ErrorKind::NotFound,
            format!("no asset `{name}`"),
        ));
    };
    let cache = if versioned {
        "public, max-age=31536000, immutable"
    } else {
        "no-cache"
    };
    let headers = [
        ("Cache-Control", cache.to_owned()),
        ("X-Content-Type-Options", "nosniff".to_owned()),
    ];
    respond::send(session, ctx, 200, a.content_type, a.body.to_vec(), &headers).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shell_names_every_asset_by_its_versioned_path() {
        let html = String::from_utf8(built().html.clone()).unwrap();
        assert!(!html.contains("{{"), "a placeholder was left: {html}");
        for v in &built().versioned {
            if v.ends_with(".js") || v.ends_with(".css") || v.ends_with(".svg") {
                assert!(html.contains(&format!("/assets/{v}")), "{v} not linked");
            }
        }
    }

    #[test]
    fn versioned_and_plain_names_resolve_and_others_do_not() {
        let v = &built().versioned[0];
        assert!(v.starts_with("app.") && v.ends_with(".css"), "{v}");
        assert_eq!(
            lookup(v).map(|(a, imm)| (a.name, imm)),
            Some(("app.css", true))
        );
        assert_eq!(
            lookup("app.css").map(|(a, imm)| (a.name, imm)),
            Some(("app.css", false))
        );
        assert!(lookup("app.0000000000000000.css").is_none());
        assert!(lookup("../Cargo.toml").is_none());
    }

    #[test]
    fn the_hash_changes_with_the_content() {
        assert_ne!(fnv1a(b"a"), fnv1a(b"b"));
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
    }

    #[test]
    fn the_shell_has_no_inline_script_or_style() {
        let html = SHELL.to_lowercase();
        assert!(!html.contains("style="));
        assert!(!html.contains("<style"));
        for handler in ["onclick=", "onload=", "onerror=", "onsubmit="] {
            assert!(!html.contains(handler), "no inline event handlers");
        }
        for tag in html.split("<script").skip(1) {
            assert!(tag.trim_start().starts_with("src=") || tag.contains(" src="));
            assert!(tag.contains("></script>"), "a script with a body");
        }
    }

    #[test]
    fn only_pages_the_app_knows_are_200() {
        assert!(known_page("/"));
        assert!(known_page("/dashboard"));
        assert!(known_page("/dashboard/usage"));
        assert!(!known_page("/dashboard/nothing"));
    }
}
