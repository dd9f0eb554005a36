//! What cudalint knows about libraries, loaders, packages and GPUs, as data: the files in
//! `rules/knowledge/` are built in, and `--knowledge FILE` or `[knowledge] extend` in
//! cudalint.toml add rows or replace the row with the same key, as ruff's `extend-*` settings do.
//! Every row keeps where it was read (`libraries.toml:42`, its line), so a verdict can say which row decided
//! it; every row has named cases (`tests/rule_cases.rs` runs them). Nothing here knows a package
//! name: they are all in the data.

use std::path::PathBuf;
use std::sync::OnceLock;

use serde::Deserialize;
use toml::Spanned;

/// The built-in files, by the name their rows cite.
pub const BUILTIN: &[(&str, &str)] = &[
    ("libraries.toml", include_str!("../rules/knowledge/libraries.toml")),
    ("stack.toml", include_str!("../rules/knowledge/stack.toml")),
];

/// Which file names mark a file as CUDA's without looking inside (`DT_NEEDED`, a SONAME, a file
/// in a layer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Named {
    /// Every name that starts with the prefix.
    #[default]
    Any,
    /// Only its shared objects (`libcudart.so*`): the static runtime is linked into binaries,
    /// which are found by their own content.
    Shared,
    /// None: known to the verdicts only.
    No,
}

/// The host driver's files, which the image must not carry (except the forward-compatibility
/// package's copies).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Driver {
    /// `libcuda.so`, `libcudadebugger.so`.
    Libcuda,
    /// `libnvidia-*.so.*`.
    Libnvidia,
}

/// The compute capabilities a library's callers load it on: `min` and newer, below `below`,
/// except the listed ones (as `8.6`).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Dispatch {
    #[serde(default)]
    pub min: String,
    #[serde(default)]
    pub below: String,
    #[serde(default)]
    pub except: Vec<String>,
    /// Who decides, in words: `vLLM's _is_fa3_supported (flash_attn_interface.py)`.
    pub by: String,
    /// In `later`: the release of the package that installed the file from which this applies.
    #[serde(default)]
    pub from: String,
}

/// A named case of a row (`tests/rule_cases.rs`): either a name and what the row must make of it,
/// or an image judged on GPUs with the rules that must fire and stay quiet.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Case {
    pub name: String,
    // A file name and what its name says.
    #[serde(default)]
    pub file: Option<String>,
    #[serde(default)]
    pub cuda: Option<bool>,
    #[serde(default)]
    pub closed: Option<bool>,
    /// The CUDA major its SONAME names (0: none).
    #[serde(default)]
    pub soname_major: Option<u16>,
    #[serde(default)]
    pub driver: Option<bool>,
    #[serde(default)]
    pub optional: Option<bool>,
    // A package name and what it is.
    #[serde(default)]
    pub package: Option<String>,
    #[serde(default)]
    pub related: Option<bool>,
    #[serde(default)]
    pub vendor: Option<bool>,
    #[serde(default)]
    pub runtime: Option<bool>,
    /// The CUDA major its name says.
    #[serde(default)]
    pub cuda_major: Option<u16>,
    #[serde(default)]
    pub major: Option<u16>,
    #[serde(default)]
    pub component: Option<String>,
    /// Text the answer must hold (a build's name, a wheel's directory).
    #[serde(default)]
    pub says: Option<String>,
    // An environment variable kept or not.
    #[serde(default)]
    pub var: Option<String>,
    #[serde(default)]
    pub kept: Option<bool>,
    /// The run-time compiler kind a file name says (empty: none).
    #[serde(default)]
    pub compiler: Option<String>,
    // A GPU and its forward compatibility.
    #[serde(default)]
    pub gpu: Option<String>,
    #[serde(default)]
    pub forward_compat: Option<bool>,
    // An image: files from fixtures/bin, small text files, config env, targets.
    #[serde(default)]
    pub files: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    pub text: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    pub env: Vec<String>,
    #[serde(default)]
    pub gpus: Vec<String>,
    #[serde(default)]
    pub driver_version: Option<String>,
    /// Rules that must fire, and rules that must not.
    #[serde(default)]
    pub fires: Vec<String>,
    #[serde(default)]
    pub quiet: Vec<String>,
    /// Text every finding of the `fires` rules must hold, in its message and its fix.
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default)]
    pub fix: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Library {
    /// A file-name prefix, or a directory a path passes through.
    pub prefix: String,
    #[serde(default)]
    pub named: Named,
    #[serde(default)]
    pub closed: bool,
    #[serde(default)]
    pub soname_is_cuda: bool,
    /// The CUDA runtime itself (`libcudart`): code registered through it names its major.
    #[serde(default)]
    pub cuda_runtime: bool,
    #[serde(default)]
    pub driver: Option<Driver>,
    #[serde(default)]
    pub package: String,
    #[serde(default)]
    pub dispatch: Option<Dispatch>,
    /// Where later releases of the package that installs the file dispatch otherwise: each with
    /// the release it applies `from`.
    #[serde(default)]
    pub later: Vec<Dispatch>,
    pub source: String,
    #[serde(default)]
    pub cases: Vec<Case>,
}

impl Library {
    /// The dispatch of the release `version` of the package that installed the file (empty:
    /// unknown, the base row's).
    pub fn dispatch_for(&self, version: &str) -> Option<&Dispatch> {
        let v = version_key(version);
        let later = self
            .later
            .iter()
            .filter(|d| !version.is_empty() && version_key(&d.from) <= v)
            .max_by_key(|d| version_key(&d.from));
        later.or(self.dispatch.as_ref())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pick {
    /// Only the CUDA version the framework reports.
    Exact,
    /// That one, else the newest older one of its major, else the oldest newer one.
    SameMajor,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Missing {
    /// The fallback library loads: the package's GPU code is unavailable.
    Fallback,
    /// The package's GPU functions raise.
    Error,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Loader {
    pub from: String,
    pub pick: Pick,
    pub missing: Missing,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sibling {
    pub package: String,
    pub prefix: String,
    #[serde(default)]
    pub env: String,
    #[serde(default)]
    pub fallback: String,
    pub loader: Vec<Loader>,
    pub source: String,
    #[serde(default)]
    pub cases: Vec<Case>,
}

impl Sibling {
    /// The loader of this package version (the newest row at or below it).
    pub fn loader(&self, version: &str) -> Option<&Loader> {
        let v = version_key(version);
        self.loader.iter().filter(|l| version_key(&l.from) <= v).max_by_key(|l| version_key(&l.from))
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Framework {
    pub package: String,
    /// The separator before the CUDA digits in its version's local part: `+cu` of `2.8.0+cu128`.
    pub local_cuda: String,
    pub older: String,
    pub source: String,
    #[serde(default)]
    pub cases: Vec<Case>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Build {
    pub key: String,
    #[serde(default)]
    pub suffix: String,
    #[serde(default)]
    pub prefix: String,
    pub older: String,
    /// The suffix's number is the CUDA major the package was built for.
    #[serde(default)]
    pub names_cuda: bool,
    pub source: String,
    #[serde(default)]
    pub cases: Vec<Case>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Runtime {
    pub prefixes: Vec<String>,
    pub source: String,
    #[serde(default)]
    pub cases: Vec<Case>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Wheel {
    pub component: String,
    pub major: u16,
    pub package: String,
    pub dir: String,
    pub source: String,
    #[serde(default)]
    pub cases: Vec<Case>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Related {
    pub prefix: String,
    #[serde(default)]
    pub vendor: bool,
    pub source: String,
    #[serde(default)]
    pub cases: Vec<Case>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Env {
    pub prefixes: Vec<String>,
    pub source: String,
    #[serde(default)]
    pub cases: Vec<Case>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompilerFile {
    pub key: String,
    #[serde(default)]
    pub names: Vec<String>,
    #[serde(default)]
    pub prefixes: Vec<String>,
    /// ptxas, nvcc, nvrtc, nvjitlink, nvptxcompiler (`inspect::toolchain::CompilerKind`'s words).
    pub kind: String,
    pub source: String,
    #[serde(default)]
    pub cases: Vec<Case>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceBuild {
    pub package: String,
    /// The variable that says which architectures to build.
    pub variable: String,
    /// What the build does without it.
    pub default: String,
    /// The SASS architectures the build makes without the variable, as SM numbers (`["80",
    /// "90"]`). Empty: it depends on the build machine (its visible GPUs), and `docker build`
    /// shows none, so no GPU is known to run what it makes.
    #[serde(default)]
    pub default_archs: Vec<String>,
    /// The only architectures the variable acts on (flash-attn builds 80, 90, 100 and 120 and
    /// passes over any other value); empty: any.
    #[serde(default)]
    pub takes: Vec<String>,
    /// The setting a fix writes, with `{sm}` (`80;89;90`) or `{torch}` (`8.0;8.9;9.0+PTX`) for
    /// the architectures: `CMAKE_ARGS="-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES={sm}"`. Empty:
    /// `VARIABLE="{torch}"` for `TORCH_CUDA_ARCH_LIST`, else `VARIABLE="{sm}"`.
    #[serde(default)]
    pub setting: String,
    pub source: String,
    #[serde(default)]
    pub cases: Vec<Case>,
}

impl SourceBuild {
    /// The setting's template: the row's, else the variable set to the list in its own form.
    pub fn setting_template(&self) -> String {
        match (self.setting.is_empty(), self.variable.as_str()) {
            (false, _) => self.setting.clone(),
            (true, "TORCH_CUDA_ARCH_LIST") => format!("{}=\"{{torch}}\"", self.variable),
            (true, v) => format!("{v}=\"{{sm}}\""),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuClass {
    pub class: String,
    pub forward_compat: bool,
    pub gpus: Vec<String>,
    pub source: String,
    #[serde(default)]
    pub cases: Vec<Case>,
}

/// A row and where it was read: `libraries.toml:41`.
#[derive(Debug, Clone)]
pub struct Row<T> {
    pub row: T,
    pub at: String,
}

impl<T> std::ops::Deref for Row<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.row
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    library: Vec<Spanned<Library>>,
    #[serde(default)]
    sibling: Vec<Spanned<Sibling>>,
    #[serde(default)]
    framework: Vec<Spanned<Framework>>,
    #[serde(default)]
    build: Vec<Spanned<Build>>,
    #[serde(default)]
    wheel: Vec<Spanned<Wheel>>,
    #[serde(default)]
    related: Vec<Spanned<Related>>,
    #[serde(default)]
    env: Vec<Spanned<Env>>,
    #[serde(default)]
    runtime: Vec<Spanned<Runtime>>,
    #[serde(default)]
    gpu_class: Vec<Spanned<GpuClass>>,
    #[serde(default)]
    compiler_file: Vec<Spanned<CompilerFile>>,
    #[serde(default)]
    source_build: Vec<Spanned<SourceBuild>>,
    /// Run-time compiler consumers (rules/compilers/runtime-compilers.toml's `[[consumer]]`), read
    /// by `cuda::toolchains`, which knows their shape.
    #[serde(default)]
    consumer: Vec<Spanned<toml::Table>>,
}

/// Everything known, built-in rows first, then each added file's in order.
#[derive(Debug, Default)]
pub struct Knowledge {
    pub libraries: Vec<Row<Library>>,
    pub siblings: Vec<Row<Sibling>>,
    pub frameworks: Vec<Row<Framework>>,
    pub builds: Vec<Row<Build>>,
    pub wheels: Vec<Row<Wheel>>,
    pub related: Vec<Row<Related>>,
    pub env: Vec<Row<Env>>,
    pub runtime: Vec<Row<Runtime>>,
    pub gpu_classes: Vec<Row<GpuClass>>,
    pub compiler_files: Vec<Row<CompilerFile>>,
    pub source_builds: Vec<Row<SourceBuild>>,
    /// `[[consumer]]` rows of added files, as read: `cuda::toolchains` merges them into its table.
    pub consumers: Vec<Row<toml::Table>>,
    /// The files added to the built-in ones (for `--version`-like reports and the cache key).
    pub added: Vec<PathBuf>,
    /// SHA-256 of every file read, built-in and added, in order: part of the layer cache's key,
    /// as what the inspector keeps depends on the library rows.
    pub digest: String,
}

/// A knowledge file that cannot be read, at its line.
#[derive(Debug, thiserror::Error)]
#[error("{file}{}: {message}", line.map(|l| format!(":{l}")).unwrap_or_default())]
pub struct KnowledgeError {
    pub file: String,
    pub line: Option<usize>,
    pub message: String,
}

fn line_of(text: &str, at: usize) -> usize {
    text[..at.min(text.len())].bytes().filter(|b| *b == b'\n').count() + 1
}

/// Adds `rows` to `into`, a row whose key equals an earlier one's replacing it in place.
fn merge<T>(into: &mut Vec<Row<T>>, rows: Vec<Spanned<T>>, name: &str, text: &str, key: impl Fn(&T) -> String) {
    for r in rows {
        let at = format!("{name}:{}", line_of(text, r.span().start));
        let row = Row { row: r.into_inner(), at };
        match into.iter_mut().find(|o| key(&o.row) == key(&row.row)) {
            Some(o) => *o = row,
            None => into.push(row),
        }
    }
}

impl Knowledge {
    fn add(&mut self, name: &str, text: &str) -> Result<(), KnowledgeError> {
        let f: File = toml::from_str(text).map_err(|e| KnowledgeError {
            file: name.to_string(),
            line: e.span().map(|s| line_of(text, s.start)),
            message: e.message().to_string(),
        })?;
        merge(&mut self.libraries, f.library, name, text, |r| r.prefix.clone());
        merge(&mut self.siblings, f.sibling, name, text, |r| r.prefix.clone());
        merge(&mut self.frameworks, f.framework, name, text, |r| r.package.clone());
        merge(&mut self.builds, f.build, name, text, |r| r.key.clone());
        merge(&mut self.wheels, f.wheel, name, text, |r| format!("{} {}", r.component, r.major));
        merge(&mut self.related, f.related, name, text, |r| r.prefix.clone());
        merge(&mut self.env, f.env, name, text, |r| r.prefixes.join(" "));
        merge(&mut self.runtime, f.runtime, name, text, |r| r.prefixes.join(" "));
        merge(&mut self.gpu_classes, f.gpu_class, name, text, |r| r.class.clone());
        merge(&mut self.compiler_files, f.compiler_file, name, text, |r| r.key.clone());
        merge(&mut self.source_builds, f.source_build, name, text, |r| r.package.clone());
        let key = |t: &toml::Table| format!("{:?} {:?}", t.get("package"), t.get("compiler"));
        merge(&mut self.consumers, f.consumer, name, text, key);
        Ok(())
    }

    /// The built-in rows, then `files`' (each read whole; an error names the file and line).
    pub fn load(files: &[PathBuf]) -> Result<Knowledge, KnowledgeError> {
        let mut k = Knowledge::default();
        let mut digest = crate::digest::Hasher::sha256();
        for (name, text) in BUILTIN {
            k.add(name, text)?;
            digest.update(text.as_bytes());
        }
        let here = std::env::current_dir().unwrap_or_default();
        for p in files {
            // Rows cite the file as the user would name it from here (`kb/ours.toml:2`).
            let shown = p.strip_prefix(&here).unwrap_or(p).display().to_string();
            let text = std::fs::read_to_string(p).map_err(|e| KnowledgeError {
                file: shown.clone(),
                line: None,
                message: e.to_string(),
            })?;
            k.add(&shown, &text)?;
            digest.update(text.as_bytes());
        }
        k.check()?;
        k.added = files.to_vec();
        k.digest = digest.finish();
        Ok(k)
    }

    /// Refuses rows that would match everything or nothing, and dispatch ranges that are not
    /// compute capabilities or are empty: a user's file is checked before it decides anything.
    fn check(&self) -> Result<(), KnowledgeError> {
        let bad = |at: &str, message: String| KnowledgeError { file: at.to_string(), line: None, message };
        let empty = |at: &str, what: &str| bad(at, format!("an empty {what} would match every name: refused"));
        for l in &self.libraries {
            if l.prefix.is_empty() {
                return Err(empty(&l.at, "library prefix"));
            }
            for d in l.dispatch.iter().chain(&l.later) {
                let cc =
                    |c: &str| c.split_once('.').and_then(|(a, b)| Some((a.parse::<u8>().ok()?, b.parse::<u8>().ok()?)));
                for c in [&d.min, &d.below].into_iter().chain(&d.except).filter(|c| !c.is_empty()) {
                    if cc(c).is_none() {
                        let m = format!("dispatch of {:?}: {c:?} is not a compute capability (as 8.0)", l.prefix);
                        return Err(bad(&l.at, m));
                    }
                }
                if let (Some(lo), Some(hi)) = (cc(&d.min), cc(&d.below))
                    && lo >= hi
                {
                    let m = format!("dispatch of {:?}: min {} is not below {}", l.prefix, d.min, d.below);
                    return Err(bad(&l.at, m));
                }
                if cc(&d.below).is_some_and(|(major, _)| major == 0) {
                    return Err(bad(&l.at, format!("dispatch of {:?}: below {} loads it nowhere", l.prefix, d.below)));
                }
            }
        }
        for s in &self.siblings {
            if s.prefix.is_empty() || s.package.is_empty() || s.loader.is_empty() {
                return Err(bad(&s.at, "a sibling needs a prefix, a package and at least one loader".into()));
            }
        }
        for r in &self.related {
            if r.prefix.is_empty() {
                return Err(empty(&r.at, "related prefix"));
            }
        }
        for (at, prefixes) in self
            .env
            .iter()
            .map(|e| (&e.at, &e.prefixes))
            .chain(self.runtime.iter().map(|r| (&r.at, &r.prefixes)))
            .chain(self.compiler_files.iter().map(|c| (&c.at, &c.prefixes)))
        {
            if prefixes.iter().any(String::is_empty) {
                return Err(empty(at, "prefix"));
            }
        }
        for s in &self.source_builds {
            let sm = |a: &String| a.len() >= 2 && a.bytes().all(|b| b.is_ascii_digit()) && !a.starts_with('0');
            if let Some(a) = s.default_archs.iter().chain(&s.takes).find(|a| !sm(a)) {
                let m = format!("source_build {:?}: {a:?} is not an SM number (as 80 or 120)", s.package);
                return Err(bad(&s.at, m));
            }
            if !s.setting.is_empty() && !s.setting.contains("{sm}") && !s.setting.contains("{torch}") {
                let m =
                    format!("source_build {:?}: a setting names the architectures with {{sm}} or {{torch}}", s.package);
                return Err(bad(&s.at, m));
            }
        }
        for b in &self.builds {
            if b.suffix.is_empty() == b.prefix.is_empty() || (!b.suffix.is_empty() && !b.suffix.contains("{major}")) {
                return Err(bad(&b.at, format!("build {:?}: give a suffix with {{major}}, or a prefix", b.key)));
            }
        }
        Ok(())
    }

    /// The library rows a file name or path matches: by file-name prefix, or by a directory the
    /// path passes through.
    pub fn libraries_of<'a, 'p>(&'a self, path: &'p str) -> impl Iterator<Item = &'a Row<Library>> + 'p
    where
        'a: 'p,
    {
        let name = path.rsplit('/').next().unwrap_or(path);
        self.libraries
            .iter()
            .filter(move |l| name.starts_with(&l.prefix) || path.split('/').rev().skip(1).any(|d| d == l.prefix))
    }

    /// The framework installed among `packages` (name, version) whose version names its CUDA:
    /// its name and that CUDA (`12.8` as (12, 8)).
    pub fn framework_cuda<'a>(
        &self,
        mut packages: impl Iterator<Item = (&'a str, &'a str)>,
    ) -> Option<(&'a str, (u16, u16))> {
        packages.find_map(|(name, version)| {
            let f = self.frameworks.iter().find(|f| f.package == name)?;
            let digits: String =
                version.split_once(f.local_cuda.as_str())?.1.chars().take_while(char::is_ascii_digit).collect();
            if !(3..=4).contains(&digits.len()) {
                return None;
            }
            let (maj, min) = digits.split_at(digits.len() - 1);
            Some((name, (maj.parse().ok()?, min.parse().ok()?)))
        })
    }

    /// The name of `name`'s build for CUDA `major - 1`, by the first `[[build]]` row that
    /// matches (a framework's own words first).
    pub fn older_build(&self, name: &str, major: u16) -> String {
        self.build_for(name, major, major.saturating_sub(1))
    }

    /// The name of `name` (built for CUDA `major`) built for CUDA `other` instead.
    pub fn build_for(&self, name: &str, major: u16, other: u16) -> String {
        let older = other.to_string();
        if let Some(f) = self.frameworks.iter().find(|f| f.package == name) {
            return f.older.replace("{name}", name).replace("{older}", &older);
        }
        for b in self.builds.iter() {
            let suffix = b.suffix.replace("{major}", &major.to_string());
            let base = if b.suffix.is_empty() { None } else { name.strip_suffix(&suffix) };
            if let Some(base) = base {
                return b.older.replace("{base}", base).replace("{older}", &older).replace("{name}", name);
            }
            // A prefix row names builds without a CUDA suffix (CUDA 13's `nvidia-cublas`): a name
            // that has one for another major is not renamed twice.
            if !b.prefix.is_empty()
                && b.suffix.is_empty()
                && name.starts_with(&b.prefix)
                && self.cuda_major_of_name(name).is_none()
            {
                return b.older.replace("{name}", name).replace("{older}", &older);
            }
        }
        format!("a CUDA {older} build of {name}")
    }

    /// NVIDIA's wheel of `component` for CUDA `major`.
    pub fn wheel(&self, component: &str, major: u16) -> Option<&Wheel> {
        self.wheels.iter().find(|w| w.component == component && w.major == major).map(|r| &r.row)
    }

    /// A package name that ties an image to CUDA: a `[[related]]` prefix, a library's package
    /// prefix, a framework, a sibling loader's package, or a name in `also` (the run-time
    /// compiler consumers).
    pub fn related(&self, name: &str, also: &[&str]) -> bool {
        let n = name.to_ascii_lowercase();
        self.related.iter().any(|r| n.starts_with(&r.prefix))
            || self.libraries.iter().any(|l| !l.package.is_empty() && n.starts_with(&l.package))
            || self.frameworks.iter().any(|f| f.package == n)
            || self.siblings.iter().any(|s| s.package == n)
            || also.iter().any(|a| a.strip_suffix('*').map_or(*a == n, |prefix| n.starts_with(prefix)))
    }

    /// A package of NVIDIA's own (`nvidia-cublas-cu12`).
    pub fn vendor_package(&self, name: &str) -> bool {
        self.related.iter().any(|r| r.vendor && name.starts_with(&r.prefix))
    }

    /// A requirement (`Requires-Dist`) on a package that ties an image to CUDA, by prefix.
    pub fn related_requirement(&self, req: &str) -> bool {
        self.related.iter().any(|r| req.starts_with(&r.prefix))
    }

    /// A package whose own version is the CUDA runtime's.
    pub fn runtime_package(&self, name: &str) -> bool {
        self.runtime.iter().flat_map(|r| &r.prefixes).any(|p| name.starts_with(p.as_str()))
    }

    /// The CUDA major a package's name says (`nvidia-cublas-cu12` -> 12), by a `names_cuda` build row.
    pub fn cuda_major_of_name(&self, name: &str) -> Option<u16> {
        self.builds.iter().filter(|b| b.names_cuda).find_map(|b| {
            let (pre, post) = b.suffix.split_once("{major}")?;
            let head = name.strip_suffix(post)?;
            let (_, digits) = head.rsplit_once(pre)?;
            digits.parse::<u16>().ok().filter(|m| (11..=20).contains(m))
        })
    }

    /// The CUDA major in a package's name by any build row (`cupy-cuda11x` -> 11), whether or not
    /// that suffix ties the image to the major.
    pub fn cuda_major_in_name(&self, name: &str) -> Option<u16> {
        self.builds.iter().find_map(|b| {
            let (pre, post) = b.suffix.split_once("{major}")?;
            let head = name.strip_suffix(post)?;
            let (_, digits) = head.rsplit_once(pre)?;
            digits.parse::<u16>().ok().filter(|m| (9..=20).contains(m))
        })
    }

    /// A package's name without the CUDA build in it (`nvidia-cublas-cu12` -> `nvidia-cublas`,
    /// `cupy-cuda12x` -> `cupy`), by the build rows' suffixes.
    pub fn base_name<'n>(&self, name: &'n str) -> &'n str {
        self.builds
            .iter()
            .filter_map(|b| {
                let (pre, post) = b.suffix.split_once("{major}")?;
                let head = name.strip_suffix(post)?;
                let (base, digits) = head.rsplit_once(pre)?;
                (!digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit())).then_some(base)
            })
            .next()
            .unwrap_or(name)
    }

    /// An image config variable that says something about CUDA.
    pub fn env_kept(&self, var: &str) -> bool {
        self.env.iter().flat_map(|e| &e.prefixes).any(|p| var.starts_with(p.as_str()))
            || self.siblings.iter().any(|s| !s.env.is_empty() && s.env == var)
    }

    /// How a package's build from source picks its CUDA architectures, if it compiles any.
    pub fn source_build(&self, package: &str) -> Option<&Row<SourceBuild>> {
        self.source_builds.iter().find(|s| s.package == package)
    }

    /// The run-time compiler kind (a `CompilerKind` word) a file name says, if any.
    pub fn compiler_kind(&self, name: &str) -> Option<&str> {
        self.compiler_files
            .iter()
            .find(|c| c.names.iter().any(|n| n == name) || c.prefixes.iter().any(|p| name.starts_with(p.as_str())))
            .map(|c| c.kind.as_str())
    }

    /// Whether CUDA forward compatibility serves this GPU (canonical name); a name no class lists
    /// is taken as served.
    pub fn forward_compat(&self, gpu: &str) -> bool {
        self.gpu_classes
            .iter()
            .find(|c| c.gpus.iter().any(|g| g.eq_ignore_ascii_case(gpu)))
            .is_none_or(|c| c.forward_compat)
    }
}

/// `3.4.0` -> (3, 4, 0); missing parts are 0, a local suffix (`+cu128`) is ignored.
pub fn version_key(v: &str) -> (u32, u32, u32) {
    let base = v.split(['+', '-']).next().unwrap_or_default();
    let mut it =
        base.split('.').map(|p| p.chars().take_while(char::is_ascii_digit).collect::<String>().parse().unwrap_or(0));
    (it.next().unwrap_or(0), it.next().unwrap_or(0), it.next().unwrap_or(0))
}

static KNOWN: OnceLock<Knowledge> = OnceLock::new();

/// What this process knows: the built-in rows, plus the files [`install`] added.
pub fn get() -> &'static Knowledge {
    KNOWN.get_or_init(|| Knowledge::load(&[]).expect("rules/knowledge/*.toml parse"))
}

/// Adds `files` to what this process knows, once, before anything reads it (the CLI, from
/// `--knowledge` and the config's `[knowledge] extend`). Asking again for the same files is a
/// no-op; asking for others after the first answer was given is an error, never a silent mix.
pub fn install(files: &[PathBuf]) -> Result<(), KnowledgeError> {
    if files.is_empty() && KNOWN.get().is_none_or(|k| k.added.is_empty()) {
        get();
        return Ok(());
    }
    if let Some(k) = KNOWN.get() {
        if k.added == files {
            return Ok(());
        }
        return Err(KnowledgeError {
            file: files.first().map(|p| p.display().to_string()).unwrap_or_default(),
            line: None,
            message: format!("knowledge was already loaded with {:?} in this process", k.added),
        });
    }
    let k = Knowledge::load(files)?;
    // Another thread may have read the built-in rows meanwhile: then these files would be lost.
    KNOWN.set(k).map_err(|_| KnowledgeError {
        file: files.first().map(|p| p.display().to_string()).unwrap_or_default(),
        line: None,
        message: "knowledge was read before these files could be added".into(),
    })
}
