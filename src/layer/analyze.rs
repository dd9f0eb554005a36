//! One layer, one pass: walks its tar, records what later merging needs (every path, whiteouts,
//! opaque directories, symlinks, hard links), and hands each file to the [`FileVisitor`], the
//! one per-file analysis (package records, CUDA files) that the zip and directory walks feed too.
//! Layers are analysed independently, so they can be read in parallel or in stream order.

use std::collections::HashMap;
use std::io;

use serde::{Deserialize, Serialize};

use super::path::{self, escape, file_name, hash, join, normalize, parent};
use super::sparse::SparseInput;
use super::tar::{Kind, TarEntry, TarError, TarWalker};
use crate::input::{Input, InputReader, SubInput, read_full};
use crate::inspect::elf::is_cuda_library;
use crate::inspect::{FileFormat, FileReport, HEAD, InspectOptions, Sniffed, inspect_sniffed, sniff};
use crate::packages::{Reader, Record, RecordData};

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
    /// Hard links whose target is no file kept earlier in this layer, (path, normalized
    /// target): the merge resolves them against the layers below and through symbolic links.
    #[serde(default)]
    pub hardlinks: Vec<(String, String)>,
    pub stats: LayerStats,
    /// Oddities that did not stop the walk (hostile paths).
    pub notes: Vec<String>,
    /// What package managers' records in this layer say (who owns which file).
    #[serde(default)]
    pub packages: crate::packages::LayerPackages,
    /// Packages' `.py` files: what each imports of its own package (`python.rs`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub python: Vec<super::python::PyFile>,
    /// Some `.py` files were past the layer's bound ([`super::python::MAX_KEPT`]) and not
    /// recorded: no package's imports are known for sure.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub python_cut: bool,
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

/// What the analysis wants of a file, decided from its path and size before any byte is read.
#[derive(Debug, Clone, Copy)]
pub enum Want {
    /// A package manager's record, by its path: read whole. One larger than its kind's bound
    /// ([`Record::max`]) is no record; it is noted and inspected like any file (whatever a path
    /// is called, what it holds may be loaded by that path).
    Record(&'static Record),
    /// May carry device code: sniffed, and inspected if it looks like ELF, a fatbin, an archive
    /// or PTX.
    Inspect,
    /// A package's `.py` file: its imports read (`python.rs`).
    Python,
    /// Too small for an ELF header or a fatbin container: never read.
    Skip,
}

/// The per-file analysis every walk feeds (Trivy's AnalyzerGroup): the tar walk below, the zip
/// walk of wheels (`image/wheel.rs`) and the directory walk (`image/rootfs.rs`) only hand it the
/// files of their container format, so all of them read package records and keep CUDA files
/// alike.
pub struct FileVisitor<'o> {
    opts: &'o InspectOptions,
    /// The summary so far. Walks add what only their format knows (entries, file counts,
    /// whiteouts, symlinks, hard links, notes); the visitor adds the files it keeps, the package
    /// records and `stats.inspected`.
    pub summary: LayerSummary,
    /// Bytes of `.py` records kept toward [`super::python::MAX_KEPT`].
    python_kept: usize,
    /// Paths are relative to a site directory (a wheel scanned as itself: `/pkg/mod.py`).
    pub root_is_site: bool,
}

impl<'o> FileVisitor<'o> {
    pub fn new(opts: &'o InspectOptions) -> Self {
        FileVisitor { opts, summary: LayerSummary::default(), python_kept: 0, root_is_site: false }
    }

    /// Asked for every regular file before any of its bytes is read.
    pub fn wants(&self, path: &str, size: u64) -> Want {
        if let Some(record) = crate::packages::record_kind(path) {
            Want::Record(record)
        } else if super::python::wanted(path, self.root_is_site) {
            Want::Python
        } else if size < MIN_CANDIDATE {
            Want::Skip
        } else {
            Want::Inspect
        }
    }

    /// Takes a file as [`FileVisitor::wants`] asked for it: `input` holds its bytes, at its
    /// first. Returns the file's index in `summary.files` when it is kept, for other names of
    /// it (hard links) to join.
    pub fn take(&mut self, path: &str, want: Want, input: &mut dyn Input) -> io::Result<Option<usize>> {
        match want {
            Want::Skip => Ok(None),
            Want::Record(Record { kind, read: Reader::Unread(why), .. }) => {
                self.summary.notes.push(format!("{path}: {kind} record: {why}"));
                Ok(None)
            }
            Want::Record(record) if input.len() <= record.max => {
                let read = match record.read {
                    Reader::File(_) => {
                        let file = spill(input)?;
                        self.summary.packages.read(record, path, RecordData::File(file.path()))
                    }
                    _ => {
                        let mut buf = vec![0u8; input.len() as usize];
                        let n = read_full(input, &mut buf)?;
                        self.summary.packages.read(record, path, RecordData::Bytes(&buf[..n]))
                    }
                };
                if let Err(e) = read {
                    self.summary.notes.push(format!("{path}: {} record not read: {e}", record.kind));
                }
                Ok(None)
            }
            Want::Record(record) => {
                let (len, max) = (input.len(), record.max);
                self.summary.notes.push(format!(
                    "{path}: {} record of {len} bytes, over its bound of {max} bytes: not read",
                    record.kind
                ));
                self.keep_if_cuda(path, input)
            }
            Want::Inspect => self.keep_if_cuda(path, input),
            Want::Python => {
                self.python(path, input)?;
                Ok(None)
            }
        }
    }

    /// Records a package's `.py` file: its imports, or why they are not known.
    fn python(&mut self, path: &str, input: &mut dyn Input) -> io::Result<()> {
        use super::python;
        if self.summary.python_cut {
            return Ok(());
        }
        let record = if input.len() > python::MAX_FILE {
            python::unread(
                path,
                self.root_is_site,
                format!("{} bytes, over the bound of {} bytes", input.len(), python::MAX_FILE),
            )
        } else {
            let mut buf = vec![0u8; input.len() as usize];
            let n = read_full(input, &mut buf)?;
            python::read(path, self.root_is_site, &buf[..n])
        };
        // A file that imports nothing of its package tells the judgement nothing, save a
        // package's `__init__.py` (the package is there), a `version.py` and an unread one.
        let Some(record) = record.filter(python::worth_keeping) else { return Ok(()) };
        let cost = python::cost(&record);
        if self.python_kept + cost > python::MAX_KEPT {
            self.summary.python_cut = true;
            self.summary.notes.push(format!(
                "{path}: past the layer's bound of {} MiB for Python imports: this and later `.py` files not read \
                 (every extension module is judged as imported at import time)",
                python::MAX_KEPT >> 20
            ));
            return Ok(());
        }
        self.python_kept += cost;
        self.summary.python.push(record);
        Ok(())
    }

    /// Inspects a file and keeps it if it carries CUDA content or is named as a CUDA library.
    fn keep_if_cuda(&mut self, path: &str, input: &mut dyn Input) -> io::Result<Option<usize>> {
        let report = self.inspect(path, input)?;
        if !report.cuda_relevant() && !is_cuda_library(file_name(path)) {
            return Ok(None);
        }
        self.summary.files.push(LayerFile { paths: vec![path.to_string()], report });
        Ok(Some(self.summary.files.len() - 1))
    }

    /// The layer's summary: files whose every path a later entry replaced are dropped, each
    /// kept file is named by its first path, and the lookups are sorted.
    pub fn finish(self) -> LayerSummary {
        let mut s = self.summary;
        s.files.retain(|f| !f.paths.is_empty());
        for f in &mut s.files {
            f.report.path = f.paths[0].clone();
        }
        s.finish();
        s
    }

    fn inspect(&mut self, path: &str, input: &mut dyn Input) -> io::Result<FileReport> {
        let mut head = [0u8; HEAD];
        let n = read_full(input, &mut head)?;
        Ok(if sniff(&head[..n], path) != Sniffed::Other {
            self.summary.stats.inspected += 1;
            inspect_sniffed(&head[..n], input, path, self.opts, 0)?
        } else {
            FileReport::new(path.to_string(), input.len(), FileFormat::Other)
        })
    }
}

/// Copies a record to a private temporary file, in `io::copy`'s bounded chunks, for readers that open it by
/// path (sqlite); the file is removed when dropped.
fn spill(input: &mut dyn Input) -> io::Result<tempfile::NamedTempFile> {
    let mut file = tempfile::NamedTempFile::new()?;
    io::copy(&mut InputReader(input), &mut file)?;
    Ok(file)
}

/// Walks a layer's tar and hands each regular file to a [`FileVisitor`].
pub fn analyze(input: &mut dyn Input, opts: &InspectOptions) -> Result<LayerSummary, LayerError> {
    let mut v = FileVisitor::new(opts);
    let mut by_path: HashMap<String, usize> = HashMap::new();
    let mut walker = TarWalker::new(input);
    while let Some(e) = walker.next_entry()? {
        let s = &mut v.summary;
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
                } else if let Some(t) = target {
                    s.hardlinks.push((p, t));
                }
            }
            Kind::File | Kind::Sparse => {
                s.stats.files += 1;
                s.stats.file_bytes += e.size;
                let want = v.wants(&p, e.size);
                if matches!(want, Want::Skip) {
                    continue;
                }
                let mut data = entry_input(walker.input(), &e)?;
                let kept = v
                    .take(&p, want, &mut *data)
                    // Name the file: a read that fails inside it is not a bad header.
                    .map_err(|err| io::Error::new(err.kind(), format!("{p}: {err}")))?;
                if let Some(i) = kept {
                    by_path.insert(p, i);
                }
            }
            Kind::Dir | Kind::Other => {}
        }
    }
    Ok(v.finish())
}

/// A file entry's bytes (through its sparse map when it has one).
fn entry_input<'a>(input: &'a mut dyn Input, e: &TarEntry) -> io::Result<Box<dyn Input + 'a>> {
    Ok(match &e.sparse {
        Some(map) => Box::new(SparseInput::new(input, e.data_offset, map, e.size)?),
        None => Box::new(SubInput::new(input, e.data_offset, e.size)?),
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
