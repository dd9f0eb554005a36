//! Which package installed a file, from the package managers' own records read while the layers
//! stream past: Python `*.dist-info/RECORD` (pip), dpkg `info/*.list` and `status`
//! (`status.d/*` in distroless images), conda `conda-meta/*.json`. Only the lines naming files
//! that can carry device code are kept, so memory stays small on images with huge RECORDs.
//! The verdicts use it to judge a package's binaries together and to name the package in fixes.

use serde::{Deserialize, Serialize};

/// Metadata files larger than this are not read (a RECORD of 200k lines is ~20 MiB).
pub const MAX_METADATA: u64 = 32 << 20;

crate::schema::words! {
    /// The package managers whose records are read, as the words of package URLs. Declared in
    /// the order of those words, so packages sort as they did when the manager was a string (the
    /// order of `cuda_packages` in reports).
    pub enum PackageManager {
        Conda = "conda",
        Deb = "deb",
        Pypi = "pypi",
    }
}

/// A package that owns a file.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Package {
    pub manager: PackageManager,
    pub name: String,
    /// Empty when the manager's record names no version (a dpkg `.list` without `status`).
    pub version: String,
    /// Package URL (`pkg:pypi/torch@2.9.0`).
    pub purl: String,
}

impl Package {
    pub fn new(manager: PackageManager, name: &str, version: &str) -> Package {
        let name = match manager {
            PackageManager::Pypi => pypi_normalize(name),
            PackageManager::Deb | PackageManager::Conda => name.to_string(),
        };
        let purl = if version.is_empty() {
            format!("pkg:{manager}/{name}")
        } else {
            format!("pkg:{manager}/{name}@{}", version.replace('+', "%2B"))
        };
        Package { manager, name, version: version.into(), purl }
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

/// One kind of package record: which files are such records, how one is read, and the version
/// of that reading.
#[derive(Debug)]
pub struct Record {
    /// Names the kind in the layer cache key.
    pub kind: &'static str,
    /// Folded into the layer cache key (`cache.rs`): bump it when `read` would take something
    /// else from the same bytes, and only analyses made with the old parser are dropped.
    pub version: u32,
    /// Whether a file, by its directory and name (of an absolute path), is a record of this kind.
    is: fn(dir: &str, name: &str) -> bool,
    /// Adds what the record says to a layer's packages.
    read: fn(&mut LayerPackages, dir: &str, name: &str, text: &str),
}

/// Every kind of package record read, first match wins. The walkers (tar, zip, directory) hand
/// whatever [`record_kind`] names to [`LayerPackages::read`], so a new kind (apk's
/// `lib/apk/db/installed`, rpm) is one row here and its parser, nothing in any walker.
pub static RECORDS: &[Record] = &[
    Record {
        kind: "pip-record",
        version: 1,
        is: |dir, name| dir.ends_with(".dist-info") && name == "RECORD",
        read: pip_record,
    },
    Record {
        kind: "pip-metadata",
        version: 1,
        is: |dir, name| dir.ends_with(".dist-info") && name == "METADATA",
        read: pip_metadata,
    },
    Record {
        kind: "dpkg-list",
        version: 1,
        is: |dir, name| dir.ends_with("/var/lib/dpkg/info") && name.ends_with(".list"),
        read: dpkg_list,
    },
    Record {
        kind: "dpkg-status",
        version: 1,
        // `status.d/*` in distroless images.
        is: |dir, name| {
            (dir.ends_with("/var/lib/dpkg") && name == "status")
                || (dir.ends_with("/var/lib/dpkg/status.d") && !name.contains('.'))
        },
        read: dpkg_status,
    },
    Record {
        kind: "conda-meta",
        version: 1,
        is: |dir, name| dir.ends_with("/conda-meta") && name.ends_with(".json"),
        read: conda_meta,
    },
];

/// The package record `path` is, if it is one worth reading.
pub fn record_kind(path: &str) -> Option<&'static Record> {
    let (dir, name) = path.rsplit_once('/')?;
    RECORDS.iter().find(|r| (r.is)(dir, name))
}

/// Every record kind with its version (`pip-record.1,...`), for the layer cache key.
pub fn record_versions() -> String {
    RECORDS.iter().map(|r| format!("{}.{}", r.kind, r.version)).collect::<Vec<_>>().join(",")
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

/// pip's `*.dist-info/RECORD`: the distribution's files, paths relative to site-packages.
fn pip_record(l: &mut LayerPackages, dir: &str, _name: &str, text: &str) {
    let Some((n, v)) = dist_info_name(dir) else { return };
    let site = dir.rsplit_once('/').map_or("", |x| x.0);
    let i = l.add(Package::new(PackageManager::Pypi, &n, &v));
    for line in text.lines() {
        // CSV: path,hash,size; paths with commas are quoted.
        let file = match line.strip_prefix('"') {
            Some(rest) => rest.split_once('"').map_or(rest, |x| x.0),
            None => line.split(',').next().unwrap_or(""),
        };
        if !file.is_empty() && interesting(file) {
            l.owned.push((join(site, file), i));
        }
    }
}

/// pip's `*.dist-info/METADATA`: its `Requires-Dist` pins of CUDA components.
fn pip_metadata(l: &mut LayerPackages, dir: &str, _name: &str, text: &str) {
    let Some((n, _)) = dist_info_name(dir) else { return };
    let n = pypi_normalize(&n);
    for line in text.lines() {
        if line.is_empty() {
            break; // headers end; the description follows
        }
        if let Some(req) = line.strip_prefix("Requires-Dist:") {
            let req = req.trim();
            if req.starts_with("nvidia-") || req.starts_with("cuda-") {
                l.requires.push((n.clone(), req.to_string()));
            }
        }
    }
}

/// dpkg's `info/<package>[:<arch>].list`: the package's files, one absolute path a line.
fn dpkg_list(l: &mut LayerPackages, _dir: &str, name: &str, text: &str) {
    let pkg = name.trim_end_matches(".list");
    let pkg = pkg.split(':').next().unwrap_or(pkg);
    let i = l.add(Package::new(PackageManager::Deb, pkg, ""));
    for line in text.lines() {
        if interesting(line) {
            l.owned.push((line.trim().to_string(), i));
        }
    }
}

/// dpkg's `status`: the installed versions, joined to the `.list` packages per image.
fn dpkg_status(l: &mut LayerPackages, _dir: &str, _name: &str, text: &str) {
    for stanza in text.split("\n\n") {
        let field = |k: &str| stanza.lines().find_map(|line| line.strip_prefix(k).map(|v| v.trim().to_string()));
        if let (Some(p), Some(v)) = (field("Package:"), field("Version:")) {
            l.dpkg_versions.push((p, v));
        }
    }
}

/// conda's `conda-meta/<package>.json`: name, version and files relative to the prefix.
fn conda_meta(l: &mut LayerPackages, dir: &str, _name: &str, text: &str) {
    #[derive(Deserialize)]
    struct Meta {
        name: String,
        version: String,
        #[serde(default)]
        files: Vec<String>,
    }
    let Ok(m) = serde_json::from_str::<Meta>(text) else { return };
    let prefix = dir.rsplit_once('/').map_or("", |x| x.0);
    let i = l.add(Package::new(PackageManager::Conda, &m.name, &m.version));
    for f in m.files.iter().filter(|f| interesting(f)) {
        l.owned.push((join(prefix, f), i));
    }
}

impl LayerPackages {
    fn add(&mut self, p: Package) -> usize {
        if let Some(i) = self.packages.iter().position(|q| q == &p) {
            return i;
        }
        self.packages.push(p);
        self.packages.len() - 1
    }

    /// Reads one record (of the kind [`record_kind`] named for `path`).
    pub fn read(&mut self, kind: &Record, path: &str, text: &str) {
        let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
        (kind.read)(self, dir, name, text);
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
                    Some(v) if matches!(p.manager, PackageManager::Deb) && p.version.is_empty() => {
                        Package::new(PackageManager::Deb, &p.name, v)
                    }
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

    /// Reads a record the way the walkers do: by the kind its path names.
    fn read(l: &mut LayerPackages, path: &str, text: &str) {
        l.read(record_kind(path).unwrap_or_else(|| panic!("{path} is a record")), path, text);
    }

    #[test]
    fn reads_pip_dpkg_and_conda_records() {
        let mut l = LayerPackages::default();
        let rec = "torch/lib/libtorch_cuda.so,sha256=abc,123\ntorch/__init__.py,sha256=x,1\n\"odd,name.so\",,\n../../../bin/tool.so,,\n";
        let p = "/usr/lib/python3/site-packages/torch-2.9.0+cu128.dist-info/RECORD";
        assert_eq!(record_kind(p).unwrap().kind, "pip-record");
        read(&mut l, p, rec);
        read(&mut l, "/var/lib/dpkg/info/libcudnn9-cuda-12:amd64.list", "/usr/lib/libcudnn.so.9\n/usr/share/doc\n");
        read(&mut l, "/var/lib/dpkg/status", "Package: libcudnn9-cuda-12\nVersion: 9.1.0.70-1\n\nPackage: x\n");
        read(
            &mut l,
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
        assert_eq!(img.owner_of(["/opt/conda/lib/libcupy.so"]).unwrap().manager, PackageManager::Conda);
        assert_eq!(pypi_normalize("nvidia_cublas_cu12"), "nvidia-cublas-cu12");
    }

    #[test]
    fn record_kinds_are_found_by_path_alone() {
        let kind = |p: &str| record_kind(p).map(|r| r.kind);
        assert_eq!(kind("/x/site-packages/a-1.dist-info/METADATA"), Some("pip-metadata"));
        assert_eq!(kind("/x/site-packages/a-1.dist-info/WHEEL"), None);
        assert_eq!(kind("/var/lib/dpkg/info/libc6:amd64.list"), Some("dpkg-list"));
        assert_eq!(kind("/var/lib/dpkg/info/libc6:amd64.md5sums"), None);
        assert_eq!(kind("/var/lib/dpkg/status"), Some("dpkg-status"));
        assert_eq!(kind("/var/lib/dpkg/status-old"), None);
        assert_eq!(kind("/var/lib/dpkg/status.d/libc6"), Some("dpkg-status"));
        assert_eq!(kind("/var/lib/dpkg/status.d/libc6.md5sums"), None);
        assert_eq!(kind("/opt/conda/conda-meta/cupy-13.0.json"), Some("conda-meta"));
        assert_eq!(kind("status"), None);
        // Each kind once in the cache key, with its version.
        let versions = record_versions();
        for r in RECORDS {
            assert_eq!(versions.matches(&format!("{}.{}", r.kind, r.version)).count(), 1, "{versions}");
        }
    }

    #[test]
    fn managers_serialize_to_their_purl_words_in_their_old_order() {
        let all = [PackageManager::Conda, PackageManager::Deb, PackageManager::Pypi];
        for m in all {
            assert_eq!(serde_json::to_value(m).unwrap(), m.as_str());
        }
        let words: Vec<&str> = all.iter().map(|m| m.as_str()).collect();
        assert!(words.is_sorted(), "{words:?}");
    }
}
