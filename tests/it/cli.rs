//! The command line around the scan: `version`, the JSON of `gpus` and `rules`, the one error
//! style.

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
