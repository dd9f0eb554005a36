//! `cudalint registry`: scan every image of a registry (or a shard of them), one report per image
//! and a summary; `cudalint merge`: put the summaries of sharded runs back together.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::Ordering;

use serde::{Deserialize, Serialize};

use super::gate::{Gate, PolicyArgs, ReadArgs, RegistryArgs, TargetArgs, scan_options};
use super::write_stdout;
use crate::lint::rules::Severity;
use crate::registry::catalog::{self, Selection};

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

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ImageResult {
    pub image: String,
    /// pass, fail (findings at or above --fail-on), error (the scan failed).
    pub status: String,
    pub errors: u64,
    pub warnings: u64,
    pub infos: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Summary {
    pub schema: String,
    pub registry: String,
    #[serde(default)]
    pub shards: Vec<String>,
    pub images: Vec<ImageResult>,
    /// What the run(s) did: layers pulled and analysed, cache hits, lock waits. Summed by merge;
    /// varies between runs (which shard analysed a shared layer), unlike `images`.
    #[serde(default)]
    pub stats: RunStats,
}

#[derive(Debug, Default, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct RunStats {
    /// Layer blobs downloaded.
    pub layers_pulled: u64,
    /// Layers analysed here (not found in the cache).
    pub layers_analysed: u64,
    /// Layer analyses read from the cache.
    pub cache_hits: u64,
    /// Layers whose lock another process held when this one wanted it.
    pub lock_waits: u64,
    /// Locks given up on after --cache-lock-timeout.
    pub stale_locks: u64,
    /// Layer analyses read from the --analysis-store, and written to it.
    #[serde(default)]
    pub store_hits: u64,
    #[serde(default)]
    pub store_pushed: u64,
    /// Layers another shard had claimed in the store when this one wanted them.
    #[serde(default)]
    pub store_claim_waits: u64,
}

impl RunStats {
    fn add(&mut self, o: &RunStats) {
        self.layers_pulled += o.layers_pulled;
        self.layers_analysed += o.layers_analysed;
        self.cache_hits += o.cache_hits;
        self.lock_waits += o.lock_waits;
        self.stale_locks += o.stale_locks;
        self.store_hits += o.store_hits;
        self.store_pushed += o.store_pushed;
        self.store_claim_waits += o.store_claim_waits;
    }
}

fn parse_shard(s: &str) -> Result<(u64, u64), String> {
    let (k, n) = s.split_once('/').ok_or_else(|| format!("--shard {s:?}: expected K/N"))?;
    let n: u64 = n.parse().map_err(|_| format!("--shard {s:?}: N is not a number"))?;
    let k: u64 = if k == "index" {
        std::env::var("JOB_COMPLETION_INDEX")
            .map_err(|_| "--shard index/N needs JOB_COMPLETION_INDEX (set by Kubernetes Indexed Jobs)".to_string())?
            .parse()
            .map_err(|_| "JOB_COMPLETION_INDEX is not a number".to_string())?
    } else {
        k.parse().map_err(|_| format!("--shard {s:?}: K is not a number"))?
    };
    if n == 0 || k >= n {
        return Err(format!("--shard {k}/{n}: K must be in 0..N"));
    }
    Ok((k, n))
}

/// Sharded summaries must be one complete set: the same N, every K once. A missing shard would
/// otherwise merge into a report that looks whole.
fn check_shards(shards: &[String]) -> Result<(), String> {
    if shards.is_empty() {
        return Ok(());
    }
    let parsed = shards.iter().map(|s| parse_shard(s)).collect::<Result<Vec<_>, _>>()?;
    let n = parsed[0].1;
    if let Some((_, m)) = parsed.iter().find(|(_, m)| *m != n) {
        return Err(format!("summaries of different shardings (of {n} and of {m}): merge the runs of one sharding"));
    }
    let mut seen = vec![0u32; n as usize];
    for (k, _) in &parsed {
        seen[*k as usize] += 1;
    }
    let twice: Vec<String> = (0..n).filter(|k| seen[*k as usize] > 1).map(|k| format!("{k}/{n}")).collect();
    if !twice.is_empty() {
        return Err(format!("shard {} given more than once", twice.join(", ")));
    }
    let missing: Vec<String> = (0..n).filter(|k| seen[*k as usize] == 0).map(|k| format!("{k}/{n}")).collect();
    if !missing.is_empty() {
        return Err(format!("incomplete: shard {} missing", missing.join(", ")));
    }
    Ok(())
}

fn file_name_for(image: &str) -> String {
    let s: String =
        image.chars().map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '-' { c } else { '_' }).collect();
    format!("{s}.json")
}

fn table(images: &[ImageResult]) -> String {
    let w = images.iter().map(|i| i.image.len()).max().unwrap_or(5).max(5);
    let mut out = format!("{:<w$}  status  errors  warnings  info\n", "image");
    for i in images {
        out.push_str(&format!("{:<w$}  {:<6}  {:>6}  {:>8}  {:>4}", i.image, i.status, i.errors, i.warnings, i.infos));
        if let Some(m) = &i.message {
            out.push_str(&format!("  {m}"));
        }
        out.push('\n');
    }
    let count = |s: &str| images.iter().filter(|i| i.status == s).count();
    out.push_str(&format!(
        "\n{} images: {} passed, {} failed, {} could not be scanned\n",
        images.len(),
        count("pass"),
        count("fail"),
        count("error")
    ));
    out
}

fn exit_code(images: &[ImageResult]) -> ExitCode {
    if images.iter().any(|i| i.status == "error") {
        ExitCode::from(2)
    } else if images.iter().any(|i| i.status == "fail") {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

pub fn run(a: RegistryScanArgs) -> Result<ExitCode, String> {
    let gate = Gate::load(&a.targets, &a.policy)?;
    let mut opts = scan_options(&a.read, &a.registry_args)?;
    opts.progress = false;
    let shard = a.shard.as_deref().map(parse_shard).transpose()?;
    let sel = Selection { repos: a.repo.clone(), tags: a.tag.clone(), newest: a.newest, shard };
    let images = catalog::list(&a.registry, &sel, &opts.registry).map_err(|e| format!("{}: {e}", a.registry))?;
    std::fs::create_dir_all(&a.output_dir).map_err(|e| format!("{}: {e}", a.output_dir.display()))?;
    let mut results = Vec::new();
    for image in images {
        if !a.read.quiet {
            eprintln!("cudalint: scanning {}", crate::report::escape::text(&image));
        }
        // A failure of one image is recorded and the run goes on (exit 2 at the end).
        let result =
            match crate::image::remote::scan(&image, &opts).map_err(|e| e.to_string()).and_then(|inv| gate.judge(&inv))
            {
                Ok(report) => {
                    let name = file_name_for(&image);
                    let path = a.output_dir.join(&name);
                    std::fs::write(&path, crate::report::lint::json(&report))
                        .map_err(|e| format!("{}: {e}", path.display()))?;
                    let c = crate::report::lint::counts(&report);
                    let n = |s: Severity| c.get(&s).copied().unwrap_or(0) as u64;
                    ImageResult {
                        image: image.clone(),
                        status: if report.failed { "fail" } else { "pass" }.into(),
                        errors: n(Severity::Error),
                        warnings: n(Severity::Warning),
                        infos: n(Severity::Info),
                        report: Some(name),
                        message: None,
                    }
                }
                Err(e) => ImageResult {
                    image: image.clone(),
                    status: "error".into(),
                    errors: 0,
                    warnings: 0,
                    infos: 0,
                    report: None,
                    message: Some(e),
                },
            };
        results.push(result);
    }
    let counts = &crate::image::pipeline::LAYER_COUNTS;
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
    let summary = Summary {
        schema: crate::schema::REGISTRY_SUMMARY.into(),
        registry: a.registry.clone(),
        shards: shard.map(|(k, n)| vec![format!("{k}/{n}")]).unwrap_or_default(),
        images: results,
        stats,
    };
    write_summary(&a.output_dir.join("summary.json"), &summary)?;
    write_stdout(&table(&summary.images)).map_err(|e| format!("{e:#}"))?;
    Ok(exit_code(&summary.images))
}

fn write_summary(p: &Path, s: &Summary) -> Result<(), String> {
    let mut text = serde_json::to_string_pretty(s).expect("serializes");
    text.push('\n');
    std::fs::write(p, text).map_err(|e| format!("{}: {e}", p.display()))
}

pub fn merge(a: MergeArgs) -> Result<ExitCode, String> {
    let mut images: BTreeMap<String, ImageResult> = BTreeMap::new();
    let mut registry = String::new();
    let mut shards = Vec::new();
    let mut stats = RunStats::default();
    for p in &a.summaries {
        let text = std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?;
        let s: Summary = serde_json::from_str(&text).map_err(|e| format!("{}:{}: {e}", p.display(), e.line()))?;
        if s.schema != crate::schema::REGISTRY_SUMMARY {
            return Err(format!("{}: not a cudalint registry summary", p.display()));
        }
        if !registry.is_empty() && registry != s.registry {
            return Err(format!("{}: summary of {}, not {registry}", p.display(), s.registry));
        }
        registry = s.registry;
        shards.extend(s.shards);
        stats.add(&s.stats);
        for i in s.images {
            images.insert(i.image.clone(), i);
        }
    }
    check_shards(&shards)?;
    shards.sort_by_key(|s| parse_shard(s).ok());
    let merged = Summary {
        schema: crate::schema::REGISTRY_SUMMARY.into(),
        registry,
        shards,
        images: images.into_values().collect(),
        stats,
    };
    if let Some(o) = &a.output {
        write_summary(o, &merged)?;
    }
    write_stdout(&table(&merged.images)).map_err(|e| format!("{e:#}"))?;
    Ok(exit_code(&merged.images))
}
