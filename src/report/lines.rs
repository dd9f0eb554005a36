//! Shared by several formats: the image line, the summary line and the severity counts.

use std::collections::BTreeMap;

use crate::escape::text as esc;
use crate::lint::rules::Severity;
use crate::lint::{Finding, HeadlineVerdict, LintReport};

pub(crate) fn counts(r: &LintReport) -> BTreeMap<Severity, usize> {
    let mut c = BTreeMap::new();
    for f in &r.findings {
        *c.entry(f.severity).or_default() += 1;
    }
    c
}

pub(crate) fn summary_line(r: &LintReport) -> String {
    let c = counts(r);
    let n = |s: Severity| c.get(&s).copied().unwrap_or(0);
    let mut s =
        format!("{} error(s), {} warning(s), {} info", n(Severity::Error), n(Severity::Warning), n(Severity::Info));
    if r.suppressed.ignored + r.suppressed.baseline > 0 {
        s.push_str(&format!(" ({} ignored, {} in the baseline)", r.suppressed.ignored, r.suppressed.baseline));
    }
    match r.fail_on {
        crate::lint::rules::FailOn::Never => s.push_str("; fail-on never: reported, not gated"),
        f => s.push_str(&format!("; fails at {}: {}", f.as_str(), if r.failed { "FAILED" } else { "passed" })),
    }
    s
}

pub(crate) fn image_line(r: &LintReport) -> String {
    let i = &r.image;
    format!(
        "{} ({}{})",
        esc(i.name.as_deref().unwrap_or("(unnamed image)")),
        i.source,
        i.platform.as_ref().map(|p| format!(", {p}")).unwrap_or_default()
    )
}

/// The findings people read (text, Markdown, HTML): those whose cause another finding says once
/// are folded into it; `folded` tells that one how many it stands for.
pub(crate) fn shown(r: &LintReport) -> impl Iterator<Item = &Finding> {
    r.findings.iter().filter(|f| f.cause.is_none())
}

/// How many per-binary findings an image-level one stands for (0: none).
pub(crate) fn folded(r: &LintReport, f: &Finding) -> usize {
    r.findings.iter().filter(|x| x.cause.as_deref() == Some(f.rule.as_str()) && x.target == f.target).count()
}

/// `(stands for 15 CL001 findings, one per binary, listed in the JSON report)`, or empty.
pub(crate) fn folded_note(r: &LintReport, f: &Finding) -> String {
    match folded(r, f) {
        0 => String::new(),
        n => format!(" (stands for {n} CL001 findings, one per binary: `--format json` lists each)"),
    }
}

/// The mark beside a target's verdict, the same in every view (text, Markdown, HTML headlines,
/// HTML columns): ✓ runs, ~ runs compiling PTX at first use, (✗) accepted, ✗ fails.
pub(crate) fn headline_mark(v: HeadlineVerdict) -> &'static str {
    match v {
        HeadlineVerdict::Runs => "✓",
        HeadlineVerdict::RunsJit => "~",
        HeadlineVerdict::Accepted => "(✗)",
        HeadlineVerdict::Fails => "✗",
    }
}

/// What a target's mark means, for the legends.
pub(crate) fn headline_meaning(v: HeadlineVerdict) -> &'static str {
    match v {
        HeadlineVerdict::Runs => "runs",
        HeadlineVerdict::RunsJit => "runs, compiling enough PTX at first use for a noticeable cold start",
        HeadlineVerdict::Accepted => {
            "would fail, but every finding that says so was ignored, baselined, disabled or lowered below the gate"
        }
        HeadlineVerdict::Fails => "fails: its findings say what does not run",
    }
}

/// The legend of the headlines' marks, for those the report uses (in the order of
/// [`HeadlineVerdict::ALL`], worst last): `✓ runs; ~ runs, compiling …`.
pub(crate) fn headline_legend(r: &LintReport) -> Option<String> {
    let parts: Vec<String> = HeadlineVerdict::ALL
        .iter()
        .filter(|v| r.headlines.iter().any(|h| h.verdict == **v))
        .map(|v| format!("{} {}", headline_mark(*v), headline_meaning(*v)))
        .collect();
    (!parts.is_empty()).then(|| parts.join("; "))
}
