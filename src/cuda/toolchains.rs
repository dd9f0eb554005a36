//! What run-time compilers can target, and who uses which: `rules/compilers/runtime-compilers.toml`
//! (built in), read once. Lookups by release (`12.8`): a release the table lacks answers None,
//! never a guess.

use std::sync::OnceLock;

use serde::Deserialize;

use super::{Cc, CudaVersion};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ptxas {
    pub release: String,
    pub max_ptx_isa: String,
    /// `--gpu-name` real targets without `sm_`: `90a`, `120`.
    pub targets: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Nvrtc {
    pub release: String,
    pub ptx_isa: String,
    pub archs: Vec<u32>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TritonSelection {
    pub from: String,
    /// sm number from which `ptxas-blackwell` assembles; 0: one ptxas for all.
    pub blackwell_from: u32,
    pub ptxas_env: String,
    #[serde(default)]
    pub blackwell_env: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TritonRelease {
    pub version: String,
    pub ptxas: String,
    #[serde(default)]
    pub ptxas_blackwell: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TorchPin {
    pub torch: String,
    pub triton: String,
}

crate::schema::words! {
    /// How a consumer compiles at run time.
    pub enum CompilePath {
        /// Triton, with the ptxas it selects.
        Triton = "triton",
        Nvrtc = "nvrtc",
        /// XLA, with the ptxas it finds (or its embedded nvPTXCompiler).
        Xla = "xla",
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Consumer {
    pub package: String,
    /// triton, nvrtc, xla.
    pub compiler: CompilePath,
    pub what: String,
    pub central: bool,
    #[serde(default)]
    pub clamp: String,
    /// What of the package runs when this path cannot: `runs eager`.
    #[serde(default)]
    pub still_runs: String,
    /// The CUDA major the package is built for, where its name says it.
    #[serde(default)]
    pub cuda: Option<u16>,
    /// Releases before this one load NVRTC in the dynamic loader's order.
    #[serde(default)]
    pub ld_order_below: String,
    /// Judged only when no other consumer of its compiler is installed.
    #[serde(default)]
    pub alone: bool,
    /// The variable (set to 1) that makes it ask NVRTC for PTX instead of a cubin.
    #[serde(default)]
    pub ptx_env: String,
    /// The package manager whose package this is (`pypi`, `conda`, `deb`, `rpm`); empty: any
    /// (names are compared as each manager writes them).
    #[serde(default)]
    pub manager: String,
    /// Named cases (`tests/rule_cases.rs` runs them as `knowledge::consumer::<name>`).
    #[serde(default)]
    pub cases: Vec<crate::knowledge::Case>,
}

impl Consumer {
    /// A family of packages (`cupy-cuda*`: every name with that prefix), not one package.
    pub fn family(&self) -> bool {
        self.package.ends_with('*')
    }
    /// Whether the row names this package of this manager.
    pub fn matches(&self, name: &str, manager: &str) -> bool {
        let named = match self.package.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None => name == self.package,
        };
        named && (self.manager.is_empty() || self.manager == manager)
    }
}

/// Where Triton comes from: its packages, and the directories of the ptxas it bundles.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TritonInstall {
    pub packages: Vec<String>,
    pub bundled: Vec<String>,
}

/// Where XLA finds a PTX assembler besides the pip wheel.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Xla {
    pub plugin: String,
    pub system: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CupyClamp {
    pub from: String,
    /// From each NVRTC release on, ascending: the newest sm CuPy asks for.
    pub ceilings: Vec<Ceiling>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ceiling {
    pub nvrtc: String,
    pub sm: u32,
}

/// A Python module whose import shows a package compiles device code at run time.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PythonCompiler {
    /// Dotted; its submodules count too.
    pub module: String,
    /// nvrtc, nvjitlink, nvcc, ptxas, nvptxcompiler, nvvm.
    pub kind: String,
    /// Packages that provide the module (not consumers of it).
    pub providers: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Table {
    pub ptxas: Vec<Ptxas>,
    pub nvrtc: Vec<Nvrtc>,
    pub triton: Vec<TritonSelection>,
    pub triton_release: Vec<TritonRelease>,
    pub torch_pin: Vec<TorchPin>,
    pub consumer: Vec<Consumer>,
    pub cupy_clamp: Vec<CupyClamp>,
    pub triton_install: TritonInstall,
    pub xla: Xla,
    pub python_compiler: Vec<PythonCompiler>,
    pub python_finders: PythonFinders,
}

/// Packages whose code names compilers only to find them for others.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PythonFinders {
    pub packages: Vec<String>,
}

pub const BUILTIN: &str = include_str!("../../rules/compilers/runtime-compilers.toml");

/// The built-in table, with the `[[consumer]]` rows of the knowledge files added to this
/// process (`--knowledge`, `[knowledge] extend`): a row for the same package and compiler replaces
/// the built-in one.
pub fn table() -> &'static Table {
    load().unwrap_or_else(|e| panic!("{e}"))
}

/// [`table`], or why a knowledge file's consumer row cannot be read (`Policy::load` asks first,
/// so the command line reports it at its file and line).
pub fn load() -> Result<&'static Table, String> {
    static T: OnceLock<Result<Table, String>> = OnceLock::new();
    T.get_or_init(|| {
        let mut t: Table = toml::from_str(BUILTIN).expect("rules/compilers/runtime-compilers.toml parses");
        for row in &crate::knowledge::get().consumers {
            let c: Consumer =
                row.row.clone().try_into().map_err(|e: toml::de::Error| format!("{}: [[consumer]]: {e}", row.at))?;
            match t
                .consumer
                .iter_mut()
                .find(|o| o.package == c.package && o.compiler == c.compiler && o.manager == c.manager)
            {
                Some(o) => *o = c,
                None => t.consumer.push(c),
            }
        }
        Ok(t)
    })
    .as_ref()
    .map_err(Clone::clone)
}

pub use crate::knowledge::version_key;

/// `12.8` of `12.8.93`.
pub fn release_of(v: &str) -> Option<CudaVersion> {
    CudaVersion::parse(v)
}

impl Table {
    /// Every package the table names (consumers and Triton's): the image keeps them among its
    /// CUDA packages.
    pub fn packages(&self) -> Vec<&str> {
        let mut out: Vec<&str> = self.consumer.iter().map(|c| c.package.as_str()).collect();
        out.extend(self.triton_install.packages.iter().map(String::as_str));
        out
    }
    /// The compiler an imported module shows (`cuda.bindings.nvrtc.x` -> nvrtc).
    pub fn python_compiler(&self, module: &str) -> Option<&PythonCompiler> {
        self.python_compiler
            .iter()
            .find(|r| module == r.module || module.strip_prefix(r.module.as_str()).is_some_and(|t| t.starts_with('.')))
    }
    pub fn ptxas(&self, release: CudaVersion) -> Option<&Ptxas> {
        self.ptxas.iter().find(|p| release_of(&p.release) == Some(release))
    }
    pub fn nvrtc(&self, release: CudaVersion) -> Option<&Nvrtc> {
        self.nvrtc.iter().find(|p| release_of(&p.release) == Some(release))
    }
    /// The selection rules of a Triton version.
    pub fn triton_selection(&self, version: &str) -> Option<&TritonSelection> {
        let v = version_key(version);
        self.triton.iter().filter(|t| version_key(&t.from) <= v).max_by_key(|t| version_key(&t.from))
    }
    /// The first ptxas release (in the table's order, oldest first) that assembles `target`.
    pub fn first_ptxas_for(&self, target: &str) -> Option<&Ptxas> {
        self.ptxas.iter().find(|p| p.targets.iter().any(|t| t == target))
    }
    pub fn first_nvrtc_for(&self, sm: u32) -> Option<&Nvrtc> {
        self.nvrtc.iter().find(|p| p.archs.contains(&sm))
    }
    /// The first Triton release whose bundled ptxas for `cc` assembles `target`, and the torch
    /// release that pins it.
    pub fn first_triton_for(&self, cc: Cc, target: &str) -> Option<(&TritonRelease, Option<&TorchPin>)> {
        let rel = self.triton_release.iter().find(|r| {
            let sel = self.triton_selection(&r.version);
            let blackwell = sel.is_some_and(|s| s.blackwell_from > 0 && cc.sm() >= s.blackwell_from);
            let used = if blackwell && !r.ptxas_blackwell.is_empty() { &r.ptxas_blackwell } else { &r.ptxas };
            release_of(used).and_then(|v| self.ptxas(v)).is_some_and(|p| p.targets.iter().any(|t| t == target))
        })?;
        let pin = self.torch_pin.iter().find(|p| p.triton == rel.version);
        Some((rel, pin))
    }
    /// The architecture CuPy asks NVRTC for on `cc` (its clamp by NVRTC release).
    pub fn cupy_arch(&self, cupy: &str, nvrtc: CudaVersion, cc: Cc) -> u32 {
        const TEGRA: [u32; 5] = [32, 53, 62, 72, 87];
        let sm = cc.sm();
        if TEGRA.contains(&sm) {
            return sm;
        }
        let v = version_key(cupy);
        let Some(c) = self.cupy_clamp.iter().filter(|c| version_key(&c.from) <= v).max_by_key(|c| version_key(&c.from))
        else {
            // Before 13.4 the clamp compared strings: sm_1xx passed unclamped.
            return if sm >= 100 { sm } else { sm.min(90) };
        };
        let max = c.ceilings.iter().rfind(|x| release_of(&x.nvrtc).is_some_and(|v| v <= nvrtc)).map_or(sm, |x| x.sm);
        sm.min(max)
    }
}

/// What Triton asks ptxas for on `cc`: `sm_90a` from 9.0 on, `sm_86` below (without `sm_`).
pub fn triton_target(cc: Cc) -> String {
    if cc.major >= 9 { format!("{}a", cc.sm()) } else { cc.sm().to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_table_reads_and_answers() {
        let t = table();
        let b300 = Cc { major: 10, minor: 3 };
        assert!(!t.ptxas(CudaVersion::new(12, 8)).unwrap().targets.contains(&triton_target(b300)));
        assert_eq!(t.first_ptxas_for("103a").unwrap().release, "12.9");
        let (rel, pin) = t.first_triton_for(b300, &triton_target(b300)).unwrap();
        assert_eq!((rel.version.as_str(), pin.unwrap().torch.as_str()), ("3.6.0", "2.10.0"));
        let thor = Cc { major: 11, minor: 0 };
        assert_eq!(t.first_triton_for(thor, &triton_target(thor)).unwrap().0.version, "3.7.0");
        assert_eq!(t.triton_selection("3.4.0").unwrap().blackwell_from, 0);
        assert_eq!(t.triton_selection("3.9.1").unwrap().blackwell_from, 90);
        let rtx50 = Cc { major: 12, minor: 0 };
        assert_eq!(t.cupy_arch("13.6.0", CudaVersion::new(12, 6), rtx50), 90);
        assert_eq!(t.cupy_arch("13.6.0", CudaVersion::new(12, 8), rtx50), 120);
        assert_eq!(t.cupy_arch("13.3.0", CudaVersion::new(12, 6), rtx50), 120);
        // CuPy 13.6 with NVRTC 11.8 (cupy-cuda11x): sm_90; 11.1-11.7: sm_86.
        assert_eq!(t.cupy_arch("13.6.0", CudaVersion::new(11, 8), rtx50), 90);
        assert_eq!(t.cupy_arch("13.6.0", CudaVersion::new(11, 4), Cc::from_sm(89)), 86);
        assert_eq!(t.cupy_arch("14.2.0", CudaVersion::new(12, 9), Cc::from_sm(121)), 121);
        assert_eq!(version_key("2.8.0+cu128"), (2, 8, 0));
    }
}
