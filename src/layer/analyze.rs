//! One layer, one pass: walks its tar, records what later merging needs (every path, whiteouts,
//! opaque directories, symlinks, hard links), and inspects the files that can carry CUDA code.
//! Layers are analysed independently, so they can be read in parallel or in stream order.

use std::collections::HashMap;
use std::io;

use serde::{Deserialize, Serialize};

use super::path::{self, escape, file_name, hash, join, normalize, parent};
use super::sparse::SparseInput;
use super::tar::{Kind, TarEntry, TarError, TarWalker};
use crate::input::{Input, SubInput, read_full};
use crate::inspect::elf::is_cuda_library;
use crate::inspect::{FileFormat, FileReport, HEAD, InspectOptions, Sniffed, inspect_sniffed, sniff};

/// Smaller files cannot hold an ELF header or a fatbin container.
const MIN_CANDIDATE: u64 = 16;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LayerFile {
    /// Every path of the file (hard links); the first is the one it was stored under.
    pub paths: Vec<String>,
    pub report: FileReport,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct LayerSummary {
    pub files: Vec<LayerFile>,
    /// Every path this layer puts in the filesystem, as its 128-bit hash with the lowest bit
    /// replaced by "not a directory"; sorted once the walk ends. One flat array: 16 bytes an
    /// entry, so a layer of 4 M entries costs 64 MiB, not the ~300 MiB of two hash sets.
    pub path_hashes: Vec<u128>,
    /// Sorted (see [`LayerSummary::finish`]).
    pub whiteouts: Vec<String>,
    /// Sorted.
    pub opaque: Vec<String>,
    /// (path, target as written).
    pub symlinks: Vec<(String, String)>,
    pub stats: LayerStats,
    /// Oddities that did not stop the walk (hostile paths).
    pub notes: Vec<String>,
    /// What package managers' records in this layer say (who owns which file).
    #[serde(default)]
    pub packages: crate::packages::LayerPackages,
}

#[derive(Debug, Default, Clone, Copy, Serialize, Deserialize)]
pub struct LayerStats {
    pub entries: u64,
    pub files: u64,
    pub file_bytes: u64,
    pub inspected: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum LayerError {
    #[error("{0}")]
    Tar(#[from] TarError),
    #[error("{0}")]
    Io(#[from] io::Error),
}

pub fn analyze(input: &mut dyn Input, opts: &InspectOptions) -> Result<LayerSummary, LayerError> {
    let mut s = LayerSummary::default();
    let mut by_path: HashMap<String, usize> = HashMap::new();
    let mut walker = TarWalker::new(input);
    while let Some(e) = walker.next_entry()? {
        s.stats.entries += 1;
        let (p, climbed) = match normalize(&e.path) {
            Ok(x) => x,
            Err(m) => {
                s.notes.push(format!("tar entry at {:#x}: {m}; skipped", e.header_offset));
                continue;
            }
        };
        if climbed {
            s.notes.push(format!("tar entry {:?} climbs above the image root; read as {p}", escape(&e.path)));
        }
        if let Some(rest) = file_name(&p).strip_prefix(".wh.") {
            if rest == ".wh..opq" {
                s.opaque.push(parent(&p).to_string());
            } else {
                s.whiteouts.push(join(parent(&p), rest));
            }
            continue;
        }
        s.path_hashes.push(entry_key(&p, e.kind != Kind::Dir));
        // A later entry for the same path replaces an earlier one (duplicate entries).
        if let Some(i) = by_path.remove(&p) {
            s.files[i].paths.retain(|x| x != &p);
        }
        match e.kind {
            Kind::Symlink => {
                let target = escape(e.link.as_deref().unwrap_or_default()).into_owned();
                s.symlinks.push((p, target));
            }
            Kind::Hardlink => {
                let target = e.link.as_deref().map(normalize).and_then(Result::ok).map(|t| t.0);
                if let Some(&i) = target.as_ref().and_then(|t| by_path.get(t)) {
                    s.files[i].paths.push(p.clone());
                    by_path.insert(p, i);
                }
            }
            Kind::File | Kind::Sparse => {
                s.stats.files += 1;
                s.stats.file_bytes += e.size;
                if let Some(kind) = crate::packages::record_kind(&p) {
                    read_record(&mut s, walker.input(), &e, kind, &p)?;
                    continue;
                }
                if e.size < MIN_CANDIDATE {
                    continue;
                }
                let report = inspect_entry(walker.input(), &e, &p, opts, &mut s.stats)
                    // Name the file: a read that fails inside it is not a bad header.
                    .map_err(|err| io::Error::new(err.kind(), format!("{p}: {err}")))?;
                let named = is_cuda_library(file_name(&p));
                if report.cuda_relevant() || named {
                    by_path.insert(p.clone(), s.files.len());
                    s.files.push(LayerFile { paths: vec![p], report });
                }
            }
            Kind::Dir | Kind::Other => {}
        }
    }
    s.files.retain(|f| !f.paths.is_empty());
    for f in &mut s.files {
        f.report.path = f.paths[0].clone();
    }
    s.finish();
    Ok(s)
}

/// A package manager's record (small text), read whole; too large ones are noted, not read:
/// they only name packages, never device code.
fn read_record(
    s: &mut LayerSummary,
    input: &mut dyn Input,
    e: &super::tar::TarEntry,
    kind: crate::packages::Record,
    p: &str,
) -> Result<(), LayerError> {
    if e.size > crate::packages::MAX_METADATA {
        s.notes.push(format!("{p}: package record of {} bytes not read", e.size));
        return Ok(());
    }
    let mut sub = SubInput::new(input, e.data_offset, e.size)?;
    let mut buf = vec![0u8; e.size as usize];
    let n = read_full(&mut sub, &mut buf)?;
    s.packages.read(kind, p, &String::from_utf8_lossy(&buf[..n]));
    Ok(())
}

/// Inspects one file entry (read through its sparse map when it has one).
fn inspect_entry(
    input: &mut dyn Input,
    e: &TarEntry,
    p: &str,
    opts: &InspectOptions,
    stats: &mut LayerStats,
) -> io::Result<FileReport> {
    let mut sub: Box<dyn Input + '_> = match &e.sparse {
        Some(map) => Box::new(SparseInput::new(input, e.data_offset, map, e.size)?),
        None => Box::new(SubInput::new(input, e.data_offset, e.size)?),
    };
    let sub = &mut *sub;
    let mut head = [0u8; HEAD];
    let n = read_full(sub, &mut head)?;
    Ok(if sniff(&head[..n], p) != Sniffed::Other {
        stats.inspected += 1;
        inspect_sniffed(&head[..n], sub, p, opts, 0)?
    } else {
        FileReport::new(p.to_string(), e.size, FileFormat::Other)
    })
}

fn entry_key(p: &str, nondir: bool) -> u128 {
    (hash(p) & !1) | u128::from(nondir)
}

impl LayerSummary {
    /// Sorts what [`LayerSummary::hides`] searches (cheap when already sorted).
    pub fn finish(&mut self) {
        self.path_hashes.sort_unstable();
        self.path_hashes.dedup();
        self.path_hashes.shrink_to_fit();
        self.whiteouts.sort_unstable();
        self.whiteouts.dedup();
        self.opaque.sort_unstable();
        self.opaque.dedup();
    }

    fn has_entry(&self, p: &str, nondir_only: bool) -> bool {
        let nondir = entry_key(p, true);
        self.path_hashes.binary_search(&nondir).is_ok()
            || (!nondir_only && self.path_hashes.binary_search(&(nondir & !1)).is_ok())
    }

    /// Whether this layer removes or replaces `p` as left by the layers below it. Looks up `p`
    /// and each of its ancestors: O(depth × log n), whatever the number of whiteouts.
    pub fn hides(&self, p: &str) -> bool {
        let listed = |v: &[String], x: &str| v.binary_search_by(|w| w.as_str().cmp(x)).is_ok();
        // A whiteout of `p` or of a directory above it; an opaque directory above it.
        listed(&self.whiteouts, p)
            || listed(&self.whiteouts, "/")
            || (listed(&self.opaque, "/") && p != "/")
            || path::ancestors(p).any(|a| listed(&self.whiteouts, a) || listed(&self.opaque, a))
            || self.has_entry(p, false)
            || path::ancestors(p).any(|a| self.has_entry(a, true))
    }
}
