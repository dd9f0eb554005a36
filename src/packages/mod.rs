//! Which package installed a file, from the package managers' own records read while the layers
//! stream past: Python `*.dist-info/RECORD` (pip), dpkg `info/*.list` and `status`
//! (`status.d/*` in distroless images), conda `conda-meta/*.json`, and RPM's sqlite database
//! (`rpm.rs`; RHEL 9, UBI 9, Rocky 9, Fedora) with `os-release` for its purls' distro. Only the
//! files that can carry device code are kept, so memory stays small on images with huge RECORDs.
//! Records reach their readers as bytes (an rpmdb is binary), or as a temporary file for the
//! readers that open a database by path.
//! The verdicts use it to judge a package's binaries together and to name the package in fixes.
//! A wheel's `*.dist-info/variant.json` (wheel variants, PEP 825 draft) is read here too: the
//! variant properties the wheel declares, which `lint::variants` checks against its code.

use std::borrow::Cow;
use std::path::Path;

use serde::{Deserialize, Serialize};

mod rpm;

/// Metadata files larger than this are not read (a RECORD of 200k lines is ~20 MiB).
pub const MAX_METADATA: u64 = 32 << 20;

/// What one layer's package records may keep, in bytes: the file paths they name (each counted
/// with its entry, [`path_cost`]), dpkg versions and `Requires-Dist` pins. An eighth of the
/// scan's default memory budget (`layer::budget::DEFAULT`): ~150,000 paths of 150 bytes, where a
/// layer of the whole CUDA toolkit keeps a few thousand. Fixed, not `--memory`'s, so a layer's
/// cached analysis does not depend on the flag. Each is counted before it is made: a few bytes of
/// a record can join a long directory name many times (an rpm header's directory and base names,
/// a RECORD's lines under a deep site-packages), so a record's size does not bound its paths.
pub const MAX_KEPT: usize = 32 << 20;

/// Longest path kept: Linux PATH_MAX, as the tar walk bounds names (`layer::path::MAX_PATH`,
/// which a test holds equal; packages sit below `layer`, so the walk's constant is not imported).
pub const MAX_PATH: usize = 4096;

/// What a kept path or pair costs beyond its bytes: its `String`s and index here, and its node in
/// the image's lookup.
const ENTRY: usize = 64;

/// What keeping a path of `len` bytes costs against [`MAX_KEPT`].
const fn path_cost(len: usize) -> usize {
    len + ENTRY
}

/// The note of the record that reached [`MAX_KEPT`]: what it and the layer's later records name
/// is not kept (their packages still are).
fn cut_note(what: &str) -> String {
    format!(
        "{what} past the layer's bound of {} MiB for its package records: the rest of them, here and in \
         later records of the layer, not kept (their files are named by no package)",
        MAX_KEPT >> 20
    )
}

/// A wheel's `variant.json` larger than this is not read (one variant's properties take a few
/// hundred bytes; PEP 825 sets no bound).
pub const MAX_VARIANT_JSON: u64 = 1 << 20;

crate::schema::words! {
    /// The package managers whose records are read, as the words of package URLs. Declared in
    /// the order of those words, so packages sort as they did when the manager was a string (the
    /// order of `cuda_packages` in reports).
    pub enum PackageManager {
        Conda = "conda",
        Deb = "deb",
        Pypi = "pypi",
        Rpm = "rpm",
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
            PackageManager::Deb | PackageManager::Conda | PackageManager::Rpm => name.to_string(),
        };
        let purl = if version.is_empty() {
            format!("pkg:{manager}/{name}")
        } else {
            format!("pkg:{manager}/{name}@{}", version.replace('+', "%2B"))
        };
        Package { manager, name, version: version.into(), purl }
    }

    /// An RPM (`version` is `version-release`), with the purl spec's `rpm` qualifiers: the
    /// distribution's `os-release` ID as namespace and `distro=<ID>-<VERSION_ID>` when the image
    /// has one, `arch`, and `epoch` when set.
    pub fn rpm(name: &str, version: &str, q: &RpmQualifiers, os: Option<&OsRelease>) -> Package {
        let mut p = Package::new(PackageManager::Rpm, name, version);
        let namespace = os.map(|o| format!("{}/", purl_escape(&o.id))).unwrap_or_default();
        let mut purl =
            format!("pkg:rpm/{namespace}{}@{}?arch={}", purl_escape(name), purl_escape(version), purl_escape(&q.arch));
        if let Some(e) = q.epoch {
            purl.push_str(&format!("&epoch={e}"));
        }
        if let Some(o) = os.filter(|o| !o.version_id.is_empty()) {
            purl.push_str(&format!("&distro={}-{}", purl_escape(&o.id), purl_escape(&o.version_id)));
        }
        p.purl = purl;
        p
    }
}

/// A purl segment or qualifier value: bytes outside the unreserved set percent-encoded, so a
/// name from an image cannot add a segment or a qualifier.
fn purl_escape(s: &str) -> String {
    crate::escape::uri_path(s).replace('/', "%2F")
}

/// What an RPM's purl needs beyond its name and version (the package is `packages[index]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RpmQualifiers {
    pub index: usize,
    pub arch: String,
    pub epoch: Option<u32>,
}

/// The distribution an image says it is (`os-release`'s `ID` and `VERSION_ID`), for RPM purls.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OsRelease {
    pub id: String,
    pub version_id: String,
    /// Read from `/etc/os-release`, which wins over `/usr/lib/os-release` (the freedesktop
    /// order).
    pub etc: bool,
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
    /// Wheels' `*.dist-info/variant.json` files.
    #[serde(default)]
    pub variants: Vec<VariantDecl>,
    /// The RPMs among `packages`, with what their purls need.
    #[serde(default)]
    pub rpm: Vec<RpmQualifiers>,
    /// The layer writes an rpm database, read or not: the packages of older ones are stale.
    #[serde(default)]
    pub rpmdb: bool,
    /// The layer's `os-release`, if it has one.
    #[serde(default)]
    pub os_release: Option<OsRelease>,
    /// Bytes kept toward [`MAX_KEPT`] while the layer's records are read; `full` once one was
    /// cut there (later ones name their packages, nothing more).
    #[serde(skip)]
    kept: usize,
    #[serde(skip)]
    full: bool,
    /// `packages[..indexed]` by value, for [`LayerPackages::add`]'s search: a layer of many
    /// records (a `.list` a package) made that search quadratic.
    #[serde(skip)]
    index: std::collections::HashMap<Package, usize>,
    #[serde(skip)]
    indexed: usize,
}

/// A wheel variant property (PEP 825 draft): `nvidia :: sm_arch :: 90_real`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Property {
    pub namespace: String,
    pub feature: String,
    pub value: String,
}

impl Property {
    pub fn new(namespace: &str, feature: &str, value: &str) -> Property {
        Property { namespace: namespace.into(), feature: feature.into(), value: value.into() }
    }

    /// The value's leading number and the rest (`100a_real` -> (100, `a_real`)), for sorting
    /// values as numbers where they start with one (`90_real` before `100_real`).
    fn value_key(&self) -> (Option<u64>, &str) {
        let digits = self.value.bytes().take_while(u8::is_ascii_digit).count();
        let (n, rest) = self.value.split_at(digits);
        (n.parse().ok(), rest)
    }
}

/// By namespace, feature, then value (a leading number compared as a number).
impl Ord for Property {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (&self.namespace, &self.feature, self.value_key(), &self.value).cmp(&(
            &other.namespace,
            &other.feature,
            other.value_key(),
            &other.value,
        ))
    }
}

impl PartialOrd for Property {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// As PEP 825 writes it: `nvidia :: sm_arch :: 90_real`.
impl std::fmt::Display for Property {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} :: {} :: {}", self.namespace, self.feature, self.value)
    }
}

/// What a wheel's `*.dist-info/variant.json` declares (PEP 825 draft, format 0.0.x): the one
/// entry of its `variants` object, a label mapped to namespaces, features and lists of values.
/// `default-priorities`, `providers` and `static-properties` say how to rank variants, not what
/// one needs, and are not kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VariantDecl {
    /// The file's absolute path.
    pub path: String,
    /// The distribution its dist-info directory names (PEP 503-normalized) and its version.
    pub distribution: String,
    pub version: String,
    /// The variant label (`cu129_sm90`, `null` for the variant of no properties); empty when the
    /// file could not be read.
    pub label: String,
    /// Every property declared, sorted. A feature listing several values holds when any of them
    /// does (PEP 825: "at least one value for every feature").
    pub properties: Vec<Property>,
    /// Why the file was not read as variant metadata, when it was not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One kind of package record: which files are such records, how one is read, and the version
/// of that reading.
#[derive(Debug)]
pub struct Record {
    /// Names the kind in the layer cache key.
    pub kind: &'static str,
    /// Folded into the layer cache key (`cache/codec.rs`): bump it when `read` would take something
    /// else from the same bytes, and only analyses made with the old parser are dropped.
    pub version: u32,
    /// A file larger than this is no record of the kind: it is not read (a note says so).
    pub max: u64,
    /// Whether a file, by its directory and name (of an absolute path), is a record of this kind.
    is: fn(dir: &str, name: &str) -> bool,
    /// Adds what the record says to a layer's packages.
    pub read: Reader,
}

/// A record as the walker hands it: its bytes, or a temporary file holding it.
pub enum RecordData<'a> {
    Bytes(&'a [u8]),
    File(&'a Path),
}

/// What a reader adds, or why the record could not be read (a note in the layer's summary).
pub type ReadResult = Result<(), String>;

/// How a record reaches its reader.
#[derive(Debug)]
pub enum Reader {
    /// Its bytes, read whole (it is at most `max` bytes).
    Bytes(fn(&mut LayerPackages, dir: &str, name: &str, bytes: &[u8]) -> ReadResult),
    /// A temporary file holding it, for readers that open a database by path (sqlite); memory
    /// stays bounded however large the database is.
    File(fn(&mut LayerPackages, dir: &str, name: &str, file: &Path) -> ReadResult),
    /// Known but not read: the note says why, without a byte of it read.
    Unread(&'static str),
}

/// Every kind of package record read, first match wins. The walkers (tar, zip, directory) hand
/// whatever [`record_kind`] names to [`LayerPackages::read`], so a new kind (apk's
/// `lib/apk/db/installed`, rpm) is one row here and its parser, nothing in any walker.
pub static RECORDS: &[Record] = &[
    Record {
        kind: "pip-record",
        // 2: run-time compilers without an extension (ptxas) are owned too. 3: paths kept at
        // most `MAX_KEPT` a layer.
        version: 3,
        max: MAX_METADATA,
        is: |dir, name| dir.ends_with(".dist-info") && name == "RECORD",
        read: Reader::Bytes(pip_record),
    },
    Record {
        kind: "pip-metadata",
        // 2: pins kept at most `MAX_KEPT` a layer.
        version: 2,
        max: MAX_METADATA,
        is: |dir, name| dir.ends_with(".dist-info") && name == "METADATA",
        read: Reader::Bytes(pip_metadata),
    },
    Record {
        kind: "dpkg-list",
        // 2: run-time compilers without an extension (ptxas) are owned too. 3: paths kept at
        // most `MAX_KEPT` a layer.
        version: 3,
        max: MAX_METADATA,
        is: |dir, name| dir.ends_with("/var/lib/dpkg/info") && name.ends_with(".list"),
        read: Reader::Bytes(dpkg_list),
    },
    Record {
        kind: "dpkg-status",
        // 2: versions kept at most `MAX_KEPT` a layer.
        version: 2,
        max: MAX_METADATA,
        // `status.d/*` in distroless images.
        is: |dir, name| {
            (dir.ends_with("/var/lib/dpkg") && name == "status")
                || (dir.ends_with("/var/lib/dpkg/status.d") && !name.contains('.'))
        },
        read: Reader::Bytes(dpkg_status),
    },
    Record {
        kind: "conda-meta",
        // 2: run-time compilers without an extension (ptxas) are owned too. 3: metadata that is
        // not JSON is a note, not silence. 4: paths kept at most `MAX_KEPT` a layer.
        version: 4,
        max: MAX_METADATA,
        is: |dir, name| dir.ends_with("/conda-meta") && name.ends_with(".json"),
        read: Reader::Bytes(conda_meta),
    },
    Record {
        kind: "wheel-variant",
        version: 1,
        max: MAX_VARIANT_JSON,
        is: |dir, name| dir.ends_with(".dist-info") && name == "variant.json",
        read: Reader::Bytes(wheel_variant),
    },
    Record {
        kind: "rpm-sqlite",
        // 2: at most `rpm::MAX_PACKAGES` packages are read. 3: only rpm's plain `Packages`
        // table, read within a step budget; paths kept at most `MAX_KEPT` a layer.
        version: 3,
        max: rpm::MAX_DB,
        // `/usr/lib/sysimage/rpm` on Fedora 36+ and openSUSE (`/var/lib/rpm` links there).
        is: |dir, name| name == "rpmdb.sqlite" && rpm::is_db_dir(dir),
        read: Reader::File(rpm::sqlite),
    },
    Record {
        kind: "rpm-sqlite-wal",
        version: 1,
        max: rpm::MAX_DB,
        is: |dir, name| name == "rpmdb.sqlite-wal" && rpm::is_db_dir(dir),
        read: Reader::File(rpm::wal),
    },
    Record {
        kind: "rpm-legacy",
        version: 1,
        max: u64::MAX,
        // Berkeley DB `Packages` (RHEL and CentOS 7 and 8, Amazon Linux 2) and rpm's own ndb
        // `Packages.db` (openSUSE, SLES 15 SP3+).
        is: |dir, name| matches!(name, "Packages" | "Packages.db") && rpm::is_db_dir(dir),
        read: Reader::Unread(rpm::LEGACY),
    },
    Record {
        kind: "os-release",
        version: 1,
        max: MAX_OS_RELEASE,
        is: |dir, name| name == "os-release" && (dir.ends_with("/etc") || dir.ends_with("/usr/lib")),
        read: Reader::Bytes(os_release),
    },
];

/// An `os-release` larger than this is not read (they are a few hundred bytes).
const MAX_OS_RELEASE: u64 = 64 << 10;

/// `os-release` (freedesktop.org): `ID` and `VERSION_ID`, shell-quoted or not. Only lowercase
/// `a-z0-9._-` is kept of either, as the spec allows them, so no file can put other bytes in a purl.
fn os_release(l: &mut LayerPackages, dir: &str, _name: &str, bytes: &[u8]) -> ReadResult {
    let text = &*text(bytes);
    let field = |k: &str| {
        text.lines().rev().find_map(|line| {
            let v = line.trim().strip_prefix(k)?.strip_prefix('=')?.trim();
            let v = v.strip_prefix(['"', '\'']).unwrap_or(v);
            let v = v.strip_suffix(['"', '\'']).unwrap_or(v);
            Some(
                v.chars()
                    .filter(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-'))
                    .take(64)
                    .collect::<String>(),
            )
        })
    };
    let Some(id) = field("ID").filter(|id| !id.is_empty()) else {
        return Err("no `ID=` line".into());
    };
    let etc = dir.ends_with("/etc");
    if l.os_release.as_ref().is_none_or(|o| etc || !o.etc) {
        l.os_release = Some(OsRelease { id, version_id: field("VERSION_ID").unwrap_or_default(), etc });
    }
    Ok(())
}

/// The package record `path` is, if it is one worth reading.
pub fn record_kind(path: &str) -> Option<&'static Record> {
    let (dir, name) = path.rsplit_once('/')?;
    RECORDS.iter().find(|r| (r.is)(dir, name))
}

/// Every record kind with its version (`pip-record.1,...`), for the layer cache key.
pub fn record_versions() -> String {
    RECORDS.iter().map(|r| format!("{}.{}", r.kind, r.version)).collect::<Vec<_>>().join(",")
}

/// Files that may carry device code or identify CUDA (shared objects, archives, cubins, ...),
/// run-time compilers without an extension (Triton's `ptxas`), and Python packages'
/// `__init__.py` (whose package owns the `.py` code that compiles at run time), so that their
/// package is known too.
fn interesting(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    name == "__init__.py"
        || name.ends_with(".so")
        || name.contains(".so.")
        || [".cubin", ".fatbin", ".ptx", ".a", ".o", ".bin"].iter().any(|e| name.ends_with(e))
        || crate::inspect::toolchain::kind_of(name).is_some()
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

/// A text record's bytes as text; invalid UTF-8 is replaced, so a line naming a path that is not
/// UTF-8 owns nothing (no lookup matches it) and the rest of the record still reads.
fn text(bytes: &[u8]) -> Cow<'_, str> {
    String::from_utf8_lossy(bytes)
}

/// pip's `*.dist-info/RECORD`: the distribution's files, paths relative to site-packages.
fn pip_record(l: &mut LayerPackages, dir: &str, _name: &str, bytes: &[u8]) -> ReadResult {
    let text = &*text(bytes);
    let Some((n, v)) = dist_info_name(dir) else { return Ok(()) };
    let site = dir.rsplit_once('/').map_or("", |x| x.0);
    let i = l.add(Package::new(PackageManager::Pypi, &n, &v));
    for line in text.lines() {
        // CSV: path,hash,size; paths with commas are quoted.
        let file = match line.strip_prefix('"') {
            Some(rest) => rest.split_once('"').map_or(rest, |x| x.0),
            None => line.split(',').next().unwrap_or(""),
        };
        if !file.is_empty() && interesting(file) {
            l.own_joined(site, file, i)?;
        }
    }
    Ok(())
}

/// pip's `*.dist-info/METADATA`: its `Requires-Dist` pins of CUDA components.
fn pip_metadata(l: &mut LayerPackages, dir: &str, _name: &str, bytes: &[u8]) -> ReadResult {
    let text = &*text(bytes);
    let Some((n, _)) = dist_info_name(dir) else { return Ok(()) };
    let n = pypi_normalize(&n);
    for line in text.lines() {
        if line.is_empty() {
            break; // headers end; the description follows
        }
        if let Some(req) = line.strip_prefix("Requires-Dist:") {
            let req = req.trim();
            if crate::knowledge::get().related_requirement(req) && l.keep(n.len() + req.len(), "requirements")? {
                l.requires.push((n.clone(), req.to_string()));
            }
        }
    }
    Ok(())
}

/// dpkg's `info/<package>[:<arch>].list`: the package's files, one absolute path a line.
fn dpkg_list(l: &mut LayerPackages, _dir: &str, name: &str, bytes: &[u8]) -> ReadResult {
    let text = &*text(bytes);
    let pkg = name.trim_end_matches(".list");
    let pkg = pkg.split(':').next().unwrap_or(pkg);
    let i = l.add(Package::new(PackageManager::Deb, pkg, ""));
    for line in text.lines() {
        if interesting(line) {
            l.own(line.trim(), i)?;
        }
    }
    Ok(())
}

/// dpkg's `status`: the installed versions, joined to the `.list` packages per image.
fn dpkg_status(l: &mut LayerPackages, _dir: &str, _name: &str, bytes: &[u8]) -> ReadResult {
    let text = &*text(bytes);
    for stanza in text.split("\n\n") {
        let field = |k: &str| stanza.lines().find_map(|line| line.strip_prefix(k).map(|v| v.trim().to_string()));
        if let (Some(p), Some(v)) = (field("Package:"), field("Version:"))
            && l.keep(p.len() + v.len(), "dpkg versions")?
        {
            l.dpkg_versions.push((p, v));
        }
    }
    Ok(())
}

/// conda's `conda-meta/<package>.json`: name, version and files relative to the prefix.
fn conda_meta(l: &mut LayerPackages, dir: &str, _name: &str, bytes: &[u8]) -> ReadResult {
    use serde::de::DeserializeSeed;
    let text = &*text(bytes);
    let prefix = dir.rsplit_once('/').map_or("", |x| x.0);
    let (was_full, room) = (l.full, MAX_KEPT - l.kept);
    let mut de = serde_json::Deserializer::from_str(text);
    let m = CondaMeta { prefix: prefix.len(), room }
        .deserialize(&mut de)
        .and_then(|m| de.end().map(|()| m))
        .map_err(|e| format!("not conda package metadata ({e})"))?;
    let i = l.add(Package::new(PackageManager::Conda, &m.name, &m.version));
    for f in &m.files {
        l.own_joined(prefix, f, i)?;
    }
    // The files the room left out, after those it held (said once, by the record that cut).
    if m.cut && !was_full {
        l.full = true;
        return Err(cut_note("file paths"));
    }
    Ok(())
}

/// What a `conda-meta/*.json` says, read as it streams: of `files`, only those worth keeping,
/// and only while their paths (under a prefix of `prefix` bytes) fit `room`, so a list of
/// millions of short names is never held whole. Other keys are read past.
struct CondaMeta {
    prefix: usize,
    room: usize,
}

struct CondaMetaRead {
    name: String,
    version: String,
    files: Vec<String>,
    /// Files worth keeping were left out for want of room.
    cut: bool,
}

impl<'de> serde::de::DeserializeSeed<'de> for CondaMeta {
    type Value = CondaMetaRead;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<CondaMetaRead, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> serde::de::Visitor<'de> for CondaMeta {
    type Value = CondaMetaRead;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an object with `name`, `version` and `files`")
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(mut self, mut map: A) -> Result<CondaMetaRead, A::Error> {
        use serde::de::{Error, IgnoredAny};
        let (mut name, mut version, mut files, mut cut) = (None, None, Vec::new(), false);
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            match &*key {
                "name" => name = Some(map.next_value::<String>()?),
                "version" => version = Some(map.next_value::<String>()?),
                "files" => {
                    let seed = CondaFiles { prefix: self.prefix, room: &mut self.room, cut: &mut cut };
                    files = map.next_value_seed(seed)?;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(CondaMetaRead {
            name: name.ok_or_else(|| A::Error::missing_field("name"))?,
            version: version.ok_or_else(|| A::Error::missing_field("version"))?,
            files,
            cut,
        })
    }
}

/// `files`, as [`CondaMeta`] keeps them.
struct CondaFiles<'r> {
    prefix: usize,
    room: &'r mut usize,
    cut: &'r mut bool,
}

impl<'de> serde::de::DeserializeSeed<'de> for CondaFiles<'_> {
    type Value = Vec<String>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Vec<String>, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> serde::de::Visitor<'de> for CondaFiles<'_> {
    type Value = Vec<String>;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a list of paths")
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<String>, A::Error> {
        let mut out = Vec::new();
        while let Some(f) = seq.next_element::<Cow<'de, str>>()? {
            if !interesting(&f) || *self.cut {
                continue;
            }
            // As `own_joined` will count it.
            match self.room.checked_sub(path_cost(self.prefix + 1 + f.len())) {
                Some(left) => {
                    *self.room = left;
                    out.push(f.into_owned());
                }
                None => *self.cut = true,
            }
        }
        Ok(out)
    }
}

/// A wheel's `*.dist-info/variant.json` (PEP 825 draft): its one variant's properties, or why it
/// could not be read.
fn wheel_variant(l: &mut LayerPackages, dir: &str, name: &str, bytes: &[u8]) -> ReadResult {
    let text = &*text(bytes);
    let Some((n, v)) = dist_info_name(dir) else { return Ok(()) };
    let mut decl = VariantDecl {
        path: format!("{dir}/{name}"),
        distribution: pypi_normalize(&n),
        version: v,
        label: String::new(),
        properties: Vec::new(),
        error: None,
    };
    match parse_variant_json(text) {
        Ok((label, properties)) => {
            decl.label = label;
            decl.properties = properties;
        }
        Err(e) => decl.error = Some(e),
    }
    l.variants.push(decl);
    Ok(())
}

/// PEP 825's character sets: namespaces and features `^[a-z0-9_]+$`, values `^[a-z0-9_.]+$`.
fn pep825_name(s: &str, dot: bool) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || (dot && b == b'.'))
}

/// A name taken from a file, for a message: escaped, and cut at 40 characters.
fn quoted(s: &str) -> String {
    let cut: String = s.chars().take(40).collect();
    let more = if cut.len() < s.len() { "…" } else { "" };
    format!("`{}{more}`", crate::escape::text(&cut))
}

/// What a `variant.json`'s properties may hold once each names its namespace and feature: a
/// long namespace over many short values would otherwise be copied once a value (a 1 MiB file
/// could make ~60 GB of them).
const MAX_VARIANT_HELD: usize = 4 * MAX_VARIANT_JSON as usize;

/// The label and properties of a `variant.json`: its `variants` object must hold exactly one
/// label (PEP 825: "in variant.json, always a single entry"), mapping namespaces to features to
/// lists of values.
fn parse_variant_json(text: &str) -> Result<(String, Vec<Property>), String> {
    use serde_json::Value;
    let doc: Value = serde_json::from_str(text).map_err(|e| format!("not JSON ({e})"))?;
    let variants = doc.get("variants").and_then(Value::as_object).ok_or("no `variants` object")?;
    let mut entries = variants.iter();
    let (Some((label, namespaces)), None) = (entries.next(), entries.next()) else {
        return Err(format!("`variants` holds {} labels; a wheel's holds exactly one", variants.len()));
    };
    if !pep825_name(label, true) {
        return Err(format!("variant label {} is not made of a-z, 0-9, `_` and `.`", quoted(label)));
    }
    let namespaces = namespaces.as_object().ok_or_else(|| format!("variant {} is not an object", quoted(label)))?;
    let (mut properties, mut held) = (Vec::new(), 0usize);
    for (ns, features) in namespaces {
        let features = features.as_object().ok_or_else(|| format!("namespace {} is not an object", quoted(ns)))?;
        for (feature, values) in features {
            let what = || format!("{} :: {}", quoted(ns), quoted(feature));
            let values = values.as_array().ok_or_else(|| format!("{} is not a list of values", what()))?;
            for value in values {
                let value = value.as_str().ok_or_else(|| format!("{} holds a value that is not a string", what()))?;
                if !(pep825_name(ns, false) && pep825_name(feature, false) && pep825_name(value, true)) {
                    return Err(format!(
                        "{} :: {} is not a variant property (PEP 825: a-z, 0-9 and `_`; `.` in values too)",
                        what(),
                        quoted(value)
                    ));
                }
                held += ns.len() + feature.len() + value.len();
                if held > MAX_VARIANT_HELD {
                    return Err(format!(
                        "properties of more than {} MiB once each names its namespace and feature: not a wheel's",
                        MAX_VARIANT_HELD >> 20
                    ));
                }
                properties.push(Property::new(ns, feature, value));
            }
        }
    }
    properties.sort();
    properties.dedup();
    Ok((label.clone(), properties))
}

impl LayerPackages {
    /// The index of `p` in `packages`, added unless an equal one is there.
    fn add(&mut self, p: Package) -> usize {
        for (i, q) in self.packages.iter().enumerate().skip(self.indexed) {
            self.index.entry(q.clone()).or_insert(i);
        }
        self.indexed = self.packages.len();
        if let Some(i) = self.index.get(&p) {
            return *i;
        }
        self.push(p)
    }

    /// Adds `p` as a package of its own (an equal one may be there: rpm's multilib pairs).
    fn push(&mut self, p: Package) -> usize {
        self.packages.push(p);
        self.packages.len() - 1
    }

    /// Counts `bytes` (and an entry) against [`MAX_KEPT`] before they are kept: whether to keep
    /// them, or the note of the record that reached the bound; after that, later records keep
    /// nothing more and say nothing.
    fn keep(&mut self, bytes: usize, what: &str) -> Result<bool, String> {
        if self.full {
            return Ok(false);
        }
        if self.fits(bytes + ENTRY) { Ok(true) } else { Err(cut_note(what)) }
    }

    /// Whether `cost` more bytes fit [`MAX_KEPT`] (and are now counted); once some do not, nothing
    /// more does.
    fn fits(&mut self, cost: usize) -> bool {
        match self.kept.checked_add(cost).filter(|k| !self.full && *k <= MAX_KEPT) {
            Some(k) => self.kept = k,
            None => self.full = true,
        }
        !self.full
    }

    /// Keeps `path` as a file of `packages[i]`; a path longer than the walkers take names no
    /// file of the image and is passed over. `Err` (the note) at [`MAX_KEPT`]; `Ok` with nothing
    /// kept once a record has been cut there.
    fn own(&mut self, path: &str, i: usize) -> ReadResult {
        if path.len() > MAX_PATH || self.full {
            return Ok(());
        }
        if !self.fits(path_cost(path.len())) {
            return Err(cut_note("file paths"));
        }
        self.owned.push((path.to_string(), i));
        Ok(())
    }

    /// [`LayerPackages::own`] for `rel` joined onto `base`, counted before it is made (at its
    /// longest: `..` only shortens it), so a long base joined to many short lines makes no more
    /// than the bound.
    fn own_joined(&mut self, base: &str, rel: &str, i: usize) -> ReadResult {
        let longest = base.len() + 1 + rel.len();
        if self.full {
            return Ok(());
        }
        if !self.fits(path_cost(longest)) {
            return Err(cut_note("file paths"));
        }
        let path = join(base, rel);
        if path.len() <= MAX_PATH {
            self.owned.push((path, i));
        }
        Ok(())
    }

    /// Reads one record (of a kind [`record_kind`] named for `path`) from what its reader takes:
    /// its bytes, or a file holding it.
    pub fn read(&mut self, kind: &Record, path: &str, from: RecordData<'_>) -> ReadResult {
        let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
        match (&kind.read, from) {
            (Reader::Bytes(read), RecordData::Bytes(b)) => read(self, dir, name, b),
            (Reader::File(read), RecordData::File(f)) => read(self, dir, name, f),
            _ => Err(format!("{} is not read from what it was handed", kind.kind)),
        }
    }
}

/// Fuzzing entry (`fuzz/fuzz_targets/packages.rs`): `data` handed to every record reader that
/// reads bytes, under a path of its kind, and to the rpm header parser; returns how many
/// packages came out.
pub fn fuzz_records(data: &[u8]) -> usize {
    let mut l = LayerPackages::default();
    for path in FUZZ_PATHS {
        if let Some(kind) = record_kind(path).filter(|k| matches!(k.read, Reader::Bytes(_))) {
            let _ = l.read(kind, path, RecordData::Bytes(data));
        }
    }
    l.packages.len() + usize::from(rpm::parse_header(data, &mut |cost| l.fits(cost)).is_ok())
}

/// A path of each kind of record read from bytes (a test checks none is missing).
const FUZZ_PATHS: &[&str] = &[
    "/usr/lib/python3/site-packages/x-1.0.dist-info/RECORD",
    "/usr/lib/python3/site-packages/x-1.0.dist-info/METADATA",
    "/usr/lib/python3/site-packages/x-1.0.dist-info/variant.json",
    "/var/lib/dpkg/info/x:amd64.list",
    "/var/lib/dpkg/status",
    "/var/lib/dpkg/status.d/x",
    "/opt/conda/conda-meta/x-1.0.json",
    "/etc/os-release",
];

/// Package names that tie an image to a CUDA version (runtime wheels, toolkit pins, CUDA debs,
/// frameworks, and the packages that compile device code at run time, whose versions the
/// verdicts need): the knowledge base's rows, and `also` (the run-time compiler table's packages,
/// which the caller knows).
pub fn cuda_related(name: &str, also: &[&str]) -> bool {
    crate::knowledge::get().related(name, also)
}

/// The packages of an image, layers applied in order (a later record of a path wins).
#[derive(Debug, Clone, Default)]
pub struct ImagePackages {
    /// Shared, not copied: a package owning many files is held once, however long its name.
    pub owner: std::collections::BTreeMap<String, std::sync::Arc<Package>>,
    pub all: std::collections::BTreeSet<Package>,
    pub requires: Vec<(String, String)>,
}

impl ImagePackages {
    pub fn from_layers<'a>(layers: impl IntoIterator<Item = &'a LayerPackages>) -> ImagePackages {
        let layers: Vec<&LayerPackages> = layers.into_iter().collect();
        let versions: std::collections::BTreeMap<&str, &str> =
            layers.iter().flat_map(|l| l.dpkg_versions.iter().map(|(p, v)| (p.as_str(), v.as_str()))).collect();
        // The image's distribution: the last layer's `os-release` (a layer may rewrite it).
        let os = layers.iter().rev().find_map(|l| l.os_release.as_ref());
        // Each rpm database is the whole installed set: the last one is the image's, and one
        // that could not be read names no package (never one from the database it replaced).
        let last_rpmdb = layers.iter().rposition(|l| l.rpmdb || !l.rpm.is_empty());
        let mut out = ImagePackages::default();
        for (n, l) in layers.iter().enumerate() {
            let stale = |p: &Package| p.manager == PackageManager::Rpm && last_rpmdb.is_some_and(|last| n < last);
            let mut pkgs: Vec<Package> = l
                .packages
                .iter()
                .map(|p| match versions.get(p.name.as_str()) {
                    Some(v) if matches!(p.manager, PackageManager::Deb) && p.version.is_empty() => {
                        Package::new(PackageManager::Deb, &p.name, v)
                    }
                    _ => p.clone(),
                })
                .collect();
            for q in &l.rpm {
                if let Some(p) = pkgs.get_mut(q.index) {
                    *p = Package::rpm(&p.name, &p.version, q, os);
                }
            }
            let pkgs: Vec<std::sync::Arc<Package>> = pkgs.into_iter().map(std::sync::Arc::new).collect();
            for (path, i) in &l.owned {
                if !stale(&pkgs[*i]) {
                    out.owner.insert(path.clone(), pkgs[*i].clone());
                }
            }
            out.all.extend(pkgs.iter().filter(|p| !stale(p)).map(|p| Package::clone(p)));
            out.requires.extend(l.requires.iter().cloned());
        }
        out.requires.sort();
        out.requires.dedup();
        out
    }

    /// The package owning `path` or, failing that, one of its other names (symlinks, links).
    pub fn owner_of<'a>(&self, paths: impl IntoIterator<Item = &'a str>) -> Option<Package> {
        paths.into_iter().find_map(|p| self.owner.get(p).map(|p| Package::clone(p)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads a record the way the walkers do: by the kind its path names.
    fn read(l: &mut LayerPackages, path: &str, text: &str) {
        let kind = record_kind(path).unwrap_or_else(|| panic!("{path} is a record"));
        l.read(kind, path, RecordData::Bytes(text.as_bytes())).unwrap_or_else(|e| panic!("{path}: {e}"));
    }

    #[test]
    fn reads_pip_dpkg_and_conda_records() {
        let mut l = LayerPackages::default();
        let rec = "torch/lib/libtorch_cuda.so,sha256=abc,123\ntorch/__init__.py,sha256=x,1\ntorch/functional.py,,\n\"odd,name.so\",,\n../../../bin/tool.so,,\n";
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
        // Of `.py` files only packages' `__init__.py` are kept (they name the owner of the code beside them).
        assert!(!img.owner.keys().any(|k| k.ends_with(".py") && !k.ends_with("/__init__.py")));
        assert!(img.owner.contains_key("/usr/lib/python3/site-packages/torch/__init__.py"));
        let cudnn = img.owner_of(["/usr/lib/libcudnn.so.9"]).unwrap();
        assert_eq!(cudnn.version, "9.1.0.70-1");
        assert_eq!(img.owner_of(["/opt/conda/lib/libcupy.so"]).unwrap().manager, PackageManager::Conda);
        assert_eq!(pypi_normalize("nvidia_cublas_cu12"), "nvidia-cublas-cu12");
    }

    /// Records whose few bytes join into many long paths (a RECORD's or a conda-meta's short
    /// names under a deep prefix, a `.list` of one long path many times): what a layer keeps is
    /// counted before it is made, the record that reaches the bound says so, and later records
    /// still name their packages. On 3b91db5 each of these held ~800 MB of paths.
    #[test]
    fn what_a_layers_records_keep_is_bounded_and_the_cut_is_a_note() {
        let deep = format!("/{}", "s".repeat(4000));
        let n = 200_000;
        let cut = |l: &mut LayerPackages, path: &str, text: &str| {
            let kind = record_kind(path).unwrap();
            l.read(kind, path, RecordData::Bytes(text.as_bytes())).unwrap_err()
        };
        let kept = |l: &LayerPackages| l.owned.iter().map(|(p, _)| path_cost(p.len())).sum::<usize>();
        let record = "a.so,,\n".repeat(n);
        // A `.list` names its paths whole: many of them, not long ones.
        let list = format!("/usr/lib/{}/a.so\n", "l".repeat(86)).repeat(250_000);
        let files = vec!["a.so"; n];
        let conda = serde_json::json!({"name": "c", "version": "1", "files": files}).to_string();
        for (path, text) in [
            (format!("{deep}/x-1.0.dist-info/RECORD"), record.as_str()),
            ("/var/lib/dpkg/info/x:amd64.list".to_string(), list.as_str()),
            (format!("{deep}/conda-meta/c-1.json"), conda.as_str()),
        ] {
            let mut l = LayerPackages::default();
            let note = cut(&mut l, &path, text);
            assert!(note.starts_with("file paths past the layer's bound of 32 MiB for its package records"), "{note}");
            assert!(
                kept(&l) <= MAX_KEPT && l.owned.len() > 1000,
                "{path}: {} paths, {} bytes",
                l.owned.len(),
                kept(&l)
            );
            assert_eq!(l.packages.len(), 1);
            // The paths kept are the record's, attributed to its package.
            let img = ImagePackages::from_layers([&l]);
            assert_eq!(img.owner_of([l.owned[0].0.as_str()]).as_ref(), l.packages.first(), "{path}");
            // A later record in the layer names its package and keeps nothing more, in silence.
            read(&mut l, "/var/lib/dpkg/info/later.list", "/usr/lib/liblater.so\n");
            assert_eq!((l.packages.len(), l.owned.len() > 1000), (2, true));
            assert!(!l.owned.iter().any(|(p, _)| p == "/usr/lib/liblater.so"));
        }
        // dpkg versions and Requires-Dist pins are counted alike.
        let mut l = LayerPackages::default();
        let status = "Package: p\nVersion: 1\n\n".repeat(MAX_KEPT / ENTRY + 1);
        assert!(cut(&mut l, "/var/lib/dpkg/status", &status).starts_with("dpkg versions past the layer's bound"));
        assert!(l.dpkg_versions.len() < MAX_KEPT / ENTRY);
    }

    /// Equal packages from many records of a layer are one package (found by value, not by a
    /// search of every one before it: a layer of many `.list` files made that quadratic).
    #[test]
    fn a_package_named_by_many_records_is_one() {
        let mut l = LayerPackages::default();
        for i in 0..3 {
            read(&mut l, &format!("/var/lib/dpkg/info/p{i}:amd64.list"), "/usr/lib/libp.so\n");
            read(&mut l, &format!("/var/lib/dpkg/info/p{i}:arm64.list"), "/usr/lib/libq.so\n");
        }
        let names: Vec<&str> = l.packages.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["p0", "p1", "p2"]);
        assert_eq!(l.owned.iter().map(|(_, i)| *i).collect::<Vec<_>>(), [0, 0, 1, 1, 2, 2]);
    }

    /// PEP 825's `*.dist-info/variant.json`: the one label's properties, sorted (numbers as
    /// numbers) and deduplicated; anything else is kept with the reason it was not read.
    #[test]
    fn reads_a_wheels_variant_json() {
        let mut l = LayerPackages::default();
        let p = "/usr/lib/python3/site-packages/Torch-2.9.0.dist-info/variant.json";
        assert_eq!(record_kind(p).unwrap().kind, "wheel-variant");
        assert_eq!(record_kind(p).unwrap().max, MAX_VARIANT_JSON);
        read(
            &mut l,
            p,
            r#"{"$schema": "https://variants-schema.wheelnext.dev/v0.0.3.json",
                "default-priorities": {"namespace": ["nvidia"]},
                "variants": {"cu129": {"nvidia": {"sm_arch": ["90_real", "100_real", "90_real"],
                                                  "cuda_version_lower_bound": ["12.9"]}}}}"#,
        );
        let v = &l.variants[0];
        assert_eq!((v.distribution.as_str(), v.version.as_str(), v.label.as_str()), ("torch", "2.9.0", "cu129"));
        assert_eq!(v.path, p);
        assert_eq!(v.error, None);
        let shown: Vec<String> = v.properties.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "nvidia :: cuda_version_lower_bound :: 12.9",
                "nvidia :: sm_arch :: 90_real",
                "nvidia :: sm_arch :: 100_real"
            ]
        );
        read(&mut l, "/x/null-1.0.dist-info/variant.json", r#"{"variants": {"null": {}}}"#);
        assert_eq!((l.variants[1].label.as_str(), l.variants[1].properties.len()), ("null", 0));
        let error = |text: &str| {
            let mut l = LayerPackages::default();
            read(&mut l, "/x/a-1.dist-info/variant.json", text);
            l.variants[0].error.clone().unwrap_or_default()
        };
        assert!(error("{").starts_with("not JSON"));
        assert_eq!(error("{}"), "no `variants` object");
        assert_eq!(error(r#"{"variants": {}}"#), "`variants` holds 0 labels; a wheel's holds exactly one");
        assert_eq!(
            error(r#"{"variants": {"a": {"nvidia": {"sm_arch": "90_real"}}}}"#),
            "`nvidia` :: `sm_arch` is not a list of values"
        );
        assert_eq!(
            error(r#"{"variants": {"a": {"nvidia": {"sm_arch": [90]}}}}"#),
            "`nvidia` :: `sm_arch` holds a value that is not a string"
        );
        let bad = error(r#"{"variants": {"a": {"NVIDIA\u001b[2J": {"sm_arch": ["90_real"]}}}}"#);
        assert!(bad.starts_with("`NVIDIA\\x1b[2J` :: `sm_arch` :: `90_real` is not a variant property"), "{bad}");
        assert!(error(r#"{"variants": {"A B": {}}}"#).starts_with("variant label `A B`"));
        // A long namespace over many short values is not copied once a value (on 3b91db5 this
        // file of 216 KiB makes 50,000 copies of the 16 KiB namespace, ~800 MB).
        let values = vec!["1"; 50_000];
        let ns = "n".repeat(16 << 10);
        let wide = serde_json::json!({"variants": {"a": {ns: {"f": values}}}}).to_string();
        assert!(wide.len() < MAX_VARIANT_JSON as usize);
        assert_eq!(
            error(&wide),
            "properties of more than 4 MiB once each names its namespace and feature: not a wheel's"
        );
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
        assert_eq!(kind("/x/site-packages/a-1.dist-info/variant.json"), Some("wheel-variant"));
        assert_eq!(kind("/x/site-packages/a-1/variant.json"), None);
        assert_eq!(kind("status"), None);
        assert_eq!(kind("/var/lib/rpm/rpmdb.sqlite"), Some("rpm-sqlite"));
        assert_eq!(kind("/usr/lib/sysimage/rpm/rpmdb.sqlite"), Some("rpm-sqlite"));
        assert_eq!(kind("/var/lib/rpm/rpmdb.sqlite-shm"), None);
        assert_eq!(kind("/var/lib/rpm/rpmdb.sqlite-wal"), Some("rpm-sqlite-wal"));
        assert_eq!(kind("/home/u/rpmdb.sqlite"), None);
        assert_eq!(kind("/var/lib/rpm/Packages"), Some("rpm-legacy"));
        assert_eq!(kind("/usr/lib/sysimage/rpm/Packages.db"), Some("rpm-legacy"));
        assert_eq!(kind("/var/lib/rpm/Name"), None);
        assert_eq!(kind("/etc/os-release"), Some("os-release"));
        assert_eq!(kind("/usr/lib/os-release"), Some("os-release"));
        assert_eq!(kind("/opt/os-release"), None);
        // Each kind once in the cache key, with its version.
        let versions = record_versions();
        for r in RECORDS {
            assert_eq!(versions.matches(&format!("{}.{}", r.kind, r.version)).count(), 1, "{versions}");
        }
    }

    #[test]
    fn managers_serialize_to_their_purl_words_in_their_old_order() {
        let all = [PackageManager::Conda, PackageManager::Deb, PackageManager::Pypi, PackageManager::Rpm];
        for m in all {
            assert_eq!(serde_json::to_value(m).unwrap(), m.as_str());
        }
        let words: Vec<&str> = all.iter().map(|m| m.as_str()).collect();
        assert!(words.is_sorted(), "{words:?}");
    }

    /// `os-release` gives RPM purls their namespace and `distro`; `/etc` wins over `/usr/lib`, a
    /// later layer over an earlier one, and nothing outside the spec's characters reaches a purl.
    #[test]
    fn rpm_purls_take_the_images_distribution() {
        let mut base = LayerPackages::default();
        read(&mut base, "/usr/lib/os-release", "ID=rocky\nVERSION_ID=\"9.3\"\n");
        read(&mut base, "/etc/os-release", "NAME=\"Red Hat\"\nID=\"rhel\"\nVERSION_ID='9.4'\n");
        read(&mut base, "/usr/lib/os-release", "ID=fedora\n");
        assert_eq!(base.os_release.as_ref().map(|o| (o.id.as_str(), o.version_id.as_str())), Some(("rhel", "9.4")));
        let q = RpmQualifiers { index: 0, arch: "x86_64".into(), epoch: None };
        base.packages.push(Package::rpm("cuda-cudart-12-9", "12.9.79-1", &q, None));
        base.rpm.push(q.clone());
        base.owned.push(("/usr/local/cuda/lib64/libcudart.so.12".into(), 0));
        let img = ImagePackages::from_layers([&base]);
        let p = img.owner_of(["/usr/local/cuda/lib64/libcudart.so.12"]).unwrap();
        assert_eq!(p.purl, "pkg:rpm/rhel/cuda-cudart-12-9@12.9.79-1?arch=x86_64&distro=rhel-9.4");
        assert_eq!((p.manager, p.version.as_str()), (PackageManager::Rpm, "12.9.79-1"));
        let mut top = LayerPackages::default();
        read(&mut top, "/etc/os-release", "ID=\"almalinux\u{1b}[2J/x?y\"\n");
        let img = ImagePackages::from_layers([&base, &top]);
        assert_eq!(img.all.iter().next().unwrap().purl, "pkg:rpm/almalinux2xy/cuda-cudart-12-9@12.9.79-1?arch=x86_64");
        let odd = RpmQualifiers { index: 0, arch: "x86_64&distro=evil".into(), epoch: Some(3) };
        let p = Package::rpm("a/b?c", "1-1#x", &odd, None);
        assert_eq!(p.purl, "pkg:rpm/a%2Fb%3Fc@1-1%23x?arch=x86_64%26distro%3Devil&epoch=3");
        let mut bad = LayerPackages::default();
        let kind = record_kind("/etc/os-release").unwrap();
        assert_eq!(bad.read(kind, "/etc/os-release", RecordData::Bytes(b"NAME=x\n")), Err("no `ID=` line".into()));
    }

    /// The fuzz entry reaches every reader that reads bytes, and reads what they read.
    #[test]
    fn the_fuzz_entry_covers_every_byte_reader() {
        for r in RECORDS.iter().filter(|r| matches!(r.read, Reader::Bytes(_))) {
            assert!(
                FUZZ_PATHS.iter().any(|p| record_kind(p).is_some_and(|k| k.kind == r.kind)),
                "no fuzz path of kind {}",
                r.kind
            );
        }
        // Paths name some packages whatever the bytes hold; conda metadata adds its own.
        let empty = fuzz_records(b"");
        assert!(fuzz_records(br#"{"name":"cupy","version":"13.0.0","files":["lib/libcupy.so"]}"#) > empty);
    }

    /// The packages of an image are its last rpm database's: one a later layer rewrote drops the
    /// packages an earlier one removed.
    #[test]
    fn the_last_rpm_database_wins() {
        let layer = |names: &[&str]| {
            let mut l = LayerPackages::default();
            for (i, n) in names.iter().enumerate() {
                let q = RpmQualifiers { index: i, arch: "x86_64".into(), epoch: None };
                l.packages.push(Package::rpm(n, "1-1", &q, None));
                l.owned.push((format!("/usr/lib64/lib{n}.so"), i));
                l.rpm.push(q);
            }
            l
        };
        let (old, new) = (layer(&["a", "b"]), layer(&["b"]));
        let img = ImagePackages::from_layers([&old, &new]);
        let names: Vec<&str> = img.all.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["b"]);
        assert!(img.owner_of(["/usr/lib64/liba.so"]).is_none());
        assert!(img.owner_of(["/usr/lib64/libb.so"]).is_some());
        // A later database that could not be read: no package from the one it replaced.
        let unread = LayerPackages { rpmdb: true, ..LayerPackages::default() };
        let img = ImagePackages::from_layers([&old, &new, &unread]);
        assert!(img.all.is_empty() && img.owner.is_empty(), "{img:?}");
    }
}
