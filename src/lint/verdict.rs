//! What holds for the image as a whole before any kernel runs, and how binaries are judged
//! together: the driver the image needs (its "floor", said once), whether a target's driver can
//! drive its GPU at all, version-selected siblings, packages judged as a unit, the fixes a user
//! can carry out, and the one-line headline per target.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::compilers::CompilerFacts;
use super::coverage::{Class, Coverage};
use super::facts::{Binary, DriverLibrary};
pub use super::report::Floor;
use super::report::{Finding, Headline, HeadlineDetail, HeadlineVerdict};
use super::targets::Target;
use crate::cuda::fix::arch_fix_keeping;
use crate::cuda::{Cc, CudaVersion, DriverVersion, drivers, tables};
use crate::image::ImageReport;
use crate::inspect::Linkage;
use crate::inspect::fatbin::Suffix;
use crate::inspect::libraries::cuda_major_of_soname;
use crate::knowledge::{Missing, Pick, Sibling};
use crate::layer::path::{file_name, parent};
use crate::schema::documented;

documented! {
    /// What decides a target before any kernel: the image's driver floor and the GPU's own driver
    /// window, and what a lockfile's packages built at install make for it (`deploy` in rules of
    /// scope `image-target`).
    #[derive(Debug, Clone, Default, Serialize)]
    pub struct Deploy {
        /// the target's driver meets the image's floor (or its driver is not known)
        pub floor_ok: bool,
        /// the floor: minor-version compatibility driver of the newest CUDA major the image needs (`580.65.06`)
        pub needs_driver: String,
        /// that CUDA version
        pub needs_cuda: String,
        /// what sets the floor: `libcudart.so.13 needed by torch, vllm; CUDA runtime 13.0 (...)`
        pub why: String,
        /// the forward-compatibility libraries that carry the image on this target, if any
        pub via_compat: String,
        /// why the image's forward-compatibility libraries do not help here (804, old branch)
        pub compat_problem: String,
        /// why the target's driver cannot drive its GPU at all (empty: it can, or unknown)
        pub cannot_drive: String,
        /// why the image cannot run on the target's host at all: the GPU comes only with an arm64 host (Grace, DGX
        /// Spark, Jetson) and the image is for another architecture (empty: it can, or the platform is unknown)
        pub wrong_host: String,
        /// a finding of this scope fails the target before any kernel runs
        pub blocked: bool,
        /// one cause behind binaries without code here: the CUDA major whose compilers cannot target this GPU (0: none)
        pub unbuildable_major: u64,
        /// how many binaries fail here for that cause
        pub unbuildable_count: u64,
        /// their packages (else file names), sorted: `torch, vllm, nvidia-cublas and 3 more`
        pub unbuildable_packages: String,
        /// the GPU's architecture: `Volta`
        pub unbuildable_architecture: String,
        /// the builds to install instead, per package
        pub unbuildable_fix: String,
        /// a lockfile's packages with no wheel for the platform whose build compiles CUDA code (the knowledge base's
        /// `[[source_build]]`) and makes none that runs here: built during `docker build`, where no GPU is visible,
        /// without the variable it gets its default list, whose SASS does not run on this GPU (or a list from the
        /// build machine's GPUs, which shows none). Each with that variable and default: `flash-attn 2.8.3
        /// (FLASH_ATTN_CUDA_ARCHS; without it: 80;90;100;120 ...)`
        pub unbuilt_cuda: Vec<String>,
        /// what builds them for every target: the variable set to the targets' architectures (`ENV
        /// TORCH_CUDA_ARCH_LIST="8.0;8.9;9.0+PTX"`), or why no value it takes makes code for this GPU
        pub unbuilt_cuda_fix: String,
    }
}

/// The binary's CUDA major cannot build for the target because the GPU is too old for it
/// (CUDA 13 and Volta). A GPU newer than a major's compilers is not this cause.
pub fn cannot_build(b: &Binary, t: &Target) -> bool {
    tables::buildable(b.facts.cuda_major).is_some_and(|(lo, _)| t.cc < lo)
}

/// The first `n` of `v` and how many more: `torch, vllm, nvidia-cublas and 3 more`.
pub fn shown(v: &[String], n: usize) -> String {
    let more = v.len().saturating_sub(n);
    let head = v.iter().take(n).cloned().collect::<Vec<_>>().join(", ");
    if more > 0 { format!("{head} and {more} more") } else { head }
}

/// Binaries that fail on `t` because their CUDA major cannot build for it: their indexes, the
/// newest such major, and the deploy fields that say it once (`root_cause` in rules).
pub fn root_cause(d: &mut Deploy, t: &Target, judged: &[(&Binary, &Coverage)]) -> Vec<usize> {
    let cannot = |b: &Binary| cannot_build(b, t);
    let failing: Vec<(usize, &Binary)> = judged
        .iter()
        .enumerate()
        .filter(|(_, (b, c))| c.class == Class::None && cannot(b))
        .map(|(i, (b, _))| (i, *b))
        .collect();
    let Some(major) = failing.iter().map(|(_, b)| b.facts.cuda_major).max() else { return Vec::new() };
    let of_major: Vec<(usize, &Binary)> = failing.into_iter().filter(|(_, b)| b.facts.cuda_major == major).collect();
    let mut names: Vec<String> = Vec::new();
    for (_, b) in &of_major {
        let n = if b.facts.package.is_empty() { file_name(&b.facts.path).to_string() } else { b.facts.package.clone() };
        if !names.contains(&n) {
            names.push(n);
        }
    }
    // The stack's own packages first: NVIDIA's libraries follow from them.
    let k = crate::knowledge::get();
    names.sort_by(|a, b| (k.vendor_package(a), a).cmp(&(k.vendor_package(b), b)));
    let shown = |v: &[String]| shown(v, 3);
    let builds: Vec<String> = names.iter().map(|n| older_build(n, major)).collect();
    d.unbuildable_major = major;
    d.unbuildable_count = of_major.len() as u64;
    d.unbuildable_packages = shown(&names);
    d.unbuildable_architecture = crate::cuda::gpus::architecture(t.cc).to_string();
    d.unbuildable_fix = shown(&builds);
    of_major.into_iter().map(|(i, _)| i).collect()
}

fn runtime_sources(packages: &[crate::packages::Package], binaries: &[Binary]) -> BTreeMap<u16, Vec<String>> {
    let mut by_major: BTreeMap<u16, Vec<String>> = BTreeMap::new();
    // DT_NEEDED of runtime and math libraries: who needs which, by package where known.
    let mut needed: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut built: BTreeMap<(u16, String), BTreeSet<String>> = BTreeMap::new();
    let who = |b: &Binary| {
        if b.facts.package.is_empty() { file_name(&b.facts.path).to_string() } else { b.facts.package.clone() }
    };
    for b in binaries.iter().filter(|b| !b.facts.driver_library.is_driver()) {
        for n in &b.facts.cuda_needed {
            if cuda_major_of_soname(n).is_some() {
                needed.entry(n.clone()).or_default().insert(who(b));
            }
        }
        // Registered device code goes through the CUDA runtime it was built with (linked
        // statically by nvcc's default, or needed by name): its toolkit names that runtime's
        // major even when a lean scan did not read the runtime's own version.
        let registered = b.counted().any(|m| m.loading == super::facts::Loading::Registered);
        let names_runtime = b.facts.cuda_needed.iter().any(|n| crate::inspect::libraries::is_cuda_runtime(n));
        if b.facts.cudart.is_none()
            && !names_runtime
            && registered
            && let Some(t) = CudaVersion::parse(&b.facts.toolkit)
        {
            built.entry((t.major, t.to_string())).or_default().insert(who(b));
        }
        if let Some(c) = &b.facts.cudart {
            let what = if c.linkage == Linkage::Static {
                format!("static CUDA runtime {} in {}", c.version, b.facts.path)
            } else {
                format!("CUDA runtime {} ({})", c.version, b.facts.path)
            };
            by_major.entry(c.major).or_default().push(what);
        }
    }
    let few = |who: BTreeSet<String>| shown(&who.into_iter().collect::<Vec<_>>(), 3);
    for (soname, who) in needed {
        let major = cuda_major_of_soname(&soname).expect("filtered");
        by_major.entry(major).or_default().push(format!("{soname} needed by {}", few(who)));
    }
    for ((major, version), who) in built {
        by_major.entry(major).or_default().push(format!("device code built with CUDA {version} in {}", few(who)));
    }
    for p in packages {
        let n = p.name.as_str();
        // `nvidia-cublas-cu12`, `nvidia-nccl-cu13`: the suffix is the CUDA major the package's
        // libraries were built for (docs/cuda-binaries.md §5j).
        if matches!(p.manager, crate::packages::PackageManager::Pypi)
            && let Some(major) = crate::knowledge::get().cuda_major_of_name(n)
        {
            by_major.entry(major).or_default().push(format!("pypi package {} {}", p.name, p.version));
            continue;
        }
        let runtime = crate::knowledge::get().runtime_package(n);
        let Some(v) = CudaVersion::parse(&p.version) else { continue };
        if runtime && (11..=20).contains(&v.major) {
            by_major.entry(v.major).or_default().push(format!("{} package {} {}", p.manager, p.name, p.version));
        }
    }
    by_major
}

/// `skip`: binaries never loaded here (unselected version siblings).
pub fn floor(report: &ImageReport, binaries: &[Binary], skip: &BTreeMap<usize, String>) -> Floor {
    let loaded: Vec<Binary> =
        binaries.iter().enumerate().filter(|(i, _)| !skip.contains_key(i)).map(|(_, b)| b.clone()).collect();
    floor_of(&report.cuda_packages, &loaded)
}

/// The floor of some binaries and packages alone (one wheel's, one binary's): what
/// [`floor`] finds for an image, from these only.
pub fn floor_of(packages: &[crate::packages::Package], binaries: &[Binary]) -> Floor {
    let sources = runtime_sources(packages, binaries);
    let Some((&major, why)) = sources.iter().next_back() else { return Floor::default() };
    let needs_driver = tables::minor_compat_floor(major).map(|(d, _)| d.to_string()).unwrap_or_default();
    Floor {
        major: u64::from(major),
        needs_cuda: CudaVersion::new(major, 0).to_string(),
        needs_driver,
        why: why.join("; "),
    }
}

/// Forward-compatibility libraries in the image (`.../compat/libcuda.so.<driver>`) that the
/// loader finds through `LD_LIBRARY_PATH`: (directory, driver version).
pub fn compat_on_path(report: &ImageReport, binaries: &[Binary]) -> Option<(String, DriverVersion)> {
    let ld = report.image.env.get("LD_LIBRARY_PATH")?;
    let dirs: Vec<&str> = ld.split(':').map(|d| d.trim_end_matches('/')).collect();
    binaries.iter().filter(|b| b.facts.driver_library == DriverLibrary::CudaCompat).find_map(|b| {
        let dir = parent(&b.facts.path);
        let v =
            crate::inspect::libraries::driver_version_of(file_name(&b.facts.path)).and_then(DriverVersion::parse)?;
        dirs.contains(&dir).then(|| (dir.to_string(), v))
    })
}

pub fn deploy(report: &ImageReport, binaries: &[Binary], floor: &Floor, t: &Target) -> Deploy {
    let mut d = Deploy {
        floor_ok: true,
        needs_driver: floor.needs_driver.clone(),
        needs_cuda: floor.needs_cuda.clone(),
        why: floor.why.clone(),
        ..Default::default()
    };
    // A pool's name may say more than its GPU (`NVIDIA L4 in l4-legacy`): looked up by its GPU.
    let gpu = crate::cuda::gpus::lookup(t.gpu());
    let canonical = gpu.map_or(t.gpu(), |g| g.name);
    if let Some(drv) = &t.driver {
        d.cannot_drive = drivers::cannot_drive(canonical, t.cc, drv).unwrap_or_default();
    } else if let (Some(c), Some(first)) = (t.driver_cuda, drivers::first_driver(canonical, t.cc)) {
        let first_v = DriverVersion::parse(first.version).expect("table");
        if tables::cuda_for_driver(&first_v).is_some_and(|need| c < need) {
            d.cannot_drive = format!(
                "{canonical} (compute capability {}) needs driver {} or newer; a CUDA {c} driver predates it, so it does not drive the GPU at all",
                t.cc, first.version
            );
        }
    }
    if floor.major > 0 {
        let major = floor.major as u16;
        let ok = match (&t.driver, t.driver_cuda) {
            (Some(drv), _) => DriverVersion::parse(&floor.needs_driver).is_none_or(|need| *drv >= need),
            (None, Some(c)) => c.major >= major,
            _ => true,
        };
        if !ok {
            // Forward compatibility lifts the floor on data-center GPUs whose branch is older.
            if let Some((dir, v)) = compat_on_path(report, binaries) {
                let host_branch = t.driver.as_ref().map(DriverVersion::branch);
                if !drivers::forward_compat_supported(canonical) {
                    d.compat_problem = format!(
                        "the forward-compatibility libraries in {dir} ({v}) do not work on {canonical}: CUDA error 804 (forward compatibility is for data-center and professional GPUs)"
                    );
                } else if host_branch.is_some_and(|b| b < 535 || b >= v.branch()) {
                    d.compat_problem = format!(
                        "the forward-compatibility libraries in {dir} ({v}) do not support host driver branch R{}",
                        host_branch.unwrap_or_default()
                    );
                } else {
                    d.via_compat = format!("{dir} ({v})");
                }
            }
            d.floor_ok = !d.via_compat.is_empty();
        }
    }
    if let Some(g) = gpu
        && !g.host.runs(report.image.platform.as_deref())
    {
        let host = match g.host {
            crate::cuda::gpus::Host::Jetson => "a Jetson module with an arm64 CPU (Jetson Linux)",
            _ => "an arm64 host only",
        };
        d.wrong_host = format!(
            "{} comes with {host}; the image is {}, which no such host runs",
            g.name,
            report.image.platform.as_deref().unwrap_or_default()
        );
    }
    // Not `blocked`: that says a driver stands in the way, and the binaries' verdicts still hold
    // for an arm64 build of the same code.
    d.blocked = !d.floor_ok || !d.cannot_drive.is_empty();
    d
}

/// `libbitsandbytes_cuda124.so` -> (`libbitsandbytes_{}.so` key, 12.4).
fn versioned_sibling(name: &str) -> Option<(String, CudaVersion)> {
    // A known loader's prefix (`[[sibling]]` rows), else the common `_cuda<digits>` form.
    let known = crate::knowledge::get().siblings.iter().find(|r| name.starts_with(&r.prefix)).map(|r| r.prefix.len());
    let (i, tag) = match known {
        Some(at) => (at, 0),
        None => (name.find("_cuda")?, 5),
    };
    let rest = &name[i + tag..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    if !(digits.len() == 3 || digits.len() == 4) || !name.contains(".so") {
        return None;
    }
    let (maj, min) = digits.split_at(digits.len() - 1);
    let v = CudaVersion::new(maj.parse().ok()?, min.parse().ok()?);
    Some((format!("{}{{}}{}", &name[..i + tag], &rest[digits.len()..]), v))
}

/// What a version-selecting loader goes by: an exact CUDA version, or only a major.
#[derive(Debug, Clone, Copy)]
enum Selector {
    Exact(CudaVersion),
    Major(u16),
}

/// The CUDA version a version-selecting loader picks: its row's variable (`BNB_CUDA_VERSION`),
/// else the CUDA a framework's version names (torch's `+cu128`), else the image's other CUDA
/// evidence (binaries that are not siblings): a shared runtime, `-cuNN` pypi packages, a static
/// runtime or a CUDA `DT_NEEDED`. None: nothing selects.
fn selector(
    report: &ImageReport,
    binaries: &[Binary],
    siblings: &BTreeSet<usize>,
    row: Option<&Sibling>,
) -> Option<(Selector, Origin)> {
    if let Some(v) =
        row.filter(|r| !r.env.is_empty()).and_then(|r| report.image.env.get(&r.env)).and_then(|v| digits_version(v))
    {
        return Some((Selector::Exact(v), Origin::Variable));
    }
    let pypi = || report.cuda_packages.iter().filter(|p| matches!(p.manager, crate::packages::PackageManager::Pypi));
    if let Some((_, (maj, min))) =
        crate::knowledge::get().framework_cuda(pypi().map(|p| (p.name.as_str(), p.version.as_str())))
    {
        return Some((Selector::Exact(CudaVersion::new(maj, min)), Origin::Framework));
    }
    if let Some((_, v)) = framework_version_py(report) {
        return Some((Selector::Exact(v), Origin::Framework));
    }
    // Strongest first: a shared CUDA runtime the image carries, then the `-cuNN` pypi packages,
    // then what other binaries link (a static runtime's version, a `DT_NEEDED` major).
    let others: Vec<&Binary> =
        binaries.iter().enumerate().filter(|(i, _)| !siblings.contains(i)).map(|(_, b)| b).collect();
    let runtime = |shared: bool| {
        others
            .iter()
            .filter_map(|b| b.facts.cudart.as_ref())
            .filter(|c| (c.linkage == Linkage::Shared) == shared)
            .map(|c| CudaVersion::new(c.major, c.minor))
            .max()
    };
    if let Some(v) = runtime(true) {
        return Some((Selector::Exact(v), Origin::Image));
    }
    if let Some(m) = pypi().filter_map(|p| crate::knowledge::get().cuda_major_of_name(&p.name)).max() {
        return Some((Selector::Major(m), Origin::Image));
    }
    let needed = others.iter().flat_map(|b| b.facts.cuda_needed.iter().filter_map(|n| cuda_major_of_soname(n))).max();
    let s = match (runtime(false), needed) {
        (Some(e), Some(m)) if m > e.major => Selector::Major(m),
        (Some(e), _) => Selector::Exact(e),
        (None, Some(m)) => Selector::Major(m),
        (None, None) => return None,
    };
    Some((s, Origin::Image))
}

/// A framework's CUDA as its own `version.py` says it (`torch/version.py`: `cuda = '12.8'`, what
/// `torch.version.cuda` returns and bitsandbytes reads), for a release whose version has no
/// local part to say it (PyPI's torch 2.8.0 is CUDA 12.8's).
fn framework_version_py(report: &ImageReport) -> Option<(&str, CudaVersion)> {
    let known = crate::knowledge::get();
    report.python.iter().find_map(|f| {
        let fw = known.frameworks.iter().find(|fw| f.module.strip_suffix(".version") == Some(fw.package.as_str()))?;
        let (_, v) = f.constants.iter().find(|(k, _)| k == "cuda")?;
        Some((fw.package.as_str(), CudaVersion::parse(v)?))
    })
}

/// Where a loader's CUDA version came from: its variable, a framework's version (what the
/// package's loader itself reads), or the image's other evidence (cudalint's estimate).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    Variable,
    Framework,
    Image,
}

/// `128` -> 12.8, `130` -> 13.0 (a loader variable's digits).
fn digits_version(v: &str) -> Option<CudaVersion> {
    if !(3..=4).contains(&v.len()) || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (maj, min) = v.split_at(v.len() - 1);
    Some(CudaVersion::new(maj.parse().ok()?, min.parse().ok()?))
}

/// A sibling the loader looks for and the image lacks.
#[derive(Debug, Clone)]
pub struct MissingSibling {
    /// The file it looks for: `libbitsandbytes_cuda128.so`.
    pub wanted: String,
    /// What happens then: `falls back to libbitsandbytes_cpu.so: its GPU functions are unavailable`.
    pub effect: String,
    /// Whose loader, and the knowledge row: `bitsandbytes 0.45.5 (knowledge: stack.toml:LINE)`.
    pub loader: String,
    /// Why that one: `torch's CUDA 12.8`, `BNB_CUDA_VERSION=128`.
    pub why: String,
    /// The variable setting that picks the newest sibling the image has: `BNB_CUDA_VERSION=126`
    /// (empty when the loader reads none).
    pub instead: String,
}

/// Version-selected siblings: the ones the loader does not pick (index -> the file it picks, or
/// what loads instead), and, on the one that stands for a group whose wanted file is missing, what
/// the loader looked for.
#[derive(Debug, Clone, Default)]
pub struct Siblings {
    pub unselected: BTreeMap<usize, String>,
    pub missing: BTreeMap<usize, MissingSibling>,
}

/// The siblings built per CUDA version and which one the loader picks here. A package with a
/// `[[sibling]]` row in the knowledge base is picked as its release's loader does (exactly, or
/// within the major), and a wanted file the image lacks is named; others get the newest of the
/// selected major at or below the selected version. With nothing in the image to select by, the
/// siblings are alternatives: the oldest stands for them, so they raise no floor above it.
pub fn unselected_siblings(report: &ImageReport, binaries: &[Binary]) -> Siblings {
    let mut groups: BTreeMap<(String, String), Vec<(usize, CudaVersion)>> = BTreeMap::new();
    for (i, b) in binaries.iter().enumerate() {
        if let Some((key, v)) = versioned_sibling(file_name(&b.facts.path)) {
            groups.entry((parent(&b.facts.path).to_string(), key)).or_default().push((i, v));
        }
    }
    let known = crate::knowledge::get();
    let row_of = |members: &[(usize, CudaVersion)]| {
        let name = file_name(&binaries[members[0].0].facts.path);
        known.siblings.iter().find(|r| name.starts_with(&r.prefix))
    };
    // A known loader judges even a lone sibling (its wanted file may be another); others need two.
    groups.retain(|_, m| m.len() > 1 || row_of(m).is_some());
    let all: BTreeSet<usize> = groups.values().flatten().map(|(i, _)| *i).collect();
    let mut out = Siblings::default();
    for members in groups.into_values() {
        let row = row_of(&members);
        let sel = selector(report, binaries, &all, row.map(|r| &r.row));
        let oldest = members.iter().min_by_key(|(_, v)| *v).expect("non-empty");
        let newest_of = |major: u16, upto: Option<CudaVersion>| {
            members.iter().filter(|(_, v)| v.major == major && upto.is_none_or(|u| *v <= u)).max_by_key(|(_, v)| *v)
        };
        // The release of the package that installed this group (another directory may hold
        // another release), else the image's only one of that name.
        let pkg = row.and_then(|r| {
            let own = members
                .iter()
                .map(|(i, _)| &binaries[*i].facts)
                .find(|f| f.package == r.package && !f.package_version.is_empty())
                .map(|f| f.package_version.as_str());
            own.or_else(|| report.cuda_packages.iter().find(|p| p.name == r.package).map(|p| p.version.as_str()))
                .map(|v| (r, v))
        });
        let loader = pkg.and_then(|(r, v)| r.loader(v).map(|l| (r, v, l)));
        let chosen = match (sel, loader) {
            // The loader's own inputs (its variable, the framework's CUDA) decide exactly; the
            // image's other evidence is only cudalint's estimate, and never makes a file missing.
            (Some((Selector::Exact(rt), origin)), Some((_, _, l))) if origin != Origin::Image => {
                let by_env = origin == Origin::Variable;
                let exact = members.iter().find(|(_, v)| *v == rt);
                match l.pick {
                    _ if by_env => exact,
                    Pick::Exact => exact,
                    Pick::SameMajor => exact.or_else(|| newest_of(rt.major, Some(rt))).or_else(|| {
                        members.iter().filter(|(_, v)| v.major == rt.major && *v > rt).min_by_key(|(_, v)| *v)
                    }),
                }
                .map(Ok)
                .unwrap_or(Err((rt, by_env)))
            }
            (Some((Selector::Exact(rt), _)), _) => {
                Ok(members.iter().find(|(_, v)| *v == rt).or_else(|| newest_of(rt.major, Some(rt))).unwrap_or(oldest))
            }
            (Some((Selector::Major(m), _)), _) => Ok(newest_of(m, None).unwrap_or(oldest)),
            (None, _) => Ok(oldest),
        };
        match chosen {
            Ok(&(pick, _)) => {
                let picked = file_name(&binaries[pick].facts.path).to_string();
                for (i, _) in members.iter().filter(|(i, _)| *i != pick) {
                    out.unselected.insert(*i, picked.clone());
                }
            }
            Err((rt, by_env)) => {
                let (r, version, l) = loader.expect("a missing sibling comes from a known loader");
                let key = file_name(&binaries[members[0].0].facts.path);
                let digits = format!("{}{}", rt.major, rt.minor);
                let wanted = versioned_sibling(key)
                    .map(|(k, _)| k.replacen("{}", &digits, 1))
                    .unwrap_or_else(|| format!("{}{digits}", r.prefix));
                let (instead, effect) = match l.missing {
                    Missing::Fallback if !r.fallback.is_empty() => {
                        (r.fallback.clone(), format!("falls back to {}: its GPU functions are unavailable", r.fallback))
                    }
                    _ => ("none".to_string(), "loads none of them: its GPU functions raise".to_string()),
                };
                let why = if by_env {
                    format!("{}={}", r.env, report.image.env.get(&r.env).cloned().unwrap_or_default())
                } else {
                    let fw = known
                        .framework_cuda(report.cuda_packages.iter().map(|p| (p.name.as_str(), p.version.as_str())));
                    match fw.map(|(n, _)| n).or_else(|| framework_version_py(report).map(|(n, _)| n)) {
                        Some(name) => format!("{name}'s CUDA {rt}"),
                        None => format!("the image's CUDA {rt}"),
                    }
                };
                for (i, _) in &members {
                    out.unselected.insert(*i, format!("{instead} loads instead: {wanted} is missing"));
                }
                // The newest member stands for the group (where the finding is said).
                let &(stand, newest) = members.iter().max_by_key(|(_, v)| *v).expect("non-empty");
                let instead = if r.env.is_empty() {
                    String::new()
                } else {
                    format!("{}={}{}", r.env, newest.major, newest.minor)
                };
                out.missing.insert(
                    stand,
                    MissingSibling {
                        wanted,
                        effect,
                        loader: format!("{} {version} (knowledge: {})", r.package, r.at),
                        why,
                        instead,
                    },
                );
            }
        }
    }
    out
}

/// The carried architectures of a binary, parsed from its `sm_*` list.
fn carried(b: &Binary) -> Vec<(Cc, Suffix)> {
    b.facts
        .sass
        .iter()
        .filter_map(|s| {
            let rest = s.strip_prefix("sm_")?;
            let (digits, suffix) = match rest.as_bytes().last()? {
                b'a' => (&rest[..rest.len() - 1], Suffix::A),
                b'f' => (&rest[..rest.len() - 1], Suffix::F),
                _ => (rest, Suffix::None),
            };
            Some((Cc::from_sm(digits.parse().ok()?), suffix))
        })
        .collect()
}

/// The package build to install instead, for a package whose CUDA major cannot target `cc`
/// (the knowledge base's frameworks and builds name it).
fn older_build(name: &str, major: u64) -> String {
    crate::knowledge::get().older_build(name, u16::try_from(major).unwrap_or(u16::MAX))
}

/// The fix for one binary on the failing targets: which build of its package to install, or
/// (for the user's own build) the architecture list that keeps what it carries and adds the
/// targets, never an architecture its CUDA major cannot build.
pub fn binary_fix(b: &Binary, failing: &[&Target]) -> (String, String, String) {
    let ccs: Vec<Cc> = failing.iter().map(|t| t.cc).collect();
    // The GPUs, once each: pools of one GPU on different drivers need the same code.
    let mut names: Vec<String> = Vec::new();
    for n in failing.iter().map(|t| format!("{} ({})", t.gpu(), t.cc)) {
        if !names.contains(&n) {
            names.push(n);
        }
    }
    let major = b.facts.cuda_major;
    let unbuildable: Vec<&&Target> = match tables::buildable(major) {
        Some((lo, hi)) => failing.iter().filter(|t| t.cc < lo || t.cc.major > hi.major).collect(),
        None => Vec::new(),
    };
    let f = &b.facts;
    if !f.package.is_empty() || f.vendor_library {
        let what = if f.package.is_empty() {
            format!("{} is one of NVIDIA's closed libraries", file_name(&f.path))
        } else {
            format!(
                "{} comes from the {} package {} {}",
                file_name(&f.path),
                f.package_manager,
                f.package,
                f.package_version
            )
        };
        let name = if f.package.is_empty() { file_name(&f.path).to_string() } else { f.package.clone() };
        let action = if let Some(t) = unbuildable.first() {
            format!(
                "{what}, built with CUDA {major}, which cannot target compute capability {} ({}): install {} instead",
                t.cc,
                t.gpu(),
                older_build(&name, major)
            )
        } else {
            format!("{what}: install a build of {name} that carries code for {}", names.join(", "))
        };
        return (action, String::new(), String::new());
    }
    let keep = carried(b);
    if let Some(t) = unbuildable.first() {
        let older = major - 1;
        let (lo, _) = tables::buildable(older).unwrap_or((t.cc, t.cc));
        let kept: Vec<(Cc, Suffix)> = keep.into_iter().filter(|(c, _)| *c >= lo).collect();
        let a = arch_fix_keeping(&kept, &ccs);
        return (
            format!(
                "CUDA {major} cannot build for compute capability {} ({}): rebuild with CUDA {older}.x, TORCH_CUDA_ARCH_LIST=\"{}\" (nvcc: {})",
                t.cc,
                t.gpu(),
                a.torch_arch_list,
                a.gencode
            ),
            a.torch_arch_list,
            a.gencode,
        );
    }
    let a = arch_fix_keeping(&keep, &ccs);
    if f.built_in_image {
        // Built during `docker build`, where no GPU is visible: the build fell back to its own
        // default architectures, and the list belongs before the step that compiled it.
        return (
            format!(
                "it was compiled by the step `{}` during the image build, where no GPU is visible: add `ENV \
                 TORCH_CUDA_ARCH_LIST=\"{}\"` (CMake: `CMAKE_CUDA_ARCHITECTURES`; nvcc: {}) before that step",
                f.step, a.torch_arch_list, a.gencode
            ),
            a.torch_arch_list,
            a.gencode,
        );
    }
    (
        format!("rebuild for the target GPUs: TORCH_CUDA_ARCH_LIST=\"{}\" (nvcc: {})", a.torch_arch_list, a.gencode),
        a.torch_arch_list,
        a.gencode,
    )
}

/// Why a binary fails on a target, briefly: `sm_75+ only` for a binary whose oldest SASS is
/// above the target; the driver it needs where code is there but unreadable; else its archs.
fn has(b: &Binary, c: &Coverage, t: &Target) -> String {
    if c.format_too_new > 0 {
        return format!("needs a CUDA {} driver to read its fatbin format", c.format_needs_cuda);
    }
    if c.ptx_too_new > 0 {
        return format!("needs a CUDA {} driver to JIT its PTX", c.needs_cuda);
    }
    if c.jit_disabled > 0 && c.no_image == 0 {
        return "has PTX only, and CUDA_DISABLE_PTX_JIT=1 forbids its JIT".to_string();
    }
    let carried = carried(b);
    let plain: Vec<Cc> = carried.iter().filter(|(_, s)| *s == Suffix::None).map(|(c, _)| *c).collect();
    match plain.iter().min() {
        Some(lo) if *lo > t.cc && carried.iter().all(|(_, s)| *s == Suffix::None) => {
            format!("has sm_{}+ only", lo.sm())
        }
        _ => format!("has {} only", b.facts.archs),
    }
}

/// What a target's headline says beside the binaries' verdicts: the loose kernel files for it
/// (lint/kernel_sets.rs), and what was not judged there where a finding still says so
/// (lint/unjudged.rs).
#[derive(Debug, Clone, Default)]
pub struct Beside {
    /// Files of the image's kernel sets that are for the GPU, of `loose_files`.
    pub loose_for: u64,
    pub loose_files: u64,
    /// Each thing not judged: `what`.
    pub not_judged: Vec<String>,
}

/// One line per target, from the same evaluation as the findings and the exit code: `errors`
/// are the error findings left for this target (its own and image-wide ones) after ignores and
/// the baseline, `suppressed` how many were taken away. `H100 · driver 580.65.06: runs
/// (native)`; a target with an error never reads "runs", and one whose failures were all
/// suppressed reads "accepted". Built in steps: the causes that fail it (platform, binaries,
/// run-time compilers, other errors), then what runs (JIT, gated code, lazy compilers, loose
/// kernel files, what was not judged). "No device code" only where there is none and nothing
/// was left unjudged.
#[allow(clippy::too_many_arguments)]
pub fn headline(
    t: &Target,
    d: &Deploy,
    judged: &[(&Binary, &Coverage)],
    errors: &[&Finding],
    suppressed: usize,
    compiled: &[&CompilerFacts],
    warned: &[&Finding],
    beside: &Beside,
) -> Headline {
    let mut detail = HeadlineDetail {
        blocked: d.blocked,
        unbuildable_major: d.unbuildable_major,
        unbuildable_packages: d.unbuildable_packages.clone(),
        ..Default::default()
    };
    let (gated, noticeable) = code_here(judged, &mut detail);
    let binary_code = judged.iter().any(|(_, c)| c.class != Class::NotApplicable);
    (detail.loose_for, detail.loose_files, detail.not_judged) =
        (beside.loose_for, beside.loose_files, beside.not_judged.clone());
    let mut causes: Vec<String> = platform_cause(d).into_iter().collect();
    if let Some(arch) = binaries_cause(t, d, judged, errors, &mut detail) {
        causes.push(match (causes.is_empty(), d.wrong_host.is_empty() || d.blocked) {
            (true, _) => arch,
            // Only the platform stands before it: the binaries' own verdict, for an arm64 build.
            (false, false) => format!("and in an arm64 build: {arch}"),
            (false, true) => format!("even with a newer driver: {arch}"),
        });
    }
    let failing_compilers: Vec<&CompilerFacts> =
        compiled.iter().copied().filter(|c| cannot_serve(c) && said(c, errors)).collect();
    causes.extend(failing_compilers.iter().map(|c| compile_fail(c)));
    detail.compilers.extend(failing_compilers.iter().map(|c| c.what.clone()));
    let other = unexplained(errors, judged, !causes.is_empty(), &failing_compilers);
    detail.other_errors = other.clone();
    causes.extend(other);
    let (verdict, text) = if !errors.is_empty() {
        let causes = if causes.is_empty() { vec![format!("{} error(s)", errors.len())] } else { causes };
        (HeadlineVerdict::Fails, format!("fails — {}", shown(&causes, 2)))
    } else if !causes.is_empty() {
        // The evaluation says it fails, and every finding that says so was ignored, baselined,
        // disabled or lowered below error: the gate accepts it, the headline says both.
        let n = if suppressed > 0 { format!(", {suppressed} finding(s) suppressed") } else { String::new() };
        (HeadlineVerdict::Accepted, format!("accepted{n} — would fail: {}", shown(&causes, 2)))
    } else if !binary_code && beside.loose_files == 0 && beside.not_judged.is_empty() {
        (HeadlineVerdict::Runs, "no device code for this target to judge".to_string())
    } else {
        runs(gated, noticeable, binary_code, beside, compiled, warned, &mut detail)
    };
    detail.body = text.clone();
    let not_judged = beside.not_judged.len() as u64;
    Headline { target: t.name.clone(), verdict, text: format!("{}: {text}", who(t)), not_judged, detail }
}

/// The target as the headline names it: a pool named by its driver is called by its GPU, the
/// driver following.
fn who(t: &Target) -> String {
    match (&t.driver, t.driver_cuda) {
        (Some(drv), _) => format!("{} · driver {drv}", t.called()),
        (None, Some(c)) => format!("{} · CUDA {c} driver", t.called()),
        _ => t.name.clone(),
    }
}

/// What fails the target before any binary: the host platform, a driver that cannot drive the
/// GPU, or one below the image's floor (the first in that order).
fn platform_cause(d: &Deploy) -> Option<String> {
    if !d.wrong_host.is_empty() {
        Some(d.wrong_host.clone())
    } else if !d.cannot_drive.is_empty() {
        Some(format!("the driver cannot drive this GPU: {}", d.cannot_drive))
    } else if !d.floor_ok {
        let first = d.why.split("; ").next().unwrap_or_default();
        Some(format!("the image needs driver ≥ {} (CUDA {}): {first}", d.needs_driver, d.needs_cuda))
    } else {
        None
    }
}

/// The binaries with no code that runs here that an error still names (all of them when every
/// such error was suppressed): one root cause when a CUDA major that cannot target the GPU
/// explains them all, else the first of them by name.
fn binaries_cause(
    t: &Target,
    d: &Deploy,
    judged: &[(&Binary, &Coverage)],
    errors: &[&Finding],
    detail: &mut HeadlineDetail,
) -> Option<String> {
    let flagged = |b: &Binary| errors.iter().any(|f| f.path.as_deref() == Some(b.facts.path.as_str()));
    let none: Vec<String> = judged
        .iter()
        .filter(|(b, c)| c.class == Class::None && (errors.is_empty() || flagged(b)))
        .map(|(b, c)| {
            detail.failing.push(b.facts.path.clone());
            format!("{} {}", file_name(&b.facts.path), has(b, c, t))
        })
        .collect();
    if none.is_empty() {
        return None;
    }
    if d.unbuildable_major > 0 && d.unbuildable_count as usize == none.len() {
        let root = format!(
            "CUDA {} builds cannot target {} ({} binaries: {})",
            d.unbuildable_major, d.unbuildable_architecture, d.unbuildable_count, d.unbuildable_packages
        );
        detail.root_cause = Some(root.clone());
        return Some(root);
    }
    Some(shown(&none, 2))
}

/// A run-time compiler that cannot serve the target (it does not know the GPU, or the driver
/// cannot load what it makes). One the table does not know is not judged (lint/unjudged.rs).
fn cannot_serve(c: &CompilerFacts) -> bool {
    (c.known && !c.knows_target) || !c.driver_problem.is_empty()
}

/// A finding among `among` still says so of this compiler (its path, its consumer's package).
fn said(c: &CompilerFacts, among: &[&Finding]) -> bool {
    among.iter().any(|f| {
        f.path.as_deref() == Some(c.path.as_str())
            && f.package.as_deref().is_some_and(|p| p.starts_with(&format!("{} ", c.consumer)))
    })
}

fn compile_fail(c: &CompilerFacts) -> String {
    let why = if c.driver_problem.is_empty() { &c.why } else { &c.driver_problem };
    format!("{} fail ({why})", c.what)
}

/// Errors no coverage verdict, platform cause or compiler explains (a shipped driver library, an
/// analysis that did not finish): named by rule and file, once each.
fn unexplained(
    errors: &[&Finding],
    judged: &[(&Binary, &Coverage)],
    any_cause: bool,
    failing_compilers: &[&CompilerFacts],
) -> Vec<String> {
    let explained = |f: &Finding| {
        f.path.as_ref().is_some_and(|p| judged.iter().any(|(b, c)| c.class == Class::None && b.facts.path == *p))
            || (f.path.is_none() && f.target.is_some() && any_cause)
            || failing_compilers.iter().any(|c| f.path.as_deref() == Some(c.path.as_str()))
    };
    let mut out: Vec<String> = Vec::new();
    for f in errors.iter().filter(|f| !explained(f)) {
        let s = match &f.path {
            // A kernel set's directory ends in `/`: named by its last component.
            Some(p) => format!("{} ({})", f.name, file_name(p.trim_end_matches('/'))),
            None => f.name.clone(),
        };
        if !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

/// The code of a target that is not native, into `detail` whatever the verdict (`support` reads
/// the driver its PTX JIT needs on a target that a run-time compiler fails): the binaries gated
/// to other chips, as the text names them, and whether the PTX JIT is noticeable (under 1 MiB,
/// a 10 KiB module, it takes milliseconds: said in the text but no `runs-jit`).
fn code_here(judged: &[(&Binary, &Coverage)], detail: &mut HeadlineDetail) -> (Vec<String>, bool) {
    let gated: Vec<String> = judged
        .iter()
        .filter(|(_, c)| c.class == Class::ArchGated)
        .map(|(b, c)| {
            detail.gated.push((b.facts.path.clone(), c.gated_for.clone()));
            format!("{} (for {}) unavailable", file_name(&b.facts.path), c.gated_for)
        })
        .collect();
    let jitting: Vec<u64> = judged
        .iter()
        .filter(|(_, c)| c.class == Class::Jit || (c.class == Class::Native && c.jit > 0))
        .map(|(_, c)| {
            detail.jit_needs_cuda = detail.jit_needs_cuda.max(CudaVersion::parse(&c.needs_cuda));
            c.jit_ptx_bytes
        })
        .collect();
    detail.jit_binaries = jitting.len() as u64;
    detail.jit_bytes = jitting.iter().sum();
    (gated, jitting.iter().any(|b| *b >= super::coverage::JIT_NOTICEABLE_BYTES))
}

/// The verdict of a target nothing fails: native or PTX JIT (and how much), or how many loose
/// kernel files are for it where no binary has code, what was not judged, code gated to other
/// chips, and optional paths that compile at run time and cannot here (torch.compile on a B300).
fn runs(
    gated: Vec<String>,
    noticeable: bool,
    binary_code: bool,
    beside: &Beside,
    compiled: &[&CompilerFacts],
    warned: &[&Finding],
    detail: &mut HeadlineDetail,
) -> (HeadlineVerdict, String) {
    let size = super::facts::human_size(detail.jit_bytes);
    let cost = if noticeable { "" } else { ": milliseconds" };
    let files = |n: u64| super::kernel_sets::grouped(n);
    let mut s = match detail.jit_binaries {
        _ if !binary_code && beside.loose_for > 0 => {
            format!("runs ({} of {} files for it)", files(beside.loose_for), files(beside.loose_files))
        }
        // CL028 ignored or disabled: the count still says no file is for it.
        _ if !binary_code && beside.not_judged.is_empty() => {
            format!("runs (none of {} files for it)", files(beside.loose_files))
        }
        _ if !binary_code => "runs".to_string(),
        0 => "runs (native)".to_string(),
        1 => format!("runs (PTX JIT for 1 binary, {size}{cost})"),
        n => format!("runs (PTX JIT for {n} binaries, {size}{cost})"),
    };
    // Never a bare "runs" where something was not judged.
    match beside.not_judged.len() {
        0 => {}
        1 => s.push_str(", with 1 thing not judged"),
        n => s.push_str(&format!(", with {n} things not judged")),
    }
    if binary_code && beside.loose_files > 0 {
        s.push_str(&format!(
            "; {} of {} loose kernel files for it",
            files(beside.loose_for),
            files(beside.loose_files)
        ));
    }
    if !gated.is_empty() {
        s.push_str(&format!("; {}", shown(&gated, 2)));
    }
    let lazy: Vec<&CompilerFacts> = compiled.iter().copied().filter(|c| cannot_serve(c) && said(c, warned)).collect();
    detail.compilers.extend(lazy.iter().map(|c| c.what.clone()));
    if !lazy.is_empty() {
        // What still runs when a path that compiles at run time cannot (torch's eager ops
        // without torch.compile): the consumer row's words, the narrowest (the table's last
        // such row) where several fail.
        let still = compiled
            .iter()
            .rfind(|c| !c.still_runs.is_empty() && cannot_serve(c) && said(c, warned))
            .map(|c| c.still_runs.as_str());
        let head = match still {
            Some(w) => s.replacen("runs", w, 1).replacen(&format!("{w} (native)"), w, 1),
            None => s,
        };
        s = format!("{head}; {}", lazy.iter().map(|c| compile_fail(c)).collect::<Vec<_>>().join("; "));
    }
    (if noticeable { HeadlineVerdict::RunsJit } else { HeadlineVerdict::Runs }, s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lint::facts::BinaryFacts;
    use crate::lint::rules::Severity;

    /// The binaries that JIT or are gated are in the detail whatever the verdict: `support` reads
    /// the driver the PTX JIT needs on a target that only a run-time compiler fails.
    #[test]
    fn the_detail_says_what_jits_and_what_is_gated_on_a_failing_target_too() {
        let bin =
            |path: &str| Binary { facts: BinaryFacts { path: path.into(), ..Default::default() }, modules: vec![] };
        let (jit, gated) = (bin("/a/libjit.so"), bin("/a/libgated.so"));
        let cj = Coverage { class: Class::Jit, needs_cuda: "12.8".into(), jit_ptx_bytes: 4096, ..Default::default() };
        let cg = Coverage { class: Class::ArchGated, gated_for: "compute capability 9.0".into(), ..Default::default() };
        let judged = [(&jit, &cj), (&gated, &cg)];
        let t = Target::new("B200", Cc { major: 10, minor: 0 });
        let d = Deploy { floor_ok: true, ..Default::default() };
        let ptxas = CompilerFacts {
            path: "/t/ptxas".into(),
            consumer: "triton".into(),
            what: "Triton's kernels".into(),
            known: true,
            knows_target: false,
            ..Default::default()
        };
        let error = Finding {
            rule: "CL020".into(),
            name: "runtime-compiler-cannot-target".into(),
            severity: Severity::Error,
            message: String::new(),
            fix: String::new(),
            path: Some(ptxas.path.clone()),
            layer: None,
            step: None,
            package: Some("triton 3.4.0 (pypi)".into()),
            purl: None,
            target: Some(t.name.clone()),
            fingerprint: String::new(),
            cause: None,
        };
        for (errors, verdict) in [(vec![&error], HeadlineVerdict::Fails), (vec![], HeadlineVerdict::Runs)] {
            let h = headline(&t, &d, &judged, &errors, 0, &[&ptxas], &[], &Beside::default());
            assert_eq!(h.verdict, verdict, "{}", h.text);
            let x = &h.detail;
            assert_eq!((x.jit_binaries, x.jit_bytes, x.jit_needs_cuda), (1, 4096, CudaVersion::parse("12.8")));
            assert_eq!(x.gated, [("/a/libgated.so".to_string(), "compute capability 9.0".to_string())]);
        }
    }

    /// The headline says what loose kernel files and things not judged there are: never a bare
    /// "runs" where something was not judged, and "no device code" only where there is none.
    #[test]
    fn the_headline_counts_loose_files_and_what_was_not_judged() {
        let t = Target::new("H100", Cc { major: 9, minor: 0 });
        let d = Deploy { floor_ok: true, ..Default::default() };
        let lib = Binary { facts: BinaryFacts { path: "/a/lib.so".into(), ..Default::default() }, modules: vec![] };
        let native = Coverage { class: Class::Native, ..Default::default() };
        let set = |loose_for: u64, n: usize| Beside {
            loose_for,
            loose_files: 300,
            not_judged: vec!["the 300 loose kernel files in /k/".to_string(); n],
        };
        let text = |judged: &[(&Binary, &Coverage)], b: &Beside| headline(&t, &d, judged, &[], 0, &[], &[], b).text;
        assert_eq!(text(&[], &Beside::default()), "H100: no device code for this target to judge");
        assert_eq!(text(&[], &set(120, 0)), "H100: runs (120 of 300 files for it)");
        assert_eq!(text(&[], &set(0, 1)), "H100: runs, with 1 thing not judged");
        assert_eq!(text(&[], &set(0, 0)), "H100: runs (none of 300 files for it)");
        assert_eq!(
            text(&[(&lib, &native)], &set(0, 2)),
            "H100: runs (native), with 2 things not judged; 0 of 300 loose kernel files for it"
        );
        let h = headline(&t, &d, &[], &[], 0, &[], &[], &set(0, 1));
        assert_eq!((h.verdict, h.not_judged), (HeadlineVerdict::Runs, 1));
    }
}
