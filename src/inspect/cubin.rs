//! Device ELF ("cubin", e_machine = EM_CUDA = 190): architecture from e_flags under both ABI
//! layouts (docs/cuda-binaries.md §1.5), the 'a'/'f' suffix evidence (§1.6), `.nv.compat` (§1.7), the toolkit
//! notes (§1.8), and the kernels (`STT_FUNC` symbols marked `STO_CUDA_ENTRY`), which is what
//! tells a real module from a kernel-less device-link stub.

use goblin::container::{Container as Class, Ctx};
use goblin::elf::Elf;
pub use goblin::elf::header::EM_CUDA;
use goblin::elf::section_header::{SHT_NOTE, SHT_SYMTAB, SectionHeader};
use goblin::elf::sym::STT_FUNC;

use super::fatbin::Suffix;
use super::model::{CubinInfo, CubinType, hex};

// NVIDIA's own ELF values (goblin has the standard ones).
const SHT_CUDA_COMPAT: u32 = 0x7000_0086;
/// `st_other` bit cuobjdump prints as ENTRY (a `__global__` function).
const STO_CUDA_ENTRY: u8 = 0x10;
const EICOMPAT_ATTR_CUDA_ACCELERATOR_TARGET: u8 = 0x09;
/// Bounds on what one cubin may make us read (a real symbol table is far smaller).
const MAX_TABLE: u64 = 64 << 20;
const MAX_NOTE: u64 = 1 << 20;

/// A source of cubin bytes: a slice in memory, or a range of a seekable file read on demand.
pub trait CubinBytes {
    fn size(&self) -> u64;
    fn get(&mut self, off: u64, len: u64) -> Result<Vec<u8>, String>;
}

impl CubinBytes for &[u8] {
    fn size(&self) -> u64 {
        self.len() as u64
    }
    fn get(&mut self, off: u64, len: u64) -> Result<Vec<u8>, String> {
        let r = usize::try_from(off).ok().and_then(|o| Some(o..o.checked_add(usize::try_from(len).ok()?)?));
        r.and_then(|r| <[u8]>::get(self, r))
            .map(<[u8]>::to_vec)
            .ok_or_else(|| format!("range {off:#x}+{len:#x} lies outside the cubin ({:#x} bytes)", self.len()))
    }
}

/// Quick check of the first bytes: an ELF header with e_machine == EM_CUDA.
pub fn looks_like_cubin(b: &[u8]) -> bool {
    b.len() >= 20 && b[..4] == *b"\x7fELF" && {
        let m = [b[18], b[19]];
        let machine = if b[5] == 2 { u16::from_be_bytes(m) } else { u16::from_le_bytes(m) };
        machine == EM_CUDA
    }
}

/// SM and 'a' from e_flags (docs/cuda-binaries.md §1.5, §1.6): the layout is chosen by EI_ABIVERSION.
pub fn decode_e_flags(abi_version: u8, e_flags: u32) -> (u32, Suffix, Option<u32>) {
    if abi_version >= 8 {
        let sm = (e_flags >> 8) & 0xFF;
        let a = if e_flags & 0x8 != 0 { Suffix::A } else { Suffix::None };
        (sm, a, None)
    } else {
        let sm = e_flags & 0xFF;
        let a = if e_flags & 0x800 != 0 { Suffix::A } else { Suffix::None };
        let virt = (e_flags >> 16) & 0xFF;
        (sm, a, (virt != 0).then_some(virt))
    }
}

/// Size of a cubin judged from its header: the end of its section or program header table,
/// whichever is last (cubins put their tables at the end). Used to bound a cubin found as data.
pub fn extent_from_header(b: &[u8]) -> Option<u64> {
    let h = Elf::parse_header(b).ok()?;
    let sh = h.e_shoff.checked_add(u64::from(h.e_shnum) * u64::from(h.e_shentsize))?;
    let ph = h.e_phoff.checked_add(u64::from(h.e_phnum) * u64::from(h.e_phentsize))?;
    Some(sh.max(ph))
}

pub fn parse(src: &mut dyn CubinBytes, want_names: bool) -> Result<CubinInfo, String> {
    let size = src.size();
    if size < 64 {
        return Err(format!("{size} bytes is too short for an ELF header"));
    }
    let head = src.get(0, 64)?;
    let h = Elf::parse_header(&head).map_err(|e| format!("bad ELF header: {e}"))?;
    if h.e_machine != EM_CUDA {
        return Err(format!("e_machine is {}, not EM_CUDA (190)", h.e_machine));
    }
    let class = h.container().map_err(|e| e.to_string())?;
    let le = h.endianness().map_err(|e| e.to_string())?;
    let ctx = Ctx::new(class, le);
    let (osabi, abi_version) = (h.e_ident[7], h.e_ident[8]);
    let (sm, mut suffix, mut virtual_sm) = decode_e_flags(abi_version, h.e_flags);
    let elf_type = match h.e_type {
        goblin::elf::header::ET_EXEC => CubinType::Exec,
        goblin::elf::header::ET_REL => CubinType::Rel,
        _ => CubinType::Other,
    };
    let mut info = CubinInfo {
        elf_type,
        osabi,
        abi_version,
        e_flags: hex(u64::from(h.e_flags)),
        sm,
        suffix,
        virtual_sm,
        kernel_count: None,
        kernels: Vec::new(),
        toolkit: None,
        producer: None,
        ptxas_options: None,
        problems: Vec::new(),
    };

    let sections = match section_table(src, &h, ctx) {
        Ok(s) => {
            // A cubin without a symbol table has no kernels.
            info.kernel_count = Some(0);
            s
        }
        Err(e) => {
            info.problems.push(e);
            return Ok(info);
        }
    };
    let mut read = |sh: &SectionHeader, cap: u64| -> Result<Vec<u8>, String> {
        if sh.sh_size > cap {
            return Err(format!("section of {:#x} bytes exceeds the {cap:#x}-byte limit", sh.sh_size));
        }
        src.get(sh.sh_offset, sh.sh_size)
    };
    let shstr = sections.get(usize::from(h.e_shstrndx)).map(|s| read(s, MAX_TABLE)).transpose();
    let shstr = shstr.unwrap_or_else(|e| {
        info.problems.push(format!("section names: {e}"));
        None
    });
    let name_of = |sh: &SectionHeader| -> &str { shstr.as_deref().map_or("", |t| cstr_at(t, sh.sh_name)) };

    for sh in &sections {
        match sh.sh_type {
            SHT_SYMTAB => {
                let strtab = sections.get(sh.sh_link as usize);
                match (read(sh, MAX_TABLE), strtab.map(|s| read(s, MAX_TABLE)).transpose()) {
                    (Ok(syms), Ok(strs)) => {
                        let names = kernels(&syms, strs.as_deref().unwrap_or(&[]), ctx);
                        info.kernel_count = Some(names.len() as u32);
                        if want_names {
                            info.kernels = names;
                            info.kernels.sort();
                        }
                    }
                    (Err(e), _) | (_, Err(e)) => {
                        info.kernel_count = None;
                        info.problems.push(format!("symbol table: {e}"));
                    }
                }
            }
            SHT_NOTE => match read(sh, MAX_NOTE) {
                Ok(b) => notes(&b, &mut info),
                Err(e) => info.problems.push(format!("{}: {e}", name_of(sh))),
            },
            SHT_CUDA_COMPAT => match read(sh, MAX_NOTE) {
                Ok(b) => {
                    if compat_attr(&b, EICOMPAT_ATTR_CUDA_ACCELERATOR_TARGET) == Some(1) {
                        suffix = Suffix::A;
                    }
                }
                Err(e) => info.problems.push(format!(".nv.compat: {e}")),
            },
            _ => {}
        }
    }
    // 'f' is recorded nowhere but in the ptxas command line (docs/cuda-binaries.md §1.6).
    if let Some(s) = info.ptxas_options.as_deref().and_then(arch_suffix_in_options) {
        suffix = s;
    }
    if virtual_sm.is_none() {
        virtual_sm = info.virtual_sm;
    }
    info.suffix = suffix;
    info.virtual_sm = virtual_sm;
    Ok(info)
}

fn section_table(src: &mut dyn CubinBytes, h: &goblin::elf::Header, ctx: Ctx) -> Result<Vec<SectionHeader>, String> {
    if h.e_shoff == 0 {
        return Ok(Vec::new());
    }
    let entsize = u64::from(h.e_shentsize);
    let expect = if ctx.container == Class::Big { 64 } else { 40 };
    if entsize != expect {
        return Err(format!("section header size {entsize} (expected {expect})"));
    }
    let count = u64::from(h.e_shnum);
    let len = count * entsize;
    let end = h.e_shoff.checked_add(len);
    if end.is_none_or(|e| e > src.size()) {
        return Err(format!(
            "section table ({count} entries at {:#x}) lies outside the cubin ({:#x} bytes)",
            h.e_shoff,
            src.size()
        ));
    }
    let bytes = src.get(h.e_shoff, len)?;
    if count == 0 {
        return Ok(Vec::new());
    }
    SectionHeader::parse_from(&bytes, 0, count as usize, ctx).map_err(|e| format!("section table: {e}"))
}

pub(crate) fn cstr_at(b: &[u8], off: usize) -> &str {
    let s = b.get(off..).unwrap_or(&[]);
    let s = &s[..memchr::memchr(0, s).unwrap_or(s.len())];
    std::str::from_utf8(s).unwrap_or("")
}

fn kernels(syms: &[u8], strs: &[u8], ctx: Ctx) -> Vec<String> {
    let entsize = if ctx.container == Class::Big { 24 } else { 16 };
    let mut out = Vec::new();
    for s in syms.chunks_exact(entsize) {
        let (name, info, other, shndx) = if entsize == 24 {
            (u32le(&s[0..4]), s[4], s[5], u16::from_le_bytes([s[6], s[7]]))
        } else {
            (u32le(&s[0..4]), s[12], s[13], u16::from_le_bytes([s[14], s[15]]))
        };
        if info & 0xF == STT_FUNC && other & STO_CUDA_ENTRY != 0 && shndx != 0 {
            out.push(cstr_at(strs, name as usize).to_string());
        }
    }
    out
}

fn u32le(b: &[u8]) -> u32 {
    u32::from_le_bytes(b.try_into().unwrap())
}

/// ELF notes owned by "NVIDIA Corp": tkinfo (type 2000), cuinfo/cuver (type 1000).
fn notes(b: &[u8], info: &mut CubinInfo) {
    let mut o = 0usize;
    while o + 12 <= b.len() {
        let namesz = u32le(&b[o..o + 4]) as usize;
        let descsz = u32le(&b[o + 4..o + 8]) as usize;
        let ntype = u32le(&b[o + 8..o + 12]);
        let name_end = o + 12 + namesz;
        let desc_start = name_end.next_multiple_of(4);
        let Some(desc_end) = desc_start.checked_add(descsz) else { return };
        if desc_end > b.len() {
            return;
        }
        let name = &b[o + 12..name_end];
        let desc = &b[desc_start..desc_end];
        if name.starts_with(b"NVIDIA Corp") {
            match ntype {
                2000 if desc.len() >= 24 => {
                    let blob = &desc[24..];
                    let field = |i: usize| cstr_at(blob, u32le(&desc[i..i + 4]) as usize).to_string();
                    let producer = field(12);
                    let options = field(20);
                    if let Some(rel) = producer.split("release ").nth(1) {
                        let v = rel.split(',').next().unwrap_or("").trim();
                        if !v.is_empty() && info.toolkit.is_none() {
                            info.toolkit = Some(v.to_string());
                        }
                    }
                    if !producer.is_empty() {
                        info.producer = Some(producer);
                    }
                    if !options.is_empty() {
                        info.ptxas_options = Some(options);
                    }
                }
                1000 if desc.len() >= 4 => {
                    let ver = u16::from_le_bytes([desc[0], desc[1]]);
                    let virt = u16::from_le_bytes([desc[2], desc[3]]);
                    if virt != 0 {
                        info.virtual_sm = Some(u32::from(virt));
                    }
                    // cuinfo (version 2) adds the toolkit as major*10+minor.
                    if ver >= 2 && desc.len() >= 8 {
                        let tk = u32le(&desc[4..8]);
                        if tk > 0 {
                            info.toolkit = Some(format!("{}.{}", tk / 10, tk % 10));
                        }
                    }
                }
                _ => {}
            }
        }
        o = desc_end.next_multiple_of(4);
    }
}

/// Value of one `.nv.compat` attribute (docs/cuda-binaries.md §1.7): records `{u8 format, u8 attr, value}`.
pub fn compat_attr(b: &[u8], wanted: u8) -> Option<u16> {
    let mut o = 0usize;
    while o + 2 <= b.len() {
        let (fmt, attr) = (b[o], b[o + 1]);
        let (value, len) = match fmt {
            0x01 => (None, 2),
            0x02 => (b.get(o + 2).map(|&v| u16::from(v)), 4),
            0x03 => (b.get(o + 2..o + 4).map(|v| u16::from_le_bytes([v[0], v[1]])), 4),
            0x04 => {
                let sz = b.get(o + 2..o + 4).map(|v| u16::from_le_bytes([v[0], v[1]]))?;
                (None, 4 + usize::from(sz))
            }
            _ => return None,
        };
        if attr == wanted {
            return value;
        }
        o += len;
    }
    None
}

/// The suffix of the `-arch sm_XXY` option ptxas recorded, if any.
pub fn arch_suffix_in_options(opts: &str) -> Option<Suffix> {
    let i = opts.find("sm_")?;
    let rest = &opts[i + 3..];
    let digits = rest.chars().take_while(char::is_ascii_digit).count();
    match rest[digits..].chars().next() {
        Some('a') => Some(Suffix::A),
        Some('f') => Some(Suffix::F),
        _ => Some(Suffix::None),
    }
}
