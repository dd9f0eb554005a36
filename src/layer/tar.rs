//! A bounded tar walker over an [`Input`]. Header fields are decoded by the `tar` crate; the
//! walk is ours because it must (a) bound what metadata may make us allocate (the crate reads
//! GNU long names and PAX records of any declared size into memory), (b) hop over file data with
//! seeks when the input is seekable, at any nesting depth (a layer inside an image archive),
//! (c) give each entry's exact data offset, and (d) read GNU sparse files (old GNU `S` entries
//! and the PAX formats 0.0, 0.1 and 1.0) as GNU tar extracts them, or refuse them: a sparse
//! entry is never passed on as a plain file holding only its stored fragments.
//!
//! Paths and link targets are kept as raw bytes (PAX values included, whatever `hdrcharset`
//! says), so names that differ only in invalid UTF-8 stay distinct.

use std::io;

use tar::{EntryType, GnuSparseHeader, Header, PaxExtensions};

use super::path::escape;
use crate::input::{Input, read_full};

const BLOCK: u64 = 512;
/// GNU long names, PAX records and sparse maps larger than this are refused (real ones are
/// < 4 KiB, except maps of very fragmented files).
pub const MAX_METADATA: u64 = 1 << 20;
/// Sparse regions per entry (a map within MAX_METADATA holds at most this many).
const MAX_REGIONS: usize = (MAX_METADATA / 24) as usize;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink,
    Hardlink,
    /// A regular file stored sparse: `size` is its expanded size, `sparse` its map. Callers that
    /// read data at `data_offset` must go through [`crate::layer::sparse::SparseInput`].
    Sparse,
    Other,
}

/// A stretch of a sparse file that holds data; the stretches' data is stored back to back from
/// the entry's `data_offset`, everything between them reads as zeros.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region {
    pub offset: u64,
    pub len: u64,
}

#[derive(Debug, Clone)]
pub struct TarEntry {
    pub path: Vec<u8>,
    pub kind: Kind,
    /// The file's size (expanded size for sparse files).
    pub size: u64,
    pub mode: u32,
    pub link: Option<Vec<u8>>,
    /// Offset of the entry's data in the input.
    pub data_offset: u64,
    /// Offset of the entry's (first) header block.
    pub header_offset: u64,
    /// The data map of a [`Kind::Sparse`] entry (sorted, non-overlapping).
    pub sparse: Option<Vec<Region>>,
}

#[derive(Debug, thiserror::Error)]
pub enum TarError {
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("tar header at offset {offset:#x}: {message}")]
    Corrupt { offset: u64, message: String },
}

pub struct TarWalker<'a> {
    input: &'a mut dyn Input,
    next: u64,
    done: bool,
}

impl<'a> TarWalker<'a> {
    pub fn new(input: &'a mut dyn Input) -> Self {
        let next = input.pos();
        TarWalker { input, next, done: false }
    }

    pub fn input(&mut self) -> &mut dyn Input {
        self.input
    }

    /// Offset where the archive's end-of-archive marker was found (valid after `None`).
    pub fn end(&self) -> u64 {
        self.next
    }

    fn read_block(&mut self, at: u64) -> Result<Option<[u8; 512]>, TarError> {
        self.input.skip_to(at)?;
        let mut b = [0u8; 512];
        let n = read_full(self.input, &mut b)?;
        match n {
            0 => Ok(None),
            512 => Ok(Some(b)),
            _ => Err(TarError::Corrupt { offset: at, message: format!("truncated header ({n} of 512 bytes)") }),
        }
    }

    fn read_metadata(&mut self, at: u64, size: u64) -> Result<Vec<u8>, TarError> {
        if size > MAX_METADATA {
            return Err(TarError::Corrupt {
                offset: at,
                message: format!("extended header of {size} bytes exceeds the {MAX_METADATA}-byte limit"),
            });
        }
        self.input.skip_to(at + BLOCK)?;
        let mut v = vec![0u8; size as usize];
        if read_full(self.input, &mut v)? < v.len() {
            return Err(TarError::Corrupt { offset: at, message: "extended header cut off".into() });
        }
        Ok(v)
    }

    pub fn next_entry(&mut self) -> Result<Option<TarEntry>, TarError> {
        if self.done {
            return Ok(None);
        }
        let mut long_name: Option<Vec<u8>> = None;
        let mut long_link: Option<Vec<u8>> = None;
        let mut pax: Option<Vec<u8>> = None;
        let first = self.next;
        loop {
            let at = self.next;
            let Some(block) = self.read_block(at)? else {
                // A stream ending on a block boundary without the end marker: tolerated (some
                // producers omit it), unless an extended header was waiting for its entry.
                if at != first {
                    return Err(TarError::Corrupt {
                        offset: at,
                        message: "archive ends after an extended header".into(),
                    });
                }
                self.done = true;
                return Ok(None);
            };
            if block.iter().all(|&b| b == 0) {
                self.done = true;
                return Ok(None);
            }
            let h = Header::from_byte_slice(&block);
            verify_checksum(&block, at)?;
            let size = h.entry_size().map_err(|e| TarError::Corrupt { offset: at, message: e.to_string() })?;
            let size = match pax.as_deref().and_then(|p| pax_bytes(p, "size")) {
                Some(s) => std::str::from_utf8(s)
                    .ok()
                    .and_then(|s| s.parse::<u64>().ok())
                    .ok_or_else(|| TarError::Corrupt { offset: at, message: "bad PAX size".into() })?,
                None => size,
            };
            let data = at + BLOCK;
            let next = size
                .div_ceil(BLOCK)
                .checked_mul(BLOCK)
                .and_then(|padded| data.checked_add(padded))
                .ok_or_else(|| TarError::Corrupt { offset: at, message: format!("entry size {size} overflows") })?;
            // A seekable input knows its length: an entry running past it is cut off (a stream
            // finds out when the skip over the data comes up short).
            if next > self.input.len() {
                return Err(TarError::Corrupt {
                    offset: at,
                    message: format!(
                        "entry {:?} is cut off: the archive ends inside its data",
                        escape(&h.path_bytes())
                    ),
                });
            }
            self.next = next;
            let et = h.entry_type();
            if et.is_gnu_longname() {
                long_name = Some(trim_nul(self.read_metadata(at, size)?));
                continue;
            }
            if et.is_gnu_longlink() {
                long_link = Some(trim_nul(self.read_metadata(at, size)?));
                continue;
            }
            if et.is_pax_local_extensions() {
                pax = Some(self.read_metadata(at, size)?);
                continue;
            }
            if et.is_pax_global_extensions() {
                continue;
            }
            let mut path = pax
                .as_deref()
                .and_then(|p| pax_bytes(p, "path"))
                .map(<[u8]>::to_vec)
                .or(long_name.take())
                .unwrap_or_else(|| h.path_bytes().into_owned());
            let link = pax
                .as_deref()
                .and_then(|p| pax_bytes(p, "linkpath"))
                .map(<[u8]>::to_vec)
                .or(long_link.take())
                .or_else(|| h.link_name_bytes().map(|l| l.into_owned()));
            let mut kind = match et {
                EntryType::Regular | EntryType::Continuous => Kind::File,
                EntryType::Directory => Kind::Dir,
                EntryType::Symlink => Kind::Symlink,
                EntryType::Link => Kind::Hardlink,
                EntryType::GNUSparse => Kind::Sparse,
                _ => Kind::Other,
            };
            let mut size = size;
            let mut data = data;
            let mut sparse = None;
            let pax_sparse = pax.as_deref().is_some_and(|p| {
                PaxExtensions::new(p).filter_map(Result::ok).any(|e| e.key_bytes().starts_with(b"GNU.sparse."))
            });
            if kind == Kind::Sparse || pax_sparse {
                if let Some(name) = pax.as_deref().and_then(|p| pax_bytes(p, "GNU.sparse.name")) {
                    path = name.to_vec();
                }
                let shown = String::from_utf8_lossy(&path).into_owned();
                let bad = |message: String| TarError::Corrupt { offset: first, message: format!("{shown}: {message}") };
                if !matches!(kind, Kind::File | Kind::Sparse) {
                    return Err(bad("sparse file records on an entry that is not a regular file".into()));
                }
                let (map, real, skip) = if kind == Kind::Sparse {
                    self.gnu_sparse_map(&block, data).map_err(|e| bad(e.to_string()))?
                } else {
                    let p = pax.as_deref().unwrap_or_default();
                    self.pax_sparse_map(p, data, size).map_err(|e| bad(e.to_string()))?
                };
                data += skip;
                let stored = if kind == Kind::Sparse {
                    // Old GNU extension blocks come before the data and outside its size.
                    self.next = self.next.checked_add(skip).ok_or_else(|| bad("sparse map overflows".into()))?;
                    if self.next > self.input.len() {
                        return Err(bad("cut off: the archive ends inside its data".into()));
                    }
                    size
                } else {
                    // A PAX 1.0 map is part of the entry's data.
                    size.checked_sub(skip).ok_or_else(|| bad("sparse map larger than the entry".into()))?
                };
                check_map(&map, stored, real).map_err(bad)?;
                kind = Kind::Sparse;
                size = real;
                sparse = Some(map);
            }
            // Old tars mark directories only with a trailing slash.
            let kind = if kind == Kind::File && path.ends_with(b"/") { Kind::Dir } else { kind };
            return Ok(Some(TarEntry {
                path,
                kind,
                size,
                mode: h.mode().unwrap_or(0o644),
                link,
                data_offset: data,
                header_offset: first,
                sparse,
            }));
        }
    }

    /// An old GNU sparse entry (`S`): up to 4 regions in the header, more in extension blocks
    /// between the header and the data. Returns (map, expanded size, bytes of extension blocks).
    fn gnu_sparse_map(&mut self, block: &[u8; 512], data: u64) -> Result<(Vec<Region>, u64, u64), TarError> {
        let msg = |m: &str| TarError::Corrupt { offset: data - BLOCK, message: m.to_string() };
        let gnu = Header::from_byte_slice(block).as_gnu().ok_or_else(|| msg("sparse entry without a GNU header"))?;
        let real = gnu.real_size().map_err(|e| msg(&e.to_string()))?;
        let mut map = Vec::new();
        push_regions(&mut map, &gnu.sparse)?;
        let mut extended = gnu.is_extended();
        let mut at = data;
        while extended {
            if at - data >= MAX_METADATA {
                return Err(msg("sparse map exceeds the size limit"));
            }
            let b = self.read_block(at)?.ok_or_else(|| msg("archive ends inside a sparse map"))?;
            // 21 (offset, numbytes) pairs of 12 bytes each, then the "more follows" flag.
            let ext: Vec<GnuSparseHeader> = b[..504]
                .chunks_exact(24)
                .map(|c| GnuSparseHeader {
                    offset: c[..12].try_into().unwrap_or_default(),
                    numbytes: c[12..].try_into().unwrap_or_default(),
                })
                .collect();
            push_regions(&mut map, &ext)?;
            extended = b[504] == 1;
            at += BLOCK;
        }
        Ok((map, real, at - data))
    }

    /// A PAX sparse entry: format 0.0 (repeated offset/numbytes records), 0.1 (one map record)
    /// or 1.0 (the map in decimal lines at the start of the data, padded to a block). Returns
    /// (map, expanded size, bytes of the map in the data).
    fn pax_sparse_map(&mut self, pax: &[u8], data: u64, size: u64) -> Result<(Vec<Region>, u64, u64), String> {
        let num = |v: &[u8], what: &str| -> Result<u64, String> {
            std::str::from_utf8(v).ok().and_then(|s| s.parse::<u64>().ok()).ok_or_else(|| format!("bad sparse {what}"))
        };
        let real = pax_bytes(pax, "GNU.sparse.realsize")
            .or_else(|| pax_bytes(pax, "GNU.sparse.size"))
            .ok_or("sparse file without a size")?;
        let real = num(real, "size")?;
        let major = pax_bytes(pax, "GNU.sparse.major").map(|v| num(v, "version")).transpose()?;
        let minor = pax_bytes(pax, "GNU.sparse.minor").map(|v| num(v, "version")).transpose()?;
        let pairs = |nums: Vec<u64>| -> Result<Vec<Region>, String> {
            if !nums.len().is_multiple_of(2) || nums.len() / 2 > MAX_REGIONS {
                return Err("bad sparse map".into());
            }
            Ok(nums.chunks(2).map(|c| Region { offset: c[0], len: c[1] }).collect())
        };
        match (major, minor) {
            (Some(1), Some(0)) => {
                // Decimal numbers, one a line: the count, then offset and length of each region.
                let mut text: Vec<u8> = Vec::new();
                let mut at = data;
                let nums = loop {
                    if at - data >= size.min(MAX_METADATA) {
                        return Err("sparse map cut off or too large".into());
                    }
                    let b =
                        self.read_block(at).map_err(|e| e.to_string())?.ok_or("archive ends inside a sparse map")?;
                    text.extend_from_slice(&b);
                    at += BLOCK;
                    let lines: Vec<&[u8]> = text.split(|&c| c == b'\n').collect();
                    // The last piece has no newline yet: not a complete number.
                    let complete = &lines[..lines.len() - 1];
                    let Some(count) = complete.first() else { continue };
                    let count = num(count, "region count")?;
                    if count > MAX_REGIONS as u64 {
                        return Err("sparse map has too many regions".into());
                    }
                    let want = 1 + 2 * count as usize;
                    if complete.len() >= want {
                        break complete[1..want].iter().map(|l| num(l, "map entry")).collect::<Result<Vec<_>, _>>()?;
                    }
                };
                Ok((pairs(nums)?, real, at - data))
            }
            (Some(_), _) | (_, Some(_)) => Err(format!(
                "GNU sparse format {}.{} is not supported",
                major.unwrap_or_default(),
                minor.unwrap_or_default()
            )),
            (None, None) => {
                if let Some(m) = pax_bytes(pax, "GNU.sparse.map") {
                    let nums = if m.is_empty() {
                        Vec::new()
                    } else {
                        m.split(|&c| c == b',').map(|v| num(v, "map entry")).collect::<Result<Vec<_>, _>>()?
                    };
                    return Ok((pairs(nums)?, real, 0));
                }
                // 0.0: the records repeat, in order.
                let mut nums = Vec::new();
                for e in PaxExtensions::new(pax) {
                    let e = e.map_err(|e| e.to_string())?;
                    match e.key_bytes() {
                        b"GNU.sparse.offset" if nums.len().is_multiple_of(2) => {
                            nums.push(num(e.value_bytes(), "offset")?)
                        }
                        b"GNU.sparse.numbytes" if !nums.len().is_multiple_of(2) => {
                            nums.push(num(e.value_bytes(), "length")?)
                        }
                        b"GNU.sparse.offset" | b"GNU.sparse.numbytes" => {
                            return Err("sparse offset and numbytes records out of order".into());
                        }
                        _ => {}
                    }
                }
                if nums.is_empty() && pax_bytes(pax, "GNU.sparse.numblocks").is_none() {
                    return Err("unrecognised GNU sparse records".into());
                }
                if let Some(n) = pax_bytes(pax, "GNU.sparse.numblocks")
                    && num(n, "block count")? != (nums.len() / 2) as u64
                {
                    return Err("sparse block count does not match its records".into());
                }
                Ok((pairs(nums)?, real, 0))
            }
        }
    }
}

fn push_regions(map: &mut Vec<Region>, headers: &[GnuSparseHeader]) -> Result<(), TarError> {
    for s in headers.iter().filter(|s| !s.is_empty()) {
        if map.len() >= MAX_REGIONS {
            return Err(TarError::Corrupt { offset: 0, message: "sparse map has too many regions".into() });
        }
        let bad = |e: io::Error| TarError::Corrupt { offset: 0, message: e.to_string() };
        map.push(Region { offset: s.offset().map_err(bad)?, len: s.length().map_err(bad)? });
    }
    Ok(())
}

/// Regions in order, not overlapping, inside the file, and their data exactly what is stored.
fn check_map(map: &[Region], stored: u64, real: u64) -> Result<(), String> {
    let mut end = 0u64;
    let mut total = 0u64;
    for r in map {
        let e = r.offset.checked_add(r.len).ok_or("sparse region overflows")?;
        if r.offset < end {
            return Err("sparse regions overlap or are out of order".into());
        }
        if e > real {
            return Err(format!("sparse region ends at {e}, past the file's size {real}"));
        }
        end = e;
        total = total.checked_add(r.len).ok_or("sparse regions overflow")?;
    }
    if total != stored {
        return Err(format!("sparse map covers {total} bytes but the entry stores {stored}"));
    }
    Ok(())
}

fn trim_nul(mut v: Vec<u8>) -> Vec<u8> {
    while v.last() == Some(&0) {
        v.pop();
    }
    v
}

/// The last value recorded for `key` (later records override earlier ones), as raw bytes.
fn pax_bytes<'p>(pax: &'p [u8], key: &str) -> Option<&'p [u8]> {
    PaxExtensions::new(pax)
        .filter_map(Result::ok)
        .filter(|e| e.key_bytes() == key.as_bytes())
        .last()
        .map(|e| e.value_bytes())
}

fn verify_checksum(block: &[u8; 512], at: u64) -> Result<(), TarError> {
    let h = Header::from_byte_slice(block);
    let want = h.cksum().map_err(|e| TarError::Corrupt { offset: at, message: format!("checksum field: {e}") })?;
    let sum: u32 =
        block.iter().enumerate().map(|(i, &b)| if (148..156).contains(&i) { 32 } else { u32::from(b) }).sum();
    if sum != want {
        return Err(TarError::Corrupt {
            offset: at,
            message: format!("checksum {want} does not match the header ({sum}): not a tar archive, or corrupt"),
        });
    }
    Ok(())
}

/// A tar header block at the start of `b` (checksum verified).
pub fn looks_like_tar(b: &[u8]) -> bool {
    b.len() >= 512 && b[..512].iter().any(|&x| x != 0) && verify_checksum(b[..512].try_into().unwrap(), 0).is_ok()
}
