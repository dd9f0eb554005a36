//! Markdown (`--format markdown`) for GitHub step summaries and pull-request comments.

use std::fmt::Write;

use super::lines::{count, headline_legend, headline_mark, image_line, shown_rows, summary_line};
use super::{RenderConfig, ReportError};
use crate::escape;
use crate::lint::{Finding, LintReport};

pub fn render(r: &LintReport, _cfg: &RenderConfig) -> Result<String, ReportError> {
    Ok(markdown(r))
}

fn md_escape(s: &str) -> String {
    escape::markdown(s)
}

/// At most this many rows per table: a GitHub step summary holds 1 MiB, and a stack's report
/// must fit it with room to spare (the diff's Markdown caps its sections the same way).
const MAX_ROWS: usize = 200;

/// The line under a table cut at [`MAX_ROWS`]: `… and 12 more findings (`--format json` lists
/// them all)`, or nothing.
fn more(out: &mut String, total: usize, what: &str) {
    if total > MAX_ROWS {
        let _ = writeln!(out, "\n… and {} more (`--format json` lists them all)", count(total - MAX_ROWS, what));
    }
}

/// Markdown for GitHub step summaries and pull-request comments.
fn markdown(r: &LintReport) -> String {
    let mut out = String::new();
    let icon = if r.failed { "❌" } else { "✅" };
    let _ = writeln!(out, "## {icon} cudalint: {}\n", escape::markdown_code(&image_line(r)));
    for h in &r.headlines {
        let _ = writeln!(out, "- {} {}", md_escape(headline_mark(h.verdict)), md_escape(&h.text));
    }
    if !r.headlines.is_empty() {
        out.push('\n');
    }
    let _ = writeln!(out, "{}\n", summary_line(r));
    if let Some(p) = r.policy.line() {
        let _ = writeln!(out, "Policy: {}\n", md_escape(&p));
    }
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
        let rows = shown_rows(r);
        for m in rows.iter().take(MAX_ROWS) {
            let _ = write!(out, "| {}", escape::markdown_code(&m.row.path));
            if let Some(what) = m.folded() {
                let _ = write!(out, " ({})", md_escape(&what));
            }
            out.push_str(" |");
            for c in &m.row.cells {
                let _ = write!(out, " {} |", md_escape(&c.text));
            }
            out.push('\n');
        }
        more(&mut out, rows.len(), "binary row");
        out.push('\n');
        for l in [headline_legend(r).map(|l| format!("marks: {l}")), super::text::legend(r)].into_iter().flatten() {
            let _ = writeln!(out, "<sub>{}</sub>\n", md_escape(&l));
        }
    }
    if let Some(l) = super::lines::compilers_passed(r) {
        let _ = writeln!(out, "✅ {}\n", md_escape(&l));
    }
    if let Some(d) = &r.device {
        let _ = writeln!(
            out,
            "### On device\n\n| GPU | binary | module | static verdict | driver | how | JIT ms |\n|---|---|---|---|---|---|---|"
        );
        for m in d.modules.iter().take(MAX_ROWS) {
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
        more(&mut out, d.modules.len(), "module");
        out.push('\n');
    }
    if !r.findings.is_empty() {
        let rows = super::lines::shown(r).map(|f| {
            let at = match (&f.path, &f.target) {
                (Some(p), Some(t)) => format!("{} on {}", escape::markdown_code(p), md_escape(t)),
                (Some(p), None) => escape::markdown_code(p),
                (None, _) => "image".into(),
            };
            let at = match &f.package {
                Some(p) => format!("{at} ({})", md_escape(p)),
                None => at,
            };
            let at = match &f.step {
                Some(s) => format!("{at}, made by {}", escape::markdown_code(s)),
                None => at,
            };
            FindingRow {
                finding: f,
                image: None,
                at,
                message: format!("{}{}", f.message, super::lines::folded_note(r, f)),
            }
        });
        let total = super::lines::shown(r).count();
        findings_table(&mut out, false, rows.take(MAX_ROWS));
        more(&mut out, total, "finding");
    }
    out
}

/// A row of [`findings_table`]: the finding, the image it is in (shown in a table with an image
/// column), where it is (Markdown, escaped by the caller) and its message (plain text).
pub struct FindingRow<'a> {
    pub finding: &'a Finding,
    pub image: Option<&'a str>,
    pub at: String,
    pub message: String,
}

/// The findings table: severity, rule, image (with `image_column`), where, finding, fix.
pub fn findings_table<'a>(out: &mut String, image_column: bool, rows: impl IntoIterator<Item = FindingRow<'a>>) {
    let image_head = if image_column { ("image | ", "---|") } else { ("", "") };
    let _ = writeln!(
        out,
        "| severity | rule | {}where | finding | fix |\n|---|---|{}---|---|---|",
        image_head.0, image_head.1
    );
    for row in rows {
        let f = row.finding;
        let image = if image_column {
            format!(" {} |", escape::markdown_code(row.image.unwrap_or_default()))
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "| {} | {} `{}` |{image} {} | {} | {} |",
            f.severity.as_str(),
            f.rule,
            f.name,
            row.at,
            md_escape(&row.message),
            md_escape(&f.fix)
        );
    }
}
