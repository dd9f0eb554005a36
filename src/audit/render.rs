//! The audit's reports: text, JSON, JUnit (a suite per workload, a case per container and pool)
//! and Markdown; SARIF is the scan's SARIF of each linted image, one run per image.

use std::fmt::Write;

use super::{AuditContainer, AuditReport};
use crate::escape::{markdown as md, markdown_code};
use crate::lint::Finding;
use crate::lint::rules::Rule;
use crate::report::text::Paint;
use crate::report::{RenderConfig, sarif as lint_sarif};

fn where_(f: &Finding) -> String {
    f.path.clone().unwrap_or_else(|| "image".into())
}

fn counts(r: &AuditReport) -> BTreeCounts {
    let mut c = BTreeCounts::default();
    for w in &r.workloads {
        for ct in &w.containers {
            c.containers += 1;
            match ct.verdict.as_str() {
                "runs" => c.runs += 1,
                "fails" => c.fails += 1,
                "unschedulable" => c.unschedulable += 1,
                _ => c.unknown += 1,
            }
        }
    }
    c
}

#[derive(Default)]
struct BTreeCounts {
    containers: usize,
    runs: usize,
    fails: usize,
    unschedulable: usize,
    unknown: usize,
}

pub fn summary_line(r: &AuditReport) -> String {
    let c = counts(r);
    format!(
        "{} workload(s), {} GPU container(s): {} run on every pool they can land on, {} fail on some pool, {} fit no GPU pool, {} could not be judged; fails at {}: {}",
        r.workloads.len(),
        c.containers,
        c.runs,
        c.fails,
        c.unschedulable,
        c.unknown,
        r.fail_on.as_str(),
        if r.incomplete {
            "INCOMPLETE"
        } else if r.failed {
            "FAILED"
        } else {
            "passed"
        }
    )
}

fn container_line(c: &AuditContainer) -> String {
    format!("{}{} {}  ({} GPU)", if c.init { "init container " } else { "container " }, c.name, c.image, c.gpus)
}

pub fn text(r: &AuditReport, paint: Paint) -> String {
    let p = |code: &str, s: &str| if paint.0 { format!("\x1b[{code}m{s}\x1b[0m") } else { s.to_string() };
    let verdict = |v: &str| {
        let s = format!("{v:<8}");
        match v {
            "runs" => p("32", &s),
            "runs-jit" => p("33", &s),
            _ => p("1;31", &s),
        }
    };
    let mut out = String::new();
    let nodes: usize = r.pools.iter().map(|p| p.nodes.len()).sum();
    let _ = writeln!(out, "cluster: {nodes} GPU node(s) in {} pool(s)", r.pools.len());
    let w = r.pools.iter().map(|p| p.name.chars().count()).max().unwrap_or(0);
    for pool in &r.pools {
        let cc = pool.target.as_ref().map(|t| format!("sm_{}", t.cc.sm())).unwrap_or_else(|| "?".into());
        let _ = writeln!(out, "  {:<w$}  {cc:<7} {}", pool.name, pool.nodes.join(", "));
    }
    let _ = writeln!(out, "images: {}", r.images.len());
    for i in &r.images {
        match &i.error {
            Some(e) => {
                let _ = writeln!(out, "  {}  {}: {e}", i.image, p("1;31", "NOT SCANNED"));
            }
            None => {
                let via = if i.scanned == format!("docker://{}", i.image) {
                    String::new()
                } else {
                    format!(" (as {})", i.scanned)
                };
                let _ = writeln!(out, "  {}{via}", i.image);
            }
        }
    }
    for wl in &r.workloads {
        let _ = writeln!(out, "\n{}  ({})", wl.id(), wl.source);
        let mut parts = Vec::new();
        if let Some(n) = &wl.placement.node_name {
            parts.push(format!("nodeName {n}"));
        }
        if !wl.placement.node_selector.is_empty() {
            let s: Vec<String> = wl.placement.node_selector.iter().map(|(k, v)| format!("{k}={v}")).collect();
            parts.push(format!("nodeSelector {}", s.join(",")));
        }
        if wl.placement.required_affinity.is_some() {
            parts.push("required node affinity".into());
        }
        if !wl.placement.tolerations.is_empty() {
            let keys: Vec<&str> = wl
                .placement
                .tolerations
                .iter()
                .map(|t| t.get("key").and_then(serde_json::Value::as_str).filter(|k| !k.is_empty()).unwrap_or("*"))
                .collect();
            parts.push(format!("tolerates {}", keys.join(",")));
        }
        if wl.placement.unconstrained() {
            parts.insert(0, "no nodeSelector or node affinity".into());
        }
        let _ = writeln!(out, "  placement: {}", parts.join("; "));
        for c in &wl.containers {
            let _ = writeln!(out, "  {}", container_line(c));
            if c.pools.is_empty() {
                let _ = writeln!(
                    out,
                    "    {} no GPU node matches its placement (nodeName, nodeSelector, affinity, taints)",
                    verdict("unschedulable")
                );
            }
            for pr in &c.pools {
                let _ = writeln!(out, "    {} {}  [{}]", verdict(&pr.verdict), pr.pool, pr.nodes.join(", "));
                if let Some(reason) = &pr.reason {
                    let _ = writeln!(out, "           {reason}");
                }
                for f in &pr.findings {
                    let _ = writeln!(out, "           {} {} {}  {}", f.severity.as_str(), f.rule, f.name, where_(f));
                    let _ = writeln!(out, "             {}", f.message);
                    let _ = writeln!(out, "             fix: {}", f.fix);
                }
            }
            for f in &c.findings {
                let _ = writeln!(out, "    {} {} {}  {} (every pool)", f.severity.as_str(), f.rule, f.name, where_(f));
                let _ = writeln!(out, "           {}", f.message);
            }
        }
    }
    if r.workloads.is_empty() {
        let _ = writeln!(out, "\nno workload requests {}", super::manifest::GPU_RESOURCE);
    }
    out.push('\n');
    for n in &r.notes {
        let _ = writeln!(out, "note: {n}");
    }
    let _ = writeln!(
        out,
        "read: {} workload(s) without GPUs, {} other object(s) skipped",
        r.workloads_without_gpu, r.other_objects
    );
    let _ = writeln!(out, "{}", summary_line(r));
    out
}

pub fn json(r: &AuditReport) -> String {
    let mut s = serde_json::to_string_pretty(r).expect("serializes");
    s.push('\n');
    s
}

/// The scan's SARIF for every linted image, merged into one log (one run each).
pub fn sarif(r: &AuditReport, rules: &[Rule]) -> String {
    let mut runs = Vec::new();
    let mut log = serde_json::json!({});
    for l in &r.lints {
        let cfg = RenderConfig { rules, ..Default::default() };
        let sarif = lint_sarif::render(l, &cfg).expect("SARIF renders");
        let v: serde_json::Value = serde_json::from_str(&sarif).expect("own SARIF parses");
        runs.extend(v["runs"].as_array().cloned().unwrap_or_default());
        log = v;
    }
    if r.lints.is_empty() {
        // The same envelope with no runs' results: render an empty report through the same code.
        log = serde_json::json!({
            "$schema": serde_sarif::sarif::SCHEMA_URL, "version": "2.1.0",
        });
        runs.push(
            serde_json::json!({"tool": {"driver": {"name": "cudalint", "version": r.tool.version}}, "results": []}),
        );
    }
    log["runs"] = serde_json::Value::Array(runs);
    let mut s = serde_json::to_string_pretty(&log).expect("serializes");
    s.push('\n');
    s
}

/// JUnit XML: a suite per workload, a test case per container and pool it can land on (or one
/// for a container that fits no pool), failed on a verdict other than runs or a finding at or
/// above `fail_on`.
pub fn junit(r: &AuditReport) -> String {
    use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
    let mut report = Report::new("cudalint audit");
    for wl in &r.workloads {
        let mut suite = TestSuite::new(wl.id());
        for c in &wl.containers {
            let mut cases: Vec<(String, String, Vec<&Finding>, Option<String>)> = c
                .pools
                .iter()
                .map(|p| {
                    let fs: Vec<&Finding> = p.findings.iter().chain(&c.findings).collect();
                    (p.pool.clone(), p.verdict.clone(), fs, p.reason.clone())
                })
                .collect();
            if c.pools.is_empty() {
                cases.push(("no GPU pool".into(), c.verdict.clone(), Vec::new(), Some("no GPU pool matches".into())));
            }
            for (pool, verdict, findings, reason) in cases {
                let failing: Vec<&&Finding> = findings.iter().filter(|f| f.severity >= r.fail_on).collect();
                let bad = !verdict.starts_with("runs") || !failing.is_empty();
                let status = if bad {
                    let kind = if verdict == "unknown" { NonSuccessKind::Error } else { NonSuccessKind::Failure };
                    let mut s = TestCaseStatus::non_success(kind);
                    s.set_message(verdict.clone());
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

/// Markdown: the verdict table, then the findings.
pub fn markdown(r: &AuditReport) -> String {
    let mut out = String::new();
    let icon = if r.failed || r.incomplete { "❌" } else { "✅" };
    let _ = writeln!(out, "## {icon} cudalint audit\n\n{}\n", summary_line(r));
    let _ = writeln!(out, "| workload | container | image | pool | verdict | findings |\n|---|---|---|---|---|---|");
    for wl in &r.workloads {
        for c in &wl.containers {
            let rows: Vec<(String, String, String)> = if c.pools.is_empty() {
                vec![("—".into(), c.verdict.clone(), "no GPU pool matches".into())]
            } else {
                c.pools
                    .iter()
                    .map(|p| {
                        let f: Vec<String> =
                            p.findings.iter().map(|f| format!("{} {}", f.rule, markdown_code(&where_(f)))).collect();
                        (p.pool.clone(), p.verdict.clone(), p.reason.as_deref().map_or_else(|| f.join(", "), md))
                    })
                    .collect()
            };
            for (pool, verdict, why) in rows {
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {} | {} | {} |",
                    md(&wl.id()),
                    md(&c.name),
                    markdown_code(&c.image),
                    md(&pool),
                    verdict,
                    why
                );
            }
        }
    }
    let findings: Vec<(&str, &Finding)> = r
        .workloads
        .iter()
        .flat_map(|w| &w.containers)
        .flat_map(|c| c.pools.iter().flat_map(|p| &p.findings).chain(&c.findings).map(|f| (c.image.as_str(), f)))
        .collect();
    if !findings.is_empty() {
        let _ = writeln!(out, "\n| severity | rule | image | where | finding | fix |\n|---|---|---|---|---|---|");
        let mut seen = std::collections::BTreeSet::new();
        for (image, f) in findings {
            if !seen.insert((image, &f.fingerprint)) {
                continue;
            }
            let at = match &f.target {
                Some(t) => format!("{} on {}", markdown_code(&where_(f)), md(t)),
                None => markdown_code(&where_(f)),
            };
            let _ = writeln!(
                out,
                "| {} | {} `{}` | {} | {} | {} | {} |",
                f.severity.as_str(),
                f.rule,
                f.name,
                markdown_code(image),
                at,
                md(&f.message),
                md(&f.fix)
            );
        }
    }
    out
}
