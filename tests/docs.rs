//! Docs that match behaviour (issue 49): every shell block of README.md and
//! docs/*.md (```sh, ```bash, ```shell, and the `$ ` lines of ```console)
//! runs here as written (its output to a file, as on a terminal), with
//! the built `jobprof` and `jobprof-record` on PATH, in one fresh directory per document (its blocks in order, so a
//! later block reads what an earlier one wrote) with a fresh HOME. A
//! block that cannot run here says why in the line before it,
//! `<!-- not run: needs a Slurm cluster -->`; nothing is skipped silently.
//! The directory holds what the examples name as the reader's own:
//! `./my_program` and `./prog` (tests/programs/deep.c, one second of
//! work), `before.folded`/`after.folded`, and the plain `perf record`
//! outputs `runs/q1.perf.data`, `old/perf.data`, `new/perf.data`.

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
}

/// The reader's own files the examples name, in `dir`, and `bin/` with the
/// built binaries (returned: the PATH to use).
fn reader_files(dir: &Path, data: &Path) -> String {
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
    let mut failed = Vec::new();
    let (mut ran, mut not_run) = (0, 0);
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
        let path = reader_files(dir.path(), &data);
        for b in runnable {
            ran += 1;
            // Output to a file, as on a terminal: `perf record` writes
            // its data to a pipe, not to perf.data.
            let log = dir.path().join(".block.log");
            let out = fs::File::create(&log).unwrap();
            let status = Command::new("bash")
                .args(["-euo", "pipefail", "-c", &b.script])
                .current_dir(dir.path())
                .env("PATH", &path)
                .env("HOME", &home)
                .stdin(Stdio::null())
                .stdout(out.try_clone().unwrap())
                .stderr(out)
                .status()
                .unwrap();
            if !status.success() {
                let text = String::from_utf8_lossy(&fs::read(&log).unwrap()).into_owned();
                failed.push(format!("{}: {status}\n{}\n{text}", b.at, b.script));
            }
        }
    }
    eprintln!("docs: {ran} block(s) run, {not_run} marked `not run` with their reason");
    assert!(ran >= 4, "only {ran} block(s) ran");
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}
