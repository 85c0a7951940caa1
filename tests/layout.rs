//! The layering rule of docs/development.md, checked on the source: the
//! library's top-level folders import only earlier stages and `sys`
//! (`sys < capture < symbolize < text < output < pipeline < bulk < views <
//! trend`;
//! `nsys` imports only `sys`), `error.rs` names no other module (each
//! layer converts its own error into `crate::Error`, and the binary maps
//! it to an exit code at its edge), no `super::super` path climbs out of
//! its folder, and no two
//! modules or folders import each other, directly or round a longer loop
//! (a module and its own parent or children excepted: `super::Error`,
//! `mod.rs` re-exports).
//!
//! The source is parsed with `syn` (so comments, strings and doc links do
//! not count); `#[cfg(test)]` items are skipped, and macro bodies and
//! attribute arguments (`#[error("{}", crate::x::LIMIT)]`) are read token
//! by token. Every module may use `crate::error` (`crate::Error`, `Result`,
//! `ExitCode`): the one exit-code contract is beneath all, and a loop
//! through `error.rs` would be a loop like any other. `crates/record/src` (a
//! binary of flat modules) is checked for cycles only; the binary's command
//! files (`src/cmd/`, one per subcommand) for cycles and for one command's
//! file importing another's (what several share has a file of its own).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

/// The stages in data-flow order, `sys` beneath all: a folder may import
/// the folders before it.
const ORDER: [&str; 9] = [
    "sys",
    "capture",
    "symbolize",
    "text",
    "output",
    "pipeline",
    "bulk",
    "views",
    "trend",
];

/// Outside the order: `nsys` imports only `sys`; `error` is imported by all.
const NSYS: &str = "nsys";
const ERROR: &str = "error";

/// The recorder's sources (`jobprof-record`, a binary of flat modules
/// rooted at `main.rs`): checked for cycles only.
const RECORD_SRC: &str = "crates/record/src/";

/// The binary's command files (`src/cmd/`, one per subcommand): no cycles,
/// and no command file imports another command's; what several share has
/// a file of its own, one of these.
const COMMANDS: &str = "src/cmd/";
const SHARED_COMMAND_FILES: [&str; 5] = ["bars", "files", "look", "nsys_reports", "pipeline_args"];

/// Which sources a check reads, and how it names their modules.
#[derive(Clone, Copy, PartialEq)]
enum Tree {
    /// `src/` but the binary: stage order, `error.rs`'s rule, cycles.
    Library,
    /// `crates/record/src`: cycles only.
    Recorder,
    /// `src/cmd/`: cycles, and no command file importing another's.
    Commands,
}

/// The names `lib.rs` re-exports from `error.rs`.
const ERROR_REEXPORTS: [&str; 3] = ["Error", "Result", "ExitCode"];

/// A module path below the crate root, e.g. `["nsys", "flush"]`.
type Module = Vec<String>;

/// One reference from a module to a path, where it stands.
#[derive(Clone, Debug)]
struct Reference {
    file: String,
    line: usize,
    /// The module the reference stands in (inline modules included).
    from: Module,
    /// The path as written, `crate::`, `super::`, `self::` or plain.
    path: Vec<String>,
}

/// The module path of source file `rel` in `tree`: a library file
/// (`src/nsys/flush.rs` is `nsys::flush`, `src/nsys/mod.rs` is `nsys`;
/// `None` for the crate root and the binary: `lib.rs`, `main.rs`, `cmd/`),
/// a recorder file alike, and to [`Tree::Commands`] the binary's command
/// files (`src/cmd/fold.rs` is `cmd::fold`, `src/cmd/mod.rs` is `cmd`).
fn module_in(tree: Tree, rel: &str) -> Option<Module> {
    if tree == Tree::Commands {
        let rel = rel.strip_prefix(COMMANDS)?.strip_suffix(".rs")?;
        let mut parts = vec!["cmd".to_string()];
        parts.extend(rel.split('/').filter(|p| *p != "mod").map(str::to_string));
        return Some(parts);
    }
    let rel = rel
        .strip_prefix("src/")
        .or_else(|| rel.strip_prefix(RECORD_SRC))?
        .strip_suffix(".rs")?;
    // A `#[cfg(test)]` module's own file, included with `#[path]`
    // (`cli_tests.rs`): test code, as `#[cfg(test)]` items are.
    if rel.ends_with("_tests") {
        return None;
    }
    let mut parts: Vec<String> = rel.split('/').map(str::to_string).collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    match parts.first().map(String::as_str) {
        None | Some("lib" | "main" | "cmd") => None,
        Some(_) => Some(parts),
    }
}

/// True for `#[cfg(test)]` (the test modules and test-only items).
fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.parse_args::<syn::Meta>()
                .is_ok_and(|m| m.path().is_ident("test"))
    })
}

/// Collects the references of one file.
struct Collector {
    file: String,
    module: Module,
    refs: Vec<Reference>,
}

impl Collector {
    fn push(&mut self, line: usize, path: Vec<String>) {
        self.refs.push(Reference {
            file: self.file.clone(),
            line,
            from: self.module.clone(),
            path,
        });
    }

    /// Every `crate::…`/`super::…` path in a macro's tokens.
    fn scan_tokens(&mut self, tokens: TokenStream) {
        let tokens: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < tokens.len() {
            match &tokens[i] {
                TokenTree::Group(g) => self.scan_tokens(g.stream()),
                TokenTree::Ident(id) if id == "crate" || id == "super" => {
                    let line = id.span().start().line;
                    let (path, next) = token_path(&tokens, i);
                    if path.len() > 1 {
                        self.push(line, path);
                    }
                    i = next;
                    continue;
                }
                _ => {}
            }
            i += 1;
        }
    }
}

/// The `a::b::c` path of identifiers starting at `tokens[start]`, and the
/// index after it.
fn token_path(tokens: &[TokenTree], start: usize) -> (Vec<String>, usize) {
    let mut path = Vec::new();
    let mut i = start;
    while let Some(TokenTree::Ident(id)) = tokens.get(i) {
        path.push(id.to_string());
        let colons = matches!(
            (tokens.get(i + 1), tokens.get(i + 2)),
            (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)))
                if a.as_char() == ':' && b.as_char() == ':'
        );
        if !colons {
            return (path, i + 1);
        }
        i += 3;
    }
    (path, i)
}

/// The paths a `use` tree names (`use crate::{a::X, b}` names
/// `crate::a::X` and `crate::b`).
fn use_paths(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<(usize, Vec<String>)>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            use_paths(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => out.push((line_of(&n.ident), with(prefix, &n.ident))),
        syn::UseTree::Rename(r) => out.push((line_of(&r.ident), with(prefix, &r.ident))),
        syn::UseTree::Glob(g) => out.push((g.star_token.span.start().line, prefix.clone())),
        syn::UseTree::Group(g) => g.items.iter().for_each(|t| use_paths(t, prefix, out)),
    }
}

fn with(prefix: &[String], last: &syn::Ident) -> Vec<String> {
    let mut p = prefix.to_vec();
    if last != "self" {
        p.push(last.to_string());
    }
    p
}

fn line_of(id: &syn::Ident) -> usize {
    id.span().start().line
}

impl<'ast> Visit<'ast> for Collector {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        if !is_test_only(item_attrs(item)) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_impl_item(&mut self, item: &'ast syn::ImplItem) {
        let attrs: &[syn::Attribute] = match item {
            syn::ImplItem::Fn(f) => &f.attrs,
            syn::ImplItem::Const(c) => &c.attrs,
            syn::ImplItem::Type(t) => &t.attrs,
            _ => &[],
        };
        if !is_test_only(attrs) {
            syn::visit::visit_impl_item(self, item);
        }
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        // An inline `mod x { ... }` is one level deeper.
        self.module.push(m.ident.to_string());
        syn::visit::visit_item_mod(self, m);
        self.module.pop();
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let mut out = Vec::new();
        use_paths(&u.tree, &mut Vec::new(), &mut out);
        for (line, path) in out {
            self.push(line, path);
        }
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        let path: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        if let Some(first) = p.segments.first() {
            if path.len() > 1 {
                self.push(line_of(&first.ident), path);
            }
        }
        syn::visit::visit_path(self, p);
    }

    /// An attribute's arguments are tokens to syn (`#[error("{}",
    /// crate::x::LIMIT)]`), read as a macro body is: a path in them is an
    /// import as much as one in code.
    fn visit_attribute(&mut self, a: &'ast syn::Attribute) {
        if let syn::Meta::List(list) = &a.meta {
            self.scan_tokens(list.tokens.clone());
        }
        syn::visit::visit_attribute(self, a);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.scan_tokens(m.tokens.clone());
        syn::visit::visit_macro(self, m);
    }
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    use syn::Item;
    match item {
        Item::Const(i) => &i.attrs,
        Item::Enum(i) => &i.attrs,
        Item::ExternCrate(i) => &i.attrs,
        Item::Fn(i) => &i.attrs,
        Item::ForeignMod(i) => &i.attrs,
        Item::Impl(i) => &i.attrs,
        Item::Macro(i) => &i.attrs,
        Item::Mod(i) => &i.attrs,
        Item::Static(i) => &i.attrs,
        Item::Struct(i) => &i.attrs,
        Item::Trait(i) => &i.attrs,
        Item::TraitAlias(i) => &i.attrs,
        Item::Type(i) => &i.attrs,
        Item::Union(i) => &i.attrs,
        Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

/// The references of the library file `rel` (relative to the repository
/// root, `src/...`) with content `source`; none for the root and the binary.
fn references(tree: Tree, rel: &str, source: &str) -> Vec<Reference> {
    let Some(module) = module_in(tree, rel) else {
        return Vec::new();
    };
    let file = syn::parse_file(source).unwrap_or_else(|e| panic!("{rel}: {e}"));
    let mut c = Collector {
        file: rel.to_string(),
        module,
        refs: Vec::new(),
    };
    c.visit_file(&file);
    c.refs
}

/// Where a reference leads: the longest known module that prefixes the
/// absolute path, and whether it climbs above its folder (`super` chains
/// that pass the folder's own module).
enum Target {
    Module(Module),
    /// A `super::` chain that leaves the top-level folder.
    Escapes,
    /// Something else: std, a crate, a local item, a root helper of lib.rs.
    Outside,
}

fn resolve(r: &Reference, modules: &BTreeSet<Module>) -> Target {
    let mut abs: Vec<String> = match r.path.first().map(String::as_str) {
        Some("crate") => r.path[1..].to_vec(),
        Some("super") => {
            let ups = r.path.iter().take_while(|s| *s == "super").count();
            if ups >= r.from.len() {
                return Target::Escapes;
            }
            let mut p = r.from[..r.from.len() - ups].to_vec();
            p.extend_from_slice(&r.path[ups..]);
            p
        }
        Some("self") => [&r.from[..], &r.path[1..]].concat(),
        Some(first) => {
            let child = [&r.from[..], &[first.to_string()][..]].concat();
            if !modules.contains(&child) {
                return Target::Outside;
            }
            [&r.from[..], &r.path[..]].concat()
        }
        None => return Target::Outside,
    };
    if abs
        .first()
        .is_some_and(|s| ERROR_REEXPORTS.contains(&s.as_str()))
    {
        abs = vec![ERROR.to_string()];
    }
    while !abs.is_empty() {
        if modules.contains(&abs) {
            return Target::Module(abs);
        }
        abs.pop();
    }
    Target::Outside
}

/// Why folder `from` may not import folder `to`, if it may not.
fn folder_rule(from: &str, to: &str) -> Option<String> {
    if from == to || to == ERROR {
        return None;
    }
    if from == NSYS {
        return (to != "sys").then(|| format!("nsys may import only sys, not {to}"));
    }
    if to == NSYS {
        return Some(format!(
            "{from} may not import nsys (nsys stands beside the stages)"
        ));
    }
    let rank = |f: &str| ORDER.iter().position(|o| *o == f);
    match (rank(from), rank(to)) {
        (Some(a), Some(b)) if b > a => Some(format!("{from} may not import {to}, a later stage")),
        _ => None,
    }
}

/// Why `error.rs` may not name `path`: it stands beneath every layer and
/// names none of them, not even their `Error` types (a layer converts its
/// own: `impl From<render::Error> for crate::Error`, beside the enum; the
/// binary maps it to an exit code at its edge).
fn error_rule(r: &Reference, target: &Module) -> Option<String> {
    (target[0] != ERROR).then(|| {
        format!(
            "error.rs names no other module (a layer converts its own error into \
             `crate::Error`, the binary maps it at its edge), not `{}`",
            r.path.join("::")
        )
    })
}

/// An import edge between modules, with one place that makes it.
type Edges = BTreeMap<(Module, Module), Reference>;

/// The layering violations and cycles of the library files `files`
/// (`(relative path, content)`), each a line naming the file, the line and
/// the import.
fn violations(files: &[(String, String)]) -> Vec<String> {
    check(files, Tree::Library)
}

/// The import cycles of the recorder's files (`crates/record/src/...`):
/// its modules have no stage order, but may not loop either.
fn record_violations(files: &[(String, String)]) -> Vec<String> {
    check(files, Tree::Recorder)
}

/// The import cycles of the binary's command files, and every import of
/// one command's file by another's.
fn command_violations(files: &[(String, String)]) -> Vec<String> {
    check(files, Tree::Commands)
}

/// Why command file `from` may not import `to` (`cmd::fold` importing
/// `cmd::render::LookArgs`), if it may not.
fn command_rule(from: &Module, to: &Module) -> Option<String> {
    let (Some(a), Some(b)) = (from.get(1), to.get(1)) else {
        return None;
    };
    (a != b && !SHARED_COMMAND_FILES.contains(&b.as_str())).then(|| {
        format!(
            "the command file {a} imports the command file {b}: move what both need \
             into a shared file of src/cmd/ ({})",
            SHARED_COMMAND_FILES.join(", ")
        )
    })
}

/// [`violations`] (the library: with the stage order, `error.rs`'s rule
/// and the folder cycles), [`record_violations`] (module cycles only) or
/// [`command_violations`] (module cycles and the command files' rule).
fn check(files: &[(String, String)], tree: Tree) -> Vec<String> {
    let library = tree == Tree::Library;
    let of = |rel: &str| module_in(tree, rel);
    let modules: BTreeSet<Module> = files.iter().filter_map(|(p, _)| of(p)).collect();
    let mut problems = Vec::new();
    let mut edges = Edges::new();
    let mut folder_edges = Edges::new();
    for (rel, source) in files {
        for r in references(tree, rel, source) {
            let at = format!("{}:{}: `{}`", r.file, r.line, r.path.join("::"));
            let to = match resolve(&r, &modules) {
                Target::Outside => continue,
                Target::Escapes if !library => continue,
                Target::Escapes => {
                    problems.push(format!("{at}: climbs out of its folder ({})", r.from[0]));
                    continue;
                }
                Target::Module(m) => m,
            };
            if !library {
                let from_file = of(rel).unwrap();
                if tree == Tree::Commands {
                    if let Some(why) = command_rule(&from_file, &to) {
                        problems.push(format!("{at}: {why}"));
                    }
                }
                if !related(&from_file, &to) {
                    edges.entry((from_file, to)).or_insert(r);
                }
                continue;
            }
            let from = &r.from[0];
            let why = if from == ERROR {
                error_rule(&r, &to)
            } else {
                folder_rule(from, &to[0])
            };
            if let Some(why) = why {
                problems.push(format!("{at}: {why}"));
            }
            // `error` stands outside the folder order (every folder may use
            // it), but not outside the module graph: a loop through
            // `error.rs` is a loop.
            if from != &to[0] && to[0] != ERROR && from != ERROR {
                let key = (vec![from.clone()], vec![to[0].clone()]);
                folder_edges.entry(key).or_insert_with(|| r.clone());
            }
            let from_file = of(rel).unwrap();
            if !related(&from_file, &to) {
                edges.entry((from_file, to)).or_insert(r);
            }
        }
    }
    problems.sort();
    problems.extend(cycle_report("folder", &folder_edges));
    problems.extend(cycle_report("module", &edges));
    problems
}

/// True when one module contains the other (a module and its parent or
/// children may name each other: `super::Error`, `mod.rs` re-exports).
fn related(a: &Module, b: &Module) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// One line per cycle: the modules of each strongly connected component
/// and the imports that close it.
fn cycle_report(kind: &str, edges: &Edges) -> Vec<String> {
    let graph: BTreeMap<&Module, Vec<&Module>> =
        edges.keys().fold(BTreeMap::new(), |mut g, (a, b)| {
            g.entry(a).or_insert_with(Vec::new).push(b);
            g
        });
    cycles(&graph)
        .into_iter()
        .map(|scc| {
            let set: BTreeSet<&Module> = scc.iter().copied().collect();
            let imports: Vec<String> = edges
                .iter()
                .filter(|((a, b), _)| set.contains(a) && set.contains(b))
                .map(|((a, b), r)| {
                    format!(
                        "{} -> {} ({}:{} `{}`)",
                        a.join("::"),
                        b.join("::"),
                        r.file,
                        r.line,
                        r.path.join("::")
                    )
                })
                .collect();
            format!("{kind} import cycle: {}", imports.join("; "))
        })
        .collect()
}

/// The strongly connected components of more than one node (Tarjan), each
/// sorted: every import cycle lies within one.
fn cycles<'a, N: Ord>(graph: &BTreeMap<&'a N, Vec<&'a N>>) -> Vec<Vec<&'a N>> {
    struct Tarjan<'a, 'g, N: Ord> {
        graph: &'g BTreeMap<&'a N, Vec<&'a N>>,
        index: BTreeMap<&'a N, (usize, usize)>,
        stack: Vec<&'a N>,
        on_stack: BTreeSet<&'a N>,
        out: Vec<Vec<&'a N>>,
    }
    impl<'a, N: Ord> Tarjan<'a, '_, N> {
        fn visit(&mut self, v: &'a N) {
            let n = self.index.len();
            self.index.insert(v, (n, n));
            self.stack.push(v);
            self.on_stack.insert(v);
            let graph = self.graph;
            for &w in graph.get(v).into_iter().flatten() {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.index[w].1.min(self.index[v].1);
                    self.index.get_mut(v).unwrap().1 = low;
                } else if self.on_stack.contains(w) {
                    let low = self.index[w].0.min(self.index[v].1);
                    self.index.get_mut(v).unwrap().1 = low;
                }
            }
            if self.index[v].0 == self.index[v].1 {
                let mut scc = Vec::new();
                loop {
                    let w = self.stack.pop().unwrap();
                    self.on_stack.remove(w);
                    scc.push(w);
                    if w == v {
                        break;
                    }
                }
                if scc.len() > 1 {
                    scc.sort();
                    self.out.push(scc);
                }
            }
        }
    }
    let mut t = Tarjan {
        graph,
        index: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for &v in graph.keys() {
        if !t.index.contains_key(v) {
            t.visit(v);
        }
    }
    t.out
}

/// Every `.rs` file under `dir`, as `(path relative to the repository
/// root, content)`.
fn sources(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            sources(root, &p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            out.push((rel, fs::read_to_string(&p).unwrap()));
        }
    }
}

#[test]
fn the_recorder_has_no_import_cycles() {
    let root = crate::util::repo_root();
    let mut files = Vec::new();
    sources(&root, &root.join(RECORD_SRC), &mut files);
    files.sort();
    let problems = record_violations(&files);
    assert!(
        problems.is_empty(),
        "{} import cycles in crates/record (docs/development.md, \"Layering\"):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn the_command_files_import_only_shared_ones_without_cycles() {
    let root = crate::util::repo_root();
    let mut files = Vec::new();
    sources(&root, &root.join(COMMANDS), &mut files);
    files.sort();
    assert!(files.len() > 10, "src/cmd/ holds {} files", files.len());
    let problems = command_violations(&files);
    assert!(
        problems.is_empty(),
        "{} problems in src/cmd/ (docs/development.md, \"Layering\"):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn the_library_is_layered_by_stage_without_cycles() {
    let root = crate::util::repo_root();
    let mut files = Vec::new();
    sources(&root, &root.join("src"), &mut files);
    files.sort();
    let problems = violations(&files);
    assert!(
        problems.is_empty(),
        "{} layering problems (docs/development.md, \"Layering\"):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// The most lines a source file may have (issue 56): a file a newcomer
/// reads whole. Unit tests kept in a file of their own (`tests.rs`,
/// `*_tests.rs`) and vendored crates (`vendor/`) are not held to it.
const MAX_LINES: usize = 900;

#[test]
fn no_source_file_is_over_900_lines() {
    let root = crate::util::repo_root();
    let mut files = Vec::new();
    sources(&root, &root.join("src"), &mut files);
    for e in fs::read_dir(root.join("crates")).unwrap() {
        let src = e.unwrap().path().join("src");
        if src.is_dir() {
            sources(&root, &src, &mut files);
        }
    }
    files.sort();
    assert!(files.len() > 100, "{} files", files.len());
    let long: Vec<String> = files
        .iter()
        .filter(|(rel, _)| !rel.ends_with("/tests.rs") && !rel.ends_with("_tests.rs"))
        .map(|(rel, text)| (rel, text.lines().count()))
        .filter(|(_, n)| *n > MAX_LINES)
        .map(|(rel, n)| format!("{rel}: {n} lines"))
        .collect();
    assert!(
        long.is_empty(),
        "files over {MAX_LINES} lines (split them where the code divides; unit tests \
         may go to a tests.rs beside the file):\n{}",
        long.join("\n")
    );
}

/// The file system credentials (`setfsuid`, `setfsgid`, with this
/// thread's `setgroups`) are taken in one place,
/// `crates/capture-format/src/fs_creds.rs`, for jobprof and the recorder
/// alike: no other source of either makes those calls. (The recorder's
/// child that becomes the worker for good before `exec`, `setresuid`, is
/// another thing.)
#[test]
fn the_file_system_credentials_have_one_home() {
    let root = crate::util::repo_root();
    let mut files = Vec::new();
    for dir in ["src", RECORD_SRC, "crates/capture-format/src"] {
        sources(&root, &root.join(dir), &mut files);
    }
    let home = "crates/capture-format/src/fs_creds.rs";
    let calls = ["SYS_setfsuid", "SYS_setfsgid", "setfsuid(", "setfsgid("];
    let elsewhere: Vec<&str> = files
        .iter()
        .filter(|(rel, text)| rel != home && calls.iter().any(|c| text.contains(c)))
        .map(|(rel, _)| rel.as_str())
        .collect();
    assert!(
        elsewhere.is_empty(),
        "file system credentials taken outside {home} (docs/development.md): {elsewhere:?}"
    );
    assert!(
        files.iter().any(|(rel, _)| rel == home),
        "{home} is missing"
    );
}

// ---------------------------------------------------------------------------
// The checker itself, on small planted trees.

fn tree(files: &[(&str, &str)]) -> Vec<String> {
    let files: Vec<(String, String)> = files
        .iter()
        .map(|(p, s)| (p.to_string(), s.to_string()))
        .collect();
    violations(&files)
}

#[test]
fn layering_allows_earlier_stages_sys_and_error() {
    let problems = tree(&[
        ("src/sys/mod.rs", "pub mod atomic; use crate::Error;"),
        (
            "src/sys/atomic.rs",
            "use super::super::error::Result; pub fn f() {}",
        ),
        (
            "src/error.rs",
            "pub enum Error { Nsys(crate::nsys::Error) }",
        ),
        (
            "src/capture/mod.rs",
            "use crate::sys::atomic; use crate::error::Result;",
        ),
        (
            "src/text/mod.rs",
            "use crate::{capture::X, sys::atomic::f};",
        ),
        (
            "src/views/mod.rs",
            "fn f() { crate::text::g(); let _ = crate::sys::atomic::f(); }",
        ),
        (
            "src/nsys/mod.rs",
            "pub struct Error; use crate::sys::atomic::f; use crate::ExitCode;",
        ),
        ("src/lib.rs", "use crate::views::X;"),
        ("src/cmd/mod.rs", "use jobprof::views::X;"),
    ]);
    // error.rs names a stage; `super::super` from sys/atomic.rs reaches the
    // crate root.
    assert_eq!(problems.len(), 3, "{problems:#?}");
    assert!(
        problems[0].starts_with("src/error.rs:1: `crate::nsys::Error`: error.rs names no other"),
        "{problems:#?}"
    );
    assert!(
        problems[1].starts_with("src/sys/atomic.rs:1: `super::super::error::Result`: climbs out")
    );
    // Every module may use `crate::error`, but not one that error.rs names
    // back: that is a loop like any other.
    assert_eq!(
        problems[2],
        "module import cycle: error -> nsys (src/error.rs:1 `crate::nsys::Error`); \
         nsys -> error (src/nsys/mod.rs:1 `crate::ExitCode`)"
    );
}

#[test]
fn layering_names_the_file_and_import_of_a_later_stage() {
    let problems = tree(&[
        ("src/sys/mod.rs", "pub mod slurm;"),
        ("src/sys/slurm.rs", "\nuse crate::capture::Status;"),
        ("src/capture/mod.rs", "pub struct Status;"),
        (
            "src/text/mod.rs",
            "fn f() { println!(\"{}\", crate::views::TITLE); }",
        ),
        ("src/views/mod.rs", "pub const TITLE: &str = \"\";"),
    ]);
    assert_eq!(
        problems,
        [
            "src/sys/slurm.rs:2: `crate::capture::Status`: sys may not import capture, a later stage",
            "src/text/mod.rs:1: `crate::views::TITLE`: text may not import views, a later stage",
        ]
    );
}

#[test]
fn layering_keeps_nsys_on_sys_and_error_on_nothing() {
    let problems = tree(&[
        ("src/nsys/mod.rs", "use crate::text::fold;"),
        ("src/text/mod.rs", "pub mod fold; use crate::nsys::Report;"),
        ("src/text/fold.rs", ""),
        (
            "src/error.rs",
            "fn f(e: &crate::nsys::Error) { matches!(e, crate::nsys::Error::Io { .. }); }",
        ),
    ]);
    // error.rs names neither a stage's `Error` nor a variant of it.
    assert_eq!(problems.len(), 5, "{problems:#?}");
    assert!(problems[0].contains("`crate::nsys::Error::Io`: error.rs names no other module"));
    assert!(problems[1].contains("`crate::nsys::Error`: error.rs names no other module"));
    assert!(
        problems[2].contains("src/nsys/mod.rs:1: `crate::text::fold`: nsys may import only sys")
    );
    assert!(
        problems[3].contains("src/text/mod.rs:1: `crate::nsys::Report`: text may not import nsys")
    );
    // nsys -> text -> nsys is also a cycle between the folders.
    assert_eq!(
        problems[4],
        "folder import cycle: nsys -> text (src/nsys/mod.rs:1 `crate::text::fold`); \
         text -> nsys (src/text/mod.rs:1 `crate::nsys::Report`)"
    );
}

#[test]
fn layering_fails_on_a_planted_cycle_between_modules() {
    // Within one folder the order says nothing; the cycle check does.
    let problems = tree(&[
        (
            "src/nsys/mod.rs",
            "mod flush; mod setup; mod collect; pub struct Error;",
        ),
        (
            "src/nsys/flush.rs",
            "use super::setup::Wrapper; use super::Error;",
        ),
        (
            "src/nsys/setup.rs",
            "pub struct Wrapper; fn f() { super::collect::g() }",
        ),
        (
            "src/nsys/collect.rs",
            "fn g() { crate::nsys::flush::run() }",
        ),
    ]);
    assert_eq!(problems.len(), 1, "{problems:#?}");
    let p = &problems[0];
    assert!(p.starts_with("module import cycle: "), "{p}");
    for edge in [
        "nsys::collect -> nsys::flush (src/nsys/collect.rs:1 `crate::nsys::flush::run`)",
        "nsys::flush -> nsys::setup (src/nsys/flush.rs:1 `super::setup::Wrapper`)",
        "nsys::setup -> nsys::collect (src/nsys/setup.rs:1 `super::collect::g`)",
    ] {
        assert!(p.contains(edge), "{edge} missing from {p}");
    }
    // Broken anywhere, the cycle is gone.
    let fixed = tree(&[
        (
            "src/nsys/mod.rs",
            "mod flush; mod setup; mod collect; pub struct Error;",
        ),
        (
            "src/nsys/flush.rs",
            "use super::setup::Wrapper; use super::Error;",
        ),
        ("src/nsys/setup.rs", "pub struct Wrapper;"),
        (
            "src/nsys/collect.rs",
            "fn g() { crate::nsys::flush::run() }",
        ),
    ]);
    assert!(fixed.is_empty(), "{fixed:#?}");
}

#[test]
fn layering_skips_test_modules() {
    let problems = tree(&[
        (
            "src/sys/mod.rs",
            "#[cfg(test)]\nmod tests { use crate::views::X; fn f() { super::super::views::g(); } }",
        ),
        ("src/views/mod.rs", "pub fn g() {}"),
    ]);
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn cycles_finds_every_loop_and_only_loops() {
    let (a, b, c, d) = (&1, &2, &3, &4);
    let graph = BTreeMap::from([(a, vec![b]), (b, vec![c]), (c, vec![a, d])]);
    assert_eq!(cycles(&graph), vec![vec![a, b, c]]);
    let dag = BTreeMap::from([(a, vec![b, c]), (b, vec![c]), (c, vec![d])]);
    assert!(cycles(&dag).is_empty());
    let two = BTreeMap::from([(a, vec![b]), (b, vec![a]), (c, vec![d]), (d, vec![c])]);
    assert_eq!(cycles(&two).len(), 2);
}

#[test]
fn layering_reads_paths_inside_attributes() {
    // native::error names a constant of native::header in an `#[error]`
    // attribute; header imports error: a cycle only the attribute shows.
    let files = [
        ("src/symbolize/mod.rs", "pub mod native;"),
        ("src/symbolize/native/mod.rs", "mod error; mod header;"),
        (
            "src/symbolize/native/error.rs",
            "#[derive(thiserror::Error)]\npub enum Damage {\n    \
             #[error(\"a header {size}\", size = super::header::SIZE)]\n    Short,\n}",
        ),
        (
            "src/symbolize/native/header.rs",
            "use super::error::Damage; pub const SIZE: usize = 104;",
        ),
        ("src/views/mod.rs", "pub const TITLE: &str = \"\";"),
        ("src/sys/mod.rs", "#[doc(alias = \"x\")]\n#[cfg_attr(unix, path = \"p\")]\nmod a;\n#[error(\"{}\", crate::views::TITLE)]\npub struct E;"),
    ];
    let problems = tree(&files);
    assert_eq!(problems.len(), 2, "{problems:#?}");
    assert_eq!(
        problems[0],
        "src/sys/mod.rs:4: `crate::views::TITLE`: sys may not import views, a later stage"
    );
    assert_eq!(
        problems[1],
        "module import cycle: symbolize::native::error -> symbolize::native::header \
         (src/symbolize/native/error.rs:3 `super::header::SIZE`); \
         symbolize::native::header -> symbolize::native::error \
         (src/symbolize/native/header.rs:1 `super::error::Damage`)"
    );
}

#[test]
fn layering_checks_the_recorder_for_cycles() {
    // crates/record is a binary of flat modules: no stage order, but no
    // cycles either, reported with the recorder's own paths.
    let files: Vec<(String, String)> = [
        (
            "crates/record/src/main.rs",
            "mod cli; mod nsys; mod preflight;",
        ),
        (
            "crates/record/src/cli.rs",
            "pub struct Opts; use crate::nsys::run;",
        ),
        (
            "crates/record/src/nsys/mod.rs",
            "mod opts; pub fn run() { crate::preflight::check() }",
        ),
        ("crates/record/src/nsys/opts.rs", "use super::run;"),
        (
            "crates/record/src/preflight.rs",
            "use crate::cli::Opts; pub fn check() {}",
        ),
    ]
    .iter()
    .map(|(p, s)| (p.to_string(), s.to_string()))
    .collect();
    let problems = record_violations(&files);
    assert_eq!(problems.len(), 1, "{problems:#?}");
    let p = &problems[0];
    for edge in [
        "cli -> nsys (crates/record/src/cli.rs:1 `crate::nsys::run`)",
        "nsys -> preflight (crates/record/src/nsys/mod.rs:1 `crate::preflight::check`)",
        "preflight -> cli (crates/record/src/preflight.rs:1 `crate::cli::Opts`)",
    ] {
        assert!(p.contains(edge), "{edge} missing from {p}");
    }
    let fixed: Vec<(String, String)> = files
        .into_iter()
        .filter(|(p, _)| !p.ends_with("preflight.rs"))
        .collect();
    assert!(record_violations(&fixed).is_empty());
}

#[test]
fn layering_checks_the_command_files() {
    // `fold` and `render` importing each other, as they did: a cycle, and
    // two command files importing each other's; a shared file is allowed.
    let files: Vec<(String, String)> = [
        (
            "src/cmd/mod.rs",
            "pub mod fold; pub mod render; pub mod files;",
        ),
        (
            "src/cmd/fold.rs",
            "use super::render::refuse; use super::files::write;",
        ),
        ("src/cmd/render.rs", "fn f() { super::fold::symbolize() }"),
        (
            "src/cmd/files.rs",
            "pub fn write() { jobprof::sys::atomic::f() }",
        ),
    ]
    .iter()
    .map(|(p, s)| (p.to_string(), s.to_string()))
    .collect();
    let problems = command_violations(&files);
    assert_eq!(problems.len(), 3, "{problems:#?}");
    assert!(problems[0].starts_with("src/cmd/fold.rs:1: `super::render::refuse`: the command file fold imports the command file render"), "{problems:#?}");
    assert!(
        problems[1].starts_with(
            "src/cmd/render.rs:1: `super::fold::symbolize`: the command file render imports"
        ),
        "{problems:#?}"
    );
    assert!(
        problems[2].starts_with("module import cycle: cmd::fold -> cmd::render"),
        "{problems:#?}"
    );
    let fixed: Vec<(String, String)> = files
        .into_iter()
        .map(|(p, s)| match p.as_str() {
            "src/cmd/fold.rs" => (p, "use super::files::write;".to_string()),
            "src/cmd/render.rs" => (p, "fn f() { super::files::write() }".to_string()),
            _ => (p, s),
        })
        .collect();
    assert!(command_violations(&fixed).is_empty());
}
