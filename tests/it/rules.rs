//! Codes are unique and stable, every rule has cases both ways, docs/rules is generated from the
//! rule files and kept in sync, rule files with errors point at their line. The cases themselves
//! run one test each in `tests/rule_cases.rs`.

use std::collections::BTreeMap;

use cudalint::lint::rules::{self, Rule, RuleTest};
use cudalint::lint::{facts, variables, verdict};

use crate::util::root;

#[path = "../common/rule_case.rs"]
mod case;
pub use case::{image_for, lint, lint_with_device, targets_for};

/// The per-case runner judges each case; that every rule has a case where it fires and one
/// where it must stay quiet is checked here, once.
#[test]
fn every_rule_has_cases_both_ways() {
    let rules = rules::load(&[]).unwrap();
    assert!(rules.len() >= 12);
    for r in &rules {
        for (i, case) in r.tests.iter().enumerate() {
            assert!(case.expect == "fire" || case.expect == "pass", "{} case {i}: expect fire or pass", r.code);
        }
        let fire = r.tests.iter().filter(|t| t.expect == "fire").count();
        let pass = r.tests.iter().filter(|t| t.expect == "pass").count();
        assert!(fire >= 1 && pass >= 1, "{}: needs a case where it fires and one where it must not", r.code);
    }
}

/// Codes and names are part of the interface (ignores, baselines, SARIF): they never change or
/// repeat. Adding a rule means adding a line here.
#[test]
fn rule_codes_are_unique_and_stable() {
    let rules = rules::load(&[]).unwrap();
    let got: Vec<(String, String, String)> =
        rules.iter().map(|r| (r.code.clone(), r.name.clone(), r.severity.as_str().to_string())).collect();
    let want = [
        ("CL001", "no-kernel-image", "error"),
        ("CL002", "partial-coverage", "warning"),
        ("CL003", "ptx-jit-only", "warning"),
        ("CL004", "ptx-newer-than-driver", "error"),
        ("CL005", "runtime-needs-newer-driver", "error"),
        ("CL006", "arch-specific-only", "error"),
        ("CL007", "no-ptx", "info"),
        ("CL008", "driver-library-in-image", "error"),
        ("CL009", "multiple-cuda-runtimes", "warning"),
        ("CL010", "device-debug-code", "warning"),
        ("CL011", "require-cuda-contradicts", "warning"),
        ("CL012", "require-arch-contradicts", "warning"),
        ("CL013", "static-verdict-disagrees", "error"),
        ("CL014", "container-format-newer-than-driver", "error"),
        ("CL015", "incomplete-analysis", "error"),
        ("CL016", "arch-gated-extension", "warning"),
        ("CL017", "driver-cannot-drive-gpu", "error"),
        ("CL018", "forward-compat-in-use", "info"),
        ("CL019", "cuda-build-cannot-target", "error"),
        ("CL020", "runtime-compiler-cannot-target", "error"),
        ("CL021", "optional-runtime-compiler-cannot-target", "warning"),
        ("CL022", "runtime-compiler-output-needs-newer-driver", "error"),
        ("CL023", "variant-declares-unsupported", "error"),
        ("CL024", "image-platform-not-on-host", "error"),
        ("CL025", "sibling-library-missing", "error"),
        ("CL026", "package-built-at-install", "warning"),
        ("CL027", "cuda-package-built-at-install", "error"),
        ("CL028", "not-judged", "warning"),
        ("CL029", "on-demand-extension-cannot-run", "warning"),
        ("CL030", "runtime-compiler-output-jit", "warning"),
    ];
    let want: Vec<(String, String, String)> =
        want.iter().map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string())).collect();
    assert_eq!(got, want);
}

/// docs/rules/<CODE>.md is the rule file rendered; regenerate with
/// `UPDATE_RULE_DOCS=1 cargo test rule_docs`.
#[test]
fn rule_docs_are_generated_from_the_rule_files() {
    let rules = rules::load(&[]).unwrap();
    let dir = root().join("docs/rules");
    let mut expected: BTreeMap<String, String> = BTreeMap::new();
    for r in &rules {
        expected.insert(format!("{}.md", r.code), rules::markdown(r));
    }
    let mut index = String::from("# Rules\n\n| code | name | severity | summary |\n|---|---|---|---|\n");
    for r in &rules {
        index.push_str(&format!(
            "| [{}]({}.md) | `{}` | {} | {} |\n",
            r.code,
            r.code,
            r.name,
            r.severity.as_str(),
            r.summary
        ));
    }
    expected.insert("README.md".into(), index);
    if std::env::var_os("UPDATE_RULE_DOCS").is_some() {
        std::fs::create_dir_all(&dir).unwrap();
        for (name, text) in &expected {
            std::fs::write(dir.join(name), text).unwrap();
        }
    }
    let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|_| panic!("docs/rules missing: UPDATE_RULE_DOCS=1 cargo test rule_docs"))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    on_disk.sort();
    assert_eq!(
        on_disk,
        expected.keys().cloned().collect::<Vec<_>>(),
        "docs/rules out of sync: UPDATE_RULE_DOCS=1 cargo test rule_docs"
    );
    for (name, text) in &expected {
        let disk = std::fs::read_to_string(dir.join(name)).unwrap();
        assert_eq!(&disk, text, "docs/rules/{name} out of sync: UPDATE_RULE_DOCS=1 cargo test rule_docs");
    }
}

#[test]
fn a_bad_rule_file_points_at_its_line() {
    let e = Rule::parse("code = \"X1\"\nname = \"x\"\nseverity = \"fatal\"\n", "mine/x.toml").unwrap_err();
    assert_eq!((e.file.as_deref(), e.line), (Some("mine/x.toml"), Some(3)), "{e}");
    assert!(e.to_string().starts_with("mine/x.toml:3:"), "{e}");
    let text = "code = \"X1\"\nname = \"x\"\nseverity = \"error\"\nscope = \"binary\"\nsummary = \"s\"\n\
                when = 'binary.debug &&'\nmessage = '\"m\"'\nfix = '\"f\"'\n[docs]\nwhat = \"\"\nwhy = \"\"\nexample = \"\"\nfix = \"\"\n";
    let e = Rule::parse(text, "mine/y.toml").unwrap_err().to_string();
    assert!(e.starts_with("mine/y.toml:6: `when` is not a valid CEL expression"), "{e}");
}

#[test]
fn users_add_rules_the_same_way() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("no-sm75.toml"),
        r#"code = "ACME001"
name = "acme-needs-turing"
severity = "error"
scope = "binary"
summary = "ACME fleet still has T4s"
when = '!("sm_75" in binary.sass) && binary.modules > 0'
message = '"no sm_75 SASS: " + binary.archs'
fix = '"add -gencode arch=compute_75,code=sm_75"'
[docs]
what = "x"
why = "y"
example = "z"
fix = "w"
"#,
    )
    .unwrap();
    let rules = rules::load(&[d.path().to_path_buf()]).unwrap();
    let case = RuleTest {
        expect: "fire".into(),
        files: [("/l/libsm90a.so".to_string(), "libsm90a.so".to_string())].into(),
        ..Default::default()
    };
    let r = lint(&rules, &case);
    assert!(r.findings.iter().any(|f| f.rule == "ACME001" && f.message.contains("sm_90a")), "{:#?}", r.findings);
    // A duplicate code is refused, naming both files.
    std::fs::write(
        d.path().join("dup.toml"),
        std::fs::read_to_string(d.path().join("no-sm75.toml")).unwrap().replace("acme-needs-turing", "other"),
    )
    .unwrap();
    let e = rules::load(&[d.path().to_path_buf()]).unwrap_err().to_string();
    assert!(e.contains("ACME001") && e.contains("already defined"), "{e}");
}

/// docs/facts.md is `variables::markdown()`; regenerate with
/// `UPDATE_FACTS_DOC=1 cargo test --test it rules::`.
#[test]
fn facts_doc_is_generated_from_the_variables() {
    let path = root().join("docs/facts.md");
    let text = variables::markdown();
    if std::env::var_os("UPDATE_FACTS_DOC").is_some() {
        std::fs::write(&path, &text).unwrap();
    }
    let disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(disk == text, "docs/facts.md out of sync: UPDATE_FACTS_DOC=1 cargo test --test it rules::");
}

/// Every field of every fact object rules can read is described in lint/variables.rs (and so in
/// docs/facts.md), and nothing described is missing: the objects are built here as `lint::run`
/// builds them, from an image with a runtime, device code, a target with a driver and a GPU's
/// answer.
#[test]
fn every_fact_field_is_documented() {
    let case = RuleTest {
        expect: "fire".into(),
        files: [
            ("/usr/lib/libsm90a.so".to_string(), "libsm90a.so".to_string()),
            ("/usr/local/cuda/lib64/libcudart.so.12.9.79".to_string(), "libcudart.so.12.9.79".to_string()),
        ]
        .into(),
        gpus: vec!["H100".into()],
        driver: Some("550.54.14".into()),
        device: Some(rules::DeviceCase {
            cc: "9.0".into(),
            driver_cuda: "12.4".into(),
            result: 0,
            how: "native".into(),
        }),
        ..Default::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let inv = image_for(&case, dir.path());
    let bins: Vec<facts::Binary> = inv.files.iter().map(facts::binary).collect();
    let b = bins.iter().find(|b| !b.modules.is_empty()).expect("a binary with device code");
    let targets = targets_for(&case);
    let t = &targets[0];
    let floor = verdict::floor(&inv, &bins, &BTreeMap::new());
    let dev = case::device_for(&case, &inv).unwrap();
    let mut seen = Vec::new();
    for v in variables::ALL {
        let sample = match v.name {
            "image" => json(&facts::image(&inv, &bins)),
            "binary" => json(&b.facts),
            "target" => json(&facts::target(t)),
            "targets" => json(&vec![facts::target(t)]),
            "coverage" => json(&cudalint::lint::coverage::coverage(b, t, Default::default())),
            "runtime" => json(&facts::runtime(&b.facts, t)),
            "fix" => json(&facts::fix(&targets, String::new())),
            "deploy" => json(&verdict::deploy(&inv, &bins, &floor, t)),
            "module" => json(&dev.modules[0]),
            "device" => json(&dev.devices[0]),
            "compiler" => json(&cudalint::lint::compilers::CompilerFacts::default()),
            "unjudged" => json(&cudalint::lint::unjudged::UnjudgedFacts::default()),
            other => panic!("no sample of `{other}` here: add one, as lint::run builds it"),
        };
        let (object, documented) = match v.list_of {
            Some(item) => (sample[0].clone(), item.fields),
            None => (sample, v.fields),
        };
        let keys: Vec<&str> = object.as_object().expect("an object").keys().map(String::as_str).collect();
        for k in &keys {
            assert!(
                documented.iter().any(|f| f.name == *k && !f.skip),
                "`{}.{k}` is not documented (its struct's doc comment, or lint/variables.rs)",
                v.name
            );
        }
        // Fields serde leaves out when empty.
        let may_be_absent = ["launches"];
        for f in documented.iter().filter(|f| !f.skip).map(|f| f.name) {
            assert!(
                keys.contains(&f) || may_be_absent.contains(&f),
                "`{}.{f}` is documented but the object has no such field",
                v.name
            );
        }
        seen.push(v.name);
    }
    // Every variable a scope binds is among those described.
    for &scope in rules::Scope::ALL {
        for v in scope.variables() {
            assert!(seen.contains(&v.name), "{} is not in variables::ALL", v.name);
        }
    }
}

/// A fact object as CEL reads it.
fn json<T: serde::Serialize>(v: &T) -> serde_json::Value {
    serde_json::to_value(v).unwrap()
}
