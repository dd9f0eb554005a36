//! `cudalint registry`: scan every image of a registry (or a shard of them), one report per image
//! and a summary; `cudalint merge`: put the summaries of sharded runs back together.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::Ordering;

use anyhow::Context;

use super::args::{PolicyArgs, ReadArgs, RegistryArgs, TargetArgs, scan_options};
use super::write_stdout;
use crate::registry::catalog::{self, Selection};
use crate::report::registry::{self as summary, ImageResult, Merger, RunStats, Summary};

#[derive(clap::Args, Debug)]
pub struct RegistryScanArgs {
    /// Registry host[:port].
    pub registry: String,
    /// Only repositories matching this glob (repeatable; default all).
    #[arg(long)]
    pub repo: Vec<String>,
    /// Only tags matching this glob (repeatable; default all).
    #[arg(long)]
    pub tag: Vec<String>,
    /// Only the newest N tags of each repository (tags in natural version order).
    #[arg(long)]
    pub newest: Option<usize>,
    /// Scan shard K of N (0-based K): `--shard 2/8`, or `--shard index/8` to take K from
    /// JOB_COMPLETION_INDEX (Kubernetes Indexed Jobs). Images are assigned by a hash of their
    /// name, so every run splits the same way.
    #[arg(long)]
    pub shard: Option<String>,
    /// Directory for one JSON report per image and summary.json.
    #[arg(long, default_value = "cudalint-reports")]
    pub output_dir: PathBuf,
    #[command(flatten)]
    pub targets: TargetArgs,
    #[command(flatten)]
    pub policy: PolicyArgs,
    #[command(flatten)]
    pub read: ReadArgs,
    #[command(flatten)]
    pub registry_args: RegistryArgs,
}

#[derive(clap::Args, Debug)]
pub struct MergeArgs {
    /// summary.json files of sharded runs.
    #[arg(required = true)]
    pub summaries: Vec<PathBuf>,
    /// Write the merged summary here.
    #[arg(long, short)]
    pub output: Option<PathBuf>,
}

fn exit_code(images: &[ImageResult]) -> ExitCode {
    if images.iter().any(|i| i.status == summary::ImageStatus::Error) {
        ExitCode::from(2)
    } else if images.iter().any(|i| i.status == summary::ImageStatus::Fail) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

pub fn run(a: RegistryScanArgs) -> anyhow::Result<ExitCode> {
    let policy = a.policy.load(a.targets.spec())?;
    let mut opts = scan_options(&a.read, &a.registry_args)?;
    opts.progress = false;
    let shard = a.shard.as_deref().map(summary::parse_shard).transpose()?;
    // The analysis store, when it lives in the registry being scanned, is not scanned itself.
    let own_store = a.registry_args.analysis_store.as_deref().and_then(|s| s.strip_prefix(&format!("{}/", a.registry)));
    let exclude = own_store.map(str::to_string).into_iter().collect();
    let sel = Selection { repos: a.repo.clone(), tags: a.tag.clone(), newest: a.newest, shard, exclude };
    let images = catalog::list(&a.registry, &sel, &opts.registry).with_context(|| a.registry.clone())?;
    std::fs::create_dir_all(&a.output_dir).with_context(|| a.output_dir.display().to_string())?;
    let mut results = Vec::new();
    for image in images {
        if !a.read.quiet {
            eprintln!("cudalint: scanning {}", crate::escape::text(&image));
        }
        // A failure of one image is recorded and the run goes on (exit 2 at the end).
        let result = match crate::image::remote::scan(&image, &opts)
            .map_err(|e| e.to_string())
            .and_then(|inv| policy.judge(&inv, &policy.targets, None).map_err(|e| e.to_string()))
        {
            Ok(report) => {
                let name = summary::report_file_name(&image);
                let path = a.output_dir.join(&name);
                let json = crate::report::json::render(&report, &Default::default())?;
                std::fs::write(&path, json).with_context(|| path.display().to_string())?;
                ImageResult::judged(&image, &report, name)
            }
            Err(e) => ImageResult::failed(&image, e),
        };
        results.push(result);
    }
    let counts = &opts.counts;
    let mut stats = RunStats {
        layers_pulled: counts.pulled.load(Ordering::Relaxed),
        layers_analysed: counts.analysed.load(Ordering::Relaxed),
        ..Default::default()
    };
    if let Some(c) = &opts.cache {
        let cs = c.stats();
        stats.cache_hits = cs.hits.load(Ordering::Relaxed);
        stats.lock_waits = cs.lock_waits.load(Ordering::Relaxed);
        stats.stale_locks = cs.stale_locks.load(Ordering::Relaxed);
    }
    if let Some(st) = &opts.store {
        stats.store_hits = st.hits.load(Ordering::Relaxed);
        stats.store_pushed = st.pushed.load(Ordering::Relaxed);
        stats.store_claim_waits = st.claim_waits.load(Ordering::Relaxed);
    }
    let doc = Summary {
        schema: crate::schema::REGISTRY_SUMMARY.into(),
        registry: a.registry.clone(),
        shards: shard.map(|(k, n)| vec![format!("{k}/{n}")]).unwrap_or_default(),
        images: results,
        stats,
    };
    write_summary(&a.output_dir.join("summary.json"), &doc)?;
    write_stdout(&summary::text(&doc))?;
    Ok(exit_code(&doc.images))
}

fn write_summary(p: &Path, s: &Summary) -> anyhow::Result<()> {
    std::fs::write(p, summary::json(s)).with_context(|| p.display().to_string())
}

pub fn merge(a: MergeArgs) -> anyhow::Result<ExitCode> {
    let mut merger = Merger::default();
    for p in &a.summaries {
        let text = std::fs::read_to_string(p).with_context(|| p.display().to_string())?;
        merger.add(&p.display().to_string(), &text)?;
    }
    let merged = merger.finish()?;
    if let Some(o) = &a.output {
        write_summary(o, &merged)?;
    }
    write_stdout(&summary::text(&merged))?;
    Ok(exit_code(&merged.images))
}
