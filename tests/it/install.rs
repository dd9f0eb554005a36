//! Install paths: shell completions and the man page generated from the clap definitions, the
//! pip wheel (maturin `bin` bindings) installed in a fresh venv, the composite action's scan step
//! run as GitHub would run it, and a syntax check of the Dockerfile (docker itself is not run).

use std::path::Path;
use std::process::Command as Std;

use assert_cmd::Command;

use crate::scan::which;
use crate::util::root;

fn cudalint(args: &[&str]) -> String {
    let out = Command::cargo_bin("cudalint").unwrap().args(args).output().unwrap();
    assert!(out.status.success(), "cudalint {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn bash_completion_is_valid_bash() {
    let dir = tempfile::tempdir().unwrap();
    let script = cudalint(&["completions", "bash"]);
    for word in ["scan", "registry", "completions", "--gpu", "--enrich", "cyclonedx", "html"] {
        assert!(script.contains(word), "completion lacks {word}");
    }
    let f = dir.path().join("cudalint.bash");
    std::fs::write(&f, &script).unwrap();
    let out = Std::new(which("bash")).arg("-n").arg(&f).output().unwrap();
    assert!(out.status.success(), "bash -n: {}", String::from_utf8_lossy(&out.stderr));
    // Broken bash is refused by the same check.
    std::fs::write(&f, script.replacen("then", "thn", 1)).unwrap();
    assert!(!Std::new(which("bash")).arg("-n").arg(&f).output().unwrap().status.success());
    // Every shell clap_complete knows is accepted.
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        assert!(cudalint(&["completions", shell]).contains("cudalint"));
    }
}

#[test]
fn man_page_renders_without_warnings() {
    let dir = tempfile::tempdir().unwrap();
    let page = cudalint(&["man"]);
    assert!(page.contains(".TH cudalint 1"), "roff header: {}", &page[..page.len().min(200)]);
    let f = dir.path().join("cudalint.1");
    std::fs::write(&f, &page).unwrap();
    let out = Std::new(which("groff")).args(["-man", "-Tutf8", "-ww", "-rLL=100n"]).arg(&f).output().unwrap();
    assert!(out.status.success());
    assert!(out.stderr.is_empty(), "groff warnings: {}", String::from_utf8_lossy(&out.stderr));
    // grotty emphasises by overstriking (`S\bS`): keep the last character of each.
    let raw = String::from_utf8_lossy(&out.stdout);
    let mut text = String::new();
    for c in raw.chars() {
        if c == '\u{8}' {
            text.pop();
        } else {
            text.push(c);
        }
    }
    for s in ["cudalint", "SYNOPSIS", "SUBCOMMANDS", "completions", "scan"] {
        assert!(text.contains(s), "rendered man page lacks {s}");
    }
}

/// The pip install path: build the wheel (release; the build reuses target/), install it into a
/// fresh venv, run `cudalint --version` and the README's demo scan from the venv.
#[test]
fn wheel_installs_into_a_venv_and_scans_the_demo() {
    let maturin = which("maturin");
    let dir = tempfile::tempdir().unwrap();
    let wheels = dir.path().join("wheels");
    let out = Std::new(maturin)
        .current_dir(root())
        .args(["build", "--release", "--locked", "--quiet", "--out"])
        .arg(&wheels)
        .env("CARGO_TARGET_DIR", root().join("target"))
        .output()
        .unwrap();
    assert!(out.status.success(), "maturin build: {}", String::from_utf8_lossy(&out.stderr));
    let wheel = std::fs::read_dir(&wheels)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "whl"))
        .expect("a wheel");
    let name = wheel.file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with(&format!("cudalint-{}-py3-none-", env!("CARGO_PKG_VERSION"))), "{name}");

    let venv = dir.path().join("venv");
    let out = Std::new(which("python3")).args(["-m", "venv"]).arg(&venv).output().unwrap();
    assert!(
        out.status.success(),
        "python3 -m venv (Debian: apt-get install python3-venv): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Std::new(venv.join("bin/pip")).args(["install", "--no-index", "--quiet"]).arg(&wheel).output().unwrap();
    assert!(out.status.success(), "pip install: {}", String::from_utf8_lossy(&out.stderr));
    let bin = venv.join("bin/cudalint");
    assert!(bin.is_file(), "the wheel puts cudalint in the venv's bin/");
    let v = Std::new(&bin).arg("--version").output().unwrap();
    assert_eq!(String::from_utf8_lossy(&v.stdout).trim(), format!("cudalint {}", env!("CARGO_PKG_VERSION")));
    let scan = Std::new(&bin)
        .current_dir(root())
        .args(["scan", "fixtures/demo/demo-image.tar", "--gpu", "H100,L4", "--quiet"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&scan.stdout);
    assert_eq!(scan.status.code(), Some(1), "{stdout}{}", String::from_utf8_lossy(&scan.stderr));
    assert!(stdout.contains("no-kernel-image") && stdout.contains("FAILED"), "{stdout}");
}

/// The action's scan step (scripts/action-scan.sh, which action.yml runs) with GitHub's
/// environment: SARIF and Markdown written, the summary appended, the exit code as an output.
#[test]
fn action_scan_step_writes_sarif_summary_and_exit_code() {
    let action = std::fs::read_to_string(root().join("action.yml")).unwrap();
    for s in ["using: composite", "scripts/action-scan.sh", "github/codeql-action/upload-sarif", "fail-on:", "gpus:"] {
        assert!(action.contains(s), "action.yml lacks {s}");
    }
    let dir = tempfile::tempdir().unwrap();
    let (summary, output) = (dir.path().join("summary.md"), dir.path().join("output"));
    let bin = assert_cmd::cargo::cargo_bin("cudalint");
    let run_with = |image: &str, gpus: &str| {
        std::fs::write(&summary, "").unwrap();
        std::fs::write(&output, "").unwrap();
        Std::new(which("bash"))
            .arg(root().join("scripts/action-scan.sh"))
            .current_dir(root())
            .env("INPUT_IMAGE", image)
            .env("INPUT_GPUS", gpus)
            .env_remove("CUDALINT_GPU")
            .env("INPUT_DRIVER", "535.104.05")
            .env("INPUT_FAIL_ON", "error")
            .env("RUNNER_TEMP", dir.path())
            .env("GITHUB_STEP_SUMMARY", &summary)
            .env("GITHUB_OUTPUT", &output)
            .env("CUDALINT", &bin)
            .output()
            .unwrap()
    };
    let run = |image: &str| run_with(image, "H100,L4");
    let out = run("fixtures/demo/demo-image.tar");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read_to_string(&output).unwrap(), "exit-code=1\n");
    let sarif: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("cudalint.sarif")).unwrap()).unwrap();
    assert!(!sarif["runs"][0]["results"].as_array().unwrap().is_empty());
    assert!(std::fs::read_to_string(&summary).unwrap().starts_with("## ❌ cudalint"));
    // A scan that cannot finish: exit 2, no SARIF to upload, and the summary says so.
    let out = run("fixtures/demo/does-not-exist.tar");
    assert!(out.status.success());
    assert_eq!(std::fs::read_to_string(&output).unwrap(), "exit-code=2\n");
    assert!(!dir.path().join("cudalint.sarif").exists());
    let said = std::fs::read_to_string(&summary).unwrap();
    assert!(said.contains("did not finish (exit 2)") && said.contains("does-not-exist.tar"), "{said}");
    // An empty `gpus` input and no cudalint.toml: the gate judged nothing, so it is not green;
    // the summary says why, not only that it stopped.
    let out = run_with("fixtures/demo/demo-image.tar", "");
    assert!(out.status.success());
    assert_eq!(std::fs::read_to_string(&output).unwrap(), "exit-code=2\n");
    let said = std::fs::read_to_string(&summary).unwrap();
    assert!(said.contains("no targets") && said.contains("CUDALINT_GPU"), "{said}");
    // An image input that reads as a flag is an image name: `--help` (which exits 0 and writes
    // no report) never passes the gate.
    for flag in ["--help", "--version", "-V"] {
        let out = run(flag);
        assert!(out.status.success());
        assert_eq!(std::fs::read_to_string(&output).unwrap(), "exit-code=2\n", "{flag}");
        let said = std::fs::read_to_string(&summary).unwrap();
        assert!(said.contains("did not finish (exit 2)"), "{flag}: {said}");
    }
}

/// The Action's inputs left empty defer to cudalint.toml, `fail-on` as `gpus` and `driver` do
/// (an input defaulting to `error` beat the config's `fail-on = "never"`); a Markdown report over
/// GitHub's 1 MiB step-summary limit is cut, saying where the whole one is.
#[test]
fn action_inputs_left_empty_defer_to_the_config_and_big_summaries_are_cut() {
    let action: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(root().join("action.yml")).unwrap()).unwrap();
    for input in ["gpus", "driver", "fail-on"] {
        assert_eq!(action["inputs"][input]["default"].as_str(), Some(""), "{input}");
    }
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("job");
    std::fs::create_dir_all(job.join(".git")).unwrap();
    std::fs::write(job.join("cudalint.toml"), "fail-on = \"never\"\n[targets]\ngpus = [\"L4\"]\n").unwrap();
    let (summary, output) = (dir.path().join("summary.md"), dir.path().join("output"));
    let run = |cudalint: &std::path::Path| {
        std::fs::write(&summary, "").unwrap();
        std::fs::write(&output, "").unwrap();
        Std::new(which("bash"))
            .arg(root().join("scripts/action-scan.sh"))
            .current_dir(&job)
            .env("INPUT_IMAGE", root().join("fixtures/demo/demo-image.tar"))
            .env("INPUT_GPUS", "")
            .env("INPUT_DRIVER", "")
            .env("INPUT_FAIL_ON", "")
            .env_remove("CUDALINT_GPU")
            .env_remove("CUDALINT_FAIL_ON")
            .env("RUNNER_TEMP", dir.path())
            .env("GITHUB_STEP_SUMMARY", &summary)
            .env("GITHUB_OUTPUT", &output)
            .env("CUDALINT", cudalint)
            .output()
            .unwrap()
    };
    let out = run(&assert_cmd::cargo::cargo_bin("cudalint"));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // L4 fails on the demo, and the config says report only.
    assert_eq!(std::fs::read_to_string(&output).unwrap(), "exit-code=0\n");
    assert!(std::fs::read_to_string(&summary).unwrap().contains("L4: fails"));
    // A stand-in for cudalint that writes a 3 MB Markdown report (what the script does with it
    // is under test, not the report).
    let fake = dir.path().join("fake-cudalint");
    std::fs::write(
        &fake,
        "#!/usr/bin/env bash\nfor a in \"$@\"; do case $a in markdown=*) md=${a#markdown=};; esac; done\n\
         for i in $(seq 30000); do echo \"| row $i | a hundred bytes of table cell text, give or take, to fill the report up |\"; done >\"$md\"\nexit 1\n",
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = run(&fake);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let said = std::fs::read_to_string(&summary).unwrap();
    assert!(said.len() < 1 << 20 && said.len() > 900_000, "{}", said.len());
    assert!(
        said.ends_with(&format!("the whole one is `{}/cudalint.md`\n", dir.path().display())),
        "{}",
        &said[said.len() - 200..]
    );
    // Cut at a line's end, not inside a row.
    let last_row = said.lines().rev().find(|l| l.starts_with('|')).unwrap();
    assert!(last_row.ends_with(" |"), "{last_row}");
}

/// Docker cannot run here: check the Dockerfile's shape (known instructions, a musl build stage,
/// a scratch final stage copying from it) and that the build context leaves out target/.
#[test]
fn dockerfile_is_a_static_musl_build() {
    let text = std::fs::read_to_string(root().join("Dockerfile")).unwrap();
    let known = ["FROM", "RUN", "COPY", "WORKDIR", "ENV", "ENTRYPOINT", "ARG", "LABEL", "USER", "CMD"];
    let mut stages = Vec::new();
    let mut continued = false;
    for line in text.lines() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        if !continued {
            let word = l.split_whitespace().next().unwrap();
            assert!(known.contains(&word), "unknown instruction: {line}");
            if word == "FROM" {
                stages.push(l.split_whitespace().nth(3).unwrap_or("").to_string());
            }
            if let Some(from) = l.strip_prefix("COPY --from=") {
                let stage = from.split_whitespace().next().unwrap();
                assert!(stages.iter().any(|s| s == stage), "COPY from an unknown stage: {line}");
            }
        }
        continued = l.ends_with('\\');
    }
    assert!(!continued, "the last instruction ends in a line continuation");
    assert_eq!(stages.len(), 2);
    assert!(text.contains("alpine") && text.contains("x86_64-unknown-linux-musl") && text.contains("FROM scratch"));
    let ignore = std::fs::read_to_string(root().join(".dockerignore")).unwrap();
    assert!(ignore.lines().any(|l| l.trim() == "target/"));
    assert!(Path::new(&root().join("Cargo.lock")).exists(), "--locked needs Cargo.lock in the context");
}
