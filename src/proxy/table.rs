//! The route table: every endpoint is one row (method, path pattern, who may call, which limit
//! its requests count against, the metrics label, and the call of its handler). `routes.rs`
//! looks requests up in it (404 and 405 follow from it), resolves the caller and admits the
//! request as the row says, then [`run`]s the row's handler with the caller. Adding an
//! endpoint: a row here and its handler in the folder of what it does.

use crate::request::Session;
use tollgate_filters::mcp::Move;
use tollgate_filters::GatewayError;

use super::probes;
use crate::auth::caller::Caller;
use crate::fronts::chat_completions::CHAT;
use crate::fronts::completions::COMPLETIONS;
use crate::fronts::embeddings::EMBEDDINGS;
use crate::fronts::gemini::GEMINI;
use crate::fronts::messages::MESSAGES;
use crate::fronts::responses::RESPONSES;
use crate::mcp::endpoint::MCP;
use crate::models::Listing;
use crate::request::ctx::{Door, RequestCtx, OWN};
use crate::runtime::Shared;
use crate::{
    accounts, admin, dashboard, demo, fronts, mcp, models, oauth, orgs, payments, request_log,
    webhooks,
};
use Access::{Admin, Anyone, Key, KeyOrGuest, KeyOrSession, Mcp, Open};
use Limit::{Free, Guests, Logins, PerToolCall, Plan, Signups};

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
    /// An API key only (a stored response: a guest or a dashboard session has none).
    Key,
    /// The MCP endpoints: an API key, or an OAuth access token acting as its grant's key
    /// (`oauth::bearer`, whose 401 challenges with the resource's metadata); and only through
    /// this gateway's own host and from no other site's page (DNS-rebinding protection,
    /// `mcp::origin`, 403 before anything else). A browser-reachable local tool server is what
    /// that check protects; the model endpoints are called from anywhere behind any host.
    Mcp,
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

pub struct Route {
    pub method: &'static str,
    /// Segments separated by `/`; `{id}` matches one non-empty segment.
    pub path: &'static str,
    pub access: Access,
    pub limit: Limit,
    /// The front door its requests come in by: the wire format of its answers, errors
    /// included, and, with a plan's limit, the metered request its access-log line tells of.
    pub door: Door,
    pub handler: Handler,
    /// The `route` label of the request metrics.
    pub label: &'static str,
}

/// Makes, from the rows, the [`Handler`] enum (one variant per row), [`ROUTES`], and [`run`],
/// whose match has each row's call as its arm: a row and its handler cannot drift apart. The
/// names in `|…|` are the arguments every call may use (`id` is the `{id}` segment, "" when
/// the path has none).
macro_rules! routes {
    (
        |$shared:ident, $session:ident, $ctx:ident, $caller:ident, $id:ident|
        $($name:ident: $method:literal $path:literal, ($access:ident, $limit:ident, $door:ident), $label:literal
            => $call:expr;)*
    ) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Handler {
            $($name,)*
        }

        pub const ROUTES: &[Route] = &[$(Route {
            method: $method,
            path: $path,
            access: $access,
            limit: $limit,
            door: $door,
            handler: Handler::$name,
            label: $label,
        },)*];

        /// Runs a row's handler; `Err` is answered by the caller.
        pub async fn run(
            handler: Handler,
            $shared: &Shared,
            $session: &mut Session,
            $ctx: &mut RequestCtx,
            $caller: &Caller,
            $id: &str,
        ) -> Result<(), GatewayError> {
            match handler {
                $(Handler::$name => $call,)*
            }
        }
    };
}

// A row: `Name: METHOD "path", (who may call, what it counts against, its front door),
// "metrics label" => the handler's call;`
routes! {
    |shared, session, ctx, caller, id|
    Chat: "POST" "/v1/chat/completions", (KeyOrGuest, Plan, CHAT), "chat"
        => fronts::chat_completions::handle(shared, session, ctx, caller).await;
    Messages: "POST" "/v1/messages", (KeyOrGuest, Plan, MESSAGES), "messages"
        => fronts::messages::handle(shared, session, ctx, caller).await;
    CountTokens: "POST" "/v1/messages/count_tokens", (KeyOrGuest, Plan, MESSAGES), "messages"
        => fronts::messages::count_tokens(shared, session, ctx, caller).await;
    Completions: "POST" "/v1/completions", (KeyOrGuest, Plan, COMPLETIONS), "completions"
        => fronts::completions::handle(shared, session, ctx, caller).await;
    GeminiGenerate: "POST" "/v1beta/models/{id}", (KeyOrGuest, Plan, GEMINI), "gemini"
        => fronts::gemini::handle(shared, session, ctx, caller, id).await;
    // Google's SDKs use the stable version's path too when given a base URL.
    GeminiGenerateV1: "POST" "/v1/models/{id}", (KeyOrGuest, Plan, GEMINI), "gemini"
        => fronts::gemini::handle(shared, session, ctx, caller, id).await;
    GeminiModels: "GET" "/v1beta/models", (Anyone, Guests, GEMINI), "models"
        => fronts::gemini::models(shared, session, ctx).await;
    GeminiModel: "GET" "/v1beta/models/{id}", (Anyone, Guests, GEMINI), "models"
        => fronts::gemini::model(shared, session, ctx, id).await;
    Embeddings: "POST" "/v1/embeddings", (KeyOrGuest, Plan, EMBEDDINGS), "embeddings"
        => fronts::embeddings::handle(shared, session, ctx, caller).await;
    Responses: "POST" "/v1/responses", (KeyOrGuest, Plan, RESPONSES), "responses"
        => fronts::responses::handle(shared, session, ctx, caller).await;
    GetResponse: "GET" "/v1/responses/{id}", (Key, Free, RESPONSES), "responses"
        => fronts::responses::stored::get(shared, session, ctx, caller, id).await;
    DeleteResponse: "DELETE" "/v1/responses/{id}", (Key, Free, RESPONSES), "responses"
        => fronts::responses::stored::delete(shared, session, ctx, caller, id).await;
    ResponseInputItems: "GET" "/v1/responses/{id}/input_items", (Key, Free, RESPONSES), "responses"
        => fronts::responses::stored::input_items(shared, session, ctx, caller, id).await;
    Models: "GET" "/v1/models", (Anyone, Guests, OWN), "models"
        => models::models(shared, session, ctx, caller).await;
    Pricing: "GET" "/v1/models/pricing", (Anyone, Guests, OWN), "pricing"
        => models::handle(shared, session, ctx, Listing::Pricing).await;
    Changelog: "GET" "/v1/models/changelog", (Anyone, Free, OWN), "pricing"
        => models::handle(shared, session, ctx, Listing::Changelog).await;
    // The built-in demo provider, for the gateway's own `demo` pools (loopback only).
    Demo: "POST" "/_demo/v1/chat/completions", (Open, Free, OWN), "demo"
        => demo::chat(shared, session, ctx).await;
    Healthz: "GET" "/healthz", (Open, Free, OWN), "healthz" => probes::healthz(session, ctx).await;
    // The pricing page and the dashboard app (one page; the script renders the route).
    Home: "GET" "/", (Open, Free, OWN), "dashboard" => dashboard::page(shared, session, ctx).await;
    PricingPage: "GET" "/pricing", (Open, Free, OWN), "dashboard"
        => dashboard::page(shared, session, ctx).await;
    Dashboard: "GET" "/dashboard", (Open, Free, OWN), "dashboard"
        => dashboard::page(shared, session, ctx).await;
    DashboardPage: "GET" "/dashboard/{id}", (Open, Free, OWN), "dashboard"
        => dashboard::page(shared, session, ctx).await;
    Asset: "GET" "/assets/{id}", (Open, Free, OWN), "dashboard"
        => dashboard::asset(shared, session, ctx, id).await;
    Readyz: "GET" "/readyz", (Open, Free, OWN), "readyz" => probes::readyz(shared, session, ctx).await;
    Signup: "POST" "/api/v1/auth/signup", (Open, Signups, OWN), "api"
        => accounts::signup::signup(shared, session, ctx).await;
    Login: "POST" "/api/v1/auth/login", (Open, Logins, OWN), "api"
        => accounts::login::login(shared, session, ctx).await;
    Logout: "POST" "/api/v1/auth/logout", (Open, Free, OWN), "api"
        => accounts::login::logout(shared, session, ctx).await;
    Me: "GET" "/api/v1/auth/me", (KeyOrSession, Free, OWN), "api"
        => accounts::me::me(shared, session, ctx, caller).await;
    ListKeys: "GET" "/api/v1/keys", (KeyOrSession, Free, OWN), "api"
        => accounts::keys::list_keys(shared, session, ctx, caller).await;
    CreateKey: "POST" "/api/v1/keys", (KeyOrSession, Free, OWN), "api"
        => accounts::keys::create_key(shared, session, ctx, caller).await;
    UpdateKey: "PATCH" "/api/v1/keys/{id}", (KeyOrSession, Free, OWN), "api"
        => accounts::keys::update_key(shared, session, ctx, caller, id).await;
    RotateKey: "POST" "/api/v1/keys/{id}/rotate", (KeyOrSession, Free, OWN), "api"
        => accounts::keys::rotate_key(shared, session, ctx, caller, id).await;
    RevokeKey: "DELETE" "/api/v1/keys/{id}", (KeyOrSession, Free, OWN), "api"
        => accounts::keys::revoke_key(shared, session, ctx, caller, id).await;
    Usage: "GET" "/api/v1/usage", (KeyOrSession, Free, OWN), "api"
        => accounts::usage::usage(shared, session, ctx, caller).await;
    Orgs: "GET" "/api/v1/orgs", (KeyOrSession, Free, OWN), "api"
        => orgs::list(shared, session, ctx, caller).await;
    CreateOrg: "POST" "/api/v1/orgs", (KeyOrSession, Free, OWN), "api"
        => orgs::create(shared, session, ctx, caller).await;
    Org: "GET" "/api/v1/orgs/{id}", (KeyOrSession, Free, OWN), "api"
        => orgs::get(shared, session, ctx, caller, id).await;
    OrgMembers: "GET" "/api/v1/orgs/{id}/members", (KeyOrSession, Free, OWN), "api"
        => orgs::members(shared, session, ctx, caller, id).await;
    OrgRole: "PATCH" "/api/v1/orgs/{id}/members", (KeyOrSession, Free, OWN), "api"
        => orgs::set_role(shared, session, ctx, caller, id).await;
    OrgRemove: "POST" "/api/v1/orgs/{id}/members/remove", (KeyOrSession, Free, OWN), "api"
        => orgs::remove(shared, session, ctx, caller, id).await;
    OrgCaps: "PUT" "/api/v1/orgs/{id}/caps", (KeyOrSession, Free, OWN), "api"
        => orgs::set_cap(shared, session, ctx, caller, id).await;
    OrgUsage: "GET" "/api/v1/orgs/{id}/usage", (KeyOrSession, Free, OWN), "api"
        => orgs::usage::usage(shared, session, ctx, caller, id).await;
    OrgModels: "PUT" "/api/v1/orgs/{id}/models", (KeyOrSession, Free, OWN), "api"
        => orgs::set_models(shared, session, ctx, caller, id).await;
    OrgSso: "PUT" "/api/v1/orgs/{id}/sso", (KeyOrSession, Free, OWN), "api"
        => orgs::sso::set(shared, session, ctx, caller, id).await;
    OrgSsoShow: "GET" "/api/v1/orgs/{id}/sso", (KeyOrSession, Free, OWN), "api"
        => orgs::sso::show(shared, session, ctx, caller, id).await;
    // Single sign-on through an organization's OpenID provider: the browser's way in.
    SsoStart: "GET" "/api/v1/sso/{id}/start", (Open, Logins, OWN), "api"
        => orgs::sso::start(shared, session, ctx, id).await;
    SsoCallback: "GET" "/api/v1/sso/callback", (Open, Logins, OWN), "api"
        => orgs::sso::callback(shared, session, ctx).await;
    OrgLeave: "POST" "/api/v1/orgs/{id}/leave", (KeyOrSession, Free, OWN), "api"
        => orgs::leave(shared, session, ctx, caller, id).await;
    OrgTransfer: "POST" "/api/v1/orgs/{id}/transfer", (KeyOrSession, Free, OWN), "api"
        => orgs::transfer(shared, session, ctx, caller, id).await;
    OrgInvite: "POST" "/api/v1/orgs/{id}/invitations", (KeyOrSession, Free, OWN), "api"
        => orgs::invitations::invite(shared, session, ctx, caller, id).await;
    OrgInvitations: "GET" "/api/v1/orgs/{id}/invitations", (KeyOrSession, Free, OWN), "api"
        => orgs::invitations::list(shared, session, ctx, caller, id).await;
    OrgWithdraw: "POST" "/api/v1/orgs/{id}/invitations/withdraw", (KeyOrSession, Free, OWN), "api"
        => orgs::invitations::withdraw(shared, session, ctx, caller, id).await;
    AcceptInvitation: "POST" "/api/v1/invitations/accept", (KeyOrSession, Free, OWN), "api"
        => orgs::invitations::accept(shared, session, ctx, caller).await;
    // The request log (src/request_log): records, payloads where turned on, the switches.
    Requests: "GET" "/api/v1/requests", (KeyOrSession, Free, OWN), "api"
        => request_log::api::list(shared, session, ctx, caller).await;
    Request: "GET" "/api/v1/requests/{id}", (KeyOrSession, Free, OWN), "api"
        => request_log::api::get(shared, session, ctx, caller, id).await;
    AdminRequests: "GET" "/api/v1/admin/requests", (Admin, Free, OWN), "api"
        => request_log::api::admin_list(shared, session, ctx).await;
    AdminRequest: "GET" "/api/v1/admin/requests/{id}", (Admin, Free, OWN), "api"
        => request_log::api::admin_get(shared, session, ctx, id).await;
    AccountSettings: "PATCH" "/api/v1/auth/me", (KeyOrSession, Free, OWN), "api"
        => request_log::settings::account(shared, session, ctx, caller).await;
    OrgSettings: "PATCH" "/api/v1/orgs/{id}", (KeyOrSession, Free, OWN), "api"
        => orgs::settings::patch(shared, session, ctx, caller, id).await;
    AdminAccount: "GET" "/api/v1/admin/accounts/{id}", (Admin, Free, OWN), "api"
        => admin::account(shared, session, ctx, id).await;
    AdminCredits: "POST" "/api/v1/admin/accounts/{id}/credits", (Admin, Free, OWN), "api"
        => admin::credits(shared, session, ctx, id).await;
    AdminPlan: "PUT" "/api/v1/admin/accounts/{id}/plan", (Admin, Free, OWN), "api"
        => admin::plan(shared, session, ctx, id).await;
    McpRegister: "POST" "/api/v1/mcp/services", (KeyOrSession, Free, OWN), "api"
        => mcp::developer::register(shared, session, ctx, Some(caller.account()?)).await;
    McpListOwn: "GET" "/api/v1/mcp/services", (KeyOrSession, Free, OWN), "api"
        => mcp::developer::list_own(shared, session, ctx, caller).await;
    McpUpdate: "PATCH" "/api/v1/mcp/services/{id}", (KeyOrSession, Free, OWN), "api"
        => mcp::developer::update(shared, session, ctx, caller, id).await;
    McpEarnings: "GET" "/api/v1/mcp/earnings", (KeyOrSession, Free, OWN), "api"
        => mcp::developer::earnings(shared, session, ctx, caller).await;
    AdminMcpList: "GET" "/api/v1/admin/mcp/services", (Admin, Free, OWN), "api"
        => mcp::operator::admin_list(shared, session, ctx).await;
    // A first-party server: the owner is named in the body, and no price cap binds it.
    AdminMcpRegister: "POST" "/api/v1/admin/mcp/services", (Admin, Free, OWN), "api"
        => mcp::developer::register(shared, session, ctx, None).await;
    AdminMcpApprove: "POST" "/api/v1/admin/mcp/services/{id}/approve", (Admin, Free, OWN), "api"
        => mcp::operator::admin_move(shared, session, ctx, id, Move::Approve).await;
    AdminMcpReject: "POST" "/api/v1/admin/mcp/services/{id}/reject", (Admin, Free, OWN), "api"
        => mcp::operator::admin_move(shared, session, ctx, id, Move::Reject).await;
    AdminMcpSuspend: "POST" "/api/v1/admin/mcp/services/{id}/suspend", (Admin, Free, OWN), "api"
        => mcp::operator::admin_move(shared, session, ctx, id, Move::Suspend).await;
    AdminMcpResume: "POST" "/api/v1/admin/mcp/services/{id}/resume", (Admin, Free, OWN), "api"
        => mcp::operator::admin_move(shared, session, ctx, id, Move::Resume).await;
    BillingCheckout: "POST" "/api/v1/billing/checkout", (KeyOrSession, Free, OWN), "api"
        => payments::checkout::checkout(shared, session, ctx, caller).await;
    Plans: "GET" "/api/v1/plans", (Open, Free, OWN), "api"
        => payments::plans::plans(shared, session, ctx).await;
    AdminFind: "GET" "/api/v1/admin/accounts", (Admin, Free, OWN), "api"
        => admin::find(shared, session, ctx).await;
    BillingHistory: "GET" "/api/v1/billing", (KeyOrSession, Free, OWN), "api"
        => payments::history(shared, session, ctx, caller).await;
    BillingPortal: "POST" "/api/v1/billing/portal", (KeyOrSession, Free, OWN), "api"
        => payments::portal(shared, session, ctx, caller).await;
    // Signed by Stripe, checked by the handler over the raw body.
    BillingWebhook: "POST" "/api/v1/billing/webhook", (Open, Free, OWN), "api"
        => payments::webhook::webhook(shared, session, ctx).await;
    AdminUnclaimed: "GET" "/api/v1/admin/billing/unclaimed", (Admin, Free, OWN), "api"
        => payments::unclaimed::list(shared, session, ctx).await;
    AdminAssign: "POST" "/api/v1/admin/billing/unclaimed/{id}/assign", (Admin, Free, OWN), "api"
        => payments::unclaimed::assign(shared, session, ctx, id).await;
    // OAuth 2.1 for MCP clients (src/oauth): discovery, registration, authorization, tokens.
    // Registration writes a row per call: counted per address like logins.
    OAuthResource: "GET" "/.well-known/oauth-protected-resource", (Open, Free, OWN), "oauth"
        => oauth::metadata::protected_resource(shared, session, ctx, None).await;
    OAuthResourceAll: "GET" "/.well-known/oauth-protected-resource/mcp", (Open, Free, OWN), "oauth"
        => oauth::metadata::protected_resource(shared, session, ctx, None).await;
    OAuthResourceOne: "GET" "/.well-known/oauth-protected-resource/mcp/{id}", (Open, Free, OWN), "oauth"
        => oauth::metadata::protected_resource(shared, session, ctx, Some(id)).await;
    OAuthServer: "GET" "/.well-known/oauth-authorization-server", (Open, Free, OWN), "oauth"
        => oauth::metadata::authorization_server(shared, session, ctx).await;
    OpenIdConfiguration: "GET" "/.well-known/openid-configuration", (Open, Free, OWN), "oauth"
        => oauth::metadata::authorization_server(shared, session, ctx).await;
    OAuthRegister: "POST" "/oauth/register", (Open, Logins, OWN), "oauth"
        => oauth::register::register(shared, session, ctx).await;
    OAuthAuthorize: "GET" "/oauth/authorize", (Open, Free, OWN), "oauth"
        => oauth::authorize::start(shared, session, ctx).await;
    OAuthToken: "POST" "/oauth/token", (Open, Free, OWN), "oauth"
        => oauth::token::token(shared, session, ctx).await;
    OAuthRevoke: "POST" "/oauth/revoke", (Open, Free, OWN), "oauth"
        => oauth::token::revoke(shared, session, ctx).await;
    OAuthConsent: "GET" "/api/v1/oauth/authorize", (KeyOrSession, Free, OWN), "api"
        => oauth::authorize::describe(shared, session, ctx, caller).await;
    OAuthDecide: "POST" "/api/v1/oauth/authorize", (KeyOrSession, Free, OWN), "api"
        => oauth::authorize::decide(shared, session, ctx, caller).await;
    OAuthGrants: "GET" "/api/v1/oauth/grants", (KeyOrSession, Free, OWN), "api"
        => oauth::grants::list(shared, session, ctx, caller).await;
    OAuthRevokeGrant: "DELETE" "/api/v1/oauth/grants/{id}", (KeyOrSession, Free, OWN), "api"
        => oauth::grants::revoke(shared, session, ctx, caller, id).await;
    // Events sent to customers' endpoints (src/webhooks): an account's own or an
    // organization's (owners and admins).
    Webhooks: "GET" "/api/v1/webhooks", (KeyOrSession, Free, OWN), "api"
        => webhooks::api::list(shared, session, ctx, caller).await;
    CreateWebhook: "POST" "/api/v1/webhooks", (KeyOrSession, Free, OWN), "api"
        => webhooks::api::create(shared, session, ctx, caller).await;
    Webhook: "GET" "/api/v1/webhooks/{id}", (KeyOrSession, Free, OWN), "api"
        => webhooks::api::get(shared, session, ctx, caller, id).await;
    UpdateWebhook: "PATCH" "/api/v1/webhooks/{id}", (KeyOrSession, Free, OWN), "api"
        => webhooks::api::update(shared, session, ctx, caller, id).await;
    DeleteWebhook: "DELETE" "/api/v1/webhooks/{id}", (KeyOrSession, Free, OWN), "api"
        => webhooks::api::delete(shared, session, ctx, caller, id).await;
    TestWebhook: "POST" "/api/v1/webhooks/{id}/test", (KeyOrSession, Free, OWN), "api"
        => webhooks::api::test(shared, session, ctx, caller, id).await;
    WebhookDeliveries: "GET" "/api/v1/webhooks/{id}/deliveries", (KeyOrSession, Free, OWN), "api"
        => webhooks::api::deliveries(shared, session, ctx, caller, id).await;
    RotateWebhookSecret: "POST" "/api/v1/webhooks/{id}/rotate_secret", (KeyOrSession, Free, OWN), "api"
        => webhooks::api::rotate_secret(shared, session, ctx, caller, id).await;
    McpAll: "POST" "/mcp", (Mcp, PerToolCall, MCP), "mcp"
        => mcp::endpoint::handle(shared, session, ctx, caller, None).await;
    McpOne: "POST" "/mcp/{id}", (Mcp, PerToolCall, MCP), "mcp"
        => mcp::endpoint::handle(shared, session, ctx, caller, Some(id)).await;
}
