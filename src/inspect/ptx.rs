//! PTX text files: `.version`, `.target`, `.address_size` from the preamble, and a count of
//! `.entry` directives (kernels) over the whole file, read as a stream.

use std::io;

use memchr::memmem;

use super::fatbin::Suffix;
use super::model::{FileFormat, FileReport, PtxInfo};
use super::window::{WINDOW, Window};

/// The directives come first; this much text is plenty to find them.
const PREAMBLE: usize = 64 << 10;

pub fn looks_like_ptx(head: &[u8], name: &str) -> bool {
    let text = head.iter().all(|&b| b == b'\t' || b == b'\n' || b == b'\r' || (0x20..0x7F).contains(&b));
    text && (name.ends_with(".ptx") || head.starts_with(b"//") || head.starts_with(b".version"))
}

pub fn inspect(w: &mut Window, path: &str) -> io::Result<FileReport> {
    let mut report = FileReport::new(path.to_string(), w.total_len(), FileFormat::Other);
    let pre = w.fill(PREAMBLE)?;
    let Some(mut info) = parse_preamble(pre) else {
        return Ok(report);
    };
    // Count `.entry` over the whole text (the window overlaps so a split token is not lost).
    let needle = b".entry";
    let finder = memmem::Finder::new(needle);
    let mut entries = 0u32;
    let len = w.total_len();
    loop {
        let base = w.offset();
        let buf = w.fill(WINDOW)?;
        if buf.is_empty() {
            break;
        }
        let at_end = base + buf.len() as u64 >= len;
        let upto = if at_end { buf.len() } else { buf.len() - (needle.len() - 1) };
        entries += finder.find_iter(buf).filter(|&p| p < upto && is_entry(buf, p)).count() as u32;
        w.consume_to(base + upto as u64)?;
        if at_end {
            break;
        }
    }
    info.entry_count = entries;
    report.format = FileFormat::Ptx;
    report.ptx = Some(info);
    Ok(report)
}

/// `.entry` directives (kernels) in PTX text.
pub fn count_entries(text: &[u8]) -> u32 {
    memmem::find_iter(text, b".entry").filter(|&p| is_entry(text, p)).count() as u32
}

fn is_entry(buf: &[u8], p: usize) -> bool {
    let before = p == 0 || buf[p - 1].is_ascii_whitespace();
    let after = buf.get(p + 6).is_some_and(|b| b.is_ascii_whitespace());
    before && after
}

/// `.version 8.8`, `.target sm_90a, debug`, `.address_size 64`.
pub fn parse_preamble(text: &[u8]) -> Option<PtxInfo> {
    let text = String::from_utf8_lossy(text);
    let mut version = None;
    let mut target = None;
    let mut address_size = None;
    for line in text.lines() {
        let line = line.split("//").next().unwrap_or("").trim();
        if let Some(v) = line.strip_prefix(".version") {
            let (maj, min) = v.trim().split_once('.')?;
            version = Some([maj.trim().parse().ok()?, min.trim().parse().ok()?]);
        } else if let Some(t) = line.strip_prefix(".target") {
            target = Some(t.trim().to_string());
        } else if let Some(a) = line.strip_prefix(".address_size") {
            address_size = a.trim().parse().ok();
        }
        if version.is_some() && target.is_some() && address_size.is_some() {
            break;
        }
    }
    let target = target?;
    let mut parts = target.split(',').map(str::trim);
    let arch = parts.next()?.to_string();
    let debug = parts.any(|p| p == "debug");
    let digits: String = arch.strip_prefix("sm_")?.chars().take_while(char::is_ascii_digit).collect();
    let sm = digits.parse().ok()?;
    let suffix = match arch.strip_prefix("sm_")?.get(digits.len()..) {
        Some("a") => Suffix::A,
        Some("f") => Suffix::F,
        _ => Suffix::None,
    };
    Some(PtxInfo { version: version?, target: arch, sm, suffix, debug, address_size, entry_count: 0 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preamble_with_suffix_and_debug() {
        let p = parse_preamble(b"//\n.version 9.5\n.target sm_100f, debug\n.address_size 64\n").unwrap();
        assert_eq!(p.version, [9, 5]);
        assert_eq!((p.sm, p.suffix, p.debug, p.address_size), (100, Suffix::F, true, Some(64)));
        assert!(parse_preamble(b"// not ptx\nint main() {}\n").is_none());
    }
}
