//! Extension modules a package imports only on demand (CL029), judged from the package's own
//! `.py` files as the final filesystem has them: a later layer's file or whiteout wins, and a
//! package whose files cannot all be read keeps its extensions required, with a note.

use std::path::Path;

use assert_cmd::Command;

use crate::images::{Comp, Ent, Image, oci_layout, tar};
use crate::util::read_fixture;

const SITE: &str = "usr/local/lib/python3.11/site-packages";

fn at(rel: &str) -> &'static str {
    Box::leak(format!("{SITE}/{rel}").into_boxed_str())
}

/// `pkg` with an sm_90a-only extension beside one that runs everywhere: its `__init__.py`
/// imports it at module level, and `backend.py` imports it inside a function.
fn base() -> Vec<Ent> {
    vec![
        Ent::File(at("pkg/_C.abi3.so"), read_fixture("libmulti.so")),
        Ent::File(at("pkg/_fa3.cpython-311-x86_64-linux-gnu.so"), read_fixture("libsm90a.so")),
        Ent::File(at("pkg/__init__.py"), b"from . import _fa3\nfrom .backend import attention\n".to_vec()),
        Ent::File(
            at("pkg/backend.py"),
            b"def attention(q):\n    from pkg import _fa3\n    return _fa3.fwd(q)\n".to_vec(),
        ),
    ]
}

/// The image's lint report on a B200 (JSON), from its layers in order.
fn scan_b200(dir: &Path, layers: &[Vec<Ent>]) -> serde_json::Value {
    let img = Image::new(layers.iter().map(|l| (tar(l), Comp::Gzip)).collect());
    let d = dir.join("img");
    oci_layout(&d, &[&img]);
    let o = Command::cargo_bin("cudalint")
        .unwrap()
        .args(["scan", &format!("oci:{}", d.display()), "--quiet", "--format", "json", "--gpu", "B200"])
        .output()
        .unwrap();
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stderr)))
}

/// The rules that judge the extension's code on the target (others, about the image as a whole,
/// left aside).
fn rules_fired(r: &serde_json::Value) -> Vec<String> {
    let mut v: Vec<String> = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["rule"].as_str().unwrap().to_string())
        .filter(|c| ["CL001", "CL006", "CL016", "CL029"].contains(&c.as_str()))
        .collect();
    v.sort();
    v
}

#[test]
fn a_module_level_import_from_init_keeps_the_extension_required() {
    let d = tempfile::tempdir().unwrap();
    let r = scan_b200(d.path(), &[base()]);
    assert_eq!(rules_fired(&r), ["CL001"]);
}

#[test]
fn a_later_layers_init_without_the_import_makes_it_optional() {
    let d = tempfile::tempdir().unwrap();
    let later = vec![Ent::File(at("pkg/__init__.py"), b"from .backend import attention\n".to_vec())];
    let r = scan_b200(d.path(), &[base(), later]);
    assert_eq!(rules_fired(&r), ["CL029"]);
    let f = r["findings"].as_array().unwrap().iter().find(|f| f["rule"] == "CL029").unwrap();
    assert!(f["message"].as_str().unwrap().contains("pkg/backend.py:2, inside a function"), "{f}");
    assert_eq!(r["failed"], false);
    let row = r["matrix"].as_array().unwrap().iter().find(|m| m["path"].as_str().unwrap().contains("_fa3")).unwrap();
    let cell = &row["cells"][0];
    assert_eq!(cell["why"], "imported only on demand: pkg/backend.py:2, inside a function", "{cell}");
}

#[test]
fn a_whiteout_of_the_only_import_site_leaves_no_evidence() {
    let d = tempfile::tempdir().unwrap();
    let later =
        vec![Ent::File(at("pkg/__init__.py"), b"X = 1\n".to_vec()), Ent::File(at("pkg/.wh.backend.py"), Vec::new())];
    let r = scan_b200(d.path(), &[base(), later]);
    // No import names it: CL016's guess from its code alone ('a' code beside a running
    // sibling), as without any `.py` file.
    assert_eq!(rules_fired(&r), ["CL016"]);
}

#[test]
fn a_py_file_that_cannot_be_read_keeps_the_extension_required_with_a_note() {
    let d = tempfile::tempdir().unwrap();
    let mut ents = base();
    ents[2] = Ent::File(at("pkg/__init__.py"), b"from .backend import attention\n".to_vec());
    ents.push(Ent::File(at("pkg/legacy.py"), b"# caf\xe9\nimport pkg._fa3\n".to_vec()));
    let r = scan_b200(d.path(), &[ents]);
    assert_eq!(rules_fired(&r), ["CL001"]);
    let notes: Vec<&str> = r["notes"].as_array().unwrap().iter().filter_map(|n| n.as_str()).collect();
    assert!(
        notes.iter().any(|n| n.contains("pkg/legacy.py not read: not UTF-8") && n.contains("judged as imported")),
        "{notes:#?}"
    );
}
