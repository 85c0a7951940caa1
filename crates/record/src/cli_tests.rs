//! Tests of `cli`: every subcommand's flags, defaults and usage errors.

use super::*;

fn args(s: &str) -> Vec<OsString> {
    s.split_whitespace().map(OsString::from).collect()
}

#[test]
fn every_subcommand_has_help() {
    for c in [
        "sidecar",
        "start",
        "stop",
        "shutdown",
        "wait-ready",
        "preflight",
    ] {
        match parse(args(&format!("{c} --help"))).unwrap() {
            Command::Help(h) => assert!(h.contains(&format!("jobprof-record {c}")), "{c}"),
            other => panic!("{c}: {other:?}"),
        }
    }
}

#[test]
fn sidecar_defaults_and_inline_values() {
    let c = parse(args(
        "sidecar --token-dir /t --worker=3 --out /o --pid 42 --call-graph dwarf,8192 --symfs-limit 1M --max-shard-size 2G",
    ))
    .unwrap();
    let Command::Sidecar(s) = c else { panic!() };
    assert_eq!(s.worker, 3);
    assert_eq!(s.threads_per_shard, 128);
    assert_eq!(s.target.frequency, 99);
    assert_eq!(s.target.event, "cpu-clock");
    assert_eq!(s.call_graph, "dwarf,8192");
    assert_eq!(s.symfs_limit, 1 << 20);
    assert_eq!(s.max_shard_size, Some(2 << 30));
    assert!(s.jit_maps, "--jit-maps auto by default");
}

#[test]
fn jit_maps_auto_or_off() {
    let base = "sidecar --token-dir /t --worker 0 --out /o --pid 42 --jit-maps";
    let sidecar = |v: &str| parse(args(&format!("{base} {v}")));
    let Ok(Command::Sidecar(s)) = sidecar("off") else {
        panic!()
    };
    assert!(!s.jit_maps);
    let Ok(Command::Sidecar(s)) = sidecar("auto") else {
        panic!()
    };
    assert!(s.jit_maps);
    let Err(e) = sidecar("always") else { panic!() };
    assert!(e.message.contains("--jit-maps: `always`"), "{}", e.message);
}

#[test]
fn user_regs_and_call_graph_reach_the_target_options() {
    let c = parse(args("sidecar --token-dir /t --worker 0 --out /o --pid 42 --call-graph dwarf --user-regs x29,lr,sp,pc")).unwrap();
    let Command::Sidecar(s) = c else { panic!() };
    assert_eq!(s.target.call_graph, "dwarf");
    assert_eq!(s.target.explicit_user_regs.as_deref(), Some("x29,lr,sp,pc"));
    assert_eq!(s.target.user_regs().unwrap().regs, "x29,lr,sp,pc");
    let c = parse(args("preflight --pid 42 --call-graph dwarf,4096")).unwrap();
    let Command::Preflight(p) = c else { panic!() };
    assert_eq!(p.target.call_graph, "dwarf,4096");
    let e = parse(args("preflight --pid 42 --user-regs x0,,pc")).unwrap_err();
    assert!(e.to_string().contains("--user-regs"), "{e}");
}

#[test]
fn sizes_take_binary_suffixes() {
    assert_eq!(parse_bytes("123"), Some(123));
    assert_eq!(parse_bytes("2k"), Some(2048));
    assert_eq!(parse_bytes("4G"), Some(4 << 30));
    assert_eq!(parse_bytes("G"), None);
    assert_eq!(parse_bytes("1.5G"), None);
    assert_eq!(parse_bytes("99999999999T"), None);
}

#[test]
fn bad_input_is_a_usage_error() {
    for bad in [
        "start --token-dir /t --worker 1 --query ..",
        "start --token-dir /t --worker 1 --query .",
        "start --token-dir /t --worker 1 --query .warmup",
        "sidecar --token-dir /t --worker 1 --out /o --pid 1 --max-shard-size 1K",
        "sidecar --token-dir /t --worker 1 --out /o --pid 1 --max-shard-size lots",
        "start --token-dir /t --worker 1 --query a/b",
        "start --token-dir /t --worker x1 --query q",
        "start --token-dir /t --worker 1",
        "stop --token-dir /t --worker 1 --query q --out /x",
        "sidecar --token-dir /t --worker 1 --out /o",
        "sidecar --token-dir /t --worker 1 --out /o --pid 1 --call-graph lbr",
        "preflight --pid nope",
        "frobnicate",
    ] {
        let e = parse(args(bad)).unwrap_err();
        assert_eq!(e.code, 2, "{bad}: {}", e.message);
    }
}

#[test]
fn non_utf8_arguments_are_usage_errors() {
    use std::os::unix::ffi::OsStringExt;
    let bad = || OsString::from_vec(b"/tmp/\xff".to_vec());
    let mut argv = args("start --worker 1 --query q --token-dir");
    argv.push(bad());
    let e = parse(argv).unwrap_err();
    assert_eq!(e.code, 2);
    assert!(e.message.contains("--token-dir") && e.message.contains("not valid UTF-8"));
    let e = parse([bad()]).unwrap_err();
    assert_eq!(e.code, 2);
    assert!(
        e.message.starts_with("unknown command `/tmp/\u{fffd}`"),
        "{}",
        e.message
    );
    let mut argv = args("preflight --pid 1");
    argv.push(bad());
    assert_eq!(parse(argv).unwrap_err().code, 2);
}

#[test]
fn flags_of_other_subcommands_and_stray_values_are_refused() {
    for (bad, needle) in [
        (
            "stop --token-dir /t --worker 1 --query q --out /x",
            "unknown argument `--out`",
        ),
        (
            "preflight --pid 1 --worker 2",
            "unknown argument `--worker`",
        ),
        ("preflight --pid 1 stray", "unknown argument `stray`"),
        ("preflight --pid 1 -x", "unknown argument `-x`"),
        ("preflight --pid 1 --", "unknown argument `--`"),
        ("preflight -- --pid 1", "unknown argument `--`"),
        ("preflight --pid", "--pid needs a value"),
        (
            "preflight --pid 1 --require-symbols=yes",
            "--require-symbols takes no value",
        ),
        (
            "sidecar --token-dir /t --worker 1 --out /o --pid 1 --frequency 0",
            "--frequency must be at least 1",
        ),
    ] {
        let e = parse(args(bad)).unwrap_err();
        assert_eq!(e.code, 2, "{bad}");
        assert!(e.message.starts_with(needle), "{bad}: {}", e.message);
    }
    // A value may start with a dash; `--help` anywhere asks for help.
    let Command::Preflight(p) = parse(args("preflight --pid 1 --exe-name -w")).unwrap() else {
        panic!()
    };
    assert_eq!(p.target.exe_name.as_deref(), Some("-w"));
    let Command::Preflight(p) = parse(args("preflight --pid 1 --exe-name --")).unwrap() else {
        panic!()
    };
    assert_eq!(p.target.exe_name.as_deref(), Some("--"));
    assert!(matches!(
        parse(args("stop --worker x --help")),
        Ok(Command::Help(_))
    ));
}

/// Every option the completions offer is one the command takes (not an
/// option of perf or nsys quoted in its help).
#[test]
fn completions_offer_only_options_the_commands_take() {
    for (name, helps) in crate::generate::COMMANDS {
        if matches!(name, "completions" | "man-pages") {
            continue;
        }
        for o in crate::generate::options(helps) {
            // sidecar --tool nsys takes the nsys options.
            let taken = [format!("{name} {o} x"), format!("{name} --tool nsys {o} x")]
                .iter()
                .any(|argv| match parse(args(argv)) {
                    Err(e) => !e.message.starts_with(&format!("unknown argument `{o}`")),
                    Ok(_) => true,
                });
            assert!(taken, "{name} {o}");
        }
    }
}
