//! Python wheels (zip): each member streamed through the per-file analysis as it is inflated,
//! named by its path inside the wheel (`/torch/lib/libtorch_cuda.so`).

use std::fs::File;
use std::path::Path;

use super::{ImageReport, ScanError, ScanOptions, SourceKind, single_layer};
use crate::input::{InputReader, StreamInput};
use crate::layer::analyze::{FileVisitor, Want};
use crate::layer::path::normalize;

pub fn scan(path: &Path, opts: &ScanOptions) -> Result<ImageReport, ScanError> {
    let file = File::open(path).map_err(|e| ScanError::io(path, e))?;
    let size = file.metadata().map_err(|e| ScanError::io(path, e))?.len();
    let mut zip = zip::ZipArchive::new(file).map_err(|e| ScanError::input(path, format!("not a wheel: {e}")))?;
    let mut v = FileVisitor::new(&opts.inspect);
    for i in 0..zip.len() {
        let mut member = zip.by_index(i).map_err(|e| ScanError::input(path, format!("member {i}: {e}")))?;
        v.summary.stats.entries += 1;
        if !member.is_file() {
            continue;
        }
        let Ok((name, _)) = normalize(member.name().as_bytes()) else { continue };
        let len = member.size();
        let want = v.wants(&name, len);
        // The wheel's own records (`*.dist-info/RECORD`) are not counted among its files.
        if !matches!(want, Want::Record(_)) {
            v.summary.stats.files += 1;
            v.summary.stats.file_bytes += len;
        }
        let bad = |e: std::io::Error| ScanError::input(path, format!("{name}: {e}"));
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
    let mut report = single_layer(SourceKind::Wheel, path.display().to_string(), size, v.finish());
    report.image.platform = platform_of(&path.file_name().unwrap_or_default().to_string_lossy());
    Ok(report)
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
