//! `lint::run` as its phases, in the order each feeds the next: the facts and the image's driver
//! floor, image rules, what decides each target before any kernel runs, coverage (every binary
//! on every target, then judged together; loose kernel files as sets), image-target rules, binary
//! rules with the matrix, compiler rules, what could not be judged (`unjudged`), device rules, and
//! last the ignores and baseline, which the headlines follow.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::coverage::{self, Class, Coverage};
use super::facts::{self, Binary, FixFacts, ImageFacts};
use super::kernel_sets::{self, FilesFor, KernelSet};
use super::report::{
    CompilerCheck, Detail, Finding, Headline, LintImage, LintReport, MatrixCell, MatrixRow, ROOT_CAUSE_RULE,
    Suppressed, fingerprint,
};
use super::rules::{self, EvalError, Rule, Severity};
use super::targets::Target;
use super::unjudged::{self, UnjudgedFacts};
use super::variables::{
    BinaryTargetVars, BinaryVars, Bindings, CompilerTargetVars, DeviceModuleVars, ImageTargetVars, ImageVars,
    UnjudgedVars,
};
use super::{compilers, config, imports, source_builds, variants, verdict};
use crate::image::ImageReport;
use crate::schema::{self, Tool};

/// What `run` is given besides the inventory.
pub struct LintOptions<'a> {
    pub rules: &'a [Rule],
    pub targets: Vec<Target>,
    pub fail_on: rules::FailOn,
    pub config: &'a config::Config,
    pub extra_ignores: Vec<config::Ignore>,
    pub baseline: Option<BTreeSet<String>>,
    /// What the GPU did (`--on-device`).
    pub device: Option<crate::device::DeviceReport>,
}

fn value<T: Serialize>(v: &T) -> cel::Value {
    cel::to_value(v).expect("facts serialize")
}

fn enabled(r: &Rule, cfg: &config::Config) -> bool {
    !cfg.disable.iter().any(|d| d == &r.code || d == &r.name)
}

fn severity(r: &Rule, cfg: &config::Config) -> Severity {
    cfg.severity.get(&r.code).or_else(|| cfg.severity.get(&r.name)).copied().unwrap_or(r.severity)
}

/// The enabled rules, evaluated a scope at a time.
struct Gate<'a> {
    rules: Vec<&'a Rule>,
    config: &'a config::Config,
    /// How often each of `rules` had its `when` evaluated (`LintReport::evaluated`).
    evaluated: Vec<std::cell::Cell<u64>>,
}

impl Gate<'_> {
    /// The findings of the rules of `vars`' scope, for binary `b` and target `t` where they
    /// apply.
    fn fire<V: Bindings>(&self, vars: V, b: Option<&Binary>, t: Option<&Target>) -> Result<Vec<Finding>, EvalError> {
        let ctx = vars.context();
        let mut out = Vec::new();
        for (r, n) in self.rules.iter().zip(&self.evaluated).filter(|(r, _)| r.scope == V::SCOPE) {
            n.set(n.get() + 1);
            let Some((message, fix)) = r.eval(&ctx)? else { continue };
            let path = b.map(|b| b.facts.path.clone());
            let target = t.map(|t| t.name.clone());
            out.push(Finding {
                rule: r.code.clone(),
                name: r.name.clone(),
                severity: severity(r, self.config),
                message,
                fix,
                fingerprint: fingerprint(&r.code, path.as_deref(), target.as_deref()),
                layer: b.map(|b| b.facts.layer.clone()).filter(|l| !l.is_empty()),
                step: b.map(|b| b.facts.step.clone()).filter(|s| !s.is_empty()),
                package: b
                    .filter(|b| !b.facts.package.is_empty())
                    .map(|b| format!("{} {} ({})", b.facts.package, b.facts.package_version, b.facts.package_manager)),
                purl: b.map(|b| b.facts.package_purl.clone()).filter(|p| !p.is_empty()),
                path,
                target,
                cause: None,
            });
        }
        Ok(out)
    }
}

/// Everything rules read that does not depend on a target, computed once.
struct Facts {
    binaries: Vec<Binary>,
    image: ImageFacts,
    /// Version-selected siblings the loader does not pick, by binary index: the one it picks.
    unselected: BTreeMap<usize, String>,
    floor: verdict::Floor,
    /// Extension modules their package imports only on demand, by the package's own code.
    on_demand: imports::OnDemand,
    /// Loose kernel files a package's loader picks per GPU, judged as sets.
    sets: Vec<KernelSet>,
}

/// Phase 1: the facts of every binary and of the image, with the image's driver floor (what the
/// runtimes need from the driver: `NVIDIA_REQUIRE_CUDA` is checked against it too).
fn gather(scan: &ImageReport) -> Facts {
    let mut binaries: Vec<Binary> = scan.files.iter().map(facts::binary).collect();
    kernel_sets::mark(&mut binaries);
    let sets = kernel_sets::sets(scan, &binaries);
    let mut image = facts::image(scan, &binaries);
    let siblings = verdict::unselected_siblings(scan, &binaries);
    for (i, picked) in &siblings.unselected {
        binaries[*i].facts.not_loaded = picked.clone();
    }
    for (i, m) in siblings.missing {
        let b = &mut binaries[i].facts;
        (b.sibling_missing, b.sibling_effect, b.sibling_loader, b.sibling_why, b.sibling_instead) =
            (m.wanted, m.effect, m.loader, m.why, m.instead);
    }
    let unselected = siblings.unselected;
    variants::annotate(scan, &mut binaries);
    let floor = verdict::floor(scan, &binaries, &unselected);
    if floor.major * 100 > image.needs_cuda_n {
        image.needs_cuda_n = floor.major * 100;
        image.needs_cuda = floor.needs_cuda.clone();
    }
    let on_demand = imports::on_demand(scan, &binaries);
    let mut f = Facts { binaries, image, unselected, floor, on_demand, sets };
    // Only when arch is constrained: every binary judged on every known compute capability.
    let runs = if f.image.require_arch.is_empty() { None } else { runs_on(&f) };
    facts::require_judgement(&mut f.image, runs.as_ref());
    f
}

/// Known compute capabilities where no binary fails (class `none`), by the judgement the
/// targets get (`support` calls the same GPUs "runs"): what `NVIDIA_REQUIRE_*` arch constraints
/// are checked against. `None` when no binary carries device code that counts.
fn runs_on(f: &Facts) -> Option<BTreeSet<crate::cuda::Cc>> {
    if f.binaries.iter().all(|b| b.counted().next().is_none()) {
        return None;
    }
    let targets: Vec<Target> =
        crate::cuda::require::known_ccs().into_iter().map(|cc| Target::new(cc.to_string(), cc)).collect();
    let covs = judge_coverage(f, &targets);
    Some(
        targets
            .iter()
            .enumerate()
            .filter(|(ti, _)| covs.iter().all(|c| c[*ti].class != Class::None))
            .map(|(_, t)| t.cc)
            .collect(),
    )
}

/// Phase 3: every binary on every target (`covs[binary][target]`), then judged together:
/// version-selected siblings that are not loaded, and 'a'/'f'-only binaries whose package runs
/// on the target by other means.
fn judge_coverage(f: &Facts, targets: &[Target]) -> Vec<Vec<Coverage>> {
    let binaries = &f.binaries;
    let mut covs: Vec<Vec<Coverage>> =
        binaries.iter().map(|b| targets.iter().map(|t| coverage::coverage(b, t, f.image.jit_env)).collect()).collect();
    for (i, picked) in &f.unselected {
        for c in &mut covs[*i] {
            c.class = Class::NotApplicable;
            c.selected_sibling = picked.clone();
        }
    }
    for (ti, target) in targets.iter().enumerate() {
        let running: BTreeSet<&str> = binaries
            .iter()
            .zip(&covs)
            .filter(|(_, c)| c[ti].class.runs())
            .map(|(b, _)| b.facts.group.as_str())
            .collect();
        // Code of the user's stack (not NVIDIA's closed libraries) that runs here: what calls
        // those libraries, and checks the GPU before it does.
        let consumer_runs = binaries
            .iter()
            .zip(&covs)
            .any(|(b, c)| !b.facts.vendor_library && !b.facts.driver_library.is_driver() && c[ti].class.runs());
        for (bi, (b, c)) in binaries.iter().zip(covs.iter_mut()).enumerate() {
            let c = &mut c[ti];
            let row = crate::inspect::libraries::dispatched(&b.facts.path);
            // A library the knowledge base says its callers load only on some GPUs (cuSPARSELt
            // for 2:4 sparsity from 8.0; vLLM's FlashAttention builds): where they do not, it
            // is not loaded, whatever it carries; where they do, it is judged as any binary,
            // even when all its code is for one chip (FlashAttention-3's sm_90a on a B200).
            let dispatched = row
                .and_then(|r| r.dispatch_for(&b.facts.package_version).map(|d| (r, d)))
                .filter(|_| consumer_runs && !verdict::cannot_build(b, target));
            if let Some((row, d)) = dispatched {
                if !coverage::loaded_on(d, target.cc) && matches!(c.class, Class::None | Class::Jit) {
                    c.class = Class::ArchGated;
                    c.gated_for = coverage::dispatch_words(d);
                    c.gated_by = format!("{} (knowledge: {})", d.by, row.at);
                }
            } else if let Some(site) = f.on_demand.sites.get(&bi).filter(|_| {
                // The package's own imports, where no row decides: it loads this extension
                // only on demand, so what fails here fails that path, not the package, when
                // the package runs here through another binary (its default path). Not
                // otherwise: a lazy `__init__` (vLLM's) imports none of its extensions, and
                // `try: import vllm._C except ImportError` only logs.
                row.is_none()
                    && c.class == Class::None
                    && c.no_image > 0
                    && c.ptx_too_new == 0
                    && running.contains(b.facts.group.as_str())
            }) {
                c.class = Class::ArchGated;
                c.gated_for = coverage::chips_for(b);
                c.on_demand = site.clone();
            } else if c.class == Class::None
                && coverage::specific_only(b)
                && running.contains(b.facts.group.as_str())
                && !f.on_demand.required.contains(&bi)
            {
                c.class = Class::ArchGated;
                c.gated_for = coverage::chips_for(b);
            }
        }
    }
    covs
}

/// One target's column: each binary with its coverage there.
fn column<'a>(binaries: &'a [Binary], covs: &'a [Vec<Coverage>], ti: usize) -> Vec<(&'a Binary, &'a Coverage)> {
    binaries.iter().zip(covs).map(|(b, c)| (b, &c[ti])).collect()
}

fn target_facts(t: &Target, d: &verdict::Deploy) -> facts::TargetFacts {
    let mut tf = facts::target(t);
    tf.blocked = d.blocked;
    tf
}

/// Phase 4: one cause behind many failing binaries (a CUDA major that cannot target the GPU),
/// then the image-level rules of each target, which say it once. Returns, per target, the
/// paths of the binaries that cause explains.
fn target_rules(
    gate: &Gate,
    image: &cel::Value,
    f: &Facts,
    covs: &[Vec<Coverage>],
    targets: &[Target],
    deploys: &mut [verdict::Deploy],
    findings: &mut Vec<Finding>,
) -> Result<Vec<BTreeSet<String>>, EvalError> {
    let mut caused = Vec::new();
    for (ti, (t, d)) in targets.iter().zip(deploys.iter_mut()).enumerate() {
        let idx = verdict::root_cause(d, t, &column(&f.binaries, covs, ti));
        caused.push(idx.into_iter().map(|i| f.binaries[i].facts.path.clone()).collect());
        let vars = ImageTargetVars { image: image.clone(), target: value(&target_facts(t, d)), deploy: value(&*d) };
        findings.extend(gate.fire(vars, None, Some(t))?);
    }
    Ok(caused)
}

/// A matrix cell: every module native with one image -> `sm_90`; mixed -> the images and, where
/// some fail, the error and how many; the binary's class where it overrides that.
fn cell(c: &Coverage, b: &Binary) -> String {
    // A file name (the sibling the loader picks), or a phrase (what loads when the one it
    // looks for is missing).
    if c.selected_sibling.contains(' ') {
        return format!("not loaded ({})", c.selected_sibling);
    }
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
    if c.class == Class::ArchGated {
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

/// The driver a binary-target finding's fix names: the one its PTX (222) or its runtime needs.
fn driver_fix(cov: &Coverage, rt: &facts::RuntimeFacts) -> String {
    if !cov.needs_cuda.is_empty() && cov.ptx_too_new > 0 {
        crate::cuda::CudaVersion::parse(&cov.needs_cuda).map(crate::cuda::tables::driver_for).unwrap_or_default()
    } else if !rt.satisfied {
        rt.needs_driver.clone()
    } else {
        String::new()
    }
}

/// Phase 5: binary rules, then each binary's binary-target rules and its matrix row; a kernel
/// set's files get the binary rules only, and the set one row where its first file is.
#[allow(clippy::too_many_arguments)]
fn binary_rules(
    gate: &Gate,
    scan: &ImageReport,
    image: &cel::Value,
    fix: &cel::Value,
    f: &Facts,
    covs: &[Vec<Coverage>],
    set_covs: &[Vec<FilesFor>],
    targets: &[Target],
    deploys: &[verdict::Deploy],
    findings: &mut Vec<Finding>,
) -> Result<Vec<MatrixRow>, EvalError> {
    let mut matrix = Vec::new();
    // Binary index -> its set, and whether it is the set's first file.
    let mut in_set: BTreeMap<usize, (usize, bool)> = BTreeMap::new();
    for (si, s) in f.sets.iter().enumerate() {
        for (k, &i) in s.members.iter().enumerate() {
            in_set.insert(i, (si, k == 0));
        }
    }
    for (i, ((b, bcovs), file)) in f.binaries.iter().zip(covs).zip(&scan.files).enumerate() {
        let binary = value(&b.facts);
        let vars = BinaryVars { image: image.clone(), binary: binary.clone(), fix: fix.clone() };
        findings.extend(gate.fire(vars, Some(b), None)?);
        if let Some(&(si, first)) = in_set.get(&i) {
            if first {
                matrix.push(kernel_sets::row(&f.sets[si], targets, &set_covs[si]));
            }
            continue;
        }
        let failing: Vec<&Target> =
            targets.iter().zip(bcovs).filter(|(_, c)| c.class == Class::None).map(|(t, _)| t).collect();
        let (action, torch, gencode) =
            if failing.is_empty() { Default::default() } else { verdict::binary_fix(b, &failing) };
        let mut row = MatrixRow {
            path: b.facts.path.clone(),
            layer: b.facts.layer.clone(),
            step: Some(b.facts.step.clone()).filter(|s| !s.is_empty()),
            package: file.package.clone(),
            modules: b.facts.modules,
            library_managed_modules: b.facts.library_managed_modules,
            kernel_set: None,
            cells: Vec::new(),
        };
        for ((t, cov), d) in targets.iter().zip(bcovs).zip(deploys) {
            let rt = facts::runtime(&b.facts, t);
            let mut fix: FixFacts = facts::fix(targets, driver_fix(cov, &rt));
            if !action.is_empty() {
                fix.action = action.clone();
                fix.torch_arch_list = torch.clone();
                fix.gencode = gencode.clone();
            }
            row.cells.push(MatrixCell {
                target: t.name.clone(),
                result: cov.result,
                class: cov.class,
                text: cell(cov, b),
                left_out: cov.expected_missing,
                why: if !cov.gated_by.is_empty() {
                    format!("loaded only on {}: {}", cov.gated_for, cov.gated_by)
                } else if !cov.on_demand.is_empty() {
                    format!("imported only on demand: {}", cov.on_demand)
                } else if cov.selected_sibling.contains(' ') {
                    format!("not loaded: {}", cov.selected_sibling)
                } else if !cov.selected_sibling.is_empty() {
                    format!("not loaded: the package's loader picks {}", cov.selected_sibling)
                } else {
                    String::new()
                },
                files: None,
            });
            let vars = BinaryTargetVars {
                image: image.clone(),
                binary: binary.clone(),
                target: value(&target_facts(t, d)),
                coverage: value(cov),
                runtime: value(&rt),
                fix: value(&fix),
            };
            findings.extend(gate.fire(vars, Some(b), Some(t))?);
        }
        if b.facts.loadable && !b.facts.driver_library.is_driver() && !b.modules.is_empty() {
            matrix.push(row);
        }
    }
    Ok(matrix)
}

/// Phase 6: code compiled at run time, each consumer's compiler on each target. One finding
/// per consumer and compiler: both are part of its identity.
fn compiler_rules(
    gate: &Gate,
    scan: &ImageReport,
    image: &cel::Value,
    found: &[compilers::Found],
    targets: &[Target],
    findings: &mut Vec<Finding>,
) -> Result<Vec<CompilerCheck>, EvalError> {
    let mut checks = Vec::new();
    for t in targets {
        let tf = value(&facts::target(t));
        for c in compilers::judge(scan, found, t) {
            let vars = CompilerTargetVars { image: image.clone(), target: tf.clone(), compiler: value(&c) };
            for mut f in gate.fire(vars, None, Some(t))? {
                f.path = (!c.path.is_empty()).then(|| c.path.clone());
                f.package =
                    (!c.manager.is_empty()).then(|| format!("{} {} ({})", c.consumer, c.consumer_version, c.manager));
                f.fingerprint = fingerprint(&f.rule, Some(&format!("{}#{}", c.path, c.consumer)), Some(&t.name));
                findings.push(f);
            }
            checks.push(CompilerCheck { target: t.name.clone(), facts: c });
        }
    }
    Ok(checks)
}

/// Phase 6b: what may not be judged on each target (lint/unjudged.rs): the rules of scope
/// `unjudged` on each thing, one finding per thing and target. Returns the things per target,
/// in target order.
fn unjudged_rules(
    gate: &Gate,
    image: &cel::Value,
    sets: &[(&KernelSet, &[FilesFor])],
    checks: &[CompilerCheck],
    targets: &[Target],
    findings: &mut Vec<Finding>,
) -> Result<Vec<Vec<UnjudgedFacts>>, EvalError> {
    let mut out = Vec::new();
    for (ti, t) in targets.iter().enumerate() {
        let compiled: Vec<&compilers::CompilerFacts> =
            checks.iter().filter(|c| c.target == t.name).map(|c| &c.facts).collect();
        let sets: Vec<(&KernelSet, FilesFor)> = sets.iter().map(|(s, n)| (*s, n[ti])).collect();
        let things = unjudged::collect(&unjudged::Inputs { target: t, compilers: &compiled, sets: &sets });
        let tf = value(&facts::target(t));
        for u in &things {
            let vars = UnjudgedVars { image: image.clone(), target: tf.clone(), unjudged: value(u) };
            for mut f in gate.fire(vars, None, Some(t))? {
                f.path = Some(u.path.clone()).filter(|p| !p.is_empty());
                f.package = match (u.package.is_empty(), u.package_manager.is_empty()) {
                    (true, _) => None,
                    (false, true) => Some(u.package.clone()),
                    (false, false) => Some(format!("{} ({})", u.package, u.package_manager)),
                };
                f.fingerprint = fingerprint(&f.rule, Some(&u.key), Some(&t.name));
                findings.push(f);
            }
        }
        out.push(things);
    }
    Ok(out)
}

/// Phase 7: what the GPU did (`--on-device`). One finding per module and device: the module and
/// GPU are part of its identity.
fn device_rules(
    gate: &Gate,
    image: &cel::Value,
    binaries: &[Binary],
    dev: &crate::device::DeviceReport,
    findings: &mut Vec<Finding>,
) -> Result<(), EvalError> {
    for m in &dev.modules {
        let Some(b) = binaries.iter().find(|b| b.facts.path == m.binary) else { continue };
        let d = dev.devices.iter().find(|d| d.index == m.device);
        let vars =
            DeviceModuleVars { image: image.clone(), binary: value(&b.facts), module: value(m), device: value(&d) };
        for mut f in gate.fire(vars, Some(b), None)? {
            let dname = d.map(|d| format!("GPU {} ({})", d.index, d.name)).unwrap_or_default();
            f.fingerprint = fingerprint(&f.rule, Some(&format!("{}#{}", m.binary, m.module)), Some(&dname));
            f.target = Some(dname);
            findings.push(f);
        }
    }
    Ok(())
}

/// What the suppression phase took away, and what the rules raised before it (for the
/// headlines).
struct Suppression {
    raised: Vec<(Option<String>, Severity)>,
    ignored: u64,
    baseline: u64,
    notes: Vec<String>,
}

/// Phase 8: ignores (expired ones reported, not applied), then the baseline.
fn suppress(opts: &LintOptions, findings: &mut Vec<Finding>) -> Suppression {
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
    let raised: Vec<(Option<String>, Severity)> = findings.iter().map(|f| (f.target.clone(), f.severity)).collect();
    let before = findings.len();
    findings.retain(|f| !ignores.iter().any(|i| !i.expired(today) && i.matches(f, opts.rules)));
    let ignored = (before - findings.len()) as u64;
    let before = findings.len();
    if let Some(b) = &opts.baseline {
        findings.retain(|f| !b.contains(&f.fingerprint));
    }
    let baseline = (before - findings.len()) as u64;
    Suppression { raised, ignored, baseline, notes }
}

/// Per-binary findings whose cause an image-level finding left standing says once name it, then
/// the most severe first, by target (in the order given) and path (image-wide before per-binary).
fn fold_and_sort(findings: &mut [Finding], targets: &[Target], caused: &[BTreeSet<String>]) {
    for (ti, t) in targets.iter().enumerate() {
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
    // Targets in the order given, as the headlines and the matrix have them (not by name);
    // GPUs no target names (`--on-device`) after them by name; image-wide findings first.
    let target = |f: &Finding| {
        f.target.as_deref().map(|n| (targets.iter().position(|t| t.name == n).unwrap_or(usize::MAX), n.to_string()))
    };
    findings.sort_by_cached_key(|f| {
        (std::cmp::Reverse(f.severity), target(f), f.path.clone(), f.rule.clone(), f.message.clone())
    });
}

/// The headlines come from what is left: they never contradict the findings or the exit code.
#[allow(clippy::too_many_arguments)]
fn headlines(
    opts: &LintOptions,
    f: &Facts,
    covs: &[Vec<Coverage>],
    set_covs: &[Vec<FilesFor>],
    unjudged: &[Vec<UnjudgedFacts>],
    deploys: &[verdict::Deploy],
    findings: &[Finding],
    raised: &[(Option<String>, Severity)],
    compiler_checks: &[CompilerCheck],
) -> Vec<Headline> {
    // A thing not judged counts where a finding of scope `unjudged` still says so.
    let codes: Vec<&str> =
        opts.rules.iter().filter(|r| r.scope == rules::Scope::Unjudged).map(|r| r.code.as_str()).collect();
    let left: BTreeSet<&str> = findings.iter().map(|f| f.fingerprint.as_str()).collect();
    // What fails the gate fails the headline: errors, or whatever --fail-on names.
    let fail_at = opts.fail_on.headline();
    opts.targets
        .iter()
        .enumerate()
        .map(|(ti, t)| {
            let mine = |f: &&Finding| f.target.is_none() || f.target.as_deref() == Some(t.name.as_str());
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
            let judged = column(&f.binaries, covs, ti);
            let beside = verdict::Beside {
                loose_for: set_covs.iter().map(|n| n[ti].any()).sum(),
                loose_files: f.sets.iter().map(KernelSet::files).sum(),
                not_judged: unjudged[ti]
                    .iter()
                    .filter(|u| !u.judged)
                    .filter(|u| {
                        codes.iter().any(|c| left.contains(fingerprint(c, Some(&u.key), Some(&t.name)).as_str()))
                    })
                    .map(|u| u.what.clone())
                    .collect(),
            };
            verdict::headline(t, &deploys[ti], &judged, &errors, suppressed, &compiled, &warned, &beside)
        })
        .collect()
}

pub fn run(scan: &ImageReport, opts: LintOptions) -> Result<LintReport, EvalError> {
    let f = gather(scan);
    let rules: Vec<&Rule> = opts.rules.iter().filter(|r| enabled(r, opts.config)).collect();
    let gate = Gate { evaluated: vec![Default::default(); rules.len()], rules, config: opts.config };
    let targets = &opts.targets;
    let image = value(&f.image);
    let fix = value(&facts::fix(targets, String::new()));
    let mut findings: Vec<Finding> = Vec::new();

    // Phase 2: the image as a whole.
    let vars = ImageVars {
        image: image.clone(),
        targets: value(&targets.iter().map(facts::target).collect::<Vec<_>>()),
        fix: fix.clone(),
    };
    findings.extend(gate.fire(vars, None, None)?);

    // What decides each target before any kernel runs: said once, at image level.
    let mut deploys: Vec<verdict::Deploy> = targets
        .iter()
        .map(|t| {
            let mut d = verdict::deploy(scan, &f.binaries, &f.floor, t);
            let built = source_builds::on_target(scan, t, targets);
            (d.unbuilt_cuda, d.unbuilt_cuda_fix) = (built.failing, built.fix);
            d
        })
        .collect();
    let covs = judge_coverage(&f, targets);
    let set_covs: Vec<Vec<FilesFor>> = f
        .sets
        .iter()
        .map(|s| targets.iter().map(|t| kernel_sets::judge(s, &f.binaries, t, f.image.jit_env)).collect())
        .collect();
    let caused = target_rules(&gate, &image, &f, &covs, targets, &mut deploys, &mut findings)?;
    let matrix = binary_rules(&gate, scan, &image, &fix, &f, &covs, &set_covs, targets, &deploys, &mut findings)?;
    let found = compilers::inventory(scan);
    let compiler_checks = compiler_rules(&gate, scan, &image, &found, targets, &mut findings)?;
    let sets: Vec<(&KernelSet, &[FilesFor])> = f.sets.iter().zip(&set_covs).map(|(s, n)| (s, n.as_slice())).collect();
    let unjudged = unjudged_rules(&gate, &image, &sets, &compiler_checks, targets, &mut findings)?;
    if let Some(dev) = &opts.device {
        device_rules(&gate, &image, &f.binaries, dev, &mut findings)?;
    }

    let Suppression { raised, ignored, baseline, mut notes } = suppress(&opts, &mut findings);
    fold_and_sort(&mut findings, targets, &caused);
    let failed = findings.iter().any(|f| opts.fail_on.fails(f.severity));
    let headlines = headlines(&opts, &f, &covs, &set_covs, &unjudged, &deploys, &findings, &raised, &compiler_checks);
    notes.extend(scan.notes.iter().cloned());
    notes.extend(f.on_demand.notes.iter().cloned());
    let detail = f
        .binaries
        .iter()
        .filter(|b| !b.facts.detail_problems.is_empty())
        .map(|b| Detail {
            path: b.facts.path.clone(),
            problems: b.facts.detail_problems.len() as u64,
            examples: b.facts.detail_problems.iter().take(3).cloned().collect(),
        })
        .collect();
    Ok(LintReport {
        schema: schema::LINT,
        tool: Tool::current(),
        image: LintImage {
            name: scan.image.name.clone(),
            source: scan.image.source,
            manifest_digest: scan.image.manifest_digest.clone(),
            config_digest: scan.image.config_digest.clone(),
            platform: scan.image.platform.clone(),
            attestation: scan.image.attestation.clone(),
        },
        headlines,
        matrix,
        findings,
        suppressed: Suppressed {
            ignored,
            baseline,
            disabled_rules: opts.rules.iter().filter(|r| !enabled(r, opts.config)).map(|r| r.code.clone()).collect(),
        },
        policy: Default::default(),
        fail_on: opts.fail_on,
        failed,
        notes,
        device: opts.device,
        compilers: found,
        compiler_checks,
        detail,
        compat: verdict::compat_on_path(scan, &f.binaries),
        floor: f.floor,
        targets: opts.targets,
        evaluated: gate.rules.iter().zip(&gate.evaluated).map(|(r, n)| (r.code.clone(), n.get())).collect(),
    })
}
