//! Python wheels (zip): each member streamed through the inspector as it is inflated, named by
//! its path inside the wheel (`/torch/lib/libtorch_cuda.so`).

use std::fs::File;
use std::path::Path;

use super::{ImageReport, ScanError, ScanOptions, single_layer};
use crate::input::{StreamInput, read_full};
use crate::inspect::elf::is_cuda_library;
use crate::inspect::{FileFormat, FileReport, HEAD, Sniffed, inspect_sniffed, sniff};
use crate::layer::analyze::{LayerFile, LayerSummary};
use crate::layer::path::{file_name, normalize};

pub fn scan(path: &Path, opts: &ScanOptions) -> Result<ImageReport, ScanError> {
    let file = File::open(path).map_err(|e| ScanError::io(path, e))?;
    let size = file.metadata().map_err(|e| ScanError::io(path, e))?.len();
    let mut zip = zip::ZipArchive::new(file).map_err(|e| ScanError::input(path, format!("not a wheel: {e}")))?;
    let mut s = LayerSummary::default();
    for i in 0..zip.len() {
        let mut member = zip.by_index(i).map_err(|e| ScanError::input(path, format!("member {i}: {e}")))?;
        s.stats.entries += 1;
        if !member.is_file() {
            continue;
        }
        let Ok((name, _)) = normalize(member.name().as_bytes()) else { continue };
        // The wheel's own record (`*.dist-info/RECORD`) ties its files to the package.
        if let Some(kind) = crate::packages::record_kind(&name)
            && member.size() <= crate::packages::MAX_METADATA
        {
            let mut text = Vec::new();
            std::io::Read::read_to_end(&mut member, &mut text)
                .map_err(|e| ScanError::input(path, format!("{name}: {e}")))?;
            s.packages.read(kind, &name, &String::from_utf8_lossy(&text));
            continue;
        }
        let len = member.size();
        s.stats.files += 1;
        s.stats.file_bytes += len;
        let bad = |e: std::io::Error| ScanError::input(path, format!("{name}: {e}"));
        if len < 16 {
            // Read anyway: the zip reader checks the member's size and CRC only at its end.
            std::io::copy(&mut member, &mut std::io::sink()).map_err(bad)?;
            continue;
        }
        let mut input = StreamInput::new(&mut member, len);
        let mut head = [0u8; HEAD];
        let n = read_full(&mut input, &mut head).map_err(bad)?;
        let report = if sniff(&head[..n], &name) != Sniffed::Other {
            s.stats.inspected += 1;
            inspect_sniffed(&head[..n], &mut input, &name, &opts.inspect, 0).map_err(bad)?
        } else {
            FileReport::new(name.clone(), len, FileFormat::Other)
        };
        // The rest of the member, so a corrupt one (CRC, size) fails the scan rather than passing
        // because the inspector stopped early.
        std::io::copy(&mut crate::input::InputReader(&mut input), &mut std::io::sink()).map_err(bad)?;
        let mut extra = [0u8; 1];
        if std::io::Read::read(&mut member, &mut extra).map_err(bad)? != 0 {
            return Err(bad(std::io::Error::other("member is longer than its recorded size")));
        }
        if report.cuda_relevant() || is_cuda_library(file_name(&name)) {
            s.files.push(LayerFile { paths: vec![name], report });
        }
    }
    Ok(single_layer("wheel", path.display().to_string(), size, s))
}
