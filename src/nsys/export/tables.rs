//! The timed tables: OS runtime calls (`OSRT_API`, with `OSRT_CALLCHAINS`
//! for the waits' stacks), NVTX ranges (`NVTX_EVENTS`), CUDA kernels and
//! memory copies (`CUPTI_ACTIVITY_KIND_KERNEL`, `..._MEMCPY`), each by the
//! rule of the `nsys stats` report it matches (`osrtsum`, `nvtxsum`,
//! `gpukernsum`, `gpumemtimesum`).

use std::collections::HashMap;

use rustc_hash::FxHashMap;

use super::samples::{chain_query, chain_row, key, Frame, Names};
use super::schema::Db;
use super::{sorted, stats, Result, Stat};

/// `OSRT_API.eventClass` of a call (`TRACE_PROCESS_EVENT_OS_RUNTIME`);
/// the others mark the trace's start and end (osrtsum counts 27 only).
const OSRT_CALL: i64 = 27;

/// NVTX event types that are ranges: push/pop, start/end, and the same
/// from NVTXT files; 75 creates a domain.
const NVTX_RANGES: [i64; 4] = [59, 60, 70, 71];
const NVTX_DOMAIN_CREATE: i64 = 75;

/// `Some(column)` when `table` has it, else the SQL `NULL`.
fn col_or_null(db: &Db, table: &str, c: &str) -> Result<String> {
    let cols = db.columns(table)?.unwrap_or_default();
    Ok(if cols.iter().any(|k| k == c) {
        c.into()
    } else {
        "NULL".into()
    })
}

/// The waits folded (`thread;root;...;call`, ns) and the calls per function.
pub(super) type Waits = (Vec<(String, u64)>, Vec<Stat>);

/// The OS runtime calls: their waits and per function; `None` without an
/// OS runtime trace.
pub(super) fn osrt(db: &Db, names: &Names) -> Result<Option<Waits>> {
    let needed = ["start", "end", "eventClass", "globalTid", "nameId"];
    if !db.has("OSRT_API", &needed)? {
        return Ok(None);
    }
    let what = "the OS runtime calls (OSRT_API, OSRT_CALLCHAINS)";
    let cc = col_or_null(db, "OSRT_API", "callchainId")?;
    let sql = format!(
        "SELECT start, end, globalTid, nameId, {cc} FROM OSRT_API \
         WHERE eventClass = {OSRT_CALL} ORDER BY {cc}"
    );
    let mut calls = db.conn.prepare(&sql).map_err(db.err(what))?;
    let chain_sql = chain_query(db, "OSRT_CALLCHAINS")?;
    let mut chains = match &chain_sql {
        Some(s) => Some(db.conn.prepare(s).map_err(db.err(what))?),
        None => None,
    };
    let mut chain_rows = match chains.as_mut() {
        Some(c) => Some(c.query([]).map_err(db.err(what))?),
        None => None,
    };
    let mut pending: Option<(i64, Frame)> = None;
    let mut last: (Option<i64>, Vec<String>) = (None, Vec::new());
    let mut waits: HashMap<String, u64> = HashMap::new();
    let mut per_name: HashMap<String, Vec<u64>> = HashMap::new();
    let mut rows = calls.query([]).map_err(db.err(what))?;
    while let Some(r) = rows.next().map_err(db.err(what))? {
        let start: i64 = r
            .get::<_, Option<i64>>(0)
            .map_err(db.err(what))?
            .unwrap_or(0);
        let end: i64 = r
            .get::<_, Option<i64>>(1)
            .map_err(db.err(what))?
            .unwrap_or(start);
        let tid: i64 = r
            .get::<_, Option<i64>>(2)
            .map_err(db.err(what))?
            .unwrap_or(0);
        let name = names.string(r.get(3).map_err(db.err(what))?).to_string();
        let chain: Option<i64> = r.get::<_, Option<i64>>(4).map_err(db.err(what))?;
        let ns = end.saturating_sub(start).max(0) as u64;
        if chain != last.0 {
            last = (chain, Vec::new());
            if let (Some(id), Some(cr)) = (chain.filter(|c| *c > 0), chain_rows.as_mut()) {
                loop {
                    let row = match pending.take() {
                        Some(p) => p,
                        None => match cr.next().map_err(db.err(what))? {
                            Some(r) => chain_row(r).map_err(db.err(what))?,
                            None => break,
                        },
                    };
                    if row.0 < id {
                        continue;
                    }
                    if row.0 > id {
                        pending = Some(row);
                        break;
                    }
                    last.1.extend(names.frame(&row.1));
                }
            }
        }
        let mut frames = last.1.clone();
        if frames.first() != Some(&name) {
            frames.insert(0, name.clone());
        }
        *waits.entry(key(&names.thread(tid), &frames)).or_default() += ns;
        per_name.entry(name).or_default().push(ns);
    }
    Ok(Some((sorted(waits), stats(per_name))))
}

/// The NVTX ranges per name, as `nvtxsum` names them (`domain:text` in a
/// named domain); a range without an end lasts to the trace's last NVTX
/// time. Push/pop and start/end ranges of one name are one row.
pub(super) fn nvtx(db: &Db, names: &Names) -> Result<Option<Vec<Stat>>> {
    if !db.has(
        "NVTX_EVENTS",
        &["start", "end", "eventType", "text", "globalTid"],
    )? {
        return Ok(None);
    }
    let what = "the NVTX ranges (NVTX_EVENTS)";
    let text_id = col_or_null(db, "NVTX_EVENTS", "textId")?;
    let domain_id = col_or_null(db, "NVTX_EVENTS", "domainId")?;
    // Domains per process: (domain id, pid bits) -> name, the first made.
    let mut domains: FxHashMap<(i64, i64), String> = FxHashMap::default();
    let sql = format!(
        "SELECT {domain_id}, globalTid, text FROM NVTX_EVENTS \
         WHERE eventType = {NVTX_DOMAIN_CREATE} ORDER BY start DESC"
    );
    let mut st = db.conn.prepare(&sql).map_err(db.err(what))?;
    let mut rows = st.query([]).map_err(db.err(what))?;
    while let Some(r) = rows.next().map_err(db.err(what))? {
        let d: Option<i64> = r.get(0).map_err(db.err(what))?;
        let tid: i64 = r
            .get::<_, Option<i64>>(1)
            .map_err(db.err(what))?
            .unwrap_or(0);
        if let (Some(d), Some(t)) = (d, r.get::<_, Option<String>>(2).map_err(db.err(what))?) {
            domains.insert((d, tid & PID_BITS), t);
        }
    }
    drop(rows);
    let max_ts: i64 = db
        .conn
        .query_row(
            "SELECT max(max(start), coalesce(max(end), 0)) FROM NVTX_EVENTS",
            [],
            |r| r.get::<_, Option<i64>>(0),
        )
        .map_err(db.err(what))?
        .unwrap_or(0);
    let types = NVTX_RANGES.map(|t| t.to_string()).join(",");
    let sql = format!(
        "SELECT start, end, text, {text_id}, {domain_id}, globalTid FROM NVTX_EVENTS \
         WHERE eventType IN ({types})"
    );
    let mut st = db.conn.prepare(&sql).map_err(db.err(what))?;
    let mut rows = st.query([]).map_err(db.err(what))?;
    let mut per_name: HashMap<String, Vec<u64>> = HashMap::new();
    while let Some(r) = rows.next().map_err(db.err(what))? {
        let start: i64 = r
            .get::<_, Option<i64>>(0)
            .map_err(db.err(what))?
            .unwrap_or(0);
        let end: i64 = r
            .get::<_, Option<i64>>(1)
            .map_err(db.err(what))?
            .unwrap_or(max_ts);
        let text: Option<String> = r.get(2).map_err(db.err(what))?;
        let tid_text = r
            .get::<_, Option<i64>>(3)
            .map_err(db.err(what))?
            .and_then(|i| names.lookup(i).map(str::to_string));
        let domain = r.get::<_, Option<i64>>(4).map_err(db.err(what))?;
        let tid: i64 = r
            .get::<_, Option<i64>>(5)
            .map_err(db.err(what))?
            .unwrap_or(0);
        let tag = tid_text.or(text).unwrap_or_default();
        let name = match domain.and_then(|d| domains.get(&(d, tid & PID_BITS))) {
            Some(d) => format!("{d}:{tag}"),
            None => tag,
        };
        per_name
            .entry(name)
            .or_default()
            .push(end.saturating_sub(start).max(0) as u64);
    }
    Ok(Some(stats(per_name)))
}

/// The process part of a `globalTid` (what `nvtxsum` matches domains by).
const PID_BITS: i64 = 0x0000_FFFF_FF00_0000;

/// The CUDA kernels per (demangled) name; `None` when none ran.
pub(super) fn kernels(db: &Db, names: &Names) -> Result<Option<Vec<Stat>>> {
    let table = "CUPTI_ACTIVITY_KIND_KERNEL";
    let Some(cols) = db.columns(table)? else {
        return Ok(None);
    };
    let name_col = ["demangledName", "shortName"]
        .into_iter()
        .find(|c| cols.iter().any(|k| k == c))
        .unwrap_or("demangledName");
    if !db.has(table, &["start", "end", name_col])? {
        return Ok(None);
    }
    let sql = format!("SELECT start, end, {name_col} FROM {table}");
    durations(db, &sql, "the CUDA kernels", |id| {
        names.string(id).to_string()
    })
}

/// The CUDA memory copies per kind (`ENUM_CUDA_MEMCPY_OPER`'s label,
/// `Host-to-Device`); `None` when none ran.
pub(super) fn memcpy(db: &Db) -> Result<Option<Vec<Stat>>> {
    let table = "CUPTI_ACTIVITY_KIND_MEMCPY";
    if !db.has(table, &["start", "end", "copyKind"])? {
        return Ok(None);
    }
    let mut kinds: FxHashMap<i64, String> = FxHashMap::default();
    if let Some(cols) = db.columns("ENUM_CUDA_MEMCPY_OPER")? {
        let label = if cols.iter().any(|c| c == "label") {
            "label"
        } else {
            "name"
        };
        let what = "ENUM_CUDA_MEMCPY_OPER";
        let sql = format!("SELECT id, {label} FROM ENUM_CUDA_MEMCPY_OPER");
        let mut st = db.conn.prepare(&sql).map_err(db.err(what))?;
        let mut rows = st.query([]).map_err(db.err(what))?;
        while let Some(r) = rows.next().map_err(db.err(what))? {
            let id: i64 = r.get(0).map_err(db.err(what))?;
            let n: Option<String> = r.get(1).map_err(db.err(what))?;
            kinds.insert(id, n.unwrap_or_default());
        }
    }
    let sql = format!("SELECT start, end, copyKind FROM {table}");
    durations(db, &sql, "the CUDA memory copies", |k| match k {
        Some(k) => kinds
            .get(&k)
            .cloned()
            .unwrap_or_else(|| format!("copyKind {k}")),
        None => "[unknown]".into(),
    })
}

/// `start, end, name id` rows of `sql` per name; `None` for no row.
fn durations(
    db: &Db,
    sql: &str,
    what: &str,
    name: impl Fn(Option<i64>) -> String,
) -> Result<Option<Vec<Stat>>> {
    let mut st = db.conn.prepare(sql).map_err(db.err(what))?;
    let mut rows = st.query([]).map_err(db.err(what))?;
    let mut per_name: HashMap<String, Vec<u64>> = HashMap::new();
    while let Some(r) = rows.next().map_err(db.err(what))? {
        let start: i64 = r
            .get::<_, Option<i64>>(0)
            .map_err(db.err(what))?
            .unwrap_or(0);
        let end: i64 = r
            .get::<_, Option<i64>>(1)
            .map_err(db.err(what))?
            .unwrap_or(start);
        let n = name(r.get(2).map_err(db.err(what))?);
        per_name
            .entry(n)
            .or_default()
            .push(end.saturating_sub(start).max(0) as u64);
    }
    Ok((!per_name.is_empty()).then(|| stats(per_name)))
}
