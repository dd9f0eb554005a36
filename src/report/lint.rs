//! Sinks over one lint report: text (with a coverage matrix), JSON, SARIF 2.1.0, JUnit XML and
//! Markdown. Output is sorted and free of timestamps, so snapshots and CI diffs are stable.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde_sarif::sarif;

use super::escape::{self, text as esc};
use crate::lint::rules::{Rule, Severity, markdown as rule_markdown};
use crate::lint::{Finding, LintReport};

/// ANSI colours, or none.
#[derive(Clone, Copy)]
pub struct Paint(pub bool);

impl Paint {
    fn wrap(self, code: &str, s: &str) -> String {
        if self.0 { format!("\x1b[{code}m{s}\x1b[0m") } else { s.to_string() }
    }
    fn severity(self, s: Severity) -> String {
        let text = format!("{:<7}", s.as_str());
        match s {
            Severity::Error => self.wrap("1;31", &text),
            Severity::Warning => self.wrap("33", &text),
            Severity::Info => self.wrap("36", &text),
        }
    }
    fn cell(self, class: &str, text: &str) -> String {
        match class {
            "native" if text.contains('✗') => self.wrap("33", text),
            "native" => self.wrap("32", text),
            "jit" | "arch-gated" => self.wrap("33", text),
            "none" => self.wrap("31", text),
            _ => text.to_string(),
        }
    }
    fn dim(self, s: &str) -> String {
        self.wrap("2", s)
    }
}

fn width(s: &str) -> usize {
    s.chars().count()
}

fn pad(s: &str, painted: String, w: usize) -> String {
    format!("{painted}{}", " ".repeat(w.saturating_sub(width(s))))
}

pub fn counts(r: &LintReport) -> BTreeMap<Severity, usize> {
    let mut c = BTreeMap::new();
    for f in &r.findings {
        *c.entry(f.severity).or_default() += 1;
    }
    c
}

fn summary_line(r: &LintReport) -> String {
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

fn image_line(r: &LintReport) -> String {
    let i = &r.image;
    format!(
        "{} ({}{})",
        esc(i.name.as_deref().unwrap_or("(unnamed image)")),
        i.source,
        i.platform.as_ref().map(|p| format!(", {p}")).unwrap_or_default()
    )
}

pub fn text(r: &LintReport, paint: Paint) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", image_line(r));
    if r.targets.is_empty() {
        let _ = writeln!(out, "targets: none given (--gpu, --arch, --targets-from): coverage not checked");
    } else {
        let names: Vec<String> = r.targets.iter().map(|t| esc(&t.label())).collect();
        let _ = writeln!(out, "targets: {}", names.join("; "));
        out.push('\n');
        for h in &r.headlines {
            let painted = match h.verdict.as_str() {
                "fails" => paint.wrap("1;31", "✗"),
                "runs-jit" => paint.wrap("33", "✓"),
                _ => paint.wrap("32", "✓"),
            };
            let _ = writeln!(out, "{painted} {}", esc(&h.text));
        }
    }
    if !r.matrix.is_empty() && !r.targets.is_empty() {
        out.push('\n');
        let headers: Vec<String> = r.targets.iter().map(|t| format!("{} ({})", esc(&t.name), t.cc)).collect();
        let first = r.matrix.iter().map(|m| width(&esc(&m.path))).max().unwrap_or(0).max(8);
        let widths: Vec<usize> = headers
            .iter()
            .enumerate()
            .map(|(i, h)| r.matrix.iter().map(|m| width(&m.cells[i].text)).max().unwrap_or(0).max(width(h)))
            .collect();
        let mut line = pad("coverage", "coverage".to_string(), first);
        for (h, w) in headers.iter().zip(&widths) {
            line.push_str("  ");
            line.push_str(&pad(h, h.clone(), *w));
        }
        let _ = writeln!(out, "{}", line.trim_end());
        for m in &r.matrix {
            let path = esc(&m.path);
            let mut line = pad(&path, path.clone(), first);
            for (c, w) in m.cells.iter().zip(&widths) {
                line.push_str("  ");
                line.push_str(&pad(&c.text, paint.cell(&c.class, &c.text), *w));
            }
            let _ = writeln!(out, "{}", line.trim_end());
        }
    }
    if let Some(d) = &r.device {
        device_text(&mut out, d, paint);
    }
    if !r.findings.is_empty() {
        out.push('\n');
    }
    for f in &r.findings {
        let at = match (&f.path, &f.target) {
            (Some(p), Some(t)) => format!("{} on {}", esc(p), esc(t)),
            (Some(p), None) => esc(p),
            (None, Some(t)) => format!("image on {}", esc(t)),
            (None, None) => "image".to_string(),
        };
        let at = match &f.package {
            Some(p) => format!("{at}  {}", paint.dim(&format!("[{}]", esc(p)))),
            None => at,
        };
        let _ = writeln!(out, "{} {} {}  {}", paint.severity(f.severity), f.rule, f.name, at);
        let _ = writeln!(out, "        {}", esc(&f.message));
        let _ = writeln!(out, "        {} {}", paint.dim("fix:"), esc(&f.fix));
    }
    for n in &r.notes {
        let _ = writeln!(out, "{} {}", paint.dim("note:"), esc(n));
    }
    out.push('\n');
    let _ = writeln!(out, "{}", summary_line(r));
    out
}

/// The on-device section: per GPU the canary, then every module's static verdict beside what the
/// driver did, and the JIT time per binary.
fn device_text(out: &mut String, d: &crate::device::DeviceReport, paint: Paint) {
    out.push('\n');
    for dev in &d.devices {
        let canary = d.canary.iter().find(|c| c.device == dev.index);
        let _ = writeln!(
            out,
            "on device: GPU {} {} ({}), driver CUDA {}: canary {}",
            dev.index,
            dev.name,
            dev.cc,
            dev.driver_cuda,
            match canary {
                Some(c) if c.ok => format!("ran ({})", c.detail),
                Some(c) => paint.wrap("31", &format!("FAILED: {}", c.detail)),
                None => "not run".into(),
            }
        );
        let rows: Vec<&crate::device::ModuleResult> = d.modules.iter().filter(|m| m.device == dev.index).collect();
        let headers = ["binary", "module", "static verdict", "driver", "how", "JIT ms"];
        let cells: Vec<[String; 6]> = rows
            .iter()
            .map(|m| {
                [
                    esc(&m.binary),
                    esc(&m.module),
                    if m.static_image.is_empty() {
                        m.static_result.to_string()
                    } else {
                        format!("{} {}", m.static_result, m.static_image)
                    },
                    if m.driver.result == 0 {
                        "ok".into()
                    } else {
                        format!("{} ({})", m.driver.error, m.driver.result)
                    },
                    m.how.to_string(),
                    if m.jit_ms > 0.0 { format!("{:.1}", m.jit_ms) } else { "-".into() },
                ]
            })
            .collect();
        let widths: Vec<usize> =
            (0..6).map(|i| cells.iter().map(|c| width(&c[i])).chain([width(headers[i])]).max().unwrap_or(0)).collect();
        let line = |c: &[String]| c.iter().zip(&widths).map(|(s, w)| format!("{s:<w$}")).collect::<Vec<_>>().join("  ");
        let _ = writeln!(out, "  {}", line(&headers.map(String::from)).trim_end());
        for (m, c) in rows.iter().zip(&cells) {
            let text = line(c);
            let _ = writeln!(
                out,
                "  {}",
                if m.disagrees { paint.wrap("31", text.trim_end()) } else { text.trim_end().to_string() }
            );
            for l in &m.launches {
                let _ = writeln!(
                    out,
                    "      launch {} {}{}",
                    esc(&l.kernel),
                    l.status,
                    if l.detail.is_empty() { String::new() } else { format!(": {}", esc(&l.detail)) }
                );
            }
        }
        let mut per_binary: BTreeMap<&str, f64> = BTreeMap::new();
        for m in &rows {
            *per_binary.entry(m.binary.as_str()).or_default() += m.jit_ms;
        }
        for (b, ms) in per_binary.iter().filter(|(_, ms)| **ms > 0.0) {
            let _ = writeln!(out, "  JIT time {}: {ms:.1} ms", esc(b));
        }
    }
    for s in &d.skipped {
        let _ = writeln!(out, "  not loaded: {} {}: {}", esc(&s.binary), esc(&s.module), esc(&s.reason));
    }
}

pub fn json(r: &LintReport) -> String {
    let mut s = serde_json::to_string_pretty(r).expect("serializes");
    s.push('\n');
    s
}

fn level(s: Severity) -> sarif::ResultLevel {
    match s {
        Severity::Error => sarif::ResultLevel::Error,
        Severity::Warning => sarif::ResultLevel::Warning,
        Severity::Info => sarif::ResultLevel::Note,
    }
}

fn props(pairs: &[(&str, Option<String>)]) -> sarif::PropertyBag {
    let mut bag = sarif::PropertyBag::builder().build();
    for (k, v) in pairs {
        if let Some(v) = v {
            bag.additional_properties.insert((*k).to_string(), serde_json::Value::String(v.clone()));
        }
    }
    bag
}

/// SARIF 2.1.0 for GitHub code scanning: the rules with their docs; each result located at the
/// file's path inside the image (without the leading `/`), with the layer and image digests.
pub fn sarif(r: &LintReport, rules: &[Rule]) -> String {
    let used: std::collections::BTreeSet<&str> = r.findings.iter().map(|f| f.rule.as_str()).collect();
    let descriptors: Vec<sarif::ReportingDescriptor> = rules
        .iter()
        .filter(|rule| used.contains(rule.code.as_str()))
        .map(|rule| {
            sarif::ReportingDescriptor::builder()
                .id(rule.code.clone())
                .name(rule.name.clone())
                .short_description(sarif::MultiformatMessageString::builder().text(rule.summary.clone()).build())
                .full_description(
                    sarif::MultiformatMessageString::builder().text(rule.docs.what.trim().to_string()).build(),
                )
                .help(
                    sarif::MultiformatMessageString::builder()
                        .text(format!("{}\n\nFix: {}", rule.docs.why.trim(), rule.docs.fix.trim()))
                        .markdown(rule_markdown(rule))
                        .build(),
                )
                .default_configuration(
                    sarif::ReportingConfiguration::builder()
                        .level(serde_json::json!(sarif_level_name(rule.severity)))
                        .build(),
                )
                .build()
        })
        .collect();
    let image_uri = escape::uri_path(r.image.name.as_deref().unwrap_or("image"));
    let image_digest = r.image.manifest_digest.clone().or_else(|| r.image.config_digest.clone());
    let results: Vec<sarif::Result> = r
        .findings
        .iter()
        .map(|f| {
            let uri = f
                .path
                .as_deref()
                .map(|p| escape::uri_path(p.trim_start_matches('/')))
                .unwrap_or_else(|| image_uri.clone());
            let loc = sarif::Location::builder()
                .physical_location(
                    sarif::PhysicalLocation::builder()
                        .artifact_location(sarif::ArtifactLocation::builder().uri(uri).build())
                        .build(),
                )
                .build();
            let mut fps = BTreeMap::new();
            fps.insert("cudalint/v1".to_string(), f.fingerprint.clone());
            sarif::Result::builder()
                .rule_id(f.rule.clone())
                .level(level(f.severity))
                .message(sarif::Message::builder().text(format!("{} Fix: {}", f.message, f.fix)).build())
                .locations(vec![loc])
                .partial_fingerprints(fps)
                .properties(props(&[
                    ("layer", f.layer.clone()),
                    ("package", f.package.clone()),
                    ("image", r.image.name.clone()),
                    ("imageDigest", image_digest.clone()),
                    ("target", f.target.clone()),
                ]))
                .build()
        })
        .collect();
    let driver = sarif::ToolComponent::builder()
        .name("cudalint")
        .version(r.tool.version.to_string())
        .information_uri("https://github.com/cudalint/cudalint")
        .rules(descriptors)
        .build();
    let run = sarif::Run::builder().tool(sarif::Tool::builder().driver(driver).build()).results(results).build();
    let log = sarif::Sarif::builder()
        .schema(sarif::SCHEMA_URL.to_string())
        .version(serde_json::json!("2.1.0"))
        .runs(vec![run])
        .build();
    let mut s = serde_json::to_string_pretty(&log).expect("serializes");
    s.push('\n');
    s
}

fn sarif_level_name(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "note",
    }
}

/// JUnit XML: a test case per binary x target (and one per binary, and one for the image), failed
/// when a finding at or above `--fail-on` concerns it.
pub fn junit(r: &LintReport) -> String {
    use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
    let mut by_case: BTreeMap<(String, String), Vec<&Finding>> = BTreeMap::new();
    let mut cases: Vec<(String, String)> = vec![("image".into(), String::new())];
    for m in &r.matrix {
        cases.push((esc(&m.path), String::new()));
        for t in &r.targets {
            cases.push((esc(&m.path), esc(&t.name)));
        }
    }
    for f in &r.findings {
        let key =
            (f.path.as_deref().map_or_else(|| "image".into(), esc), f.target.as_deref().map(esc).unwrap_or_default());
        if !cases.contains(&key) {
            cases.push(key.clone());
        }
        by_case.entry(key).or_default().push(f);
    }
    cases.sort();
    cases.dedup();
    let mut suite = TestSuite::new(format!("cudalint {}", image_line(r)));
    for (path, target) in cases {
        let findings = by_case.get(&(path.clone(), target.clone())).cloned().unwrap_or_default();
        let failing: Vec<&&Finding> = findings.iter().filter(|f| f.severity >= r.fail_on).collect();
        let status = if failing.is_empty() {
            TestCaseStatus::success()
        } else {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
            s.set_message(failing.iter().map(|f| format!("{} {}", f.rule, f.name)).collect::<Vec<_>>().join(", "));
            s.set_type(failing[0].severity.as_str());
            s.set_description(
                failing
                    .iter()
                    .map(|f| format!("{} {}: {}\nfix: {}", f.rule, f.name, esc(&f.message), esc(&f.fix)))
                    .collect::<Vec<_>>()
                    .join("\n"),
            );
            s
        };
        let name = if target.is_empty() { path.clone() } else { format!("{path} on {target}") };
        let mut case = TestCase::new(name, status);
        case.set_classname(path.clone());
        let lower: Vec<String> = findings
            .iter()
            .filter(|f| f.severity < r.fail_on)
            .map(|f| format!("{} {}: {}", f.severity.as_str(), f.rule, esc(&f.message)))
            .collect();
        if !lower.is_empty() {
            case.set_system_out(lower.join("\n"));
        }
        suite.add_test_case(case);
    }
    let mut report = Report::new("cudalint");
    report.add_test_suite(suite);
    report.to_string().expect("junit serializes") + "\n"
}

fn md_escape(s: &str) -> String {
    escape::markdown(s)
}

/// Markdown for GitHub step summaries and pull-request comments.
pub fn markdown(r: &LintReport) -> String {
    let mut out = String::new();
    let icon = if r.failed { "❌" } else { "✅" };
    let _ = writeln!(out, "## {icon} cudalint: {}\n", escape::markdown_code(&image_line(r)));
    for h in &r.headlines {
        let mark = if h.verdict == "fails" { "❌" } else { "✅" };
        let _ = writeln!(out, "- {mark} {}", md_escape(&h.text));
    }
    if !r.headlines.is_empty() {
        out.push('\n');
    }
    let _ = writeln!(out, "{}\n", summary_line(r));
    if !r.targets.is_empty() && !r.matrix.is_empty() {
        let _ = write!(out, "| binary |");
        for t in &r.targets {
            let _ = write!(out, " {} ({}) |", md_escape(&t.name), t.cc);
        }
        let _ = write!(out, "\n|---|");
        for _ in &r.targets {
            out.push_str("---|");
        }
        out.push('\n');
        for m in &r.matrix {
            let _ = write!(out, "| {} |", escape::markdown_code(&m.path));
            for c in &m.cells {
                let _ = write!(out, " {} |", md_escape(&c.text));
            }
            out.push('\n');
        }
        out.push('\n');
    }
    if let Some(d) = &r.device {
        let _ = writeln!(
            out,
            "### On device\n\n| GPU | binary | module | static verdict | driver | how | JIT ms |\n|---|---|---|---|---|---|---|"
        );
        for m in &d.modules {
            let gpu = d
                .devices
                .iter()
                .find(|x| x.index == m.device)
                .map(|x| format!("{} ({})", x.name, x.cc))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} {} | {} | {} | {:.1} |",
                md_escape(&gpu),
                escape::markdown_code(&m.binary),
                md_escape(&m.module),
                m.static_result,
                m.static_image,
                if m.driver.result == 0 {
                    "ok".to_string()
                } else {
                    format!("{} ({})", m.driver.error, m.driver.result)
                },
                m.how,
                m.jit_ms
            );
        }
        out.push('\n');
    }
    if !r.findings.is_empty() {
        let _ = writeln!(out, "| severity | rule | where | finding | fix |\n|---|---|---|---|---|");
        for f in &r.findings {
            let at = match (&f.path, &f.target) {
                (Some(p), Some(t)) => format!("{} on {}", escape::markdown_code(p), md_escape(t)),
                (Some(p), None) => escape::markdown_code(p),
                (None, _) => "image".into(),
            };
            let at = match &f.package {
                Some(p) => format!("{at} ({})", md_escape(p)),
                None => at,
            };
            let _ = writeln!(
                out,
                "| {} | {} `{}` | {} | {} | {} |",
                f.severity.as_str(),
                f.rule,
                f.name,
                at,
                md_escape(&f.message),
                md_escape(&f.fix)
            );
        }
    }
    out
}
