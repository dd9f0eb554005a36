//! How a binary's modules fare on one target (`coverage` in rules): each module's verdict,
//! counted, with NVIDIA's per-GPU dispatch and 'a'/'f' variants set apart as detail, and the
//! binary's verdict class.

use std::collections::BTreeSet;

use serde::Serialize;

use super::facts::{Binary, human_size};
use super::targets::Target;
use crate::cuda::compat::{self, JitEnv, Verdict};
use crate::cuda::{Cc, CudaVersion, gpus, sorted_archs};
use crate::module::Module;
use crate::schema::{documented, words};

words! {
    /// How many of a binary's modules run on a target.
    #[derive(Default)]
    pub enum Share {
        /// Every module that decides.
        All = "all",
        Some = "some",
        None = "none",
        /// The binary has no modules.
        #[default]
        NotApplicable = "n/a",
    }
}

words! {
    /// The binary's verdict on a target (docs/schema.md).
    #[derive(Default)]
    pub enum Class {
        /// Runs, with SASS for some of its modules.
        Native = "native",
        /// Runs only by compiling PTX.
        Jit = "jit",
        /// Code for other chips only ('a'/'f', or an optional NVIDIA library), which its
        /// callers check for before use; or an extension module its package imports only on
        /// demand (`on_demand`).
        ArchGated = "arch-gated",
        /// Does not run.
        None = "none",
        /// No modules, or a version-selected sibling not loaded here.
        #[default]
        NotApplicable = "n/a",
    }
}

impl Class {
    /// Its code runs on the target.
    pub fn runs(self) -> bool {
        matches!(self, Class::Native | Class::Jit)
    }
}

documented! {
    #[derive(Debug, Clone, Default, Serialize)]
    pub struct Coverage {
        /// modules that count
        pub modules: u64,
        /// those with SASS for the target
        pub native: u64,
        /// those that run by compiling PTX
        pub jit: u64,
        /// those that do not run: 209, 222 or 223
        pub failing: u64,
        /// no SASS or PTX for it (209)
        pub no_image: u64,
        /// PTX newer than the driver (222)
        pub ptx_too_new: u64,
        /// only PTX, and JIT disabled (223)
        pub jit_disabled: u64,
        /// failing modules whose only near match is 'a' code for another compute capability
        pub arch_specific_only: u64,
        /// those images
        pub arch_specific_images: Vec<String>,
        /// all, some, none (every / some / no module runs), or n/a (no modules)
        pub result: Share,
        /// the images used (`sm_80`, `jit compute_80`) and the errors, for the matrix
        pub cells: Vec<String>,
        /// SASS images used
        pub native_images: Vec<String>,
        /// PTX images compiled
        pub jit_images: Vec<String>,
        /// PTX bytes the driver would compile at first use
        pub jit_ptx_bytes: u64,
        /// the same for people: `12.3 MiB`
        pub jit_ptx: String,
        /// roughly how long that JIT takes at first use: `milliseconds` (under 1 MiB), `seconds`, `minutes` (64 MiB and
        /// more)
        pub jit_cost: String,
        /// newest CUDA version a JIT or refused PTX needs
        pub needs_cuda: String,
        /// a few failing modules, by label
        pub failing_examples: Vec<String>,
        /// failing modules whose usable code sits in concatenated entries the target's driver cannot read
        pub format_too_new: u64,
        /// the driver CUDA version that can
        pub format_needs_cuda: String,
        /// modules that are detail in a binary whose other modules run here (not in `failing`, `jit` or `cells`):
        /// 'a'/'f' variants for other chips, per-architecture variants, and in NVIDIA's closed libraries kernel sets
        /// for newer GPUs only and any module where their registered code runs natively here (their per-GPU dispatch)
        pub expected_missing: u64,
        /// failing modules built for a generic architecture list that lacks the target while other modules run here: a
        /// translation unit built with a different list (never counted in NVIDIA's closed libraries)
        pub gaps: u64,
        /// a few of them, by label
        pub gap_examples: Vec<String>,
        /// modules whose every plain architecture is newer than the target: kernel sets for newer GPUs
        pub newer_only: u64,
        /// Not a fact: the oldest architecture among those modules, for the matrix and the
        /// optional-library judgement.
        #[serde(skip)]
        pub newer_from: Option<Cc>,
        /// the binary's verdict: native, jit, arch-gated, none, n/a (docs/schema.md)
        pub class: Class,
        /// for arch-gated binaries: the GPUs its code is for (`H100, H200, GH200`), or those its callers load it on
        pub gated_for: String,
        /// for binaries its callers load only on some GPUs: who decides, and the knowledge row that says so
        /// (`vLLM's FlashAttention 2 (...) (knowledge: libraries.toml:LINE)`); empty otherwise
        pub gated_by: String,
        /// for a version-selected sibling not loaded here: the sibling that is
        pub selected_sibling: String,
        /// for an extension module its package imports only on demand (by the package's own `.py` files) and that
        /// has no kernel image here: where it is imported (`pkg/fa3.py:12, inside a function`); empty otherwise
        pub on_demand: String,
    }
}

pub fn verdicts(b: &Binary, t: &Target, env: JitEnv) -> Vec<(String, Verdict)> {
    b.modules.iter().map(|m| (m.label.clone(), compat::decide(&m.images, t.cc, t.driver_cuda, env))).collect()
}

pub fn coverage(b: &Binary, t: &Target, env: JitEnv) -> Coverage {
    let counted: Vec<&Module> = b.counted().collect();
    let mut c = Coverage { modules: counted.len() as u64, ..Default::default() };
    let verdicts: Vec<Verdict> = counted.iter().map(|m| compat::decide(&m.images, t.cc, t.driver_cuda, env)).collect();
    let native_any = verdicts.iter().any(|v| matches!(v, Verdict::Native { .. }));
    let runs_any = verdicts.iter().any(Verdict::runs);
    // NVIDIA's closed libraries pick their kernels per GPU at run time: where their registered
    // code runs natively, a module that would JIT, needs a newer driver or has no image here is
    // their dispatch at work, not something a user can act on.
    let vendor_dispatch = b.facts.vendor_library && native_any;
    let mut cells = BTreeSet::new();
    let mut native = BTreeSet::new();
    let mut jit = BTreeSet::new();
    let mut arch_specific = BTreeSet::new();
    let mut needs: Option<CudaVersion> = None;
    let mut format_needs: Option<CudaVersion> = None;
    for (m, v) in counted.iter().zip(&verdicts) {
        if m.newer_only(t.cc) {
            c.newer_only += 1;
            let lo = m.images.iter().map(|i| i.cc).min();
            c.newer_from = match (c.newer_from, lo) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        let detail = match v {
            Verdict::Native { .. } => false,
            Verdict::NoImage { format_needs_cuda: Some(_), .. } => false,
            // A kernel set for newer GPUs only is NVIDIA's dispatch in their closed libraries; in
            // a package the user builds it is the mark of a stale list (CL002).
            Verdict::NoImage { .. } => {
                runs_any
                    && (vendor_dispatch
                        || m.specific_only()
                        || m.single_arch()
                        || (b.facts.vendor_library && m.newer_only(t.cc)))
            }
            Verdict::Jit { .. } | Verdict::PtxTooNew { .. } | Verdict::JitDisabled { .. } => vendor_dispatch,
        };
        if detail {
            c.expected_missing += 1;
            continue;
        }
        cells.insert(v.cell());
        match v {
            Verdict::Native { image } => {
                c.native += 1;
                native.insert(image.clone());
            }
            Verdict::Jit { image, needs_cuda, .. } => {
                c.jit += 1;
                jit.insert(image.clone());
                needs = needs.max(Some(*needs_cuda));
                c.jit_ptx_bytes += m.ptx_bytes;
            }
            Verdict::NoImage { arch_specific: a, format_needs_cuda: f, .. } => {
                c.no_image += 1;
                if let Some(f) = f {
                    c.format_too_new += 1;
                    format_needs = format_needs.max(Some(*f));
                } else if runs_any {
                    // A generic list that lacks the target while other modules run here: the
                    // mark of a translation unit built with a stale list.
                    c.gaps += 1;
                    if c.gap_examples.len() < 3 {
                        c.gap_examples.push(m.label.clone());
                    }
                }
                if !a.is_empty() {
                    c.arch_specific_only += 1;
                    arch_specific.extend(a.iter().cloned());
                }
            }
            Verdict::PtxTooNew { needs_cuda, .. } => {
                c.ptx_too_new += 1;
                needs = needs.max(Some(*needs_cuda));
            }
            Verdict::JitDisabled { .. } => c.jit_disabled += 1,
        }
        if !v.runs() && c.failing_examples.len() < 3 {
            c.failing_examples.push(m.label.clone());
        }
    }
    c.failing = c.no_image + c.ptx_too_new + c.jit_disabled;
    // What still decides: modules left after the dispatch detail.
    let decisive = c.modules - c.expected_missing;
    c.result = match (c.modules, c.failing) {
        (0, _) => Share::NotApplicable,
        (_, 0) => Share::All,
        (_, f) if f == decisive => Share::None,
        _ => Share::Some,
    };
    c.class = match c.result {
        Share::NotApplicable => Class::NotApplicable,
        Share::None => Class::None,
        Share::All | Share::Some if c.native == 0 => Class::Jit,
        Share::All | Share::Some => Class::Native,
    };
    c.jit_ptx = human_size(c.jit_ptx_bytes);
    c.jit_cost = jit_cost(c.jit_ptx_bytes).into();
    c.cells = sorted_archs(cells);
    c.native_images = sorted_archs(native);
    c.jit_images = sorted_archs(jit);
    c.arch_specific_images = sorted_archs(arch_specific);
    c.needs_cuda = needs.map(|n| n.to_string()).unwrap_or_default();
    c.format_needs_cuda = format_needs.map(|n| n.to_string()).unwrap_or_default();
    c
}

/// PTX below this size JITs in well under a second: no cold start worth a warning (CL003).
pub const JIT_NOTICEABLE_BYTES: u64 = 1 << 20;

/// How long the driver's JIT takes for this much PTX, roughly, at first use in a new container
/// (ptxas compiles on the order of a MiB of PTX a second on one core; measured orders, not a
/// promise): `milliseconds`, `seconds`, `minutes`.
pub fn jit_cost(ptx_bytes: u64) -> &'static str {
    match ptx_bytes {
        b if b < JIT_NOTICEABLE_BYTES => "milliseconds",
        b if b < 64 << 20 => "seconds",
        _ => "minutes",
    }
}

/// Every counted module's code is 'a'/'f' code, none of it for this target: an optional
/// extension for other chips (FlashAttention-3 for Hopper in a serving stack).
pub fn specific_only(b: &Binary) -> bool {
    let mut any = false;
    for m in b.counted() {
        any = true;
        if !m.specific_only() {
            return false;
        }
    }
    any
}

/// The GPUs 'a'/'f' code runs on: `H100, H200, GH200` for sm_90a; the family for sm_100f.
pub fn chips_for(b: &Binary) -> String {
    let mut names: Vec<&str> = Vec::new();
    let mut archs = BTreeSet::new();
    for m in b.counted() {
        for i in &m.images {
            archs.insert(i.label());
            for g in gpus::GPUS.iter().filter(|g| !g.unconfirmed) {
                if compat::sass_runs(i.cc, i.suffix, g.cc) && !names.contains(&g.name) {
                    names.push(g.name);
                }
            }
        }
    }
    let archs = sorted_archs(archs);
    if names.is_empty() { archs.join(", ") } else { names.join(", ") }
}

/// Whether a library's callers load it on `cc` (its knowledge row's `dispatch`).
pub fn loaded_on(d: &crate::knowledge::Dispatch, cc: Cc) -> bool {
    let parse = |s: &str| Cc::parse(s);
    parse(&d.min).is_none_or(|m| cc >= m)
        && parse(&d.below).is_none_or(|b| cc < b)
        && !d.except.iter().filter_map(|e| parse(e)).any(|e| e == cc)
}

/// The compute capabilities a `dispatch` loads on, in words: `compute capability 8.0 to 9.x
/// except 8.6, 8.9`.
pub fn dispatch_words(d: &crate::knowledge::Dispatch) -> String {
    let mut s = match (d.min.is_empty(), Cc::parse(&d.below)) {
        (false, Some(b)) if b.minor == 0 => format!("compute capability {} to {}.x", d.min, b.major.saturating_sub(1)),
        (false, Some(b)) => format!("compute capability {} up to {b}", d.min),
        (false, None) => format!("compute capability {} and newer", d.min),
        (true, Some(b)) => format!("compute capability below {b}"),
        (true, None) => "every compute capability".to_string(),
    };
    if !d.except.is_empty() {
        s.push_str(&format!(" except {}", d.except.join(", ")));
    }
    s
}
