//! The summary of a `cudalint registry` run (summary.json, schema `cudalint.registry-summary`)
//! and its table for people; `cudalint merge` puts the summaries of sharded runs back together
//! with [`Merger`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::ReportError;
use super::lines::counts;
use crate::escape::text as esc;
use crate::lint::coverage::Class;
use crate::lint::rules::Severity;
use crate::lint::{HeadlineVerdict, LintReport};

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

/// One result of a registry run: an image, or one platform of a multi-platform image.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ImageResult {
    pub image: String,
    /// The platform scanned (`linux/arm64`) when the tag is an index of several platforms: each
    /// is its own result. Absent for a tag that is one image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub platform: Option<String>,
    pub status: ImageStatus,
    pub errors: u64,
    pub warnings: u64,
    pub infos: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<String>,
    /// The error, for an image that could not be scanned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Why, in one line: the first failing target's headline (or first finding that fails the
    /// gate), the error, or what a passing image does. Absent only in summaries written before
    /// it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// One line of at most this many characters: a reason is a table cell, the report has the rest.
const REASON_CHARS: usize = 160;

fn one_line(s: &str) -> String {
    let line = s.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" ");
    if line.chars().count() <= REASON_CHARS {
        return line;
    }
    let mut cut: String = line.chars().take(REASON_CHARS - 1).collect();
    cut.push('…');
    cut
}

/// The first reason of a judged image. Failing: the first target whose headline fails, else
/// (a gate failed by warnings, or by findings of no target) the first of the most severe
/// findings at or above --fail-on. Passing: a target accepted only by suppressions says so
/// (it would fail), else it runs on every target, or there was no device code to judge.
pub fn reason(r: &LintReport) -> String {
    if let Some(h) = r.headlines.iter().find(|h| h.verdict == HeadlineVerdict::Fails) {
        return one_line(&h.text);
    }
    if r.failed {
        let top = r.findings.iter().filter(|f| r.fail_on.fails(f.severity)).map(|f| f.severity).max();
        if let Some(f) = r.findings.iter().find(|f| Some(f.severity) == top) {
            let at = f.path.as_deref().map(|p| format!(" ({})", p.rsplit('/').next().unwrap_or(p))).unwrap_or_default();
            return one_line(&format!("{} {}{at}: {}", f.severity, f.rule, f.message));
        }
        return "fails the gate".to_string();
    }
    if let Some(h) = r.headlines.iter().find(|h| h.verdict == HeadlineVerdict::Accepted) {
        return one_line(&h.text);
    }
    let judged = r.matrix.iter().flat_map(|m| &m.cells).any(|c| c.class != Class::NotApplicable);
    if r.targets.is_empty() {
        "no targets given".to_string()
    } else if judged {
        "runs on all targets".to_string()
    } else {
        "no device code to judge".to_string()
    }
}

impl ImageResult {
    /// An image (`platform`: of a multi-platform index) that was scanned and judged; its JSON
    /// report was written to `report_file`.
    pub fn judged(image: &str, platform: Option<String>, r: &LintReport, report_file: String) -> Self {
        let c = counts(r);
        let n = |s: Severity| c.get(&s).copied().unwrap_or(0) as u64;
        ImageResult {
            image: image.to_string(),
            platform,
            status: if r.failed { ImageStatus::Fail } else { ImageStatus::Pass },
            errors: n(Severity::Error),
            warnings: n(Severity::Warning),
            infos: n(Severity::Info),
            report: Some(report_file),
            message: None,
            reason: Some(reason(r)),
        }
    }

    /// An image (or one platform of it) whose scan failed.
    pub fn failed(image: &str, platform: Option<String>, message: String) -> Self {
        ImageResult {
            image: image.to_string(),
            platform,
            status: ImageStatus::Error,
            errors: 0,
            warnings: 0,
            infos: 0,
            report: None,
            reason: Some(one_line(&message)),
            message: Some(message),
        }
    }

    /// `host/repo:tag`, or `host/repo:tag (linux/arm64)` for one platform of an index.
    pub fn label(&self) -> String {
        match &self.platform {
            Some(p) => format!("{} ({p})", self.image),
            None => self.image.clone(),
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

/// The file name of an image's JSON report in the output directory; one platform of a
/// multi-platform image gets `+os-arch[-variant]` appended. `+` is in no sanitized image name,
/// so a platform's file never takes another image's name, nor another platform's.
pub fn report_file_name(image: &str, platform: Option<&str>) -> String {
    let safe = |s: &str| -> String {
        s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '-' { c } else { '_' }).collect()
    };
    match platform {
        Some(p) => format!("{}+{}.json", safe(image), safe(&p.replace('/', "-"))),
        None => format!("{}.json", safe(image)),
    }
}

/// summary.json.
pub fn json(s: &Summary) -> String {
    let mut text = serde_json::to_string_pretty(s).expect("serializes");
    text.push('\n');
    text
}

/// The table for people: a line per image (per platform of a multi-platform image) with its
/// first reason, and the totals.
pub fn text(s: &Summary) -> String {
    let images = &s.images;
    let labels: Vec<String> = images.iter().map(|i| esc(&i.label())).collect();
    let w = labels.iter().map(|l| l.chars().count()).max().unwrap_or(5).max(5);
    let mut out = format!("{:<w$}  status  errors  warnings  info  reason\n", "image");
    for (i, label) in images.iter().zip(&labels) {
        out.push_str(&format!("{label:<w$}  {:<6}  {:>6}  {:>8}  {:>4}", i.status, i.errors, i.warnings, i.infos));
        // Summaries from before `reason` carry the error as `message` only.
        if let Some(r) = i.reason.as_ref().or(i.message.as_ref()) {
            out.push_str(&format!("  {}", esc(&one_line(r))));
        }
        out.push('\n');
    }
    let count = |s: ImageStatus| images.iter().filter(|i| i.status == s).count();
    let mut distinct: Vec<&str> = images.iter().map(|i| i.image.as_str()).collect();
    distinct.dedup();
    let mut multi: Vec<&str> = images.iter().filter(|i| i.platform.is_some()).map(|i| i.image.as_str()).collect();
    multi.dedup();
    let n = |k: usize, what: &str| if k == 1 { format!("1 {what}") } else { format!("{k} {what}s") };
    let what = if multi.is_empty() {
        n(distinct.len(), "image")
    } else {
        let platforms = images.iter().filter(|i| i.platform.is_some()).count();
        format!(
            "{} ({} multi-platform: {}), {}",
            n(distinct.len(), "image"),
            multi.len(),
            n(platforms, "platform") + " scanned",
            n(images.len(), "result")
        )
    };
    out.push_str(&format!(
        "\n{what}: {} passed, {} failed, {} could not be scanned\n",
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
    /// By image, then platform (a tag that is one image first): the order a run writes.
    images: BTreeMap<(String, Option<String>), ImageResult>,
    registry: String,
    shards: Vec<String>,
    stats: RunStats,
}

impl Merger {
    /// Adds the summary.json `text`; `origin` names it in errors. A later summary's result for an
    /// image (a platform of an image) replaces an earlier one's.
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
            self.images.insert((i.image.clone(), i.platform.clone()), i);
        }
        Ok(())
    }

    /// The merged summary: images sorted by name (platforms by name), shards in order, stats
    /// summed.
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

#[cfg(test)]
mod tests {
    use super::*;

    fn row(image: &str, platform: Option<&str>, status: ImageStatus) -> ImageResult {
        ImageResult {
            image: image.into(),
            platform: platform.map(String::from),
            status,
            errors: 0,
            warnings: 0,
            infos: 0,
            report: None,
            message: None,
            reason: None,
        }
    }

    #[test]
    fn platform_report_files_are_distinct_from_each_other_and_from_images() {
        let names = [
            report_file_name("r/a:1", None),
            report_file_name("r/a:1", Some("linux/amd64")),
            report_file_name("r/a:1", Some("linux/arm64")),
            report_file_name("r/a:1", Some("linux/arm64/v8")),
            // A tag spelled like a platform suffix still gets its own name.
            report_file_name("r/a:1_linux_amd64", None),
        ];
        assert_eq!(names.iter().collect::<std::collections::BTreeSet<_>>().len(), names.len(), "{names:?}");
        assert_eq!(names[3], "r_a_1+linux-arm64-v8.json");
    }

    #[test]
    fn merge_keeps_platforms_apart_and_old_summaries_still_read() {
        let shard = |k: u64, images: Vec<ImageResult>| {
            json(&Summary {
                schema: crate::schema::REGISTRY_SUMMARY.into(),
                registry: "r".into(),
                shards: vec![format!("{k}/2")],
                images,
                stats: RunStats::default(),
            })
        };
        let mut m = Merger::default();
        m.add("0", &shard(0, vec![row("r/b:1", Some("linux/arm64"), ImageStatus::Fail)])).unwrap();
        m.add(
            "1",
            &shard(
                1,
                vec![row("r/a:1", None, ImageStatus::Pass), row("r/b:1", Some("linux/amd64"), ImageStatus::Pass)],
            ),
        )
        .unwrap();
        let s = m.finish().unwrap();
        let got: Vec<String> = s.images.iter().map(ImageResult::label).collect();
        assert_eq!(got, ["r/a:1", "r/b:1 (linux/amd64)", "r/b:1 (linux/arm64)"]);
        assert!(text(&s).contains("2 images (1 multi-platform: 2 platforms scanned), 3 results: 2 passed, 1 failed"));
        // A summary written before `platform` and `reason`: its error message is the reason shown.
        let old = r#"{"schema": "cudalint.registry-summary/v1", "registry": "r", "images": [
            {"image": "r/c:1", "status": "error", "errors": 0, "warnings": 0, "infos": 0,
             "message": "manifest r/c:1: not found\nin the registry"}]}"#;
        let mut m = Merger::default();
        m.add("old", old).unwrap();
        let t = text(&m.finish().unwrap());
        assert!(t.contains("error  ") && t.contains("manifest r/c:1: not found in the registry"), "{t}");
        assert!(t.contains("\n1 image: 0 passed, 0 failed, 1 could not be scanned"), "{t}");
    }
}
