//! CycloneDX: `--format cyclonedx` and `--enrich` of a Syft-shaped SBOM, both validated against the
//! official CycloneDX 1.6 JSON schema (tests/schemas/cyclonedx, with the SPDX and JSF schemas it
//! references); enrichment keeps the input byte for byte; a rootfs scan hashes its files.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::util::{fixture, root};

fn schema_file(name: &str) -> Value {
    let p = root().join("tests/schemas/cyclonedx").join(name);
    serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap()
}

fn validate(doc: &Value) -> Vec<String> {
    let registry = jsonschema::Registry::new()
        .add("http://cyclonedx.org/schema/spdx.schema.json", schema_file("spdx.schema.json"))
        .unwrap()
        .add("http://cyclonedx.org/schema/jsf-0.82.schema.json", schema_file("jsf-0.82.schema.json"))
        .unwrap()
        .prepare()
        .unwrap();
    let validator = jsonschema::options()
        .with_registry(&registry)
        .should_validate_formats(true)
        .build(&schema_file("bom-1.6.schema.json"))
        .unwrap();
    validator.iter_errors(doc).map(|e| format!("{e} at {}", e.instance_path())).collect()
}

fn demo() -> PathBuf {
    root().join("fixtures/demo/demo-image.tar")
}

/// Runs `cudalint scan IMAGE --gpu H100,L4 ARGS --format json -o lint.json`: exit code, stderr,
/// the lint report.
fn scan(image: &str, args: &[&str], dir: &Path) -> (i32, String, Value) {
    let lint = dir.join("lint.json");
    let out = Command::cargo_bin("cudalint")
        .unwrap()
        .args(["scan", image, "--gpu", "H100,L4", "--quiet"])
        .args(args)
        .args(["--format", "json", "--output"])
        .arg(&lint)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let report = std::fs::read_to_string(&lint).map(|t| serde_json::from_str(&t).unwrap()).unwrap_or(Value::Null);
    (out.status.code().unwrap(), stderr, report)
}

fn props(c: &Value) -> Vec<(String, String)> {
    c["properties"]
        .as_array()
        .map(|a| a.iter().map(|p| (p["name"].as_str().unwrap().into(), p["value"].as_str().unwrap().into())).collect())
        .unwrap_or_default()
}

fn prop(c: &Value, name: &str) -> Option<String> {
    props(c).into_iter().find(|p| p.0 == name).map(|p| p.1)
}

/// Every component, nested ones included.
fn all_components(v: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    for c in v["components"].as_array().into_iter().flatten() {
        out.push(c);
        out.extend(all_components(c));
    }
    out
}

/// Each matrix row's binary is a file component whose per-target properties are the report's
/// verdict classes.
fn assert_matrix_in(bom: &Value, lint: &Value) {
    let comps = all_components(bom);
    let rows = lint["matrix"].as_array().unwrap();
    assert!(!rows.is_empty());
    for row in rows {
        let path = row["path"].as_str().unwrap();
        let c = comps
            .iter()
            .find(|c| {
                c["type"] == "file"
                    && c["name"].as_str().unwrap().trim_start_matches('/') == path.trim_start_matches('/')
            })
            .unwrap_or_else(|| panic!("no component for {path}"));
        for cell in row["cells"].as_array().unwrap() {
            let v = prop(c, &format!("cudalint:target:{}", cell["target"].as_str().unwrap())).unwrap();
            assert_eq!(v, format!("{}: {}", cell["class"].as_str().unwrap(), cell["text"].as_str().unwrap()));
        }
        assert_eq!(prop(c, "cudalint:modules").unwrap(), row["modules"].to_string());
        assert!(prop(c, "cudalint:sass-archs").is_some() && prop(c, "cudalint:ptx-isa").is_some());
    }
}

#[test]
fn bom_of_the_demo_image_is_valid_cyclonedx_1_6() {
    let dir = tempfile::tempdir().unwrap();
    let bom_path = dir.path().join("bom.cdx.json");
    let bom_arg = bom_path.to_str().unwrap();
    let (code, stderr, lint) =
        scan(&demo().display().to_string(), &["--format", "cyclonedx", "--output", bom_arg], dir.path());
    assert_eq!(code, 1, "{stderr}");
    let text = std::fs::read_to_string(&bom_path).unwrap();
    let bom: Value = serde_json::from_str(&text).unwrap();
    let errors = validate(&bom);
    assert!(errors.is_empty(), "{errors:#?}");
    assert_eq!(bom["specVersion"], "1.6");
    assert_matrix_in(&bom, &lint);
    // The image is the root component, with its digests.
    let image = &bom["metadata"]["component"];
    assert_eq!(image["type"], "container");
    // A docker-archive has a config digest and no manifest digest.
    let config = lint["image"]["config_digest"].as_str().unwrap();
    assert_eq!(prop(image, "cudalint:config-digest").as_deref(), Some(config));
    let digest = lint["image"]["manifest_digest"].as_str().unwrap_or(config);
    assert_eq!(image["version"].as_str(), Some(digest));
    assert_eq!(image["hashes"][0]["content"].as_str().unwrap(), digest.trim_start_matches("sha256:"));
    assert_eq!(prop(image, "cudalint:gate").as_deref(), Some("fail"));
    // Deterministic: a second run gives the same bytes.
    let again = dir.path().join("again.cdx.json");
    scan(&demo().display().to_string(), &["--format", "cyclonedx", "--output", again.to_str().unwrap()], dir.path());
    assert_eq!(std::fs::read_to_string(again).unwrap(), text);
    // The schema check can fail.
    let mut bad = bom.clone();
    bad["components"][0]["type"] = "binary-blob".into();
    assert!(!validate(&bad).is_empty());
}

fn sha256_hex(p: &Path) -> String {
    hex::encode(Sha256::digest(std::fs::read(p).unwrap()))
}

#[test]
fn a_rootfs_scan_hashes_each_binary() {
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("rootfs/usr/lib");
    std::fs::create_dir_all(&lib).unwrap();
    for f in ["libsm90a.so", "libmulti.so"] {
        std::fs::copy(fixture(f), lib.join(f)).unwrap();
    }
    let image = format!("dir:{}", dir.path().join("rootfs").display());
    let bom_path = dir.path().join("bom.json");
    let (code, stderr, lint) =
        scan(&image, &["--format", "cyclonedx", "--output", bom_path.to_str().unwrap()], dir.path());
    assert!(matches!(code, 0 | 1), "{stderr}");
    let bom: Value = serde_json::from_str(&std::fs::read_to_string(&bom_path).unwrap()).unwrap();
    assert!(validate(&bom).is_empty(), "{:#?}", validate(&bom));
    assert_matrix_in(&bom, &lint);
    for f in ["libsm90a.so", "libmulti.so"] {
        let c = all_components(&bom).into_iter().find(|c| c["name"] == format!("/usr/lib/{f}")).unwrap();
        assert_eq!(c["hashes"][0]["alg"], "SHA-256");
        assert_eq!(c["hashes"][0]["content"].as_str().unwrap(), sha256_hex(&lib.join(f)));
    }

    // Enrichment matches by path and hash: a component whose SHA-256 differs is another file,
    // so the binary is added beside it.
    let sbom = dir.path().join("syft.cdx.json");
    let multi = sha256_hex(&lib.join("libmulti.so"));
    std::fs::write(
        &sbom,
        format!(
            r#"{{"bomFormat":"CycloneDX","specVersion":"1.6","version":1,"components":[
{{"type":"file","name":"/usr/lib/libsm90a.so","hashes":[{{"alg":"SHA-256","content":"{}"}}]}},
{{"type":"file","name":"/usr/lib/libmulti.so","hashes":[{{"alg":"SHA-256","content":"{multi}"}}],"properties":[]}}]}}"#,
            "0".repeat(64)
        ),
    )
    .unwrap();
    let out = dir.path().join("enriched.json");
    let (_, stderr, _) = scan(
        &image,
        &["--enrich", sbom.to_str().unwrap(), "--format", "cyclonedx", "-o", out.to_str().unwrap()],
        dir.path(),
    );
    assert!(stderr.contains("enriched 1 components, added 1 binaries"), "{stderr}");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert!(validate(&doc).is_empty(), "{:#?}", validate(&doc));
    let comps = doc["components"].as_array().unwrap();
    assert_eq!(comps.len(), 3);
    assert!(props(&comps[0]).is_empty(), "the mismatched component is left alone");
    assert!(prop(&comps[1], "cudalint:sass-archs").is_some(), "the empty properties array is filled");
    assert_eq!(comps[2]["name"], "/usr/lib/libsm90a.so");
}

/// `input` is a subsequence of `output`: nothing of it was changed or dropped.
fn is_subsequence(input: &[u8], output: &[u8]) -> bool {
    let mut it = output.iter();
    input.iter().all(|b| it.any(|o| o == b))
}

/// `output` less every `cudalint:` property and every component cudalint added.
fn strip(mut v: Value) -> Value {
    if let Some(cs) = v.get_mut("components").and_then(Value::as_array_mut) {
        cs.retain(|c| !c["bom-ref"].as_str().unwrap_or("").starts_with("cudalint:"));
        for c in cs.iter_mut() {
            *c = strip(c.take());
        }
    }
    if let Some(ps) = v.get_mut("properties").and_then(Value::as_array_mut) {
        ps.retain(|p| !p["name"].as_str().unwrap_or("").starts_with("cudalint:"));
        if ps.is_empty() {
            v.as_object_mut().unwrap().remove("properties");
        }
    }
    v
}

#[test]
fn enrich_a_syft_sbom_keeps_it_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let input_path = root().join("fixtures/sbom/syft-demo-image.cdx.json");
    let input = std::fs::read_to_string(&input_path).unwrap();
    let parsed_input: Value = serde_json::from_str(&input).unwrap();
    assert!(validate(&parsed_input).is_empty(), "the fixture itself is valid CycloneDX 1.6");
    let out = dir.path().join("enriched.cdx.json");
    // --enrich alone implies --format cyclonedx (to standard output); here paired with -o.
    let (code, stderr, lint) = scan(
        &demo().display().to_string(),
        &["--enrich", input_path.to_str().unwrap(), "--format", "cyclonedx", "--output", out.to_str().unwrap()],
        dir.path(),
    );
    assert_eq!(code, 1, "{stderr}");
    // The fixture lists libsm90a.so (SHA-1 only: matched by path), not libsm100f.so nor the
    // static archive libstatic.a.
    assert!(stderr.contains("enriched 1 components, added 2 binaries with device code"), "{stderr}");
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(is_subsequence(input.as_bytes(), text.as_bytes()), "the input's bytes are all kept, in order");
    let doc: Value = serde_json::from_str(&text).unwrap();
    let errors = validate(&doc);
    assert!(errors.is_empty(), "{errors:#?}");
    assert_eq!(strip(doc.clone()), parsed_input, "only cudalint's properties and components were added");
    assert_matrix_in(&doc, &lint);
    let matched = doc["components"].as_array().unwrap().iter().find(|c| c["bom-ref"] == "5d1f0e2a9c8b7a64").unwrap();
    assert!(prop(matched, "cudalint:target:H100").is_some());

    // Enriching twice is refused, naming the file; so is something that is not CycloneDX.
    let (code, stderr, _) =
        scan(&demo().display().to_string(), &["--enrich", out.to_str().unwrap(), "--format", "cyclonedx"], dir.path());
    assert_eq!(code, 2);
    assert!(
        stderr.contains("already carries cudalint: properties") && stderr.contains("enriched.cdx.json"),
        "{stderr}"
    );
    let not = dir.path().join("spdx.json");
    std::fs::write(&not, r#"{"spdxVersion":"SPDX-2.3"}"#).unwrap();
    let (code, stderr, _) =
        scan(&demo().display().to_string(), &["--enrich", not.to_str().unwrap(), "--format", "cyclonedx"], dir.path());
    assert_eq!(code, 2);
    assert!(stderr.contains("spdx.json: not a CycloneDX SBOM"), "{stderr}");
}
