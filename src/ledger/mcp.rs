//! The tool marketplace's tables: registered tool servers (`mcp_services`) and the earnings
//! read from tool calls' usage rows. Tool calls themselves are settled by `credits.rs` (with
//! the developer's credit in the same transaction) or a lease round.

use std::collections::BTreeMap;

use serde_json::Value;
use sqlx::Row;

use tollgate_filters::mcp::ServiceState;

use super::store::{on_pool, Result, StoreError};
use super::Ledger;

/// A registered tool server.
#[derive(Debug, Clone)]
pub struct Service {
    pub id: String,
    pub slug: String,
    pub owner_id: String,
    pub name: Option<String>,
    pub description: Option<String>,
    pub upstream_url: String,
    /// Whole credits per call.
    pub default_credits: i64,
    pub status: ServiceState,
    pub first_party: bool,
    /// The upstream's tools as of the last check (a JSON array).
    pub tools: Value,
    /// Whole credits per call of the tools priced on their own; any other costs
    /// `default_credits`.
    pub tool_prices: BTreeMap<String, i64>,
    pub created_at: i64,
    pub updated_at: i64,
}

impl Service {
    /// Whether its tool list (as of the last check) has `tool`.
    pub fn has_tool(&self, tool: &str) -> bool {
        self.tool_names().any(|t| t == tool)
    }

    /// Its tools' names, as of the last check.
    pub fn tool_names(&self) -> impl Iterator<Item = &str> {
        self.tools
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["name"].as_str())
    }

    /// What one call of `tool` costs, in whole credits: its own price, else the service's.
    pub fn price_of(&self, tool: &str) -> i64 {
        self.tool_prices
            .get(tool)
            .copied()
            .unwrap_or(self.default_credits)
    }
}

/// The owner's change of a service: each `None` leaves that part as it is.
#[derive(Debug, Clone, Copy, Default)]
pub struct ServiceChange<'a> {
    pub price: Option<i64>,
    /// A new URL with its freshly checked tools (the service goes back to `pending`).
    pub url: Option<(&'a str, &'a Value)>,
    /// Replaces the per-tool prices whole (an empty map clears them).
    pub tool_prices: Option<&'a BTreeMap<String, i64>>,
}

const COLS: &str = "id, slug, owner_id, name, description, upstream_url, default_credits, status, first_party, tools, tool_prices, created_at, updated_at";

fn service_from<R: Row>(r: &R) -> Result<Service>
where
    for<'a> &'a str: sqlx::ColumnIndex<R>,
    for<'a> String: sqlx::Decode<'a, R::Database> + sqlx::Type<R::Database>,
    for<'a> Option<String>: sqlx::Decode<'a, R::Database> + sqlx::Type<R::Database>,
    for<'a> i64: sqlx::Decode<'a, R::Database> + sqlx::Type<R::Database>,
    for<'a> bool: sqlx::Decode<'a, R::Database> + sqlx::Type<R::Database>,
{
    let tools: String = r.try_get("tools")?;
    let tool_prices: Option<String> = r.try_get("tool_prices")?;
    Ok(Service {
        id: r.try_get("id")?,
        slug: r.try_get("slug")?,
        owner_id: r.try_get("owner_id")?,
        name: r.try_get("name")?,
        description: r.try_get("description")?,
        upstream_url: r.try_get("upstream_url")?,
        default_credits: r.try_get("default_credits")?,
        status: {
            let s: String = r.try_get("status")?;
            ServiceState::parse(&s)
                .ok_or_else(|| StoreError(format!("unknown service status `{s}`")))?
        },
        first_party: r.try_get("first_party")?,
        tools: serde_json::from_str(&tools).unwrap_or(Value::Array(Vec::new())),
        tool_prices: tool_prices
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default(),
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
    })
}

/// A developer's earnings from tool calls.
#[derive(Debug, Clone, Default)]
pub struct Earnings {
    pub total_credits: i64,
    pub total_calls: i64,
    /// Per tool, by service: slug, tool, paid calls, µcr earned.
    pub tools: Vec<(String, String, i64, i64)>,
    /// Latest paid calls: request id, slug, tool, µcr earned, time (ms).
    pub recent: Vec<(String, String, String, i64, i64)>,
}

impl Ledger {
    /// Inserts a service; `false` when its slug is taken.
    pub async fn create_service(&self, s: &Service) -> Result<bool> {
        let sql = format!("INSERT INTO mcp_services ({COLS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) ON CONFLICT (slug) DO NOTHING");
        let tools = s.tools.to_string();
        let prices = prices_json(&s.tool_prices);
        on_pool!(self, p => {
            let done = sqlx::query(&sql)
                .bind(&s.id).bind(&s.slug).bind(&s.owner_id).bind(&s.name).bind(&s.description)
                .bind(&s.upstream_url).bind(s.default_credits).bind(s.status.as_str()).bind(s.first_party)
                .bind(&tools).bind(&prices).bind(s.created_at).bind(s.updated_at)
                .execute(p).await?;
            Ok(done.rows_affected() == 1)
        })
    }

    pub async fn service(&self, slug: &str) -> Result<Option<Service>> {
        let sql = format!("SELECT {COLS} FROM mcp_services WHERE slug = $1");
        on_pool!(self, p => {
            match sqlx::query(&sql).bind(slug).fetch_optional(p).await? {
                Some(r) => Ok(Some(service_from(&r)?)),
                None => Ok(None),
            }
        })
    }

    /// Services by owner, or by status (`None`: all), oldest first.
    pub async fn services(
        &self,
        owner: Option<&str>,
        status: Option<ServiceState>,
    ) -> Result<Vec<Service>> {
        let status = status.map(ServiceState::as_str);
        let sql = format!("SELECT {COLS} FROM mcp_services WHERE ($1 IS NULL OR owner_id = $1) AND ($2 IS NULL OR status = $2) ORDER BY created_at, slug");
        on_pool!(self, p => {
            let rows = sqlx::query(&sql).bind(owner).bind(status).fetch_all(p).await?;
            rows.iter().map(service_from).collect()
        })
    }

    /// Moves a service from one of `from` to `to`; `None` when it is in none of them (or
    /// does not exist). `tools`, when given, replaces the cached tool list in the same write.
    pub async fn set_service_status(
        &self,
        slug: &str,
        from: &[ServiceState],
        to: ServiceState,
        tools: Option<&Value>,
        now: i64,
    ) -> Result<Option<Service>> {
        let placeholders: Vec<String> = (0..from.len()).map(|i| format!("${}", i + 5)).collect();
        let sql = format!(
            "UPDATE mcp_services SET status = $1, updated_at = $2, tools = COALESCE($3, tools) WHERE slug = $4 AND status IN ({}) RETURNING {COLS}",
            placeholders.join(", ")
        );
        let tools = tools.map(Value::to_string);
        on_pool!(self, p => {
            let mut q = sqlx::query(&sql).bind(to.as_str()).bind(now).bind(&tools).bind(slug);
            for f in from {
                q = q.bind(f.as_str());
            }
            match q.fetch_all(p).await?.into_iter().next() {
                Some(r) => Ok(Some(service_from(&r)?)),
                None => Ok(None),
            }
        })
    }

    /// The owner's change of price, per-tool prices and/or URL, in one statement. `None` when
    /// the owner has no such service.
    pub async fn update_service(
        &self,
        slug: &str,
        owner: &str,
        change: ServiceChange<'_>,
        now: i64,
    ) -> Result<Option<Service>> {
        let sql = format!(
            "UPDATE mcp_services SET default_credits = COALESCE($1, default_credits), upstream_url = COALESCE($2, upstream_url), \
             tools = COALESCE($3, tools), status = CASE WHEN $2 IS NULL THEN status ELSE 'pending' END, updated_at = $4, \
             tool_prices = COALESCE($7, tool_prices) WHERE slug = $5 AND owner_id = $6 RETURNING {COLS}"
        );
        let (u, tools) = match change.url {
            Some((u, t)) => (Some(u), Some(t.to_string())),
            None => (None, None),
        };
        let prices = change.tool_prices.map(prices_json);
        on_pool!(self, p => {
            match sqlx::query(&sql).bind(change.price).bind(u).bind(&tools).bind(now).bind(slug).bind(owner).bind(&prices)
                .fetch_all(p).await?.into_iter().next() {
                Some(r) => Ok(Some(service_from(&r)?)),
                None => Ok(None),
            }
        })
    }

    /// A developer's earnings: paid tool calls of their services, from the usage rows.
    pub async fn earnings(&self, developer: &str) -> Result<Earnings> {
        on_pool!(self, p => {
            let rows = sqlx::query("SELECT tool_slug, tool_name, COUNT(*) AS n, CAST(COALESCE(SUM(developer_credits), 0) AS BIGINT) AS earned FROM usage \
                                    WHERE developer_id = $1 AND kind = 'tool' AND credits > 0 GROUP BY tool_slug, tool_name ORDER BY tool_slug, tool_name")
                .bind(developer).fetch_all(p).await?;
            let mut e = Earnings::default();
            for r in &rows {
                let (slug, tool): (Option<String>, Option<String>) = (r.try_get("tool_slug")?, r.try_get("tool_name")?);
                let (n, earned): (i64, i64) = (r.try_get("n")?, r.try_get("earned")?);
                e.total_calls += n;
                e.total_credits += earned;
                e.tools.push((slug.unwrap_or_default(), tool.unwrap_or_default(), n, earned));
            }
            let rows = sqlx::query("SELECT request_id, tool_slug, tool_name, developer_credits, created_at FROM usage \
                                    WHERE developer_id = $1 AND kind = 'tool' AND credits > 0 ORDER BY created_at DESC, request_id DESC LIMIT 50")
                .bind(developer).fetch_all(p).await?;
            for r in &rows {
                e.recent.push((
                    r.try_get("request_id")?,
                    r.try_get::<Option<String>, _>("tool_slug")?.unwrap_or_default(),
                    r.try_get::<Option<String>, _>("tool_name")?.unwrap_or_default(),
                    r.try_get::<Option<i64>, _>("developer_credits")?.unwrap_or_default(),
                    r.try_get("created_at")?,
                ));
            }
            Ok(e)
        })
    }
}

/// Per-tool prices as stored: a JSON object of tool name to whole credits.
fn prices_json(prices: &BTreeMap<String, i64>) -> String {
    serde_json::to_string(prices).unwrap_or_else(|_| "{}".to_owned())
}
