//! The command line as a new user meets it: completions and man pages from
//! the clap definitions, examples and exit codes in every `--help`, errors
//! that name the right command, `render` on stdout, inferno's spellings,
//! one duration parser, result lines on stdout only, `-q`, `--formats all`.

use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use crate::util;
use crate::util::stdout;
use crate::util::{jobprof, stderr};

fn run(args: &[&str]) -> Output {
    jobprof().args(args).output().unwrap()
}

fn run_stdin(args: &[&str], input: &[u8]) -> Output {
    let mut child = jobprof()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

/// The subcommands `jobprof ARGS --help` lists under "Commands:".
fn subcommands(args: &[String]) -> Vec<String> {
    let mut argv = args.to_vec();
    argv.push("--help".into());
    let help = stdout(&jobprof().args(&argv).output().unwrap());
    help.lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        // Names are indented by two; wrapped descriptions by more.
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

#[test]
fn every_help_has_examples_and_exit_codes() {
    // Every subcommand at any depth, found from the help itself, so a new
    // one cannot be added without examples and exit codes.
    let mut todo: Vec<Vec<String>> = vec![vec![]];
    let mut seen = 0;
    while let Some(args) = todo.pop() {
        for sub in subcommands(&args) {
            let mut deeper = args.clone();
            deeper.push(sub);
            todo.push(deeper);
        }
        let mut argv = args.clone();
        argv.push("--help".into());
        let out = jobprof().args(&argv).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        let help = stdout(&out);
        assert!(help.contains("Examples:"), "{args:?}: no examples\n{help}");
        assert!(
            help.contains("Exit status") || help.contains("Exit codes"),
            "{args:?}: no exit codes\n{help}"
        );
        seen += 1;
    }
    // jobprof, 9 subcommands, 3 of nsys at least.
    assert!(seen >= 13, "only {seen} commands found");
}

/// The top-level help lists the commands as the data flows, one line each
/// (issue 49, item 7); each command's own `--help` keeps its whole
/// description.
#[test]
fn the_top_level_help_lists_commands_in_workflow_order_one_line_each() {
    let help = stdout(&run(&["--help"]));
    let listed: Vec<&str> = help
        .lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .collect();
    let names: Vec<&str> = listed
        .iter()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(
        names,
        [
            "fold",
            "render",
            "process",
            "report",
            "diff",
            "reprocess",
            "trend",
            "nsys",
            "repl",
            "completions",
            "man-pages",
            "help"
        ],
        "{help}"
    );
    assert!(
        listed.iter().all(|l| !l.starts_with("   ")),
        "an entry runs over one line:\n{help}"
    );
    let trend = stdout(&run(&["trend", "--help"]));
    assert!(trend.contains("Benjamini-Hochberg adjusted"), "{trend}");
}

/// Issue 58, item 8: the words agree with the program. `jobprof --help`
/// said `render` writes "speedscope or text" while `--format text` was
/// refused: every output `render`'s line names is one `--format` takes.
/// `process --help` said it symbolizes with `perf script`; the native
/// symbolizer is the default.
#[test]
fn the_help_says_what_the_program_does() {
    let help = stdout(&run(&["--help"]));
    let line = help
        .lines()
        .find(|l| l.trim_start().starts_with("render "))
        .unwrap_or_else(|| panic!("{help}"));
    let said = line.split(" as a flamegraph").nth(1).unwrap_or("");
    let words: Vec<&str> = said
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty() && !["or", "SVG", "offline", "HTML"].contains(w))
        .collect();
    assert!(!words.is_empty(), "{line}");
    for w in words {
        let o = run_stdin(&["render", "--format", w], b"main;f 1\n");
        assert_eq!(
            o.status.code(),
            Some(0),
            "`jobprof --help` says render writes {w}: {}",
            stderr(&o)
        );
    }
    let process = stdout(&run(&["process", "--help"]));
    assert!(
        process.contains("native symbolizer") && !process.contains("shards with `perf script` at"),
        "{process}"
    );
}

#[test]
fn completions_for_each_shell() {
    for (shell, marker) in [
        ("bash", "complete -F _jobprof"),
        ("zsh", "#compdef jobprof"),
        ("fish", "complete -c jobprof"),
    ] {
        let out = run(&["completions", shell]);
        assert_eq!(out.status.code(), Some(0), "{shell}: {}", stderr(&out));
        let text = stdout(&out);
        assert!(text.contains(marker), "{shell}: {text}");
        // Subcommands and their options are completed.
        assert!(text.contains("reprocess") && text.contains("min-symbolized"));
    }
    if Command::new("bash").arg("--version").output().is_ok() {
        let out = run(&["completions", "bash"]);
        let t = tempfile::tempdir().unwrap();
        let script = t.path().join("jobprof.bash");
        fs::write(&script, &out.stdout).unwrap();
        let check = Command::new("bash")
            .arg("-c")
            .arg(format!(
                "source '{}' && complete -p jobprof",
                script.display()
            ))
            .output()
            .unwrap();
        assert!(check.status.success(), "{}", util::output_text(&check));
    }
    let out = run(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn man_pages_for_jobprof_and_every_subcommand() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("man/man1");
    let out = run(&["man-pages", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", util::output_text(&out));
    for page in [
        "jobprof.1",
        "jobprof-fold.1",
        "jobprof-render.1",
        "jobprof-diff.1",
        "jobprof-process.1",
        "jobprof-reprocess.1",
        "jobprof-repl.1",
        "jobprof-nsys.1",
        "jobprof-nsys-collect.1",
        "jobprof-nsys-flush.1",
        "jobprof-nsys-plan.1",
        "jobprof-completions.1",
        "jobprof-man-pages.1",
        "jobprof-trend.1",
    ] {
        let text = fs::read_to_string(dir.join(page)).unwrap_or_else(|e| panic!("{page}: {e}"));
        assert!(text.contains(".TH "), "{page}");
        assert!(stdout(&out).contains(page), "{page} not listed");
    }
    let process = fs::read_to_string(dir.join("jobprof-process.1")).unwrap();
    assert!(process.contains("min\\-symbolized") && process.contains("Exit status"));
    // The rendered page reads as a man page (when man is installed).
    if Command::new("man").arg("--version").output().is_ok() {
        let shown = Command::new("man")
            .arg("-l")
            .arg(dir.join("jobprof-render.1"))
            .env("MANPAGER", "cat")
            .env("MANWIDTH", "80")
            .output()
            .unwrap();
        assert!(shown.status.success(), "{}", util::output_text(&shown));
        assert!(stdout(&shown).contains("countname") || stdout(&shown).contains("count-name"));
    }
}

#[test]
fn render_writes_svg_to_stdout_and_reads_stdin() {
    let out = run_stdin(&["render"], b"main;work 3\nmain;idle 1\n");
    assert_eq!(out.status.code(), Some(0), "{}", util::output_text(&out));
    let svg = stdout(&out);
    assert!(svg.starts_with("<?xml") && svg.contains("<svg"), "{svg}");
    assert!(svg.contains("work"));
    // inferno's spelling of --count-name.
    let out = run_stdin(&["render", "--countname", "ns"], b"main;work 3\n");
    assert_eq!(out.status.code(), Some(0), "{}", util::output_text(&out));
    assert!(stdout(&out).contains(" ns"), "{}", stdout(&out));
    // --format picks another format on stdout.
    let out = run_stdin(&["render", "--format", "folded", "-"], b"b 1\na 2\n");
    assert_eq!(stdout(&out), "a 2\nb 1\n");
}

#[test]
fn render_on_perf_script_text_names_jobprof_fold() {
    let t = tempfile::tempdir().unwrap();
    let text = util::fixtures().join("result_dir_demo/profiles/perf/worker_0/q01/perf.script.zst");
    let out = jobprof()
        .arg("render")
        .arg(&text)
        .arg("-o")
        .arg(t.path().join("x.svg"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", util::output_text(&out));
    let err = stderr(&out);
    assert!(
        err.contains("is `perf script` text, not folded stacks")
            && err.contains("jobprof fold")
            && err.contains("perf.script.zst"),
        "{err}"
    );
    assert!(!t.path().join("x.svg").exists());
    // Piped: the message shows the pipeline.
    let out = run_stdin(
        &["render"],
        b"demo 42/43 [001] 1.000001: 1000 cpu-clock:\n\t  4011a9 main+0x19 (/opt/demo)\n\n",
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("perf script | jobprof fold | jobprof render"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn fold_takes_inferno_nthreads() {
    let text = b"w 1 1.0: 5 cpu-clock:\n\tffff main (/bin/w)\n\n";
    let out = run_stdin(&["fold", "--nthreads", "1"], text);
    assert_eq!(out.status.code(), Some(0), "{}", util::output_text(&out));
    assert_eq!(stdout(&out), "# counts: ns\nw;main 5\n");
}

#[test]
fn diff_refuses_colors_it_would_ignore() {
    let t = tempfile::tempdir().unwrap();
    let a = t.path().join("a.folded");
    fs::write(&a, "main;f 1\n").unwrap();
    let out = jobprof()
        .arg("diff")
        .arg(&a)
        .arg(&a)
        .args(["--colors", "java"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--colors"));
    // Without -o the SVG goes to stdout, as for render.
    let out = jobprof().arg("diff").arg(&a).arg(&a).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", util::output_text(&out));
    assert!(stdout(&out).contains("<svg"));
}

#[test]
fn durations_read_the_forms_jobprof_prints() {
    let t = tempfile::tempdir().unwrap();
    for good in ["2m30s", "1h30m", "01:30:00", "90", "500ms"] {
        let out = run(&[
            "nsys",
            "collect",
            "--report-root",
            t.path().to_str().unwrap(),
            "--settle",
            good,
            "--timeout",
            "0",
            "--poll",
            "100ms",
        ]);
        // No report at all: exit 5, but the durations were accepted.
        assert_eq!(
            out.status.code(),
            Some(5),
            "{good}: {}",
            util::output_text(&out)
        );
    }
    let out = run(&[
        "nsys",
        "collect",
        "--report-root",
        t.path().to_str().unwrap(),
        "--settle",
        "2 minutes",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("2m30s"), "{}", stderr(&out));
}

/// A copy of the demo result directory, processed by a jobprof that finds
/// no perf (it folds the capture's perf.script.zst).
fn demo(root: &Path, name: &str) -> std::path::PathBuf {
    let rd = root.join(name);
    util::copy_demo(&rd);
    rd
}

fn process(args: &[&str], dirs: &[&Path], no_perf: &Path) -> Output {
    jobprof()
        .arg("process")
        .args(args)
        .args(dirs)
        .env("PATH", no_perf)
        .output()
        .unwrap()
}

#[test]
fn process_results_on_stdout_only_and_quiet() {
    let t = tempfile::tempdir().unwrap();
    let no_perf = t.path().join("bin");
    fs::create_dir_all(&no_perf).unwrap();
    let a = demo(t.path(), "result_dir_1");
    let b = demo(t.path(), "result_dir_2");
    let out = process(&["--formats", "all"], &[&a, &b], &no_perf);
    assert_eq!(out.status.code(), Some(0), "{}", util::output_text(&out));
    let (so, se) = (stdout(&out), stderr(&out));
    // One result line per capture, then one per result directory's job page.
    assert_eq!(
        so.lines().filter(|l| l.contains("/q01: ")).count(),
        2,
        "{so}"
    );
    assert_eq!(
        so.lines().filter(|l| l.contains("index.html: ")).count(),
        2,
        "{so}"
    );
    assert_eq!(so.lines().count(), 4, "{so}");
    for rd in [&a, &b] {
        let cap = rd.join("profiles/perf/worker_0/q01");
        let prefix = format!("{}: processed", cap.display());
        assert!(so.contains(&prefix), "{so}");
        // Quiet batch logs (issue 49, item 7): a capture's steps are not
        // logged without -v; its result line says how it ended.
        assert!(
            !se.contains(&cap.display().to_string()),
            "a capture's steps on stderr without -v: {se}"
        );
        for f in [
            "flamegraph.svg",
            "flamegraph.html",
            "stacks.folded",
            "summary.json",
            "profile.speedscope.json",
            "profile.pb.gz",
        ] {
            assert!(cap.join(f).exists(), "--formats all: {f}");
        }
    }
    // The result lines are not repeated on stderr.
    assert!(!se.contains("processed"), "{se}");
    assert!(se.lines().count() <= 1, "noisy stderr: {se}");
    // -v logs each step; the lines name the capture directory, so the
    // result dir.
    let out = process(&["-v", "--force"], &[&a], &no_perf);
    assert_eq!(out.status.code(), Some(0), "{}", util::output_text(&out));
    let cap = a.join("profiles/perf/worker_0/q01");
    let se = stderr(&out);
    assert!(se.contains(&format!("{}: folding", cap.display())), "{se}");
    assert!(se.contains("symbol store: "), "{se}");
    let out = process(&["--quiet", "--force"], &[&a], &no_perf);
    assert_eq!(out.status.code(), Some(0), "{}", util::output_text(&out));
    assert_eq!(
        stdout(&out).lines().count(),
        2,
        "a result line and the job page's"
    );
    assert_eq!(stderr(&out), "", "--quiet");
}

#[test]
fn reprocess_results_on_stdout_only_and_quiet() {
    let t = tempfile::tempdir().unwrap();
    let no_perf = t.path().join("bin");
    fs::create_dir_all(&no_perf).unwrap();
    let root = t.path().join("results");
    demo(&root, "result_dir_1");
    demo(&root, "result_dir_2");
    let out = jobprof()
        .args(["reprocess", "--jobs", "2", "--formats", "all"])
        .arg(&root)
        .env("PATH", &no_perf)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", util::output_text(&out));
    let (so, se) = (stdout(&out), stderr(&out));
    for rd in ["result_dir_1", "result_dir_2"] {
        let line = so
            .lines()
            .find(|l| l.contains(rd) && l.contains(": processed ("))
            .unwrap_or_else(|| panic!("no result line for {rd}: {so}"));
        assert!(line.contains("worker_0/q01"), "{line}");
        assert!(
            !se.lines().any(|l| l.contains(rd)),
            "a capture's steps on stderr without -v: {se}"
        );
    }
    let out = jobprof()
        .args(["reprocess", "-v", "--force"])
        .arg(&root)
        .env("PATH", &no_perf)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", util::output_text(&out));
    let se = stderr(&out);
    for rd in ["result_dir_1", "result_dir_2"] {
        assert!(
            se.lines()
                .any(|l| l.contains(rd) && l.contains("worker_0/q01")),
            "-v: log lines name the result dir: {se}"
        );
    }
    assert!(!se.contains(" samples, "), "result lines on stderr: {se}");
    assert!(root
        .join("result_dir_1/profiles/perf/worker_0/q01/profile.speedscope.json")
        .exists());
    let out = jobprof()
        .args(["reprocess", "-q", "--force"])
        .arg(&root)
        .env("PATH", &no_perf)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", util::output_text(&out));
    assert_eq!(stderr(&out), "", "-q");
    assert!(
        stdout(&out).contains("processed         2"),
        "{}",
        stdout(&out)
    );
}

fn recorder(args: &[&str]) -> Output {
    Command::new(util::recorder()).args(args).output().unwrap()
}

/// `jobprof-record completions SHELL`, as `jobprof` has them: every
/// command and its options, from the help texts (issue 49).
#[test]
fn recorder_completions_for_each_shell() {
    for (shell, marker) in [
        (
            "bash",
            "complete -o default -F _jobprof_record jobprof-record",
        ),
        ("zsh", "#compdef jobprof-record"),
        ("fish", "complete -c jobprof-record"),
    ] {
        let out = recorder(&["completions", shell]);
        assert_eq!(out.status.code(), Some(0), "{shell}: {}", stderr(&out));
        let text = stdout(&out);
        assert!(text.contains(marker), "{shell}: {text}");
        for word in [
            "sidecar",
            "wait-ready",
            "preflight",
            "token-dir",
            "max-shard-size",
        ] {
            assert!(text.contains(word), "{shell}: no {word}: {text}");
        }
    }
    // bash: the script loads, and completes commands and a command's options.
    let out = recorder(&["completions", "bash"]);
    let t = tempfile::tempdir().unwrap();
    let script = t.path().join("jobprof-record.bash");
    fs::write(&script, &out.stdout).unwrap();
    let complete = |words: &str| {
        let o = Command::new("bash")
            .arg("-c")
            .arg(format!(
                "source '{}'; COMP_WORDS=({words}); COMP_CWORD=$((${{#COMP_WORDS[@]}}-1)); \
                 _jobprof_record; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
                script.display()
            ))
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", util::output_text(&o));
        stdout(&o)
    };
    assert_eq!(complete("jobprof-record wai"), "wait-ready\n");
    assert_eq!(complete("jobprof-record stop --tok"), "--token-dir\n");
    let out = recorder(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2), "{}", util::output_text(&out));
}

/// `jobprof-record man-pages DIR` writes jobprof-record.1: every command's
/// help as a section, read by `man`.
#[test]
fn recorder_man_page() {
    let t = tempfile::tempdir().unwrap();
    let dir = t.path().join("man/man1");
    let out = recorder(&["man-pages", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", util::output_text(&out));
    let page = dir.join("jobprof-record.1");
    assert_eq!(stdout(&out), format!("{}\n", page.display()));
    let text = fs::read_to_string(&page).unwrap();
    assert!(text.starts_with(".TH JOBPROF-RECORD 1 "), "{text}");
    for section in [
        "sidecar",
        "start",
        "stop",
        "shutdown",
        "wait-ready",
        "preflight",
    ] {
        assert!(
            text.contains(&format!(".SS {section}\n")),
            "{section}: {text}"
        );
    }
    // No line of help text reads as a roff request.
    for l in text.lines() {
        let request = [".TH", ".SH", ".SS", ".nf", ".fi", ".BR"];
        assert!(
            !l.starts_with(['.', '\'']) || request.iter().any(|r| l.starts_with(r)),
            "{l}"
        );
    }
    if !util::require(
        Command::new("man").arg("--version").output().is_ok(),
        "man, to read the page",
    ) {
        return;
    }
    let shown = Command::new("man")
        .arg("-l")
        .arg(&page)
        .env("MANPAGER", "cat")
        .env("MANWIDTH", "100")
        .output()
        .unwrap();
    assert!(shown.status.success(), "{}", util::output_text(&shown));
    let shown = stdout(&shown);
    assert!(
        shown.contains("jobprof-record sidecar --token-dir DIR") && shown.contains("Exit status"),
        "{shown}"
    );
}
