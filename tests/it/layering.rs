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
    &["input", "schema", "registry"],
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

#[test]
fn imports_run_down_the_levels_and_never_loop() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
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
        let mut targets = crate_paths(&text);
        if module.len() == 2 {
            // `super::x` from a file directly inside a module folder names a sibling file.
            for (i, _) in text.match_indices("super::") {
                let s = ident(&text[i + 7..]);
                if !s.is_empty() {
                    targets.push(vec![top.clone(), s.to_string()]);
                }
            }
        }
        for t in targets {
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
            } else if module.len() == 2 && t.len() == 2 && t[1] != module[1] {
                inner.entry(top.clone()).or_default().entry(module[1].clone()).or_default().insert(t[1].clone());
            }
        }
    }
    unknown.retain(|m| m != "self" && m != "super");
    assert!(unknown.is_empty(), "modules missing from LEVELS in tests/it/layering.rs: {unknown:?}");
    assert!(
        upward.is_empty(),
        "imports that run up or sideways:\n{}",
        upward.into_iter().collect::<Vec<_>>().join("\n")
    );
    for (top, graph) in &inner {
        // Only files that exist are nodes (a `super::Item` names an item, not a file).
        let files: BTreeSet<String> = graph.keys().cloned().collect();
        let g: BTreeMap<String, BTreeSet<String>> = graph
            .iter()
            .map(|(k, v)| (k.clone(), v.iter().filter(|x| files.contains(*x)).cloned().collect()))
            .collect();
        if let Some(cycle) = find_loop(&g) {
            panic!("files of src/{top} import each other in a loop: {}", cycle.join(" -> "));
        }
    }
}

#[test]
fn the_checker_sees_groups_and_loops() {
    // The parser itself: a group import names each of its modules, and a loop is found.
    let p = crate_paths("use crate::{image::oci, report::{self, x}, schema};\nlet y = crate::lint::run();");
    assert_eq!(p, vec![vec!["image", "oci"], vec!["report"], vec!["schema"], vec!["lint", "run"]]);
    let g: BTreeMap<String, BTreeSet<String>> =
        [("a", "b"), ("b", "a")].iter().map(|(k, v)| (k.to_string(), BTreeSet::from([v.to_string()]))).collect();
    assert_eq!(find_loop(&g), Some(vec!["a".into(), "b".into(), "a".into()]));
}
