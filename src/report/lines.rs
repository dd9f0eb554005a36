//! Shared by several formats: the image line, the summary line and the severity counts.

use std::collections::BTreeMap;

use crate::escape::text as esc;
use crate::lint::rules::Severity;
use crate::lint::{Finding, HeadlineVerdict, LintReport, MatrixCell, MatrixRow};

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

/// The run-time compiler checks that passed, in one line for text and Markdown (HTML and JSON
/// list each check; the failing ones are findings): per consumer's compiler, the targets it
/// serves. `run-time compilers that serve their targets: torch.compile / Triton kernels (torch
/// 2.9.0): ptxas 12.8.93 emits sm_90a for H100, sm_89 for L4`. None when none passed.
pub(crate) fn compilers_passed(r: &LintReport) -> Option<String> {
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for c in r.compiler_checks.iter().filter(|c| c.passed()) {
        let f = &c.facts;
        let consumer = if f.consumer_version.is_empty() {
            f.consumer.clone()
        } else {
            format!("{} {}", f.consumer, f.consumer_version)
        };
        let key = format!("{} ({consumer}): {} {}", f.what, f.kind, f.version);
        let served = format!("{} for {}", f.target_arch, c.target);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push(served),
            None => groups.push((key, vec![served])),
        }
    }
    let parts: Vec<String> = groups.into_iter().map(|(k, v)| format!("{k} emits {}", v.join(", "))).collect();
    (!parts.is_empty()).then(|| format!("run-time compilers that serve their targets: {}", parts.join("; ")))
}

/// `1 file`, `2 files`: a count with its noun, singular or plural (`s` appended).
pub(crate) fn count(n: usize, noun: &str) -> String {
    format!("{} {noun}{}", grouped(n as u64), if n == 1 { "" } else { "s" })
}

pub(crate) use crate::lint::kernel_sets::grouped;

/// A matrix row as people read it (text, Markdown, HTML): one binary, or the binaries of one
/// package (else directory) whose every cell is library-managed, folded into one row. A
/// library's per-GPU kernel set, loaded by file (flashinfer-cubin's 10,560 cubins), judges
/// nothing and would drown the binaries that decide; JSON keeps every row.
pub(crate) struct ShownRow<'a> {
    /// The binary's row, or for a fold one made up for it: `path` the directory the files
    /// share (ending in `/`), the package where they share one, the cells `lib-managed (n)`
    /// with the modules summed.
    pub row: std::borrow::Cow<'a, MatrixRow>,
    /// How many files the row stands for (1: one binary): a fold's, or a kernel set's.
    pub files: usize,
}

impl ShownRow<'_> {
    /// What a folded row stands for: `10,560 files, package flashinfer-cubin`; `None` for a
    /// binary.
    pub fn folded(&self) -> Option<String> {
        (self.files > 1).then(|| match &self.row.package {
            Some(p) => format!("{}, package {}", count(self.files, "file"), p.name),
            None => count(self.files, "file"),
        })
    }
}

/// Every cell of the row is code its library loads itself (a kernel set's row is judged, and
/// already one row).
fn library_managed_only(m: &MatrixRow) -> bool {
    m.modules == 0 && m.library_managed_modules > 0 && m.kernel_set.is_none()
}

/// The matrix's rows as people read them: library-managed-only rows of one package (else one
/// directory) folded where there are at least two, at the place of the first; the rest as they
/// are, in order.
pub(crate) fn shown_rows(r: &LintReport) -> Vec<ShownRow<'_>> {
    use std::borrow::Cow;
    let key = |m: &MatrixRow| match &m.package {
        Some(p) => format!("package\0{}\0{}\0{}", p.manager.as_str(), p.name, p.version),
        None => format!("dir\0{}", crate::layer::path::parent(&m.path)),
    };
    let mut groups: BTreeMap<String, Vec<&MatrixRow>> = BTreeMap::new();
    for m in r.matrix.iter().filter(|m| library_managed_only(m)) {
        groups.entry(key(m)).or_default().push(m);
    }
    let mut out = Vec::new();
    for m in &r.matrix {
        if !library_managed_only(m) {
            let files = m.kernel_set.as_ref().map_or(1, |s| s.files as usize);
            out.push(ShownRow { row: Cow::Borrowed(m), files });
            continue;
        }
        let group = &groups[&key(m)];
        if group.len() == 1 {
            out.push(ShownRow { row: Cow::Borrowed(m), files: 1 });
        } else if std::ptr::eq(group[0], m) {
            out.push(ShownRow { row: Cow::Owned(fold(group)), files: group.len() });
        }
    }
    out
}

/// One row for library-managed-only rows: their shared directory, layer (where one) and
/// package, and per target `lib-managed (n)` with n their modules summed.
fn fold(group: &[&MatrixRow]) -> MatrixRow {
    let first = group[0];
    let under = |p: &str, d: &str| d == "/" || (p.starts_with(d) && p[d.len()..].starts_with('/'));
    let mut dir = crate::layer::path::parent(&first.path).to_string();
    for m in &group[1..] {
        while !under(&m.path, &dir) {
            dir = crate::layer::path::parent(&dir).to_string();
        }
    }
    let managed: u64 = group.iter().map(|m| m.library_managed_modules).sum();
    let one_layer = group.iter().all(|m| m.layer == first.layer);
    let layer = if one_layer { first.layer.clone() } else { String::new() };
    MatrixRow {
        path: if dir == "/" { dir } else { format!("{dir}/") },
        layer,
        step: first.step.clone().filter(|_| one_layer),
        package: first.package.clone(),
        modules: 0,
        library_managed_modules: managed,
        kernel_set: None,
        cells: first
            .cells
            .iter()
            .map(|c| MatrixCell { text: format!("lib-managed ({managed})"), ..c.clone() })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::{count, grouped};

    #[test]
    fn counts_read_as_words() {
        assert_eq!(count(1, "file"), "1 file");
        assert_eq!(count(2, "file"), "2 files");
        assert_eq!(count(10560, "file"), "10,560 files");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1_234_567), "1,234,567");
    }
}
