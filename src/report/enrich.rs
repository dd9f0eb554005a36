//! `--enrich FILE`: the `cudalint:` properties and components of cudalint's CycloneDX SBOM
//! (`report/cyclonedx.rs`) added to an SBOM another tool wrote.
//!
//! Enrichment edits the input's text in place (inserting properties and components) so that
//! everything else in it stays byte for byte as the other tool wrote it; the input is read with
//! the bounded span scanner (`bounded::json_spans`).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::cyclonedx::{Item, binary_properties, file_component, items, package_properties};
use super::{Rendered, ReportError};
use crate::bounded::json_spans::{items_of, last_item, members, skip_ws, string_at};
use crate::image::ImageReport;
use crate::lint::{LintReport, Package};
use crate::packages::{PackageManager, pypi_normalize};

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

/// `--format cyclonedx --enrich`: `sbom` enriched, and a note saying how many components were
/// enriched, and how, and how many binaries were added.
pub fn render(sbom: &Sbom, r: &LintReport, inventory: &ImageReport) -> Result<Rendered, ReportError> {
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
        PackageManager::Deb | PackageManager::Conda | PackageManager::Rpm => n == p.name,
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

#[cfg(test)]
mod tests {
    use super::*;

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
