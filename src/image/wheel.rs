//! Python wheels (zip): each member streamed through the per-file analysis as it is inflated,
//! named by its path inside the wheel (`/torch/lib/libtorch_cuda.so`).
//!
//! Read as pip installs it (`pip/_internal/operations/install/wheel.py`, over CPython's
//! `zipfile`), or refused: the central directory is the one `zipfile` finds (`_EndRecData`,
//! `_RealGetContents`: the one ending at the end record, whatever the end record's offset field
//! says), every name not ending in `/` is a file whose bytes are written (a symlink or gitlink
//! mode in the external attributes changes nothing), a repeated name is its last entry
//! (`getinfo`), and members that share bytes (a zip bomb) or inflate past [`MAX_INFLATED`] are
//! refused. docs/reading.md lists each case.

use std::collections::HashMap;
use std::fs::File;
use std::path::Path;

use super::{ImageReport, ScanError, ScanOptions, SourceKind, single_layer};
use crate::input::{InputReader, StreamInput};
use crate::layer::analyze::{FileVisitor, Want};
use crate::layer::path::normalize;

/// The most bytes a wheel's members may inflate to in all: the largest CUDA wheels (torch,
/// cuDNN) hold a few GB; past this the wheel is refused rather than inflated for minutes.
pub const MAX_INFLATED: u64 = 16 << 30;

/// One central directory entry as CPython's `zipfile` reads it.
struct Member {
    raw_name: Vec<u8>,
    /// Its name as `ZipInfo` holds it (`orig_filename`): UTF-8 with flag bit 11, else cp437.
    orig: String,
    flags: u16,
    /// Where its local header is (`header_offset + concat`).
    offset: u64,
    method: u16,
    compress_size: u64,
    file_size: u64,
}

/// CPython's cp437 codec above ASCII (`bytes(range(128, 256)).decode('cp437')`).
const CP437_HIGH: &str = "ÇüéâäàåçêëèïîìÄÅÉæÆôöòûùÿÖÜ¢£¥₧ƒáíóúñÑªº¿⌐¬½¼¡«»░▒▓│┤╡╢╖╕╣║╗╝╜╛┐└┴┬├─┼╞╟╚╔╩╦╠═╬╧╨╤╥╙╘╒╓╫╪┘┌█▄▌▐▀αßΓπΣσµτΦΘΩδ∞φε∩≡±≥≤⌠⌡÷≈°∙·√ⁿ²■\u{a0}";

/// A name as `zipfile` decodes it (`_RealGetContents`, `ZipFile.open`): strict UTF-8 where
/// flag bit 11 is set (zipfile raises on bad UTF-8), else cp437.
fn decode_name(raw: &[u8], flags: u64) -> Result<String, String> {
    if flags & 0x800 != 0 {
        return String::from_utf8(raw.to_vec())
            .map_err(|_| format!("member {}: its name is not UTF-8 as its flags say (zipfile raises)", shown(raw)));
    }
    let high: Vec<char> = CP437_HIGH.chars().collect();
    Ok(raw.iter().map(|&b| if b < 0x80 { char::from(b) } else { high[usize::from(b - 0x80)] }).collect())
}

fn le16(b: &[u8], at: usize) -> u64 {
    u64::from(u16::from_le_bytes([b[at], b[at + 1]]))
}

fn le32(b: &[u8], at: usize) -> u64 {
    u64::from(u32::from_le_bytes(b[at..at + 4].try_into().unwrap()))
}

fn le64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

fn read_at(file: &File, at: u64, len: usize) -> Result<Vec<u8>, String> {
    use std::os::unix::fs::FileExt;
    let mut b = vec![0u8; len];
    let mut n = 0;
    while n < len {
        match file.read_at(&mut b[n..], at + n as u64) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    b.truncate(n);
    Ok(b)
}

/// The members `zipfile` lists (`namelist()` order, repeats kept), found as `_EndRecData` and
/// `_RealGetContents` find them.
fn zipfile_members(file: &File, size: u64) -> Result<Vec<Member>, String> {
    const EOCD: &[u8] = b"PK\x05\x06";
    let not_zip = || "not a zip file (no end of central directory record)".to_string();
    // The end record: last in the file without a comment, else the last signature in the last
    // 64 KiB + 22 bytes.
    let tail_start = size.saturating_sub((1 << 16) + 22);
    let tail = read_at(file, tail_start, (size - tail_start) as usize)?;
    let at = if tail.len() >= 22 && tail[tail.len() - 22..].starts_with(EOCD) && tail.ends_with(&[0, 0]) {
        tail.len() - 22
    } else {
        let at = memchr::memmem::rfind(&tail, EOCD).ok_or_else(not_zip)?;
        if tail.len() - at < 22 {
            return Err(not_zip());
        }
        at
    };
    let end = &tail[at..at + 22];
    let location = tail_start + at as u64;
    let (mut size_cd, mut offset_cd) = (le32(end, 12), le32(end, 16));
    let mut concat_adjust: i128 = 0;
    // `_EndRecData64`: a locator right before the end record, the zip64 end record right before
    // the locator (its offset field is not used).
    if location >= 20 + 56 {
        let loc = read_at(file, location - 20, 20)?;
        if loc.starts_with(b"PK\x06\x07") {
            if le32(&loc, 4) != 0 || le32(&loc, 16) > 1 {
                return Err("a zip spanning several disks".into());
            }
            let e64 = read_at(file, location - 20 - 56, 56)?;
            if e64.starts_with(b"PK\x06\x06") {
                size_cd = le64(&e64, 40);
                offset_cd = le64(&e64, 48);
                concat_adjust = 56 + 20;
            }
        }
    }
    // `concat = location - size_cd - offset_cd` (less the zip64 records): the directory is the
    // one ending at the end record, and every offset is moved by `concat`.
    let concat = i128::from(location) - i128::from(size_cd) - i128::from(offset_cd) - concat_adjust;
    let start = u64::try_from(i128::from(offset_cd) + concat).map_err(|_| "bad offset for the central directory")?;
    let cd = read_at(file, start, usize::try_from(size_cd).map_err(|_| "central directory too large")?)?;
    if (cd.len() as u64) < size_cd {
        return Err("truncated central directory".into());
    }
    let mut members = Vec::new();
    let mut p = 0usize;
    while p < cd.len() {
        let h = cd.get(p..p + 46).ok_or("truncated central directory")?;
        if !h.starts_with(b"PK\x01\x02") {
            return Err("bad magic number for the central directory".into());
        }
        let (n, m, k) = (le16(h, 28) as usize, le16(h, 30) as usize, le16(h, 32) as usize);
        let raw_name = cd.get(p + 46..p + 46 + n).ok_or("truncated central directory")?.to_vec();
        let flags = le16(h, 8);
        let orig = decode_name(&raw_name, flags)?;
        // `if x.extract_version > MAX_EXTRACT_VERSION: raise NotImplementedError` (63): the
        // whole wheel is unreadable, whichever entry says it.
        if h[6] > 63 {
            return Err(format!(
                "member {}: zip version {} needed to extract, which Python's zipfile (pip) does not read: refused",
                shown(&raw_name),
                h[6]
            ));
        }
        let extra = cd.get(p + 46 + n..p + 46 + n + m).ok_or("truncated central directory")?;
        let (mut file_size, mut compress_size, mut offset) = (le32(h, 24), le32(h, 20), le32(h, 42));
        // `ZipInfo._decodeExtra`: zip64 sizes and offset, in that order, where the field is full.
        let mut e = 0;
        while e + 4 <= extra.len() {
            let (id, len) = (le16(extra, e), le16(extra, e + 2) as usize);
            let body = extra.get(e + 4..e + 4 + len).ok_or("corrupt extra field")?;
            if id == 1 {
                let mut q = 0;
                for v in [&mut file_size, &mut compress_size, &mut offset] {
                    if *v == 0xFFFF_FFFF {
                        *v = if q + 8 <= body.len() {
                            le64(body, q)
                        } else {
                            return Err("corrupt zip64 extra field".into());
                        };
                        q += 8;
                    }
                }
            }
            e += 4 + len;
        }
        let offset = u64::try_from(i128::from(offset) + concat).map_err(|_| "bad offset for a local header")?;
        members.push(Member {
            raw_name,
            orig,
            flags: flags as u16,
            offset,
            method: le16(h, 10) as u16,
            compress_size,
            file_size,
        });
        p += 46 + n + m + k;
    }
    Ok(members)
}

/// A member's name in messages (the CLI escapes what it prints).
fn shown(raw: &[u8]) -> String {
    String::from_utf8_lossy(raw).into_owned()
}

/// Refuses what pip would not install as it reads, and what cudalint would read otherwise:
/// a central directory other than zipfile's, members sharing bytes, names that differ from
/// their local headers, compressions cudalint does not inflate, too much inflated data.
fn check_members(file: &File, size: u64, zip: &mut zip::ZipArchive<Reader<'_>>) -> Result<(), String> {
    let members = zipfile_members(file, size)?;
    // `ZipInfo.__init__` cuts a name at its first NUL (pip writes the file there); the zip
    // crate keeps the whole name.
    if let Some(m) = members.iter().find(|m| m.orig.contains('\0')) {
        return Err(format!(
            "member {}: its name holds a NUL byte (Python's zipfile, which pip installs with, cuts the name there): \
             refused",
            shown(&m.raw_name)
        ));
    }
    // What zipfile's `getinfo` returns for each name (`NameToInfo`, keyed by the decoded name):
    // its last entry.
    let mut last: HashMap<&str, &Member> = HashMap::new();
    for m in &members {
        last.insert(&m.orig, m);
    }
    let mut ours = HashMap::new();
    for i in 0..zip.len() {
        let f = zip.by_index_raw(i).map_err(|e| format!("member {i}: {e}"))?;
        ours.insert(f.name().to_string(), f.header_start());
    }
    let same = ours.len() == last.len() && last.iter().all(|(n, m)| ours.get(*n) == Some(&m.offset));
    if !same {
        return Err("its central directories disagree (Python's zipfile, which pip installs with, reads the one \
                    ending at the end record; another is there too, or bytes before the archive): refused"
            .into());
    }
    let mut spans = Vec::with_capacity(members.len());
    for m in &members {
        let h = read_at(file, m.offset, 30)?;
        if h.len() < 30 || !h.starts_with(b"PK\x03\x04") {
            return Err(format!("member {}: no local header where the central directory points", shown(&m.raw_name)));
        }
        let (n, k) = (le16(&h, 26), le16(&h, 28));
        let end = m.offset.saturating_add(30 + n + k).saturating_add(m.compress_size);
        spans.push((m.offset, end, n, m));
    }
    spans.sort_by_key(|s| s.0);
    for w in spans.windows(2) {
        if w[1].0 < w[0].1 {
            return Err(format!(
                "members {} and {} share bytes (overlapping entries, as a zip bomb has them; newer Pythons' \
                 zipfile refuses them too): refused",
                shown(&w[0].3.raw_name),
                shown(&w[1].3.raw_name)
            ));
        }
    }
    for &(at, _, n, m) in &spans {
        // `ZipFile.open`: the local name, decoded by the local header's own flag bit 11, is the
        // directory's.
        let flags = le16(&read_at(file, at, 30)?, 6);
        if decode_name(&read_at(file, at + 30, n as usize)?, flags)? != m.orig {
            return Err(format!(
                "member {}: its local header names another file (zipfile refuses it): refused",
                shown(&m.raw_name)
            ));
        }
    }
    let mut total = 0u64;
    for m in &members {
        if !std::ptr::eq(last[m.orig.as_str()], m) || m.orig.ends_with('/') {
            continue;
        }
        // `ZipFile.open`: patched data (bit 5) and strong encryption (bit 6) raise
        // NotImplementedError, encryption (bit 0) wants a password pip does not give.
        for (bit, what) in [(0x20, "compressed patched data"), (0x40, "strong encryption"), (0x1, "encryption")] {
            if m.flags & bit != 0 {
                return Err(format!(
                    "member {}: {what} (flag bits {:#x}), which Python's zipfile (pip) does not read: refused",
                    shown(&m.raw_name),
                    m.flags
                ));
            }
        }
        let what = match m.method {
            0 | 8 => None,
            12 => Some("bzip2 compression (method 12), which Python's zipfile reads and cudalint does not".to_string()),
            14 => Some("LZMA compression (method 14), which Python's zipfile reads and cudalint does not".to_string()),
            x => Some(format!("compression method {x}, which Python's zipfile (pip) does not read either")),
        };
        if let Some(what) = what {
            return Err(format!("member {}: {what}: refused", shown(&m.raw_name)));
        }
        total = total.saturating_add(m.file_size);
        if total > MAX_INFLATED {
            return Err(format!(
                "member {}: the members inflate to more than {MAX_INFLATED} bytes in all: refused",
                shown(&m.raw_name)
            ));
        }
    }
    Ok(())
}

pub fn scan(path: &Path, opts: &ScanOptions) -> Result<ImageReport, ScanError> {
    let file = File::open(path).map_err(|e| ScanError::io(path, e))?;
    let size = file.metadata().map_err(|e| ScanError::io(path, e))?.len();
    let summary = walk(&file, path, opts, true, |name: &str| name.to_string())?;
    let mut report = single_layer(SourceKind::Wheel, path.display().to_string(), size, summary);
    report.image.platform = platform_of(&path.file_name().unwrap_or_default().to_string_lossy());
    Ok(report)
}

/// pip's install scheme under `/usr/local`: a wheel member's path in the image.
pub fn installed_path(member: &str, data_dir: Option<&str>, python: (u32, u32)) -> String {
    let site = format!("usr/local/lib/python{}.{}/site-packages", python.0, python.1);
    if let Some(data) = data_dir
        && let Some(rest) = member.strip_prefix(data).and_then(|r| r.strip_prefix('/'))
    {
        let (kind, rest) = rest.split_once('/').unwrap_or((rest, ""));
        return match kind {
            "purelib" | "platlib" => format!("{site}/{rest}"),
            "scripts" => format!("usr/local/bin/{rest}"),
            "headers" => {
                let dist = data.trim_end_matches(".data").split('-').next().unwrap_or_default();
                format!("usr/local/include/python{}.{}/{dist}/{rest}", python.0, python.1)
            }
            _ => format!("usr/local/{rest}"),
        };
    }
    format!("{site}/{member}")
}

/// A wheel as pip installs it for Python `python` under `/usr/local` (`installed_path`:
/// site-packages, and `.data/` by pip's scheme): one layer of a lockfile's image. `file` is the
/// descriptor whose bytes were checked against the lock (never the path reopened: the file
/// there may have been replaced since); `path` names it in messages.
pub fn analyze_installed(
    file: &File,
    path: &Path,
    opts: &ScanOptions,
    python: (u32, u32),
) -> Result<crate::layer::analyze::LayerSummary, ScanError> {
    // The `<name>-<version>.data` directory: its first path component (one per wheel).
    let data = {
        let zip =
            zip::ZipArchive::new(reader(file)).map_err(|e| ScanError::input(path, format!("not a wheel: {e}")))?;
        zip.file_names().filter_map(|n| n.split('/').next()).find(|top| top.ends_with(".data")).map(str::to_string)
    };
    walk(file, path, opts, false, |name: &str| {
        format!("/{}", installed_path(name.trim_start_matches('/'), data.as_deref(), python))
    })
}

/// The file names a wheel stands for by its own `WHEEL` file, one per tag
/// (`demo_kernels-1.0.0-py3-none-manylinux_2_28_x86_64.whl`): read from `file`, whose bytes were
/// verified, for `project` `version` (its `.dist-info`). What a requirements line's hash alone
/// does not say: which platform the wheel is for.
pub fn tagged_names(file: &File, project: &str, version: &str) -> Result<Vec<String>, String> {
    let mut zip = zip::ZipArchive::new(reader(file)).map_err(|e| format!("not a wheel: {e}"))?;
    let info = zip
        .file_names()
        .filter_map(|n| n.strip_suffix(".dist-info/WHEEL"))
        .find(|stem| {
            stem.rsplit_once('-')
                .is_some_and(|(n, v)| crate::packages::pypi_normalize(n) == project && v.eq_ignore_ascii_case(version))
        })
        .map(str::to_string)
        .ok_or_else(|| format!("no {project}-{version} .dist-info/WHEEL in it"))?;
    let member = zip.by_name(&format!("{info}.dist-info/WHEEL")).map_err(|e| e.to_string())?;
    let mut text = String::new();
    // A WHEEL file is a few lines; a larger one is not read past 64 KiB.
    std::io::Read::read_to_string(&mut std::io::Read::take(member, 64 << 10), &mut text)
        .map_err(|e| format!("{info}.dist-info/WHEEL: {e}"))?;
    let names: Vec<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("Tag:"))
        .map(str::trim)
        .filter(|t| t.split('-').count() == 3 && !t.contains('/'))
        .map(|t| format!("{info}-{t}.whl"))
        .collect();
    if names.is_empty() {
        return Err(format!("{info}.dist-info/WHEEL names no tag"));
    }
    Ok(names)
}

/// A `Read + Seek` over one open file by position (`pread`), its own offset kept here: the
/// readers of one descriptor never move each other's place, and none reopens the path.
struct Reader<'a> {
    file: &'a File,
    pos: u64,
}

fn reader(file: &File) -> Reader<'_> {
    Reader { file, pos: 0 }
}

impl std::io::Read for Reader<'_> {
    fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
        let n = std::os::unix::fs::FileExt::read_at(self.file, b, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl std::io::Seek for Reader<'_> {
    fn seek(&mut self, to: std::io::SeekFrom) -> std::io::Result<u64> {
        let base = match to {
            std::io::SeekFrom::Start(n) => {
                self.pos = n;
                return Ok(n);
            }
            std::io::SeekFrom::End(d) => (self.file.metadata()?.len(), d),
            std::io::SeekFrom::Current(d) => (self.pos, d),
        };
        self.pos = base
            .0
            .checked_add_signed(base.1)
            .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidInput, "seek before the start"))?;
        Ok(self.pos)
    }
}

/// Every member streamed through the per-file analysis, named by `place` (its path in the
/// image, from its name in the wheel).
fn walk(
    file: &File,
    path: &Path,
    opts: &ScanOptions,
    root_is_site: bool,
    place: impl Fn(&str) -> String,
) -> Result<crate::layer::analyze::LayerSummary, ScanError> {
    let size = file.metadata().map_err(|e| ScanError::io(path, e))?.len();
    let mut zip =
        zip::ZipArchive::new(reader(file)).map_err(|e| ScanError::input(path, format!("not a wheel: {e}")))?;
    check_members(file, size, &mut zip).map_err(|e| ScanError::input(path, e))?;
    let mut v = FileVisitor::new(&opts.inspect);
    // Scanned as itself, a wheel's members are named as under its site directory.
    v.root_is_site = root_is_site;
    for i in 0..zip.len() {
        let mut member = zip.by_index(i).map_err(|e| ScanError::input(path, format!("member {i}: {e}")))?;
        v.summary.stats.entries += 1;
        // pip writes every name not ending in `/` as a file, with the member's bytes, whatever
        // its external attributes say (a symlink's or a gitlink's mode, a name ending in `\`).
        if member.name_raw().ends_with(b"/") {
            continue;
        }
        let Ok((name, _)) = normalize(member.name().as_bytes()) else { continue };
        let name = place(&name);
        let len = member.size();
        let want = v.wants(&name, len);
        // The wheel's own records (`*.dist-info/RECORD`) are not counted among its files.
        if !matches!(want, Want::Record(_)) {
            v.summary.stats.files += 1;
            v.summary.stats.file_bytes += len;
        }
        let bad = |e: std::io::Error| ScanError::input(path, format!("member {name}: {e}"));
        let mut input = StreamInput::new(&mut member, len);
        v.take(&name, want, &mut input).map_err(bad)?;
        // Every member is read to its end, skipped ones too: the zip reader checks a member's
        // size and CRC only there, so a corrupt one fails the scan rather than passing because
        // the analysis stopped early.
        std::io::copy(&mut InputReader(&mut input), &mut std::io::sink()).map_err(bad)?;
        let mut extra = [0u8; 1];
        if std::io::Read::read(&mut member, &mut extra).map_err(bad)? != 0 {
            return Err(bad(std::io::Error::other("member is longer than its recorded size")));
        }
    }
    Ok(v.finish())
}

/// The platform a wheel's file name says it is for (`...-manylinux_2_28_x86_64.whl` ->
/// `linux/amd64`); None for pure or unknown wheels.
fn platform_of(file: &str) -> Option<String> {
    let tag = file.strip_suffix(".whl")?.rsplit('-').next()?;
    let linux =
        tag.split('.').all(|t| t.starts_with("manylinux") || t.starts_with("musllinux") || t.starts_with("linux"));
    let arch = if tag.ends_with("x86_64") {
        "amd64"
    } else if tag.ends_with("aarch64") {
        "arm64"
    } else {
        return None;
    };
    linux.then(|| format!("linux/{arch}"))
}

#[cfg(test)]
mod platform_tests {
    #[test]
    fn a_wheels_platform_tag_names_its_platform() {
        use super::platform_of;
        let f = "nvidia_nvjpeg_cu12-12.4.0.76-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl";
        assert_eq!(platform_of(f).as_deref(), Some("linux/amd64"));
        assert_eq!(platform_of("torch-2.10.0-cp311-cp311-manylinux_2_28_aarch64.whl").as_deref(), Some("linux/arm64"));
        assert_eq!(platform_of("filelock-4.3.1-py3-none-any.whl"), None);
        assert_eq!(platform_of("torch-2.10.0-cp311-cp311-win_amd64.whl"), None);
    }
}
