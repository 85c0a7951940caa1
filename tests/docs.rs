//! Docs that match behaviour (issue 49): every shell block of README.md and
//! docs/*.md (```sh, ```bash, ```shell, and the `$ ` lines of ```console)
//! runs here as written (its output to a file, as on a terminal), with
//! the built `jobprof` and `jobprof-record` on PATH, in one fresh directory per document (its blocks in order, so a
//! later block reads what an earlier one wrote) with a fresh HOME. A
//! block that cannot run here says why in the line before it,
//! `<!-- not run: needs a Slurm cluster -->`; nothing is skipped silently.
//! The directory holds what the examples name as the reader's own:
//! `./my_program` and `./prog` (tests/programs/deep.c, one second of
//! work), `before.folded`/`after.folded`, the plain `perf record`
//! outputs `runs/q1.perf.data`, `old/perf.data`, `new/perf.data`, and two
//! runs recorded with `--off-cpu` (the real sidecar beside
//! tests/programs/offcpu.c, processed with pprof): `run1/`, `run2/` and
//! the capture's `profile.pb.gz`. A block that runs `go tool pprof` needs
//! Go (a loud skip, a failure under CI=true). The reader's result
//! directories are the old pipeline's seed `result_dir_4242`
//! (../shared/seed-captures), as `result_dir_4242` and below `results/`,
//! which stands in for the examples' `/shared/results` and `/data/results`
//! (the one substitution made in a block). `$WORKER_PID` is a running
//! process (a `sleep`) that the test ends. A document's ```toml block
//! that starts with `# NAME` (`# profiling.toml`) is the file NAME there.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::util::{self, output_text};

/// One shell block of a document.
#[derive(Debug)]
struct Block {
    /// `FILE:LINE` of its fence.
    at: String,
    /// Its commands.
    script: String,
    /// The reason of its `<!-- not run: ... -->`, when it has one.
    not_run: Option<String>,
}

/// The shell blocks of the markdown `text` of `file`.
fn blocks(file: &str, text: &str) -> Vec<Block> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let fence = lines[i].trim_start();
        let lang = fence.strip_prefix("```").unwrap_or("");
        if !fence.starts_with("```") || lang.is_empty() {
            // Skip a block without a language (output, text) whole.
            if fence.starts_with("```") {
                i += 1;
                while i < lines.len() && !lines[i].trim_start().starts_with("```") {
                    i += 1;
                }
            }
            i += 1;
            continue;
        }
        let indent = lines[i].len() - fence.len();
        let start = i;
        i += 1;
        let mut body = Vec::new();
        while i < lines.len() && !lines[i].trim_start().starts_with("```") {
            body.push(lines[i].get(indent..).unwrap_or(lines[i].trim_start()));
            i += 1;
        }
        i += 1;
        let script = match lang {
            "sh" | "bash" | "shell" => body.join("\n"),
            "console" => console_commands(&body),
            _ => continue,
        };
        let before = lines[..start].iter().rev().find(|l| !l.trim().is_empty());
        let not_run = before
            .and_then(|l| l.trim().strip_prefix("<!-- not run:"))
            .map(|r| r.trim_end_matches("-->").trim().to_string());
        out.push(Block {
            at: format!("{file}:{}", start + 1),
            script,
            not_run,
        });
    }
    out
}

/// The commands of a console block: its `$ ` lines and their `\`
/// continuations.
fn console_commands(body: &[&str]) -> String {
    let mut out = Vec::new();
    let mut more = false;
    for l in body {
        if let Some(c) = l.strip_prefix("$ ") {
            out.push(c.to_string());
        } else if more {
            out.push(l.to_string());
        }
        more = l.trim_end().ends_with('\\') && (more || l.starts_with("$ "));
    }
    out.join("\n")
}

/// The example files of a document: each ```toml block whose first line
/// is `# NAME` (a plain file name, e.g. `# profiling.toml`), as (NAME,
/// text), for its blocks to read.
fn example_files(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut lines = text.lines();
    while let Some(l) = lines.next() {
        if l.trim() != "```toml" {
            continue;
        }
        let body: Vec<&str> = lines.by_ref().take_while(|l| l.trim() != "```").collect();
        let name = body.first().and_then(|l| l.strip_prefix("# "));
        if let Some(name) = name.filter(|n| !n.contains([' ', '/'])) {
            out.push((name.to_string(), body.join("\n") + "\n"));
        }
    }
    out
}

/// README.md and docs/*.md, by path relative to the repository.
fn documents() -> Vec<String> {
    let root = util::repo_root();
    let mut v: Vec<String> = fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    v.sort();
    v.insert(0, "README.md".into());
    v
}

#[test]
fn every_shell_block_of_the_docs_is_read() {
    // The parser's own rules, on a small document.
    let doc = "a\n<!-- not run: needs a GPU -->\n```sh\nnvidia-smi\n```\n\n```\noutput\n```\n\
               1. step\n\n   ```bash\n   jobprof --version\n   ```\n```console\n$ a \\\n    b\nout\n$ c\n```\n";
    let b = blocks("x.md", doc);
    assert_eq!(b.len(), 3, "{b:?}");
    assert_eq!(b[0].not_run.as_deref(), Some("needs a GPU"));
    assert_eq!(
        (b[1].script.as_str(), b[1].not_run.is_none()),
        ("jobprof --version", true)
    );
    assert_eq!(b[2].script, "a \\\n    b\nc");
    assert_eq!(b[1].at, "x.md:12");
    let toml = "```toml\n# p.toml\na = 1\n```\n```toml\n# not a name\n```\n";
    assert_eq!(
        example_files(toml),
        [("p.toml".into(), "# p.toml\na = 1\n".into())]
    );
}

/// The reader's own files the examples name, in `dir`, and `bin/` with the
/// built binaries (returned: the PATH to use).
fn reader_files(dir: &Path, data: &Path, runs: Option<&Path>) -> String {
    let exe = util::program(
        "deep",
        "tests/programs/deep.c",
        &["-O0", "-g", "-fno-omit-frame-pointer"],
    )
    .expect("gcc for tests/programs/deep.c");
    for name in ["my_program", "prog"] {
        let p = dir.join(name);
        fs::write(&p, format!("#!/bin/sh\nexec '{}' 1 20\n", exe.display())).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
    }
    fs::write(
        dir.join("before.folded"),
        "main;work;spin 40\nmain;idle 20\n",
    )
    .unwrap();
    fs::write(
        dir.join("after.folded"),
        "main;work;spin 70\nmain;idle 20\n",
    )
    .unwrap();
    for to in ["runs/q1.perf.data", "old/perf.data", "new/perf.data"] {
        let to = dir.join(to);
        fs::create_dir_all(to.parent().unwrap()).unwrap();
        fs::copy(data, &to).unwrap();
    }
    if let Some(seeds) = util::seeds() {
        util::copy_seed(&seeds, "result_dir_4242", dir);
        fs::create_dir_all(dir.join("results")).unwrap();
        util::copy_seed(&seeds, "result_dir_4242", &dir.join("results"));
    }
    if let Some(root) = runs {
        util::copy_tree(root, &dir.join("run1"));
        util::copy_tree(root, &dir.join("run2"));
        fs::copy(
            root.join("worker_0/q1/profile.pb.gz"),
            dir.join("profile.pb.gz"),
        )
        .unwrap();
    }
    let bin = dir.join(".bin");
    fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_jobprof"), bin.join("jobprof")).unwrap();
    std::os::unix::fs::symlink(util::recorder(), bin.join("jobprof-record")).unwrap();
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// A `perf record -g` of the one-second program, for the reader's files.
fn recording(scratch: &Path) -> PathBuf {
    let exe = util::program(
        "deep",
        "tests/programs/deep.c",
        &["-O0", "-g", "-fno-omit-frame-pointer"],
    )
    .expect("gcc for tests/programs/deep.c");
    let data = scratch.join("perf.data");
    let o = Command::new("perf")
        .args(["record", "-q", "-g", "-F", "499", "-o"])
        .arg(&data)
        .arg("--")
        .arg(&exe)
        .args(["1", "20"])
        .output()
        .unwrap();
    assert!(o.status.success(), "perf record: {}", output_text(&o));
    data
}

/// A processed capture of tests/programs/offcpu.c recorded with
/// `--off-cpu` (its root, in `scratch`), or None (a loud skip) without
/// tracefs.
fn offcpu_run(scratch: &Path) -> Option<PathBuf> {
    let (s, mut worker) = crate::offcpu::offcpu_worker()?;
    let formats = ["--formats", "svg,html,folded,summary,pprof"];
    let cap = crate::offcpu::capture_and_process_with(
        s.dir.path(),
        &mut worker,
        "--off-cpu",
        2,
        &formats,
    );
    let root = scratch.join("offcpu-run");
    util::copy_tree(cap.parent().unwrap().parent().unwrap(), &root);
    Some(root)
}

/// Why `script` cannot run here (a loud skip, a failure under CI), if it
/// cannot: a tool it needs is missing, or the `--off-cpu` runs or the
/// seed result directories are.
fn missing(script: &str, runs: bool, seeds: bool) -> Option<&'static str> {
    if script.contains("go tool pprof") && !crate::pprof::require_go() {
        return Some("go tool pprof");
    }
    let reads_runs = script.contains("run1/") || script.contains("profile.pb.gz");
    if reads_runs && !runs {
        return Some("the runs recorded with --off-cpu");
    }
    let reads_seeds = script.contains("result_dir_4242") || script.contains("results");
    (reads_seeds && !seeds).then_some("../shared/seed-captures")
}

/// `script` with the examples' shared result roots (`/shared/results`,
/// `/data/results`) replaced by the directory's `results`.
fn local_results(script: &str) -> String {
    script
        .replace("/shared/results", "results")
        .replace("/data/results", "results")
}

/// Runs `script` in `dir` with `path` and `home`; Err holds its exit
/// status and output when it fails.
fn run_block(script: &str, dir: &Path, path: &str, home: &Path, worker: u32) -> Result<(), String> {
    // Output to a file, as on a terminal: `perf record` writes its data
    // to a pipe, not to perf.data.
    let log = dir.join(".block.log");
    let out = fs::File::create(&log).unwrap();
    let status = Command::new("bash")
        .args(["-euo", "pipefail", "-c", script])
        .current_dir(dir)
        .env("PATH", path)
        .env("HOME", home)
        .env("WORKER_PID", worker.to_string())
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .status()
        .unwrap();
    if status.success() {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&fs::read(&log).unwrap()).into_owned();
    Err(format!("{status}\n{text}"))
}

/// Issue 58, item 3: after the README's first command (`cargo run
/// --release -- process ...`) the Quick start types `jobprof`, which was
/// on no PATH: the binary is in `target/<host triple>/release/`
/// (.cargo/config.toml builds for the host as an explicit target), and
/// `target/release/jobprof` does not exist. In a fresh checkout `x` whose
/// `target/<triple>/release/` holds what that command builds (this build's
/// binaries: cargo puts a release build beside the test's
/// `target/<triple>/debug/`), with no `jobprof` on PATH, the README's
/// blocks after the first run as written, in one shell as a reader types
/// them: the block right after the first command puts `jobprof` on PATH,
/// and the Quick start runs.
#[test]
fn the_readme_quick_start_runs_as_written_after_the_first_command() {
    if !util::require(
        util::perf_can_record() && util::have("gcc"),
        "perf that can record and gcc, for the README's perf record example",
    ) {
        return;
    }
    let text = fs::read_to_string(util::repo_root().join("README.md")).unwrap();
    let all = blocks("README.md", &text);
    assert!(
        all[0]
            .script
            .starts_with("cargo run --release -- process fixtures/result_dir_demo"),
        "the README's first command: {}",
        all[0].script
    );
    assert!(
        all[1].not_run.is_none() && all[1].script.contains("release:$PATH"),
        "the block after the first command does not put `jobprof` on PATH: {:?}",
        all[1]
    );
    let scratch = tempfile::tempdir().unwrap();
    let data = recording(scratch.path());
    let x = scratch.path().join("x");
    let debug = Path::new(env!("CARGO_BIN_EXE_jobprof")).parent().unwrap();
    assert_eq!(debug.file_name().unwrap(), "debug", "{}", debug.display());
    let triple = debug.parent().unwrap().file_name().unwrap();
    let release = x.join("target").join(triple).join("release");
    fs::create_dir_all(&release).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_jobprof"), release.join("jobprof")).unwrap();
    std::os::unix::fs::symlink(util::recorder(), release.join("jobprof-record")).unwrap();
    reader_files(&x, &data, None);
    let path: Vec<String> = std::env::var("PATH")
        .unwrap_or_default()
        .split(':')
        .filter(|d| !Path::new(d).join("jobprof").exists())
        .map(str::to_string)
        .collect();
    let home = scratch.path().join("home");
    fs::create_dir_all(&home).unwrap();
    let mut script = String::from("! command -v jobprof >/dev/null\n");
    for b in all[1..].iter().filter(|b| b.not_run.is_none()) {
        script.push_str(&format!("# {}\n{}\n", b.at, b.script));
    }
    script.push_str("command -v jobprof > .where\n");
    if let Err(e) = run_block(&script, &x, &path.join(":"), &home, std::process::id()) {
        panic!("the README as written, in {}: {e}\n{script}", x.display());
    }
    let found = fs::read_to_string(x.join(".where")).unwrap();
    assert_eq!(Path::new(found.trim()), release.join("jobprof"));
    assert!(x.join("perf.data.jobprof/flamegraph.html").is_file());
}

#[test]
fn every_command_block_of_the_docs_runs_or_says_why_not() {
    if !util::require(
        util::perf_can_record() && util::have("gcc"),
        "perf that can record and gcc, for the docs' perf record examples",
    ) {
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    let data = recording(scratch.path());
    let runs = offcpu_run(scratch.path());
    let seeds = util::seeds().is_some();
    let mut worker = Command::new("sleep").arg("600").spawn().unwrap();
    let mut failed = Vec::new();
    let (mut ran, mut not_run, mut skipped) = (0, 0, 0);
    for doc in documents() {
        let text = fs::read_to_string(util::repo_root().join(&doc)).unwrap();
        let runnable: Vec<Block> = blocks(&doc, &text)
            .into_iter()
            .filter(|b| {
                not_run += usize::from(b.not_run.is_some());
                b.not_run.is_none()
            })
            .collect();
        if runnable.is_empty() {
            continue;
        }
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join(".home");
        fs::create_dir_all(&home).unwrap();
        let path = reader_files(dir.path(), &data, runs.as_deref());
        for (name, text) in example_files(&text) {
            fs::write(dir.path().join(name), text).unwrap();
        }
        for b in runnable {
            let script = local_results(&b.script);
            if let Some(what) = missing(&script, runs.is_some(), seeds) {
                eprintln!("{}: skipped, no {what} here", b.at);
                skipped += 1;
                continue;
            }
            ran += 1;
            if let Err(e) = run_block(&script, dir.path(), &path, &home, worker.id()) {
                failed.push(format!("{}: {e}\n{}", b.at, b.script));
            }
        }
    }
    let _ = worker.kill();
    let _ = worker.wait();
    eprintln!(
        "docs: {ran} block(s) run, {skipped} skipped (a missing tool), \
         {not_run} marked `not run` with their reason"
    );
    assert!(ran + skipped >= 6, "only {ran} block(s) ran");
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}
