//! Which config and layers an image source designates: docker-archive `manifest.json`, OCI
//! `index.json` (with nested indexes and platform selection), manifests and configs (oci-spec).

use std::fmt;

use oci_spec::image::{ImageConfiguration, ImageIndex, ImageManifest};
use serde::de::DeserializeOwned;

use super::ScanError;
use crate::digest::{self, MAX_JSON, verify};
pub use crate::layer::LayerRef;
/// Image indexes nested deeper than this are refused.
pub const MAX_INDEX_DEPTH: u32 = 4;
/// Descriptors followed through all the indexes of one image, in all (distinct digests).
pub const MAX_DESCRIPTORS: usize = 1024;

/// Parses a JSON document without echoing any of its content in the error: a "blob" can be
/// any file (a credentials file reached through a link), and serde's messages quote values.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8], what: &str, kind: &str) -> Result<T, ScanError> {
    serde_json::from_slice(bytes).map_err(|e| {
        let why = match e.classify() {
            serde_json::error::Category::Data => format!("not {kind}"),
            serde_json::error::Category::Eof => "cut off (unexpected end of JSON)".to_string(),
            _ => "not valid JSON".to_string(),
        };
        ScanError::Document {
            what: what.to_string(),
            message: format!("{why} (line {}, column {})", e.line(), e.column()),
        }
    })
}

/// A `--platform` value that is not `os/arch[/variant]`.
#[derive(Debug, thiserror::Error)]
#[error("platform {0:?} is not os/arch[/variant]")]
pub struct PlatformError(pub String);

// The CLI's option parsing speaks `String` errors.
impl From<PlatformError> for String {
    fn from(e: PlatformError) -> String {
        e.to_string()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Platform {
    pub os: String,
    pub arch: String,
    pub variant: Option<String>,
}

impl Platform {
    pub fn parse(s: &str) -> Result<Platform, PlatformError> {
        let parts: Vec<&str> = s.split('/').collect();
        match parts[..] {
            [os, arch] if !os.is_empty() && !arch.is_empty() => {
                Ok(Platform { os: os.into(), arch: arch.into(), variant: None })
            }
            [os, arch, v] if !os.is_empty() && !arch.is_empty() && !v.is_empty() => {
                Ok(Platform { os: os.into(), arch: arch.into(), variant: Some(v.into()) })
            }
            _ => Err(PlatformError(s.to_string())),
        }
    }

    /// The platform this binary runs on, in OCI spelling.
    pub fn host() -> Platform {
        let arch = match std::env::consts::ARCH {
            "x86_64" => "amd64",
            "aarch64" => "arm64",
            "powerpc64" => "ppc64le",
            "x86" => "386",
            other => other,
        };
        Platform { os: "linux".into(), arch: arch.into(), variant: None }
    }

    /// `self` (what the user asked for) accepts `other` (what the image offers), both spelled
    /// as containerd normalizes them (`Linux/x86_64` is `linux/amd64`, `arm64/v8` is `arm64`).
    /// No variant asked means any variant: a filter of which platforms to scan, not the choice of
    /// the one image a runtime runs (that is [`Platform::rank`]).
    pub fn accepts(&self, other: &Platform) -> bool {
        let (a, b) = (self.normalized(), other.normalized());
        a.os == b.os && a.arch == b.arch && (self.variant.is_none() || a.variant == b.variant)
    }

    /// containerd's spelling (containerd/platforms `Normalize`, database.go `normalizeOS` and
    /// `normalizeArch`): lower case, architecture aliases, and the default variants dropped.
    pub fn normalized(&self) -> Platform {
        let os = match self.os.to_ascii_lowercase().as_str() {
            "macos" => "darwin".to_string(),
            o => o.to_string(),
        };
        let arch = self.arch.to_ascii_lowercase();
        let variant = self.variant.as_deref().unwrap_or_default().to_ascii_lowercase();
        let (arch, variant) = match arch.as_str() {
            "i386" => ("386".to_string(), String::new()),
            "x86_64" | "x86-64" | "amd64" => ("amd64".into(), if variant == "v1" { String::new() } else { variant }),
            "aarch64" | "arm64" => (
                "arm64".into(),
                match variant.as_str() {
                    "8" | "v8" | "v8.0" => String::new(),
                    "9" | "9.0" | "v9.0" => "v9".into(),
                    _ => variant,
                },
            ),
            "armhf" => ("arm".into(), "v7".into()),
            "armel" => ("arm".into(), "v6".into()),
            "arm" => (
                "arm".into(),
                match variant.as_str() {
                    "" | "7" => "v7".into(),
                    "5" | "6" | "8" => format!("v{variant}"),
                    _ => variant,
                },
            ),
            _ => (arch, variant),
        };
        Platform { os, arch, variant: (!variant.is_empty()).then_some(variant) }
    }

    /// The platforms a runtime asked for `self` runs, most preferred first (containerd/platforms
    /// compare.go `platformVector`, which `Only`, and so `Default`, order by): lower amd64
    /// levels and 386 after amd64; arm64 versions down to v8, then arm v8 to v5; lower arm
    /// versions after arm.
    fn vector(&self) -> Vec<Platform> {
        let p = self.normalized();
        let with = |arch: &str, variant: Option<String>| Platform { os: p.os.clone(), arch: arch.into(), variant };
        let level = |v: Option<&str>| v.and_then(|v| v.strip_prefix('v').unwrap_or(v).parse::<u32>().ok());
        let mut out = vec![p.clone()];
        match p.arch.as_str() {
            "amd64" => {
                let n = level(p.variant.as_deref()).filter(|&n| n > 1).unwrap_or(1);
                out.extend((1..n).rev().map(|k| with("amd64", Some(format!("v{k}")))));
                out.push(with("386", None));
            }
            "arm" => {
                let n = level(p.variant.as_deref()).filter(|&n| n > 5).unwrap_or(5);
                out.extend((5..n).rev().map(|k| with("arm", Some(format!("v{k}")))));
            }
            "arm64" => {
                out.clear();
                // (major, minor) pairs of arm64variantToVersion: v9.x also runs v8.(x+5).
                let v = p.variant.clone().unwrap_or_else(|| "v8".into());
                let (major, minor): (&[u32], Vec<u32>) = match v
                    .strip_prefix("v")
                    .map(|r| r.split_once('.').unwrap_or((r, "0")))
                {
                    Some(("8", m)) if m.parse::<u32>().is_ok_and(|m| m <= 9) => (&[8], vec![m.parse().unwrap_or(0)]),
                    Some(("9", m)) if m.parse::<u32>().is_ok_and(|m| m <= 7) => {
                        let m: u32 = m.parse().unwrap_or(0);
                        (&[9, 8], vec![m, (m + 5).min(9)])
                    }
                    // containerd breaks out here: a variant it does not know runs nothing.
                    _ => return out,
                };
                for (major, minor) in major.iter().zip(minor) {
                    for m in (0..=minor).rev() {
                        let v = if m == 0 { format!("v{major}") } else { format!("v{major}.{m}") };
                        out.push(with("arm64", Some(v)));
                    }
                }
                let arm = if v.starts_with("v8") || v.starts_with("v9") { "v8".to_string() } else { v };
                out.extend(with("arm", Some(arm)).vector());
            }
            _ => {}
        }
        out.iter().map(Platform::normalized).collect()
    }

    /// How much a runtime asked for `self` prefers `offered` (0 most), or None if it does not
    /// run it: containerd's `platforms.Only(self)`, by which it picks from an index the entry
    /// with the lowest rank, the first of equals.
    pub fn rank(&self, offered: &Platform) -> Option<usize> {
        let o = offered.normalized();
        self.vector().iter().position(|p| *p == o)
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.os, self.arch)?;
        if let Some(v) = &self.variant {
            write!(f, "/{v}")?;
        }
        Ok(())
    }
}

/// Where blobs and small files of a source come from.
pub trait Store {
    /// Reads a whole small file (manifest, config): `key` is a path in the archive or layout.
    fn read_small(&mut self, key: &str) -> Result<Vec<u8>, ScanError>;
    fn blob_key(&self, digest: &str) -> String {
        let (alg, hex) = digest.split_once(':').unwrap_or(("sha256", digest));
        format!("blobs/{alg}/{hex}")
    }
}

#[derive(Debug, Clone)]
pub struct Resolved {
    pub name: Option<String>,
    pub manifest_digest: Option<String>,
    pub config_digest: Option<String>,
    pub config: ImageConfiguration,
    pub layers: Vec<LayerRef>,
}

impl Resolved {
    pub fn platform(&self) -> Platform {
        Platform {
            os: self.config.os().to_string(),
            arch: self.config.architecture().to_string(),
            variant: self.config.variant().clone(),
        }
    }
}

/// Reads a small blob named by a descriptor: its declared size is checked before it is read.
fn read_blob(store: &mut dyn Store, digest: &str, size: Option<u64>, what: &str) -> Result<Vec<u8>, ScanError> {
    if let Some(s) = size.filter(|&s| s > MAX_JSON) {
        return Err(ScanError::Document {
            what: what.to_string(),
            message: format!("{s} bytes, more than a manifest can be ({MAX_JSON})"),
        });
    }
    let key = store.blob_key(digest);
    let b = store.read_small(&key)?;
    if let Some(s) = size.filter(|&s| s != b.len() as u64) {
        return Err(ScanError::Document {
            what: what.to_string(),
            message: format!("{} bytes, its descriptor says {s}", b.len()),
        });
    }
    verify(what, digest, &b)?;
    Ok(b)
}

fn parse_config(bytes: &[u8], what: &str) -> Result<ImageConfiguration, ScanError> {
    parse_json(bytes, what, "an image config")
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "PascalCase")]
struct DockerManifestEntry {
    config: String,
    #[serde(default)]
    repo_tags: Option<Vec<String>>,
    layers: Vec<String>,
}

/// `manifest.json` of `docker save` (legacy layout, and the OCI layout Docker 25+ writes,
/// whose entries name `blobs/sha256/...` files).
///
/// `has_index`: the archive also holds `index.json` (Docker 25+), which containerd's importer
/// reads instead: the image chosen here must be one it names, under the same name.
pub fn resolve_docker_archive(
    store: &mut dyn Store,
    want: Option<&str>,
    has_index: bool,
) -> Result<Resolved, ScanError> {
    let raw = store.read_small("manifest.json")?;
    let entries: Vec<DockerManifestEntry> = parse_json(&raw, "manifest.json", "a docker-archive manifest")?;
    // What the archive holds, for messages: `@index tag, tag`.
    let listing = || {
        entries
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let tags = e.repo_tags.clone().unwrap_or_default();
                if tags.is_empty() { format!("@{i} (untagged)") } else { format!("@{i} {}", tags.join(", ")) }
            })
            .collect::<Vec<_>>()
            .join("; ")
    };
    let entry = match want {
        None if entries.len() > 1 => {
            return Err(ScanError::Image(format!(
                "the archive holds {} images; choose one with docker-archive:PATH:TAG or docker-archive:PATH:@N \
                 ({})",
                entries.len(),
                listing()
            )));
        }
        None => entries.first(),
        Some(w) => match w.strip_prefix('@').map(str::parse::<usize>) {
            Some(Ok(i)) => entries.get(i),
            Some(Err(_)) => return Err(ScanError::Image(format!("{w}: @N wants an image index (0, 1, ...)"))),
            None => {
                let latest = format!("{w}:latest");
                entries.iter().find(|e| e.repo_tags.iter().flatten().any(|t| t == w || *t == latest))
            }
        },
    };
    let Some(entry) = entry else {
        return Err(ScanError::Image(match want {
            Some(w) => format!("no image {w} in the archive (it holds: {})", listing()),
            None => "manifest.json lists no image".to_string(),
        }));
    };
    let config_bytes = store.read_small(&entry.config)?;
    let config_digest = digest::from_blob_name(&entry.config).or_else(|| Some(digest::sha256(&config_bytes)));
    if let Some(d) = &config_digest {
        verify(&format!("config {}", entry.config), d, &config_bytes)?;
    }
    let config = parse_config(&config_bytes, &entry.config)?;
    let diff_ids = config.rootfs().diff_ids().clone();
    if diff_ids.len() != entry.layers.len() {
        return Err(ScanError::Image(format!(
            "manifest.json lists {} layers, the config's rootfs {}",
            entry.layers.len(),
            diff_ids.len()
        )));
    }
    let layers = entry
        .layers
        .iter()
        .zip(diff_ids)
        .map(|(key, diff)| LayerRef {
            key: key.clone(),
            digest: digest::from_blob_name(key),
            diff_id: Some(diff),
            size: None,
            media_type: None,
        })
        .collect::<Vec<LayerRef>>();
    if has_index {
        let digests: Vec<Option<String>> = layers.iter().map(|l| l.digest.clone()).collect();
        index_agrees(store, config_digest.as_deref(), &digests, entry.repo_tags.as_deref().unwrap_or_default())?;
    }
    Ok(Resolved {
        name: entry.repo_tags.as_ref().and_then(|t| t.first().cloned()),
        manifest_digest: None,
        config_digest,
        config,
        layers,
    })
}

/// A Docker 25+ archive holds the image twice: `manifest.json` (what `docker load` reads) and
/// `index.json` (what containerd's importer reads, `archive.ImportIndex`, and so Docker with the
/// containerd image store). The image chosen from `manifest.json` (its config and layer blobs)
/// must be one `index.json` names, and an `index.json` entry named like one of its tags must
/// hold it: otherwise the two readers load different images and the archive is refused.
fn index_agrees(
    store: &mut dyn Store,
    config: Option<&str>,
    layers: &[Option<String>],
    tags: &[String],
) -> Result<(), ScanError> {
    let raw = store.read_small("index.json")?;
    let index: ImageIndex = parse_json(&raw, "index.json", "an image index")?;
    // Whether `top` holds the image manifest.json names, and the first of its manifests that
    // could not be read (kept to say why when a named entry holds nothing).
    let holds = |store: &mut dyn Store,
                 top: oci_spec::image::Descriptor|
     -> Result<(bool, Option<ScanError>), ScanError> {
        let mut found = Vec::new();
        collect_manifests(store, vec![top], &mut found, &mut std::collections::HashSet::new(), 0)?;
        let mut unread = None;
        for (d, _) in found {
            let digest = d.digest().to_string();
            let what = format!("manifest {digest}");
            // Platforms `docker save` left out are not in the archive: they hold nothing. An
            // entry whose manifests hold nothing is refused below when it carries the tag.
            let read = read_blob(store, &digest, Some(d.size()), &what)
                .and_then(|bytes| parse_json::<ImageManifest>(&bytes, &what, "an image manifest"));
            let m = match read {
                Ok(m) => m,
                Err(e) => {
                    unread.get_or_insert(e);
                    continue;
                }
            };
            let same_layers = m.layers().len() == layers.len()
                && m.layers().iter().zip(layers).all(|(d, l)| l.as_deref().is_none_or(|l| l == d.digest().to_string()));
            if config == Some(m.config().digest().to_string().as_str()) && same_layers {
                return Ok((true, None));
            }
        }
        Ok((false, unread))
    };
    // Names compared as references (containerd's `docker.io/library/app:1` is Docker's `app:1`),
    // normalized by the registry client's parser.
    let whole = |s: &str| oci_client::Reference::try_from(s).ok().map(|r| r.whole());
    let tagged: Vec<String> = tags.iter().filter_map(|t| whole(t)).collect();
    let named_like = |name: &str| whole(name).is_some_and(|n| tagged.contains(&n));
    let disagree = |why: String| {
        ScanError::Image(format!(
            "index.json and manifest.json name different images ({why}): docker load reads one, containerd's \
             importer the other; refused"
        ))
    };
    let mut anywhere = false;
    for top in index.manifests().clone() {
        let name = top.annotations().as_ref().and_then(|a| a.get(CONTAINERD_NAME).or_else(|| a.get(REF_NAME)).cloned());
        let (held, unread) = holds(store, top)?;
        anywhere |= held;
        if let Some(n) = name.filter(|n| named_like(n))
            && !held
        {
            let n = crate::escape::text(&n);
            return Err(match unread {
                Some(e) => disagree(format!("index.json's {n} cannot be read: {e}")),
                None => disagree(format!("index.json's {n} is another image")),
            });
        }
    }
    if !anywhere {
        return Err(disagree(format!("config {} is in no image index.json names", config.unwrap_or("?"))));
    }
    Ok(())
}

const REF_NAME: &str = "org.opencontainers.image.ref.name";

/// A layout's `ref.name` is often a bare tag (`skopeo copy ... oci:dir:latest` writes `latest`):
/// the image is then titled by where it lies, `dir:latest`, not `latest`.
pub fn qualify_tag(name: Option<String>, place: &std::path::Path) -> Option<String> {
    // A directory keeps its whole name (`torch-2.8.0-cu128`); an archive loses only an archive
    // suffix, never a version's last dot.
    let mut stem = place.file_name().map(|s| s.to_string_lossy().into_owned());
    if !place.is_dir()
        && let Some(s) = &mut stem
    {
        for suffix in [".gz", ".zst", ".tgz", ".tar", ".oci"] {
            if let Some(cut) = s.strip_suffix(suffix).filter(|c| !c.is_empty()) {
                *s = cut.to_string();
            }
        }
    }
    let stem = stem.filter(|s| !s.is_empty() && s != "." && s != "..");
    match (name, stem) {
        (Some(n), Some(stem)) if !n.contains(['/', ':', '@']) => Some(format!("{stem}:{n}")),
        (n, _) => n,
    }
}
const CONTAINERD_NAME: &str = "io.containerd.image.name";

/// An OCI image layout's `index.json` (directory or archive): follows nested indexes, picks
/// the manifest for `platform`, verifies every document against its digest.
pub fn resolve_oci(store: &mut dyn Store, want: Option<&str>, platform: &Platform) -> Result<Resolved, ScanError> {
    let raw = store.read_small("index.json")?;
    let index: ImageIndex = parse_json(&raw, "index.json", "an image index")?;
    let mut top: Vec<oci_spec::image::Descriptor> = index.manifests().clone();
    if let Some(w) = want {
        top.retain(|d| {
            d.annotations().as_ref().is_some_and(|a| {
                a.get(REF_NAME).is_some_and(|r| r == w)
                    || a.get(CONTAINERD_NAME).is_some_and(|n| n == w || n.ends_with(&format!(":{w}")))
            })
        });
        if top.is_empty() {
            return Err(ScanError::Image(format!("no manifest named {w} in index.json")));
        }
    }
    let name = want.map(str::to_string).or_else(|| {
        top.iter().find_map(|d| {
            let a = d.annotations().as_ref()?;
            a.get(CONTAINERD_NAME).or_else(|| a.get(REF_NAME)).cloned()
        })
    });
    let mut candidates: Vec<(oci_spec::image::Descriptor, Option<Platform>)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    collect_manifests(store, top, &mut candidates, &mut seen, 0)?;
    if candidates.is_empty() {
        return Err(ScanError::Image("index.json names no image manifest".into()));
    }
    // One manifest: that is the image, whatever its platform. Several: choose by platform.
    let chosen = if candidates.len() == 1 {
        candidates.remove(0).0
    } else {
        let found: Vec<String> = candidates.iter().filter_map(|(_, p)| p.as_ref()).map(Platform::to_string).collect();
        // As containerd chooses (images.Manifest with platforms.Only): the entry it prefers
        // most, the first of equals, whatever the index's order (a `linux/amd64/v3` listed first
        // is not what an amd64 host runs).
        let pick = candidates
            .iter()
            .enumerate()
            .filter_map(|(i, (_, p))| Some((platform.rank(p.as_ref()?)?, i)))
            .min()
            .map(|(_, i)| i);
        match pick {
            Some(i) => candidates.remove(i).0,
            None => {
                return Err(ScanError::Platform { wanted: platform.to_string(), available: found });
            }
        }
    };
    let digest = chosen.digest().to_string();
    let bytes = read_blob(store, &digest, Some(chosen.size()), &format!("manifest {digest}"))?;
    let manifest: ImageManifest = parse_json(&bytes, &format!("manifest {digest}"), "an image manifest")?;
    let cdigest = manifest.config().digest().to_string();
    let config_bytes = read_blob(store, &cdigest, Some(manifest.config().size()), &format!("config {cdigest}"))?;
    let config = parse_config(&config_bytes, &format!("config {cdigest}"))?;
    let diff_ids = config.rootfs().diff_ids().clone();
    let layers = manifest
        .layers()
        .iter()
        .enumerate()
        .map(|(i, d)| LayerRef {
            key: store.blob_key(d.digest().as_ref()),
            digest: Some(d.digest().to_string()),
            diff_id: diff_ids.get(i).cloned(),
            size: Some(d.size()),
            media_type: Some(d.media_type().to_string()),
        })
        .collect();
    Ok(Resolved { name, manifest_digest: Some(digest), config_digest: Some(cdigest), config, layers })
}

fn is_index(media_type: &str) -> bool {
    media_type.contains("image.index") || media_type.contains("manifest.list")
}

/// Walks nested indexes: every digest is followed once (an index naming the same child many
/// times, at many levels, does not fan out), depth and the number of descriptors are bounded.
fn collect_manifests(
    store: &mut dyn Store,
    descs: Vec<oci_spec::image::Descriptor>,
    out: &mut Vec<(oci_spec::image::Descriptor, Option<Platform>)>,
    seen: &mut std::collections::HashSet<String>,
    depth: u32,
) -> Result<(), ScanError> {
    if depth > MAX_INDEX_DEPTH {
        return Err(ScanError::Image(format!("image indexes nested more than {MAX_INDEX_DEPTH} deep")));
    }
    for d in descs {
        let digest = d.digest().to_string();
        if !seen.insert(digest.clone()) {
            continue;
        }
        if seen.len() > MAX_DESCRIPTORS {
            return Err(ScanError::Image(format!(
                "image indexes name more than {MAX_DESCRIPTORS} distinct manifests: refused"
            )));
        }
        let mt = d.media_type().to_string();
        if is_index(&mt) {
            let what = format!("index {digest}");
            let bytes = read_blob(store, &digest, Some(d.size()), &what)?;
            let idx: ImageIndex = parse_json(&bytes, &what, "an image index")?;
            collect_manifests(store, idx.manifests().clone(), out, seen, depth + 1)?;
            continue;
        }
        let platform = d.platform().as_ref().map(|p| Platform {
            os: p.os().to_string(),
            arch: p.architecture().to_string(),
            variant: p.variant().clone(),
        });
        // Attestation manifests carry platform unknown/unknown: not an image.
        if platform.as_ref().is_some_and(|p| p.os == "unknown") {
            continue;
        }
        out.push((d, platform));
    }
    Ok(())
}

/// Fuzzing harness (fuzz/fuzz_targets/oci.rs, and the unit test below): `data` is split at
/// `\n--\n` into documents; the first is `index.json` and `manifest.json`, every one is also a
/// blob under its digest by every algorithm cudalint computes, so inputs can name each other. Both resolvers
/// run over it; any error is fine, a panic or an unbounded walk is not. Returns how many of the
/// four resolutions succeeded.
#[doc(hidden)]
pub fn fuzz_resolve(data: &[u8]) -> usize {
    struct Docs(std::collections::HashMap<String, Vec<u8>>);
    impl Store for Docs {
        fn read_small(&mut self, key: &str) -> Result<Vec<u8>, ScanError> {
            self.0.get(key).cloned().ok_or_else(|| ScanError::Image(format!("no {key}")))
        }
    }
    let mut docs = std::collections::HashMap::new();
    let mut parts = Vec::new();
    let mut rest = data;
    while let Some(i) = rest.windows(4).position(|w| w == b"\n--\n") {
        parts.push(&rest[..i]);
        rest = &rest[i + 4..];
    }
    parts.push(rest);
    for (i, p) in parts.iter().enumerate() {
        if i == 0 {
            docs.insert("index.json".to_string(), p.to_vec());
            docs.insert("manifest.json".to_string(), p.to_vec());
        }
        for alg in digest::algorithms() {
            let d = digest::compute(alg, p).expect("a supported algorithm");
            docs.insert(format!("blobs/{}", d.replacen(':', "/", 1)), p.to_vec());
        }
        let sha256 = digest::sha256(p);
        docs.insert(format!("{}.json", &sha256["sha256:".len()..]), p.to_vec());
    }
    let mut store = Docs(docs);
    let host = Platform { os: "linux".into(), arch: "amd64".into(), variant: None };
    [
        resolve_oci(&mut store, None, &host).is_ok(),
        resolve_oci(&mut store, Some("latest"), &host).is_ok(),
        resolve_docker_archive(&mut store, None, true).is_ok(),
        resolve_docker_archive(&mut store, Some("@1"), false).is_ok(),
    ]
    .into_iter()
    .filter(|&ok| ok)
    .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_tags_are_titled_by_the_whole_directory_or_the_archive_without_its_suffix() {
        let dir = tempfile::tempdir().unwrap();
        let layout = dir.path().join("torch-2.8.0-cu128");
        std::fs::create_dir(&layout).unwrap();
        let t = |place: &std::path::Path| qualify_tag(Some("latest".into()), place).unwrap();
        assert_eq!(t(&layout), "torch-2.8.0-cu128:latest");
        assert_eq!(t(std::path::Path::new("/x/my-app-1.2.3.tar")), "my-app-1.2.3:latest");
        assert_eq!(t(std::path::Path::new("/x/my-app-1.2.3.oci.tar.gz")), "my-app-1.2.3:latest");
        assert_eq!(t(std::path::Path::new("/x/app.tgz")), "app:latest");
        assert_eq!(qualify_tag(Some("reg/app:1".into()), &layout).unwrap(), "reg/app:1");
    }

    #[test]
    fn platforms() {
        let p = Platform::parse("linux/arm64/v8").unwrap();
        assert_eq!(p.to_string(), "linux/arm64/v8");
        assert!(Platform::parse("linux/arm64").unwrap().accepts(&p));
        assert!(!Platform::parse("linux/amd64").unwrap().accepts(&p));
        assert!(Platform::parse("linux").is_err());
    }

    /// containerd/platforms' own cases (compare_test.go, database.go): spellings, and which
    /// entry `Only` prefers.
    #[test]
    fn platforms_are_normalized_and_ranked_as_containerd_does() {
        let p = |s: &str| Platform::parse(s).unwrap();
        assert_eq!(p("Linux/x86_64").normalized(), p("linux/amd64"));
        assert_eq!(p("linux/amd64/v1").normalized(), p("linux/amd64"));
        assert_eq!(p("linux/aarch64/v8").normalized(), p("linux/arm64"));
        assert_eq!(p("linux/armhf").normalized(), p("linux/arm/v7"));
        assert_eq!(p("linux/arm").normalized(), p("linux/arm/v7"));
        let amd64 = p("linux/amd64");
        assert_eq!(amd64.rank(&p("linux/x86_64")), Some(0));
        assert_eq!(amd64.rank(&p("Linux/AMD64")), Some(0));
        assert_eq!(amd64.rank(&p("linux/386")), Some(1));
        // An amd64 host (no level asked) does not run a v3 image; a v3 one runs v2 and plain.
        assert_eq!(amd64.rank(&p("linux/amd64/v3")), None);
        let v3 = p("linux/amd64/v3");
        assert_eq!(
            [p("linux/amd64/v3"), p("linux/amd64/v2"), p("linux/amd64"), p("linux/386"), p("linux/amd64/v4")]
                .map(|o| v3.rank(&o)),
            [Some(0), Some(1), Some(2), Some(3), None]
        );
        let arm64 = p("linux/arm64");
        assert_eq!(arm64.rank(&p("linux/arm64/v8")), Some(0));
        assert_eq!(arm64.rank(&p("linux/arm/v7")), Some(2));
        assert_eq!(arm64.rank(&p("linux/arm64/v8.1")), None);
        assert_eq!(p("linux/arm64/v9").rank(&p("linux/arm64/v8.5")), Some(1));
        assert_eq!(p("linux/arm/v7").rank(&p("linux/arm/v5")), Some(2));
        assert_eq!(p("windows/amd64").rank(&p("linux/amd64")), None);
        assert_eq!(p("linux/arm64/v7").rank(&p("linux/arm/v7")), None);
    }

    /// The fuzz harness on a valid nested layout and on damage of it: errors, never panics.
    #[test]
    fn fuzz_harness_on_seeds() {
        let config = br#"{"architecture":"amd64","os":"linux","rootfs":{"type":"layers","diff_ids":[]}}"#;
        let manifest = format!(
            r#"{{"schemaVersion":2,"config":{{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"{}","size":{}}},"layers":[]}}"#,
            digest::sha256(config),
            config.len()
        );
        let inner = format!(
            r#"{{"schemaVersion":2,"manifests":[{{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"{}","size":{}}}]}}"#,
            digest::sha256(manifest.as_bytes()),
            manifest.len()
        );
        let top = format!(
            r#"{{"schemaVersion":2,"manifests":[{{"mediaType":"application/vnd.oci.image.index.v1+json","digest":"{}","size":{}}}]}}"#,
            digest::sha256(inner.as_bytes()),
            inner.len()
        );
        let seed = [top.as_bytes(), inner.as_bytes(), manifest.as_bytes(), &config[..]].join(&b"\n--\n"[..]);
        assert_eq!(fuzz_resolve(&seed), 1, "the seed resolves as an OCI layout");
        for cut in (0..seed.len()).step_by(7) {
            fuzz_resolve(&seed[..cut]);
            let mut flipped = seed.clone();
            flipped[cut] ^= 0x20;
            fuzz_resolve(&flipped);
        }
    }
}
