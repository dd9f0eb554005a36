//! JUnit XML (`--format junit`) for CI test dashboards.

use std::collections::BTreeMap;

use super::lines::image_line;
use super::{RenderConfig, ReportError};
use crate::escape::text as esc;
use crate::lint::{Finding, LintReport};

pub fn render(r: &LintReport, _cfg: &RenderConfig) -> Result<String, ReportError> {
    Ok(junit(r))
}

/// JUnit XML: a test case per binary x target (and one per binary, and one for the image), failed
/// when a finding at or above `--fail-on` concerns it.
fn junit(r: &LintReport) -> String {
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
        let failing: Vec<&&Finding> = findings.iter().filter(|f| r.fail_on.fails(f.severity)).collect();
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
            .filter(|f| !r.fail_on.fails(f.severity))
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
