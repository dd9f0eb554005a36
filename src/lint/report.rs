//! What `lint::run` reports: findings, the coverage matrix and headlines per target.

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::compilers;
use super::coverage;
use super::rules::{FailOn, Severity};
use super::targets::Target;
use crate::schema::{Tool, words};

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Finding {
    pub rule: String,
    pub name: String,
    pub severity: Severity,
    pub message: String,
    pub fix: String,
    /// File inside the image (absent for image-wide findings).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layer: Option<String>,
    /// The Dockerfile step that made that layer (`RUN pip install flash-attn`), where the
    /// image's history says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    /// The package that installed the file: `torch 2.9.0+cu130 (pypi)`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub package: Option<String>,
    /// That package's URL (`pkg:pypi/torch@2.9.0%2Bcu130`), for joining findings to SBOMs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub purl: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Stable across runs (rule, path, target): what baselines record.
    pub fingerprint: String,
    /// The image-level finding (its rule code) that says this one's cause once for many
    /// binaries (CL019): text, Markdown and HTML fold it into that one; JSON, SARIF and JUnit
    /// keep it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
}

pub(super) fn fingerprint(rule: &str, path: Option<&str>, target: Option<&str>) -> String {
    let h = Sha256::digest(format!("{rule}\0{}\0{}", path.unwrap_or(""), target.unwrap_or("")));
    hex::encode(&h[..8])
}

#[derive(Debug, Clone, Serialize)]
pub struct MatrixCell {
    pub target: String,
    /// How many of the binary's registered modules run there.
    pub result: coverage::Share,
    /// The binary's verdict class on this target.
    pub class: coverage::Class,
    /// `sm_90`, `jit compute_80`, `✗ 209`, `sm_80 ✗ 209 (2/5)`.
    pub text: String,
    /// Modules not counted in `result` here: the library's per-GPU dispatch detail (variants for
    /// other chips, kernel sets for newer GPUs only).
    #[serde(skip_serializing_if = "is_zero")]
    pub left_out: u64,
    /// Why the binary is judged as it is here, where something other than its code decides: the
    /// knowledge row behind an arch-gated library, the sibling the loader picks.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub why: String,
    /// For a set of loose kernel files: how many of them are for this GPU (`native`: SASS that
    /// runs, `jit`: PTX the driver compiles) `of` how many.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub files: Option<FilesFor>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Debug, Clone, Serialize)]
pub struct MatrixRow {
    pub path: String,
    /// Layer the file comes from (digest or archive path), empty if unknown.
    pub layer: String,
    /// The Dockerfile step that made that layer (the image config's history), where known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    /// The package that installed the file, where known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub package: Option<Package>,
    /// Modules that decide coverage (registered, or the file itself).
    pub modules: u64,
    /// Modules the library loads itself (kept as data): detail only.
    pub library_managed_modules: u64,
    /// A set of loose kernel files (lint/kernel_sets.rs) rather than one binary: `path` is the
    /// directory they share.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kernel_set: Option<KernelSetRow>,
    pub cells: Vec<MatrixCell>,
}

/// How many of a set's files are for one target.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct FilesFor {
    /// Files with SASS that runs on the GPU.
    pub native: u64,
    /// Files without such SASS whose PTX the driver compiles for it.
    pub jit: u64,
    /// Files in the set.
    pub of: u64,
}

impl FilesFor {
    /// Files for the GPU, natively or by JIT.
    pub fn any(&self) -> u64 {
        self.native + self.jit
    }
}

/// What a set of loose kernel files holds: its files and the architectures they carry.
#[derive(Debug, Clone, Serialize)]
pub struct KernelSetRow {
    pub files: u64,
    /// `sm_90`, `sm_90a`, sorted.
    pub sass: Vec<String>,
    /// `compute_90`, sorted.
    pub ptx: Vec<String>,
}

pub use crate::packages::Package;

words! {
    /// A target's verdict in its headline.
    pub enum HeadlineVerdict {
        Runs = "runs",
        /// Runs, and compiles enough PTX at first use for a noticeable cold start.
        RunsJit = "runs-jit",
        Fails = "fails",
        /// Would fail, but every finding that says so was ignored, baselined, disabled or
        /// lowered below the gate.
        Accepted = "accepted",
    }
}

/// One line per target at the top of the reports: `H100 · driver 580.65.06: runs (native)`.
#[derive(Debug, Clone, Serialize)]
pub struct Headline {
    pub target: String,
    pub verdict: HeadlineVerdict,
    pub text: String,
    /// How many things the text says were not judged (CL028 findings left for this target).
    #[serde(skip_serializing_if = "is_zero")]
    pub not_judged: u64,
    /// What the text says, as values (`support` reads it; not part of the scan's JSON).
    #[serde(skip)]
    pub detail: HeadlineDetail,
}

/// The parts of a headline as values, from the same evaluation as its text.
#[derive(Debug, Clone, Default)]
pub struct HeadlineDetail {
    /// The text after the target's name: `runs (native)`.
    pub body: String,
    /// Binaries (paths) without code that runs here that an error still names, or all of them
    /// when every such error was suppressed.
    pub failing: Vec<String>,
    /// One cause behind every failing binary, as the text says it: `CUDA 13 builds cannot
    /// target Volta (4 binaries: torch, vllm, nvidia-cublas and 1 more)`.
    pub root_cause: Option<String>,
    /// The newest CUDA major among failing binaries that cannot target this GPU at all, and
    /// their packages (0, empty: none), whether or not it explains every failure.
    pub unbuildable_major: u64,
    pub unbuildable_packages: String,
    /// The driver blocks the target before any kernel (floor not met, GPU not driven).
    pub blocked: bool,
    /// Errors no coverage verdict or run-time compiler explains (a shipped driver library).
    pub other_errors: Vec<String>,
    /// Run-time compilers that cannot serve the target, where a finding says so: `what`.
    pub compilers: Vec<String>,
    /// Binaries (paths) whose code here is for other chips only, with what it is for.
    pub gated: Vec<(String, String)>,
    /// Binaries that compile PTX here, and how much.
    pub jit_binaries: u64,
    pub jit_bytes: u64,
    /// The newest CUDA version that PTX needs from the driver.
    pub jit_needs_cuda: Option<crate::cuda::CudaVersion>,
    /// What was not judged here, where a finding of scope `unjudged` still says so: `what`.
    pub not_judged: Vec<String>,
    /// Files of loose kernel sets that are for this GPU, of how many.
    pub loose_for: u64,
    pub loose_files: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Suppressed {
    pub ignored: u64,
    pub baseline: u64,
    pub disabled_rules: Vec<String>,
}

#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct LintImage {
    pub name: Option<String>,
    pub source: crate::image::SourceKind,
    pub manifest_digest: Option<String>,
    pub config_digest: Option<String>,
    pub platform: Option<String>,
    /// The attestation the verdict was reached from (`--from-attestation`), and whether signed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attestation: Option<crate::image::AttestationUse>,
}

#[derive(Debug, Clone, Serialize)]
pub struct LintReport {
    pub schema: &'static str,
    pub tool: Tool,
    pub image: LintImage,
    pub targets: Vec<Target>,
    /// One per target, in target order.
    pub headlines: Vec<Headline>,
    pub matrix: Vec<MatrixRow>,
    pub findings: Vec<Finding>,
    pub suppressed: Suppressed,
    /// The configuration, ignore file and baseline this verdict was reached under (paths as
    /// given or discovered); absent when none applied.
    #[serde(skip_serializing_if = "PolicyFiles::is_empty")]
    pub policy: PolicyFiles,
    pub fail_on: FailOn,
    /// Findings at or above `fail_on` remain: the gate fails (exit 1).
    pub failed: bool,
    /// Notes: expired ignores, and the scan's own notes.
    pub notes: Vec<String>,
    /// On-device results (`--on-device`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<crate::device::DeviceReport>,
    /// The run-time compilers in the image (ptxas, NVRTC, nvJitLink, nvcc) with their versions.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub compilers: Vec<compilers::Found>,
    /// Per target, what each package that compiles at run time resolves and whether it works.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub compiler_checks: Vec<CompilerCheck>,
    /// What could not be read where it decides nothing (data a library loads itself, archive
    /// members, driver libraries): detail, never a finding.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub detail: Vec<Detail>,
    /// How many times each rule (by code) was evaluated: a rule-case that expects `pass` must
    /// show its rule was judged at all, not passed over for want of a binary or target.
    #[serde(skip)]
    pub evaluated: std::collections::BTreeMap<String, u64>,
    /// The image's driver floor (`support` reads it; the JSON says it in findings and headlines).
    #[serde(skip)]
    pub floor: Floor,
    /// The forward-compatibility libraries the loader finds (directory, their driver).
    #[serde(skip)]
    pub compat: Option<(String, crate::cuda::DriverVersion)>,
}

/// The files a policy was read from, for the report's header and `-v`: which configuration
/// applied is never a guess.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PolicyFiles {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ignore_file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<String>,
}

impl PolicyFiles {
    pub fn is_empty(&self) -> bool {
        self.config.is_none() && self.ignore_file.is_none() && self.baseline.is_none()
    }

    /// `config cudalint.toml, ignores .cudalintignore, baseline b.json`, or `None`.
    pub fn line(&self) -> Option<String> {
        let parts: Vec<String> =
            [("config", &self.config), ("ignores", &self.ignore_file), ("baseline", &self.baseline)]
                .into_iter()
                .filter_map(|(what, p)| p.as_ref().map(|p| format!("{what} {p}")))
                .collect();
        (!parts.is_empty()).then(|| parts.join(", "))
    }
}

/// Problems in a file's detail (`binary.detail_problems`), counted, with a few examples.
#[derive(Debug, Clone, Serialize)]
pub struct Detail {
    pub path: String,
    pub problems: u64,
    pub examples: Vec<String>,
}

/// One consumer's run-time compiler on one target.
#[derive(Debug, Clone, Serialize)]
pub struct CompilerCheck {
    pub target: String,
    #[serde(flatten)]
    pub facts: compilers::CompilerFacts,
}

impl CompilerCheck {
    /// The table knows the compiler's release, it emits code for the target, and the target's
    /// driver loads that code: what every report calls a passing check.
    pub fn passed(&self) -> bool {
        let f = &self.facts;
        f.known && f.knows_target && f.driver_problem.is_empty()
    }
}

/// The rule that says once what many per-binary CL001 findings share (a CUDA major that cannot
/// target the GPU); those findings name it as their `cause`.
pub const ROOT_CAUSE_RULE: &str = "CL019";

/// The oldest driver the image's CUDA runtimes run on, and why (docs/cuda-binaries.md §5i "composing an
/// image-level driver floor"); computed in `verdict.rs`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Floor {
    /// CUDA major the image needs from the driver (0: nothing found).
    pub major: u64,
    pub needs_cuda: String,
    /// The minor-version-compatibility floor of that major (`580.65.06`).
    pub needs_driver: String,
    /// `libcudart.so.13 needed by torch, vllm; CUDA runtime 13.0 (/usr/.../libcudart.so.13.0.96)`.
    pub why: String,
}
