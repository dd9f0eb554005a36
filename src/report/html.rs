//! One self-contained HTML page (`--format html`): per-target headlines, the coverage matrix as a
//! colour-coded grid, the findings with their fixes, and where each binary came from.
//!
//! No scripts and no external assets; the only style is one `<style>` element allowed by hash in
//! the page's own Content-Security-Policy, so the page renders the same offline and under a
//! strict CSP. Module counts show on hover (`title`).

use std::fmt::Write;

use base64::Engine as _;
use sha2::{Digest, Sha256};

use super::{RenderConfig, ReportError};
use crate::lint::LintReport;
use crate::lint::coverage::{Class, Share};
use crate::lint::rules::Severity;

/// A matrix cell's colours (background, text) for its verdict class.
pub fn colours(class: Class) -> (&'static str, &'static str) {
    match class {
        Class::Native => ("#2da44e", "#ffffff"),
        Class::Jit => ("#d4a72c", "#1f2328"),
        Class::ArchGated => ("#e16f24", "#ffffff"),
        Class::None => ("#cf222e", "#ffffff"),
        Class::NotApplicable => ("#d0d7de", "#1f2328"),
    }
}

/// CSS class for a verdict class (`n/a` is not a valid class name).
pub fn css_class(class: Class) -> String {
    format!("v-{}", class.as_str().replace('/', ""))
}

pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            _ => o.push(c),
        }
    }
    o
}

fn style() -> String {
    let mut s = String::from(
        "body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#1f2328}\
         h1{font-size:1.4em}code,pre{font-family:ui-monospace,monospace}\
         table{border-collapse:collapse;margin:1em 0}\
         th,td{border:1px solid #d0d7de;padding:4px 8px;text-align:left;vertical-align:top}\
         th{background:#f6f8fa}td.cell{text-align:center;white-space:nowrap}\
         .fail{color:#cf222e}.pass{color:#1a7f37}.runs{color:#1a7f37}.runs-jit{color:#9a6700}\
         .fails{color:#cf222e}.sev-error{color:#cf222e;font-weight:bold}.sev-warning{color:#9a6700}\
         .legend span{display:inline-block;padding:2px 8px;margin-right:6px}\
         pre{white-space:pre-wrap;margin:0}.muted{color:#656d76}\
         td.some{outline:2px dashed #cf222e;outline-offset:-3px}",
    );
    for &class in Class::ALL {
        let (bg, fg) = colours(class);
        let _ = write!(s, ".{}{{background:{bg};color:{fg}}}", css_class(class));
    }
    s
}

/// The page. Deterministic: the same report gives the same bytes.
pub fn render(r: &LintReport, _cfg: &RenderConfig) -> Result<String, ReportError> {
    Ok(html(r))
}

/// The page's head (one hashed `<style>`, no other source allowed), its title and the image's
/// identity line: `title` is `cudalint` or `cudalint support`.
pub fn head(o: &mut String, title: &str, image: &crate::lint::LintImage, tool: &crate::schema::Tool, extra_css: &str) {
    let css = format!("{}{extra_css}", style());
    let hash = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(css.as_bytes()));
    let name = image.name.clone().unwrap_or_else(|| "image".into());
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'sha256-{hash}'\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}: {}</title>\n<style>{css}</style>\n</head>\n<body>\n",
        esc(title),
        esc(&name)
    );
    let _ = writeln!(o, "<h1>{}: <code>{}</code></h1>", esc(title), esc(&name));
    let mut meta = vec![format!("source {}", image.source)];
    for (k, v) in
        [("platform", &image.platform), ("manifest", &image.manifest_digest), ("config", &image.config_digest)]
    {
        if let Some(v) = v {
            meta.push(format!("{k} <code>{}</code>", esc(v)));
        }
    }
    let _ = writeln!(o, "<p class=\"muted\">{} · cudalint {}</p>", meta.join(" · "), esc(tool.version));
}

fn html(r: &LintReport) -> String {
    let mut o = String::new();
    head(&mut o, "cudalint", &r.image, &r.tool, "");
    let errors = r.findings.iter().filter(|f| f.severity == Severity::Error).count();
    let _ = writeln!(
        o,
        "<p id=\"gate\" class=\"{}\"><strong>{}</strong>: {} findings ({} errors), failing at {}</p>",
        if r.failed { "fail" } else { "pass" },
        if r.failed { "gate fails" } else { "gate passes" },
        r.findings.len(),
        errors,
        r.fail_on.as_str()
    );

    if !r.headlines.is_empty() {
        o.push_str("<h2>Targets</h2>\n<ul id=\"headlines\">\n");
        for h in &r.headlines {
            let _ = writeln!(
                o,
                "<li class=\"{}\" data-target=\"{}\" data-verdict=\"{}\">{}</li>",
                esc(h.verdict.as_str()),
                esc(&h.target),
                esc(h.verdict.as_str()),
                esc(&h.text)
            );
        }
        o.push_str("</ul>\n");
    }

    matrix(&mut o, r);

    if !r.compilers.is_empty() {
        o.push_str("<h2>Run-time compilers</h2>\n<table id=\"compilers\">\n<thead><tr><th>compiler</th><th>version</th><th>file</th><th>package</th></tr></thead>\n<tbody>\n");
        for c in &r.compilers {
            let _ = writeln!(
                o,
                "<tr data-kind=\"{}\"><td>{}</td><td>{} <span class=\"muted\">({})</span></td><td><code>{}</code></td><td>{}</td></tr>",
                c.kind,
                c.kind,
                esc(&c.version),
                esc(&c.source),
                esc(&c.path),
                esc(&c.package)
            );
        }
        o.push_str("</tbody>\n</table>\n");
        if !r.compiler_checks.is_empty() {
            o.push_str("<table id=\"compiler-checks\">\n<thead><tr><th>target</th><th>what</th><th>compiler</th><th>asks for</th><th>verdict</th></tr></thead>\n<tbody>\n");
            for c in &r.compiler_checks {
                let f = &c.facts;
                let ok = f.knows_target && f.driver_problem.is_empty();
                let verdict = if !f.known && !f.why.is_empty() {
                    format!("not judged: {}", f.why)
                } else if !f.known {
                    "release unknown: not judged".to_string()
                } else if ok {
                    "✓ compiles".to_string()
                } else if !f.driver_problem.is_empty() {
                    format!("✗ {}", f.driver_problem)
                } else {
                    format!("✗ {}", f.why)
                };
                let _ = writeln!(
                    o,
                    "<tr><td>{}</td><td>{}</td><td>{} {}</td><td>{}</td><td class=\"{}\">{}</td></tr>",
                    esc(&c.target),
                    esc(&f.what),
                    esc(&f.kind),
                    esc(&f.version),
                    esc(&f.target_arch),
                    if ok { "native" } else { "none" },
                    esc(&verdict)
                );
            }
            o.push_str("</tbody>\n</table>\n");
        }
    }

    let _ = writeln!(o, "<h2>Findings ({})</h2>", super::lines::shown(r).count());
    if !r.findings.is_empty() {
        o.push_str(
            "<table id=\"findings\">\n<thead><tr><th>severity</th><th>rule</th><th>where</th><th>finding</th><th>fix</th></tr></thead>\n<tbody>\n",
        );
        for f in super::lines::shown(r) {
            let mut at = Vec::new();
            if let Some(p) = &f.path {
                at.push(format!("<code>{}</code>", esc(p)));
            }
            if let Some(t) = &f.target {
                at.push(format!("on {}", esc(t)));
            }
            let _ = writeln!(
                o,
                "<tr data-rule=\"{}\"><td class=\"sev-{}\">{}</td><td>{} <span class=\"muted\">{}</span></td><td>{}</td><td>{}</td><td><pre>{}</pre></td></tr>",
                esc(&f.rule),
                f.severity.as_str(),
                f.severity.as_str(),
                esc(&f.rule),
                esc(&f.name),
                if at.is_empty() { "image".to_string() } else { at.join(" ") },
                esc(&format!("{}{}", f.message, super::lines::folded_note(r, f))),
                esc(&f.fix)
            );
        }
        o.push_str("</tbody>\n</table>\n");
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

/// The coverage grid: a row per binary, a column per target, a cell per verdict class.
pub fn matrix(o: &mut String, r: &LintReport) {
    o.push_str("<h2>Coverage</h2>\n<p class=\"legend\">");
    for &class in Class::ALL {
        let _ = write!(o, "<span class=\"{}\">{}</span>", css_class(class), esc(class.as_str()));
    }
    o.push_str("</p>\n");
    if r.matrix.is_empty() {
        o.push_str("<p id=\"no-matrix\">No binary with device code that is loaded at run time.</p>\n");
    } else {
        o.push_str("<table id=\"matrix\">\n<thead><tr><th>binary</th><th>layer</th><th>package</th>");
        for t in &r.targets {
            let _ = write!(
                o,
                "<th data-target=\"{}\">{} <span class=\"muted\">({})</span></th>",
                esc(&t.name),
                esc(&t.name),
                t.cc
            );
        }
        o.push_str("</tr></thead>\n<tbody>\n");
        for m in &r.matrix {
            let _ = write!(o, "<tr data-path=\"{}\"><td><code>{}</code></td>", esc(&m.path), esc(&m.path));
            let layer = if m.layer.is_empty() { "—".to_string() } else { m.layer.clone() };
            let _ = write!(o, "<td><code title=\"{}\">{}</code></td>", esc(&layer), esc(&short(&layer)));
            match &m.package {
                Some(p) => {
                    let _ = write!(
                        o,
                        "<td title=\"{}\">{} {} ({})</td>",
                        esc(&p.purl),
                        esc(&p.name),
                        esc(&p.version),
                        esc(p.manager.as_str())
                    );
                }
                None => o.push_str("<td class=\"muted\">—</td>"),
            }
            for c in &m.cells {
                let _ = write!(
                    o,
                    "<td class=\"cell {}{}\" data-target=\"{}\" data-class=\"{}\" title=\"{} modules, {} run on {}\">{}</td>",
                    css_class(c.class),
                    // Some modules run there, some do not: marked whatever the class.
                    if c.result == Share::Some { " some" } else { "" },
                    esc(&c.target),
                    esc(c.class.as_str()),
                    m.modules,
                    esc(c.result.as_str()),
                    esc(&c.target),
                    esc(&c.text)
                );
            }
            o.push_str("</tr>\n");
        }
        o.push_str("</tbody>\n</table>\n");
    }
}

/// `sha256:0123456789ab…` for a table cell (the whole digest is in the hover text).
fn short(digest: &str) -> String {
    match digest.strip_prefix("sha256:") {
        Some(h) if h.len() > 12 => format!("sha256:{}…", &h[..12]),
        _ => digest.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup() {
        assert_eq!(esc("<a href=\"x\">&'"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
        assert_eq!(css_class(Class::NotApplicable), "v-na");
        assert_eq!(short("sha256:0123456789abcdef"), "sha256:0123456789ab…");
    }
}
