//! The export as a database: opened read-only, its `EXPORT_META_DATA`, and
//! its tables' columns checked by name before any is read.

use std::path::{Path, PathBuf};

use rusqlite::{Connection, OpenFlags};
use serde::Serialize;

use super::{Error, Result};

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
}

impl Db {
    /// Opens `path` read-only (never created, never written).
    pub(super) fn open(path: &Path) -> Result<Db> {
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags).map_err(|source| Error::Sqlite {
            path: path.to_path_buf(),
            what: "cannot open the export".into(),
            source,
        })?;
        let mut db = Db {
            conn,
            path: path.to_path_buf(),
            version: String::new(),
        };
        db.version = db.meta()?.describe();
        Ok(db)
    }

    /// A SQLite error while reading `what`.
    pub(super) fn err(&self, what: &str) -> impl Fn(rusqlite::Error) -> Error + '_ {
        let what = what.to_string();
        move |source| Error::Sqlite {
            path: self.path.clone(),
            what: what.clone(),
            source,
        }
    }

    /// The table's column names; `None` when there is no such table.
    pub(super) fn columns(&self, table: &str) -> Result<Option<Vec<String>>> {
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

    /// `EXPORT_META_DATA`'s versions.
    pub(super) fn meta(&self) -> Result<Meta> {
        let mut m = Meta::default();
        if self.columns("EXPORT_META_DATA")?.is_none() {
            return Ok(m);
        }
        let what = "EXPORT_META_DATA";
        let mut st = self
            .conn
            .prepare("SELECT name, value FROM EXPORT_META_DATA")
            .map_err(self.err(what))?;
        let mut rows = st.query([]).map_err(self.err(what))?;
        while let Some(r) = rows.next().map_err(self.err(what))? {
            let name: String = r.get(0).map_err(self.err(what))?;
            let value: Option<String> = r.get(1).map_err(self.err(what))?;
            match name.as_str() {
                "EXPORT_PRODUCT_VERSION" => m.nsys_version = value.unwrap_or_default(),
                "EXPORT_SCHEMA_VERSION" => m.schema_version = value.unwrap_or_default(),
                _ => {}
            }
        }
        Ok(m)
    }

    /// `StringIds` as a table from id to text (the dictionary every name
    /// column points into; small next to the events).
    pub(super) fn strings(&self) -> Result<rustc_hash::FxHashMap<i64, String>> {
        let mut map = rustc_hash::FxHashMap::default();
        if !self.has("StringIds", &["id", "value"])? {
            return Ok(map);
        }
        let what = "StringIds";
        let mut st = self
            .conn
            .prepare("SELECT id, value FROM StringIds")
            .map_err(self.err(what))?;
        let mut rows = st.query([]).map_err(self.err(what))?;
        while let Some(r) = rows.next().map_err(self.err(what))? {
            let id: i64 = r.get(0).map_err(self.err(what))?;
            let v: Option<String> = r.get(1).map_err(self.err(what))?;
            map.insert(id, v.unwrap_or_default());
        }
        Ok(map)
    }
}
