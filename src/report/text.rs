//! Text for people (`--format text`): headlines per target, the coverage matrix, the on-device
//! section, the findings with their fixes and a summary line. Colours only when asked for.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::lines::{
    compilers_passed, folded_note, headline_legend, headline_mark, image_line, shown, shown_rows, summary_line,
};
use super::{RenderConfig, ReportError};
use crate::escape::text as esc;
use crate::lint::coverage::Class;
use crate::lint::rules::Severity;
use crate::lint::{HeadlineVerdict, LintReport};

/// ANSI colours, or none.
#[derive(Clone, Copy)]
pub struct Paint(pub bool);

impl Paint {
    pub fn wrap(self, code: &str, s: &str) -> String {
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
    fn cell(self, class: Class, text: &str) -> String {
        match class {
            Class::Native if text.contains('✗') => self.wrap("33", text),
            Class::Native => self.wrap("32", text),
            Class::Jit | Class::ArchGated => self.wrap("33", text),
            Class::None => self.wrap("31", text),
            Class::NotApplicable => text.to_string(),
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

pub fn render(r: &LintReport, cfg: &RenderConfig) -> Result<String, ReportError> {
    Ok(text(r, Paint(cfg.color), cfg.verbose, cfg.width))
}

/// `s` in lines of at most `width` characters after `indent` spaces (the first line's prefix
/// `first` is counted as indent), broken at spaces; a word longer than a line stays whole.
/// `None`: one line.
fn wrap(first: &str, s: &str, indent: usize, width: Option<usize>) -> String {
    let Some(width) = width.filter(|w| *w > indent + 20) else {
        return format!("{}{first}{s}", " ".repeat(indent));
    };
    let mut out = String::new();
    let mut line = format!("{}{first}", " ".repeat(indent));
    let mut fresh = true;
    for word in s.split(' ') {
        if !fresh && width_of(&line) + 1 + width_of(word) > width {
            out.push_str(line.trim_end());
            out.push('\n');
            line = " ".repeat(indent + 2);
            fresh = true;
        }
        if !fresh {
            line.push(' ');
        }
        line.push_str(word);
        fresh = false;
    }
    out.push_str(line.trim_end());
    out
}

/// Characters as a terminal shows them, ANSI colour codes not counted.
fn width_of(s: &str) -> usize {
    let mut n = 0;
    let mut esc = false;
    for c in s.chars() {
        match (esc, c) {
            (false, '\x1b') => esc = true,
            (true, 'm') => esc = false,
            (true, _) => {}
            _ => n += 1,
        }
    }
    n
}

/// `first` and the items joined by `sep`, in lines of at most `width` characters: a line breaks
/// only between items, and the lines after the first start under the first item. `None`: one
/// line.
pub(crate) fn wrap_list(first: &str, items: &[String], sep: &str, width: Option<usize>) -> String {
    let Some(width) = width else {
        return format!("{first}{}", items.join(sep));
    };
    let indent = " ".repeat(width_of(first));
    let mut out = String::new();
    let mut line = first.to_string();
    let mut fresh = true;
    for (i, item) in items.iter().enumerate() {
        // The separator stays with the item before it, its trailing space becomes the break.
        let piece = if i + 1 < items.len() { format!("{item}{}", sep.trim_end()) } else { item.clone() };
        if !fresh && width_of(&line) + 1 + width_of(&piece) > width {
            out.push_str(line.trim_end());
            out.push('\n');
            line = indent.clone();
            fresh = true;
        }
        if !fresh {
            line.push(' ');
        }
        line.push_str(&piece);
        fresh = false;
    }
    out.push_str(line.trim_end());
    out
}

/// A finding's first line: severity, rule and name, then where it is; on a terminal too narrow
/// for all of it, where it is goes on lines of its own, indented as the message is.
fn finding_header(head: &str, at: &str, width: Option<usize>) -> String {
    match width {
        Some(w) if width_of(head) + 2 + width_of(at) > w => format!("{head}\n{}", wrap("", at, 8, width)),
        _ => format!("{head}  {at}"),
    }
}

/// A path cut from the left to `max` characters (`…/torch/lib/libtorch_cuda.so`), so that a
/// grid of long paths fits the terminal.
fn fit_path(p: &str, max: usize) -> String {
    let n = p.chars().count();
    if n <= max {
        return p.to_string();
    }
    let tail: String = p.chars().skip(n - max.saturating_sub(1)).collect();
    format!("…{tail}")
}

fn text(r: &LintReport, paint: Paint, verbose: bool, term: Option<usize>) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}", image_line(r));
    if let Some(a) = &r.image.attestation {
        let how = if a.signed {
            "its signature verified by a --verify-key"
        } else {
            "UNSIGNED, believed under --trust-unsigned: whoever can push to the repository decided this verdict"
        };
        let _ = writeln!(out, "judged from attestation {} ({how})", esc(&a.statement));
    }
    if let Some(p) = r.policy.line() {
        let _ = writeln!(out, "policy: {}", esc(&p));
    }
    if r.targets.is_empty() {
        let _ = writeln!(out, "targets: none given (--gpu, --arch, --targets-from): coverage not checked");
    } else {
        let names: Vec<String> = r.targets.iter().map(|t| esc(&t.label())).collect();
        let _ = writeln!(out, "{}", wrap_list("targets: ", &names, "; ", term));
        out.push('\n');
        for h in &r.headlines {
            let colour = match h.verdict {
                HeadlineVerdict::Fails => "1;31",
                HeadlineVerdict::RunsJit | HeadlineVerdict::Accepted => "33",
                HeadlineVerdict::Runs => "32",
            };
            let painted = paint.wrap(colour, headline_mark(h.verdict));
            let _ = writeln!(out, "{}", wrap(&format!("{painted} "), &esc(&h.text), 0, term));
        }
    }
    if !r.matrix.is_empty() && !r.targets.is_empty() {
        out.push('\n');
        let rows = shown_rows(r);
        let headers: Vec<String> = r.targets.iter().map(|t| format!("{} ({})", esc(&t.name), t.cc)).collect();
        let widths: Vec<usize> = headers
            .iter()
            .enumerate()
            .map(|(i, h)| rows.iter().map(|m| width(&m.row.cells[i].text)).max().unwrap_or(0).max(width(h)))
            .collect();
        // On a terminal, long paths give way to the target columns (cut from the left, where
        // the directories the rows share are); what a folded row stands for stays whole.
        let cells: usize = widths.iter().map(|w| w + 2).sum();
        let room = term.map_or(usize::MAX, |t| t.saturating_sub(cells).max(24));
        let path_of = |m: &super::lines::ShownRow| match m.folded() {
            Some(what) => {
                let what = format!(" ({})", esc(&what));
                format!("{}{what}", fit_path(&esc(&m.row.path), room.saturating_sub(width(&what)).max(12)))
            }
            None => fit_path(&esc(&m.row.path), room),
        };
        let first = rows.iter().map(|m| width(&path_of(m))).max().unwrap_or(0).max(8);
        let mut line = pad("coverage", "coverage".to_string(), first);
        for (h, w) in headers.iter().zip(&widths) {
            line.push_str("  ");
            line.push_str(&pad(h, h.clone(), *w));
        }
        let _ = writeln!(out, "{}", line.trim_end());
        for m in &rows {
            let path = path_of(m);
            let mut line = pad(&path, path.clone(), first);
            for (c, w) in m.row.cells.iter().zip(&widths) {
                line.push_str("  ");
                line.push_str(&pad(&c.text, paint.cell(c.class, &c.text), *w));
            }
            let _ = writeln!(out, "{}", line.trim_end());
        }
        if let Some(l) = headline_legend(r) {
            let _ = writeln!(out, "{}", paint.dim(&wrap("", &format!("marks: {l}"), 0, term)));
        }
        if let Some(l) = legend(r) {
            let _ = writeln!(out, "{}", paint.dim(&wrap("", &l, 0, term)));
        }
    }
    if let Some(l) = compilers_passed(r) {
        let _ = writeln!(out, "\n{}", wrap(&format!("{} ", paint.wrap("32", "✓")), &esc(&l), 0, term));
    }
    if let Some(d) = &r.device {
        device_text(&mut out, d, paint);
    }
    if !r.findings.is_empty() {
        out.push('\n');
    }
    for f in shown(r) {
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
        let head = format!("{} {} {}", paint.severity(f.severity), f.rule, f.name);
        let _ = writeln!(out, "{}", finding_header(&head, &at, term));
        let _ = writeln!(out, "{}", wrap("", &format!("{}{}", esc(&f.message), folded_note(r, f)), 8, term));
        let _ = writeln!(out, "{}", wrap(&format!("{} ", paint.dim("fix:")), &esc(&f.fix), 8, term));
        if let Some(step) = &f.step {
            let _ = writeln!(out, "{}", wrap(&format!("{} ", paint.dim("made by:")), &esc(step), 8, term));
        }
        if verbose {
            for x in r.findings.iter().filter(|x| x.cause.as_deref() == Some(f.rule.as_str()) && x.target == f.target) {
                let _ = writeln!(out, "        {} {} {}", paint.dim("·"), x.rule, esc(x.path.as_deref().unwrap_or("")));
            }
        }
    }
    for n in &r.notes {
        let _ = writeln!(out, "{} {}", paint.dim("note:"), esc(n));
    }
    if verbose {
        for d in &r.detail {
            let _ = writeln!(
                out,
                "{} {}: {} problem(s) in what it does not load as registered code, e.g. {}",
                paint.dim("detail:"),
                esc(&d.path),
                d.problems,
                esc(&d.examples.join("; "))
            );
        }
    }
    out.push('\n');
    let _ = writeln!(out, "{}", summary_line(r));
    out
}

/// What the marks in the grid's cells mean, for the marks this grid uses, as (mark, meaning):
/// the text legend's line and the HTML page's legend (one wording for both).
pub(crate) fn legend_parts(r: &LintReport) -> Vec<(&'static str, &'static str)> {
    let cells: Vec<&str> = r.matrix.iter().flat_map(|m| m.cells.iter().map(|c| c.text.as_str())).collect();
    let any = |p: &dyn Fn(&str) -> bool| cells.iter().any(|c| p(c));
    let mut parts = Vec::new();
    if any(&|c| c.starts_with("sm_") || c.contains(" sm_")) {
        parts.push(("sm_XX", "SASS that runs as is"));
    }
    if any(&|c| c.contains("jit ")) {
        parts.push(("jit compute_XX", "PTX the driver compiles at first use"));
    }
    if any(&|c| c.contains("✗ ") && c.contains('/')) {
        parts.push(("✗ E (n/m)", "n of the binary's m modules fail there with CUDA error E, the rest run"));
    }
    if any(&|c| c.starts_with("✗ ") && !c.contains('/')) {
        parts.push(("✗ E", "nothing in the binary runs there (CUDA error E)"));
    }
    if any(&|c| c.contains("✗ ")) {
        parts.push(("E", "209 no kernel image, 222 PTX too new for the driver, 223 PTX JIT disabled"));
    }
    if any(&|c| c.starts_with("gated")) {
        parts.push((
            "gated",
            "code only for other chips ('a'/'f') or newer GPUs, an optional extension its callers check for",
        ));
    }
    if any(&|c| c.starts_with("lib-managed")) {
        parts.push(("lib-managed (n)", "n modules the library loads itself, not judged"));
    }
    if any(&|c| c.ends_with(" files") && !c.starts_with("none")) {
        parts.push((
            "n of m files",
            "a package's loose kernel files, loaded per GPU: n of its m files are for this GPU",
        ));
    }
    if any(&|c| c.starts_with("none of ") && c.ends_with(" files")) {
        parts.push((
            "none of m files",
            "no file of the set is for this GPU: not judged (CL028), its loader may fall back or fail",
        ));
    }
    if any(&|c| c.starts_with("not loaded")) {
        parts.push(("not loaded", "a per-CUDA-version sibling the loader does not pick"));
    }
    parts
}

/// What every grid leaves out, said after its legend.
pub(crate) const NOT_COUNTED: &str = "per-GPU kernel variants a library picks at run time are not counted";

/// The legend line under the text grid, for the marks it uses.
pub(crate) fn legend(r: &LintReport) -> Option<String> {
    let parts = legend_parts(r);
    if parts.is_empty() {
        return None;
    }
    let parts: Vec<String> = parts.iter().map(|(mark, meaning)| format!("{mark}: {meaning}")).collect();
    Some(format!("cells: {}; {NOT_COUNTED}", parts.join("; ")))
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

#[cfg(test)]
mod tests {
    use super::{finding_header, fit_path, width_of, wrap, wrap_list};

    #[test]
    fn findings_wrap_to_the_terminal_and_keep_their_indent() {
        let msg = "no kernel image for L4 (compute capability 8.9): none of the 2 module(s) carries SASS";
        // No width (a file, a pipe): one line.
        assert_eq!(wrap("", msg, 8, None), format!("        {msg}"));
        let w = wrap("fix: ", msg, 8, Some(40));
        let lines: Vec<&str> = w.lines().collect();
        assert!(lines.len() > 2, "{w}");
        assert!(lines.iter().all(|l| width_of(l) <= 40), "{w}");
        assert!(lines[0].starts_with("        fix: no"), "{w}");
        assert!(lines[1..].iter().all(|l| l.starts_with("          ") && !l.starts_with("           ")), "{w}");
        // Every word is still there, in order.
        let words: Vec<&str> = w.split_whitespace().skip(1).collect();
        assert_eq!(words.join(" "), msg);
        // ANSI codes take no columns.
        assert_eq!(width_of("\x1b[2mfix:\x1b[0m"), 4);
    }

    #[test]
    fn long_paths_give_way_from_the_left() {
        let p = "/usr/lib/python3/site-packages/torch/lib/libtorch_cuda.so";
        assert_eq!(fit_path(p, 100), p);
        let cut = fit_path(p, 30);
        assert_eq!(cut.chars().count(), 30);
        assert!(cut.starts_with('…') && cut.ends_with("/lib/libtorch_cuda.so"), "{cut}");
    }

    #[test]
    fn the_targets_line_breaks_between_targets_under_the_first() {
        let t: Vec<String> =
            ["V100 (7.0), driver 580.65.06", "T4 (7.5), driver 580.65.06", "RTX 5090 (12.0), driver 580.65.06"]
                .map(String::from)
                .to_vec();
        assert_eq!(wrap_list("targets: ", &t, "; ", None), format!("targets: {}", t.join("; ")));
        let w = wrap_list("targets: ", &t, "; ", Some(70));
        assert_eq!(
            w,
            "targets: V100 (7.0), driver 580.65.06; T4 (7.5), driver 580.65.06;\n         RTX 5090 (12.0), driver 580.65.06"
        );
        assert!(w.lines().all(|l| width_of(l) <= 70), "{w}");
    }

    #[test]
    fn a_finding_header_too_wide_puts_where_on_its_own_line() {
        let head = "error   CL008 driver-library-in-image";
        let at = "/usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05";
        assert_eq!(finding_header(head, at, None), format!("{head}  {at}"));
        assert_eq!(finding_header(head, at, Some(120)), format!("{head}  {at}"));
        assert_eq!(finding_header(head, at, Some(80)), format!("{head}\n        {at}"));
    }
}
