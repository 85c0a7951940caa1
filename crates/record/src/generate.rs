//! `jobprof-record completions SHELL` and `jobprof-record man-pages DIR`,
//! as `jobprof` has them, made from the help texts themselves (no clap:
//! the binary must stay small), so they always match `--help`: the
//! commands are [`COMMANDS`], each command's options are the `--words` of
//! its help text.

use std::fmt::Write as _;
use std::path::Path;

use crate::cli::{COMPLETIONS_HELP, MAIN_HELP, MAN_HELP};
use crate::fail::Fail;

/// Every command with its help text (the sidecar's `--tool nsys` options
/// are the sidecar's too).
pub const COMMANDS: [(&str, &[&str]); 8] = [
    (
        "sidecar",
        &[crate::cli::SIDECAR_HELP, crate::nsys::SIDECAR_HELP],
    ),
    ("start", &[crate::cli::START_HELP]),
    ("stop", &[crate::cli::STOP_HELP]),
    ("shutdown", &[crate::cli::SHUTDOWN_HELP]),
    ("wait-ready", &[crate::cli::WAIT_HELP]),
    ("preflight", &[crate::cli::PREFLIGHT_HELP]),
    ("completions", &[COMPLETIONS_HELP]),
    ("man-pages", &[MAN_HELP]),
];

/// The options of a command, sorted: the `--words` of the usage lines of
/// its help texts (`  jobprof-record ...` and their `[--x ...]`
/// continuations) and the first word of each option line (`  --x VALUE
/// what it does`); prose that quotes perf's or nsys's options is not read.
pub fn options(helps: &[&str]) -> Vec<String> {
    let mut out: Vec<String> = vec!["--help".into()];
    for line in helps.iter().flat_map(|h| h.lines()) {
        let t = line.trim_start();
        let words: Vec<&str> = if t.starts_with("jobprof-record ") || t.starts_with('[') {
            t.split([' ', '[', ']', '(', ')', '|']).collect()
        } else if t.starts_with("--") && line.starts_with(' ') {
            t.split([' ', '=', ',']).take(1).collect()
        } else {
            continue;
        };
        for w in words {
            let name = w.split('=').next().unwrap_or_default();
            let ok = name.len() > 3
                && name.starts_with("--")
                && name[2..]
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
            if ok {
                out.push(name.to_string());
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The completion script for `shell`.
pub fn completions(shell: &str) -> Result<String, Fail> {
    let names: Vec<&str> = COMMANDS.iter().map(|c| c.0).collect();
    let mut s = String::new();
    match shell {
        "bash" => {
            s.push_str("# jobprof-record completion for bash\n_jobprof_record() {\n");
            s.push_str("  local cur=\"${COMP_WORDS[COMP_CWORD]}\" words=\"\"\n");
            s.push_str("  if [ \"$COMP_CWORD\" -le 1 ]; then\n");
            let _ = writeln!(s, "    words=\"{} --help --version\"", names.join(" "));
            s.push_str("  else\n    case \"${COMP_WORDS[1]}\" in\n");
            for (name, helps) in COMMANDS {
                let _ = writeln!(s, "      {name}) words=\"{}\" ;;", options(helps).join(" "));
            }
            s.push_str("    esac\n    case \"$cur\" in -*) ;; *) words=\"\" ;; esac\n  fi\n");
            s.push_str("  COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n}\n");
            s.push_str("complete -o default -F _jobprof_record jobprof-record\n");
        }
        "zsh" => {
            s.push_str("#compdef jobprof-record\n_jobprof_record() {\n");
            let _ = writeln!(
                s,
                "  if (( CURRENT == 2 )); then compadd -- {}; return; fi",
                names.join(" ")
            );
            s.push_str("  if [[ $PREFIX != -* ]]; then _files; return; fi\n");
            s.push_str("  case $words[2] in\n");
            for (name, helps) in COMMANDS {
                let _ = writeln!(s, "    {name}) compadd -- {} ;;", options(helps).join(" "));
            }
            s.push_str("  esac\n}\n_jobprof_record \"$@\"\n");
        }
        "fish" => {
            let _ = writeln!(
                s,
                "complete -c jobprof-record -f -n __fish_use_subcommand -a '{}'",
                names.join(" ")
            );
            for (name, helps) in COMMANDS {
                for o in options(helps) {
                    let _ = writeln!(
                        s,
                        "complete -c jobprof-record -n '__fish_seen_subcommand_from {name}' -l {}",
                        &o[2..]
                    );
                }
            }
        }
        other => {
            return Err(Fail::usage(format!(
                "completions: unknown shell `{other}` (bash, zsh or fish)\n\n{COMPLETIONS_HELP}"
            )))
        }
    }
    Ok(s)
}

/// `text` as roff lines that print as written (no request, no escape).
fn roff(text: &str) -> String {
    let mut s = String::new();
    for l in text.lines() {
        let l = l.replace('\\', "\\e");
        if l.starts_with(['.', '\'']) {
            s.push_str("\\&");
        }
        s.push_str(&l);
        s.push('\n');
    }
    s
}

/// The man page: the main help, then one section per command.
pub fn man_page() -> String {
    let version = env!("CARGO_PKG_VERSION");
    let mut s = format!(
        ".TH JOBPROF-RECORD 1 \"\" \"jobprof-record {version}\" \"User Commands\"\n.SH NAME\n"
    );
    let title = MAIN_HELP.lines().next().unwrap_or_default();
    let what = title.split_once(": ").map_or(title, |x| x.1);
    let _ = writeln!(s, "jobprof-record \\- {}", roff(what).trim_end());
    s.push_str(".SH DESCRIPTION\n.nf\n");
    s.push_str(&roff(MAIN_HELP));
    s.push_str(".fi\n.SH COMMANDS\n");
    for (name, helps) in COMMANDS {
        let _ = writeln!(s, ".SS {name}\n.nf");
        for h in helps {
            s.push_str(&roff(h));
        }
        s.push_str(".fi\n");
    }
    s.push_str(".SH SEE ALSO\n.BR jobprof (1)\n");
    s
}

/// Writes [`man_page`] into `dir` (created) as `jobprof-record.1`, through
/// a temporary file renamed over it; prints its path.
pub fn man_pages(dir: &Path) -> Result<(), Fail> {
    let io = |what: &Path, e: std::io::Error| Fail::failed(format!("{}: {e}", what.display()));
    std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    let page = dir.join("jobprof-record.1");
    let tmp = dir.join(format!(".jobprof-record.1.{}.tmp", std::process::id()));
    std::fs::write(&tmp, man_page()).map_err(|e| io(&tmp, e))?;
    if let Err(e) = std::fs::rename(&tmp, &page) {
        let _ = std::fs::remove_file(&tmp);
        return Err(io(&page, e));
    }
    println!("{}", page.display());
    Ok(())
}
