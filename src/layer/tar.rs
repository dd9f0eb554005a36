//! A bounded tar walker over an [`Input`]. Header fields are decoded by the `tar` crate; the
//! walk is ours because it must (a) bound what metadata may make us allocate (the crate reads
//! GNU long names and PAX records of any declared size into memory), (b) hop over file data with
//! seeks when the input is seekable, at any nesting depth (a layer inside an image archive), and
//! (c) give each entry's exact data offset.

use std::io;

use tar::{EntryType, Header, PaxExtensions};

use crate::input::{Input, read_full};

const BLOCK: u64 = 512;
/// GNU long names and PAX records larger than this are refused (real ones are < 4 KiB).
pub const MAX_METADATA: u64 = 1 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink,
    Hardlink,
    Other,
}

#[derive(Debug, Clone)]
pub struct TarEntry {
    pub path: Vec<u8>,
    pub kind: Kind,
    pub size: u64,
    pub mode: u32,
    pub link: Option<Vec<u8>>,
    /// Offset of the entry's data in the input.
    pub data_offset: u64,
    /// Offset of the entry's (first) header block.
    pub header_offset: u64,
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
            let size = match pax.as_deref().and_then(|p| pax_value(p, "size")) {
                Some(s) => {
                    s.parse::<u64>().map_err(|_| TarError::Corrupt { offset: at, message: "bad PAX size".into() })?
                }
                None => size,
            };
            let data = at + BLOCK;
            let next = size
                .div_ceil(BLOCK)
                .checked_mul(BLOCK)
                .and_then(|padded| data.checked_add(padded))
                .ok_or_else(|| TarError::Corrupt { offset: at, message: format!("entry size {size} overflows") })?;
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
            let path = pax
                .as_deref()
                .and_then(|p| pax_value(p, "path"))
                .map(|s| s.as_bytes().to_vec())
                .or(long_name.take())
                .unwrap_or_else(|| h.path_bytes().into_owned());
            let link = pax
                .as_deref()
                .and_then(|p| pax_value(p, "linkpath"))
                .map(|s| s.as_bytes().to_vec())
                .or(long_link.take())
                .or_else(|| h.link_name_bytes().map(|l| l.into_owned()));
            let kind = match et {
                EntryType::Regular | EntryType::Continuous => Kind::File,
                EntryType::Directory => Kind::Dir,
                EntryType::Symlink => Kind::Symlink,
                EntryType::Link => Kind::Hardlink,
                _ => Kind::Other,
            };
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
            }));
        }
    }
}

fn trim_nul(mut v: Vec<u8>) -> Vec<u8> {
    while v.last() == Some(&0) {
        v.pop();
    }
    v
}

fn pax_value<'p>(pax: &'p [u8], key: &str) -> Option<&'p str> {
    PaxExtensions::new(pax).filter_map(Result::ok).filter(|e| e.key() == Ok(key)).last().and_then(|e| e.value().ok())
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
