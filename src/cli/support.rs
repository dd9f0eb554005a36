//! `cudalint support`: on which GPUs and drivers an image runs.

use std::process::ExitCode;

use anyhow::Context;
use clap::builder::TypedValueParser as _;

use super::args::{PolicyArgs, ReadArgs, RegistryArgs, scan_options};
use crate::lint::diff::Side;
use crate::lint::policy::TargetSpec;
use crate::report::support::{DiffFormat, SupportFormat, render, render_diff};

#[derive(clap::Args, Debug)]
pub struct SupportArgs {
    /// The image, as `scan` takes it: an archive, `-`, an OCI layout, a directory, a file, a
    /// wheel, or a registry reference.
    pub image: String,
    /// Output format; repeat for several, each paired in order with an --output.
    #[arg(long, value_parser = format_parser())]
    pub format: Vec<SupportFormat>,
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

fn format_parser() -> impl clap::builder::TypedValueParser<Value = SupportFormat> {
    clap::builder::PossibleValuesParser::new(SupportFormat::ALL.iter().map(|f| f.as_str()))
        .map(|name| name.parse::<SupportFormat>().expect("a listed format name"))
}

pub fn run(a: SupportArgs) -> anyhow::Result<ExitCode> {
    let policy = a.policy.load(TargetSpec::default())?;
    let formats = if a.format.is_empty() { vec![SupportFormat::Text] } else { a.format.clone() };
    a.out.check(if a.emit.is_some() { 1 } else { formats.len() })?;
    let opts = scan_options(&a.read, &a.registry)?;
    let inventory = crate::image::scan(&a.image, &opts).with_context(|| a.image.clone())?;
    let (support, judged) =
        crate::lint::support::support(&policy, &a.image, &inventory).with_context(|| a.image.clone())?;
    if let Some(e) = a.emit {
        let text = match e {
            Emit::Require => {
                if !support.gpus.iter().any(|g| g.result.runs()) {
                    anyhow::bail!("{}: {}; no constraint admits it", a.image, support.summary);
                }
                format!("{}\n", support.require)
            }
            Emit::Dockerfile => dockerfile(&support),
        };
        a.out.emit(0, &text)?;
        return Ok(ExitCode::SUCCESS);
    }
    for (i, f) in formats.iter().enumerate() {
        let text = render(*f, &support, &judged)?;
        a.out.emit(i, &text)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The lines to paste into the image's Dockerfile: the constraint the container toolkit checks,
/// and labels that say the same for people and registries.
fn dockerfile(s: &crate::lint::support::SupportReport) -> String {
    let q = |v: &str| v.replace('\\', "\\\\").replace('"', "\\\"");
    let runs: Vec<&str> = s.gpus.iter().filter(|g| g.result.runs()).map(|g| g.compute_capability.as_str()).collect();
    let mut ccs: Vec<&str> = runs.clone();
    ccs.dedup();
    let mut o = format!(
        "# cudalint {}: {}\nENV NVIDIA_REQUIRE_CUDA=\"{}\"\n",
        s.tool.version,
        s.summary.replace('\n', " "),
        q(&s.require)
    );
    o.push_str(&format!("LABEL dev.cudalint.support.compute-capabilities=\"{}\"\n", q(&ccs.join(","))));
    if !s.floor.driver.is_empty() {
        o.push_str(&format!("LABEL dev.cudalint.support.min-driver=\"{}\"\n", q(&s.floor.driver)));
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
    /// GPU the old one ran on.
    #[arg(long, value_delimiter = ',')]
    pub gpu: Vec<String>,
    /// The fleet's driver: fail when the new image's driver floor is above it.
    #[arg(long)]
    pub driver: Option<String>,
    /// Output format; repeat for several, each paired in order with an --output.
    #[arg(long, value_parser = diff_format_parser())]
    pub format: Vec<DiffFormat>,
    #[command(flatten)]
    pub policy: PolicyArgs,
    #[command(flatten)]
    pub out: super::OutputArgs,
    #[command(flatten)]
    pub read: ReadArgs,
    #[command(flatten)]
    pub registry: RegistryArgs,
}

fn diff_format_parser() -> impl clap::builder::TypedValueParser<Value = DiffFormat> {
    clap::builder::PossibleValuesParser::new(DiffFormat::ALL.iter().map(|f| f.as_str()))
        .map(|name| name.parse::<DiffFormat>().expect("a listed format name"))
}

pub fn diff(a: DiffArgs) -> anyhow::Result<ExitCode> {
    let policy = a.policy.load(TargetSpec::default())?;
    for g in &a.gpu {
        crate::lint::targets::gpu(g)?;
    }
    let driver = a.driver.as_deref().map(crate::lint::targets::driver).transpose()?.map(|(d, _)| d);
    let formats = if a.format.is_empty() { vec![DiffFormat::Text] } else { a.format.clone() };
    a.out.check(formats.len())?;
    // One set of options: registry references share the layer cache, so a common base is read once.
    let opts = scan_options(&a.read, &a.registry)?;
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
    for (i, f) in formats.iter().enumerate() {
        a.out.emit(i, &render_diff(*f, &d))?;
    }
    Ok(if d.failures.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
