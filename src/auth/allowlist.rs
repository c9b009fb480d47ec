//! A key's model allowlist (`allowed_models`: ids, aliases or tiers) as the models it lets the
//! key use: a model outside it does not exist for that key (404 `model_not_found`, left out of
//! `/v1/models`), and failover never leaves it.

use tollgate_filters::route::{Catalog, ModelKind, Target};
use tollgate_filters::{ErrorKind, GatewayError};

use crate::ledger::KeyAuth;

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

/// The catalog indices a key may use: its own allowlist's, within its organization's when
/// it is an organization key with one; `None`: every model.
pub fn of_key(catalog: &Catalog, key: &KeyAuth, now: i64) -> Option<Vec<usize>> {
    let org = key
        .org_member
        .as_ref()
        .and_then(|m| m.allowed_models.as_ref());
    let resolve = |list: &[String]| allowed(catalog, list, now).unwrap_or_default();
    match (key.allowed_models.as_deref(), org) {
        (None, None) => None,
        (Some(k), None) => Some(resolve(k)),
        (None, Some(o)) => Some(resolve(o)),
        (Some(k), Some(o)) => {
            let o = resolve(o);
            Some(resolve(k).into_iter().filter(|i| o.contains(i)).collect())
        }
    }
}

/// What a key outside its allowlist is told about `name`: that it does not exist.
pub fn not_found(name: &str) -> GatewayError {
    GatewayError::new(
        ErrorKind::ModelNotFound,
        format!("model `{name}` does not exist; see GET /v1/models"),
    )
}
