//! JUnit XML (`--format junit`): a suite per workload, a test case per container and pool it can
//! land on (or one for a container that fits no pool), failed on a verdict other than runs or a
//! finding at or above `fail_on`.

use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};

use super::lines::where_;
use crate::audit::report::{AuditReport, AuditVerdict};
use crate::lint::Finding;
use crate::report::RenderConfig;

pub fn render(r: &AuditReport, _cfg: &RenderConfig) -> String {
    let mut report = Report::new("cudalint audit");
    for wl in &r.workloads {
        let mut suite = TestSuite::new(wl.meta.id());
        for c in &wl.containers {
            let mut cases: Vec<(String, AuditVerdict, Vec<&Finding>, Option<String>)> = c
                .pools
                .iter()
                .map(|p| {
                    let fs: Vec<&Finding> = p.findings.iter().chain(&c.findings).collect();
                    (p.pool.clone(), p.verdict, fs, p.reason.clone())
                })
                .collect();
            if c.pools.is_empty() {
                cases.push(("no GPU pool".into(), c.verdict, Vec::new(), Some("no GPU pool matches".into())));
            }
            for (pool, verdict, findings, reason) in cases {
                let failing: Vec<&&Finding> = findings.iter().filter(|f| r.fail_on.fails(f.severity)).collect();
                let status = if !verdict.runs() || !failing.is_empty() {
                    let kind =
                        if verdict == AuditVerdict::Unknown { NonSuccessKind::Error } else { NonSuccessKind::Failure };
                    let mut s = TestCaseStatus::non_success(kind);
                    s.set_message(verdict.as_str());
                    let mut d: Vec<String> = reason.into_iter().collect();
                    d.extend(
                        failing
                            .iter()
                            .map(|f| format!("{} {} {}: {}\nfix: {}", f.rule, f.name, where_(f), f.message, f.fix)),
                    );
                    s.set_description(d.join("\n"));
                    s
                } else {
                    TestCaseStatus::success()
                };
                let mut case = TestCase::new(format!("{} on {pool}", c.name), status);
                case.set_classname(c.image.clone());
                suite.add_test_case(case);
            }
        }
        report.add_test_suite(suite);
    }
    report.to_string().expect("junit serializes") + "\n"
}
