//! Host ELF files: section table and dynamic section (read directly on seekable inputs,
//! captured on the way past on streams), the forward scan for containers, and the facts that
//! depend on where things sit: section vs hidden containers, wrapper versions, static cudart.

use std::collections::BTreeMap;
use std::io;

use super::hostelf::{self, Layout, Section};
use super::model::{CudartVersion, ElfInfo, ElfType, FileFormat, FileReport, HiddenCubin, Linkage, Wrapper};
use super::scanner::ScanResult;
use super::window::{Capture, Watch, Window};

use super::{InspectOptions, cudart_from_name};

const PREFIX: usize = 64 << 10;
const SEEK_PREFIX: usize = 4 << 10;
/// On a stream, the tables `.dynamic` points at (`.dynstr`, `.rela.dyn`) have usually gone by
/// before it says where they are: every linker we know (GNU ld, gold, lld; patchelf keeps the
/// old ones in place) puts them in the first loaded segment, so a stream keeps that segment up to
/// the dynamic section (spilled to a temporary file when large), at most this much of it.
const STREAM_HEAD_MAX: u64 = 2 << 30;
/// Largest relocation table read (TensorFlow 2.21's `.rela.dyn` is 20 MB).
const MAX_RELOCATIONS: u64 = 1 << 30;
/// Section name strings sit just before the section table at the end of the file: a stream keeps
/// 256 bytes a section before it (names average far less), at least 64 KiB and at most 8 MiB (an
/// object of 38,078 sections in triton's `libcupti_static.a` has a 2 MB name table).
const STREAM_SHSTRTAB_PER_SECTION: u64 = 256;
const STREAM_SHSTRTAB_WINDOW: (u64, u64) = (64 << 10, 8 << 20);
const MAX_DYNAMIC: u64 = 1 << 20;
/// Longest SONAME / DT_NEEDED string read.
const MAX_NAME: u64 = 4096;
/// Why a string table offset gave no name, where its bytes were read.
const NO_NAME: &str = "no name ends within the table, the file and 4096 bytes";
/// A stream keeps this much around each `.shstrtab` name it sees outside the loaded segments
/// (the section name table holds it), in at most [`SHSTRTAB_CANDIDATES`] regions.
const SHSTRTAB_RADIUS: usize = 64 << 10;
const SHSTRTAB_CANDIDATES: usize = 8;

pub const FATBIN_SECTION: &str = ".nv_fatbin";
pub const RELFATBIN_SECTION: &str = "__nv_relfatbin";
pub const SEGMENT_SECTION: &str = ".nvFatBinSegment";

// Which names are CUDA libraries is the library table's to say (`inspect::libraries`).
pub use super::libraries::is_cuda_library;

pub fn inspect(w: &mut Window, path: &str, opts: &InspectOptions) -> io::Result<FileReport> {
    let len = w.total_len();
    let mut report = FileReport::new(path.to_string(), len, FileFormat::Elf);
    // Program headers follow the ELF header; a seekable read fetches more only if needed.
    let prefix = w.fill(if w.seekable() { SEEK_PREFIX } else { PREFIX })?.to_vec();
    let mut layout = match Layout::from_prefix(&prefix) {
        Ok(l) => Some(l),
        Err(e) => {
            report.problem(Some(0), e);
            None
        }
    };
    let seekable = w.seekable();

    let mut sections: Option<Vec<Section>> = None;
    let mut dyn_bytes: Option<Vec<u8>> = None;
    if let Some(l) = layout.as_mut() {
        // Program headers beyond the prefix (rare).
        let (po, pl) = l.phdr_range();
        if l.phdrs.is_empty() && pl > 0 && seekable {
            match read_at(w, po, pl, hostelf::MAX_HEADERS) {
                Ok(b) => {
                    if let Err(e) = l.set_phdrs(&b) {
                        report.problem(Some(po), e);
                    }
                }
                Err(e) => report.problem(Some(po), format!("program headers: {e}")),
            }
        }
        if seekable {
            sections = read_sections(w, l, &mut report)?;
            if let Some((o, n)) = l.dynamic_range() {
                match read_at(w, o, n, MAX_DYNAMIC) {
                    Ok(b) => dyn_bytes = Some(b),
                    Err(e) => report.problem(Some(o), format!("dynamic section: {e}")),
                }
            }
        } else {
            if l.phdrs.is_empty() && pl > 0 {
                report.problem(Some(po), format!("program headers lie beyond the first {PREFIX:#x} bytes of a stream"));
            }
            plan_captures(w, l);
        }
    }

    // On a seekable file, what the headers say decides whether the body is read at all.
    let mut info = None;
    if let (Some(l), true) = (&layout, seekable) {
        info = Some(elf_info(
            l,
            &mut report,
            &sections,
            dyn_bytes.as_deref(),
            |off, n| read_at(w, off, n, n).ok(),
            |_, _| NO_NAME.to_string(),
        ));
    }
    let wanted = |info: &Option<ElfInfo>, sections: &Option<Vec<Section>>| {
        !opts.lean
            || cuda_related(path, info.as_ref(), sections.as_deref())
            || by_segments(sections.as_deref(), layout.as_ref(), len)
    };

    // Machine code is read for the static cudart version, unless reading lean (libcudart itself
    // is always read: its version may be nowhere else).
    let name = path.rsplit(['/', ':']).next().unwrap_or(path);
    let code = !opts.lean || super::libraries::cuda_runtime_version(name).is_some();

    // Which bytes to scan: on a seekable file with a usable section table, the sections that
    // may hold device code (nothing else can be handed to the driver); without one, what the
    // loader maps (the PT_LOAD segments); failing those, everything.
    let segments = layout.as_ref().map(Layout::load_ranges).filter(|r| !r.is_empty());
    let ranges = match (&sections, &segments) {
        _ if seekable && !wanted(&info, &sections) => Vec::new(),
        (Some(secs), _) if !by_segments(Some(secs), layout.as_ref(), len) => scan_ranges(secs, code),
        (_, Some(segs)) if seekable => segs.clone(),
        _ => vec![(0, len)],
    };
    let mut scanner = opts.scanner(true);
    if opts.lean && !opts.every_cubin && !by_segments(sections.as_deref(), layout.as_ref(), len) {
        scanner.probe_ranges = sections
            .as_ref()
            .map(|secs| secs.iter().filter(|s| is_fatbin_section(&s.name)).filter_map(Section::file_range).collect());
    }
    scanner.exec_ranges = match (&layout, code) {
        (_, false) => Vec::new(),
        (Some(l), true) => l.exec_segments(),
        (None, true) => vec![(0, len)],
    };
    let mut out = ScanResult::default();
    let mut stream_caps: Vec<Capture> = Vec::new();
    match (&layout, seekable) {
        (Some(l), false) => stream_scan(w, l, &scanner, &ranges, &mut out)?,
        _ => scanner.scan(w, &ranges, &mut out)?,
    }

    if let (Some(l), false) = (&layout, seekable) {
        w.consume_to(len)?;
        let mut caps = std::mem::take(&mut w.captures);
        caps.extend(w.watch.take().into_iter().flat_map(|wt| wt.regions));
        stream_caps = caps;
        let caps = &stream_caps;
        sections = sections_from_captures(l, caps, &mut report);
        if let Some((o, n)) = l.dynamic_range() {
            dyn_bytes = captured(caps, o, n);
        }
        info = Some(elf_info(
            l,
            &mut report,
            &sections,
            dyn_bytes.as_deref(),
            |off, n| captured(caps, off, n),
            |off, n| not_kept(caps, l, off, n),
        ));
        // A stream is read whole anyway; what it found is kept on the same terms as a seek.
        if !wanted(&info, &sections) {
            out = ScanResult::default();
        }
    }
    report.elf = info;
    // Where run-time compilers' strings live (inspect::sweep reads them).
    report.rodata = sections
        .iter()
        .flatten()
        .filter(|s| s.name == ".rodata" || s.name.starts_with(".rodata."))
        .filter_map(Section::file_range)
        .collect();
    report.program =
        layout.as_ref().is_some_and(|l| l.phdrs.iter().any(|p| p.p_type == goblin::elf::program_header::PT_INTERP));
    let segs = by_segments(sections.as_deref(), layout.as_ref(), len);
    report.cuda_sign = cuda_related(path, report.elf.as_ref(), sections.as_deref())
        || !out.wrappers.is_empty()
        || !out.containers.is_empty()
        || !out.rejected.is_empty()
        || !out.cubins.is_empty();
    // A PIC library's wrappers hold 0 in the file (the loader writes their data pointers from
    // relocations): read those only when a container's registration is in question.
    let needed = needs_relocations(&out, sections.as_deref(), segs);
    let relocs =
        match (&layout, dyn_bytes.as_deref()) {
            (Some(l), Some(d)) if out.wrappers.iter().any(|w| w.data == 0) => {
                let caps = &stream_caps;
                // Where the loader writes each wrapper's data pointer (8 bytes into it).
                let slots: std::collections::HashSet<u64> = out
                    .wrappers
                    .iter()
                    .filter(|w| w.data == 0)
                    .filter_map(|w| vaddr_of(sections.as_deref(), l, w.offset)?.checked_add(8))
                    .collect();
                let read = relocations(l, d, &slots, |off, n| {
                    if seekable { read_at(w, off, n, n).ok() } else { captured(caps, off, n) }
                });
                Some(read.map_err(|(off, n, why)| {
                    let why = if seekable || n == 0 { why } else { not_kept(caps, l, off, n) };
                    format!("its table ({n:#x} bytes at {off:#x}) is not readable: {why}")
                }))
            }
            _ => None,
        };
    place(
        &mut report,
        out,
        Where { sections: sections.as_deref(), segments: segs, layout: layout.as_ref(), code, relocs, needed },
    );
    if opts.lean && !opts.every_cubin && !segs {
        // A stream read payloads as they went by; containers outside the fatbin sections were
        // not probed by a seekable read: report them as it would, so both give the same.
        let secs = sections.as_deref().unwrap_or(&[]);
        let in_fatbin = |off: u64| secs.iter().any(|s| is_fatbin_section(&s.name) && s.contains(off));
        for c in report.hidden_containers.iter_mut().chain(report.containers.iter_mut()) {
            if !in_fatbin(c.offset) {
                forget_probes(c);
            }
        }
    }
    report.cuda_sign |= report.has_device_code();
    Ok(report)
}

/// The stream scan, in two parts when the dynamic section comes first: once it has gone by,
/// its string table's place is known (after `patchelf`, a segment of its own near the end of
/// the file) and is kept as it streams past.
fn stream_scan(
    w: &mut Window,
    l: &Layout,
    scanner: &super::scanner::Scanner,
    ranges: &[(u64, u64)],
    out: &mut ScanResult,
) -> io::Result<()> {
    let len = w.total_len();
    let Some(cut) = l.dynamic_range().and_then(|(o, n)| o.checked_add(n)).filter(|&c| c < len) else {
        return scanner.scan(w, ranges, out);
    };
    // The bytes up to here are either kept already or gone: once the dynamic section is read,
    // what it points at later in the file is kept as it streams past (patchelf appends `.dynstr`
    // in a segment of its own after `.dynamic`).
    let split = |keep: &dyn Fn(u64, u64) -> Option<(u64, u64)>| -> Vec<(u64, u64)> {
        ranges.iter().filter_map(|&(a, b)| keep(a, b)).collect()
    };
    scanner.scan(w, &split(&|a, b| (a < cut).then_some((a, b.min(cut)))), out)?;
    w.consume_to(cut)?;
    if let Some(d) = l.dynamic_range().and_then(|(o, n)| captured(&w.captures, o, n)) {
        let d = hostelf::parse_dynamic(&d, l.ctx);
        for (off, n) in later_tables(l, &d, len) {
            if off >= w.offset() {
                w.capture_spilling(off, n);
            }
        }
    }
    scanner.scan(w, &split(&|a, b| (b > cut).then_some((a.max(cut), b))), out)
}

/// Whether the section table cannot say where device code is, so the loaded segments are
/// scanned as the loader maps them: no table (`sstrip`, `--strip-sections`), a fatbin section
/// without file bytes (NOBITS) or past the end of the file, or a table that does not account for
/// what the loader maps. ld.so and the CUDA runtime never read the section table (the runtime
/// reaches a fatbin through the wrapper the registration code passes it): a `.nv_fatbin` edited
/// to size 0 or to not-loaded, a zeroed table, or one holding only its name table would hide
/// loaded device code from a reading that trusts it.
fn by_segments(sections: Option<&[Section]>, layout: Option<&Layout>, len: u64) -> bool {
    let Some(secs) = sections else { return true };
    let cut_off = secs
        .iter()
        .filter(|s| is_fatbin_section(&s.name) || s.name == SEGMENT_SECTION)
        .any(|s| s.size > 0 && s.file_range().is_none_or(|(_, end)| end > len));
    let Some(l) = layout else { return cut_off };
    let loaded = l.load_ranges();
    if loaded.is_empty() {
        // A relocatable object: nothing is loaded as it stands; its sections are all there is.
        return cut_off;
    }
    // nvcc's loaded fatbin sections are allocated with file bytes; anything else is an edit.
    let edited = secs
        .iter()
        .filter(|s| s.name == FATBIN_SECTION || s.name == SEGMENT_SECTION)
        .any(|s| !s.alloc() || s.file_range().is_none());
    let missing = unaccounted(l, secs, &loaded);
    cut_off || edited || (missing > UNACCOUNTED_SLACK && missing > total(&loaded) / 4)
}

/// Loaded bytes no allocated section covers that a real table leaves: alignment padding (under
/// 8 KiB in NVIDIA's libraries) and what patchelf moved away (the old `.dynstr` and `.dynsym`:
/// 6.9 MB of libtorch_cuda.so's 1 GB, 0.23 MB of torchvision's image.so): never a quarter of the
/// loaded bytes. A zeroed table, or one with only its name table, leaves all of them.
const UNACCOUNTED_SLACK: u64 = 4 << 10;

fn total(ranges: &[(u64, u64)]) -> u64 {
    ranges.iter().map(|(a, b)| b.saturating_sub(*a)).sum()
}

/// Bytes of the PT_LOAD segments that neither the ELF and program headers nor an allocated
/// section with file bytes cover.
fn unaccounted(l: &Layout, secs: &[Section], loaded: &[(u64, u64)]) -> u64 {
    let (po, pl) = l.phdr_range();
    let mut covered: Vec<(u64, u64)> = secs.iter().filter(|s| s.alloc()).filter_map(Section::file_range).collect();
    covered.push((0, po.saturating_add(pl).max(u64::from(l.header.e_ehsize))));
    let covered = hostelf::merge_ranges(covered);
    let mut out = 0;
    for &(a, b) in loaded {
        let mut pos = a;
        for &(c, d) in covered.iter().filter(|(c, d)| *d > a && *c < b) {
            out += c.saturating_sub(pos);
            pos = pos.max(d);
        }
        out += b.saturating_sub(pos);
    }
    out
}

fn is_fatbin_section(name: &str) -> bool {
    name == FATBIN_SECTION || name == RELFATBIN_SECTION
}

fn forget_probes(c: &mut super::model::Container) {
    c.kernels = super::model::Kernels::Assumed;
    for e in &mut c.entries {
        e.cubin = None;
        e.ptx_entries = None;
        for i in &mut e.images {
            i.cubin = None;
            i.ptx_entries = None;
        }
    }
}

/// Headers that show a file is part of CUDA: fatbin sections, CUDA libraries in DT_NEEDED or
/// as SONAME, or a CUDA library's name.
fn cuda_related(path: &str, info: Option<&ElfInfo>, sections: Option<&[Section]>) -> bool {
    let name = path.rsplit(['/', ':']).next().unwrap_or(path);
    let fatbin = |s: &Section| s.name == FATBIN_SECTION || s.name == RELFATBIN_SECTION || s.name == SEGMENT_SECTION;
    is_cuda_library(name)
        || sections.is_some_and(|s| s.iter().any(fatbin))
        || info.is_some_and(|i| !i.cuda_needed.is_empty() || i.soname.as_deref().is_some_and(is_cuda_library))
}

fn read_at(w: &mut Window, off: u64, len: u64, cap: u64) -> Result<Vec<u8>, String> {
    if len > cap {
        return Err(format!("{len:#x} bytes exceeds the {cap:#x}-byte limit"));
    }
    if off.checked_add(len).is_none_or(|e| e > w.total_len()) {
        return Err(format!("{len:#x} bytes at {off:#x} lie past the end of the file ({:#x} bytes)", w.total_len()));
    }
    let mut v = vec![0; len as usize];
    match w.read_at(off, &mut v) {
        Some(Ok(())) => Ok(v),
        Some(Err(e)) => Err(e.to_string()),
        None => Err("input is not seekable".into()),
    }
}

fn read_sections(w: &mut Window, l: &Layout, report: &mut FileReport) -> io::Result<Option<Vec<Section>>> {
    let Some((o, n)) = l.shdr_range() else { return Ok(None) };
    let table = match read_at(w, o, n, hostelf::MAX_HEADERS) {
        Ok(t) => t,
        Err(e) => {
            report.problem(Some(o), format!("section table: {e} (truncated file?)"));
            return Ok(None);
        }
    };
    Ok(name_sections(l, &table, report, |off, len| read_at(w, off, len, hostelf::MAX_HEADERS).ok()))
}

fn name_sections(
    l: &Layout,
    table: &[u8],
    report: &mut FileReport,
    mut get: impl FnMut(u64, u64) -> Option<Vec<u8>>,
) -> Option<Vec<Section>> {
    let headers = match l.parse_sections(table) {
        Ok(h) => h,
        Err(e) => {
            report.problem(l.shdr_range().map(|r| r.0), e);
            return None;
        }
    };
    let strtab = headers.get(usize::from(l.header.e_shstrndx)).and_then(|s| get(s.sh_offset, s.sh_size));
    let Some(strtab) = strtab else {
        report.problem(None, "section names unreadable: fatbin sections cannot be told apart; read by segments");
        return None;
    };
    Some(hostelf::name_sections(&headers, &strtab))
}

fn plan_captures(w: &mut Window, l: &Layout) {
    let len = w.total_len();
    if let Some((o, n)) = l.shdr_range()
        && n <= hostelf::MAX_HEADERS
        && o.saturating_add(n) <= len
    {
        // Not before the ELF header's end: the file is seldom that small, and a stream cannot
        // keep what has gone by.
        let (least, most) = STREAM_SHSTRTAB_WINDOW;
        let window = (u64::from(l.header.e_shnum) * STREAM_SHSTRTAB_PER_SECTION).clamp(least, most);
        let from = o.saturating_sub(window).max(w.offset().min(o));
        w.capture_spilling(from, o + n - from);
        // Elsewhere (lld: before a large `.strtab`), the table is known by the name it holds.
        // Not in what the loader maps (after patchelf, loaded segments follow it).
        w.watch(Watch::new(b"\0.shstrtab\0", l.load_ranges(), SHSTRTAB_RADIUS, SHSTRTAB_CANDIDATES, len));
    }
    if let Some((o, n)) = l.dynamic_range()
        && n <= MAX_DYNAMIC
        && o.saturating_add(n) <= len
    {
        w.capture(o, n as usize);
        let head = stream_head(l, len);
        if head.1 > head.0 {
            w.capture_speculative(head.0, head.1 - head.0);
        }
        // The segment that holds `.dynamic`, up to it: patchelf appends one with `.dynstr`
        // before `.dynamic`, after all device code (nvidia-cusparselt-cu12 0.6.3).
        let (from, to) = dynamic_segment_head(l, len);
        if to > from && !(from >= head.0 && to <= head.1) {
            w.capture_spilling(from, to - from);
        }
    }
}

/// What a stream keeps of the file before the dynamic section, where the tables it points at
/// lie: the first loaded segment up to `.dynamic` (at most [`STREAM_HEAD_MAX`] bytes).
fn stream_head(l: &Layout, len: u64) -> (u64, u64) {
    let Some((d, _)) = l.dynamic_range() else { return (0, 0) };
    let Some(first) = l.first_load() else { return (0, 0) };
    let from = first.p_offset.min(len);
    let mut to =
        first.p_offset.saturating_add(first.p_filesz).min(d).min(len).min(from.saturating_add(STREAM_HEAD_MAX));
    // Where the first segment also holds code (no `-z separate-code`: NVIDIA's libcublasLt, 428 MB
    // of R+X), the tables come before it and the entry point lies in `.text`: keep no further.
    if first.is_executable()
        && let Some(entry) = l.vaddr_to_offset(l.header.e_entry).filter(|&e| e > from && e < to)
    {
        to = entry;
    }
    (from, to.max(from))
}

/// The loaded segment holding `.dynamic`, from its start up to `.dynamic` (at most
/// [`STREAM_HEAD_MAX`] bytes), when it is not the first segment.
fn dynamic_segment_head(l: &Layout, len: u64) -> (u64, u64) {
    let Some((d, _)) = l.dynamic_range() else { return (0, 0) };
    let Some(seg) = l.load_holding(d) else { return (0, 0) };
    let to = d.min(len);
    let from = seg.p_offset.max(to.saturating_sub(STREAM_HEAD_MAX)).min(to);
    (from, to)
}

/// The file ranges of what the dynamic section points at and a reading needs: each SONAME /
/// DT_NEEDED string (at most [`MAX_NAME`] bytes) and the RELA table.
fn later_tables(l: &Layout, d: &hostelf::Dynamic, len: u64) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    if let Some(strtab) = d.strtab_vaddr.and_then(|v| l.vaddr_to_offset(v)) {
        for &o in d.soname_off.iter().chain(&d.needed_offs) {
            let Some(at) = strtab.checked_add(o).filter(|&a| a < len) else { continue };
            let room = d.strsz.map_or(u64::MAX, |sz| sz.saturating_sub(o));
            out.push((at, MAX_NAME.min(room).min(len - at)));
        }
    }
    if let (Some(off), Some(size)) = (d.rela_vaddr.and_then(|v| l.vaddr_to_offset(v)), d.relasz)
        && size <= MAX_RELOCATIONS
        && off.checked_add(size).is_some_and(|e| e <= len)
    {
        out.push((off, size));
    }
    out.retain(|&(_, n)| n > 0);
    out
}

/// The bytes of `[off, off+len)` from the first complete capture that holds them.
fn captured(caps: &[Capture], off: u64, len: u64) -> Option<Vec<u8>> {
    caps.iter().find_map(|c| c.get(off, len))
}

/// Why a range a stream needed was not kept: a capture that failed, else where it lies.
fn not_kept(caps: &[Capture], l: &Layout, off: u64, len: u64) -> String {
    if let Some(e) = caps.iter().find(|c| c.covers(off, len)).and_then(|c| c.failed.clone()) {
        return e;
    }
    if caps.iter().any(|c| c.complete() && c.covers(off, 1)) {
        return NO_NAME.to_string();
    }
    if let Some(cut) = caps.iter().find_map(|c| c.cut_at.filter(|&at| off >= at && off >= c.off)) {
        return format!(
            "it lies after device code (a fatbin container at {cut:#x}), where no linker puts it, \
             and a one-pass read keeps the first segment only up to there"
        );
    }
    let (from, to) = stream_head(l, u64::MAX);
    let dynamic = l.dynamic_range().map_or(0, |r| r.0);
    if off < dynamic {
        format!(
            "it lies before the dynamic section ({dynamic:#x}), outside the first loaded segment's \
             {from:#x}..{to:#x} and the dynamic section's own segment, which is all a one-pass read \
             keeps before it knows where the tables are"
        )
    } else {
        "it lies past the end of the file".to_string()
    }
}

fn sections_from_captures(l: &Layout, caps: &[Capture], report: &mut FileReport) -> Option<Vec<Section>> {
    let (o, n) = l.shdr_range()?;
    let Some(table) = captured(caps, o, n) else {
        report.problem(Some(o), "section table lies past the end of the file (truncated?)");
        return None;
    };
    name_sections(l, &table, report, |off, len| captured(caps, off, len))
}

/// Sections that may hold device code, merged into ascending ranges.
fn scan_ranges(secs: &[Section], code: bool) -> Vec<(u64, u64)> {
    let r: Vec<(u64, u64)> = secs
        .iter()
        .filter(|s| s.may_hold_device_code() && (code || !s.exec()))
        .filter_map(Section::file_range)
        .collect();
    hostelf::merge_ranges(r)
}

/// SONAME, DT_NEEDED and the ELF summary.
fn elf_info(
    l: &Layout,
    report: &mut FileReport,
    sections: &Option<Vec<Section>>,
    dynamic: Option<&[u8]>,
    mut get: impl FnMut(u64, u64) -> Option<Vec<u8>>,
    why: impl Fn(u64, u64) -> String,
) -> ElfInfo {
    let file_len = report.size;
    let mut info = ElfInfo {
        elf_type: ElfType::from_e_type(l.header.e_type),
        machine: hostelf::machine_name(l.header.e_machine),
        class: if l.ctx.is_big() { 64 } else { 32 },
        soname: None,
        cuda_needed: Vec::new(),
        fatbin_wrappers: Vec::new(),
    };
    if let Some(d) = dynamic {
        let d = hostelf::parse_dynamic(d, l.ctx);
        // The string table's file offset: through the segments, or the `.dynstr` section.
        let strtab = d
            .strtab_vaddr
            .and_then(|v| l.vaddr_to_offset(v))
            .or_else(|| sections.as_ref()?.iter().find(|s| s.name == ".dynstr").map(|s| s.offset));
        let mut string = |off: u64| -> Option<String> {
            let at = strtab?.checked_add(off)?;
            if d.strsz.is_some_and(|sz| off >= sz) {
                return None;
            }
            // Up to the end of the table and of the file (after patchelf the table ends the file).
            let room = d.strsz.map_or(u64::MAX, |sz| sz - off).min(file_len.saturating_sub(at));
            [256, MAX_NAME].into_iter().map(|n| n.min(room)).find_map(|n| {
                let b = get(at, n)?;
                let z = memchr::memchr(0, &b)?;
                Some(String::from_utf8_lossy(&b[..z]).into_owned())
            })
        };
        if d.strtab_vaddr.is_some() {
            info.soname = d.soname_off.and_then(&mut string);
            let mut needed: Vec<String> = d.needed_offs.iter().filter_map(|&o| string(o)).collect();
            if needed.len() < d.needed_offs.len() || (d.soname_off.is_some() && info.soname.is_none()) {
                // Name the first string that could not be read, where it is and why.
                let missing = d.soname_off.iter().chain(&d.needed_offs).copied().find(|&o| string(o).is_none());
                let at = strtab.zip(missing).and_then(|(t, o)| t.checked_add(o));
                let detail = match (strtab, at) {
                    (None, _) => "DT_STRTAB is in no loaded segment and there is no .dynstr section".to_string(),
                    (Some(t), Some(a)) => format!(
                        "the table at {t:#x} holds no terminated name at {a:#x}: {}",
                        why(a, MAX_NAME.min(file_len.saturating_sub(a)))
                    ),
                    (Some(t), None) => format!("the table at {t:#x}"),
                };
                report.problem(at, format!("dynamic string table not readable, SONAME/DT_NEEDED incomplete: {detail}"));
            }
            needed.retain(|n| is_cuda_library(n));
            needed.sort();
            info.cuda_needed = needed;
        }
    }
    info
}

/// Whether a wrapper's relocated data pointer is needed to tell what is registered: a wrapper
/// holds 0 in the file and some container is not in a fatbin section (or none was found).
fn needs_relocations(out: &ScanResult, sections: Option<&[Section]>, segments: bool) -> bool {
    let secs = sections.unwrap_or(&[]);
    let in_fatbin = |off: u64| secs.iter().any(|s| is_fatbin_section(&s.name) && s.contains(off));
    out.wrappers.iter().any(|w| w.data == 0)
        && (segments || out.containers.is_empty() || out.containers.iter().any(|c| !in_fatbin(c.offset)))
}

/// The relative relocations that write the wanted slots, read wherever the dynamic section puts
/// the table, a chunk at a time. `Err` names the range that could not be read and why.
fn relocations(
    l: &Layout,
    dynamic: &[u8],
    slots: &std::collections::HashSet<u64>,
    mut get: impl FnMut(u64, u64) -> Option<Vec<u8>>,
) -> Result<std::collections::HashMap<u64, u64>, (u64, u64, String)> {
    /// A whole number of 24-byte entries.
    const CHUNK: u64 = 24 << 16;
    let d = hostelf::parse_dynamic(dynamic, l.ctx);
    let mut out = std::collections::HashMap::new();
    let Some(vaddr) = d.rela_vaddr else { return Ok(out) };
    let off = l.vaddr_to_offset(vaddr).ok_or((0, 0, format!("DT_RELA {vaddr:#x} is in no loaded segment")))?;
    let size = d.relasz.ok_or((off, 0, "DT_RELA without DT_RELASZ".to_string()))?;
    if size > MAX_RELOCATIONS {
        return Err((off, size, format!("over the {MAX_RELOCATIONS:#x}-byte limit")));
    }
    let mut at = off;
    while at < off + size {
        let n = CHUNK.min(off + size - at);
        let b = get(at, n).ok_or((off, size, "the file ends before it does".to_string()))?;
        out.extend(hostelf::relative_relocations(&b, l.ctx, l.header.e_machine, |a| slots.contains(&a)));
        at += n;
    }
    Ok(out)
}

/// Virtual address of a file offset: through its section, else the PT_LOAD segments.
fn vaddr_of(sections: Option<&[Section]>, l: &Layout, off: u64) -> Option<u64> {
    match sections.and_then(|s| s.iter().find(|s| s.contains(off))) {
        Some(s) if s.addr != 0 => Some(s.addr + (off - s.offset)),
        _ => l.offset_to_vaddr(off),
    }
}

/// Where things are: the section table (when usable), or the loaded segments.
struct Where<'a> {
    sections: Option<&'a [Section]>,
    /// Read by segments ([`by_segments`]): the section table, if any, only names things.
    segments: bool,
    layout: Option<&'a Layout>,
    code: bool,
    /// Relative relocations (target address to value), when read; `Some(Err(why))` = unreadable.
    relocs: Option<Result<std::collections::HashMap<u64, u64>, String>>,
    /// A container's registration depends on the relocations.
    needed: bool,
}

/// Puts scan results where they belong: a container is registered (`containers`) when it sits
/// in a fatbin section or a `.nvFatBinSegment` wrapper points at it, else hidden.
fn place(report: &mut FileReport, out: ScanResult, at: Where) {
    let Where { sections, segments, layout, code, relocs, needed } = at;
    let section_of = |off: u64| sections.and_then(|s| s.iter().find(|s| s.contains(off)));
    let fatbin_section = |s: Option<&Section>| s.is_some_and(|s| is_fatbin_section(&s.name));
    let load = layout.map(Layout::load_ranges).unwrap_or_default();
    // Without segments (an object file) nothing is excluded.
    let in_load = |off: u64| load.is_empty() || load.iter().any(|&(a, b)| off >= a && off < b);

    // What a seekable read never looks at (sections not loaded at run time) is dropped from a
    // streamed read too, so both report the same.
    let loaded = |off: u64| {
        if segments {
            in_load(off)
        } else {
            section_of(off).is_some_and(|s| s.may_hold_device_code() && (code || !s.exec()))
        }
    };
    // Wrappers: those in .nvFatBinSegment when the section table says where it is; else any
    // aligned one the loader maps.
    let wrappers: Vec<Wrapper> = out
        .wrappers
        .iter()
        .filter(|w| {
            if segments {
                w.offset % 8 == 0 && in_load(w.offset)
            } else {
                section_of(w.offset).is_some_and(|s| s.name == SEGMENT_SECTION)
            }
        })
        .map(|w| Wrapper { offset: w.offset, version: w.version, data: w.data })
        .collect();
    let vaddr_of = |off: u64| layout.and_then(|l| vaddr_of(sections, l, off));
    // Each wrapper's data pointer: in the file, or (PIC) from its relocation.
    let target = |w: &Wrapper| -> Option<u64> {
        if w.data != 0 {
            return Some(w.data);
        }
        let r = relocs.as_ref()?.as_ref().ok()?;
        r.get(&vaddr_of(w.offset)?.checked_add(8)?).copied()
    };
    let by_data: std::collections::HashMap<u64, u32> =
        wrappers.iter().rev().filter_map(|w| Some((target(w)?, w.version))).collect();
    let mut registered_at = std::collections::HashSet::new();
    for mut c in out.containers.into_iter().filter(|c| loaded(c.offset)) {
        let sec = section_of(c.offset);
        c.section = sec.map(|s| s.name.clone());
        c.relocatable = sec.is_some_and(|s| s.name == RELFATBIN_SECTION);
        let vaddr = vaddr_of(c.offset);
        c.wrapper_version = vaddr.and_then(|v| by_data.get(&v).copied());
        if fatbin_section(sec) || c.wrapper_version.is_some() {
            registered_at.extend(vaddr);
            report.containers.push(c);
        } else {
            report.hidden_containers.push(c);
        }
    }
    // A wrapper whose container was not found: the runtime registers something this scan did
    // not read.
    let dynamic = layout.is_some_and(|l| l.header.e_type != goblin::elf::header::ET_REL);
    for w in wrappers.iter().filter(|_| dynamic) {
        match target(w) {
            Some(t) if registered_at.contains(&t) => {}
            Some(t) => {
                let place = match layout.and_then(|l| l.vaddr_to_offset(t)) {
                    Some(off) => format!("file offset {off:#x}, where no readable fatbin container was found"),
                    None => "an address outside the file's loaded bytes".to_string(),
                };
                report.problem(Some(w.offset), format!("fatbin wrapper points at {t:#x}: {place}"));
            }
            // Asked for and not readable: which module it registers is unknown.
            None if needed && !matches!(relocs, Some(Ok(_))) => {
                let why = match &relocs {
                    Some(Err(e)) => format!(" ({e})"),
                    _ => String::new(),
                };
                report.problem(
                    Some(w.offset),
                    format!(
                        "fatbin wrapper's data pointer is set by a relocation that could not be read{why}: \
                         the module it registers is unknown"
                    ),
                )
            }
            None => {}
        }
    }
    for r in out.rejected {
        if fatbin_section(section_of(r)) {
            report.problem(Some(r), "container header followed by an invalid entry header");
        }
    }
    for (off, res, bytes) in out.cubins.into_iter().filter(|(o, _, _)| loaded(*o)) {
        match res {
            Ok(cubin) => report.hidden_cubins.push(HiddenCubin {
                bytes,
                offset: off,
                section: section_of(off).map(|s| s.name.clone()),
                cubin,
            }),
            Err(e) => report.managed_problem(Some(off), format!("embedded cubin: {e}")),
        }
    }
    if let Some(info) = report.elf.as_mut() {
        info.fatbin_wrappers = wrappers;
    }

    // Statically linked (or this very) cudart: the CUDART_VERSION immediate in machine code.
    let exec = |off: u64| match sections {
        Some(s) if !segments => s.iter().any(|s| s.exec() && s.contains(off)),
        _ => layout.is_some_and(|l| l.exec_segments().iter().any(|&(a, b)| off >= a && off < b)),
    };
    let mut counts: BTreeMap<u32, usize> = BTreeMap::new();
    for &(off, v) in &out.cudart_hits {
        if exec(off) {
            *counts.entry(v).or_default() += 1;
        }
    }
    let best = counts.iter().filter(|&(_, &n)| n >= 2).max_by_key(|&(&v, &n)| (n, v)).map(|(&v, _)| v);
    let soname = report.elf.as_ref().and_then(|e| e.soname.clone());
    let is_cudart = soname.as_deref().is_some_and(|s| super::libraries::cuda_runtime_version(s).is_some());
    let by_name = if is_cudart { cudart_from_name(&report.path) } else { None };
    // The real file name is exact (12.9.79); the machine code gives major.minor; a SONAME-style
    // name alone gives the major.
    report.cudart = match (by_name, best) {
        (Some(v), _) if v.source == "file-name" => Some(v),
        (_, Some(v)) => Some(CudartVersion {
            version: format!("{}.{}", v / 1000, (v % 1000) / 10),
            linkage: if is_cudart { Linkage::Shared } else { Linkage::Static },
            source: "machine-code".to_string(),
        }),
        (Some(v), None) => Some(v),
        (None, None) if is_cudart => soname.as_deref().and_then(cudart_from_name).map(|mut v| {
            v.source = "soname".to_string();
            v
        }),
        _ => None,
    };
}
