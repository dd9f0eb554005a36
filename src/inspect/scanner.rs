//! The forward scan: one pass over a file (or over chosen ranges of it) that finds fatbin
//! containers wherever they are, walks each one entry header by entry header, hops over the
//! payloads it does not need, and on the way notes `.nvFatBinSegment` wrappers, cubins embedded
//! as data, and the CUDART_VERSION immediates of statically linked cudart (docs/cuda-binaries.md §5f).

use std::io;

use memchr::memmem;

use super::cubin::{self, CubinBytes};
use super::decompress::{MAX_UNCOMPRESSED, decompress};
use super::fatbin::{
    self, CONTAINER_HEADER_LEN, CONTAINER_PREFIX, Compression, ENTRY_BASE_LEN, EntryKind, FLAG_64BIT, FLAG_COMPAT_BLOB,
    FLAG_DEBUG, RawEntry,
};
use super::model::CubinInfo;
use super::model::{Container, Entry, Kernels, Problem, arch_name, hex};
use super::window::{WINDOW, Window};

/// Bytes after a match the validators may look at; a search stops this short of the buffered
/// end (unless the input ends there) so a match is never judged on half its bytes.
const TAIL: usize = 128;
/// Largest container whose bytes are kept for on-device loading.
pub const MAX_MODULE: u64 = 1 << 30;
/// Zero padding tolerated between containers laid end to end.
const RUN_GAP: usize = 64;
/// The scan tops the window up when fewer bytes than this are buffered.
const SCAN_CHUNK: usize = 256 << 10;
/// Cubins up to this size are read whole from the window (one read instead of several).
const SMALL_PAYLOAD: u64 = 256 << 10;
/// Without `every_cubin`, compressed images up to this uncompressed size are decompressed to see
/// whether the module has kernels (device-link stubs are a few KiB); larger ones are assumed to.
pub const PROBE_LIMIT: u64 = 64 << 10;
/// Streaming inputs cannot seek back, so a cubin is buffered whole to be read; above this size
/// only its ELF header is decoded.
pub const STREAM_CUBIN_LIMIT: u64 = 16 << 20;
/// Bound on recorded CUDART_VERSION candidates (x86 code has many `movl $imm,(%rdi)`).
const MAX_CUDART_HITS: usize = 1 << 16;

const WRAPPER_MAGIC: [u8; 4] = [0xB1, 0x43, 0x62, 0x46];
const MOVL_TO_RDI: [u8; 2] = [0xC7, 0x07];

#[derive(Debug, Clone, Copy)]
pub struct WrapperHit {
    pub offset: u64,
    pub version: u32,
    pub data: u64,
}

#[derive(Default)]
pub struct ScanResult {
    pub containers: Vec<Container>,
    /// Container magic whose first entry header is not plausible (chance matches, or damage
    /// when it sits in a fatbin section).
    pub rejected: Vec<u64>,
    pub wrappers: Vec<WrapperHit>,
    pub cudart_hits: Vec<(u64, u32)>,
    pub cubins: Vec<FoundCubin>,
}

/// A bare cubin found by the scan: its offset, what parsing it gave, and its bytes when kept.
pub type FoundCubin = (u64, Result<CubinInfo, String>, Option<std::sync::Arc<Vec<u8>>>);

pub struct Scanner {
    /// Decode every cubin (and PTX), not just until each module is known to carry kernels.
    pub every_cubin: bool,
    pub kernel_names: bool,
    /// Look for wrappers, embedded cubins and cudart immediates (host ELF files only).
    pub host_patterns: bool,
    /// File ranges of executable segments, where cudart's machine code can be.
    pub exec_ranges: Vec<(u64, u64)>,
    /// When set, only containers starting in these ranges have payloads read (lean image
    /// scans: a module loaded with cuModuleLoadData fails on a missing image whether or not it
    /// has kernels, so only registered fatbins need their stubs told apart).
    pub probe_ranges: Option<Vec<(u64, u64)>>,
    /// Keep each container's bytes (`--on-device`).
    pub keep_modules: bool,
}

impl Scanner {
    /// Scans `[a, b)` ranges in order (a container may run past the end of its range; the next
    /// range then starts after it).
    pub fn scan(&self, w: &mut Window, ranges: &[(u64, u64)], out: &mut ScanResult) -> io::Result<()> {
        let file_len = w.total_len();
        for &(a, b) in ranges {
            let b = b.min(file_len);
            if b <= w.offset() {
                continue;
            }
            w.consume_to(a)?;
            while w.offset() < b {
                let base = w.offset();
                // Ask for more only when little is left: topping up a nearly full window would
                // move its bytes around after every small container.
                let want = usize::try_from(b - base).unwrap_or(usize::MAX).saturating_add(TAIL).min(SCAN_CHUNK);
                let buf = w.fill(want)?;
                if buf.is_empty() {
                    break;
                }
                let limit = buf.len().min(usize::try_from(b - base).unwrap_or(usize::MAX));
                let at_end = base + buf.len() as u64 >= file_len;
                // A stream may end before the file's recorded size: a short buffer, never an underflow.
                let search_end =
                    if at_end || buf.len() - limit >= TAIL { limit } else { limit.min(buf.len().saturating_sub(TAIL)) };
                if search_end == 0 {
                    // Fewer than TAIL bytes left before a range end that is not the file end.
                    w.consume_to(base + limit as u64)?;
                    continue;
                }
                let hay = &buf[..(search_end + CONTAINER_PREFIX.len() - 1).min(buf.len())];
                let fat = memmem::find(hay, &CONTAINER_PREFIX);
                let cub = if self.host_patterns { find_cubin(buf, fat.unwrap_or(search_end)) } else { None };
                let event = match (fat, cub) {
                    (Some(f), Some(c)) => Some(f.min(c)),
                    (f, c) => f.or(c),
                };
                let region = event.unwrap_or(search_end);
                if self.host_patterns {
                    note_wrappers(buf, base, region, &mut out.wrappers);
                    // CUDART_VERSION immediates only mean something in machine code.
                    for (xa, xb) in self.exec_ranges.iter().filter_map(|&(xa, xb)| clip(xa, xb, base, region)) {
                        note_cudart(&buf[..(xb + 5).min(buf.len())], base, xa, xb, &mut out.cudart_hits);
                    }
                }
                let Some(p) = event else {
                    w.consume_to(base + search_end as u64)?;
                    continue;
                };
                let at = base + p as u64;
                if Some(p) == fat {
                    w.end_speculative(at);
                }
                w.consume_to(at)?;
                if Some(p) == fat {
                    self.walk_run(w, at, out)?;
                } else {
                    self.embedded_cubin(w, at, out)?;
                }
            }
        }
        Ok(())
    }

    /// Walks the container at `at` and those laid end to end after it (a `.nv_fatbin` section)
    /// without scanning the bytes in between: only entry headers are read.
    fn walk_run(&self, w: &mut Window, mut at: u64, out: &mut ScanResult) -> io::Result<()> {
        loop {
            match self.walk_container(w, at)? {
                Some((c, resume)) => {
                    let clean = c.problems.is_empty() && resume == c.offset + c.size;
                    out.containers.push(c);
                    w.consume_to(resume)?;
                    if !clean {
                        return Ok(());
                    }
                }
                None => {
                    out.rejected.push(at);
                    return w.consume_to(at + 1);
                }
            }
            // Producers pad to 8 bytes at most; look just past the end for the next magic.
            let next = w.fill(RUN_GAP + CONTAINER_PREFIX.len())?;
            let Some(skip) = (0..=RUN_GAP.min(next.len().saturating_sub(CONTAINER_PREFIX.len())))
                .step_by(8)
                .take_while(|&i| next[..i].iter().all(|&b| b == 0))
                .find(|&i| next[i..].starts_with(&CONTAINER_PREFIX))
            else {
                return Ok(());
            };
            at = w.offset() + skip as u64;
            w.consume_to(at)?;
        }
    }

    /// Walks the container at the window's offset. Returns it and where scanning resumes, or
    /// None when its first entry header is not plausible (not a container after all).
    pub fn walk_container(&self, w: &mut Window, at: u64) -> io::Result<Option<(Container, u64)>> {
        let file_len = w.total_len();
        let head = w.fill(CONTAINER_HEADER_LEN as usize + ENTRY_BASE_LEN)?;
        let Some(fat_size) = fatbin::parse_container_header(head) else { return Ok(None) };
        match fatbin::parse_entry_base(&head[CONTAINER_HEADER_LEN as usize..]) {
            Some(first) if first.plausible() => {}
            _ => return Ok(None),
        }
        let mut c = Container {
            offset: at,
            size: fat_size.saturating_add(CONTAINER_HEADER_LEN),
            section: None,
            relocatable: false,
            wrapper_version: None,
            kernels: Kernels::Assumed,
            entries: Vec::new(),
            problems: Vec::new(),
            bytes: None,
        };
        let declared_end = at.checked_add(CONTAINER_HEADER_LEN).and_then(|x| x.checked_add(fat_size));
        let end = match declared_end {
            Some(e) if e <= file_len => e,
            _ => {
                c.problems.push(Problem {
                    offset: Some(at),
                    message: format!(
                        "container declares {fat_size:#x} bytes of entries, past the end of the file \
                         ({file_len:#x} bytes): truncated or corrupt"
                    ),
                    library_managed: false,
                });
                file_len
            }
        };
        // A stream keeps the container's bytes as they go by; a seekable input reads them after.
        let keep = self.keep_modules && end - at <= MAX_MODULE;
        if keep && !w.seekable() {
            w.capture(at, (end - at) as usize);
        }
        let mut e = at + CONTAINER_HEADER_LEN;
        let mut clean = true;
        // Payloads are read (and decompressed) only until one image shows the module carries
        // kernels (all images of a container come from one translation unit), or one is too
        // large to decompress cheaply (then kernels are assumed). A stub's images are small and
        // all read, so a kernel-less container is known for certain.
        let mut found = false;
        let mut assumed = false;
        let probed_here = self.probe_ranges.as_ref().is_none_or(|r| r.iter().any(|&(a, b)| at >= a && at < b));
        while e + ENTRY_BASE_LEN as u64 <= end {
            w.consume_to(e)?;
            let b = w.fill(ENTRY_BASE_LEN)?;
            let Some(raw) = fatbin::parse_entry_base(b) else {
                c.problems.push(problem(e, "entry header cut off by the end of the input"));
                clean = false;
                break;
            };
            if !raw.plausible() {
                c.problems.push(problem(
                    e,
                    format!(
                        "invalid entry header (kind {:#x}, header size {:#x}): stopped reading this container",
                        raw.kind_raw, raw.header_size
                    ),
                ));
                clean = false;
                break;
            }
            let hs = u64::from(raw.header_size);
            let header = w.fill(raw.header_size as usize)?;
            if (header.len() as u64) < hs || e + hs > end {
                c.problems.push(problem(e, format!("entry header of {hs:#x} bytes runs past the container end")));
                clean = false;
                break;
            }
            let header = header[..hs as usize].to_vec();
            let mut entry = decode_entry(&raw, &header, e);
            let payload = e + hs;
            let next = payload.checked_add(raw.payload_size).filter(|&n| n <= end);
            let Some(next) = next else {
                entry.problems.push(problem(
                    e,
                    format!(
                        "payload of {:#x} bytes runs past the container end ({end:#x}): truncated or corrupt",
                        raw.payload_size
                    ),
                ));
                c.entries.push(entry);
                clean = false;
                break;
            };
            w.consume_to(payload)?;
            let cheap = match raw.kind() {
                // A cubin's headers and symbols are read in place; a PTX text is read whole.
                EntryKind::Elf if raw.compression() == Compression::None => true,
                EntryKind::Ptx if raw.compression() == Compression::None => raw.payload_size <= PROBE_LIMIT,
                _ => raw.uncompressed_size <= PROBE_LIMIT,
            };
            let probe = self.every_cubin || (!found && !assumed && cheap && probed_here);
            match raw.kind() {
                EntryKind::Elf if probe => self.probe_elf(w, &raw, payload, &mut entry)?,
                EntryKind::Ptx if probe => self.probe_ptx(w, &raw, payload, &mut entry)?,
                // Its images are listed from the header table whether or not they are read.
                EntryKind::Concatenated => self.concatenated(w, &raw, &header, &mut entry, probe)?,
                _ => {}
            }
            for img in if entry.images.is_empty() { std::slice::from_ref(&entry) } else { &entry.images[..] } {
                if img.has_kernels() {
                    found = true;
                } else if !img.kernel_less() {
                    assumed = true;
                }
            }
            c.entries.push(entry);
            e = next;
        }
        c.kernels = if found {
            Kernels::Present
        } else if !c.entries.is_empty() && c.images().all(Entry::kernel_less) {
            Kernels::None
        } else {
            Kernels::Assumed
        };
        let resume = if clean { end } else { e.max(at + 1) };
        if keep && !clean {
            w.captures.retain(|cap| cap.off != at);
        } else if keep {
            if w.seekable() {
                let mut v = vec![0; (end - at) as usize];
                if let Some(Ok(())) = w.read_at(at, &mut v) {
                    c.bytes = Some(std::sync::Arc::new(v));
                }
            } else {
                w.consume_to(end)?;
                if let Some(i) = w.captures.iter().position(|cap| cap.off == at && cap.complete()) {
                    c.bytes = Some(std::sync::Arc::new(w.captures.remove(i).data));
                }
            }
        }
        Ok(Some((c, resume)))
    }

    /// Reads the cubin of an ELF entry far enough to count its kernels and read its notes.
    fn probe_elf(&self, w: &mut Window, raw: &RawEntry, payload: u64, entry: &mut Entry) -> io::Result<()> {
        let result = match raw.compression() {
            Compression::None => self.read_cubin(w, payload, raw.payload_size)?,
            Compression::Lz4 | Compression::Zstd => match self.read_compressed(w, raw, payload)? {
                Ok(data) => cubin::parse(&mut &data[..], self.kernel_names),
                Err(e) => Err(e),
            },
            Compression::Other => Err("unknown compression; cubin not read".to_string()),
        };
        match result {
            Ok(c) => entry.cubin = Some(c),
            Err(e) => entry.problems.push(problem(payload, format!("cubin: {e}"))),
        }
        Ok(())
    }

    /// Counts the `.entry` directives of a PTX entry (decompressed within its declared size).
    fn probe_ptx(&self, w: &mut Window, raw: &RawEntry, payload: u64, entry: &mut Entry) -> io::Result<()> {
        let text = match raw.compression() {
            Compression::None if raw.payload_size <= MAX_UNCOMPRESSED => Ok(w.take(raw.payload_size as usize)?),
            Compression::None => Err(format!("PTX of {:#x} bytes not read", raw.payload_size)),
            Compression::Lz4 | Compression::Zstd => self.read_compressed(w, raw, payload)?,
            Compression::Other => Err("unknown compression; PTX not read".to_string()),
        };
        match text {
            Ok(t) => entry.ptx_entries = Some(super::ptx::count_entries(&t)),
            Err(e) => entry.problems.push(problem(payload, format!("PTX: {e}"))),
        }
        Ok(())
    }

    /// Reads an uncompressed cubin of (at most) `len` bytes starting at the window's offset.
    pub fn read_cubin(&self, w: &mut Window, at: u64, len: u64) -> io::Result<Result<CubinInfo, String>> {
        if len <= SMALL_PAYLOAD {
            let data = w.fill(len as usize)?;
            let data = &data[..data.len().min(len as usize)];
            return Ok(cubin::parse(&mut &data[..], self.kernel_names));
        }
        if w.seekable() {
            let mut src = WindowBytes { w, base: at, size: len, err: None };
            let r = cubin::parse(&mut src, self.kernel_names);
            if let Some(e) = src.err {
                return Err(e);
            }
            return Ok(r);
        }
        if len <= STREAM_CUBIN_LIMIT {
            let data = w.take(len as usize)?;
            return Ok(cubin::parse(&mut &data[..], self.kernel_names));
        }
        let head = w.fill(64)?.to_vec();
        let mut src = PrefixBytes { head, size: len };
        Ok(cubin::parse(&mut src, self.kernel_names))
    }

    /// The compressed bytes of an entry, decompressed within the declared size.
    fn read_compressed(&self, w: &mut Window, raw: &RawEntry, payload: u64) -> io::Result<Result<Vec<u8>, String>> {
        let csz = u64::from(raw.compressed_size);
        if csz > raw.payload_size {
            return Ok(Err(format!("compressed size {csz:#x} exceeds the payload size {:#x}", raw.payload_size)));
        }
        if raw.uncompressed_size > MAX_UNCOMPRESSED {
            return Ok(Err(format!(
                "not decompressed: declared size {:#x} exceeds the {MAX_UNCOMPRESSED:#x}-byte limit",
                raw.uncompressed_size
            )));
        }
        let data = if w.seekable() && csz > SMALL_PAYLOAD {
            let mut v = vec![0; csz as usize];
            match w.read_at(payload, &mut v) {
                Some(Ok(())) => v,
                Some(Err(e)) => return Err(e),
                None => unreachable!("seekable window without random access"),
            }
        } else {
            w.take(csz as usize)?
        };
        Ok(decompress(raw.compression(), &data, raw.uncompressed_size))
    }

    /// Lists a concatenated entry's images from its header table; their cubins are read from the
    /// decompressed blob (bounded like any payload).
    fn concatenated(
        &self,
        w: &mut Window,
        raw: &RawEntry,
        header: &[u8],
        entry: &mut Entry,
        probe: bool,
    ) -> io::Result<()> {
        let subs = match fatbin::concatenated_table(header) {
            Ok(s) => s,
            Err(e) => {
                entry.problems.push(problem(entry.offset, e));
                return Ok(());
            }
        };
        let blob = if probe && subs.iter().any(|s| matches!(s.raw.kind(), EntryKind::Elf | EntryKind::Ptx)) {
            match self.read_compressed(w, raw, entry.offset + u64::from(raw.header_size))? {
                Ok(b) => Some(b),
                Err(e) => {
                    entry.problems.push(problem(entry.offset, format!("concatenated payload: {e}")));
                    None
                }
            }
        } else {
            None
        };
        let mut found = false;
        for s in subs {
            let mut img = decode_entry(&s.raw, &[], s.offset);
            img.header_size = 0x40;
            img.payload_size = s.size;
            img.compressed_size = 0;
            img.uncompressed_size = 0;
            img.compression = Compression::None;
            let bytes = blob.as_ref().and_then(|b| {
                let r = usize::try_from(s.offset).ok()?..usize::try_from(s.offset.checked_add(s.size)?).ok()?;
                b.get(r)
            });
            if blob.is_some() && bytes.is_none() {
                img.problems.push(problem(
                    s.offset,
                    format!("image {:#x}+{:#x} lies outside the decompressed blob", s.offset, s.size),
                ));
            }
            match (s.raw.kind(), bytes) {
                (EntryKind::Elf, Some(b)) if self.every_cubin || !found => {
                    match cubin::parse(&mut &b[..], self.kernel_names) {
                        Ok(c) => img.cubin = Some(c),
                        Err(e) => img.problems.push(problem(s.offset, format!("cubin: {e}"))),
                    }
                }
                (EntryKind::Ptx, Some(b)) if self.every_cubin || !found => {
                    img.ptx_entries = Some(super::ptx::count_entries(b));
                }
                _ => {}
            }
            found |= img.has_kernels();
            entry.images.push(img);
        }
        Ok(())
    }

    fn embedded_cubin(&self, w: &mut Window, at: u64, out: &mut ScanResult) -> io::Result<()> {
        let head = w.fill(64)?.to_vec();
        let extent = cubin::extent_from_header(&head).filter(|&n| n >= 64 && at.saturating_add(n) <= w.total_len());
        let Some(len) = extent else {
            return w.consume_to(at + 4);
        };
        if !w.seekable() && len > STREAM_CUBIN_LIMIT {
            out.cubins.push((at, cubin::parse(&mut PrefixBytes { head, size: len }, self.kernel_names), None));
            return w.consume_to(at + 4);
        }
        let keep = self.keep_modules && len <= MAX_MODULE;
        if keep && !w.seekable() {
            w.capture(at, len as usize);
        }
        let r = self.read_cubin(w, at, len)?;
        w.consume_to(at + len)?;
        let bytes = if !keep {
            None
        } else if w.seekable() {
            let mut v = vec![0; len as usize];
            matches!(w.read_at(at, &mut v), Some(Ok(()))).then(|| std::sync::Arc::new(v))
        } else {
            w.captures
                .iter()
                .position(|c| c.off == at && c.complete())
                .map(|i| std::sync::Arc::new(w.captures.remove(i).data))
        };
        out.cubins.push((at, r, bytes));
        Ok(())
    }
}

fn problem(offset: u64, message: impl Into<String>) -> Problem {
    Problem { offset: Some(offset), message: message.into(), library_managed: false }
}

/// Fills an [`Entry`] from its header bytes (`header` may be empty for concatenated images).
pub fn decode_entry(raw: &RawEntry, header: &[u8], offset: u64) -> Entry {
    let kind = raw.kind();
    let suffix = raw.suffix();
    let identifier = fatbin::header_string(header, raw.identifier_offset, raw.identifier_len);
    let compat_blob = kind == EntryKind::Elf && raw.flags & FLAG_COMPAT_BLOB != 0;
    // A concatenated entry's +0x14 points at its image table, not at options (docs/cuda-binaries.md §2.6).
    let options = if compat_blob || kind == EntryKind::Concatenated {
        None
    } else {
        fatbin::options_slot(header, raw.options_offset).and_then(|(o, l)| fatbin::header_string(header, o, l))
    };
    let compression = raw.compression();
    Entry {
        offset,
        kind,
        arch: arch_name(kind, raw.sm, suffix),
        sm: raw.sm,
        suffix,
        code_version: [raw.code_version.0, raw.code_version.1],
        flags: hex(raw.flags),
        bits64: raw.flags & FLAG_64BIT != 0,
        debug: raw.flags & FLAG_DEBUG != 0,
        host: raw.host(),
        compression,
        header_size: raw.header_size,
        payload_size: raw.payload_size,
        compressed_size: if compression == Compression::None { 0 } else { u64::from(raw.compressed_size) },
        uncompressed_size: raw.uncompressed_size,
        identifier,
        options,
        cubin: None,
        ptx_entries: None,
        images: Vec::new(),
        problems: Vec::new(),
    }
}

/// The part of `buf` where a match of `pattern` starts before `region`.
fn haystack<'b>(buf: &'b [u8], region: usize, pattern: &[u8]) -> &'b [u8] {
    &buf[..(region + pattern.len() - 1).min(buf.len())]
}

/// First embedded cubin header (ELF magic with e_machine == EM_CUDA) starting before `region`.
fn find_cubin(buf: &[u8], region: usize) -> Option<usize> {
    memmem::find_iter(haystack(buf, region, b"\x7fELF"), b"\x7fELF").find(|&p| cubin::looks_like_cubin(&buf[p..]))
}

fn note_wrappers(buf: &[u8], base: u64, region: usize, out: &mut Vec<WrapperHit>) {
    for p in memmem::find_iter(haystack(buf, region, &WRAPPER_MAGIC), &WRAPPER_MAGIC) {
        let Some(w) = buf.get(p..p + 24) else { continue };
        let version = u32::from_le_bytes(w[4..8].try_into().unwrap());
        if version == 1 || version == 2 {
            let data = u64::from_le_bytes(w[8..16].try_into().unwrap());
            out.push(WrapperHit { offset: base + p as u64, version, data });
        }
    }
}

/// `movl $imm32, (%rdi)` with an immediate shaped like CUDART_VERSION (major*1000 + minor*10).
/// The part of file range `[a, b)` inside the buffer's `[0, region)`, as buffer indices.
fn clip(a: u64, b: u64, base: u64, region: usize) -> Option<(usize, usize)> {
    let lo = a.max(base) - base;
    let hi = b.min(base + region as u64).checked_sub(base)?;
    (lo < hi).then_some((lo as usize, hi as usize))
}

fn note_cudart(buf: &[u8], base: u64, from: usize, region: usize, out: &mut Vec<(u64, u32)>) {
    let hay = haystack(buf, region, &MOVL_TO_RDI);
    for p in memmem::find_iter(&hay[from.min(hay.len())..], &MOVL_TO_RDI).map(|p| p + from) {
        if out.len() >= MAX_CUDART_HITS {
            break;
        }
        if let Some(imm) = buf.get(p + 2..p + 6) {
            let v = u32::from_le_bytes(imm.try_into().unwrap());
            if (9000..20000).contains(&v) && v % 10 == 0 {
                out.push((base + p as u64, v));
            }
        }
    }
}

/// A cubin inside a seekable input, read on demand.
struct WindowBytes<'w, 'a> {
    w: &'w mut Window<'a>,
    base: u64,
    size: u64,
    err: Option<io::Error>,
}

impl CubinBytes for WindowBytes<'_, '_> {
    fn size(&self) -> u64 {
        self.size
    }
    fn get(&mut self, off: u64, len: u64) -> Result<Vec<u8>, String> {
        if off.checked_add(len).is_none_or(|e| e > self.size) {
            return Err(format!("range {off:#x}+{len:#x} lies outside the cubin ({:#x} bytes)", self.size));
        }
        let mut v = vec![0; len as usize];
        match self.w.read_at(self.base + off, &mut v) {
            Some(Ok(())) => Ok(v),
            Some(Err(e)) => {
                let msg = e.to_string();
                self.err = Some(e);
                Err(msg)
            }
            None => Err("input is not seekable".into()),
        }
    }
}

/// Only the first bytes of a cubin too large to buffer from a stream.
struct PrefixBytes {
    head: Vec<u8>,
    size: u64,
}

impl CubinBytes for PrefixBytes {
    fn size(&self) -> u64 {
        self.size
    }
    fn get(&mut self, off: u64, len: u64) -> Result<Vec<u8>, String> {
        let r = usize::try_from(off).ok().and_then(|o| Some(o..o.checked_add(usize::try_from(len).ok()?)?));
        r.and_then(|r| self.head.get(r)).map(<[u8]>::to_vec).ok_or_else(|| {
            format!(
                "cubin of {:#x} bytes in a stream exceeds the {STREAM_CUBIN_LIMIT:#x}-byte buffer limit: \
                 only its ELF header was read",
                self.size
            )
        })
    }
}

pub const _ASSERT_WINDOW: () = assert!(fatbin::ENTRY_HEADER_MAX as usize <= WINDOW);
