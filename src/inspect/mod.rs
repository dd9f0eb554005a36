//! The file inspector: finds and decodes every piece of CUDA device code in one file (host ELF,
//! cubin, fatbin, PTX, `ar` archive), reading only what it needs on seekable inputs and in one
//! forward pass on streams.

pub mod cubin;
pub mod decompress;
pub mod fatbin;
pub mod hostelf;
pub mod libraries;
pub mod model;
pub mod ptx;
pub mod scanner;
pub mod window;

mod ar;
pub mod elf;
pub mod sweep;
pub mod toolchain;

use std::io;

pub use model::*;

use crate::input::{Input, Prefixed, read_full};
use window::Window;

#[derive(Debug, Clone, Default)]
pub struct InspectOptions {
    /// Decode every cubin and PTX image. Without it, a container's images are read only until
    /// one proves the module carries kernels (enough for every verdict, and far faster).
    pub every_cubin: bool,
    /// List kernel names (implies `every_cubin`; large for big libraries).
    pub kernel_names: bool,
    /// Image scans read lean: a host ELF is looked inside only when its headers show CUDA
    /// (fatbin sections, DT_NEEDED or SONAME naming a CUDA library, or a CUDA library's file
    /// name), and then not in its machine code (no device code lives there; the static cudart
    /// version it would give is left out, except for libcudart itself). `scan --deep` turns
    /// this off.
    pub lean: bool,
    /// Keep the bytes of every module (container, bare cubin, PTX file) for loading on a GPU.
    pub keep_modules: bool,
}

impl InspectOptions {
    pub fn scanner(&self, host_patterns: bool) -> scanner::Scanner {
        scanner::Scanner {
            every_cubin: self.every_cubin || self.kernel_names,
            kernel_names: self.kernel_names,
            host_patterns,
            exec_ranges: Vec::new(),
            probe_ranges: None,
            keep_modules: self.keep_modules,
        }
    }
}

/// Nesting bound for archives inside archives.
const MAX_DEPTH: u32 = 4;

/// What the first bytes (and the name) say a file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sniffed {
    HostElf,
    Cubin,
    Fatbin,
    Archive,
    Ptx,
    Other,
}

pub fn sniff(head: &[u8], name: &str) -> Sniffed {
    if head.starts_with(b"\x7fELF") {
        if cubin::looks_like_cubin(head) { Sniffed::Cubin } else { Sniffed::HostElf }
    } else if head.starts_with(&fatbin::CONTAINER_PREFIX) {
        Sniffed::Fatbin
    } else if head.starts_with(b"!<arch>\n") || head.starts_with(b"!<thin>\n") {
        Sniffed::Archive
    } else if ptx::looks_like_ptx(head, name) {
        Sniffed::Ptx
    } else {
        Sniffed::Other
    }
}

/// Inspects one file given as an [`Input`] positioned at its start. `Err` only when the input
/// itself fails (I/O error, a stream that ends early); damage inside the file is reported in
/// [`FileReport::problems`].
pub fn inspect_input(input: &mut dyn Input, path: &str, opts: &InspectOptions) -> io::Result<FileReport> {
    inspect_nested(input, path, opts, 0)
}

fn inspect_nested(input: &mut dyn Input, path: &str, opts: &InspectOptions, depth: u32) -> io::Result<FileReport> {
    let mut head = [0u8; HEAD];
    let n = read_full(input, &mut head)?;
    inspect_sniffed(&head[..n], input, path, opts, depth)
}

/// Bytes read to tell what a file is.
pub const HEAD: usize = 64;

/// Inspects a file whose first bytes (`head`, up to [`HEAD`]) were already read from `input`.
pub fn inspect_sniffed(
    head: &[u8],
    input: &mut dyn Input,
    path: &str,
    opts: &InspectOptions,
    depth: u32,
) -> io::Result<FileReport> {
    let kind = sniff(head, path);
    let name = path.rsplit('/').next().unwrap_or(path);
    // A run-time compiler (ptxas, NVRTC, ...): its release banner is looked for in every byte.
    if let Some(tool) = toolchain::kind_of(name).filter(|_| matches!(kind, Sniffed::HostElf | Sniffed::Archive)) {
        // Seekable: inspect as usual, then read the file once in chunks. A stream: every byte the
        // inspector reads or skips passes the finder, then the rest of the file does.
        let (mut report, version) = if input.seekable() {
            let report = inspect_kind(kind, head, input, path, opts, depth)?;
            (report, toolchain::banner_at(input)?)
        } else {
            let mut tap = toolchain::Tap::<toolchain::BannerFinder>::new(input);
            let report = inspect_kind(kind, head, &mut tap, path, opts, depth)?;
            let len = tap.len();
            tap.skip_to(len)?;
            tap.finder.finish();
            (report, tap.finder.found().map(str::to_string))
        };
        let (version, source) = match version {
            Some(v) => (v, "banner"),
            None => match toolchain::version_from_name(name) {
                Some(v) => (v, "file-name"),
                None => (String::new(), ""),
            },
        };
        report.toolchain = Some(toolchain::Toolchain { kind: tool, version, source: source.into(), linked: false });
        return Ok(report);
    }
    if kind == Sniffed::HostElf && depth == 0 {
        return inspect_swept(head, input, path, opts);
    }
    inspect_kind(kind, head, input, path, opts, depth)
}

/// A host ELF no name marks as a compiler: its `.rodata` is swept for compilers' own strings
/// (`sweep`). A stream shows every byte to the sweep as it passes (and keeps the hits inside
/// `.rodata` once the section table, which comes last, is known); a seekable input is inspected
/// as usual, then its `.rodata` is read.
fn inspect_swept(head: &[u8], input: &mut dyn Input, path: &str, opts: &InspectOptions) -> io::Result<FileReport> {
    let (mut report, sweep) = if input.seekable() {
        let report = inspect_kind(Sniffed::HostElf, head, input, path, opts, 0)?;
        let mut sweep = sweep::Sweep::default();
        sweep.read_at(input, &report.rodata)?;
        (report, sweep)
    } else {
        let mut tap = toolchain::Tap::<sweep::Sweep>::new(input);
        // The head went by before the tap: no `.rodata` starts within it.
        let report = inspect_kind(Sniffed::HostElf, head, &mut tap, path, opts, 0)?;
        let len = tap.len();
        tap.skip_to(len)?;
        tap.finder.finish();
        (report, tap.finder)
    };
    let name = path.rsplit('/').next().unwrap_or(path);
    let soname = report.elf.as_ref().and_then(|e| e.soname.clone());
    let names: Vec<&str> = std::iter::once(name).chain(soname.as_deref()).collect();
    let found = sweep.verdict(&report.rodata, report.program && soname.is_none(), &names);
    report.toolchain = found.toolchain;
    report.loads_compilers = found.loads;
    Ok(report)
}

fn inspect_kind(
    kind: Sniffed,
    head: &[u8],
    input: &mut dyn Input,
    path: &str,
    opts: &InspectOptions,
    depth: u32,
) -> io::Result<FileReport> {
    let size = input.len();
    let mut p = Prefixed::new(head, input);
    let mut report = match kind {
        Sniffed::HostElf => elf::inspect(&mut Window::new(&mut p), path, opts)?,
        Sniffed::Cubin => keeping_whole(&mut p, opts, |w| inspect_cubin(w, path, opts))?,
        Sniffed::Fatbin => inspect_fatbin(&mut Window::new(&mut p), path, opts)?,
        Sniffed::Ptx => keeping_whole(&mut p, opts, |w| ptx::inspect(w, path))?,
        Sniffed::Archive if depth < MAX_DEPTH => ar::inspect(&mut p, path, opts, depth)?,
        Sniffed::Archive => {
            let mut r = FileReport::new(path.to_string(), size, FileFormat::Archive);
            r.problem(None, "archive nested too deeply; not read");
            r
        }
        Sniffed::Other => FileReport::new(path.to_string(), size, FileFormat::Other),
    };
    report.size = size;
    // Device code of any kind, or the format itself (a damaged fatbin is still CUDA).
    report.cuda_sign |= matches!(kind, Sniffed::Cubin | Sniffed::Fatbin | Sniffed::Ptx)
        || report.has_device_code()
        || report.members.iter().any(|m| m.cuda_sign);
    Ok(report)
}

/// Nested archive members go through the same dispatch.
pub(crate) fn inspect_member(
    input: &mut dyn Input,
    path: &str,
    opts: &InspectOptions,
    depth: u32,
) -> io::Result<FileReport> {
    inspect_nested(input, path, opts, depth + 1)
}

/// Runs a whole-file inspector, keeping the file's bytes when modules are kept (a bare cubin or
/// a PTX file is a module of its own).
fn keeping_whole(
    input: &mut dyn Input,
    opts: &InspectOptions,
    f: impl FnOnce(&mut Window) -> io::Result<FileReport>,
) -> io::Result<FileReport> {
    let size = input.len();
    let keep = opts.keep_modules && size <= scanner::MAX_MODULE;
    let mut w = Window::new(input);
    if keep && !w.seekable() {
        w.capture(0, size as usize);
    }
    let mut report = f(&mut w)?;
    if keep {
        report.bytes = if w.seekable() {
            let mut v = vec![0; size as usize];
            matches!(w.read_at(0, &mut v), Some(Ok(()))).then(|| std::sync::Arc::new(v))
        } else {
            w.consume_to(size)?;
            w.captures.pop().filter(|c| c.complete()).map(|c| std::sync::Arc::new(c.data))
        };
    }
    Ok(report)
}

fn inspect_cubin(w: &mut Window, path: &str, opts: &InspectOptions) -> io::Result<FileReport> {
    let mut report = FileReport::new(path.to_string(), w.total_len(), FileFormat::Cubin);
    let scanner = opts.scanner(false);
    let len = w.total_len();
    match scanner.read_cubin(w, 0, len)? {
        Ok(c) => report.cubin = Some(c),
        Err(e) => report.problem(Some(0), format!("cubin: {e}")),
    }
    Ok(report)
}

fn inspect_fatbin(w: &mut Window, path: &str, opts: &InspectOptions) -> io::Result<FileReport> {
    let mut report = FileReport::new(path.to_string(), w.total_len(), FileFormat::Fatbin);
    let scanner = opts.scanner(false);
    let mut out = scanner::ScanResult::default();
    let len = w.total_len();
    scanner.scan(w, &[(0, len)], &mut out)?;
    report.containers = out.containers;
    for r in out.rejected {
        report.problem(Some(r), "container header followed by an invalid entry header");
    }
    if report.containers.is_empty() && report.problems.is_empty() {
        report.problem(Some(0), "no readable fatbin container");
    }
    Ok(report)
}

/// CUDA runtime version from a libcudart file name (docs/cuda-binaries.md §5f): the real file behind the SONAME
/// link carries the full version (`libcudart.so.12.9.79`); a SONAME only the major (11.x and
/// later) or major.minor (9.x, 10.x, one SONAME per minor).
pub fn cudart_from_name(path: &str) -> Option<CudartVersion> {
    let name = path.rsplit(['/', ':']).next()?;
    let ver = libraries::cuda_runtime_version(name).filter(|v| !v.is_empty())?;
    let parts: Vec<&str> = ver.split('.').collect();
    if parts.is_empty() || parts.iter().any(|p| p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit())) {
        return None;
    }
    let major: u32 = parts[0].parse().ok()?;
    let (version, source) = match parts.len() {
        1 => (parts[0].to_string(), "soname"),
        2 if major <= 10 => (ver.to_string(), "soname"),
        2 => (parts[0].to_string(), "soname"),
        _ => (ver.to_string(), "file-name"),
    };
    Some(CudartVersion { version, linkage: Linkage::Shared, source: source.to_string() })
}

/// Inspects files and directories (walked recursively, in sorted order). Symbolic links to
/// files inside a walked directory are skipped (the file they point to is inspected under its
/// own name); a link given directly is followed and reported under the real file's path.
pub fn inspect_paths(
    paths: &[std::path::PathBuf],
    opts: &InspectOptions,
) -> Vec<Result<FileReport, (String, io::Error)>> {
    let mut files = Vec::new();
    for p in paths {
        collect(p, true, &mut files);
    }
    files
        .into_iter()
        .map(|f| match f {
            Ok(path) => inspect_file(&path, opts).map_err(|e| (path.display().to_string(), e)),
            Err(e) => Err(e),
        })
        .collect()
}

fn collect(p: &std::path::Path, top: bool, out: &mut Vec<Result<std::path::PathBuf, (String, io::Error)>>) {
    let meta = match if top { std::fs::metadata(p) } else { std::fs::symlink_metadata(p) } {
        Ok(m) => m,
        Err(e) => return out.push(Err((p.display().to_string(), e))),
    };
    if meta.is_dir() {
        let mut entries: Vec<_> = match std::fs::read_dir(p) {
            Ok(rd) => rd.filter_map(Result::ok).map(|e| e.path()).collect(),
            Err(e) => return out.push(Err((p.display().to_string(), e))),
        };
        entries.sort();
        for e in entries {
            collect(&e, false, out);
        }
    } else if meta.is_file() {
        let real = if top { std::fs::canonicalize(p).ok().filter(|r| r.file_name() != p.file_name()) } else { None };
        out.push(Ok(real.unwrap_or_else(|| p.to_path_buf())));
    }
}

pub fn inspect_file(path: &std::path::Path, opts: &InspectOptions) -> io::Result<FileReport> {
    let file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    let mut input = crate::input::FileInput::new(&file, 0, len);
    inspect_input(&mut input, &path.display().to_string(), opts)
}
