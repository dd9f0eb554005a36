//! The fact objects rules are written against (docs/facts.md): `image`, `binary`, `target`,
//! `runtime`, `fix` (`coverage` is its own file). Built from a scan's inventory; each is plain data (serde) that
//! CEL expressions read.

use std::collections::BTreeSet;

use serde::Serialize;

use super::targets::Target;
use crate::cuda::compat::{self, JitEnv};
use crate::cuda::fix::{ArchFix, arch_fix};
use crate::cuda::{Cc, CudaVersion, require, sorted_archs, tables};
use crate::image::{ImageFile, ImageReport};
use crate::inspect::fatbin::EntryKind;
use crate::inspect::{Container, libraries};
use crate::layer::path::file_name;
use crate::module::{Source, ptx_size};
use crate::schema::documented;
// The module model lives in `crate::module`; these paths stay for the rules and reports.
pub use crate::module::{DriverLibrary, FileKind, Loading, Module, container_images, driver_library, image_of};

#[derive(Debug, Clone, Serialize)]
pub struct CudartFacts {
    pub version: String,
    pub major: u16,
    pub minor: u16,
    pub linkage: crate::inspect::Linkage,
    pub source: String,
}

documented! {
    #[derive(Debug, Clone, Default, Serialize)]
    pub struct BinaryFacts {
        /// path inside the image
        pub path: String,
        /// the layer it comes from (digest or archive path), empty if unknown
        pub layer: String,
        /// the Dockerfile step that made that layer, as `docker history` shows it (`RUN pip
        /// install flash-attn`), from the image config's history; empty if unknown
        pub step: String,
        /// it was most likely compiled while the image was built: no package record owns it and
        /// its step runs a compiler or a source build (nvcc, cmake, make, ninja, setup.py, a pip
        /// install that may build from source), where no GPU is visible to pick architectures
        pub built_in_image: bool,
        /// shared-object, executable, object, archive, cubin, fatbin, ptx, other
        pub kind: FileKind,
        /// loaded as is at run time (not an object file or a static archive)
        pub loadable: bool,
        /// `DT_SONAME`, empty if none
        pub soname: String,
        /// links in the image that point at it
        pub symlinks: Vec<String>,
        /// modules that count for coverage: kernel-less device-link stubs and relocatable material excluded
        pub modules: u64,
        /// device-link stubs without kernels
        pub kernel_less_modules: u64,
        /// hidden fatbin containers (not reached from the registration wrappers)
        pub hidden_modules: u64,
        /// modules the library loads itself (hidden containers and cubins kept as data): detail only
        pub library_managed_modules: u64,
        /// the package that installed the file, empty if none known
        pub package: String,
        /// its manager (`pypi`, `deb`, `conda`, `rpm`)
        pub package_manager: String,
        /// its version
        pub package_version: String,
        /// its package URL (`pkg:rpm/rhel/cuda-cudart-12-9@12.9.79-1?arch=x86_64&distro=rhel-9.4`)
        pub package_purl: String,
        /// what the binary is judged together with: its package, else its Python top-level directory
        /// (`site-packages/vllm`), else its directory
        pub group: String,
        /// one of NVIDIA's closed-source libraries (cuBLAS, cuDNN, NCCL ...): it cannot be rebuilt, only replaced
        pub vendor_library: bool,
        /// the CUDA major it was built with or links (runtime, toolkit notes, PTX ISA), 0 if unknown
        pub cuda_major: u64,
        /// SASS architectures, sorted (`["sm_80", "sm_90a"]`)
        pub sass: Vec<String>,
        /// PTX architectures, sorted (`["compute_90"]`)
        pub ptx: Vec<String>,
        /// PTX without an 'a'/'f' suffix: what future GPUs can compile
        pub ptx_portable: Vec<String>,
        /// both lists as one string for messages (`sm_80, sm_90, compute_90`, or `none`); library-managed code is not
        /// in them
        pub archs: String,
        /// architectures of library-managed modules (`sm_70, sm_86`), empty if none
        pub managed_archs: String,
        /// uncompressed bytes of PTX
        pub ptx_bytes: u64,
        /// newest PTX ISA carried (`9.0`), empty if none
        pub ptx_isa: String,
        /// newest CUDA release the device code comes from (PTX ISA, cubin notes), empty if unknown
        pub toolkit: String,
        /// `{version, major, minor, linkage, source}` of the CUDA runtime it uses, or null
        pub cudart: Option<CudartFacts>,
        /// device code compiled with `-G`
        pub debug: bool,
        /// `libcuda`, `libnvidia`, `cuda-compat` when the file belongs to the host driver, else empty
        pub driver_library: DriverLibrary,
        /// CUDA libraries in its `DT_NEEDED`
        pub cuda_needed: Vec<String>,
        /// the file shows some sign of CUDA (device code, CUDA sections or wrappers, a CUDA `DT_NEEDED`, fatbin magic
        /// in a loaded segment)
        pub cuda_sign: bool,
        /// what the inspector could not read in full in the code that decides whether the file runs (its own structure,
        /// registered containers, a standalone cubin), sorted; empty for driver libraries, archives and objects
        pub problems: Vec<String>,
        /// how many `problems`
        pub problem_count: u64,
        /// the first three `problems`, for messages
        pub problem_examples: Vec<String>,
        /// problems in everything else (data the library keeps and loads itself, archive members, driver libraries):
        /// detail, never a finding
        pub detail_problems: Vec<String>,
        /// for a version-selected sibling the loader does not pick: the one it picks, or what loads instead (empty otherwise)
        pub not_loaded: String,
        /// on the sibling that stands for its group: the file the package's loader looks for and the image lacks (`libbitsandbytes_cuda128.so`)
        pub sibling_missing: String,
        /// what the package does then: `falls back to libbitsandbytes_cpu.so: its GPU functions are unavailable`
        pub sibling_effect: String,
        /// whose loader, and the knowledge row that says how it picks: `bitsandbytes 0.45.5 (knowledge: stack.toml:LINE)`
        pub sibling_loader: String,
        /// what it goes by: `torch's CUDA 12.8`, `BNB_CUDA_VERSION=128`
        pub sibling_why: String,
        /// the variable setting that picks the newest sibling the image has instead: `BNB_CUDA_VERSION=126` (empty when its loader reads none)
        pub sibling_instead: String,
        /// the `*.dist-info/variant.json` of the wheel that installed it (wheel variants, PEP 825 draft), empty if none
        pub variant_json: String,
        /// the variant properties that file declares (`nvidia :: sm_arch :: 90_real`), sorted
        pub variant_declared: Vec<String>,
        /// declared `nvidia :: sm_arch` properties that let a resolver install the wheel on GPUs where some module of
        /// this binary has no code that runs (no SASS for the GPU, no PTX that compiles for it)
        pub variant_unsupported: Vec<String>,
        /// the compute capabilities of those GPUs (`10.0`, `10.3`)
        pub variant_unsupported_ccs: Vec<String>,
        /// the declared `nvidia :: cuda_version_lower_bound`, empty if none
        pub variant_lower_bound: String,
        /// the driver CUDA version this binary needs (its runtime, CUDA libraries, device code) when the declared
        /// lower bound is below it; empty otherwise
        pub variant_needs_cuda: String,
    }
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
        let driver = self.facts.driver_library.is_driver();
        self.modules.iter().filter(move |m| !driver && m.loading != Loading::LibraryManaged)
    }
}

documented! {
    #[derive(Debug, Clone, Serialize)]
    pub struct ImageFacts {
        /// the image reference or file it was read from, empty if none
        pub name: String,
        /// how it was read: docker-archive, oci-archive, oci, dir, file, wheel, lock
        pub source: String,
        /// a lockfile's packages with no wheel for the platform and Python (pip builds them at install time) whose
        /// build compiles no CUDA code cudalint knows of: `antlr4-python3-runtime 4.9.3`
        pub unbuilt: Vec<String>,
        /// those whose build compiles CUDA code (the knowledge base's `[[source_build]]`), each with the variable
        /// that sets its architectures: `flash-attn 2.8.3 (FLASH_ATTN_CUDA_ARCHS; without it: 80;90;100;120 ...)`
        pub unbuilt_cuda: Vec<String>,
        /// `linux/amd64`, empty if unknown
        pub platform: String,
        /// map of the config's CUDA-related environment variables
        pub env: std::collections::BTreeMap<String, String>,
        /// list of ints: the majors of every CUDA runtime in the image (shared libcudart files and static copies)
        pub cuda_runtime_majors: Vec<u16>,
        /// list of `version (path)`
        pub cuda_runtimes: Vec<String>,
        /// files the scan found with CUDA content
        pub binaries: u64,
        /// those that carry device code
        pub binaries_with_device_code: u64,
        /// `NVIDIA_REQUIRE_CUDA` as set
        pub require_cuda: String,
        /// the requirements the NVIDIA container toolkit checks before it starts the container, `NAME="value"` joined by ` and `: every `NVIDIA_REQUIRE_*` variable but `NVIDIA_REQUIRE_JETPACK*`, and `CUDA_VERSION="12.4.1" (read as "cuda>=12.4")` for an image with `CUDA_VERSION` and an empty or no `NVIDIA_REQUIRE_CUDA`; empty when none or `NVIDIA_DISABLE_REQUIRE` is true
        pub require: String,
        /// why libnvidia-container rejects one of them as an invalid expression (`NAME: reason`), empty when it accepts them all
        pub require_error: String,
        /// the oldest driver CUDA version they admit together (their `cuda` and `driver` lower bounds)
        pub require_cuda_weakest: String,
        /// the same as `major*100+minor`, 0 when not set
        pub require_cuda_weakest_n: u64,
        /// `too-loose` (they admit drivers older than the content needs), `too-strict` (they refuse every driver of the CUDA major the content needs; a stricter minor is not counted), `invalid` (`require_error`), or empty
        pub require_cuda_problem: String,
        /// newest CUDA major the content needs from the driver (runtimes, device code), `13.0`
        pub needs_cuda: String,
        /// the same as `major*100+minor`
        pub needs_cuda_n: u64,
        /// the requirements that constrain `arch`, their values joined by ` and `
        pub require_arch: String,
        /// known compute capabilities they admit, empty when they do not constrain `arch`
        pub require_arch_admits: Vec<String>,
        /// known compute capabilities they admit that some binary cannot run on
        pub require_arch_uncovered: Vec<String>,
        /// known compute capabilities they refuse on which every binary with device code runs (SASS or PTX JIT)
        pub require_arch_refused: Vec<String>,
        /// the shortest requirement admitting exactly drivers of `needs_cuda` and newer on the known compute capabilities where every binary with device code runs (`require::constraint`), empty without device code or arch constraints
        pub require_exact: String,
        /// `{force_ptx_jit, disable_ptx_jit}` from `CUDA_FORCE_PTX_JIT` / `CUDA_DISABLE_PTX_JIT`
        pub jit_env: JitEnv,
    }
}

documented! {
    #[derive(Debug, Clone, Serialize)]
    pub struct TargetFacts {
        /// what the user called it: `H100`, `sm_90`, `node-a (NVIDIA A10G)`; a Kubernetes node pool (`--targets-from
        /// nodes.json`, `audit`) by its GPU, qualified where pools share it (`NVIDIA L4 in l4-legacy`, `NVIDIA L4 on
        /// driver 535.104.05`)
        pub name: String,
        /// the GPU's name: a pool's GPU (`NVIDIA L4`), else `name`
        pub gpu: String,
        /// the node group a pool's name gives (`l4-legacy`), empty otherwise
        pub group: String,
        /// what a sentence that says the driver on its own calls it: a pool by `gpu` and `group` (`NVIDIA L4`,
        /// `NVIDIA L4 in l4-legacy`), never by its driver; else `name`
        pub called: String,
        /// what a fix that changes the driver acts on: a pool's nodes with their driver (`the NVIDIA L4 nodes (driver
        /// 535.104.05)`), else `name`
        pub nodes: String,
        /// compute capability, `"9.0"`
        pub cc: String,
        /// its major (9)
        pub major: u8,
        /// its minor (0)
        pub minor: u8,
        /// as a number (90)
        pub sm: u32,
        /// `"535.104.05"`, empty if not known
        pub driver: String,
        /// the driver's CUDA version (`"12.2"`), empty if not known
        pub driver_cuda: String,
        /// an image-level finding fails this target before any kernel runs (driver floor, a driver that cannot drive
        /// the GPU): driver-dependent per-binary verdicts step aside, architecture ones say `even with a driver that
        /// runs the image`
        pub blocked: bool,
    }
}

documented! {
    #[derive(Debug, Clone, Default, Serialize)]
    pub struct RuntimeFacts {
        /// the runtime the binary uses (`12.9`), empty if unknown
        pub version: String,
        /// oldest driver that runs it (minor-version compatibility floor of its major)
        pub needs_driver: String,
        /// false when the target's declared driver is older than that
        pub satisfied: bool,
    }
}

documented! {
    #[derive(Debug, Clone, Default, Serialize)]
    pub struct FixFacts {
        /// smallest list covering every target, `"8.6;9.0+PTX"`
        pub torch_arch_list: String,
        /// the same as nvcc `-gencode` flags
        pub gencode: String,
        /// the architectures it names
        pub archs: Vec<String>,
        /// the driver the problem at hand needs (PTX 222, runtime 35), when there is one
        pub driver: String,
        /// what to do so this binary runs on the failing targets: the package build to install, or the architecture
        /// list to rebuild with (keeping what it carries)
        pub action: String,
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

/// Whether a Dockerfile step compiles code: a compiler, a build system, or a Python install that
/// may build an extension from source.
fn builds_from_source(step: &str) -> bool {
    let s = step.to_ascii_lowercase();
    let words: Vec<&str> =
        s.split(|c: char| c.is_whitespace() || ";&|()".contains(c)).filter(|w| !w.is_empty()).collect();
    let tool = |w: &&str| {
        let base = w.rsplit('/').next().unwrap_or(w);
        ["nvcc", "cmake", "make", "ninja", "setup.py", "build_ext"].contains(&base)
    };
    let install = words
        .windows(2)
        .any(|p| matches!(p[0].rsplit('/').next(), Some("pip" | "pip3")) && p[1] == "install" || p == ["-m", "build"]);
    s.starts_with("run ") && (words.iter().any(tool) || install)
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
    let counted = |m: &&Module| !driver_lib.is_driver() && m.loading != Loading::LibraryManaged;
    let cuda_needed: Vec<String> = r.elf.as_ref().map(|e| e.cuda_needed.clone()).unwrap_or_default();
    let cudart_major = r.cudart.as_ref().and_then(|c| CudaVersion::parse(&c.version)).map(|v| v.major);
    let cuda_major = cudart_major
        .or_else(|| cuda_needed.iter().filter_map(|n| libraries::cuda_major_of_soname(n)).max())
        .or(toolkit.map(|t| t.major))
        .unwrap_or(0);
    let pkg = f.package.as_ref();
    let (mut problems, mut detail_problems) = r.split_problems();
    if !loadable || driver_lib.is_driver() {
        detail_problems.append(&mut problems);
        detail_problems.sort();
        detail_problems.dedup();
    }
    let problem_count = problems.len() as u64;
    let problem_examples: Vec<String> = problems.iter().take(3).cloned().collect();
    let facts = BinaryFacts {
        path: r.path.clone(),
        layer: f.layer.clone().unwrap_or_default(),
        step: f.step.clone().unwrap_or_default(),
        built_in_image: f.package.is_none() && f.step.as_deref().is_some_and(builds_from_source),
        kind,
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
        package_purl: pkg.map(|p| p.purl.clone()).unwrap_or_default(),
        group: pkg.map(|p| format!("{}:{}", p.manager, p.name)).unwrap_or_else(|| group_dir(&r.path)),
        vendor_library: libraries::closed_source(file_name(&r.path))
            || pkg.is_some_and(|p| {
                crate::knowledge::get().vendor_package(&p.name)
                    && matches!(p.manager, crate::packages::PackageManager::Pypi)
            }),
        cuda_major: u64::from(cuda_major),
        managed_archs: sorted_archs(managed).join(", "),
        archs: {
            let all: Vec<String> = sorted_archs(sass.iter().chain(ptx.iter()).cloned());
            if all.is_empty() { "none".into() } else { all.join(", ") }
        },
        ptx_portable: sorted_archs(ptx.iter().filter(|p| !p.ends_with('a') && !p.ends_with('f')).cloned()),
        sass: sorted_archs(sass),
        ptx: sorted_archs(ptx),
        ptx_bytes,
        ptx_isa: isa.map(compat::isa_string).unwrap_or_default(),
        toolkit: toolkit.map(|t| t.to_string()).unwrap_or_default(),
        cudart: r.cudart.as_ref().and_then(|c| {
            let v = CudaVersion::parse(&c.version)?;
            Some(CudartFacts {
                version: c.version.clone(),
                major: v.major,
                minor: v.minor,
                linkage: c.linkage,
                source: c.source.clone(),
            })
        }),
        debug,
        driver_library: driver_lib,
        cuda_sign: r.cuda_sign || !modules.is_empty() || !cuda_needed.is_empty() || r.has_device_code(),
        problems,
        problem_count,
        problem_examples,
        detail_problems,
        not_loaded: String::new(),
        sibling_missing: String::new(),
        sibling_effect: String::new(),
        sibling_loader: String::new(),
        sibling_why: String::new(),
        sibling_instead: String::new(),
        cuda_needed,
        // Filled in with the inventory's variant metadata (`variants::annotate`).
        variant_json: String::new(),
        variant_declared: Vec::new(),
        variant_unsupported: Vec::new(),
        variant_unsupported_ccs: Vec::new(),
        variant_lower_bound: String::new(),
        variant_needs_cuda: String::new(),
    };
    Binary { facts, modules }
}

pub fn target(t: &Target) -> TargetFacts {
    TargetFacts {
        name: t.name.clone(),
        gpu: t.gpu().to_string(),
        group: t.group().unwrap_or_default().to_string(),
        called: t.called(),
        nodes: t.nodes(),
        cc: t.cc.to_string(),
        major: t.cc.major,
        minor: t.cc.minor,
        sm: t.cc.sm(),
        driver: t.driver.as_ref().map(|d| d.to_string()).unwrap_or_default(),
        driver_cuda: t.driver_cuda.map(|c| c.to_string()).unwrap_or_default(),
        blocked: false,
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

/// The image's requirements as the container toolkit checks them (`require::from_env`), each
/// parsed: all must hold.
struct Requirements {
    shown: Vec<String>,
    parsed: Vec<(String, require::Requirement)>,
    error: String,
}

impl Requirements {
    fn from_env(env: &std::collections::BTreeMap<String, String>) -> Requirements {
        let mut r = Requirements { shown: Vec::new(), parsed: Vec::new(), error: String::new() };
        for (var, text) in require::from_env(env) {
            r.shown.push(match env.get(&var).filter(|_| var == "CUDA_VERSION") {
                Some(v) => format!("{var}=\"{v}\" (read as \"{text}\")"),
                None => format!("{var}=\"{text}\""),
            });
            match require::parse(&text) {
                Ok(p) => r.parsed.push((text, p)),
                Err(e) if r.error.is_empty() => r.error = format!("{var}: {e}"),
                Err(_) => {}
            }
        }
        r
    }

    fn shown(&self) -> String {
        self.shown.join(" and ")
    }

    /// The oldest driver CUDA version all admit, from those that bound it at all.
    fn cuda_weakest(&self) -> Option<CudaVersion> {
        self.parsed.iter().filter(|(_, p)| p.has_cuda_floor()).filter_map(|(_, p)| p.cuda_weakest()).max()
    }

    fn arch_shown(&self) -> String {
        let arch: Vec<&str> = self.parsed.iter().filter(|(_, p)| p.has_arch()).map(|(t, _)| t.as_str()).collect();
        arch.join(" and ")
    }

    /// Known compute capabilities all admit; `None` when none constrains `arch`.
    fn arch_admits(&self) -> Option<BTreeSet<Cc>> {
        self.parsed.iter().any(|(_, p)| p.has_arch()).then(|| {
            require::known_ccs().into_iter().filter(|cc| self.parsed.iter().all(|(_, p)| p.admits_arch(*cc))).collect()
        })
    }
}

/// Judges the requirements against the content, once the driver floor (`needs_cuda`) is final:
/// `require_cuda_problem`, and with `runs` (the known compute capabilities on which every binary
/// with device code runs, `run::runs_on`; `None` without device code or arch constraints)
/// the arch findings and `require_exact`.
pub fn require_judgement(image: &mut ImageFacts, runs: Option<&BTreeSet<Cc>>) {
    let needs = image.needs_cuda_n;
    let weakest = image.require_cuda_weakest_n;
    image.require_cuda_problem = if !image.require_error.is_empty() {
        "invalid"
    } else if image.require_cuda_weakest.is_empty() || needs == 0 {
        ""
    } else if needs > weakest {
        "too-loose"
    } else if weakest / 100 > needs / 100 {
        "too-strict"
    } else {
        ""
    }
    .to_string();
    let Some(runs) = runs else { return };
    let admits: BTreeSet<Cc> = image.require_arch_admits.iter().filter_map(|c| Cc::parse(c)).collect();
    if !admits.is_empty() {
        image.require_arch_uncovered = admits.difference(runs).map(Cc::to_string).collect();
        image.require_arch_refused = runs.difference(&admits).map(Cc::to_string).collect();
    }
    let cuda = CudaVersion::parse(&image.needs_cuda).unwrap_or(CudaVersion::new(0, 0));
    image.require_exact = require::constraint(cuda, runs);
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
    let req = Requirements::from_env(&env);
    let jit = JitEnv::from_env(&env);
    let known = crate::knowledge::get();
    let (cuda_src, plain_src): (Vec<&String>, Vec<&String>) =
        r.image.unbuilt.iter().partition(|u| known.source_build(u.split(' ').next().unwrap_or_default()).is_some());
    ImageFacts {
        name: r.image.name.clone().unwrap_or_default(),
        source: r.image.source.to_string(),
        unbuilt: plain_src.into_iter().cloned().collect(),
        unbuilt_cuda: cuda_src
            .into_iter()
            .map(|u| {
                let s = known.source_build(u.split(' ').next().unwrap_or_default()).expect("partitioned");
                format!("{u} ({}; without it: {})", s.variable, s.default)
            })
            .collect(),
        platform: r.image.platform.clone().unwrap_or_default(),
        env,
        cuda_runtime_majors: majors.into_iter().collect(),
        cuda_runtimes: runtimes.into_iter().collect(),
        binaries: binaries.len() as u64,
        binaries_with_device_code: binaries.iter().filter(|b| !b.modules.is_empty()).count() as u64,
        require_cuda,
        require: req.shown(),
        require_error: req.error.clone(),
        require_cuda_weakest: req.cuda_weakest().map(|c| c.to_string()).unwrap_or_default(),
        require_cuda_weakest_n: req.cuda_weakest().map_or(0, num),
        // Judged once the driver floor is known (`require_judgement`).
        require_cuda_problem: String::new(),
        needs_cuda: needs.map(|n| n.to_string()).unwrap_or_default(),
        needs_cuda_n: needs.map_or(0, num),
        require_arch: req.arch_shown(),
        require_arch_admits: req.arch_admits().map(|s| s.iter().map(Cc::to_string).collect()).unwrap_or_default(),
        // Filled in once coverage can be judged (`require_judgement`).
        require_arch_uncovered: Vec::new(),
        require_arch_refused: Vec::new(),
        require_exact: String::new(),
        jit_env: jit,
    }
}
