//! Which package installed a file, from the package managers' own records read while the layers
//! stream past: Python `*.dist-info/RECORD` (pip), dpkg `info/*.list` and `status`
//! (`status.d/*` in distroless images), conda `conda-meta/*.json`. Only the lines naming files
//! that can carry device code are kept, so memory stays small on images with huge RECORDs.
//! The verdicts use it to judge a package's binaries together and to name the package in fixes.

use serde::{Deserialize, Serialize};

/// Metadata files larger than this are not read (a RECORD of 200k lines is ~20 MiB).
pub const MAX_METADATA: u64 = 32 << 20;

/// A package that owns a file.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Package {
    /// pypi, deb, conda.
    pub manager: String,
    pub name: String,
    /// Empty when the manager's record names no version (a dpkg `.list` without `status`).
    pub version: String,
    /// Package URL (`pkg:pypi/torch@2.9.0`).
    pub purl: String,
}

impl Package {
    pub fn new(manager: &str, name: &str, version: &str) -> Package {
        let name = if manager == "pypi" { pypi_normalize(name) } else { name.to_string() };
        let purl = if version.is_empty() {
            format!("pkg:{manager}/{name}")
        } else {
            format!("pkg:{manager}/{name}@{}", version.replace('+', "%2B"))
        };
        Package { manager: manager.into(), name, version: version.into(), purl }
    }
}

/// What one layer's package records say.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct LayerPackages {
    /// (absolute path, index into `packages`).
    pub owned: Vec<(String, usize)>,
    pub packages: Vec<Package>,
    /// dpkg versions from `status` files: (name, version).
    pub dpkg_versions: Vec<(String, String)>,
    /// Python distributions with their `Requires-Dist` pins of CUDA components (`cuda-toolkit`
    /// metadata), for the image's CUDA version.
    pub requires: Vec<(String, String)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Record {
    PipRecord,
    PipMetadata,
    DpkgList,
    DpkgStatus,
    CondaMeta,
}

/// Whether `path` is a package record worth reading.
pub fn record_kind(path: &str) -> Option<Record> {
    let (dir, name) = path.rsplit_once('/')?;
    if dir.ends_with(".dist-info") {
        return match name {
            "RECORD" => Some(Record::PipRecord),
            "METADATA" => Some(Record::PipMetadata),
            _ => None,
        };
    }
    if dir.ends_with("/var/lib/dpkg/info") && name.ends_with(".list") {
        return Some(Record::DpkgList);
    }
    if path.ends_with("/var/lib/dpkg/status") || (dir.ends_with("/var/lib/dpkg/status.d") && !name.contains('.')) {
        return Some(Record::DpkgStatus);
    }
    if dir.ends_with("/conda-meta") && name.ends_with(".json") {
        return Some(Record::CondaMeta);
    }
    None
}

/// Files that may carry device code or identify CUDA (shared objects, archives, cubins, ...).
fn interesting(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.ends_with(".so")
        || name.contains(".so.")
        || [".cubin", ".fatbin", ".ptx", ".a", ".o", ".bin"].iter().any(|e| name.ends_with(e))
}

/// PEP 503: lowercase, runs of `-_.` as one `-`.
pub fn pypi_normalize(name: &str) -> String {
    let mut out = String::new();
    let mut sep = false;
    for c in name.chars() {
        if c == '-' || c == '_' || c == '.' {
            sep = true;
        } else {
            if sep && !out.is_empty() {
                out.push('-');
            }
            sep = false;
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

/// `torch-2.9.0+cu128.dist-info` -> (torch, 2.9.0+cu128).
fn dist_info_name(dir: &str) -> Option<(String, String)> {
    let base = dir.rsplit('/').next()?.strip_suffix(".dist-info")?;
    let (name, version) = base.split_once('-')?;
    Some((name.to_string(), version.to_string()))
}

/// Joins a record's relative path onto a base directory, resolving `..`.
fn join(base: &str, rel: &str) -> String {
    let mut parts: Vec<&str> = if rel.starts_with('/') { Vec::new() } else { base.split('/').collect() };
    for c in rel.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            c => parts.push(c),
        }
    }
    let joined = parts.into_iter().filter(|p| !p.is_empty()).collect::<Vec<_>>().join("/");
    format!("/{joined}")
}

impl LayerPackages {
    fn add(&mut self, p: Package) -> usize {
        if let Some(i) = self.packages.iter().position(|q| q == &p) {
            return i;
        }
        self.packages.push(p);
        self.packages.len() - 1
    }

    /// Reads one record (already known by `record_kind`).
    pub fn read(&mut self, kind: Record, path: &str, text: &str) {
        let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
        match kind {
            Record::PipRecord => {
                let Some((n, v)) = dist_info_name(dir) else { return };
                let site = dir.rsplit_once('/').map_or("", |x| x.0);
                let i = self.add(Package::new("pypi", &n, &v));
                for line in text.lines() {
                    // CSV: path,hash,size; paths with commas are quoted.
                    let file = match line.strip_prefix('"') {
                        Some(rest) => rest.split_once('"').map_or(rest, |x| x.0),
                        None => line.split(',').next().unwrap_or(""),
                    };
                    if !file.is_empty() && interesting(file) {
                        self.owned.push((join(site, file), i));
                    }
                }
            }
            Record::PipMetadata => {
                let Some((n, _)) = dist_info_name(dir) else { return };
                let n = pypi_normalize(&n);
                for line in text.lines() {
                    if line.is_empty() {
                        break; // headers end; the description follows
                    }
                    if let Some(req) = line.strip_prefix("Requires-Dist:") {
                        let req = req.trim();
                        if req.starts_with("nvidia-") || req.starts_with("cuda-") {
                            self.requires.push((n.clone(), req.to_string()));
                        }
                    }
                }
            }
            Record::DpkgList => {
                let pkg = name.trim_end_matches(".list");
                let pkg = pkg.split(':').next().unwrap_or(pkg);
                let i = self.add(Package::new("deb", pkg, ""));
                for line in text.lines() {
                    if interesting(line) {
                        self.owned.push((line.trim().to_string(), i));
                    }
                }
            }
            Record::DpkgStatus => {
                for stanza in text.split("\n\n") {
                    let field = |k: &str| stanza.lines().find_map(|l| l.strip_prefix(k).map(|v| v.trim().to_string()));
                    if let (Some(p), Some(v)) = (field("Package:"), field("Version:")) {
                        self.dpkg_versions.push((p, v));
                    }
                }
            }
            Record::CondaMeta => {
                #[derive(Deserialize)]
                struct Meta {
                    name: String,
                    version: String,
                    #[serde(default)]
                    files: Vec<String>,
                }
                let Ok(m) = serde_json::from_str::<Meta>(text) else { return };
                let prefix = dir.rsplit_once('/').map_or("", |x| x.0);
                let i = self.add(Package::new("conda", &m.name, &m.version));
                for f in m.files.iter().filter(|f| interesting(f)) {
                    self.owned.push((join(prefix, f), i));
                }
            }
        }
    }
}

/// Package names that tie an image to a CUDA version (runtime wheels, toolkit pins, CUDA debs).
pub fn cuda_related(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    ["nvidia-", "cuda-"].iter().any(|p| n.starts_with(p))
        || crate::inspect::libraries::cuda_package(&n)
        || n == "torch"
        || n == "cuda-toolkit"
        || RUNTIME_COMPILING.contains(&n.as_str())
}

/// Packages that compile device code at run time (rules/compilers/runtime-compilers.toml names
/// what each uses): kept among the CUDA packages so their versions reach the verdicts.
const RUNTIME_COMPILING: &[&str] = &[
    "triton",
    "pytorch-triton",
    "vllm",
    "sglang",
    "cupy",
    "cupy-cuda12x",
    "cupy-cuda13x",
    "jax-cuda12-plugin",
    "jax-cuda13-plugin",
];

/// The packages of an image, layers applied in order (a later record of a path wins).
#[derive(Debug, Clone, Default)]
pub struct ImagePackages {
    pub owner: std::collections::BTreeMap<String, Package>,
    pub all: std::collections::BTreeSet<Package>,
    pub requires: Vec<(String, String)>,
}

impl ImagePackages {
    pub fn from_layers<'a>(layers: impl IntoIterator<Item = &'a LayerPackages>) -> ImagePackages {
        let layers: Vec<&LayerPackages> = layers.into_iter().collect();
        let versions: std::collections::BTreeMap<&str, &str> =
            layers.iter().flat_map(|l| l.dpkg_versions.iter().map(|(p, v)| (p.as_str(), v.as_str()))).collect();
        let mut out = ImagePackages::default();
        for l in layers {
            let pkgs: Vec<Package> = l
                .packages
                .iter()
                .map(|p| match versions.get(p.name.as_str()) {
                    Some(v) if p.manager == "deb" && p.version.is_empty() => Package::new("deb", &p.name, v),
                    _ => p.clone(),
                })
                .collect();
            for (path, i) in &l.owned {
                out.owner.insert(path.clone(), pkgs[*i].clone());
            }
            out.all.extend(pkgs);
            out.requires.extend(l.requires.iter().cloned());
        }
        out.requires.sort();
        out.requires.dedup();
        out
    }

    /// The package owning `path` or, failing that, one of its other names (symlinks, links).
    pub fn owner_of<'a>(&self, paths: impl IntoIterator<Item = &'a str>) -> Option<Package> {
        paths.into_iter().find_map(|p| self.owner.get(p).cloned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_pip_dpkg_and_conda_records() {
        let mut l = LayerPackages::default();
        let rec = "torch/lib/libtorch_cuda.so,sha256=abc,123\ntorch/__init__.py,sha256=x,1\n\"odd,name.so\",,\n../../../bin/tool.so,,\n";
        let p = "/usr/lib/python3/site-packages/torch-2.9.0+cu128.dist-info/RECORD";
        assert_eq!(record_kind(p), Some(Record::PipRecord));
        l.read(Record::PipRecord, p, rec);
        l.read(
            Record::DpkgList,
            "/var/lib/dpkg/info/libcudnn9-cuda-12:amd64.list",
            "/usr/lib/libcudnn.so.9\n/usr/share/doc\n",
        );
        l.read(
            Record::DpkgStatus,
            "/var/lib/dpkg/status",
            "Package: libcudnn9-cuda-12\nVersion: 9.1.0.70-1\n\nPackage: x\n",
        );
        l.read(
            Record::CondaMeta,
            "/opt/conda/conda-meta/cupy-13.0.json",
            r#"{"name":"cupy","version":"13.0.0","files":["lib/libcupy.so","README"]}"#,
        );
        let img = ImagePackages::from_layers([&l]);
        let torch = img.owner_of(["/usr/lib/python3/site-packages/torch/lib/libtorch_cuda.so"]).unwrap();
        assert_eq!((torch.name.as_str(), torch.version.as_str()), ("torch", "2.9.0+cu128"));
        assert_eq!(torch.purl, "pkg:pypi/torch@2.9.0%2Bcu128");
        assert!(img.owner.contains_key("/usr/lib/python3/site-packages/odd,name.so"));
        assert!(img.owner.contains_key("/usr/bin/tool.so"));
        assert!(!img.owner.keys().any(|k| k.ends_with(".py")));
        let cudnn = img.owner_of(["/usr/lib/libcudnn.so.9"]).unwrap();
        assert_eq!(cudnn.version, "9.1.0.70-1");
        assert_eq!(img.owner_of(["/opt/conda/lib/libcupy.so"]).unwrap().manager, "conda");
        assert_eq!(pypi_normalize("nvidia_cublas_cu12"), "nvidia-cublas-cu12");
    }
}
