//! The `sched:sched_switch` tracepoint's fields, decoded from a sample's
//! raw data with the event format perf stored in the file's tracing data
//! (`HEADER_TRACING_DATA`: field offsets and sizes, and the `prev_state`
//! letters and the preemption bit from the format's `print fmt`):
//! `prev_state` as perf 6.1 prints it, for the off-CPU accounting.

/// The part of `print fmt` this module reproduces.
const PRINT_FMT: &str = "\"prev_comm=%s prev_pid=%d prev_prio=%d prev_state=%s%s ==> \
                         next_comm=%s next_pid=%d next_prio=%d\"";

/// One field of an event format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Field {
    offset: usize,
    size: usize,
}

/// What reading a `sched_switch` sample needs from its format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchedSwitch {
    prev_comm: Field,
    prev_pid: Field,
    prev_prio: Field,
    prev_state: Field,
    next_comm: Field,
    next_pid: Field,
    next_prio: Field,
    /// `__print_flags` table of `prev_state`, in order.
    letters: Vec<(u64, String)>,
    /// The bit printed as `+` (`TASK_REPORT_MAX`); the letters are the
    /// bits below it.
    preempt: u64,
}

impl SchedSwitch {
    /// The format of tracepoint `id` (the attribute's `config`) found in
    /// the tracing data `tracing`, when it is a `sched_switch` format this
    /// module prints as perf does.
    pub fn from_tracing_data(tracing: &[u8], id: u64) -> Option<SchedSwitch> {
        let head = format!("name: sched_switch\nID: {id}\n");
        let at = find(tracing, head.as_bytes())?;
        let rest = &tracing[at..];
        let end = find(rest, b"\nprint fmt: ")?;
        let line_end = rest[end + 1..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(rest.len(), |p| end + 1 + p);
        let text = std::str::from_utf8(&rest[..line_end]).ok()?;
        SchedSwitch::parse(text)
    }

    /// From the text of an event format (`name:` to `print fmt:`).
    pub fn parse(text: &str) -> Option<SchedSwitch> {
        let fields: Vec<(&str, Field)> = text.lines().filter_map(field).collect();
        let get = |n: &str| fields.iter().find(|(f, _)| *f == n).map(|(_, f)| *f);
        let print = text.lines().find_map(|l| l.strip_prefix("print fmt: "))?;
        if !print.starts_with(PRINT_FMT) {
            return None;
        }
        let preempt = preempt_bit(print)?;
        let letters = flag_table(print)?;
        let s = SchedSwitch {
            prev_comm: get("prev_comm")?,
            prev_pid: get("prev_pid")?,
            prev_prio: get("prev_prio")?,
            prev_state: get("prev_state")?,
            next_comm: get("next_comm")?,
            next_pid: get("next_pid")?,
            next_prio: get("next_prio")?,
            letters,
            preempt,
        };
        let ints = [
            s.prev_pid,
            s.prev_prio,
            s.next_pid,
            s.next_prio,
            s.prev_state,
        ];
        ints.iter()
            .all(|f| matches!(f.size, 1 | 2 | 4 | 8))
            .then_some(s)
    }

    /// Whether every field lies inside raw data `raw` (perf prints none
    /// of them when one does not).
    fn fits(&self, raw: &[u8]) -> bool {
        let all = [
            self.prev_comm,
            self.prev_pid,
            self.prev_prio,
            self.prev_state,
            self.next_comm,
            self.next_pid,
            self.next_prio,
        ];
        all.iter().all(|f| f.offset + f.size <= raw.len())
    }

    /// `prev_state` of raw data `raw` as perf prints it ([`Self::state`]);
    /// `None` when perf prints no fields (`raw` too short).
    pub fn prev_state(&self, raw: &[u8]) -> Option<String> {
        let f = self.prev_state;
        self.fits(raw)
            .then(|| self.state(signed(&raw[f.offset..f.offset + f.size]) as u64))
    }

    /// `prev_state` as perf prints it: the letters of the bits below the
    /// preemption bit joined by `|` (`R` for none), then `+` if that bit
    /// is set (libtraceevent's `__print_flags`, leftover bits in hex).
    pub fn state(&self, v: u64) -> String {
        let mut left = v & (self.preempt - 1);
        let mut s = String::new();
        if left == 0 {
            s.push('R');
        }
        for (bit, letter) in &self.letters {
            if *bit != 0 && left & bit == *bit {
                if !s.is_empty() {
                    s.push('|');
                }
                s.push_str(letter);
                left &= !bit;
            }
        }
        if left != 0 {
            if !s.is_empty() {
                s.push('|');
            }
            s.push_str(&format!("0x{left:x}"));
        }
        if v & self.preempt != 0 {
            s.push('+');
        }
        s
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// A little-endian signed integer of 1, 2, 4 or 8 bytes.
fn signed(b: &[u8]) -> i64 {
    match b.len() {
        1 => i64::from(b[0] as i8),
        2 => i64::from(i16::from_le_bytes([b[0], b[1]])),
        4 => i64::from(i32::from_le_bytes(b.try_into().expect("4 bytes"))),
        _ => i64::from_le_bytes(b[..8].try_into().expect("8 bytes")),
    }
}

/// `\tfield:TYPE NAME;\toffset:N;\tsize:N;\tsigned:N;`
fn field(line: &str) -> Option<(&str, Field)> {
    let mut parts = line.trim().split(';');
    let decl = parts.next()?.trim().strip_prefix("field:")?;
    let name = decl.rsplit(' ').next()?;
    let name = name.split('[').next()?;
    let mut num =
        |key: &str| -> Option<usize> { parts.next()?.trim().strip_prefix(key)?.parse().ok() };
    let offset = num("offset:")?;
    let size = num("size:")?;
    Some((name, Field { offset, size }))
}

/// The `+` bit: the expression between the last `REC->prev_state & ` and
/// `? "+"`.
fn preempt_bit(print: &str) -> Option<u64> {
    let end = print.find("? \"+\"")?;
    let start = print[..end].rfind("REC->prev_state & ")? + "REC->prev_state & ".len();
    let v = Expr::new(&print[start..end]).eval()?;
    (v.is_power_of_two()).then_some(v)
}

/// The `{ VALUE, "LETTER" }` pairs of `__print_flags(`.
fn flag_table(print: &str) -> Option<Vec<(u64, String)>> {
    let at = print.find("__print_flags(")?;
    let end = at + print[at..].find(" : \"R\"")?;
    let mut rest = &print[at..end];
    let mut table = Vec::new();
    while let Some(open) = rest.find('{') {
        let close = open + rest[open..].find('}')?;
        let (v, name) = rest[open + 1..close].split_once(',')?;
        let v = Expr::new(v).eval()?;
        let name = name.trim().strip_prefix('"')?.strip_suffix('"')?;
        table.push((v, name.to_string()));
        rest = &rest[close + 1..];
    }
    (!table.is_empty()).then_some(table)
}

/// Integer expressions of `print fmt` masks: numbers, `( )`, `|`, `+`,
/// `-`, `<<`, C precedence.
struct Expr<'a> {
    s: &'a [u8],
    at: usize,
}

impl<'a> Expr<'a> {
    fn new(s: &'a str) -> Expr<'a> {
        Expr {
            s: s.as_bytes(),
            at: 0,
        }
    }

    fn eval(mut self) -> Option<u64> {
        let v = self.or()?;
        self.skip();
        (self.at == self.s.len()).then_some(v)
    }

    fn skip(&mut self) {
        while self.s.get(self.at).is_some_and(u8::is_ascii_whitespace) {
            self.at += 1;
        }
    }

    fn eat(&mut self, tok: &[u8]) -> bool {
        self.skip();
        if self.s[self.at..].starts_with(tok) {
            self.at += tok.len();
            true
        } else {
            false
        }
    }

    fn or(&mut self) -> Option<u64> {
        let mut v = self.shift()?;
        while self.eat(b"|") {
            v |= self.shift()?;
        }
        Some(v)
    }

    fn shift(&mut self) -> Option<u64> {
        let mut v = self.sum()?;
        while self.eat(b"<<") {
            v = v.checked_shl(u32::try_from(self.sum()?).ok()?)?;
        }
        Some(v)
    }

    fn sum(&mut self) -> Option<u64> {
        let mut v = self.atom()?;
        loop {
            if self.eat(b"+") {
                v = v.checked_add(self.atom()?)?;
            } else if self.eat(b"-") {
                v = v.checked_sub(self.atom()?)?;
            } else {
                return Some(v);
            }
        }
    }

    fn atom(&mut self) -> Option<u64> {
        if self.eat(b"(") {
            let v = self.or()?;
            return self.eat(b")").then_some(v);
        }
        self.skip();
        let start = self.at;
        while self.s.get(self.at).is_some_and(u8::is_ascii_alphanumeric) {
            self.at += 1;
        }
        let tok = std::str::from_utf8(&self.s[start..self.at]).ok()?;
        match tok.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16).ok(),
            None => tok.parse().ok(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Linux 6.x's format (this machine's), as in the tracing data.
    const FORMAT: &str = "name: sched_switch
ID: 372
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;
\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;
\tfield:int prev_prio;\toffset:28;\tsize:4;\tsigned:1;
\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;
\tfield:char next_comm[16];\toffset:40;\tsize:16;\tsigned:0;
\tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;
\tfield:int next_prio;\toffset:60;\tsize:4;\tsigned:1;

print fmt: \"prev_comm=%s prev_pid=%d prev_prio=%d prev_state=%s%s ==> next_comm=%s next_pid=%d next_prio=%d\", REC->prev_comm, REC->prev_pid, REC->prev_prio, (REC->prev_state & ((((0x00000000 | 0x00000001 | 0x00000002 | 0x00000004 | 0x00000008 | 0x00000010 | 0x00000020 | 0x00000040) + 1) << 1) - 1)) ? __print_flags(REC->prev_state & ((((0x00000000 | 0x00000001 | 0x00000002 | 0x00000004 | 0x00000008 | 0x00000010 | 0x00000020 | 0x00000040) + 1) << 1) - 1), \"|\", { 0x00000001, \"S\" }, { 0x00000002, \"D\" }, { 0x00000004, \"T\" }, { 0x00000008, \"t\" }, { 0x00000010, \"X\" }, { 0x00000020, \"Z\" }, { 0x00000040, \"P\" }, { 0x00000080, \"I\" }) : \"R\", REC->prev_state & (((0x00000000 | 0x00000001 | 0x00000002 | 0x00000004 | 0x00000008 | 0x00000010 | 0x00000020 | 0x00000040) + 1) << 1) ? \"+\" : \"\", REC->next_comm, REC->next_pid, REC->next_prio
";

    fn raw(prev_state: u64) -> Vec<u8> {
        let mut r = vec![0u8; 64];
        r[8..10].copy_from_slice(b"sh");
        r[24..28].copy_from_slice(&16885i32.to_le_bytes());
        r[28..32].copy_from_slice(&120i32.to_le_bytes());
        r[32..40].copy_from_slice(&prev_state.to_le_bytes());
        r[40..54].copy_from_slice(b"kworker/u8:0\0\0");
        r[56..60].copy_from_slice(&9795i32.to_le_bytes());
        r[60..64].copy_from_slice(&(-51i32).to_le_bytes());
        r
    }

    #[test]
    fn decodes_prev_state_at_the_formats_offset_as_perf_prints_it() {
        let s = SchedSwitch::parse(FORMAT).unwrap();
        assert_eq!(s.preempt, 0x100);
        assert_eq!(s.letters.len(), 8);
        assert_eq!(s.prev_state(&raw(1)).as_deref(), Some("S"));
        assert_eq!(s.prev_state(&raw(0x101)).as_deref(), Some("S+"));
        // One field past the record's end: perf prints no fields at all.
        assert_eq!(s.prev_state(&raw(1)[..60]), None);
    }

    #[test]
    fn prev_state_letters_as_perf_decodes_them() {
        let s = SchedSwitch::parse(FORMAT).unwrap();
        assert_eq!(s.state(0), "R");
        assert_eq!(s.state(0x100), "R+");
        assert_eq!(s.state(2), "D");
        assert_eq!(s.state(0x80), "I");
        assert_eq!(s.state(0x3), "S|D");
        assert_eq!(s.state(0x101), "S+");
    }

    #[test]
    fn other_offsets_are_read_from_the_format_and_unknown_formats_refused() {
        // A 4.x kernel: `prev_state` a 4-byte long on 32-bit, `2048` as the bit.
        let old = FORMAT
            .replace("long prev_state;\toffset:32;\tsize:8", "long prev_state;\toffset:32;\tsize:4")
            .replace(
                "(((0x00000000 | 0x00000001 | 0x00000002 | 0x00000004 | 0x00000008 | 0x00000010 | 0x00000020 | 0x00000040) + 1) << 1) ? \"+\"",
                "2048 ? \"+\"",
            );
        let s = SchedSwitch::parse(&old).unwrap();
        assert_eq!(s.preempt, 2048);
        assert_eq!(
            s.prev_state,
            Field {
                offset: 32,
                size: 4
            }
        );
        assert!(SchedSwitch::parse(&FORMAT.replace("prev_prio=%d", "prio=%d")).is_none());
        let data = format!("\x17\x08\x44tracing0.6\0junk{FORMAT}more");
        assert!(SchedSwitch::from_tracing_data(data.as_bytes(), 372).is_some());
        assert!(SchedSwitch::from_tracing_data(data.as_bytes(), 373).is_none());
    }
}
