//! Lockfiles as an image source: a `pylock.toml` (PEP 751), a `uv.lock`, a `requirements.txt`
//! whose every requirement carries `--hash` (pip's hash-checking mode), or pip's `--report` JSON.
//! For the chosen platform and Python, each package's wheel is picked as pip and uv pick it
//! (markers evaluated, wheel tags ranked), fetched (the lock's URL or path, else the index),
//! checked against the lock's size and sha256 before a byte of it is read as a wheel, and laid
//! out as pip installs it (`/usr/local/lib/pythonX.Y/site-packages`, `.data` by pip's scheme),
//! one layer per wheel, through the same walker and package records as an image's
//! site-packages: the verdicts are the ones the built image would get.
//!
//! Wheels are cached by their sha256 under the layer cache's directory (`wheels/`,
//! `cache::WheelCache`: verified through the descriptor that is analysed, nothing beside a wheel
//! believed), so a second run downloads nothing and a CI cache directory carries them across
//! runs. Index pages and wheels are fetched with the registry client's bounds
//! (`registry::http`: stall, deadline, sizes enforced while streaming), and every URL in a
//! message has its password masked (`registry::http::redact_urls`).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use sha2::{Digest, Sha256};

use super::{ImageReport, ScanError, ScanOptions, SourceKind};

/// The interpreter a lockfile is judged for without `--python`.
pub const DEFAULT_PYTHON: &str = "3.12";

/// Which lockfile a path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockKind {
    /// PEP 751 `pylock.toml` / `pylock.NAME.toml`.
    Pylock,
    UvLock,
    /// A requirements file in pip's hash-checking mode.
    Requirements,
    /// `pip install --dry-run --report FILE`.
    PipReport,
}

/// The lockfile a file is, by its name and first bytes (None: not one).
pub fn kind_of(path: &Path, head: &[u8]) -> Option<LockKind> {
    let name = path.file_name()?.to_string_lossy();
    let text = String::from_utf8_lossy(head);
    if name == "pylock.toml" || (name.starts_with("pylock.") && name.ends_with(".toml")) {
        return Some(LockKind::Pylock);
    }
    if name == "uv.lock" {
        return Some(LockKind::UvLock);
    }
    if name.ends_with(".json") && text.contains("\"install\"") {
        return Some(LockKind::PipReport);
    }
    // A requirements file names itself so, or shows its hashes early (a notes.txt is not one).
    if (name.ends_with(".txt") || name.ends_with(".in"))
        && !head.contains(&0)
        && (name.starts_with("requirements") || text.contains("--hash="))
    {
        return Some(LockKind::Requirements);
    }
    None
}

/// Where the wheels will run: the interpreter and the machine.
#[derive(Debug, Clone)]
pub struct Target {
    pub python: (u32, u32),
    /// `x86_64`, `aarch64`.
    pub machine: String,
    /// `linux/amd64`.
    pub platform: String,
}

impl Target {
    pub fn new(python: &str, platform: &str) -> Result<Target, String> {
        let (a, b) = python.split_once('.').ok_or_else(|| format!("--python {python:?}: give MAJOR.MINOR (3.11)"))?;
        let python = (
            a.parse().map_err(|_| format!("--python {python:?}: give MAJOR.MINOR (3.11)"))?,
            b.parse().map_err(|_| format!("--python {python:?}: give MAJOR.MINOR (3.11)"))?,
        );
        let arch = platform.split('/').nth(1).unwrap_or(platform);
        let machine = match arch {
            "amd64" | "x86_64" => "x86_64",
            "arm64" | "aarch64" => "aarch64",
            other => return Err(format!("--platform {platform}: no Linux wheels for {other:?} (amd64 or arm64)")),
        };
        if !platform.starts_with("linux/") && platform.contains('/') {
            return Err(format!("--platform {platform}: lockfiles are judged for Linux images"));
        }
        let arch = if machine == "x86_64" { "amd64" } else { "arm64" };
        Ok(Target { python, machine: machine.into(), platform: format!("linux/{arch}") })
    }

    fn markers(&self) -> pep508_rs::MarkerEnvironment {
        let (ma, mi) = self.python;
        let version = format!("{ma}.{mi}");
        let full = format!("{ma}.{mi}.0");
        pep508_rs::MarkerEnvironment::try_from(pep508_rs::MarkerEnvironmentBuilder {
            implementation_name: "cpython",
            implementation_version: &full,
            os_name: "posix",
            platform_machine: &self.machine,
            platform_python_implementation: "CPython",
            platform_release: "",
            platform_system: "Linux",
            platform_version: "",
            python_full_version: &full,
            python_version: &version,
            sys_platform: "linux",
        })
        .expect("a MAJOR.MINOR version parses")
    }

    /// Whether an environment marker holds here (an unreadable one is an error, never true).
    fn holds(&self, marker: &str, extras: &[&str]) -> Result<bool, String> {
        if marker.trim().is_empty() {
            return Ok(true);
        }
        let tree = pep508_rs::MarkerTree::from_str(marker).map_err(|e| format!("marker {marker:?}: {e}"))?;
        let extras: Vec<pep508_rs::ExtraName> =
            extras.iter().filter_map(|e| pep508_rs::ExtraName::from_str(e).ok()).collect();
        Ok(tree.evaluate(&self.markers(), &extras))
    }

    /// How well a wheel's tags fit here, as pip ranks them (higher is better); None: pip would
    /// not install it. Any glibc level is taken: the base image decides it, not the lock.
    pub fn wheel_rank(&self, file: &str) -> Option<u32> {
        let stem = file.strip_suffix(".whl")?;
        let parts: Vec<&str> = stem.split('-').collect();
        if parts.len() < 5 {
            return None;
        }
        let (py, abi, plat) = (parts[parts.len() - 3], parts[parts.len() - 2], parts[parts.len() - 1]);
        let (ma, mi) = self.python;
        let cp = format!("cp{ma}{mi}");
        let mut best: Option<u32> = None;
        for p in py.split('.') {
            for a in abi.split('.') {
                // Interpreter and ABI: cpXY-cpXY, then cpXW-abi3 (W <= Y), then pure Python.
                let interp = if p == cp && a == cp {
                    Some(30)
                } else if a == "abi3"
                    && p.strip_prefix(&format!("cp{ma}")).and_then(|m| m.parse::<u32>().ok()).is_some_and(|m| m <= mi)
                {
                    Some(20)
                } else if a == "none" && (p == cp || p == format!("py{ma}{mi}")) {
                    Some(15)
                } else if a == "none"
                    && (p == format!("py{ma}")
                        || p.strip_prefix(&format!("py{ma}"))
                            .and_then(|m| m.parse::<u32>().ok())
                            .is_some_and(|m| m <= mi))
                {
                    Some(10)
                } else {
                    None
                };
                let Some(interp) = interp else { continue };
                for pl in plat.split('.') {
                    let fit = if pl == "any" {
                        Some(0)
                    } else if pl.ends_with(&format!("_{}", self.machine))
                        && (pl.starts_with("manylinux") || pl.starts_with("linux_"))
                    {
                        Some(5)
                    } else {
                        None
                    };
                    if let Some(f) = fit {
                        best = best.max(Some(interp * 10 + f));
                    }
                }
            }
        }
        best
    }
}

/// One wheel to install: where it is, and what it must hash to.
#[derive(Debug, Clone)]
pub struct WheelRef {
    pub file: String,
    pub url: Option<String>,
    pub path: Option<PathBuf>,
    /// Lower-case hex.
    pub sha256: String,
    pub size: Option<u64>,
}

#[derive(Debug, Clone)]
pub struct Pick {
    pub name: String,
    pub version: String,
    pub wheel: WheelRef,
}

/// What the lock installs here: wheels, and packages with no wheel for here (built from their
/// sdist at install time).
#[derive(Debug, Clone, Default)]
pub struct Plan {
    pub picks: Vec<Pick>,
    pub unbuilt: Vec<(String, String)>,
}

/// `Flash_Attn` -> `flash-attn` (PEP 503).
pub fn normalize(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        let c = c.to_ascii_lowercase();
        if matches!(c, '-' | '_' | '.') {
            if !out.ends_with('-') {
                out.push('-');
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn hex_of(hash: &str) -> Option<String> {
    let h = hash.strip_prefix("sha256:").or_else(|| hash.strip_prefix("sha256=")).unwrap_or(hash);
    (h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit())).then(|| h.to_ascii_lowercase())
}

/// A `file://` URL's path (uv writes them for wheels found in a directory), else None.
fn file_url_path(url: &str) -> Option<PathBuf> {
    url.strip_prefix("file://").map(|p| PathBuf::from(percent_decode(p)))
}

fn file_of_url(url: &str) -> String {
    let path = url.split(['#', '?']).next().unwrap_or(url);
    let name = path.rsplit('/').next().unwrap_or(path);
    percent_decode(name)
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && let Some(v) = s.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The best-ranked wheel of `wheels` for `t`.
fn best<'a>(t: &Target, wheels: impl Iterator<Item = &'a WheelRef>) -> Option<&'a WheelRef> {
    wheels.filter_map(|w| t.wheel_rank(&w.file).map(|r| (r, w))).max_by_key(|(r, _)| *r).map(|(_, w)| w)
}

// ---------------------------------------------------------------------------------------------
// PEP 751

#[derive(serde::Deserialize)]
struct Pylock {
    #[serde(rename = "lock-version")]
    lock_version: String,
    #[serde(default)]
    packages: Vec<PylockPackage>,
}

#[derive(serde::Deserialize)]
struct PylockPackage {
    name: String,
    #[serde(default)]
    version: Option<String>,
    #[serde(default)]
    marker: Option<String>,
    #[serde(default)]
    wheels: Vec<PylockFile>,
    #[serde(default)]
    sdist: Option<toml::Value>,
    #[serde(default)]
    vcs: Option<toml::Value>,
    #[serde(default)]
    directory: Option<toml::Value>,
    #[serde(default)]
    archive: Option<toml::Value>,
}

#[derive(serde::Deserialize)]
struct PylockFile {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    size: Option<u64>,
    #[serde(default)]
    hashes: BTreeMap<String, String>,
}

fn plan_pylock(text: &str, base: &Path, t: &Target) -> Result<Plan, String> {
    let lock: Pylock = toml::from_str(text).map_err(|e| e.to_string())?;
    if !lock.lock_version.starts_with("1.") {
        return Err(format!("lock-version {:?}: cudalint reads PEP 751 version 1", lock.lock_version));
    }
    let mut plan = Plan::default();
    for p in lock.packages {
        if !t.holds(p.marker.as_deref().unwrap_or(""), &[]).map_err(|e| format!("package {}: {e}", p.name))? {
            continue;
        }
        let version = p.version.clone().unwrap_or_default();
        let mut refs = Vec::new();
        for w in &p.wheels {
            let file = w
                .name
                .clone()
                .or_else(|| w.url.as_deref().map(file_of_url))
                .or_else(|| w.path.as_deref().map(file_of_url))
                .ok_or_else(|| format!("package {}: a wheel with neither name, url nor path", p.name))?;
            let sha256 = w
                .hashes
                .get("sha256")
                .and_then(|h| hex_of(h))
                .ok_or_else(|| format!("package {}: wheel {file} has no sha256 in the lock", p.name))?;
            let local = w.path.as_ref().map(|p| base.join(p)).or_else(|| w.url.as_deref().and_then(file_url_path));
            let url = w.url.clone().filter(|_| local.is_none());
            refs.push(WheelRef { file, url, path: local, sha256, size: w.size });
        }
        match best(t, refs.iter()) {
            Some(w) => plan.picks.push(Pick { name: normalize(&p.name), version, wheel: w.clone() }),
            None if p.sdist.is_some() || p.vcs.is_some() || p.directory.is_some() || p.archive.is_some() => {
                plan.unbuilt.push((normalize(&p.name), version))
            }
            None => {
                return Err(format!(
                    "package {} {version}: none of its {} wheels installs on {} with Python {}.{}, and it has no sdist",
                    p.name,
                    refs.len(),
                    t.platform,
                    t.python.0,
                    t.python.1
                ));
            }
        }
    }
    Ok(plan)
}

// ---------------------------------------------------------------------------------------------
// uv.lock

#[derive(serde::Deserialize)]
struct UvLock {
    version: u32,
    #[serde(default)]
    package: Vec<UvPackage>,
}

#[derive(serde::Deserialize)]
struct UvPackage {
    name: String,
    #[serde(default)]
    version: Option<String>,
    #[serde(default)]
    source: BTreeMap<String, toml::Value>,
    #[serde(default)]
    dependencies: Vec<UvDep>,
    #[serde(default, rename = "optional-dependencies")]
    optional: BTreeMap<String, Vec<UvDep>>,
    #[serde(default)]
    wheels: Vec<UvFile>,
    #[serde(default)]
    sdist: Option<toml::Value>,
}

#[derive(serde::Deserialize)]
struct UvDep {
    name: String,
    #[serde(default)]
    marker: Option<String>,
    #[serde(default)]
    extra: Vec<String>,
    #[serde(default)]
    version: Option<String>,
}

#[derive(serde::Deserialize)]
struct UvFile {
    #[serde(default)]
    filename: Option<String>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    hash: Option<String>,
    #[serde(default)]
    size: Option<u64>,
}

/// The packages `uv sync --no-dev` installs for `t`: from the workspace's own packages (sources
/// `virtual`, `editable`, `directory`), along every dependency whose marker holds, with the
/// extras each edge asks for.
fn plan_uv(text: &str, base: &Path, t: &Target) -> Result<Plan, String> {
    let lock: UvLock = toml::from_str(text).map_err(|e| e.to_string())?;
    if lock.version != 1 {
        return Err(format!("version {}: cudalint reads uv.lock version 1", lock.version));
    }
    let key = |name: &str, version: Option<&str>| (normalize(name), version.unwrap_or_default().to_string());
    let by_name: BTreeMap<(String, String), &UvPackage> =
        lock.package.iter().map(|p| (key(&p.name, p.version.as_deref()), p)).collect();
    let find = |d: &UvDep| -> Result<&UvPackage, String> {
        let n = normalize(&d.name);
        let matches: Vec<&&UvPackage> = by_name
            .iter()
            .filter(|((name, v), _)| *name == n && d.version.as_deref().is_none_or(|dv| dv == v))
            .map(|(_, p)| p)
            .collect();
        match matches.as_slice() {
            [one] => Ok(one),
            [] => Err(format!("dependency {} is not in the lock", d.name)),
            _ => Err(format!("dependency {} names several locked versions and no version", d.name)),
        }
    };
    let local = |p: &UvPackage| ["virtual", "editable", "directory"].iter().any(|k| p.source.contains_key(*k));
    let mut seen: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    let mut todo: Vec<(&UvPackage, Vec<String>)> =
        lock.package.iter().filter(|p| local(p)).map(|p| (p, vec![])).collect();
    if todo.is_empty() {
        return Err("no workspace package (source virtual, editable or directory) to start from".into());
    }
    while let Some((p, extras)) = todo.pop() {
        let k = key(&p.name, p.version.as_deref());
        let had = seen.entry(k).or_default();
        let new: Vec<String> = extras.iter().filter(|e| !had.contains(e)).cloned().collect();
        let first = had.is_empty() && !had.contains(&String::new());
        if !first && new.is_empty() {
            continue;
        }
        had.push(String::new());
        had.extend(new.iter().cloned());
        let extra_refs: Vec<&str> = extras.iter().map(String::as_str).collect();
        let mut edges: Vec<&UvDep> = if first { p.dependencies.iter().collect() } else { Vec::new() };
        for e in if first { &extras } else { &new } {
            edges.extend(p.optional.get(e).into_iter().flatten());
        }
        for d in edges {
            if t.holds(d.marker.as_deref().unwrap_or(""), &extra_refs).map_err(|e| format!("{}: {e}", p.name))? {
                todo.push((find(d)?, d.extra.clone()));
            }
        }
    }
    let mut plan = Plan::default();
    for ((name, version), _) in seen {
        let p = by_name[&(name.clone(), version.clone())];
        if local(p) {
            continue;
        }
        // A wheel's place: its URL; a path, relative to a local registry directory (find-links)
        // or the lock; or the package's own `source = { path = ... }` (a wheel file).
        let src = |k: &str| p.source.get(k).and_then(|v| v.as_str());
        let dir =
            src("registry").filter(|r| !r.contains("://")).map(|r| base.join(r)).unwrap_or_else(|| base.to_path_buf());
        let mut refs = Vec::new();
        for w in &p.wheels {
            let file = w
                .filename
                .clone()
                .or_else(|| w.url.as_deref().or(w.path.as_deref()).map(file_of_url))
                .ok_or_else(|| format!("package {name} {version}: a wheel with no file name"))?;
            let local = w
                .path
                .as_ref()
                .map(|x| dir.join(x))
                .or_else(|| w.url.as_deref().and_then(file_url_path))
                .or_else(|| src("path").filter(|_| w.url.is_none()).map(|x| base.join(x)));
            let Some(sha256) = w.hash.as_deref().and_then(hex_of) else {
                return Err(format!(
                    "package {name} {version}: the lock records no sha256 for {file} (uv records none for wheels found in a local directory); cudalint reads only wheels it can verify: lock against an index"
                ));
            };
            refs.push(WheelRef {
                file,
                url: w.url.clone().filter(|_| local.is_none()),
                path: local,
                sha256,
                size: w.size,
            });
        }
        match best(t, refs.iter()) {
            Some(w) => plan.picks.push(Pick { name: name.clone(), version: version.clone(), wheel: w.clone() }),
            None if p.sdist.is_some() || !p.source.contains_key("registry") => plan.unbuilt.push((name, version)),
            None => {
                return Err(format!(
                    "package {name} {version}: none of its {} wheels installs on {} with Python {}.{}",
                    refs.len(),
                    t.platform,
                    t.python.0,
                    t.python.1
                ));
            }
        }
    }
    Ok(plan)
}

// ---------------------------------------------------------------------------------------------
// pip's --report

#[derive(serde::Deserialize)]
struct PipReport {
    #[serde(default)]
    install: Vec<PipInstall>,
}

#[derive(serde::Deserialize)]
struct PipInstall {
    download_info: PipDownload,
    metadata: PipMetadata,
}

#[derive(serde::Deserialize)]
struct PipDownload {
    url: String,
    #[serde(default)]
    archive_info: Option<PipArchive>,
}

#[derive(serde::Deserialize)]
struct PipArchive {
    #[serde(default)]
    hash: Option<String>,
    #[serde(default)]
    hashes: BTreeMap<String, String>,
}

#[derive(serde::Deserialize)]
struct PipMetadata {
    name: String,
    version: String,
}

/// pip resolved the report for its own interpreter and platform: each entry is installed as is.
fn plan_pip_report(text: &str, t: &Target) -> Result<Plan, String> {
    let r: PipReport = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let mut plan = Plan::default();
    for i in r.install {
        let name = normalize(&i.metadata.name);
        let file = file_of_url(&i.download_info.url);
        let Some(a) = &i.download_info.archive_info else {
            plan.unbuilt.push((name, i.metadata.version));
            continue;
        };
        let sha256 = a
            .hashes
            .get("sha256")
            .and_then(|h| hex_of(h))
            .or_else(|| a.hash.as_deref().and_then(hex_of))
            .ok_or_else(|| format!("package {name}: no sha256 for {file} in the report"))?;
        if !file.ends_with(".whl") {
            plan.unbuilt.push((name, i.metadata.version));
            continue;
        }
        if t.wheel_rank(&file).is_none() {
            return Err(format!(
                "package {name}: {file} does not install on {} with Python {}.{} (the report was made for another platform: give --platform and --python as pip had them)",
                t.platform, t.python.0, t.python.1
            ));
        }
        let (url, path) = match i.download_info.url.strip_prefix("file://") {
            Some(p) => (None, Some(PathBuf::from(percent_decode(p)))),
            None => (Some(i.download_info.url.clone()), None),
        };
        plan.picks.push(Pick {
            name,
            version: i.metadata.version,
            wheel: WheelRef { file, url, path, sha256, size: None },
        });
    }
    Ok(plan)
}

// ---------------------------------------------------------------------------------------------
// requirements.txt with hashes

/// One requirement line: `name==version ; marker --hash=sha256:...`.
#[derive(Debug, Clone)]
struct Requirement {
    name: String,
    version: String,
    hashes: Vec<String>,
    line: usize,
}

/// The requirements (every one pinned with `==` and carrying `--hash`, as `--require-hashes`
/// wants), the index and find-links options, for `t`.
fn read_requirements(
    text: &str,
    t: &Target,
    index: &mut Vec<String>,
    find_links: &mut Vec<String>,
) -> Result<Vec<Requirement>, String> {
    let mut out = Vec::new();
    let mut logical = String::new();
    let mut start = 0;
    for (i, raw) in text.lines().enumerate() {
        if logical.is_empty() {
            start = i + 1;
        }
        // A comment starts at a '#' at the line start or after whitespace.
        let line = match raw.find(" #").map(|at| &raw[..at]) {
            Some(l) => l,
            None if raw.trim_start().starts_with('#') => "",
            None => raw,
        };
        if let Some(head) = line.strip_suffix('\\') {
            logical.push_str(head);
            logical.push(' ');
            continue;
        }
        logical.push_str(line);
        let l = std::mem::take(&mut logical);
        let l = l.trim();
        if l.is_empty() {
            continue;
        }
        let mut words = l.split_whitespace().peekable();
        let first = *words.peek().expect("not empty");
        if first.starts_with('-') {
            let opt = |w: &str, words: &mut dyn Iterator<Item = &str>| -> Option<String> {
                w.split_once('=').map(|(_, v)| v.to_string()).or_else(|| words.next().map(str::to_string))
            };
            let w = words.next().expect("not empty");
            let key = w.split('=').next().unwrap_or(w);
            match key {
                "-i" | "--index-url" => index.insert(0, opt(w, &mut words).ok_or("--index-url without a URL")?),
                "--extra-index-url" => index.push(opt(w, &mut words).ok_or("--extra-index-url without a URL")?),
                "-f" | "--find-links" => find_links.push(opt(w, &mut words).ok_or("--find-links without a place")?),
                "--no-index" => index.push("--no-index".into()),
                "--require-hashes" | "--only-binary" | "--prefer-binary" | "--no-binary" | "--pre" => {}
                "-r" | "--requirement" | "-c" | "--constraint" | "-e" | "--editable" => {
                    return Err(format!("line {start}: {key} is not read (give one resolved file)"));
                }
                _ => return Err(format!("line {start}: option {key} is not one pip's requirement files take")),
            }
            continue;
        }
        let (spec, rest) = match l.split_once(" --hash") {
            Some((s, r)) => (s.trim(), format!("--hash{r}")),
            None => (l, String::new()),
        };
        let (req, marker) = match spec.split_once(';') {
            Some((r, m)) => (r.trim(), m.trim()),
            None => (spec, ""),
        };
        if !t.holds(marker, &[]).map_err(|e| format!("line {start}: {e}"))? {
            continue;
        }
        let req = req.split('[').next().unwrap_or(req);
        let Some((name, version)) = req.split_once("==") else {
            return Err(format!(
                "line {start}: {req:?} is not pinned with == (a lockfile pins every package; pip --require-hashes refuses it too)"
            ));
        };
        let hashes: Vec<String> = rest
            .split_whitespace()
            .filter_map(|w| w.strip_prefix("--hash=").or_else(|| w.strip_prefix("--hash:")))
            .filter_map(|h| h.strip_prefix("sha256:").and_then(hex_of))
            .collect();
        if hashes.is_empty() {
            return Err(format!(
                "line {start}: {} has no --hash=sha256:… (pip's hash-checking mode needs one on every requirement)",
                name.trim()
            ));
        }
        out.push(Requirement {
            name: normalize(name.trim()),
            version: version.trim().to_string(),
            hashes,
            line: start,
        });
    }
    Ok(out)
}

/// A file an index or find-links page lists.
#[derive(Debug, Clone)]
struct Listed {
    file: String,
    url: String,
    sha256: Option<String>,
}

/// The user info of `from` onto `to` when both are the same origin (scheme, host and port) and
/// `to` has none: an index's credentials go with its own files, as pip and uv send them, and
/// never to another host.
fn carry_credentials(to: &mut reqwest::Url, from: &reqwest::Url) {
    if to.origin() == from.origin() && to.username().is_empty() && !from.username().is_empty() {
        let _ = to.set_username(from.username());
        let _ = to.set_password(from.password());
    }
}

/// The `<a href>` links of a PEP 503 page, resolved against its URL.
fn html_links(page: &reqwest::Url, html: &str) -> Vec<Listed> {
    let mut out = Vec::new();
    let lower = html.to_ascii_lowercase();
    let mut at = 0;
    while let Some(i) = lower[at..].find("href=") {
        let s = at + i + 5;
        let quote = html[s..].chars().next().unwrap_or(' ');
        let (start, end) = if quote == '"' || quote == '\'' {
            (s + 1, html[s + 1..].find(quote).map(|e| s + 1 + e))
        } else {
            (s, html[s..].find([' ', '>']).map(|e| s + e))
        };
        let Some(end) = end else { break };
        let href = html[start..end].replace("&amp;", "&");
        at = end;
        let Ok(mut url) = page.join(&href) else { continue };
        carry_credentials(&mut url, page);
        let sha256 = url.fragment().and_then(|f| f.strip_prefix("sha256=")).and_then(hex_of);
        let mut bare = url.clone();
        bare.set_fragment(None);
        out.push(Listed { file: file_of_url(bare.as_str()), url: bare.to_string(), sha256 });
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Fetching

/// The most an index or find-links page may be: refused at the byte past it.
pub const MAX_PAGE: u64 = 64 << 20;
/// The most a wheel whose size the lock does not give may be, by default (`--max-wheel-size`):
/// above the largest CUDA wheels on PyPI (TensorRT's libraries, about 4 GB); a download past it
/// is refused at that byte. A wheel whose size the lock gives is refused past that size.
pub const MAX_WHEEL: u64 = 8 << 30;

/// A URL as messages show it: its password masked (`user:****@`).
fn shown(url: &str) -> String {
    crate::registry::http::redact_urls(url)
}

/// A wheel on disk, checked against the lock, and its length: the descriptor its bytes were
/// hashed through, which is the one analysed.
pub struct Opened {
    pub file: std::fs::File,
    pub size: u64,
    /// For messages: the cached entry, the lock's path or the download's URL (masked).
    pub shown: PathBuf,
}

/// A lock's `path`, opened as the one descriptor it is hashed and read through: a regular file
/// only (a FIFO, a device such as `/dev/zero`, a directory or a socket is refused at once).
fn open_regular(path: &Path) -> Result<std::fs::File, String> {
    crate::cache::open_regular_path(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::InvalidData => {
            format!("{}: {e}, not a wheel file: refused (a lock's path names a regular file)", path.display())
        }
        _ => format!("{}: {e}", path.display()),
    })
}

/// A netrc file's credentials: `(machine, login, password)`, `machine` None for `default`.
#[derive(Default)]
struct Netrc(Vec<(Option<String>, String, String)>);

impl Netrc {
    /// `$NETRC`, else `~/.netrc`; none there is no credentials. A netrc that is not a regular
    /// file, or is larger than 1 MiB, is an error naming it (never a hang on a FIFO).
    fn load() -> Result<Netrc, String> {
        let path = match std::env::var_os("NETRC").filter(|v| !v.is_empty()) {
            Some(p) => PathBuf::from(p),
            None => match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
                Some(h) => Path::new(&h).join(".netrc"),
                None => return Ok(Netrc::default()),
            },
        };
        let shown = || crate::escape::text(&path.display().to_string());
        let mut f = match open_regular(&path) {
            Ok(f) => f,
            Err(_) if !path.exists() => return Ok(Netrc::default()),
            Err(e) => return Err(crate::escape::text(&e)),
        };
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::Read::take(&mut f, (1 << 20) + 1), &mut text)
            .map_err(|e| format!("{}: {e}", shown()))?;
        if text.len() > 1 << 20 {
            return Err(format!("{}: larger than 1 MiB: not a netrc file", shown()));
        }
        Ok(Netrc::parse(&text))
    }

    /// The entries of a netrc (`machine HOST login L password P`, `default ...`); `macdef`
    /// bodies (up to a blank line) and `account` are passed over.
    fn parse(text: &str) -> Netrc {
        let mut out = Vec::new();
        let mut cur: Option<(Option<String>, String, String)> = None;
        let mut lines = text.lines();
        while let Some(line) = lines.next() {
            let mut words = line.split_whitespace();
            while let Some(w) = words.next() {
                match w {
                    "machine" | "default" => {
                        out.extend(cur.take());
                        let host = if w == "machine" { words.next().map(str::to_string) } else { None };
                        cur = Some((host, String::new(), String::new()));
                    }
                    "login" => {
                        if let (Some(c), Some(v)) = (cur.as_mut(), words.next()) {
                            c.1 = v.to_string();
                        }
                    }
                    "password" => {
                        if let (Some(c), Some(v)) = (cur.as_mut(), words.next()) {
                            c.2 = v.to_string();
                        }
                    }
                    "account" => {
                        words.next();
                    }
                    "macdef" => {
                        for l in lines.by_ref() {
                            if l.trim().is_empty() {
                                break;
                            }
                        }
                        break;
                    }
                    _ => {}
                }
            }
        }
        out.extend(cur);
        Netrc(out)
    }

    /// The login and password for `host`: its `machine` entry, else `default`.
    fn get(&self, host: &str) -> Option<(&str, &str)> {
        let found = self.0.iter().find(|(m, _, _)| m.as_deref().is_some_and(|m| m.eq_ignore_ascii_case(host)));
        found
            .or_else(|| self.0.iter().find(|(m, _, _)| m.is_none()))
            .filter(|(_, l, _)| !l.is_empty())
            .map(|(_, l, p)| (l.as_str(), p.as_str()))
    }
}

/// Downloads and local reads, one client and runtime for the run.
struct Fetcher {
    rt: tokio::runtime::Runtime,
    http: reqwest::Client,
    /// The registry client's bounds: `--registry-stall-timeout`, `--registry-deadline`.
    lim: crate::registry::http::Limits,
    /// The most a wheel with no size in the lock may be (`--max-wheel-size`).
    max_wheel: u64,
    /// Credentials by host from `$NETRC` (else `~/.netrc`), as pip and uv read them: for URLs
    /// that carry none.
    netrc: Netrc,
    cache: crate::cache::WheelCache,
    /// Where the lock's relative paths start, and what its local files are judged against: a
    /// file outside it (`/etc/...`) is read only as a wheel, its hash never printed.
    checkout: Option<PathBuf>,
    /// Cached wheels already opened and verified (to read their tags), by sha256: used once,
    /// instead of hashing them again.
    verified: std::sync::Mutex<BTreeMap<String, (std::fs::File, u64)>>,
    fetched: std::sync::atomic::AtomicU64,
}

/// The repository the lock is in (the directory holding `.git`), else the lock's directory.
fn checkout_of(base: &Path) -> Option<PathBuf> {
    let base = base.canonicalize().ok()?;
    Some(base.ancestors().find(|d| d.join(".git").exists()).unwrap_or(&base).to_path_buf())
}

impl Fetcher {
    fn new(opts: &ScanOptions, base: &Path) -> Result<Fetcher, String> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| format!("tokio runtime: {e}"))?;
        let mut certs = Vec::new();
        for p in &opts.registry.ca_certs {
            let data = std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()))?;
            certs.push(reqwest::Certificate::from_pem(&data).map_err(|e| format!("{}: {e}", p.display()))?);
        }
        // Proxies come from the environment (HTTPS_PROXY, NO_PROXY), as pip and uv take them.
        let http = reqwest::Client::builder()
            .tls_certs_merge(certs)
            .connect_timeout(opts.registry.connect_timeout)
            .user_agent(concat!("cudalint/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| e.to_string())?;
        let lim = crate::registry::http::Limits {
            stall: opts.registry.stall_timeout,
            deadline: std::time::Instant::now() + opts.registry.deadline,
            peer: "server",
        };
        let temporary = || crate::cache::WheelCache::temporary().map_err(|e| format!("a temporary directory: {e}"));
        let cache = match &opts.cache {
            Some(c) => match crate::cache::WheelCache::open(c.dir()) {
                Ok(w) => w,
                Err(e) => {
                    // As a layer cache that cannot be used: said, and the run goes on without it.
                    eprintln!(
                        "cudalint: wheel cache {}: {e}; wheels are fetched into a temporary directory",
                        crate::escape::text(&c.dir().join("wheels").display().to_string())
                    );
                    temporary()?
                }
            },
            None => temporary()?,
        };
        Ok(Fetcher {
            rt,
            http,
            lim,
            max_wheel: opts.max_wheel,
            netrc: Netrc::load()?,
            cache,
            checkout: checkout_of(base),
            verified: Default::default(),
            fetched: Default::default(),
        })
    }

    /// A GET of `u`: with its own user info (reqwest sends it as Basic), else with the netrc's
    /// credentials for its host, if any.
    fn get(&self, u: reqwest::Url) -> reqwest::RequestBuilder {
        let creds = if u.username().is_empty() { u.host_str().and_then(|h| self.netrc.get(h)) } else { None };
        let r = self.http.get(u);
        match creds {
            Some((login, password)) => r.basic_auth(login, Some(password)),
            None => r,
        }
    }

    /// A page of text (an index page, JSON or HTML): its final URL, its text and whether it is
    /// JSON; None where there is no such page (404, as pip takes it: nothing there, look
    /// elsewhere). At most [`MAX_PAGE`] bytes, within the stall and deadline bounds.
    fn page(&self, url: &str, accept: &str) -> Result<Option<(reqwest::Url, String, bool)>, String> {
        use crate::registry::http;
        let what = shown(url);
        let u = reqwest::Url::parse(url).map_err(|e| format!("{what}: not a URL ({e})"))?;
        let requested = u.clone();
        self.rt.block_on(async {
            let r = http::send(self.get(u).header(reqwest::header::ACCEPT, accept), self.lim, &what, 0)
                .await
                .map_err(|f| f.error.to_string())?;
            if r.status() == reqwest::StatusCode::NOT_FOUND {
                return Ok(None);
            }
            if !r.status().is_success() {
                return Err(format!("{what}: HTTP {}", r.status()));
            }
            let json = r
                .headers()
                .get(reqwest::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.contains("json"));
            // reqwest moves a URL's user info into the request's headers: put it back, so the
            // page's links on the same host are fetched with the index's credentials too.
            let mut final_url = r.url().clone();
            carry_credentials(&mut final_url, &requested);
            let body = http::read_all(r, MAX_PAGE, self.lim, &what).await.map_err(|e| e.to_string())?;
            Ok(Some((final_url, String::from_utf8_lossy(&body).into_owned(), json)))
        })
    }

    /// The wheel on disk without a download, checked: from the cache or a local path; None when
    /// it must be fetched.
    fn local(&self, p: &Pick) -> Result<Option<Opened>, String> {
        let w = &p.wheel;
        let entry = || self.cache.shown().join(format!("{}.whl", w.sha256));
        if let Some((file, size)) = self.verified.lock().expect("not poisoned").remove(&w.sha256) {
            return Ok(Some(Opened { file, size, shown: entry() }));
        }
        if let Some((file, size)) = self.cache.get(&w.sha256) {
            return Ok(Some(Opened { file, size, shown: entry() }));
        }
        if let Some(path) = &w.path {
            let mut file = open_regular(path)?;
            let got = crate::cache::sha256_of(&mut file).map_err(|e| format!("{}: {e}", path.display()))?;
            let inside = self.checkout.as_ref().is_some_and(|c| path.canonicalize().is_ok_and(|p| p.starts_with(c)));
            check(p, &got, inside)?;
            std::io::Seek::rewind(&mut file).map_err(|e| format!("{}: {e}", path.display()))?;
            return Ok(Some(Opened { file, size: got.1, shown: path.clone() }));
        }
        Ok(None)
    }

    /// Every wheel on disk, checked, in the plan's order: the ones not cached or local are
    /// downloaded `jobs` at a time, their bytes counted on `progress` as they come.
    fn wheels(&self, picks: &[Pick], jobs: usize, progress: &super::progress::Progress) -> Result<Vec<Opened>, String> {
        use futures_util::StreamExt;
        let local: Vec<Option<Opened>> = picks.iter().map(|p| self.local(p)).collect::<Result<_, _>>()?;
        let missing: Vec<&Pick> = picks.iter().zip(&local).filter(|(_, l)| l.is_none()).map(|(p, _)| p).collect();
        let fetched: Vec<Result<Opened, String>> = self.rt.block_on(
            futures_util::stream::iter(missing.into_iter().map(|p| self.download(p, progress)))
                .buffered(jobs.max(1))
                .collect(),
        );
        let mut fetched = fetched.into_iter();
        local.into_iter().map(|l| l.map_or_else(|| fetched.next().expect("one per missing wheel"), Ok)).collect()
    }

    /// Downloads one wheel into the cache, within the stall and deadline bounds and at most the
    /// lock's size (else `--max-wheel-size`), refused at the byte past it; renamed into place
    /// only once its size and sha256 match. The file written is the one analysed.
    async fn download(&self, p: &Pick, progress: &super::progress::Progress) -> Result<Opened, String> {
        use crate::registry::http;
        let w = &p.wheel;
        let url = w.url.as_deref().ok_or_else(|| format!("{} {}: {} has no URL", p.name, p.version, w.file))?;
        let what = shown(url);
        let u = reqwest::Url::parse(url).map_err(|e| format!("{what}: not a URL ({e})"))?;
        let mut tmp = self.cache.create().map_err(|e| format!("{}: {e}", self.cache.shown().display()))?;
        let (limit, whose) = match w.size {
            Some(s) => (s, "the size the lock gives"),
            None => (self.max_wheel, "--max-wheel-size; the lock gives no size"),
        };
        let r = http::send(self.get(u), self.lim, &what, 0).await.map_err(|f| f.error.to_string())?;
        if !r.status().is_success() {
            return Err(format!("{what}: HTTP {}", r.status()));
        }
        let mut body = http::Body::new(r, limit, self.lim, &what).map_err(|e| format!("{e} ({whose})"))?;
        let mut h = Sha256::new();
        loop {
            match body.chunk().await {
                Ok(Some(chunk)) => {
                    h.update(&chunk);
                    progress.add(chunk.len() as u64);
                    tmp.write_all(&chunk).map_err(|e| format!("{}: {e}", self.cache.shown().display()))?;
                }
                Ok(None) => break,
                Err(e) if body.got > limit => return Err(format!("{} ({whose})", e.into_error(&what))),
                Err(e) => return Err(e.into_error(&what).to_string()),
            }
        }
        check(p, &(hex::encode(h.finalize()), body.got), true)?;
        self.fetched.fetch_add(body.got, std::sync::atomic::Ordering::Relaxed);
        let file = self.cache.keep(tmp, &w.sha256).map_err(|e| format!("{}: {e}", self.cache.shown().display()))?;
        Ok(Opened { file, size: body.got, shown: PathBuf::from(what) })
    }

    /// Cached wheels with one of `r`'s hashes, each named by the tags in its own verified
    /// `WHEEL` file (one name per tag): nothing beside a wheel says what it is.
    fn cached(&self, r: &Requirement) -> Vec<WheelRef> {
        let mut out = Vec::new();
        for h in &r.hashes {
            let Some((file, size)) = self.cache.get(h) else { continue };
            let Ok(names) = super::wheel::tagged_names(&file, &r.name, &r.version) else { continue };
            out.extend(names.into_iter().map(|name| WheelRef {
                file: name,
                url: None,
                path: None,
                sha256: h.clone(),
                size: None,
            }));
            self.verified.lock().expect("not poisoned").insert(h.clone(), (file, size));
        }
        out
    }
}

/// Whether what was read is the wheel the lock names. A file outside the lock's repository
/// (`inside` false) is not described: its sha256 and size would tell a pull request's author
/// about a file on the machine that runs the check.
fn check(p: &Pick, (hash, size): &(String, u64), inside: bool) -> Result<(), String> {
    let w = &p.wheel;
    if !inside && (w.size.is_some_and(|s| s != *size) || *hash != w.sha256) {
        let path = w.path.as_deref().unwrap_or(Path::new(&w.file)).display().to_string();
        return Err(format!(
            "{} {}: {path} is not the wheel the lock names (its size or sha256 differs; not shown, as the file is \
             outside the lock's repository): refused (not read as a wheel)",
            p.name, p.version
        ));
    }
    if let Some(s) = w.size.filter(|s| s != size) {
        return Err(format!("{} {}: {} is {size} bytes, the lock says {s}", p.name, p.version, w.file));
    }
    if *hash != w.sha256 {
        return Err(format!(
            "{} {}: {} has sha256 {hash}, the lock says {}: refused (not read as a wheel)",
            p.name, p.version, w.file, w.sha256
        ));
    }
    Ok(())
}

/// The extension of a source distribution's file name (`.tar.gz`, `.zip`, and the older
/// archives pip still builds), None for anything else.
fn sdist_ext(file: &str) -> Option<&'static str> {
    [".tar.gz", ".zip", ".tar.bz2", ".tgz", ".tar.xz", ".tar"].into_iter().find(|e| file.ends_with(e))
}

/// The project (PEP 503 normalised) and version a wheel's or an sdist's file name says:
/// `flash_attn-2.8.3.tar.gz` -> (`flash-attn`, `2.8.3`). An sdist's name may hold dashes (older
/// ones do: `antlr4-python3-runtime-4.9.3.tar.gz`), its version none.
fn project_of(file: &str) -> Option<(String, String)> {
    if file.ends_with(".whl") {
        let mut parts = file.splitn(3, '-');
        return Some((normalize(parts.next()?), parts.next()?.to_string()));
    }
    let stem = file.strip_suffix(sdist_ext(file)?)?;
    let (name, version) = stem.rsplit_once('-')?;
    Some((normalize(name), version.to_string()))
}

/// The sha256 of a local file (a find-links directory's sdist), read through the descriptor
/// `open_regular` checked.
fn local_sha256(path: &Path) -> Result<String, String> {
    let mut f = open_regular(path)?;
    crate::cache::sha256_of(&mut f).map(|(h, _)| h).map_err(|e| format!("{}: {e}", path.display()))
}

/// For requirements without URLs: each one's wheel from the find-links places and the indexes
/// (PEP 691 JSON, else PEP 503 HTML), the best-ranked wheel whose sha256 the line lists, else
/// (no wheel installs here) an sdist whose sha256 it lists: a package built at install time.
fn resolve_requirements(
    reqs: Vec<Requirement>,
    index: &[String],
    find_links: &[String],
    base: &Path,
    t: &Target,
    f: &Fetcher,
) -> Result<Plan, String> {
    let mut listed: Vec<Listed> = Vec::new();
    for place in find_links {
        let dir = base.join(place);
        if dir.is_dir() {
            for e in std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))? {
                let p = e.map_err(|e| e.to_string())?.path();
                let file = p.file_name().unwrap_or_default().to_string_lossy().into_owned();
                listed.push(Listed { file, url: format!("file://{}", p.display()), sha256: None });
            }
        } else {
            let (u, html, _) =
                f.page(place, "text/html")?.ok_or_else(|| format!("{}: HTTP 404 Not Found", shown(place)))?;
            listed.extend(html_links(&u, &html));
        }
    }
    let no_index = index.iter().any(|i| i == "--no-index");
    let indexes: Vec<String> = if no_index {
        Vec::new()
    } else if index.is_empty() {
        vec!["https://pypi.org/simple/".to_string()]
    } else {
        index.to_vec()
    };
    let mut plan = Plan::default();
    for r in reqs {
        // A wheel cached by one of the line's hashes needs no index (a second run works offline).
        if let Some(w) = best(t, f.cached(&r).iter()) {
            plan.picks.push(Pick { name: r.name, version: r.version, wheel: w.clone() });
            continue;
        }
        let ours = |l: &Listed| project_of(&l.file).is_some_and(|(n, v)| n == r.name && v == r.version);
        let mut cands: Vec<Listed> = listed.iter().filter(|l| ours(l)).cloned().collect();
        for ix in &indexes {
            let url = format!("{}/{}/", ix.trim_end_matches('/'), r.name);
            let Some((page, body, json)) = f.page(&url, "application/vnd.pypi.simple.v1+json, text/html;q=0.1")? else {
                continue;
            };
            if json {
                let v: serde_json::Value = serde_json::from_str(&body).map_err(|e| format!("{}: {e}", shown(&url)))?;
                for file in v["files"].as_array().into_iter().flatten() {
                    let (Some(name), Some(u)) = (file["filename"].as_str(), file["url"].as_str()) else { continue };
                    let mut u = page.join(u).map_err(|e| format!("{}: {e}", shown(&url)))?;
                    carry_credentials(&mut u, &page);
                    let sha256 = file["hashes"]["sha256"].as_str().and_then(hex_of);
                    cands.push(Listed { file: name.to_string(), url: u.to_string(), sha256 });
                }
            } else {
                cands.extend(html_links(&page, &body));
            }
        }
        cands.retain(ours);
        let wheels: Vec<WheelRef> = cands
            .iter()
            .filter(|l| l.file.ends_with(".whl"))
            .filter_map(|l| {
                // The line's hashes decide; a listed hash that disagrees rules the file out.
                let sha = match &l.sha256 {
                    Some(h) if r.hashes.contains(h) => h.clone(),
                    Some(_) => return None,
                    None if r.hashes.len() == 1 => r.hashes[0].clone(),
                    None => return None,
                };
                let (url, path) = match l.url.strip_prefix("file://") {
                    Some(p) => (None, Some(PathBuf::from(p))),
                    None => (Some(l.url.clone()), None),
                };
                Some(WheelRef { file: l.file.clone(), url, path, sha256: sha, size: None })
            })
            .collect();
        if let Some(w) = best(t, wheels.iter()) {
            plan.picks.push(Pick { name: r.name, version: r.version, wheel: w.clone() });
            continue;
        }
        // No wheel installs here: pip builds the sdist, if the line's hashes name one (as the
        // other lock formats name theirs). A line whose hashes name no file pip could install is
        // a lock its index does not match, and stays an error.
        let sdists: Vec<&Listed> = cands.iter().filter(|l| sdist_ext(&l.file).is_some()).collect();
        let mut unhashed = Vec::new();
        let mut matched = false;
        for l in &sdists {
            let sha = match (&l.sha256, l.url.strip_prefix("file://")) {
                (Some(h), _) => Some(h.clone()),
                // A find-links directory's file: hashed here, as pip would before building it.
                (None, Some(p)) => Some(local_sha256(Path::new(p))?),
                (None, None) => None,
            };
            match sha {
                Some(h) => matched |= r.hashes.contains(&h),
                None => unhashed.push(l.file.clone()),
            }
        }
        if matched {
            plan.unbuilt.push((r.name, r.version));
            continue;
        }
        let unhashed = if unhashed.is_empty() {
            String::new()
        } else {
            format!(" ({} listed with no sha256: not taken)", unhashed.join(", "))
        };
        return Err(format!(
            "line {}: {}=={}: no wheel for {} with Python {}.{} and no sdist whose sha256 the line lists, in {}{unhashed}: the lock does not match its index",
            r.line,
            r.name,
            r.version,
            t.platform,
            t.python.0,
            t.python.1,
            indexes.iter().chain(find_links).map(|u| shown(u)).collect::<Vec<_>>().join(", ")
        ));
    }
    Ok(plan)
}

// ---------------------------------------------------------------------------------------------
// The image

/// Scans a lockfile as the image its packages would make.
pub fn scan(path: &Path, kind: LockKind, opts: &ScanOptions) -> Result<ImageReport, ScanError> {
    let text = std::fs::read_to_string(path).map_err(|e| ScanError::io(path, e))?;
    let base = path.parent().unwrap_or(Path::new(".")).to_path_buf();
    let base = if base.as_os_str().is_empty() { PathBuf::from(".") } else { base };
    let platform = opts.platform.as_ref().map(|p| p.to_string()).unwrap_or_else(|| "linux/amd64".to_string());
    let t = Target::new(opts.python.as_deref().unwrap_or(DEFAULT_PYTHON), &platform)
        .map_err(|e| ScanError::input(path, e))?;
    // Every message passes the one redaction, whichever library wrote the URL into it.
    let bad = |e: String| ScanError::input(path, shown(&e));
    let fetcher = Fetcher::new(opts, &base).map_err(bad)?;
    let plan = match kind {
        LockKind::Pylock => plan_pylock(&text, &base, &t),
        LockKind::UvLock => plan_uv(&text, &base, &t),
        LockKind::PipReport => plan_pip_report(&text, &t),
        LockKind::Requirements => {
            let (mut index, mut links) = (Vec::new(), Vec::new());
            read_requirements(&text, &t, &mut index, &mut links)
                .and_then(|reqs| resolve_requirements(reqs, &index, &links, &base, &t, &fetcher))
        }
    }
    .map_err(bad)?;
    let mut layers = Vec::new();
    // Wheels done of the lock's, and bytes downloaded: a bytes bar with nothing to count read
    // `0 B 0 B/s` throughout.
    let progress = super::progress::Progress::items(opts.progress, plan.picks.len() as u64, "wheels");
    // A wheel analysed before is neither fetched, hashed nor read again: its analysis comes from
    // the layer cache, filed under the sha256 the lock pins, the analyser and knowledge digest
    // (in every key), the analysis options and the Python it is installed for, and
    // authenticated by its MAC as a layer's entry is.
    let key = |p: &Pick| {
        let mut k = crate::cache::LayerKey::new(&format!("sha256:{}", p.wheel.sha256), &opts.inspect);
        k.variant.push_str(&format!("\0wheel installed for Python {}.{}", t.python.0, t.python.1));
        k
    };
    let mut analysed: Vec<Option<super::AnalyzedLayer>> =
        plan.picks.iter().map(|p| opts.cache.as_ref().and_then(|c| c.get(&key(p)))).collect();
    let todo: Vec<Pick> =
        plan.picks.iter().zip(&analysed).filter(|(_, a)| a.is_none()).map(|(p, _)| p.clone()).collect();
    progress.done((plan.picks.len() - todo.len()) as u64);
    progress.message(format!("fetching {} wheels", todo.len()));
    let files = fetcher.wheels(&todo, opts.jobs, &progress).map_err(bad)?;
    progress.message("analysing".to_string());
    // Each wheel is inflated whole (its CRCs are checked only at a member's end): `jobs` wheels
    // at a time, each with a deflate window only, so the budget's layer windows do not apply.
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut results: Vec<Option<Result<crate::layer::analyze::LayerSummary, ScanError>>> =
        (0..todo.len()).map(|_| None).collect();
    let slots: Vec<std::sync::Mutex<&mut Option<_>>> = results.iter_mut().map(std::sync::Mutex::new).collect();
    std::thread::scope(|s| {
        for _ in 0..opts.jobs.clamp(1, todo.len().max(1)) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let (Some(p), Some(file)) = (todo.get(i), files.get(i)) else { break };
                    let r = super::wheel::analyze_installed(&file.file, &file.shown, opts, t.python).map_err(|e| {
                        ScanError::input(path, shown(&format!("{} {} ({}): {e}", p.name, p.version, p.wheel.file)))
                    });
                    **slots[i].lock().expect("one writer per slot") = Some(r);
                    progress.done(1);
                }
            });
        }
    });
    drop(slots);
    let mut fresh = todo.iter().zip(&files).zip(results);
    let step = |p: &Pick| Some(format!("{}=={} ({})", p.name, p.version, p.wheel.file));
    for (p, a) in plan.picks.iter().zip(analysed.iter_mut()) {
        if a.is_some() {
            continue;
        }
        let ((_, file), r) = fresh.next().expect("one analysis per wheel not cached");
        let summary = r.expect("every wheel analysed")?;
        let layer = super::AnalyzedLayer {
            info: super::LayerInfo {
                digest: format!("sha256:{}", p.wheel.sha256),
                diff_id: None,
                size: file.size,
                compression: crate::layer::decode::Compression::None,
                verified: true,
                step: None,
                stats: summary.stats,
            },
            summary,
        };
        if let Some(c) = &opts.cache {
            // A cache that cannot be written costs the next run an analysis, nothing more.
            let _ = c.put(&key(p), &layer);
        }
        *a = Some(layer);
    }
    for (p, a) in plan.picks.iter().zip(analysed) {
        let mut layer = a.expect("every wheel analysed or cached");
        // The step is this lock's name for the wheel, never the cached one.
        layer.info.step = step(p);
        layers.push(layer);
    }
    progress.finish();
    let mut report = super::assemble(SourceKind::Lock, None, Some(path.display().to_string()), layers);
    report.image.platform = Some(t.platform.clone());
    report.stats.downloaded_bytes = fetcher.fetched.load(std::sync::atomic::Ordering::Relaxed);
    report.image.unbuilt = plan.unbuilt.iter().map(|(n, v)| format!("{n} {v}")).collect();
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t() -> Target {
        Target::new("3.11", "linux/amd64").unwrap()
    }

    #[test]
    fn wheels_rank_as_pip_ranks_them() {
        let t = t();
        let r = |f: &str| t.wheel_rank(f);
        assert!(r("torch-2.8.0-cp311-cp311-manylinux_2_28_x86_64.whl") > r("x-1-cp39-abi3-manylinux2014_x86_64.whl"));
        assert!(r("x-1-cp39-abi3-manylinux2014_x86_64.whl") > r("x-1-py3-none-any.whl"));
        assert!(r("x-1-py2.py3-none-any.whl").is_some());
        assert_eq!(r("torch-2.8.0-cp312-cp312-manylinux_2_28_x86_64.whl"), None);
        assert_eq!(r("torch-2.8.0-cp311-cp311-manylinux_2_28_aarch64.whl"), None);
        assert_eq!(r("x-1-cp311-cp311-win_amd64.whl"), None);
        assert_eq!(r("x-1-cp312-abi3-manylinux_2_28_x86_64.whl"), None);
        assert!(r("x-1-cp311-cp311-musllinux_1_2_x86_64.whl").is_none());
    }

    #[test]
    fn markers_are_evaluated_for_the_target() {
        let t = t();
        assert!(t.holds("sys_platform == 'linux' and platform_machine == 'x86_64'", &[]).unwrap());
        assert!(!t.holds("platform_machine == 'aarch64'", &[]).unwrap());
        assert!(!t.holds("python_version < '3.10'", &[]).unwrap());
        assert!(t.holds("extra == 'cuda'", &["cuda"]).unwrap());
        assert!(t.holds("nonsense ~~", &[]).is_err());
    }

    #[test]
    fn requirements_need_pins_and_hashes() {
        let t = t();
        let (mut i, mut f) = (vec![], vec![]);
        let text = "--index-url http://127.0.0.1:1/simple\n# c\nTorch==2.8.0 \\\n  --hash=sha256:aa00000000000000000000000000000000000000000000000000000000000000\nx==1 ; sys_platform == 'win32' --hash=sha256:bb\n";
        let r = read_requirements(text, &t, &mut i, &mut f).unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!((r[0].name.as_str(), r[0].version.as_str(), r[0].line), ("torch", "2.8.0", 3));
        assert_eq!(i, vec!["http://127.0.0.1:1/simple"]);
        let e = read_requirements("y==1\n", &t, &mut i, &mut f).unwrap_err();
        assert!(e.contains("no --hash"), "{e}");
        let e = read_requirements("y>=1 --hash=sha256:aa\n", &t, &mut i, &mut f).unwrap_err();
        assert!(e.contains("not pinned"), "{e}");
    }

    #[test]
    fn wheel_and_sdist_names_say_their_project_and_version() {
        let p = |f: &str| project_of(f).map(|(n, v)| format!("{n} {v}"));
        assert_eq!(p("flash_attn-2.8.3.tar.gz").as_deref(), Some("flash-attn 2.8.3"));
        assert_eq!(p("antlr4-python3-runtime-4.9.3.tar.gz").as_deref(), Some("antlr4-python3-runtime 4.9.3"));
        assert_eq!(p("Demo.Kernels-1.0.zip").as_deref(), Some("demo-kernels 1.0"));
        assert_eq!(p("flash_attn-2.8.3-cp311-cp311-linux_x86_64.whl").as_deref(), Some("flash-attn 2.8.3"));
        assert_eq!(p("flash_attn-2.8.3.exe"), None);
        assert_eq!(p("noversion.tar.gz"), None);
    }

    #[test]
    fn the_install_scheme_is_pips() {
        use super::super::wheel::installed_path;
        let py = (3, 11);
        assert_eq!(installed_path("torch/lib/x.so", None, py), "usr/local/lib/python3.11/site-packages/torch/lib/x.so");
        let d = Some("nvidia_x-1.0.data");
        assert_eq!(installed_path("nvidia_x-1.0.data/scripts/tool", d, py), "usr/local/bin/tool");
        assert_eq!(
            installed_path("nvidia_x-1.0.data/platlib/nvidia/lib/a.so", d, py),
            "usr/local/lib/python3.11/site-packages/nvidia/lib/a.so"
        );
        assert_eq!(installed_path("nvidia_x-1.0.data/data/share/a", d, py), "usr/local/share/a");
    }

    #[test]
    fn netrc_entries_give_credentials_by_host() {
        let n = Netrc::parse(
            "machine a.example login ci-bot password t0k\nmacdef init\nmachine evil login x password y\n\nmachine \
             B.example\n  login u account z password p\ndefault login anon password none\n",
        );
        assert_eq!(n.get("a.example"), Some(("ci-bot", "t0k")));
        assert_eq!(n.get("b.example"), Some(("u", "p")));
        assert_eq!(n.get("evil"), Some(("anon", "none")), "a macdef body is not an entry");
        assert_eq!(Netrc::parse("machine a login l password p").get("other"), None);
    }

    #[test]
    fn index_pages_list_their_links() {
        let page = reqwest::Url::parse("http://h/simple/torch/").unwrap();
        let h = format!(
            "<a href=\"../../files/torch-2.8.0-cp311-cp311-manylinux_2_28_x86_64.whl#sha256={}\">t</a><a href='x.tar.gz'>s</a>",
            "ab".repeat(32)
        );
        let l = html_links(&page, &h);
        assert_eq!(l.len(), 2);
        assert_eq!(l[0].url, "http://h/files/torch-2.8.0-cp311-cp311-manylinux_2_28_x86_64.whl");
        assert_eq!(l[0].sha256.as_deref(), Some("ab".repeat(32).as_str()));
        assert_eq!(l[1].file, "x.tar.gz");
    }
}
