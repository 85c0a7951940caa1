//! The export as a database: opened read-only and immutable from a file
//! already open (never by a path), hardened against a hostile file
//! (SQLite's defensive settings, no views, triggers or untrusted schema
//! functions, small SQLite limits, a deadline), its `EXPORT_META_DATA`, and
//! its tables checked to be real tables and their columns by name before
//! any is read.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rusqlite::config::DbConfig;
use rusqlite::limits::Limit;
use rusqlite::{Connection, OpenFlags};
use serde::Serialize;

use super::{Error, Limits, Result};

/// SQLite's own limits while reading an export: jobprof's queries are
/// small, an nsys schema is plain, and no value it reads is near 1 MiB
/// (a longer one fails the report with SQLite's "string or blob too big").
const SQLITE_LIMITS: [(Limit, i32); 11] = [
    (Limit::SQLITE_LIMIT_LENGTH, 1 << 20),
    (Limit::SQLITE_LIMIT_SQL_LENGTH, 1 << 20),
    (Limit::SQLITE_LIMIT_EXPR_DEPTH, 100),
    (Limit::SQLITE_LIMIT_COMPOUND_SELECT, 4),
    (Limit::SQLITE_LIMIT_VDBE_OP, 100_000),
    (Limit::SQLITE_LIMIT_FUNCTION_ARG, 8),
    (Limit::SQLITE_LIMIT_ATTACHED, 0),
    (Limit::SQLITE_LIMIT_LIKE_PATTERN_LENGTH, 64),
    (Limit::SQLITE_LIMIT_VARIABLE_NUMBER, 8),
    (Limit::SQLITE_LIMIT_TRIGGER_DEPTH, 1),
    (Limit::SQLITE_LIMIT_WORKER_THREADS, 0),
];

/// VM instructions between two looks at the clock.
const PROGRESS_EVERY: i32 = 4096;

/// Which nsys wrote the export (from `EXPORT_META_DATA`; empty when the
/// export has no such row).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Meta {
    /// `EXPORT_PRODUCT_VERSION`, e.g. `2022.4.2.1`.
    pub nsys_version: String,
    /// `EXPORT_SCHEMA_VERSION`, e.g. `3.0.0`.
    pub schema_version: String,
}

impl Meta {
    /// `nsys 2022.4.2.1, schema 3.0.0` (or what is known of it).
    pub fn describe(&self) -> String {
        let v = |s: &str| if s.is_empty() { "unknown" } else { s }.to_string();
        format!(
            "nsys {}, schema {}",
            v(&self.nsys_version),
            v(&self.schema_version)
        )
    }

    /// The year of the nsys version (`2022` of `2022.4.2.1`), 0 unknown.
    pub fn year(&self) -> u32 {
        self.nsys_version
            .split('.')
            .next()
            .and_then(|y| y.parse().ok())
            .unwrap_or(0)
    }
}

/// One open export.
pub(super) struct Db {
    pub(super) conn: Connection,
    pub(super) path: PathBuf,
    version: String,
    /// Set by the progress handler when the deadline passed.
    timed_out: Arc<AtomicBool>,
    limit: Duration,
    /// The file SQLite reads through `/proc/self/fd`: open while it is.
    _file: File,
}

/// Sets `config` to `on`, an error naming it when SQLite refuses.
fn config(conn: &Connection, path: &Path, config: DbConfig, on: bool) -> Result<()> {
    conn.set_db_config(config, on)
        .map(|_| ())
        .map_err(|source| Error::Sqlite {
            path: path.to_path_buf(),
            what: format!("cannot set {config:?}"),
            source,
        })
}

impl Db {
    /// Opens the export `file` (shown as `path`): read-only and immutable
    /// (SQLite never looks for a journal or WAL beside it, nor writes
    /// one), through `/proc/self/fd` so that no path is looked up again,
    /// hardened, with the deadline of `limits` running from now.
    pub(super) fn open(file: File, path: &Path, limits: &Limits) -> Result<Db> {
        let uri = format!("file:/proc/self/fd/{}?immutable=1", file.as_raw_fd());
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI;
        let conn = Connection::open_with_flags(&uri, flags).map_err(|source| Error::Sqlite {
            path: path.to_path_buf(),
            what: "cannot open the export".into(),
            source,
        })?;
        config(&conn, path, DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true)?;
        config(&conn, path, DbConfig::SQLITE_DBCONFIG_TRUSTED_SCHEMA, false)?;
        config(&conn, path, DbConfig::SQLITE_DBCONFIG_ENABLE_TRIGGER, false)?;
        config(&conn, path, DbConfig::SQLITE_DBCONFIG_ENABLE_VIEW, false)?;
        for (limit, value) in SQLITE_LIMITS {
            conn.set_limit(limit, value)
                .map_err(|source| Error::Sqlite {
                    path: path.to_path_buf(),
                    what: format!("cannot set {limit:?}"),
                    source,
                })?;
        }
        let timed_out = Arc::new(AtomicBool::new(false));
        let deadline = Instant::now() + limits.deadline;
        let flag = Arc::clone(&timed_out);
        conn.progress_handler(
            PROGRESS_EVERY,
            Some(move || {
                let past = Instant::now() >= deadline;
                if past {
                    flag.store(true, Ordering::Relaxed);
                }
                past
            }),
        );
        let mut db = Db {
            conn,
            path: path.to_path_buf(),
            version: String::new(),
            timed_out,
            limit: limits.deadline,
            _file: file,
        };
        db.version = db.meta()?.describe();
        Ok(db)
    }

    /// A SQLite error while reading `what`.
    pub(super) fn err(&self, what: &str) -> impl Fn(rusqlite::Error) -> Error + '_ {
        let what = what.to_string();
        move |source| self.error(&what, source)
    }

    /// A SQLite error while reading `what`: [`Error::Deadline`] when the
    /// progress handler stopped it.
    pub(super) fn error(&self, what: &str, source: rusqlite::Error) -> Error {
        if self.timed_out.load(Ordering::Relaxed) {
            return Error::Deadline {
                path: self.path.clone(),
                limit: self.limit,
            };
        }
        Error::Sqlite {
            path: self.path.clone(),
            what: what.to_string(),
            source,
        }
    }

    /// Whether `name` is a table of the export: `Ok(false)` when nothing
    /// has that name; a view, a virtual table, or a trigger on it refuses
    /// the report ([`Error::NotATable`]). Names are matched as SQLite
    /// matches them (ASCII case ignored).
    pub(super) fn is_table(&self, name: &str) -> Result<bool> {
        let what = format!("the schema's entry of {name}");
        let mut st = self
            .conn
            .prepare(
                "SELECT type, coalesce(sql, '') FROM sqlite_master \
                 WHERE name = ?1 COLLATE NOCASE \
                 OR (type = 'trigger' AND tbl_name = ?1 COLLATE NOCASE)",
            )
            .map_err(self.err(&what))?;
        let mut rows = st.query([name]).map_err(self.err(&what))?;
        let mut table = false;
        while let Some(r) = rows.next().map_err(self.err(&what))? {
            let kind: String = r.get(0).map_err(self.err(&what))?;
            let sql: String = r.get(1).map_err(self.err(&what))?;
            let virtual_table = sql
                .trim_start()
                .get(..14)
                .is_some_and(|h| h.eq_ignore_ascii_case("create virtual"));
            let refused = match kind.as_str() {
                "table" if virtual_table => Some("a virtual table"),
                "table" => {
                    table = true;
                    None
                }
                "view" => Some("a view"),
                "trigger" => Some("a table with a trigger"),
                _ => None,
            };
            if let Some(kind) = refused {
                return Err(Error::NotATable {
                    path: self.path.clone(),
                    name: name.into(),
                    kind,
                });
            }
        }
        Ok(table)
    }

    /// The table's column names; `None` when there is no such table.
    pub(super) fn columns(&self, table: &str) -> Result<Option<Vec<String>>> {
        if !self.is_table(table)? {
            return Ok(None);
        }
        let what = format!("the columns of {table}");
        let mut st = self
            .conn
            .prepare("SELECT name FROM pragma_table_info(?1)")
            .map_err(self.err(&what))?;
        let cols = st
            .query_map([table], |r| r.get::<_, String>(0))
            .map_err(self.err(&what))?
            .collect::<rusqlite::Result<Vec<String>>>()
            .map_err(self.err(&what))?;
        Ok((!cols.is_empty()).then_some(cols))
    }

    /// Whether `table` exists with every one of `needed`: `Ok(false)`
    /// without the table, an error naming a missing column.
    pub(super) fn has(&self, table: &str, needed: &[&str]) -> Result<bool> {
        let Some(cols) = self.columns(table)? else {
            return Ok(false);
        };
        if let Some(c) = needed.iter().find(|c| !cols.iter().any(|k| k == *c)) {
            return Err(Error::Schema {
                path: self.path.clone(),
                table: table.into(),
                column: (*c).into(),
                version: self.version.clone(),
            });
        }
        Ok(true)
    }

    /// Runs `sql` and hands each row to `f`, a SQLite error (or the
    /// deadline) while reading `what` an [`Error`] naming it: the one loop
    /// over a query's rows.
    pub(super) fn each(
        &self,
        sql: &str,
        what: &str,
        mut f: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<()>,
    ) -> Result<()> {
        let mut st = self.conn.prepare(sql).map_err(self.err(what))?;
        let mut rows = st.query([]).map_err(self.err(what))?;
        while let Some(r) = rows.next().map_err(self.err(what))? {
            f(r).map_err(self.err(what))?;
        }
        Ok(())
    }

    /// `EXPORT_META_DATA`'s versions.
    pub(super) fn meta(&self) -> Result<Meta> {
        let mut m = Meta::default();
        if self.columns("EXPORT_META_DATA")?.is_none() {
            return Ok(m);
        }
        let sql = "SELECT name, value FROM EXPORT_META_DATA";
        self.each(sql, "EXPORT_META_DATA", |r| {
            let name: String = r.get(0)?;
            let value: Option<String> = r.get(1)?;
            match name.as_str() {
                "EXPORT_PRODUCT_VERSION" => m.nsys_version = value.unwrap_or_default(),
                "EXPORT_SCHEMA_VERSION" => m.schema_version = value.unwrap_or_default(),
                _ => {}
            }
            Ok(())
        })?;
        Ok(m)
    }
}
