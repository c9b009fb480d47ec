//! The route table: every endpoint is a row (method, path pattern, who may call, which limit
//! its requests count against, the handler). `routes.rs` looks requests up in it (404 and 405
//! follow from it), resolves the caller and admits the request as the row says, then runs the
//! handler with the caller. Adding an endpoint: a row here and its handler's arm there.

/// Who may call a route; resolved before its handler runs, which receives the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Anybody; no credentials are read (pages, probes, signup, the Stripe webhook, which
    /// checks its own signature).
    Open,
    /// An API key when one is sent (401 when it is not a live key), else the guest tier:
    /// the model endpoints, where guests may use `guest` models.
    KeyOrGuest,
    /// As [`Access::KeyOrGuest`], and a dashboard session cookie too (the model lists, which
    /// the dashboard shows).
    Anyone,
    /// An API key only (the MCP endpoints).
    Key,
    /// An API key, or a dashboard session cookie.
    KeyOrSession,
    /// The admin token, or an operator's dashboard session.
    Admin,
}

/// What a route's requests count against; applied after the caller is resolved and before
/// the handler runs (429 `rate_limit_exceeded` past it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// Not counted.
    Free,
    /// The caller's plan: an account by id, a guest by client address (a dashboard session and
    /// the admin are not counted).
    Plan,
    /// Only a guest's requests count, against the guest plan (the model lists: a map for a
    /// scraper; free to keys and sessions).
    Guests,
    /// Every attempt from a client address, against `[abuse]` (each signup mints credits).
    Signups,
    /// Every attempt from a client address, against `[abuse]` (the per-e-mail throttle is the
    /// handler's: it needs the body).
    Logins,
    /// Each `tools/call` counts against the caller's plan when the MCP handler has read it
    /// (refused as a JSON-RPC error); the protocol's other methods are free.
    PerToolCall,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handler {
    Chat,
    Messages,
    CountTokens,
    Models,
    Pricing,
    Changelog,
    Healthz,
    Readyz,
    Signup,
    Login,
    Logout,
    Me,
    ListKeys,
    CreateKey,
    RevokeKey,
    Usage,
    AdminAccount,
    AdminCredits,
    AdminPlan,
    McpRegister,
    McpListOwn,
    McpUpdate,
    McpEarnings,
    AdminMcpList,
    AdminMcpRegister,
    AdminMcpMove(Move),
    McpAll,
    McpOne,
    BillingCheckout,
    BillingHistory,
    BillingPortal,
    BillingWebhook,
    AdminUnclaimed,
    AdminAssign,
    Page,
    Asset,
    Plans,
    AdminFind,
    Demo,
}

pub struct Route {
    pub method: &'static str,
    /// Segments separated by `/`; `{id}` matches one non-empty segment.
    pub path: &'static str,
    pub access: Access,
    pub limit: Limit,
    pub handler: Handler,
    /// The `route` label of the request metrics.
    pub label: &'static str,
}

const fn route(
    method: &'static str,
    path: &'static str,
    (access, limit): (Access, Limit),
    handler: Handler,
    label: &'static str,
) -> Route {
    Route {
        method,
        path,
        access,
        limit,
        handler,
        label,
    }
}

use tollgate_filters::mcp::Move;
use Access::{Admin, Anyone, Key, KeyOrGuest, KeyOrSession, Open};
use Handler::*;
use Limit::{Free, Guests, Logins, PerToolCall, Plan, Signups};

pub const ROUTES: &[Route] = &[
    route(
        "POST",
        "/v1/chat/completions",
        (KeyOrGuest, Plan),
        Chat,
        "chat",
    ),
    route(
        "POST",
        "/v1/messages",
        (KeyOrGuest, Plan),
        Messages,
        "messages",
    ),
    route(
        "POST",
        "/v1/messages/count_tokens",
        (KeyOrGuest, Plan),
        CountTokens,
        "messages",
    ),
    route("GET", "/v1/models", (Anyone, Guests), Models, "models"),
    route(
        "GET",
        "/v1/models/pricing",
        (Anyone, Guests),
        Pricing,
        "pricing",
    ),
    route(
        "GET",
        "/v1/models/changelog",
        (Anyone, Free),
        Changelog,
        "pricing",
    ),
    // The built-in demo provider, for the gateway's own `demo` pools (loopback only).
    route(
        "POST",
        "/_demo/v1/chat/completions",
        (Open, Free),
        Demo,
        "demo",
    ),
    route("GET", "/healthz", (Open, Free), Healthz, "healthz"),
    // The pricing page and the dashboard app (one page; the script renders the route).
    route("GET", "/", (Open, Free), Page, "dashboard"),
    route("GET", "/pricing", (Open, Free), Page, "dashboard"),
    route("GET", "/dashboard", (Open, Free), Page, "dashboard"),
    route("GET", "/dashboard/{id}", (Open, Free), Page, "dashboard"),
    route("GET", "/assets/{id}", (Open, Free), Asset, "dashboard"),
    route("GET", "/readyz", (Open, Free), Readyz, "readyz"),
    route(
        "POST",
        "/api/v1/auth/signup",
        (Open, Signups),
        Signup,
        "api",
    ),
    route("POST", "/api/v1/auth/login", (Open, Logins), Login, "api"),
    route("POST", "/api/v1/auth/logout", (Open, Free), Logout, "api"),
    route("GET", "/api/v1/auth/me", (KeyOrSession, Free), Me, "api"),
    route("GET", "/api/v1/keys", (KeyOrSession, Free), ListKeys, "api"),
    route(
        "POST",
        "/api/v1/keys",
        (KeyOrSession, Free),
        CreateKey,
        "api",
    ),
    route(
        "DELETE",
        "/api/v1/keys/{id}",
        (KeyOrSession, Free),
        RevokeKey,
        "api",
    ),
    route("GET", "/api/v1/usage", (KeyOrSession, Free), Usage, "api"),
    route(
        "GET",
        "/api/v1/admin/accounts/{id}",
        (Admin, Free),
        AdminAccount,
        "api",
    ),
    route(
        "POST",
        "/api/v1/admin/accounts/{id}/credits",
        (Admin, Free),
        AdminCredits,
        "api",
    ),
    route(
        "PUT",
        "/api/v1/admin/accounts/{id}/plan",
        (Admin, Free),
        AdminPlan,
        "api",
    ),
    route(
        "POST",
        "/api/v1/mcp/services",
        (KeyOrSession, Free),
        McpRegister,
        "api",
    ),
    route(
        "GET",
        "/api/v1/mcp/services",
        (KeyOrSession, Free),
        McpListOwn,
        "api",
    ),
    route(
        "PATCH",
        "/api/v1/mcp/services/{id}",
        (KeyOrSession, Free),
        McpUpdate,
        "api",
    ),
    route(
        "GET",
        "/api/v1/mcp/earnings",
        (KeyOrSession, Free),
        McpEarnings,
        "api",
    ),
    route(
        "GET",
        "/api/v1/admin/mcp/services",
        (Admin, Free),
        AdminMcpList,
        "api",
    ),
    route(
        "POST",
        "/api/v1/admin/mcp/services",
        (Admin, Free),
        AdminMcpRegister,
        "api",
    ),
    route(
        "POST",
        "/api/v1/admin/mcp/services/{id}/approve",
        (Admin, Free),
        AdminMcpMove(Move::Approve),
        "api",
    ),
    route(
        "POST",
        "/api/v1/admin/mcp/services/{id}/reject",
        (Admin, Free),
        AdminMcpMove(Move::Reject),
        "api",
    ),
    route(
        "POST",
        "/api/v1/admin/mcp/services/{id}/suspend",
        (Admin, Free),
        AdminMcpMove(Move::Suspend),
        "api",
    ),
    route(
        "POST",
        "/api/v1/admin/mcp/services/{id}/resume",
        (Admin, Free),
        AdminMcpMove(Move::Resume),
        "api",
    ),
    route(
        "POST",
        "/api/v1/billing/checkout",
        (KeyOrSession, Free),
        BillingCheckout,
        "api",
    ),
    route("GET", "/api/v1/plans", (Open, Free), Plans, "api"),
    route(
        "GET",
        "/api/v1/admin/accounts",
        (Admin, Free),
        AdminFind,
        "api",
    ),
    route(
        "GET",
        "/api/v1/billing",
        (KeyOrSession, Free),
        BillingHistory,
        "api",
    ),
    route(
        "POST",
        "/api/v1/billing/portal",
        (KeyOrSession, Free),
        BillingPortal,
        "api",
    ),
    // Signed by Stripe, checked by the handler over the raw body.
    route(
        "POST",
        "/api/v1/billing/webhook",
        (Open, Free),
        BillingWebhook,
        "api",
    ),
    route(
        "GET",
        "/api/v1/admin/billing/unclaimed",
        (Admin, Free),
        AdminUnclaimed,
        "api",
    ),
    route(
        "POST",
        "/api/v1/admin/billing/unclaimed/{id}/assign",
        (Admin, Free),
        AdminAssign,
        "api",
    ),
    route("POST", "/mcp", (Key, PerToolCall), McpAll, "mcp"),
    route("POST", "/mcp/{id}", (Key, PerToolCall), McpOne, "mcp"),
];
