//! Host ELF layout (goblin headers): program headers, section table with names, and the
//! dynamic section (SONAME, DT_NEEDED). Works from byte ranges, never from a whole-file buffer.

use goblin::container::Ctx;
use goblin::elf::dynamic::{DT_NEEDED, DT_NULL, DT_RELA, DT_RELASZ, DT_SONAME, DT_STRSZ, DT_STRTAB};
use goblin::elf::header::{EM_AARCH64, EM_PPC64, EM_X86_64};
use goblin::elf::program_header::{PT_DYNAMIC, PT_LOAD, ProgramHeader};
use goblin::elf::section_header::{SHF_ALLOC, SHF_EXECINSTR, SHT_NOBITS, SectionHeader};
use goblin::elf::{Elf, Header, reloc};

use super::cubin::cstr_at;

pub const MAX_HEADERS: u64 = 16 << 20;

#[derive(Debug, Clone)]
pub struct Section {
    pub name: String,
    pub sh_type: u32,
    pub flags: u64,
    pub addr: u64,
    pub offset: u64,
    pub size: u64,
}

impl Section {
    pub fn file_range(&self) -> Option<(u64, u64)> {
        (self.sh_type != SHT_NOBITS && self.size > 0).then_some((self.offset, self.offset.saturating_add(self.size)))
    }
    pub fn contains(&self, off: u64) -> bool {
        self.file_range().is_some_and(|(a, b)| off >= a && off < b)
    }
    pub fn alloc(&self) -> bool {
        self.flags & u64::from(SHF_ALLOC) != 0
    }
    /// Could hold device code loaded at run time: a loaded section with file bytes that is not
    /// one of the tables the linker writes for itself.
    pub fn may_hold_device_code(&self) -> bool {
        const LINKER_TABLES: &[&str] = &[
            ".interp",
            ".gnu.hash",
            ".hash",
            ".dynsym",
            ".dynstr",
            ".gnu.version",
            ".gnu.version_r",
            ".gnu.version_d",
            ".rela.dyn",
            ".rela.plt",
            ".rel.dyn",
            ".rel.plt",
            ".relr.dyn",
            ".init",
            ".fini",
            ".plt",
            ".plt.got",
            ".plt.sec",
            ".eh_frame",
            ".eh_frame_hdr",
            ".gcc_except_table",
            ".init_array",
            ".fini_array",
            ".dynamic",
            ".got",
            ".got.plt",
            ".tdata",
        ];
        self.alloc() && !self.name.starts_with(".note") && !LINKER_TABLES.contains(&self.name.as_str())
    }

    pub fn exec(&self) -> bool {
        self.flags & u64::from(SHF_EXECINSTR) != 0
    }
}

pub struct Layout {
    pub header: Header,
    pub ctx: Ctx,
    pub phdrs: Vec<ProgramHeader>,
}

impl Layout {
    /// Parses the ELF header and, when they lie in `prefix`, the program headers.
    pub fn from_prefix(prefix: &[u8]) -> Result<Layout, String> {
        let header = Elf::parse_header(prefix).map_err(|e| format!("bad ELF header: {e}"))?;
        let ctx =
            Ctx::new(header.container().map_err(|e| e.to_string())?, header.endianness().map_err(|e| e.to_string())?);
        let mut layout = Layout { header, ctx, phdrs: Vec::new() };
        let (off, len) = layout.phdr_range();
        // A hostile e_phoff may sit near u64::MAX: never let the range wrap.
        let range = usize::try_from(off).ok().and_then(|o| Some(o..o.checked_add(usize::try_from(len).ok()?)?));
        if let Some(b) = range.and_then(|r| prefix.get(r)) {
            layout.phdrs = parse_phdrs(b, layout.header.e_phnum, ctx)?;
        }
        Ok(layout)
    }

    pub fn phdr_range(&self) -> (u64, u64) {
        (self.header.e_phoff, u64::from(self.header.e_phnum) * u64::from(self.header.e_phentsize))
    }

    pub fn shdr_range(&self) -> Option<(u64, u64)> {
        let h = &self.header;
        (h.e_shoff != 0 && h.e_shnum != 0).then(|| (h.e_shoff, u64::from(h.e_shnum) * u64::from(h.e_shentsize)))
    }

    pub fn parse_sections(&self, table: &[u8]) -> Result<Vec<SectionHeader>, String> {
        let count = usize::from(self.header.e_shnum);
        let want = if self.ctx.is_big() { 64 } else { 40 };
        if usize::from(self.header.e_shentsize) != want {
            return Err(format!("section header size {} (expected {want})", self.header.e_shentsize));
        }
        SectionHeader::parse_from(table, 0, count, self.ctx).map_err(|e| format!("section table: {e}"))
    }

    /// File offset of a virtual address, through the PT_LOAD segments.
    pub fn vaddr_to_offset(&self, vaddr: u64) -> Option<u64> {
        self.phdrs.iter().filter(|p| p.p_type == PT_LOAD).find_map(|p| {
            (vaddr >= p.p_vaddr && vaddr < p.p_vaddr.saturating_add(p.p_filesz))
                .then(|| p.p_offset + (vaddr - p.p_vaddr))
        })
    }

    /// Virtual address of a file offset, through the PT_LOAD segments.
    pub fn offset_to_vaddr(&self, off: u64) -> Option<u64> {
        self.phdrs.iter().filter(|p| p.p_type == PT_LOAD).find_map(|p| {
            (off >= p.p_offset && off < p.p_offset.saturating_add(p.p_filesz)).then(|| p.p_vaddr + (off - p.p_offset))
        })
    }

    /// File ranges of the PT_LOAD segments (what the loader maps), sorted and merged.
    pub fn load_ranges(&self) -> Vec<(u64, u64)> {
        merge_ranges(
            self.phdrs
                .iter()
                .filter(|p| p.p_type == PT_LOAD && p.p_filesz > 0)
                .map(|p| (p.p_offset, p.p_offset.saturating_add(p.p_filesz)))
                .collect(),
        )
    }

    pub fn dynamic_range(&self) -> Option<(u64, u64)> {
        self.phdrs.iter().find(|p| p.p_type == PT_DYNAMIC).map(|p| (p.p_offset, p.p_filesz))
    }

    /// The PT_LOAD segment first in the file (where linkers put their tables).
    pub fn first_load(&self) -> Option<&ProgramHeader> {
        self.phdrs.iter().filter(|p| p.p_type == PT_LOAD).min_by_key(|p| p.p_offset)
    }

    /// The PT_LOAD segment whose file bytes hold `off`.
    pub fn load_holding(&self, off: u64) -> Option<&ProgramHeader> {
        self.phdrs
            .iter()
            .filter(|p| p.p_type == PT_LOAD)
            .find(|p| off >= p.p_offset && off < p.p_offset.saturating_add(p.p_filesz))
    }

    /// File ranges of executable PT_LOAD segments (where machine code lives).
    pub fn exec_segments(&self) -> Vec<(u64, u64)> {
        self.phdrs
            .iter()
            .filter(|p| p.p_type == PT_LOAD && p.is_executable())
            .map(|p| (p.p_offset, p.p_offset.saturating_add(p.p_filesz)))
            .collect()
    }
}

fn parse_phdrs(b: &[u8], count: u16, ctx: Ctx) -> Result<Vec<ProgramHeader>, String> {
    ProgramHeader::parse(b, 0, usize::from(count), ctx).map_err(|e| format!("program headers: {e}"))
}

impl Layout {
    pub fn set_phdrs(&mut self, b: &[u8]) -> Result<(), String> {
        self.phdrs = parse_phdrs(b, self.header.e_phnum, self.ctx)?;
        Ok(())
    }
}

pub fn name_sections(headers: &[SectionHeader], shstrtab: &[u8]) -> Vec<Section> {
    headers
        .iter()
        .map(|s| Section {
            name: cstr_at(shstrtab, s.sh_name).to_string(),
            sh_type: s.sh_type,
            flags: s.sh_flags,
            addr: s.sh_addr,
            offset: s.sh_offset,
            size: s.sh_size,
        })
        .collect()
}

#[derive(Debug, Default)]
pub struct Dynamic {
    pub soname_off: Option<u64>,
    pub needed_offs: Vec<u64>,
    pub strtab_vaddr: Option<u64>,
    pub strsz: Option<u64>,
    /// DT_RELA, DT_RELASZ: the relocations with addends (where a PIC library's pointers,
    /// `.nvFatBinSegment` wrappers' included, get their values).
    pub rela_vaddr: Option<u64>,
    pub relasz: Option<u64>,
}

pub fn parse_dynamic(b: &[u8], ctx: Ctx) -> Dynamic {
    let word = if ctx.is_big() { 8 } else { 4 };
    let rd = |s: &[u8]| -> u64 {
        let le = ctx.is_little_endian();
        match (word, le) {
            (8, true) => u64::from_le_bytes(s.try_into().unwrap()),
            (8, false) => u64::from_be_bytes(s.try_into().unwrap()),
            (_, true) => u64::from(u32::from_le_bytes(s.try_into().unwrap())),
            (_, false) => u64::from(u32::from_be_bytes(s.try_into().unwrap())),
        }
    };
    let mut d = Dynamic::default();
    for e in b.chunks_exact(2 * word) {
        let (tag, val) = (rd(&e[..word]), rd(&e[word..]));
        match tag {
            DT_NULL => break,
            DT_NEEDED => d.needed_offs.push(val),
            DT_SONAME => d.soname_off = Some(val),
            DT_STRTAB => d.strtab_vaddr = Some(val),
            DT_STRSZ => d.strsz = Some(val),
            DT_RELA => d.rela_vaddr = Some(val),
            DT_RELASZ => d.relasz = Some(val),
            _ => {}
        }
    }
    d
}

pub fn machine_name(m: u16) -> String {
    match m {
        goblin::elf::header::EM_X86_64 => "x86-64".into(),
        goblin::elf::header::EM_AARCH64 => "aarch64".into(),
        goblin::elf::header::EM_PPC64 => "ppc64".into(),
        goblin::elf::header::EM_386 => "x86".into(),
        goblin::elf::header::EM_ARM => "arm".into(),
        other => format!("machine-{other}"),
    }
}

/// Per machine, its relative relocation: the value is load base + addend.
const RELATIVE: &[(u16, u32)] = &[
    (EM_X86_64, reloc::R_X86_64_RELATIVE),
    (EM_AARCH64, reloc::R_AARCH64_RELATIVE),
    (EM_PPC64, reloc::R_PPC64_RELATIVE),
];

/// Relative relocations with addends (ELF64 RELA): where each writes (a virtual address) and
/// the address it writes there.
/// Only those writing where `wanted` says are kept.
pub fn relative_relocations(
    b: &[u8],
    ctx: Ctx,
    machine: u16,
    wanted: impl Fn(u64) -> bool,
) -> std::collections::HashMap<u64, u64> {
    let mut out = std::collections::HashMap::new();
    if !ctx.is_big() {
        return out;
    }
    let rd = |s: &[u8]| {
        let a: [u8; 8] = s.try_into().unwrap();
        if ctx.is_little_endian() { u64::from_le_bytes(a) } else { u64::from_be_bytes(a) }
    };
    let Some(&(_, relative)) = RELATIVE.iter().find(|(m, _)| *m == machine) else { return out };
    for e in b.chunks_exact(24) {
        if rd(&e[8..16]) & 0xffff_ffff == u64::from(relative) && wanted(rd(&e[..8])) {
            out.insert(rd(&e[..8]), rd(&e[16..24]));
        }
    }
    out
}

/// Byte ranges sorted and merged where they overlap or touch.
pub(crate) fn merge_ranges(mut r: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
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
