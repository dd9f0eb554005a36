//! Loose kernel files judged as a set (lint/kernel_sets.rs) and what is not judged said
//! (lint/unjudged.rs, CL028): an image built here with 2,000 real sm_90a cubins from
//! fixtures/bin (abi7 and abi8 builds) a package ships as data, as flashinfer-cubin does.

use assert_cmd::Command;
use serde_json::Value;

use crate::images::{Comp, Ent, Image, docker_archive_legacy, tar};
use crate::util::read_fixture;

const SITE: &str = "usr/local/lib/python3.11/site-packages";
const FILES: usize = 2000;

/// A docker-archive with one layer: package `kern` 1.0 and its `FILES` cubins under
/// `kern/cubins/`, alternately the abi7 and abi8 sm_90a builds.
fn image(dir: &std::path::Path) -> String {
    let cubins = [read_fixture("abi7_sm90a.cubin"), read_fixture("abi8_sm90a.cubin")];
    let mut record = String::new();
    let mut entries = Vec::new();
    for i in 0..FILES {
        let rel = format!("kern/cubins/sm90a/gemm_{i:04}.cubin");
        record.push_str(&format!("{rel},,\n"));
        entries.push(Ent::RawFile(format!("{SITE}/{rel}").into_bytes(), cubins[i % 2].clone()));
    }
    entries.push(Ent::RawFile(format!("{SITE}/kern-1.0.dist-info/RECORD").into_bytes(), record.into_bytes()));
    entries.push(Ent::RawFile(
        format!("{SITE}/kern-1.0.dist-info/METADATA").into_bytes(),
        b"Metadata-Version: 2.1\nName: kern\nVersion: 1.0\n".to_vec(),
    ));
    let img = Image::new(vec![(tar(&entries), Comp::None)]);
    let path = dir.join("kern.tar");
    std::fs::write(&path, docker_archive_legacy(&img, "test/kern:1")).unwrap();
    format!("docker-archive:{}", path.display())
}

fn scan(image: &str, dir: &std::path::Path) -> (Value, String, u64) {
    let json = dir.join("out.json");
    let text = dir.join("out.txt");
    let out = Command::cargo_bin("cudalint")
        .unwrap()
        .args(["scan", image, "--gpu", "H100,L4,RTX 5090", "--quiet"])
        .arg("--format")
        .arg(format!("json={}", json.display()))
        .arg("--format")
        .arg(format!("text={}", text.display()))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "warnings only: {}", String::from_utf8_lossy(&out.stderr));
    let size = std::fs::metadata(&json).unwrap().len();
    (
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap(),
        std::fs::read_to_string(&text).unwrap(),
        size,
    )
}

/// 2,000 sm_90a cubins of one package: one matrix row counting them, runs on H100 (all 2,000
/// for it), not judged (CL028, a warning) on an L4 and an RTX 5090, none of which they are for;
/// the JSON keeps counts and architectures, not a row per file.
#[test]
fn thousands_of_loose_cubins_are_one_set_judged_per_gpu() {
    let d = tempfile::tempdir().unwrap();
    let (json, text, size) = scan(&image(d.path()), d.path());
    let dir = format!("/{SITE}/kern/cubins/sm90a/");
    let matrix = json["matrix"].as_array().unwrap();
    assert_eq!(matrix.len(), 1, "one row for the set: {matrix:?}");
    let row = &matrix[0];
    assert_eq!(row["path"], dir.as_str());
    assert_eq!(row["kernel_set"]["files"], FILES as u64);
    assert_eq!(row["kernel_set"]["sass"], serde_json::json!(["sm_90a"]));
    assert_eq!(row["package"]["name"], "kern");
    let cell = |gpu: &str| row["cells"].as_array().unwrap().iter().find(|c| c["target"] == gpu).unwrap().clone();
    assert_eq!(cell("H100")["files"], serde_json::json!({"native": FILES, "jit": 0, "of": FILES}));
    assert_eq!(cell("H100")["class"], "native");
    assert_eq!(cell("H100")["text"], "2,000 of 2,000 files");
    for gpu in ["L4", "RTX 5090"] {
        assert_eq!(cell(gpu)["files"]["native"], 0, "{gpu}");
        assert_eq!(cell(gpu)["text"], "none of 2,000 files", "{gpu}");
    }

    let headline =
        |gpu: &str| json["headlines"].as_array().unwrap().iter().find(|h| h["target"] == gpu).unwrap().clone();
    assert_eq!(headline("H100")["text"], "H100: runs (2,000 of 2,000 files for it)");
    assert!(headline("H100").get("not_judged").is_none());
    let findings = json["findings"].as_array().unwrap();
    for gpu in ["L4", "RTX 5090"] {
        let h = headline(gpu);
        assert_eq!(h["verdict"], "runs", "{gpu}");
        assert_eq!(h["text"], format!("{gpu}: runs, with 1 thing not judged"));
        assert_eq!(h["not_judged"], 1, "{gpu}");
        let mine: Vec<&Value> = findings.iter().filter(|f| f["target"] == gpu).collect();
        assert_eq!(mine.len(), 1, "{gpu}: {mine:?}");
        assert_eq!(mine[0]["rule"], "CL028");
        assert_eq!(mine[0]["severity"], "warning");
        assert_eq!(mine[0]["path"], dir.as_str());
        assert_eq!(mine[0]["package"], "kern 1.0 (pypi)");
        let m = mine[0]["message"].as_str().unwrap();
        assert!(m.contains("kern's 2,000 loose kernel files") && m.contains("(they carry sm_90a)"), "{m}");
        assert!(m.contains("may fall back") && m.contains("or fail"), "{m}");
    }
    assert!(!findings.iter().any(|f| f["target"] == "H100"), "{findings:?}");
    // No file of the set is a finding or a row of its own.
    assert!(!findings.iter().any(|f| f["rule"] == "CL001"), "{findings:?}");
    assert!(size < 2 << 20, "JSON is {size} bytes");
    // The text grid: one line for the set, its files counted.
    let lines: Vec<&str> = text.lines().filter(|l| l.contains("kern/cubins")).collect();
    assert!(
        lines.iter().any(|l| l.contains("(2,000 files, package kern)") && l.contains("none of 2,000 files")),
        "{text}"
    );
}

/// Inventory and judgement read the same bytes once: judging the set on three GPUs costs little
/// beside the inventory (the issue's bound is 1.2x; here only what the test machine's noise
/// allows is checked, the figures are in the benchmark notes).
#[test]
fn judging_a_kernel_set_costs_little_beside_its_inventory() {
    let d = tempfile::tempdir().unwrap();
    let image = image(d.path());
    let time = |args: &[&str]| {
        let mut best = f64::MAX;
        for _ in 0..3 {
            let t = std::time::Instant::now();
            let out = Command::cargo_bin("cudalint").unwrap().args(args).output().unwrap();
            assert!(out.status.code().is_some_and(|c| c < 2), "{}", String::from_utf8_lossy(&out.stderr));
            best = best.min(t.elapsed().as_secs_f64());
        }
        best
    };
    let inventory = time(&["scan", &image, "--format", "inventory", "--quiet", "--no-cache"]);
    let judged = time(&["scan", &image, "--gpu", "H100,L4,RTX 5090", "--format", "json", "--quiet", "--no-cache"]);
    eprintln!("inventory {inventory:.3}s, judged {judged:.3}s ({:.2}x)", judged / inventory);
    assert!(judged < inventory * 1.5 + 0.05, "inventory {inventory:.3}s, judged {judged:.3}s");
}

/// flashinfer-cubin 0.6.8.post1 (pinned by version and sha256 in
/// tests/stacks/torch-2.11.0-vllm-0.20.0-cu13.txt), read as a wheel: its 10,560 cubins are one
/// set. Its truth from the file names its build gives them: the `Sm103a` ones run on a B300 only,
/// every other one (sm_100a, sm_100f, and deep-gemm's unnamed sm_100 builds) on a B200; none on
/// an H100, an L4 or an RTX 5090, which get CL028.
#[cfg(feature = "slow-tests")]
#[test]
fn flashinfer_cubins_are_one_set_runs_on_b200_not_judged_on_h100() {
    let wheel = flashinfer_cubin();
    let names: Vec<String> = {
        let z = zip::ZipArchive::new(std::fs::File::open(&wheel).unwrap()).unwrap();
        z.file_names().filter(|n| n.ends_with(".cubin")).map(str::to_string).collect()
    };
    let sm103a = names.iter().filter(|n| n.to_ascii_lowercase().contains("sm103a")).count() as u64;
    let d = tempfile::tempdir().unwrap();
    let json = d.path().join("r.json");
    let out = Command::cargo_bin("cudalint")
        .unwrap()
        .args(["scan", wheel.to_str().unwrap(), "--gpu", "B200,H100,L4,RTX 5090", "--quiet", "--no-cache"])
        .arg("--format")
        .arg(format!("json={}", json.display()))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let size = std::fs::metadata(&json).unwrap().len();
    assert!(size < 2 << 20, "JSON is {size} bytes");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let matrix = r["matrix"].as_array().unwrap();
    assert_eq!(matrix.len(), 1, "one row for the set");
    assert_eq!(matrix[0]["kernel_set"]["files"], names.len() as u64);
    let b200 = &matrix[0]["cells"][0];
    assert_eq!(b200["files"]["native"], names.len() as u64 - sm103a, "{b200}");
    let headlines = r["headlines"].as_array().unwrap();
    assert!(headlines[0]["text"].as_str().unwrap().starts_with("B200: runs ("), "{}", headlines[0]);
    for h in &headlines[1..] {
        assert!(h["text"].as_str().unwrap().ends_with("runs, with 1 thing not judged"), "{h}");
        let t = h["target"].as_str().unwrap();
        let cl028 =
            r["findings"].as_array().unwrap().iter().filter(|f| f["rule"] == "CL028" && f["target"] == t).count();
        assert_eq!(cl028, 1, "{t}");
    }
}

/// The pinned wheel in the test cache, downloaded (with its hash required) when missing.
#[cfg(feature = "slow-tests")]
fn flashinfer_cubin() -> std::path::PathBuf {
    let dir = crate::stock_stack::cache().join("wheels");
    let path = dir.join("flashinfer_cubin-0.6.8.post1-py3-none-any.whl");
    let pin = std::fs::read_to_string(crate::util::root().join("tests/stacks/torch-2.11.0-vllm-0.20.0-cu13.txt"))
        .unwrap()
        .lines()
        .find(|l| l.starts_with("flashinfer-cubin=="))
        .expect("flashinfer-cubin pinned in the vLLM stack")
        .to_string();
    if !path.exists() {
        std::fs::create_dir_all(&dir).unwrap();
        let req = dir.join("flashinfer-cubin.txt");
        std::fs::write(&req, format!("{pin}\n")).unwrap();
        let ok = std::process::Command::new("python3")
            .args(["-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:", "--require-hashes", "-r"])
            .arg(&req)
            .arg("-d")
            .arg(&dir)
            .status()
            .unwrap();
        assert!(ok.success(), "could not download {pin} (PyPI must be reachable)");
    }
    let want = pin.split("sha256:").nth(1).unwrap().trim();
    let got = crate::util::run(std::process::Command::new("sha256sum").arg(&path));
    assert!(got.starts_with(want), "{} is not the pinned wheel: {got}", path.display());
    path
}
