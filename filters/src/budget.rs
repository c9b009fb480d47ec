//! A key's budget period (UTC): when the current one began and when the next begins, so that
//! every instance computes the same period from the same clock reading.

use crate::time::{civil_from_days, days_from_civil};

const DAY_MS: i64 = 86_400_000;

/// How often a key's budget starts over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Period {
    Day,
    /// Weeks start on Monday, 00:00 UTC (ISO 8601).
    Week,
    /// Months start on the 1st, 00:00 UTC.
    Month,
    /// Never: a cap on everything the key ever spends.
    Lifetime,
}

impl Period {
    pub fn parse(s: &str) -> Option<Period> {
        match s {
            "day" => Some(Period::Day),
            "week" => Some(Period::Week),
            "month" => Some(Period::Month),
            "lifetime" => Some(Period::Lifetime),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Period::Day => "day",
            Period::Week => "week",
            Period::Month => "month",
            Period::Lifetime => "lifetime",
        }
    }

    /// The start of the period holding `now_ms` (ms since the epoch; 0 for a lifetime).
    pub fn start(self, now_ms: i64) -> i64 {
        let day = now_ms.div_euclid(DAY_MS);
        match self {
            Period::Day => day * DAY_MS,
            // 1970-01-01 was a Thursday: day 0 is weekday 3 counted from Monday.
            Period::Week => (day - (day + 3).rem_euclid(7)) * DAY_MS,
            Period::Month => {
                let (y, m, _) = civil_from_days(day);
                days_from_civil(y, m, 1) * DAY_MS
            }
            Period::Lifetime => 0,
        }
    }

    /// When the next period starts (ms), `None` for a lifetime.
    pub fn next(self, now_ms: i64) -> Option<i64> {
        let start = self.start(now_ms);
        match self {
            Period::Day => Some(start + DAY_MS),
            Period::Week => Some(start + 7 * DAY_MS),
            Period::Month => {
                let (y, m, _) = civil_from_days(start.div_euclid(DAY_MS));
                let (y, m) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
                Some(days_from_civil(y, m, 1) * DAY_MS)
            }
            Period::Lifetime => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::parse_instant;

    fn at(s: &str) -> i64 {
        parse_instant(s).expect("a valid instant") * 1000
    }

    #[test]
    fn periods_start_at_utc_boundaries() {
        let now = at("2026-11-25T14:45:54Z"); // a Wednesday
        assert_eq!(Period::Day.start(now), at("2026-11-25T00:00:00Z"));
        assert_eq!(Period::Day.next(now), Some(at("2026-11-26T00:00:00Z")));
        assert_eq!(Period::Week.start(now), at("2026-11-23T00:00:00Z"));
        assert_eq!(Period::Week.next(now), Some(at("2026-11-30T00:00:00Z")));
        assert_eq!(Period::Month.start(now), at("2026-11-01T00:00:00Z"));
        assert_eq!(Period::Month.next(now), Some(at("2026-12-01T00:00:00Z")));
        let dec = at("2026-12-31T23:59:59Z");
        assert_eq!(Period::Month.next(dec), Some(at("2027-01-01T00:00:00Z")));
        assert_eq!(Period::Lifetime.start(now), 0);
        assert_eq!(Period::Lifetime.next(now), None);
    }

    #[test]
    fn a_boundary_belongs_to_the_period_it_starts() {
        let monday = at("2026-11-30T00:00:00Z");
        assert_eq!(Period::Week.start(monday), monday);
        assert_eq!(Period::Week.start(monday - 1), at("2026-11-23T00:00:00Z"));
        assert_eq!(Period::Day.start(monday - 1), at("2026-11-29T00:00:00Z"));
    }

    #[test]
    fn names_round_trip_and_strangers_are_refused() {
        for p in [Period::Day, Period::Week, Period::Month, Period::Lifetime] {
            assert_eq!(Period::parse(p.as_str()), Some(p));
        }
        assert_eq!(Period::parse("year"), None);
        assert_eq!(Period::parse("Day"), None);
    }
}
