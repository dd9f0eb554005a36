//! CycloneDX 1.6 SBOM (`--format cyclonedx`) and enrichment of an SBOM another tool wrote
//! (`--enrich FILE`): every binary with device code is a `file` component carrying its CUDA
//! facts as `cudalint:` properties, nested in the component of the package that installed it,
//! which carries a summary of them (namespace documented in docs/sbom.md).
//!
//! Enrichment edits the input's text in place (inserting properties and components) so that
//! everything else in it stays byte for byte as the other tool wrote it.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{RenderConfig, Rendered, ReportError};
use crate::cuda::{CudaVersion, tables};
use crate::image::{ImageReport, SourceKind};
use crate::lint::coverage::Class;
use crate::lint::facts::{self, Binary};
use crate::lint::{LintReport, MatrixRow, Package};
use crate::packages::{PackageManager, pypi_normalize};

/// One binary with device code, as the SBOM describes it.
struct Item<'a> {
    binary: Binary,
    /// Its matrix row: only loadable binaries have one (not static archives, objects, ...).
    row: Option<&'a MatrixRow>,
    /// The package that installed it, from the inventory: every kind of binary has one where a
    /// package manager's record lists it, matrix row or not.
    package: Option<&'a Package>,
    sha256: Option<String>,
}

fn prop(name: &str, value: impl Into<String>) -> Value {
    json!({ "name": name, "value": value.into() })
}

fn join(v: &[String]) -> String {
    v.join(",")
}

/// The `cudalint:` properties of one binary, in a fixed order.
fn binary_properties(it: &Item, report: &LintReport) -> Vec<Value> {
    let f = &it.binary.facts;
    let mut p = vec![prop("cudalint:kind", f.kind.as_str())];
    if !f.layer.is_empty() {
        p.push(prop("cudalint:layer", &f.layer));
    }
    if let Some(pkg) = it.package {
        p.push(prop("cudalint:package", &pkg.purl));
    }
    p.push(prop("cudalint:modules", it.binary.modules.len().to_string()));
    p.push(prop("cudalint:sass-archs", join(&f.sass)));
    p.push(prop("cudalint:ptx-archs", join(&f.ptx)));
    if !f.ptx_isa.is_empty() {
        p.push(prop("cudalint:ptx-isa", &f.ptx_isa));
    }
    if !f.toolkit.is_empty() {
        p.push(prop("cudalint:cuda-toolkit", &f.toolkit));
    }
    if let Some(rt) = &f.cudart {
        p.push(prop("cudalint:cuda-runtime", &rt.version));
        p.push(prop("cudalint:cuda-runtime-linkage", rt.linkage.as_str()));
        if let Some((floor, _)) = tables::minor_compat_floor(rt.major) {
            p.push(prop("cudalint:min-driver", floor));
        }
    }
    if !f.ptx.is_empty()
        && let Some(c) = CudaVersion::parse(&f.toolkit)
    {
        p.push(prop("cudalint:min-driver-for-ptx", tables::driver_for(c)));
    }
    if let Some(row) = it.row {
        for c in &row.cells {
            p.push(prop(&format!("cudalint:target:{}", c.target), format!("{}: {}", c.class, c.text)));
        }
    } else {
        for t in &report.targets {
            p.push(prop(&format!("cudalint:target:{}", t.name), "n/a: not loaded at run time"));
        }
    }
    p
}

fn file_ref(path: &str) -> String {
    format!("cudalint:file:{path}")
}

fn file_component(it: &Item, report: &LintReport) -> Value {
    let mut c = json!({
        "type": "file",
        "bom-ref": file_ref(&it.binary.facts.path),
        "name": it.binary.facts.path,
        "properties": binary_properties(it, report),
    });
    if let Some(h) = &it.sha256 {
        c["hashes"] = json!([{ "alg": "SHA-256", "content": h }]);
    }
    c
}

/// A package's verdict on a target from its binaries' classes: the first of these that any of
/// them has (one binary that does not run makes the package fail there).
const PACKAGE_CLASS_ORDER: [Class; 5] =
    [Class::None, Class::Jit, Class::Native, Class::ArchGated, Class::NotApplicable];

/// The `cudalint:` properties of a package's component: how many binaries with device code it
/// installed and, where it installed some, their architectures and per target its verdict with
/// its binaries counted by class (`none: 1 none, 3 native`; a binary without a matrix row is not
/// loaded at run time: n/a).
fn package_properties(p: &Package, items: &[&Item], report: &LintReport) -> Vec<Value> {
    let union = |f: fn(&Binary) -> &Vec<String>| -> String {
        crate::cuda::sorted_archs(items.iter().flat_map(|i| f(&i.binary).iter().cloned())).join(",")
    };
    let mut v =
        vec![prop("cudalint:package-manager", p.manager.as_str()), prop("cudalint:binaries", items.len().to_string())];
    // A package listed for its run-time compiler alone has no device code to summarize.
    if items.is_empty() {
        return v;
    }
    v.push(prop("cudalint:sass-archs", union(|b| &b.facts.sass)));
    v.push(prop("cudalint:ptx-archs", union(|b| &b.facts.ptx)));
    for t in &report.targets {
        let classes: Vec<Class> = items
            .iter()
            .map(|i| {
                i.row
                    .and_then(|r| r.cells.iter().find(|c| c.target == t.name))
                    .map_or(Class::NotApplicable, |c| c.class)
            })
            .collect();
        let counts: Vec<(Class, usize)> = PACKAGE_CLASS_ORDER
            .iter()
            .map(|k| (*k, classes.iter().filter(|c| *c == k).count()))
            .filter(|(_, n)| *n > 0)
            .collect();
        let class = counts.first().map_or(Class::NotApplicable, |c| c.0);
        let text: Vec<String> = counts.iter().map(|(k, n)| format!("{n} {k}")).collect();
        v.push(prop(&format!("cudalint:target:{}", t.name), format!("{class}: {}", text.join(", "))));
    }
    v
}

/// The binaries with device code, sorted by path, with their matrix rows, packages and hashes.
fn items<'a>(report: &'a LintReport, inventory: &'a ImageReport) -> Vec<Item<'a>> {
    let hashes = disk_hashes(inventory);
    let mut v: Vec<Item> = inventory
        .files
        .iter()
        .map(|f| (f, facts::binary(f)))
        .filter(|(_, b)| !b.modules.is_empty() || !b.facts.sass.is_empty() || !b.facts.ptx.is_empty())
        .map(|(f, binary)| Item {
            row: report.matrix.iter().find(|r| r.path == binary.facts.path),
            package: f.package.as_ref(),
            sha256: hashes.get(&binary.facts.path).cloned(),
            binary,
        })
        .collect();
    v.sort_by(|a, b| a.binary.facts.path.cmp(&b.binary.facts.path));
    v
}

/// SHA-256 of each file, where its bytes can still be read: a `dir` or `file` scan reads the
/// local filesystem. Image archives and registries are read in one streaming pass that keeps no
/// file bytes, so their files get no hash. A file whose size changed since the scan gets none.
fn disk_hashes(inventory: &ImageReport) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Some(name) = &inventory.image.name else { return out };
    for f in &inventory.files {
        let disk = match inventory.image.source {
            SourceKind::Dir => std::path::Path::new(name).join(f.file.path.trim_start_matches('/')),
            SourceKind::File => std::path::PathBuf::from(name),
            _ => return out,
        };
        if let Some(h) = sha256_file(&disk, f.file.size) {
            out.insert(f.file.path.clone(), h);
        }
    }
    out
}

fn sha256_file(p: &std::path::Path, size: u64) -> Option<String> {
    let mut file = std::fs::File::open(p).ok()?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut n = 0u64;
    loop {
        let k = file.read(&mut buf).ok()?;
        if k == 0 {
            break;
        }
        n += k as u64;
        if n > size {
            return None;
        }
        h.update(&buf[..k]);
    }
    (n == size).then(|| hex::encode(h.finalize()))
}

fn image_component(report: &LintReport, inventory: &ImageReport) -> Value {
    let img = &report.image;
    let mut props = vec![prop("cudalint:source", img.source.as_str())];
    if let Some(p) = &img.platform {
        props.push(prop("cudalint:platform", p));
    }
    if let Some(d) = &img.manifest_digest {
        props.push(prop("cudalint:manifest-digest", d));
    }
    if let Some(d) = &img.config_digest {
        props.push(prop("cudalint:config-digest", d));
    }
    for (i, l) in inventory.image.layers.iter().enumerate() {
        props.push(prop(&format!("cudalint:layer:{i}"), &l.digest));
    }
    for h in &report.headlines {
        props.push(prop(&format!("cudalint:verdict:{}", h.target), format!("{}: {}", h.verdict, h.text)));
    }
    props.push(prop("cudalint:findings", report.findings.len().to_string()));
    props.push(prop("cudalint:gate", if report.failed { "fail" } else { "pass" }));
    let mut c = json!({
        "type": "container",
        "bom-ref": "cudalint:image",
        "name": img.name.clone().unwrap_or_else(|| "image".into()),
        "properties": props,
    });
    let digest = img.manifest_digest.as_ref().or(img.config_digest.as_ref());
    if let Some(d) = digest {
        c["version"] = json!(d);
        if let Some(hex) = d.strip_prefix("sha256:") {
            c["hashes"] = json!([{ "alg": "SHA-256", "content": hex }]);
        }
    }
    c
}

/// A deterministic `urn:uuid:` (UUID version 5 layout over SHA-256) from the document's content:
/// the same scan gives the same serial number.
fn serial(body: &Value) -> String {
    let h = Sha256::digest(body.to_string());
    let mut b = [0u8; 16];
    b.copy_from_slice(&h[..16]);
    b[6] = (b[6] & 0x0f) | 0x50;
    b[8] = (b[8] & 0x3f) | 0x80;
    let x = hex::encode(b);
    format!("urn:uuid:{}-{}-{}-{}-{}", &x[..8], &x[8..12], &x[12..16], &x[16..20], &x[20..])
}

fn tool() -> Value {
    json!({ "components": [{
        "type": "application",
        "name": env!("CARGO_PKG_NAME"),
        "version": env!("CARGO_PKG_VERSION"),
    }]})
}

/// An SBOM to enrich, checked (see [`check`]) when it is read so that a bad one fails before the
/// scan. `origin` names it in errors and notes.
#[derive(Debug, Clone)]
pub struct Sbom {
    text: String,
    origin: String,
    /// Its components, read once (with the offsets in `text` where edits go).
    comps: Vec<Comp>,
}

impl Sbom {
    /// Checks the SBOM whole, its components' shape included, so that what enriching it would
    /// refuse is refused now.
    pub fn new(text: String, origin: String) -> Result<Self, ReportError> {
        check(&text, &origin)?;
        let comps = components_of(text.as_bytes())?;
        Ok(Sbom { text, origin, comps })
    }
}

/// `--format cyclonedx`: the scan's own SBOM, or with `cfg.sbom` that SBOM enriched (and a note
/// saying how many components were enriched, and how, and how many binaries were added).
pub fn render(r: &LintReport, inventory: &ImageReport, cfg: &RenderConfig) -> Result<Rendered, ReportError> {
    match cfg.sbom {
        Some(sbom) => {
            let (text, n) = enrich(sbom, r, inventory)?;
            let note = format!(
                "{}: enriched {} components ({} by path and hash, {} by owning package), added {} binaries with \
                 device code ({} nested in their package's component)",
                sbom.origin,
                n.by_path + n.by_package,
                n.by_path,
                n.by_package,
                n.nested + n.added,
                n.nested,
            );
            Ok(Rendered { text, note: Some(note) })
        }
        None => Ok(bom(r, inventory).into()),
    }
}

/// The SBOM of a scan: the image as the root component, each owning package (pypi, deb, conda)
/// a `library` component with its purl, a summary of its binaries and, nested in it, those
/// binaries with device code; the binaries no package owns are top-level `file` components.
fn bom(report: &LintReport, inventory: &ImageReport) -> String {
    let items = items(report, inventory);
    // Per package: its binaries with device code, and the file components nested in it.
    let mut packages: BTreeMap<&Package, (Vec<&Item>, Vec<Value>)> = BTreeMap::new();
    let mut components = Vec::new();
    let mut top_refs: Vec<String> = Vec::new();
    for it in &items {
        let c = file_component(it, report);
        match it.package {
            Some(p) => {
                let e = packages.entry(p).or_default();
                e.0.push(it);
                e.1.push(c);
            }
            None => {
                top_refs.push(file_ref(&it.binary.facts.path));
                components.push(c);
            }
        }
    }
    // Run-time compilers (ptxas, NVRTC, ...), under the package that installed them.
    for f in inventory.files.iter().filter(|f| f.file.toolchain.is_some()) {
        let Some(found) = report.compilers.iter().find(|c| c.path == f.file.path) else { continue };
        let mut props = vec![
            prop("cudalint:compiler", found.kind.as_str()),
            prop("cudalint:compiler-version", &found.version),
            prop("cudalint:compiler-version-source", &found.source),
        ];
        // As binaries with device code carry it: the owner is said, not only implied by nesting.
        if let Some(p) = &f.package {
            props.push(prop("cudalint:package", &p.purl));
        }
        let c = json!({
            "type": "file",
            "bom-ref": file_ref(&found.path),
            "name": found.path,
            "properties": props,
        });
        match &f.package {
            Some(p) => packages.entry(p).or_default().1.push(c),
            None => {
                top_refs.push(file_ref(&found.path));
                components.push(c);
            }
        }
    }
    for (p, (owned, files)) in packages {
        top_refs.push(p.purl.clone());
        let mut c = json!({
            "type": "library",
            "bom-ref": p.purl,
            "name": p.name,
            "purl": p.purl,
            "properties": package_properties(p, &owned, report),
            "components": files,
        });
        // A dpkg `.list` without `status` names no version: left out rather than written as "".
        if !p.version.is_empty() {
            c["version"] = json!(p.version);
        }
        components.push(c);
    }
    components.sort_by(|a, b| a["bom-ref"].as_str().cmp(&b["bom-ref"].as_str()));
    top_refs.sort();
    let mut doc = json!({
        "$schema": "http://cyclonedx.org/schema/bom-1.6.schema.json",
        "bomFormat": "CycloneDX",
        "specVersion": "1.6",
        "version": 1,
        "metadata": {
            "tools": tool(),
            "component": image_component(report, inventory),
        },
        "components": components,
        "dependencies": [{ "ref": "cudalint:image", "dependsOn": top_refs }],
    });
    doc["serialNumber"] = json!(serial(&doc));
    let mut s = serde_json::to_string_pretty(&doc).expect("serializes");
    s.push('\n');
    s
}

/// What `--enrich` did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct EnrichStats {
    /// `file` components of the input that got a binary's `cudalint:` properties (same path and,
    /// where both sides know it, SHA-256).
    by_path: usize,
    /// Package components of the input (purl, or name and version) that got their package's
    /// `cudalint:` summary.
    by_package: usize,
    /// Binaries the input did not list, nested as `file` components in their package's component.
    nested: usize,
    /// Binaries the input did not list whose package it does not list either: top-level `file`
    /// components.
    added: usize,
}

/// A package URL's type, name and version, percent-decoded; the namespace (`deb/ubuntu`),
/// qualifiers (`?arch=amd64`) and subpath are left out: cudalint's own purls carry none of them,
/// and they do not change which package is meant.
fn purl_parts(purl: &str) -> Option<(String, String, String)> {
    let rest = purl.strip_prefix("pkg:")?.trim_start_matches('/');
    let rest = rest.split(['?', '#']).next().unwrap_or(rest);
    let (kind, path) = rest.split_once('/')?;
    let last = path.trim_end_matches('/').rsplit('/').next()?;
    let (name, version) = last.rsplit_once('@').unwrap_or((last, ""));
    Some((kind.to_ascii_lowercase(), percent_decode(name), percent_decode(version)))
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = b
            .get(i + 1..i + 3)
            .filter(|h| h.iter().all(u8::is_ascii_hexdigit))
            .and_then(|h| u8::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok());
        match (b[i], hex) {
            (b'%', Some(x)) => {
                out.push(x);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether a component of the input is `p`: its purl names the same type, name and version, or
/// (no purl, as `cyclonedx-py` writes for a wheel installed from a file) it is a `library` or
/// `framework` of the same name and version. Python names compare PEP 503-normalized; when `p`
/// knows no version (a dpkg `.list` without `status`), any version is it.
fn is_package(c: &Comp, p: &Package) -> bool {
    let same_name = |n: &str| match p.manager {
        PackageManager::Pypi => pypi_normalize(n) == p.name,
        PackageManager::Deb | PackageManager::Conda => n == p.name,
    };
    let same_version = |v: &str| p.version.is_empty() || v == p.version;
    if c.kind == "file" {
        return false;
    }
    match &c.purl {
        Some(purl) => {
            purl_parts(purl).is_some_and(|(k, n, v)| k == p.manager.as_str() && same_name(&n) && same_version(&v))
        }
        // Without a purl only a package's own component types are taken for one.
        None => matches!(c.kind.as_str(), "library" | "framework") && same_name(&c.name) && same_version(&c.version),
    }
}

/// Adds the `cudalint:` properties to an SBOM (CycloneDX JSON, as Syft, Trivy or `cyclonedx-py`
/// write it) of the scanned image. A binary matches a `file` component (anywhere in the component
/// tree) with the same path (with or without the leading `/`) whose SHA-256, when both sides know
/// one, is the same. The package that installed a binary (dist-info RECORD, dpkg list, conda-meta)
/// matches a component by purl, or by name and version where it has no purl: that component gets
/// the package's summary, and each of its binaries the input does not list is nested in it as a
/// `file` component. A binary neither way matches is added as a top-level `file` component.
/// Everything else in the SBOM is kept byte for byte.
fn enrich(sbom: &Sbom, report: &LintReport, inventory: &ImageReport) -> Result<(String, EnrichStats), ReportError> {
    // Checked, and its components read, by `Sbom::new`.
    let (input, comps) = (&sbom.text, &sbom.comps);
    let b = input.as_bytes();
    let root = skip_ws(b, 0);
    let top = members(b, root)?;
    let top_components = top.iter().find(|m| m.0 == "components").map(|m| (m.1, m.2));

    let items = items(report, inventory);
    let mut edits: Vec<(usize, String)> = Vec::new();
    let mut taken: BTreeSet<usize> = BTreeSet::new();
    let mut stats = EnrichStats::default();
    let mut added: Vec<String> = Vec::new();
    // Per package: the component it matched (index into `comps`), its binaries, and the file
    // components to nest in it.
    let mut owners: BTreeMap<&Package, Option<usize>> = BTreeMap::new();
    let mut owned: BTreeMap<usize, (&Package, Vec<&Item>, Vec<String>)> = BTreeMap::new();
    for it in &items {
        let owner = it.package.and_then(|p| {
            *owners.entry(p).or_insert_with(|| {
                let i = comps.iter().enumerate().position(|(i, c)| !taken.contains(&i) && is_package(c, p))?;
                taken.insert(i);
                owned.insert(i, (p, Vec::new(), Vec::new()));
                Some(i)
            })
        });
        if let Some(i) = owner {
            owned.get_mut(&i).expect("inserted with its owner").1.push(it);
        }
        let path = it.binary.facts.path.trim_start_matches('/');
        let found = comps.iter().enumerate().find(|(i, c)| {
            !taken.contains(i)
                && c.kind == "file"
                && c.name.trim_start_matches('/') == path
                && match (&c.sha256, &it.sha256) {
                    (Some(a), Some(b)) => a.eq_ignore_ascii_case(b),
                    _ => true,
                }
        });
        match (found, owner) {
            (Some((i, c)), _) => {
                taken.insert(i);
                stats.by_path += 1;
                let props: Vec<String> = binary_properties(it, report).iter().map(Value::to_string).collect();
                edits.push(add_properties(c, &props));
            }
            (None, Some(i)) => {
                stats.nested += 1;
                owned.get_mut(&i).expect("inserted with its owner").2.push(file_component(it, report).to_string());
            }
            (None, None) => {
                stats.added += 1;
                added.push(file_component(it, report).to_string());
            }
        }
    }
    for (i, (p, its, files)) in owned {
        let c = &comps[i];
        stats.by_package += 1;
        let props: Vec<String> = package_properties(p, &its, report).iter().map(Value::to_string).collect();
        let mut new_members = Vec::new();
        match c.properties {
            Some(_) => edits.push(add_properties(c, &props)),
            None => new_members.push(format!("\"properties\":[{}]", props.join(","))),
        }
        if !files.is_empty() {
            match c.components {
                Some((_, Some(last))) => edits.push((last, format!(",{}", files.join(",")))),
                Some((array, None)) => edits.push((array + 1, files.join(","))),
                None => new_members.push(format!("\"components\":[{}]", files.join(","))),
            }
        }
        // One edit for the new members, so that they are joined by commas at the same offset.
        if !new_members.is_empty() {
            edits.push((c.after_last, format!("{}{}", c.sep, new_members.join(","))));
        }
    }
    if !added.is_empty() {
        match top_components {
            Some((s, e)) => match last_item(b, s)? {
                Some((_, last)) => edits.push((last, format!(",{}", added.join(",")))),
                None => edits.push((e - 1, added.join(","))),
            },
            None => {
                let (at, sep) = match top.last() {
                    Some(&(_, _, e)) => (e, ","),
                    None => (root + 1, ""),
                };
                edits.push((at, format!("{sep}\"components\":[{}]", added.join(","))));
            }
        }
    }
    // Offsets into the input, so that no edit moves another; edits at one offset keep their order.
    edits.sort_by_key(|e| e.0);
    let mut out = String::with_capacity(input.len() + edits.iter().map(|e| e.1.len()).sum::<usize>());
    let mut at = 0;
    for (pos, text) in edits {
        out.push_str(&input[at..pos]);
        out.push_str(&text);
        at = pos;
    }
    out.push_str(&input[at..]);
    Ok((out, stats))
}

/// The edit that adds `props` (JSON texts) to a component of the input.
fn add_properties(c: &Comp, props: &[String]) -> (usize, String) {
    match c.properties {
        Some((at, true)) => (at, format!(",{}", props.join(","))),
        Some((at, false)) => (at, props.join(",")),
        None => (c.after_last, format!("{}\"properties\":[{}]", c.sep, props.join(","))),
    }
}

/// Refuses what `enrich` cannot work on: not JSON, not CycloneDX 1.4 to 1.6, already enriched.
/// Read without building the document (its syntax checked by serde, its members found by the
/// span scanner), so a large SBOM costs no more than its text.
fn check(input: &str, origin: &str) -> Result<(), ReportError> {
    let origin = || origin.to_string();
    serde_json::from_str::<serde::de::IgnoredAny>(input)
        .map_err(|source| ReportError::SbomNotJson { origin: origin(), source })?;
    let b = input.as_bytes();
    let root = skip_ws(b, 0);
    if b.get(root) != Some(&b'{') {
        return Err(ReportError::NotCycloneDx { origin: origin() });
    }
    let top = members(b, root)?;
    let text = |k: &str| top.iter().find(|m| m.0 == k).and_then(|m| string_at(b, m.1, m.2));
    if text("bomFormat").as_deref() != Some("CycloneDX") {
        return Err(ReportError::NotCycloneDx { origin: origin() });
    }
    let spec = text("specVersion").unwrap_or_default();
    if !matches!(spec.as_str(), "1.4" | "1.5" | "1.6") {
        return Err(ReportError::CycloneDxVersion { origin: origin(), spec });
    }
    if input.contains("\"cudalint:") {
        return Err(ReportError::AlreadyEnriched { origin: origin() });
    }
    Ok(())
}

/// The string at `b[s..e]`, if that value is one.
fn string_at(b: &[u8], s: usize, e: usize) -> Option<String> {
    (b.get(s) == Some(&b'"')).then(|| serde_json::from_slice(&b[s..e]).ok()).flatten()
}

/// A component of the input, with the byte offsets where properties and components go.
#[derive(Debug, Clone)]
struct Comp {
    kind: String,
    name: String,
    version: String,
    purl: Option<String>,
    sha256: Option<String>,
    /// Where a property goes in an existing `properties` array, and whether it has items.
    properties: Option<(usize, bool)>,
    /// Its `components` array: where it starts, and where its last item ends (if it has one).
    components: Option<(usize, Option<usize>)>,
    /// End of the object's last member (where a `properties` member goes), and the separator.
    after_last: usize,
    sep: &'static str,
}

/// Components are nested at most this deep (a hostile input cannot exhaust the stack, and each
/// level scans its subtree again).
const MAX_DEPTH: usize = 16;
/// The most members an object of the SBOM that is read (the document, a component, a hash) may
/// have; a CycloneDX component has a few dozen.
const MAX_MEMBERS: usize = 1024;
/// What the components read may take in memory (each costed as its fields are read).
const MAX_COMPONENTS_HELD: u64 = 96 << 20;

/// Every component of the document (its `components`, and theirs, in order).
fn components_of(b: &[u8]) -> Result<Vec<Comp>, ReportError> {
    let root = skip_ws(b, 0);
    let mut comps = Vec::new();
    let mut held = 0;
    if let Some(m) = members(b, root)?.into_iter().find(|m| m.0 == "components") {
        collect_components(b, m.1, &mut comps, 0, &mut held)?;
    }
    Ok(comps)
}

fn collect_components(
    b: &[u8],
    array: usize,
    out: &mut Vec<Comp>,
    depth: usize,
    held: &mut u64,
) -> Result<(), ReportError> {
    if depth > MAX_DEPTH {
        return Err(ReportError::SbomShape("components nested too deeply"));
    }
    if b.get(array) != Some(&b'[') {
        return Err(ReportError::SbomShape("\"components\" is not an array"));
    }
    for item in items_of(b, array)? {
        let (s, _) = item?;
        if b[s] != b'{' {
            continue;
        }
        let ms = members(b, s)?;
        let member = |k: &str| ms.iter().find(|m| m.0 == k).map(|&(_, s, e)| (s, e));
        let text = |k: &str| member(k).and_then(|(s, e)| string_at(b, s, e));
        let properties = match member("properties") {
            Some((ps, _)) => Some(match last_item(b, ps)? {
                Some((_, last)) => (last, true),
                None => (ps + 1, false),
            }),
            None => None,
        };
        let (after_last, sep) = match ms.last() {
            Some(&(_, _, e)) => (e, ","),
            None => (s + 1, ""),
        };
        let sha256 = match member("hashes") {
            Some((hs, _)) if b[hs] == b'[' => sha256_of(b, hs)?,
            _ => None,
        };
        let children = member("components").map(|m| m.0);
        let components = match children {
            Some(cs) if b[cs] == b'[' => Some((cs, last_item(b, cs)?.map(|x| x.1))),
            _ => None,
        };
        let c = Comp {
            kind: text("type").unwrap_or_default(),
            name: text("name").unwrap_or_default(),
            version: text("version").unwrap_or_default(),
            purl: text("purl"),
            sha256,
            properties,
            components,
            after_last,
            sep,
        };
        // Its strings' allocations, and (before the vector doubles) the vector itself.
        let heap = |t: &str| if t.is_empty() { 0 } else { (t.len() as u64).next_multiple_of(16) + 16 };
        *held += [&c.kind, &c.name, &c.version].iter().map(|t| heap(t)).sum::<u64>()
            + c.purl.as_deref().map_or(0, heap)
            + c.sha256.as_deref().map_or(0, heap);
        let slots = if out.len() == out.capacity() { (out.capacity() * 2).max(4) } else { out.capacity() };
        if *held + (slots * std::mem::size_of::<Comp>()) as u64 > MAX_COMPONENTS_HELD {
            return Err(ReportError::SbomShape("more components than cudalint holds in memory (96 MiB of them)"));
        }
        out.push(c);
        if let Some(cs) = children {
            collect_components(b, cs, out, depth + 1, held)?;
        }
    }
    Ok(())
}

/// The `content` of the first SHA-256 entry of the `hashes` array at `i`.
fn sha256_of(b: &[u8], i: usize) -> Result<Option<String>, ReportError> {
    for item in items_of(b, i)? {
        let (s, _) = item?;
        if b[s] != b'{' {
            continue;
        }
        let ms = members(b, s)?;
        let text = |k: &str| ms.iter().find(|m| m.0 == k).and_then(|&(_, s, e)| string_at(b, s, e));
        if text("alg").as_deref() == Some("SHA-256") {
            return Ok(text("content"));
        }
    }
    Ok(None)
}

// A span scanner over text serde_json has already accepted: it finds where values start and end
// so the input can be edited without re-serializing it.

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r') {
        i += 1;
    }
    i
}

const TRUNCATED: ReportError = ReportError::SbomShape("truncated JSON");

/// End (exclusive) of the value starting at `i`.
fn value_end(b: &[u8], i: usize) -> Result<usize, ReportError> {
    let mut depth = 0usize;
    let mut j = i;
    loop {
        // Not `ok_or(TRUNCATED)?`: that builds and drops an error at every byte.
        let Some(&c) = b.get(j) else { return Err(TRUNCATED) };
        match c {
            b'"' => {
                // To the closing quote, a backslash's escaped byte skipped (memchr: strings are
                // most of an SBOM).
                j += 1;
                loop {
                    let Some(k) = b.get(j..).and_then(|rest| memchr::memchr2(b'"', b'\\', rest)) else {
                        return Err(TRUNCATED);
                    };
                    j += k;
                    if b[j] == b'"' {
                        break;
                    }
                    j += 2;
                }
                j += 1;
            }
            b'{' | b'[' => {
                depth += 1;
                j += 1;
            }
            b'}' | b']' => {
                depth = depth.checked_sub(1).ok_or(ReportError::SbomShape("unbalanced JSON"))?;
                j += 1;
            }
            _ if depth == 0 => {
                // A number or literal at the top of this value.
                while j < b.len() && !matches!(b[j], b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r') {
                    j += 1;
                }
                return Ok(j);
            }
            _ => j += 1,
        }
        if depth == 0 {
            return Ok(j);
        }
    }
}

/// Members of the object at `i` (`{`): key, value start, value end. A key given twice is
/// refused: readers of the SBOM disagree on which one counts (most take the last, an edit of
/// the first would be lost).
fn members(b: &[u8], i: usize) -> Result<Vec<(String, usize, usize)>, ReportError> {
    if b.get(i) != Some(&b'{') {
        return Err(ReportError::SbomShape("expected a JSON object"));
    }
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut j = skip_ws(b, i + 1);
    if b.get(j) == Some(&b'}') {
        return Ok(out);
    }
    loop {
        let ke = value_end(b, j)?;
        let key: String = serde_json::from_slice(&b[j..ke]).map_err(ReportError::SbomJson)?;
        j = skip_ws(b, ke);
        j = skip_ws(b, j + 1); // ':'
        let ve = value_end(b, j)?;
        if !seen.insert(key.clone()) {
            return Err(ReportError::SbomShape(
                "a key given twice in one object of the SBOM (its readers disagree on which counts)",
            ));
        }
        if out.len() == MAX_MEMBERS {
            return Err(ReportError::SbomShape("an object of the SBOM with more than 1024 members"));
        }
        out.push((key, j, ve));
        j = skip_ws(b, ve);
        match b.get(j) {
            Some(b',') => j = skip_ws(b, j + 1),
            Some(b'}') => return Ok(out),
            _ => return Err(ReportError::SbomShape("malformed JSON object")),
        }
    }
}

/// Items of the array at `i` (`[`), one at a time (start, end): an array of millions of items
/// costs nothing to walk.
fn items_of(b: &[u8], i: usize) -> Result<Items<'_>, ReportError> {
    if b.get(i) != Some(&b'[') {
        return Err(ReportError::SbomShape("expected a JSON array"));
    }
    let j = skip_ws(b, i + 1);
    Ok(Items { b, j, done: b.get(j) == Some(&b']') })
}

/// The last item of the array at `i`.
fn last_item(b: &[u8], i: usize) -> Result<Option<(usize, usize)>, ReportError> {
    let mut last = None;
    for item in items_of(b, i)? {
        last = Some(item?);
    }
    Ok(last)
}

struct Items<'a> {
    b: &'a [u8],
    j: usize,
    done: bool,
}

impl Iterator for Items<'_> {
    type Item = Result<(usize, usize), ReportError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let start = self.j;
        let e = match value_end(self.b, start) {
            Ok(e) => e,
            Err(err) => {
                self.done = true;
                return Some(Err(err));
            }
        };
        self.j = skip_ws(self.b, e);
        match self.b.get(self.j) {
            Some(b',') => self.j = skip_ws(self.b, self.j + 1),
            Some(b']') => self.done = true,
            _ => {
                self.done = true;
                return Some(Err(ReportError::SbomShape("malformed JSON array")));
            }
        }
        Some(Ok((start, e)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_of_nested_values() {
        let s = br#" { "a" : [1, {"b": "x\"]"}, []] , "c": -2.5e3, "d": {} } "#;
        let root = skip_ws(s, 0);
        let m = members(s, root).unwrap();
        let keys: Vec<&str> = m.iter().map(|x| x.0.as_str()).collect();
        assert_eq!(keys, ["a", "c", "d"]);
        assert_eq!(&s[m[1].1..m[1].2], b"-2.5e3");
        let items: Vec<(usize, usize)> = items_of(s, m[0].1).unwrap().map(Result::unwrap).collect();
        assert_eq!(items.len(), 3);
        assert_eq!(&s[items[1].0..items[1].1], br#"{"b": "x\"]"}"#);
        assert!(members(s, m[2].1).unwrap().is_empty());
    }

    #[test]
    fn purls_compare_by_type_name_and_version() {
        let parts = |s: &str| purl_parts(s).unwrap();
        assert_eq!(parts("pkg:pypi/torch@2.9.0%2Bcu128"), ("pypi".into(), "torch".into(), "2.9.0+cu128".into()));
        assert_eq!(
            parts("pkg:deb/ubuntu/libcudnn9-cuda-12@9.1.0.70-1?arch=amd64&distro=ubuntu-22.04"),
            ("deb".into(), "libcudnn9-cuda-12".into(), "9.1.0.70-1".into())
        );
        assert_eq!(
            parts("pkg:PyPI/nvidia_nvjpeg_cu12#sub/x.so"),
            ("pypi".into(), "nvidia_nvjpeg_cu12".into(), "".into())
        );
        assert_eq!(purl_parts("cpe:2.3:a:x"), None);
        let comp = |kind: &str, name: &str, version: &str, purl: Option<&str>| Comp {
            kind: kind.into(),
            name: name.into(),
            version: version.into(),
            purl: purl.map(String::from),
            sha256: None,
            properties: None,
            components: None,
            after_last: 0,
            sep: "",
        };
        let p = Package::new(PackageManager::Pypi, "nvidia_nvjpeg_cu12", "12.4.0.76");
        assert!(is_package(&comp("library", "x", "", Some("pkg:pypi/Nvidia.NvJPEG-cu12@12.4.0.76")), &p));
        assert!(!is_package(&comp("library", "x", "", Some("pkg:pypi/nvidia-nvjpeg-cu12@12.4.0.77")), &p));
        assert!(!is_package(&comp("library", "x", "", Some("pkg:deb/nvidia-nvjpeg-cu12@12.4.0.76")), &p));
        // No purl: name and version, for a package's own component types only.
        assert!(is_package(&comp("library", "nvidia-nvjpeg-cu12", "12.4.0.76", None), &p));
        assert!(!is_package(&comp("library", "nvidia-nvjpeg-cu12", "", None), &p));
        assert!(!is_package(&comp("file", "nvidia-nvjpeg-cu12", "12.4.0.76", None), &p));
        assert!(!is_package(&comp("container", "nvidia-nvjpeg-cu12", "12.4.0.76", None), &p));
        // A deb from a `.list` without `status` knows no version: any version is it.
        let d = Package::new(PackageManager::Deb, "libcudnn9-cuda-12", "");
        assert!(is_package(&comp("library", "x", "", Some("pkg:deb/debian/libcudnn9-cuda-12@9.1.0.70-1")), &d));
    }

    #[test]
    fn keys_given_twice_are_refused_wherever_an_edit_could_be_lost() {
        let head = r#""bomFormat":"CycloneDX","specVersion":"1.5""#;
        for dup in [
            format!(r#"{{{head},"components":[{{"type":"file","name":"/lib/a.so"}}],"components":[]}}"#),
            format!(r#"{{{head},"components":[{{"type":"file","name":"a","properties":[],"properties":[]}}]}}"#),
            format!(
                r#"{{{head},"components":[{{"type":"library","name":"p","components":[{{"name":"x","name":"y"}}]}}]}}"#
            ),
            format!(r#"{{{head},"specVersion":"1.6"}}"#),
        ] {
            let e = Sbom::new(dup.clone(), "s.json".into()).unwrap_err().to_string();
            assert!(e.contains("given twice"), "{dup}: {e}");
        }
        assert!(Sbom::new(format!(r#"{{{head},"components":[]}}"#), "s.json".into()).is_ok());
    }

    #[test]
    fn components_are_read_within_memory_and_nesting_bounds() {
        let head = r#""bomFormat":"CycloneDX","specVersion":"1.5""#;
        // Millions of empty components: more than is held, refused while reading.
        let many = format!(r#"{{{head},"components":[{}{{}}]}}"#, "{},".repeat(1_500_000));
        let e = Sbom::new(many, "s.json".into()).unwrap_err().to_string();
        assert!(e.contains("more components than cudalint holds"), "{e}");
        // Nesting: refused past the bound, read up to it.
        let nest = |n: usize| {
            format!(r#"{{{head},"components":{}{}}}"#, r#"[{"name":"c","components":"#.repeat(n) + "[]", "}]".repeat(n))
        };
        assert!(Sbom::new(nest(MAX_DEPTH), "s.json".into()).is_ok());
        let e = Sbom::new(nest(MAX_DEPTH + 1), "s.json".into()).unwrap_err().to_string();
        assert!(e.contains("nested too deeply"), "{e}");
        // The first SHA-256 among a component's hashes, as before, read without building them.
        let one = format!(
            r#"{{{head},"components":[{{"type":"file","name":"a","hashes":[{{"alg":"MD5","content":"0"}},{{"alg":"SHA-256","content":"ab"}},{{"alg":"SHA-256","content":"cd"}}]}}]}}"#
        );
        let comps = components_of(one.as_bytes()).unwrap();
        assert_eq!(comps[0].sha256.as_deref(), Some("ab"));
    }
}
