//! `cudalint support`: the support matrix as text, JSON (`cudalint.support/v1`, docs/schema.md),
//! Markdown (for an image README or release note) and HTML (the scan report's grid).

use std::fmt::Write;

use super::ReportError;
use super::html::{self, esc};
use crate::cuda::DriverVersion;
use crate::lint::LintReport;
use crate::lint::coverage::Class;
use crate::lint::diff::{DiffReport, PackageDelta};
use crate::lint::support::{GpuSupport, Support, SupportReport};

crate::schema::words! {
    /// An output format of `cudalint support`.
    pub enum SupportFormat {
        Text = "text",
        Json = "json",
        Markdown = "markdown",
        Html = "html",
    }
}

/// `report`'s matrix in `format`; `judged` is the evaluation it came from (the HTML grid), none
/// where the matrix was read from an attestation (the HTML page is then the table alone).
pub fn render(
    format: SupportFormat,
    report: &SupportReport,
    judged: Option<&LintReport>,
) -> Result<String, ReportError> {
    Ok(match format {
        SupportFormat::Text => text(report),
        SupportFormat::Json => {
            let mut s = serde_json::to_string_pretty(report).expect("serializes");
            s.push('\n');
            s
        }
        SupportFormat::Markdown => markdown(report),
        SupportFormat::Html => page(report, judged),
    })
}

/// The minimum driver as a cell: `≥ 580.65.06`, `—`.
fn driver(g: &GpuSupport) -> String {
    match (&g.min_driver, g.result) {
        (_, Support::NotApplicable) => "—".into(),
        (Some(d), _) => format!("≥ {d}"),
        (None, _) if !g.min_driver_why.is_empty() && g.result.runs() => "JetPack".into(),
        (None, _) => "—".into(),
    }
}

/// The notes of a row: its detail, and where forward compatibility lowers the driver.
fn notes(g: &GpuSupport) -> String {
    let mut n = g.detail.clone();
    if let Some(f) = &g.forward_compat_driver {
        if !n.is_empty() {
            n.push_str("; ");
        }
        n.push_str(&format!("or ≥ {f}"));
    }
    n
}

/// `REFERENCE (name, platform)`.
fn label(r: &SupportReport) -> String {
    let mut extra: Vec<&str> = Vec::new();
    if let Some(n) = r.image.name.as_deref().filter(|n| !r.reference.contains(*n)) {
        extra.push(n);
    }
    if let Some(p) = &r.image.platform {
        extra.push(p);
    }
    if extra.is_empty() { r.reference.clone() } else { format!("{} ({})", r.reference, extra.join(", ")) }
}

/// The floor's reasons, the first two and how many more (JSON has them all).
fn why(r: &SupportReport) -> String {
    let parts: Vec<&str> = r.floor.why.split("; ").collect();
    let more = parts.len().saturating_sub(2);
    let head = parts.iter().take(2).copied().collect::<Vec<_>>().join("; ");
    if more > 0 { format!("{head}; and {more} more") } else { head }
}

fn by_architecture(r: &SupportReport) -> Vec<(&str, Vec<&GpuSupport>)> {
    let mut out: Vec<(&str, Vec<&GpuSupport>)> = Vec::new();
    for g in &r.gpus {
        match out.last_mut() {
            Some((a, v)) if *a == g.architecture => v.push(g),
            _ => out.push((g.architecture.as_str(), vec![g])),
        }
    }
    out
}

/// Every string of a matrix read back from an attestation is another party's (under
/// `--trust-unsigned`, anyone's who can push): each goes out escaped for its format, the GPU
/// names, compute capabilities and drivers as much as the free text.
fn text(r: &SupportReport) -> String {
    let t = crate::escape::text;
    let mut o = String::new();
    let _ = writeln!(o, "{}", t(&label(r)));
    let _ = writeln!(o, "{}", t(&r.summary));
    if !r.floor.cuda.is_empty() {
        let _ = writeln!(o, "driver floor: CUDA {} (≥ {}): {}", t(&r.floor.cuda), t(&r.floor.driver), t(&why(r)));
    }
    let wn = r.gpus.iter().map(|g| t(&g.name).chars().count()).max().unwrap_or(0);
    let wr = Support::ALL.iter().map(|s| s.as_str().len()).max().unwrap_or(0);
    let wd = r.gpus.iter().map(|g| t(&driver(g)).chars().count()).max().unwrap_or(0);
    for (arch, rows) in by_architecture(r) {
        let _ = writeln!(o, "\n{}", t(arch));
        for g in rows {
            let line = format!(
                "  {:<wn$}  {:>4}  {:<wr$}  {:<wd$}  {}",
                t(&g.name),
                t(&g.compute_capability),
                g.result.as_str(),
                t(&driver(g)),
                t(&notes(g))
            );
            let _ = writeln!(o, "{}", line.trim_end());
        }
    }
    variants(&mut o, r, t);
    for n in &r.notes {
        let _ = writeln!(o, "\nnote: {}", t(n));
    }
    o
}

/// A wheel's variant properties (PEP 817/825 drafts) and what its variant.json declares.
fn variants(o: &mut String, r: &SupportReport, esc: impl Fn(&str) -> String) {
    if !r.variant_properties.is_empty() {
        let _ = writeln!(o, "\nwheel-variant properties its code supports (PEP 817/825 drafts):");
        for p in &r.variant_properties {
            let _ = writeln!(o, "  {}", esc(p));
        }
    }
    for d in &r.declared_variants {
        let what = match &d.error {
            Some(e) => format!("not read: {e}"),
            None => d.properties.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "),
        };
        let _ = writeln!(o, "\n{} declares variant {}: {}", esc(&d.path), esc(&d.label), esc(&what));
    }
}

fn markdown(r: &SupportReport) -> String {
    let m = crate::escape::markdown;
    let mut o = String::new();
    let _ = writeln!(o, "### GPU support: {}\n", crate::escape::markdown_code(&r.reference));
    let _ = writeln!(o, "**{}**\n", m(&r.summary));
    if !r.floor.cuda.is_empty() {
        let _ = writeln!(o, "Driver floor: CUDA {} (≥ {}): {}\n", m(&r.floor.cuda), m(&r.floor.driver), m(&why(r)));
    }
    o.push_str("| Architecture | GPU | Compute capability | Result | Minimum driver | Notes |\n");
    o.push_str("|---|---|---|---|---|---|\n");
    for (arch, rows) in by_architecture(r) {
        for g in rows {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | {} | {} |",
                m(arch),
                m(&g.name),
                m(&g.compute_capability),
                g.result.as_str(),
                m(&driver(g)),
                m(&notes(g))
            );
        }
    }
    variants(&mut o, r, m);
    let _ = writeln!(o, "\n<sub>cudalint {} · `cudalint support`</sub>", m(r.tool.version));
    o
}

/// A result's colours: the scan grid's, by the class closest to it.
fn class(s: Support) -> Class {
    match s {
        Support::Native => Class::Native,
        Support::Jit | Support::RuntimeCompiler => Class::Jit,
        Support::ArchGated => Class::ArchGated,
        Support::Fails => Class::None,
        Support::NotApplicable => Class::NotApplicable,
    }
}

fn page(r: &SupportReport, judged: Option<&LintReport>) -> String {
    let mut o = String::new();
    html::head(&mut o, "cudalint support", &r.image, &r.tool, "");
    let _ = writeln!(o, "<p id=\"summary\"><strong>{}</strong></p>", esc(&r.summary));
    if !r.floor.cuda.is_empty() {
        let _ = writeln!(
            o,
            "<p id=\"floor\">driver floor: CUDA {} (≥ {}): {}</p>",
            esc(&r.floor.cuda),
            esc(&r.floor.driver),
            esc(&why(r))
        );
    }
    o.push_str("<h2>GPUs</h2>\n<table id=\"support\">\n<thead><tr><th>architecture</th><th>GPU</th><th>compute capability</th><th>result</th><th>minimum driver</th><th>notes</th></tr></thead>\n<tbody>\n");
    for (arch, rows) in by_architecture(r) {
        for g in rows {
            let _ = writeln!(
                o,
                "<tr data-gpu=\"{}\" data-result=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td class=\"cell {}\">{}</td><td>{}</td><td>{}</td></tr>",
                esc(&g.name),
                g.result.as_str(),
                esc(arch),
                esc(&g.name),
                esc(&g.compute_capability),
                html::css_class(class(g.result)),
                g.result.as_str(),
                esc(&driver(g)),
                esc(&notes(g))
            );
        }
    }
    o.push_str("</tbody>\n</table>\n");
    if let Some(judged) = judged {
        html::matrix(&mut o, judged);
    }
    if !r.notes.is_empty() {
        o.push_str("<h2>Notes</h2>\n<ul id=\"notes\">\n");
        for n in &r.notes {
            let _ = writeln!(o, "<li>{}</li>", esc(n));
        }
        o.push_str("</ul>\n");
    }
    o.push_str("</body>\n</html>\n");
    o
}

crate::schema::words! {
    /// An output format of `cudalint diff`.
    pub enum DiffFormat {
        Text = "text",
        Json = "json",
        /// For a pull-request comment.
        Markdown = "markdown",
    }
}

pub fn render_diff(format: DiffFormat, d: &DiffReport) -> String {
    match format {
        DiffFormat::Text => diff_text(d),
        DiffFormat::Json => {
            let mut s = serde_json::to_string_pretty(d).expect("serializes");
            s.push('\n');
            s
        }
        DiffFormat::Markdown => diff_markdown(d),
    }
}

/// `native (≥ 580.65.06)`, `fails`.
fn with_driver(r: Support, v: &Option<String>) -> String {
    match v {
        Some(d) => format!("{r} (≥ {d})"),
        None => r.to_string(),
    }
}

fn or_none(v: &str) -> &str {
    if v.is_empty() { "—" } else { v }
}

/// At most this many lines per section in text and Markdown.
const MAX_LINES: usize = 40;

/// The diff's lines, each a sentence, shared by text and Markdown (which only marks them up).
fn diff_lines(d: &DiffReport) -> Vec<(&'static str, Vec<String>)> {
    let mut out: Vec<(&'static str, Vec<String>)> = Vec::new();
    let mut head = Vec::new();
    if d.lost.is_empty() && d.gained.is_empty() && d.floor.old == d.floor.new {
        head.push("runs on the same GPUs with the same driver floor".to_string());
    }
    if !d.lost.is_empty() {
        head.push(format!("lost: {}", d.lost.join(", ")));
    }
    if !d.gained.is_empty() {
        head.push(format!("gained: {}", d.gained.join(", ")));
    }
    if d.floor.old != d.floor.new {
        let dir = match (DriverVersion::parse(&d.floor.old), DriverVersion::parse(&d.floor.new)) {
            (Some(o), Some(n)) if n > o => "raised",
            (Some(_), Some(_)) => "lowered",
            _ => "changed",
        };
        head.push(format!(
            "driver floor {dir}: {} (CUDA {}) → {} (CUDA {})",
            or_none(&d.floor.old),
            or_none(&d.floor_cuda.old),
            or_none(&d.floor.new),
            or_none(&d.floor_cuda.new)
        ));
    }
    out.push(("", head));
    out.push((
        "GPUs",
        d.gpus
            .iter()
            .map(|g| {
                format!(
                    "{} ({}): {} → {}",
                    g.name,
                    g.compute_capability,
                    with_driver(g.result.old, &g.min_driver.old),
                    with_driver(g.result.new, &g.min_driver.new)
                )
            })
            .collect(),
    ));
    out.push((
        "Binaries",
        d.binaries
            .iter()
            .map(|b| {
                let mut parts = Vec::new();
                if b.path.old.is_empty() {
                    parts.push("new".to_string());
                } else if b.path.new.is_empty() {
                    parts.push("removed".to_string());
                }
                for (what, v) in [
                    ("lost", &b.lost_sass),
                    ("gained", &b.gained_sass),
                    ("lost PTX", &b.lost_ptx),
                    ("gained PTX", &b.gained_ptx),
                ] {
                    if !(v.is_empty() || b.path.old.is_empty() || b.path.new.is_empty()) {
                        parts.push(format!("{what} {}", v.join(", ")));
                    }
                }
                format!("{}: {}", b.name, parts.join("; "))
            })
            .collect(),
    ));
    out.push((
        "Run-time compilers",
        d.compilers
            .iter()
            .map(|c| format!("{} of {}: {} → {}", c.kind, c.owner, or_none(&c.version.old), or_none(&c.version.new)))
            .collect(),
    ));
    out.push((
        "Packages",
        d.packages
            .iter()
            .map(|p| match p.change {
                PackageDelta::Added => format!("added: {}", p.new),
                PackageDelta::Removed => format!("removed: {}", p.old),
                PackageDelta::Changed => format!("{} → {}", p.old, p.new),
            })
            .collect(),
    ));
    out.push(("Fails the gate", d.failures.clone()));
    out.retain(|(_, v)| !v.is_empty());
    // A stack swap changes hundreds of binaries: people read the first ones, JSON has them all.
    for (title, v) in out.iter_mut().filter(|(t, _)| !t.is_empty() && *t != "Fails the gate") {
        if v.len() > MAX_LINES {
            let more = v.len() - MAX_LINES;
            v.truncate(MAX_LINES);
            v.push(format!("and {more} more {} (--format json lists them all)", title.to_lowercase()));
        }
    }
    // What did not change closes the GPU table, after any cut: `3 GPUs unchanged`.
    if d.unchanged > 0 {
        let line = format!("{} unchanged", super::lines::count(d.unchanged, "GPU"));
        match out.iter_mut().find(|(t, _)| *t == "GPUs") {
            Some((_, v)) => v.push(line),
            None => {
                let at = out.iter().position(|(t, _)| !t.is_empty()).unwrap_or(out.len());
                out.insert(at, ("GPUs", vec![line]));
            }
        }
    }
    out
}

fn diff_text(d: &DiffReport) -> String {
    let t = crate::escape::text;
    let mut o = String::new();
    let _ = writeln!(o, "{} → {}", t(&d.old), t(&d.new));
    for (title, lines) in diff_lines(d) {
        if !title.is_empty() {
            let _ = writeln!(o, "\n{title}");
        }
        for l in lines {
            let _ = writeln!(o, "{}{}", if title.is_empty() { "" } else { "  " }, t(&l));
        }
    }
    o
}

fn diff_markdown(d: &DiffReport) -> String {
    let m = crate::escape::markdown;
    let mut o = String::new();
    let mark = if d.failures.is_empty() { "✅" } else { "❌" };
    let _ = writeln!(
        o,
        "### {mark} GPU support: {} → {}\n",
        crate::escape::markdown_code(&d.old),
        crate::escape::markdown_code(&d.new)
    );
    for (title, lines) in diff_lines(d) {
        if !title.is_empty() {
            let _ = writeln!(o, "\n**{title}**\n");
        }
        for l in lines {
            let _ = writeln!(o, "- {}", m(&l));
        }
    }
    let _ = writeln!(o, "\n<details><summary>Before and after</summary>\n");
    let _ = writeln!(o, "- before: {}\n- after: {}\n\n</details>", m(&d.summary.old), m(&d.summary.new));
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A support document as a hostile statement would hold it (believed under
    /// `--trust-unsigned`): ESC sequences, newlines, Markdown links and table pipes in every
    /// string, the GPU's name, compute capability, architecture, drivers and version included.
    fn hostile() -> SupportReport {
        let evil = "\u{1b}]8;;https://evil.example\u{7}[approve](https://evil.example)|x<img src=x>\n\u{1b}[2Kpassed";
        let doc = serde_json::json!({
            "tool": {"name": "cudalint", "version": format!("0.1.0{evil}")},
            "reference": format!("reg/app:1{evil}"),
            "image": {"name": null, "source": "registry", "manifest_digest": null, "config_digest": null,
                      "platform": format!("linux/amd64{evil}")},
            "summary": format!("runs{evil}"),
            "floor": {"cuda": format!("12.8{evil}"), "driver": format!("570.0{evil}"), "why": format!("w{evil}")},
            "require": "cuda>=12.8",
            "gpus": [{
                "name": format!("H100{evil}"), "compute_capability": format!("9.0{evil}"),
                "architecture": format!("Hopper{evil}"), "host": "any", "result": "native",
                "min_driver": format!("570.0{evil}"), "min_driver_why": "", "binaries": [],
                "detail": format!("d{evil}"), "headline": "",
                "forward_compat_driver": format!("535.0{evil}"),
            }],
            "notes": [format!("n{evil}")],
        });
        serde_json::from_value(doc).unwrap()
    }

    #[test]
    fn a_hostile_statements_strings_reach_text_and_markdown_escaped() {
        let r = hostile();
        let text = render(SupportFormat::Text, &r, None).unwrap();
        assert!(!text.contains('\u{1b}') && !text.contains('\u{7}'), "{text}");
        assert!(!text.contains("\npassed") && !text.contains("\n\\x1b"), "no line of the statement's own: {text}");
        assert!(text.contains("H100\\x1b]8;;https://evil.example\\x07") && text.contains("9.0\\x1b"), "{text}");
        let md = render(SupportFormat::Markdown, &r, None).unwrap();
        assert!(!md.contains('\u{1b}') && !md.contains('\u{7}'), "{md}");
        // The reference is a code span (inert); below it, every string is escaped.
        let body = md.split_once('\n').unwrap().1;
        assert!(md.starts_with("### GPU support: `` ") || md.starts_with("### GPU support: `"), "{md}");
        for live in ["[approve](", "https://", "\npassed", "<img"] {
            assert!(!body.contains(live), "{live:?} in {md}");
        }
        // One table row per GPU: no pipe or newline of theirs adds a cell or a row.
        let row = md.lines().find(|l| l.starts_with("| Hopper")).unwrap();
        assert_eq!(row.matches(" | ").count(), 5, "{row}");
        let html = render(SupportFormat::Html, &r, None).unwrap();
        assert!(!html.contains("<img"), "{html}");
    }
}
