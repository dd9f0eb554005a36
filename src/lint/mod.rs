//! The CI gate: an image inventory, deployment targets and rules in; findings, a coverage
//! matrix and an exit status out.

pub mod compilers;
pub mod config;
mod error;
pub mod facts;
pub mod policy;
pub mod rules;
pub mod targets;
pub mod variables;
pub mod verdict;

use std::collections::BTreeSet;

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::image::ImageReport;
use crate::schema::{self, Tool};
use facts::{Binary, FixFacts};
use rules::{Rule, Scope, Severity};
use targets::Target;

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
    /// The package that installed the file: `torch 2.9.0+cu130 (pypi)`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub package: Option<String>,
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

fn fingerprint(rule: &str, path: Option<&str>, target: Option<&str>) -> String {
    let h = Sha256::digest(format!("{rule}\0{}\0{}", path.unwrap_or(""), target.unwrap_or("")));
    hex::encode(&h[..8])
}

#[derive(Debug, Clone, Serialize)]
pub struct MatrixCell {
    pub target: String,
    /// all, some, none, n/a: how many of the binary's registered modules run there.
    pub result: String,
    /// The binary's verdict class on this target: native, jit, arch-gated, none, n/a.
    pub class: String,
    /// `sm_90`, `jit compute_80`, `✗ 209`, `sm_80 ✗ 209 (2/5)`.
    pub text: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct MatrixRow {
    pub path: String,
    /// Layer the file comes from (digest or archive path), empty if unknown.
    pub layer: String,
    /// The package that installed the file, where known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub package: Option<Package>,
    /// Modules that decide coverage (registered, or the file itself).
    pub modules: u64,
    /// Modules the library loads itself (kept as data): detail only.
    pub library_managed_modules: u64,
    pub cells: Vec<MatrixCell>,
}

pub use crate::packages::Package;

/// One line per target at the top of the reports: `H100 · driver 580.65.06: runs (native)`.
#[derive(Debug, Clone, Serialize)]
pub struct Headline {
    pub target: String,
    /// runs, runs-jit, fails.
    pub verdict: String,
    pub text: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct Suppressed {
    pub ignored: u64,
    pub baseline: u64,
    pub disabled_rules: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct LintImage {
    pub name: Option<String>,
    pub source: &'static str,
    pub manifest_digest: Option<String>,
    pub config_digest: Option<String>,
    pub platform: Option<String>,
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
    pub fail_on: Severity,
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

pub struct LintOptions<'a> {
    pub rules: &'a [Rule],
    pub targets: Vec<Target>,
    pub fail_on: Severity,
    pub config: &'a config::Config,
    pub extra_ignores: Vec<config::Ignore>,
    pub baseline: Option<BTreeSet<String>>,
    /// What the GPU did (`--on-device`).
    pub device: Option<crate::device::DeviceReport>,
}

/// NVIDIA libraries that are optional for their callers, which check the GPU before using them:
/// where the stack's own code runs, such a library without code for the GPU is arch-gated.
const OPTIONAL_VENDOR_LIBS: &[&str] = &["libcusparseLt"];

/// The rule that says once what many per-binary CL001 findings share (a CUDA major that cannot
/// target the GPU); those findings name it as their `cause`.
pub const ROOT_CAUSE_RULE: &str = "CL019";

fn value<T: Serialize>(v: &T) -> cel::Value {
    cel::to_value(v).expect("facts serialize")
}

fn enabled(r: &Rule, cfg: &config::Config) -> bool {
    !cfg.disable.iter().any(|d| d == &r.code || d == &r.name)
}

fn severity(r: &Rule, cfg: &config::Config) -> Severity {
    cfg.severity.get(&r.code).or_else(|| cfg.severity.get(&r.name)).copied().unwrap_or(r.severity)
}

/// A matrix cell: every module native with one image -> `sm_90`; mixed -> the images and, where
/// some fail, the error and how many; the binary's class where it overrides that.
fn cell(c: &facts::Coverage, b: &Binary) -> String {
    if !c.selected_sibling.is_empty() {
        return format!("not loaded ({} is)", c.selected_sibling);
    }
    if c.modules == 0 {
        return if b.facts.library_managed_modules > 0 {
            format!("lib-managed ({})", b.facts.library_managed_modules)
        } else {
            "—".into()
        };
    }
    if c.class == "arch-gated" {
        let what = c
            .arch_specific_images
            .first()
            .cloned()
            .or_else(|| c.newer_from.filter(|_| b.facts.vendor_library).map(|f| format!("sm_{}+", f.sm())))
            .unwrap_or_else(|| b.facts.archs.clone());
        return format!("gated ({what})");
    }
    let mut parts: Vec<String> = c.native_images.clone();
    parts.extend(c.jit_images.iter().map(|j| format!("jit {j}")));
    if c.failing > 0 {
        let err = if c.no_image > 0 {
            "209"
        } else if c.ptx_too_new > 0 {
            "222"
        } else {
            "223"
        };
        // Counted against the modules that decide (dispatch detail left out), as the findings count.
        let decisive = c.modules - c.expected_missing;
        if c.failing == decisive {
            parts = vec![format!("✗ {err}")];
        } else if c.gaps > 0 || c.ptx_too_new > 0 || c.jit_disabled > 0 || c.format_too_new > 0 {
            parts.push(format!("✗ {err} ({}/{})", c.failing, c.modules));
        }
    }
    parts.join(" ")
}

pub fn run(scan: &ImageReport, opts: LintOptions) -> Result<LintReport, rules::EvalError> {
    let mut binaries: Vec<Binary> = scan.files.iter().map(facts::binary).collect();
    let mut image = facts::image(scan, &binaries);
    // What the runtimes need from the driver: NVIDIA_REQUIRE_CUDA is checked against it too.
    let unselected = verdict::unselected_siblings(scan, &binaries);
    for (i, picked) in &unselected {
        binaries[*i].facts.not_loaded = picked.clone();
    }
    let floor = verdict::floor(scan, &binaries, &unselected);
    if floor.major * 100 > image.needs_cuda_n {
        image.needs_cuda_n = floor.major * 100;
        image.needs_cuda = floor.needs_cuda.clone();
    }
    let image_v = value(&image);
    let targets_v = value(&opts.targets.iter().map(facts::target).collect::<Vec<_>>());
    let fix_v = value(&facts::fix(&opts.targets, String::new()));
    let rules: Vec<&Rule> = opts.rules.iter().filter(|r| enabled(r, opts.config)).collect();
    let mut findings: Vec<Finding> = Vec::new();
    let config = opts.config;
    let emit = |r: &Rule,
                ctx: &cel::Context,
                b: Option<&Binary>,
                t: Option<&Target>|
     -> Result<Option<Finding>, rules::EvalError> {
        Ok(r.eval(ctx)?.map(|(message, fix)| {
            let path = b.map(|b| b.facts.path.clone());
            let target = t.map(|t| t.name.clone());
            Finding {
                rule: r.code.clone(),
                name: r.name.clone(),
                severity: severity(r, config),
                message,
                fix,
                fingerprint: fingerprint(&r.code, path.as_deref(), target.as_deref()),
                layer: b.map(|b| b.facts.layer.clone()).filter(|l| !l.is_empty()),
                package: b
                    .filter(|b| !b.facts.package.is_empty())
                    .map(|b| format!("{} {} ({})", b.facts.package, b.facts.package_version, b.facts.package_manager)),
                path,
                target,
                cause: None,
            }
        }))
    };

    let ctx = variables::context(
        Scope::Image,
        vec![("image", image_v.clone()), ("targets", targets_v.clone()), ("fix", fix_v.clone())],
    );
    for r in rules.iter().filter(|r| r.scope == Scope::Image) {
        findings.extend(emit(r, &ctx, None, None)?);
    }

    // What decides each target before any kernel runs: said once, at image level.
    let mut deploys: Vec<verdict::Deploy> =
        opts.targets.iter().map(|t| verdict::deploy(scan, &binaries, &floor, t)).collect();

    // Every binary on every target, then judged together: version-selected siblings that are not
    // loaded, and 'a'/'f'-only binaries whose package runs on the target by other means.
    let mut covs: Vec<Vec<facts::Coverage>> =
        binaries.iter().map(|b| opts.targets.iter().map(|t| facts::coverage(b, t, image.jit_env)).collect()).collect();
    for (i, picked) in &unselected {
        for c in &mut covs[*i] {
            c.class = "n/a".into();
            c.selected_sibling = picked.clone();
        }
    }
    for ti in 0..opts.targets.len() {
        let running: BTreeSet<&str> = binaries
            .iter()
            .zip(&covs)
            .filter(|(_, c)| c[ti].class == "native" || c[ti].class == "jit")
            .map(|(b, _)| b.facts.group.as_str())
            .collect();
        // Code of the user's stack (not NVIDIA's closed libraries) that runs here: what calls
        // those libraries, and checks the GPU before it does.
        let consumer_runs = binaries.iter().zip(&covs).any(|(b, c)| {
            !b.facts.vendor_library
                && b.facts.driver_library.is_empty()
                && (c[ti].class == "native" || c[ti].class == "jit")
        });
        for (b, c) in binaries.iter().zip(covs.iter_mut()) {
            let c = &mut c[ti];
            if c.class == "none" && facts::specific_only(b) && running.contains(b.facts.group.as_str()) {
                c.class = "arch-gated".into();
                c.gated_for = facts::chips_for(b);
            } else if let Some(from) = c.newer_from.filter(|_| {
                // One of NVIDIA's optional libraries (cuSPARSELt: 2:4 sparsity, 8.0 and newer)
                // whose code is mostly for newer GPUs and runs here at best through a JIT
                // fallback: it does not support this GPU, and its callers (torch) check the
                // compute capability first. cuBLAS or cuDNN without code here are no option.
                OPTIONAL_VENDOR_LIBS.iter().any(|p| crate::layer::path::file_name(&b.facts.path).starts_with(p))
                    && !verdict::cannot_build(b, &opts.targets[ti])
                    && consumer_runs
                    && c.native == 0
                    && (c.class == "none" || c.class == "jit")
                    && c.newer_only * 2 >= c.modules
            }) {
                c.class = "arch-gated".into();
                c.gated_for = format!("compute capability {from} and newer");
            }
        }
    }

    // One cause behind many failing binaries (a CUDA major that cannot target the GPU), then
    // the image-level rules of each target, which say it once.
    let mut caused: Vec<BTreeSet<String>> = Vec::new();
    for (ti, (t, d)) in opts.targets.iter().zip(deploys.iter_mut()).enumerate() {
        let judged: Vec<(&Binary, &facts::Coverage)> = binaries.iter().zip(&covs).map(|(b, c)| (b, &c[ti])).collect();
        let idx = verdict::root_cause(d, t, &judged);
        caused.push(idx.into_iter().map(|i| binaries[i].facts.path.clone()).collect());
        let mut tf = facts::target(t);
        tf.blocked = d.blocked;
        let ctx = variables::context(
            Scope::ImageTarget,
            vec![("image", image_v.clone()), ("target", value(&tf)), ("deploy", value(&*d))],
        );
        for r in rules.iter().filter(|r| r.scope == Scope::ImageTarget) {
            findings.extend(emit(r, &ctx, None, Some(t))?);
        }
    }

    let mut matrix = Vec::new();
    for (b, bcovs) in binaries.iter().zip(&covs) {
        let ctx = variables::context(
            Scope::Binary,
            vec![("image", image_v.clone()), ("binary", value(&b.facts)), ("fix", fix_v.clone())],
        );
        for r in rules.iter().filter(|r| r.scope == Scope::Binary) {
            findings.extend(emit(r, &ctx, Some(b), None)?);
        }
        let failing: Vec<&Target> =
            opts.targets.iter().zip(bcovs).filter(|(_, c)| c.class == "none").map(|(t, _)| t).collect();
        let (action, torch, gencode) =
            if failing.is_empty() { Default::default() } else { verdict::binary_fix(b, &failing) };
        let mut row = MatrixRow {
            path: b.facts.path.clone(),
            layer: b.facts.layer.clone(),
            package: scan.files.iter().find(|f| f.file.path == b.facts.path).and_then(|f| f.package.clone()),
            modules: b.facts.modules,
            library_managed_modules: b.facts.library_managed_modules,
            cells: Vec::new(),
        };
        for ((t, cov), d) in opts.targets.iter().zip(bcovs).zip(&deploys) {
            let rt = facts::runtime(&b.facts, t);
            let driver_fix = if !cov.needs_cuda.is_empty() && cov.ptx_too_new > 0 {
                crate::cuda::CudaVersion::parse(&cov.needs_cuda)
                    .map(crate::cuda::tables::driver_for)
                    .unwrap_or_default()
            } else if !rt.satisfied {
                rt.needs_driver.clone()
            } else {
                String::new()
            };
            let mut fix: FixFacts = facts::fix(&opts.targets, driver_fix);
            if !action.is_empty() {
                fix.action = action.clone();
                fix.torch_arch_list = torch.clone();
                fix.gencode = gencode.clone();
            }
            row.cells.push(MatrixCell {
                target: t.name.clone(),
                result: cov.result.clone(),
                class: cov.class.clone(),
                text: cell(cov, b),
            });
            let mut tf = facts::target(t);
            tf.blocked = d.blocked;
            let ctx = variables::context(
                Scope::BinaryTarget,
                vec![
                    ("image", image_v.clone()),
                    ("binary", value(&b.facts)),
                    ("target", value(&tf)),
                    ("coverage", value(cov)),
                    ("runtime", value(&rt)),
                    ("fix", value(&fix)),
                ],
            );
            for r in rules.iter().filter(|r| r.scope == Scope::BinaryTarget) {
                findings.extend(emit(r, &ctx, Some(b), Some(t))?);
            }
        }
        if b.facts.loadable && b.facts.driver_library.is_empty() && !b.modules.is_empty() {
            matrix.push(row);
        }
    }
    // Code compiled at run time: each consumer's compiler on each target.
    let found = compilers::inventory(scan);
    let mut compiler_checks = Vec::new();
    for t in &opts.targets {
        let tf = facts::target(t);
        for c in compilers::judge(scan, &found, t) {
            let ctx = variables::context(
                Scope::CompilerTarget,
                vec![("image", image_v.clone()), ("target", value(&tf)), ("compiler", value(&c))],
            );
            for r in rules.iter().filter(|r| r.scope == Scope::CompilerTarget) {
                if let Some(mut f) = emit(r, &ctx, None, Some(t))? {
                    // One finding per consumer and compiler: both are part of its identity.
                    f.path = Some(c.path.clone());
                    f.package = Some(format!("{} {} (pypi)", c.consumer, c.consumer_version));
                    f.fingerprint = fingerprint(&f.rule, Some(&format!("{}#{}", c.path, c.consumer)), Some(&t.name));
                    findings.push(f);
                }
            }
            compiler_checks.push(CompilerCheck { target: t.name.clone(), facts: c });
        }
    }

    if let Some(dev) = &opts.device {
        for m in &dev.modules {
            let Some(b) = binaries.iter().find(|b| b.facts.path == m.binary) else { continue };
            let d = dev.devices.iter().find(|d| d.index == m.device);
            let ctx = variables::context(
                Scope::DeviceModule,
                vec![
                    ("image", image_v.clone()),
                    ("binary", value(&b.facts)),
                    ("module", value(m)),
                    ("device", value(&d)),
                ],
            );
            for r in rules.iter().filter(|r| r.scope == Scope::DeviceModule) {
                // One finding per module and device: the module and GPU are part of its identity.
                if let Some(mut f) = emit(r, &ctx, Some(b), None)? {
                    let dname = d.map(|d| format!("GPU {} ({})", d.index, d.name)).unwrap_or_default();
                    f.fingerprint = fingerprint(&f.rule, Some(&format!("{}#{}", m.binary, m.module)), Some(&dname));
                    f.target = Some(dname);
                    findings.push(f);
                }
            }
        }
    }

    // Ignores (expired ones reported, not applied), then the baseline.
    let today = config::today();
    let mut notes: Vec<String> = Vec::new();
    let ignores: Vec<&config::Ignore> = opts.config.ignores.iter().chain(&opts.extra_ignores).collect();
    for i in &ignores {
        if i.expired(today) {
            notes.push(format!(
                "{}: ignore of {} expired on {}; no longer applied",
                i.origin,
                i.entry.rule,
                i.entry.expires.as_deref().unwrap_or("")
            ));
        }
    }
    // What the rules raised before anything was taken away, for the headlines.
    let raised: Vec<(Option<String>, Severity)> = findings.iter().map(|f| (f.target.clone(), f.severity)).collect();
    let before = findings.len();
    findings.retain(|f| !ignores.iter().any(|i| !i.expired(today) && i.matches(f, opts.rules)));
    let ignored = (before - findings.len()) as u64;
    let before = findings.len();
    if let Some(b) = &opts.baseline {
        findings.retain(|f| !b.contains(&f.fingerprint));
    }
    let baseline = (before - findings.len()) as u64;
    // Per-binary findings whose cause an image-level finding left standing says once.
    for (ti, t) in opts.targets.iter().enumerate() {
        let Some(code) = findings
            .iter()
            .find(|f| f.path.is_none() && f.target.as_deref() == Some(t.name.as_str()) && f.rule == ROOT_CAUSE_RULE)
            .map(|f| f.rule.clone())
        else {
            continue;
        };
        for f in findings.iter_mut().filter(|f| {
            f.target.as_deref() == Some(t.name.as_str())
                && f.rule == "CL001"
                && f.path.as_ref().is_some_and(|p| caused[ti].contains(p))
        }) {
            f.cause = Some(code.clone());
        }
    }
    // Most severe first, then by target and path (image-wide before per-binary).
    findings.sort_by(|a, b| {
        (std::cmp::Reverse(a.severity), &a.target, &a.path, &a.rule, &a.message).cmp(&(
            std::cmp::Reverse(b.severity),
            &b.target,
            &b.path,
            &b.rule,
            &b.message,
        ))
    });
    let failed = findings.iter().any(|f| f.severity >= opts.fail_on);
    // The headlines come from what is left: they never contradict the findings or the exit code.
    let headlines: Vec<Headline> = opts
        .targets
        .iter()
        .enumerate()
        .map(|(ti, t)| {
            let judged: Vec<(&Binary, &facts::Coverage)> =
                binaries.iter().zip(&covs).map(|(b, c)| (b, &c[ti])).collect();
            let mine = |f: &&Finding| f.target.is_none() || f.target.as_deref() == Some(t.name.as_str());
            // What fails the gate fails the headline: errors, or whatever --fail-on names.
            let fail_at = opts.fail_on.min(rules::Severity::Error);
            let errors: Vec<&Finding> = findings.iter().filter(mine).filter(|f| f.severity >= fail_at).collect();
            let suppressed = raised
                .iter()
                .filter(|(target, sev)| {
                    (target.is_none() || target.as_deref() == Some(t.name.as_str())) && *sev >= fail_at
                })
                .count()
                .saturating_sub(errors.len());
            let compiled: Vec<&compilers::CompilerFacts> =
                compiler_checks.iter().filter(|c| c.target == t.name).map(|c| &c.facts).collect();
            let warned: Vec<&Finding> = findings
                .iter()
                .filter(|f| f.target.as_deref() == Some(t.name.as_str()) && f.severity < fail_at)
                .collect();
            verdict::headline(t, &deploys[ti], &judged, &errors, suppressed, &compiled, &warned)
        })
        .collect();
    notes.extend(scan.notes.iter().cloned());
    Ok(LintReport {
        schema: schema::LINT,
        tool: Tool::current(),
        image: LintImage {
            name: scan.image.name.clone(),
            source: scan.image.source,
            manifest_digest: scan.image.manifest_digest.clone(),
            config_digest: scan.image.config_digest.clone(),
            platform: scan.image.platform.clone(),
        },
        headlines,
        targets: opts.targets,
        matrix,
        findings,
        suppressed: Suppressed {
            ignored,
            baseline,
            disabled_rules: opts.rules.iter().filter(|r| !enabled(r, opts.config)).map(|r| r.code.clone()).collect(),
        },
        fail_on: opts.fail_on,
        failed,
        notes,
        device: opts.device,
        compilers: found,
        compiler_checks,
        detail: binaries
            .iter()
            .filter(|b| !b.facts.detail_problems.is_empty())
            .map(|b| Detail {
                path: b.facts.path.clone(),
                problems: b.facts.detail_problems.len() as u64,
                examples: b.facts.detail_problems.iter().take(3).cloned().collect(),
            })
            .collect(),
    })
}
