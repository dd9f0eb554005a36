//! The crate's module layering: every `crate::` import points to a module on a lower level, and the
//! files inside a module import each other without loops. `scripts/deps.py` prints the same graph
//! for people; this test keeps it from bending again.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Lowest first. A module may import only modules on a strictly lower line.
const LEVELS: &[&[&str]] = &[
    // Escaping of strings users, images and registries chose: a leaf every level may use.
    &["escape"],
    // Content digests (OCI): every level that reads or pushes blobs checks them with it.
    &["digest"],
    &["input", "schema", "registry", "bounded", "knowledge"],
    &["inspect"],
    &["cuda", "packages"],
    &["layer"],
    &["cache", "module"],
    &["image"],
    &["device"],
    &["lint"],
    &["report"],
    &["audit"],
    &["cli"],
];

fn level(module: &str) -> Option<usize> {
    LEVELS.iter().position(|l| l.contains(&module))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Code without `//` comments (doc comments name modules in prose).
fn code(text: &str) -> String {
    text.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
}

fn ident(s: &str) -> &str {
    let end = s.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(s.len());
    &s[..end]
}

/// Every module path named after `crate::`, as its first two segments (`["image", "oci"]`),
/// including the items of `use crate::{a, b::c}` groups.
fn crate_paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for (i, _) in code.match_indices("crate::") {
        let rest = &code[i + 7..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let mut item_start = true;
            let mut j = 0;
            let b = group.as_bytes();
            while j < b.len() && depth > 0 {
                match b[j] {
                    b'{' => depth += 1,
                    b'}' => depth -= 1,
                    b',' if depth == 1 => item_start = true,
                    c if item_start && depth == 1 && (c.is_ascii_alphabetic() || c == b'_') => {
                        item_start = false;
                        out.push(segments(&group[j..]));
                    }
                    _ => {}
                }
                j += 1;
            }
        } else {
            out.push(segments(rest));
        }
    }
    out.retain(|p| !p.is_empty());
    out
}

fn segments(s: &str) -> Vec<String> {
    let first = ident(s);
    if first.is_empty() {
        return vec![];
    }
    let mut v = vec![first.to_string()];
    if let Some(rest) = s[first.len()..].strip_prefix("::") {
        let second = ident(rest);
        if !second.is_empty() {
            v.push(second.to_string());
        }
    }
    v
}

/// A module path of a source file: `src/image/oci.rs` → `["image", "oci"]`.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel.iter().map(|c| c.to_string_lossy().into_owned()).collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

fn find_loop(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        stack: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = stack.iter().position(|s| s == n) {
            let mut cyc = stack[i..].to_vec();
            cyc.push(n.to_string());
            return Some(cyc);
        }
        if done.contains(n) {
            return None;
        }
        stack.push(n.to_string());
        for m in g.get(n).into_iter().flatten() {
            if let Some(c) = visit(m, g, stack, done) {
                return Some(c);
            }
        }
        stack.pop();
        done.insert(n.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph.keys().find_map(|k| visit(k, graph, &mut Vec::new(), &mut done))
}

/// The items a folder's `mod.rs` re-exports from its files (`pub use error::DeviceError;`,
/// `pub use plan::{plan, plan_all};`): item name → file. A `super::DeviceError` in a sibling then
/// points to `error.rs`, not to `mod.rs`.
fn reexports(mod_code: &str, top: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for stmt in mod_code.split(';') {
        let s = stmt.trim();
        let Some(rest) = s.strip_prefix("pub use ").or_else(|| s.strip_prefix("pub(crate) use ")) else {
            continue;
        };
        let rest = rest.strip_prefix("self::").unwrap_or(rest);
        let rest = rest.strip_prefix(&format!("crate::{top}::")).unwrap_or(rest);
        let file = ident(rest);
        let Some(items) = rest[file.len()..].strip_prefix("::") else { continue };
        let items = items.trim_start_matches('{').trim_end_matches('}');
        for item in items.split(',') {
            let item = item.trim();
            let name = item.rsplit(" as ").next().unwrap_or(item).trim();
            let name = ident(name.rsplit("::").next().unwrap_or(name));
            if !name.is_empty() && name != "self" {
                out.insert(name.to_string(), file.to_string());
            }
        }
    }
    out
}

/// The `use` declarations of a `mod.rs` that name one of its files (`use scan::Color;`,
/// `use cluster::{Placement, Pool};`), re-exports excluded. A folder's `mod.rs` is its hub: its
/// function bodies may dispatch to its files, but the items it defines for them must not depend
/// on a file that depends on those items.
fn mod_imports(mod_code: &str, top: &str, files: &BTreeSet<String>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for stmt in mod_code.split(';') {
        let s = stmt.trim_start();
        // Only the declaration itself (a statement may start after a block's closing brace).
        let s = s.rsplit('}').next().filter(|_| !s.starts_with("use ")).unwrap_or(s).trim_start();
        let Some(rest) = s.strip_prefix("use ") else { continue };
        let rest = rest.strip_prefix("self::").unwrap_or(rest);
        let rest = rest.strip_prefix(&format!("crate::{top}::")).unwrap_or(rest);
        let name = ident(rest);
        if files.contains(name) && rest[name.len()..].starts_with("::") {
            out.insert(name.to_string());
        }
    }
    out
}

#[test]
fn imports_run_down_the_levels_and_never_loop() {
    if let Err(e) = check(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src")) {
        panic!("{e}");
    }
}

/// The layering of the crate whose sources are in `src`, or what breaks it.
fn check(src: &Path) -> Result<(), String> {
    let src = src.to_path_buf();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    // The files of each module folder (`mod` for its mod.rs) and what its mod.rs re-exports.
    let mut folder_files: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let rel = file.strip_prefix(&src).unwrap();
        let parts: Vec<String> = rel.iter().map(|c| c.to_string_lossy().into_owned()).collect();
        if parts.len() == 2 {
            let stem = Path::new(&parts[1]).file_stem().unwrap().to_string_lossy().into_owned();
            folder_files.entry(parts[0].clone()).or_default().insert(stem);
        }
    }
    let mut reexported: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for top in folder_files.keys() {
        let m = src.join(top).join("mod.rs");
        if let Ok(text) = std::fs::read_to_string(&m) {
            reexported.insert(top.clone(), reexports(&code(&text), top));
        }
    }
    let mut upward = BTreeSet::new();
    let mut unknown = BTreeSet::new();
    let mut inner: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for file in &files {
        let module = module_of(&src, file);
        if module.len() == 1 && (module[0] == "lib" || module[0] == "main") {
            continue;
        }
        let top = &module[0];
        let Some(from) = level(top) else {
            unknown.insert(top.clone());
            continue;
        };
        let text = code(&std::fs::read_to_string(file).unwrap());
        let is_mod = file.file_name().is_some_and(|n| n == "mod.rs");
        // This file's node in its folder's graph: `mod` for the folder's mod.rs.
        let node = if is_mod { Some("mod".to_string()) } else { module.get(1).cloned().filter(|_| module.len() == 2) };
        let siblings = folder_files.get(top).cloned().unwrap_or_default();
        let reexp = reexported.get(top).cloned().unwrap_or_default();
        // An item a file names in its folder: a file, an item re-exported from a file, or one
        // that mod.rs defines itself.
        let resolve = |name: &str| -> String {
            if siblings.contains(name) && name != "mod" {
                name.to_string()
            } else {
                reexp.get(name).cloned().unwrap_or_else(|| "mod".to_string())
            }
        };
        let mut targets = crate_paths(&text);
        let mut edges = BTreeSet::new();
        if module.len() == 2 {
            // `super::x` from a file directly inside a module folder names a sibling file or an
            // item of mod.rs (itself perhaps re-exported from a sibling).
            for (i, _) in text.match_indices("super::") {
                let rest = &text[i + 7..];
                if let Some(group) = rest.strip_prefix('{') {
                    for item in group.split('}').next().unwrap_or("").split(',') {
                        let s = ident(item.trim());
                        if !s.is_empty() {
                            edges.insert(resolve(s));
                        }
                    }
                } else {
                    let s = ident(rest);
                    if !s.is_empty() {
                        edges.insert(resolve(s));
                    }
                }
            }
        }
        if is_mod {
            edges.extend(mod_imports(&text, top, &siblings));
        }
        for t in targets.drain(..) {
            if &t[0] != top {
                match level(&t[0]) {
                    Some(to) if to < from => {}
                    Some(_) => {
                        upward.insert(format!("src/{} imports crate::{}", module.join("/"), t.join("::")));
                    }
                    None => {
                        unknown.insert(t[0].clone());
                    }
                }
            } else if !is_mod && t.len() == 2 {
                edges.insert(resolve(&t[1]));
            }
        }
        if let Some(node) = node {
            edges.remove(&node);
            inner.entry(top.clone()).or_default().entry(node).or_default().extend(edges);
        }
    }
    unknown.retain(|m| m != "self" && m != "super");
    if !unknown.is_empty() {
        return Err(format!("modules missing from LEVELS in tests/it/layering.rs: {unknown:?}"));
    }
    if !upward.is_empty() {
        return Err(format!("imports that run up or sideways:\n{}", upward.into_iter().collect::<Vec<_>>().join("\n")));
    }
    for (top, graph) in &inner {
        if let Some(cycle) = find_loop(graph) {
            return Err(format!("files of src/{top} import each other in a loop: {}", cycle.join(" -> ")));
        }
    }
    Ok(())
}

#[test]
fn the_checker_sees_groups_and_loops() {
    // The parser itself: a group import names each of its modules, and a loop is found.
    let p = crate_paths("use crate::{image::oci, report::{self, x}, schema};\nlet y = crate::lint::run();");
    assert_eq!(p, vec![vec!["image", "oci"], vec!["report"], vec!["schema"], vec!["lint", "run"]]);
    let g: BTreeMap<String, BTreeSet<String>> =
        [("a", "b"), ("b", "a")].iter().map(|(k, v)| (k.to_string(), BTreeSet::from([v.to_string()]))).collect();
    assert_eq!(find_loop(&g), Some(vec!["a".into(), "b".into(), "a".into()]));
    // mod.rs: re-exports point to their file; its own `use` of a file is an edge.
    let m = "pub use error::DeviceError;\npub use plan::{plan, plan_all as all};\nuse scan::Color;\nmod scan;";
    let r = reexports(m, "device");
    assert_eq!(r.get("DeviceError").map(String::as_str), Some("error"));
    assert_eq!(r.get("all").map(String::as_str), Some("plan"));
    let files: BTreeSet<String> = ["scan", "error", "plan"].iter().map(|s| s.to_string()).collect();
    assert_eq!(mod_imports(m, "cli", &files), BTreeSet::from(["scan".to_string()]));
}

/// The checker on source trees of its own: a mod.rs that imports a file which imports mod.rs's
/// items is a loop, and so is one through a re-export; dispatching from mod.rs's bodies is not.
#[test]
fn the_checker_fails_on_mod_rs_loops() {
    let tree = |files: &[(&str, &str)]| {
        let d = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let p = d.path().join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        d
    };
    let looped = tree(&[
        ("cli/mod.rs", "pub mod scan;\nuse scan::Color;\npub struct OutputArgs { pub color: Color }\n"),
        ("cli/scan.rs", "use super::OutputArgs;\npub enum Color { Auto }\n"),
    ]);
    let e = check(looped.path()).unwrap_err();
    assert!(e.contains("files of src/cli import each other in a loop"), "{e}");
    let reexported = tree(&[
        ("device/mod.rs", "mod driver;\nmod error;\npub use error::DeviceError;\n"),
        ("device/driver.rs", "use super::DeviceError;\npub fn error_name() {}\n"),
        ("device/error.rs", "use super::driver::error_name;\npub enum DeviceError {}\n"),
    ]);
    let e = check(reexported.path()).unwrap_err();
    assert!(e.contains("driver -> error -> driver") || e.contains("error -> driver -> error"), "{e}");
    let hub = tree(&[
        ("cli/mod.rs", "pub mod scan;\npub struct OutputArgs;\npub fn main() { scan::run() }\n"),
        ("cli/scan.rs", "use super::OutputArgs;\npub fn run() {}\n"),
    ]);
    assert_eq!(check(hub.path()), Ok(()));
}
