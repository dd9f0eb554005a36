//! CycloneDX 1.6 SBOM (`--format cyclonedx`): every binary with device code is a `file` component
//! carrying its CUDA facts as `cudalint:` properties, nested in the component of the package that
//! installed it, which carries a summary of them (namespace documented in docs/sbom.md).
//! `--enrich FILE` adds the same components and properties to an SBOM another tool wrote
//! (`report/enrich.rs`).

use std::collections::BTreeMap;
use std::io::Read;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::cuda::{CudaVersion, tables};
use crate::image::{ImageReport, SourceKind};
use crate::lint::coverage::Class;
use crate::lint::facts::{self, Binary};
use crate::lint::{LintReport, MatrixRow, Package};

/// One binary with device code, as the SBOM describes it.
pub(super) struct Item<'a> {
    pub(super) binary: Binary,
    /// Its matrix row: only loadable binaries have one (not static archives, objects, ...).
    pub(super) row: Option<&'a MatrixRow>,
    /// The package that installed it, from the inventory: every kind of binary has one where a
    /// package manager's record lists it, matrix row or not.
    pub(super) package: Option<&'a Package>,
    pub(super) sha256: Option<String>,
}

fn prop(name: &str, value: impl Into<String>) -> Value {
    json!({ "name": name, "value": value.into() })
}

fn join(v: &[String]) -> String {
    v.join(",")
}

/// The `cudalint:` properties of one binary, in a fixed order.
pub(super) fn binary_properties(it: &Item, report: &LintReport) -> Vec<Value> {
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

pub(super) fn file_component(it: &Item, report: &LintReport) -> Value {
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
pub(super) fn package_properties(p: &Package, items: &[&Item], report: &LintReport) -> Vec<Value> {
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
pub(super) fn items<'a>(report: &'a LintReport, inventory: &'a ImageReport) -> Vec<Item<'a>> {
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

/// `--format cyclonedx` without `--enrich`: the SBOM of a scan, the image as the root component, each owning package (pypi, deb, conda)
/// a `library` component with its purl, a summary of its binaries and, nested in it, those
/// binaries with device code; the binaries no package owns are top-level `file` components.
pub fn render(report: &LintReport, inventory: &ImageReport) -> String {
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
