//! Shared by several formats: the image line, the summary line and the severity counts.

use std::collections::BTreeMap;

use crate::escape::text as esc;
use crate::lint::LintReport;
use crate::lint::rules::Severity;

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
    s.push_str(&format!("; fails at {}: {}", r.fail_on.as_str(), if r.failed { "FAILED" } else { "passed" }));
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
