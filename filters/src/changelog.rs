//! The model changelog (SPEC.md Versioning: an alias change "is announced beforehand in a
//! changelog"): scheduled alias changes from the config, and the catalog's deprecations and
//! retirements, as dated entries, newest first. An alias change must be announced at least
//! [`MIN_ALIAS_NOTICE_SECS`] before it takes effect, and is listed from its announcement on.

use serde_json::{json, Value};

pub use crate::route::AliasChange;
use crate::route::Catalog;
use crate::time::format_date;

/// Two weeks: a client pinned to an alias has two weekly release cycles to test the new target.
pub const MIN_ALIAS_NOTICE_SECS: i64 = 14 * 86_400;

/// The changelog at `now`: `{kind, date, at, in_effect, text, …}` objects, newest first.
pub fn entries(catalog: &Catalog, now: i64) -> Vec<Value> {
    let mut out: Vec<(i64, Value)> = Vec::new();
    for c in catalog
        .alias_changes()
        .iter()
        .filter(|c| c.announced <= now)
    {
        // What the alias named just before this change.
        let from = catalog.alias_target(&c.alias, c.at - 1);
        let verb = if now >= c.at {
            "now points"
        } else {
            "will point"
        };
        let text = match from {
            Some(f) => format!(
                "`{}` {verb} at `{}` (was `{f}`) from {}",
                c.alias,
                c.to,
                stamp(c.at)
            ),
            None => format!("`{}` {verb} at `{}` from {}", c.alias, c.to, stamp(c.at)),
        };
        out.push((
            c.at,
            json!({"kind": "alias_change", "date": format_date(c.at), "at": c.at, "in_effect": now >= c.at,
                   "alias": c.alias, "from": from, "to": c.to, "announced": format_date(c.announced), "text": text}),
        ));
    }
    for m in catalog.models() {
        let rep = m
            .replacement
            .as_ref()
            .map(|r| format!("; use `{r}` instead"))
            .unwrap_or_default();
        if let Some(d) = m.deprecated_at {
            let text = format!("`{}` is deprecated from {}{rep}", m.id, format_date(d));
            out.push((d, json!({"kind": "deprecation", "date": format_date(d), "at": d, "in_effect": now >= d,
                               "model": m.id, "replacement": m.replacement, "text": text})));
        }
        if let Some(r) = m.retires_at {
            let text = format!("`{}` retires on {}{rep}", m.id, format_date(r));
            out.push((
                r,
                json!({"kind": "retirement", "date": format_date(r), "at": r, "in_effect": now >= r,
                               "model": m.id, "replacement": m.replacement, "text": text}),
            ));
        }
    }
    out.sort_by_key(|e| std::cmp::Reverse(e.0));
    out.into_iter().map(|(_, v)| v).collect()
}

/// A date, with the time of day when it is not midnight UTC.
fn stamp(t: i64) -> String {
    let secs = t.rem_euclid(86_400);
    if secs == 0 {
        format_date(t)
    } else {
        format!(
            "{} {:02}:{:02}:{:02} UTC",
            format_date(t),
            secs / 3600,
            secs % 3600 / 60,
            secs % 60
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::parse_instant;

    #[test]
    fn instants_are_dates_or_utc_times() {
        assert_eq!(parse_instant("2027-03-01"), Some(1_803_859_200));
        assert_eq!(
            parse_instant("2027-03-01T01:02:03Z"),
            Some(1_803_859_200 + 3723)
        );
        for bad in [
            "2027-03-01T25:00:00Z",
            "2027-03-01T01:02:03",
            "2027-03-01 01:02:03Z",
            "2027-3-1",
            "x",
        ] {
            assert_eq!(parse_instant(bad), None, "{bad}");
        }
    }

    #[test]
    fn an_alias_switches_at_its_time_and_the_changelog_lists_it_newest_first() {
        let c = Catalog::new(Vec::new(), vec![("latest".into(), "a".into())]).with_changes(vec![
            AliasChange {
                alias: "latest".into(),
                to: "b".into(),
                at: 1000,
                announced: 0,
            },
            AliasChange {
                alias: "latest".into(),
                to: "c".into(),
                at: 5000,
                announced: 4000,
            },
        ]);
        assert_eq!(c.alias_target("latest", 999), Some("a"));
        assert_eq!(c.alias_target("latest", 1000), Some("b"));
        assert_eq!(c.alias_target("latest", 5000), Some("c"));
        assert_eq!(c.aliases_at(2000), vec![("latest", "b")]);
        // At 2000 the second change is not announced yet.
        let e = entries(&c, 2000);
        assert_eq!(e.len(), 1);
        assert_eq!(
            (
                e[0]["from"].as_str(),
                e[0]["to"].as_str(),
                e[0]["in_effect"].as_bool()
            ),
            (Some("a"), Some("b"), Some(true))
        );
        let e = entries(&c, 4500);
        assert_eq!(e.len(), 2);
        assert_eq!(
            (
                e[0]["from"].as_str(),
                e[0]["to"].as_str(),
                e[0]["in_effect"].as_bool()
            ),
            (Some("b"), Some("c"), Some(false))
        );
        assert!(e[0]["text"].as_str().unwrap().contains("will point"));
    }
}
