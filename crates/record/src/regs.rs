//! Which user registers perf samples (`perf record --user-regs`). On
//! aarch64, perf 6.1's mask for `--call-graph dwarf` includes the SVE `VG`
//! pseudo-register whenever the CPU has SVE, and software events
//! (`cpu-clock`, `task-clock`) reject it: on Grace the recording fails with
//! EOPNOTSUPP. As the old pipeline's sampler did, a dwarf capture with a
//! software event on aarch64 then passes the VG-free mask (x0-x28, x29,
//! lr, sp, pc: everything dwarf unwinding reads) explicitly;
//! `--user-regs` overrides the rule either way.

/// The VG-free aarch64 mask for dwarf unwinding.
pub const AARCH64_VG_FREE: &str = "x0,x1,x2,x3,x4,x5,x6,x7,x8,x9,x10,x11,x12,x13,x14,x15,\
x16,x17,x18,x19,x20,x21,x22,x23,x24,x25,x26,x27,x28,x29,lr,sp,pc";

/// The registers a capture records and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserRegs {
    /// The `--user-regs=` value given to perf.
    pub regs: String,
    /// Said in preflight: where the value comes from.
    pub why: String,
}

/// Whether `event` is one of the software clock events (with or without
/// modifiers such as `:u`).
fn software_clock(event: &str) -> bool {
    let base = event.split(':').next().unwrap_or(event);
    matches!(base, "cpu-clock" | "task-clock")
}

/// The `--user-regs` perf is given for `call_graph`/`event` on a node of
/// architecture `arch` (`std::env::consts::ARCH`), `explicit` being the
/// user's `--user-regs`. `None`: perf's own choice.
pub fn user_regs(
    call_graph: &str,
    event: &str,
    arch: &str,
    explicit: Option<&str>,
) -> Option<UserRegs> {
    if let Some(r) = explicit {
        return Some(UserRegs {
            regs: r.to_string(),
            why: "given with --user-regs".into(),
        });
    }
    let dwarf = call_graph == "dwarf" || call_graph.starts_with("dwarf,");
    (arch == "aarch64" && dwarf && software_clock(event)).then(|| UserRegs {
        regs: AARCH64_VG_FREE.to_string(),
        why: format!(
            "aarch64 with --call-graph {call_graph} and the software event {event}: the \
             VG-free mask (perf's own includes SVE's VG, which software events reject)"
        ),
    })
}

/// Checks a `--user-regs` value: comma-separated register names.
pub fn parse(v: &str) -> Result<String, String> {
    let ok = !v.is_empty()
        && v.split(',')
            .all(|r| !r.is_empty() && r.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'));
    if ok {
        Ok(v.to_string())
    } else {
        Err(format!(
            "--user-regs: `{v}` is not a comma-separated list of register names (e.g. {AARCH64_VG_FREE})"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vg_free_mask_for_dwarf_with_software_events_on_aarch64_only() {
        for ev in ["cpu-clock", "cpu-clock:u", "task-clock"] {
            for cg in ["dwarf", "dwarf,8192"] {
                let r = user_regs(cg, ev, "aarch64", None).expect("the rule applies");
                assert_eq!(r.regs, AARCH64_VG_FREE);
                assert!(!r.regs.contains("vg"));
                assert!(r.why.contains("VG"), "{}", r.why);
            }
        }
        assert_eq!(user_regs("fp", "cpu-clock", "aarch64", None), None);
        assert_eq!(user_regs("dwarf", "cycles", "aarch64", None), None);
        assert_eq!(user_regs("dwarf", "cpu-clock", "x86_64", None), None);
        assert_eq!(AARCH64_VG_FREE.split(',').count(), 33);
    }

    #[test]
    fn explicit_regs_win() {
        let r = user_regs("dwarf", "cpu-clock", "aarch64", Some("sp,pc")).unwrap();
        assert_eq!(r.regs, "sp,pc");
        let r = user_regs("fp", "cycles", "x86_64", Some("ip")).unwrap();
        assert_eq!(
            (r.regs.as_str(), r.why.as_str()),
            ("ip", "given with --user-regs")
        );
    }

    #[test]
    fn parse_refuses_what_is_not_a_register_list() {
        assert_eq!(parse("x0,lr,sp,pc").as_deref(), Ok("x0,lr,sp,pc"));
        for bad in ["", "x0,,pc", "x0 pc", "--x", "a;b"] {
            assert!(parse(bad).unwrap_err().contains("--user-regs"), "{bad}");
        }
    }
}
