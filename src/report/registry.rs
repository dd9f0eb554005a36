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

crate::schema::words! {
    /// How one image of a registry run ended.
    pub enum ImageStatus {
        /// Judged, no finding at or above --fail-on.
        Pass = "pass",
        /// Judged, findings at or above --fail-on.
        Fail = "fail",
        /// The scan or the judgement failed (the run exits 2).
        Error = "error",
        /// Not an image (a Helm chart, a signature, an SBOM, an analysis-store entry): listed,
        /// never scanned, never an error; `reason` says what it is.
        Skipped = "skipped",
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
    /// The report file's SHA-256 (`sha256:…`): a signed summary vouches for its reports through
    /// it, and `--since` carries a report only if it still hashes to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report_digest: Option<String>,
    /// The error, for an image that could not be scanned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Why, in one line: the first failing target's headline (or first finding that fails the
    /// gate), the error, or what a passing image does. Absent only in summaries written before
    /// it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The tag's manifest (or index) digest as read: what `--since` compares. Absent where the
    /// manifest could not be read, and in summaries written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// With `--since`: whether the result is new, changed, judged again or carried over from
    /// the previous summary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change: Option<Change>,
}

crate::schema::words! {
    /// How a result of a `--since` run relates to the previous summary's.
    pub enum Change {
        /// A tag the previous summary does not have.
        New = "new",
        /// Its manifest digest differs from the previous summary's: judged again.
        Changed = "changed",
        /// The same digest, judged again: the targets, rules or policy changed, the previous
        /// result was an error, or its report is gone.
        Rejudged = "rejudged",
        /// The same digest and policy: the previous result (and its report) carried over.
        Carried = "carried",
    }
}

/// One line of at most this many characters in the table: a reason is a table cell there, the
/// report has the rest. summary.json keeps the whole line (programs read it, cut text misleads).
const REASON_CHARS: usize = 160;

/// The reason as one line, whole: what summary.json stores.
fn flat(s: &str) -> String {
    s.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" ")
}

/// The reason as a table cell: one line, cut to [`REASON_CHARS`].
fn one_line(s: &str) -> String {
    let line = flat(s);
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
        return flat(&h.text);
    }
    if r.failed {
        let top = r.findings.iter().filter(|f| r.fail_on.fails(f.severity)).map(|f| f.severity).max();
        if let Some(f) = r.findings.iter().find(|f| Some(f.severity) == top) {
            let at = f.path.as_deref().map(|p| format!(" ({})", p.rsplit('/').next().unwrap_or(p))).unwrap_or_default();
            return flat(&format!("{} {}{at}: {}", f.severity, f.rule, f.message));
        }
        return "fails the gate".to_string();
    }
    if let Some(h) = r.headlines.iter().find(|h| h.verdict == HeadlineVerdict::Accepted) {
        return flat(&h.text);
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
    pub fn judged(
        image: &str,
        platform: Option<String>,
        r: &LintReport,
        report_file: String,
        report_bytes: &[u8],
    ) -> Self {
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
            report_digest: Some(crate::digest::sha256(report_bytes)),
            message: None,
            reason: Some(reason(r)),
            digest: None,
            change: None,
        }
    }

    /// A tag that is not an image: `what` says what it is (`Helm chart, <media type>`).
    pub fn skipped(image: &str, digest: String, what: &str) -> Self {
        ImageResult {
            image: image.to_string(),
            platform: None,
            status: ImageStatus::Skipped,
            errors: 0,
            warnings: 0,
            infos: 0,
            report: None,
            report_digest: None,
            message: None,
            reason: Some(flat(&format!("not an image ({what})"))),
            digest: Some(digest),
            change: None,
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
            report_digest: None,
            reason: Some(flat(&message)),
            message: Some(message),
            digest: None,
            change: None,
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
    /// What decided the verdicts: a hash of the cudalint version, targets, rules, policy,
    /// analysis options and platforms. `--since` carries results over only from a summary with
    /// the same fingerprint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
    /// With `--since`: the previous summary and how many tags were new, changed, judged again,
    /// carried over and skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<Since>,
}

/// A `--since` run against its previous summary, counted in tags (a multi-platform tag is one).
#[derive(Debug, Default, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Since {
    /// The previous summary, as given.
    pub previous: String,
    pub new: u64,
    pub changed: u64,
    pub rejudged: u64,
    pub carried: u64,
    pub skipped: u64,
    /// Why every tag was judged again (the fingerprint differs), if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all_rejudged: Option<String>,
}

impl Since {
    /// Counts the tags of `images` (rows of one tag counted once) by their change.
    pub fn count(previous: String, images: &[ImageResult], all_rejudged: Option<String>) -> Since {
        let mut s = Since { previous, all_rejudged, ..Default::default() };
        let mut seen = std::collections::BTreeSet::new();
        for i in images.iter().filter(|i| seen.insert(i.image.as_str())) {
            let n = match (i.status, i.change) {
                (ImageStatus::Skipped, _) => &mut s.skipped,
                (_, Some(Change::New)) => &mut s.new,
                (_, Some(Change::Changed)) => &mut s.changed,
                (_, Some(Change::Carried)) => &mut s.carried,
                (_, Some(Change::Rejudged) | None) => &mut s.rejudged,
            };
            *n += 1;
        }
        s
    }
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
    /// Analyses looked up in the store (each a request to it).
    #[serde(default)]
    pub store_lookups: u64,
    /// Runs (shards) that found the store unreachable and analysed locally from then on, with
    /// no further lookup or claim: 0 or 1 for one run, summed by merge.
    #[serde(default)]
    pub store_unreachable: u64,
    /// Stored analyses passed over: unsigned, or signed by no --verify-key (the layer was
    /// analysed here instead).
    #[serde(default)]
    pub store_untrusted: u64,
    /// Runs that believed unsigned store entries or an unsigned previous summary
    /// (`--trust-unsigned`): 0 or 1 for one run, summed by merge. The table's header says so.
    #[serde(default)]
    pub unsigned_trust: u64,
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
        self.store_lookups += o.store_lookups;
        self.store_unreachable += o.store_unreachable;
        self.store_untrusted += o.store_untrusted;
        self.unsigned_trust += o.unsigned_trust;
    }
}

/// Longest readable part of a report's file name: with the hash and `.json` the name stays
/// well under `NAME_MAX` (255 bytes) whatever the repository's length.
const READABLE: usize = 160;

/// The file name of an image's JSON report in the output directory: the image (and, for one
/// platform of a multi-platform image, `+os-arch[-variant]`) in safe characters, cut to
/// [`READABLE`], then 16 hex digits of a SHA-256 of the exact image and platform. Sanitizing alone
/// made names collide (`col/a:b_c` and `col/a_b:c` both read `col_a_b_c`), and a long repository
/// name passed `NAME_MAX`.
pub fn report_file_name(image: &str, platform: Option<&str>) -> String {
    use sha2::{Digest, Sha256};
    let safe = |s: &str| -> String {
        s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '-' { c } else { '_' }).collect()
    };
    let mut readable = match platform {
        Some(p) => format!("{}+{}", safe(image), safe(&p.replace('/', "-"))),
        None => safe(image),
    };
    readable.truncate(READABLE);
    let h = Sha256::digest(format!("{image}\0{}", platform.unwrap_or_default()));
    format!("{readable}.{}.json", &hex::encode(h)[..16])
}

/// summary.json.
pub fn json(s: &Summary) -> String {
    let mut text = serde_json::to_string_pretty(s).expect("serializes");
    text.push('\n');
    text
}

/// The table for people: a line per image (per platform of a multi-platform image) with its
/// first reason, a line per tag skipped as no image, and the totals; with `--since`, how many
/// tags were new, changed, judged again, carried and skipped; a store that became unreachable.
pub fn text(s: &Summary) -> String {
    let images = &s.images;
    let labels: Vec<String> = images.iter().map(|i| esc(&i.label())).collect();
    let w = labels.iter().map(|l| l.chars().count()).max().unwrap_or(5).max(5);
    let mut out = String::new();
    if s.stats.unsigned_trust > 0 {
        out.push_str(
            "trust: UNSIGNED store entries or previous summary believed (--trust-unsigned): whoever can write them \
             decided these verdicts\n",
        );
    }
    out.push_str(&format!("{:<w$}  status   errors  warnings  info  reason\n", "image"));
    for (i, label) in images.iter().zip(&labels) {
        out.push_str(&format!("{label:<w$}  {:<7}  {:>6}  {:>8}  {:>4}", i.status, i.errors, i.warnings, i.infos));
        // Summaries from before `reason` carry the error as `message` only.
        if let Some(r) = i.reason.as_ref().or(i.message.as_ref()) {
            out.push_str(&format!("  {}", esc(&one_line(r))));
        }
        out.push('\n');
    }
    let count = |s: ImageStatus| images.iter().filter(|i| i.status == s).count();
    let judged: Vec<&ImageResult> = images.iter().filter(|i| i.status != ImageStatus::Skipped).collect();
    let mut distinct: Vec<&str> = judged.iter().map(|i| i.image.as_str()).collect();
    distinct.dedup();
    let mut multi: Vec<&str> = judged.iter().filter(|i| i.platform.is_some()).map(|i| i.image.as_str()).collect();
    multi.dedup();
    let n = |k: usize, what: &str| if k == 1 { format!("1 {what}") } else { format!("{k} {what}s") };
    let what = if multi.is_empty() {
        n(distinct.len(), "image")
    } else {
        let platforms = judged.iter().filter(|i| i.platform.is_some()).count();
        format!(
            "{} ({} multi-platform: {}), {}",
            n(distinct.len(), "image"),
            multi.len(),
            n(platforms, "platform") + " scanned",
            n(judged.len(), "result")
        )
    };
    out.push_str(&format!(
        "\n{what}: {} passed, {} failed, {} could not be scanned",
        count(ImageStatus::Pass),
        count(ImageStatus::Fail),
        count(ImageStatus::Error)
    ));
    match count(ImageStatus::Skipped) {
        0 => out.push('\n'),
        k => out.push_str(&format!("; {} skipped (not images)\n", n(k, "tag"))),
    }
    if let Some(since) = &s.since {
        out.push_str(&format!(
            "since {}: {} new, {} changed, {} judged again, {} carried, {} skipped\n",
            esc(&since.previous),
            since.new,
            since.changed,
            since.rejudged,
            since.carried,
            since.skipped
        ));
        if let Some(why) = &since.all_rejudged {
            out.push_str(&format!("  every tag judged again: {}\n", esc(why)));
        }
    }
    let st = &s.stats;
    if st.store_unreachable > 0 {
        let shards = s.shards.len() as u64;
        let lookups = n(st.store_lookups as usize, "lookup");
        if shards > 1 {
            out.push_str(&format!(
                "store: unreachable in {} of {shards} shards after {lookups} in all, analysed locally\n",
                st.store_unreachable
            ));
        } else {
            out.push_str(&format!("store: unreachable after {lookups}, analysed locally\n"));
        }
    }
    out
}

/// Summaries of sharded runs, added one at a time (the first bad one stops the merge), then
/// checked to be one complete set of shards of one registry.
/// A summary.json's `text`, checked to be one; `origin` names it in errors.
pub fn read(origin: &str, text: &str) -> Result<Summary, ReportError> {
    let s: Summary =
        serde_json::from_str(text).map_err(|source| ReportError::SummaryJson { origin: origin.to_string(), source })?;
    if s.schema != crate::schema::REGISTRY_SUMMARY {
        return Err(ReportError::NotSummary { origin: origin.to_string() });
    }
    Ok(s)
}

#[derive(Default)]
pub struct Merger {
    /// By image, then platform (a tag that is one image first): the order a run writes.
    images: BTreeMap<(String, Option<String>), ImageResult>,
    registry: String,
    shards: Vec<String>,
    stats: RunStats,
    /// Each summary's fingerprint (None: it has none).
    fingerprints: Vec<Option<String>>,
    since: Option<Since>,
}

impl Merger {
    /// Adds the summary.json `text`; `origin` names it in errors. A later summary's result for an
    /// image (a platform of an image) replaces an earlier one's.
    pub fn add(&mut self, origin: &str, text: &str) -> Result<(), ReportError> {
        let s = read(origin, text)?;
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
        self.fingerprints.push(s.fingerprint);
        if let Some(o) = s.since {
            // The counts add up (each shard counted its own tags); the first previous summary
            // and reason name them.
            let m = self.since.get_or_insert_with(|| Since { previous: o.previous.clone(), ..Default::default() });
            m.new += o.new;
            m.changed += o.changed;
            m.rejudged += o.rejudged;
            m.carried += o.carried;
            m.skipped += o.skipped;
            m.all_rejudged = m.all_rejudged.take().or(o.all_rejudged);
        }
        for i in s.images {
            self.images.insert((i.image.clone(), i.platform.clone()), i);
        }
        Ok(())
    }

    /// The merged summary: images sorted by name (platforms by name), shards in order, stats
    /// and `--since` counts summed; the fingerprint kept when every summary has the same one.
    pub fn finish(self) -> Result<Summary, ReportError> {
        let Merger { images, registry, mut shards, stats, fingerprints, since } = self;
        crate::registry::shard::check_complete(&shards)?;
        shards.sort_by_key(|s| crate::registry::shard::parse(s).ok());
        let fingerprint = match fingerprints.split_first() {
            Some((first, rest)) if rest.iter().all(|f| f == first) => first.clone(),
            _ => None,
        };
        Ok(Summary {
            schema: crate::schema::REGISTRY_SUMMARY.into(),
            registry,
            shards,
            images: images.into_values().collect(),
            stats,
            fingerprint,
            since,
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
            report_digest: None,
            message: None,
            reason: None,
            digest: None,
            change: None,
        }
    }

    #[test]
    fn the_summary_keeps_the_whole_reason_and_the_table_cuts_it() {
        let long = format!("L4: fails — {}\nsecond line", "libx.so has sm_100 only, ".repeat(12));
        let r = ImageResult::failed("r/a:1", None, long.clone());
        let kept = r.reason.clone().unwrap();
        assert!(kept.ends_with("second line") && !kept.contains('\n') && !kept.contains('…'), "{kept}");
        let summary = Summary {
            schema: crate::schema::REGISTRY_SUMMARY.into(),
            registry: "r".into(),
            shards: vec![],
            images: vec![r],
            stats: RunStats::default(),
            fingerprint: None,
            since: None,
        };
        let row = text(&summary).lines().nth(1).unwrap().to_string();
        assert!(row.ends_with('…') && row.chars().count() < kept.chars().count(), "{row}");
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
        assert!(names[3].starts_with("r_a_1+linux-arm64-v8.") && names[3].ends_with(".json"), "{}", names[3]);
        // Names that sanitize alike stay apart; a 240-character repository fits NAME_MAX.
        assert_ne!(report_file_name("col/a:b_c", None), report_file_name("col/a_b:c", None));
        let long = format!("reg/{}:1", "x".repeat(240));
        let name = report_file_name(&long, Some("linux/arm64/v8"));
        assert!(name.len() <= 200 && name.starts_with("reg_xxx"), "{name}");
        assert_eq!(name, report_file_name(&long, Some("linux/arm64/v8")));
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
                fingerprint: None,
                since: None,
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

    #[test]
    fn skipped_tags_since_counts_and_an_unreachable_store_are_said_and_merged() {
        let with = |image: &str, status, change| ImageResult {
            change,
            digest: Some("sha256:d".into()),
            ..row(image, None, status)
        };
        let shard = |k: u64, images: Vec<ImageResult>, fingerprint: &str, unreachable: u64| {
            let since = Since::count("prev/summary.json".into(), &images, None);
            json(&Summary {
                schema: crate::schema::REGISTRY_SUMMARY.into(),
                registry: "r".into(),
                shards: vec![format!("{k}/2")],
                images,
                stats: RunStats { store_lookups: 3, store_unreachable: unreachable, ..Default::default() },
                fingerprint: Some(fingerprint.into()),
                since: Some(since),
            })
        };
        let skipped = ImageResult::skipped(
            "r/chart:1",
            "sha256:c".into(),
            "Helm chart, application/vnd.cncf.helm.config.v1+json",
        );
        assert_eq!(
            skipped.reason.as_deref(),
            Some("not an image (Helm chart, application/vnd.cncf.helm.config.v1+json)")
        );
        let zero = vec![
            with("r/a:1", ImageStatus::Pass, Some(Change::Carried)),
            with("r/b:1", ImageStatus::Fail, Some(Change::Changed)),
            skipped,
        ];
        let one = vec![
            with("r/c:1", ImageStatus::Pass, Some(Change::New)),
            with("r/d:1", ImageStatus::Error, Some(Change::Rejudged)),
        ];
        let mut m = Merger::default();
        m.add("0", &shard(0, zero.clone(), "f1", 1)).unwrap();
        m.add("1", &shard(1, one.clone(), "f1", 1)).unwrap();
        let s = m.finish().unwrap();
        assert_eq!(s.fingerprint.as_deref(), Some("f1"));
        let since = s.since.clone().unwrap();
        assert_eq!((since.new, since.changed, since.rejudged, since.carried, since.skipped), (1, 1, 1, 1, 1));
        let t = text(&s);
        assert!(t.contains("r/chart:1  skipped  "), "{t}");
        assert!(
            t.contains("\n4 images: 2 passed, 1 failed, 1 could not be scanned; 1 tag skipped (not images)\n"),
            "{t}"
        );
        assert!(t.contains("since prev/summary.json: 1 new, 1 changed, 1 judged again, 1 carried, 1 skipped\n"), "{t}");
        assert!(t.contains("store: unreachable in 2 of 2 shards after 6 lookups in all, analysed locally"), "{t}");
        // Shards with other fingerprints: the merge has none (a later --since judges all again).
        let mut m = Merger::default();
        m.add("0", &shard(0, zero, "f1", 0)).unwrap();
        m.add("1", &shard(1, one, "f2", 0)).unwrap();
        let s = m.finish().unwrap();
        assert_eq!(s.fingerprint, None);
        assert!(!text(&s).contains("store:"), "{}", text(&s));
        // One run: the store line names its lookups.
        let one_run = Summary {
            shards: vec![],
            stats: RunStats { store_lookups: 1, store_unreachable: 1, ..Default::default() },
            ..s
        };
        assert!(
            text(&one_run).contains("\nstore: unreachable after 1 lookup, analysed locally\n"),
            "{}",
            text(&one_run)
        );
    }
}
