//! `cudalint scan` inventory: a summary for people, JSON for programs.

use std::fmt::Write;

use super::human_bytes;
use super::inspect::file_text;
use crate::escape::text as esc;
use crate::image::ImageReport;

pub fn json(r: &ImageReport) -> String {
    let mut s = serde_json::to_string_pretty(r).expect("report serializes");
    s.push('\n');
    s
}

/// The first 12 characters of a digest (a layer "digest" may be an archive path, not hex: cut
/// on a character boundary).
pub fn short(d: &str) -> &str {
    let hex = d.strip_prefix("sha256:").unwrap_or(d);
    let end = hex.char_indices().nth(12).map_or(hex.len(), |(i, _)| i);
    &hex[..end]
}

pub fn text(r: &ImageReport) -> String {
    let mut out = String::new();
    let i = &r.image;
    let _ = writeln!(
        out,
        "image {} ({}{})",
        esc(i.name.as_deref().unwrap_or("(unnamed)")),
        i.source,
        i.platform.as_ref().map(|p| format!(", {p}")).unwrap_or_default()
    );
    if let Some(d) = &i.config_digest {
        let _ = writeln!(out, "  config {d}");
    }
    if let Some(d) = &i.manifest_digest {
        let _ = writeln!(out, "  manifest {d}");
    }
    for (n, l) in i.layers.iter().enumerate() {
        let _ = writeln!(
            out,
            "  layer {n} {} {} {}{}: {} files, {}",
            esc(short(&l.digest)),
            human_bytes(l.size),
            l.compression.name(),
            if l.verified { ", verified" } else { "" },
            l.stats.files,
            human_bytes(l.stats.file_bytes)
        );
    }
    let cuda = r.files.iter().filter(|f| f.file.has_device_code()).count();
    let _ = writeln!(
        out,
        "  {} files ({}) seen, {} inspected, {} with device code, {} CUDA-related in all",
        r.stats.files,
        human_bytes(r.stats.file_bytes),
        r.stats.inspected,
        cuda,
        r.files.len()
    );
    for f in &r.files {
        out.push('\n');
        let mut head = String::new();
        if let Some(l) = &f.layer {
            let _ = write!(head, " [layer {}]", esc(short(l)));
        }
        let mut body = String::new();
        file_text(&mut body, &f.file, 0);
        // The first line names the file; add where it came from and its other names.
        let mut lines = body.lines();
        if let Some(first) = lines.next() {
            let _ = writeln!(out, "{first}{head}");
        }
        for h in &f.hardlinks {
            let _ = writeln!(out, "  hard link {}", esc(h));
        }
        for s in &f.symlinks {
            let _ = writeln!(out, "  symlink {}", esc(s));
        }
        for l in lines {
            let _ = writeln!(out, "{l}");
        }
    }
    for n in &r.notes {
        let _ = writeln!(out, "note: {}", esc(n));
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn short_cuts_on_a_character_boundary() {
        assert_eq!(super::short("sha256:0123456789abcdef"), "0123456789ab");
        assert_eq!(super::short("layer/ééééééééééééé.tar"), "layer/éééééé");
    }
}
