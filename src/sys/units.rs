//! Durations, sizes and times as people type and read them: the one parser
//! of durations every option uses (`500ms`, `90s`, `2m30s`, `1h30m`, Slurm's
//! `HH:MM:SS`, a bare number of seconds), the one way durations, sizes
//! (`12.3 MiB`) and instants (RFC 3339 UTC, `2026-11-30T05:41:26Z`) are
//! printed. Nothing here sleeps or touches files.
//!
//! The duration parser is written by hand rather than with humantime:
//! humantime has no bare numbers, no fractions (`1.5s`) and no `HH:MM:SS`,
//! which jobs scripts and Slurm users need (instants are printed with it).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Why a text is not a duration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DurationError {
    /// Not one of the accepted forms.
    #[error(
        "`{0}` is not a duration: use 500ms, 20s, 2m30s, 1h30m, HH:MM:SS \
         (Slurm's form), or a bare number of seconds"
    )]
    NotADuration(String),

    /// More than a billion seconds.
    #[error("`{0}` is too long a duration")]
    TooLong(String),
}

/// Parses a duration: a bare number of seconds (`90`, `1.5`), numbers with
/// units in decreasing order (`500ms`, `20s`, `2m30s`, `1h30m`, `1d12h`;
/// units `ms`, `s`, `m`/`min`, `h`, `d`), or Slurm's clock forms
/// (`MM:SS`, `HH:MM:SS`, `D-HH:MM:SS`). The error says what was wrong and
/// shows the accepted forms.
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let t = text.trim();
    let secs = if t.contains(':') || t.contains('-') {
        clock(t).ok_or_else(|| DurationError::NotADuration(text.to_string()))?
    } else {
        with_units(t).ok_or_else(|| DurationError::NotADuration(text.to_string()))?
    };
    if !secs.is_finite() || secs > 1e9 {
        return Err(DurationError::TooLong(text.to_string()));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// `500ms`, `2m30s`, `90` (seconds): numbers with units, largest first.
fn with_units(t: &str) -> Option<f64> {
    let mut rest = t;
    let mut total = 0.0;
    let mut last_scale = f64::INFINITY;
    while !rest.is_empty() {
        let split = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, after) = rest.split_at(split);
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_len);
        let scale = match unit {
            "ms" => 0.001,
            // A bare number is seconds, but only on its own.
            "" if rest.len() == t.len() => 1.0,
            "s" => 1.0,
            "m" | "min" => 60.0,
            "h" => 3600.0,
            "d" => 86400.0,
            _ => return None,
        };
        if scale >= last_scale {
            return None;
        }
        total += number_value(number)? * scale;
        last_scale = scale;
        rest = next;
    }
    (!t.is_empty()).then_some(total)
}

/// Slurm's `MM:SS`, `HH:MM:SS`, `D-HH`, `D-HH:MM`, `D-HH:MM:SS`.
fn clock(t: &str) -> Option<f64> {
    let (days, hms) = match t.split_once('-') {
        Some((d, rest)) => (whole(d)?, Some(rest)),
        None => (0, None),
    };
    let parts: Vec<&str> = hms.unwrap_or(t).split(':').collect();
    let fields: Vec<u64> = parts.iter().map(|p| whole(p)).collect::<Option<_>>()?;
    let (h, m, s) = match (hms.is_some(), fields.as_slice()) {
        (true, [h]) => (*h, 0, 0),
        (true, [h, m]) => (*h, *m, 0),
        (_, [h, m, s]) => (*h, *m, *s),
        (false, [m, s]) => (0, *m, *s),
        _ => return None,
    };
    if m >= 60 || s >= 60 || (hms.is_some() && h >= 24) {
        return None;
    }
    Some((((days * 24 + h) * 60 + m) * 60 + s) as f64)
}

fn whole(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Digits with at most one dot (`f64::from_str` would also take `inf`,
/// `1e3` or `-1`).
fn number_value(n: &str) -> Option<f64> {
    if n.is_empty() || n == "." || n.matches('.').count() > 1 {
        return None;
    }
    n.parse().ok()
}

/// Formats a duration for messages, in the form [`parse_duration`] reads:
/// `500ms`, `20s`, `1.5s`, `2m`, `2m30s`, `1h30m`, `2h0m5s`.
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        return format!("{ms}ms");
    }
    if !ms.is_multiple_of(1000) && ms < 60_000 {
        return format!("{:.1}s", d.as_secs_f64());
    }
    let secs = d.as_secs();
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    match (h, m, s) {
        (0, 0, s) => format!("{s}s"),
        (0, m, 0) => format!("{m}m"),
        (0, m, s) => format!("{m}m{s}s"),
        (h, 0, 0) => format!("{h}h"),
        (h, m, 0) => format!("{h}h{m}m"),
        (h, m, s) => format!("{h}h{m}m{s}s"),
    }
}

/// A duration as Slurm's `--time` wants it: `HH:MM:SS`, or `D-HH:MM:SS`
/// from one day on (whole seconds, rounded up).
pub fn slurm_time(d: Duration) -> String {
    let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    let (days, h, m, s) = (secs / 86400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    if days > 0 {
        format!("{days}-{h:02}:{m:02}:{s:02}")
    } else {
        format!("{h:02}:{m:02}:{s:02}")
    }
}

/// A size for messages, in binary units: `512 bytes`, `1.5 KiB`,
/// `12.3 MiB` (exact byte counts belong in JSON outputs, not here).
pub fn format_bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["bytes", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} bytes")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

/// `n` with thousands separators: `5,314,629,216`.
pub fn group_digits(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// An amount of `count_name` as pages and messages write it: `ns` (the
/// summed periods of a clock event, or off-CPU time) as a time of about
/// three significant digits (`5.31 s`, `12.3 ms`, `456 µs`, `789 ns`),
/// other counts as whole numbers with thousands separators and their name
/// (`4,208 samples`).
pub fn format_amount(n: f64, count_name: &str) -> String {
    if count_name != "ns" {
        let sign = if n < -0.5 { "-" } else { "" };
        return format!(
            "{sign}{} {count_name}",
            group_digits(n.abs().round() as u64)
        );
    }
    let a = n.abs();
    // Each unit from where three significant digits round up to it.
    let (v, unit) = if a >= 999.5e6 {
        (n / 1e9, "s")
    } else if a >= 999.5e3 {
        (n / 1e6, "ms")
    } else if a >= 999.5 {
        (n / 1e3, "µs")
    } else {
        return format!("{n:.0} ns");
    };
    let digits = match v.abs() {
        x if x >= 999.5 => {
            let sign = if v < 0.0 { "-" } else { "" };
            return format!("{sign}{} {unit}", group_digits(x.round() as u64));
        }
        x if x >= 99.95 => 0,
        x if x >= 9.995 => 1,
        _ => 2,
    };
    format!("{v:.digits$} {unit}")
}

/// [`format_amount`] of a change, with its sign (`+1.20 ms`, `-3 samples`,
/// `0 ns`).
pub fn format_change(d: f64, count_name: &str) -> String {
    let s = format_amount(d, count_name);
    if d.round() > 0.0 {
        format!("+{s}")
    } else if d.round() == 0.0 {
        format!("0 {count_name}")
    } else {
        s
    }
}

/// The current time as an RFC 3339 UTC timestamp with second precision.
pub fn utc_timestamp() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    format_utc(secs)
}

/// Formats seconds since the Unix epoch as `YYYY-MM-DDTHH:MM:SSZ`. RFC 3339
/// years have four digits: a later time (a file's wild mtime) reads as the
/// last second of 9999.
pub fn format_utc(secs: u64) -> String {
    const LAST_RFC3339_SECOND: u64 = 253_402_300_799;
    let t = UNIX_EPOCH + Duration::from_secs(secs.min(LAST_RFC3339_SECOND));
    humantime::format_rfc3339_seconds(t).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nanoseconds_read_as_time_and_other_counts_as_numbers() {
        assert_eq!(format_amount(5_314_629_216.0, "ns"), "5.31 s");
        assert_eq!(format_amount(4_208_416_800.0, "ns"), "4.21 s");
        assert_eq!(format_amount(42_084_168_000.0, "ns"), "42.1 s");
        assert_eq!(format_amount(1_234_567_000_000.0, "ns"), "1,235 s");
        assert_eq!(format_amount(12_345_678.0, "ns"), "12.3 ms");
        assert_eq!(format_amount(456_000.0, "ns"), "456 µs");
        assert_eq!(format_amount(999_999.0, "ns"), "1.00 ms");
        assert_eq!(format_amount(789.0, "ns"), "789 ns");
        assert_eq!(format_amount(-2_500_000.0, "ns"), "-2.50 ms");
        assert_eq!(format_amount(4_208.0, "samples"), "4,208 samples");
        assert_eq!(format_amount(-3.0, "samples"), "-3 samples");
        assert_eq!(format_change(1_200_000.0, "ns"), "+1.20 ms");
        assert_eq!(format_change(-3.0, "samples"), "-3 samples");
        assert_eq!(format_change(0.2, "ns"), "0 ns");
        assert_eq!(group_digits(5_314_629_216), "5,314,629,216");
    }

    fn secs(t: &str) -> f64 {
        parse_duration(t).unwrap().as_secs_f64()
    }

    #[test]
    fn accepts_the_documented_forms() {
        assert_eq!(secs("500ms"), 0.5);
        assert_eq!(secs("20s"), 20.0);
        assert_eq!(secs("90s"), 90.0);
        assert_eq!(secs("2m"), 120.0);
        assert_eq!(secs("2min"), 120.0);
        assert_eq!(secs("2m30s"), 150.0);
        assert_eq!(secs("1h30m"), 5400.0);
        assert_eq!(secs("1h"), 3600.0);
        assert_eq!(secs("1d12h"), 129_600.0);
        assert_eq!(secs("1m500ms"), 60.5);
        assert_eq!(secs("1.5s"), 1.5);
        assert_eq!(secs("90"), 90.0);
        assert_eq!(secs("1.5"), 1.5);
        assert_eq!(secs("0"), 0.0);
        assert_eq!(secs(" 20s "), 20.0);
    }

    #[test]
    fn accepts_slurm_clock_forms() {
        assert_eq!(secs("02:30"), 150.0);
        assert_eq!(secs("1:30:00"), 5400.0);
        assert_eq!(secs("2:00:00"), 7200.0);
        assert_eq!(secs("100:00:00"), 360_000.0);
        assert_eq!(secs("1-00:00:00"), 86400.0);
        assert_eq!(secs("1-2"), 93600.0);
        assert_eq!(secs("1-2:30"), 95400.0);
    }

    #[test]
    fn rejects_everything_else_with_help() {
        for bad in [
            "",
            "s",
            "5x",
            "-1",
            "1e3",
            "inf",
            "1..2s",
            ".",
            "5 sec",
            "ms",
            "30s2m",
            "2m2m",
            "1h30",
            "90:",
            ":30",
            "1:60",
            "1:2:3:4",
            "1-25:00:00",
            "1-",
            "-1:00",
            "1.5:00",
        ] {
            let err = parse_duration(bad).unwrap_err().to_string();
            assert!(err.contains("2m30s"), "{bad}: {err}");
        }
        assert_eq!(
            parse_duration("99999999999h").unwrap_err().to_string(),
            "`99999999999h` is too long a duration"
        );
        assert_eq!(
            parse_duration("5x").unwrap_err().to_string(),
            "`5x` is not a duration: use 500ms, 20s, 2m30s, 1h30m, HH:MM:SS \
             (Slurm's form), or a bare number of seconds"
        );
    }

    #[test]
    fn printed_durations_parse_back() {
        for (d, text) in [
            (Duration::from_millis(500), "500ms"),
            (Duration::from_secs(20), "20s"),
            (Duration::from_millis(1500), "1.5s"),
            (Duration::from_secs(120), "2m"),
            (Duration::from_secs(150), "2m30s"),
            (Duration::from_secs(5400), "1h30m"),
            (Duration::from_secs(7205), "2h0m5s"),
            (Duration::from_secs(3600), "1h"),
        ] {
            assert_eq!(format_duration(d), text);
            assert_eq!(parse_duration(text).unwrap(), d, "{text}");
        }
    }

    #[test]
    fn slurm_times() {
        assert_eq!(slurm_time(Duration::from_secs(150)), "00:02:30");
        assert_eq!(slurm_time(Duration::from_millis(1500)), "00:00:02");
        assert_eq!(slurm_time(Duration::from_secs(7200)), "02:00:00");
        assert_eq!(slurm_time(Duration::from_secs(93_600)), "1-02:00:00");
    }

    #[test]
    fn formats_known_instants() {
        assert_eq!(format_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(format_utc(1_796_017_286), "2026-11-30T05:41:26Z");
        assert_eq!(format_utc(u64::MAX), "9999-12-31T23:59:59Z");
    }

    #[test]
    fn sizes() {
        assert_eq!(format_bytes(0), "0 bytes");
        assert_eq!(format_bytes(1023), "1023 bytes");
        assert_eq!(format_bytes(1536), "1.5 KiB");
        assert_eq!(format_bytes(12_345_678), "11.8 MiB");
        assert_eq!(format_bytes(5 << 30), "5.0 GiB");
    }
}
