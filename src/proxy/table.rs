//! The route table: every endpoint is a row (method, path pattern, who may call, the
//! handler). `routes.rs` looks requests up in it (404 and 405 follow from it) and dispatches.

/// Who may call a route; resolved before its handler runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Nobody in particular (the handler may look itself).
    Open,
    /// An API key, or a dashboard session cookie.
    KeyOrSession,
    /// The admin token.
    Admin,
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
    AdminMcpMove(&'static str),
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
    pub handler: Handler,
    /// The `route` label of the request metrics.
    pub label: &'static str,
}

const fn route(
    method: &'static str,
    path: &'static str,
    access: Access,
    handler: Handler,
    label: &'static str,
) -> Route {
    Route {
        method,
        path,
        access,
        handler,
        label,
    }
}

use Access::{Admin, KeyOrSession, Open};

pub const ROUTES: &[Route] = &[
    route("POST", "/v1/chat/completions", Open, Handler::Chat, "chat"),
    route("POST", "/v1/messages", Open, Handler::Messages, "messages"),
    route(
        "POST",
        "/v1/messages/count_tokens",
        Open,
        Handler::CountTokens,
        "messages",
    ),
    route("GET", "/v1/models", Open, Handler::Models, "models"),
    route(
        "GET",
        "/v1/models/pricing",
        Open,
        Handler::Pricing,
        "pricing",
    ),
    route(
        "GET",
        "/v1/models/changelog",
        Open,
        Handler::Changelog,
        "pricing",
    ),
    // The built-in demo provider, for the gateway's own `demo` pools (loopback only).
    route(
        "POST",
        "/_demo/v1/chat/completions",
        Open,
        Handler::Demo,
        "demo",
    ),
    route("GET", "/healthz", Open, Handler::Healthz, "healthz"),
    // The pricing page and the dashboard app (one page; the script renders the route).
    route("GET", "/", Open, Handler::Page, "dashboard"),
    route("GET", "/pricing", Open, Handler::Page, "dashboard"),
    route("GET", "/dashboard", Open, Handler::Page, "dashboard"),
    route("GET", "/dashboard/{id}", Open, Handler::Page, "dashboard"),
    route("GET", "/assets/{id}", Open, Handler::Asset, "dashboard"),
    route("GET", "/readyz", Open, Handler::Readyz, "readyz"),
    route("POST", "/api/v1/auth/signup", Open, Handler::Signup, "api"),
    route("POST", "/api/v1/auth/login", Open, Handler::Login, "api"),
    route("POST", "/api/v1/auth/logout", Open, Handler::Logout, "api"),
    route("GET", "/api/v1/auth/me", KeyOrSession, Handler::Me, "api"),
    route(
        "GET",
        "/api/v1/keys",
        KeyOrSession,
        Handler::ListKeys,
        "api",
    ),
    route(
        "POST",
        "/api/v1/keys",
        KeyOrSession,
        Handler::CreateKey,
        "api",
    ),
    route(
        "DELETE",
        "/api/v1/keys/{id}",
        KeyOrSession,
        Handler::RevokeKey,
        "api",
    ),
    route("GET", "/api/v1/usage", KeyOrSession, Handler::Usage, "api"),
    route(
        "GET",
        "/api/v1/admin/accounts/{id}",
        Admin,
        Handler::AdminAccount,
        "api",
    ),
    route(
        "POST",
        "/api/v1/admin/accounts/{id}/credits",
        Admin,
        Handler::AdminCredits,
        "api",
    ),
    route(
        "PUT",
        "/api/v1/admin/accounts/{id}/plan",
        Admin,
        Handler::AdminPlan,
        "api",
    ),
    route(
        "POST",
        "/api/v1/mcp/services",
        KeyOrSession,
        Handler::McpRegister,
        "api",
    ),
    route(
        "GET",
        "/api/v1/mcp/services",
        KeyOrSession,
        Handler::McpListOwn,
        "api",
    ),
    route(
        "PATCH",
        "/api/v1/mcp/services/{id}",
        KeyOrSession,
        Handler::McpUpdate,
        "api",
    ),
    route(
        "GET",
        "/api/v1/mcp/earnings",
        KeyOrSession,
        Handler::McpEarnings,
        "api",
    ),
    route(
        "GET",
        "/api/v1/admin/mcp/services",
        Admin,
        Handler::AdminMcpList,
        "api",
    ),
    route(
        "POST",
        "/api/v1/admin/mcp/services",
        Admin,
        Handler::AdminMcpRegister,
        "api",
    ),
    route(
        "POST",
        "/api/v1/admin/mcp/services/{id}/approve",
        Admin,
        Handler::AdminMcpMove("approve"),
        "api",
    ),
    route(
        "POST",
        "/api/v1/admin/mcp/services/{id}/reject",
        Admin,
        Handler::AdminMcpMove("reject"),
        "api",
    ),
    route(
        "POST",
        "/api/v1/admin/mcp/services/{id}/suspend",
        Admin,
        Handler::AdminMcpMove("suspend"),
        "api",
    ),
    route(
        "POST",
        "/api/v1/admin/mcp/services/{id}/resume",
        Admin,
        Handler::AdminMcpMove("resume"),
        "api",
    ),
    route(
        "POST",
        "/api/v1/billing/checkout",
        KeyOrSession,
        Handler::BillingCheckout,
        "api",
    ),
    route("GET", "/api/v1/plans", Open, Handler::Plans, "api"),
    route(
        "GET",
        "/api/v1/admin/accounts",
        Admin,
        Handler::AdminFind,
        "api",
    ),
    route(
        "GET",
        "/api/v1/billing",
        KeyOrSession,
        Handler::BillingHistory,
        "api",
    ),
    route(
        "POST",
        "/api/v1/billing/portal",
        KeyOrSession,
        Handler::BillingPortal,
        "api",
    ),
    // Signed by Stripe, checked by the handler over the raw body.
    route(
        "POST",
        "/api/v1/billing/webhook",
        Open,
        Handler::BillingWebhook,
        "api",
    ),
    route(
        "GET",
        "/api/v1/admin/billing/unclaimed",
        Admin,
        Handler::AdminUnclaimed,
        "api",
    ),
    route(
        "POST",
        "/api/v1/admin/billing/unclaimed/{id}/assign",
        Admin,
        Handler::AdminAssign,
        "api",
    ),
    route("POST", "/mcp", Open, Handler::McpAll, "mcp"),
    route("POST", "/mcp/{id}", Open, Handler::McpOne, "mcp"),
];
