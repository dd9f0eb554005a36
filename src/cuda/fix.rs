//! Concrete fixes: the smallest `TORCH_CUDA_ARCH_LIST` and `-gencode` list that cover a set of
//! targets (docs/cuda-binaries.md §6), and the driver a CUDA version needs.

use std::collections::BTreeMap;

use serde::Serialize;

use std::collections::BTreeSet;

use super::Cc;
use crate::inspect::fatbin::Suffix;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ArchFix {
    /// `8.0;9.0+PTX`
    pub torch_arch_list: String,
    /// `-gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=[sm_90,compute_90]`
    pub gencode: String,
    /// The SASS architectures built, `["sm_80", "sm_90"]`.
    pub archs: Vec<String>,
}

/// One SASS build per major covers every target of that major (SASS runs forward within it),
/// built for the lowest minor among them; PTX of the newest one keeps future GPUs working.
pub fn arch_fix(targets: &[Cc]) -> Option<ArchFix> {
    let mut per_major: BTreeMap<u8, u8> = BTreeMap::new();
    for t in targets {
        let m = per_major.entry(t.major).or_insert(t.minor);
        *m = (*m).min(t.minor);
    }
    if per_major.is_empty() {
        return None;
    }
    let ccs: Vec<Cc> = per_major.into_iter().map(|(major, minor)| Cc { major, minor }).collect();
    let last = ccs.len() - 1;
    let torch: Vec<String> = ccs
        .iter()
        .enumerate()
        .map(|(i, c)| {
            // The newest accepted arch of that major not above the wanted one.
            let t = super::arches::torch_archs().rev().find(|t| t.major == c.major && t.minor <= c.minor);
            let s = t.map_or(c.to_string(), |t| t.to_string());
            if i == last { format!("{s}+PTX") } else { s }
        })
        .collect();
    let gencode: Vec<String> = ccs
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let sm = c.sm();
            if i == last {
                format!("-gencode arch=compute_{sm},code=[sm_{sm},compute_{sm}]")
            } else {
                format!("-gencode arch=compute_{sm},code=sm_{sm}")
            }
        })
        .collect();
    Some(ArchFix {
        torch_arch_list: torch.join(";"),
        gencode: gencode.join(" "),
        archs: ccs.iter().map(|c| format!("sm_{}", c.sm())).collect(),
    })
}

/// The architecture list for a binary that already carries `keep` and must also run on
/// `targets`: every carried architecture stays as it is ('a' and 'f' code included), one plain
/// SASS build is added per target major not yet covered, and PTX for the newest plain one.
/// PyTorch has no 'f' suffix: an 'f' entry is written as its plain equivalent there (the same
/// chips run it); the `-gencode` list keeps it exact.
pub fn arch_fix_keeping(keep: &[(Cc, Suffix)], targets: &[Cc]) -> ArchFix {
    let mut set: BTreeSet<(Cc, Suffix)> = keep.iter().copied().collect();
    for t in targets {
        let covered = set.iter().any(|(c, s)| crate::cuda::compat::sass_runs(*c, *s, *t));
        if !covered {
            // The lowest minor of this major among the targets covers them all.
            let lo = targets.iter().filter(|x| x.major == t.major).min().copied().unwrap_or(*t);
            set.insert((lo, Suffix::None));
        }
    }
    let newest_plain = set.iter().filter(|(_, s)| *s == Suffix::None).map(|(c, _)| *c).max();
    let mut torch: Vec<String> = Vec::new();
    let mut gencode: Vec<String> = Vec::new();
    for (c, s) in &set {
        let sm = c.sm();
        let suf = s.as_str();
        let ptx = Some(*c) == newest_plain && *s == Suffix::None;
        let t = match s {
            Suffix::A => format!("{c}a"),
            _ => c.to_string(),
        };
        let t = if ptx { format!("{t}+PTX") } else { t };
        if !torch.contains(&t) {
            torch.push(t);
        }
        gencode.push(if ptx {
            format!("-gencode arch=compute_{sm},code=[sm_{sm},compute_{sm}]")
        } else {
            format!("-gencode arch=compute_{sm}{suf},code=sm_{sm}{suf}")
        });
    }
    ArchFix {
        torch_arch_list: torch.join(";"),
        gencode: gencode.join(" "),
        archs: set.iter().map(|(c, s)| format!("sm_{}{}", c.sm(), s.as_str())).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_build_per_major_plus_ptx() {
        let cc = |s: &str| Cc::parse(s).unwrap();
        let f = arch_fix(&[cc("9.0"), cc("8.9"), cc("8.6")]).unwrap();
        assert_eq!(f.torch_arch_list, "8.6;9.0+PTX");
        assert_eq!(f.gencode, "-gencode arch=compute_86,code=sm_86 -gencode arch=compute_90,code=[sm_90,compute_90]");
        // Rubin (10.7) is not in PyTorch's list: 10.3 SASS runs on it.
        assert_eq!(arch_fix(&[cc("10.7")]).unwrap().torch_arch_list, "10.3+PTX");
        assert!(arch_fix(&[]).is_none());
    }

    #[test]
    fn keeps_what_the_binary_carries() {
        let cc = |s: &str| Cc::parse(s).unwrap();
        // An sm_100f-only library that must also run on an L4: sm_100f stays.
        let f = arch_fix_keeping(&[(cc("10.0"), Suffix::F)], &[cc("8.9")]);
        assert_eq!(
            f.gencode,
            "-gencode arch=compute_89,code=[sm_89,compute_89] -gencode arch=compute_100f,code=sm_100f"
        );
        assert_eq!(f.torch_arch_list, "8.9+PTX;10.0");
        // Already covered by what it carries: nothing added.
        let g = arch_fix_keeping(&[(cc("8.0"), Suffix::None), (cc("9.0"), Suffix::A)], &[cc("8.6")]);
        assert_eq!(g.archs, vec!["sm_80", "sm_90a"]);
    }
}
