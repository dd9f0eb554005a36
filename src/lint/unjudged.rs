//! What cudalint could not judge for a target, in one place: each source is a small function
//! over what the earlier phases found (`SOURCES`) that returns every thing of its kind that
//! decides what runs (a run-time compiler check, a kernel set), each marked `judged` or not.
//! Rules of scope `unjudged` see them all (CL028 fires on those not judged, and its `pass` cases
//! are evaluated too); each thing not judged that a finding still names counts in the target's
//! headline ("runs, with 2 things not judged"), so nothing that compiles at run time, loads
//! kernels from files or picks a library per GPU is passed in silence. A new source is one
//! function and its `SOURCES` line.

use serde::Serialize;

use super::compilers::CompilerFacts;
use super::kernel_sets::{FilesFor, KernelSet};
use super::targets::Target;
use crate::schema::documented;

documented! {
    /// One thing cudalint could not judge on one target (`unjudged` in rules of scope `unjudged`).
    #[derive(Debug, Clone, Default, Serialize)]
    pub struct UnjudgedFacts {
        /// cudalint could judge it on the target (the compiler table knows the compiler; some of the set's files are
        /// for the GPU): nothing to say
        pub judged: bool,
        /// where it comes from: `compiler` (a run-time compiler a package uses), `kernel-set` (loose kernel files a
        /// package's loader picks per GPU)
        pub source: String,
        /// what was not judged: `cupy-cuda11x 13.6.0's CuPy kernels (NVRTC)`, `flashinfer-cubin's 10,560 loose kernel
        /// files (/usr/lib/python3/site-packages/flashinfer_cubin/cubins/)`
        pub what: String,
        /// the file or directory in the image (empty when nothing was found)
        pub path: String,
        /// the package it belongs to: `cupy-cuda11x 13.6.0`, empty if none known
        pub package: String,
        /// that package's manager (`pypi`, `conda`, `deb`, `rpm`), empty if none known
        pub package_manager: String,
        /// why it was not judged: `NVRTC 11.8.89 is not in cudalint's compiler table`, `none of its 300 files has SASS
        /// that runs on compute capability 8.9 or PTX the driver compiles for it (they carry sm_90, sm_90a)`
        pub why: String,
        /// what may happen on the GPU, as far as anyone can say without running it
        pub effect: String,
        /// how to settle it
        pub fix: String,
        /// for a kernel set: its files (0 otherwise)
        pub files: u64,
        /// for a kernel set: the architectures its files carry (`sm_90, sm_90a`), empty otherwise
        pub archs: String,
        /// Not a fact: what its findings' fingerprints are keyed by (the path, and for a compiler its consumer),
        /// stable while the files change.
        #[serde(skip)]
        pub key: String,
    }
}

/// What the sources read: the earlier phases' results for one target.
pub struct Inputs<'a> {
    pub target: &'a Target,
    /// Every consumer's run-time compiler as judged on the target.
    pub compilers: &'a [&'a CompilerFacts],
    /// The image's kernel sets with how many files of each are for the target.
    pub sets: &'a [(&'a KernelSet, FilesFor)],
}

type Source = fn(&Inputs) -> Vec<UnjudgedFacts>;

/// Every source of things not judged.
const SOURCES: &[Source] = &[compilers, kernel_sets];

/// Every thing of every source on the target, judged or not, sorted by path then what.
pub fn collect(inputs: &Inputs) -> Vec<UnjudgedFacts> {
    let mut out: Vec<UnjudgedFacts> = SOURCES.iter().flat_map(|s| s(inputs)).collect();
    out.sort_by(|a, b| (&a.path, &a.what).cmp(&(&b.path, &b.what)));
    out
}

/// Each consumer's run-time compiler check; not judged where the compiler table could not decide
/// it (`known == false`): its release not in the table, its version unknown, or no compiler
/// found in the image (`why` says which).
fn compilers(i: &Inputs) -> Vec<UnjudgedFacts> {
    i.compilers
        .iter()
        .map(|c| {
            let why = if !c.why.is_empty() {
                c.why.clone()
            } else if c.version.is_empty() {
                format!("the version of {} ({}) is unknown", c.kind, c.path)
            } else {
                format!("{} {} is not in cudalint's compiler table", c.kind, c.version)
            };
            let kind = if c.kind.is_empty() { "compiler".to_string() } else { c.kind.clone() };
            UnjudgedFacts {
                judged: c.known,
                source: "compiler".into(),
                what: format!("{} {}'s {} ({kind})", c.consumer, c.consumer_version, c.what),
                path: c.path.clone(),
                package: format!("{} {}", c.consumer, c.consumer_version),
                package_manager: c.manager.clone(),
                key: format!("{}#{}", c.path, c.consumer),
                why,
                effect: format!(
                    "whether its {kind} can build code for {} and the driver load it is not known: what it compiles at run time may fail there",
                    i.target.gpu()
                ),
                fix: format!(
                    "try {}'s run-time compilation on {} (or name the compiler's release in a `--knowledge` row) before relying on it",
                    c.consumer,
                    i.target.gpu()
                ),
                ..Default::default()
            }
        })
        .collect()
}

/// Each set of loose kernel files; not judged where none of its files is for the target: the
/// package's loader picks a file per GPU, and finds none here.
fn kernel_sets(i: &Inputs) -> Vec<UnjudgedFacts> {
    i.sets
        .iter()
        .map(|(s, n)| {
            let archs = crate::cuda::sorted_archs(s.sass.iter().chain(&s.ptx).cloned()).join(", ");
            UnjudgedFacts {
                judged: n.any() > 0,
                source: "kernel-set".into(),
                what: s.what(),
                path: s.path.clone(),
                package: s.package.as_ref().map(|p| format!("{} {}", p.name, p.version)).unwrap_or_default(),
                package_manager: s.package.as_ref().map(|p| p.manager.to_string()).unwrap_or_default(),
                key: s.path.clone(),
                why: format!(
                    "none of its {} files has SASS that runs on compute capability {} or PTX the driver compiles for it (they carry {archs})",
                    super::kernel_sets::grouped(n.of),
                    i.target.cc
                ),
                effect: "the package's loader picks these files per GPU and finds none for this one: it may fall back (another kernel, a slower path, compiling at run time) or fail".into(),
                fix: format!(
                    "check what {} does on {} (or ship kernels for compute capability {})",
                    s.package.as_ref().map_or("the loader", |p| p.name.as_str()),
                    i.target.gpu(),
                    i.target.cc
                ),
                files: n.of,
                archs,
            }
        })
        .collect()
}
