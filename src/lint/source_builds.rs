//! A lockfile's packages that pip builds from their sdist at install time and whose build
//! compiles CUDA code (the knowledge base's `[[source_build]]` rows), judged per target: the
//! build runs inside `docker build`, where no GPU is visible, so what it makes is the package's
//! default list (or nothing known, where that list comes from the build machine's GPUs). A
//! target fails when no architecture of that list has SASS that runs on it, by the same rule
//! as any cubin (`compat::sass_runs`: same major, equal or higher minor). The fix sets the
//! variable to every target's architecture, since the setting replaces the default.

use std::collections::BTreeSet;

use super::targets::Target;
use crate::cuda::compat::sass_runs;
use crate::cuda::{Cc, arches};
use crate::image::ImageReport;
use crate::inspect::fatbin::Suffix;
use crate::knowledge::SourceBuild;

/// What `deploy.unbuilt_cuda` and `deploy.unbuilt_cuda_fix` say for one target.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OnTarget {
    /// `flash-attn 2.8.3 (FLASH_ATTN_CUDA_ARCHS; without it: 80;90;100;120 ...)`, sorted.
    pub failing: Vec<String>,
    pub fix: String,
}

fn ccs(archs: &[String]) -> Vec<Cc> {
    archs.iter().filter_map(|a| Cc::parse(a)).collect()
}

/// The default's SASS runs on `cc`.
fn default_runs(s: &SourceBuild, cc: Cc) -> bool {
    ccs(&s.default_archs).into_iter().any(|a| sass_runs(a, Suffix::None, cc))
}

/// `80;89;90`: each architecture once, oldest first.
fn sm_list(set: &BTreeSet<Cc>) -> String {
    set.iter().map(|c| c.sm().to_string()).collect::<Vec<_>>().join(";")
}

/// `8.0;8.9;9.0+PTX`: each as PyTorch accepts it (the newest accepted one of its major not
/// above it: 10.7 is written 10.3), PTX of the newest for GPUs after them.
fn torch_list(set: &BTreeSet<Cc>) -> String {
    let accepted: BTreeSet<String> = set
        .iter()
        .map(|c| arches::torch_archs().rev().find(|t| t.major == c.major && t.minor <= c.minor).unwrap_or(*c))
        .map(|c| c.to_string())
        .collect();
    let n = accepted.len();
    accepted
        .into_iter()
        .enumerate()
        .map(|(i, a)| if i + 1 == n { format!("{a}+PTX") } else { a })
        .collect::<Vec<_>>()
        .join(";")
}

/// The architectures the variable must list so the build runs on every target: each target's
/// own; where the variable takes only some values, for each target the newest of those whose
/// SASS runs on it; with the targets that none of those runs on.
fn wanted(s: &SourceBuild, targets: &[Target]) -> (BTreeSet<Cc>, Vec<Cc>) {
    let takes = ccs(&s.takes);
    let mut set = BTreeSet::new();
    let mut none = Vec::new();
    for t in targets {
        if takes.is_empty() {
            set.insert(t.cc);
        } else {
            match takes.iter().filter(|a| sass_runs(**a, Suffix::None, t.cc)).max() {
                Some(a) => {
                    set.insert(*a);
                }
                None => none.push(t.cc),
            }
        }
    }
    (set, none)
}

/// The lock's packages built at install whose build makes no code that runs on `t`, and what
/// builds them for every one of `targets` (or why nothing the variable takes does).
pub fn on_target(r: &ImageReport, t: &Target, targets: &[Target]) -> OnTarget {
    let known = crate::knowledge::get();
    let platform = r.image.platform.clone().unwrap_or_default();
    let mut failing = Vec::new();
    let mut settings: Vec<String> = Vec::new();
    let mut cannot: Vec<String> = Vec::new();
    for u in &r.image.unbuilt {
        let name = u.split(' ').next().unwrap_or_default();
        let Some(s) = known.source_build(name) else { continue };
        if default_runs(s, t.cc) {
            continue;
        }
        failing.push(format!("{u} ({}; without it: {})", s.variable, s.default));
        let (set, none) = wanted(s, targets);
        if none.contains(&t.cc) {
            cannot.push(format!(
                "no {} value makes {name} code for {} (compute capability {}): its build takes only {}",
                s.variable,
                t.gpu(),
                t.cc,
                s.takes.join(", ")
            ));
            continue;
        }
        let setting = s.setting_template().replace("{sm}", &sm_list(&set)).replace("{torch}", &torch_list(&set));
        let setting = format!("`ENV {setting}`");
        if !settings.contains(&setting) {
            settings.push(setting);
        }
    }
    failing.sort();
    let mut fix = Vec::new();
    if !settings.is_empty() {
        fix.push(format!(
            "add {} to the Dockerfile before the pip install (it replaces the default, so it lists every target's architecture), or pin a release that ships a wheel for {platform}",
            settings.join(" and ")
        ));
    }
    if !cannot.is_empty() {
        fix.push(format!(
            "{}; pin a build of it with a wheel for {platform} that carries code for this GPU, or leave it out of images for it",
            cannot.join("; ")
        ));
    }
    OnTarget { failing, fix: fix.join("; ") }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cc(s: &str) -> Cc {
        Cc::parse(s).unwrap()
    }

    fn row(default: &[&str], takes: &[&str], setting: &str) -> SourceBuild {
        SourceBuild {
            package: "p".into(),
            variable: "V".into(),
            default: String::new(),
            default_archs: default.iter().map(|s| s.to_string()).collect(),
            takes: takes.iter().map(|s| s.to_string()).collect(),
            setting: setting.into(),
            source: String::new(),
            cases: vec![],
        }
    }

    /// Written down before the code, by docs/cuda-binaries.md §4.1 (SASS runs on the same major
    /// with an equal or higher minor, never across majors): flash-attn's default 80;90;100;120
    /// runs on A100 (8.0), A10 (8.6), L4 (8.9), Orin (8.7), H100 (9.0), B200 (10.0), B300
    /// (10.3), RTX 5090 (12.0) and GB10 (12.1); it fails T4 (7.5), V100 (7.0) and Thor (11.0),
    /// whose majors it has no SASS of. A default that depends on the build machine runs nowhere.
    #[test]
    fn a_default_list_runs_where_its_sass_runs() {
        let fa = row(&["80", "90", "100", "120"], &[], "");
        for ok in ["8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "10.3", "12.0", "12.1"] {
            assert!(default_runs(&fa, cc(ok)), "{ok}");
        }
        for bad in ["7.5", "7.0", "11.0"] {
            assert!(!default_runs(&fa, cc(bad)), "{bad}");
        }
        assert!(!default_runs(&row(&[], &[], ""), cc("9.0")));
    }

    #[test]
    fn the_setting_lists_every_target_in_the_variables_form() {
        let set: BTreeSet<Cc> = [cc("9.0"), cc("8.0"), cc("8.9")].into();
        assert_eq!(sm_list(&set), "80;89;90");
        assert_eq!(torch_list(&set), "8.0;8.9;9.0+PTX");
        // 10.7 is not in PyTorch's list: 10.3 SASS runs on it.
        assert_eq!(torch_list(&[cc("10.7")].into()), "10.3+PTX");
        let t = |n: &str, c: &str| Target::new(n.to_string(), cc(c));
        let targets = [t("A100", "8.0"), t("L4", "8.9"), t("T4", "7.5")];
        // A variable that takes any value: each target's own architecture.
        let (set, none) = wanted(&row(&[], &[], ""), &targets);
        assert_eq!((sm_list(&set), none), ("75;80;89".to_string(), vec![]));
        // One that takes only some: for each target the newest that runs there; none for T4.
        let (set, none) = wanted(&row(&[], &["80", "90", "100", "120"], ""), &targets);
        assert_eq!((sm_list(&set), none), ("80".to_string(), vec![cc("7.5")]));
    }
}
