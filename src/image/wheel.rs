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
    Ok(single_layer(SourceKind::Wheel, path.display().to_string(), size, v.finish()))
}
