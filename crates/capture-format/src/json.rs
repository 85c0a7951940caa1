//! The hand-written JSON writer of the recorder's files (no serialization
//! framework in the static binary): string literals escaped per RFC 8259,
//! and one object written member by member, one per line.

/// A JSON string literal for `s` (quotes included), escaped per RFC 8259.
pub fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Writes the members of one JSON object, one per line.
pub(crate) struct JsonObject {
    members: Vec<String>,
    indent: usize,
}

impl JsonObject {
    pub(crate) fn new(indent: usize) -> Self {
        JsonObject {
            members: Vec::new(),
            indent,
        }
    }
    pub(crate) fn raw(&mut self, key: &str, value: &str) {
        self.members
            .push(format!("{}: {}", json_string(key), value));
    }
    pub(crate) fn str(&mut self, key: &str, value: &str) {
        self.raw(key, &json_string(value));
    }
    pub(crate) fn opt_str(&mut self, key: &str, value: Option<&str>) {
        match value {
            Some(v) => self.str(key, v),
            None => self.raw(key, "null"),
        }
    }
    pub(crate) fn num(&mut self, key: &str, value: u64) {
        self.raw(key, &value.to_string());
    }
    pub(crate) fn opt_num(&mut self, key: &str, value: Option<u64>) {
        match value {
            Some(v) => self.num(key, v),
            None => self.raw(key, "null"),
        }
    }
    pub(crate) fn array(&mut self, key: &str, items: &[String]) {
        if items.is_empty() {
            self.raw(key, "[]");
            return;
        }
        let pad = " ".repeat(self.indent + 4);
        let close = " ".repeat(self.indent + 2);
        let body: Vec<String> = items.iter().map(|i| format!("{pad}{i}")).collect();
        self.raw(key, &format!("[\n{}\n{close}]", body.join(",\n")));
    }
    pub(crate) fn finish(self) -> String {
        let pad = " ".repeat(self.indent + 2);
        let close = " ".repeat(self.indent);
        let body: Vec<String> = self.members.iter().map(|m| format!("{pad}{m}")).collect();
        format!("{{\n{}\n{close}}}", body.join(",\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_strings_escape_what_json_requires() {
        assert_eq!(json_string("a\"b\\c\n\u{1}"), "\"a\\\"b\\\\c\\n\\u0001\"");
        assert_eq!(json_string("ü"), "\"ü\"");
    }
}
