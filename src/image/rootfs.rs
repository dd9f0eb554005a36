//! Root filesystems on disk (`dir:`, or `/` inside a running container) and single files: no
//! layers, every file handed to the per-file analysis and read in place with seeks. Package
//! records on disk (a venv's dist-info, a dpkg database) name the files' packages as in images.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::{ImageReport, ScanError, ScanOptions, SourceKind, single_layer};
use crate::input::{FileInput, read_full};
use crate::layer::analyze::{FileVisitor, Want};
use crate::layer::decode::Compression;

/// Kernel filesystems that are not part of an image, skipped when scanning `/`.
const PSEUDO: &[&str] = &["/proc", "/sys", "/dev", "/run"];

/// Hands a file on disk to the analysis, read in place with seeks.
fn take(v: &mut FileVisitor, real: &Path, image_path: &str, size: u64, want: Want) -> std::io::Result<Option<usize>> {
    let file = File::open(real)?;
    v.take(image_path, want, &mut FileInput::new(&file, 0, size))
}

/// Walks a root filesystem. Fail closed: a directory or file that cannot be listed, examined or
/// read (permissions, a path longer than the kernel accepts) stops the scan with its path,
/// never a note: what was not read may hold what the runtime loads.
pub fn scan_dir(root: &Path, opts: &ScanOptions) -> Result<ImageReport, ScanError> {
    let root_meta = std::fs::metadata(root).map_err(|e| ScanError::io(root, e))?;
    if !root_meta.is_dir() {
        return Err(ScanError::input(root, "not a directory (dir: wants a root filesystem)"));
    }
    let mut v = FileVisitor::new(&opts.inspect);
    let mut by_inode: HashMap<(u64, u64), usize> = HashMap::new();
    let whole_system = root.canonicalize().is_ok_and(|r| r == Path::new("/"));
    let mut stack = vec![(root.to_path_buf(), String::from(""))];
    let unreadable =
        |p: &Path, e: std::io::Error| ScanError::input(p, format!("cannot be read, so the scan is incomplete: {e}"));
    while let Some((dir, image_dir)) = stack.pop() {
        let rd = std::fs::read_dir(&dir).map_err(|e| unreadable(&dir, e))?;
        let mut entries = rd.collect::<Result<Vec<_>, _>>().map_err(|e| unreadable(&dir, e))?;
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let s = &mut v.summary;
            let name = e.file_name().to_string_lossy().into_owned();
            let image_path = format!("{image_dir}/{name}");
            let meta = e.path().symlink_metadata().map_err(|err| unreadable(&e.path(), err))?;
            s.stats.entries += 1;
            if meta.is_dir() {
                if whole_system && PSEUDO.contains(&image_path.as_str()) {
                    continue;
                }
                stack.push((e.path(), image_path));
            } else if meta.file_type().is_symlink() {
                let t = std::fs::read_link(e.path()).map_err(|err| unreadable(&e.path(), err))?;
                s.symlinks.push((image_path, t.to_string_lossy().into_owned()));
            } else if meta.is_file() {
                s.stats.files += 1;
                s.stats.file_bytes += meta.len();
                let key = (meta.dev(), meta.ino());
                if let Some(&i) = by_inode.get(&key) {
                    s.files[i].paths.push(image_path);
                    continue;
                }
                let want = v.wants(&image_path, meta.len());
                if matches!(want, Want::Skip) {
                    continue;
                }
                let kept =
                    take(&mut v, &e.path(), &image_path, meta.len(), want).map_err(|err| unreadable(&e.path(), err))?;
                if let Some(i) = kept
                    && meta.nlink() > 1
                {
                    by_inode.insert(key, i);
                }
            }
        }
    }
    let s = v.finish();
    Ok(single_layer(SourceKind::Dir, root.display().to_string(), s.stats.file_bytes, s))
}

/// One file (`file:`). A plain library without CUDA passes; an empty file, or one that looks like
/// an image archive (tar, gzip, zstd), is refused: scanned as a plain file it would hide
/// whatever it holds.
pub fn scan_file(path: &Path, opts: &ScanOptions) -> Result<ImageReport, ScanError> {
    let meta = std::fs::metadata(path).map_err(|e| ScanError::io(path, e))?;
    if !meta.is_file() {
        return Err(ScanError::input(path, "not a regular file"));
    }
    if meta.len() == 0 {
        return Err(ScanError::input(path, "empty file: nothing to scan"));
    }
    {
        let file = File::open(path).map_err(|e| ScanError::io(path, e))?;
        let mut head = [0u8; 512];
        let n = read_full(&mut FileInput::new(&file, 0, meta.len()), &mut head).map_err(|e| ScanError::io(path, e))?;
        let head = &head[..n];
        if crate::layer::decode::sniff(head) != Compression::None
            || crate::layer::tar::looks_like_tar(head)
            || super::tar_magic(head)
        {
            return Err(ScanError::input(
                path,
                "an archive (tar, gzip, zstd, xz or bzip2), not a single binary: scan it without the file: prefix",
            ));
        }
    }
    let name = format!("/{}", path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default());
    let mut v = FileVisitor::new(&opts.inspect);
    v.summary.stats.files = 1;
    v.summary.stats.file_bytes = meta.len();
    // Inspected whatever its size or name: it is what was asked for.
    take(&mut v, path, &name, meta.len(), Want::Inspect).map_err(|e| ScanError::io(path, e))?;
    Ok(single_layer(SourceKind::File, path.display().to_string(), meta.len(), v.finish()))
}
