//! Fatbinary container and entry headers (docs/cuda-binaries.md §2). Pure functions over byte slices: every
//! offset and size is checked, nothing is allocated from a length read out of the input.

use serde::{Deserialize, Serialize};

/// `fatBinaryHeader` magic, version 1, header size 16, as 8 bytes: what the scanner looks for.
pub const CONTAINER_PREFIX: [u8; 8] = [0x50, 0xED, 0x55, 0xBA, 0x01, 0x00, 0x10, 0x00];
pub const CONTAINER_HEADER_LEN: u64 = 16;
/// Every entry header is at least this long; the real size is in the header (+0x04).
pub const ENTRY_BASE_LEN: usize = 0x40;
/// No producer writes headers anywhere near this (0x108 is the largest seen, for a 3-image
/// concatenated entry); a larger value is corruption, and bounds what we buffer.
pub const ENTRY_HEADER_MAX: u32 = 1 << 20;

pub const FLAG_64BIT: u64 = 0x1;
pub const FLAG_DEBUG: u64 = 0x2;
pub const FLAG_HOST_LINUX: u64 = 0x10;
pub const FLAG_HOST_MAC: u64 = 0x20;
pub const FLAG_HOST_WINDOWS: u64 = 0x40;
pub const FLAG_LZ4: u64 = 0x2000;
pub const FLAG_ZSTD: u64 = 0x8000;
pub const FLAG_ARCH_SPECIFIC: u64 = 0x10_0000;
pub const FLAG_FAMILY_SPECIFIC: u64 = 0x20_0000;
/// Set on ELF entries for sm >= 100 by 12.9+/13.x producers: the options slot then holds a
/// copy of the cubin's `.nv.compat` instead of an options string (docs/cuda-binaries.md §2.2).
pub const FLAG_COMPAT_BLOB: u64 = 0x100_0000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EntryKind {
    Ptx,
    Elf,
    OldCubin,
    Nvvm,
    TileIr,
    Concatenated,
    Unknown,
}

impl EntryKind {
    pub fn from_raw(kind: u16) -> EntryKind {
        match kind {
            0x1 => EntryKind::Ptx,
            0x2 => EntryKind::Elf,
            0x4 => EntryKind::OldCubin,
            0x8 => EntryKind::Nvvm,
            0x80 => EntryKind::TileIr,
            0x100 => EntryKind::Concatenated,
            _ => EntryKind::Unknown,
        }
    }

    /// cuobjdump's label, for listings that line up with NVIDIA's.
    pub fn label(self) -> &'static str {
        match self {
            EntryKind::Ptx => "ptx",
            EntryKind::Elf => "elf",
            EntryKind::OldCubin => "old-cubin",
            EntryKind::Nvvm => "nvvm",
            EntryKind::TileIr => "tile-ir",
            EntryKind::Concatenated => "concatenated",
            EntryKind::Unknown => "unknown",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Compression {
    None,
    Lz4,
    Zstd,
    /// Both bits set, or an NVVM entry (flag 0x10000: payload is not a plain frame).
    Other,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Host {
    Linux,
    Mac,
    Windows,
    Unknown,
}

/// The 'a' (arch-specific) / 'f' (family-specific) suffix of a target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Suffix {
    #[default]
    None,
    A,
    F,
}

impl Suffix {
    pub fn as_str(self) -> &'static str {
        match self {
            Suffix::None => "",
            Suffix::A => "a",
            Suffix::F => "f",
        }
    }
}

/// The fixed 0x40-byte part of an entry header, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawEntry {
    pub kind_raw: u16,
    pub format_version: u16,
    pub header_size: u32,
    pub payload_size: u64,
    pub compressed_size: u32,
    pub options_offset: u32,
    pub code_version: (u16, u16),
    pub sm: u32,
    pub identifier_offset: u32,
    pub identifier_len: u32,
    pub flags: u64,
    pub reserved_30: u64,
    pub uncompressed_size: u64,
}

fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}
fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}

/// Container header: returns the fat size (bytes of entries after the 16-byte header), or
/// None when the bytes are not a version-1 container header.
pub fn parse_container_header(b: &[u8]) -> Option<u64> {
    if b.len() < 16 || b[..8] != CONTAINER_PREFIX {
        return None;
    }
    Some(u64_at(b, 8))
}

/// Decodes the fixed part of an entry header. `b` must hold at least 0x40 bytes.
pub fn parse_entry_base(b: &[u8]) -> Option<RawEntry> {
    if b.len() < ENTRY_BASE_LEN {
        return None;
    }
    Some(RawEntry {
        kind_raw: u16_at(b, 0),
        format_version: u16_at(b, 2),
        header_size: u32_at(b, 4),
        payload_size: u64_at(b, 8),
        compressed_size: u32_at(b, 0x10),
        options_offset: u32_at(b, 0x14),
        code_version: (u16_at(b, 0x1A), u16_at(b, 0x18)),
        sm: u32_at(b, 0x1C),
        identifier_offset: u32_at(b, 0x20),
        identifier_len: u32_at(b, 0x24),
        flags: u64_at(b, 0x28),
        reserved_30: u64_at(b, 0x30),
        uncompressed_size: u64_at(b, 0x38),
    })
}

impl RawEntry {
    pub fn kind(&self) -> EntryKind {
        EntryKind::from_raw(self.kind_raw)
    }

    /// Plausible as a real entry header: known kind, header size a multiple of 8 within bounds.
    /// Used to tell a real hidden container from a chance match of the magic.
    pub fn plausible(&self) -> bool {
        self.kind() != EntryKind::Unknown
            && self.header_size >= ENTRY_BASE_LEN as u32
            && self.header_size <= ENTRY_HEADER_MAX
            && self.header_size.is_multiple_of(8)
    }

    pub fn compression(&self) -> Compression {
        let lz4 = self.flags & FLAG_LZ4 != 0;
        let zstd = self.flags & FLAG_ZSTD != 0;
        match (lz4, zstd) {
            (false, false) => Compression::None,
            _ if self.kind() == EntryKind::Nvvm => Compression::Other,
            (true, false) => Compression::Lz4,
            (false, true) => Compression::Zstd,
            (true, true) => Compression::Other,
        }
    }

    pub fn host(&self) -> Host {
        if self.flags & FLAG_HOST_LINUX != 0 {
            Host::Linux
        } else if self.flags & FLAG_HOST_MAC != 0 {
            Host::Mac
        } else if self.flags & FLAG_HOST_WINDOWS != 0 {
            Host::Windows
        } else {
            Host::Unknown
        }
    }

    pub fn suffix(&self) -> Suffix {
        if self.flags & FLAG_ARCH_SPECIFIC != 0 {
            Suffix::A
        } else if self.flags & FLAG_FAMILY_SPECIFIC != 0 {
            Suffix::F
        } else {
            Suffix::None
        }
    }
}

/// A string stored in the header's extension area at `[off, off+len)` relative to the entry
/// start. Trailing NULs and spaces are kept as cuobjdump prints them, minus NULs.
pub fn header_string(header: &[u8], off: u32, len: u32) -> Option<String> {
    if off == 0 {
        return None;
    }
    let start = off as usize;
    let end = start.checked_add(len as usize)?;
    let bytes = header.get(start..end)?;
    let bytes = match memchr::memchr(0, bytes) {
        Some(n) => &bytes[..n],
        None => bytes,
    };
    Some(String::from_utf8_lossy(bytes).into_owned())
}

/// The options slot: `{u32 offset, u32 length}` at `options_offset`, both relative to the
/// entry start. For sm >= 100 ELF entries it holds the `.nv.compat` copy instead (docs/cuda-binaries.md §2.2).
pub fn options_slot(header: &[u8], options_offset: u32) -> Option<(u32, u32)> {
    if options_offset == 0 {
        return None;
    }
    let o = options_offset as usize;
    let pair = header.get(o..o.checked_add(8)?)?;
    Some((u32_at(pair, 0), u32_at(pair, 4)))
}

/// One sub-image of a concatenated entry (kind 0x100, docs/cuda-binaries.md §2.6): a 0x40-byte header in the
/// normal layout except that +0x04 is the offset inside the decompressed blob and +0x08 the size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubImage {
    pub raw: RawEntry,
    pub offset: u64,
    pub size: u64,
}

/// Reads the sub-header table of a concatenated entry from its header bytes.
pub fn concatenated_table(header: &[u8]) -> Result<Vec<SubImage>, String> {
    let t = header.get(0x40..0x48).ok_or("concatenated entry header too short for its table")?;
    let count = u32_at(t, 0) as usize;
    let table = u32_at(t, 4) as usize;
    let need = 8usize
        .checked_add(count.checked_mul(0x40).ok_or("concatenated table size overflows")?)
        .ok_or("concatenated table size overflows")?;
    if table != need || 0x40 + need > header.len() {
        return Err(format!(
            "concatenated table of {count} images (size {table:#x}) does not fit the entry header ({:#x} bytes)",
            header.len()
        ));
    }
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        let s = 0x48 + i * 0x40;
        let raw = parse_entry_base(&header[s..s + 0x40]).ok_or("short sub-header")?;
        out.push(SubImage { offset: u64::from(raw.header_size), size: raw.payload_size, raw });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    // The compute_80 PTX entry of docs/cuda-binaries.md §2.7, byte for byte.
    const PTX_ENTRY: [u8; 0x50] = [
        0x01, 0x00, 0x01, 0x01, 0x50, 0x00, 0x00, 0x00, 0x88, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x87, 0x01,
        0x00, 0x00, 0x40, 0x00, 0x00, 0x00, 0x05, 0x00, 0x09, 0x00, 0x50, 0x00, 0x00, 0x00, 0, 0, 0, 0, 0, 0, 0, 0,
        0x11, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x88, 0x03, 0, 0, 0, 0, 0, 0, 0x48, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0,
    ];

    #[test]
    fn decodes_the_documented_ptx_entry() {
        let e = parse_entry_base(&PTX_ENTRY).unwrap();
        assert_eq!(e.kind(), EntryKind::Ptx);
        assert_eq!(e.header_size, 0x50);
        assert_eq!(e.payload_size, 0x188);
        assert_eq!(e.compressed_size, 0x187);
        assert_eq!(e.code_version, (9, 5));
        assert_eq!(e.sm, 80);
        assert_eq!(e.compression(), Compression::Zstd);
        assert_eq!(e.uncompressed_size, 0x388);
        assert_eq!(options_slot(&PTX_ENTRY, e.options_offset), Some((0x48, 0)));
        assert!(e.plausible());
    }

    #[test]
    fn out_of_range_strings_are_none() {
        assert_eq!(header_string(&PTX_ENTRY, 0x4C, 0x100), None);
        assert_eq!(header_string(&PTX_ENTRY, u32::MAX, u32::MAX), None);
        assert_eq!(options_slot(&PTX_ENTRY, 0x4C), None);
    }
}
