//! The code an image compiles at run time: which run-time compiler each installed consumer
//! (vLLM and torch.compile through Triton, torch's jiterator and CuPy through NVRTC) resolves,
//! and whether that compiler can emit code for a target and its driver load it
//! (`compiler` in rules of scope `compiler-target`; rules/compilers/runtime-compilers.toml).

use serde::Serialize;

use super::targets::Target;
use crate::cuda::toolchains::{self, CompilePath, Consumer, Table, triton_target};
use crate::cuda::{CudaVersion, tables};
use crate::image::{ImageFile, ImageReport};
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
    /// Found by its bytes linked into the library at `path`: it compiles for that library only.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub linked: bool,
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
                (true, Some(p)) if crate::knowledge::get().vendor_package(&p.name) && !p.version.is_empty() => {
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
                linked: t.linked,
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
        /// its package manager (pypi, conda, deb, rpm; empty for a file no package owns)
        pub manager: String,
        /// what says it compiles at run time: `row` (a knowledge row names it), or the evidence in its files: `links libnvrtc.so.12`, `loads libnvrtc.so.12`, `carries NVRTC 12.8 linked in`
        pub evidence: String,
        /// what fails when the compiler cannot: `torch.compile / Triton kernels`
        pub what: String,
        /// the package's work goes through this compiler (vLLM, CuPy), rather than one path of several
        pub central: bool,
        /// what of the package still runs when this path cannot: `runs eager` (empty: nothing said)
        pub still_runs: String,
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
        /// it emits PTX for an older architecture, which the target's driver compiles at first use (`CUPY_COMPILE_WITH_PTX=1` on a GPU newer than the compiler's ceiling)
        pub jit: bool,
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

/// An installed package by name, whichever manager installed it (pip, conda, dpkg, rpm).
fn pkg<'a>(scan: &'a ImageReport, name: &str) -> Option<&'a Package> {
    scan.cuda_packages.iter().find(|p| p.name == name)
}

/// The installed packages a consumer row names: its package, or every member of its family
/// (`cupy-cuda*`), of its manager where it names one. A row naming a package itself wins over a
/// family's for that package.
fn consumers<'a>(t: &Table, scan: &'a ImageReport, row: &Consumer) -> Vec<&'a Package> {
    scan.cuda_packages
        .iter()
        .filter(|p| row.matches(&p.name, p.manager.as_str()))
        .filter(|p| {
            !row.family()
                || !t
                    .consumer
                    .iter()
                    .any(|o| !o.family() && o.compiler == row.compiler && o.matches(&p.name, p.manager.as_str()))
        })
        .collect()
}

/// What one consumer's compile path is judged with.
struct Ctx<'a> {
    t: &'a Table,
    scan: &'a ImageReport,
    found: &'a [Found],
    target: &'a Target,
    row: &'a Consumer,
    consumer: &'a Package,
}

/// One compile path: fills in the facts, or returns false when there is nothing to say (the
/// consumer's compiler package is not installed).
type Judge = fn(&Ctx, &mut CompilerFacts) -> bool;

/// Each compile path the consumer rows name, the compiler kind it runs, and its judge.
const PATHS: &[(CompilePath, CompilerKind, Judge)] = &[
    (CompilePath::Triton, CompilerKind::Ptxas, judge_triton),
    (CompilePath::Nvrtc, CompilerKind::Nvrtc, judge_nvrtc),
    (CompilePath::Xla, CompilerKind::Ptxas, judge_xla),
];

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
            && t.triton_install.bundled.iter().any(|d| f.path.contains(d.as_str()))
    })?;
    Some((bundled, format!("bundled with triton {}", triton.version)))
}

/// The NVRTC a consumer loads: for a release that loads it in the loader's order
/// (`ld_order_below`), `LD_LIBRARY_PATH`, then system directories, then the pip wheel; otherwise
/// the pip wheel first.
fn nvrtc_for<'a>(c: &Ctx<'a>, major: Option<u16>) -> Option<(&'a Found, String)> {
    let libs: Vec<&Found> = c
        .found
        .iter()
        .filter(|f| f.kind == CompilerKind::Nvrtc && !f.linked && !file_name(&f.path).starts_with("libnvrtc.alt"))
        .filter(|f| major.is_none_or(|m| CudaVersion::parse(&f.version).is_none_or(|v| v.major == m)))
        .collect();
    let pip = |f: &&&Found| f.path.contains("/site-packages/") || f.path.contains("/dist-packages/");
    let ld: Vec<String> = c
        .scan
        .image
        .env
        .get("LD_LIBRARY_PATH")
        .map(|v| v.split(':').map(|d| d.trim_end_matches('/').to_string()).collect())
        .unwrap_or_default();
    let ld_order = !c.row.ld_order_below.is_empty()
        && toolchains::version_key(&c.consumer.version) < toolchains::version_key(&c.row.ld_order_below);
    if ld_order {
        if let Some(f) = libs.iter().find(|f| ld.iter().any(|d| d == parent(&f.path))) {
            return Some((f, "LD_LIBRARY_PATH".into()));
        }
        if let Some(f) = libs.iter().find(|f| !pip(f)) {
            return Some((f, "the loader's search (system directories before the pip wheel)".into()));
        }
    }
    libs.iter().find(pip).or(libs.first()).map(|f| (*f, "the pip wheel (site-packages)".to_string()))
}

/// The CUDA major a consumer is built for: its row's, else what a framework's version says,
/// else the newest major NVIDIA's `-cuNN` wheels in the image name.
fn consumer_major(c: &Ctx) -> Option<u16> {
    let k = crate::knowledge::get();
    if let Some(m) = c.row.cuda.or_else(|| k.cuda_major_in_name(&c.consumer.name)) {
        return Some(m);
    }
    if let Some((_, (m, _))) =
        k.framework_cuda(std::iter::once((c.consumer.name.as_str(), c.consumer.version.as_str())))
    {
        return Some(m);
    }
    k.frameworks.iter().any(|f| f.package == c.consumer.name).then_some(())?;
    c.scan
        .cuda_packages
        .iter()
        .filter(|p| k.vendor_package(&p.name))
        .filter_map(|p| k.cuda_major_of_name(&p.name))
        .max()
}

/// Every installed consumer's run-time compiler judged on `target`, by the function of the
/// compile path its row names.
pub fn judge(scan: &ImageReport, found: &[Found], target: &Target) -> Vec<CompilerFacts> {
    let t = toolchains::table();
    let mut out = Vec::new();
    for row in &t.consumer {
        // A compiler used on its own is judged only where no framework above it is installed.
        if row.alone
            && t.consumer.iter().any(|o| !o.alone && o.compiler == row.compiler && !consumers(t, scan, o).is_empty())
        {
            continue;
        }
        let Some((_, kind, judge)) = PATHS.iter().find(|(p, _, _)| *p == row.compiler) else { continue };
        for consumer in consumers(t, scan, row) {
            let mut f = CompilerFacts {
                consumer: consumer.name.clone(),
                consumer_version: consumer.version.clone(),
                manager: consumer.manager.to_string(),
                evidence: "row".into(),
                what: row.what.clone(),
                central: row.central,
                still_runs: row.still_runs.clone(),
                kind: kind.to_string(),
                ..Default::default()
            };
            let c = Ctx { t, scan, found, target, row, consumer };
            if judge(&c, &mut f) {
                out.push(f);
            }
        }
    }
    out.extend(by_evidence(t, scan, found, target));
    out
}

fn judge_triton(c: &Ctx, f: &mut CompilerFacts) -> bool {
    let (t, target) = (c.t, c.target);
    let Some(triton) = t.triton_install.packages.iter().find_map(|n| pkg(c.scan, n)) else { return false };
    let Some((ptxas, how)) = triton_ptxas(t, c.scan, c.found, triton, target) else {
        // Listed, not judged: what Triton would run is not in the image.
        f.why = format!("no ptxas of triton {} found in the image", triton.version);
        return true;
    };
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
    if let (Some(r), Some(d)) = (release, target.driver_cuda)
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
        let same_major =
            t.ptxas.iter().rfind(|p| p.release.starts_with(&format!("{}.", d.major)) && p.targets.contains(&arch));
        let wheel = crate::knowledge::get().wheel("nvcc", d.major);
        f.fix = match (same_major, env, wheel) {
            (Some(p), Some(env), Some(w)) => format!(
                "upgrade the driver on {} to {need} or newer, or set {env} to the ptxas of {}=={}.* (CUDA {} cubins load on this driver; it knows {})",
                target.nodes(),
                w.package,
                p.release,
                d.major,
                f.target_arch
            ),
            _ => format!("upgrade the driver on {} to {need} or newer", target.nodes()),
        };
    }
    true
}

fn judge_nvrtc(c: &Ctx, f: &mut CompilerFacts) -> bool {
    let (t, target, consumer) = (c.t, c.target, c.consumer);
    let major = consumer_major(c);
    let Some((nvrtc, how)) = nvrtc_for(c, major) else {
        f.why = "no NVRTC found in the image (it may come from the host or a later layer)".into();
        clamped_everywhere(c, major, f);
        return true;
    };
    f.resolved(nvrtc, how);
    let Some(release) = CudaVersion::parse(&nvrtc.version) else {
        f.why = "its version is unknown: not judged".into();
        return true;
    };
    let row = t.nvrtc(release);
    f.known = row.is_some();
    let sm = target.cc.sm();
    let clamped = c.row.clamp == "cupy";
    let asked = if clamped { t.cupy_arch(&consumer.version, release, target.cc) } else { sm };
    f.target_arch = format!("sm_{asked}");
    let compiles = row.is_some_and(|r| r.archs.contains(&asked));
    // Asking for PTX instead of a cubin (CUPY_COMPILE_WITH_PTX=1): the driver JITs it for any
    // newer GPU, if it reads NVRTC's PTX ISA.
    let ptx = !c.row.ptx_env.is_empty() && c.scan.image.env.get(&c.row.ptx_env).is_some_and(|v| v == "1");
    if ptx {
        f.target_arch = format!("compute_{asked}");
    }
    // A cubin for an older major does not load (sm_90 on an RTX 50): CuPy's clamp.
    let loads = asked == sm || (asked / 10 == sm / 10 && asked < sm) || (ptx && asked <= sm);
    f.knows_target = compiles && loads;
    f.jit = f.knows_target && ptx && asked < sm;
    if f.known && !f.knows_target {
        f.why = if !compiles {
            format!("NVRTC {release} ({}) knows no sm_{asked}", file_name(&nvrtc.path))
        } else {
            format!(
                "{} {} asks NVRTC {release} for sm_{asked}, whose cubin does not load on compute capability {} (CUDA_ERROR_NO_BINARY_FOR_GPU)",
                consumer.name, consumer.version, target.cc
            )
        };
        f.fix = nvrtc_fix(c, release);
    }
    if let (Some(d), true) = (target.driver_cuda, f.knows_target)
        && (release.major > d.major || (ptx && release > d))
    {
        let need = tables::minor_compat_floor(release.major).map(|(v, _)| v.to_string()).unwrap_or_default();
        f.driver_problem = format!(
            "NVRTC {release} writes CUDA {} code, which a CUDA {d} driver cannot load: it needs driver {need} or newer",
            release.major
        );
        f.fix = format!(
            "upgrade the driver on {} to {need} or newer, or install {} (its NVRTC {}.x)",
            target.nodes(),
            crate::knowledge::get().build_for(&consumer.name, release.major, d.major),
            d.major
        );
    }
    true
}

/// With no NVRTC in the image, a clamping consumer of a known CUDA major can still be judged
/// when its clamp decides alone: if every NVRTC of that major makes it ask for a cubin of an
/// older architecture family than the target's (CuPy asks any NVRTC 11 for sm_90 at most, which
/// does not load on a 12.0), no NVRTC the image could find makes it run — it fails, whichever.
fn clamped_everywhere(c: &Ctx, major: Option<u16>, f: &mut CompilerFacts) {
    let (t, sm) = (c.t, c.target.cc.sm());
    let ptx = !c.row.ptx_env.is_empty() && c.scan.image.env.get(&c.row.ptx_env).is_some_and(|v| v == "1");
    let Some(major) = major.filter(|_| c.row.clamp == "cupy" && !ptx) else { return };
    // The releases of the major where a ceiling may change, and the major's first.
    let mut releases: Vec<CudaVersion> = t
        .cupy_clamp
        .iter()
        .flat_map(|k| &k.ceilings)
        .filter_map(|x| CudaVersion::parse(&x.nvrtc))
        .filter(|v| v.major == major)
        .collect();
    releases.push(CudaVersion::new(major, 0));
    releases.extend(t.nvrtc.iter().filter_map(|r| CudaVersion::parse(&r.release)).filter(|v| v.major == major));
    let asked: Vec<u32> = releases.iter().map(|v| t.cupy_arch(&c.consumer.version, *v, c.target.cc)).collect();
    let loads = |a: u32| a == sm || (a / 10 == sm / 10 && a < sm);
    if let Some(&most) = asked.iter().max().filter(|_| !asked.iter().any(|&a| loads(a))) {
        f.known = true;
        f.knows_target = false;
        f.target_arch = format!("sm_{most}");
        f.version = format!("{major}.x");
        f.chosen_by = format!("none in the image: every NVRTC {major} judged");
        f.why = format!(
            "{} {} asks any NVRTC {major} for sm_{most} or older (its clamp), whose cubin does not load on compute capability {} (CUDA_ERROR_NO_BINARY_FOR_GPU); no NVRTC {major} is in the image, and none would do",
            c.consumer.name, c.consumer.version, c.target.cc
        );
        f.fix = nvrtc_fix(c, CudaVersion::new(major, 0));
    }
}

fn judge_xla(c: &Ctx, f: &mut CompilerFacts) -> bool {
    let (t, target) = (c.t, c.target);
    let major = c.row.cuda.unwrap_or(12);
    let Some((ptxas, how)) = xla_ptxas(c, major) else {
        f.why = "no ptxas XLA would find in the image".into();
        return true;
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
        let best = t.ptxas.iter().rfind(|p| p.release.starts_with(&format!("{major}.")) && p.targets.contains(&arch));
        f.fix = match (best, crate::knowledge::get().wheel("nvcc", major)) {
            (Some(p), Some(w)) => format!(
                "pip install '{}=={}.*' and make it the ptxas XLA finds first (XLA_FLAGS=--xla_gpu_cuda_data_dir=<site-packages>/{}, or remove the older ptxas from PATH)",
                w.package,
                p.release,
                parent(&w.dir)
            ),
            _ => format!("a ptxas that knows {} (a newer nvcc wheel, a newer JAX)", f.target_arch),
        };
    }
    true
}

/// The PTX assembler XLA uses: an nvPTXCompiler linked into its plugin (where a banner says so),
/// else the first ptxas of `--xla_gpu_cuda_data_dir`, the system toolkit, the pip nvcc wheel of
/// the plugin's CUDA major.
fn xla_ptxas<'a>(c: &Ctx<'a>, major: u16) -> Option<(&'a Found, String)> {
    let (found, x) = (c.found, &c.t.xla);
    if let Some(f) = found.iter().find(|f| {
        file_name(&f.path) == x.plugin && f.kind == CompilerKind::NvPtxCompiler && f.linked && !f.version.is_empty()
    }) {
        return Some((f, "nvPTXCompiler linked into the XLA plugin".into()));
    }
    let ptxas: Vec<&Found> =
        found.iter().filter(|f| f.kind == CompilerKind::Ptxas && file_name(&f.path) == "ptxas").collect();
    if let Some(dir) = c.scan.image.env.get("XLA_FLAGS").and_then(|v| {
        v.split_whitespace()
            .find_map(|a| a.strip_prefix("--xla_gpu_cuda_data_dir="))
            .map(|d| d.trim_end_matches('/').to_string())
    }) && let Some(f) = ptxas.iter().find(|f| f.path == format!("{dir}/bin/ptxas"))
    {
        return Some((f, "--xla_gpu_cuda_data_dir".into()));
    }
    if let Some(f) = ptxas.iter().find(|f| x.system.iter().any(|s| f.path.starts_with(s.as_str()))) {
        return Some((f, "the system toolkit (found before the pip wheel)".into()));
    }
    let wheel = crate::knowledge::get().wheel("nvcc", major)?;
    let tail = format!("/{}/ptxas", wheel.dir);
    ptxas.iter().find(|f| f.path.ends_with(&tail)).map(|f| (*f, format!("the pip {} wheel", wheel.package)))
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
    if let (Some(sel), Some(best)) = (t.triton_selection(&triton.version), knows.last())
        && let Some(wheel) =
            CudaVersion::parse(&best.release).and_then(|r| crate::knowledge::get().wheel("nvcc", r.major))
    {
        let blackwell = sel.blackwell_from > 0 && target.cc.sm() >= sel.blackwell_from;
        let env = if blackwell { &sel.blackwell_env } else { &sel.ptxas_env };
        let or = if parts.is_empty() { "" } else { "or " };
        parts.push(format!(
            "{or}set {env} to the ptxas of {}=={}.* (release {}, which knows sm_{arch})",
            wheel.package, best.release, best.release
        ));
    }
    if parts.is_empty() {
        return format!("no ptxas cudalint knows assembles sm_{arch}");
    }
    parts.join(", ")
}

/// The NVRTC that works here: the first release of the installed one's major at or above it, else
/// (the GPU is outside what that major targets) the newest release of another major that does,
/// with the consumer's build for that major.
fn nvrtc_fix(c: &Ctx, release: CudaVersion) -> String {
    let (t, target, consumer) = (c.t, c.target, c.consumer);
    let sm = target.cc.sm();
    let clamped = c.row.clamp == "cupy";
    // For a consumer whose clamp decides what it asks for, the first whose answer compiles and
    // loads here (NVRTC 12.8 makes an sm_120 cubin for a GB10).
    let works: Vec<CudaVersion> = t
        .nvrtc
        .iter()
        .filter_map(|r| {
            let v = CudaVersion::parse(&r.release)?;
            let asked = if clamped { t.cupy_arch(&consumer.version, v, target.cc) } else { sm };
            (r.archs.contains(&asked) && (asked == sm || (asked / 10 == sm / 10 && asked < sm))).then_some(v)
        })
        .collect();
    let k = crate::knowledge::get();
    let same = works.iter().find(|v| v.major == release.major && **v >= release);
    let (need, other) = match same {
        Some(v) => (*v, false),
        None => match works.iter().filter(|v| v.major != release.major).max() {
            Some(v) => (*v, true),
            None => return format!("no NVRTC cudalint knows targets compute capability {}", target.cc),
        },
    };
    let Some(wheel) = k.wheel("nvrtc", need.major) else {
        return format!("NVRTC {need} is the first that knows sm_{sm}");
    };
    let load = if c.row.ld_order_below.is_empty() {
        String::new()
    } else {
        format!(
            " and make it the libnvrtc {} loads (LD_LIBRARY_PATH=<site-packages>/{}, or import a package that preloads it first)",
            consumer.name, wheel.dir
        )
    };
    if other {
        // Another build of the package, with that build's NVRTC (no LD_LIBRARY_PATH about the
        // build it replaces).
        let major = consumer_major(c).unwrap_or(release.major);
        format!(
            "install {} with '{}=={}.*' in place of {} (no CUDA {} NVRTC knows sm_{sm}; NVRTC {need} does)",
            k.build_for(&consumer.name, major, need.major),
            wheel.package,
            need,
            consumer.name,
            release.major
        )
    } else {
        format!("pip install '{}>={need}'{load} (NVRTC {need} is the first that knows sm_{sm})", wheel.package)
    }
}

/// The compiler a piece of evidence names: `libnvrtc.so.12` -> NVRTC of CUDA 12 (None: any major,
/// as `libnvrtc.so` or `libnvrtc.so.%d`).
fn named(lib: &str) -> Option<(CompilerKind, Option<u16>)> {
    let kind = if lib.starts_with("libnvrtc") {
        CompilerKind::Nvrtc
    } else if lib.starts_with("libnvJitLink") {
        CompilerKind::NvJitLink
    } else {
        return None;
    };
    let major = lib.split_once(".so.").and_then(|(_, v)| v.split('.').next()?.parse().ok());
    Some((kind, major))
}

/// Packages (or files no package owns) that no consumer row names, whose code shows they compile
/// device code at run time: a binary links a compiler (`DT_NEEDED libnvrtc.so.12`), names one
/// for `dlopen` (`libnvrtc.so.12` in `.rodata`) or carries one linked in; a `.py` file imports a
/// module that compiles (`cuda.bindings.nvrtc`, `torch.utils.cpp_extension`, `cutlass.cute`) or
/// names a compiler to run (`"nvcc"`) or load. Each is judged as what it is seen to do — the
/// compiler asked for the target's own architecture: the library the loader finds
/// (`LD_LIBRARY_PATH`, system directories, then a pip wheel; of the major the evidence names),
/// the toolkit's nvcc or ptxas, or the copy linked into it — and, not knowing how much of the
/// package goes through that path, never as central (a failure is a warning, CL021). What it
/// cannot find or has no table for is `known: false` (CL028 says so). A row, where there is one,
/// says more and replaces the evidence.
fn by_evidence<'a>(t: &Table, scan: &'a ImageReport, found: &[Found], target: &Target) -> Vec<CompilerFacts> {
    use std::collections::BTreeMap;
    // (owner, kind) -> (package, evidence, major, linked copy)
    type Seen<'a> = (Option<&'a Package>, Vec<String>, Option<u16>, Option<&'a ImageFile>);
    let mut seen: BTreeMap<(String, String), Seen> = BTreeMap::new();
    // Rows override evidence: a package a row names is judged by the row alone, and Triton's
    // own ptxas is Triton's.
    let by_row = |p: &Package| {
        t.consumer.iter().any(|r| r.matches(&p.name, p.manager.as_str())) || t.triton_install.packages.contains(&p.name)
    };
    let owner_of = |p: Option<&Package>, path: &str| {
        p.map(|p| format!("{}:{}", p.manager, p.name)).unwrap_or_else(|| path.to_string())
    };
    let mut add = |owner: String, p: Option<&'a Package>, kind: String, what: String, major: Option<u16>, linked| {
        let e = seen.entry((owner, kind)).or_insert((p, Vec::new(), major, None));
        e.1.push(what);
        e.2 = e.2.or(major);
        e.3 = e.3.or(linked);
    };
    for f in &scan.files {
        let p = f.package.as_ref();
        if p.is_some_and(by_row) {
            continue;
        }
        let own = f.file.toolchain.as_ref();
        let owner = owner_of(p, &f.file.path);
        if let Some(tc) = own.filter(|tc| tc.linked) {
            let what = format!("carries {} {} linked into {}", tc.kind, tc.version, file_name(&f.file.path));
            add(owner.clone(), p, tc.kind.to_string(), what, None, Some(f));
        }
        let needed = f.file.elf.iter().flat_map(|e| &e.cuda_needed).map(|n| (n, "links"));
        let loads = f.file.loads_compilers.iter().map(|n| (n, "loads"));
        for (lib, how) in needed.chain(loads) {
            let Some((kind, major)) = named(lib) else { continue };
            // A compiler's own library names itself and its siblings.
            if own.is_some_and(|tc| !tc.linked) || kind_is_own_file(&f.file.path) {
                continue;
            }
            add(owner.clone(), p, kind.to_string(), format!("{how} {lib} ({})", file_name(&f.file.path)), major, None);
        }
    }
    let k = crate::knowledge::get();
    let used = super::imports::used_by_package(scan);
    for py in &scan.python_compiles {
        let p = py.package.as_ref();
        if p.is_some_and(|p| by_row(p) || k.vendor_package(&p.name) || t.python_finders.packages.contains(&p.name)) {
            continue;
        }
        // Code the package itself never imports (a tool script beside it) is not its path.
        if scan.python.iter().find(|f| f.path == py.path).is_some_and(|f| !used(f)) {
            continue;
        }
        let at = py.path.rsplit_once("-packages/").map_or(py.path.trim_start_matches('/'), |(_, r)| r);
        for c in &py.compiles {
            // A module's providers are not its consumers (cuda-bindings names libnvrtc).
            let provides =
                |p: &Package| t.python_compiler.iter().any(|r| r.kind == c.kind && r.providers.contains(&p.name));
            if p.is_some_and(provides) {
                continue;
            }
            let major = named(c.what.trim_start_matches("names ")).and_then(|(_, m)| m);
            add(owner_of(p, &py.path), p, c.kind.clone(), format!("{} ({at}:{})", c.what, c.line), major, None);
        }
    }
    let mut out = Vec::new();
    for ((owner, kind), (p, mut evidence, major, linked)) in seen {
        evidence.sort();
        evidence.dedup();
        let (name, version, manager) = match p {
            Some(p) => (p.name.clone(), p.version.clone(), p.manager.to_string()),
            None => (owner.clone(), String::new(), String::new()),
        };
        let mut f = CompilerFacts {
            consumer: name,
            consumer_version: version,
            manager,
            evidence: match evidence.len() {
                1 => evidence[0].clone(),
                n => format!("{}, and {} more", evidence[0], n - 1),
            },
            what: format!(
                "code it compiles at run time with {kind} (it {})",
                evidence.first().map(String::as_str).unwrap_or_default()
            ),
            kind: kind.clone(),
            ..Default::default()
        };
        let sm = target.cc.sm();
        f.target_arch = format!("sm_{sm}");
        let Ok(ck) = kind.parse::<CompilerKind>() else {
            f.why = format!("cudalint has no table of what {kind} releases can target: not judged");
            out.push(f);
            continue;
        };
        let compiler = match linked {
            Some(file) => found.iter().find(|c| c.path == file.file.path).map(|c| (c, "linked into it".to_string())),
            None => match ck {
                CompilerKind::Nvrtc | CompilerKind::NvJitLink => loaded(scan, found, ck, major),
                _ => toolkit(t, found, ck),
            },
        };
        let Some((c, how)) = compiler else {
            f.why = format!("no {kind} found in the image (it may come from the host or a later layer): not judged");
            out.push(f);
            continue;
        };
        f.resolved(c, how);
        let Some(release) = CudaVersion::parse(&c.version) else {
            f.why = format!("the version of {} is unknown: not judged", c.path);
            out.push(f);
            continue;
        };
        let rel = release.to_string();
        if ck == CompilerKind::Nvrtc {
            let row = t.nvrtc(release);
            f.known = row.is_some();
            f.knows_target = row.is_some_and(|r| r.archs.contains(&sm));
        } else {
            f.judge_ptxas(t, &sm.to_string());
        }
        if !f.known {
            f.why = format!("{kind} {rel} is a release cudalint has no table for: not judged");
        }
        if f.known && !f.knows_target {
            f.why = format!("{kind} {rel} ({}) knows no sm_{sm}", file_name(&c.path));
            let knows: Vec<&str> = match ck {
                CompilerKind::Nvrtc => {
                    t.nvrtc.iter().filter(|r| r.archs.contains(&sm)).map(|r| r.release.as_str()).collect()
                }
                _ => t
                    .ptxas
                    .iter()
                    .filter(|r| r.targets.iter().any(|x| *x == sm.to_string()))
                    .map(|r| r.release.as_str())
                    .collect(),
            };
            f.fix = evidence_fix(ck, &knows, release, sm, &f.consumer, linked.is_some());
        }
        // What it writes is of its own CUDA major: a driver of an older major cannot load it.
        if let (Some(d), true) = (target.driver_cuda, f.knows_target)
            && release.major > d.major
        {
            let need = tables::minor_compat_floor(release.major).map(|(v, _)| v.to_string()).unwrap_or_default();
            f.driver_problem = format!(
                "{kind} {rel} writes CUDA {} code, which a CUDA {d} driver cannot load: it needs driver {need} or newer",
                release.major
            );
            f.fix = format!("upgrade the driver on {} to {need} or newer", target.nodes());
        }
        out.push(f);
    }
    out
}

/// The nvcc, ptxas or nvPTXCompiler a package runs by name (or, for the last, the one its DSL's
/// libraries link in): the toolkit's (`/usr/local/cuda`) before a pip wheel's, never Triton's
/// private ptxas.
fn toolkit<'a>(t: &Table, found: &'a [Found], kind: CompilerKind) -> Option<(&'a Found, String)> {
    let ours = |f: &&Found| f.kind == kind && !t.triton_install.bundled.iter().any(|d| f.path.contains(d.as_str()));
    let pick = found
        .iter()
        .filter(ours)
        .find(|f| f.path.starts_with("/usr/local/cuda"))
        .or_else(|| found.iter().find(ours))?;
    let how = if pick.linked {
        format!("the one linked into {}", file_name(&pick.path))
    } else if pick.path.starts_with("/usr/local/cuda") {
        "the CUDA toolkit's".to_string()
    } else {
        "the first in the image".to_string()
    };
    Some((pick, how))
}

/// The compiler release that knows `sm` (`knows`: the table's releases that do, oldest first):
/// the first newer than the one in use, else the newest (later ones dropped the architecture).
fn evidence_fix(
    kind: CompilerKind,
    knows: &[&str],
    installed: CudaVersion,
    sm: u32,
    who: &str,
    linked: bool,
) -> String {
    let newer = knows.iter().find(|r| CudaVersion::parse(r).is_some_and(|v| v > installed));
    let which = match (newer, knows.last()) {
        (Some(r), _) => format!("{kind} {r} or newer"),
        (None, Some(r)) => format!("{kind} {r} (the newest that knows sm_{sm}: later releases dropped it)"),
        (None, None) => return format!("no {kind} cudalint knows targets sm_{sm}"),
    };
    if linked { format!("a build of {who} linked with {which}") } else { format!("{which}, where {who} loads it") }
}

/// Whether a file is a run-time compiler's own library by its name (libnvrtc, its builtins).
fn kind_is_own_file(path: &str) -> bool {
    let n = file_name(path);
    n.starts_with("libnvrtc") || n.starts_with("libnvJitLink") || n.starts_with("libnvptxcompiler")
}

/// The compiler library of `kind` a `dlopen` of its name finds: of that major where the
/// evidence says one, `LD_LIBRARY_PATH` first, then system directories (the loader's own
/// search), then a pip wheel's (found when something loaded it first).
fn loaded<'a>(
    scan: &ImageReport,
    found: &'a [Found],
    kind: CompilerKind,
    major: Option<u16>,
) -> Option<(&'a Found, String)> {
    let libs: Vec<&Found> = found
        .iter()
        .filter(|f| f.kind == kind && !f.linked && !file_name(&f.path).contains(".alt."))
        .filter(|f| major.is_none_or(|m| CudaVersion::parse(&f.version).is_none_or(|v| v.major == m)))
        .collect();
    let pip = |f: &&&Found| f.path.contains("/site-packages/") || f.path.contains("/dist-packages/");
    let ld: Vec<&str> = scan
        .image
        .env
        .get("LD_LIBRARY_PATH")
        .map(|v| v.split(':').map(|d| d.trim_end_matches('/')).collect())
        .unwrap_or_default();
    if let Some(f) = libs.iter().find(|f| ld.contains(&parent(&f.path))) {
        return Some((f, "LD_LIBRARY_PATH".into()));
    }
    if let Some(f) = libs.iter().find(|f| !pip(f)) {
        return Some((f, "the loader's search (system directories)".into()));
    }
    libs.iter().find(pip).map(|f| (*f, "a pip wheel's (found once something loaded it)".to_string()))
}
