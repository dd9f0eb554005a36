//! Shared by several formats: the image line, the summary line and the severity counts.

use std::collections::BTreeMap;

use crate::escape::text as esc;
use crate::lint::rules::Severity;
use crate::lint::{Finding, LintReport};

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
