//! Markdown (`--format markdown`) for GitHub step summaries and pull-request comments: the
//! verdict table (a row per container and pool), the causes (a row per workload and cause, with
//! the pools it holds on), the findings about each image as a whole, and the placement patches.

use std::fmt::Write;

use super::lines::{and_list, causes, image_findings, or_list, summary_line, where_};
use crate::audit::cluster::requirement_text;
use crate::audit::place::alternative_admits;
use crate::audit::report::AuditReport;
use crate::escape::{markdown as md, markdown_code};
use crate::report::RenderConfig;
use crate::report::markdown::{FindingRow, findings_table};

/// A fenced code block that no run of backticks in `body` can close early.
fn fenced(out: &mut String, lang: &str, body: &str) {
    let longest = body.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    let _ = writeln!(out, "{fence}{lang}\n{}\n{fence}", body.trim_end());
}

pub fn render(r: &AuditReport, _cfg: &RenderConfig) -> String {
    let mut out = String::new();
    let icon = if r.failed || r.incomplete { "❌" } else { "✅" };
    let _ = writeln!(out, "## {icon} cudalint audit\n\n{}\n", summary_line(r));
    let _ = writeln!(out, "| workload | container | image | pool | verdict | causes |\n|---|---|---|---|---|---|");
    for wl in &r.workloads {
        for c in &wl.containers {
            let rows: Vec<(String, &str, String)> = if c.pools.is_empty() {
                vec![("—".into(), c.verdict.as_str(), "no GPU pool matches".into())]
            } else {
                c.pools
                    .iter()
                    .map(|p| {
                        let mut rules: Vec<&str> = p.findings.iter().map(|f| f.rule.as_str()).collect();
                        rules.dedup();
                        (p.pool.clone(), p.verdict.as_str(), p.reason.as_deref().map_or_else(|| rules.join(", "), md))
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

    let all: Vec<_> = r.workloads.iter().map(|w| (w, causes(w))).filter(|(_, c)| !c.is_empty()).collect();
    if !all.is_empty() {
        let _ = writeln!(
            out,
            "\n### Causes\n\n| severity | rule | workload | where | pools | finding | fix |\n|---|---|---|---|---|---|---|"
        );
        for (w, cs) in all {
            for c in cs {
                let messages: Vec<String> = c.messages.iter().map(|m| md(m)).collect();
                let fixes: Vec<String> = c.fixes.iter().map(|f| md(f)).collect();
                let _ = writeln!(
                    out,
                    "| {} | {} `{}` | {} | {} in {} | {} | {} | {} |",
                    c.severity.as_str(),
                    c.rule,
                    c.name,
                    md(&w.meta.id()),
                    markdown_code(&c.at),
                    markdown_code(c.image),
                    md(&and_list(&c.pools)),
                    messages.join("<br>"),
                    fixes.join("<br>")
                );
            }
        }
    }

    let about = image_findings(r);
    if !about.is_empty() {
        let _ = writeln!(out, "\n### About each image, whatever the pool\n");
        let rows = about.into_iter().map(|(image, f)| FindingRow {
            finding: f,
            image: Some(image),
            at: markdown_code(&where_(f)),
            message: f.message.clone(),
        });
        findings_table(&mut out, true, rows);
    }

    let fixes: Vec<_> = r.workloads.iter().filter_map(|w| w.placement_fix.as_ref().map(|f| (w, f))).collect();
    let none: Vec<_> = r.workloads.iter().filter_map(|w| w.no_placement_fix.as_ref().map(|n| (w, n))).collect();
    if !fixes.is_empty() || !none.is_empty() {
        let _ = writeln!(out, "\n### Placement that works");
        for (w, fix) in fixes {
            let runs: Vec<&str> = fix.runs_on.iter().map(String::as_str).collect();
            let off: Vec<&str> = fix.kept_off.iter().map(String::as_str).collect();
            let _ = writeln!(
                out,
                "\n{} runs on {}, not on {}: keep it where it runs with the required node affinity {}{}.\n",
                markdown_code(&w.meta.id()),
                md(&and_list(&runs)),
                md(&or_list(&off)),
                markdown_code(&requirement_text(&fix.requirement)),
                fix.alternative
                    .as_ref()
                    .map(|a| {
                        let admits = alternative_admits(a).map(|w| format!(", which admits {w}")).unwrap_or_default();
                        format!(" (or {}{admits})", markdown_code(&requirement_text(a)))
                    })
                    .unwrap_or_default()
            );
            let _ = writeln!(out, "A patch for the manifest (kustomize `patches:`):\n");
            fenced(&mut out, "yaml", &fix.yaml());
            match &fix.kubectl {
                Some(cmd) => {
                    let _ = writeln!(out, "\nOr in the cluster:\n");
                    fenced(&mut out, "sh", cmd);
                }
                None => {
                    let _ = writeln!(
                        out,
                        "\nThe pod spec of a {} cannot change once it is created: apply the patch to the manifest and re-create it.",
                        md(&w.meta.kind)
                    );
                }
            }
        }
        for (w, why) in none {
            let _ = writeln!(out, "\n{}: {}.", markdown_code(&w.meta.id()), md(why));
        }
    }
    out
}
