//! What a verb prints: a text report laid out like mqadmin's (columns headed `#Name`), or with
//! `--json` one JSON document for scripts. Times are printed in UTC as
//! `yyyy-MM-dd HH:mm:ss,SSS` (mqadmin prints the same shape in the local zone).

use std::fmt::Write as _;

/// The result of a verb: its text and its JSON form.
pub struct Report {
    pub text: String,
    pub json: serde_json::Value,
}

/// Columns sized to their widest cell, two spaces apart, headers as given (`#Broker Name`).
pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(headers: &[&str]) -> Self {
        Table {
            headers: headers.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        debug_assert_eq!(
            cells.len(),
            self.headers.len(),
            "a row has one cell per column"
        );
        self.rows.push(cells);
    }

    pub fn render(&self) -> String {
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let mut out = String::new();
        for line in std::iter::once(&self.headers).chain(&self.rows) {
            let mut text = String::new();
            for (i, (cell, w)) in line.iter().zip(&widths).enumerate() {
                if i + 1 == line.len() {
                    text.push_str(cell);
                } else {
                    let _ = write!(text, "{cell:<w$}  ");
                }
            }
            out.push_str(text.trim_end());
            out.push('\n');
        }
        out
    }
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// The inverse of [`civil_from_days`].
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `yyyy-MM-dd HH:mm:ss,SSS` in UTC.
pub fn format_time_ms(ms: i64) -> String {
    let (days, rem) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    let (y, mo, d) = civil_from_days(days);
    let (h, mi, s, milli) = (
        rem / 3_600_000,
        rem / 60_000 % 60,
        rem / 1000 % 60,
        rem % 1000,
    );
    format!("{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02},{milli:03}")
}

/// A timestamp as mqadmin's `resetOffsetByTime -s` takes it: `now`, milliseconds since the
/// epoch, or `yyyy-MM-dd#HH:mm:ss:SSS` (read as UTC).
pub fn parse_time_ms(text: &str, now_ms: i64) -> Result<i64, String> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("now") {
        return Ok(now_ms);
    }
    if let Ok(ms) = text.parse::<i64>() {
        return Ok(ms);
    }
    let bad = || format!("{text:?} is not now, milliseconds or yyyy-MM-dd#HH:mm:ss:SSS");
    let (date, time) = text.split_once('#').ok_or_else(bad)?;
    let date: Vec<&str> = date.split('-').collect();
    let time: Vec<&str> = time.split(':').collect();
    if date.len() != 3 || time.len() != 4 {
        return Err(bad());
    }
    let num = |s: &str| s.parse::<i64>().map_err(|_| bad());
    let (y, mo, d) = (num(date[0])?, num(date[1])?, num(date[2])?);
    let (h, mi, s, milli) = (num(time[0])?, num(time[1])?, num(time[2])?, num(time[3])?);
    if !(1..=12).contains(&mo)
        || !(1..=31).contains(&d)
        || h > 23
        || mi > 59
        || s > 59
        || milli > 999
    {
        return Err(bad());
    }
    let days = days_from_civil(y, mo as u32, d as u32);
    Ok(days * 86_400_000 + h * 3_600_000 + mi * 60_000 + s * 1000 + milli)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_round_trip_in_utc() {
        assert_eq!(format_time_ms(0), "1970-01-01 00:00:00,000");
        assert_eq!(format_time_ms(1_700_000_000_123), "2023-11-14 22:13:20,123");
        assert_eq!(
            parse_time_ms("2023-11-14#22:13:20:123", 0),
            Ok(1_700_000_000_123)
        );
        assert_eq!(parse_time_ms("now", 42), Ok(42));
        assert_eq!(parse_time_ms("1700000000000", 0), Ok(1_700_000_000_000));
        assert!(parse_time_ms("2023-13-01#00:00:00:000", 0).is_err());
        assert!(parse_time_ms("yesterday", 0).is_err());
    }

    #[test]
    fn tables_pad_to_the_widest_cell() {
        let mut t = Table::new(&["#A", "#Bee", "#C"]);
        t.row(vec!["long-value".into(), "1".into(), "x".into()]);
        assert_eq!(t.render(), "#A          #Bee  #C\nlong-value  1     x\n");
    }
}
