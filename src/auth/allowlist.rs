//! A key's model allowlist (`allowed_models`: ids, aliases or tiers) as the models it lets the
//! key use: a model outside it does not exist for that key (404 `model_not_found`, left out of
//! `/v1/models`), and failover never leaves it.

use tollgate_filters::route::{Catalog, ModelKind, Target};
use tollgate_filters::{ErrorKind, GatewayError};

/// The catalog indices the entries name at `now`: a model by id or alias, every model of a
/// tier. `Err(i)`: entry `i` names nothing.
pub fn allowed(catalog: &Catalog, entries: &[String], now: i64) -> Result<Vec<usize>, usize> {
    let mut out = Vec::new();
    for (n, e) in entries.iter().enumerate() {
        match catalog.resolve(e, now).map_err(|_| n)?.target {
            Target::Model(i) => out.push(i),
            Target::Tier(t) => out.extend(
                catalog
                    .models()
                    .iter()
                    .enumerate()
                    .filter(|(_, m)| m.kind == ModelKind::Chat && m.tier == t)
                    .map(|(i, _)| i),
            ),
        }
    }
    Ok(out)
}

/// What a key outside its allowlist is told about `name`: that it does not exist.
pub fn not_found(name: &str) -> GatewayError {
    GatewayError::new(
        ErrorKind::ModelNotFound,
        format!("model `{name}` does not exist; see GET /v1/models"),
    )
}
