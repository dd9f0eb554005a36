//! The command line around the scan: `version`, the JSON of `gpus` and `rules`, the one error
//! style, the `CUDALINT_*` variables a CI job sets instead of flags, and the release binary.

use std::process::Output;

use assert_cmd::Command;

use crate::util::root;

/// The variables a CI job sets, unset: a developer's own environment must not decide a test.
const VARIABLES: [&str; 8] = [
    "CUDALINT_FORMAT",
    "CUDALINT_OUTPUT",
    "CUDALINT_CONFIG",
    "CUDALINT_PLATFORM",
    "CUDALINT_PYTHON",
    "CUDALINT_GPU",
    "CUDALINT_DRIVER",
    "CUDALINT_FAIL_ON",
];

fn cudalint() -> Command {
    let mut c = Command::cargo_bin("cudalint").unwrap();
    for v in VARIABLES {
        c.env_remove(v);
    }
    c
}

fn demo() -> String {
    root().join("fixtures/demo/demo-image.tar").display().to_string()
}

fn json(o: &Output) -> serde_json::Value {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&o.stdout)))
}

#[test]
fn version_names_the_version_and_the_rules_and_knowledge_it_judges_by() {
    let text = cudalint().arg("version").output().unwrap();
    assert!(text.status.success());
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.starts_with(&format!("cudalint {}\n", env!("CARGO_PKG_VERSION"))), "{text}");
    let v = json(&cudalint().args(["version", "--format", "json"]).output().unwrap());
    assert_eq!(v["schema"], cudalint::schema::VERSION);
    assert_eq!(v["version"], env!("CARGO_PKG_VERSION"));
    let rules = v["rules"]["builtin"].as_u64().unwrap();
    assert_eq!(rules as usize, cudalint::lint::rules::load(&[]).unwrap().len());
    for part in ["rules", "knowledge"] {
        let d = v[part]["digest"].as_str().unwrap();
        assert!(d.starts_with("sha256:") && d.len() == 71, "{part}: {d}");
        // The text says the same digests.
        assert!(text.contains(d), "{part}: {text}");
    }
    // `--version` is kept: the version alone.
    let o = cudalint().arg("--version").output().unwrap();
    assert_eq!(String::from_utf8(o.stdout).unwrap(), format!("cudalint {}\n", env!("CARGO_PKG_VERSION")));
}

#[test]
fn gpus_and_rules_as_json_hold_every_row_of_the_text_sorted() {
    let v = json(&cudalint().args(["gpus", "--format", "json"]).output().unwrap());
    assert_eq!(v["schema"], cudalint::schema::GPUS);
    let gpus = v["gpus"].as_array().unwrap();
    assert_eq!(gpus.len(), cudalint::cuda::gpus::GPUS.len());
    let cc = |g: &serde_json::Value| {
        let (major, minor) = g["cc"].as_str().unwrap().split_once('.').unwrap();
        (major.parse::<u32>().unwrap(), minor.parse::<u32>().unwrap())
    };
    assert!(gpus.windows(2).all(|w| cc(&w[0]) <= cc(&w[1])), "not sorted by compute capability");
    let h100 = gpus.iter().find(|g| g["name"] == "H100").expect("H100");
    assert_eq!(
        (h100["cc"].as_str(), h100["architecture"].as_str(), h100["hosts"].as_str()),
        (Some("9.0"), Some("Hopper"), Some("any"))
    );
    assert!(h100["aliases"].is_array() && h100["secondary_source"].is_boolean(), "{h100}");
    // Each row is a line of the text, in the same order.
    let text = String::from_utf8(cudalint().arg("gpus").output().unwrap().stdout).unwrap();
    let names: Vec<&str> = gpus.iter().map(|g| g["name"].as_str().unwrap()).collect();
    let rows: Vec<&str> = text.lines().skip(1).collect();
    assert_eq!(rows.len(), names.len());
    for (row, name) in rows.iter().zip(&names) {
        assert!(row.starts_with(&format!("{name}  ")), "{row} is not {name}");
    }

    let v = json(&cudalint().args(["rules", "--format", "json"]).output().unwrap());
    assert_eq!(v["schema"], cudalint::schema::RULES);
    let rules = v["rules"].as_array().unwrap();
    let codes: Vec<&str> = rules.iter().map(|r| r["code"].as_str().unwrap()).collect();
    let mut sorted = codes.clone();
    sorted.sort();
    assert_eq!(codes, sorted);
    assert_eq!(codes.len(), cudalint::lint::rules::load(&[]).unwrap().len());
    let cl001 = &rules[0];
    assert_eq!((cl001["code"].as_str(), cl001["name"].as_str()), (Some("CL001"), Some("no-kernel-image")));
    assert_eq!((cl001["severity"].as_str(), cl001["scope"].as_str()), (Some("error"), Some("binary-target")));
    let text = String::from_utf8(cudalint().arg("rules").output().unwrap().stdout).unwrap();
    assert!(text.lines().next().unwrap().contains(cl001["summary"].as_str().unwrap()), "{text}");
    // docs/schema.md lists every document cudalint writes, these three included.
    let schema = std::fs::read_to_string(root().join("docs/schema.md")).unwrap();
    for s in [cudalint::schema::GPUS, cudalint::schema::RULES, cudalint::schema::VERSION] {
        assert!(schema.contains(&format!("## `{s}`")), "docs/schema.md has no section for {s}");
    }
}

#[test]
fn a_usage_error_and_a_runtime_error_share_one_prefix() {
    // Clap refuses the command line.
    let usage = cudalint().args(["scan", "--no-such-flag", &demo()]).output().unwrap();
    // The run fails on a missing file.
    let runtime = cudalint().args(["scan", "/nonexistent/image.tar", "--gpu", "H100", "-q"]).output().unwrap();
    for (what, o) in [("usage", &usage), ("runtime", &runtime)] {
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{what}: {err}");
        assert!(err.starts_with("cudalint: error: "), "{what}: {err}");
        assert_eq!(err.matches("error:").count(), 1, "{what}: {err}");
    }
    let usage = String::from_utf8_lossy(&usage.stderr);
    assert!(usage.contains("'--no-such-flag'") && usage.contains("Usage: cudalint scan"), "{usage}");
    // Help and version are not errors.
    let help = cudalint().args(["scan", "--help"]).output().unwrap();
    assert_eq!(help.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&help.stdout).starts_with("Check an image"));
}

#[test]
fn every_flag_a_ci_job_sets_has_its_variable() {
    let help = String::from_utf8(cudalint().args(["scan", "--help"]).output().unwrap().stdout).unwrap();
    for v in VARIABLES {
        assert!(help.contains(&format!("[env: {v}=]")), "`scan --help` does not list {v}");
    }
    // CUDALINT_FORMAT picks the report, as --format does.
    let o = cudalint().env("CUDALINT_FORMAT", "json").args(["scan", &demo(), "--gpu", "H100", "-q"]).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("a JSON report");
    assert_eq!(v["schema"], cudalint::schema::LINT);
    // CUDALINT_OUTPUT is its file; a flag given wins over the variable.
    let d = tempfile::tempdir().unwrap();
    let o = cudalint()
        .current_dir(d.path())
        .env("CUDALINT_FORMAT", "json")
        .env("CUDALINT_OUTPUT", "report.json")
        .args(["scan", &demo(), "--gpu", "H100", "-q", "--format", "sarif"])
        .output()
        .unwrap();
    assert!(o.stdout.is_empty());
    let sarif: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(d.path().join("report.json")).unwrap()).unwrap();
    assert_eq!(sarif["version"], "2.1.0");
    // Scan's formats are not support's, gpus' or audit's: the variable set for the gate leaves
    // the other commands of the job alone.
    let o = cudalint().env("CUDALINT_FORMAT", "sarif").env("CUDALINT_OUTPUT", "x").args(["gpus"]).output().unwrap();
    assert!(o.status.success() && String::from_utf8_lossy(&o.stdout).starts_with("GPU "));
    let o = cudalint()
        .current_dir(d.path())
        .env("CUDALINT_FORMAT", "sarif")
        .env("CUDALINT_OUTPUT", "x")
        .args(["support", &demo(), "-q"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("driver floor: "), "{}", String::from_utf8_lossy(&o.stdout));
    assert!(!d.path().join("x").exists());
    // CUDALINT_CONFIG is the configuration: its fail-on never lets the failing scan pass.
    std::fs::write(d.path().join("ci.toml"), "fail-on = \"never\"\n").unwrap();
    let scan = |env: &[(&str, &str)]| {
        let mut c = cudalint();
        c.current_dir(d.path()).args(["scan", &demo(), "--gpu", "L4", "-q"]);
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().unwrap()
    };
    assert_eq!(scan(&[]).status.code(), Some(1));
    assert_eq!(scan(&[("CUDALINT_CONFIG", "ci.toml")]).status.code(), Some(0));
    let o = scan(&[("CUDALINT_CONFIG", "missing.toml")]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("CUDALINT_CONFIG missing.toml: no such file"), "{o:?}");
    // CUDALINT_PLATFORM and CUDALINT_PYTHON are read: a value the flag refuses is refused.
    let o = scan(&[("CUDALINT_PLATFORM", "plan9")]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("plan9"), "{o:?}");
    let lock = root().join("fixtures/lock/pylock.toml").display().to_string();
    let o = cudalint().env("CUDALINT_PYTHON", "three").args(["scan", &lock, "--gpu", "H100", "-q"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("three"), "{o:?}");
}

/// The binary `cargo install`, the Dockerfile and maturin build (the release profile) ships
/// without debug info, or with it split into a file beside it: with line tables kept in it, it
/// was 134 MB where 21 MB does.
#[test]
fn the_release_profile_ships_no_debug_info_in_the_binary() {
    let manifest: toml::Table = std::fs::read_to_string(root().join("Cargo.toml")).unwrap().parse().unwrap();
    let release = manifest.get("profile").and_then(|p| p.get("release")).and_then(|r| r.as_table());
    let get = |key: &str| release.and_then(|r| r.get(key));
    let stripped = match get("strip") {
        Some(toml::Value::String(s)) => s == "debuginfo" || s == "symbols",
        Some(toml::Value::Boolean(b)) => *b,
        _ => false,
    };
    let split = get("split-debuginfo").and_then(|v| v.as_str()).is_some_and(|s| s == "packed" || s == "unpacked");
    assert!(stripped || split, "[profile.release] keeps debug info in the binary: {release:?}");
}
