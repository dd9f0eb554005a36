//! OCI image layout directories: a [`LayerSource`] whose blobs are files, opened without
//! following links.

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use super::oci::{self, Platform, Resolved, Store};
use super::pipeline::{Blob, LayerSource};
use super::{ScanError, SourceKind};
use crate::digest::MAX_JSON;
use crate::layer::LayerRef;

struct DirStore {
    root: PathBuf,
}

/// Opens `key` (`blobs/sha256/...`, `index.json`) inside an OCI layout without following any
/// symbolic link (a blob linked to a host file, a FIFO or `/dev/zero` is refused, and opening
/// never blocks): every component is checked, the last opened with `O_NOFOLLOW` and must be a
/// regular file.
pub fn open_in_layout(root: &Path, key: &str) -> Result<(File, u64), ScanError> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let shown = root.join(key);
    let refuse = |why: &str| ScanError::input(&shown, why);
    let parts: Vec<&str> = key.split('/').collect();
    if parts.iter().any(|c| c.is_empty() || *c == "." || *c == "..") {
        return Err(refuse("not a plain path inside the layout"));
    }
    let mut p = root.to_path_buf();
    for c in &parts[..parts.len() - 1] {
        p.push(c);
        let m = std::fs::symlink_metadata(&p).map_err(|e| ScanError::io(&p, e))?;
        if !m.is_dir() {
            return Err(ScanError::input(&p, "not a directory (links inside an OCI layout are not followed)"));
        }
    }
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(&shown)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => refuse("a symbolic link (links inside an OCI layout are not followed)"),
            _ => ScanError::io(&shown, e),
        })?;
    let m = f.metadata().map_err(|e| ScanError::io(&shown, e))?;
    if !m.is_file() {
        return Err(refuse("not a regular file"));
    }
    if m.nlink() == 0 {
        return Err(refuse("removed while being read"));
    }
    Ok((f, m.len()))
}

impl Store for DirStore {
    fn read_small(&mut self, key: &str) -> Result<Vec<u8>, ScanError> {
        let (f, len) = open_in_layout(&self.root, key)?;
        let p = self.root.join(key);
        if len > MAX_JSON {
            return Err(ScanError::input(&p, format!("{len} bytes, more than a manifest can be")));
        }
        let mut v = Vec::with_capacity(len as usize);
        // Bounded even if the file grows while it is read.
        f.take(MAX_JSON + 1).read_to_end(&mut v).map_err(|e| ScanError::io(&p, e))?;
        if v.len() as u64 > MAX_JSON {
            return Err(ScanError::input(&p, "more than a manifest can be"));
        }
        Ok(v)
    }
}

/// An OCI image layout directory, as a layer source.
pub struct LayoutDir {
    store: DirStore,
    want: Option<String>,
    /// Every layer's blob, opened by `prepare`, by key.
    files: HashMap<String, (File, u64)>,
}

impl LayoutDir {
    pub fn new(dir: &Path, want: Option<&str>) -> LayoutDir {
        LayoutDir { store: DirStore { root: dir.to_path_buf() }, want: want.map(str::to_string), files: HashMap::new() }
    }
}

impl LayerSource for LayoutDir {
    fn kind(&self) -> SourceKind {
        SourceKind::Oci
    }

    fn resolve(&mut self, platform: &Platform) -> Result<Resolved, ScanError> {
        let mut r = oci::resolve_oci(&mut self.store, self.want.as_deref(), platform)?;
        r.name = oci::qualify_tag(r.name, &self.store.root);
        Ok(r)
    }

    fn prepare(&mut self, layers: &[LayerRef]) -> Result<Option<u64>, ScanError> {
        let mut total = 0;
        for l in layers {
            let (f, len) = open_in_layout(&self.store.root, &l.key)
                .map_err(|e| ScanError::Layer { layer: l.id(), message: e.to_string() })?;
            total += len;
            self.files.insert(l.key.clone(), (f, len));
        }
        Ok(Some(total))
    }

    fn open(&self, l: &LayerRef) -> Result<Blob<'_>, ScanError> {
        let (file, len) = self.files.get(&l.key).expect("prepare opened every layer");
        Ok(Blob::Seekable { file, off: 0, len: *len })
    }
}
