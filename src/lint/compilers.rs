//! The code an image compiles at run time: which run-time compiler each installed consumer
//! (vLLM and torch.compile through Triton, torch's jiterator and CuPy through NVRTC) resolves,
//! and whether that compiler can emit code for a target and its driver load it
//! (`compiler` in rules of scope `compiler-target`; rules/compilers/runtime-compilers.toml).

use serde::Serialize;

use super::targets::Target;
use crate::cuda::toolchains::{self, CompilePath, Table, triton_target};
use crate::cuda::{CudaVersion, tables};
use crate::image::ImageReport;
use crate::inspect::toolchain::CompilerKind;
use crate::layer::path::{file_name, parent};
use crate::packages::Package;
use crate::schema::documented;

/// A run-time compiler found in the image.
#[derive(Debug, Clone, Serialize)]
pub struct Found {
    pub path: String,
    /// ptxas, nvcc, nvrtc, nvjitlink, nvptxcompiler.
    pub kind: CompilerKind,
    /// `12.8.93`, empty if unknown.
    pub version: String,
    /// banner, file-name, package.
    pub source: String,
    /// The package that installed it: `triton 3.4.0`.
    pub package: String,
}

/// Every run-time compiler in the image, sorted by path; a version nothing in the file says is
/// taken from the package that owns it (source `package`).
pub fn inventory(scan: &ImageReport) -> Vec<Found> {
    let mut out: Vec<Found> = scan
        .files
        .iter()
        .filter_map(|f| {
            let t = f.file.toolchain.as_ref()?;
            let pkg = f.package.as_ref();
            let (version, source) = match (t.version.is_empty(), pkg) {
                (true, Some(p)) if p.name.starts_with("nvidia-") && !p.version.is_empty() => {
                    (p.version.clone(), "package".to_string())
                }
                _ => (t.version.clone(), t.source.clone()),
            };
            Some(Found {
                path: f.file.path.clone(),
                kind: t.kind,
                version,
                source,
                package: pkg.map(|p| format!("{} {}", p.name, p.version)).unwrap_or_default(),
            })
        })
        .collect();
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

documented! {
    /// One consumer's run-time compiler on one target (`compiler` in rules).
    #[derive(Debug, Clone, Default, Serialize)]
    pub struct CompilerFacts {
        /// the package that compiles at run time: `vllm`, `torch`, `cupy-cuda12x`
        pub consumer: String,
        /// its version
        pub consumer_version: String,
        /// what fails when the compiler cannot: `torch.compile / Triton kernels`
        pub what: String,
        /// the package's work goes through this compiler (vLLM, CuPy), rather than one path of several
        pub central: bool,
        /// ptxas, nvrtc
        pub kind: String,
        /// the compiler it resolves, in the image
        pub path: String,
        /// its version: `12.8.93`
        pub version: String,
        /// where the version comes from: banner (its own bytes), file-name, package
        pub source: String,
        /// how it was chosen: `bundled with triton 3.4.0`, `TRITON_PTXAS_PATH`, the loader's order
        pub chosen_by: String,
        /// what it is asked to emit for the target: `sm_103a`
        pub target_arch: String,
        /// the table knows this compiler release (else nothing is judged: `why` may say what is missing)
        pub known: bool,
        /// it can emit code that runs on the target
        pub knows_target: bool,
        /// why not, briefly: `triton 3.4.0's ptxas 12.8 knows no sm_103a`
        pub why: String,
        /// the smallest change that makes it work (a package release, an environment override)
        pub fix: String,
        /// what the target's driver cannot load of the compiler's output (empty: it can)
        pub driver_problem: String,
    }
}

impl CompilerFacts {
    /// The compiler the consumer resolves, and how.
    fn resolved(&mut self, c: &Found, how: String) {
        self.path = c.path.clone();
        self.version = c.version.clone();
        self.source = c.source.clone();
        self.chosen_by = how;
    }

    /// Whether the table knows this ptxas release and it assembles `arch` (`103a`); its release.
    fn judge_ptxas(&mut self, t: &Table, arch: &str) -> Option<CudaVersion> {
        let release = CudaVersion::parse(&self.version);
        let row = release.and_then(|r| t.ptxas(r));
        self.known = row.is_some();
        self.knows_target = row.is_some_and(|r| r.targets.iter().any(|x| x == arch));
        release
    }
}

fn pkg<'a>(scan: &'a ImageReport, name: &str) -> Option<&'a Package> {
    scan.cuda_packages.iter().find(|p| matches!(p.manager, crate::packages::PackageManager::Pypi) && p.name == name)
}

/// Triton's ptxas for `cc`: the bundled one its selection rule picks, or the override the image's
/// environment names (when that file is an inventoried ptxas).
fn triton_ptxas<'a>(
    t: &Table,
    scan: &ImageReport,
    found: &'a [Found],
    triton: &Package,
    target: &Target,
) -> Option<(&'a Found, String)> {
    let sel = t.triton_selection(&triton.version);
    let blackwell = sel.is_some_and(|s| s.blackwell_from > 0 && target.cc.sm() >= s.blackwell_from);
    let name = if blackwell { "ptxas-blackwell" } else { "ptxas" };
    let env = sel.map(|s| if blackwell { s.blackwell_env.as_str() } else { s.ptxas_env.as_str() }).unwrap_or("");
    if let Some(p) = scan.image.env.get(env)
        && let Some(f) = found.iter().find(|f| f.kind == CompilerKind::Ptxas && f.path == *p)
    {
        return Some((f, env.to_string()));
    }
    let bundled = found.iter().find(|f| {
        f.kind == CompilerKind::Ptxas
            && file_name(&f.path) == name
            && (f.path.contains("/triton/backends/nvidia/bin/") || f.path.contains("/triton/third_party/cuda/bin/"))
    })?;
    Some((bundled, format!("bundled with triton {}", triton.version)))
}

/// The NVRTC a consumer loads: for CuPy before 14 the loader's order (`LD_LIBRARY_PATH`, then
/// system directories, then the pip wheel torch preloads); otherwise the pip wheel first.
fn nvrtc_for<'a>(
    scan: &ImageReport,
    found: &'a [Found],
    consumer: &Package,
    major: Option<u16>,
) -> Option<(&'a Found, String)> {
    let libs: Vec<&Found> = found
        .iter()
        .filter(|f| f.kind == CompilerKind::Nvrtc && !file_name(&f.path).starts_with("libnvrtc.alt"))
        .filter(|f| major.is_none_or(|m| CudaVersion::parse(&f.version).is_none_or(|v| v.major == m)))
        .collect();
    let pip = |f: &&&Found| f.path.contains("/site-packages/") || f.path.contains("/dist-packages/");
    let ld: Vec<String> = scan
        .image
        .env
        .get("LD_LIBRARY_PATH")
        .map(|v| v.split(':').map(|d| d.trim_end_matches('/').to_string()).collect())
        .unwrap_or_default();
    let cupy_old = consumer.name.starts_with("cupy") && toolchains::version_key(&consumer.version) < (14, 0, 0);
    if cupy_old {
        if let Some(f) = libs.iter().find(|f| ld.iter().any(|d| d == parent(&f.path))) {
            return Some((f, "LD_LIBRARY_PATH".into()));
        }
        if let Some(f) = libs.iter().find(|f| !pip(f)) {
            return Some((f, "the loader's search (system directories before the pip wheel)".into()));
        }
    }
    libs.iter().find(pip).or(libs.first()).map(|f| (*f, "the pip wheel (site-packages)".to_string()))
}

/// The CUDA major of the image's torch build (`+cu128` or its `-cuNN` NVIDIA wheels).
fn torch_major(scan: &ImageReport) -> Option<u16> {
    if let Some(t) = pkg(scan, "torch")
        && let Some(cu) = t.version.split_once("+cu")
    {
        return cu.1.get(..2).and_then(|m| m.parse().ok());
    }
    scan.cuda_packages
        .iter()
        .filter(|p| p.name.starts_with("nvidia-cuda-"))
        .filter_map(|p| p.name.rsplit_once("-cu").and_then(|(_, m)| m.parse().ok()))
        .max()
}

/// Every installed consumer's run-time compiler judged on `target`.
pub fn judge(scan: &ImageReport, found: &[Found], target: &Target) -> Vec<CompilerFacts> {
    let t = toolchains::table();
    let mut out = Vec::new();
    for c in &t.consumer {
        let Some(consumer) = pkg(scan, &c.package) else { continue };
        let mut f = CompilerFacts {
            consumer: consumer.name.clone(),
            consumer_version: consumer.version.clone(),
            what: c.what.clone(),
            central: c.central,
            kind: match c.compiler {
                CompilePath::Triton | CompilePath::Xla => CompilerKind::Ptxas,
                CompilePath::Nvrtc => CompilerKind::Nvrtc,
            }
            .to_string(),
            ..Default::default()
        };
        let driver_cuda = target.driver_cuda;
        match c.compiler {
            CompilePath::Triton => {
                let Some(triton) = pkg(scan, "triton").or_else(|| pkg(scan, "pytorch-triton")) else { continue };
                let Some((ptxas, how)) = triton_ptxas(t, scan, found, triton, target) else {
                    // Listed, not judged: what Triton would run is not in the image.
                    f.kind = CompilerKind::Ptxas.to_string();
                    f.why = format!("no ptxas of triton {} found in the image", triton.version);
                    out.push(f);
                    continue;
                };
                f.kind = CompilerKind::Ptxas.to_string();
                f.resolved(ptxas, how);
                let arch = triton_target(target.cc);
                f.target_arch = format!("sm_{arch}");
                let release = f.judge_ptxas(t, &arch);
                let rel = release.map(|r| r.to_string()).unwrap_or_default();
                if f.known && !f.knows_target {
                    f.why = format!("triton {}'s ptxas {rel} knows no {}", triton.version, f.target_arch);
                    f.fix = triton_fix(t, triton, target, &arch);
                }
                // Cubins of a CUDA 13 ptxas load on a CUDA 13 driver only (CUDA_ERROR_INVALID_IMAGE).
                if let (Some(r), Some(d)) = (release, driver_cuda)
                    && f.knows_target
                    && r.major > d.major
                {
                    let need = tables::minor_compat_floor(r.major)
                        .map(|(v, _)| v.to_string())
                        .unwrap_or_else(|| format!("a CUDA {}.x driver", r.major));
                    f.driver_problem = format!(
                        "triton {} assembles {} with ptxas {rel} (CUDA {}), whose cubins a CUDA {d} driver cannot load (CUDA_ERROR_INVALID_IMAGE): it needs driver {need} or newer",
                        triton.version, f.target_arch, r.major
                    );
                    let sel = t.triton_selection(&triton.version);
                    let blackwell = sel.is_some_and(|s| s.blackwell_from > 0 && target.cc.sm() >= s.blackwell_from);
                    let env = sel.map(|s| if blackwell { s.blackwell_env.clone() } else { s.ptxas_env.clone() });
                    let same_major = t
                        .ptxas
                        .iter()
                        .rfind(|p| p.release.starts_with(&format!("{}.", d.major)) && p.targets.contains(&arch));
                    f.fix = match (same_major, env) {
                        (Some(p), Some(env)) => format!(
                            "upgrade the driver on {} to {need} or newer, or set {env} to the ptxas of nvidia-cuda-nvcc-cu{}=={}.* (CUDA {} cubins load on this driver; it knows {})",
                            target.nodes(),
                            d.major,
                            p.release,
                            d.major,
                            f.target_arch
                        ),
                        _ => format!("upgrade the driver on {} to {need} or newer", target.nodes()),
                    };
                }
            }
            CompilePath::Nvrtc => {
                let major = if c.package == "torch" { torch_major(scan) } else { None };
                let Some((nvrtc, how)) = nvrtc_for(scan, found, consumer, major) else {
                    f.why = "no NVRTC found in the image (it may come from the host or a later layer)".into();
                    out.push(f);
                    continue;
                };
                f.resolved(nvrtc, how);
                let Some(release) = CudaVersion::parse(&nvrtc.version) else {
                    f.why = "its version is unknown: not judged".into();
                    out.push(f);
                    continue;
                };
                let row = t.nvrtc(release);
                f.known = row.is_some();
                let sm = target.cc.sm();
                let asked = if c.clamp == "cupy" { t.cupy_arch(&consumer.version, release, target.cc) } else { sm };
                f.target_arch = format!("sm_{asked}");
                let compiles = row.is_some_and(|r| r.archs.contains(&asked));
                // CuPy asks for PTX instead of a cubin (CUPY_COMPILE_WITH_PTX=1): the driver JITs
                // it for any newer GPU, if it reads NVRTC's PTX ISA.
                let ptx = c.clamp == "cupy" && scan.image.env.get("CUPY_COMPILE_WITH_PTX").is_some_and(|v| v == "1");
                if ptx {
                    f.target_arch = format!("compute_{asked}");
                }
                // A cubin for an older major does not load (sm_90 on an RTX 50): CuPy's clamp.
                let loads = asked == sm || (asked / 10 == sm / 10 && asked < sm) || (ptx && asked <= sm);
                f.knows_target = compiles && loads;
                if f.known && !f.knows_target {
                    f.why = if !compiles {
                        format!("NVRTC {release} ({}) knows no sm_{asked}", file_name(&nvrtc.path))
                    } else {
                        format!(
                            "{} {} asks NVRTC {release} for sm_{asked}, whose cubin does not load on compute capability {} (CUDA_ERROR_NO_BINARY_FOR_GPU)",
                            consumer.name, consumer.version, target.cc
                        )
                    };
                    f.fix = nvrtc_fix(t, consumer, release, target);
                }
                if let (Some(d), true) = (driver_cuda, f.knows_target)
                    && (release.major > d.major || (ptx && release > d))
                {
                    let need =
                        tables::minor_compat_floor(release.major).map(|(v, _)| v.to_string()).unwrap_or_default();
                    f.driver_problem = format!(
                        "NVRTC {release} writes CUDA {} code, which a CUDA {d} driver cannot load: it needs driver {need} or newer",
                        release.major
                    );
                    f.fix = format!(
                        "upgrade the driver on {} to {need} or newer, or install the CUDA {} build of {} (its NVRTC {}.x)",
                        target.nodes(),
                        d.major,
                        consumer.name,
                        d.major
                    );
                }
            }
            CompilePath::Xla => {
                let Some((ptxas, how)) = xla_ptxas(scan, found, &consumer.name) else {
                    f.kind = CompilerKind::Ptxas.to_string();
                    f.why = "no ptxas XLA would find in the image".into();
                    out.push(f);
                    continue;
                };
                f.kind = ptxas.kind.to_string();
                f.resolved(ptxas, how);
                let arch = target.cc.sm().to_string();
                f.target_arch = format!("sm_{arch}");
                let release = f.judge_ptxas(t, &arch);
                if f.known && !f.knows_target {
                    let rel = release.map(|r| r.to_string()).unwrap_or_default();
                    f.why = format!(
                        "its {} {rel} knows no {}: XLA falls back to the driver's PTX JIT, or refuses",
                        ptxas.kind, f.target_arch
                    );
                    let best = t.ptxas.iter().rfind(|p| p.release.starts_with("12.") && p.targets.contains(&arch));
                    f.fix = match best {
                        Some(p) if consumer.name.contains("cuda12") => format!(
                            "pip install 'nvidia-cuda-nvcc-cu12=={}.*' and make it the ptxas XLA finds first (XLA_FLAGS=--xla_gpu_cuda_data_dir=<site-packages>/nvidia/cuda_nvcc, or remove the older ptxas from PATH)",
                            p.release
                        ),
                        _ => format!("a ptxas that knows {} (nvidia-cuda-nvcc, a newer JAX)", f.target_arch),
                    };
                }
            }
        }
        out.push(f);
    }
    out
}

/// The PTX assembler XLA uses: an nvPTXCompiler linked into its plugin (where a banner says so),
/// else the first ptxas of `--xla_gpu_cuda_data_dir`, the system toolkit, the pip nvcc wheel.
fn xla_ptxas<'a>(scan: &ImageReport, found: &'a [Found], plugin: &str) -> Option<(&'a Found, String)> {
    if let Some(f) = found.iter().find(|f| file_name(&f.path) == "xla_cuda_plugin.so" && !f.version.is_empty()) {
        return Some((f, "nvPTXCompiler linked into the XLA plugin".into()));
    }
    let ptxas: Vec<&Found> =
        found.iter().filter(|f| f.kind == CompilerKind::Ptxas && file_name(&f.path) == "ptxas").collect();
    if let Some(dir) = scan.image.env.get("XLA_FLAGS").and_then(|v| {
        v.split_whitespace()
            .find_map(|a| a.strip_prefix("--xla_gpu_cuda_data_dir="))
            .map(|d| d.trim_end_matches('/').to_string())
    }) && let Some(f) = ptxas.iter().find(|f| f.path == format!("{dir}/bin/ptxas"))
    {
        return Some((f, "--xla_gpu_cuda_data_dir".into()));
    }
    if let Some(f) = ptxas.iter().find(|f| f.path.starts_with("/usr/local/cuda") || f.path == "/usr/bin/ptxas") {
        return Some((f, "the system toolkit (found before the pip wheel)".into()));
    }
    let wheel = if plugin.contains("cuda13") { "/nvidia/cu13/bin/ptxas" } else { "/nvidia/cuda_nvcc/bin/ptxas" };
    ptxas.iter().find(|f| f.path.ends_with(wheel)).map(|f| (*f, "the pip nvidia-cuda-nvcc wheel".to_string()))
}

fn triton_fix(t: &Table, triton: &crate::packages::Package, target: &Target, arch: &str) -> String {
    let mut parts = Vec::new();
    let installed = toolchains::version_key(&triton.version);
    if let Some((rel, pin)) =
        t.first_triton_for(target.cc, arch).filter(|(r, _)| toolchains::version_key(&r.version) > installed)
    {
        let torch = pin.map(|p| format!(" (torch {} pins it)", p.torch)).unwrap_or_default();
        parts.push(format!("install triton >= {}{torch}", rel.version));
    }
    // The override this Triton honours, pointed at a ptxas that knows the target: the newest such
    // release, of CUDA 12 where this Triton cannot run a CUDA 13 ptxas (before 3.5).
    let cuda12_only = installed < (3, 5, 0);
    let knows: Vec<&toolchains::Ptxas> = t
        .ptxas
        .iter()
        .filter(|p| p.targets.iter().any(|x| x == arch))
        .filter(|p| !cuda12_only || p.release.starts_with("12."))
        // Cubins of a newer CUDA major than the driver's do not load (CL022).
        .filter(|p| {
            target.driver_cuda.is_none_or(|d| CudaVersion::parse(&p.release).is_some_and(|r| r.major <= d.major))
        })
        .collect();
    if let (Some(sel), Some(best)) = (t.triton_selection(&triton.version), knows.last()) {
        let blackwell = sel.blackwell_from > 0 && target.cc.sm() >= sel.blackwell_from;
        let env = if blackwell { &sel.blackwell_env } else { &sel.ptxas_env };
        let wheel = match best.release.split('.').next() {
            Some("11") => format!("nvidia-cuda-nvcc-cu11=={}.*", best.release),
            Some("12") => format!("nvidia-cuda-nvcc-cu12=={}.*", best.release),
            _ => format!("nvidia-cuda-nvcc=={}.*", best.release),
        };
        let or = if parts.is_empty() { "" } else { "or " };
        parts.push(format!("{or}set {env} to the ptxas of {wheel} (release {}, which knows sm_{arch})", best.release));
    }
    if parts.is_empty() {
        return format!("no ptxas cudalint knows assembles sm_{arch}");
    }
    parts.join(", ")
}

fn nvrtc_fix(t: &Table, consumer: &crate::packages::Package, release: CudaVersion, target: &Target) -> String {
    let sm = target.cc.sm();
    let cupy = consumer.name.starts_with("cupy");
    // The first release that works: for CuPy, whose clamp decides what it asks for, the first
    // whose answer compiles and loads here (NVRTC 12.8 makes an sm_120 cubin for a GB10).
    let works = |r: &toolchains::Nvrtc| {
        let Some(v) = CudaVersion::parse(&r.release) else { return false };
        let asked = if cupy { t.cupy_arch(&consumer.version, v, target.cc) } else { sm };
        r.archs.contains(&asked) && (asked == sm || (asked / 10 == sm / 10 && asked < sm))
    };
    let need = match t.nvrtc.iter().find(|r| works(r)).and_then(|r| CudaVersion::parse(&r.release)) {
        Some(v) => v.max(release),
        None => return format!("no NVRTC cudalint knows targets compute capability {}", target.cc),
    };
    let wheel = if need.major == 12 {
        format!("nvidia-cuda-nvrtc-cu12>={need}")
    } else {
        format!("nvidia-cuda-nvrtc>={need} (a CUDA {} build of {})", need.major, consumer.name)
    };
    if cupy {
        format!(
            "pip install '{wheel}' and make it the libnvrtc CuPy loads (LD_LIBRARY_PATH=<site-packages>/nvidia/cuda_nvrtc/lib, or import torch first)"
        )
    } else {
        format!("pip install '{wheel}' (NVRTC {need} is the first that knows sm_{sm})")
    }
}
