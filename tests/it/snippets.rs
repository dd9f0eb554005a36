//! The README's and docs' shell examples, run: every `cudalint` command in a `sh`, `bash` or
//! `yaml` fenced block is either executed here against the demo image (in a scratch directory
//! where `image.tar`, `my-image.tar` and `sbom.cdx.json` stand for the user's files, and
//! `docker save IMAGE |` reads the demo archive) or listed in [`NOT_RUN`] with the test that
//! covers it instead. Each report a command writes must parse as the format it names, and an
//! output block that follows a command in the README must be what the command prints.

use std::path::{Path, PathBuf};
use std::process::Command as Std;

use crate::scan::which;
use crate::util::{root, run as util_run};

/// Commands that cannot run here, by a substring, with the reason and the test that covers them.
const NOT_RUN: &[(&str, &str)] = &[
    ("docker build", "needs Docker; tests/it/install.rs checks the Dockerfile's shape"),
    ("docker run", "needs Docker; tests/it/install.rs checks the Dockerfile's shape"),
    (".venv/bin/", "builds the wheel; tests/it/install.rs installs it into a venv and scans the demo"),
    ("cargo install", "installs from the network; tests/it/install.rs builds the same wheel/binary"),
    ("completions bash >", "writes into $HOME; tests/it/install.rs checks every shell's script"),
    ("cudalint man --dir ~", "writes into $HOME; tests/it/install.rs renders the pages with groff"),
    ("registry.example.com", "needs a registry; tests/it/registry.rs runs it on a loopback registry"),
    ("kubectl", "needs a cluster; tests/it/audit.rs audits fixtures/k8s"),
    ("docker-daemon:", "needs a Docker daemon; tests/it/local_stores.rs runs Debian's dockerd"),
    ("podman:", "needs Podman's API service; tests/it/local_stores.rs runs it on a podman build"),
    ("containerd:", "needs containerd; tests/it/local_stores.rs runs it after `ctr images import`"),
    ("scan myimg:ci", "asks the local stores; tests/it/local_stores.rs reads a bare name from Podman and Docker"),
    ("cudalint audit", "pulls the manifests' images; tests/it/audit.rs maps them with --image"),
    ("--on-device", "needs a GPU; scripts/device-check.sh"),
    ("cudalint serve", "runs until stopped; tests/it/serve.rs runs it behind a loopback registry's notifications"),
    ("syft ", "needs Syft; fixtures/sbom holds an SBOM it wrote, which the --enrich example reads"),
    ("dir:.venv", "needs a venv with NVIDIA wheels; tests/it/cyclonedx.rs enriches cyclonedx-py's SBOM of one"),
    (
        "$RUNNER_TEMP/base/uv.lock",
        "needs a checkout's base branch; tests/it/lock.rs diffs two uv.lock files the real uv writes",
    ),
];

/// A fenced block: its info string, first line number and text.
struct Block {
    lang: String,
    line: usize,
    body: String,
}

fn blocks(text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for (i, l) in text.lines().enumerate() {
        let fence = l.trim_start().strip_prefix("```");
        match (&mut open, fence) {
            (None, Some(info)) => {
                open = Some(Block { lang: info.trim().to_string(), line: i + 2, body: String::new() })
            }
            (Some(_), Some(_)) => out.push(open.take().unwrap()),
            (Some(b), None) => {
                b.body.push_str(l);
                b.body.push('\n');
            }
            (None, None) => {}
        }
    }
    out
}

/// The logical lines of a shell block (continuations joined) that run cudalint. In YAML, the
/// shell lines are those after `run:`/`- ` that mention it.
fn commands(b: &Block) -> Vec<String> {
    let mut logical = Vec::new();
    let mut cur = String::new();
    for l in b.body.lines() {
        let l = l.trim();
        let l = if b.lang.starts_with("yaml") {
            l.trim_start_matches("- ").trim_start_matches("run:").trim_start_matches("- ").trim()
        } else {
            l
        };
        match l.strip_suffix('\\') {
            Some(head) => cur.push_str(head),
            None => {
                cur.push_str(l);
                logical.push(std::mem::take(&mut cur));
            }
        }
    }
    logical
        .into_iter()
        .map(|l| match l.split_once(" # ") {
            Some((cmd, _)) => cmd.trim().to_string(),
            None => l.trim().to_string(),
        })
        .filter(|l| !l.starts_with('#') && is_run(l))
        .collect()
}

/// Runs the binary: a word is `cudalint` (or a path to it, or `cargo run`), and the line is not
/// a YAML key naming the project (`name: cudalint`).
fn is_run(l: &str) -> bool {
    let w: Vec<&str> = l.split_whitespace().collect();
    let key = w.first().is_some_and(|f| f.ends_with(':'));
    !key && (w.iter().any(|x| *x == "cudalint" || x.ends_with("/cudalint")) || l.contains("cargo run --release --"))
}

/// The command as the test runs it: the user's image is the demo image.
fn localize(cmd: &str) -> String {
    let mut c = cmd.replace("cargo run --release -- ", "cudalint ");
    if let Some(at) = c.find("docker save ") {
        let bar = c[at..].find('|').map(|p| at + p).expect("docker save pipes into cudalint");
        c.replace_range(at..bar, "cat image.tar ");
    }
    c.replace("my-image:tag", "image.tar")
}

/// The reports a command writes, with their format: `--format FMT=PATH`, or `--output PATH`
/// beside one `--format FMT` (text when none), or `> PATH` after a `cudalint` command.
fn written(cmd: &str) -> Vec<(String, PathBuf)> {
    let w: Vec<&str> = cmd.split_whitespace().collect();
    let mut out = Vec::new();
    let mut bare = Vec::new();
    let mut output = None;
    for (i, x) in w.iter().enumerate() {
        let next = w.get(i + 1).map(|s| s.trim_matches('"').to_string());
        match *x {
            "--format" => match next.as_deref().and_then(|n| n.split_once('=')) {
                Some((f, p)) => out.push((f.to_string(), PathBuf::from(p))),
                None => bare.push(next.unwrap_or_default()),
            },
            "--output" | "-o" => output = next,
            _ => {}
        }
    }
    if let Some(o) = output {
        let f = match (bare.as_slice(), cmd.contains("--enrich")) {
            ([f], _) => f.clone(),
            ([], true) => "cyclonedx".into(),
            ([], false) => "text".into(),
            _ => panic!("{cmd}: --output beside several bare --format is refused by cudalint"),
        };
        out.push((f, PathBuf::from(o)));
    }
    out
}

/// `text` parses as `format` says.
fn check_format(format: &str, path: &Path, text: &str) {
    let json = || -> serde_json::Value {
        serde_json::from_str(text).unwrap_or_else(|e| panic!("{}: not JSON ({e})", path.display()))
    };
    let what = path.display();
    match format {
        "json" | "inventory" => {
            assert!(json()["schema"].as_str().is_some_and(|s| s.starts_with("cudalint.")), "{what}")
        }
        "sarif" => {
            let v = json();
            assert_eq!(v["version"], "2.1.0", "{what}");
            assert!(v["runs"][0]["results"].is_array(), "{what}");
        }
        "cyclonedx" => assert_eq!(json()["bomFormat"], "CycloneDX", "{what}"),
        "junit" => {
            assert!(text.contains("<testsuites"), "{what}");
            let out = Std::new(which("xmllint")).arg("--noout").arg(path).output().unwrap();
            assert!(out.status.success(), "{what}: {}", String::from_utf8_lossy(&out.stderr));
        }
        "markdown" => assert!(text.starts_with("## "), "{what}: {}", &text[..text.len().min(80)]),
        "html" => assert!(text.starts_with("<!DOCTYPE html>"), "{what}"),
        "text" => assert!(text.contains("error(s)"), "{what}: {text}"),
        f => panic!("{what}: no check for format {f}"),
    }
}

/// An output block that follows a command: each line as printed, `…` standing for any lines.
fn matches_output(expected: &str, actual: &str) -> bool {
    fn go(e: &[&str], a: &[&str]) -> bool {
        match e.split_first() {
            None => a.is_empty(),
            Some((&"…", rest)) | Some((&"...", rest)) => (0..=a.len()).any(|k| go(rest, &a[k..])),
            Some((line, rest)) => a.first().is_some_and(|x| x.trim_end() == line.trim_end()) && go(rest, &a[1..]),
        }
    }
    let e: Vec<&str> = expected.lines().collect();
    let a: Vec<&str> = actual.lines().collect();
    go(&e, &a)
}

fn scratch() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let demo = root().join("fixtures/demo/demo-image.tar");
    std::os::unix::fs::symlink(root().join("fixtures"), dir.path().join("fixtures")).unwrap();
    for name in ["image.tar", "my-image.tar", "img.tar"] {
        std::os::unix::fs::symlink(&demo, dir.path().join(name)).unwrap();
    }
    std::fs::copy(root().join("fixtures/sbom/syft-demo-image.cdx.json"), dir.path().join("sbom.cdx.json")).unwrap();
    dir
}

#[test]
fn every_documented_command_runs_and_writes_what_it_claims() {
    let bin = assert_cmd::cargo::cargo_bin("cudalint");
    let path = format!("{}:{}", bin.parent().unwrap().display(), std::env::var("PATH").unwrap_or_default());
    let mut docs = vec![root().join("README.md")];
    let mut stack = vec![root().join("docs")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "md") {
                docs.push(p);
            }
        }
    }
    docs.sort();
    let (mut ran, mut skipped, mut compared) = (0, 0, 0);
    for doc in &docs {
        let text = std::fs::read_to_string(doc).unwrap();
        let all = blocks(&text);
        for (bi, b) in all.iter().enumerate() {
            if !matches!(b.lang.as_str(), "sh" | "bash" | "yaml" | "yml") {
                continue;
            }
            let cmds = commands(b);
            for cmd in &cmds {
                let at = format!("{}:{}: {cmd}", doc.strip_prefix(root()).unwrap().display(), b.line);
                if let Some((_, why)) = NOT_RUN.iter().find(|(s, _)| cmd.contains(s)) {
                    assert!(!why.is_empty());
                    skipped += 1;
                    continue;
                }
                let dir = scratch();
                let run = localize(cmd);
                let out = Std::new(which("bash"))
                    .args(["-c", &format!("set -o pipefail; {run}")])
                    .current_dir(dir.path())
                    .env("PATH", &path)
                    .env("NO_COLOR", "1")
                    .env_remove("CUDALINT_GPU")
                    .env_remove("CUDALINT_FAIL_ON")
                    .output()
                    .unwrap();
                let stdout = String::from_utf8_lossy(&out.stdout);
                let stderr = String::from_utf8_lossy(&out.stderr);
                assert!(matches!(out.status.code(), Some(0 | 1)), "{at}\nran: {run}\n{stderr}");
                for (format, file) in written(&run) {
                    let p = dir.path().join(&file);
                    let body = std::fs::read_to_string(&p)
                        .unwrap_or_else(|e| panic!("{at}: did not write {}: {e}\n{stderr}", file.display()));
                    check_format(&format, &p, &body);
                }
                // The README's output block right after a one-command block is this output.
                if cmds.len() == 1
                    && let Some(next) = all.get(bi + 1).filter(|n| n.lang.is_empty() && !n.body.starts_with("$ "))
                    && next.line <= b.line + b.body.lines().count() + 4
                {
                    assert!(
                        matches_output(&next.body, &stdout),
                        "{at}\nthe README shows:\n{}\nit prints:\n{stdout}",
                        next.body
                    );
                    compared += 1;
                }
                ran += 1;
            }
        }
    }
    // The walk found the examples: the demo scan, the reports, the CI snippets.
    assert!(ran >= 6, "ran {ran} documented commands (skipped {skipped})");
    assert!(compared >= 1, "no README output block was compared with its command's output");
}

#[test]
fn the_extraction_finds_commands_and_files() {
    let b = Block {
        lang: "yaml".into(),
        line: 1,
        body: "- run: |\n    docker save img:1 | cudalint scan - --gpu H100 \\\n      --format sarif=a.sarif --format text\nname: cudalint\n".into(),
    };
    let cmds = commands(&b);
    assert_eq!(cmds, ["docker save img:1 | cudalint scan - --gpu H100 --format sarif=a.sarif --format text"]);
    assert_eq!(localize(&cmds[0]), "cat image.tar | cudalint scan - --gpu H100 --format sarif=a.sarif --format text");
    assert_eq!(written(&cmds[0]), [("sarif".to_string(), PathBuf::from("a.sarif"))]);
    assert_eq!(
        written("cudalint scan x --format html --output r.html"),
        [("html".to_string(), PathBuf::from("r.html"))]
    );
    assert!(matches_output("a\n…\nd\n", "a\nb\nc\nd\n"));
    assert!(!matches_output("a\nd\n", "a\nb\nd\n"));
}

/// The README's first screen: how to test it, quick and full, and what each subcommand does.
const FIRST_SCREEN: usize = 50;

#[test]
fn the_readme_first_screen_has_the_test_commands_and_every_subcommand() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let top_text = readme.lines().take(FIRST_SCREEN).collect::<Vec<_>>().join("\n") + "\n";
    // The commands, as lines of a shell block (a comment may follow): the quick tier that
    // docs/contributing.md names, and the whole suite.
    let shell: Vec<String> = blocks(&top_text)
        .iter()
        .filter(|b| b.lang == "sh")
        .flat_map(|b| b.body.lines().map(|l| l.split(" #").next().unwrap().trim().to_string()).collect::<Vec<_>>())
        .collect();
    for cmd in ["cargo test", "scripts/test.sh"] {
        assert!(
            shell.iter().any(|l| l == cmd),
            "`{cmd}` is not in a sh block of the README's first {FIRST_SCREEN} lines"
        );
    }
    let contributing = std::fs::read_to_string(root().join("docs/contributing.md")).unwrap();
    assert!(contributing.contains("a plain `cargo test` runs the quick one"), "docs/contributing.md's quick tier");
    // CI runs the README's full command.
    let ci = std::fs::read_to_string(root().join(".ci/run")).unwrap();
    assert!(ci.lines().any(|l| l.trim() == "scripts/test.sh"), ".ci/run does not run scripts/test.sh:\n{ci}");
    // The command table, whole, within the first screen.
    let lines: Vec<&str> = readme.lines().collect();
    let heading = lines.iter().position(|l| *l == "## Subcommands").expect("a Subcommands section");
    let first = heading + lines[heading..].iter().position(|l| l.starts_with('|')).expect("its table");
    let end = first + lines[first..].iter().take_while(|l| l.starts_with('|')).count();
    assert!(end <= FIRST_SCREEN, "the command table ends at line {end}, past the first {FIRST_SCREEN}");
    // Header and separator, then one row per command: its name in the first cell's backticks.
    let rows: Vec<&str> = lines[first + 2..end].iter().filter_map(|l| l.split('`').nth(1)).collect();
    assert_eq!(rows.len(), end - first - 2, "a row without a `command`");
    // Every subcommand `cudalint --help` lists has its row, and every row is a subcommand.
    let help = util_run(Std::new(assert_cmd::cargo::cargo_bin("cudalint")).arg("--help"));
    let listed: Vec<&str> = help
        .lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| !l.is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect();
    assert!(listed.len() >= 15, "{help}");
    let mut a = listed.clone();
    let mut b = rows.clone();
    a.sort();
    b.sort();
    assert_eq!(a, b, "`cudalint --help`'s subcommands against the README's table");
}
