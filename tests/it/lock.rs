//! Lockfiles as images (src/image/lock.rs): a PEP 751 `pylock.toml`, a hashed requirements file,
//! `uv.lock` and pip's `--report`, each judged as the image its wheels make. Wheels come from the
//! lock's paths or from a PEP 503 index served on loopback by `python3 -m http.server` (a static
//! directory, as the simplest real index is), checked against the lock's sha256 before they are
//! read, and cached by hash. fixtures/lock is built by scripts/build-lock-fixtures.py from real
//! nvcc-built libraries; the slow tier also runs lockfiles the real uv and pip write, and the stock
//! torch closure against its built image.

use std::path::{Path, PathBuf};
use std::process::{Child, Command as Std, Stdio};

use assert_cmd::Command;

use crate::util::root;

/// A PEP 503 index of `wheels` under `dir`, served on a loopback port until dropped.
pub struct Index {
    child: Child,
    pub url: String,
}

impl Drop for Index {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn normalize(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars().map(|c| c.to_ascii_lowercase()) {
        if matches!(c, '-' | '_' | '.') {
            if !out.ends_with('-') {
                out.push('-');
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn sha256(p: &Path) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(std::fs::read(p).unwrap()))
}

impl Index {
    pub fn serve(dir: &Path, wheels: &[PathBuf]) -> Index {
        std::fs::create_dir_all(dir.join("files")).unwrap();
        for w in wheels {
            let file = w.file_name().unwrap().to_string_lossy().into_owned();
            // A wheel's project ends at its first dash, an sdist's at its last.
            let project = match file.strip_suffix(".tar.gz") {
                Some(stem) => normalize(stem.rsplit_once('-').unwrap().0),
                None => normalize(file.split('-').next().unwrap()),
            };
            let page = dir.join("simple").join(&project);
            std::fs::create_dir_all(&page).unwrap();
            std::os::unix::fs::symlink(w, dir.join("files").join(&file)).unwrap();
            let link = format!("<a href=\"../../files/{file}#sha256={}\">{file}</a>\n", sha256(w));
            let index = page.join("index.html");
            let mut html = std::fs::read_to_string(&index).unwrap_or_default();
            html.push_str(&link);
            std::fs::write(index, html).unwrap();
        }
        let mut child = Std::new("python3")
            .args(["-u", "-m", "http.server", "--bind", "127.0.0.1", "0", "--directory"])
            .arg(dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 runs a loopback index (python3 -m http.server)");
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().unwrap()), &mut line).unwrap();
        // "Serving HTTP on 127.0.0.1 port 41234 (http://127.0.0.1:41234/) ..."
        let port = line.split(" port ").nth(1).and_then(|r| r.split_whitespace().next()).expect(&line).to_string();
        Index { child, url: format!("http://127.0.0.1:{port}/simple") }
    }
}

fn cudalint(dir: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let o = Command::cargo_bin("cudalint").unwrap().current_dir(dir).args(args).output().unwrap();
    (o.status.code(), String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

fn json(s: &str) -> serde_json::Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("{e}: {s}"))
}

fn headlines(r: &serde_json::Value) -> Vec<String> {
    r["headlines"].as_array().unwrap().iter().map(|h| h["text"].as_str().unwrap().to_string()).collect()
}

/// fixtures/lock copied into a scratch directory (lockfiles name their wheels relative to it).
fn fixtures() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let src = root().join("fixtures/lock");
    for e in walk(&src) {
        let rel = e.strip_prefix(&src).unwrap();
        std::fs::create_dir_all(d.path().join(rel).parent().unwrap()).unwrap();
        std::fs::copy(&e, d.path().join(rel)).unwrap();
    }
    d
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() { out.extend(walk(&p)) } else { out.push(p) }
    }
    out
}

fn wheel(d: &Path, version: &str) -> PathBuf {
    d.join(format!("wheels/demo_kernels-{version}-py3-none-manylinux_2_28_x86_64.whl"))
}

/// `dir/NAME-VERSION.tar.gz`: a source distribution that uv and pip resolve without building or
/// fetching anything, named as setuptools before 69 named them (the name's dashes kept). uv reads
/// its static metadata (`pyproject.toml`'s `[project]`); pip asks its in-tree PEP 517 backend,
/// which needs nothing installed, for its metadata. It stands in for a package whose build
/// compiles CUDA code: nothing here builds it.
fn sdist(dir: &Path, name: &str, version: &str) -> PathBuf {
    use crate::images::{Comp, Ent, compress, tar};
    let stem = format!("{name}-{version}");
    let dist_info = format!("{}-{version}.dist-info", name.replace('-', "_"));
    let metadata = format!("Metadata-Version: 2.2\nName: {name}\nVersion: {version}\n");
    let files = [
        ("PKG-INFO", metadata.clone()),
        (
            "pyproject.toml",
            format!(
                "[build-system]\nrequires = []\nbuild-backend = \"backend\"\nbackend-path = [\".\"]\n\n[project]\nname = \"{name}\"\nversion = \"{version}\"\n"
            ),
        ),
        (
            "backend.py",
            format!(
                "import os\n\ndef prepare_metadata_for_build_wheel(d, config_settings=None):\n    os.makedirs(os.path.join(d, {dist_info:?}))\n    with open(os.path.join(d, {dist_info:?}, 'METADATA'), 'w') as f:\n        f.write({metadata:?})\n    return {dist_info:?}\n\ndef build_wheel(d, config_settings=None, metadata_directory=None):\n    raise RuntimeError('a stand-in: not built')\n"
            ),
        ),
    ];
    let entries: Vec<Ent> = files
        .iter()
        .map(|(f, text)| Ent::File(Box::leak(format!("{stem}/{f}").into_boxed_str()), text.as_bytes().to_vec()))
        .collect();
    std::fs::create_dir_all(dir).unwrap();
    let p = dir.join(format!("{stem}.tar.gz"));
    std::fs::write(&p, compress(&tar(&entries), Comp::Gzip)).unwrap();
    p
}

/// Each finding as `RULE TARGET: MESSAGE => FIX` (`image` for an image-wide one), sorted.
fn findings(r: &serde_json::Value) -> Vec<String> {
    let mut f: Vec<String> = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let target = f["target"].as_str().unwrap_or("image");
            format!("{} {target}: {} => {}", f["rule"].as_str().unwrap(), f["message"], f["fix"])
        })
        .collect();
    f.sort();
    f
}

#[test]
fn a_pylock_and_a_hashed_requirements_file_are_judged_as_their_installed_wheels() {
    let d = fixtures();
    let gpus = ["--gpu", "H100,L4,B200", "--quiet", "--no-cache", "--format", "json", "--python", "3.11"];
    let (code, out, err) = cudalint(d.path(), &[&["scan", "pylock.toml"][..], &gpus].concat());
    assert_eq!(code, Some(0), "{err}");
    let r = json(&out);
    assert_eq!(r["image"]["source"], "lock");
    assert_eq!(r["image"]["platform"], "linux/amd64");
    assert_eq!(
        headlines(&r),
        ["H100: runs (native)", "L4: runs (native)", "B200: runs (PTX JIT for 1 binary, 2.4 KiB: milliseconds)"]
    );
    // Laid out as pip installs it for the Python asked for.
    assert_eq!(r["matrix"][0]["path"], "/usr/local/lib/python3.11/site-packages/demo_kernels/libmulti.so");
    let (code, out2, err) = cudalint(d.path(), &[&["scan", "requirements.txt"][..], &gpus].concat());
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(headlines(&json(&out2)), headlines(&r));
    // The layer is the wheel: its digest is the wheel's sha256, its step the locked package.
    let (_, inv, _) = cudalint(d.path(), &["scan", "pylock.toml", "--format", "inventory", "--no-cache", "--quiet"]);
    let inv = json(&inv);
    let layer = &inv["image"]["layers"][0];
    assert_eq!(layer["digest"], format!("sha256:{}", sha256(&wheel(d.path(), "1.0.0"))));
    assert_eq!(layer["step"], "demo-kernels==1.0.0 (demo_kernels-1.0.0-py3-none-manylinux_2_28_x86_64.whl)");
    assert_eq!(inv["files"][0]["path"], "/usr/local/lib/python3.12/site-packages/demo_kernels/libmulti.so");
}

/// The pull-request check: a bump that drops GPUs fails `diff OLD NEW`.
#[test]
fn a_lock_bump_that_drops_gpus_fails_the_diff() {
    let d = fixtures();
    let (code, out, err) = cudalint(d.path(), &["diff", "pylock.toml", "pylock.next.toml", "--no-cache"]);
    assert_eq!(code, Some(1), "{out}{err}");
    let lost = out.lines().find(|l| l.starts_with("lost: ")).unwrap_or_else(|| panic!("{out}"));
    assert!(lost.contains("L4") && lost.contains("H100") && !lost.contains("B200"), "{lost}");
    let (code, _, err) = cudalint(d.path(), &["diff", "pylock.toml", "pylock.toml", "--no-cache"]);
    assert_eq!(code, Some(0), "{err}");
}

#[test]
fn a_wheel_that_is_not_what_the_lock_says_is_refused_unread() {
    let d = fixtures();
    let lock = std::fs::read_to_string(d.path().join("pylock.toml")).unwrap();
    let sha = sha256(&wheel(d.path(), "1.0.0"));
    let wrong: String = sha.chars().rev().collect();
    std::fs::write(d.path().join("pylock.toml"), lock.replace(&sha, &wrong)).unwrap();
    let (code, _, err) = cudalint(d.path(), &["scan", "pylock.toml", "--gpu", "L4", "--no-cache"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("demo-kernels 1.0.0: demo_kernels-1.0.0-py3-none-manylinux_2_28_x86_64.whl has sha256")
            && err.contains("not read as a wheel"),
        "{err}"
    );
    let size = std::fs::metadata(wheel(d.path(), "1.0.0")).unwrap().len();
    std::fs::write(d.path().join("pylock.toml"), lock.replace(&format!("size = {size}"), "size = 12")).unwrap();
    let (code, _, err) = cudalint(d.path(), &["scan", "pylock.toml", "--gpu", "L4", "--no-cache"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains(&format!("is {size} bytes, the lock says 12")), "{err}");
}

#[test]
fn requirements_from_a_loopback_index_are_fetched_once_and_judged_offline_from_the_cache() {
    let d = fixtures();
    let index = Index::serve(&d.path().join("index"), &[wheel(d.path(), "1.0.0")]);
    let sha = sha256(&wheel(d.path(), "1.0.0"));
    std::fs::write(
        d.path().join("requirements.lock.txt"),
        format!("--index-url {}\ndemo-kernels==1.0.0 --hash=sha256:{sha}\n", index.url),
    )
    .unwrap();
    let cache = d.path().join("cache");
    let c = cache.to_str().unwrap();
    let run = |format: &str| {
        let (code, out, err) = cudalint(
            d.path(),
            &["scan", "requirements.lock.txt", "--gpu", "T4", "--cache-dir", c, "--quiet", "--format", format],
        );
        assert!(code == Some(0), "{code:?} {err}");
        json(&out)
    };
    let size = std::fs::metadata(wheel(d.path(), "1.0.0")).unwrap().len();
    assert_eq!(run("inventory")["stats"]["downloaded_bytes"], size);
    assert!(cache.join(format!("wheels/{sha}.whl")).is_file());
    let first = headlines(&run("json"));
    drop(index);
    // The index is gone: the line's hash finds the cached wheel, nothing is downloaded.
    assert!(run("inventory")["stats"]["downloaded_bytes"].is_null());
    assert_eq!(headlines(&run("json")), first);
    assert_eq!(first, ["T4: runs (native)"]);
    // Without the cache, the stopped index is an error naming it.
    let (code, _, err) = cudalint(d.path(), &["scan", "requirements.lock.txt", "--gpu", "T4", "--no-cache"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("/simple/demo-kernels/"), "{err}");
}

#[test]
fn markers_pick_what_installs_and_sdists_are_named_not_passed_over() {
    let d = fixtures();
    let w = wheel(d.path(), "1.0.0");
    let (sha, size) = (sha256(&w), std::fs::metadata(&w).unwrap().len());
    let lock = format!(
        r#"lock-version = "1.0"
created-by = "test"

[[packages]]
name = "demo-kernels"
version = "1.0.0"
wheels = [{{ path = "wheels/{}", size = {size}, hashes = {{ sha256 = "{sha}" }} }}]

[[packages]]
name = "winonly"
version = "1.0"
marker = "sys_platform == 'win32'"
wheels = [{{ path = "wheels/absent-1.0-py3-none-win_amd64.whl", hashes = {{ sha256 = "{sha}" }} }}]

[[packages]]
name = "antlr4-python3-runtime"
version = "4.9.3"
sdist = {{ path = "sdists/antlr4-python3-runtime-4.9.3.tar.gz", hashes = {{ sha256 = "{sha}" }} }}
"#,
        w.file_name().unwrap().to_string_lossy()
    );
    std::fs::write(d.path().join("pylock.toml"), &lock).unwrap();
    let (code, out, err) =
        cudalint(d.path(), &["scan", "pylock.toml", "--gpu", "L4", "--no-cache", "--format", "json"]);
    assert_eq!(code, Some(0), "{err}");
    let r = json(&out);
    let f: Vec<&serde_json::Value> = r["findings"].as_array().unwrap().iter().collect();
    assert_eq!(f.len(), 1, "{r}");
    assert_eq!(f[0]["rule"], "CL026");
    assert!(f[0]["message"].as_str().unwrap().contains("antlr4-python3-runtime 4.9.3"), "{r}");
    // A package whose build compiles CUDA code, with no wheel here: an error naming its variable,
    // on the T4 only (its default list's sm_80 runs on the L4's 8.9, nothing of it on 7.5).
    let lock = lock.replace("antlr4-python3-runtime", "flash-attn").replace("4.9.3", "2.8.3");
    std::fs::write(d.path().join("pylock.toml"), lock).unwrap();
    let (code, out, err) =
        cudalint(d.path(), &["scan", "pylock.toml", "--gpu", "L4,T4", "--no-cache", "--format", "json"]);
    assert_eq!(code, Some(1), "{err}");
    let r = json(&out);
    let f: Vec<&serde_json::Value> =
        r["findings"].as_array().unwrap().iter().filter(|f| f["rule"] == "CL027").collect();
    assert_eq!(f.len(), 1, "{r}");
    assert_eq!(f[0]["target"], "T4");
    assert!(f[0]["message"].as_str().unwrap().contains("flash-attn 2.8.3 (FLASH_ATTN_CUDA_ARCHS"), "{r}");
}

/// A hashed requirements line whose hashes name an sdist (no wheel): a package built at
/// install, as in the other formats, whether the sdist comes from an index page (its sha256 in
/// the link) or a find-links directory (hashed there). A line whose hashes name nothing listed
/// is a lock its index does not match: the scan stops, naming the line.
#[test]
fn a_hashed_requirements_line_of_an_sdist_is_built_at_install_and_one_matching_nothing_stops_the_scan() {
    let d = fixtures();
    let pure = sdist(&d.path().join("served"), "antlr4-python3-runtime", "4.9.3");
    let cuda = sdist(&d.path().join("sdists"), "flash-attn", "2.8.3");
    let w = wheel(d.path(), "1.0.0");
    let index = Index::serve(&d.path().join("index"), &[w.clone(), pure.clone()]);
    let text = format!(
        "--index-url {}\n--find-links sdists\ndemo-kernels==1.0.0 --hash=sha256:{}\nflash-attn==2.8.3 --hash=sha256:{}\nantlr4-python3-runtime==4.9.3 \\\n    --hash=sha256:{}\n",
        index.url,
        sha256(&w),
        sha256(&cuda),
        sha256(&pure)
    );
    std::fs::write(d.path().join("requirements.txt"), &text).unwrap();
    let scan = || cudalint(d.path(), &["scan", "requirements.txt", "--gpu", "L4,T4", "--no-cache", "--format", "json"]);
    let (code, out, err) = scan();
    assert_eq!(code, Some(1), "{err}");
    let f = findings(&json(&out));
    assert_eq!(f.len(), 2, "{f:#?}");
    assert!(f[0].starts_with("CL026 image: ") && f[0].contains("antlr4-python3-runtime 4.9.3"), "{f:#?}");
    assert!(f[1].starts_with("CL027 T4: ") && f[1].contains("flash-attn 2.8.3"), "{f:#?}");
    // The flash-attn line's hash names no file: not a package built at install, a broken lock.
    std::fs::write(d.path().join("requirements.txt"), text.replace(&sha256(&cuda), &"0".repeat(64))).unwrap();
    let (code, _, err) = scan();
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("line 4: flash-attn==2.8.3: no wheel for linux/amd64 with Python 3.12 and no sdist whose sha256 the line lists"),
        "{err}"
    );
}

#[test]
fn locks_that_cannot_be_verified_or_installed_stop_the_scan_naming_the_package() {
    let d = fixtures();
    for (name, text, says) in [
        ("requirements-a.txt", "--no-index\ndemo-kernels==1.0.0\n", "demo-kernels has no --hash=sha256"),
        ("requirements-b.txt", "--no-index\ndemo-kernels>=1.0 --hash=sha256:00\n", "is not pinned with =="),
        (
            "requirements-c.txt",
            "--index-url http://127.0.0.1:9/simple\ndemo-kernels==1.0.0 --hash=sha256:0000000000000000000000000000000000000000000000000000000000000000\n",
            "http://127.0.0.1:9/simple/demo-kernels/",
        ),
    ] {
        std::fs::write(d.path().join(name), text).unwrap();
        let (code, _, err) = cudalint(d.path(), &["scan", name, "--gpu", "L4", "--no-cache"]);
        assert_eq!(code, Some(2), "{name}: {err}");
        assert!(err.contains(says), "{name}: {err}");
    }
    // Only a wheel for another machine, and no sdist: nothing pip could install here.
    let lock = std::fs::read_to_string(d.path().join("pylock.toml")).unwrap();
    std::fs::write(d.path().join("pylock.arm.toml"), lock).unwrap();
    let (code, _, err) =
        cudalint(d.path(), &["scan", "pylock.arm.toml", "--gpu", "GH200", "--platform", "linux/arm64", "--no-cache"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("package demo-kernels 1.0.0: none of its 1 wheels installs on linux/arm64"), "{err}");
}

/// Lockfiles the real uv and pip write (pinned in .tools/lockers by scripts/test.sh), against a
/// loopback index: `uv lock`, `uv export --format pylock.toml`, `uv pip compile --format
/// pylock.toml` and `pip install --dry-run --report`.
#[cfg(feature = "slow-tests")]
mod real_lockers {
    use super::*;
    use crate::stock_stack::{cache, torch_image};
    use crate::util::run;

    fn uv() -> PathBuf {
        crate::util::venv_tool("CUDALINT_TEST_UV", "lockers", "uv", "uv==0.13.9")
    }

    fn pip() -> PathBuf {
        crate::util::venv_tool("CUDALINT_TEST_PIP", "lockers", "pip", "pip==26.3")
    }

    #[test]
    fn uv_and_pip_lockfiles_give_the_verdict_of_the_lock_they_describe() {
        let d = fixtures();
        let index = Index::serve(&d.path().join("index"), &[wheel(d.path(), "1.0.0"), wheel(d.path(), "1.1.0")]);
        let app = d.path().join("app");
        std::fs::create_dir(&app).unwrap();
        std::fs::write(
            app.join("pyproject.toml"),
            "[project]\nname = \"app\"\nversion = \"0.1.0\"\nrequires-python = \">=3.11\"\ndependencies = [\"demo-kernels==1.0.0\"]\n\n[tool.uv]\npackage = false\n",
        )
        .unwrap();
        let uv_env = |c: &mut Std| {
            c.current_dir(&app).env("UV_NO_CACHE", "1").env("UV_PYTHON_DOWNLOADS", "never");
        };
        let mut c = Std::new(uv());
        c.args(["lock", "--quiet", "--index-url", &index.url]);
        uv_env(&mut c);
        run(&mut c);
        let mut c = Std::new(uv());
        c.args(["export", "--quiet", "--format", "pylock.toml", "-o", "pylock.toml", "--index-url", &index.url]);
        uv_env(&mut c);
        run(&mut c);
        run(Std::new(pip()).current_dir(&app).args([
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--dry-run",
            "--report",
            "report.json",
            "--index-url",
            &index.url,
            "--only-binary",
            ":all:",
            "--platform",
            "manylinux_2_28_x86_64",
            "--python-version",
            "3.11",
            "--target",
            app.join("target").to_str().unwrap(),
            "demo-kernels==1.0.0",
        ]));
        let want = ["L4: runs (native)", "B200: runs (PTX JIT for 1 binary, 2.4 KiB: milliseconds)"];
        for lock in ["uv.lock", "pylock.toml", "report.json"] {
            let (code, out, err) = cudalint(
                &app,
                &["scan", lock, "--gpu", "L4,B200", "--python", "3.11", "--no-cache", "--quiet", "--format", "json"],
            );
            assert_eq!(code, Some(0), "{lock}: {err}");
            assert_eq!(headlines(&json(&out)), want, "{lock}");
        }
        // uv's lock of the bump, diffed against the first: the PR check.
        std::fs::copy(app.join("uv.lock"), d.path().join("uv.old.lock")).unwrap();
        let pyproject = std::fs::read_to_string(app.join("pyproject.toml")).unwrap();
        std::fs::write(app.join("pyproject.toml"), pyproject.replace("==1.0.0", "==1.1.0")).unwrap();
        let mut c = Std::new(uv());
        c.args(["lock", "--quiet", "--index-url", &index.url]);
        uv_env(&mut c);
        run(&mut c);
        std::fs::create_dir(d.path().join("old")).unwrap();
        std::fs::rename(d.path().join("uv.old.lock"), d.path().join("old/uv.lock")).unwrap();
        let (code, out, err) =
            cudalint(d.path(), &["diff", "old/uv.lock", "app/uv.lock", "--python", "3.11", "--no-cache"]);
        assert_eq!(code, Some(1), "{out}{err}");
        assert!(out.lines().any(|l| l.starts_with("lost: ") && l.contains("L4")), "{out}");
    }

    /// The same sdist-only packages, a pure one and flash-attn (a `[[source_build]]` package,
    /// stood in for by a local sdist), beside a wheel, through all four formats, each written by
    /// the real locker: a requirements file with `--hash` lines (`uv pip compile
    /// --generate-hashes`), `uv.lock`, `pylock.toml` (`uv export`) and pip's `--report`. Each
    /// gives the same findings: CL026 naming the pure package, CL027 naming flash-attn on the T4
    /// only, since its default list (80;90;100;120, SASS only) runs on the A100's 8.0 and has
    /// nothing for 7.5. (The requirements file used to stop the scan with exit 2.)
    #[test]
    fn an_sdist_only_package_is_the_same_finding_in_every_lock_format() {
        let d = fixtures();
        let sd = d.path().join("sdists");
        let files = [
            wheel(d.path(), "1.0.0"),
            sdist(&sd, "flash-attn", "2.8.3"),
            sdist(&sd, "antlr4-python3-runtime", "4.9.3"),
        ];
        let index = Index::serve(&d.path().join("index"), &files);
        let app = d.path().join("app");
        std::fs::create_dir(&app).unwrap();
        let pins = ["demo-kernels==1.0.0", "flash-attn==2.8.3", "antlr4-python3-runtime==4.9.3"];
        std::fs::write(
            app.join("pyproject.toml"),
            format!(
                "[project]\nname = \"app\"\nversion = \"0.1.0\"\nrequires-python = \">=3.11\"\ndependencies = {pins:?}\n\n[tool.uv]\npackage = false\n"
            ),
        )
        .unwrap();
        std::fs::write(app.join("req.in"), pins.join("\n") + "\n").unwrap();
        let uv_run = |args: &[&str]| {
            let mut c = Std::new(uv());
            c.current_dir(&app).env("UV_NO_CACHE", "1").env("UV_PYTHON_DOWNLOADS", "never").args(args);
            c.args(["--quiet", "--index-url", &index.url]);
            run(&mut c);
        };
        uv_run(&["lock"]);
        uv_run(&["export", "--format", "pylock.toml", "-o", "pylock.toml"]);
        let platform = ["--python-version", "3.11", "--python-platform", "x86_64-manylinux_2_28"];
        let compile = ["pip", "compile", "req.in", "--generate-hashes", "--emit-index-url", "-o", "requirements.txt"];
        uv_run(&[&compile[..], &platform].concat());
        let target = app.join("target");
        let mut pip_args = vec!["install", "--quiet", "--disable-pip-version-check", "--dry-run"];
        pip_args.extend(["--report", "report.json", "--index-url", &index.url, "--no-deps"]);
        pip_args.extend(["--platform", "manylinux_2_28_x86_64", "--python-version", "3.11"]);
        pip_args.extend(["--target", target.to_str().unwrap()]);
        pip_args.extend(pins);
        run(Std::new(pip()).current_dir(&app).args(&pip_args));
        let requirements = std::fs::read_to_string(app.join("requirements.txt")).unwrap();
        assert!(requirements.contains("flash-attn==2.8.3 \\\n    --hash=sha256:"), "{requirements}");
        let mut seen = Vec::new();
        for lock in ["requirements.txt", "uv.lock", "pylock.toml", "report.json"] {
            let (code, out, err) = cudalint(
                &app,
                &["scan", lock, "--gpu", "A100,T4", "--python", "3.11", "--no-cache", "--quiet", "--format", "json"],
            );
            assert_eq!(code, Some(1), "{lock}: {err}");
            let r = json(&out);
            let h = headlines(&r);
            assert!(h[0] == "A100: runs (native)" && h[1].starts_with("T4: fails"), "{lock}: {h:?}");
            seen.push((lock, findings(&r)));
        }
        let (_, first) = &seen[0];
        assert_eq!(first.len(), 2, "{first:#?}");
        assert!(
            first[0].starts_with("CL026 image: ") && first[0].contains("antlr4-python3-runtime 4.9.3"),
            "{first:#?}"
        );
        assert!(!first[0].contains("flash-attn"), "{first:#?}");
        assert!(first[1].starts_with("CL027 T4: ") && first[1].contains("flash-attn 2.8.3"), "{first:#?}");
        for (lock, f) in &seen[1..] {
            assert_eq!(f, first, "{lock} differs from requirements.txt");
        }
    }

    /// The stock `torch==2.8.0` closure locked by uv against a loopback index of its wheels: the
    /// same headlines and findings as the image built from those wheels, a second run with the
    /// index stopped answers from the cache, and a wrong hash is refused naming the wheel.
    #[test]
    fn the_torch_closure_lock_is_judged_as_its_built_image() {
        let image = torch_image();
        let reqs: Vec<(String, String)> = std::fs::read_to_string(root().join("tests/stacks/torch-2.8.0-cu128.txt"))
            .unwrap()
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
            .map(|l| {
                let (n, v) = l.split_whitespace().next().unwrap().split_once("==").unwrap();
                (n.to_string(), v.to_string())
            })
            .collect();
        let wheels_dir = cache().join("wheels");
        let files: Vec<String> = std::fs::read_dir(&wheels_dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        let wheels: Vec<PathBuf> = reqs
            .iter()
            .map(|(n, v)| {
                let stem = format!("{}-{v}-", n.replace('-', "_").to_lowercase());
                let f = files.iter().find(|f| f.to_lowercase().starts_with(&stem) && f.ends_with(".whl"));
                wheels_dir.join(f.unwrap_or_else(|| panic!("{n}=={v} is not in {}", wheels_dir.display())))
            })
            .collect();
        let d = tempfile::tempdir_in(cache()).unwrap();
        let index = Index::serve(&d.path().join("index"), &wheels);
        std::fs::write(d.path().join("req.in"), "torch==2.8.0\n").unwrap();
        run(Std::new(uv()).current_dir(d.path()).env("UV_NO_CACHE", "1").args([
            "pip",
            "compile",
            "--quiet",
            "req.in",
            "--index-url",
            &index.url,
            "--python-version",
            "3.11",
            "--python-platform",
            "x86_64-manylinux_2_28",
            "--format",
            "pylock.toml",
            "-o",
            "pylock.toml",
        ]));
        let lock = std::fs::read_to_string(d.path().join("pylock.toml")).unwrap();
        assert_eq!(lock.matches("[[packages]]").count(), reqs.len(), "{lock}");
        let gpus = "H100,GTX 1080 Ti,B300";
        let c = d.path().join("cache");
        let scan = |spec: &str, extra: &[&str]| {
            let mut a = vec!["scan", spec, "--gpu", gpus, "--quiet", "--format", "json"];
            a.extend(extra);
            let (code, out, err) = cudalint(d.path(), &a);
            assert_eq!(code, Some(1), "{spec}: {err}");
            json(&out)
        };
        let key = |r: &serde_json::Value| -> Vec<String> {
            let mut f: Vec<String> = r["findings"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| format!("{} {} {} {} {}", f["rule"], f["path"], f["target"], f["message"], f["fix"]))
                .collect();
            f.sort();
            f
        };
        let built = scan(image, &["--no-cache"]);
        let cached = ["--python", "3.11", "--cache-dir", c.to_str().unwrap()];
        let from_lock = scan("pylock.toml", &cached);
        assert_eq!(headlines(&from_lock), headlines(&built));
        assert_eq!(key(&from_lock), key(&built));
        assert_eq!(headlines(&built).len(), 3);
        // A wrong hash, on a wheel the cache does not hold under it: fetched, refused, named.
        let sha =
            lock.split("jinja2-3.1.6-py3-none-any.whl\", hashes = { sha256 = \"").nth(1).unwrap()[..64].to_string();
        let wrong: String = sha.chars().rev().collect();
        std::fs::write(d.path().join("pylock.bad.toml"), lock.replace(&sha, &wrong)).unwrap();
        let (code, _, err) = cudalint(d.path(), &[&["scan", "pylock.bad.toml", "--gpu", "H100"][..], &cached].concat());
        assert_eq!(code, Some(2), "{err}");
        assert!(err.contains("jinja2 3.1.6: jinja2-3.1.6-py3-none-any.whl has sha256"), "{err}");
        drop(index);
        let again = scan("pylock.toml", &cached);
        assert_eq!((headlines(&again), key(&again)), (headlines(&built), key(&built)));
    }
}

/// What a hostile loopback server does with one request.
enum Act {
    /// A status and no body.
    Status(u16),
    /// A body, with its length declared.
    Body(Vec<u8>),
    /// Takes the request and never answers (until the client goes).
    Silent,
    /// Headers, then nothing more (until the client goes).
    StallBody,
    /// Zeros without end (at most 1 GiB), with this Content-Length or none (ended by close).
    Endless(Option<u64>),
}

/// An HTTP/1.1 server on loopback: one request per connection, answered by `handler` from the
/// request's path and head. `written` counts the body bytes it sent.
struct Hostile {
    port: u16,
    written: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl Hostile {
    fn start(handler: impl Fn(&str, &str) -> Act + Send + Sync + 'static) -> Hostile {
        use std::io::{Read, Write};
        use std::sync::atomic::Ordering;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let written = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let (w2, handler) = (written.clone(), std::sync::Arc::new(handler));
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut c) = conn else { continue };
                let (written, handler) = (w2.clone(), handler.clone());
                std::thread::spawn(move || {
                    let mut head = Vec::new();
                    let mut b = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") && head.len() < 65536 {
                        match c.read(&mut b) {
                            Ok(1) => head.push(b[0]),
                            _ => return,
                        }
                    }
                    let head = String::from_utf8_lossy(&head).into_owned();
                    let path = head.split(' ').nth(1).unwrap_or("/").to_string();
                    // Waits for the client to go (it reads nothing more from us).
                    let hold = |c: &mut std::net::TcpStream| while matches!(c.read(&mut [0u8; 64]), Ok(n) if n > 0) {};
                    match handler(&path, &head) {
                        Act::Status(code) => {
                            let _ = write!(c, "HTTP/1.1 {code} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
                        }
                        Act::Body(body) => {
                            let _ = write!(
                                c,
                                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                                body.len()
                            );
                            let _ = c.write_all(&body);
                        }
                        Act::Silent => hold(&mut c),
                        Act::StallBody => {
                            let _ = write!(c, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nPK");
                            hold(&mut c);
                        }
                        Act::Endless(len) => {
                            let len = len.map(|n| format!("Content-Length: {n}\r\n")).unwrap_or_default();
                            let _ = write!(c, "HTTP/1.1 200 OK\r\n{len}Connection: close\r\n\r\n");
                            let zeros = vec![0u8; 64 << 10];
                            for _ in 0..(1u64 << 30) / zeros.len() as u64 {
                                if c.write_all(&zeros).is_err() {
                                    break;
                                }
                                written.fetch_add(zeros.len() as u64, Ordering::Relaxed);
                            }
                        }
                    }
                });
            }
        });
        Hostile { port, written }
    }

    fn written(&self) -> u64 {
        self.written.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// A port nothing listens on.
fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

const TOKEN: &str = "s3cr3t-T0KEN";

/// `cudalint scan` with a bound on how long it may run (a hang fails the test on its message,
/// not its duration).
fn bounded(dir: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let o = Command::cargo_bin("cudalint")
        .unwrap()
        .current_dir(dir)
        .args(args)
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    (o.status.code(), String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// Every way an index or a wheel's host can fail, reached with credentials in the index URL (and
/// in the links its pages give): each error names the URL as pip prints it (`ci-bot:****@`) and
/// the password appears nowhere. Each failure is also a bound: a server that answers nothing or
/// stops sending ends the scan (`--registry-stall-timeout`), a page or wheel larger than its
/// bound is refused at the byte past it.
#[test]
fn index_failures_name_the_url_without_its_password_and_every_transfer_is_bounded() {
    let d = fixtures();
    let zero = "0".repeat(64);
    let server = Hostile::start(|path, _| {
        let p = path.trim_start_matches("/simple/").trim_end_matches('/');
        match p {
            "p403" => Act::Status(403),
            "p500" => Act::Status(500),
            "psilent" => Act::Silent,
            "pbig" => Act::Endless(None),
            "pbigdeclared" => Act::Endless(Some(1 << 40)),
            "pwheelstall" | "pwheelbig" | "pwheelhash" => {
                let f = format!("{p}-1-py3-none-any.whl");
                Act::Body(format!("<a href=\"../../files/{f}\">{f}</a>").into_bytes())
            }
            _ if path == "/files/pwheelstall-1-py3-none-any.whl" => Act::StallBody,
            _ if path == "/files/pwheelbig-1-py3-none-any.whl" => Act::Endless(None),
            _ if path == "/files/pwheelhash-1-py3-none-any.whl" => Act::Body(b"not the wheel".to_vec()),
            _ if path == "/files/sized.whl" => Act::Endless(None),
            _ => Act::Status(404),
        }
    });
    let index = format!("http://ci-bot:{TOKEN}@127.0.0.1:{}/simple", server.port);
    let refused = format!("http://ci-bot:{TOKEN}@127.0.0.1:{}/simple", closed_port());
    let cases: Vec<(&str, &str, String)> = vec![
        ("p404", &index, format!("no wheel for linux/amd64 with Python 3.12 and no sdist whose sha256 the line lists, in http://ci-bot:****@127.0.0.1:{}/simple", server.port)),
        ("p403", &index, "/simple/p403/: HTTP 403".into()),
        ("p500", &index, "/simple/p500/: HTTP 500".into()),
        ("prefused", &refused, "http://ci-bot:****@127.0.0.1:".into()),
        ("psilent", &index, "/simple/psilent/: the server stalled (no answer in 1 s, --registry-stall-timeout)".into()),
        ("pbig", &index, "/simple/pbig/: the server sent more than the 67108864 bytes it may be".into()),
        ("pbigdeclared", &index, "/simple/pbigdeclared/: the server announces 1099511627776 bytes, more than the 67108864 it may be".into()),
        ("pwheelstall", &index, "/files/pwheelstall-1-py3-none-any.whl: the server stalled (fewer than 16384 bytes in 1 s, --registry-stall-timeout)".into()),
        ("pwheelbig", &index, "/files/pwheelbig-1-py3-none-any.whl: the server sent more than the 1048576 bytes it may be (--max-wheel-size; the lock gives no size)".into()),
        ("pwheelhash", &index, "pwheelhash 1: pwheelhash-1-py3-none-any.whl has sha256".into()),
    ];
    for (project, index, says) in &cases {
        std::fs::write(
            d.path().join("requirements.txt"),
            format!("--index-url {index}\n{project}==1 --hash=sha256:{zero}\n"),
        )
        .unwrap();
        let before = server.written();
        let (code, out, err) = bounded(
            d.path(),
            &[
                "scan",
                "requirements.txt",
                "--gpu",
                "L4",
                "--no-cache",
                "--registry-stall-timeout",
                "1",
                "--max-wheel-size",
                "1M",
            ],
        );
        assert_eq!(code, Some(2), "{project}: {err}");
        assert!(err.contains(says.as_str()), "{project}: {err}");
        assert!(!err.contains(TOKEN) && !out.contains(TOKEN), "{project}: the password is printed: {err}");
        if *project != "pwheelhash" {
            assert!(err.contains("ci-bot:****@127.0.0.1:"), "{project}: {err}");
        }
        // Refused at the bound, not after buffering the rest: what the server got rid of is the
        // bound and what the sockets hold (a few MiB), never the 1 GiB it offers.
        let sent = server.written() - before;
        assert!(sent < (64 << 20) + (32 << 20), "{project}: {sent} bytes sent");
    }
    // A lock's own URL with credentials, and its size: the wheel is refused past that size.
    let lock = format!(
        "lock-version = \"1.0\"\ncreated-by = \"test\"\n\n[[packages]]\nname = \"sized\"\nversion = \"1\"\nwheels = [{{ name = \"sized-1-py3-none-any.whl\", url = \"http://{TOKEN}@127.0.0.1:{}/files/sized.whl\", size = 1000, hashes = {{ sha256 = \"{zero}\" }} }}]\n",
        server.port
    );
    std::fs::write(d.path().join("pylock.toml"), lock).unwrap();
    let (code, out, err) = bounded(d.path(), &["scan", "pylock.toml", "--gpu", "L4", "--no-cache"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "http://****@127.0.0.1:{}/files/sized.whl: the server sent more than the 1000 bytes it may be (the size the lock gives)",
            server.port
        )),
        "{err}"
    );
    assert!(!err.contains(TOKEN) && !out.contains(TOKEN), "{err}");
}

/// A lock's `path` names a regular file: `/dev/zero`, a FIFO or a directory is refused at once,
/// naming it (before, `/dev/zero` was hashed forever and a FIFO blocked the open).
#[test]
fn a_lock_path_that_is_not_a_regular_file_is_refused_without_reading_it() {
    let d = fixtures();
    mkfifo(&d.path().join("wheels/fifo-1-py3-none-any.whl"));
    std::fs::create_dir(d.path().join("wheels/dir-1-py3-none-any.whl")).unwrap();
    let zero = "0".repeat(64);
    for (path, says) in [
        ("/dev/zero", "/dev/zero: a device, not a wheel file: refused"),
        ("wheels/fifo-1-py3-none-any.whl", "fifo-1-py3-none-any.whl: a FIFO, not a wheel file: refused"),
        ("wheels/dir-1-py3-none-any.whl", "dir-1-py3-none-any.whl: a directory, not a wheel file: refused"),
    ] {
        let lock = format!(
            "lock-version = \"1.0\"\ncreated-by = \"test\"\n\n[[packages]]\nname = \"x\"\nversion = \"1\"\nwheels = [{{ name = \"x-1-py3-none-any.whl\", path = \"{path}\", hashes = {{ sha256 = \"{zero}\" }} }}]\n"
        );
        std::fs::write(d.path().join("pylock.toml"), lock).unwrap();
        let (code, _, err) = bounded(d.path(), &["scan", "pylock.toml", "--gpu", "L4", "--no-cache"]);
        assert_eq!(code, Some(2), "{path}: {err}");
        assert!(err.contains(says), "{path}: {err}");
    }
}

/// A lock that names a file outside its repository learns nothing of it: the error says it is
/// not the wheel, never its sha256 or size (a pull request's lock could name any file on the
/// machine that runs the check, and read its hash in the CI log).
#[test]
fn a_lock_path_outside_the_checkout_does_not_leak_its_hash() {
    let d = fixtures();
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("id_token");
    std::fs::write(&secret, "the runner's secret").unwrap();
    let sha = sha256(&secret);
    let zero = "0".repeat(64);
    let lock = format!(
        "lock-version = \"1.0\"\ncreated-by = \"test\"\n\n[[packages]]\nname = \"x\"\nversion = \"1\"\nwheels = [{{ name = \"x-1-py3-none-any.whl\", path = \"{}\", size = 5, hashes = {{ sha256 = \"{zero}\" }} }}]\n",
        secret.display()
    );
    std::fs::write(d.path().join("pylock.toml"), lock).unwrap();
    let (code, out, err) = bounded(d.path(), &["scan", "pylock.toml", "--gpu", "L4", "--no-cache"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(!err.contains(&sha) && !out.contains(&sha), "{err}");
    assert!(!err.contains("19 bytes"), "{err}");
    assert!(err.contains("is not the wheel the lock names (its size or sha256 differs; not shown"), "{err}");
}

/// `src`, a demo-kernels wheel, as the `version` wheel for `machine` (its dist-info and `WHEEL`
/// tag rewritten, its libraries kept): another platform's wheel of the same release.
fn retagged(src: &Path, version: &str, machine: &str, out: &Path) {
    let script = r#"
import sys, zipfile
src, version, machine, out = sys.argv[1:]
zin = zipfile.ZipFile(src)
old = [n for n in zin.namelist() if n.endswith('.dist-info/WHEEL')][0].split('.dist-info/')[0]
new = 'demo_kernels-' + version
with zipfile.ZipFile(out, 'w', zipfile.ZIP_DEFLATED) as zout:
    for n in zin.namelist():
        data = zin.read(n)
        if n.endswith('.dist-info/WHEEL'):
            data = data.replace(b'x86_64', machine.encode())
        zout.writestr(n.replace(old, new), data)
"#;
    crate::util::run(Std::new("python3").args(["-c", script]).arg(src).arg(version).arg(machine).arg(out));
}

fn mkfifo(p: &Path) {
    let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

/// A requirements line lists the release's amd64 and aarch64 wheels. The cache holds the
/// aarch64 one (real bytes, a listed hash) and a co-tenant planted `<sha>.name` calling it the
/// amd64 wheel: the amd64 scan must still judge the amd64 wheel (1.1.0 drops L4: exit 1), not
/// the aarch64 wheel's libraries (exit 0). The name comes from the cached wheel's own verified
/// `WHEEL` tags, which an arm64 scan then uses offline.
#[test]
fn a_planted_name_beside_a_cached_wheel_decides_nothing() {
    let d = fixtures();
    let amd = wheel(d.path(), "1.1.0");
    let arm = d.path().join("arm.whl");
    retagged(&wheel(d.path(), "1.0.0"), "1.1.0", "aarch64", &arm);
    let (h_amd, h_arm) = (sha256(&amd), sha256(&arm));
    let index = Index::serve(&d.path().join("index"), std::slice::from_ref(&amd));
    std::fs::write(
        d.path().join("requirements.lock.txt"),
        format!("--index-url {}\ndemo-kernels==1.1.0 --hash=sha256:{h_amd} --hash=sha256:{h_arm}\n", index.url),
    )
    .unwrap();
    let cache = d.path().join("cache");
    std::fs::create_dir_all(cache.join("wheels")).unwrap();
    std::fs::copy(&arm, cache.join(format!("wheels/{h_arm}.whl"))).unwrap();
    std::fs::write(cache.join(format!("wheels/{h_arm}.name")), "demo_kernels-1.1.0-py3-none-manylinux_2_28_x86_64.whl")
        .unwrap();
    let scan = |platform: &str| {
        bounded(
            d.path(),
            &[
                "scan",
                "requirements.lock.txt",
                "--gpu",
                "L4",
                "--platform",
                platform,
                "--cache-dir",
                cache.to_str().unwrap(),
                "--format",
                "inventory",
                "--quiet",
            ],
        )
    };
    let (code, out, err) = scan("linux/amd64");
    assert!(code.is_some(), "{err}");
    let inv = json(&out);
    assert_eq!(inv["image"]["layers"][0]["digest"], format!("sha256:{h_amd}"), "{inv}");
    let (code, _, err) = bounded(
        d.path(),
        &["scan", "requirements.lock.txt", "--gpu", "L4", "--cache-dir", cache.to_str().unwrap(), "--quiet"],
    );
    assert_eq!(code, Some(1), "the amd64 wheel drops L4: {err}");
    drop(index);
    // Offline, for arm64: the cached wheel's own tags say it is the aarch64 wheel.
    let (code, out, err) = scan("linux/arm64");
    assert_eq!(code, Some(0), "{err}");
    let layer = &json(&out)["image"]["layers"][0];
    assert_eq!(layer["digest"], format!("sha256:{h_arm}"));
    assert_eq!(layer["step"], "demo-kernels==1.1.0 (demo_kernels-1.1.0-py3-none-manylinux_2_28_aarch64.whl)");
}

/// Links and FIFOs planted in the wheel cache: a `<sha>.name` link is not written through, a
/// `wheels/` link is not followed (nor cleaned through), a FIFO as an entry or a name is
/// refused without blocking; the scan goes on and judges the wheel.
#[test]
fn links_and_fifos_planted_in_the_wheel_cache_are_refused_not_followed() {
    let d = fixtures();
    let w = wheel(d.path(), "1.0.0");
    let sha = sha256(&w);
    let index = Index::serve(&d.path().join("index"), std::slice::from_ref(&w));
    std::fs::write(
        d.path().join("requirements.lock.txt"),
        format!("--index-url {}\ndemo-kernels==1.0.0 --hash=sha256:{sha}\n", index.url),
    )
    .unwrap();
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim");
    std::fs::write(&victim, "keep").unwrap();
    let scan = |cache: &Path| {
        bounded(
            d.path(),
            &["scan", "requirements.lock.txt", "--gpu", "L4", "--cache-dir", cache.to_str().unwrap(), "--quiet"],
        )
    };
    // A link at `<sha>.name`, to a file of the victim's.
    let c1 = d.path().join("c1");
    std::fs::create_dir_all(c1.join("wheels")).unwrap();
    std::os::unix::fs::symlink(&victim, c1.join(format!("wheels/{sha}.name"))).unwrap();
    let (code, _, err) = scan(&c1);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    assert!(c1.join(format!("wheels/{sha}.whl")).is_file());
    // `wheels/` a link to the victim's directory: not followed, said, the scan goes on.
    let c2 = d.path().join("c2");
    std::fs::create_dir_all(&c2).unwrap();
    std::os::unix::fs::symlink(outside.path(), c2.join("wheels")).unwrap();
    let (code, _, err) = scan(&c2);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("wheels: a symbolic link or not a directory: refused, not followed"), "{err}");
    let left: Vec<_> = std::fs::read_dir(outside.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, ["victim"], "nothing written outside the cache");
    let o = Command::cargo_bin("cudalint").unwrap().args(["cache", "clean", "--cache-dir"]).arg(&c2).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    // FIFOs as the entry and as the name beside a real entry: refused at once.
    let c3 = d.path().join("c3");
    std::fs::create_dir_all(c3.join("wheels")).unwrap();
    mkfifo(&c3.join(format!("wheels/{sha}.whl")));
    let (code, _, err) = scan(&c3);
    assert_eq!(code, Some(0), "{err}");
    let c4 = d.path().join("c4");
    std::fs::create_dir_all(c4.join("wheels")).unwrap();
    std::fs::copy(&w, c4.join(format!("wheels/{sha}.whl"))).unwrap();
    mkfifo(&c4.join(format!("wheels/{sha}.name")));
    let (code, _, err) = scan(&c4);
    assert_eq!(code, Some(0), "{err}");
    // `cache clean` removes the wheels, the FIFO and the link as names.
    let o = Command::cargo_bin("cudalint").unwrap().args(["cache", "clean", "--cache-dir"]).arg(&c1).output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stdout).contains("and 1 wheels from"), "{o:?}");
    assert_eq!(std::fs::read_dir(c1.join("wheels")).unwrap().count(), 0);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
}

/// A cached wheel replaced after its hash was checked (by rename, as whoever can write the
/// directory can): what is judged is what was hashed. The test hook runs exactly between the
/// check and the analysis, so no timing is involved.
#[test]
fn a_cached_wheel_swapped_after_its_hash_is_checked_is_not_judged() {
    let d = fixtures();
    let (bad, good) = (wheel(d.path(), "1.1.0"), wheel(d.path(), "1.0.0"));
    let sha = sha256(&bad);
    let index = Index::serve(&d.path().join("index"), std::slice::from_ref(&bad));
    std::fs::write(
        d.path().join("requirements.lock.txt"),
        format!("--index-url {}\ndemo-kernels==1.1.0 --hash=sha256:{sha}\n", index.url),
    )
    .unwrap();
    let cache = d.path().join("cache");
    let args = ["scan", "requirements.lock.txt", "--gpu", "L4", "--cache-dir", cache.to_str().unwrap(), "--quiet"];
    let (code, _, err) = bounded(d.path(), &args);
    assert_eq!(code, Some(1), "1.1.0 drops L4: {err}");
    drop(index);
    // Another Python: another key for the wheel's analysis, so the wheel itself is read again.
    let o = Command::cargo_bin("cudalint")
        .unwrap()
        .current_dir(d.path())
        .args(args)
        .args(["--python", "3.11"])
        .env("CUDALINT_TEST_AFTER_HASH", format!("cp '{}' \"$1.x\" && mv \"$1.x\" \"$1\"", good.display()))
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
    // The swap did happen: the entry now holds the other wheel (and is refused next time).
    assert_eq!(sha256(&cache.join(format!("wheels/{sha}.whl"))), sha256(&good));
}

/// A rerun with a warm cache neither fetches, hashes nor reads a wheel analysed before: its
/// analysis is a layer cache entry under the wheel's sha256 (and the analyser, knowledge digest,
/// options and Python), so the same verdict comes with the index stopped and the wheel gone
/// from the cache. Another Python is another key: analysed again (and here, with nothing to
/// fetch it from, an error naming the URL).
#[test]
fn a_warm_rerun_takes_each_wheels_analysis_from_the_cache() {
    let d = fixtures();
    let w = wheel(d.path(), "1.0.0");
    let (sha, size) = (sha256(&w), std::fs::metadata(&w).unwrap().len());
    let index = Index::serve(&d.path().join("index"), std::slice::from_ref(&w));
    let file = w.file_name().unwrap().to_string_lossy().into_owned();
    let base = index.url.trim_end_matches("/simple").to_string();
    std::fs::write(
        d.path().join("pylock.toml"),
        format!(
            "lock-version = \"1.0\"\ncreated-by = \"test\"\n\n[[packages]]\nname = \"demo-kernels\"\nversion = \"1.0.0\"\nwheels = [{{ url = \"{base}/files/{file}\", size = {size}, hashes = {{ sha256 = \"{sha}\" }} }}]\n"
        ),
    )
    .unwrap();
    let cache = d.path().join("cache");
    let run = |python: &str, format: &str| {
        Command::cargo_bin("cudalint")
            .unwrap()
            .current_dir(d.path())
            .env("CUDALINT_CACHE_KEY", "a secret of sixteen bytes or more")
            .args(["scan", "pylock.toml", "--gpu", "H100,L4,B200", "--python", python, "--quiet", "--format", format])
            .arg("--cache-dir")
            .arg(&cache)
            .timeout(std::time::Duration::from_secs(120))
            .output()
            .unwrap()
    };
    let ok = |o: std::process::Output| {
        assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
        json(&String::from_utf8_lossy(&o.stdout))
    };
    let inv = ok(run("3.11", "inventory"));
    assert_eq!(inv["stats"]["downloaded_bytes"], size);
    let first = ok(run("3.11", "json"));
    drop(index);
    std::fs::remove_file(cache.join(format!("wheels/{sha}.whl"))).unwrap();
    let inv2 = ok(run("3.11", "inventory"));
    assert!(inv2["stats"]["downloaded_bytes"].is_null(), "{inv2}");
    assert_eq!(inv2["files"], inv["files"]);
    assert_eq!(inv2["image"]["layers"], inv["image"]["layers"]);
    let again = ok(run("3.11", "json"));
    assert_eq!(headlines(&again), headlines(&first));
    assert_eq!(again["matrix"], first["matrix"]);
    let other = run("3.12", "json");
    assert_eq!(other.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&other.stderr).contains(&format!("{base}/files/{file}")));
}

/// Credentials from a netrc file (`$NETRC`, else `~/.netrc`, as pip and uv read them) go to the
/// index and its files on that host, and are never printed: a wrong password is an HTTP 401
/// naming the URL.
#[test]
fn netrc_credentials_reach_the_index_and_its_files_and_are_never_printed() {
    use base64::Engine;
    let d = fixtures();
    let w = wheel(d.path(), "1.0.0");
    let (sha, bytes) = (sha256(&w), std::fs::read(&w).unwrap());
    let file = w.file_name().unwrap().to_string_lossy().into_owned();
    let want =
        format!("authorization: basic {}", base64::engine::general_purpose::STANDARD.encode(format!("ci-bot:{TOKEN}")))
            .to_ascii_lowercase();
    let f2 = file.clone();
    let server = Hostile::start(move |path, head| {
        if !head.to_ascii_lowercase().contains(&want) {
            return Act::Status(401);
        }
        if path == "/simple/demo-kernels/" {
            Act::Body(format!("<a href=\"/files/{f2}\">{f2}</a>").into_bytes())
        } else if path == format!("/files/{f2}") {
            Act::Body(bytes.clone())
        } else {
            Act::Status(404)
        }
    });
    std::fs::write(
        d.path().join("requirements.lock.txt"),
        format!("--index-url http://127.0.0.1:{}/simple\ndemo-kernels==1.0.0 --hash=sha256:{sha}\n", server.port),
    )
    .unwrap();
    let run = |password: &str| {
        std::fs::write(d.path().join("netrc"), format!("machine 127.0.0.1\n  login ci-bot\n  password {password}\n"))
            .unwrap();
        let o = Command::cargo_bin("cudalint")
            .unwrap()
            .current_dir(d.path())
            .env("NETRC", d.path().join("netrc"))
            .args(["scan", "requirements.lock.txt", "--gpu", "L4", "--no-cache", "--quiet"])
            .timeout(std::time::Duration::from_secs(120))
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (code, out, err) = run(TOKEN);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("L4: runs (native)"), "{out}");
    let (code, out, err) = run("wrong");
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains(&format!("http://127.0.0.1:{}/simple/demo-kernels/: HTTP 401", server.port)), "{err}");
    assert!(!err.contains(TOKEN) && !out.contains(TOKEN) && !err.contains("wrong"), "{err}");
}
