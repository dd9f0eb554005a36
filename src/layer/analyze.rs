//! One layer, one pass: walks its tar, records what later merging needs (every path, whiteouts,
//! opaque directories, symlinks, hard links), and inspects the files that can carry CUDA code.
//! Layers are analysed independently, so they can be read in parallel or in stream order.

use std::collections::{HashMap, HashSet};
use std::io;

use serde::{Deserialize, Serialize};

use super::path::{self, file_name, hash, join, normalize, parent};
use super::tar::{Kind, TarError, TarWalker};
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
    /// Hashes of every path this layer puts in the filesystem.
    pub entries: HashSet<u128>,
    /// Hashes of the paths it puts there as something other than a directory.
    pub nondirs: HashSet<u128>,
    pub whiteouts: Vec<String>,
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
            s.notes.push(format!(
                "tar entry {:?} climbs above the image root; read as {p}",
                String::from_utf8_lossy(&e.path)
            ));
        }
        if let Some(rest) = file_name(&p).strip_prefix(".wh.") {
            if rest == ".wh..opq" {
                s.opaque.push(parent(&p).to_string());
            } else {
                s.whiteouts.push(join(parent(&p), rest));
            }
            continue;
        }
        let h = hash(&p);
        s.entries.insert(h);
        if e.kind != Kind::Dir {
            s.nondirs.insert(h);
        }
        // A later entry for the same path replaces an earlier one (duplicate entries).
        if let Some(i) = by_path.remove(&p) {
            s.files[i].paths.retain(|x| x != &p);
        }
        match e.kind {
            Kind::Symlink => {
                let target = String::from_utf8_lossy(e.link.as_deref().unwrap_or_default()).into_owned();
                s.symlinks.push((p, target));
            }
            Kind::Hardlink => {
                let target = e.link.as_deref().map(normalize).and_then(Result::ok).map(|t| t.0);
                if let Some(&i) = target.as_ref().and_then(|t| by_path.get(t)) {
                    s.files[i].paths.push(p.clone());
                    by_path.insert(p, i);
                }
            }
            Kind::File => {
                s.stats.files += 1;
                s.stats.file_bytes += e.size;
                if let Some(kind) = crate::packages::record_kind(&p) {
                    read_record(&mut s, walker.input(), &e, kind, &p)?;
                    continue;
                }
                if e.size < MIN_CANDIDATE {
                    continue;
                }
                let mut sub = SubInput::new(walker.input(), e.data_offset, e.size)?;
                let mut head = [0u8; HEAD];
                let n = read_full(&mut sub, &mut head)?;
                let named = is_cuda_library(file_name(&p));
                let report = if sniff(&head[..n], &p) != Sniffed::Other {
                    s.stats.inspected += 1;
                    inspect_sniffed(&head[..n], &mut sub, &p, opts, 0)?
                } else {
                    FileReport::new(p.clone(), e.size, FileFormat::Other)
                };
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

impl LayerSummary {
    /// Whether this layer removes or replaces `p` as left by the layers below it.
    pub fn hides(&self, p: &str) -> bool {
        self.whiteouts.iter().any(|w| path::within(p, w))
            || self.opaque.iter().any(|d| p != d && path::within(p, d))
            || self.entries.contains(&hash(p))
            || path::ancestors(p).any(|a| self.nondirs.contains(&hash(a)))
    }
}
