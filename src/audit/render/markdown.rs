//! Markdown (`--format markdown`) for GitHub step summaries and pull-request comments: the
//! verdict table (a row per container and pool), then the findings, once per image.

use std::fmt::Write;

use super::lines::{summary_line, where_};
use crate::audit::report::AuditReport;
use crate::escape::{markdown as md, markdown_code};
use crate::lint::Finding;
use crate::report::RenderConfig;
use crate::report::markdown::{FindingRow, findings_table};

pub fn render(r: &AuditReport, _cfg: &RenderConfig) -> String {
    let mut out = String::new();
    let icon = if r.failed || r.incomplete { "❌" } else { "✅" };
    let _ = writeln!(out, "## {icon} cudalint audit\n\n{}\n", summary_line(r));
    let _ = writeln!(out, "| workload | container | image | pool | verdict | findings |\n|---|---|---|---|---|---|");
    for wl in &r.workloads {
        for c in &wl.containers {
            let rows: Vec<(String, &str, String)> = if c.pools.is_empty() {
                vec![("—".into(), c.verdict.as_str(), "no GPU pool matches".into())]
            } else {
                c.pools
                    .iter()
                    .map(|p| {
                        let f: Vec<String> =
                            p.findings.iter().map(|f| format!("{} {}", f.rule, markdown_code(&where_(f)))).collect();
                        (p.pool.clone(), p.verdict.as_str(), p.reason.as_deref().map_or_else(|| f.join(", "), md))
                    })
                    .collect()
            };
            for (pool, verdict, why) in rows {
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {} | {} | {} |",
                    md(&wl.meta.id()),
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
        out.push('\n');
        let mut seen = std::collections::BTreeSet::new();
        let rows = findings.into_iter().filter(|(image, f)| seen.insert((*image, &f.fingerprint))).map(|(image, f)| {
            let at = match &f.target {
                Some(t) => format!("{} on {}", markdown_code(&where_(f)), md(t)),
                None => markdown_code(&where_(f)),
            };
            FindingRow { finding: f, image: Some(image), at, message: f.message.clone() }
        });
        findings_table(&mut out, true, rows);
    }
    out
}
