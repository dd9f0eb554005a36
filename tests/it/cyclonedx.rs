//! CycloneDX: `--format cyclonedx` and `--enrich` of a Syft-shaped SBOM and of the SBOM the real
//! `cyclonedx-py environment` writes for a venv, all validated against the official CycloneDX 1.6
//! JSON schema (tests/schemas/cyclonedx, with the SPDX and JSF schemas it references); enrichment
//! keeps the input byte for byte and joins binaries to their packages' components; a rootfs scan
//! hashes its files and lists the packages that own them.

use std::path::{Path, PathBuf};
use std::process::Command as Std;

use assert_cmd::Command;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::util::{fixture, read_fixture, root, run};

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

/// Runs `cudalint scan IMAGE --gpu H100,L4 ARGS --format json=lint.json`: exit code, stderr,
/// the lint report. ARGS name their report's file as `--format FMT --output PATH`, written here
/// as `--format FMT=PATH` (two reports in one run each name their file).
fn scan(image: &str, args: &[&str], dir: &Path) -> (i32, String, Value) {
    let lint = dir.join("lint.json");
    let mut given: Vec<String> = Vec::new();
    let mut i = 0;
    while i < args.len() {
        match (args[i], args.get(i + 2)) {
            ("--format", Some(&("--output" | "-o"))) => {
                given.extend(["--format".to_string(), format!("{}={}", args[i + 1], args[i + 3])]);
                i += 4;
            }
            (a, _) => {
                given.push(a.to_string());
                i += 1;
            }
        }
    }
    let out = Command::cargo_bin("cudalint")
        .unwrap()
        .args(["scan", image, "--gpu", "H100,L4", "--quiet"])
        .args(&given)
        .arg("--format")
        .arg(format!("json={}", lint.display()))
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
    assert!(
        stderr.contains("enriched 1 components (1 by path and hash, 0 by owning package), added 1 binaries"),
        "{stderr}"
    );
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

/// `output` less every `cudalint:` property and every component cudalint added (and the
/// `components` arrays cudalint added to hold them: the inputs here have no empty ones but those
/// under test, which are kept by `keep_empty`).
fn strip(v: Value) -> Value {
    strip_in(v, &[])
}

fn strip_in(mut v: Value, keep_empty: &[&str]) -> Value {
    let name = v["name"].as_str().unwrap_or("").to_string();
    if let Some(cs) = v.get_mut("components").and_then(Value::as_array_mut) {
        cs.retain(|c| !c["bom-ref"].as_str().unwrap_or("").starts_with("cudalint:"));
        for c in cs.iter_mut() {
            *c = strip_in(c.take(), keep_empty);
        }
        if cs.is_empty() && !keep_empty.contains(&name.as_str()) && v.get("bomFormat").is_none() {
            v.as_object_mut().unwrap().remove("components");
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
    assert!(
        stderr.contains(
            "enriched 1 components (1 by path and hash, 0 by owning package), added 2 binaries with device code \
             (0 nested in their package's component)"
        ),
        "{stderr}"
    );
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

/// Runs `cudalint scan TARGET ARGS --quiet --format cyclonedx --output OUT`: exit code, stderr and
/// the SBOM written (one format, so no other report shares the command).
fn sbom_scan(target: &str, args: &[&str], out: &Path) -> (i32, String, Value) {
    let o = Command::cargo_bin("cudalint")
        .unwrap()
        .args(["scan", target, "--quiet"])
        .args(args)
        .args(["--format", "cyclonedx", "--output"])
        .arg(out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    let bom = std::fs::read_to_string(out).map(|t| serde_json::from_str(&t).unwrap()).unwrap_or(Value::Null);
    (o.status.code().unwrap(), stderr, bom)
}

/// The top-level component whose purl is `purl`.
fn by_purl<'a>(bom: &'a Value, purl: &str) -> &'a Value {
    bom["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["purl"] == purl)
        .unwrap_or_else(|| panic!("no component {purl} in {:#}", bom["components"]))
}

/// The `file` components nested in `c`, by name.
fn nested_files(c: &Value) -> Vec<&str> {
    let mut v: Vec<&str> = c["components"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["type"] == "file")
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    v.sort();
    v
}

/// A package's summary agrees with the binaries nested in it: their count, the union of their
/// architectures, and per target the first class of none, jit, native, arch-gated, n/a that one
/// of them has, with each class counted.
fn assert_package_summary(pkg: &Value, targets: &[&str]) {
    let files: Vec<&Value> =
        pkg["components"].as_array().unwrap().iter().filter(|f| prop(f, "cudalint:sass-archs").is_some()).collect();
    assert_eq!(prop(pkg, "cudalint:binaries"), Some(files.len().to_string()), "{pkg:#}");
    // Architectures in the one order every list of them has: by number (sm_90 before sm_100).
    let union = |name: &str| {
        cudalint::cuda::sorted_archs(files.iter().flat_map(|f| {
            prop(f, name).unwrap().split(',').filter(|a| !a.is_empty()).map(String::from).collect::<Vec<_>>()
        }))
        .join(",")
    };
    assert_eq!(prop(pkg, "cudalint:sass-archs").unwrap(), union("cudalint:sass-archs"));
    assert_eq!(prop(pkg, "cudalint:ptx-archs").unwrap(), union("cudalint:ptx-archs"));
    for t in targets {
        let key = format!("cudalint:target:{t}");
        let classes: Vec<String> =
            files.iter().map(|f| prop(f, &key).unwrap().split(':').next().unwrap().to_string()).collect();
        let counts: Vec<String> = ["none", "jit", "native", "arch-gated", "n/a"]
            .iter()
            .map(|k| (k, classes.iter().filter(|c| c == k).count()))
            .filter(|(_, n)| *n > 0)
            .map(|(k, n)| format!("{n} {k}"))
            .collect();
        let class = counts[0].split_once(' ').unwrap().1;
        assert_eq!(prop(pkg, &key).unwrap(), format!("{class}: {}", counts.join(", ")), "{t}");
    }
}

/// A dpkg root: the scan's own SBOM lists each owning deb as a `library` with its binaries nested,
/// a static archive (no matrix row) included. Enriching a Syft-shaped SBOM of it matches the debs
/// by purl (namespace and qualifiers as Syft writes them; the version must agree), adds the
/// summary to their components (into an existing `properties` array, or as a new member beside a
/// new `components` one) and nests the binaries there; an unowned binary is added at the top.
#[test]
fn packages_are_components_and_enrichment_joins_binaries_to_them() {
    let dir = tempfile::tempdir().unwrap();
    let rootfs = dir.path().join("rootfs");
    let put = |path: &str, bytes: &[u8]| {
        let p = rootfs.join(path.trim_start_matches('/'));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes).unwrap();
    };
    put("/usr/lib/x86_64-linux-gnu/libsm90a.so", &read_fixture("libsm90a.so"));
    put("/usr/lib/x86_64-linux-gnu/libmulti.so", &read_fixture("libmulti.so"));
    put("/usr/lib/x86_64-linux-gnu/libstatic.a", &read_fixture("libstatic.a"));
    put("/opt/app/libsm100f.so", &read_fixture("libsm100f.so"));
    put("/var/lib/dpkg/status", b"Package: libsm90\nVersion: 1.0-1\n\nPackage: multi\nVersion: 2.0\n\n");
    put("/var/lib/dpkg/info/libsm90:amd64.list", b"/.\n/usr/lib/x86_64-linux-gnu/libsm90a.so\n");
    put(
        "/var/lib/dpkg/info/multi:amd64.list",
        b"/usr/lib/x86_64-linux-gnu/libmulti.so\n/usr/lib/x86_64-linux-gnu/libstatic.a\n",
    );
    let target = format!("dir:{}", rootfs.display());
    let gpus = ["--gpu", "H100,L4"];

    let (code, stderr, bom) = sbom_scan(&target, &gpus, &dir.path().join("own.cdx.json"));
    assert!(matches!(code, 0 | 1), "{stderr}");
    assert!(validate(&bom).is_empty(), "{:#?}", validate(&bom));
    let multi = by_purl(&bom, "pkg:deb/multi@2.0");
    assert_eq!(multi["type"], "library");
    assert_eq!(nested_files(multi), ["/usr/lib/x86_64-linux-gnu/libmulti.so", "/usr/lib/x86_64-linux-gnu/libstatic.a"]);
    assert_package_summary(multi, &["H100", "L4"]);
    // The archive is not loaded at run time: counted as n/a in the package's verdicts.
    assert!(prop(multi, "cudalint:target:H100").unwrap().ends_with("1 n/a"), "{multi:#}");
    let sm90 = by_purl(&bom, "pkg:deb/libsm90@1.0-1");
    assert_eq!(nested_files(sm90), ["/usr/lib/x86_64-linux-gnu/libsm90a.so"]);
    assert_package_summary(sm90, &["H100", "L4"]);
    assert_eq!(prop(sm90, "cudalint:target:L4").as_deref(), Some("none: 1 none"), "sm_90a code does not run on an L4");
    let top: Vec<&str> = bom["components"].as_array().unwrap().iter().map(|c| c["bom-ref"].as_str().unwrap()).collect();
    assert_eq!(top, ["cudalint:file:/opt/app/libsm100f.so", "pkg:deb/libsm90@1.0-1", "pkg:deb/multi@2.0"]);
    let deps: Vec<&str> =
        bom["dependencies"][0]["dependsOn"].as_array().unwrap().iter().map(|d| d.as_str().unwrap()).collect();
    assert_eq!(deps, top);

    let input = r#"{"bomFormat":"CycloneDX","specVersion":"1.6","version":1,"components":[
{"type":"library","name":"libsm90","version":"1.0-1",
 "purl":"pkg:deb/debian/libsm90@1.0-1?arch=amd64&distro=debian-12",
 "properties":[{"name":"syft:package:type","value":"deb"}],"components":[]},
{"type":"library","name":"multi","version":"1.9","purl":"pkg:deb/debian/multi@1.9?arch=amd64"},
{"type":"library","name":"multi","version":"2.0","purl":"pkg:deb/debian/multi@2.0?arch=amd64"},
{"type":"library","name":"other","version":"1","purl":"pkg:deb/debian/other@1"}]}"#;
    let sbom = dir.path().join("syft.cdx.json");
    std::fs::write(&sbom, input).unwrap();
    let out = dir.path().join("enriched.cdx.json");
    let (code, stderr, doc) = sbom_scan(&target, &[&gpus[..], &["--enrich", sbom.to_str().unwrap()]].concat(), &out);
    assert!(matches!(code, 0 | 1), "{stderr}");
    assert!(
        stderr.contains(
            "enriched 2 components (0 by path and hash, 2 by owning package), added 4 binaries with device code \
             (3 nested in their package's component)"
        ),
        "{stderr}"
    );
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(is_subsequence(input.as_bytes(), text.as_bytes()), "the input's bytes are all kept, in order");
    assert!(validate(&doc).is_empty(), "{:#?}", validate(&doc));
    let parsed: Value = serde_json::from_str(input).unwrap();
    assert_eq!(strip_in(doc.clone(), &["libsm90"]), parsed, "only cudalint's properties and components were added");
    let comps = doc["components"].as_array().unwrap();
    assert_eq!(comps.len(), 5, "one unowned binary added at the top: {comps:#?}");
    assert_eq!(comps[4]["name"], "/opt/app/libsm100f.so");
    assert!(props(&comps[1]).is_empty() && comps[1].get("components").is_none(), "multi 1.9 is another package");
    assert!(props(&comps[3]).is_empty(), "a package that owns no binary is left alone");
    // The summary is the one the scan's own SBOM gives, after the input's own properties.
    for (i, own) in [(0, sm90), (2, multi)] {
        let theirs = &comps[i];
        let cudalint: Vec<_> = props(theirs).into_iter().filter(|p| p.0.starts_with("cudalint:")).collect();
        assert_eq!(cudalint, props(own), "{theirs:#}");
        assert_eq!(nested_files(theirs), nested_files(own));
    }
    assert_eq!(props(&comps[0])[0].0, "syft:package:type");
    assert_matrix_in(&doc, &lint_rows(&target, &gpus));
}

/// The matrix of a JSON scan (its own command: one format each).
fn lint_rows(target: &str, args: &[&str]) -> Value {
    let o = Command::cargo_bin("cudalint")
        .unwrap()
        .args(["scan", target, "--quiet"])
        .args(args)
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert!(matches!(o.status.code(), Some(0 | 1)), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

const NVJPEG_PURL: &str = "pkg:pypi/nvidia-nvjpeg-cu12@12.4.0.76";

/// A venv (`python3 -m venv`) with the pinned nvjpeg wheel installed by pip: by name from the
/// wheels directory (`from_file` false: as from an index, so pip records no direct URL) or as the
/// wheel file itself.
fn nvjpeg_venv(at: &Path, from_file: bool) {
    let whl = crate::wheels::wheel();
    if !at.exists() {
        run(Std::new("python3").args(["-m", "venv"]).arg(at));
    }
    let mut pip = Std::new(at.join("bin/pip"));
    pip.args(["install", "--quiet", "--disable-pip-version-check", "--no-deps", "--no-index", "--force-reinstall"]);
    if from_file {
        pip.arg(&whl);
    } else {
        pip.arg("--find-links").arg(whl.parent().unwrap()).arg("nvidia-nvjpeg-cu12==12.4.0.76");
    }
    run(&mut pip);
}

/// A `dir:` scan of a venv lists the wheel that installed the library as a `library` component
/// with its purl, the library nested in it with its SHA-256, and nothing about it at the top.
#[test]
fn a_venv_scan_lists_the_wheel_with_its_library() {
    let dir = tempfile::tempdir().unwrap();
    let venv = dir.path().join("venv");
    nvjpeg_venv(&venv, true);
    let (code, stderr, bom) = sbom_scan(&format!("dir:{}", venv.display()), &[], &dir.path().join("bom.json"));
    assert_eq!(code, 0, "{stderr}");
    assert!(validate(&bom).is_empty(), "{:#?}", validate(&bom));
    let wheel = by_purl(&bom, NVJPEG_PURL);
    assert_eq!((wheel["type"].as_str(), wheel["name"].as_str()), (Some("library"), Some("nvidia-nvjpeg-cu12")));
    assert_eq!(wheel["version"], "12.4.0.76");
    assert_eq!(prop(wheel, "cudalint:package-manager").as_deref(), Some("pypi"));
    let files = nested_files(wheel);
    let lib = files.iter().find(|f| f.ends_with("/site-packages/nvidia/nvjpeg/lib/libnvjpeg.so.12")).unwrap();
    let c = wheel["components"].as_array().unwrap().iter().find(|c| c["name"] == *lib).unwrap();
    assert_eq!(c["hashes"][0]["content"].as_str().unwrap(), sha256_hex(&venv.join(lib.trim_start_matches('/'))));
    assert_eq!(prop(c, "cudalint:package").as_deref(), Some(NVJPEG_PURL));
    assert!(!prop(c, "cudalint:sass-archs").unwrap().is_empty(), "{c:#}");
    assert_package_summary(wheel, &[]);
    assert!(
        bom["components"].as_array().unwrap().iter().all(|c| c["type"] != "file"),
        "every binary is under its wheel: {:#}",
        bom["components"]
    );
}

/// `cyclonedx-py` (PyPI `cyclonedx-bom`, pinned in scripts/test.sh) in its tools venv.
#[cfg(feature = "slow-tests")]
fn cyclonedx_py() -> PathBuf {
    crate::util::venv_tool("CUDALINT_CYCLONEDX_PY", "cyclonedx-py", "cyclonedx-py", "cyclonedx-bom==7.5.0")
}

/// The done-when of issue 21: the SBOM the real `cyclonedx-py environment` writes for a venv
/// holding the NVIDIA wheel is enriched on that wheel's component, whether pip installed it by
/// name (the component has the purl `pkg:pypi/nvidia-nvjpeg-cu12@12.4.0.76`) or from the wheel
/// file (no purl: matched by name and version), with the library nested in it and nothing added
/// beside it; the rest of the input is kept byte for byte.
#[cfg(feature = "slow-tests")]
#[test]
fn enrich_a_cyclonedx_py_sbom_on_the_wheels_component() {
    let cyclonedx_py = cyclonedx_py();
    let dir = tempfile::tempdir().unwrap();
    let venv = dir.path().join("venv");
    let target = format!("dir:{}", venv.display());
    for (from_file, purl) in [(false, Some(NVJPEG_PURL)), (true, None)] {
        nvjpeg_venv(&venv, from_file);
        let sbom = dir.path().join(format!("env-{from_file}.cdx.json"));
        run(Std::new(&cyclonedx_py)
            .args(["environment", "--sv", "1.6", "--output-reproducible", "-o"])
            .arg(&sbom)
            .arg(&venv));
        let input = std::fs::read_to_string(&sbom).unwrap();
        let parsed: Value = serde_json::from_str(&input).unwrap();
        assert!(validate(&parsed).is_empty(), "cyclonedx-py wrote valid CycloneDX 1.6");
        let theirs = |doc: &Value| -> Value {
            doc["components"].as_array().unwrap().iter().find(|c| c["name"] == "nvidia-nvjpeg-cu12").unwrap().clone()
        };
        assert_eq!(theirs(&parsed)["purl"].as_str(), purl, "how cyclonedx-py names a wheel installed this way");
        assert!(theirs(&parsed).get("components").is_none() && theirs(&parsed).get("properties").is_none());

        let out = dir.path().join(format!("enriched-{from_file}.cdx.json"));
        let (code, stderr, doc) = sbom_scan(&target, &["--gpu", "H100,L4", "--enrich", sbom.to_str().unwrap()], &out);
        assert!(matches!(code, 0 | 1), "{stderr}");
        assert!(
            stderr.contains(
                "enriched 1 components (0 by path and hash, 1 by owning package), added 1 binaries with device \
                 code (1 nested in their package's component)"
            ),
            "{stderr}"
        );
        let text = std::fs::read_to_string(&out).unwrap();
        assert!(is_subsequence(input.as_bytes(), text.as_bytes()), "the input's bytes are all kept, in order");
        assert!(validate(&doc).is_empty(), "{:#?}", validate(&doc));
        assert_eq!(strip(doc.clone()), parsed, "only cudalint's properties and components were added");
        assert_eq!(doc["components"].as_array().unwrap().len(), parsed["components"].as_array().unwrap().len());
        let wheel = theirs(&doc);
        assert_eq!(prop(&wheel, "cudalint:package-manager").as_deref(), Some("pypi"));
        assert_package_summary(&wheel, &["H100", "L4"]);
        let files = nested_files(&wheel);
        let [lib] = &files[..] else { panic!("{wheel:#}") };
        assert!(lib.ends_with("/site-packages/nvidia/nvjpeg/lib/libnvjpeg.so.12"), "{lib}");
        assert_matrix_in(&doc, &lint_rows(&target, &["--gpu", "H100,L4"]));
    }
}
