//! `cudalint support`: on which GPUs and drivers an image runs.

use std::process::ExitCode;

use anyhow::Context;

use super::args::{PolicyArgs, ReadArgs, RegistryArgs, scan_options};
use crate::lint::diff::Side;
use crate::lint::policy::TargetSpec;
use crate::report::support::{DiffFormat, SupportFormat, render, render_diff};

#[derive(clap::Args, Debug)]
pub struct SupportArgs {
    /// The image, as `scan` takes it: an archive, `-`, an OCI layout, a directory, a file, a
    /// wheel, or a registry reference.
    pub image: String,
    /// A report: `FMT` to standard output, `FMT=PATH` to a file; repeat for several
    /// (`--format html=support.html --format text`).
    #[arg(long, value_name = "FMT[=PATH]", value_parser = super::args::report_parser::<SupportFormat>())]
    pub format: Vec<super::args::Report<SupportFormat>>,
    /// Print only what enforces the matrix where the container starts: `require`, the
    /// `NVIDIA_REQUIRE_CUDA` constraint the NVIDIA container toolkit checks; `dockerfile`, the
    /// `ENV` and `LABEL` lines to paste.
    #[arg(long, value_enum, conflicts_with = "format")]
    pub emit: Option<Emit>,
    #[command(flatten)]
    pub policy: PolicyArgs,
    #[command(flatten)]
    pub out: super::OutputArgs,
    #[command(flatten)]
    pub read: ReadArgs,
    #[command(flatten)]
    pub registry: RegistryArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Emit {
    Require,
    Dockerfile,
}

pub fn run(a: SupportArgs) -> anyhow::Result<ExitCode> {
    let policy = a.policy.load(TargetSpec::default())?;
    // --emit is one report, to --output or standard output.
    let reports = a.out.plan(&a.format, SupportFormat::Text)?;
    let opts = scan_options(&a.read, &a.registry, policy.config.memory)?;
    registry_only(&a.image, &a.registry)?;
    let (support, judged) = if a.registry.from_attestation {
        from_attestation(&policy, &a.image, &opts)?
    } else {
        let inventory = crate::image::scan(&a.image, &opts).with_context(|| a.image.clone())?;
        let (support, judged) =
            crate::lint::support::support(&policy, &a.image, &inventory).with_context(|| a.image.clone())?;
        if a.registry.attest {
            attach(&a.image, &opts, &inventory, &support)?;
        }
        (support, Some(judged))
    };
    if let Some(e) = a.emit {
        // What is emitted is pasted into a Dockerfile or a pod spec: a support document read
        // from a registry is data another party wrote, so only what the grammars accept goes out.
        emittable(&support).with_context(|| format!("{}: nothing emitted", a.image))?;
        let text = match e {
            Emit::Require => {
                if !support.gpus.iter().any(|g| g.result.runs()) {
                    anyhow::bail!("{}: {}; no constraint admits it", a.image, support.summary);
                }
                format!("{}\n", support.require)
            }
            Emit::Dockerfile => dockerfile(&support),
        };
        a.out.emit(a.out.output.as_deref(), &text)?;
        return Ok(ExitCode::SUCCESS);
    }
    for r in &reports {
        let text = render(r.format, &support, judged.as_ref())?;
        a.out.emit(r.path.as_deref(), &text)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `--attest` and `--from-attestation` act on registry images: anything else is an error, not
/// an attestation silently left out (a path that cannot be read fails in the scan).
pub(super) fn registry_only(image: &str, reg: &RegistryArgs) -> anyhow::Result<()> {
    let flag = match (reg.attest, reg.from_attestation) {
        (true, _) => "--attest",
        (_, true) => "--from-attestation",
        _ => return Ok(()),
    };
    match crate::image::Source::parse(image) {
        Ok(crate::image::Source::Registry(_) | crate::image::Source::Reference(_)) | Err(_) => Ok(()),
        Ok(_) => anyhow::bail!(
            "{}: {flag} needs an image in a registry (attestations are OCI referrers of its manifest); this is a local \
             image",
            crate::escape::text(image)
        ),
    }
}

/// Pushes `support`, the matrix of the registry image `image` (scanned into `inventory`), as a
/// support attestation beside the inventory one (`--attest`).
pub(super) fn attach(
    image: &str,
    opts: &crate::image::ScanOptions,
    inventory: &crate::image::ImageReport,
    support: &crate::lint::support::SupportReport,
) -> anyhow::Result<()> {
    let digest = inventory
        .image
        .manifest_digest
        .as_deref()
        .with_context(|| format!("{image}: no manifest digest to attach the support attestation to"))?;
    let value = serde_json::to_value(support).expect("serializes");
    crate::image::remote::attach_support(image, opts, digest, &value)
        .with_context(|| format!("{image}: pushing the support attestation"))?;
    Ok(())
}

/// `--from-attestation`: the matrix attached to the image that its trust believes (made with the
/// attester's rules, ignores and baseline; another cudalint version's is shown with a note).
/// None: the image is judged afresh from its inventory attestation, if it has one, else from its
/// layers where `--verify-key` believed none; else an error naming it. The grid of an evaluation comes only with a fresh one.
fn from_attestation(
    policy: &crate::lint::policy::Policy,
    image: &str,
    opts: &crate::image::ScanOptions,
) -> anyhow::Result<(crate::lint::support::SupportReport, Option<crate::lint::LintReport>)> {
    let esc = crate::escape::text;
    let parse = |v: &serde_json::Value| {
        <crate::lint::support::SupportReport as serde::Deserialize>::deserialize(v).map_err(|e| e.to_string())
    };
    let (attached, notes) = match crate::image::remote::read_support(image, opts, &parse) {
        Ok(b) => (b.value.ok_or_else(|| anyhow::anyhow!("no signed support attestation")), b.notes),
        // Under --verify-key none believed is not an error: two signed that disagree are, and
        // no other attestation settles that.
        Err(e) if matches!(opts.trust, crate::image::sign::Trust::Keys(_)) => return Err(e.into()),
        Err(e) => (Err(e.into()), Vec::new()),
    };
    for n in &notes {
        eprintln!("cudalint: note: {}: {}", esc(image), n);
    }
    match attached {
        Ok(mut s) => {
            s.notes.extend(notes);
            if s.tool.version != env!("CARGO_PKG_VERSION") {
                eprintln!(
                    "cudalint: note: {}: its support attestation was made by cudalint {} (this is {}): its rules and \
                     GPU tables may differ; run without --from-attestation to judge the image afresh",
                    esc(image),
                    esc(s.tool.version),
                    env!("CARGO_PKG_VERSION")
                );
            }
            Ok((s, None))
        }
        Err(none) => {
            // The inventory attestation's path (`opts.from_attestation`): judged here, nothing
            // pulled unless no signed one is believed either (`--verify-key`).
            let inventory = crate::image::scan(image, opts).map_err(|e| {
                anyhow::anyhow!(
                    "{}: {:#}; and no inventory attestation to judge it from instead: {e}",
                    esc(image),
                    none
                )
            })?;
            let from = if opts.counts.analysed.load(std::sync::atomic::Ordering::Relaxed) > 0 {
                "its layers"
            } else {
                "its inventory attestation"
            };
            eprintln!("cudalint: note: {}: {:#}; judged from {from} instead", esc(image), none);
            let (s, judged) =
                crate::lint::support::support(policy, image, &inventory).with_context(|| image.to_string())?;
            Ok((s, Some(judged)))
        }
    }
}

/// Whether the parts of `s` that `--emit` writes are what their grammars accept: the
/// requirement parses as libnvidia-container reads it and holds only its own characters, each
/// compute capability and the driver floor parse. (A forged `require` of `cuda>=12.0"\nRUN curl
/// … | sh` would otherwise be a Dockerfile step.)
fn emittable(s: &crate::lint::support::SupportReport) -> anyhow::Result<()> {
    let esc = crate::escape::text;
    let grammar = |c: char| c.is_ascii_alphanumeric() || " ,.=<>!_-".contains(c);
    if !s.require.chars().all(grammar) || crate::cuda::require::parse(&s.require).is_err() {
        anyhow::bail!("its requirement `{}` is not an NVIDIA_REQUIRE_CUDA constraint", esc(&s.require));
    }
    for g in s.gpus.iter().filter(|g| g.result.runs()) {
        if crate::cuda::Cc::parse(&g.compute_capability).is_none() {
            anyhow::bail!("`{}` is not a compute capability", esc(&g.compute_capability));
        }
    }
    if !s.floor.driver.is_empty() && crate::cuda::DriverVersion::parse(&s.floor.driver).is_none() {
        anyhow::bail!("its driver floor `{}` is not a driver version", esc(&s.floor.driver));
    }
    Ok(())
}

/// The lines to paste into the image's Dockerfile: the constraint the container toolkit checks,
/// and labels that say the same for people and registries (checked by [`emittable`]); free text
/// (the summary, the version in the comment) on one line, its control characters blanked.
fn dockerfile(s: &crate::lint::support::SupportReport) -> String {
    let line = |v: &str| v.chars().map(|c| if c.is_control() { ' ' } else { c }).collect::<String>();
    let runs: Vec<&str> = s.gpus.iter().filter(|g| g.result.runs()).map(|g| g.compute_capability.as_str()).collect();
    let mut ccs: Vec<&str> = runs.clone();
    ccs.dedup();
    let mut o = format!(
        "# cudalint {}: {}\nENV NVIDIA_REQUIRE_CUDA=\"{}\"\n",
        line(s.tool.version),
        line(&s.summary),
        s.require
    );
    o.push_str(&format!("LABEL dev.cudalint.support.compute-capabilities=\"{}\"\n", ccs.join(",")));
    if !s.floor.driver.is_empty() {
        o.push_str(&format!("LABEL dev.cudalint.support.min-driver=\"{}\"\n", s.floor.driver));
    }
    o
}

#[derive(clap::Args, Debug)]
pub struct DiffArgs {
    /// The image before the change (any form `scan` takes).
    pub old: String,
    /// The image after it.
    pub new: String,
    /// Fail (exit 1) when the new image does not run on these GPUs; default: when it drops any
    /// GPU the old one ran on. The GPU table and its unchanged count are these GPUs' only.
    #[arg(long, visible_alias = "gpus", value_delimiter = ',')]
    pub gpu: Vec<String>,
    /// The fleet's driver: fail when the new image's driver floor is above it.
    #[arg(long)]
    pub driver: Option<String>,
    /// A report: `FMT` to standard output, `FMT=PATH` to a file; repeat for several
    /// (`--format markdown=diff.md --format text`).
    #[arg(long, value_name = "FMT[=PATH]", value_parser = super::args::report_parser::<DiffFormat>())]
    pub format: Vec<super::args::Report<DiffFormat>>,
    #[command(flatten)]
    pub policy: PolicyArgs,
    #[command(flatten)]
    pub out: super::OutputArgs,
    #[command(flatten)]
    pub read: ReadArgs,
    #[command(flatten)]
    pub registry: RegistryArgs,
}

pub fn diff(a: DiffArgs) -> anyhow::Result<ExitCode> {
    let policy = a.policy.load(TargetSpec::default())?;
    for g in &a.gpu {
        crate::lint::targets::gpu(g)?;
    }
    let driver = a.driver.as_deref().map(crate::lint::targets::driver).transpose()?.map(|(d, _)| d);
    let reports = a.out.plan(&a.format, DiffFormat::Text)?;
    // One set of options: registry references share the layer cache, so a common base is read once.
    let opts = scan_options(&a.read, &a.registry, policy.config.memory)?;
    let old = crate::image::scan(&a.old, &opts).with_context(|| a.old.clone())?;
    let new = crate::image::scan(&a.new, &opts).with_context(|| a.new.clone())?;
    let (old_s, _) = crate::lint::support::support(&policy, &a.old, &old).with_context(|| a.old.clone())?;
    let (new_s, _) = crate::lint::support::support(&policy, &a.new, &new).with_context(|| a.new.clone())?;
    let d = crate::lint::diff::diff(
        Side { support: &old_s, inventory: &old },
        Side { support: &new_s, inventory: &new },
        &a.gpu,
        driver.as_ref(),
    );
    for r in &reports {
        a.out.emit(r.path.as_deref(), &render_diff(r.format, &d))?;
    }
    Ok(if d.failures.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
