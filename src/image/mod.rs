//! Image sources: docker-archive and oci-archive tarballs (on disk or on standard input), OCI
//! layout directories, images in registries, root filesystems, single files and Python wheels.
//! Every source that has layers implements [`pipeline::LayerSource`] (resolve the platform's
//! config and layers, open a layer) and is read by [`pipeline::run`]; sources that are one
//! layer's worth of files go through [`single_layer`]. Adding a source: one file, one match arm.

pub mod analysis_store;
mod archive;
pub mod attest;
pub mod containerd;
pub mod daemon;
mod layout;
pub mod lock;
pub mod oci;
pub mod pipeline;
pub mod progress;
pub mod remote;
mod rootfs;
pub mod sign;
mod wheel;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;

use crate::cache::LayerCache;
use crate::digest::DigestError;
use crate::inspect::InspectOptions;
use crate::layer::analyze::LayerSummary;
use crate::layer::blob::BlobError;
pub use crate::layer::blob::Verify;
use crate::layer::decode::Compression;
use crate::layer::merge::merge;
pub use crate::layer::{AnalyzedLayer, LayerInfo};
use crate::registry::RegistryError;
use crate::schema::{self, Tool};
pub use oci::Platform;

#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
    /// What was given (a file, a directory, a stream, an option's value), or a member of it, is
    /// not something cudalint reads: empty, cut off, not an image, unreadable.
    #[error("{what}: {message}")]
    Input { what: String, message: String },
    /// A manifest, index or config that does not parse, or is not the size its descriptor says.
    #[error("{what}: {message}")]
    Document { what: String, message: String },
    /// What the manifests say does not designate one image: several, none, no such name, or
    /// nesting past the bounds.
    #[error("{0}")]
    Image(String),
    /// A digest refused (an algorithm cudalint cannot compute) or not matching what was read.
    #[error(transparent)]
    Digest(#[from] DigestError),
    #[error("no image for platform {wanted}; available: {}", if available.is_empty() { "none".to_string() } else { available.join(", ") })]
    Platform { wanted: String, available: Vec<String> },
    #[error("layer {layer}: {message}")]
    Layer { layer: String, message: String },
    #[error(transparent)]
    Registry(#[from] RegistryError),
}

impl ScanError {
    pub fn io(path: impl AsRef<Path>, source: std::io::Error) -> ScanError {
        ScanError::Io { path: path.as_ref().display().to_string(), source }
    }

    /// An input at `path` that is not what cudalint reads.
    pub fn input(path: impl AsRef<Path>, message: impl Into<String>) -> ScanError {
        ScanError::Input { what: path.as_ref().display().to_string(), message: message.into() }
    }
}

impl From<BlobError> for ScanError {
    fn from(e: BlobError) -> ScanError {
        match e {
            BlobError::Layer { layer, message } => ScanError::Layer { layer, message },
            BlobError::Digest(e) => ScanError::Digest(e),
        }
    }
}

#[derive(Clone)]
pub struct ScanOptions {
    /// Platform to pick from a multi-platform index; default: the host's.
    pub platform: Option<Platform>,
    pub verify: Verify,
    /// Layers decoded at once.
    pub jobs: usize,
    pub progress: bool,
    pub inspect: InspectOptions,
    /// For images in registries.
    pub registry: crate::registry::RegistryOptions,
    /// Layer analyses by digest: consulted for every layer of a source whose layers are
    /// fetched by their digest (`pipeline::LayerSource::trusts_digests`).
    pub cache: Option<Arc<LayerCache>>,
    /// Layer analyses shared through a registry repository (`--analysis-store`).
    pub store: Option<Arc<analysis_store::AnalysisStore>>,
    /// Push an inventory attestation of each registry image scanned (`--attest`).
    pub attest: bool,
    /// Take a registry image's layer analyses from its attestation instead of pulling them
    /// (`--from-attestation`); none usable is an error.
    pub from_attestation: bool,
    /// Signs what `--attest` pushes (`--sign-key`).
    pub sign: Option<Arc<sign::Signer>>,
    /// Which attestations `--from-attestation` believes (`--verify-key`, `--trust-unsigned`).
    pub trust: sign::Trust,
    /// Layers pulled and analysed by the scans made with these options (and their clones).
    pub counts: Arc<LayerCounts>,
    /// The scan's memory budget (`--memory`): every decoder window and each layer's buffers are
    /// held from it (`layer::budget`). Shared by every layer of a scan, and by `serve`'s workers.
    pub memory: Arc<crate::layer::budget::MemoryBudget>,
    /// The Python a lockfile is judged for (`--python 3.11`; default [`lock::DEFAULT_PYTHON`]).
    pub python: Option<String>,
    /// The most a lockfile's wheel whose size the lock does not give may be (`--max-wheel-size`).
    pub max_wheel: u64,
    /// Where a bare `name:tag` is looked for, in order (`--image-src`); default: a registry only
    /// (the CLI's default tries the local stores first).
    pub image_src: Vec<ImageSrc>,
    /// containerd's socket and namespace (`containerd:NAME`, and bare references).
    pub containerd: containerd::Options,
}

crate::schema::words! {
    /// The stores a bare image reference is looked up in (`--image-src`, Trivy's word).
    pub enum ImageSrc {
        Docker = "docker",
        Podman = "podman",
        Containerd = "containerd",
        Remote = "remote",
    }
}

/// Layers pulled from registries and analysed (read and walked, any source) by the scans that
/// share these counters; the caches' own counters say what they saved. `cudalint registry`
/// reports them in its summary.
#[derive(Debug, Default)]
pub struct LayerCounts {
    pub pulled: std::sync::atomic::AtomicU64,
    pub analysed: std::sync::atomic::AtomicU64,
}

impl Default for ScanOptions {
    fn default() -> Self {
        ScanOptions {
            platform: None,
            verify: Verify::Auto,
            jobs: std::thread::available_parallelism().map_or(2, |n| n.get()).min(8),
            progress: false,
            inspect: InspectOptions { lean: true, ..Default::default() },
            registry: crate::registry::RegistryOptions::default(),
            cache: None,
            store: None,
            attest: false,
            from_attestation: false,
            sign: None,
            trust: sign::Trust::Nothing,
            counts: Arc::default(),
            memory: Arc::default(),
            python: None,
            max_wheel: lock::MAX_WHEEL,
            image_src: vec![ImageSrc::Remote],
            containerd: containerd::Options::default(),
        }
    }
}

/// What a user may pass as IMAGE (skopeo/syft-style prefixes, or sniffed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Stdin,
    /// A named pipe or character device (`<(docker save img)`): read once, as standard input.
    Pipe(PathBuf),
    DockerArchive(PathBuf, Option<String>),
    OciArchive(PathBuf, Option<String>),
    /// A tarball whose layout is decided by what it contains.
    Archive(PathBuf),
    OciLayout(PathBuf, Option<String>),
    Dir(PathBuf),
    File(PathBuf),
    Wheel(PathBuf),
    /// A lockfile: the image its wheels would make (`image/lock.rs`).
    Lock(PathBuf, lock::LockKind),
    /// An image in a registry (`docker://...`).
    Registry(String),
    /// An image in a local Docker Engine or Podman (`docker-daemon:NAME`, `podman:NAME`).
    Daemon(daemon::Engine, String),
    /// An image in containerd's store (`containerd:NAME`).
    Containerd(String),
    /// A bare reference (`name:tag`, `registry/repo:tag`): looked up in the stores
    /// `ScanOptions::image_src` lists, in order.
    Reference(String),
}

/// `path[:ref]` (skopeo's syntax): the whole string if it names an existing file, else the
/// shortest prefix before a ':' that does (a reference such as `repo/name:tag` holds ':' itself).
fn path_and_ref(rest: &str) -> (PathBuf, Option<String>) {
    if Path::new(rest).exists() {
        return (rest.into(), None);
    }
    for (i, _) in rest.match_indices(':') {
        let (p, r) = (&rest[..i], &rest[i + 1..]);
        if !p.is_empty() && !r.is_empty() && Path::new(p).exists() {
            return (p.into(), Some(r.to_string()));
        }
    }
    (rest.into(), None)
}

/// How a prefixed IMAGE reads: given the whole spec and what follows the prefix.
pub type ReadPrefixed = fn(&str, &str) -> Source;

/// The prefixes that force an input's kind (skopeo's and syft's), and how each reads what
/// follows it: the one list `Source::parse` goes by, which `--help` and docs/inputs.md are tested
/// against (`cli/mod.rs` tests). Without one, the input is sniffed.
pub const PREFIXES: &[(&str, ReadPrefixed)] = &[
    ("docker-archive:", |_, rest| {
        let (p, r) = path_and_ref(rest);
        Source::DockerArchive(p, r)
    }),
    ("oci-archive:", |_, rest| {
        let (p, r) = path_and_ref(rest);
        Source::OciArchive(p, r)
    }),
    ("oci:", |_, rest| {
        let (p, r) = path_and_ref(rest);
        Source::OciLayout(p, r)
    }),
    ("dir:", |_, rest| Source::Dir(rest.into())),
    ("file:", |_, rest| Source::File(rest.into())),
    // The registry client reads the whole reference, prefix and all.
    ("docker://", |spec, _| Source::Registry(spec.to_string())),
    ("docker-daemon:", |_, rest| Source::Daemon(daemon::Engine::Docker, rest.to_string())),
    ("podman:", |_, rest| Source::Daemon(daemon::Engine::Podman, rest.to_string())),
    ("containerd:", |_, rest| Source::Containerd(rest.to_string())),
];

/// A tar header cut short: the ustar magic is there, the 512-byte block is not whole.
pub(crate) fn tar_magic(head: &[u8]) -> bool {
    head.get(257..262) == Some(b"ustar")
}

/// Whether a spec that names no file reads as a path the user meant (then it is "no such
/// file", not a registry lookup of a mistyped path): absolute or relative to `.`/`~`, a file
/// name cudalint reads by its extension, or a path whose directory exists here.
fn path_like(spec: &str) -> bool {
    const EXTENSIONS: &[&str] =
        &[".tar", ".tar.gz", ".tgz", ".tar.zst", ".tar.xz", ".tar.bz2", ".whl", ".toml", ".lock", ".txt", ".json"];
    if spec.starts_with(['/', '.', '~']) {
        return true;
    }
    // A tag cannot hold a '.' after its last ':'... but `x.tar` names no tag: look at the end.
    let lower = spec.to_ascii_lowercase();
    if EXTENSIONS.iter().any(|e| lower.ends_with(e)) && !spec.contains('@') {
        return true;
    }
    match spec.rsplit_once('/') {
        Some((dir, _)) if !dir.contains(':') => Path::new(dir).is_dir(),
        _ => false,
    }
}

/// The first bytes of a file given without a prefix, or by `file:`.
fn read_head(p: &Path) -> Result<Vec<u8>, ScanError> {
    use std::io::Read;
    let f = std::fs::File::open(p).map_err(|e| ScanError::io(p, e))?;
    let mut head = Vec::with_capacity(HEAD_BYTES);
    f.take(HEAD_BYTES as u64).read_to_end(&mut head).map_err(|e| ScanError::io(p, e))?;
    Ok(head)
}

/// Enough for a tar header block (and more than the inspector sniffs).
const HEAD_BYTES: usize = 512;

impl Source {
    pub fn parse(spec: &str) -> Result<Source, ScanError> {
        if spec == "-" {
            return Ok(Source::Stdin);
        }
        for (prefix, make) in PREFIXES {
            if let Some(rest) = spec.strip_prefix(prefix) {
                return Ok(make(spec, rest));
            }
        }
        let p = PathBuf::from(spec);
        let meta = match std::fs::metadata(&p) {
            Ok(m) => m,
            // Not a file: an image reference, if it reads as one.
            Err(e)
                if e.kind() == std::io::ErrorKind::NotFound && spec.contains(['/', ':', '@']) && !path_like(spec) =>
            {
                crate::registry::parse_reference(spec)?;
                return Ok(Source::Reference(spec.to_string()));
            }
            Err(e) => return Err(ScanError::io(&p, e)),
        };
        if meta.is_dir() {
            return Ok(if p.join("oci-layout").exists() { Source::OciLayout(p, None) } else { Source::Dir(p) });
        }
        if !meta.is_file() {
            // Its first bytes cannot be read twice (sniffed, then read again).
            return Ok(Source::Pipe(p));
        }
        let head = read_head(&p)?;
        let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if head.is_empty() {
            return Err(ScanError::input(&p, "empty file: not an image (a `docker save -o` that failed?)"));
        }
        if head.starts_with(b"PK\x03\x04") && spec.ends_with(".whl") {
            return Ok(Source::Wheel(p));
        }
        if let Some(kind) = lock::kind_of(&p, &head) {
            return Ok(Source::Lock(p, kind));
        }
        // Compressed `docker save` output is read through its decompressor.
        if crate::layer::decode::sniff(&head) != crate::layer::decode::Compression::None
            || crate::layer::tar::looks_like_tar(&head)
        {
            return Ok(Source::Archive(p));
        }
        if tar_magic(&head) {
            return Err(ScanError::input(
                &p,
                format!("a tar archive cut off inside its first header ({} bytes): not a readable image", head.len()),
            ));
        }
        if crate::inspect::sniff(&head, &name) != crate::inspect::Sniffed::Other {
            return Ok(Source::File(p));
        }
        // Fail closed: what cudalint does not recognise is not passed as "no CUDA here" (a
        // cut-off archive looks like nothing at all).
        Err(ScanError::input(
            &p,
            format!(
                "not an image archive (tar, tar.gz, tar.zst, tar.xz, tar.bz2), OCI layout, wheel or binary that cudalint reads \
                 (a truncated archive?); to scan it as a plain file anyway, use file:{}",
                p.display()
            ),
        ))
    }
}

/// The scan result: `cudalint.scan/v1` (docs/schema.md).
#[derive(Debug, Clone, Serialize)]
pub struct ImageReport {
    pub schema: &'static str,
    pub tool: Tool,
    pub image: ImageInfo,
    /// Files of the final filesystem that carry device code or matter to CUDA, sorted by path.
    pub files: Vec<ImageFile>,
    pub stats: ScanStats,
    /// Oddities that did not stop the scan (hostile tar paths, files that could not be read).
    pub notes: Vec<String>,
    /// Python distributions' `Requires-Dist` pins of CUDA components: (distribution, requirement).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cuda_requires: Vec<(String, String)>,
    /// Packages the package managers' records list whose names tie them to CUDA (`nvidia-*`,
    /// `cuda-*`, `libcudnn*`, ...), sorted.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cuda_packages: Vec<crate::packages::Package>,
    /// Wheels' `*.dist-info/variant.json` in the final filesystem (wheel variants, PEP 825
    /// draft): the variant properties each declares, sorted by path.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub variants: Vec<crate::packages::VariantDecl>,
    /// Packages' `.py` files in the final filesystem, with what each imports of its own package
    /// (`layer::python`), sorted by path; what decides whether an extension module is loaded at
    /// import time (`lint::imports`). Not part of the scan's output.
    #[serde(skip)]
    pub python: Vec<crate::layer::python::PyFile>,
    /// A layer had more `.py` files than it may keep: the imports are not all known.
    #[serde(skip)]
    pub python_cut: bool,
    /// Packages' `.py` files that show they compile device code at run time (`layer::python`'s
    /// `compiles`), with the package that installed each, sorted by path (`lint::compilers`
    /// judges them). Not part of the scan's output.
    #[serde(skip)]
    pub python_compiles: Vec<PyCompiling>,
}

/// A package's `.py` file that compiles device code at run time.
#[derive(Debug, Clone)]
pub struct PyCompiling {
    pub path: String,
    pub package: Option<crate::packages::Package>,
    pub compiles: Vec<crate::layer::python::PyCompile>,
}

crate::schema::words! {
    /// What kind of input an image was read from, as reports name it.
    pub enum SourceKind {
        DockerArchive = "docker-archive",
        OciArchive = "oci-archive",
        Oci = "oci",
        Registry = "registry",
        Dir = "dir",
        File = "file",
        Wheel = "wheel",
        Lock = "lock",
        DockerDaemon = "docker-daemon",
        Podman = "podman",
        Containerd = "containerd",
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ImageInfo {
    pub name: Option<String>,
    /// docker-archive, oci-archive, oci, registry, dir, file, wheel, lock.
    pub source: SourceKind,
    pub manifest_digest: Option<String>,
    pub config_digest: Option<String>,
    pub platform: Option<String>,
    /// Environment of the image config that concerns CUDA (NVIDIA_*, CUDA_*, NV_*, ...).
    pub env: BTreeMap<String, String>,
    pub layers: Vec<LayerInfo>,
    /// A lockfile's packages with no wheel for the platform and Python judged: pip builds them
    /// from their sdist at install time (`flash-attn 2.8.3`), so nothing of them was judged.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub unbuilt: Vec<String>,
    /// `--from-attestation`: the statement the layer analyses came from, and whether a
    /// `--verify-key` verified its signature (else it was believed under `--trust-unsigned`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attestation: Option<AttestationUse>,
}

/// Which attestation an image was judged from.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct AttestationUse {
    /// The digest of the attestation manifest (a referrer of the image manifest).
    pub statement: String,
    pub signed: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct ImageFile {
    /// Digest of the layer the file's bytes come from (absent for directories and files).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layer: Option<String>,
    /// The Dockerfile step that made that layer (the image config's history), where known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hardlinks: Vec<String>,
    /// Symbolic links in the image that resolve to this file.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub symlinks: Vec<String>,
    /// The package that installed the file, where a package manager's record says so.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub package: Option<crate::packages::Package>,
    #[serde(flatten)]
    pub file: crate::inspect::FileReport,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct ScanStats {
    pub layers: usize,
    pub files: u64,
    pub file_bytes: u64,
    pub inspected: u64,
    /// Registry scans: layer bytes downloaded, and layers whose analysis came from the cache.
    #[serde(skip_serializing_if = "is_zero")]
    pub downloaded_bytes: u64,
    #[serde(skip_serializing_if = "is_zero_usize")]
    pub layers_from_cache: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}
fn is_zero_usize(v: &u64) -> bool {
    *v == 0
}

/// Config environment variables that say something about CUDA.
fn cuda_env(config: &oci_spec::image::ImageConfiguration) -> BTreeMap<String, String> {
    let known = crate::knowledge::get();
    let env = config.config().as_ref().and_then(|c| c.env().clone()).unwrap_or_default();
    env.iter()
        .filter_map(|kv| kv.split_once('='))
        .filter(|(k, _)| known.env_kept(k))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Builds the report from the resolved image and its analysed layers (in order).
pub fn assemble(
    source: SourceKind,
    resolved: Option<&oci::Resolved>,
    name: Option<String>,
    layers: Vec<AnalyzedLayer>,
) -> ImageReport {
    let mut stats = ScanStats { layers: layers.len(), ..Default::default() };
    let mut notes = Vec::new();
    let mut infos = Vec::new();
    let mut summaries = Vec::new();
    for l in layers {
        stats.files += l.summary.stats.files;
        stats.file_bytes += l.summary.stats.file_bytes;
        stats.inspected += l.summary.stats.inspected;
        notes.extend(l.summary.notes.iter().map(|n| format!("layer {}: {n}", l.info.digest)));
        infos.push(l.info);
        summaries.push(l.summary);
    }
    if let Some(r) = resolved {
        match layer_steps(&r.config, infos.len()) {
            Ok(steps) => {
                for (info, step) in infos.iter_mut().zip(steps) {
                    info.step = step;
                }
            }
            Err(why) => notes.push(why),
        }
    }
    let packages = crate::packages::ImagePackages::from_layers(summaries.iter().map(|s| &s.packages));
    let variants = live_variants(&summaries);
    let python = live_python(&summaries);
    let python_cut = summaries.iter().any(|s| s.python_cut);
    let python_compiles = python
        .iter()
        .filter(|f| !f.compiles.is_empty())
        .map(|f| {
            // Records list a package's `__init__.py` files, not every module: the nearest
            // enclosing package's names its owner (`cuda/bindings/` of the `cuda` namespace).
            let wheel = source == SourceKind::Wheel;
            let inits: Vec<String> = crate::layer::python::module_at(&f.path, wheel, |x| x == "py")
                .map(|(site, m)| {
                    let parts: Vec<&str> = m.split('.').collect();
                    (1..=parts.len()).rev().map(|n| format!("{site}/{}/__init__.py", parts[..n].join("/"))).collect()
                })
                .unwrap_or_default();
            PyCompiling {
                path: f.path.clone(),
                package: packages.owner_of(std::iter::once(f.path.as_str()).chain(inits.iter().map(String::as_str))),
                compiles: f.compiles.clone(),
            }
        })
        .collect();
    for v in &variants {
        if let Some(e) = &v.error {
            notes.push(format!("{}: not read as wheel variant metadata: {e}", v.path));
        }
    }
    let merged = merge(summaries);
    let files = merged
        .into_iter()
        .map(|m| {
            let mut paths = m.file.paths;
            let primary = paths.remove(0);
            let mut file = m.file.report;
            file.path = primary;
            let package = packages.owner_of(
                std::iter::once(file.path.as_str())
                    .chain(paths.iter().map(String::as_str))
                    .chain(m.symlinks.iter().map(String::as_str)),
            );
            ImageFile {
                layer: infos.get(m.layer).map(|i| i.digest.clone()).filter(|d| !d.is_empty()),
                step: infos.get(m.layer).and_then(|i| i.step.clone()),
                hardlinks: paths,
                symlinks: m.symlinks,
                package,
                file,
            }
        })
        .collect();
    let compiling = crate::cuda::toolchains::table().packages();
    let cuda_packages =
        packages.all.iter().filter(|p| crate::packages::cuda_related(&p.name, &compiling)).cloned().collect();
    ImageReport {
        schema: schema::SCAN,
        tool: Tool::current(),
        image: ImageInfo {
            name: name.or_else(|| resolved.and_then(|r| r.name.clone())),
            source,
            manifest_digest: resolved.and_then(|r| r.manifest_digest.clone()),
            config_digest: resolved.and_then(|r| r.config_digest.clone()),
            platform: resolved.map(|r| r.platform().to_string()),
            env: resolved.map(|r| cuda_env(&r.config)).unwrap_or_default(),
            layers: infos,
            unbuilt: Vec::new(),
            attestation: None,
        },
        files,
        stats,
        notes,
        cuda_requires: packages.requires,
        cuda_packages,
        variants,
        python,
        python_cut,
        python_compiles,
    }
}

/// The step behind each of `layers` layers, as `docker history` pairs them: the config's
/// `history` entries not marked `empty_layer`, in order. An image without history has no steps
/// (not an error); one whose history does not match its layers is said in a note.
fn layer_steps(config: &oci_spec::image::ImageConfiguration, layers: usize) -> Result<Vec<Option<String>>, String> {
    let Some(history) = config.history().as_ref().filter(|h| !h.is_empty()) else { return Ok(vec![None; layers]) };
    let steps: Vec<Option<String>> = history
        .iter()
        .filter(|h| !h.empty_layer().unwrap_or(false))
        .map(|h| h.created_by().as_deref().map(step_text).filter(|s| !s.is_empty()))
        .collect();
    if steps.len() != layers {
        return Err(format!(
            "the image config's history has {} entries that made a layer, for {layers} layers: findings name no \
             Dockerfile step",
            steps.len()
        ));
    }
    Ok(steps)
}

/// A history entry's `created_by` as the Dockerfile line it was: BuildKit writes `RUN /bin/sh
/// -c CMD # buildkit` or `COPY src dst # buildkit`, the classic builder `/bin/sh -c #(nop) COPY
/// …` or `/bin/sh -c CMD` for a RUN. One line, at most 500 characters.
fn step_text(created_by: &str) -> String {
    let s = created_by.trim();
    let s = s.strip_suffix("# buildkit").unwrap_or(s).trim_end();
    let s = match s.strip_prefix("/bin/sh -c ") {
        Some(rest) => match rest.strip_prefix("#(nop)") {
            Some(instr) => instr.trim().to_string(),
            None => format!("RUN {}", rest.trim()),
        },
        None => match s.strip_prefix("RUN /bin/sh -c ") {
            Some(rest) => format!("RUN {}", rest.trim()),
            None => s.to_string(),
        },
    };
    let one_line: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    match one_line.char_indices().nth(500) {
        Some((i, _)) => format!("{}…", &one_line[..i]),
        None => one_line,
    }
}

/// The `variant.json` files the final filesystem holds: one a later layer removes or replaces
/// is gone (a replacement is that layer's own record).
fn live_variants(summaries: &[LayerSummary]) -> Vec<crate::packages::VariantDecl> {
    let mut out: Vec<crate::packages::VariantDecl> = summaries
        .iter()
        .enumerate()
        .flat_map(|(i, s)| s.packages.variants.iter().map(move |v| (i, v)))
        .filter(|(i, v)| !summaries[i + 1..].iter().any(|later| later.hides(&v.path)))
        .map(|(_, v)| v.clone())
        .collect();
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// The `.py` records the final filesystem holds, as [`live_variants`]: a file a later layer
/// removes or replaces is gone; of one path written twice, the last record stands.
fn live_python(summaries: &[LayerSummary]) -> Vec<crate::layer::python::PyFile> {
    let mut out: BTreeMap<&str, &crate::layer::python::PyFile> = BTreeMap::new();
    for (i, s) in summaries.iter().enumerate() {
        for f in &s.python {
            if !summaries[i + 1..].iter().any(|later| later.hides(&f.path)) {
                out.insert(&f.path, f);
            }
        }
    }
    out.into_values().cloned().collect()
}

/// A source that is one layer's worth of files (a root filesystem, a file, a wheel): its
/// report, with no layer listed (there is no layer to name).
pub fn single_layer(source: SourceKind, name: String, size: u64, summary: LayerSummary) -> ImageReport {
    let layer = AnalyzedLayer {
        info: LayerInfo {
            digest: String::new(),
            diff_id: None,
            size,
            compression: Compression::None,
            verified: false,
            step: None,
            stats: summary.stats,
        },
        summary,
    };
    let mut report = assemble(source, None, Some(name), vec![layer]);
    report.image.layers.clear();
    report
}

/// Scans an image given as on the command line.
pub fn scan(spec: &str, opts: &ScanOptions) -> Result<ImageReport, ScanError> {
    // Cached and shared analyses carry no module bytes: a scan that keeps them reads every layer.
    let fresh;
    let opts = if opts.inspect.keep_modules && (opts.cache.is_some() || opts.store.is_some()) {
        fresh = ScanOptions { cache: None, store: None, ..opts.clone() };
        &fresh
    } else {
        opts
    };
    let platform = opts.platform.clone().unwrap_or_else(Platform::host);
    match Source::parse(spec)? {
        // A stream: its layers arrive before the manifest that names them (`docker save`
        // writes it last), so each is read as it passes rather than opened on demand.
        Source::Stdin => archive::scan_reader(std::io::stdin().lock(), "standard input", &platform, opts),
        Source::Pipe(p) => {
            let f = std::fs::File::open(&p).map_err(|e| ScanError::io(&p, e))?;
            archive::scan_reader(f, &p.display().to_string(), &platform, opts)
        }
        Source::DockerArchive(p, r) => archive::scan_file(&p, Some(archive::Layout::Docker), r.as_deref(), opts),
        Source::OciArchive(p, r) => archive::scan_file(&p, Some(archive::Layout::Oci), r.as_deref(), opts),
        Source::Archive(p) => archive::scan_file(&p, None, None, opts),
        Source::OciLayout(p, r) => pipeline::run(&mut layout::LayoutDir::new(&p, r.as_deref()), opts),
        Source::Dir(p) => rootfs::scan_dir(&p, opts),
        Source::File(p) => rootfs::scan_file(&p, opts),
        Source::Wheel(p) => wheel::scan(&p, opts),
        Source::Lock(p, kind) => lock::scan(&p, kind, opts),
        Source::Registry(r) => remote::scan(&r, opts),
        Source::Daemon(engine, name) => daemon::scan(engine, &name, opts),
        Source::Containerd(name) => containerd::scan(&name, opts),
        Source::Reference(r) => scan_reference(&r, opts),
    }
}

/// A bare reference, looked up in each store of `--image-src` in turn (Trivy's order: Docker,
/// Podman, containerd, then the registry): the first that holds it is read, and stderr says
/// which. A store that does not run here is passed over; one that cannot be asked (permission
/// denied, no answer) is passed over with a note, as Trivy does; one that holds the image and
/// fails to give it stops the scan (fail closed: no fall through to another copy).
fn scan_reference(spec: &str, opts: &ScanOptions) -> Result<ImageReport, ScanError> {
    use daemon::Lookup;
    // Attestations live beside a registry's manifests.
    let registry_only = opts.attest || opts.from_attestation;
    let shown = crate::escape::text(spec);
    let mut tried = Vec::new();
    let found = |place: &str| {
        // Said even with --quiet: which copy was judged is part of the verdict.
        eprintln!("cudalint: reading {shown} from {place}");
    };
    for src in &opts.image_src {
        let lookup = match src {
            ImageSrc::Remote => return remote::scan(spec, opts),
            _ if registry_only => continue,
            ImageSrc::Docker => daemon::try_scan(daemon::Engine::Docker, spec, opts, &found)?,
            ImageSrc::Podman => daemon::try_scan(daemon::Engine::Podman, spec, opts, &found)?,
            ImageSrc::Containerd => containerd::try_scan(spec, opts, &found)?,
        };
        match lookup {
            Lookup::Found(report) => return Ok(*report),
            Lookup::Absent => tried.push(src.as_str().to_string()),
            Lookup::Unusable(why) => {
                eprintln!("cudalint: note: {shown}: the local {src} store was passed over: {why}");
                tried.push(format!("{src}: {why}"));
            }
        }
    }
    Err(ScanError::Image(format!(
        "{shown}: not in the local stores tried ({}); --image-src leaves out the registry (add remote, or use docker://)",
        if tried.is_empty() { "none".to_string() } else { tried.join(", ") }
    )))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    /// A spec naming no file reads as a path when it looks like one, else as a reference.
    #[test]
    fn missing_paths_are_not_taken_for_references() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("build")).unwrap();
        let in_dir = |s: &str| d.path().join(s).display().to_string();
        for path in ["./img.tar", "img.tar", "out/img.tar.gz", "~/x", "locks/pylock.toml", "/abs/img"] {
            assert!(path_like(path), "{path}");
        }
        // A directory that exists here: `build/img` is a path even without an extension.
        assert!(path_like(&in_dir("build/img")));
        for reference in ["ubuntu:24.04", "nvcr.io/nvidia/pytorch:25.01-py3", "localhost:5000/a/b", "team/app"] {
            assert!(!path_like(reference), "{reference}");
        }
        assert!(matches!(Source::parse("nvcr.io/nvidia/pytorch:25.01-py3"), Ok(Source::Reference(_))));
        assert!(matches!(Source::parse("docker://ubuntu:24.04"), Ok(Source::Registry(_))));
        assert!(matches!(Source::parse("podman:localhost/x:1"), Ok(Source::Daemon(daemon::Engine::Podman, _))));
        assert!(matches!(Source::parse("out/img.tar"), Err(ScanError::Io { .. })));
    }

    /// The schema's list of sources is every kind a report can name.
    #[test]
    fn the_schema_lists_every_source_kind() {
        let schema = include_str!("../../docs/schema.md");
        let line = schema.lines().find(|l| l.contains(r#""image": { "name", "source" ("#)).expect("the scan schema");
        let listed: Vec<&str> = line.split(['(', ')']).nth(1).unwrap().split(" | ").collect();
        let kinds: Vec<&str> = SourceKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(listed.iter().collect::<BTreeSet<_>>(), kinds.iter().collect::<BTreeSet<_>>());
    }
}
