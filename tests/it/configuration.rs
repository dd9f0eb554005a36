//! A gate that cannot be misconfigured into passing: no targets, nothing read, or reports paired
//! with the wrong files all stop the run (exit 2) with a message saying what to do; the config
//! and ignore files are found from a subdirectory up to the repository root and named in the
//! report; `--fail-on never` reports without failing; listings never fail the gate.

use std::path::Path;

use assert_cmd::Command;

use crate::util::{fixture, root};

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn cli(dir: &Path, args: &[&str]) -> Run {
    let o = Command::cargo_bin("cudalint")
        .unwrap()
        .current_dir(dir)
        .env_remove("CUDALINT_GPU")
        .env_remove("CUDALINT_DRIVER")
        .env_remove("CUDALINT_FAIL_ON")
        .env_remove("CUDALINT_CONFIG")
        .env_remove("CUDALINT_FORMAT")
        .env_remove("CUDALINT_OUTPUT")
        .args(args)
        .output()
        .unwrap();
    Run {
        code: o.status.code(),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

fn demo() -> String {
    root().join("fixtures/demo/demo-image.tar").display().to_string()
}

/// A repository checkout: `.git`, and a subdirectory a CI job might run from.
fn repo() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join(".git")).unwrap();
    std::fs::create_dir_all(d.path().join("ci/job")).unwrap();
    d
}

#[test]
fn no_targets_stops_the_gate_and_names_the_ways_to_give_them() {
    let d = repo();
    let r = cli(d.path(), &["scan", &demo(), "--quiet"]);
    assert_eq!(r.code, Some(2), "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.is_empty(), "no report from a run that judged nothing: {}", r.stdout);
    for way in ["--gpu", "CUDALINT_GPU", "cudalint.toml", "[targets]", "cudalint support"] {
        assert!(r.stderr.contains(way), "{way}: {}", r.stderr);
    }
    // The same image with a target: judged, and it fails (exit 1), so the stop above was not
    // the image's doing.
    let r = cli(d.path(), &["scan", &demo(), "--quiet", "--gpu", "L4"]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    // The environment names targets as a CI job sets them.
    let o = Command::cargo_bin("cudalint")
        .unwrap()
        .current_dir(d.path())
        .env("CUDALINT_GPU", "L4")
        .env_remove("CUDALINT_FAIL_ON")
        .args(["scan", &demo(), "--quiet"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn listings_need_no_targets_and_never_fail_the_gate() {
    let d = repo();
    for format in ["inventory", "listing", "cyclonedx"] {
        let r = cli(d.path(), &["scan", &demo(), "--quiet", "--format", format]);
        assert_eq!(r.code, Some(0), "{format}: {}", r.stderr);
        assert!(!r.stdout.is_empty());
    }
    // With targets the SBOM still never fails the gate, though the verdict inside says "fail".
    let r = cli(d.path(), &["scan", &demo(), "--quiet", "--gpu", "L4", "--format", "cyclonedx"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.stdout.contains("\"cudalint:gate\"") && r.stdout.contains("\"fail\""), "{}", r.stdout);
    // A verdict beside the listing: the gate applies again.
    let sbom = d.path().join("bom.json");
    let r = cli(
        d.path(),
        &[
            "scan",
            &demo(),
            "--quiet",
            "--gpu",
            "L4",
            "--format",
            &format!("cyclonedx={}", sbom.display()),
            "--format",
            "text",
        ],
    );
    assert_eq!(r.code, Some(1), "{}", r.stderr);
}

#[test]
fn a_scan_that_reads_no_elf_file_judges_nothing_and_says_so() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("rootfs");
    std::fs::create_dir_all(root.join("app")).unwrap();
    std::fs::write(root.join("app/main.py"), "print('hi')\n").unwrap();
    std::fs::write(root.join("app/README"), "docs\n").unwrap();
    let r = cli(d.path(), &["scan", &format!("dir:{}", root.display()), "--quiet", "--gpu", "H100"]);
    assert_eq!(r.code, Some(2), "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("read 2 files, none of them ELF"), "{}", r.stderr);
    // One ELF file without device code is something judged: a CPU-only image passes.
    std::fs::copy(fixture("libplain.so"), root.join("app/libplain.so")).unwrap();
    let r = cli(d.path(), &["scan", &format!("dir:{}", root.display()), "--quiet", "--gpu", "H100"]);
    assert_eq!(r.code, Some(0), "{}{}", r.stdout, r.stderr);
}

#[test]
fn each_report_names_its_file_and_the_ambiguous_pairing_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let (sarif, md) = (d.path().join("c.sarif"), d.path().join("c.md"));
    let r = cli(
        d.path(),
        &[
            "scan",
            &demo(),
            "--quiet",
            "--gpu",
            "H100,L4",
            "--format",
            "text",
            "--format",
            &format!("sarif={}", sarif.display()),
            "--format",
            &format!("markdown={}", md.display()),
        ],
    );
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(r.stdout.contains("fails at error: FAILED"), "text on standard output: {}", r.stdout);
    let s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&sarif).unwrap()).unwrap();
    assert_eq!(s["version"], "2.1.0");
    assert!(std::fs::read_to_string(&md).unwrap().starts_with("## ❌ cudalint"));
    // The README's old GitHub snippet: --output beside several formats was paired by position
    // and wrote text into the .sarif file; now it is refused, and nothing is written.
    let wrong = d.path().join("wrong.sarif");
    let r = cli(
        d.path(),
        &[
            "scan",
            &demo(),
            "--quiet",
            "--gpu",
            "H100",
            "--format",
            "text",
            "--format",
            "sarif",
            "--output",
            wrong.to_str().unwrap(),
        ],
    );
    assert_eq!(r.code, Some(2));
    assert!(r.stderr.contains("--format sarif=cudalint.sarif"), "{}", r.stderr);
    assert!(!wrong.exists());
    // Two reports for standard output, or two for one file.
    let r = cli(d.path(), &["scan", &demo(), "--gpu", "H100", "--format", "json", "--format", "text"]);
    assert!(r.code == Some(2) && r.stderr.contains("only one report can go to standard output"), "{}", r.stderr);
    let f = format!("json={}", d.path().join("x").display());
    let r = cli(d.path(), &["scan", &demo(), "--gpu", "H100", "--format", &f, "--format", &f.replace("json", "sarif")]);
    assert!(r.code == Some(2) && r.stderr.contains("two reports would be written to"), "{}", r.stderr);
    // A single report still takes -o; an empty path after '=' is refused by the parser.
    let one = d.path().join("one.json");
    let r =
        cli(d.path(), &["scan", &demo(), "--quiet", "--gpu", "H100", "--format", "json", "-o", one.to_str().unwrap()]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    assert!(std::fs::read_to_string(&one).unwrap().contains("cudalint.lint/"));
    let r = cli(d.path(), &["scan", &demo(), "--gpu", "H100", "--format", "json="]);
    assert!(r.code == Some(2) && r.stderr.contains("no file after '='"), "{}", r.stderr);
}

#[test]
fn config_and_ignore_file_are_found_up_to_the_repository_root_and_named() {
    let d = repo();
    let job = d.path().join("ci/job");
    std::fs::write(d.path().join("cudalint.toml"), "[targets]\ngpus = [\"L4\"]\n").unwrap();
    // Trivy's form, with the reason as a comment.
    std::fs::write(
        d.path().join(".cudalintignore"),
        "# the demo's sm_90a library is never scheduled on L4\nCL001 /opt/app/lib/libsm90a.so target=L4\nCL007   # PTX left out on purpose\n",
    )
    .unwrap();
    let r = cli(&job, &["scan", &demo(), "--quiet"]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    let policy = r.stdout.lines().find(|l| l.starts_with("policy: ")).unwrap_or_else(|| panic!("{}", r.stdout));
    let top = d.path().display().to_string();
    assert!(
        policy.contains(&format!("config {top}/cudalint.toml"))
            && policy.contains(&format!("ignores {top}/.cudalintignore")),
        "{policy}"
    );
    assert!(r.stdout.contains("targets: L4 (8.9)"), "{}", r.stdout);
    // Both entries applied: the CL001 of libsm90a.so on L4 and both CL007s.
    assert!(r.stdout.contains("(3 ignored, 0 in the baseline)"), "{}", r.stdout);
    assert!(!r.stdout.contains("CL007"), "{}", r.stdout);
    // Above the repository root nothing is looked for: a cudalint.toml in the parent of the
    // checkout does not apply.
    let outer = tempfile::tempdir().unwrap();
    std::fs::write(outer.path().join("cudalint.toml"), "[targets]\ngpus = [\"L4\"]\n").unwrap();
    let inner = outer.path().join("checkout");
    std::fs::create_dir_all(inner.join(".git")).unwrap();
    let r = cli(&inner, &["scan", &demo(), "--quiet"]);
    assert_eq!(r.code, Some(2), "{}", r.stdout);
    assert!(r.stderr.contains("no cudalint.toml found"), "{}", r.stderr);
    // Outside a repository only the working directory is looked in: a file in a parent (here
    // the same planted one) does not apply.
    let plain = outer.path().join("plain/sub");
    std::fs::create_dir_all(&plain).unwrap();
    let r = cli(&plain, &["scan", &demo(), "--quiet"]);
    assert_eq!(r.code, Some(2), "{}", r.stdout);
    assert!(r.stderr.contains("no cudalint.toml found"), "{}", r.stderr);
    // One any user could have written (a world-writable directory, as /tmp is) is named and
    // refused, not applied and not skipped in silence.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(outer.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    let r = cli(outer.path(), &["scan", &demo(), "--quiet"]);
    assert_eq!(r.code, Some(2), "{}", r.stdout);
    assert!(r.stderr.contains("cudalint.toml was found but not read"), "{}", r.stderr);
    assert!(r.stderr.contains("writable by any user (mode 1777)"), "{}", r.stderr);
    // Named with its flag, it is used.
    let named = outer.path().join("cudalint.toml");
    let r = cli(outer.path(), &["scan", &demo(), "--quiet", "--config", named.to_str().unwrap()]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    // The memory budget from the config: a size, refused at its line when it is none.
    std::fs::write(&named, "memory = \"lots\"\n[targets]\ngpus = [\"L4\"]\n").unwrap();
    let r = cli(outer.path(), &["scan", &demo(), "--quiet", "--config", named.to_str().unwrap()]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("memory") && r.stderr.contains("a size such as 256M"), "{}", r.stderr);
    std::fs::write(&named, "memory = \"16M\"\n[targets]\ngpus = [\"L4\"]\n").unwrap();
    let r = cli(outer.path(), &["scan", &demo(), "--quiet", "--config", named.to_str().unwrap()]);
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(r.stderr.contains("at least 32 MiB"), "{}", r.stderr);
    std::fs::write(&named, "memory = \"512M\"\n[targets]\ngpus = [\"L4\"]\n").unwrap();
    let r = cli(outer.path(), &["scan", &demo(), "--quiet", "--config", named.to_str().unwrap()]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
    // -v names them on stderr too.
    let r = cli(&job, &["scan", &demo(), "--quiet", "-v", "--format", "json"]);
    assert!(r.stderr.contains("cudalint: config "), "{}", r.stderr);
    let j: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(j["policy"]["config"], format!("{top}/cudalint.toml"));
}

#[test]
fn an_ignore_line_holding_only_a_path_ignores_every_rule_there() {
    let d = repo();
    // On H100 the demo fails only through libsm100f.so (CL001, CL007) and the shipped libcuda
    // (CL008); a path alone ignores every rule on its files, nothing else.
    std::fs::write(
        d.path().join(".cudalintignore"),
        "/opt/app/lib/libsm100f.so  # built for B200 only, never scheduled on H100\n/usr/lib/*/libcuda.so.*\n",
    )
    .unwrap();
    let r = cli(d.path(), &["scan", &demo(), "--quiet", "--gpu", "H100,L4"]);
    assert_eq!(r.code, Some(1), "L4 still fails on libsm90a.so: {}{}", r.stdout, r.stderr);
    let findings: Vec<&str> = r.stdout.lines().filter(|l| l.starts_with("error ") || l.starts_with("info ")).collect();
    assert!(findings.iter().all(|l| !l.contains("libsm100f.so")), "{findings:?}");
    assert!(findings.iter().any(|l| l.contains("CL001") && l.contains("libsm90a.so on L4")), "{findings:?}");
    // With both paths ignored, nothing else fails on H100.
    let r = cli(d.path(), &["scan", &demo(), "--quiet", "--gpu", "H100"]);
    assert_eq!(r.code, Some(0), "H100 fails on nothing else: {}{}", r.stdout, r.stderr);
    // A bare `*` would switch the gate off: refused at its line.
    std::fs::write(d.path().join(".cudalintignore"), "* \n").unwrap();
    let r = cli(d.path(), &["scan", &demo(), "--quiet", "--gpu", "H100"]);
    assert_eq!(r.code, Some(2));
    assert!(r.stderr.contains(".cudalintignore:1: an ignore of every rule needs a path or a target"), "{}", r.stderr);
}

#[test]
fn a_wrong_value_is_named_by_the_flag_or_variable_that_gave_it() {
    let d = repo();
    let cases: &[(&[&str], &str)] = &[
        (&["--gpu", "H100", "--config", "missing.toml"], "--config missing.toml: no such file"),
        (&["--gpu", "H100", "--rules", "nowhere"], "--rules nowhere: no such file"),
        (&["--gpu", "H100", "--ignore-file", "nope"], "--ignore-file nope: no such file"),
        (&["--gpu", "H100", "--baseline", "."], "--baseline .: a directory"),
        (&["--targets-from", "nodes.json"], "--targets-from nodes.json: no such file"),
        (&["--gpu", "H100", "--driver", "garbage"], "--driver (or CUDALINT_DRIVER): \"garbage\" is not a driver"),
    ];
    let image = demo();
    for (args, said) in cases {
        let mut all = vec!["scan", &image, "--quiet"];
        all.extend_from_slice(args);
        let r = cli(d.path(), &all);
        assert_eq!(r.code, Some(2), "{args:?}");
        assert!(r.stderr.contains(said), "{args:?}: {}", r.stderr);
    }
    let o = Command::cargo_bin("cudalint")
        .unwrap()
        .current_dir(d.path())
        .env("CUDALINT_DRIVER", "garbage")
        .args(["scan", &demo(), "--quiet", "--gpu", "H100"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&o.stderr).contains("CUDALINT_DRIVER"), "{o:?}");
}

#[test]
fn config_errors_say_the_path_came_from_the_config() {
    let d = repo();
    std::fs::write(d.path().join("cudalint.toml"), "fail-on = \"Error\"\n\n[rules]\ndirs = [\"ci/cudalint-rules\"]\n")
        .unwrap();
    let r = cli(d.path(), &["scan", &demo(), "--quiet", "--gpu", "H100"]);
    assert_eq!(r.code, Some(2));
    assert!(
        r.stderr.contains("cudalint.toml:4: [rules] dirs: \"ci/cudalint-rules\" is ")
            && r.stderr.contains("relative to its directory"),
        "{}",
        r.stderr
    );
    // `fail-on = "Error"` was accepted (any case): once the directory exists the run is judged.
    std::fs::create_dir_all(d.path().join("ci/cudalint-rules")).unwrap();
    let r = cli(d.path(), &["scan", &demo(), "--quiet", "--gpu", "H100"]);
    assert_eq!(r.code, Some(1), "{}", r.stderr);
}

#[test]
fn every_unknown_config_key_is_named_in_one_error() {
    let d = repo();
    // Three typos in three tables: one run names them all, each where it is and what was meant.
    std::fs::write(
        d.path().join("cudalint.toml"),
        "fail_on = \"warning\"\n\n[targets]\ngpu = [\"H100\"]\n\n[rules]\ndisable = [\"CL007\"]\nseverty = {}\n",
    )
    .unwrap();
    let r = cli(d.path(), &["scan", &demo(), "--quiet", "--gpu", "H100"]);
    assert_eq!(r.code, Some(2), "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.is_empty(), "{}", r.stdout);
    for said in [
        "cudalint.toml:1: 3 unknown keys: ",
        "fail_on (line 1; did you mean fail-on?)",
        "targets.gpu (line 4; did you mean gpus?)",
        "rules.severty (line 8; did you mean severity?)",
    ] {
        assert!(r.stderr.contains(said), "{said}: {}", r.stderr);
    }
}

#[test]
fn fail_on_never_reports_without_failing() {
    let d = tempfile::tempdir().unwrap();
    for word in ["never", "none", "NONE"] {
        let r = cli(d.path(), &["scan", &demo(), "--quiet", "--gpu", "L4", "--fail-on", word]);
        assert_eq!(r.code, Some(0), "{word}: {}", r.stderr);
        assert!(r.stdout.contains("fail-on never: reported, not gated") && r.stdout.contains("CL001"), "{}", r.stdout);
        // The GPU still does not run the image: the headline says so.
        assert!(r.stdout.contains("✗ L4: fails"), "{}", r.stdout);
    }
    let r = cli(d.path(), &["scan", &demo(), "--quiet", "--gpu", "L4", "--fail-on", "Warning"]);
    assert_eq!(r.code, Some(1));
    let r = cli(d.path(), &["scan", &demo(), "--quiet", "--gpu", "L4", "--fail-on", "sometimes"]);
    assert_eq!(r.code, Some(2));
}

#[test]
fn each_subcommand_has_the_man_page_the_main_page_names() {
    let d = tempfile::tempdir().unwrap();
    let r = cli(d.path(), &["man", "--dir", d.path().join("man1").to_str().unwrap()]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let main = std::fs::read_to_string(d.path().join("man1/cudalint.1")).unwrap();
    // Every page the main page refers to as cudalint-NAME(1) exists and is titled so.
    let mut named = 0;
    for (i, _) in main.match_indices("cudalint\\-") {
        let name: String = main[i + 10..].chars().take_while(|c| c.is_ascii_lowercase() || *c == '-').collect();
        let page = d.path().join(format!("man1/cudalint-{name}.1"));
        let text = std::fs::read_to_string(&page).unwrap_or_else(|e| panic!("{}: {e}", page.display()));
        assert!(text.contains(&format!(".TH cudalint-{name} 1")), "{}", &text[..200.min(text.len())]);
        named += 1;
    }
    assert!(named >= 10, "the main page names {named} subcommand pages");
    let scan = cli(d.path(), &["man", "scan"]);
    assert!(scan.stdout.contains("\\-\\-gpu"), "{}", &scan.stdout[..300.min(scan.stdout.len())]);
    assert_eq!(cli(d.path(), &["man", "nope"]).code, Some(2));
}
