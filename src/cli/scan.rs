//! `cudalint scan`: read an image, judge it, write the reports.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::ValueEnum;

use super::gate::{Gate, PolicyArgs, ReadArgs, RegistryArgs, TargetArgs, scan_options};
use super::write_stdout;
use crate::report;

#[derive(clap::Args, Debug)]
pub struct ScanArgs {
    /// The image: a docker-archive (`docker save` output), `-` for standard input, an OCI layout
    /// directory, an oci-archive, a root filesystem directory, a single file, a Python wheel, or a
    /// registry reference (`registry/repo:tag`, `repo@sha256:...`, `docker://...`). Prefixes
    /// `docker-archive:`, `oci:`, `oci-archive:`, `dir:`, `file:` force the kind.
    pub image: String,
    #[command(flatten)]
    pub targets: TargetArgs,
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Record the current findings as a baseline (for a later --baseline).
    #[arg(long)]
    pub write_baseline: Option<PathBuf>,
    /// Output format; repeat for several, each paired in order with an --output (text, json,
    /// sarif, junit, markdown; `inventory` is the scan's file listing as JSON, `listing` as text).
    #[arg(long, value_enum)]
    pub format: Vec<ScanFormat>,
    /// Where each --format goes, in order (the rest go to standard output).
    #[arg(long, short)]
    pub output: Vec<PathBuf>,
    /// Colours in text output.
    #[arg(long, value_enum, default_value_t = Color::Auto)]
    pub color: Color,
    #[command(flatten)]
    pub read: ReadArgs,
    #[command(flatten)]
    pub registry: RegistryArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ScanFormat {
    Text,
    Json,
    Sarif,
    Junit,
    Markdown,
    Inventory,
    Listing,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Color {
    Auto,
    Always,
    Never,
}

pub fn run(a: ScanArgs) -> Result<ExitCode, String> {
    let gate = Gate::load(&a.targets, &a.policy)?;
    let formats = if a.format.is_empty() { vec![ScanFormat::Text] } else { a.format.clone() };
    if a.output.len() > formats.len() {
        return Err("more --output than --format".into());
    }
    if formats.len() - a.output.len() > 1 {
        return Err("only one --format can go to standard output; give each other one an --output".into());
    }
    let opts = scan_options(&a.read, &a.registry)?;
    let inventory = crate::image::scan(&a.image, &opts).map_err(|e| format!("{}: {e}", a.image))?;
    let report = gate.judge(&inventory)?;
    if let Some(p) = &a.write_baseline {
        crate::lint::config::write_baseline(p, &report.findings)?;
    }
    for (i, f) in formats.iter().enumerate() {
        let dest = a.output.get(i);
        let color = match a.color {
            Color::Always => true,
            Color::Never => false,
            Color::Auto => dest.is_none() && std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
        };
        let text = match f {
            ScanFormat::Text => report::lint::text(&report, report::lint::Paint(color)),
            ScanFormat::Json => report::lint::json(&report),
            ScanFormat::Sarif => report::lint::sarif(&report, &gate.rules),
            ScanFormat::Junit => report::lint::junit(&report),
            ScanFormat::Markdown => report::lint::markdown(&report),
            ScanFormat::Inventory => report::scan::json(&inventory),
            ScanFormat::Listing => report::scan::text(&inventory),
        };
        match dest {
            Some(p) => std::fs::write(p, text).map_err(|e| format!("{}: {e}", p.display()))?,
            None => write_stdout(&text),
        }
    }
    Ok(if report.failed { ExitCode::from(1) } else { ExitCode::SUCCESS })
}
