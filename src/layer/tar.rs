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

use tar::{GnuSparseHeader, Header};

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

    /// A seekable input knows its length: an entry running past it is cut off (a stream finds
    /// out when the skip over the data comes up short).
    fn check_len(&self, at: u64, name: &[u8]) -> Result<(), TarError> {
        if self.next > self.input.len() {
            return Err(corrupt(at, &format!("entry {:?} is cut off: the archive ends inside its data", escape(name))));
        }
        Ok(())
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
        let mut pending = Pending::default();
        let mut first = self.next;
        loop {
            let at = self.next;
            let waiting = at != first;
            let Some(block) = self.read_block(at)? else {
                // A stream ending on a block boundary without the end marker: tolerated (some
                // producers omit it; Go's readHeader takes a clean EOF as the end), unless an
                // extended header was waiting for its entry.
                if waiting {
                    return Err(corrupt(at, "archive ends after an extended header"));
                }
                self.done = true;
                return Ok(None);
            };
            if block == [0u8; 512] {
                return self.end_marker(at, waiting);
            }
            let format = verify_checksum(&block, at)?;
            // Go's parseNumeric, not the tar crate's (which reads base-256 sizes from their last
            // 8 bytes and trims any whitespace from octal ones).
            let size =
                go_numeric(&block[124..136]).filter(|&s| s >= 0).ok_or_else(|| corrupt(at, "bad size field"))? as u64;
            match self.extended(block[156], at, size, waiting, &mut pending)? {
                Extended::No => return self.entry(&block, format, at, first, size, pending).map(Some),
                Extended::ForNext => {}
                // A global header stands alone: the next entry starts after it.
                Extended::Global => first = self.next,
            }
        }
    }

    /// A zero block at `at`: the end of the archive, as Go (archive/tar reader.go, readHeader)
    /// reads it, only if the next block is zero too or the input ends there; a zero block
    /// followed by a header is ErrHeader, and the runtime refuses the layer. So do we: what
    /// follows a lone zero block is never silently left unread.
    fn end_marker(&mut self, at: u64, waiting: bool) -> Result<Option<TarEntry>, TarError> {
        if waiting {
            return Err(corrupt(at, "archive ends after an extended header"));
        }
        if let Some(b) = self.read_block(at + BLOCK)?
            && b != [0u8; 512]
        {
            return Err(corrupt(
                at + BLOCK,
                "a header follows a single zero block (Go's archive/tar refuses this archive)",
            ));
        }
        self.done = true;
        Ok(None)
    }

    /// Reads a GNU long name or link (`L`, `K`), a PAX header (`x`) into `p` for the entry that
    /// follows, or checks and passes over a PAX global header (`g`).
    fn extended(
        &mut self,
        typeflag: u8,
        at: u64,
        size: u64,
        waiting: bool,
        p: &mut Pending,
    ) -> Result<Extended, TarError> {
        let data = at + BLOCK;
        let what = match typeflag {
            b'L' | b'K' => {
                let v = self.read_metadata(at, size)?;
                // Go reads the name as a C string (reader.go, parseString): up to the first NUL,
                // whatever follows it.
                let v = cstr(&v).to_vec();
                if typeflag == b'L' {
                    p.long_name = Some(v)
                } else {
                    p.long_link = Some(v)
                }
                Extended::ForNext
            }
            b'x' => {
                let v = self.read_metadata(at, size)?;
                // Go's parsePAX fails the whole header on a bad record (ErrHeader): so do we,
                // rather than reading the records around it.
                if let Some(e) = PaxRecords(&v).find_map(Result::err) {
                    return Err(corrupt(at, &format!("PAX header: {e}")));
                }
                p.pax = Some(v);
                Extended::ForNext
            }
            b'g' => {
                // Go's Next returns a global header as an entry of its own, which moby
                // (pkg/archive createTarFile) and containerd (archive/tar.go) ignore: any long
                // name or PAX header before it is dropped by Go and carried over by GNU tar and
                // Python. Only a hostile producer writes that: refused.
                if waiting {
                    return Err(corrupt(
                        at,
                        "PAX global header between an extended header and its entry (readers disagree on it)",
                    ));
                }
                let v = self.read_metadata(at, size)?;
                if let Some(e) = PaxRecords(&v).find_map(Result::err) {
                    return Err(corrupt(at, &format!("PAX global header: {e}")));
                }
                Extended::Global
            }
            _ => return Ok(Extended::No),
        };
        self.next = end_of(data, size, at)?;
        let shown: &[u8] = if typeflag == b'g' { b"(PAX global header)" } else { b"(extended header)" };
        self.check_len(at, shown)?;
        Ok(what)
    }

    /// The entry whose header is `block` at `at` (its extended headers from `first`), as Go
    /// reads it with what `p` carries applied: size, names, type, sparse map.
    fn entry(
        &mut self,
        block: &[u8; 512],
        format: Format,
        at: u64,
        first: u64,
        size: u64,
        p: Pending,
    ) -> Result<TarEntry, TarError> {
        let typeflag = block[156];
        let pax = p.pax.as_deref();
        let pax_rec = |key: &str| pax.and_then(|p| pax_get(p, key));
        // Go's mergePAX: a PAX `size` replaces the header's (an empty value keeps it).
        let size = match pax_rec("size") {
            Some(s) => match go_parse_int(s) {
                Some(n) if n >= 0 => n as u64,
                Some(_) if header_only(typeflag) => 0,
                _ => return Err(corrupt(at, "bad PAX size")),
            },
            None => size,
        };
        let (path, link) = names(block, format, first, p.long_name, p.long_link, pax)?;
        // Go (Reader.next): TypeRegA ('\0') is a directory if the name ends in '/', else a
        // regular file; TypeReg ('0') stays a regular file whatever its name (moby and
        // containerd then Clean the name: `lib/x.so/` is written as the file `lib/x.so`).
        let typeflag = match typeflag {
            0 if path.ends_with(b"/") => b'5',
            0 => b'0',
            t => t,
        };
        // Go (handleRegularFile, isHeaderOnlyType): links, devices, directories and FIFOs have
        // no data whatever their size field says; the next header follows at once.
        let stored = if header_only(typeflag) { 0 } else { size };
        let data = at + BLOCK;
        self.next = end_of(data, stored, at)?;
        self.check_len(at, &path)?;
        let kind = match typeflag {
            b'0' | b'7' => Kind::File,
            b'5' => Kind::Dir,
            b'2' => Kind::Symlink,
            b'1' => Kind::Hardlink,
            b'S' => Kind::Sparse,
            _ => Kind::Other,
        };
        let mut e = TarEntry {
            path,
            kind,
            size: stored,
            mode: Header::from_byte_slice(block).mode().unwrap_or(0o644),
            link,
            data_offset: data,
            header_offset: first,
            sparse: None,
        };
        let pax_sparse =
            pax.is_some_and(|p| PaxRecords(p).filter_map(Result::ok).any(|(k, _)| k.starts_with(b"GNU.sparse.")));
        if kind == Kind::Sparse || pax_sparse {
            self.sparse(&mut e, block, pax)?;
        }
        Ok(e)
    }

    /// Turns `e` into the sparse file its old GNU header (`S`) or PAX records describe: its
    /// real name, expanded size and data map, or refuses it.
    fn sparse(&mut self, e: &mut TarEntry, block: &[u8; 512], pax: Option<&[u8]>) -> Result<(), TarError> {
        if let Some(name) = pax.and_then(|p| pax_get(p, "GNU.sparse.name")).filter(|n| !n.is_empty()) {
            e.path = name.to_vec();
        }
        let shown = String::from_utf8_lossy(&e.path).into_owned();
        let first = e.header_offset;
        let bad = |message: String| TarError::Corrupt { offset: first, message: format!("{shown}: {message}") };
        if !matches!(e.kind, Kind::File | Kind::Sparse) {
            return Err(bad("sparse file records on an entry that is not a regular file".into()));
        }
        let (map, real, skip) = if e.kind == Kind::Sparse {
            self.gnu_sparse_map(block, e.data_offset).map_err(|x| bad(x.to_string()))?
        } else {
            self.pax_sparse_map(pax.unwrap_or_default(), e.data_offset, e.size).map_err(|x| bad(x.to_string()))?
        };
        e.data_offset += skip;
        let stored = if e.kind == Kind::Sparse {
            // Old GNU extension blocks come before the data and outside its size.
            self.next = self.next.checked_add(skip).ok_or_else(|| bad("sparse map overflows".into()))?;
            if self.next > self.input.len() {
                return Err(bad("cut off: the archive ends inside its data".into()));
            }
            e.size
        } else {
            // A PAX 1.0 map is part of the entry's data.
            e.size.checked_sub(skip).ok_or_else(|| bad("sparse map larger than the entry".into()))?
        };
        check_map(&map, stored, real).map_err(bad)?;
        e.kind = Kind::Sparse;
        e.size = real;
        e.sparse = Some(map);
        Ok(())
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
        // Go (readGNUSparsePAXHeaders) takes GNU.sparse.size before GNU.sparse.realsize.
        let real = pax_get(pax, "GNU.sparse.size")
            .or_else(|| pax_get(pax, "GNU.sparse.realsize"))
            .ok_or("sparse file without a size")?;
        let real = num(real, "size")?;
        let major = pax_raw(pax, "GNU.sparse.major").map(|v| num(v, "version")).transpose()?;
        let minor = pax_raw(pax, "GNU.sparse.minor").map(|v| num(v, "version")).transpose()?;
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
                if let Some(m) = pax_raw(pax, "GNU.sparse.map") {
                    let nums = if m.is_empty() {
                        Vec::new()
                    } else {
                        m.split(|&c| c == b',').map(|v| num(v, "map entry")).collect::<Result<Vec<_>, _>>()?
                    };
                    return Ok((pairs(nums)?, real, 0));
                }
                // 0.0: the records repeat, in order.
                let mut nums = Vec::new();
                for e in PaxRecords(pax) {
                    let (key, value) = e.map_err(str::to_string)?;
                    match key {
                        b"GNU.sparse.offset" if nums.len().is_multiple_of(2) => nums.push(num(value, "offset")?),
                        b"GNU.sparse.numbytes" if !nums.len().is_multiple_of(2) => nums.push(num(value, "length")?),
                        b"GNU.sparse.offset" | b"GNU.sparse.numbytes" => {
                            return Err("sparse offset and numbytes records out of order".into());
                        }
                        _ => {}
                    }
                }
                if nums.is_empty() && pax_raw(pax, "GNU.sparse.numblocks").is_none() {
                    return Err("unrecognised GNU sparse records".into());
                }
                if let Some(n) = pax_raw(pax, "GNU.sparse.numblocks")
                    && num(n, "block count")? != (nums.len() / 2) as u64
                {
                    return Err("sparse block count does not match its records".into());
                }
                Ok((pairs(nums)?, real, 0))
            }
        }
    }
}

/// Extended headers read so far, for the entry that follows them.
#[derive(Default)]
struct Pending {
    long_name: Option<Vec<u8>>,
    long_link: Option<Vec<u8>>,
    pax: Option<Vec<u8>>,
}

/// What a header block was, when not an entry of its own.
enum Extended {
    /// An entry: what [`Pending`] holds applies to it.
    No,
    /// A GNU long name or link, or a PAX header: for the next entry.
    ForNext,
    /// A PAX global header, passed over.
    Global,
}

/// An entry's path and link target as Go reads them: the header's (prefix per format), then a
/// non-empty PAX `path` (mergePAX), then a non-empty GNU long name (Reader.next applies it after
/// mergePAX, so it wins). Where both are given and differ, other readers (Python tarfile, GNU
/// tar) pick differently: refused.
fn names(
    block: &[u8; 512],
    format: Format,
    first: u64,
    long_name: Option<Vec<u8>>,
    long_link: Option<Vec<u8>>,
    pax: Option<&[u8]>,
) -> Result<(Vec<u8>, Option<Vec<u8>>), TarError> {
    let long_name = long_name.filter(|v| !v.is_empty());
    let long_link = long_link.filter(|v| !v.is_empty());
    let pax_path = pax.and_then(|p| pax_get(p, "path"));
    let pax_link = pax.and_then(|p| pax_get(p, "linkpath"));
    if let (Some(l), Some(p)) = (&long_name, pax_path)
        && l.as_slice() != p
    {
        return Err(corrupt(first, &format!("GNU long name {:?} and PAX path {:?} disagree", escape(l), escape(p))));
    }
    if let (Some(l), Some(p)) = (&long_link, pax_link)
        && l.as_slice() != p
    {
        return Err(corrupt(
            first,
            &format!("GNU long link {:?} and PAX linkpath {:?} disagree", escape(l), escape(p)),
        ));
    }
    let path = match long_name {
        Some(l) => l,
        None => match pax_path {
            Some(p) => p.to_vec(),
            None => go_name(block, format),
        },
    };
    let link = match long_link {
        Some(l) => Some(l),
        None => Some(pax_link.unwrap_or_else(|| cstr(&block[157..257])).to_vec()).filter(|l| !l.is_empty()),
    };
    Ok((path, link))
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

fn corrupt(offset: u64, message: &str) -> TarError {
    TarError::Corrupt { offset, message: message.to_string() }
}

/// Where the next header is: after `size` bytes of data from `data`, padded to a block.
fn end_of(data: u64, size: u64, at: u64) -> Result<u64, TarError> {
    size.div_ceil(BLOCK)
        .checked_mul(BLOCK)
        .and_then(|padded| data.checked_add(padded))
        .ok_or_else(|| corrupt(at, &format!("entry size {size} overflows")))
}

/// archive/tar common.go `isHeaderOnlyType`: entries that never have data.
fn header_only(typeflag: u8) -> bool {
    matches!(typeflag, b'1' | b'2' | b'3' | b'4' | b'5' | b'6')
}

/// A C string: up to the first NUL (archive/tar reader.go `parseString`).
fn cstr(b: &[u8]) -> &[u8] {
    b.iter().position(|&c| c == 0).map_or(b, |n| &b[..n])
}

/// The header layouts archive/tar format.go `getFormat` tells apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    V7,
    /// Magic `ustar\0`, whatever the version (Go does not look at it).
    Ustar,
    /// `ustar\0` with the `tar\0` trailer: a 131-byte prefix, then atime and ctime.
    Star,
    /// Magic `ustar ` with version ` \0`.
    Gnu,
}

fn format_of(b: &[u8; 512]) -> Format {
    match (&b[257..263], &b[263..265], &b[508..512]) {
        (b"ustar\0", _, b"tar\0") => Format::Star,
        (b"ustar\0", _, _) => Format::Ustar,
        (b"ustar ", b" \0", _) => Format::Gnu,
        _ => Format::V7,
    }
}

/// The entry's name as archive/tar reader.go `readHeader` builds it. The `tar` crate differs:
/// it ignores the prefix of a `ustar\0` header whose version is not `00`, reads a star
/// header's prefix into its atime, and never reads the prefix of a GNU header, which Go does
/// where the atime or ctime field does not parse (the pre-Go 1.8 writer bug, golang.org/issue/12594).
fn go_name(b: &[u8; 512], format: Format) -> Vec<u8> {
    let name = cstr(&b[..100]);
    let prefix = match format {
        Format::V7 => &[][..],
        Format::Ustar => cstr(&b[345..500]),
        Format::Star => cstr(&b[345..476]),
        Format::Gnu => {
            let bad = |f: &[u8]| f[0] != 0 && go_numeric(f).is_none();
            let p = cstr(&b[345..500]);
            if (bad(&b[345..357]) || bad(&b[357..369])) && p.is_ascii() { p } else { &[][..] }
        }
    };
    if prefix.is_empty() {
        return name.to_vec();
    }
    let mut v = Vec::with_capacity(prefix.len() + 1 + name.len());
    v.extend_from_slice(prefix);
    v.push(b'/');
    v.extend_from_slice(name);
    v
}

/// archive/tar strconv.go `parseNumeric`: base-256 when the high bit is set, else octal. None
/// where Go sets ErrHeader.
fn go_numeric(b: &[u8]) -> Option<i64> {
    if b.first().is_some_and(|&c| c & 0x80 != 0) {
        let inv = if b[0] & 0x40 != 0 { 0xff } else { 0 };
        let mut x: u64 = 0;
        for (i, &c) in b.iter().enumerate() {
            let mut c = c ^ inv;
            if i == 0 {
                c &= 0x7f;
            }
            if x >> 56 > 0 {
                return None;
            }
            x = x << 8 | u64::from(c);
        }
        if x >> 63 > 0 {
            return None;
        }
        return Some(if inv == 0xff { !(x as i64) } else { x as i64 });
    }
    go_octal(b).map(|x| x as i64)
}

/// archive/tar strconv.go `parseOctal`: spaces and NULs trimmed from both ends, then up to the
/// first NUL, in base 8 (an empty field is 0).
fn go_octal(b: &[u8]) -> Option<u64> {
    let pad = |c: &u8| *c == b' ' || *c == 0;
    let start = b.iter().position(|c| !pad(c)).unwrap_or(b.len());
    let end = b.iter().rposition(|c| !pad(c)).map_or(start, |i| i + 1);
    let s = cstr(&b[start..end]);
    if s.is_empty() {
        return Some(0);
    }
    let mut x: u64 = 0;
    for &c in s {
        if !(b'0'..=b'7').contains(&c) {
            return None;
        }
        x = x.checked_mul(8)?.checked_add(u64::from(c - b'0'))?;
    }
    Some(x)
}

/// Go's `strconv.ParseInt(s, 10, 64)`: an optional sign, then decimal digits.
fn go_parse_int(s: &[u8]) -> Option<i64> {
    let (neg, digits) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() {
        return None;
    }
    let mut x: i64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        let d = i64::from(c - b'0');
        x = x.checked_mul(10)?;
        x = if neg { x.checked_sub(d)? } else { x.checked_add(d)? };
    }
    Some(x)
}

/// PAX records as archive/tar reader.go `parsePAXRecord` and `validPAXRecord` read them: the
/// length prefix decides where a record ends (a value may hold newlines; the `tar` crate splits
/// at them), and any malformed record is an error (Go fails the header).
struct PaxRecords<'p>(&'p [u8]);

impl<'p> Iterator for PaxRecords<'p> {
    type Item = Result<(&'p [u8], &'p [u8]), &'static str>;

    fn next(&mut self) -> Option<Self::Item> {
        let s = self.0;
        if s.is_empty() {
            return None;
        }
        let r = (|| {
            let sp = s.iter().position(|&c| c == b' ').ok_or("record without a length")?;
            let n = go_parse_int(&s[..sp]).ok_or("bad record length")?;
            if n < 5 || n as u64 > s.len() as u64 || n as usize <= sp + 1 {
                return Err("bad record length");
            }
            let n = n as usize;
            if s[n - 1] != b'\n' {
                return Err("record does not end in a newline");
            }
            let rec = &s[sp + 1..n - 1];
            let eq = rec.iter().position(|&c| c == b'=').ok_or("record without '='")?;
            let (k, v) = (&rec[..eq], &rec[eq + 1..]);
            let nul = |x: &[u8]| x.contains(&0);
            let valid = !k.is_empty()
                && match k {
                    b"path" | b"linkpath" | b"uname" | b"gname" => !nul(v),
                    _ => !nul(k),
                };
            if !valid {
                return Err("invalid record");
            }
            Ok((n, k, v))
        })();
        match r {
            Ok((n, k, v)) => {
                self.0 = &s[n..];
                Some(Ok((k, v)))
            }
            Err(e) => {
                self.0 = &[];
                Some(Err(e))
            }
        }
    }
}

/// The last value recorded for `key`, empty or not.
fn pax_raw<'p>(pax: &'p [u8], key: &str) -> Option<&'p [u8]> {
    PaxRecords(pax).filter_map(Result::ok).filter(|(k, _)| *k == key.as_bytes()).last().map(|(_, v)| v)
}

/// The value Go keeps for `key` (later records override earlier ones), None where it is
/// missing or empty (Go's mergePAX keeps the header's value for an empty one).
fn pax_get<'p>(pax: &'p [u8], key: &str) -> Option<&'p [u8]> {
    PaxRecords(pax)
        .filter_map(Result::ok)
        .filter(|(k, _)| *k == key.as_bytes())
        .last()
        .map(|(_, v)| v)
        .filter(|v| !v.is_empty())
}

/// Verifies the checksum as archive/tar format.go `getFormat` does (the field in octal, equal
/// to the unsigned or the signed sum of the block) and returns the header's layout.
fn verify_checksum(block: &[u8; 512], at: u64) -> Result<Format, TarError> {
    let want = go_octal(&block[148..156]).ok_or_else(|| corrupt(at, "bad checksum field"))?;
    let (mut unsigned, mut signed) = (0u64, 0i64);
    for (i, &b) in block.iter().enumerate() {
        let b = if (148..156).contains(&i) { b' ' } else { b };
        unsigned += u64::from(b);
        signed += i64::from(b as i8);
    }
    if want != unsigned && want as i64 != signed {
        return Err(TarError::Corrupt {
            offset: at,
            message: format!("checksum {want} does not match the header ({unsigned}): not a tar archive, or corrupt"),
        });
    }
    Ok(format_of(block))
}

/// A tar header block at the start of `b` (checksum verified).
pub fn looks_like_tar(b: &[u8]) -> bool {
    b.len() >= 512 && b[..512].iter().any(|&x| x != 0) && verify_checksum(b[..512].try_into().unwrap(), 0).is_ok()
}
