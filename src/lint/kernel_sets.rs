//! Loose kernel files judged as a set: cubins, fatbins and PTX a package ships as data files
//! (flashinfer-cubin's 10,560 cubins), which its own loader picks per GPU, are one set per
//! package (without a package, per directory). On each target the set is judged by how many of
//! its files are for the GPU (SASS that runs by `cuda::compat`'s rules, PTX the driver JITs):
//! one matrix row per set, and a GPU none of them is for is not judged (CL028, `unjudged`),
//! since the package's loader may fall back or fail there.
//!
//! A set needs two files or more: a lone loose file is what whoever loads it loads, and keeps
//! its own row and per-file verdicts (CL001 where it has no code for the GPU).

use std::collections::BTreeMap;

use super::facts::Binary;
pub use super::report::FilesFor;
use super::report::{KernelSetRow, MatrixCell, MatrixRow, Package};
use super::targets::Target;
use crate::cuda::compat::{self, JitEnv, Verdict};
use crate::cuda::sorted_archs;
use crate::image::ImageReport;
use crate::layer::path::parent;
use crate::module::{FileKind, Loading};

/// A cubin, fatbin or PTX file on its own (not inside a host library).
fn loose(b: &Binary) -> bool {
    matches!(b.facts.kind, FileKind::Cubin | FileKind::Fatbin | FileKind::Ptx)
        && b.facts.loadable
        && !b.facts.driver_library.is_driver()
}

/// What a loose file is judged together with: its package, else its directory.
fn key(b: &Binary) -> String {
    if b.facts.package.is_empty() {
        format!("dir:{}", parent(&b.facts.path))
    } else {
        format!("package:{}", b.facts.group)
    }
}

/// The loose files of each set (two or more per package or directory), by binary index.
fn members(binaries: &[Binary]) -> BTreeMap<String, Vec<usize>> {
    let mut by: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, b) in binaries.iter().enumerate().filter(|(_, b)| loose(b)) {
        by.entry(key(b)).or_default().push(i);
    }
    by.retain(|_, v| v.len() > 1);
    by
}

/// Marks the modules of every set's files as loaded by the package's own loader: no file of a
/// set decides a verdict on its own (the set does, `judge`). `diff` and `scan` count them alike.
pub fn mark(binaries: &mut [Binary]) {
    for i in members(binaries).into_values().flatten() {
        let b = &mut binaries[i];
        for m in b.modules.iter_mut().filter(|m| m.loading == Loading::Standalone) {
            m.loading = Loading::LibraryManaged;
        }
        b.facts.library_managed_modules =
            b.modules.iter().filter(|m| m.loading == Loading::LibraryManaged).count() as u64;
        b.facts.modules = b.counted().count() as u64;
        if b.facts.managed_archs.is_empty() {
            b.facts.managed_archs = sorted_archs(b.facts.sass.iter().chain(&b.facts.ptx).cloned()).join(", ");
        }
    }
}

/// One set of loose kernel files.
#[derive(Debug, Clone)]
pub struct KernelSet {
    /// The directory its files share, ending in `/`.
    pub path: String,
    pub package: Option<Package>,
    pub layer: String,
    pub step: Option<String>,
    /// Its files, by binary index.
    pub members: Vec<usize>,
    /// The architectures its files carry: SASS (`sm_90a`) and PTX (`compute_90`), sorted.
    pub sass: Vec<String>,
    pub ptx: Vec<String>,
    /// Modules in its files.
    pub modules: u64,
}

impl KernelSet {
    pub fn files(&self) -> u64 {
        self.members.len() as u64
    }

    /// `flashinfer-cubin's 10,560 loose kernel files`, `the 300 loose kernel files in /opt/k/`.
    pub fn what(&self) -> String {
        let n = grouped(self.files());
        match &self.package {
            Some(p) => format!("{}'s {n} loose kernel files ({})", p.name, self.path),
            None => format!("the {n} loose kernel files in {}", self.path),
        }
    }
}

/// The sets of an image, ordered by path (binaries already `mark`ed).
pub fn sets(scan: &ImageReport, binaries: &[Binary]) -> Vec<KernelSet> {
    let mut out: Vec<KernelSet> = members(binaries)
        .into_values()
        .map(|members| {
            let first = &binaries[members[0]].facts;
            let under = |p: &str, d: &str| d == "/" || (p.starts_with(d) && p[d.len()..].starts_with('/'));
            let mut dir = parent(&first.path).to_string();
            for &i in &members[1..] {
                while !under(&binaries[i].facts.path, &dir) {
                    dir = parent(&dir).to_string();
                }
            }
            let one_layer = members.iter().all(|&i| binaries[i].facts.layer == first.layer);
            let archs = |f: fn(&Binary) -> &Vec<String>| {
                sorted_archs(members.iter().flat_map(|&i| f(&binaries[i]).iter().cloned()))
            };
            KernelSet {
                path: if dir == "/" { dir } else { format!("{dir}/") },
                package: scan.files.get(members[0]).and_then(|f| f.package.clone()),
                layer: if one_layer { first.layer.clone() } else { String::new() },
                step: Some(first.step.clone()).filter(|s| !s.is_empty() && one_layer),
                sass: archs(|b| &b.facts.sass),
                ptx: archs(|b| &b.facts.ptx),
                modules: members.iter().map(|&i| binaries[i].modules.len() as u64).sum(),
                members,
            }
        })
        .collect();
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// A set on a target: a file is for the GPU where one of its modules runs there natively, else
/// where one JITs (the loader's pick is the package's business; that the file exists is ours).
pub fn judge(set: &KernelSet, binaries: &[Binary], t: &Target, env: JitEnv) -> FilesFor {
    let mut n = FilesFor { of: set.files(), ..Default::default() };
    for &i in &set.members {
        let mut jit = false;
        let mut native = false;
        for m in binaries[i].modules.iter().filter(|m| m.counts()) {
            match compat::decide(&m.images, t.cc, t.driver_cuda, env) {
                Verdict::Native { .. } => native = true,
                Verdict::Jit { .. } => jit = true,
                _ => {}
            }
        }
        if native {
            n.native += 1;
        } else if jit {
            n.jit += 1;
        }
    }
    n
}

/// The set's one matrix row: per target how many of its files are for the GPU (`3,520 of 10,560
/// files`, `none of 300 files`).
pub fn row(set: &KernelSet, targets: &[Target], judged: &[FilesFor]) -> MatrixRow {
    use super::coverage::{Class, Share};
    let cells = targets
        .iter()
        .zip(judged)
        .map(|(t, n)| {
            let (result, class) = match (n.any(), n.native) {
                (0, _) => (Share::NotApplicable, Class::NotApplicable),
                (k, native) => (
                    if k == n.of { Share::All } else { Share::Some },
                    if native > 0 { Class::Native } else { Class::Jit },
                ),
            };
            let of = grouped(n.of);
            MatrixCell {
                target: t.name.clone(),
                result,
                class,
                // Short, as the grid's other cells; the legend and `why` say the rest.
                text: match n.any() {
                    0 => format!("none of {of} files"),
                    k => format!("{} of {of} files", grouped(k)),
                },
                left_out: 0,
                why: if n.any() == 0 {
                    "no file of the set is for this GPU: the package's loader may fall back or fail (CL028)".into()
                } else {
                    String::new()
                },
                files: Some(*n),
            }
        })
        .collect();
    MatrixRow {
        path: set.path.clone(),
        layer: set.layer.clone(),
        step: set.step.clone(),
        package: set.package.clone(),
        modules: 0,
        library_managed_modules: set.modules,
        kernel_set: Some(KernelSetRow { files: set.files(), sass: set.sass.clone(), ptx: set.ptx.clone() }),
        cells,
    }
}

/// `10,560`: digits grouped by thousands.
pub fn grouped(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
