//! Every report format over one shared set of findings (snapshots), SARIF against the SARIF
//! 2.1.0 JSON schema, JUnit against a JUnit XSD, and the gate as CI runs it: exit codes, config,
//! ignores, baselines, target files.

use std::path::Path;

use assert_cmd::Command;
use cudalint::lint::rules::{self, FailOn, RuleTest};
use cudalint::lint::{LintOptions, LintReport, config, run};
use cudalint::report::{self, RenderConfig};

use crate::rules::{image_for, targets_for};
use crate::util::{fixture, root};

/// One image with something for most rules, and three targets.
fn shared_case() -> RuleTest {
    let files = [
        ("/opt/app/lib/libsm90a.so", "libsm90a.so"),
        ("/opt/app/lib/libstale.so", "../verdict/libstale.so"),
        ("/opt/kernels/gemm.cubin", "abi8_sm100a_cu129.cubin"),
        ("/usr/lib/python3/site-packages/vllm/_C.so", "libmulti.so"),
        ("/usr/lib/python3/site-packages/vllm/_flash3.so", "libsm90a.so"),
        ("/opt/app/lib/libnocompress.so", "libnocompress.so"),
        ("/opt/app/lib/libdebug.so", "libdebug.so"),
        ("/opt/app/lib/libconcat.so", "libconcat.so"),
        ("/usr/local/cuda/lib64/libcudart.so.12.9.79", "libcudart.so.12.9.79"),
        ("/usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05", "libplain.so"),
    ];
    RuleTest {
        expect: "fire".into(),
        files: files.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect(),
        gpus: vec!["A100".into(), "H100".into(), "RTX 5090".into(), "B300".into()],
        driver: Some("580.82.07".into()),
        env: vec!["NVIDIA_REQUIRE_CUDA=cuda>=12.2".into()],
        ..Default::default()
    }
}

fn shared() -> (LintReport, Vec<rules::Rule>) {
    let rules = rules::load(&[]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let inv = image_for(&shared_case(), dir.path());
    let cfg = config::Config::default();
    let opts = LintOptions {
        rules: &rules,
        targets: targets_for(&shared_case()),
        fail_on: FailOn::Error,
        config: &cfg,
        extra_ignores: vec![],
        baseline: None,
        device: None,
    };
    (run(&inv, opts).unwrap(), rules)
}

/// Layer digests change whenever the fixtures are rebuilt; the rest is what the snapshot checks.
fn redact(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find("sha256:") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 7..];
        let n = after.bytes().take_while(u8::is_ascii_hexdigit).count();
        out.push_str(if n >= 12 { "sha256:<digest>" } else { "sha256:" });
        rest = &after[if n >= 12 { n } else { 0 }..];
    }
    out.push_str(rest);
    out.replace(env!("CARGO_PKG_VERSION"), "<version>")
}

#[test]
fn every_format_over_the_same_findings() {
    let (r, rules) = shared();
    let codes: std::collections::BTreeSet<&str> = r.findings.iter().map(|f| f.rule.as_str()).collect();
    for c in ["CL001", "CL002", "CL004", "CL006", "CL007", "CL008", "CL010", "CL011", "CL016"] {
        assert!(codes.contains(c), "shared findings should include {c}: {codes:?}");
    }
    insta::assert_snapshot!("text", redact(&report::text::render(&r, &RenderConfig::default()).unwrap()));
    insta::assert_snapshot!("json", redact(&report::json::render(&r, &RenderConfig::default()).unwrap()));
    insta::assert_snapshot!(
        "sarif",
        redact(&report::sarif::render(&r, &RenderConfig { rules: &rules, ..Default::default() }).unwrap())
    );
    insta::assert_snapshot!("junit", redact(&report::junit::render(&r, &RenderConfig::default()).unwrap()));
    insta::assert_snapshot!("markdown", redact(&report::markdown::render(&r, &RenderConfig::default()).unwrap()));
}

#[test]
fn sarif_is_valid_sarif_2_1_0() {
    let (r, rules) = shared();
    // The OASIS schema (as shipped in the serde-sarif crate) has a stray `]` in the pattern of
    // `run.language`, which a strict ECMA-262 check refuses; it is escaped, nothing else changes.
    let text = std::fs::read_to_string(root().join("tests/schemas/sarif-schema-2.1.0.json")).unwrap();
    let text = text.replace(r#"[a-zA-Z]{2}]?$"#, r#"[a-zA-Z]{2}\\]?$"#);
    let schema: serde_json::Value = serde_json::from_str(&text).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let doc: serde_json::Value = serde_json::from_str(
        &report::sarif::render(&r, &RenderConfig { rules: &rules, ..Default::default() }).unwrap(),
    )
    .unwrap();
    let errors: Vec<String> = validator.iter_errors(&doc).map(|e| format!("{e} at {}", e.instance_path())).collect();
    assert!(errors.is_empty(), "{errors:#?}");
    // GitHub code scanning needs a rule per result id, and a location per result.
    let run = &doc["runs"][0];
    let ids: Vec<&str> =
        run["tool"]["driver"]["rules"].as_array().unwrap().iter().map(|x| x["id"].as_str().unwrap()).collect();
    for res in run["results"].as_array().unwrap() {
        assert!(ids.contains(&res["ruleId"].as_str().unwrap()));
        assert!(res["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].is_string());
    }
    // A document the schema rejects is rejected (the check can fail).
    let mut bad = doc.clone();
    bad["runs"][0]["results"][0]["level"] = serde_json::json!("fatal");
    assert!(!validator.is_valid(&bad));
}

fn xmllint(xml: &str) -> std::process::Output {
    let xmllint = crate::scan::which("xmllint");
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("report.xml");
    std::fs::write(&p, xml).unwrap();
    std::process::Command::new(xmllint)
        .args(["--noout", "--schema"])
        .arg(root().join("tests/schemas/junit.xsd"))
        .arg(&p)
        .output()
        .unwrap()
}

#[test]
fn junit_is_valid_against_the_junit_xsd() {
    let (r, _) = shared();
    let xml = report::junit::render(&r, &RenderConfig::default()).unwrap();
    let out = xmllint(&xml);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(xml.contains("<failure"), "failing cases are failures");
    // The schema check can fail.
    let out = xmllint(&xml.replace("<testcase ", "<testcase bogus=\"1\" "));
    assert!(!out.status.success());
}

fn cudalint() -> Command {
    Command::cargo_bin("cudalint").unwrap()
}

fn demo() -> String {
    fixture("../demo/demo-image.tar").display().to_string()
}

#[test]
fn exit_codes_zero_one_two() {
    // Findings at or above --fail-on: 1.
    let out = cudalint().args(["scan", &demo(), "--gpu", "L4", "--quiet"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stdout));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("coverage") && text.contains("✗ 209") && text.contains("CL001"), "{text}");
    // Nothing at or above it: 0 (a clean library, and a target it runs on).
    let out = cudalint()
        .args(["scan", fixture("libzstd.so").to_str().unwrap(), "--gpu", "H100,A100", "--quiet"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    // --fail-on warning turns the info/warnings of that library into a failure? It has none.
    let out = cudalint()
        .args([
            "scan",
            fixture("../verdict/libbigptx.so").to_str().unwrap(),
            "--gpu",
            "RTX 5090",
            "--fail-on",
            "warning",
            "--quiet",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "ptx-jit-only is a warning");
    // The scan itself failing: 2, with the reason on stderr.
    let out = cudalint().args(["scan", "/nonexistent.tar"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = cudalint().args(["scan", &demo(), "--gpu", "H1000"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown GPU") && err.contains("H100"), "{err}");
}

#[test]
fn several_formats_in_one_run() {
    let d = tempfile::tempdir().unwrap();
    let sarif = d.path().join("out.sarif");
    let junit = d.path().join("out.xml");
    let out = cudalint()
        .args(["scan", &demo(), "--gpu", "H100,L4", "--quiet", "--format"])
        .arg(format!("sarif={}", sarif.display()))
        .arg("--format")
        .arg(format!("junit={}", junit.display()))
        .args(["--format", "markdown"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("## ❌ cudalint"));
    let s: serde_json::Value = serde_json::from_slice(&std::fs::read(&sarif).unwrap()).unwrap();
    assert_eq!(s["version"], "2.1.0");
    assert!(std::fs::read_to_string(&junit).unwrap().contains("<testsuites"));
}

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn config_file_targets_severity_disable_and_line_numbers() {
    let d = tempfile::tempdir().unwrap();
    let cfg = write(
        d.path(),
        "cudalint.toml",
        "fail-on = \"error\"\n[targets]\ngpus = [\"L4\"]\n[rules]\ndisable = [\"CL008\"]\n[rules.severity]\nno-kernel-image = \"warning\"\n",
    );
    let out = cudalint().args(["scan", &demo(), "--quiet", "--format", "json", "--config"]).arg(&cfg).output().unwrap();
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["targets"][0]["name"], "L4");
    let findings = r["findings"].as_array().unwrap();
    assert!(findings.iter().all(|f| f["rule"] != "CL008"), "disabled");
    assert!(findings.iter().filter(|f| f["rule"] == "CL001").all(|f| f["severity"] == "warning"));
    assert_eq!(out.status.code(), Some(0), "no error left");
    // A bad config points at its line.
    let bad = write(d.path(), "bad.toml", "[targets]\ngpus = [\"L4\"]\n[rules]\ndisable = [\"CL999\"]\n");
    let out = cudalint().args(["scan", &demo(), "--config"]).arg(&bad).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.toml:4:") && err.contains("CL999"), "{err}");
    let bad = write(d.path(), "bad2.toml", "[targets]\ngpus = \"L4\"\n");
    let err =
        String::from_utf8_lossy(&cudalint().args(["scan", &demo(), "--config"]).arg(&bad).output().unwrap().stderr)
            .into_owned();
    assert!(err.contains("bad2.toml:2:"), "{err}");
}

#[test]
fn ignores_with_reasons_and_expiry() {
    let d = tempfile::tempdir().unwrap();
    let ign = write(
        d.path(),
        "ignore.toml",
        "[[ignore]]\nrule = \"CL008\"\npath = \"/usr/lib/**\"\nreason = \"forward-compat package, on purpose\"\n\n\
         [[ignore]]\nrule = \"no-kernel-image\"\npath = \"/opt/app/lib/libsm100f.so\"\nreason = \"old\"\nexpires = \"2020-01-01\"\n",
    );
    let out = cudalint()
        .args(["scan", &demo(), "--gpu", "L4", "--quiet", "--format", "json", "--ignore-file"])
        .arg(&ign)
        .output()
        .unwrap();
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rules: Vec<&str> = r["findings"].as_array().unwrap().iter().map(|f| f["rule"].as_str().unwrap()).collect();
    assert!(!rules.contains(&"CL008"));
    assert!(
        r["findings"].as_array().unwrap().iter().any(|f| f["path"] == "/opt/app/lib/libsm100f.so"),
        "expired ignore no longer applies"
    );
    assert_eq!(r["suppressed"]["ignored"], 1);
    assert!(r["notes"].as_array().unwrap().iter().any(|n| n.as_str().unwrap().contains("expired")));
}

#[test]
fn baseline_reports_only_new_findings() {
    let d = tempfile::tempdir().unwrap();
    let base = d.path().join("baseline.json");
    let out =
        cudalint().args(["scan", &demo(), "--gpu", "L4", "--quiet", "--write-baseline"]).arg(&base).output().unwrap();
    // Recording is not gating: exit 0, and it says how many it recorded and how to use them.
    assert_eq!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("recorded 6 findings in ") && err.contains("--baseline"), "{err}");
    let out = cudalint().args(["scan", &demo(), "--gpu", "L4", "--quiet", "--baseline"]).arg(&base).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    // A new target brings new findings.
    let out = cudalint()
        .args(["scan", &demo(), "--gpu", "L4,H100", "--quiet", "--format", "json", "--baseline"])
        .arg(&base)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(r["findings"].as_array().unwrap().iter().all(|f| f["target"] == "H100"));
}

#[test]
fn targets_from_nvidia_smi_and_node_labels() {
    let d = tempfile::tempdir().unwrap();
    let csv = write(d.path(), "gpus.csv", "name, compute_cap, driver_version\nNVIDIA L4, 8.9, 470.82.01\n");
    let out = cudalint()
        .args([
            "scan",
            fixture("libcudart.so.12.9.79").to_str().unwrap(),
            "--quiet",
            "--format",
            "json",
            "--targets-from",
        ])
        .arg(&csv)
        .output()
        .unwrap();
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["targets"][0]["driver"], "470.82.01");
    assert!(r["findings"].as_array().unwrap().iter().any(|f| f["rule"] == "CL005"), "{r:#}");
    let nodes = write(
        d.path(),
        "nodes.json",
        r#"{"items": [{"metadata": {"name": "gpu-1", "labels": {"nvidia.com/gpu.compute.major": "9", "nvidia.com/gpu.compute.minor": "0",
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/cuda.driver.major": "580", "nvidia.com/cuda.driver.minor": "95",
        "nvidia.com/cuda.driver.rev": "05"}}}]}"#,
    );
    let out = cudalint()
        .args(["scan", &demo(), "--quiet", "--format", "json", "--targets-from"])
        .arg(&nodes)
        .output()
        .unwrap();
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["targets"][0]["name"], "NVIDIA H100 80GB HBM3", "named by its pool, as audit names it");
    assert_eq!(r["targets"][0]["driver_cuda"], "13.0");
}

#[test]
fn gpus_rules_and_explain_commands() {
    let out = cudalint().arg("gpus").output().unwrap();
    let t = String::from_utf8(out.stdout).unwrap();
    assert!(t.contains("H100") && t.contains("9.0") && t.contains("B300") && t.contains("10.3"));
    // One column each: the compute capability starts at the same place on every line.
    let h100 = t.lines().find(|l| l.starts_with("H100 ")).unwrap();
    assert!(
        t.lines().skip(1).all(|l| l.chars().nth(h100.find("9.0").unwrap()).is_some_and(|c| c.is_ascii_digit())),
        "{t}"
    );
    let out = cudalint().arg("rules").output().unwrap();
    assert_eq!(String::from_utf8(out.stdout).unwrap().lines().count(), rules::load(&[]).unwrap().len());
    let out = cudalint().args(["explain", "CL001"]).output().unwrap();
    let t = String::from_utf8(out.stdout).unwrap();
    assert!(t.contains("## What it does") && t.contains("## Fix"));
    assert_eq!(cudalint().args(["explain", "CL999"]).output().unwrap().status.code(), Some(2));
}

/// `scan ARGS` with text, Markdown, HTML and JSON written to `dir`: those four, in that order.
fn four_formats(dir: &Path, args: &[&str]) -> (String, String, String, serde_json::Value) {
    let names = ["text", "markdown", "html", "json"];
    let mut cmd = cudalint();
    cmd.arg("scan").args(args).arg("--quiet");
    for n in names {
        cmd.arg("--format").arg(format!("{n}={}", dir.join(n).display()));
    }
    let out = cmd.output().unwrap();
    assert_ne!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    let read = |n: &str| std::fs::read_to_string(dir.join(n)).unwrap();
    (read("text"), read("markdown"), read("html"), serde_json::from_str(&read("json")).unwrap())
}

/// Findings are ordered by severity, then by target in the order given (as the headlines and
/// the matrix are), then by path; in text as in JSON.
#[test]
fn findings_follow_the_targets_order() {
    let d = tempfile::tempdir().unwrap();
    let gpus = ["V100", "T4", "H100", "B300", "RTX 5090"];
    let (text, _, _, json) = four_formats(d.path(), &[&demo(), "--gpu", &gpus.join(",")]);
    let findings = json["findings"].as_array().unwrap();
    let key = |f: &serde_json::Value| {
        let severity = ["error", "warning", "info"].iter().position(|s| f["severity"] == *s).unwrap();
        let target = f["target"].as_str().map(|t| gpus.iter().position(|g| *g == t).unwrap());
        (severity, target, f["path"].as_str().unwrap_or("").to_string())
    };
    let keys: Vec<_> = findings.iter().map(key).collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted, "JSON findings out of order");
    // Text shows the shown ones in the same order: the targets' first mentions follow --gpu.
    let mut seen: Vec<&str> = Vec::new();
    for l in text.lines().filter(|l| l.starts_with("error ")) {
        if let Some(t) = gpus.iter().find(|g| l.ends_with(&format!(" on {g}")))
            && !seen.contains(t)
        {
            seen.push(t);
        }
    }
    let given: Vec<&str> = gpus.iter().copied().filter(|g| seen.contains(g)).collect();
    assert!(seen.len() > 1 && seen == given, "{seen:?}\n{text}");
}

/// One mark per headline verdict in text, Markdown and HTML (✓ runs, ~ runs compiling PTX,
/// (✗) accepted, ✗ fails), each view's legend saying what the marks it uses mean; the HTML
/// header names the ignore file in use and labels the digest as the image's config.
#[test]
fn headline_marks_agree_across_formats() {
    let d = tempfile::tempdir().unwrap();
    let lib = d.path().join("rootfs/opt/lib");
    std::fs::create_dir_all(&lib).unwrap();
    std::fs::copy(fixture("../verdict/libbigptx.so"), lib.join("libbigptx.so")).unwrap();
    std::fs::copy(fixture("libmulti.so"), lib.join("libmulti.so")).unwrap();
    // V100 fails for CUDA 13's sake (CL019, CL001 folded into it): accepted once ignored.
    let ign = write(
        d.path(),
        "ignore.toml",
        "[[ignore]]\nrule = \"CL019\"\nreason = \"r\"\n\n[[ignore]]\nrule = \"CL001\"\ntarget = \"V100\"\nreason = \"r\"\n",
    );
    let image = format!("dir:{}", d.path().join("rootfs").display());
    let ign_arg = ign.display().to_string();
    // L4 runs, H100 compiles 1.2 MiB of PTX, T4 fails (sm_80+ only), V100 accepted.
    let (text, md, html, json) =
        four_formats(d.path(), &[&image, "--gpu", "L4,H100,T4,V100", "--ignore-file", &ign_arg]);
    let expected = [("L4", "runs", "✓"), ("H100", "runs-jit", "~"), ("T4", "fails", "✗"), ("V100", "accepted", "(✗)")];
    let heads = json["headlines"].as_array().unwrap();
    for (target, verdict, mark) in expected {
        let h = heads.iter().find(|h| h["target"] == target).unwrap();
        assert_eq!(h["verdict"], verdict, "{h}");
        let line = h["text"].as_str().unwrap();
        assert!(text.lines().any(|l| l == format!("{mark} {line}")), "text: {mark} {line}\n{text}");
        assert!(md.lines().any(|l| l == format!("- {mark} {line}")), "markdown: {mark} {line}\n{md}");
        assert!(
            html.contains(&format!(
                "data-target=\"{target}\" data-verdict=\"{verdict}\"><span class=\"mark\">{mark}</span>"
            )),
            "html: {target} {mark}"
        );
        // Each view's legend says what the mark means.
        let text_legend = text.lines().find(|l| l.starts_with("marks: ")).unwrap();
        assert!(text_legend.contains(&format!("{mark} ")), "{text_legend}");
        assert!(md.contains("<sub>marks: ") && md.contains(&format!("{mark} ")), "{md}");
        assert!(html.contains(&format!("data-for=\"target\" data-mark=\"{mark}\"")), "{html}");
    }
    assert!(text.contains("~ runs, compiling enough PTX at first use"), "{text}");
    // The HTML header: the policy files, and the image's config digest labelled as such.
    assert!(html.contains(&format!("<p id=\"policy\" class=\"muted\">policy: ignores {ign_arg}</p>")), "{html}");
    assert!(!html.contains(" · config <code>"), "{html}");
}

/// A package's per-GPU kernel set, loose cubins its library loads by file (flashinfer-cubin's
/// 10,560 in a vLLM stack), is one row per package in every view, JSON included, counting per
/// GPU the files for it (sm_80 runs on an L4, sm_90a on an H100). A lone cubin of no package is
/// still its own row.
#[test]
fn library_managed_kernel_sets_fold_into_one_row_per_package() {
    let d = tempfile::tempdir().unwrap();
    let site = d.path().join("rootfs/usr/lib/python3/site-packages");
    let cubins = [
        ("gemm/gemm_sm80.cubin", "abi7_sm80.cubin"),
        ("gemm/gemm_sm90a.cubin", "abi7_sm90a.cubin"),
        ("attn/attn_sm100f.cubin", "abi8_sm100f.cubin"),
        ("attn/attn_sm120.cubin", "abi8_sm120.cubin"),
    ];
    let mut record = String::from("kern/_C.so,,\n");
    for (path, f) in cubins {
        let to = site.join("kern/cubins").join(path);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(fixture(f), &to).unwrap();
        record.push_str(&format!("kern/cubins/{path},,\n"));
    }
    std::fs::copy(fixture("libmulti.so"), site.join("kern/_C.so")).unwrap();
    std::fs::create_dir_all(site.join("kern-1.0.dist-info")).unwrap();
    write(&site.join("kern-1.0.dist-info"), "RECORD", &record);
    write(&site.join("kern-1.0.dist-info"), "METADATA", "Metadata-Version: 2.1\nName: kern\nVersion: 1.0\n");
    let lone = d.path().join("rootfs/opt/kernels");
    std::fs::create_dir_all(&lone).unwrap();
    std::fs::copy(fixture("abi7_sm90a.cubin"), lone.join("one.cubin")).unwrap();

    let image = format!("dir:{}", d.path().join("rootfs").display());
    let (text, md, html, json) = four_formats(d.path(), &[&image, "--gpu", "L4,H100"]);
    let dir = "/usr/lib/python3/site-packages/kern/cubins/";
    let folded: Vec<&str> = text.lines().filter(|l| l.contains("kern/cubins")).collect();
    assert_eq!(folded.len(), 1, "{text}");
    assert!(folded[0].starts_with(&format!("{dir} (4 files, package kern)")), "{text}");
    assert_eq!(folded[0].matches("1 of 4 files").count(), 2, "{text}");
    assert!(text.lines().any(|l| l.starts_with("/opt/kernels/one.cubin ")), "a lone cubin keeps its row: {text}");
    assert!(md.contains(&format!("| `{dir}` (4 files, package kern) | 1 of 4 files | 1 of 4 files |")), "{md}");
    assert!(html.contains(&format!("data-path=\"{dir}\" data-files=\"4\"")), "{html}");
    assert!(html.contains("(4 files, package kern)"), "{html}");
    for (path, _) in cubins {
        for (name, view) in [("text", &text), ("markdown", &md), ("html", &html)] {
            assert!(!view.contains(path), "{name} lists {path}: {view}");
        }
    }
    // JSON: the set's one row with its counts and architectures, no row per file.
    let rows: Vec<&serde_json::Value> = json["matrix"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["path"].as_str().unwrap().contains("kern/cubins"))
        .collect();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["path"], dir);
    assert_eq!(rows[0]["kernel_set"]["files"], 4);
    assert_eq!(rows[0]["kernel_set"]["sass"], serde_json::json!(["sm_80", "sm_90a", "sm_100f", "sm_120"]));
    for c in rows[0]["cells"].as_array().unwrap() {
        assert_eq!(c["files"], serde_json::json!({"native": 1, "jit": 0, "of": 4}), "{c}");
    }
}

/// The run-time compiler checks that passed are one line in text and Markdown, from the same
/// evaluated checks HTML and JSON list: vLLM's Triton ptxas 13.5 serves H100 (passed) and not
/// V100 (a CL020 finding, so not on the line).
#[test]
fn passing_runtime_compiler_checks_show_in_text_and_markdown() {
    let site = "/usr/local/lib/python3.11/site-packages";
    let case = RuleTest {
        expect: "fire".into(),
        files: [(format!("{site}/triton/backends/nvidia/bin/ptxas"), "nvidia-bin2c-13.5".to_string())].into(),
        text: [
            (format!("{site}/triton-3.5.0.dist-info/RECORD"), "triton/backends/nvidia/bin/ptxas,,\n".to_string()),
            (format!("{site}/vllm-0.11.0.dist-info/RECORD"), "vllm/__init__.py,,\n".to_string()),
        ]
        .into(),
        gpus: vec!["H100".into(), "V100".into()],
        ..Default::default()
    };
    let rules = rules::load(&[]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let inv = image_for(&case, dir.path());
    let cfg = config::Config::default();
    let opts = LintOptions {
        rules: &rules,
        targets: targets_for(&case),
        fail_on: FailOn::Error,
        config: &cfg,
        extra_ignores: vec![],
        baseline: None,
        device: None,
    };
    let r = run(&inv, opts).unwrap();
    let passed: Vec<&str> = r.compiler_checks.iter().filter(|c| c.passed()).map(|c| c.target.as_str()).collect();
    assert_eq!(passed, ["H100"], "{:#?}", r.compiler_checks);
    assert!(r.findings.iter().any(|f| f.rule == "CL020" && f.target.as_deref() == Some("V100")));
    let text = report::text::render(&r, &RenderConfig::default()).unwrap();
    let md = report::markdown::render(&r, &RenderConfig::default()).unwrap();
    for (view, prefix) in [(&text, "✓ run-time compilers that serve their targets: "), (&md, "✅ run-time compilers")]
    {
        let lines: Vec<&str> = view.lines().filter(|l| l.starts_with(prefix)).collect();
        assert_eq!(lines.len(), 1, "one line: {view}");
        let l = lines[0];
        assert!(l.contains("vllm") && l.contains("ptxas 13.5") && l.contains(" for H100"), "{l}");
        assert!(!l.contains("V100"), "a failing check is a finding, not on the line: {l}");
    }
}

/// A target that fails with every binary native there (its driver is below the image's CUDA 13
/// floor) has its HTML column marked failing, its header and each of its cells; the same GPU
/// on a driver that runs the image is not. The cells keep their own class either way.
#[test]
fn a_failing_targets_html_column_is_marked_failing_though_its_cells_are_native() {
    let d = tempfile::tempdir().unwrap();
    let lib = d.path().join("rootfs/usr/lib");
    std::fs::create_dir_all(&lib).unwrap();
    std::fs::copy(fixture("../verdict/libstale.so"), lib.join("libstale.so")).unwrap();
    let image = format!("dir:{}", d.path().join("rootfs").display());
    for (driver, fails) in [("535.54.03", true), ("580.65.06", false)] {
        let out = d.path().join(driver);
        std::fs::create_dir_all(&out).unwrap();
        let (_, _, html, json) = four_formats(&out, &[&image, "--gpu", "L4", "--driver", driver]);
        assert_eq!(json["headlines"][0]["verdict"] == "fails", fails, "{}", json["headlines"]);
        assert_eq!(json["matrix"][0]["cells"][0]["class"], "native");
        let head = html.split("<th ").find(|t| t.starts_with("data-target=\"L4\"")).expect("L4's column header");
        assert_eq!(head.contains(" class=\"fails\""), fails, "{head}");
        let cells: Vec<&str> =
            html.split("<td ").filter(|t| t.starts_with("class=\"cell ") && t.contains("data-target=\"L4\"")).collect();
        assert_eq!(cells.len(), 1, "{html}");
        for c in cells {
            assert!(c.starts_with("class=\"cell v-native"), "{c}");
            assert_eq!(c.contains(" col-fails"), fails, "{c}");
        }
    }
}
