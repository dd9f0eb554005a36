//! `dir:` scans name the package of each binary from the package managers' records on disk, as
//! image scans do: a venv with NVIDIA's own wheel installed by pip, and a dpkg database.

use std::path::Path;
use std::process::Command as Std;

use assert_cmd::Command;
use serde_json::Value;

use crate::util::{read_fixture, run};

/// The scan's inventory (`--format inventory`: the files as scanned, with their packages).
pub fn inventory(root: &Path) -> Value {
    let out = Command::cargo_bin("cudalint")
        .unwrap()
        .args(["scan", &format!("dir:{}", root.display()), "--quiet", "--format", "inventory"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

pub fn file<'a>(inv: &'a Value, suffix: &str) -> &'a Value {
    inv["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"].as_str().unwrap().ends_with(suffix))
        .unwrap_or_else(|| panic!("no file ending in {suffix}: {:#}", inv["files"]))
}

#[test]
fn a_venv_names_the_wheel_that_installed_a_library() {
    let whl = crate::wheels::wheel();
    let dir = tempfile::tempdir().unwrap();
    let venv = dir.path().join("venv");
    run(Std::new("python3").args(["-m", "venv"]).arg(&venv));
    run(Std::new(venv.join("bin/pip"))
        .args(["install", "--quiet", "--disable-pip-version-check", "--no-deps", "--no-index"])
        .arg(&whl));
    let inv = inventory(&venv);
    let lib = file(&inv, "/site-packages/nvidia/nvjpeg/lib/libnvjpeg.so.12");
    assert_eq!(lib["package"]["name"], "nvidia-nvjpeg-cu12", "{lib:#}");
    assert_eq!(lib["package"]["manager"], "pypi");
    assert_eq!(lib["package"]["purl"], "pkg:pypi/nvidia-nvjpeg-cu12@12.4.0.76");
    assert!(
        inv["cuda_packages"].as_array().unwrap().iter().any(|p| p["name"] == "nvidia-nvjpeg-cu12"),
        "{:#}",
        inv["cuda_packages"]
    );
}

#[test]
fn a_dpkg_root_names_the_deb_that_installed_a_library() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let lib = "/usr/local/cuda-12.9/targets/x86_64-linux/lib/libcudart.so.12.9.79";
    let put = |path: &str, bytes: &[u8]| {
        let p = root.join(path.trim_start_matches('/'));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes).unwrap();
    };
    put(lib, &read_fixture("libcudart.so.12.9.79"));
    put(
        "/var/lib/dpkg/status",
        b"Package: cuda-cudart-12-9\nStatus: install ok installed\nArchitecture: amd64\nVersion: 12.9.79-1\n\n",
    );
    put(
        "/var/lib/dpkg/info/cuda-cudart-12-9:amd64.list",
        format!("/.\n/usr\n/usr/local/cuda-12.9/targets/x86_64-linux/lib\n{lib}\n").as_bytes(),
    );
    let inv = inventory(root);
    let f = file(&inv, "/libcudart.so.12.9.79");
    assert_eq!(f["path"], lib);
    assert_eq!(f["package"]["name"], "cuda-cudart-12-9", "{f:#}");
    assert_eq!(f["package"]["manager"], "deb");
    assert_eq!(f["package"]["version"], "12.9.79-1");
    assert_eq!(f["package"]["purl"], "pkg:deb/cuda-cudart-12-9@12.9.79-1");
}

/// A file at a package record's path that is too large to be one is still inspected: named
/// `RECORD` or not, what it holds may be loaded by its path, so its device code is judged (here an
/// sm_90a-only library, which fails on an L4 naming that path).
#[test]
fn an_oversized_record_is_inspected_not_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let info = dir.path().join("usr/lib/python3/site-packages/hidden-1.0.dist-info");
    std::fs::create_dir_all(&info).unwrap();
    let mut bytes = read_fixture("libsm90a.so");
    bytes.resize(33 << 20, 0);
    std::fs::write(info.join("RECORD"), &bytes).unwrap();
    let out = Command::cargo_bin("cudalint")
        .unwrap()
        .args(["scan", &format!("dir:{}", dir.path().display()), "--quiet", "--gpu", "L4", "--format", "json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let path = "/usr/lib/python3/site-packages/hidden-1.0.dist-info/RECORD";
    assert!(
        r["findings"].as_array().unwrap().iter().any(|f| f["rule"] == "CL001" && f["path"] == path),
        "{:#}",
        r["findings"]
    );
}
