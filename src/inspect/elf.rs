//! Host ELF files: section table and dynamic section (read directly on seekable inputs,
//! captured on the way past on streams), the forward scan for containers, and the facts that
//! depend on where things sit: section vs hidden containers, wrapper versions, static cudart.

use std::collections::BTreeMap;
use std::io;

use super::hostelf::{self, Layout, Section};
use super::model::{CudartVersion, ElfInfo, FileFormat, FileReport, HiddenCubin, Wrapper};
use super::scan::ScanResult;
use super::window::{Capture, Window};

use super::{InspectOptions, cudart_from_name};

const PREFIX: usize = 64 << 10;
const SEEK_PREFIX: usize = 4 << 10;
/// On a stream the dynamic string table has gone by before `.dynamic` says where it is; keep
/// this much of the file's start, where linkers put it.
const STREAM_DYNSTR_WINDOW: u64 = 8 << 20;
/// Section name strings sit just before the section table at the end of the file.
const STREAM_SHSTRTAB_WINDOW: u64 = 64 << 10;
const MAX_DYNAMIC: u64 = 1 << 20;

pub const FATBIN_SECTION: &str = ".nv_fatbin";
pub const RELFATBIN_SECTION: &str = "__nv_relfatbin";
pub const SEGMENT_SECTION: &str = ".nvFatBinSegment";

/// DT_NEEDED prefixes that name CUDA libraries.
const CUDA_LIBS: &[&str] = &[
    "libcuda.so",
    "libcudart.so",
    "libcublas",
    "libcublasLt",
    "libcudnn",
    "libnccl",
    "libnvrtc",
    "libcufft",
    "libcurand",
    "libcusparse",
    "libcusolver",
    "libnvjpeg",
    "libnvJitLink",
    "libnvToolsExt",
    "libcupti",
    "libnvidia-",
    "libnvrtc-builtins",
    "libcufile",
    "libnpp",
    "libnvblas",
    "libcudss",
    "libcutensor",
    "libnvshmem",
    "libtensorrt",
    "libnvinfer",
    "libnvptxcompiler",
    "libnvfatbin",
];

pub fn is_cuda_library(name: &str) -> bool {
    CUDA_LIBS.iter().any(|p| name.starts_with(p))
}

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
            plan_captures(w, l);
        }
    }

    // On a seekable file, what the headers say decides whether the body is read at all.
    let mut info = None;
    if let (Some(l), true) = (&layout, seekable) {
        info = Some(elf_info(l, &mut report, &sections, dyn_bytes.as_deref(), |off, n| read_at(w, off, n, n).ok()));
    }
    let wanted = |info: &Option<ElfInfo>, sections: &Option<Vec<Section>>| {
        !opts.lean || cuda_related(path, info.as_ref(), sections.as_deref())
    };

    // Machine code is read for the static cudart version, unless reading lean (libcudart itself
    // is always read: its version may be nowhere else).
    let name = path.rsplit(['/', ':']).next().unwrap_or(path);
    let code = !opts.lean || name.starts_with("libcudart.so");

    // Which bytes to scan: on a seekable file with a section table, the sections that may hold
    // device code (nothing else can be handed to the driver); otherwise everything.
    let ranges = match &sections {
        _ if seekable && !wanted(&info, &sections) => Vec::new(),
        Some(secs) if !secs.is_empty() => scan_ranges(secs, code),
        _ => vec![(0, len)],
    };
    let mut scanner = opts.scanner(true);
    if opts.lean && !opts.every_cubin {
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
    scanner.scan(w, &ranges, &mut out)?;

    if let (Some(l), false) = (&layout, seekable) {
        w.consume_to(len)?;
        let caps = std::mem::take(&mut w.captures);
        sections = sections_from_captures(l, &caps, &mut report);
        if let Some((o, n)) = l.dynamic_range() {
            dyn_bytes = captured(&caps, o, n).map(<[u8]>::to_vec);
        }
        info = Some(elf_info(l, &mut report, &sections, dyn_bytes.as_deref(), |off, n| {
            captured(&caps, off, n).map(<[u8]>::to_vec)
        }));
        // A stream is read whole anyway; what it found is kept on the same terms as a seek.
        if !wanted(&info, &sections) {
            out = ScanResult::default();
        }
    }
    report.elf = info;
    place(&mut report, out, sections.as_deref(), layout.as_ref(), code);
    if opts.lean && !opts.every_cubin {
        // A stream read hidden containers' payloads as they went by; report them as a seekable
        // read would, so both give the same inventory.
        for c in &mut report.hidden_containers {
            forget_probes(c);
        }
    }
    Ok(report)
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
    if strtab.is_none() {
        report.problem(None, "section names unreadable: fatbin sections cannot be told apart");
    }
    Some(hostelf::name_sections(&headers, strtab.as_deref().unwrap_or(&[])))
}

fn plan_captures(w: &mut Window, l: &Layout) {
    let len = w.total_len();
    if let Some((o, n)) = l.shdr_range()
        && n <= hostelf::MAX_HEADERS
        && o.saturating_add(n) <= len
    {
        let from = o.saturating_sub(STREAM_SHSTRTAB_WINDOW);
        w.capture(from, (o + n - from) as usize);
    }
    if let Some((o, n)) = l.dynamic_range()
        && n <= MAX_DYNAMIC
        && o.saturating_add(n) <= len
    {
        w.capture(o, n as usize);
        // Linkers put .dynstr in the first loaded segment (read-only when code is separate).
        let first = l.first_load_end().unwrap_or(len);
        w.capture(0, STREAM_DYNSTR_WINDOW.min(first).min(len) as usize);
    }
}

fn captured(caps: &[Capture], off: u64, len: u64) -> Option<&[u8]> {
    caps.iter().filter(|c| c.complete()).find_map(|c| {
        let s = off.checked_sub(c.off)?;
        let e = s.checked_add(len)?;
        c.data.get(usize::try_from(s).ok()?..usize::try_from(e).ok()?)
    })
}

fn sections_from_captures(l: &Layout, caps: &[Capture], report: &mut FileReport) -> Option<Vec<Section>> {
    let (o, n) = l.shdr_range()?;
    let Some(table) = captured(caps, o, n) else {
        report.problem(Some(o), "section table lies past the end of the file (truncated?)");
        return None;
    };
    name_sections(l, table, report, |off, len| captured(caps, off, len).map(<[u8]>::to_vec))
}

/// Sections that may hold device code, merged into ascending ranges.
fn scan_ranges(secs: &[Section], code: bool) -> Vec<(u64, u64)> {
    let mut r: Vec<(u64, u64)> = secs
        .iter()
        .filter(|s| s.may_hold_device_code() && (code || !s.exec()))
        .filter_map(Section::file_range)
        .collect();
    r.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(r.len());
    for (a, b) in r {
        match merged.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => merged.push((a, b)),
        }
    }
    merged
}

/// SONAME, DT_NEEDED and the ELF summary.
fn elf_info(
    l: &Layout,
    report: &mut FileReport,
    sections: &Option<Vec<Section>>,
    dynamic: Option<&[u8]>,
    mut get: impl FnMut(u64, u64) -> Option<Vec<u8>>,
) -> ElfInfo {
    let mut info = ElfInfo {
        elf_type: hostelf::elf_type_name(l.header.e_type).to_string(),
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
            let b = get(at, 256).or_else(|| get(at, 1))?;
            let n = memchr::memchr(0, &b).unwrap_or(b.len());
            Some(String::from_utf8_lossy(&b[..n]).into_owned())
        };
        if d.strtab_vaddr.is_some() {
            info.soname = d.soname_off.and_then(&mut string);
            let mut needed: Vec<String> = d.needed_offs.iter().filter_map(|&o| string(o)).collect();
            if needed.len() < d.needed_offs.len() || (d.soname_off.is_some() && info.soname.is_none()) {
                report.problem(None, "dynamic string table not readable: SONAME/DT_NEEDED incomplete");
            }
            needed.retain(|n| is_cuda_library(n));
            needed.sort();
            info.cuda_needed = needed;
        }
    }
    info
}

/// Puts scan results where they belong, using the section table when there is one.
fn place(report: &mut FileReport, out: ScanResult, sections: Option<&[Section]>, layout: Option<&Layout>, code: bool) {
    let section_of = |off: u64| sections.and_then(|s| s.iter().find(|s| s.contains(off)));
    let fatbin_section =
        |s: Option<&Section>| s.is_some_and(|s| s.name == FATBIN_SECTION || s.name == RELFATBIN_SECTION);

    // Wrappers: only those inside .nvFatBinSegment when the section table says where it is.
    let wrappers: Vec<Wrapper> = out
        .wrappers
        .iter()
        .filter(|w| match sections {
            Some(_) => section_of(w.offset).is_some_and(|s| s.name == SEGMENT_SECTION),
            None => w.offset % 8 == 0,
        })
        .map(|w| Wrapper { offset: w.offset, version: w.version, data: w.data })
        .collect();

    // What a seekable read never looks at (sections not loaded at run time) is dropped from a
    // streamed read too, so both report the same.
    let loaded = |off: u64| {
        sections.is_none() || section_of(off).is_some_and(|s| s.may_hold_device_code() && (code || !s.exec()))
    };
    let by_data: std::collections::HashMap<u64, u32> =
        wrappers.iter().rev().filter(|w| w.data != 0).map(|w| (w.data, w.version)).collect();
    for mut c in out.containers.into_iter().filter(|c| loaded(c.offset)) {
        let sec = section_of(c.offset);
        c.section = sec.map(|s| s.name.clone());
        c.relocatable = sec.is_some_and(|s| s.name == RELFATBIN_SECTION);
        if let Some(s) = sec {
            let vaddr = s.addr + (c.offset - s.offset);
            c.wrapper_version = by_data.get(&vaddr).copied();
        }
        // Without a section table nothing can be called hidden: list it with the rest.
        if sections.is_none() || fatbin_section(sec) {
            report.containers.push(c);
        } else {
            report.hidden_containers.push(c);
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
            Err(e) => report.problem(Some(off), format!("embedded cubin: {e}")),
        }
    }
    if let Some(info) = report.elf.as_mut() {
        info.fatbin_wrappers = wrappers;
    }

    // Statically linked (or this very) cudart: the CUDART_VERSION immediate in machine code.
    let exec = |off: u64| match sections {
        Some(s) => s.iter().any(|s| s.exec() && s.contains(off)),
        None => layout.is_some_and(|l| l.exec_segments().iter().any(|&(a, b)| off >= a && off < b)),
    };
    let mut counts: BTreeMap<u32, usize> = BTreeMap::new();
    for &(off, v) in &out.cudart_hits {
        if exec(off) {
            *counts.entry(v).or_default() += 1;
        }
    }
    let best = counts.iter().filter(|&(_, &n)| n >= 2).max_by_key(|&(&v, &n)| (n, v)).map(|(&v, _)| v);
    let soname = report.elf.as_ref().and_then(|e| e.soname.clone());
    let is_cudart = soname.as_deref().is_some_and(|s| s.starts_with("libcudart.so"));
    let by_name = if is_cudart { cudart_from_name(&report.path) } else { None };
    // The real file name is exact (12.9.79); the machine code gives major.minor; a SONAME-style
    // name alone gives the major.
    report.cudart = match (by_name, best) {
        (Some(v), _) if v.source == "file-name" => Some(v),
        (_, Some(v)) => Some(CudartVersion {
            version: format!("{}.{}", v / 1000, (v % 1000) / 10),
            linkage: if is_cudart { "shared" } else { "static" }.to_string(),
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
