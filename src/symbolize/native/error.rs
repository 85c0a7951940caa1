//! Why the native symbolizer cannot read a shard, or stopped reading one:
//! each variant carries what its message names, and the message is the
//! reason `process` prints when it falls back to `perf script`.

use std::io;
use std::path::{Path, PathBuf};

use linux_perf_data::linux_perf_event_reader::RecordType;

/// Why [`super::check`], [`super::time_range`] or [`super::Symbolizer::run`]
/// gave up on a shard.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `--symbolizer` got a word it does not know.
    #[error("`{0}`: use native, perf or auto")]
    UnknownChoice(String),
    /// The file could not be opened (`path`: named in the message).
    #[error("cannot open{}: {source}", named(path.as_deref()))]
    Open {
        /// The shard, when the message names it.
        path: Option<PathBuf>,
        /// What went wrong.
        #[source]
        source: io::Error,
    },
    /// The file could not be mapped (`path`: named in the message).
    #[error("cannot map{}: {source}", named(path.as_deref()))]
    Map {
        /// The shard, when the message names it.
        path: Option<PathBuf>,
        /// What went wrong.
        #[source]
        source: io::Error,
    },
    /// The file shrank under its map while it was replayed (truncated by
    /// another process): what was read of it is not its content.
    #[error(
        "{}: the file shrank while it was read (truncated by another process?)",
        path.display()
    )]
    ShrankUnderMap {
        /// The shard.
        path: PathBuf,
    },
    /// linux-perf-data could not read the header.
    #[error("cannot read the header: {0}")]
    Header(#[source] linux_perf_data::Error),
    /// linux-perf-data could not read the file (for a run).
    #[error("cannot read: {0}")]
    Read(#[source] linux_perf_data::Error),
    /// linux-perf-data could not read a record.
    #[error("cannot read a record: {0}")]
    Record(#[source] linux_perf_data::Error),
    /// The header lies about the file (found before it is parsed).
    #[error("damaged file header: {0}")]
    DamagedHeader(HeaderDamage),
    /// The header's fixed fields are cut off or make no sense.
    #[error("truncated or damaged file header")]
    TruncatedHeader,
    /// Not a perf.data file this module reads.
    #[error("not a little-endian perf.data file in file mode")]
    NotPerfFile,
    /// An event without call chains.
    #[error("its samples have no call chains (recorded without -g)")]
    NoCallChains,
    /// perf never wrote the data section's size.
    #[error("its header gives an empty data section (perf did not finish the file)")]
    EmptyData,
    /// The data section runs past the end of the file.
    #[error("its data section ends at byte {end}, past the end of the file ({len} bytes)")]
    DataPastEnd {
        /// Where the header says the data section ends.
        end: u64,
        /// The file's size.
        len: usize,
    },
    /// The file got shorter while its records were walked.
    #[error("the file ends before byte {end}, where its data section ends (it shrank while read)")]
    Shrank {
        /// Where the data section ends.
        end: u64,
    },
    /// A positioned read failed.
    #[error("cannot read at byte {at}: {source}")]
    ReadAt {
        /// The file offset.
        at: u64,
        /// What went wrong.
        #[source]
        source: io::Error,
    },
    /// A record header with a size below its own (at a file offset).
    #[error("damaged record header at byte {0}")]
    DamagedRecordHeader(u64),
    /// A record header that does not fit (at an offset of the data section).
    #[error("damaged record header at byte {0} of the data section")]
    DamagedRecordInData(usize),
    /// A record type whose effect on perf script's output is not reproduced.
    #[error("it holds {name} records (type {0})", name = record_name(*.0))]
    Unhandled(u32),
    /// A `sched_switch` tracepoint whose format the tracing data lacks,
    /// or gives in a form [`super::tracepoint`] does not print.
    #[error("its sched:sched_switch format (tracing data) is missing or not one the native symbolizer prints")]
    SchedSwitchFormat,
    /// Dwarf samples without the registers unwinding needs (named).
    #[error("its user register copies lack {0} (--call-graph dwarf)")]
    RegsLacking(&'static str),
    /// Registers without a stack copy, or the other way round.
    #[error("its samples have user registers or a user stack copy, not both")]
    RegsOrStack,
    /// Dwarf samples of an architecture not unwound here.
    #[error(
        "it has --call-graph dwarf samples of {0}, which are unwound natively on x86_64 and aarch64 only"
    )]
    DwarfArch(String),
    /// Dwarf samples and no architecture to unwind them for.
    #[error("it has --call-graph dwarf samples and no architecture in its header")]
    NoArch,
    /// No event attributes.
    #[error("the file describes no event")]
    NoEvent,
    /// Several events and no way to tell whose a record is.
    #[error("its events cannot be told apart (no common id layout)")]
    EventsIndistinct,
    /// A sample whose lengths run past its record.
    #[error("damaged SAMPLE record: {0}")]
    DamagedSample(SampleDamage),
    /// linux-perf-event-reader could not parse a record.
    #[error("damaged {ty:?} record: {source}")]
    DamagedRecord {
        /// Its type.
        ty: RecordType,
        /// What the reader said.
        #[source]
        source: io::Error,
    },
    /// No sample has a time.
    #[error("no timed samples")]
    NoTimedSamples,
    /// The consumer of the text failed (a write, or a closed channel).
    #[error("{0}")]
    Consume(#[source] io::Error),
}

/// What is damaged in a header ([`Error::DamagedHeader`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderDamage {
    /// Shorter than a header.
    #[error("the file has {len} bytes, a header {header}")]
    Short {
        /// The file's size.
        len: usize,
        /// A header's size (`header.rs` knows it).
        header: usize,
    },
    /// Attribute size 0 (a division by zero in the parser).
    #[error("an attribute size of 0")]
    ZeroAttrSize,
    /// A section of the header (named) past the end of the file.
    #[error("its {0} section lies past the end of the file")]
    SectionPastEnd(&'static str),
    /// The samples (the data section) end past the end of the file: the
    /// file was cut short.
    #[error(
        "the file is truncated: its header says its samples end at byte {end}, but it has \
         {len} bytes (a copy cut short, a full disk, or perf killed while writing); copy it \
         again whole, or record again"
    )]
    Truncated {
        /// Where the header says the data section ends.
        end: u64,
        /// The file's size.
        len: usize,
    },
    /// A feature section past the end of the file.
    #[error("feature section {0} lies past the end of the file")]
    FeaturePastEnd(usize),
    /// A feature section whose counts ask for more than it holds.
    #[error("feature section {0} holds more than its size")]
    FeatureOverfull(usize),
}

/// What is damaged in a sample ([`Error::DamagedSample`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SampleDamage {
    /// The record ends inside its read values.
    #[error("cut off in its read values")]
    CutInReadValues,
    /// A count of read values that cannot fit.
    #[error("{0} read values")]
    ReadValues(u64),
    /// The record ends before its callchain.
    #[error("cut off before its callchain")]
    CutBeforeCallchain,
    /// A callchain longer than the record.
    #[error("a callchain of {nr} entries in a record of {bytes} bytes")]
    Callchain {
        /// Entries the callchain claims.
        nr: u64,
        /// The record's size.
        bytes: usize,
    },
}

/// ` PATH` when a message names the file, else nothing.
fn named(path: Option<&Path>) -> String {
    path.map(|p| format!(" {}", p.display()))
        .unwrap_or_default()
}

/// The name of a record type the module refuses.
fn record_name(ty: u32) -> &'static str {
    match ty {
        11 => "AUX",
        12 => "ITRACE_START",
        17 => "KSYMBOL",
        20 => "TEXT_POKE",
        21 => "AUX_OUTPUT_HW_ID",
        70 => "AUXTRACE_INFO",
        71 => "AUXTRACE",
        81 => "COMPRESSED",
        _ => "unknown",
    }
}
