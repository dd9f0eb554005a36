//! The gate's policy, built from plain values: the configuration file, rule directories, ignore
//! file and baseline that apply, what fails the gate, and which targets are judged. The command
//! line only translates its flags into a [`PolicySpec`]; the rule-case harness and `audit` build
//! the same spec, so targets and drivers merge one way everywhere.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::config::{self, Config, Ignore};
use super::error::ConfigError;
use super::rules::{self, EvalError, Rule, Severity};
use super::targets::{self, Target};
use super::{LintOptions, LintReport};
use crate::cuda::CudaVersion;
use crate::device::DeviceReport;
use crate::image::ImageReport;

/// The configuration file read when none is named, from the current directory.
pub const CONFIG_FILE: &str = "cudalint.toml";
/// The ignore file read when none is named, from the current directory.
pub const IGNORE_FILE: &str = ".cudalintignore.toml";

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
            (None, Some(c)) => Some((
                None,
                CudaVersion::parse(c).ok_or_else(|| ConfigError::new(format!("{c:?} is not a CUDA version (12.2)")))?,
            )),
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
    /// The configuration file; `None` reads [`CONFIG_FILE`] if it exists.
    pub config: Option<PathBuf>,
    /// Directories of additional rules, after the configuration's own.
    pub rule_dirs: Vec<PathBuf>,
    /// The ignore file; `None` reads [`IGNORE_FILE`] if it exists.
    pub ignore_file: Option<PathBuf>,
    /// Findings recorded here are not reported.
    pub baseline: Option<PathBuf>,
    /// The lowest severity that fails the gate; `None` takes the configuration's, else error.
    pub fail_on: Option<Severity>,
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
    pub fail_on: Severity,
}

/// `given`, else `default` when it exists in the current directory.
fn explicit_or_default(given: Option<&PathBuf>, default: &str) -> Option<PathBuf> {
    given.cloned().or_else(|| Some(PathBuf::from(default)).filter(|p| Path::new(p).exists()))
}

impl Policy {
    pub fn load(spec: &PolicySpec) -> Result<Policy, ConfigError> {
        let raw = explicit_or_default(spec.config.as_ref(), CONFIG_FILE).map(|p| config::read(&p)).transpose()?;
        let mut dirs = raw.as_ref().map(|r| r.rule_dirs()).unwrap_or_default();
        dirs.extend(spec.rule_dirs.iter().cloned());
        let rules = rules::load(&dirs)?;
        let config = match raw {
            Some(r) => r.resolve(&rules)?,
            None => Config::default(),
        };
        let ignores = match explicit_or_default(spec.ignore_file.as_ref(), IGNORE_FILE) {
            Some(f) => config::read_ignore_file(&f, &rules)?,
            None => Vec::new(),
        };
        let baseline = spec.baseline.as_ref().map(|b| config::read_baseline(b)).transpose()?;
        let targets = spec.targets.resolve(&config)?;
        let fail_on = spec.fail_on.or(config.fail_on).unwrap_or(Severity::Error);
        Ok(Policy { rules, config, ignores, baseline, targets, fail_on })
    }

    /// Judges an inventory for `targets` (usually [`Policy::targets`]; `audit` passes each
    /// image's pools, `--on-device` the node's GPUs), with what the GPU did if it ran.
    pub fn judge(
        &self,
        inventory: &ImageReport,
        targets: &[Target],
        device: Option<DeviceReport>,
    ) -> Result<LintReport, EvalError> {
        super::run(
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
        )
    }
}
