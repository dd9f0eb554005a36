//! The summary of a `cudalint registry` run (summary.json, schema `cudalint.registry-summary`)
//! and its table for people; `cudalint merge` puts the summaries of sharded runs back together
//! with [`Merger`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::ReportError;
use super::lines::counts;
use crate::lint::LintReport;
use crate::lint::rules::Severity;

/// How one image of a registry run ended.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ImageStatus {
    /// Judged, no finding at or above --fail-on.
    Pass,
    /// Judged, findings at or above --fail-on.
    Fail,
    /// The scan or the judgement failed (the run exits 2).
    Error,
}

impl ImageStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ImageStatus::Pass => "pass",
            ImageStatus::Fail => "fail",
            ImageStatus::Error => "error",
        }
    }
}

impl std::fmt::Display for ImageStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ImageResult {
    pub image: String,
    pub status: ImageStatus,
    pub errors: u64,
    pub warnings: u64,
    pub infos: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl ImageResult {
    /// An image that was scanned and judged; its JSON report was written to `report_file`.
    pub fn judged(image: &str, r: &LintReport, report_file: String) -> Self {
        let c = counts(r);
        let n = |s: Severity| c.get(&s).copied().unwrap_or(0) as u64;
        ImageResult {
            image: image.to_string(),
            status: if r.failed { ImageStatus::Fail } else { ImageStatus::Pass },
            errors: n(Severity::Error),
            warnings: n(Severity::Warning),
            infos: n(Severity::Info),
            report: Some(report_file),
            message: None,
        }
    }

    /// An image whose scan failed.
    pub fn failed(image: &str, message: String) -> Self {
        ImageResult {
            image: image.to_string(),
            status: ImageStatus::Error,
            errors: 0,
            warnings: 0,
            infos: 0,
            report: None,
            message: Some(message),
        }
    }
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

/// `K/N` (0-based K), or `index/N` with K from JOB_COMPLETION_INDEX (Kubernetes Indexed Jobs):
/// the `--shard` flag, and the shard labels a summary records.
pub fn parse_shard(s: &str) -> Result<(u64, u64), ReportError> {
    let (k, n) = s.split_once('/').ok_or_else(|| ReportError::ShardSyntax { shard: s.to_string() })?;
    let n: u64 = n.parse().map_err(|_| ReportError::ShardNotNumber { shard: s.to_string(), part: "N" })?;
    let k: u64 = if k == "index" {
        std::env::var("JOB_COMPLETION_INDEX")
            .map_err(|_| ReportError::NoJobIndex)?
            .parse()
            .map_err(|_| ReportError::BadJobIndex)?
    } else {
        k.parse().map_err(|_| ReportError::ShardNotNumber { shard: s.to_string(), part: "K" })?
    };
    if n == 0 || k >= n {
        return Err(ReportError::ShardOutOfRange { k, n });
    }
    Ok((k, n))
}

/// Sharded summaries must be one complete set: the same N, every K once. A missing shard would
/// otherwise merge into a report that looks whole.
fn check_shards(shards: &[String]) -> Result<(), ReportError> {
    if shards.is_empty() {
        return Ok(());
    }
    let parsed = shards.iter().map(|s| parse_shard(s)).collect::<Result<Vec<_>, _>>()?;
    let n = parsed[0].1;
    if let Some((_, m)) = parsed.iter().find(|(_, m)| *m != n) {
        return Err(ReportError::MixedShardings { n, m: *m });
    }
    let mut seen = vec![0u32; n as usize];
    for (k, _) in &parsed {
        seen[*k as usize] += 1;
    }
    let twice: Vec<String> = (0..n).filter(|k| seen[*k as usize] > 1).map(|k| format!("{k}/{n}")).collect();
    if !twice.is_empty() {
        return Err(ReportError::ShardTwice(twice.join(", ")));
    }
    let missing: Vec<String> = (0..n).filter(|k| seen[*k as usize] == 0).map(|k| format!("{k}/{n}")).collect();
    if !missing.is_empty() {
        return Err(ReportError::ShardsMissing(missing.join(", ")));
    }
    Ok(())
}

/// The file name of an image's JSON report in the output directory.
pub fn report_file_name(image: &str) -> String {
    let s: String =
        image.chars().map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '-' { c } else { '_' }).collect();
    format!("{s}.json")
}

/// summary.json.
pub fn json(s: &Summary) -> String {
    let mut text = serde_json::to_string_pretty(s).expect("serializes");
    text.push('\n');
    text
}

/// The table for people: a line per image and the totals.
pub fn text(s: &Summary) -> String {
    let images = &s.images;
    let w = images.iter().map(|i| i.image.len()).max().unwrap_or(5).max(5);
    let mut out = format!("{:<w$}  status  errors  warnings  info\n", "image");
    for i in images {
        out.push_str(&format!("{:<w$}  {:<6}  {:>6}  {:>8}  {:>4}", i.image, i.status, i.errors, i.warnings, i.infos));
        if let Some(m) = &i.message {
            out.push_str(&format!("  {m}"));
        }
        out.push('\n');
    }
    let count = |s: ImageStatus| images.iter().filter(|i| i.status == s).count();
    out.push_str(&format!(
        "\n{} images: {} passed, {} failed, {} could not be scanned\n",
        images.len(),
        count(ImageStatus::Pass),
        count(ImageStatus::Fail),
        count(ImageStatus::Error)
    ));
    out
}

/// Summaries of sharded runs, added one at a time (the first bad one stops the merge), then
/// checked to be one complete set of shards of one registry.
#[derive(Default)]
pub struct Merger {
    images: BTreeMap<String, ImageResult>,
    registry: String,
    shards: Vec<String>,
    stats: RunStats,
}

impl Merger {
    /// Adds the summary.json `text`; `origin` names it in errors. A later summary's result for an
    /// image replaces an earlier one's.
    pub fn add(&mut self, origin: &str, text: &str) -> Result<(), ReportError> {
        let s: Summary = serde_json::from_str(text)
            .map_err(|source| ReportError::SummaryJson { origin: origin.to_string(), source })?;
        if s.schema != crate::schema::REGISTRY_SUMMARY {
            return Err(ReportError::NotSummary { origin: origin.to_string() });
        }
        if !self.registry.is_empty() && self.registry != s.registry {
            return Err(ReportError::OtherRegistry {
                origin: origin.to_string(),
                found: s.registry,
                expected: self.registry.clone(),
            });
        }
        self.registry = s.registry;
        self.shards.extend(s.shards);
        self.stats.add(&s.stats);
        for i in s.images {
            self.images.insert(i.image.clone(), i);
        }
        Ok(())
    }

    /// The merged summary: images sorted by name, shards in order, stats summed.
    pub fn finish(self) -> Result<Summary, ReportError> {
        let Merger { images, registry, mut shards, stats } = self;
        check_shards(&shards)?;
        shards.sort_by_key(|s| parse_shard(s).ok());
        Ok(Summary {
            schema: crate::schema::REGISTRY_SUMMARY.into(),
            registry,
            shards,
            images: images.into_values().collect(),
            stats,
        })
    }
}
