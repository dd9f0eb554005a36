//! Every rule against its own cases (the `[[test]]` tables in its file): it fires where it must
//! and stays quiet where it must not; codes are unique and stable; docs/rules is generated from
//! the rule files and kept in sync.

use std::collections::BTreeMap;

use cudalint::image::{ImageReport, ScanOptions, scan};
use cudalint::lint::rules::{self, Rule, RuleTest};
use cudalint::lint::{LintOptions, LintReport, config, run, targets};

use crate::images::{Comp, Ent, Image, oci_layout, tar};
use crate::util::{read_fixture, root};

pub fn image_for(case: &RuleTest, dir: &std::path::Path) -> ImageReport {
    let entries: Vec<Ent> = case
        .files
        .iter()
        .map(|(path, fixture)| {
            Ent::File(Box::leak(path.trim_start_matches('/').to_string().into_boxed_str()), read_fixture(fixture))
        })
        .chain(case.text.iter().map(|(path, text)| {
            Ent::File(Box::leak(path.trim_start_matches('/').to_string().into_boxed_str()), text.as_bytes().to_vec())
        }))
        .collect();
    let mut img = Image::new(vec![(tar(&entries), Comp::Gzip)]);
    img.env = case.env.iter().map(|e| &*Box::leak(e.clone().into_boxed_str())).collect();
    oci_layout(dir, &[&img]);
    let mut opts = ScanOptions { progress: false, ..ScanOptions::default() };
    opts.inspect.lean = !case.deep;
    scan(&format!("oci:{}", dir.display()), &opts).unwrap()
}

pub fn targets_for(case: &RuleTest) -> Vec<targets::Target> {
    let mut t: Vec<targets::Target> = case.gpus.iter().map(|g| targets::gpu(g).unwrap()).collect();
    for a in &case.arch {
        t.extend(targets::arch(a).unwrap());
    }
    let driver = case.driver.as_ref().map(|d| targets::driver(d).unwrap());
    let cuda = case.cuda_driver.as_ref().map(|c| cudalint::cuda::CudaVersion::parse(c).unwrap());
    for x in &mut t {
        if let Some((d, c)) = &driver {
            x.driver = Some(d.clone());
            x.driver_cuda = Some(*c);
        }
        if let Some(c) = cuda {
            x.driver_cuda = Some(c);
        }
    }
    t
}

/// What a GPU would have answered (`device` in a rule case), judged by the same comparison
/// `--on-device` uses.
pub fn device_for(case: &RuleTest, inv: &ImageReport) -> Option<cudalint::device::DeviceReport> {
    use cudalint::cuda::{Cc, CudaVersion, compat};
    let d = case.device.as_ref()?;
    let cc = Cc::parse(&d.cc).unwrap();
    let cuda = CudaVersion::parse(&d.driver_cuda).unwrap();
    let mut modules = Vec::new();
    for f in &inv.files {
        let b = cudalint::lint::facts::binary(f);
        for m in &b.modules {
            let verdict = compat::decide(&m.images, cc, Some(cuda), compat::JitEnv::default());
            let load = cudalint::device::driver::Load {
                result: d.result,
                error: cudalint::device::driver::error_name(d.result),
                ms: 1.0,
                jit_ms: None,
                log: String::new(),
            };
            let how = d.how.parse().unwrap();
            modules.push(cudalint::device::judge(&b.facts.path, &m.label, 0, &verdict, load, how, vec![]));
        }
    }
    Some(cudalint::device::DeviceReport {
        driver_version: i32::from(cuda.major) * 1000 + i32::from(cuda.minor) * 10,
        devices: vec![cudalint::device::driver::DeviceInfo {
            index: 0,
            name: "test GPU".into(),
            cc: cc.to_string(),
            driver_cuda: cuda.to_string(),
        }],
        canary: vec![],
        modules,
        skipped: vec![],
    })
}

pub fn lint(rules: &[Rule], case: &RuleTest) -> LintReport {
    let dir = tempfile::tempdir().unwrap();
    let inv = image_for(case, dir.path());
    let device = device_for(case, &inv);
    lint_inventory(rules, case, &inv, device)
}

/// The same case judged with a given device report.
pub fn lint_with_device(rules: &[Rule], case: &RuleTest, device: cudalint::device::DeviceReport) -> LintReport {
    let dir = tempfile::tempdir().unwrap();
    let inv = image_for(case, dir.path());
    lint_inventory(rules, case, &inv, Some(device))
}

fn lint_inventory(
    rules: &[Rule],
    case: &RuleTest,
    inv: &ImageReport,
    device: Option<cudalint::device::DeviceReport>,
) -> LintReport {
    let cfg = config::Config::default();
    let opts = LintOptions {
        rules,
        targets: targets_for(case),
        fail_on: rules::Severity::Error,
        config: &cfg,
        extra_ignores: vec![],
        baseline: None,
        device,
    };
    run(inv, opts).unwrap()
}

#[test]
fn every_rule_fires_on_its_failing_cases_and_only_there() {
    let rules = rules::load(&[]).unwrap();
    assert!(rules.len() >= 12);
    for r in &rules {
        let fire = r.tests.iter().filter(|t| t.expect == "fire").count();
        let pass = r.tests.iter().filter(|t| t.expect == "pass").count();
        assert!(fire >= 1 && pass >= 1, "{}: needs a case where it fires and one where it must not", r.code);
        for (i, case) in r.tests.iter().enumerate() {
            assert!(case.expect == "fire" || case.expect == "pass", "{} case {i}: expect fire or pass", r.code);
            let report = lint(&rules, case);
            let fired: Vec<_> = report.findings.iter().filter(|f| f.rule == r.code).collect();
            assert_eq!(
                !fired.is_empty(),
                case.expect == "fire",
                "{} case {i} ({case:?}):\n{:#?}",
                r.code,
                report.findings
            );
            for f in fired {
                assert!(
                    !f.fix.is_empty() && !f.message.is_empty(),
                    "{}: every finding carries a message and a fix",
                    r.code
                );
                if let Some(m) = &case.message {
                    assert!(f.message.contains(m.as_str()), "{} case {i}: {:?} lacks {m:?}", r.code, f.message);
                }
                if let Some(m) = &case.fix {
                    assert!(f.fix.contains(m.as_str()), "{} case {i}: fix {:?} lacks {m:?}", r.code, f.fix);
                }
            }
        }
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
    assert!(e.starts_with("mine/x.toml:3:"), "{e}");
    let text = "code = \"X1\"\nname = \"x\"\nseverity = \"error\"\nscope = \"binary\"\nsummary = \"s\"\n\
                when = 'binary.debug &&'\nmessage = '\"m\"'\nfix = '\"f\"'\n[docs]\nwhat = \"\"\nwhy = \"\"\nexample = \"\"\nfix = \"\"\n";
    let e = Rule::parse(text, "mine/y.toml").unwrap_err();
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
    let e = rules::load(&[d.path().to_path_buf()]).unwrap_err();
    assert!(e.contains("ACME001") && e.contains("already defined"), "{e}");
}
