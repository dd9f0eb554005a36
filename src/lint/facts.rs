//! The fact objects rules are written against (docs/facts.md): `image`, `binary`, `target`,
//! `coverage`, `runtime`, `fix`. Built from a scan's inventory; each is plain data (serde) that
//! CEL expressions read.

use std::collections::BTreeSet;

use serde::Serialize;

use super::targets::Target;
use crate::cuda::compat::{self, JitEnv, Verdict};
use crate::cuda::fix::{ArchFix, arch_fix};
use crate::cuda::{Cc, CudaVersion, gpus, require, tables};
use crate::image::{ImageFile, ImageReport};
use crate::inspect::Container;
use crate::inspect::fatbin::EntryKind;
use crate::layer::path::file_name;
use crate::module::{Source, ptx_size};
// The module model lives in `crate::module`; these paths stay for the rules and reports.
pub use crate::module::{Loading, Module, container_images, driver_library, image_of};

#[derive(Debug, Clone, Serialize)]
pub struct CudartFacts {
    pub version: String,
    pub major: u16,
    pub minor: u16,
    pub linkage: String,
    pub source: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct BinaryFacts {
    pub path: String,
    pub layer: String,
    /// shared-object, executable, object, archive, cubin, fatbin, ptx, other.
    pub kind: String,
    /// Loaded as is at run time (not an object file or a static archive).
    pub loadable: bool,
    pub soname: String,
    pub symlinks: Vec<String>,
    /// Modules that count for coverage (kernel-less stubs and relocatable material excluded).
    pub modules: u64,
    pub kernel_less_modules: u64,
    pub hidden_modules: u64,
    /// Modules the library loads itself (hidden containers and cubins kept as data).
    pub library_managed_modules: u64,
    /// The package that installed the file (empty: none known) and its manager and version.
    pub package: String,
    pub package_manager: String,
    pub package_version: String,
    /// What the binary is judged together with: its package, else its Python top-level
    /// directory (`site-packages/vllm`), else its directory.
    pub group: String,
    /// One of NVIDIA's closed-source libraries (cuBLAS, cuDNN, NCCL, ...): it cannot be rebuilt,
    /// only replaced by another build.
    pub vendor_library: bool,
    /// The CUDA major the binary was built with or links (runtime, toolkit notes, PTX ISA), 0 if
    /// unknown.
    pub cuda_major: u64,
    /// SASS architectures carried, sorted (`sm_80`, `sm_90a`).
    pub sass: Vec<String>,
    /// PTX architectures carried, sorted (`compute_90`).
    pub ptx: Vec<String>,
    /// PTX without an 'a'/'f' suffix: what future GPUs can compile.
    pub ptx_portable: Vec<String>,
    /// Both lists as one string for messages: `sm_80, sm_90, compute_90` (or `none`). Code the
    /// library keeps as data is not in these lists: see `managed_archs`.
    pub archs: String,
    /// Architectures of library-managed modules (`sm_70, sm_86`), empty if none.
    pub managed_archs: String,
    /// Uncompressed bytes of PTX.
    pub ptx_bytes: u64,
    /// Newest PTX ISA carried (`9.0`), empty if none.
    pub ptx_isa: String,
    /// Newest CUDA release the device code comes from (PTX ISA, cubin notes), empty if unknown.
    pub toolkit: String,
    pub cudart: Option<CudartFacts>,
    /// Device code compiled with -G (debug).
    pub debug: bool,
    /// `libcuda`, `libnvidia`, `cuda-compat` when this file belongs to the host driver.
    pub driver_library: String,
    pub cuda_needed: Vec<String>,
    /// The file shows some sign of CUDA (device code, CUDA sections or wrappers, a CUDA
    /// `DT_NEEDED`, fatbin magic in a loaded segment).
    pub cuda_sign: bool,
    /// What the inspector could not read in full in the code that decides whether this file
    /// runs (sorted): its own structure, registered containers, a standalone cubin. With a CUDA
    /// sign, the verdicts may be missing device code (CL015). Empty for driver libraries and
    /// for files never loaded as they are (archives, objects).
    pub problems: Vec<String>,
    /// How many decisive problems, and the first few of them for messages (`77 problems, e.g. …`).
    pub problem_count: u64,
    pub problem_examples: Vec<String>,
    /// Problems in everything else: data the library keeps and loads itself, archive members,
    /// a driver library's contents. Detail for the inventory and JSON, never a finding.
    pub detail_problems: Vec<String>,
    /// For a version-selected sibling the loader does not pick here: the one it picks (empty
    /// otherwise). Such a binary is never loaded, so no rule about its own build applies.
    pub not_loaded: String,
}

#[derive(Debug, Clone)]
pub struct Binary {
    pub facts: BinaryFacts,
    pub modules: Vec<Module>,
}

impl Binary {
    /// The modules that decide coverage: registered and standalone ones, none of a driver
    /// library's.
    pub fn counted(&self) -> impl Iterator<Item = &Module> {
        let driver = !self.facts.driver_library.is_empty();
        self.modules.iter().filter(move |m| !driver && m.loading != Loading::LibraryManaged)
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ImageFacts {
    pub name: String,
    pub source: String,
    pub platform: String,
    pub env: std::collections::BTreeMap<String, String>,
    /// Majors of every CUDA runtime in the image (shared libcudart files and static copies).
    pub cuda_runtime_majors: Vec<u16>,
    pub cuda_runtimes: Vec<String>,
    pub binaries: u64,
    pub binaries_with_device_code: u64,
    /// `NVIDIA_REQUIRE_CUDA` as set, and the oldest driver CUDA version it lets start.
    pub require_cuda: String,
    pub require_cuda_weakest: String,
    /// The same as a number, major*100 + minor (1202), for comparisons; 0 when not set.
    pub require_cuda_weakest_n: u64,
    /// The newest CUDA major the content needs from the driver (runtime or device code), `13.0`.
    pub needs_cuda: String,
    pub needs_cuda_n: u64,
    /// Arch constraints (`NVIDIA_REQUIRE_ARCH`, `arch` in `NVIDIA_REQUIRE_CUDA`), and the known
    /// compute capabilities they allow that some binary here cannot run on.
    pub require_arch: String,
    pub require_arch_uncovered: Vec<String>,
    pub jit_env: JitEnv,
}

#[derive(Debug, Clone, Serialize)]
pub struct TargetFacts {
    pub name: String,
    pub cc: String,
    pub major: u8,
    pub minor: u8,
    pub sm: u32,
    pub driver: String,
    pub driver_cuda: String,
    /// An image-level finding fails this target before any kernel runs (driver floor, a driver
    /// that cannot drive the GPU): per-binary verdicts step aside.
    pub blocked: bool,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Coverage {
    pub modules: u64,
    pub native: u64,
    pub jit: u64,
    /// Modules that do not run: 209, 222 or 223.
    pub failing: u64,
    pub no_image: u64,
    pub ptx_too_new: u64,
    pub jit_disabled: u64,
    /// Failing modules whose only near match is arch-specific ('a') code for another CC.
    pub arch_specific_only: u64,
    pub arch_specific_images: Vec<String>,
    /// all, some, none (every / some / no module runs), or n/a (no modules).
    pub result: String,
    /// The images used (`sm_80`, `jit compute_80`) and the errors, for the matrix.
    pub cells: Vec<String>,
    pub native_images: Vec<String>,
    pub jit_images: Vec<String>,
    /// PTX bytes the driver would compile at first use, the same for people (`12.3 MiB`), and
    /// roughly how long that takes: `milliseconds`, `seconds`, `minutes`.
    pub jit_ptx_bytes: u64,
    pub jit_ptx: String,
    pub jit_cost: String,
    /// Newest CUDA version a JIT or refused PTX needs.
    pub needs_cuda: String,
    /// A few failing modules, by label.
    pub failing_examples: Vec<String>,
    /// Failing modules whose usable images are packaged in a form the driver cannot read
    /// (concatenated entries), and the driver version that can.
    pub format_too_new: u64,
    pub format_needs_cuda: String,
    /// Modules that are detail in a binary whose other modules run here, not counted in
    /// `failing`, `jit` or the cells: 'a'/'f' variants for other chips, per-architecture
    /// variants (one SM each, as cuBLAS ships them), and in NVIDIA's closed libraries kernel
    /// sets for newer GPUs only and any module where their registered code runs natively here
    /// (their per-GPU dispatch).
    pub expected_missing: u64,
    /// Failing modules built for a generic architecture list that lacks the target while other
    /// modules run here and that is not detail (see `expected_missing`): one translation unit
    /// built with a different list. Never counted in NVIDIA's closed libraries. And a few labels.
    pub gaps: u64,
    pub gap_examples: Vec<String>,
    /// Modules whose every plain architecture is newer than the target (kernel sets for newer
    /// GPUs), and the oldest architecture among them.
    pub newer_only: u64,
    #[serde(skip)]
    pub newer_from: Option<Cc>,
    /// The binary's verdict on the target: native, jit, arch-gated, none, n/a (docs/schema.md).
    pub class: String,
    /// For arch-gated binaries: the GPUs its code is for (`H100, H200, GH200`).
    pub gated_for: String,
    /// For a version-selected sibling that is not loaded here: the sibling that is.
    pub selected_sibling: String,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct RuntimeFacts {
    /// The runtime this binary uses (`12.9`), empty if unknown.
    pub version: String,
    /// Oldest driver that runs it (minor-version compatibility floor of its major).
    pub needs_driver: String,
    /// False when the target's declared driver is older than that.
    pub satisfied: bool,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct FixFacts {
    /// Covers every target: `8.6;9.0+PTX`.
    pub torch_arch_list: String,
    pub gencode: String,
    pub archs: Vec<String>,
    /// Driver needed for the PTX (222) or the runtime (35) problem at hand.
    pub driver: String,
    /// What to do so this binary runs on the failing targets: the package build to install, or
    /// the architecture list to rebuild with (keeping what it carries).
    pub action: String,
}

/// NVIDIA's closed-source libraries (by file name): rebuilt by nobody but NVIDIA.
pub fn vendor_library(name: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "libcublas",
        "libcudnn",
        "libnccl",
        "libcufft",
        "libcurand",
        "libcusparse",
        "libcusolver",
        "libnvjpeg",
        "libnpp",
        "libnvrtc",
        "libcudart",
        "libnvJitLink",
        "libcufile",
        "libnvshmem",
        "libnvblas",
        "libcutensor",
        "libnvinfer",
        "libnvonnxparser",
        "libcudss",
        "libnvToolsExt",
        "libcupti",
        "libnvperf",
    ];
    PREFIXES.iter().any(|p| name.starts_with(p))
}

/// The CUDA major a runtime or math library SONAME names (`libcudart.so.13`, `libcublasLt.so.12`,
/// `libcudart.so.11.0`); None for libraries whose SONAME major is not the CUDA major (cuFFT,
/// cuSPARSE, cuRAND, cuDNN, NCCL: docs/cuda-binaries.md §5i).
pub fn cuda_major_of_soname(name: &str) -> Option<u16> {
    let (base, ver) = name.split_once(".so.")?;
    let major: u16 = ver.split('.').next()?.parse().ok()?;
    match base {
        "libcudart" | "libcublas" | "libcublasLt" | "libnvJitLink" | "libnvrtc" | "libnvblas" => {
            (9..=20).contains(&major).then_some(major)
        }
        _ => None,
    }
}

/// `/usr/lib/python3/site-packages/vllm/_C.so` -> `/usr/lib/python3/site-packages/vllm` (a Python
/// package's top-level directory); else the file itself: a library in a shared directory is
/// judged on its own.
fn group_dir(path: &str) -> String {
    for marker in ["/site-packages/", "/dist-packages/"] {
        if let Some(i) = path.find(marker) {
            let rest = &path[i + marker.len()..];
            if let Some((top, _)) = rest.split_once('/') {
                return format!("{}{top}", &path[..i + marker.len()]);
            }
        }
    }
    path.to_string()
}

fn version_of(s: &str) -> Option<CudaVersion> {
    CudaVersion::parse(s)
}

pub fn binary(f: &ImageFile) -> Binary {
    let r = &f.file;
    let found = crate::module::modules(r);
    let (kind, loadable) = (found.kind, found.loadable);
    let mut sass = BTreeSet::new();
    let mut ptx = BTreeSet::new();
    let mut ptx_bytes = 0;
    let mut isa: Option<(u16, u16)> = None;
    let mut toolkit: Option<CudaVersion> = None;
    let mut debug = false;
    // Architectures of the code the library keeps as data and loads itself: listed apart.
    let mut managed = BTreeSet::new();
    let mut note_entries = |c: &Container, count: bool, hidden: bool| {
        for e in c.images() {
            debug |= e.debug;
            if hidden && matches!(e.kind, EntryKind::Elf | EntryKind::Ptx) {
                managed.insert(e.arch.clone());
                continue;
            }
            match e.kind {
                EntryKind::Elf => {
                    sass.insert(e.arch.clone());
                    if let Some(t) = e.cubin.as_ref().and_then(|c| c.toolkit.as_deref()).and_then(version_of) {
                        toolkit = toolkit.max(Some(t));
                    }
                }
                EntryKind::Ptx => {
                    ptx.insert(e.arch.clone());
                    let v = (e.code_version[0], e.code_version[1]);
                    isa = isa.max(Some(v));
                    toolkit = toolkit.max(Some(tables::cuda_for_ptx_isa(v)));
                    if count {
                        ptx_bytes += ptx_size(e);
                    }
                }
                _ => {}
            }
        }
    };
    let mut containers: Vec<(&Container, bool)> = r.containers.iter().map(|c| (c, false)).collect();
    containers.extend(r.hidden_containers.iter().map(|c| (c, true)));
    for m in &r.members {
        containers.extend(m.containers.iter().map(|c| (c, false)));
    }
    for (c, hidden) in &containers {
        // A kernel-less device-link stub carries no code anyone runs: its archs are not listed.
        if c.kernel_less() {
            continue;
        }
        note_entries(c, loadable && !c.relocatable, *hidden);
    }
    // The modules the verdicts count; a bare cubin kept as data lists its arch apart.
    let modules: Vec<Module> = found.modules.into_iter().filter(Module::counts).collect();
    for m in &modules {
        if let Source::HiddenCubin(i) = m.source {
            managed.insert(r.hidden_cubins[i].cubin.arch());
        }
    }
    if loadable {
        if let Some(c) = &r.cubin {
            sass.insert(c.arch());
            if let Some(t) = c.toolkit.as_deref().and_then(version_of) {
                toolkit = toolkit.max(Some(t));
            }
        }
        if let Some(p) = &r.ptx {
            let v = (p.version[0], p.version[1]);
            ptx.insert(format!("compute_{}{}", p.sm, p.suffix.as_str()));
            isa = isa.max(Some(v));
            toolkit = toolkit.max(Some(tables::cuda_for_ptx_isa(v)));
            ptx_bytes += r.size;
            debug |= p.debug;
        }
    }
    let (kernel_less, hidden) = (found.kernel_less, found.hidden);
    let driver_lib = found.driver_library;
    let counted = |m: &&Module| driver_lib.is_empty() && m.loading != Loading::LibraryManaged;
    let cuda_needed: Vec<String> = r.elf.as_ref().map(|e| e.cuda_needed.clone()).unwrap_or_default();
    let cudart_major = r.cudart.as_ref().and_then(|c| CudaVersion::parse(&c.version)).map(|v| v.major);
    let cuda_major = cudart_major
        .or_else(|| cuda_needed.iter().filter_map(|n| cuda_major_of_soname(n)).max())
        .or(toolkit.map(|t| t.major))
        .unwrap_or(0);
    let pkg = f.package.as_ref();
    let (mut problems, mut detail_problems) = r.split_problems();
    if !loadable || !driver_lib.is_empty() {
        detail_problems.append(&mut problems);
        detail_problems.sort();
        detail_problems.dedup();
    }
    let problem_count = problems.len() as u64;
    let problem_examples: Vec<String> = problems.iter().take(3).cloned().collect();
    let facts = BinaryFacts {
        path: r.path.clone(),
        layer: f.layer.clone().unwrap_or_default(),
        kind: kind.to_string(),
        loadable,
        soname: r.elf.as_ref().and_then(|e| e.soname.clone()).unwrap_or_default(),
        symlinks: f.symlinks.clone(),
        modules: modules.iter().filter(counted).count() as u64,
        kernel_less_modules: kernel_less,
        hidden_modules: hidden,
        library_managed_modules: modules.iter().filter(|m| m.loading == Loading::LibraryManaged).count() as u64,
        package: pkg.map(|p| p.name.clone()).unwrap_or_default(),
        package_manager: pkg.map(|p| p.manager.to_string()).unwrap_or_default(),
        package_version: pkg.map(|p| p.version.clone()).unwrap_or_default(),
        group: pkg.map(|p| format!("{}:{}", p.manager, p.name)).unwrap_or_else(|| group_dir(&r.path)),
        vendor_library: vendor_library(file_name(&r.path))
            || pkg.is_some_and(|p| {
                p.name.starts_with("nvidia-") && matches!(p.manager, crate::packages::PackageManager::Pypi)
            }),
        cuda_major: u64::from(cuda_major),
        managed_archs: managed.into_iter().collect::<Vec<_>>().join(", "),
        archs: {
            let all: Vec<String> = sass.iter().chain(ptx.iter()).cloned().collect();
            if all.is_empty() { "none".into() } else { all.join(", ") }
        },
        ptx_portable: ptx.iter().filter(|p| !p.ends_with('a') && !p.ends_with('f')).cloned().collect(),
        sass: sass.into_iter().collect(),
        ptx: ptx.into_iter().collect(),
        ptx_bytes,
        ptx_isa: isa.map(compat::isa_string).unwrap_or_default(),
        toolkit: toolkit.map(|t| t.to_string()).unwrap_or_default(),
        cudart: r.cudart.as_ref().and_then(|c| {
            let v = CudaVersion::parse(&c.version)?;
            Some(CudartFacts {
                version: c.version.clone(),
                major: v.major,
                minor: v.minor,
                linkage: c.linkage.clone(),
                source: c.source.clone(),
            })
        }),
        debug,
        driver_library: driver_lib.to_string(),
        cuda_sign: r.cuda_sign || !modules.is_empty() || !cuda_needed.is_empty() || r.has_device_code(),
        problems,
        problem_count,
        problem_examples,
        detail_problems,
        not_loaded: String::new(),
        cuda_needed,
    };
    Binary { facts, modules }
}

pub fn target(t: &Target) -> TargetFacts {
    TargetFacts {
        name: t.name.clone(),
        cc: t.cc.to_string(),
        major: t.cc.major,
        minor: t.cc.minor,
        sm: t.cc.sm(),
        driver: t.driver.as_ref().map(|d| d.to_string()).unwrap_or_default(),
        driver_cuda: t.driver_cuda.map(|c| c.to_string()).unwrap_or_default(),
        blocked: false,
    }
}

pub fn jit_env(env: &std::collections::BTreeMap<String, String>) -> JitEnv {
    let on = |k: &str| env.get(k).is_some_and(|v| v == "1");
    JitEnv { force_ptx_jit: on("CUDA_FORCE_PTX_JIT"), disable_ptx_jit: on("CUDA_DISABLE_PTX_JIT") }
}

pub fn verdicts(b: &Binary, t: &Target, env: JitEnv) -> Vec<(String, Verdict)> {
    b.modules.iter().map(|m| (m.label.clone(), compat::decide(&m.images, t.cc, t.driver_cuda, env))).collect()
}

pub fn coverage(b: &Binary, t: &Target, env: JitEnv) -> Coverage {
    let counted: Vec<&Module> = b.counted().collect();
    let mut c = Coverage { modules: counted.len() as u64, ..Default::default() };
    let verdicts: Vec<Verdict> = counted.iter().map(|m| compat::decide(&m.images, t.cc, t.driver_cuda, env)).collect();
    let native_any = verdicts.iter().any(|v| matches!(v, Verdict::Native { .. }));
    let runs_any = verdicts.iter().any(Verdict::runs);
    // NVIDIA's closed libraries pick their kernels per GPU at run time: where their registered
    // code runs natively, a module that would JIT, needs a newer driver or has no image here is
    // their dispatch at work, not something a user can act on.
    let vendor_dispatch = b.facts.vendor_library && native_any;
    let mut cells = BTreeSet::new();
    let mut native = BTreeSet::new();
    let mut jit = BTreeSet::new();
    let mut arch_specific = BTreeSet::new();
    let mut needs: Option<CudaVersion> = None;
    let mut format_needs: Option<CudaVersion> = None;
    for (m, v) in counted.iter().zip(&verdicts) {
        if m.newer_only(t.cc) {
            c.newer_only += 1;
            let lo = m.images.iter().map(|i| i.cc).min();
            c.newer_from = match (c.newer_from, lo) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        let detail = match v {
            Verdict::Native { .. } => false,
            Verdict::NoImage { format_needs_cuda: Some(_), .. } => false,
            // A kernel set for newer GPUs only is NVIDIA's dispatch in their closed libraries; in
            // a package the user builds it is the mark of a stale list (CL002).
            Verdict::NoImage { .. } => {
                runs_any
                    && (vendor_dispatch
                        || m.specific_only()
                        || m.single_arch()
                        || (b.facts.vendor_library && m.newer_only(t.cc)))
            }
            Verdict::Jit { .. } | Verdict::PtxTooNew { .. } | Verdict::JitDisabled { .. } => vendor_dispatch,
        };
        if detail {
            c.expected_missing += 1;
            continue;
        }
        cells.insert(v.cell());
        match v {
            Verdict::Native { image } => {
                c.native += 1;
                native.insert(image.clone());
            }
            Verdict::Jit { image, needs_cuda, .. } => {
                c.jit += 1;
                jit.insert(image.clone());
                needs = needs.max(Some(*needs_cuda));
                c.jit_ptx_bytes += m.ptx_bytes;
            }
            Verdict::NoImage { arch_specific: a, format_needs_cuda: f, .. } => {
                c.no_image += 1;
                if let Some(f) = f {
                    c.format_too_new += 1;
                    format_needs = format_needs.max(Some(*f));
                } else if runs_any {
                    // A generic list that lacks the target while other modules run here: the
                    // mark of a translation unit built with a stale list.
                    c.gaps += 1;
                    if c.gap_examples.len() < 3 {
                        c.gap_examples.push(m.label.clone());
                    }
                }
                if !a.is_empty() {
                    c.arch_specific_only += 1;
                    arch_specific.extend(a.iter().cloned());
                }
            }
            Verdict::PtxTooNew { needs_cuda, .. } => {
                c.ptx_too_new += 1;
                needs = needs.max(Some(*needs_cuda));
            }
            Verdict::JitDisabled { .. } => c.jit_disabled += 1,
        }
        if !v.runs() && c.failing_examples.len() < 3 {
            c.failing_examples.push(m.label.clone());
        }
    }
    c.failing = c.no_image + c.ptx_too_new + c.jit_disabled;
    // What still decides: modules left after the dispatch detail.
    let decisive = c.modules - c.expected_missing;
    c.result = match (c.modules, c.failing) {
        (0, _) => "n/a",
        (_, 0) => "all",
        (_, f) if f == decisive => "none",
        _ => "some",
    }
    .into();
    c.class = match c.result.as_str() {
        "n/a" => "n/a",
        "none" => "none",
        _ if c.native == 0 => "jit",
        _ => "native",
    }
    .into();
    c.jit_ptx = human_size(c.jit_ptx_bytes);
    c.jit_cost = jit_cost(c.jit_ptx_bytes).into();
    c.cells = cells.into_iter().collect();
    c.native_images = native.into_iter().collect();
    c.jit_images = jit.into_iter().collect();
    c.arch_specific_images = arch_specific.into_iter().collect();
    c.needs_cuda = needs.map(|n| n.to_string()).unwrap_or_default();
    c.format_needs_cuda = format_needs.map(|n| n.to_string()).unwrap_or_default();
    c
}

/// PTX below this size JITs in well under a second: no cold start worth a warning (CL003).
pub const JIT_NOTICEABLE_BYTES: u64 = 1 << 20;

/// How long the driver's JIT takes for this much PTX, roughly, at first use in a new container
/// (ptxas compiles on the order of a MiB of PTX a second on one core; measured orders, not a
/// promise): `milliseconds`, `seconds`, `minutes`.
pub fn jit_cost(ptx_bytes: u64) -> &'static str {
    match ptx_bytes {
        b if b < JIT_NOTICEABLE_BYTES => "milliseconds",
        b if b < 64 << 20 => "seconds",
        _ => "minutes",
    }
}

/// `10.2 KiB`, `650.0 MiB`, `1.2 GiB`; bytes below 1 KiB as `512 B`.
pub fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut v = bytes as f64 / 1024.0;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.1} {}", UNITS[u])
}

/// Every counted module's code is 'a'/'f' code, none of it for this target: an optional
/// extension for other chips (FlashAttention-3 for Hopper in a serving stack).
pub fn specific_only(b: &Binary) -> bool {
    let mut any = false;
    for m in b.counted() {
        any = true;
        if !m.specific_only() {
            return false;
        }
    }
    any
}

/// The GPUs 'a'/'f' code runs on: `H100, H200, GH200` for sm_90a; the family for sm_100f.
pub fn chips_for(b: &Binary) -> String {
    let mut names: Vec<&str> = Vec::new();
    let mut archs = BTreeSet::new();
    for m in b.counted() {
        for i in &m.images {
            archs.insert(i.label());
            for g in gpus::GPUS.iter().filter(|g| !g.unconfirmed) {
                if compat::sass_runs(i.cc, i.suffix, g.cc) && !names.contains(&g.name) {
                    names.push(g.name);
                }
            }
        }
    }
    let archs: Vec<String> = archs.into_iter().collect();
    if names.is_empty() { archs.join(", ") } else { names.join(", ") }
}

pub fn runtime(b: &BinaryFacts, t: &Target) -> RuntimeFacts {
    let Some(rt) = &b.cudart else { return RuntimeFacts { satisfied: true, ..Default::default() } };
    let floor = tables::minor_compat_floor(rt.major);
    let satisfied = match (&t.driver, t.driver_cuda, floor) {
        (Some(d), _, Some((_, branch))) => d.branch() >= branch,
        (_, Some(c), _) => c.major >= rt.major,
        _ => true,
    };
    RuntimeFacts {
        version: rt.version.clone(),
        needs_driver: floor.map(|(v, _)| v.to_string()).unwrap_or_else(|| format!("a CUDA {}.x driver", rt.major)),
        satisfied,
    }
}

pub fn fix(targets: &[Target], driver: String) -> FixFacts {
    let ccs: Vec<Cc> = targets.iter().map(|t| t.cc).collect();
    let a: Option<ArchFix> = arch_fix(&ccs);
    FixFacts {
        torch_arch_list: a.as_ref().map(|a| a.torch_arch_list.clone()).unwrap_or_default(),
        gencode: a.as_ref().map(|a| a.gencode.clone()).unwrap_or_default(),
        archs: a.map(|a| a.archs).unwrap_or_default(),
        driver,
        action: String::new(),
    }
}

fn num(c: CudaVersion) -> u64 {
    u64::from(c.major) * 100 + u64::from(c.minor)
}

pub fn image(r: &ImageReport, binaries: &[Binary]) -> ImageFacts {
    let env = r.image.env.clone();
    let mut runtimes = BTreeSet::new();
    let mut majors = BTreeSet::new();
    let mut needs: Option<CudaVersion> = None;
    for b in binaries {
        if let Some(c) = &b.facts.cudart {
            runtimes.insert(format!("{} ({})", c.version, b.facts.path));
            majors.insert(c.major);
            needs = needs.max(Some(CudaVersion::new(c.major, 0)));
        }
        if let Some(t) = version_of(&b.facts.toolkit) {
            needs = needs.max(Some(CudaVersion::new(t.major, 0)));
        }
    }
    let require_cuda = env.get("NVIDIA_REQUIRE_CUDA").cloned().unwrap_or_default();
    let require_arch: String = ["NVIDIA_REQUIRE_ARCH", "NVIDIA_REQUIRE_CUDA"]
        .iter()
        .filter_map(|k| env.get(*k))
        .flat_map(|v| v.split_whitespace())
        .filter(|t| t.contains("arch"))
        .collect::<Vec<_>>()
        .join(" ");
    let jit = jit_env(&env);
    let uncovered = require::arch_ccs(&require_arch)
        .unwrap_or_default()
        .into_iter()
        .filter(|cc| {
            let t = Target { name: cc.to_string(), cc: *cc, driver: None, driver_cuda: None };
            binaries.iter().any(|b| !b.modules.is_empty() && coverage(b, &t, jit).failing > 0)
        })
        .map(|cc| cc.to_string())
        .collect();
    ImageFacts {
        name: r.image.name.clone().unwrap_or_default(),
        source: r.image.source.to_string(),
        platform: r.image.platform.clone().unwrap_or_default(),
        env,
        cuda_runtime_majors: majors.into_iter().collect(),
        cuda_runtimes: runtimes.into_iter().collect(),
        binaries: binaries.len() as u64,
        binaries_with_device_code: binaries.iter().filter(|b| !b.modules.is_empty()).count() as u64,
        require_cuda_weakest: require::cuda_weakest(&require_cuda).map(|c| c.to_string()).unwrap_or_default(),
        require_cuda_weakest_n: require::cuda_weakest(&require_cuda).map_or(0, num),
        require_cuda,
        needs_cuda: needs.map(|n| n.to_string()).unwrap_or_default(),
        needs_cuda_n: needs.map_or(0, num),
        require_arch,
        require_arch_uncovered: uncovered,
        jit_env: jit,
    }
}
