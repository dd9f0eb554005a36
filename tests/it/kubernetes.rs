//! The Kubernetes manifests in docs/kubernetes (the sharded registry Job, with a shared cache or
//! the analysis store, and `cudalint serve` as a Deployment): each validates against the
//! Kubernetes API's OpenAPI schemas (kubernetes-validate, strict: no unknown fields), and the
//! arguments each cudalint container is given parse as cudalint's own command line.

use std::path::{Path, PathBuf};
use std::process::Command as Std;

use clap::Parser;
use serde_json::Value;

use crate::util::root;

/// kubernetes-validate, pinned in its own venv by scripts/test.sh.
fn validator() -> PathBuf {
    let p = std::env::var_os("CUDALINT_KUBERNETES_VALIDATE")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join(".tools/kubernetes-validate/bin/kubernetes-validate"));
    assert!(
        p.is_file(),
        "kubernetes-validate is not at {} (set CUDALINT_KUBERNETES_VALIDATE): scripts/test.sh installs it, or run \
         `python3 -m venv .tools/kubernetes-validate && .tools/kubernetes-validate/bin/pip install kubernetes-validate==1.37.0`",
        p.display()
    );
    p
}

fn manifests() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root().join("docs/kubernetes"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    v.sort();
    v
}

fn validate(file: &Path) -> (bool, String) {
    let o = Std::new(validator()).args(["--strict", "--no-warn"]).arg(file).output().unwrap();
    (o.status.success(), String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr))
}

/// Every container whose image is cudalint, with its args, in every document of `file`.
fn cudalint_args(file: &Path) -> Vec<Vec<String>> {
    use serde::Deserialize;
    let text = std::fs::read_to_string(file).unwrap();
    let mut out = Vec::new();
    for doc in serde_yaml_ng::Deserializer::from_str(&text) {
        let v = Value::deserialize(doc).unwrap();
        let spec = match v["kind"].as_str() {
            Some("Job" | "Deployment" | "StatefulSet" | "DaemonSet") => &v["spec"]["template"]["spec"],
            Some("CronJob") => &v["spec"]["jobTemplate"]["spec"]["template"]["spec"],
            _ => continue,
        };
        for c in spec["containers"].as_array().unwrap() {
            if c["image"].as_str().is_some_and(|i| i.contains("cudalint")) {
                out.push(c["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_string()).collect());
            }
        }
    }
    out
}

#[test]
fn manifests_validate_against_the_kubernetes_schemas_and_cudalint_accepts_their_args() {
    let files = manifests();
    let names: Vec<String> = files.iter().map(|f| f.file_name().unwrap().to_string_lossy().into_owned()).collect();
    for want in ["registry-shards-shared-cache.yaml", "registry-shards-analysis-store.yaml", "serve.yaml"] {
        assert!(names.iter().any(|n| n == want), "docs/kubernetes lacks {want}: {names:?}");
    }
    let mut containers = 0;
    for f in &files {
        let (ok, said) = validate(f);
        assert!(ok, "{}: {said}", f.display());
        for args in cudalint_args(f) {
            let argv = std::iter::once("cudalint".to_string()).chain(args.iter().cloned());
            if let Err(e) = cudalint::cli::Cli::try_parse_from(argv) {
                panic!("{}: cudalint refuses its args {args:?}: {e}", f.display());
            }
            containers += 1;
        }
    }
    assert!(containers >= 3, "{containers} cudalint containers in {names:?}");
}

/// The validation is real: a misspelt field and a wrong type in a copy are refused.
#[test]
fn the_validator_refuses_a_broken_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let good = std::fs::read_to_string(root().join("docs/kubernetes/registry-shards-shared-cache.yaml")).unwrap();
    for (from, to) in [("completionMode: Indexed", "completionMod: Indexed"), ("parallelism: 8", "parallelism: eight")]
    {
        assert!(good.contains(from));
        let bad = dir.path().join("bad.yaml");
        std::fs::write(&bad, good.replace(from, to)).unwrap();
        let (ok, said) = validate(&bad);
        assert!(!ok, "{to}: {said}");
    }
}
