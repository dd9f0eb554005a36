//! `cudalint inspect` output: a listing for people, and JSON for programs.

use std::fmt::Write;

use serde::Serialize;

use super::human_bytes;
use crate::escape::text as esc;
use crate::inspect::fatbin::{Compression, EntryKind};
use crate::inspect::model::{CubinInfo, CubinType};
use crate::inspect::{Container, Entry, FileFormat, FileReport};
use crate::schema::{self, Tool};

#[derive(Serialize)]
pub struct InspectDocument<'a> {
    pub schema: &'static str,
    pub tool: Tool,
    pub files: &'a [FileReport],
    pub errors: &'a [FileError],
}

/// A file that could not be read at all.
#[derive(Debug, Serialize)]
pub struct FileError {
    pub path: String,
    pub message: String,
}

pub fn json(files: &[FileReport], errors: &[FileError]) -> String {
    let doc = InspectDocument { schema: schema::INSPECT, tool: Tool::current(), files, errors };
    let mut s = serde_json::to_string_pretty(&doc).expect("report serializes");
    s.push('\n');
    s
}

pub fn text(files: &[FileReport], errors: &[FileError]) -> String {
    let mut out = String::new();
    for f in files {
        file_text(&mut out, f, 0);
    }
    for e in errors {
        let _ = writeln!(out, "{}: error: {}", esc(&e.path), esc(&e.message));
    }
    out
}

pub fn file_text(out: &mut String, f: &FileReport, depth: usize) {
    let pad = "  ".repeat(depth);
    let what = match (&f.format, &f.elf) {
        (FileFormat::Elf, Some(e)) => format!("ELF {} {}", e.elf_type, e.machine),
        (FileFormat::Elf, None) => "ELF (unreadable header)".to_string(),
        (FileFormat::Cubin, _) => "cubin".to_string(),
        (FileFormat::Fatbin, _) => "fatbin".to_string(),
        (FileFormat::Ptx, _) => "PTX".to_string(),
        (FileFormat::Archive, _) => "ar archive".to_string(),
        (FileFormat::Other, _) => "no device code".to_string(),
    };
    let _ = writeln!(out, "{pad}{}: {what}, {}", esc(&f.path), human_bytes(f.size));
    let pad = "  ".repeat(depth + 1);
    if let Some(e) = &f.elf {
        if let Some(s) = &e.soname {
            let _ = writeln!(out, "{pad}soname {}", esc(s));
        }
        if !e.cuda_needed.is_empty() {
            let _ = writeln!(out, "{pad}needs {}", esc(&e.cuda_needed.join(", ")));
        }
    }
    if let Some(c) = &f.cudart {
        let _ = writeln!(
            out,
            "{pad}cudart {} ({}, from {})",
            esc(&c.version.to_string()),
            c.linkage,
            esc(&c.source.to_string())
        );
    }
    if let Some(c) = &f.cubin {
        let _ = writeln!(
            out,
            "{pad}{} {} ABI {} e_flags {}{}, {}{}",
            c.arch(),
            c.elf_type,
            c.abi_version,
            c.e_flags,
            c.virtual_sm.map(|v| format!(" from compute_{v}")).unwrap_or_default(),
            kernels(c.kernel_count),
            c.toolkit.as_ref().map(|t| format!(", CUDA {t}")).unwrap_or_default()
        );
        cubin_problems(out, &pad, c);
    }
    if let Some(p) = &f.ptx {
        let _ = writeln!(
            out,
            "{pad}PTX ISA {}.{} .target {}{}, {} entr{}",
            p.version[0],
            p.version[1],
            esc(&p.target),
            if p.debug { ", debug" } else { "" },
            p.entry_count,
            if p.entry_count == 1 { "y" } else { "ies" }
        );
    }
    for c in &f.containers {
        container_text(out, c, &pad, "container");
    }
    for c in &f.hidden_containers {
        container_text(out, c, &pad, "hidden container");
    }
    for h in &f.hidden_cubins {
        let _ = writeln!(
            out,
            "{pad}hidden cubin @{:#x}{}: {} {}, {}",
            h.offset,
            h.section.as_ref().map(|s| format!(" in {}", esc(s))).unwrap_or_default(),
            h.cubin.arch(),
            h.cubin.elf_type,
            kernels(h.cubin.kernel_count)
        );
        cubin_problems(out, &format!("{pad}  "), &h.cubin);
    }
    for p in &f.problems {
        problem_text(out, &pad, p.offset, &p.message);
    }
    for m in f.members.iter().filter(|m| m.has_device_code() || m.problem_count() > 0) {
        file_text(out, m, depth + 1);
    }
}

fn plural(n: u32) -> &'static str {
    if n == 1 { "" } else { "s" }
}

fn kernels(n: Option<u32>) -> String {
    match n {
        Some(n) => format!("{n} kernel{}", plural(n)),
        None => "kernels unknown".to_string(),
    }
}

fn cubin_problems(out: &mut String, pad: &str, c: &CubinInfo) {
    for p in &c.problems {
        problem_text(out, pad, None, &format!("cubin: {p}"));
    }
}

fn problem_text(out: &mut String, pad: &str, offset: Option<u64>, msg: &str) {
    let msg = esc(msg);
    match offset {
        Some(o) => {
            let _ = writeln!(out, "{pad}problem @{o:#x}: {msg}");
        }
        None => {
            let _ = writeln!(out, "{pad}problem: {msg}");
        }
    }
}

fn container_text(out: &mut String, c: &Container, pad: &str, label: &str) {
    let mut notes = Vec::new();
    if let Some(s) = &c.section {
        notes.push(format!("in {}", esc(s)));
    }
    if let Some(v) = c.wrapper_version {
        notes.push(format!("wrapper v{v}{}", if v == 2 { " (device-linked)" } else { "" }));
    }
    if c.relocatable {
        notes.push("relocatable".to_string());
    }
    if c.kernel_less() {
        notes.push("kernel-less device-link stub".to_string());
    }
    let _ = writeln!(
        out,
        "{pad}{label} @{:#x}, {}{}{}",
        c.offset,
        human_bytes(c.size),
        if notes.is_empty() { "" } else { ": " },
        notes.join(", ")
    );
    let inner = format!("{pad}  ");
    for e in &c.entries {
        entry_text(out, e, &inner);
        for i in &e.images {
            entry_text(out, i, &format!("{inner}  "));
        }
    }
    for p in &c.problems {
        problem_text(out, &inner, p.offset, &p.message);
    }
}

fn entry_text(out: &mut String, e: &Entry, pad: &str) {
    let kind = match e.kind {
        EntryKind::Concatenated => format!("concatenated ({} images)", e.images.len()),
        k => k.label().to_string(),
    };
    let mut cols =
        vec![format!("{kind:<5}"), format!("{:<12}", e.arch), format!("[{},{}]", e.code_version[0], e.code_version[1])];
    let size = match e.compression {
        Compression::None => human_bytes(e.payload_size),
        c => {
            format!("{} {}->{}", human_bytes(e.compressed_size), compression_name(c), human_bytes(e.uncompressed_size))
        }
    };
    cols.push(size);
    if e.debug {
        cols.push("debug".to_string());
    }
    if !e.bits64 {
        cols.push("32-bit".to_string());
    }
    if let Some(c) = &e.cubin {
        cols.push(kernels(c.kernel_count));
        if c.elf_type != CubinType::Exec {
            cols.push(c.elf_type.to_string());
        }
    }
    if let Some(o) = e.options.as_deref().map(str::trim).filter(|o| !o.is_empty()) {
        cols.push(format!("options `{}`", esc(o)));
    }
    if let Some(i) = &e.identifier {
        cols.push(format!("ident `{}`", esc(i.trim())));
    }
    let _ = writeln!(out, "{pad}{}", cols.join("  "));
    for p in &e.problems {
        problem_text(out, &format!("{pad}  "), p.offset, &p.message);
    }
    if let Some(c) = &e.cubin {
        cubin_problems(out, &format!("{pad}  "), c);
    }
}

fn compression_name(c: Compression) -> &'static str {
    match c {
        Compression::None => "none",
        Compression::Lz4 => "lz4",
        Compression::Zstd => "zstd",
        Compression::Other => "other",
    }
}
