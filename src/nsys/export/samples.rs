//! The CPU samples (`COMPOSITE_EVENTS`) and their call chains
//! (`SAMPLING_CALLCHAINS`, `stackDepth` 0 = the leaf) as folded stacks
//! `thread;root;...;leaf`, one count per sample, the thread named as perf
//! names it (`ThreadNames`, else its process's name in `PROCESSES`).
//!
//! Both tables are stepped in id order side by side (a merge, not a join),
//! so a sample's frames are in memory only while its stack is built.

use std::collections::HashMap;

use rustc_hash::FxHashMap;

use super::schema::Db;
use super::Result;

/// nsys's marks where an unwind stopped: not functions, left out.
const MARKS: [&str; 2] = ["[Broken backtraces]", "[Max depth]"];

/// The names the stacks need: strings, threads, processes.
pub(super) struct Names {
    strings: FxHashMap<i64, String>,
    threads: FxHashMap<i64, String>,
    processes: FxHashMap<i64, String>,
}

impl Names {
    /// Reads `StringIds`, `ThreadNames` and `PROCESSES`.
    pub(super) fn read(db: &Db) -> Result<Names> {
        let strings = db.strings()?;
        let mut threads = FxHashMap::default();
        if db.has("ThreadNames", &["nameId", "globalTid", "priority"])? {
            let what = "ThreadNames";
            let mut st = db
                .conn
                .prepare("SELECT globalTid, nameId FROM ThreadNames ORDER BY priority")
                .map_err(db.err(what))?;
            let mut rows = st.query([]).map_err(db.err(what))?;
            while let Some(r) = rows.next().map_err(db.err(what))? {
                let tid: i64 = r.get(0).map_err(db.err(what))?;
                let name: Option<i64> = r.get(1).map_err(db.err(what))?;
                if let Some(n) = name.and_then(|n| strings.get(&n)) {
                    // The highest priority comes last and wins.
                    threads.insert(tid, n.clone());
                }
            }
        }
        let mut processes = FxHashMap::default();
        if db.has("PROCESSES", &["globalPid", "name"])? {
            let what = "PROCESSES";
            let mut st = db
                .conn
                .prepare("SELECT globalPid, name FROM PROCESSES")
                .map_err(db.err(what))?;
            let mut rows = st.query([]).map_err(db.err(what))?;
            while let Some(r) = rows.next().map_err(db.err(what))? {
                let pid: i64 = r.get(0).map_err(db.err(what))?;
                let name: Option<String> = r.get(1).map_err(db.err(what))?;
                if let Some(n) = name {
                    processes.insert(pid, n);
                }
            }
        }
        Ok(Names {
            strings,
            threads,
            processes,
        })
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

    /// The thread's name as perf's `comm` would be: its own name, else its
    /// process's (the executable's file name, at most 15 bytes as the
    /// kernel keeps it), else `[unknown]`. A `globalTid` holds the pid in
    /// bits 24..48 and the tid below; a `globalPid` is it without the tid.
    pub(super) fn thread(&self, global_tid: i64) -> String {
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

    /// One call-chain frame as a folded stack names it: the symbol, `_[k]`
    /// after a kernel one, `[module file name]` for an address nsys could
    /// not name; `None` for nsys's marks of a stopped unwind.
    pub(super) fn frame(&self, f: &Frame) -> Option<String> {
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
}

/// One row of a call-chain table.
pub(super) struct Frame {
    pub(super) symbol: Option<i64>,
    pub(super) module: Option<i64>,
    pub(super) unresolved: bool,
    pub(super) kernel: bool,
}

/// The call-chain query of `table` (`SAMPLING_CALLCHAINS` or
/// `OSRT_CALLCHAINS`), in id then depth order: id, symbol, module,
/// unresolved, kernelMode (the last two `NULL` where the schema lacks them).
pub(super) fn chain_query(db: &Db, table: &str) -> Result<Option<String>> {
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
    Ok(Some(format!(
        "SELECT id, symbol, module, {}, {} FROM {table} ORDER BY id, stackDepth",
        opt("unresolved"),
        opt("kernelMode")
    )))
}

/// Reads one chain row.
pub(super) fn chain_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<(i64, Frame)> {
    Ok((
        r.get(0)?,
        Frame {
            symbol: r.get(1)?,
            module: r.get(2)?,
            unresolved: r.get::<_, Option<i64>>(3)?.unwrap_or(0) != 0,
            kernel: r.get::<_, Option<i64>>(4)?.unwrap_or(0) != 0,
        },
    ))
}

/// `thread;root;...;leaf` from frames in leaf-first order.
pub(super) fn key(thread: &str, leaf_first: &[String]) -> String {
    let mut k = String::with_capacity(16 * (leaf_first.len() + 1));
    k.push_str(if thread.is_empty() {
        "[unknown]"
    } else {
        thread
    });
    for f in leaf_first.iter().rev() {
        k.push(';');
        k.push_str(f);
    }
    k
}

/// The CPU samples folded, and how many there were (a sample without a
/// call chain counts too, as `thread;[unknown]`).
pub(super) fn fold(db: &Db, names: &Names) -> Result<(Vec<(String, u64)>, u64)> {
    if !db.has("COMPOSITE_EVENTS", &["id", "globalTid"])? {
        return Ok((Vec::new(), 0));
    }
    let what = "the CPU samples (COMPOSITE_EVENTS, SAMPLING_CALLCHAINS)";
    let mut samples = db
        .conn
        .prepare("SELECT id, globalTid FROM COMPOSITE_EVENTS ORDER BY id")
        .map_err(db.err(what))?;
    let chain_sql = chain_query(db, "SAMPLING_CALLCHAINS")?;
    let mut chains = match &chain_sql {
        Some(sql) => Some(db.conn.prepare(sql).map_err(db.err(what))?),
        None => None,
    };
    let mut chain_rows = match chains.as_mut() {
        Some(c) => Some(c.query([]).map_err(db.err(what))?),
        None => None,
    };
    let mut pending: Option<(i64, Frame)> = None;
    let mut folded: HashMap<String, u64> = HashMap::new();
    let mut count = 0u64;
    let mut rows = samples.query([]).map_err(db.err(what))?;
    let mut frames: Vec<String> = Vec::new();
    while let Some(r) = rows.next().map_err(db.err(what))? {
        let id: i64 = r.get(0).map_err(db.err(what))?;
        let tid: Option<i64> = r.get(1).map_err(db.err(what))?;
        frames.clear();
        if let Some(cr) = chain_rows.as_mut() {
            loop {
                let row = match pending.take() {
                    Some(p) => p,
                    None => match cr.next().map_err(db.err(what))? {
                        Some(r) => chain_row(r).map_err(db.err(what))?,
                        None => break,
                    },
                };
                if row.0 < id {
                    continue; // a chain without its sample
                }
                if row.0 > id {
                    pending = Some(row);
                    break;
                }
                frames.extend(names.frame(&row.1));
            }
        }
        if frames.is_empty() {
            frames.push("[unknown]".into());
        }
        let k = key(&names.thread(tid.unwrap_or(0)), &frames);
        *folded.entry(k).or_default() += 1;
        count += 1;
    }
    Ok((super::sorted(folded), count))
}
