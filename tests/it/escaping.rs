//! Names an image chooses (file names, env values) cannot forge report lines in any format:
//! terminal escapes and newlines come out as visible escapes, Markdown cells stay cells, SARIF
//! URIs are percent-encoded, XML stays well formed.

use assert_cmd::Command;
use cudalint::lint::rules::{self, FailOn, RuleTest};
use cudalint::lint::{LintOptions, config, run};
use cudalint::report::{self, RenderConfig};

use crate::rules::{image_for, targets_for};
use crate::scan::which;

/// Erases the line, returns to its start and prints "passed"; then a newline, a table cell end,
/// a code span and an HTML tag.
const EVIL: &str = "/opt/app/lib\x1b[2K\rpassed\n| x`y <b>\u{9b}31m.so";
const EVIL_ESCAPED: &str = "lib\\x1b[2K\\rpassed\\n| x`y <b>\\x9b31m.so";

fn hostile() -> (cudalint::lint::LintReport, Vec<rules::Rule>, cudalint::image::ImageReport) {
    let case = RuleTest {
        expect: "fire".into(),
        files: [(EVIL.to_string(), "libsm90a.so".to_string())].into_iter().collect(),
        gpus: vec!["A100".into()],
        driver: Some("535.104.05".into()),
        env: vec!["NVIDIA_REQUIRE_CUDA=cuda>=12.2 \x1b]0;owned\x07\rpassed".into()],
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
    (run(&inv, opts).unwrap(), rules, inv)
}

fn no_controls(what: &str, s: &str) {
    let bad: Vec<char> = s.chars().filter(|c| c.is_control() && *c != '\n').collect();
    assert!(bad.is_empty(), "{what} has control characters {bad:?}:\n{s}");
}

#[test]
fn text_reports_show_hostile_names_escaped() {
    let (r, _, inv) = hostile();
    assert!(r.failed, "the sm_90a library fails on an A100");
    assert!(r.findings.iter().any(|f| f.path.as_deref() == Some(EVIL)), "a finding names the hostile file");
    for (what, out) in [
        ("lint text", report::text::render(&r, &RenderConfig::default()).unwrap()),
        ("scan text", cudalint::report::scan::text(&inv)),
    ] {
        no_controls(what, &out);
        assert!(out.contains(EVIL_ESCAPED), "{what}:\n{out}");
        assert!(!out.lines().any(|l| l.trim_start().starts_with("passed")), "{what} has a forged line:\n{out}");
    }
    let text = report::text::render(&r, &RenderConfig::default()).unwrap();
    assert!(text.trim_end().lines().last().unwrap().ends_with("FAILED"), "{text}");
    // The env value reaches the report only escaped (where a rule quotes it).
    assert!(!text.contains("\x07"));
}

/// `|` not preceded by a backslash.
fn cells(line: &str) -> usize {
    let b = line.as_bytes();
    (0..b.len()).filter(|&i| b[i] == b'|' && (i == 0 || b[i - 1] != b'\\')).count()
}

#[test]
fn markdown_cells_hold_hostile_names() {
    let (r, _, _) = hostile();
    let md = report::markdown::render(&r, &RenderConfig::default()).unwrap();
    no_controls("markdown", &md);
    // Outside code spans (where it is literal text), no HTML tag opens.
    let outside: String = md.split("``").step_by(2).collect();
    assert!(!outside.contains("<b>"), "HTML passes through:\n{md}");
    let mut tables = 0;
    let mut header = 0;
    for l in md.lines() {
        if l.starts_with("|---") {
            tables += 1;
            continue;
        }
        if !l.starts_with('|') {
            header = 0;
            continue;
        }
        if header == 0 {
            header = cells(l);
        } else {
            assert_eq!(cells(l), header, "a row with another number of cells:\n{l}\n{md}");
        }
    }
    assert!(tables >= 2, "{md}");
    // The file's row exists, with the name in one code span.
    let row = md.lines().find(|l| l.contains("passed\\n")).unwrap_or_else(|| panic!("{md}"));
    assert!(row.contains("``") || row.contains("\\`"), "{row}");
}

fn percent_decode(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            out.push(u8::from_str_radix(&s[i + 1..i + 3], 16).unwrap());
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

#[test]
fn sarif_uris_are_percent_encoded_and_junit_and_json_stay_well_formed() {
    let (r, rules, _) = hostile();
    let sarif: serde_json::Value = serde_json::from_str(
        &report::sarif::render(&r, &RenderConfig { rules: &rules, ..Default::default() }).unwrap(),
    )
    .unwrap();
    let uris: Vec<String> = sarif["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].as_str().unwrap().to_string())
        .collect();
    assert!(!uris.is_empty());
    for u in &uris {
        assert!(u.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~/%".contains(&b)), "{u}");
    }
    assert!(
        uris.iter().any(|u| percent_decode(u) == EVIL.trim_start_matches('/').as_bytes()),
        "the URI decodes to the file's path: {uris:?}"
    );
    let xml = report::junit::render(&r, &RenderConfig::default()).unwrap();
    no_controls("junit", &xml);
    assert!(xml.contains("lib\\x1b[2K\\rpassed\\n| x`y &lt;b"), "{xml}");
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("junit.xml");
    std::fs::write(&p, &xml).unwrap();
    let o = std::process::Command::new(which("xmllint")).arg("--noout").arg(&p).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let json = report::json::render(&r, &RenderConfig::default()).unwrap();
    assert!(!json.contains('\x1b') && !json.contains('\r'));
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert!(v["findings"].as_array().unwrap().iter().any(|f| f["path"] == EVIL), "JSON keeps the exact name");
}

#[test]
fn errors_naming_hostile_paths_are_escaped() {
    let o = Command::cargo_bin("cudalint")
        .unwrap()
        .args(["scan", "oci:/nonexistent\x1b[2K\rpassed", "--quiet", "--gpu", "H100"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    no_controls("stderr", &err);
    assert!(err.contains("\\x1b[2K\\rpassed"), "{err}");
}

/// A raw control character (C0 but tab and newline, DEL, C1): what a terminal obeys when the
/// page is printed or `cat`, and what no HTML view should be handed as is.
fn raw_controls(s: &str) -> Vec<char> {
    s.chars().filter(|&c| (c < ' ' && c != '\n' && c != '\t') || ('\x7f'..='\u{9f}').contains(&c)).collect()
}

#[test]
fn html_reports_show_hostile_names_escaped() {
    let (r, _, _) = hostile();
    let scan = report::html::render(&r, &RenderConfig::default()).unwrap();
    let support = cudalint::lint::support::from_report("hostile", &r, None);
    let support = report::support::render(report::support::SupportFormat::Html, &support, Some(&r)).unwrap();
    for (what, page) in [("scan html", &scan), ("support html", &support)] {
        assert!(raw_controls(page).is_empty(), "{what} has raw control characters {:?}", raw_controls(page));
        assert!(page.contains("lib\\x1b[2K\\rpassed\\n| x`y &lt;b&gt;\\x9b31m.so"), "{what}:\n{page}");
        assert!(!page.contains("<b>"), "{what}: a tag from a file name:\n{page}");
    }
}

/// ESC, CR, a newline, C1 controls, DEL and other C0 bytes, a script tag and a Markdown link:
/// one file name (no `/`, so it stays one name).
const HOSTILE_HTML: &str =
    "usr/lib/lib\x1b[2K\rpassed\n<script>alert(1)](javascript:alert(1))\u{85}\u{9b}31m\x7f\x01\x0b\x0c.so";
const HOSTILE_HTML_SHOWN: &str =
    "lib\\x1b[2K\\rpassed\\n&lt;script&gt;alert(1)](javascript:alert(1))\\x85\\x9b31m\\x7f\\x01\\x0b\\x0c.so";

#[test]
fn scan_and_support_html_of_an_image_with_hostile_names_hold_no_raw_control() {
    use crate::images::{Comp, Ent, Image, oci_layout, tar};
    let dir = tempfile::tempdir().unwrap();
    // libstale.so (SASS for sm_75 to sm_90): fails on a V100, so the scan report has a finding.
    let img = Image::new(vec![(
        tar(&[Ent::File(HOSTILE_HTML, crate::util::read_fixture("../verdict/libstale.so"))]),
        Comp::Gzip,
    )]);
    oci_layout(dir.path(), &[&img]);
    let image = format!("oci:{}", dir.path().display());
    for (what, args, code) in [
        ("scan html", &["scan", &image, "--gpu", "V100", "--format", "html"][..], 1),
        ("support html", &["support", &image, "--format", "html"][..], 0),
    ] {
        let o = Command::cargo_bin("cudalint").unwrap().args(args).arg("--quiet").output().unwrap();
        assert_eq!(o.status.code(), Some(code), "{what}: {}", String::from_utf8_lossy(&o.stderr));
        let page = String::from_utf8(o.stdout).unwrap();
        assert!(raw_controls(&page).is_empty(), "{what} has raw control characters {:?}", raw_controls(&page));
        assert!(page.contains(HOSTILE_HTML_SHOWN), "{what} does not name the file:\n{page}");
        assert!(!page.to_ascii_lowercase().contains("<script"), "{what}: a script tag from a file name:\n{page}");
    }
}
