//! The timed tables: OS runtime calls (`OSRT_API`, with `OSRT_CALLCHAINS`
//! for the waits' stacks), NVTX ranges (`NVTX_EVENTS`), CUDA kernels and
//! memory copies (`CUPTI_ACTIVITY_KIND_KERNEL`, `..._MEMCPY`), each by the
//! rule of the `nsys stats` report it matches (`osrtsum`, `nvtxsum`,
//! `gpukernsum`, `gpumemtimesum`); each limited to the events that start
//! in a window when one is given (`slice`).

use std::collections::HashMap;

use rustc_hash::FxHashMap;

use super::samples::{chain_query, id_range, key, Chains, Names};
use super::schema::Db;
use super::{sorted, stats, Result, Span, Stat};

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
/// OS runtime trace. Calls are stepped in chain order beside the chains,
/// each distinct chain read once and kept as frame ids; the waits are
/// summed by (thread, chain, call) and each such stack's text built once
/// at the end, so the work grows with the export, not with calls x depth.
pub(super) fn osrt(db: &Db, names: &mut Names, span: Option<Span>) -> Result<Option<Waits>> {
    let needed = ["start", "end", "eventClass", "globalTid", "nameId"];
    if !db.has("OSRT_API", &needed)? {
        return Ok(None);
    }
    let what = "the OS runtime calls (OSRT_API, OSRT_CALLCHAINS)";
    let cc = col_or_null(db, "OSRT_API", "callchainId")?;
    let sql = format!(
        "SELECT start, end, globalTid, nameId, {cc} FROM OSRT_API \
         WHERE eventClass = {OSRT_CALL} AND {} ORDER BY {cc}",
        Span::sql(span)
    );
    let mut calls = db.conn.prepare(&sql).map_err(db.err(what))?;
    let ids = match (span, cc.as_str()) {
        (Some(_), "NULL") | (None, _) => None,
        (Some(span), cc) => {
            let filter = format!(
                "eventClass = {OSRT_CALL} AND {} AND {cc} > 0",
                Span::sql(Some(span))
            );
            Some(id_range(db, cc, "OSRT_API", &filter, what)?)
        }
    };
    let chain_sql = chain_query(db, "OSRT_CALLCHAINS", ids)?;
    let mut chain_st = match &chain_sql {
        Some(s) => Some(db.conn.prepare(s).map_err(db.err(what))?),
        None => None,
    };
    let mut chains = Chains::new(db, chain_st.as_mut(), what)?;
    // Frame ids of each chain met (leaf first); 0 and none: no chain.
    let mut chain_frames: FxHashMap<i64, Box<[u32]>> = FxHashMap::default();
    let mut last: Option<i64> = None;
    let mut frames = Vec::new();
    // ns by (thread id, chain id, call name id); durations by call name id.
    let mut waits: FxHashMap<(u32, i64, Option<i64>), u64> = FxHashMap::default();
    let mut per_id: FxHashMap<Option<i64>, Vec<u64>> = FxHashMap::default();
    let mut rows = calls.query([]).map_err(db.err(what))?;
    while let Some(r) = rows.next().map_err(db.err(what))? {
        let get = |i| r.get::<_, Option<i64>>(i).map_err(db.err(what));
        let start = get(0)?.unwrap_or(0);
        let end = get(1)?.unwrap_or(start);
        let tid = get(2)?.unwrap_or(0);
        let name = get(3)?;
        let chain = get(4)?.filter(|c| *c > 0).unwrap_or(0);
        let ns = end.saturating_sub(start).max(0) as u64;
        if chain != 0 && last != Some(chain) {
            last = Some(chain);
            chains.read(db, chain, names, &mut frames, what)?;
            chain_frames.insert(chain, frames.as_slice().into());
        }
        let thread = names.thread(tid);
        let w = waits.entry((thread, chain, name)).or_default();
        *w = w.saturating_add(ns);
        per_id.entry(name).or_default().push(ns);
    }
    let mut folded: FxHashMap<String, u64> = FxHashMap::default();
    let mut stack: Vec<&str> = Vec::new();
    for ((thread, chain, name), ns) in waits {
        let call = names.string(name);
        stack.clear();
        if let Some(f) = chain_frames.get(&chain) {
            stack.extend(f.iter().map(|&id| names.frame_text(id)));
        }
        if stack.first() != Some(&call) {
            stack.insert(0, call);
        }
        let k = key(names.thread_text(thread), stack.iter().copied());
        let w = folded.entry(k).or_default();
        *w = w.saturating_add(ns);
    }
    let mut per_name: HashMap<String, Vec<u64>> = HashMap::new();
    for (id, d) in per_id {
        per_name
            .entry(names.string(id).to_string())
            .or_default()
            .extend(d);
    }
    Ok(Some((sorted(folded), stats(per_name))))
}

/// One NVTX range as read: its time, text and domain.
pub(super) struct NvtxRange {
    pub(super) start: i64,
    pub(super) end: i64,
    /// Its registered string, else its text (clean).
    pub(super) text: String,
    /// Its domain's name; `None`: the default domain.
    pub(super) domain: Option<String>,
}

impl NvtxRange {
    /// The name `nvtxsum` gives it: `domain:text` in a named domain.
    pub(super) fn name(&self) -> String {
        match &self.domain {
            Some(d) => format!("{d}:{}", self.text),
            None => self.text.clone(),
        }
    }
}

/// The NVTX ranges per name, as `nvtxsum` names them (`domain:text` in a
/// named domain), those that start in `span`. Push/pop and start/end
/// ranges of one name are one row.
pub(super) fn nvtx(db: &Db, names: &Names, span: Option<Span>) -> Result<Option<Vec<Stat>>> {
    let mut per_name: HashMap<String, Vec<u64>> = HashMap::new();
    let traced = nvtx_ranges(db, names, span, |r| {
        let ns = r.end.saturating_sub(r.start).max(0) as u64;
        per_name.entry(r.name()).or_default().push(ns);
    })?;
    Ok(traced.then(|| stats(per_name)))
}

/// Hands every NVTX range that starts in `span` to `f`; `false` without
/// an NVTX trace. A range without an end lasts to the trace's last NVTX
/// time.
pub(super) fn nvtx_ranges(
    db: &Db,
    names: &Names,
    span: Option<Span>,
    mut f: impl FnMut(NvtxRange),
) -> Result<bool> {
    if !db.has(
        "NVTX_EVENTS",
        &["start", "end", "eventType", "text", "globalTid"],
    )? {
        return Ok(false);
    }
    let what = "the NVTX ranges (NVTX_EVENTS)";
    let text_id = col_or_null(db, "NVTX_EVENTS", "textId")?;
    let domain_id = col_or_null(db, "NVTX_EVENTS", "domainId")?;
    let domains = nvtx_domains(db, names, &domain_id)?;
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
         WHERE eventType IN ({types}) AND {}",
        Span::sql(span)
    );
    db.each(&sql, what, |r| {
        let start: i64 = r.get::<_, Option<i64>>(0)?.unwrap_or(0);
        let end: i64 = r.get::<_, Option<i64>>(1)?.unwrap_or(max_ts);
        let text: Option<String> = r.get(2)?;
        let text = text.map(|t| names.clean(&t));
        let tid_text =
            (r.get::<_, Option<i64>>(3)?).and_then(|i| names.lookup(i).map(str::to_string));
        let domain = r.get::<_, Option<i64>>(4)?;
        let tid: i64 = r.get::<_, Option<i64>>(5)?.unwrap_or(0);
        f(NvtxRange {
            start,
            end,
            text: tid_text.or(text).unwrap_or_default(),
            domain: domain.and_then(|d| domains.get(&(d, tid & PID_BITS)).cloned()),
        });
        Ok(())
    })?;
    Ok(true)
}

/// The NVTX domains per process: (domain id, pid bits) -> name, the first
/// made.
fn nvtx_domains(db: &Db, names: &Names, domain_id: &str) -> Result<FxHashMap<(i64, i64), String>> {
    let mut domains: FxHashMap<(i64, i64), String> = FxHashMap::default();
    let sql = format!(
        "SELECT {domain_id}, globalTid, text FROM NVTX_EVENTS \
         WHERE eventType = {NVTX_DOMAIN_CREATE} ORDER BY start DESC"
    );
    db.each(&sql, "the NVTX domains (NVTX_EVENTS)", |r| {
        let d: Option<i64> = r.get(0)?;
        let tid: i64 = r.get::<_, Option<i64>>(1)?.unwrap_or(0);
        if let (Some(d), Some(t)) = (d, r.get::<_, Option<String>>(2)?) {
            domains.insert((d, tid & PID_BITS), names.clean(&t));
        }
        Ok(())
    })?;
    Ok(domains)
}

/// The process part of a `globalTid` (what `nvtxsum` matches domains by).
const PID_BITS: i64 = 0x0000_FFFF_FF00_0000;

/// The CUDA kernels per (demangled) name; `None` when none ran.
pub(super) fn kernels(db: &Db, names: &Names, span: Option<Span>) -> Result<Option<Vec<Stat>>> {
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
    let sql = format!(
        "SELECT start, end, {name_col} FROM {table} WHERE {}",
        Span::sql(span)
    );
    durations(db, &sql, "the CUDA kernels", |id| {
        names.string(id).to_string()
    })
}

/// The CUDA memory copies per kind (`ENUM_CUDA_MEMCPY_OPER`'s label,
/// `Host-to-Device`); `None` when none ran.
pub(super) fn memcpy(db: &Db, names: &Names, span: Option<Span>) -> Result<Option<Vec<Stat>>> {
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
        db.each(&sql, what, |r| {
            let n: Option<String> = r.get(1)?;
            kinds.insert(r.get(0)?, names.clean(n.as_deref().unwrap_or_default()));
            Ok(())
        })?;
    }
    let sql = format!(
        "SELECT start, end, copyKind FROM {table} WHERE {}",
        Span::sql(span)
    );
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
    let mut per_name: HashMap<String, Vec<u64>> = HashMap::new();
    db.each(sql, what, |r| {
        let start: i64 = r.get::<_, Option<i64>>(0)?.unwrap_or(0);
        let end: i64 = r.get::<_, Option<i64>>(1)?.unwrap_or(start);
        per_name
            .entry(name(r.get(2)?))
            .or_default()
            .push(end.saturating_sub(start).max(0) as u64);
        Ok(())
    })?;
    Ok((!per_name.is_empty()).then(|| stats(per_name)))
}
