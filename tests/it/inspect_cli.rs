//! The `inspect` command as users run it.

use assert_cmd::Command;

use crate::util::{fixture, root};

fn cudalint() -> Command {
    Command::cargo_bin("cudalint").unwrap()
}

#[test]
fn json_document_is_versioned_and_lists_files_in_order() {
    let out = cudalint().args(["inspect", "--format", "json"]).arg(root().join("fixtures/bin")).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["schema"], "cudalint.inspect/v1");
    let paths: Vec<&str> = v["files"].as_array().unwrap().iter().map(|f| f["path"].as_str().unwrap()).collect();
    let mut sorted = paths.clone();
    sorted.sort();
    assert_eq!(paths, sorted);
    assert!(paths.iter().any(|p| p.ends_with("libhidden.so")));
    // Listing files only; non-CUDA ELF files are left out unless --all.
    assert!(!paths.iter().any(|p| p.ends_with("libplain.so")));
}

#[test]
fn text_listing_shows_hidden_containers_and_stubs() {
    let out = cudalint().arg("inspect").arg(fixture("libhidden.so")).arg(fixture("libmulti.so")).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("hidden container @0x"), "{text}");
    assert!(text.contains("in .cask_resource"), "{text}");
    assert!(text.contains("kernel-less device-link stub"), "{text}");
    assert!(text.contains("cudart 13.5 (static, from machine-code)"), "{text}");
}

#[test]
fn missing_file_is_an_error_exit_2() {
    let out = cudalint().args(["inspect", "/nonexistent/libx.so"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stdout).contains("/nonexistent/libx.so: error:"));
}
