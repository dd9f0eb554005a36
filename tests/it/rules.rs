//! Codes are unique and stable, every rule has cases both ways, docs/rules is generated from the
//! rule files and kept in sync, rule files with errors point at their line. The cases themselves
//! run one test each in `tests/rule_cases.rs`.

use std::collections::BTreeMap;

use cudalint::lint::rules::{self, Rule, RuleTest};

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
