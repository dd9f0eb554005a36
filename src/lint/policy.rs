//! The gate's policy, built from plain values: the configuration file, rule directories, ignore
//! file and baseline that apply, what fails the gate, and which targets are judged. The command
//! line only translates its flags into a [`PolicySpec`]; the rule-case harness and `audit` build
//! the same spec, so targets and drivers merge one way everywhere.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::config::{self, Config, Ignore};
use super::error::ConfigError;
use super::report::PolicyFiles;
use super::rules::{self, EvalError, FailOn, Rule};
use super::targets::{self, Target};
use super::{LintOptions, LintReport};
use crate::device::DeviceReport;
use crate::image::ImageReport;

/// The configuration file read when none is named: the nearest one from the current directory
/// up to the repository root ([`discover`]).
pub const CONFIG_FILE: &str = "cudalint.toml";
/// The ignore files read when none is named, found as the configuration is: `[[ignore]]`
/// tables, or Trivy's one-entry-per-line form ([`config::read_ignore_lines`]).
pub const IGNORE_FILES: [&str; 2] = [".cudalintignore.toml", ".cudalintignore"];

/// The nearest directory from `start` up that holds one of `names`, as ruff and cargo find their
/// configuration: the search stops after the repository root (the directory holding `.git`), so
/// a job run from a subdirectory finds the repository's file and never one above the checkout;
/// outside a repository only `start` itself is looked in.
/// Two of `names` in one directory is an error (which one applies would be a guess).
pub fn discover(start: &Path, names: &[&str]) -> Result<Option<PathBuf>, ConfigError> {
    // Up to the repository root; with no repository above, the starting directory alone (a
    // walk to `/` would read a file any other user of the machine could plant in `/tmp`).
    let ancestors: Vec<&Path> = start.ancestors().collect();
    let dirs = match ancestors.iter().position(|d| d.join(".git").exists()) {
        Some(root) => &ancestors[..=root],
        None => &ancestors[..1],
    };
    for dir in dirs {
        let found: Vec<PathBuf> = names.iter().map(|n| dir.join(n)).filter(|p| p.is_file()).collect();
        match found.as_slice() {
            [] => {}
            [one] => return planted_by_others(one).map_or(Ok(Some(one.clone())), Err),
            [a, b, ..] => {
                return Err(ConfigError::new(format!(
                    "both {} and {} exist: keep one (or name it with a flag)",
                    a.display(),
                    b.display()
                )));
            }
        }
    }
    Ok(None)
}

/// A discovered file that another user could have written (it, or its directory, is writable by
/// anyone, or another user than this one or root owns it, as git's `safe.directory` judges a
/// repository) is not taken as policy: an error naming it, never a silent use or a silent skip.
fn planted_by_others(file: &Path) -> Option<ConfigError> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    planted_by_others_for(file, unsafe { libc::geteuid() })
}

/// [`planted_by_others`] as user `me` sees it.
fn planted_by_others_for(file: &Path, me: u32) -> Option<ConfigError> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let mode = |p: &Path| std::fs::metadata(p).map(|m| m.permissions().mode()).unwrap_or(0);
    let owner = std::fs::metadata(file).map(|m| m.uid()).unwrap_or(0);
    let dir = file.parent().unwrap_or(Path::new("."));
    let why = if owner != me && owner != 0 {
        format!("it belongs to another user (uid {owner})")
    } else if mode(file) & 0o002 != 0 {
        format!("it is writable by any user (mode {:o})", mode(file) & 0o7777)
    } else if mode(dir) & 0o002 != 0 {
        format!("its directory {} is writable by any user (mode {:o})", dir.display(), mode(dir) & 0o7777)
    } else {
        return None;
    };
    Some(ConfigError::new(format!(
        "{} was found but not read: {why}, so another user could have put it there; name it with its \
         flag (--config, --ignore-file) to use it",
        file.display()
    )))
}

/// The targets as given: GPU names, architectures, target files, and the driver they run.
/// Empty lists mean "take the configuration file's `[targets]`".
#[derive(Debug, Clone, Default)]
pub struct TargetSpec {
    /// GPU names (`H100`, `RTX 4090`).
    pub gpus: Vec<String>,
    /// Architectures (`sm_90`, `8.9`, `sm_100f`).
    pub archs: Vec<String>,
    /// `nvidia-smi` CSV or `kubectl get nodes -o json` files.
    pub from: Vec<String>,
    /// The driver version (`535.104.05`); wins over `cuda_driver`.
    pub driver: Option<String>,
    /// The driver as the CUDA version it reports (`12.2`).
    pub cuda_driver: Option<String>,
}

impl TargetSpec {
    /// Whether any target is named (a driver alone names none).
    pub fn names_targets(&self) -> bool {
        !self.gpus.is_empty() || !self.archs.is_empty() || !self.from.is_empty()
    }

    /// The targets: this spec's, else the configuration's `[targets]` (one or the other, never
    /// a mix); the spec's driver, else the configuration's, applies to every target that did not
    /// come with its own (targets read from `nvidia-smi` or node labels keep theirs).
    pub fn resolve(&self, cfg: &Config) -> Result<Vec<Target>, ConfigError> {
        let t = &cfg.targets;
        let (gpus, archs, from) =
            if self.names_targets() { (&self.gpus, &self.archs, &self.from) } else { (&t.gpus, &t.arch, &t.from) };
        let mut out = Vec::new();
        for g in gpus.iter().map(|g| g.trim()).filter(|g| !g.is_empty()) {
            out.push(targets::gpu(g)?);
        }
        for x in archs.iter().map(|x| x.trim()).filter(|x| !x.is_empty()) {
            out.extend(targets::arch(x)?);
        }
        for f in from {
            out.extend(targets::from_file(f)?);
        }
        let (driver, cuda_driver) = match (&self.driver, &self.cuda_driver) {
            (None, None) => (&t.driver, &t.cuda_driver),
            (d, c) => (d, c),
        };
        let declared = match (driver, cuda_driver) {
            (Some(d), _) => Some(targets::driver(d).map(|(d, c)| (Some(d), c))?),
            (None, Some(c)) => Some((None, targets::cuda_driver(c)?)),
            (None, None) => None,
        };
        if let Some((d, c)) = declared {
            for t in out.iter_mut().filter(|t| t.driver.is_none() && t.driver_cuda.is_none()) {
                t.driver = d.clone();
                t.driver_cuda = Some(c);
            }
        }
        Ok(targets::dedup(out))
    }
}

/// Everything that decides how an inventory is judged, as plain values.
#[derive(Debug, Clone, Default)]
pub struct PolicySpec {
    /// The configuration file; `None` discovers [`CONFIG_FILE`] from `search_from`.
    pub config: Option<PathBuf>,
    /// Directories of additional rules, after the configuration's own.
    pub rule_dirs: Vec<PathBuf>,
    /// Knowledge files, after the configuration's `[knowledge] extend`.
    pub knowledge: Vec<PathBuf>,
    /// The ignore file; `None` discovers one of [`IGNORE_FILES`] from `search_from`.
    pub ignore_file: Option<PathBuf>,
    /// Where discovery starts (the command line's current directory); `None` discovers nothing:
    /// the library's callers (tests, rule cases) name their files.
    pub search_from: Option<PathBuf>,
    /// Findings recorded here are not reported.
    pub baseline: Option<PathBuf>,
    /// The lowest severity that fails the gate; `None` takes the configuration's, else error.
    pub fail_on: Option<FailOn>,
    pub targets: TargetSpec,
}

/// A loaded policy: rules, configuration, ignores, baseline and targets, read before any image
/// (a bad rule or configuration fails first).
pub struct Policy {
    pub rules: Vec<Rule>,
    pub config: Config,
    pub ignores: Vec<Ignore>,
    pub baseline: Option<BTreeSet<String>>,
    /// The targets the spec (or the configuration) names; may be empty.
    pub targets: Vec<Target>,
    pub fail_on: FailOn,
    /// The files this policy was read from.
    pub files: PolicyFiles,
}

/// `given`, else the one of `names` discovered from `from`.
fn explicit_or_found(
    given: Option<&PathBuf>,
    from: Option<&Path>,
    names: &[&str],
) -> Result<Option<PathBuf>, ConfigError> {
    match (given, from) {
        (Some(g), _) => Ok(Some(g.clone())),
        (None, Some(from)) => discover(from, names),
        (None, None) => Ok(None),
    }
}

/// A path as the report names it: relative to the current directory where it lies below it.
fn shown(p: &Path, cwd: Option<&Path>) -> String {
    cwd.and_then(|c| p.strip_prefix(c).ok()).filter(|r| !r.as_os_str().is_empty()).unwrap_or(p).display().to_string()
}

impl Policy {
    pub fn load(spec: &PolicySpec) -> Result<Policy, ConfigError> {
        let from = spec.search_from.as_deref();
        let config_path = explicit_or_found(spec.config.as_ref(), from, &[CONFIG_FILE])?;
        let raw = config_path.as_deref().map(config::read).transpose()?;
        if let Some(r) = &raw {
            r.check_paths()?;
        }
        let mut dirs = raw.as_ref().map(|r| r.rule_dirs()).unwrap_or_default();
        dirs.extend(spec.rule_dirs.iter().cloned());
        let rules = rules::load(&dirs)?;
        // What is known of libraries and loaders is settled before any image is read: the
        // inspector keeps files by it.
        let mut knowledge = raw.as_ref().map(|r| r.knowledge_files()).unwrap_or_default();
        knowledge.extend(spec.knowledge.iter().cloned());
        crate::knowledge::install(&knowledge).map_err(|e| ConfigError::at(e.file, e.line, e.message))?;
        crate::cuda::toolchains::load().map_err(|e| ConfigError::at("knowledge", None, e))?;
        for c in &crate::knowledge::get().compiler_files {
            if c.kind.parse::<crate::inspect::toolchain::CompilerKind>().is_err() {
                let kinds =
                    crate::inspect::toolchain::CompilerKind::ALL.iter().map(|k| k.to_string()).collect::<Vec<_>>();
                return Err(ConfigError::at(
                    &c.at,
                    None,
                    format!("compiler_file {:?}: kind {:?} is not one of {}", c.key, c.kind, kinds.join(", ")),
                ));
            }
        }
        let config = match raw {
            Some(r) => r.resolve(&rules)?,
            None => Config::default(),
        };
        let ignore_path = explicit_or_found(spec.ignore_file.as_ref(), from, &IGNORE_FILES)?;
        let ignores = match &ignore_path {
            Some(f) => config::read_ignore_file(f, &rules)?,
            None => Vec::new(),
        };
        let baseline = spec.baseline.as_ref().map(|b| config::read_baseline(b)).transpose()?;
        let targets = spec.targets.resolve(&config)?;
        let fail_on = spec.fail_on.or(config.fail_on).unwrap_or(FailOn::Error);
        let files = PolicyFiles {
            config: config_path.map(|p| shown(&p, from)),
            ignore_file: ignore_path.map(|p| shown(&p, from)),
            baseline: spec.baseline.as_ref().map(|p| shown(p, from)),
        };
        Ok(Policy { rules, config, ignores, baseline, targets, fail_on, files })
    }

    /// Judges an inventory for `targets` (usually [`Policy::targets`]; `audit` passes each
    /// image's pools, `--on-device` the node's GPUs), with what the GPU did if it ran.
    pub fn judge(
        &self,
        inventory: &ImageReport,
        targets: &[Target],
        device: Option<DeviceReport>,
    ) -> Result<LintReport, EvalError> {
        let mut report = super::run(
            inventory,
            LintOptions {
                rules: &self.rules,
                targets: targets.to_vec(),
                fail_on: self.fail_on,
                config: &self.config,
                extra_ignores: self.ignores.clone(),
                baseline: self.baseline.clone(),
                device,
            },
        )?;
        report.policy = self.files.clone();
        Ok(report)
    }
}

#[cfg(test)]
mod discovery_tests {
    use super::*;

    #[test]
    fn a_found_file_of_another_user_or_writable_by_anyone_is_refused() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join(CONFIG_FILE);
        std::fs::write(&f, "").unwrap();
        let owner = std::fs::metadata(&f).unwrap().uid();
        assert!(planted_by_others_for(&f, owner).is_none(), "the user's own file");
        // Another user's file: as root, one given away; else seen as another user would.
        let (file_of_other, me) = if owner == 0 {
            let g = d.path().join("given.toml");
            std::fs::write(&g, "").unwrap();
            std::os::unix::fs::chown(&g, Some(4242), None).unwrap();
            // Root's own files are every user's to trust (root could change them anyway).
            assert!(planted_by_others_for(&f, 4242).is_none());
            (g, 0)
        } else {
            (f.clone(), owner + 1)
        };
        let e = planted_by_others_for(&file_of_other, me).expect("another user's file").to_string();
        assert!(e.contains("belongs to another user") && e.contains("--config"), "{e}");
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o666)).unwrap();
        let e = planted_by_others_for(&f, owner).expect("world-writable").to_string();
        assert!(e.contains("writable by any user"), "{e}");
    }
}
