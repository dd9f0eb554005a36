//! Root filesystems on disk (`dir:`, or `/` inside a running container) and single files: no
//! layers, every file read in place with seeks.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::{AnalyzedLayer, ImageReport, LayerInfo, ScanError, ScanOptions, assemble};
use crate::input::{FileInput, read_full};
use crate::inspect::elf::is_cuda_library;
use crate::inspect::{FileFormat, FileReport, HEAD, Sniffed, inspect_sniffed, sniff};
use crate::layer::analyze::{LayerFile, LayerSummary};
use crate::layer::decode::Compression;
use crate::layer::path::file_name;

/// Kernel filesystems that are not part of an image, skipped when scanning `/`.
const PSEUDO: &[&str] = &["/proc", "/sys", "/dev", "/run"];

fn inspect_path(real: &Path, image_path: &str, size: u64, opts: &ScanOptions) -> std::io::Result<Option<FileReport>> {
    let file = File::open(real)?;
    let mut input = FileInput::new(&file, 0, size);
    let mut head = [0u8; HEAD];
    let n = read_full(&mut input, &mut head)?;
    let report = if sniff(&head[..n], image_path) != Sniffed::Other {
        inspect_sniffed(&head[..n], &mut input, image_path, &opts.inspect, 0)?
    } else {
        FileReport::new(image_path.to_string(), size, FileFormat::Other)
    };
    Ok((report.cuda_relevant() || is_cuda_library(file_name(image_path))).then_some(report))
}

pub fn scan_dir(root: &Path, opts: &ScanOptions) -> Result<ImageReport, ScanError> {
    let mut s = LayerSummary::default();
    let mut by_inode: HashMap<(u64, u64), usize> = HashMap::new();
    let whole_system = root.canonicalize().is_ok_and(|r| r == Path::new("/"));
    let mut stack = vec![(root.to_path_buf(), String::from(""))];
    let mut found: BTreeMap<String, ()> = BTreeMap::new();
    while let Some((dir, image_dir)) = stack.pop() {
        let rd = match std::fs::read_dir(&dir) {
            Ok(rd) => rd,
            Err(e) => {
                s.notes.push(format!("{}: {e}", dir.display()));
                continue;
            }
        };
        let mut entries: Vec<_> = rd.filter_map(Result::ok).collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let name = e.file_name().to_string_lossy().into_owned();
            let image_path = format!("{image_dir}/{name}");
            let Ok(meta) = e.path().symlink_metadata() else { continue };
            s.stats.entries += 1;
            if meta.is_dir() {
                if whole_system && PSEUDO.contains(&image_path.as_str()) {
                    continue;
                }
                stack.push((e.path(), image_path));
            } else if meta.file_type().is_symlink() {
                if let Ok(t) = std::fs::read_link(e.path()) {
                    s.symlinks.push((image_path, t.to_string_lossy().into_owned()));
                }
            } else if meta.is_file() {
                s.stats.files += 1;
                s.stats.file_bytes += meta.len();
                let key = (meta.dev(), meta.ino());
                if let Some(&i) = by_inode.get(&key) {
                    s.files[i].paths.push(image_path);
                    continue;
                }
                if meta.len() < 16 {
                    continue;
                }
                s.stats.inspected += 1;
                match inspect_path(&e.path(), &image_path, meta.len(), opts) {
                    Ok(Some(report)) => {
                        if meta.nlink() > 1 {
                            by_inode.insert(key, s.files.len());
                        }
                        found.insert(image_path.clone(), ());
                        s.files.push(LayerFile { paths: vec![image_path], report });
                    }
                    Ok(None) => {}
                    Err(err) => s.notes.push(format!("{image_path}: {err}")),
                }
            }
        }
    }
    let layer = AnalyzedLayer {
        info: LayerInfo {
            digest: String::new(),
            diff_id: None,
            size: s.stats.file_bytes,
            compression: Compression::None,
            verified: false,
            stats: s.stats,
        },
        summary: s,
    };
    let mut report = assemble("dir", None, Some(root.display().to_string()), vec![layer]);
    report.image.layers.clear();
    Ok(report)
}

pub fn scan_file(path: &Path, opts: &ScanOptions) -> Result<ImageReport, ScanError> {
    let meta = std::fs::metadata(path).map_err(|e| ScanError::io(path, e))?;
    let name = format!("/{}", path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default());
    let mut s = LayerSummary::default();
    s.stats.files = 1;
    s.stats.file_bytes = meta.len();
    s.stats.inspected = 1;
    if let Some(r) = inspect_path(path, &name, meta.len(), opts).map_err(|e| ScanError::io(path, e))? {
        s.files.push(LayerFile { paths: vec![name], report: r });
    }
    let layer = AnalyzedLayer {
        info: LayerInfo {
            digest: String::new(),
            diff_id: None,
            size: meta.len(),
            compression: Compression::None,
            verified: false,
            stats: s.stats,
        },
        summary: s,
    };
    let mut report = assemble("file", None, Some(path.display().to_string()), vec![layer]);
    report.image.layers.clear();
    Ok(report)
}
