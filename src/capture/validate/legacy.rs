//! The old shell pipeline's validity rule, in its order, over the
//! metadata blocks and manifest that [`crate::capture::legacy`] reads.
//!
//! A start that failed (`attach_failed`) is refused with that phase
//! named; then `capture_valid` must not be 0, the handshake must have been
//! `enabled`, the phases must include `queued` and `published`, every
//! manifest row must be `stopped` with exit status 0 or 130, and exactly
//! `perf_data_shards` data files must be there: `perf.data` for one shard
//! (whose row still names `perf.data.part000`), `perf.data.partNNN` for
//! several. A post-processed capture whose data files were removed is still
//! accepted when its `perf.script.gz` is there (the caller folds it). This
//! module only reads; it never writes or removes the old pipeline's files.

use std::path::Path;

use super::{refuse, Layout, Refusal, Shard, ValidCapture};
use crate::capture::layout::{read_plain, CaptureDir, LEGACY_METADATA};
use crate::capture::legacy::{
    data_file_names, is_phased, parse_blocks, parse_shards, Block, Facts,
};

type Checked<T> = std::result::Result<T, Refusal>;

/// The name of the metadata file, for messages.
const NAME: &str = LEGACY_METADATA;

/// Validates an old-pipeline capture by the old post-processing's rule
/// (see the module docs).
pub fn validate(found: &CaptureDir, meta_path: &Path) -> Checked<ValidCapture> {
    let text = read_plain(meta_path)
        .map_err(|e| refuse(format!("cannot read {}: {e}", meta_path.display())))?;
    if !is_phased(&text) {
        return Err(refuse(format!(
            "{}: no `capture_phase=` line: not the old pipeline's capture metadata",
            meta_path.display()
        )));
    }
    let blocks = parse_blocks(&text);
    let facts = Facts::of(&blocks);
    check_start(&blocks, &facts)?;
    check_valid(&blocks, &facts)?;
    check_handshake(&blocks)?;
    check_phases(&facts)?;
    let shards = checked_shards(found, &blocks)?;
    Ok(ValidCapture {
        found: found.clone(),
        layout: Layout::Legacy,
        job_id: facts.job_id(),
        event: facts.event.clone(),
        recorded_with: None,
        shards,
        symfs: None,
        kallsyms: None,
        host: facts.hostname.clone(),
        boot_id: None,
        worker_uid: None,
        worker_gid: None,
        script_text: None,
        warnings: Vec::new(),
        validated: true,
        legacy: Some(facts),
    })
}

/// A start that failed: refused with its phase named.
fn check_start(blocks: &[Block], facts: &Facts) -> Checked<()> {
    let Some(failed) = blocks.iter().find(|b| b.phase == "attach_failed") else {
        return Ok(());
    };
    let why = ["reason", "error", "failure_reason", "attach_error"]
        .iter()
        .find_map(|k| failed.get(k))
        .map(|r| format!(": {r}"))
        .unwrap_or_default();
    Err(refuse(format!(
        "{NAME}: the capture never started (phase attach_failed after {}){why}",
        phases_before(facts, "attach_failed")
    )))
}

fn phases_before(facts: &Facts, phase: &str) -> String {
    let before: Vec<&str> = facts
        .phases
        .iter()
        .take_while(|p| *p != phase)
        .map(String::as_str)
        .collect();
    if before.is_empty() {
        "no other phase".into()
    } else {
        before.join(", ")
    }
}

/// `capture_valid` is not 0 (in any block).
fn check_valid(blocks: &[Block], facts: &Facts) -> Checked<()> {
    let invalid = blocks
        .iter()
        .find(|b| b.get("capture_valid").is_some_and(|v| v.trim() == "0"));
    let Some(b) = invalid else {
        return Ok(());
    };
    let why = ["capture_invalid_reason", "invalid_reason", "reason"]
        .iter()
        .find_map(|k| b.get(k))
        .map(|r| format!(": {r}"))
        .unwrap_or_default();
    let loss = facts
        .sample_loss
        .as_deref()
        .map(|l| format!(" (sample_loss={l})"))
        .unwrap_or_default();
    Err(refuse(format!(
        "{NAME} marks the capture invalid: capture_valid=0 in phase {}{loss}{why}",
        b.phase
    )))
}

/// `perf_control_handshake=enabled`.
fn check_handshake(blocks: &[Block]) -> Checked<()> {
    let value = blocks
        .iter()
        .rev()
        .find_map(|b| b.get("perf_control_handshake"));
    match value {
        Some("enabled") => Ok(()),
        Some(other) => Err(refuse(format!(
            "handshake never enabled sampling ({NAME}: perf_control_handshake={other})"
        ))),
        None => Err(refuse(format!(
            "handshake never enabled sampling ({NAME} has no perf_control_handshake line)"
        ))),
    }
}

/// The capture went through the `queued` and `published` phases.
fn check_phases(facts: &Facts) -> Checked<()> {
    let missing: Vec<&str> = ["queued", "published"]
        .into_iter()
        .filter(|p| !facts.phases.iter().any(|q| q == p))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(refuse(format!(
        "{NAME} misses phase(s) {} (phases: {}): the capture was not queued and published \
         completely",
        missing.join(", "),
        facts.phases.join(", ")
    )))
}

/// The manifest's rows, each stopped with exit 0 or 130, and the data
/// files: exactly `perf_data_shards` of them, or none (then the caller
/// needs the capture's `perf.script.gz`).
fn checked_shards(found: &CaptureDir, blocks: &[Block]) -> Checked<Vec<Shard>> {
    let tsv = found.dir.join(jobprof_capture_format::SHARDS_TSV);
    let manifest = read_plain(&tsv).map_err(|e| {
        refuse(format!(
            "cannot read the shard manifest {}: {e}",
            tsv.display()
        ))
    })?;
    let rows = parse_shards(&manifest).map_err(|e| refuse(format!("{}: {e}", tsv.display())))?;
    if let Some(bad) = rows
        .iter()
        .find(|r| r.phase != "stopped" || !matches!(r.exit_status, Some(0) | Some(130)))
    {
        return Err(refuse(format!(
            "shard {} (phase {}) ended with exit status {}, not stopped with 0 or 130: its data \
             is incomplete",
            bad.shard,
            bad.phase,
            bad.exit_status
                .map(|s| s.to_string())
                .unwrap_or_else(|| "none".into())
        )));
    }
    let count = blocks
        .iter()
        .rev()
        .find_map(|b| b.get("perf_data_shards"))
        .ok_or_else(|| {
            refuse(format!(
                "{NAME} has no perf_data_shards line (phase publish_start)"
            ))
        })?;
    let count: usize = count
        .parse()
        .map_err(|_| refuse(format!("{NAME}: perf_data_shards={count} is not a number")))?;
    if rows.len() != count {
        return Err(refuse(format!(
            "perf-shards.tsv lists {} shard(s), {NAME} says perf_data_shards={count}",
            rows.len()
        )));
    }
    let names = data_file_names(count);
    let present = super::data_files_in(&found.dir).unwrap_or_default();
    let wanted: Vec<_> = names.iter().map(|n| found.dir.join(n)).collect();
    if !present.is_empty() && present != wanted {
        let list: Vec<String> = present.iter().map(|p| super::file_name(p)).collect();
        return Err(refuse(format!(
            "{NAME} says perf_data_shards={count} ({}), the capture holds {}",
            names.join(", "),
            list.join(", ")
        )));
    }
    Ok(rows
        .iter()
        .zip(wanted)
        .map(|(r, data_file)| Shard {
            index: r.shard,
            data_file,
            manifest_bytes: r.data_bytes,
            bytes: None,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::capture::legacy::tests::META;

    #[test]
    fn refusals_name_the_phase() {
        let failed = "capture_phase=start\nperf_control_handshake=enabled\n\
                      capture_phase=attach_failed\nreason=perf died\n";
        let b = parse_blocks(failed);
        let e = check_start(&b, &Facts::of(&b)).unwrap_err();
        assert!(e.0.contains("attach_failed after start): perf died"), "{e}");
        let invalid = META.replace("capture_valid=1", "capture_valid=0");
        let b = parse_blocks(&invalid);
        let e = check_valid(&b, &Facts::of(&b)).unwrap_err();
        assert!(e.0.contains("capture_valid=0 in phase queued"), "{e}");
        let b = parse_blocks(&META.replace("=enabled", "=disabled"));
        assert!(check_handshake(&b).unwrap_err().0.contains("=disabled"));
        let b = parse_blocks(&META.replace("capture_phase=published\n", ""));
        assert!(check_phases(&Facts::of(&b))
            .unwrap_err()
            .0
            .contains("misses phase(s) published"));
    }
}
