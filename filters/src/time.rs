//! Civil dates without a date library: config dates (`2027-01-01`) to Unix seconds, and Unix
//! seconds to the IMF-fixdate of HTTP headers (`Sunset`).

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
pub(crate) fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m as i64 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

pub(crate) fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719468;
    let era = if z >= 0 { z } else { z - 146096 } / 146097;
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// `YYYY-MM-DD` (UTC midnight) to Unix seconds; `None` for anything else or an impossible date.
pub fn parse_date(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let y: i64 = s[0..4].parse().ok()?;
    let m: u32 = s[5..7].parse().ok()?;
    let d: u32 = s[8..10].parse().ok()?;
    if !(1..=12).contains(&m) || d == 0 {
        return None;
    }
    let days = days_from_civil(y, m, d);
    // Reject 2027-02-30 and friends: the date must round-trip.
    if civil_from_days(days) != (y, m, d) {
        return None;
    }
    Some(days * 86_400)
}

/// A config instant: `YYYY-MM-DD` (UTC midnight) or `YYYY-MM-DDTHH:MM:SSZ` (UTC).
pub fn parse_instant(s: &str) -> Option<i64> {
    if s.len() == 10 {
        return parse_date(s);
    }
    let (date, time) = s.split_once('T')?;
    let time = time.strip_suffix('Z')?;
    let day = parse_date(date)?;
    let mut parts = time.split(':');
    let mut next = |max: i64| -> Option<i64> {
        let p = parts.next()?;
        let v: i64 = p.parse().ok().filter(|_| p.len() == 2)?;
        (0..=max).contains(&v).then_some(v)
    };
    let (h, m, sec) = (next(23)?, next(59)?, next(59)?);
    if parts.next().is_some() {
        return None;
    }
    Some(day + h * 3600 + m * 60 + sec)
}

pub fn format_date(unix: i64) -> String {
    let (y, m, d) = civil_from_days(unix.div_euclid(86_400));
    format!("{y:04}-{m:02}-{d:02}")
}

/// RFC 9110 IMF-fixdate, e.g. `Mon, 01 Feb 2027 00:00:00 GMT`.
pub fn http_date(unix: i64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = unix.div_euclid(86_400);
    let secs = unix.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{}, {:02} {} {:04} {:02}:{:02}:{:02} GMT",
        DAYS[days.rem_euclid(7) as usize],
        d,
        MONTHS[(m - 1) as usize],
        y,
        secs / 3600,
        (secs % 3600) / 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_round_trip() {
        assert_eq!(parse_date("1970-01-01"), Some(0));
        assert_eq!(parse_date("2027-02-01"), Some(1_801_440_000));
        assert_eq!(format_date(1_801_440_000), "2027-02-01");
        assert_eq!(
            parse_date("2024-02-29").map(format_date).as_deref(),
            Some("2024-02-29")
        );
        for bad in [
            "2027-02-30",
            "2027-13-01",
            "27-01-01",
            "2027/01/01",
            "",
            "2027-00-10",
        ] {
            assert_eq!(parse_date(bad), None, "{bad}");
        }
    }

    #[test]
    fn http_dates() {
        assert_eq!(http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(http_date(1_801_440_000), "Mon, 01 Feb 2027 00:00:00 GMT");
        assert_eq!(
            http_date(1_801_440_000 + 3661),
            "Mon, 01 Feb 2027 01:01:01 GMT"
        );
    }
}
