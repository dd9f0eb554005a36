//! Wheel variants (PEP 825 "package format" and PEP 817, drafts) in the NVIDIA provider's
//! namespace (wheelnext's `nvidia-variant-provider`): which properties a wheel's code supports
//! ([`supported`], for `cudalint support`), and whether what a wheel's `*.dist-info/variant.json`
//! declares holds for each of its binaries ([`annotate`], the `binary.variant_*` facts CL023
//! reads). docs/variants.md says what is draft and where each meaning comes from.
//!
//! The provider's features: `cuda_version_lower_bound` (a system offers every value up to its
//! driver's CUDA version), `cuda_version_upper_bound` (values above it; code sets no upper
//! bound, so it is neither derived nor checked) and `sm_arch`, multi-valued, in CMake's spelling
//! `{major}{minor}_real` / `_virtual`: a system whose GPU has compute capability X.m offers
//! `X0_real` ... `Xm_real` and `X0_virtual`. A wheel matches when, for every feature it
//! declares, at least one of its values is offered (PEP 825), so each declared `sm_arch` value on
//! its own lets the wheel be installed on every GPU that offers it.

use std::collections::{BTreeMap, BTreeSet};

use super::coverage::{self, specific_only};
use super::facts::{self, Binary};
use super::targets::Target;
use super::verdict;
use crate::cuda::compat::JitEnv;
use crate::cuda::{Cc, CudaVersion, arches};
use crate::image::ImageReport;
use crate::inspect::fatbin::Suffix;
pub use crate::packages::{Property, VariantDecl};

/// The NVIDIA provider's namespace.
pub const NAMESPACE: &str = "nvidia";
/// GPU architectures, multi-valued: `90_real`, `90_virtual`.
pub const SM_ARCH: &str = "sm_arch";
/// The oldest driver CUDA version (`12.8`, or a major alone: `12`).
pub const LOWER_BOUND: &str = "cuda_version_lower_bound";

/// An `nvidia :: sm_arch` value: `90_real` (SASS for 9.0), `90_virtual` (PTX for it). The
/// provider's own values carry no 'a'/'f' suffix; `90a_real`, `100f_virtual` (CMake's `90a-real`
/// with the underscore the property syntax needs) name such code where a wheel has nothing else.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SmArch {
    pub cc: Cc,
    pub suffix: Suffix,
    /// `_real` (SASS) or `_virtual` (PTX).
    pub real: bool,
}

impl SmArch {
    pub fn parse(value: &str) -> Option<SmArch> {
        let (arch, real) = match value.strip_suffix("_real") {
            Some(a) => (a, true),
            None => (value.strip_suffix("_virtual")?, false),
        };
        let (digits, suffix) = match arch.strip_suffix('a') {
            Some(d) => (d, Suffix::A),
            None => arch.strip_suffix('f').map_or((arch, Suffix::None), |d| (d, Suffix::F)),
        };
        if !(2..=3).contains(&digits.len()) || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        Some(SmArch { cc: Cc::from_sm(digits.parse().ok()?), suffix, real })
    }

    /// A binary's architecture as a value: `sm_90a` -> `90a_real`, `compute_90` -> `90_virtual`.
    pub fn value_of(label: &str) -> Option<String> {
        let (arch, kind) = match label.strip_prefix("sm_") {
            Some(a) => (a, "real"),
            None => (label.strip_prefix("compute_")?, "virtual"),
        };
        let value = format!("{arch}_{kind}");
        SmArch::parse(&value).map(|_| value)
    }

    /// The compute capabilities of the GPUs a resolver installs a wheel declaring this value on:
    /// its own, and every known one of its major with a higher minor (such a GPU offers `XY_real`
    /// for each Y up to its minor, and `X0_virtual`). 'a' code is for its own compute capability
    /// only; no GPU offers such a value at all, so it admits that one.
    pub fn admits(self) -> Vec<Cc> {
        let mut out = vec![self.cc];
        if self.suffix != Suffix::A {
            out.extend(
                arches::ARCHES.iter().map(|a| a.cc).filter(|cc| cc.major == self.cc.major && cc.minor > self.cc.minor),
            );
        }
        out
    }
}

/// Registered or standalone device code that decides whether the file runs: loaded as is, not a
/// driver library's, with modules that count.
fn with_code(b: &Binary) -> bool {
    b.facts.loadable && !b.facts.driver_library.is_driver() && b.counted().next().is_some()
}

/// The variant properties of the NVIDIA provider that the inventory's code supports (a wheel's,
/// scanned as a wheel): every `sm_arch` value that each binary with device code carries (SASS as
/// `_real`, PTX as `_virtual`, cuobjdump's listing), and the `cuda_version_lower_bound` of the
/// driver floor the binaries need ([`verdict::floor`]). Sorted.
///
/// The intersection, not the union: a resolver installs the wheel wherever one declared value
/// matches, and the wheel then has to run there whole; a value only some binaries carry would
/// promise a GPU on which the others fail (a wheel whose `libtorch` has `sm_90` and whose other
/// library lacks it does not support 9.0). Binaries whose every module is 'a'/'f' code
/// (optional extensions such as FlashAttention-3, which callers load only on their GPUs) are left
/// out where the wheel has other device code. Version-selected siblings the loader does not pick
/// are left out too.
pub fn supported(inventory: &ImageReport) -> Vec<Property> {
    let binaries: Vec<Binary> = inventory.files.iter().map(facts::binary).collect();
    let unselected = verdict::unselected_siblings(inventory, &binaries).unselected;
    let floor = verdict::floor(inventory, &binaries, &unselected);
    let loaded: Vec<&Binary> =
        binaries.iter().enumerate().filter(|(i, _)| !unselected.contains_key(i)).map(|(_, b)| b).collect();
    let mut out: Vec<Property> = common_archs(&loaded).iter().map(|v| Property::new(NAMESPACE, SM_ARCH, v)).collect();
    if floor.major > 0 {
        out.push(Property::new(NAMESPACE, LOWER_BOUND, &floor.needs_cuda));
    }
    out.sort();
    out
}

/// The `sm_arch` values every binary with device code carries (see [`supported`]).
fn common_archs(binaries: &[&Binary]) -> BTreeSet<String> {
    let coded: Vec<&Binary> = binaries.iter().copied().filter(|b| with_code(b)).collect();
    let other_code = coded.iter().any(|b| !specific_only(b));
    let mut common: Option<BTreeSet<String>> = None;
    for b in coded.into_iter().filter(|b| !(other_code && specific_only(b))) {
        let mine: BTreeSet<String> =
            b.facts.sass.iter().chain(&b.facts.ptx).filter_map(|l| SmArch::value_of(l)).collect();
        common = Some(match common {
            None => mine,
            Some(c) => c.intersection(&mine).cloned().collect(),
        });
    }
    common.unwrap_or_default()
}

/// The binary of a wheel: its package record is that wheel's.
fn belongs(b: &Binary, decl: &VariantDecl) -> bool {
    b.facts.package_manager == crate::packages::PackageManager::Pypi.as_str()
        && b.facts.package == decl.distribution
        && b.facts.package_version == decl.version
}

fn arch_target(cc: Cc) -> Target {
    Target::new(cc.to_string(), cc)
}

/// Fills the `variant_*` facts of every binary a wheel with a readable `variant.json` installed:
/// the declared `nvidia :: sm_arch` values that admit a GPU where some module of the binary has
/// no code that runs (its driver left aside: that is CL004/CL005's), and the driver CUDA version
/// the binary needs where the declared `cuda_version_lower_bound` admits older drivers. An
/// 'a'/'f'-only binary is not held to a GPU on which another binary of its wheel runs (an
/// optional extension its callers check for, CL016).
pub fn annotate(inventory: &ImageReport, binaries: &mut [Binary]) {
    for decl in inventory.variants.iter().filter(|d| d.error.is_none()) {
        let members: Vec<usize> = (0..binaries.len())
            .filter(|&i| belongs(&binaries[i], decl))
            .filter(|&i| binaries[i].facts.not_loaded.is_empty() && !binaries[i].facts.driver_library.is_driver())
            .collect();
        if members.is_empty() {
            continue;
        }
        let ours = |p: &&Property, feature: &str| p.namespace == NAMESPACE && p.feature == feature;
        let declared_sm: Vec<(&Property, SmArch)> = decl
            .properties
            .iter()
            .filter(|p| ours(p, SM_ARCH))
            .filter_map(|p| Some((p, SmArch::parse(&p.value)?)))
            .collect();
        // Any value of a feature admits: the weakest bound is the one that matters.
        let lower: Option<(&Property, CudaVersion)> = decl
            .properties
            .iter()
            .filter(|p| ours(p, LOWER_BOUND))
            .filter_map(|p| Some((p, CudaVersion::parse(&p.value)?)))
            .min_by_key(|(_, v)| *v);
        // Whether each member runs on each admitted compute capability, judged once.
        let ccs: BTreeSet<Cc> = declared_sm.iter().flat_map(|(_, a)| a.admits()).collect();
        let mut fails: BTreeMap<(usize, Cc), bool> = BTreeMap::new();
        let mut runs: BTreeMap<(usize, Cc), bool> = BTreeMap::new();
        for &i in members.iter().filter(|&&i| with_code(&binaries[i])) {
            for &cc in &ccs {
                let c = coverage::coverage(&binaries[i], &arch_target(cc), JitEnv::default());
                fails.insert((i, cc), c.failing > 0);
                runs.insert((i, cc), c.class.runs());
            }
        }
        for &i in &members {
            let b = &binaries[i];
            let gated = |cc: Cc| {
                specific_only(b) && members.iter().any(|&o| o != i && runs.get(&(o, cc)).copied().unwrap_or(false))
            };
            let mut unsupported = Vec::new();
            let mut where_: BTreeSet<Cc> = BTreeSet::new();
            for (p, arch) in &declared_sm {
                let failing: Vec<Cc> = arch
                    .admits()
                    .into_iter()
                    .filter(|&cc| fails.get(&(i, cc)).copied().unwrap_or(false) && !gated(cc))
                    .collect();
                if !failing.is_empty() {
                    unsupported.push(p.to_string());
                    where_.extend(failing);
                }
            }
            let need = verdict::floor_of(&[], std::slice::from_ref(b));
            let needs_cuda = match lower {
                Some((_, l)) if need.major > 0 && l.major < need.major as u16 => need.needs_cuda,
                _ => String::new(),
            };
            let f = &mut binaries[i].facts;
            f.variant_json = decl.path.clone();
            f.variant_declared = decl.properties.iter().map(Property::to_string).collect();
            f.variant_unsupported = unsupported;
            f.variant_unsupported_ccs = where_.iter().map(Cc::to_string).collect();
            f.variant_lower_bound = lower.map(|(p, _)| p.value.clone()).unwrap_or_default();
            f.variant_needs_cuda = needs_cuda;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sm_arch_values_parse_as_the_provider_spells_them() {
        let a = SmArch::parse("90_real").unwrap();
        assert_eq!((a.cc, a.suffix, a.real), (Cc { major: 9, minor: 0 }, Suffix::None, true));
        let a = SmArch::parse("120_virtual").unwrap();
        assert_eq!((a.cc, a.real), (Cc { major: 12, minor: 0 }, false));
        assert_eq!(SmArch::parse("100a_real").unwrap().suffix, Suffix::A);
        assert_eq!(SmArch::parse("100f_virtual").unwrap().suffix, Suffix::F);
        for bad in ["90", "sm_90", "90_REAL", "_real", "9_real", "1000_real", "90x_real", "90a"] {
            assert_eq!(SmArch::parse(bad), None, "{bad}");
        }
        assert_eq!(SmArch::value_of("sm_90a").as_deref(), Some("90a_real"));
        assert_eq!(SmArch::value_of("compute_121").as_deref(), Some("121_virtual"));
        assert_eq!(SmArch::value_of("tile_100"), None);
    }

    /// A GPU of compute capability X.m offers `X0_real` .. `Xm_real` and `X0_virtual`
    /// (nvidia-variant-provider's `get_supported_configs`): a value admits its own compute
    /// capability and the known ones above it in its major.
    #[test]
    fn a_value_admits_the_gpus_that_offer_it() {
        let ccs = |v: &str| SmArch::parse(v).unwrap().admits().iter().map(Cc::to_string).collect::<Vec<_>>();
        // Family 10 is {10.0, 10.3, 10.7} (nvcc 13.5; CUDA-BINARIES.md §4.1): sm_100 SASS runs on
        // Rubin's 10.7 by the same-major rule.
        assert_eq!(ccs("100_real"), ["10.0", "10.3", "10.7"]);
        assert_eq!(ccs("80_virtual"), ["8.0", "8.6", "8.7", "8.9"]);
        assert_eq!(ccs("89_real"), ["8.9"]);
        assert_eq!(ccs("120_real"), ["12.0", "12.1"]);
        assert_eq!(ccs("100a_real"), ["10.0"]);
        assert_eq!(ccs("100f_real"), ["10.0", "10.3", "10.7"]);
    }

    #[test]
    fn properties_display_and_sort_as_numbers() {
        let mut v = [
            Property::new("nvidia", "sm_arch", "120_real"),
            Property::new("nvidia", "sm_arch", "90_virtual"),
            Property::new("nvidia", "cuda_version_lower_bound", "12.0"),
            Property::new("nvidia", "sm_arch", "90_real"),
            Property::new("nvidia", "sm_arch", "100a_real"),
        ];
        v.sort();
        let shown: Vec<String> = v.iter().map(Property::to_string).collect();
        assert_eq!(
            shown,
            [
                "nvidia :: cuda_version_lower_bound :: 12.0",
                "nvidia :: sm_arch :: 90_real",
                "nvidia :: sm_arch :: 90_virtual",
                "nvidia :: sm_arch :: 100a_real",
                "nvidia :: sm_arch :: 120_real",
            ]
        );
    }
}
