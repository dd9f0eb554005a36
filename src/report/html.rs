//! One self-contained HTML page (`--format html`): per-target headlines, the coverage matrix as a
//! colour-coded grid with a legend, the findings grouped by target and cause, and where each
//! binary came from.
//!
//! No scripts and no external assets; the only style is one `<style>` element allowed by hash in
//! the page's own Content-Security-Policy, so the page renders the same offline and under a
//! strict CSP. Module counts show on hover (`title`).
//!
//! Every colour has a mark beside it, so the page reads without colour (docs/reports.md, "HTML
//! report"): a target runs ✓, runs compiling PTX ~, fails ✗, would fail but is accepted (✗)
//! (every view's marks, `lines::headline_mark`); a cell is native ✓, JIT ~, arch-gated ⊘, none
//! ✗, n/a ○, or partial ◐ (also outlined dashed: some of the binary's modules fail there, the
//! rest run).

use std::fmt::Write;

use base64::Engine as _;
use sha2::{Digest, Sha256};

use super::lines::{headline_mark, headline_meaning};
use super::{RenderConfig, ReportError};
use crate::layer::path::file_name;
use crate::lint::coverage::{Class, Share};
use crate::lint::rules::Severity;
use crate::lint::{Finding, HeadlineVerdict, LintReport, MatrixCell};

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

/// The mark beside a verdict class's colour.
pub fn class_mark(class: Class) -> &'static str {
    match class {
        Class::Native => "✓",
        Class::Jit => "~",
        Class::ArchGated => "⊘",
        Class::None => "✗",
        Class::NotApplicable => "○",
    }
}

/// The mark of a partial cell (besides its dashed outline).
pub const PARTIAL_MARK: &str = "◐";

/// Some of the binary's modules fail on the target and the rest run: the cell says `✗ E (n/m)`.
/// Only a binary whose class runs there is partial: one the run judged otherwise after counting
/// (gated: an optional library its callers check for; n/a: a per-CUDA-version sibling the loader
/// does not pick) keeps its modules' share `some` but is not partly failing.
pub fn partial(c: &MatrixCell) -> bool {
    c.result == Share::Some && c.class.runs()
}

/// The mark a cell shows beside its colour.
pub fn cell_mark(c: &MatrixCell) -> &'static str {
    if partial(c) { PARTIAL_MARK } else { class_mark(c.class) }
}

/// What a cell's colour and mark mean, for the legend.
fn class_meaning(class: Class) -> &'static str {
    match class {
        Class::Native => "runs, with SASS for this GPU",
        Class::Jit => "runs only by compiling PTX at first use",
        Class::ArchGated => {
            "code only for other chips or newer GPUs, an optional extension its callers check for: not a failure"
        }
        Class::None => "does not run here",
        Class::NotApplicable => "nothing to judge: no module counts, or a sibling the loader does not pick",
    }
}

/// Every string that reaches the page: control characters shown as escapes (`\x1b`), markup
/// as entities ([`crate::escape::html`]).
pub fn esc(s: &str) -> String {
    crate::escape::html(s)
}

fn style() -> String {
    let mut s = String::from(
        "body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#1f2328}\
         h1{font-size:1.4em}h3{font-size:1.1em;margin:1.2em 0 .4em}code,pre{font-family:ui-monospace,monospace}\
         table{border-collapse:collapse;margin:1em 0}\
         th,td{border:1px solid #d0d7de;padding:4px 8px;text-align:left;vertical-align:top}\
         th{background:#f6f8fa}td.cell{text-align:center;min-width:6em;overflow-wrap:anywhere}\
         .fail{color:#cf222e}.pass{color:#1a7f37}.runs{color:#1a7f37}.runs-jit{color:#9a6700}\
         .accepted{color:#9a6700}.fails{color:#cf222e}\
         .sev-error{color:#cf222e;font-weight:bold}.sev-warning{color:#9a6700}\
         pre{white-space:pre-wrap;margin:0}.muted{color:#656d76}.mark{font-weight:bold}\
         ul.marks{list-style:none;padding-left:0}\
         .some{outline:2px dashed #cf222e;outline-offset:-3px}\
         th.fails{background:#ffebe9;box-shadow:inset 0 -3px #cf222e}\
         td.col-fails{box-shadow:inset 3px 0 #cf222e,inset -3px 0 #cf222e}",
    );
    // The grid scrolls inside its own box: the header row and the binary column stay in view
    // (sticky needs separate borders: collapsed ones scroll away from sticky cells).
    s.push_str(
        ".grid{overflow:auto;max-height:85vh;border:1px solid #d0d7de}\
         #matrix{border-collapse:separate;border-spacing:0;margin:0}\
         #matrix th,#matrix td{border:0;border-right:1px solid #d0d7de;border-bottom:1px solid #d0d7de}\
         #matrix thead th{position:sticky;top:0;z-index:1;white-space:nowrap}\
         #matrix .bin{position:sticky;left:0;z-index:2;background:#fff}\
         #matrix td.bin code{display:block;min-width:16em;max-width:28em;overflow-wrap:anywhere}\
         #matrix thead .bin{z-index:3;background:#f6f8fa}\
         #legend{list-style:none;padding-left:0;margin:.5em 0}#legend li{margin:2px 0}\
         .swatch{display:inline-block;min-width:7em;padding:1px 8px;margin-right:6px;text-align:center}\
         details{margin:.3em 0}summary{cursor:pointer}\
         details ul{margin:.3em 0 .6em;padding-left:1.5em}li.finding{margin:.4em 0}\
         .fix{margin:.2em 0}",
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
        [("platform", &image.platform), ("manifest", &image.manifest_digest), ("image config", &image.config_digest)]
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
    // Which cudalint.toml, ignore file and baseline decided, as the other reports say it.
    if let Some(p) = r.policy.line() {
        let _ = writeln!(o, "<p id=\"policy\" class=\"muted\">policy: {}</p>", esc(&p));
    }
    let errors = r.findings.iter().filter(|f| f.severity == Severity::Error).count();
    let _ = writeln!(
        o,
        "<p id=\"gate\" class=\"{}\"><strong>{}</strong>: {} findings ({} errors), failing at {}</p>",
        if r.failed { "fail" } else { "pass" },
        if r.failed { "✗ gate fails" } else { "✓ gate passes" },
        r.findings.len(),
        errors,
        r.fail_on.as_str()
    );

    if !r.headlines.is_empty() {
        o.push_str("<h2>Targets</h2>\n<ul id=\"headlines\" class=\"marks\">\n");
        for h in &r.headlines {
            let _ = writeln!(
                o,
                "<li class=\"{}\" data-target=\"{}\" data-verdict=\"{}\"><span class=\"mark\">{}</span> {}</li>",
                esc(h.verdict.as_str()),
                esc(&h.target),
                esc(h.verdict.as_str()),
                esc(headline_mark(h.verdict)),
                esc(&h.text)
            );
        }
        o.push_str("</ul>\n");
    }

    matrix(&mut o, r);
    findings(&mut o, r);
    compilers(&mut o, r);

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

/// A target's headline verdict, if it has one.
fn verdict_of(r: &LintReport, target: &str) -> Option<HeadlineVerdict> {
    r.headlines.iter().find(|h| h.target == target).map(|h| h.verdict)
}

/// The grid's column order, as indexes into `r.targets`: failing targets first, so no target
/// that runs pushes them out of view, then the others; each in the order given.
fn column_order(r: &LintReport) -> Vec<usize> {
    let fails = |i: &usize| verdict_of(r, &r.targets[*i].name) == Some(HeadlineVerdict::Fails);
    let (mut order, rest): (Vec<usize>, Vec<usize>) = (0..r.targets.len()).partition(fails);
    order.extend(rest);
    order
}

/// `<span class="mark fails">✗</span> V100 <span class="muted">(7.0)</span>`: a target with
/// its verdict's mark, where it has a headline.
fn target_label(r: &LintReport, t: &crate::lint::targets::Target) -> String {
    let mark = match verdict_of(r, &t.name) {
        Some(v) => format!("<span class=\"mark {}\">{}</span> ", v.as_str(), esc(headline_mark(v))),
        None => String::new(),
    };
    format!("{mark}{} <span class=\"muted\">({})</span>", esc(&t.name), t.cc)
}

/// The coverage grid: a row per binary, the binary column first (it stays in view when the grid
/// scrolls sideways), then a column per target (failing ones first), then the layer and the
/// package; a cell per verdict class, with its mark. The legend follows, for the marks used.
pub fn matrix(o: &mut String, r: &LintReport) {
    o.push_str("<h2>Coverage</h2>\n");
    if r.matrix.is_empty() {
        o.push_str("<p id=\"no-matrix\">No binary with device code that is loaded at run time.</p>\n");
        return;
    }
    let order = column_order(r);
    o.push_str("<div class=\"grid\">\n<table id=\"matrix\">\n<thead><tr><th class=\"bin\">binary</th>");
    for &i in &order {
        let t = &r.targets[i];
        // A failing target's column is edged red whatever its cells say: a target can fail with
        // every binary native (a driver below the image's floor, a run-time compiler).
        let (class, title) = match r.headlines.iter().find(|h| h.target == t.name) {
            Some(h) => (column_class(h.verdict), format!(" title=\"{}\"", esc(&h.text))),
            None => ("", String::new()),
        };
        let class = if class.is_empty() { String::new() } else { format!(" class=\"{class}\"") };
        let _ = write!(o, "<th data-target=\"{}\"{class}{title}>{}</th>", esc(&t.name), target_label(r, t));
    }
    o.push_str("<th>layer</th><th>package</th></tr></thead>\n<tbody>\n");
    for shown in super::lines::shown_rows(r) {
        let m = &*shown.row;
        // The directory muted, a long path wrapping (after a slash where it can) instead of
        // pushing the targets off the page; a folded row says what it stands for.
        // A folded row's path is a directory: its last part stands out as a file name would.
        let file = match m.path.strip_suffix('/') {
            Some(d) => &m.path[d.len() - file_name(d).len()..],
            None => file_name(&m.path),
        };
        let dir = &m.path[..m.path.len() - file.len()];
        let folded = match shown.folded() {
            Some(what) => format!(" <span class=\"muted\">({})</span>", esc(&what)),
            None => String::new(),
        };
        let _ = write!(
            o,
            "<tr data-path=\"{}\"{}><td class=\"bin\"><code><span class=\"muted\">{}</span>{}</code>{folded}</td>",
            esc(&m.path),
            if shown.files > 1 { format!(" data-files=\"{}\"", shown.files) } else { String::new() },
            esc(dir).replace('/', "/<wbr>"),
            esc(file)
        );
        for &i in &order {
            let Some(c) = m.cells.get(i) else {
                o.push_str("<td></td>");
                continue;
            };
            let mark = cell_mark(c);
            // `✗ 209` already carries its mark; `—` says no more than the mark.
            let rest = c.text.strip_prefix(mark).unwrap_or(&c.text).trim_start();
            let text = match rest {
                "" | "—" => format!("<span class=\"mark\">{mark}</span>"),
                rest => format!("<span class=\"mark\">{mark}</span> {}", esc(rest)),
            };
            let column = match verdict_of(r, &r.targets[i].name).map(column_class) {
                Some(c) if !c.is_empty() => format!(" col-{c}"),
                _ => String::new(),
            };
            let _ = write!(
                o,
                "<td class=\"cell {}{}{column}\" data-target=\"{}\" data-class=\"{}\" title=\"{} modules, {} run on {}\">{}</td>",
                css_class(c.class),
                if partial(c) { " some" } else { "" },
                esc(&c.target),
                esc(c.class.as_str()),
                m.modules,
                esc(c.result.as_str()),
                esc(&c.target),
                text
            );
        }
        let _ = write!(o, "<td>{}</td>", layer_cell(&m.layer, m.step.as_deref(), STEP_CHARS));
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
        o.push_str("</tr>\n");
    }
    o.push_str("</tbody>\n</table>\n</div>\n");
    legend(o, r, &order);
}

/// What every mark and colour in the grid means, for those it uses: the targets' marks, the
/// cells' colours and marks (with the dashed outline), and the cells' text (the text report's
/// legend, in its words).
fn legend(o: &mut String, r: &LintReport, order: &[usize]) {
    o.push_str("<ul id=\"legend\">\n");
    let verdicts: Vec<HeadlineVerdict> = order.iter().filter_map(|&i| verdict_of(r, &r.targets[i].name)).collect();
    for &v in HeadlineVerdict::ALL.iter().rev() {
        if verdicts.contains(&v) {
            let column =
                if column_class(v).is_empty() { "" } else { "; its column is edged red, whatever its cells say" };
            let _ = writeln!(
                o,
                "<li data-for=\"target\" data-mark=\"{m}\"><span class=\"swatch {c}\"><span class=\"mark\">{m}</span> target</span>{}{column}</li>",
                esc(headline_meaning(v)),
                m = esc(headline_mark(v)),
                c = v.as_str()
            );
        }
    }
    let cells: Vec<&MatrixCell> = r.matrix.iter().flat_map(|m| &m.cells).collect();
    for &class in Class::ALL {
        if cells.iter().any(|c| c.class == class && !partial(c)) {
            let _ = writeln!(
                o,
                "<li data-for=\"cell\" data-mark=\"{m}\"><span class=\"swatch {}\"><span class=\"mark\">{m}</span> {}</span>{}</li>",
                css_class(class),
                esc(class.as_str()),
                esc(class_meaning(class)),
                m = esc(class_mark(class))
            );
        }
    }
    if cells.iter().any(|c| partial(c)) {
        let _ = writeln!(
            o,
            "<li data-for=\"cell\" data-mark=\"{m}\"><span class=\"swatch some\"><span class=\"mark\">{m}</span> partial</span>\
             in its class's colour with a red dashed outline: some of the binary's modules fail here, the rest run (the cell says \
             <code>✗ E (n/m)</code>)</li>",
            m = PARTIAL_MARK
        );
    }
    for (mark, meaning) in super::text::legend_parts(r) {
        let _ = writeln!(
            o,
            "<li data-for=\"text\"><span class=\"swatch\"><code>{}</code></span>{}</li>",
            esc(mark),
            esc(meaning)
        );
    }
    let _ = writeln!(
        o,
        "<li class=\"muted\">{}; a cell's module counts show on hover</li>\n</ul>",
        esc(super::text::NOT_COUNTED)
    );
}

/// The findings, grouped by target (in the grid's order; then those of no target) and, within
/// a target, by cause (the rule: errors first), each cause collapsed under a one-line summary.
fn findings(o: &mut String, r: &LintReport) {
    let shown: Vec<&Finding> = super::lines::shown(r).collect();
    let _ = writeln!(o, "<h2>Findings ({})</h2>", shown.len());
    if shown.is_empty() {
        return;
    }
    let mut groups: Vec<Option<&str>> = column_order(r).iter().map(|&i| Some(r.targets[i].name.as_str())).collect();
    // Targets no column has (the GPUs of `--on-device`), then what concerns no one target.
    for f in &shown {
        if f.target.is_some() && !groups.contains(&f.target.as_deref()) {
            groups.push(f.target.as_deref());
        }
    }
    groups.push(None);
    o.push_str("<div id=\"findings\">\n");
    for g in groups {
        let group: Vec<&Finding> = shown.iter().copied().filter(|f| f.target.as_deref() == g).collect();
        if group.is_empty() {
            continue;
        }
        let title = match g {
            Some(name) => match r.targets.iter().find(|t| t.name == name) {
                Some(t) => target_label(r, t),
                None => esc(name),
            },
            None => "Not tied to one target".to_string(),
        };
        let _ = writeln!(
            o,
            "<section data-target=\"{}\">\n<h3>{title} <span class=\"muted\">· {}</span></h3>",
            esc(g.unwrap_or("")),
            counted(&group)
        );
        let mut rules: Vec<(Severity, &str)> = Vec::new();
        for f in &group {
            match rules.iter_mut().find(|(_, rule)| *rule == f.rule) {
                Some((s, _)) => *s = (*s).max(f.severity),
                None => rules.push((f.severity, &f.rule)),
            }
        }
        rules.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
        for (severity, rule) in rules {
            let of: Vec<&Finding> = group.iter().copied().filter(|f| f.rule == rule).collect();
            cause(o, r, severity, &of);
        }
        o.push_str("</section>\n");
    }
    o.push_str("</div>\n");
}

/// `3 findings: 2 errors, 1 warning`.
fn counted(fs: &[&Finding]) -> String {
    let mut parts = Vec::new();
    for &s in Severity::ALL.iter().rev() {
        let n = fs.iter().filter(|f| f.severity == s).count();
        if n > 0 {
            parts.push(format!("{n} {}{}", s.as_str(), if n == 1 || s == Severity::Info { "" } else { "s" }));
        }
    }
    format!("{} finding{}: {}", fs.len(), if fs.len() == 1 { "" } else { "s" }, parts.join(", "))
}

/// One cause (a rule) on one target: a summary line (severity, rule, how many, which files),
/// and under it each finding with where it is, what it says and its fix (said once when all
/// share it).
fn cause(o: &mut String, r: &LintReport, severity: Severity, of: &[&Finding]) {
    let first = of[0];
    let files: Vec<String> =
        of.iter().filter_map(|f| f.path.as_deref()).map(|p| file_name(p.trim_end_matches('/')).to_string()).collect();
    let which = if !files.is_empty() {
        format!(": <code>{}</code>", esc(&crate::lint::verdict::shown(&files, 3)))
    } else if of.len() == 1 {
        // An image-wide finding: what it says, shortened, is its summary.
        format!(": {}", esc(&clip(&first.message, 120)))
    } else {
        String::new()
    };
    let _ = writeln!(
        o,
        "<details data-rule=\"{}\" data-severity=\"{}\">\n<summary><span class=\"sev-{}\">{}</span> {} \
         <span class=\"muted\">{}</span> · {} finding{}{which}</summary>",
        esc(&first.rule),
        severity.as_str(),
        severity.as_str(),
        severity.as_str(),
        esc(&first.rule),
        esc(&first.name),
        of.len(),
        if of.len() == 1 { "" } else { "s" }
    );
    let one_fix = of.len() > 1 && of.iter().all(|f| f.fix == first.fix);
    if one_fix && !first.fix.is_empty() {
        let _ = writeln!(
            o,
            "<div class=\"fix\"><span class=\"muted\">fix, for all {}:</span><pre>{}</pre></div>",
            of.len(),
            esc(&first.fix)
        );
    }
    let mixed = of.iter().any(|f| f.severity != severity);
    o.push_str("<ul>\n");
    for f in of {
        let mut at = Vec::new();
        if mixed {
            at.push(format!("<span class=\"sev-{0}\">{0}</span>", f.severity.as_str()));
        }
        at.push(match &f.path {
            Some(p) => format!("<code>{}</code>", esc(p)),
            None => "image".to_string(),
        });
        if let Some(p) = &f.package {
            at.push(format!("<span class=\"muted\">{}</span>", esc(p)));
        }
        match (&f.step, &f.layer) {
            (Some(_), _) => at.push(format!(
                "<span class=\"muted\">made by {}</span>",
                layer_cell(f.layer.as_deref().unwrap_or_default(), f.step.as_deref(), usize::MAX)
            )),
            (None, Some(l)) => at.push(format!("<span class=\"muted\">layer {}</span>", layer_cell(l, None, 0))),
            (None, None) => {}
        }
        let _ = write!(
            o,
            "<li class=\"finding\" data-rule=\"{}\" data-fingerprint=\"{}\">{}<br>{}",
            esc(&f.rule),
            esc(&f.fingerprint),
            at.join(" "),
            esc(&format!("{}{}", f.message, super::lines::folded_note(r, f)))
        );
        if !one_fix && !f.fix.is_empty() {
            let _ = write!(o, "<div class=\"fix\"><span class=\"muted\">fix:</span><pre>{}</pre></div>", esc(&f.fix));
        }
        o.push_str("</li>\n");
    }
    o.push_str("</ul>\n</details>\n");
}

/// The run-time compilers in the image, and per target whether each consumer's compiler serves it.
fn compilers(o: &mut String, r: &LintReport) {
    if r.compilers.is_empty() {
        return;
    }
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
    if r.compiler_checks.is_empty() {
        return;
    }
    o.push_str("<table id=\"compiler-checks\">\n<thead><tr><th>target</th><th>what</th><th>compiler</th><th>asks for</th><th>verdict</th></tr></thead>\n<tbody>\n");
    for c in &r.compiler_checks {
        let f = &c.facts;
        let ok = c.passed();
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
            if !f.known {
                "muted"
            } else if ok {
                "pass"
            } else {
                "fail"
            },
            esc(&verdict)
        );
    }
    o.push_str("</tbody>\n</table>\n");
}

/// The first `n` characters of `s`, and `…` when there were more.
fn clip(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// The class of a failing target's column header (its cells carry `col-` and it); none for
/// the others.
fn column_class(v: HeadlineVerdict) -> &'static str {
    match v {
        HeadlineVerdict::Fails => "fails",
        HeadlineVerdict::Runs | HeadlineVerdict::RunsJit | HeadlineVerdict::Accepted => "",
    }
}

/// A layer as people know it: the Dockerfile step that made it (at most `chars` characters,
/// all of it on hover with the layer's whole digest), else its digest cut short (whole on
/// hover), else `—`. Escaped.
fn layer_cell(layer: &str, step: Option<&str>, chars: usize) -> String {
    match step {
        Some(s) if layer.is_empty() => format!("<code title=\"{}\">{}</code>", esc(s), esc(&clip(s, chars))),
        Some(s) => format!("<code title=\"layer {}: {}\">{}</code>", esc(layer), esc(s), esc(&clip(s, chars))),
        None if layer.is_empty() => "<code>—</code>".to_string(),
        None => format!("<code title=\"{}\">{}</code>", esc(layer), esc(&short(layer))),
    }
}

/// How much of a Dockerfile step a grid cell shows (a finding shows all of it).
const STEP_CHARS: usize = 80;

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
        assert_eq!(esc("a\x1b[2K\rb\nc\u{9b}"), "a\\x1b[2K\\rb\\nc\\x9b");
        assert_eq!(css_class(Class::NotApplicable), "v-na");
        assert_eq!(short("sha256:0123456789abcdef"), "sha256:0123456789ab…");
        assert_eq!(clip("ab✗d", 3), "ab✗…");
        assert_eq!(clip("ab✗", 3), "ab✗");
    }
}
