//! The GNU build id among the notes of an ELF note section (a binary's
//! `.note.gnu.build-id`, the vDSO's `.note`, the running kernel's
//! `/sys/kernel/notes`): the one parser `jobprof-record` (the symbol
//! snapshot, preflight) and `jobprof` (which kernel table names kernel
//! frames) share.
//!
//! A note is three 4-byte words (`namesz`, `descsz`, `type`), then the
//! owner name and the descriptor, each padded to 4 bytes. Anything that
//! does not fit the section ends the search: no note is read past the end,
//! and no length overflows.

/// The byte order of the note words: an ELF file's own (`EI_DATA`), or the
/// machine's for the running kernel's notes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ByteOrder {
    /// Little-endian (`ELFDATA2LSB`).
    Little,
    /// Big-endian (`ELFDATA2MSB`).
    Big,
}

impl ByteOrder {
    /// The byte order of the machine this runs on (that of
    /// `/sys/kernel/notes`).
    pub const NATIVE: ByteOrder = if cfg!(target_endian = "big") {
        ByteOrder::Big
    } else {
        ByteOrder::Little
    };

    fn word(self, bytes: &[u8], at: usize) -> Option<usize> {
        let b: [u8; 4] = bytes.get(at..at.checked_add(4)?)?.try_into().ok()?;
        let w = match self {
            ByteOrder::Little => u32::from_le_bytes(b),
            ByteOrder::Big => u32::from_be_bytes(b),
        };
        usize::try_from(w).ok()
    }
}

/// The note type of a build id (`NT_GNU_BUILD_ID`), under owner `GNU`.
pub const NT_GNU_BUILD_ID: usize = 3;

/// The `NT_GNU_BUILD_ID` note of owner `GNU` among the notes of `notes`
/// (one note section), as lowercase hex; `None` when there is none or the
/// notes are cut short before it. Notes of other owners are skipped, even
/// of the same type.
pub fn gnu_build_id(notes: &[u8], order: ByteOrder) -> Option<String> {
    let pad = |n: usize| n.checked_next_multiple_of(4);
    let mut at: usize = 0;
    while at.checked_add(12)? <= notes.len() {
        let namesz = order.word(notes, at)?;
        let descsz = order.word(notes, at + 4)?;
        let kind = order.word(notes, at + 8)?;
        let name_at = at + 12;
        let name = notes.get(name_at..name_at.checked_add(namesz)?)?;
        let desc_at = name_at.checked_add(pad(namesz)?)?;
        let desc = notes.get(desc_at..desc_at.checked_add(descsz)?)?;
        if kind == NT_GNU_BUILD_ID && name == b"GNU\0" {
            return Some(desc.iter().map(|b| format!("{b:02x}")).collect());
        }
        at = desc_at.checked_add(pad(descsz)?)?;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A note section of `(owner, type, descriptor)` notes, each part
    /// padded to 4 bytes.
    fn section(order: ByteOrder, notes: &[(&[u8], u32, &[u8])]) -> Vec<u8> {
        let word = |w: u32| match order {
            ByteOrder::Little => w.to_le_bytes(),
            ByteOrder::Big => w.to_be_bytes(),
        };
        let mut out = Vec::new();
        for (name, kind, desc) in notes {
            out.extend(word(name.len() as u32));
            out.extend(word(desc.len() as u32));
            out.extend(word(*kind));
            out.extend(*name);
            out.resize(out.len().next_multiple_of(4), 0);
            out.extend(*desc);
            out.resize(out.len().next_multiple_of(4), 0);
        }
        out
    }

    const ID: &[u8] = &[0xe0, 0x25, 0x12, 0xab, 0x00];

    #[test]
    fn finds_the_build_id_after_other_notes() {
        // The vDSO's `.note`: two Linux notes, then the build id.
        let notes = section(
            ByteOrder::Little,
            &[
                (b"Linux\0", 0, &[1, 2, 3, 4]),
                (b"Linux\0", 1, &[5, 6, 7, 8, 9, 10]),
                (b"GNU\0", 3, ID),
            ],
        );
        assert_eq!(
            gnu_build_id(&notes, ByteOrder::Little).as_deref(),
            Some("e02512ab00")
        );
    }

    #[test]
    fn odd_lengths_are_padded_to_four() {
        // Owner of 6 and descriptors of 3 and 5 bytes: padding after each.
        let notes = section(
            ByteOrder::Little,
            &[(b"Linux\0", 7, &[9, 9, 9]), (b"GNU\0", 3, ID)],
        );
        assert_eq!(notes.len(), (12 + 8 + 4) + (12 + 4 + 8));
        assert_eq!(
            gnu_build_id(&notes, ByteOrder::Little).as_deref(),
            Some("e02512ab00")
        );
    }

    #[test]
    fn a_build_id_type_of_another_owner_is_skipped() {
        // Type 3 is NT_GNU_BUILD_ID only under owner GNU.
        let notes = section(
            ByteOrder::Little,
            &[(b"Xen\0", 3, &[7; 5]), (b"GNU\0", 3, ID)],
        );
        assert_eq!(
            gnu_build_id(&notes, ByteOrder::Little).as_deref(),
            Some("e02512ab00")
        );
        let only_other = section(ByteOrder::Little, &[(b"Xen\0", 3, &[7; 5])]);
        assert_eq!(gnu_build_id(&only_other, ByteOrder::Little), None);
        let other_type = section(ByteOrder::Little, &[(b"GNU\0", 1, ID)]);
        assert_eq!(gnu_build_id(&other_type, ByteOrder::Little), None);
    }

    #[test]
    fn truncated_notes_give_none_without_panicking() {
        let notes = section(
            ByteOrder::Little,
            &[(b"Linux\0", 0, &[1, 2, 3, 4]), (b"GNU\0", 3, ID)],
        );
        let whole = gnu_build_id(&notes, ByteOrder::Little);
        assert!(whole.is_some());
        // Every cut short of the descriptor's last byte loses the build id.
        let last = notes.len() - 3; // the descriptor's 3 padding bytes
        for cut in 0..last {
            assert_eq!(
                gnu_build_id(&notes[..cut], ByteOrder::Little),
                None,
                "{cut}"
            );
        }
        assert_eq!(gnu_build_id(&notes[..last], ByteOrder::Little), whole);
        // Lengths that point past the end, or past usize, end the search.
        let mut huge = notes.clone();
        huge[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(gnu_build_id(&huge, ByteOrder::Little), None);
        huge[..4].copy_from_slice(&6u32.to_le_bytes());
        huge[4..8].copy_from_slice(&(u32::MAX - 2).to_le_bytes());
        assert_eq!(gnu_build_id(&huge, ByteOrder::Little), None);
    }

    #[test]
    fn words_are_read_in_the_given_byte_order() {
        let big = section(ByteOrder::Big, &[(b"Linux\0", 0, &[1]), (b"GNU\0", 3, ID)]);
        assert_eq!(
            gnu_build_id(&big, ByteOrder::Big).as_deref(),
            Some("e02512ab00")
        );
        assert_eq!(gnu_build_id(&big, ByteOrder::Little), None);
        let native = section(ByteOrder::NATIVE, &[(b"GNU\0", 3, ID)]);
        assert!(gnu_build_id(&native, ByteOrder::NATIVE).is_some());
    }
}
