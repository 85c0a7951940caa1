//! Hashing the reports a manifest lists, and `reports.tar.zst`: every
//! report streamed once, through SHA-256 and (when asked) into a tar in one
//! zstd frame, with the manifest appended last and the archive committed
//! atomically.

use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::manifest::{manifest_json, Manifest, ReportEntry, MANIFEST_FILE};
use super::scan::{open_report, unix_now};
use super::status::{OverallStatus, ReportStatus};
use super::{CollectOptions, Result};
use crate::nsys::{Error, Log};
use crate::sys::atomic::{AtomicFile, Destination};
use crate::sys::digest::Sha256Reader;
use crate::sys::units::format_utc;

/// Archive file name (in the report root) written with `--archive`.
pub const ARCHIVE_FILE: &str = "reports.tar.zst";

/// The archive being written: tar inside one zstd frame, committed
/// atomically at the end.
type Archive = tar::Builder<zstd::Encoder<'static, AtomicFile>>;

/// Hashes every report (streaming it into the archive when asked), then
/// finalizes the manifest's times and, for an archive, appends the manifest
/// as `manifest.json` and commits the archive atomically.
pub(super) fn hash_and_archive(
    opts: &CollectOptions,
    manifest: &mut Manifest,
    archive_path: Option<&Path>,
    start: Instant,
    log: &Log,
) -> Result<()> {
    let bar = log.progress().bar(
        Some(manifest.total_bytes),
        crate::sys::progress::Counts::Bytes,
        "hashing reports",
    );
    let mut builder = archive_path.map(open_archive).transpose()?;
    for entry in manifest.reports.iter_mut() {
        let Some(rel) = entry.path.clone() else {
            continue;
        };
        let path = opts.report_root.join(&rel);
        let file = match open_report(&opts.report_root, &rel) {
            Ok(f) => f,
            Err(Error::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
                log.line(format!(
                    "warning: {} vanished before it could be hashed; recorded as missing",
                    path.display()
                ));
                entry.status = ReportStatus::Missing;
                if let (Some(rank), OverallStatus::Complete) = (entry.rank, manifest.status) {
                    manifest.missing_ranks.push(rank);
                    manifest.status = OverallStatus::MissingRanks;
                }
                continue;
            }
            Err(e) => return Err(e),
        };
        let reader = crate::sys::progress::Counting::new(&*bar, file);
        entry.sha256 = Some(hash_report(reader, entry, &rel, &path, builder.as_mut())?);
    }
    bar.finish();
    manifest.finished_at = format_utc(unix_now() as u64);
    manifest.elapsed_s = start.elapsed().as_secs_f64();
    if let (Some(b), Some(p)) = (builder, archive_path) {
        commit_archive(b, p, manifest, log)?;
    }
    Ok(())
}

/// Creates the archive at `p` (confined, atomic).
fn open_archive(p: &Path) -> Result<Archive> {
    let file = AtomicFile::open(p, Destination::Confined, true)?;
    let mut enc = zstd::Encoder::new(file, 3).map_err(|e| Error::io(p, e))?;
    // Reports can be GB-sized; use a second core when there is one.
    let _ = enc.multithread(2);
    Ok(tar::Builder::new(enc))
}

/// The tar header of a regular file (mode 0644).
fn regular_header(size: u64, mtime: u64) -> tar::Header {
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(tar::EntryType::Regular);
    header.set_size(size);
    header.set_mode(0o644);
    header.set_mtime(mtime);
    header
}

/// The SHA-256 (hex) of exactly the `entry.bytes` the manifest records of
/// the report at `path` (a report that grew after settling, as it should
/// not, cannot corrupt the archive's framing), streamed into the archive
/// as `rel` when there is one; an error when the report shrank meanwhile.
fn hash_report(
    file: impl Read,
    entry: &ReportEntry,
    rel: &Path,
    path: &Path,
    archive: Option<&mut Archive>,
) -> Result<String> {
    let mut reader = Sha256Reader::new(file.take(entry.bytes));
    match archive {
        Some(b) => {
            let secs = entry.mtime_unix_ns.unwrap_or(0) / 1_000_000_000;
            let mut header = regular_header(entry.bytes, u64::try_from(secs).unwrap_or(0));
            b.append_data(&mut header, rel, &mut reader)
                .map_err(|e| Error::io(path, e))?;
        }
        None => {
            io::copy(&mut reader, &mut io::sink()).map_err(|e| Error::io(path, e))?;
        }
    }
    if reader.bytes_read() != entry.bytes {
        return Err(Error::Io {
            path: path.to_path_buf(),
            source: io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "shrank from {} to {} bytes while being hashed; something is rewriting \
                     the report, rerun the collector once it has stopped",
                    entry.bytes,
                    reader.bytes_read()
                ),
            ),
        });
    }
    Ok(reader.hex_digest())
}

/// Appends the manifest (naming the archive) as `manifest.json` and
/// commits the archive at `p`.
fn commit_archive(mut b: Archive, p: &Path, manifest: &mut Manifest, log: &Log) -> Result<()> {
    manifest.archive = Some(PathBuf::from(ARCHIVE_FILE));
    let json = manifest_json(manifest)?;
    let mut header = regular_header(json.len() as u64, unix_now() as u64);
    b.append_data(&mut header, MANIFEST_FILE, json.as_slice())
        .map_err(|e| Error::io(p, e))?;
    let enc = b.into_inner().map_err(|e| Error::io(p, e))?;
    let file = enc.finish().map_err(|e| Error::io(p, e))?;
    file.commit()?;
    log.line(format!("wrote {}", p.display()));
    Ok(())
}
