//! The CPU samples (`COMPOSITE_EVENTS`) and their call chains
//! (`SAMPLING_CALLCHAINS`, `stackDepth` 0 = the leaf) as folded stacks
//! `thread;root;...;leaf`, one count per sample, the thread named as perf
//! names it (`ThreadNames`, else its process's name in `PROCESSES`).
//!
//! Both tables are stepped in id order side by side (a merge, not a join),
//! so a sample's frames are in memory only while its stack is counted.
//! Names are read once, made printable and cut to their limit
//! ([`Names::clean`]); each distinct frame is one small id ([`Names`]
//! interns them), a stack is counted by its ids, and its text is built
//! once per distinct stack at the end.

use std::cell::Cell;

use rustc_hash::FxHashMap;

use super::schema::Db;
use super::{Cuts, Limits, Result, Span};

/// nsys's marks where an unwind stopped: not functions, left out.
const MARKS: [&str; 2] = ["[Broken backtraces]", "[Max depth]"];

/// The frame id of `[unknown]` (a sample without a chain).
pub(super) const UNKNOWN: u32 = 0;

/// What makes a call-chain row's frame name: its string ids and flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct Frame {
    pub(super) symbol: Option<i64>,
    pub(super) module: Option<i64>,
    pub(super) unresolved: bool,
    pub(super) kernel: bool,
}

/// The names the stacks need: strings, threads, processes, and every
/// distinct frame and thread met, interned.
pub(super) struct Names {
    strings: FxHashMap<i64, String>,
    threads: FxHashMap<i64, String>,
    processes: FxHashMap<i64, String>,
    limits: Limits,
    cuts: Cell<Cuts>,
    /// Frame ids by what makes them (`None`: a mark, left out).
    frame_ids: FxHashMap<Frame, Option<u32>>,
    /// Frame names by id (`[unknown]` first).
    frame_names: Vec<String>,
    /// Thread ids by `globalTid`, and their names by id.
    thread_ids: FxHashMap<i64, u32>,
    thread_names: Vec<String>,
}

impl Names {
    /// Reads `StringIds`, `ThreadNames` and `PROCESSES`.
    pub(super) fn read(db: &Db, limits: &Limits) -> Result<Names> {
        let mut names = Names {
            strings: FxHashMap::default(),
            threads: FxHashMap::default(),
            processes: FxHashMap::default(),
            limits: limits.clone(),
            cuts: Cell::new(Cuts::default()),
            frame_ids: FxHashMap::default(),
            frame_names: vec!["[unknown]".into()],
            thread_ids: FxHashMap::default(),
            thread_names: Vec::new(),
        };
        names.strings = names.read_strings(db)?;
        if db.has("ThreadNames", &["nameId", "globalTid", "priority"])? {
            let sql = "SELECT globalTid, nameId FROM ThreadNames ORDER BY priority";
            let (strings, threads) = (&names.strings, &mut names.threads);
            db.each(sql, "ThreadNames", |r| {
                let tid: i64 = r.get(0)?;
                let name: Option<i64> = r.get(1)?;
                if let Some(n) = name.and_then(|n| strings.get(&n)) {
                    // The highest priority comes last and wins.
                    threads.insert(tid, n.clone());
                }
                Ok(())
            })?;
        }
        if db.has("PROCESSES", &["globalPid", "name"])? {
            let mut processes = FxHashMap::default();
            let sql = "SELECT globalPid, name FROM PROCESSES";
            db.each(sql, "PROCESSES", |r| {
                let pid: i64 = r.get(0)?;
                if let Some(n) = r.get::<_, Option<String>>(1)? {
                    processes.insert(pid, names.clean(&n));
                }
                Ok(())
            })?;
            names.processes = processes;
        }
        Ok(names)
    }

    /// `StringIds` as a table from id to (clean) text: the dictionary
    /// every name column points into, small next to the events.
    fn read_strings(&self, db: &Db) -> Result<FxHashMap<i64, String>> {
        let mut map = FxHashMap::default();
        if !db.has("StringIds", &["id", "value"])? {
            return Ok(map);
        }
        db.each("SELECT id, value FROM StringIds", "StringIds", |r| {
            let v: Option<String> = r.get(1)?;
            map.insert(r.get(0)?, self.clean(v.as_deref().unwrap_or_default()));
            Ok(())
        })?;
        Ok(map)
    }

    /// `raw` as every output may print it: control characters escaped
    /// (a name cannot split or forge a line), then cut to the name limit
    /// at a character boundary with `...` added (counted).
    pub(super) fn clean(&self, raw: &str) -> String {
        let text = crate::sys::printable::printable_text(raw);
        let max = self.limits.max_name;
        if text.len() <= max {
            return text.into_owned();
        }
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let mut c = self.cuts.get();
        c.long_names += 1;
        self.cuts.set(c);
        format!("{}...", &text[..end])
    }

    /// Counts a chain cut at the depth limit.
    fn deep_chain(&self) {
        let mut c = self.cuts.get();
        c.deep_chains += 1;
        self.cuts.set(c);
    }

    /// Counts a chain row skipped for a repeated `stackDepth`.
    fn repeated_depth(&self) {
        let mut c = self.cuts.get();
        c.repeated_depths += 1;
        self.cuts.set(c);
    }

    /// What was cut so far.
    pub(super) fn cuts(&self) -> Cuts {
        self.cuts.get()
    }

    /// A string by id, when the id names one.
    pub(super) fn lookup(&self, id: i64) -> Option<&str> {
        self.strings.get(&id).map(String::as_str)
    }

    /// A string by id (`[unknown]` when the id names none).
    pub(super) fn string(&self, id: Option<i64>) -> &str {
        id.and_then(|i| self.strings.get(&i))
            .map_or("[unknown]", String::as_str)
    }

    /// The id of the thread `global_tid`, named as perf's `comm` would
    /// be: its own name, else its process's (the executable's file name,
    /// at most 15 bytes as the kernel keeps it), else `[unknown]`. A
    /// `globalTid` holds the pid in bits 24..48 and the tid below; a
    /// `globalPid` is it without the tid.
    pub(super) fn thread(&mut self, global_tid: i64) -> u32 {
        if let Some(&id) = self.thread_ids.get(&global_tid) {
            return id;
        }
        let name = self.thread_name(global_tid);
        let id = self.thread_names.len() as u32;
        self.thread_names.push(name);
        self.thread_ids.insert(global_tid, id);
        id
    }

    fn thread_name(&self, global_tid: i64) -> String {
        if let Some(n) = self.threads.get(&global_tid) {
            return n.clone();
        }
        let pid = global_tid & !0xff_ffff;
        match self.processes.get(&pid) {
            Some(p) => {
                let base = p.rsplit('/').next().unwrap_or(p);
                let mut end = base.len().min(15);
                while !base.is_char_boundary(end) {
                    end -= 1;
                }
                base[..end].to_string()
            }
            None => "[unknown]".into(),
        }
    }

    /// The name of thread id `id` ([`Names::thread`]).
    pub(super) fn thread_text(&self, id: u32) -> &str {
        &self.thread_names[id as usize]
    }

    /// The id of one call-chain frame, named as a folded stack names it:
    /// the symbol, `_[k]` after a kernel one, `[module file name]` for an
    /// address nsys could not name; `None` for nsys's marks of a stopped
    /// unwind. Each distinct frame's name is made once.
    pub(super) fn frame(&mut self, f: &Frame) -> Option<u32> {
        if let Some(&id) = self.frame_ids.get(f) {
            return id;
        }
        let id = self.frame_name(f).map(|name| {
            self.frame_names.push(name);
            (self.frame_names.len() - 1) as u32
        });
        self.frame_ids.insert(*f, id);
        id
    }

    fn frame_name(&self, f: &Frame) -> Option<String> {
        let s = self.string(f.symbol);
        if MARKS.contains(&s) {
            return None;
        }
        let unnamed = f.unresolved || s.starts_with("0x") || s.is_empty();
        let mut name = if unnamed {
            let m = self.string(f.module);
            format!("[{}]", m.rsplit('/').next().unwrap_or(m))
        } else {
            s.to_string()
        };
        if f.kernel {
            name.push_str("_[k]");
        }
        Some(name)
    }

    /// The name of frame id `id` ([`Names::frame`]).
    pub(super) fn frame_text(&self, id: u32) -> &str {
        &self.frame_names[id as usize]
    }

    /// `thread;root;...;leaf` from a thread id and frame ids in leaf-first
    /// order.
    pub(super) fn key(&self, thread: u32, leaf_first: &[u32]) -> String {
        let thread = self.thread_text(thread);
        let frames = leaf_first.iter().map(|&f| self.frame_text(f));
        key(thread, frames)
    }
}

/// `thread;root;...;leaf` from frame names in leaf-first order.
pub(super) fn key<'a>(
    thread: &str,
    leaf_first: impl DoubleEndedIterator<Item = &'a str>,
) -> String {
    let mut k = String::with_capacity(64);
    k.push_str(if thread.is_empty() {
        "[unknown]"
    } else {
        thread
    });
    for f in leaf_first.rev() {
        k.push(';');
        k.push_str(f);
    }
    k
}

/// One row of a call-chain table: its chain id, depth and frame.
type ChainRow = (i64, i64, Frame);

/// The call-chain query of `table` (`SAMPLING_CALLCHAINS` or
/// `OSRT_CALLCHAINS`), in id then depth order: id, stackDepth, symbol,
/// module, unresolved, kernelMode (the last two `NULL` where the schema
/// lacks them).
pub(super) fn chain_query(db: &Db, table: &str, ids: Option<(i64, i64)>) -> Result<Option<String>> {
    if !db.has(table, &["id", "symbol", "module", "stackDepth"])? {
        return Ok(None);
    }
    let cols = db.columns(table)?.unwrap_or_default();
    let opt = |c: &str| {
        if cols.iter().any(|k| k == c) {
            c.to_string()
        } else {
            "NULL".into()
        }
    };
    // A window's chains only: with the table's key (id, stackDepth) SQLite
    // starts at the window's first chain instead of reading every chain
    // before it, once per window.
    let only = match ids {
        Some((first, last)) => format!("WHERE id >= {first} AND id <= {last} "),
        None => String::new(),
    };
    Ok(Some(format!(
        "SELECT id, stackDepth, symbol, module, {}, {} FROM {table} {only}ORDER BY id, stackDepth",
        opt("unresolved"),
        opt("kernelMode")
    )))
}

/// The smallest and largest `column` of `table`'s rows `filter` takes
/// (`(1, 0)`, an empty range, when none): the chains a window needs.
pub(super) fn id_range(
    db: &Db,
    column: &str,
    table: &str,
    filter: &str,
    what: &str,
) -> Result<(i64, i64)> {
    let sql = format!("SELECT min({column}), max({column}) FROM {table} WHERE {filter}");
    let (first, last): (Option<i64>, Option<i64>) = db
        .conn
        .query_row(&sql, [], |r| Ok((r.get(0)?, r.get(1)?)))
        .map_err(db.err(what))?;
    Ok(first.zip(last).unwrap_or((1, 0)))
}

/// Reads one chain row.
fn chain_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ChainRow> {
    Ok((
        r.get(0)?,
        r.get::<_, Option<i64>>(1)?.unwrap_or(0),
        Frame {
            symbol: r.get(2)?,
            module: r.get(3)?,
            unresolved: r.get::<_, Option<i64>>(4)?.unwrap_or(0) != 0,
            kernel: r.get::<_, Option<i64>>(5)?.unwrap_or(0) != 0,
        },
    ))
}

/// A call-chain table stepped in (id, depth) order, one chain at a time.
pub(super) struct Chains<'s> {
    rows: Option<rusqlite::Rows<'s>>,
    pending: Option<ChainRow>,
}

impl<'s> Chains<'s> {
    /// Steps the rows of `st` (prepared from [`chain_query`]); `None`: the
    /// export has no such table, every chain is empty.
    pub(super) fn new(
        db: &Db,
        st: Option<&'s mut rusqlite::Statement<'_>>,
        what: &str,
    ) -> Result<Chains<'s>> {
        let rows = match st {
            Some(st) => Some(st.query([]).map_err(db.err(what))?),
            None => None,
        };
        Ok(Chains {
            rows,
            pending: None,
        })
    }

    /// The frame ids of chain `id` (leaf first) into `out` (cleared):
    /// rows of lower ids are passed over (chains without their event),
    /// a repeated depth is skipped and counted, and frames past the depth
    /// limit are dropped (the chain counted once).
    pub(super) fn read(
        &mut self,
        db: &Db,
        id: i64,
        names: &mut Names,
        out: &mut Vec<u32>,
        what: &str,
    ) -> Result<()> {
        out.clear();
        let Some(rows) = self.rows.as_mut() else {
            return Ok(());
        };
        let (mut last_depth, mut deep) = (None, false);
        loop {
            let row = match self.pending.take() {
                Some(p) => p,
                None => match rows.next().map_err(db.err(what))? {
                    Some(r) => chain_row(r).map_err(db.err(what))?,
                    None => break,
                },
            };
            if row.0 < id {
                continue;
            }
            if row.0 > id {
                self.pending = Some(row);
                break;
            }
            if last_depth == Some(row.1) {
                names.repeated_depth();
                continue;
            }
            last_depth = Some(row.1);
            if let Some(f) = names.frame(&row.2) {
                if out.len() < names.limits.max_depth {
                    out.push(f);
                } else {
                    deep = true;
                }
            }
        }
        if deep {
            names.deep_chain();
        }
        Ok(())
    }
}

/// The CPU samples folded, and how many there were (a sample without a
/// call chain counts too, as `thread;[unknown]`); only those taken in
/// `span` when given.
pub(super) fn fold(
    db: &Db,
    names: &mut Names,
    span: Option<Span>,
) -> Result<(Vec<(String, u64)>, u64)> {
    let needed: &[&str] = match span {
        Some(_) => &["id", "globalTid", "start"],
        None => &["id", "globalTid"],
    };
    if !db.has("COMPOSITE_EVENTS", needed)? {
        return Ok((Vec::new(), 0));
    }
    let what = "the CPU samples (COMPOSITE_EVENTS, SAMPLING_CALLCHAINS)";
    let sql = format!(
        "SELECT id, globalTid FROM COMPOSITE_EVENTS WHERE {} ORDER BY id",
        Span::sql(span)
    );
    let mut samples = db.conn.prepare(&sql).map_err(db.err(what))?;
    let ids = match span {
        Some(span) => Some(id_range(
            db,
            "id",
            "COMPOSITE_EVENTS",
            &Span::sql(Some(span)),
            what,
        )?),
        None => None,
    };
    let chain_sql = chain_query(db, "SAMPLING_CALLCHAINS", ids)?;
    let mut chain_st = match &chain_sql {
        Some(sql) => Some(db.conn.prepare(sql).map_err(db.err(what))?),
        None => None,
    };
    let mut chains = Chains::new(db, chain_st.as_mut(), what)?;
    // Counts by [thread id, frame ids leaf first...].
    let mut counts: FxHashMap<Box<[u32]>, u64> = FxHashMap::default();
    let mut count = 0u64;
    let mut rows = samples.query([]).map_err(db.err(what))?;
    let (mut frames, mut stack) = (Vec::new(), Vec::new());
    while let Some(r) = rows.next().map_err(db.err(what))? {
        let id: i64 = r.get(0).map_err(db.err(what))?;
        let tid: Option<i64> = r.get(1).map_err(db.err(what))?;
        chains.read(db, id, names, &mut frames, what)?;
        stack.clear();
        stack.push(names.thread(tid.unwrap_or(0)));
        match frames.is_empty() {
            true => stack.push(UNKNOWN),
            false => stack.extend_from_slice(&frames),
        }
        match counts.get_mut(stack.as_slice()) {
            Some(n) => *n += 1,
            None => {
                counts.insert(stack.as_slice().into(), 1);
            }
        }
        count += 1;
    }
    let mut folded: FxHashMap<String, u64> = FxHashMap::default();
    for (stack, n) in counts {
        *folded.entry(names.key(stack[0], &stack[1..])).or_default() += n;
    }
    Ok((super::sorted(folded), count))
}
