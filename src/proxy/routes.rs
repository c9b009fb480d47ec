//! Routing by the one route table (`table.rs`, a row per endpoint): 404 and 405 follow from it
//! (a path no row matches is 404, a path some row matches under another method is 405), and
//! [`dispatch`] resolves the caller and admits the request as the row says, then runs the row's
//! handler with the caller. Adding an endpoint is adding a row there; nothing here changes.

use crate::request::Session;
use tollgate_filters::{ErrorKind, GatewayError};

use super::table::{self, Access, Limit, Route, ROUTES};
use crate::auth::caller::{self, Caller};
use crate::request::ctx::{Door, RequestCtx, Wire, OWN};
use crate::runtime::Shared;
use Access::{Admin, Anyone, Key, KeyOrGuest, KeyOrSession, Mcp, Open};

/// A row's path cut once at its `{id}`: `before` and `after` the segment, or the whole path
/// (`after` None). A pattern holds at most one `{id}` (a test checks the table), which matches
/// one non-empty segment.
#[derive(Clone, Copy)]
struct Shape {
    before: &'static str,
    after: Option<&'static str>,
}

impl Shape {
    fn of(pattern: &'static str) -> Shape {
        match pattern.split_once("{id}") {
            None => Shape {
                before: pattern,
                after: None,
            },
            Some((before, after)) => Shape {
                before,
                after: Some(after),
            },
        }
    }

    /// `Some(id)` when `path` matches (the `{id}` segment's value, or "" without one).
    fn matches<'p>(&self, path: &'p str) -> Option<&'p str> {
        match self.after {
            None => (self.before == path).then_some(""),
            Some(after) => {
                let id = path.strip_prefix(self.before)?.strip_suffix(after)?;
                (!id.is_empty() && !id.contains('/')).then_some(id)
            }
        }
    }
}

/// Every row's [`Shape`], in the table's order: cut once, not on every request (every request
/// walks the table, `/mcp` at its end; cutting each row per request was 2.4 % of a tools/call's
/// CPU).
static SHAPES: std::sync::LazyLock<Vec<Shape>> =
    std::sync::LazyLock::new(|| ROUTES.iter().map(|r| Shape::of(r.path)).collect());

#[cfg(test)]
fn matches<'p>(pattern: &'static str, path: &'p str) -> Option<&'p str> {
    Shape::of(pattern).matches(path)
}

/// What the table says of a method and path.
enum Lookup<'p> {
    /// The row and the value of its `{id}` segment ("" without one).
    Found(&'static Route, &'p str),
    /// Rows match the path under other methods (405); who may call them, and their door.
    WrongMethod(Access, Door),
    /// No row matches the path (404).
    NotFound,
}

fn find<'p>(method: &str, path: &'p str) -> Lookup<'p> {
    let mut other = None;
    for (r, shape) in ROUTES.iter().zip(SHAPES.iter()) {
        if let Some(id) = shape.matches(path) {
            if r.method == method {
                return Lookup::Found(r, id);
            }
            other = Some((r.access, r.door));
        }
    }
    other.map_or(Lookup::NotFound, |(access, door)| {
        Lookup::WrongMethod(access, door)
    })
}

/// The wire format of the refusal of a request no row serves: a row's under another method
/// names its door; a path of no row is answered in the shape of the API its prefix belongs to
/// (an Anthropic or a Google client reads its own error shape even for a path it mistyped).
fn unrouted_wire(path: &str, miss: &Lookup<'_>) -> Wire {
    if let Lookup::WrongMethod(_, door) = miss {
        return door.wire;
    }
    if path.starts_with("/v1/messages") {
        Wire::Anthropic
    } else if path.starts_with("/v1beta/")
        || (path.starts_with("/v1/models/") && path.contains(':'))
    {
        Wire::Gemini
    } else {
        Wire::OpenAi
    }
}

/// The error for a request the table has no row for. The caller is checked first where the
/// path is guarded: nothing under `/api/v1/admin/` is revealed without the admin token, and a
/// key's or session's endpoints answer a bad key with 401 before a wrong method with 405.
async fn refuse(
    shared: &Shared,
    session: &Session,
    method: &str,
    path: &str,
    lookup: Lookup<'_>,
) -> GatewayError {
    if path.starts_with("/api/v1/admin/") {
        if let Err(e) = caller::admin(shared, session).await {
            return e;
        }
        return GatewayError::new(
            ErrorKind::NotFound,
            format!("no admin route for {method} {path}"),
        );
    }
    match lookup {
        Lookup::WrongMethod(access, _) => {
            if access == KeyOrSession {
                if let Err(e) = caller::authenticate(shared, session, true).await {
                    return e;
                }
            }
            GatewayError::new(
                ErrorKind::MethodNotAllowed,
                format!("method {method} is not allowed on {path}"),
            )
        }
        _ => GatewayError::new(ErrorKind::NotFound, format!("no route for {method} {path}")),
    }
}

/// Routes the request and runs its handler; `Err` is answered by the caller.
pub async fn dispatch(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
) -> Result<(), GatewayError> {
    let path = session.req_header().uri.path().to_owned();
    let method = session.req_header().method.as_str().to_owned();
    let (route, id) = match find(&method, &path) {
        Lookup::Found(route, id) => (route, id),
        miss => {
            ctx.route = if path.starts_with("/api/v1/") {
                "api"
            } else {
                "other"
            };
            ctx.wire = unrouted_wire(&path, &miss);
            return Err(refuse(shared, session, &method, &path, miss).await);
        }
    };
    ctx.route = route.label;
    // A client reads its door's error shape from the first refusal on.
    ctx.wire = route.door.wire;
    if route.door != OWN && route.limit == Limit::Plan {
        ctx.metered_by = Some(route.door);
    }
    if route.door != OWN {
        ctx.trace = crate::telemetry::begin(shared, session, (route.method, route.path));
    }
    let caller = match route.access {
        Open => Caller::Guest,
        Mcp => {
            crate::mcp::origin::check(&shared.runtime.load().config, session)?;
            crate::oauth::bearer::caller(shared, session, ctx, &path).await?
        }
        KeyOrGuest | Key => caller::authenticate(shared, session, false).await?,
        Anyone | KeyOrSession => caller::authenticate(shared, session, true).await?,
        Admin => caller::admin(shared, session).await?,
    };
    if matches!(route.access, Key | Mcp) && !matches!(caller, Caller::Key(_)) {
        return Err(GatewayError::new(
            ErrorKind::Authentication,
            "this endpoint needs an API key: send Authorization: Bearer <API key>",
        ));
    }
    let result = admit_and_run(shared, session, ctx, route, &caller, id).await;
    // What reads the request at its end (its trace, its request-log record) names the key
    // and its wallet; the caller is moved, not copied.
    if let Caller::Key(key) = caller {
        ctx.key = Some(Box::new(key));
    }
    result
}

/// Admits the request against its row's limit, then runs the row's handler.
async fn admit_and_run(
    shared: &Shared,
    session: &mut Session,
    ctx: &mut RequestCtx,
    route: &Route,
    caller: &Caller,
    id: &str,
) -> Result<(), GatewayError> {
    match route.limit {
        Limit::Free | Limit::PerToolCall => {}
        Limit::Plan => caller::admit(shared, session, ctx, caller).await?,
        Limit::Guests if matches!(caller, Caller::Guest) => {
            caller::admit(shared, session, ctx, caller).await?
        }
        Limit::Guests => {}
        Limit::Signups => caller::admit_attempt(shared, session, ctx, "signup").await?,
        Limit::Logins => caller::admit_attempt(shared, session, ctx, "login").await?,
    }
    table::run(route.handler, shared, session, ctx, caller, id).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(method: &str, path: &str) -> u16 {
        match find(method, path) {
            Lookup::Found(..) => 200,
            Lookup::WrongMethod(..) => 405,
            Lookup::NotFound => 404,
        }
    }

    #[test]
    fn every_row_is_found_by_its_own_method_and_path() {
        for r in ROUTES {
            let path = r.path.replace("{id}", "abc");
            let Lookup::Found(found, id) = find(r.method, &path) else {
                panic!("{} {} not found", r.method, r.path);
            };
            assert_eq!(found.handler, r.handler);
            assert_eq!(id, if r.path.contains("{id}") { "abc" } else { "" });
        }
    }

    #[test]
    fn unknown_paths_are_404_and_other_methods_405() {
        assert_eq!(status("GET", "/v2/nothing"), 404);
        assert_eq!(status("GET", "/v1/chat/completions"), 405);
        assert_eq!(status("PATCH", "/api/v1/keys"), 405);
        assert_eq!(status("GET", "/api/v1/auth/signup"), 405);
        assert_eq!(
            status("DELETE", "/api/v1/keys/"),
            404,
            "an empty id is no id"
        );
        assert_eq!(status("GET", "/api/v1/keys/k/extra"), 404);
        assert_eq!(status("GET", "/v1/models/"), 404);
        assert!(matches!(
            find("PUT", "/api/v1/usage"),
            Lookup::WrongMethod(Access::KeyOrSession, OWN)
        ));
    }

    #[test]
    fn a_pattern_holds_at_most_one_id_and_it_is_one_whole_segment() {
        for r in ROUTES {
            assert!(r.path.matches("{id}").count() <= 1, "{}", r.path);
            // A brace is only ever part of `{id}`.
            assert_eq!(
                r.path.matches('{').count(),
                r.path.matches("{id}").count(),
                "{}",
                r.path
            );
            if let Some((before, after)) = r.path.split_once("{id}") {
                assert!(before.ends_with('/') && (after.is_empty() || after.starts_with('/')));
            }
        }
        assert_eq!(matches("/mcp/{id}", "/mcp/tools"), Some("tools"));
        assert_eq!(matches("/mcp/{id}", "/mcp/a/b"), None);
        assert_eq!(matches("/mcp/{id}", "/mcp/"), None);
        assert_eq!(matches("/a/{id}/b", "/a/x/b"), Some("x"));
        assert_eq!(matches("/a/{id}/b", "/a//b"), None);
        assert_eq!(matches("/mcp", "/mcp/"), None);
    }

    #[test]
    fn each_rows_limit_fits_who_may_call_it() {
        for r in ROUTES {
            let fits = match r.limit {
                // Counted per tools/call against the key's plan.
                Limit::PerToolCall => r.access == Access::Mcp,
                // Only guests count: the route must let guests in.
                Limit::Guests => r.access == Access::Anyone,
                // Per client address, before anyone is known.
                Limit::Signups | Limit::Logins => r.access == Access::Open,
                // A plan needs a key or a guest to count against.
                Limit::Plan => matches!(r.access, Access::KeyOrGuest | Access::Anyone),
                Limit::Free => true,
            };
            assert!(
                fits,
                "{} {}: {:?} with {:?}",
                r.method, r.path, r.limit, r.access
            );
        }
        // The metered endpoints are limited by the table, not by their handlers.
        for path in [
            "/v1/chat/completions",
            "/v1/messages",
            "/v1/messages/count_tokens",
        ] {
            let Lookup::Found(r, _) = find("POST", path) else {
                panic!("{path}")
            };
            assert_eq!(
                (r.access, r.limit),
                (Access::KeyOrGuest, Limit::Plan),
                "{path}"
            );
        }
    }

    #[test]
    fn each_rows_door_answers_in_the_shape_of_the_api_its_path_belongs_to() {
        for r in ROUTES {
            let expected = if r.path.starts_with("/v1/messages") {
                Wire::Anthropic
            } else if r.path.starts_with("/v1beta/")
                || r.handler == table::Handler::GeminiGenerateV1
            {
                Wire::Gemini
            } else {
                Wire::OpenAi
            };
            assert_eq!(r.door.wire, expected, "{} {}", r.method, r.path);
            // A row's requests are metered (one access-log line each) by its door and limit.
            if r.limit == Limit::Plan {
                assert_ne!(r.door, OWN, "{} {}", r.method, r.path);
            }
        }
        // A path no row serves is answered in its API's shape too.
        assert_eq!(
            unrouted_wire("/v1/messages/x", &find("GET", "/v1/messages/x")),
            Wire::Anthropic
        );
        assert_eq!(
            unrouted_wire("/v1beta/nothing", &Lookup::NotFound),
            Wire::Gemini
        );
        assert_eq!(unrouted_wire("/v2/x", &Lookup::NotFound), Wire::OpenAi);
        assert_eq!(
            unrouted_wire("/v1/messages", &find("GET", "/v1/messages")),
            Wire::Anthropic
        );
    }

    #[test]
    fn no_two_rows_share_a_method_and_path() {
        for (i, a) in ROUTES.iter().enumerate() {
            for b in &ROUTES[i + 1..] {
                assert!(
                    !(a.method == b.method && a.path == b.path),
                    "{} {}",
                    a.method,
                    a.path
                );
            }
        }
    }
}
