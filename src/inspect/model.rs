//! What `cudalint inspect` reports about a file: the `files[]` objects of the JSON schema
//! (docs/schema.md). Field order here is output order; lists are in file order or sorted.

use serde::{Deserialize, Serialize};

use super::fatbin::{Compression, EntryKind, Host, Suffix};
use crate::schema::words;

pub fn hex(v: u64) -> String {
    format!("{v:#x}")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FileFormat {
    /// Host ELF: shared object, executable or object file.
    Elf,
    /// A bare device ELF.
    Cubin,
    Fatbin,
    Ptx,
    /// `ar` static archive; see `members`.
    Archive,
    /// Not something that can carry device code.
    Other,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Problem {
    #[serde(default, skip_serializing_if = "Option::is_none", with = "opt_hexnum")]
    pub offset: Option<u64>,
    pub message: String,
    /// Found in data the library keeps and loads itself (a hidden container, a bare cubin in
    /// `.rodata`): detail for the inventory, never a reason to doubt the verdicts (CL015).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub library_managed: bool,
}

/// Offsets are written as hex strings (`"0x2038"`) and read back the same way.
pub mod hexnum {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::hex(*v))
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        let s = String::deserialize(d)?;
        u64::from_str_radix(s.trim_start_matches("0x"), 16).map_err(serde::de::Error::custom)
    }
}

pub mod opt_hexnum {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(v) => s.serialize_str(&super::hex(*v)),
            None => s.serialize_none(),
        }
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|s| u64::from_str_radix(s.trim_start_matches("0x"), 16).map_err(serde::de::Error::custom))
            .transpose()
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FileReport {
    pub path: String,
    pub size: u64,
    pub format: FileFormat,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elf: Option<ElfInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cubin: Option<CubinInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ptx: Option<PtxInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cudart: Option<CudartVersion>,
    /// Containers in `.nv_fatbin` / `__nv_relfatbin` (or the whole of a `.fatbin` file):
    /// what the CUDA runtime registers, and what cuobjdump lists.
    pub containers: Vec<Container>,
    /// Containers found anywhere else in the file (loaded at run time with cuModuleLoadData).
    pub hidden_containers: Vec<Container>,
    /// Bare cubins embedded as data, outside any container.
    pub hidden_cubins: Vec<HiddenCubin>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<FileReport>,
    pub problems: Vec<Problem>,
    /// The file shows a sign of CUDA (a fatbin or wrapper magic in a loaded segment, a CUDA
    /// section name, a CUDA `DT_NEEDED` or SONAME, device code of any kind), whether or not its
    /// device code could be decoded: with problems, the analysis is incomplete (CL015).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cuda_sign: bool,
    /// A run-time compiler (ptxas, nvcc, NVRTC, nvJitLink, nvPTXCompiler) and its version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toolchain: Option<super::toolchain::Toolchain>,
    /// Run-time compiler libraries the file names for loading (`libnvrtc.so.12`, in `.rodata`:
    /// the names it hands `dlopen`), sorted; evidence that it compiles device code at run time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub loads_compilers: Vec<String>,
    /// A bare cubin's or PTX file's bytes, kept only when asked (`--on-device`).
    #[serde(skip)]
    pub bytes: Option<std::sync::Arc<Vec<u8>>>,
    /// Where a host ELF's `.rodata` lies (file ranges), and whether it is a program of its own
    /// (PT_INTERP): what [`super::sweep`] reads. Not part of the report.
    #[serde(skip)]
    pub rodata: Vec<(u64, u64)>,
    #[serde(skip)]
    pub program: bool,
}

impl FileReport {
    pub fn new(path: String, size: u64, format: FileFormat) -> FileReport {
        FileReport {
            path,
            size,
            format,
            elf: None,
            cubin: None,
            ptx: None,
            cudart: None,
            containers: Vec::new(),
            hidden_containers: Vec::new(),
            hidden_cubins: Vec::new(),
            members: Vec::new(),
            problems: Vec::new(),
            cuda_sign: false,
            toolchain: None,
            loads_compilers: Vec::new(),
            bytes: None,
            rodata: Vec::new(),
            program: false,
        }
    }

    /// Every problem message of the file, its containers (entries, images, cubins), hidden
    /// cubins and archive members, sorted and deduplicated.
    pub fn all_problems(&self) -> Vec<String> {
        let mut v = Vec::new();
        self.collect_problems(&mut v);
        v.sort();
        v.dedup();
        v
    }

    fn collect_problems(&self, v: &mut Vec<String>) {
        v.extend(self.problems.iter().map(|p| p.message.clone()));
        v.extend(self.cubin.iter().flat_map(|c| c.problems.iter().cloned()));
        for c in self.containers.iter().chain(&self.hidden_containers) {
            v.extend(c.problems.iter().map(|p| p.message.clone()));
            for e in c.entries.iter().chain(c.entries.iter().flat_map(|e| &e.images)) {
                v.extend(e.problems.iter().map(|p| p.message.clone()));
                v.extend(e.cubin.iter().flat_map(|c| c.problems.iter().cloned()));
            }
        }
        v.extend(self.hidden_cubins.iter().flat_map(|h| h.cubin.problems.iter().cloned()));
        for m in &self.members {
            m.collect_problems(v);
        }
    }

    pub fn problem(&mut self, offset: Option<u64>, message: impl Into<String>) {
        self.problems.push(Problem { offset, message: message.into(), library_managed: false });
    }

    /// A problem in data the library keeps and loads itself (see [`Problem::library_managed`]).
    pub fn managed_problem(&mut self, offset: Option<u64>, message: impl Into<String>) {
        self.problems.push(Problem { offset, message: message.into(), library_managed: true });
    }

    /// The problems that decide whether the verdicts can be trusted, and the rest, each sorted
    /// and deduplicated. Decisive: the file's own structure (what the loader reads), its
    /// registered containers and a standalone cubin's. Detail: data the library loads itself
    /// (hidden containers, bare cubins kept as data) and archive members (linked elsewhere,
    /// never loaded from here).
    pub fn split_problems(&self) -> (Vec<String>, Vec<String>) {
        let mut decisive = Vec::new();
        let mut detail = Vec::new();
        for p in &self.problems {
            if p.library_managed { &mut detail } else { &mut decisive }.push(p.message.clone());
        }
        decisive.extend(self.cubin.iter().flat_map(|c| c.problems.iter().cloned()));
        let container = |c: &Container, v: &mut Vec<String>| {
            v.extend(c.problems.iter().map(|p| p.message.clone()));
            for e in c.entries.iter().chain(c.entries.iter().flat_map(|e| &e.images)) {
                v.extend(e.problems.iter().map(|p| p.message.clone()));
                v.extend(e.cubin.iter().flat_map(|c| c.problems.iter().cloned()));
            }
        };
        for c in &self.containers {
            container(c, &mut decisive);
        }
        for c in &self.hidden_containers {
            container(c, &mut detail);
        }
        detail.extend(self.hidden_cubins.iter().flat_map(|h| h.cubin.problems.iter().cloned()));
        // A file whose own structure could not be read cannot tell registered code from data
        // (a truncated section table hides which containers `.nv_fatbin` holds): all decide.
        if !decisive.is_empty() {
            decisive.append(&mut detail);
        }
        for m in &self.members {
            m.collect_problems(&mut detail);
        }
        for v in [&mut decisive, &mut detail] {
            v.sort();
            v.dedup();
        }
        (decisive, detail)
    }

    /// Carries device code of any kind (here or in archive members).
    pub fn has_device_code(&self) -> bool {
        !self.containers.is_empty()
            || !self.hidden_containers.is_empty()
            || !self.hidden_cubins.is_empty()
            || self.cubin.is_some()
            || self.ptx.is_some()
            || self.members.iter().any(FileReport::has_device_code)
    }

    /// Worth listing: device code, a CUDA runtime, or something wrong.
    pub fn cuda_relevant(&self) -> bool {
        self.has_device_code()
            || self.cudart.is_some()
            || self.problem_count() > 0
            || self.toolchain.is_some()
            || !self.loads_compilers.is_empty()
    }

    /// Problems here and in members, for exit codes and summaries.
    pub fn problem_count(&self) -> usize {
        let containers = self.containers.iter().chain(&self.hidden_containers);
        self.problems.len()
            + containers.map(Container::problem_count).sum::<usize>()
            + self.members.iter().map(FileReport::problem_count).sum::<usize>()
    }
}

words! {
    /// A host ELF's `e_type`.
    pub enum ElfType {
        SharedObject = "shared-object",
        Executable = "executable",
        Relocatable = "relocatable",
        Core = "core",
        Other = "other",
    }
}

impl ElfType {
    pub fn from_e_type(e_type: u16) -> ElfType {
        match e_type {
            goblin::elf::header::ET_REL => ElfType::Relocatable,
            goblin::elf::header::ET_EXEC => ElfType::Executable,
            goblin::elf::header::ET_DYN => ElfType::SharedObject,
            goblin::elf::header::ET_CORE => ElfType::Core,
            _ => ElfType::Other,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ElfInfo {
    pub elf_type: ElfType,
    pub machine: String,
    pub class: u8,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soname: Option<String>,
    /// DT_NEEDED entries naming CUDA libraries (cudart, cublas, cudnn, nccl, libcuda ...).
    pub cuda_needed: Vec<String>,
    /// `.nvFatBinSegment` wrappers, in file order.
    pub fatbin_wrappers: Vec<Wrapper>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Wrapper {
    #[serde(with = "hexnum")]
    pub offset: u64,
    /// 1 = ordinary, 2 = device-linked (`__cudaRegisterLinkedBinary`).
    pub version: u32,
    /// Virtual address of the container it registers (0 when left to a relocation).
    #[serde(with = "hexnum")]
    pub data: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Container {
    #[serde(with = "hexnum")]
    pub offset: u64,
    /// 16-byte header plus the declared fat size.
    pub size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub section: Option<String>,
    /// In `__nv_relfatbin`: relocatable material for device linking, not loaded as is.
    pub relocatable: bool,
    /// Version of the `.nvFatBinSegment` wrapper that registers it, when one points here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wrapper_version: Option<u32>,
    /// Whether the module carries kernels: `present` (an image read has some), `none` (every
    /// image read, none has any: nvlink's device-link stub, docs/cuda-binaries.md §1.1; it cannot raise 209 at a
    /// launch and does not count as coverage), `assumed` (images too large to decompress
    /// cheaply were not read; treated as `present`).
    pub kernels: Kernels,
    pub entries: Vec<Entry>,
    pub problems: Vec<Problem>,
    /// The container's bytes, kept only when asked (`--on-device` loads them on the GPU).
    #[serde(skip)]
    pub bytes: Option<std::sync::Arc<Vec<u8>>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kernels {
    Present,
    None,
    Assumed,
}

impl Container {
    /// The module's name in reports (`.nv_fatbin@0x2680`): static findings and on-device results
    /// are matched by it.
    pub fn label(&self) -> String {
        format!("{}@{:#x}", self.section.as_deref().unwrap_or("container"), self.offset)
    }

    /// A kernel-less module (device-link stub): excluded from coverage.
    pub fn kernel_less(&self) -> bool {
        self.kernels == Kernels::None
    }

    pub fn problem_count(&self) -> usize {
        self.problems.len()
            + self
                .entries
                .iter()
                .map(|e| e.problems.len() + e.images.iter().map(|i| i.problems.len()).sum::<usize>())
                .sum::<usize>()
    }

    /// Images the driver may load from this container: ELF/PTX/Tile IR, concatenated expanded.
    pub fn images(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter().flat_map(|e| if e.images.is_empty() { std::slice::from_ref(e) } else { &e.images[..] })
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Entry {
    /// File offset of the entry header (for a concatenated sub-image: its offset inside the
    /// decompressed blob).
    #[serde(with = "hexnum")]
    pub offset: u64,
    pub kind: EntryKind,
    /// `sm_90a` for SASS, `compute_90a` for PTX, `lto_90a` for NVVM; empty for a concatenated
    /// entry (its images carry their own).
    pub arch: String,
    pub sm: u32,
    pub suffix: Suffix,
    /// `[major, minor]`: cubin ELF ABI for ELF, PTX ISA for PTX (docs/cuda-binaries.md §2.5).
    pub code_version: [u16; 2],
    pub flags: String,
    pub bits64: bool,
    pub debug: bool,
    pub host: Host,
    pub compression: Compression,
    pub header_size: u32,
    pub payload_size: u64,
    pub compressed_size: u64,
    pub uncompressed_size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identifier: Option<String>,
    /// ptxas options for PTX, cicc options for NVVM, as stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<String>,
    /// Decoded cubin for ELF images. By default only read until the module is known to carry
    /// kernels (`--cubins` reads every one); absent when not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cubin: Option<CubinInfo>,
    /// `.entry` directives in a PTX image, when it was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ptx_entries: Option<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<Entry>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<Problem>,
}

impl Entry {
    /// Read, and found to carry kernels.
    pub fn has_kernels(&self) -> bool {
        match self.kind {
            EntryKind::Elf => self.cubin.as_ref().is_some_and(|c| c.kernel_count.is_some_and(|n| n > 0)),
            EntryKind::Ptx => self.ptx_entries.is_some_and(|n| n > 0),
            EntryKind::Concatenated => self.images.iter().any(Entry::has_kernels),
            _ => false,
        }
    }

    /// Read, and found without kernels (a cubin without entry functions, PTX without
    /// `.entry`). Anything not read, or of another kind, may carry kernels.
    pub fn kernel_less(&self) -> bool {
        match self.kind {
            EntryKind::Elf => self.cubin.as_ref().is_some_and(|c| c.kernel_count == Some(0)),
            EntryKind::Ptx => self.ptx_entries == Some(0),
            EntryKind::Concatenated => !self.images.is_empty() && self.images.iter().all(Entry::kernel_less),
            _ => false,
        }
    }
}

pub fn arch_name(kind: EntryKind, sm: u32, suffix: Suffix) -> String {
    let prefix = match kind {
        EntryKind::Ptx => "compute_",
        EntryKind::Nvvm => "lto_",
        EntryKind::Concatenated => return String::new(),
        _ => "sm_",
    };
    format!("{prefix}{sm}{}", suffix.as_str())
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HiddenCubin {
    #[serde(with = "hexnum")]
    pub offset: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub section: Option<String>,
    pub cubin: CubinInfo,
    /// Its bytes, kept only when asked (`--on-device`).
    #[serde(skip)]
    pub bytes: Option<std::sync::Arc<Vec<u8>>>,
}

impl HiddenCubin {
    /// As `Container::label`.
    pub fn label(&self) -> String {
        format!("{}@{:#x}", self.section.as_deref().unwrap_or("cubin"), self.offset)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PtxInfo {
    /// `.version`, as `[major, minor]`.
    pub version: [u16; 2],
    /// `.target` architecture, e.g. `sm_80`, `sm_90a`.
    pub target: String,
    pub sm: u32,
    pub suffix: Suffix,
    pub debug: bool,
    pub address_size: Option<u8>,
    pub entry_count: u32,
}

words! {
    /// How a file has the CUDA runtime.
    pub enum Linkage {
        /// This file is libcudart.
        Shared = "shared",
        /// Linked into this file.
        Static = "static",
    }
}

words! {
    /// A device ELF's type.
    pub enum CubinType {
        /// Loadable.
        Exec = "exec",
        /// Relocatable, from -rdc.
        Rel = "rel",
        Other = "other",
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CudartVersion {
    /// `12.9` or `12.9.79`.
    pub version: String,
    /// `shared` (this file is libcudart) or `static` (linked into this file).
    pub linkage: Linkage,
    /// `file-name` (the real file behind the SONAME), `machine-code` (CUDART_VERSION
    /// immediate, docs/cuda-binaries.md §5f), `soname` (major only).
    pub source: String,
}

/// What one device ELF carries (read by `cubin::parse`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CubinInfo {
    /// `exec` (loadable) or `rel` (relocatable, from -rdc).
    pub elf_type: CubinType,
    pub osabi: u8,
    pub abi_version: u8,
    pub e_flags: String,
    /// Real SM the SASS is for, from e_flags.
    pub sm: u32,
    /// 'a'/'f' as far as the cubin itself proves it (a bare sm_100f cubin looks like sm_100).
    pub suffix: Suffix,
    /// The PTX target the SASS was compiled from, where the cubin records it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub virtual_sm: Option<u32>,
    /// Number of kernels (`__global__` entry points); null when the symbol table could not be
    /// read (then the cubin is assumed to carry kernels).
    pub kernel_count: Option<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernels: Vec<String>,
    /// Toolkit from `.note.nv.cuinfo`/`.note.nv.cuver` or the tkinfo release string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toolkit: Option<String>,
    /// The full producer line from `.note.nv.tkinfo`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub producer: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ptxas_options: Option<String>,
    /// Problems reading parts of the cubin (the header-level facts above still hold).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
}

impl CubinInfo {
    pub fn arch(&self) -> String {
        format!("sm_{}{}", self.sm, self.suffix.as_str())
    }
    pub fn loadable(&self) -> bool {
        self.elf_type == CubinType::Exec
    }
}
