//! The inverse question: on which GPUs and drivers does an image run? Every GPU cudalint knows
//! is one target of one evaluation (`Policy::judge`, the scan's own, ignores and baseline
//! included); each GPU's result and minimum driver are read from its headline, so a cell never
//! says other than a one-target `scan` of that GPU.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::policy::Policy;
use super::report::{Headline, HeadlineVerdict, LintImage, LintReport};
use super::rules::EvalError;
use super::targets::Target;
use super::verdict::{Floor, shown};
use crate::cuda::gpus::{self, Gpu, Host};
use crate::cuda::{Cc, CudaVersion, DriverVersion, drivers, tables};
use crate::image::ImageReport;
use crate::layer::path::file_name;
use crate::schema::{Tool, words};

/// The support report's document name (docs/schema.md).
pub const SCHEMA: &str = crate::schema::SUPPORT;

words! {
    /// How an image fares on one GPU (docs/schema.md).
    pub enum Support {
        /// Every binary has SASS for it.
        Native = "native",
        /// Runs, compiling PTX at first use.
        Jit = "jit",
        /// Runs; code for other chips only ('a'/'f' variants, optional NVIDIA libraries) is
        /// unavailable there, and its callers check before using it.
        ArchGated = "arch-gated",
        /// Its ahead-of-time code runs; a compiler it uses at run time (Triton's ptxas, NVRTC)
        /// cannot target the GPU.
        RuntimeCompiler = "runtime-compiler",
        /// Does not run: binaries without code for it, or no driver for it meets the image's
        /// floor.
        Fails = "fails",
        /// The image's platform does not run on this GPU's hosts (an amd64 image on a Jetson).
        NotApplicable = "n/a",
    }
}

impl Support {
    /// The image runs there (its ahead-of-time code, at least).
    pub fn runs(self) -> bool {
        matches!(self, Support::Native | Support::Jit | Support::ArchGated | Support::RuntimeCompiler)
    }
}

/// One GPU's row.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GpuSupport {
    pub name: String,
    pub compute_capability: String,
    /// `Volta`, `Blackwell`.
    pub architecture: String,
    /// The hosts it comes in: `any`, `arm64` (Grace), `jetson`.
    pub host: Host,
    pub result: Support,
    /// The oldest driver this image runs on with this GPU: the image's floor, the GPU's first
    /// driver, the driver its PTX JIT needs, whichever is newest. Absent where the result is
    /// `n/a` or no driver works, and on Jetson (Jetson Linux brings its driver).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_driver: Option<String>,
    /// What sets `min_driver`.
    pub min_driver_why: String,
    /// An older host driver (R535 and newer) that works through the image's forward-compatibility
    /// libraries on this GPU, where they apply.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forward_compat_driver: Option<String>,
    /// The binaries (paths) that decide a `fails`.
    pub binaries: Vec<String>,
    /// Why, briefly: the JIT cost, what is gated, which compiler falls short, why it fails.
    pub detail: String,
    /// The target's headline in a one-GPU `scan`.
    pub headline: String,
    /// Every finding that says it fails was ignored, baselined or lowered (`accepted` headline).
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub accepted: bool,
}

/// The image's driver floor.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SupportFloor {
    /// The CUDA version the image needs from the driver (`13.0`); empty: no CUDA runtime found.
    pub cuda: String,
    /// The oldest driver of that CUDA major (minor version compatibility): `580.65.06`.
    pub driver: String,
    pub why: String,
}

/// Deserialize: read back from a support attestation (`support --from-attestation`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SupportReport {
    #[serde(skip_deserializing, default = "this_schema")]
    pub schema: &'static str,
    pub tool: Tool,
    /// The image as it was named (`registry/repo:tag`, `oci:DIR`, an archive's path).
    pub reference: String,
    pub image: LintImage,
    /// `runs on compute capability 7.5–12.1 (Turing → Blackwell) with driver ≥ 580.65.06; fails on Volta and older (CUDA 13 builds: torch, vllm, nvidia-cublas)`.
    pub summary: String,
    pub floor: SupportFloor,
    /// The `NVIDIA_REQUIRE_CUDA` constraint that admits exactly the drivers and GPUs this matrix
    /// runs on, in libnvidia-container's grammar (`cuda>=13.0,arch>=7.5`).
    pub require: String,
    /// Every GPU cudalint knows, by compute capability.
    pub gpus: Vec<GpuSupport>,
    pub notes: Vec<String>,
    /// For a wheel: the wheel-variant properties its code supports, in the NVIDIA provider's
    /// namespace (PEP 817/825 drafts, docs/variants.md): `nvidia :: sm_arch :: 90_real`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub variant_properties: Vec<String>,
    /// The `*.dist-info/variant.json` declarations found (CL023 checks them against the code).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub declared_variants: Vec<crate::packages::VariantDecl>,
}

/// A support document's `schema`, read back: the attestation reader checked it is this one.
fn this_schema() -> &'static str {
    SCHEMA
}

#[derive(Debug, thiserror::Error)]
pub enum SupportError {
    #[error(transparent)]
    Eval(#[from] EvalError),
    /// A matrix of nothing is no answer: the gate fails closed.
    #[error("no CUDA device code and no CUDA runtime found: nothing to judge (is this the image you meant?)")]
    NothingToJudge,
}

/// The support matrix of `inventory` under `policy`'s rules, ignores and baseline.
/// Returns the evaluation too: its grid is the HTML report's.
pub fn support(
    policy: &Policy,
    reference: &str,
    inventory: &ImageReport,
) -> Result<(SupportReport, LintReport), SupportError> {
    let platform = inventory.image.platform.as_deref();
    // With no driver named, a target's evaluation depends on its compute capability alone: one
    // target per compute capability, named by its first GPU, stands for all of them.
    let mut targets: Vec<Target> = Vec::new();
    for g in gpus::GPUS.iter().filter(|g| g.host.runs(platform)) {
        if !targets.iter().any(|t| t.cc == g.cc) {
            targets.push(Target::new(g.name, g.cc));
        }
    }
    let report = policy.judge(inventory, &targets, None)?;
    // A kernel set's files are device code to judge too.
    let modules: u64 = report.matrix.iter().map(|r| r.modules + r.kernel_set.as_ref().map_or(0, |s| s.files)).sum();
    if modules == 0 && report.floor.major == 0 {
        return Err(SupportError::NothingToJudge);
    }
    let mut s = from_report(reference, &report, platform);
    if inventory.image.source == crate::image::SourceKind::Wheel {
        s.variant_properties = super::variants::supported(inventory).iter().map(ToString::to_string).collect();
    }
    s.declared_variants = inventory.variants.clone();
    Ok((s, report))
}

/// The matrix from an evaluation whose targets are GPUs of the table, by name (those missing
/// are `n/a`).
pub fn from_report(reference: &str, report: &LintReport, platform: Option<&str>) -> SupportReport {
    let mut rows: Vec<GpuSupport> = Vec::new();
    for g in gpus::GPUS {
        let judged = report.targets.iter().position(|t| t.cc == g.cc && g.host.runs(platform));
        let headline = judged.and_then(|i| report.headlines.get(i));
        rows.push(match headline {
            Some(h) => row(g, h, report),
            None => GpuSupport {
                name: g.name.to_string(),
                compute_capability: g.cc.to_string(),
                architecture: gpus::architecture(g.cc).to_string(),
                host: g.host,
                result: Support::NotApplicable,
                min_driver: None,
                min_driver_why: String::new(),
                forward_compat_driver: None,
                binaries: Vec::new(),
                detail: format!(
                    "{}; the image is {}",
                    match g.host {
                        Host::Jetson => "a Jetson module (arm64, Jetson Linux)",
                        _ => "comes with an arm64 host only",
                    },
                    platform.unwrap_or("of another platform")
                ),
                headline: String::new(),
                accepted: false,
            },
        });
    }
    // By compute capability, the table's order within one.
    rows.sort_by_key(|r| Cc::parse(&r.compute_capability));
    let floor = &report.floor;
    let require = require(&rows, floor);
    SupportReport {
        schema: SCHEMA,
        tool: Tool::current(),
        reference: reference.to_string(),
        image: report.image.clone(),
        summary: summary(&rows, floor, report),
        floor: SupportFloor {
            cuda: floor.needs_cuda.clone(),
            driver: floor.needs_driver.clone(),
            why: floor.why.clone(),
        },
        require,
        gpus: rows,
        notes: report.notes.clone(),
        variant_properties: Vec::new(),
        declared_variants: Vec::new(),
    }
}

fn row(g: &Gpu, h: &Headline, report: &LintReport) -> GpuSupport {
    let d = &h.detail;
    let names = |paths: &[String]| {
        let mut v: Vec<&str> = paths.iter().map(|p| file_name(p)).collect();
        v.dedup();
        shown(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>(), 3)
    };
    let (mut result, mut detail) = match h.verdict {
        HeadlineVerdict::Fails | HeadlineVerdict::Accepted => {
            if d.failing.is_empty() && !d.blocked && d.other_errors.is_empty() && !d.compilers.is_empty() {
                (Support::RuntimeCompiler, format!("{} fail", d.compilers.join("; ")))
            } else {
                let mut why: Vec<String> = Vec::new();
                if let Some(root) = &d.root_cause {
                    why.push(root.clone());
                } else if d.unbuildable_major > 0 {
                    // Most of them, not all: the cause first, then every binary.
                    why.push(format!(
                        "CUDA {} builds cannot target {} ({}); no code for it in {}",
                        d.unbuildable_major,
                        gpus::architecture(g.cc),
                        d.unbuildable_packages,
                        names(&d.failing)
                    ));
                } else if !d.failing.is_empty() {
                    why.push(format!("no code for it in {}", names(&d.failing)));
                }
                why.extend(d.other_errors.iter().cloned());
                why.extend(d.compilers.iter().map(|c| format!("{c} fail")));
                (Support::Fails, why.join("; "))
            }
        }
        HeadlineVerdict::Runs | HeadlineVerdict::RunsJit => {
            if !d.compilers.is_empty() {
                (Support::RuntimeCompiler, format!("{} fail", d.compilers.join("; ")))
            } else if !d.gated.is_empty() {
                let paths: Vec<String> = d.gated.iter().map(|(p, _)| p.clone()).collect();
                (Support::ArchGated, format!("{} unavailable", names(&paths)))
            } else if h.verdict == HeadlineVerdict::RunsJit {
                let size = super::facts::human_size(d.jit_bytes);
                let cost = if d.jit_bytes < super::coverage::JIT_NOTICEABLE_BYTES {
                    "milliseconds"
                } else if d.jit_bytes < 64 << 20 {
                    "seconds"
                } else {
                    "minutes"
                };
                let n =
                    if d.jit_binaries == 1 { "1 binary".to_string() } else { format!("{} binaries", d.jit_binaries) };
                (Support::Jit, format!("PTX JIT for {n}, {size}: {cost} at first use"))
            } else if d.jit_binaries > 0 {
                // A few KiB of PTX compile in milliseconds: the headline says "runs", so does this.
                (Support::Native, format!("PTX JIT of {}: milliseconds", super::facts::human_size(d.jit_bytes)))
            } else {
                (Support::Native, String::new())
            }
        }
    };
    // What the headline says was not judged, said here too.
    if result.runs() && !d.not_judged.is_empty() {
        let open = format!("not judged: {}", shown(&d.not_judged, 2));
        detail = if detail.is_empty() { open } else { format!("{detail}; {open}") };
    }
    let (mut min, mut why) = min_driver(g, &report.floor, d.jit_needs_cuda);
    if let (Some(m), Some(last)) = (&min, drivers::last_branch(g.cc))
        && m.branch() > last
        && result.runs()
    {
        result = Support::Fails;
        detail = format!("no driver drives {} and meets {why}: its last branch is R{last}", g.name);
        min = None;
        why = String::new();
    }
    let forward =
        report.compat.as_ref().filter(|_| result.runs() && drivers::forward_compat_supported(g.name)).and_then(
            |(dir, v)| {
                // The host branch must be R535 or newer and older than the libraries' own.
                let lo = DriverVersion::parse("535.54.03").expect("literal");
                let first = drivers::first_driver(g.name, g.cc).and_then(|f| DriverVersion::parse(f.version));
                let at = first.filter(|f| *f > lo).unwrap_or(lo);
                (min.as_ref().is_some_and(|m| *m > at) && at.branch() < v.branch())
                    .then(|| format!("{at} with the forward-compatibility libraries in {dir} ({v})"))
            },
        );
    if result == Support::Fails {
        min = None;
        why = String::new();
    }
    if g.host == Host::Jetson {
        min = None;
        why = "Jetson Linux (JetPack) brings the driver".to_string();
    }
    let binaries = if result == Support::Fails { d.failing.clone() } else { Vec::new() };
    GpuSupport {
        name: g.name.to_string(),
        compute_capability: g.cc.to_string(),
        architecture: gpus::architecture(g.cc).to_string(),
        host: g.host,
        result,
        min_driver: min.map(|m| m.to_string()),
        min_driver_why: why,
        forward_compat_driver: forward,
        binaries,
        detail,
        headline: format!("{}: {}", g.name, d.body),
        accepted: h.verdict == HeadlineVerdict::Accepted,
    }
}

/// The newest of: the image's floor, the GPU's first driver, the driver its PTX JIT needs.
fn min_driver(g: &Gpu, floor: &Floor, jit: Option<CudaVersion>) -> (Option<DriverVersion>, String) {
    let mut best: Option<(DriverVersion, String)> = None;
    let mut consider = |v: Option<DriverVersion>, why: String| {
        if let Some(v) = v
            && best.as_ref().is_none_or(|(b, _)| v > *b)
        {
            best = Some((v, why));
        }
    };
    if let Some(v) = DriverVersion::parse(&floor.needs_driver) {
        let first = floor.why.split("; ").next().unwrap_or_default();
        consider(Some(v), format!("the image's floor, CUDA {} ({first})", floor.needs_cuda));
    }
    if let Some(f) = drivers::first_driver(g.name, g.cc) {
        consider(DriverVersion::parse(f.version), format!("the first driver for {}", g.name));
    }
    if let Some(c) = jit {
        consider(DriverVersion::parse(&tables::driver_for(c)), format!("its PTX JIT needs a CUDA {c} driver"));
    }
    match best {
        Some((v, why)) => (Some(v), why),
        None => (None, "no driver floor known".to_string()),
    }
}

/// Architectures, in order, of a set of rows: `Volta`, `Pascal and older`.
fn archs(rows: &[&GpuSupport]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in rows {
        if !out.contains(&r.architecture) {
            out.push(r.architecture.clone());
        }
    }
    out
}

/// `runs on compute capability 7.0–12.1 (Volta → Blackwell) with driver ≥ 525.60.13; fails on
/// Pascal and older (...)`.
fn summary(rows: &[GpuSupport], floor: &Floor, report: &LintReport) -> String {
    let judged: Vec<&GpuSupport> = rows.iter().filter(|r| r.result != Support::NotApplicable).collect();
    let runs: Vec<&GpuSupport> = judged.iter().copied().filter(|r| r.result.runs()).collect();
    let fails: Vec<&GpuSupport> = judged.iter().copied().filter(|r| r.result == Support::Fails).collect();
    let cc = |r: &GpuSupport| Cc::parse(&r.compute_capability).expect("table");
    let mut parts: Vec<String> = Vec::new();
    match (runs.first(), runs.last()) {
        (Some(lo), Some(hi)) => {
            let range = if cc(lo) == cc(hi) {
                format!("compute capability {} ({})", lo.compute_capability, lo.architecture)
            } else if lo.architecture == hi.architecture {
                format!("compute capability {}–{} ({})", lo.compute_capability, hi.compute_capability, lo.architecture)
            } else {
                format!(
                    "compute capability {}–{} ({} → {})",
                    lo.compute_capability, hi.compute_capability, lo.architecture, hi.architecture
                )
            };
            let driver = if floor.needs_driver.is_empty() {
                String::new()
            } else {
                format!(" with driver ≥ {}", floor.needs_driver)
            };
            parts.push(format!("runs on {range}{driver}"));
        }
        _ => parts.push("runs on no GPU cudalint knows".to_string()),
    }
    let lowest = runs.first().map(|r| cc(r));
    let highest = runs.last().map(|r| cc(r));
    let below: Vec<&GpuSupport> = fails.iter().copied().filter(|r| lowest.is_none_or(|l| cc(r) < l)).collect();
    let above: Vec<&GpuSupport> = fails.iter().copied().filter(|r| highest.is_some_and(|h| cc(r) > h)).collect();
    let within: Vec<&GpuSupport> = fails
        .iter()
        .copied()
        .filter(|r| lowest.is_some_and(|l| cc(r) > l) && highest.is_some_and(|h| cc(r) < h))
        .collect();
    let cause = |set: &[&GpuSupport]| -> String {
        // The newest failing GPU of the set speaks for it: its root cause, else its binaries.
        let Some(r) = set.iter().max_by_key(|r| cc(r)) else { return String::new() };
        let d = report
            .targets
            .iter()
            .position(|t| t.cc.to_string() == r.compute_capability)
            .map(|i| &report.headlines[i].detail);
        if let Some(d) = d.filter(|d| d.unbuildable_major > 0) {
            return format!(" (CUDA {} builds: {})", d.unbuildable_major, d.unbuildable_packages);
        }
        if r.binaries.is_empty() {
            return format!(" ({})", r.detail);
        }
        let names: BTreeSet<&str> = r.binaries.iter().map(|p| file_name(p)).collect();
        format!(" (no code for it in {})", shown(&names.into_iter().map(String::from).collect::<Vec<_>>(), 3))
    };
    if runs.is_empty() {
        let platform = report.image.platform.as_deref().map_or(String::new(), |p| format!(" of its platform ({p})"));
        return format!("runs on no GPU cudalint knows: fails on every GPU{platform}{}", cause(&fails));
    }
    // An architecture that also runs is named by compute capability instead.
    let running = archs(&runs);
    let ccs = |set: &[&GpuSupport]| {
        let mut v: Vec<String> = set.iter().map(|r| r.compute_capability.clone()).collect();
        v.dedup();
        v
    };
    if !below.is_empty() {
        // The newest failing architecture, and the older ones where their cause differs
        // (Turing: one library without sm_75; Volta and older: CUDA 13 builds).
        let a = archs(&below);
        let newest = a.last().cloned().unwrap_or_default();
        let of = |arch: &str| below.iter().copied().filter(|r| r.architecture == arch).collect::<Vec<_>>();
        let older: Vec<&GpuSupport> = below.iter().copied().filter(|r| r.architecture != newest).collect();
        // Split only where the older ones have a cause of their own: a CUDA major that cannot
        // build for them.
        let builds = |c: &str| c.starts_with(" (CUDA ");
        let split = !older.is_empty() && builds(&cause(&older)) && !builds(&cause(&of(&newest)));
        let name = |arch: &str, more: bool| {
            let and_older = if more { " and older" } else { "" };
            if running.iter().any(|r| r == arch) {
                let c = ccs(&of(arch));
                format!("compute capability {}{and_older}", c.last().cloned().unwrap_or_default())
            } else {
                format!("{arch}{and_older}")
            }
        };
        if split {
            parts.push(format!("fails on {}{}", name(&newest, false), cause(&of(&newest))));
            let rest = archs(&older);
            let next = rest.last().cloned().unwrap_or_default();
            parts.push(format!("fails on {}{}", name(&next, rest.len() > 1), cause(&older)));
        } else {
            parts.push(format!("fails on {}{}", name(&newest, a.len() > 1), cause(&below)));
        }
    }
    if !within.is_empty() {
        let names: Vec<String> = within.iter().map(|r| r.name.clone()).collect();
        parts.push(format!("fails on {}{}", shown(&names, 4), cause(&within)));
    }
    if !above.is_empty() {
        let a = archs(&above);
        let what = if a.iter().any(|x| running.contains(x)) {
            format!("compute capability {}", ccs(&above).join(", "))
        } else {
            a.join(", ")
        };
        parts.push(format!("fails on {what}{}", cause(&above)));
    }
    let short: Vec<String> =
        judged.iter().filter(|r| r.result == Support::RuntimeCompiler).map(|r| r.name.clone()).collect();
    if !short.is_empty() {
        parts.push(format!("run-time compilers fall short on {}", shown(&short, 4)));
    }
    parts.join("; ")
}

/// The constraint for the GPUs that run (`n/a` ones are not the node's business: the platform
/// already keeps the image off them).
fn require(rows: &[GpuSupport], floor: &Floor) -> String {
    let cc = |r: &GpuSupport| Cc::parse(&r.compute_capability);
    let mut runs: BTreeSet<Cc> = rows.iter().filter(|r| r.result.runs()).filter_map(cc).collect();
    let judged: BTreeSet<Cc> = rows.iter().filter(|r| r.result != Support::NotApplicable).filter_map(cc).collect();
    // A compute capability only GPUs of another platform have (8.7: Jetson Orin; 12.1: GB10 for
    // an amd64 image) is no one's concern here: next above a running one, it joins that stretch,
    // so the constraint has no hole or upper bound for it.
    let others: Vec<Cc> = rows.iter().filter_map(cc).filter(|c| !judged.contains(c)).collect();
    for other in others {
        let below = judged.range(..other).next_back().is_some_and(|b| runs.contains(b));
        let above = judged.range(other..).next().is_none_or(|a| runs.contains(a));
        if below && above {
            runs.insert(other);
        }
    }
    let cuda = CudaVersion::parse(&floor.needs_cuda).unwrap_or(CudaVersion::new(floor.major as u16, 0));
    crate::cuda::require::constraint(cuda, &runs)
}
