//! One model of a file's CUDA modules: the units the driver loads (a fatbin container, a bare
//! cubin, a PTX file), with their images, how they reach the driver, and the bytes kept for
//! `--on-device`. The verdicts (`lint::facts`) and the device plan (`device::plan`) both read it,
//! so the two sides never disagree on what a module is.
//!
//! Level: above `inspect`, `cuda` and `layer`, below `image`.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::cuda::compat::{Image, ImageKind};
use crate::cuda::{Cc, CudaVersion, tables};
use crate::inspect::fatbin::{Compression, EntryKind, Suffix};
use crate::inspect::libraries::{self, Driver};
use crate::inspect::{Container, ElfType, Entry, FileFormat, FileReport};
use crate::layer::path::file_name;
use crate::schema::words;

words! {
    /// How a module reaches the driver, which decides whether it counts for coverage
    /// (`module.loading` of `--on-device` results too).
    #[derive(Default)]
    pub enum Loading {
        /// Not known (device results judged outside a run, as the rule cases do).
        #[default]
        Unset = "",
        /// Handed to the CUDA runtime by the host code (`.nv_fatbin` containers reached from
        /// `.nvFatBinSegment` wrappers): these decide whether the binary runs on a GPU.
        Registered = "registered",
        /// A cubin, fatbin or PTX file: whoever loads it loads it whole.
        Standalone = "standalone",
        /// Kept as data (hidden containers, bare cubins in `.rodata`, `.lrodata`, `.cask_resource`):
        /// the library loads them itself with its own per-architecture dispatch. Inventory and
        /// matrix detail only; they never make a binary pass or fail.
        LibraryManaged = "library-managed",
        /// A module of the host driver's own libraries (the device plan's class for them).
        DriverLibrary = "driver-library",
    }
}

/// Where in its file a module sits: what the device plan extracts its images from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `FileReport::containers[i]`.
    Container(usize),
    /// `FileReport::hidden_containers[i]`.
    HiddenContainer(usize),
    /// `FileReport::members[m].containers[i]` (archive members: never loadable, kept for the
    /// verdict side's completeness).
    MemberContainer(usize, usize),
    /// `FileReport::hidden_cubins[i]`.
    HiddenCubin(usize),
    /// The file is a cubin.
    CubinFile,
    /// The file is PTX.
    PtxFile,
}

impl Source {
    /// The container this module is, when it is one.
    pub fn container<'a>(&self, r: &'a FileReport) -> Option<&'a Container> {
        match *self {
            Source::Container(i) => r.containers.get(i),
            Source::HiddenContainer(i) => r.hidden_containers.get(i),
            Source::MemberContainer(m, i) => r.members.get(m)?.containers.get(i),
            _ => None,
        }
    }
}

/// One module (fatbin container, bare cubin, PTX file) the driver loads as a unit.
#[derive(Debug, Clone)]
pub struct Module {
    /// `.nv_fatbin@0x2680`, `cubin`.
    pub label: String,
    pub images: Vec<Image>,
    /// Uncompressed bytes of its PTX.
    pub ptx_bytes: u64,
    pub loading: Loading,
    /// The bytes the driver is handed, kept only when asked (`--on-device`). PTX as in the
    /// file (the device plan NUL-terminates it).
    pub bytes: Option<Arc<Vec<u8>>>,
    /// Kernel names as the inspector read them (bare cubins). A container's are read from its
    /// extracted images when it is loaded (`device::plan`).
    pub kernels: Vec<String>,
    /// The first problem the inspector found in it: the driver is no validator (it trusts a
    /// fatbin's sizes), so a damaged module is never handed to it.
    pub damage: Option<String>,
    /// Read, and found without kernels (a cubin without entry functions, PTX without `.entry`):
    /// no coverage to give, though the driver can still load it.
    pub kernel_less: bool,
    pub source: Source,
}

impl Module {
    /// Counts for the verdicts: it has an image the driver can pick and may carry a kernel.
    pub fn counts(&self) -> bool {
        !self.images.is_empty() && !self.kernel_less
    }
    /// Every image is architecture- ('a') or family-specific ('f') code.
    pub fn specific_only(&self) -> bool {
        !self.images.is_empty() && self.images.iter().all(|i| i.suffix != Suffix::None)
    }
    /// Every image is for a newer GPU than `cc`: a kernel set the library gates by compute
    /// capability (FP8 kernels for 8.9+, Hopper or Blackwell-only kernels).
    pub fn newer_only(&self, cc: Cc) -> bool {
        !self.images.is_empty() && self.images.iter().all(|i| i.cc > cc)
    }
    /// Built for one architecture (a per-arch variant, as cuBLAS and NCCL ship their kernels),
    /// not a generic list.
    pub fn single_arch(&self) -> bool {
        let ccs: BTreeSet<Cc> = self.images.iter().filter(|i| i.suffix == Suffix::None).map(|i| i.cc).collect();
        ccs.len() <= 1
    }
}

words! {
    /// What kind of file holds the modules (`binary.kind`).
    #[derive(Default)]
    pub enum FileKind {
        SharedObject = "shared-object",
        Executable = "executable",
        Object = "object",
        Archive = "archive",
        Cubin = "cubin",
        Fatbin = "fatbin",
        Ptx = "ptx",
        #[default]
        Other = "other",
    }
}

/// A file's modules, in file order: containers (registered, then hidden, then archive members'),
/// bare cubins kept as data, then the file itself when it is a cubin or PTX.
#[derive(Debug, Clone, Default)]
pub struct Modules {
    pub kind: FileKind,
    /// Loaded as is at run time (not an object file or a static archive). Only a loadable
    /// file has modules.
    pub loadable: bool,
    pub driver_library: DriverLibrary,
    pub modules: Vec<Module>,
    /// Kernel-less containers (device-link stubs): listed nowhere, counted here.
    pub kernel_less: u64,
    /// Modules kept as data (hidden containers, bare cubins with kernels).
    pub hidden: u64,
}

/// What kind of file this is and whether it is loaded as is at run time.
pub fn file_kind(f: &FileReport) -> (FileKind, bool) {
    match (&f.format, &f.elf) {
        (FileFormat::Elf, Some(e)) => match e.elf_type {
            ElfType::SharedObject => (FileKind::SharedObject, true),
            ElfType::Executable => (FileKind::Executable, true),
            ElfType::Relocatable => (FileKind::Object, false),
            ElfType::Core | ElfType::Other => (FileKind::Other, false),
        },
        (FileFormat::Elf, None) => (FileKind::Other, false),
        (FileFormat::Cubin, _) => (FileKind::Cubin, f.cubin.as_ref().is_some_and(|c| c.loadable())),
        (FileFormat::Fatbin, _) => (FileKind::Fatbin, true),
        (FileFormat::Ptx, _) => (FileKind::Ptx, true),
        (FileFormat::Archive, _) => (FileKind::Archive, false),
        (FileFormat::Other, _) => (FileKind::Other, false),
    }
}

words! {
    /// Which of the host driver's files a file is (`binary.driver_library`): such a file does
    /// not belong in an image, except the forward-compatibility package's copies.
    #[derive(Default)]
    pub enum DriverLibrary {
        /// Not a driver library.
        #[default]
        No = "",
        Libcuda = "libcuda",
        Libnvidia = "libnvidia",
        CudaCompat = "cuda-compat",
    }
}

impl DriverLibrary {
    pub fn is_driver(self) -> bool {
        self != DriverLibrary::No
    }
}

/// Which of the host driver's files the file at `path` is, if any.
pub fn driver_library(path: &str) -> DriverLibrary {
    let name = file_name(path);
    let driver = libraries::driver(name);
    // The forward-compatibility package's copies (`/usr/local/cuda-13.0/compat/`, conda's
    // `cuda-compat/`) first: they are meant to be in the image.
    match driver {
        Some(_) if path.contains("/cuda-compat/") || path.contains("/compat/") => DriverLibrary::CudaCompat,
        Some(Driver::Libcuda) => DriverLibrary::Libcuda,
        Some(Driver::Libnvidia) if name.contains(".so.") => DriverLibrary::Libnvidia,
        _ => DriverLibrary::No,
    }
}

/// The images the driver may load from a container, each with what reading it needs.
pub fn container_images(c: &Container) -> Vec<Image> {
    let mut out = Vec::new();
    for e in &c.entries {
        if e.kind == EntryKind::Concatenated {
            out.extend(e.images.iter().filter_map(|i| image_of(i, Some(tables::CONCATENATED_NEEDS))));
        } else {
            out.extend(image_of(e, None));
        }
    }
    out
}

pub fn image_of(e: &Entry, needs_driver: Option<CudaVersion>) -> Option<Image> {
    let cc = Cc::from_sm(e.sm);
    match e.kind {
        // Relocatable cubins are linked, not loaded.
        EntryKind::Elf if e.cubin.as_ref().is_none_or(|c| c.loadable()) => {
            Some(Image { kind: ImageKind::Sass, cc, suffix: e.suffix, isa: None, needs_driver })
        }
        EntryKind::Ptx => Some(Image {
            kind: ImageKind::Ptx,
            cc,
            suffix: e.suffix,
            isa: Some((e.code_version[0], e.code_version[1])),
            needs_driver,
        }),
        EntryKind::TileIr => Some(Image { kind: ImageKind::TileIr, cc, suffix: e.suffix, isa: None, needs_driver }),
        _ => None,
    }
}

/// Uncompressed bytes of a PTX entry.
pub fn ptx_size(e: &Entry) -> u64 {
    if e.compression == Compression::None { e.payload_size } else { e.uncompressed_size }
}

fn sass(sm: u32, suffix: Suffix) -> Image {
    Image { kind: ImageKind::Sass, cc: Cc::from_sm(sm), suffix, isa: None, needs_driver: None }
}

fn container_module(c: &Container, loading: Loading, source: Source) -> Module {
    let damage = (c.problem_count() > 0).then(|| {
        c.problems
            .iter()
            .chain(c.entries.iter().flat_map(|e| e.problems.iter().chain(e.images.iter().flat_map(|i| &i.problems))))
            .next()
            .map_or_else(|| "damaged entries".to_string(), |p| p.message.clone())
    });
    Module {
        label: c.label(),
        images: container_images(c),
        ptx_bytes: c.images().filter(|e| e.kind == EntryKind::Ptx).map(ptx_size).sum(),
        loading,
        bytes: c.bytes.clone(),
        kernels: Vec::new(),
        damage,
        kernel_less: false,
        source,
    }
}

/// Every module of a loadable file (none for object files and archives): relocatable material
/// and kernel-less containers left out, everything else listed with what the verdicts and the
/// device plan each need to decide on it (`Module::counts`, `Module::damage`, `Module::bytes`).
pub fn modules(r: &FileReport) -> Modules {
    let (kind, loadable) = file_kind(r);
    let mut out = Modules { kind, loadable, driver_library: driver_library(&r.path), ..Modules::default() };
    if !loadable {
        return out;
    }
    let standalone = matches!(kind, FileKind::Cubin | FileKind::Fatbin | FileKind::Ptx);
    let registered = if standalone { Loading::Standalone } else { Loading::Registered };
    let containers = (r.containers.iter().enumerate().map(|(i, c)| (c, Source::Container(i), registered)))
        .chain(
            r.hidden_containers
                .iter()
                .enumerate()
                .map(|(i, c)| (c, Source::HiddenContainer(i), Loading::LibraryManaged)),
        )
        .chain(r.members.iter().enumerate().flat_map(|(m, f)| {
            f.containers.iter().enumerate().map(move |(i, c)| (c, Source::MemberContainer(m, i), registered))
        }));
    for (c, source, loading) in containers {
        if c.relocatable {
            continue;
        }
        if c.kernel_less() {
            out.kernel_less += 1;
            continue;
        }
        out.hidden += u64::from(loading == Loading::LibraryManaged);
        out.modules.push(container_module(c, loading, source));
    }
    for (i, h) in r.hidden_cubins.iter().enumerate().filter(|(_, h)| h.cubin.loadable()) {
        let kernel_less = h.cubin.kernel_count == Some(0);
        out.hidden += u64::from(!kernel_less);
        out.modules.push(Module {
            label: h.label(),
            images: vec![sass(h.cubin.sm, h.cubin.suffix)],
            ptx_bytes: 0,
            loading: Loading::LibraryManaged,
            bytes: h.bytes.clone(),
            kernels: h.cubin.kernels.clone(),
            damage: h.cubin.problems.first().cloned(),
            kernel_less,
            source: Source::HiddenCubin(i),
        });
    }
    // A damaged cubin or PTX file: its own problems first, then the file's.
    let file_problem = || r.problems.first().map(|p| p.message.clone());
    if let Some(c) = &r.cubin {
        out.modules.push(Module {
            label: "cubin".into(),
            images: vec![sass(c.sm, c.suffix)],
            ptx_bytes: 0,
            loading: Loading::Standalone,
            bytes: r.bytes.clone(),
            kernels: c.kernels.clone(),
            damage: c.problems.first().cloned().or_else(file_problem),
            kernel_less: c.kernel_count == Some(0),
            source: Source::CubinFile,
        });
    }
    if let Some(p) = &r.ptx {
        out.modules.push(Module {
            label: "ptx".into(),
            images: vec![Image {
                kind: ImageKind::Ptx,
                cc: Cc::from_sm(p.sm),
                suffix: p.suffix,
                isa: Some((p.version[0], p.version[1])),
                needs_driver: None,
            }],
            ptx_bytes: r.size,
            loading: Loading::Standalone,
            bytes: r.bytes.clone(),
            kernels: Vec::new(),
            damage: file_problem(),
            kernel_less: p.entry_count == 0,
            source: Source::PtxFile,
        });
    }
    out
}
