//! Durations on the command line: `500ms`, `20s`, `2m`, `1h`, or a bare
//! number of seconds (`90`, `1.5`). Parsing only; nothing here sleeps.

use std::time::Duration;

/// Parses a duration such as `500ms`, `20s`, `2m`, `1h` or `90` (seconds).
/// The error says what was wrong and shows the accepted forms.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let scale = match unit.trim() {
        "ms" => 0.001,
        "" | "s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => return Err(help(text)),
    };
    // `f64::from_str` would also take `inf`, `1e3` or `-1`; the scan above
    // already restricted `number` to digits and dots.
    if number.is_empty() || number.matches('.').count() > 1 || number == "." {
        return Err(help(text));
    }
    let value: f64 = number.parse().map_err(|_| help(text))?;
    let secs = value * scale;
    if !secs.is_finite() || secs > 1e9 {
        return Err(format!("`{text}` is too long a duration"));
    }
    Ok(Duration::from_secs_f64(secs))
}

fn help(text: &str) -> String {
    format!(
        "`{text}` is not a duration: use a number with an optional unit ms, s, m or h \
         (500ms, 20s, 2m); a bare number means seconds"
    )
}

/// Formats a duration for messages: `500ms`, `20s`, `2m30s`, `1.5s`.
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        return format!("{ms}ms");
    }
    if ms % 1000 != 0 && ms < 60_000 {
        return format!("{:.1}s", d.as_secs_f64());
    }
    let secs = d.as_secs();
    if secs < 60 {
        format!("{secs}s")
    } else if secs % 60 == 0 {
        format!("{}m", secs / 60)
    } else {
        format!("{}m{}s", secs / 60, secs % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_documented_forms() {
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("20s").unwrap(), Duration::from_secs(20));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert_eq!(parse_duration("90").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("1.5").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
    }

    #[test]
    fn rejects_everything_else_with_help() {
        for bad in [
            "", "s", "5x", "-1", "1e3", "inf", "1..2s", ".", "5 sec", "ms",
        ] {
            let err = parse_duration(bad).unwrap_err();
            assert!(err.contains("500ms"), "{bad}: {err}");
        }
        assert!(parse_duration("99999999999h").is_err());
    }

    #[test]
    fn formats_for_messages() {
        assert_eq!(format_duration(Duration::from_millis(500)), "500ms");
        assert_eq!(format_duration(Duration::from_secs(20)), "20s");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(format_duration(Duration::from_secs(120)), "2m");
        assert_eq!(format_duration(Duration::from_secs(150)), "2m30s");
    }
}
