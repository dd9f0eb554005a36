//! The stock `pip install torch==2.8.0` closure, judged as users ship it: torch, triton and
//! every NVIDIA wheel it pins (cuDNN, cuSPARSELt, CUPTI, NVRTC, nvJitLink, cuBLAS, NCCL, ...),
//! pinned by version and sha256 in tests/stacks/torch-2.8.0-cu128.txt, fetched from PyPI and
//! stacked into one image layer as pip lays them out (scripts/build-stack-image.py; about 3.7 GB
//! of wheels and a 6.7 GB layer, cached in `$CUDALINT_TEST_CACHE`, else
//! `~/.cache/cudalint-test`). On the GPUs and drivers it is built for it passes quietly; on a GPU
//! it lacks it fails naming the binary; every headline agrees with its target's findings.

use std::path::PathBuf;
use std::process::Command as Std;
use std::sync::OnceLock;

use assert_cmd::Command;
use serde_json::Value;

use crate::util::root;

pub(crate) fn cache() -> PathBuf {
    if let Some(d) = std::env::var_os("CUDALINT_TEST_CACHE").filter(|v| !v.is_empty()) {
        return PathBuf::from(d);
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache"));
    base.join("cudalint-test")
}

/// `oci:DIR` of a closure in tests/stacks/ (`torch-2.8.0-cu128`), stacked as pip lays it out.
pub(crate) fn build(name: &str) -> String {
    let out = cache().join("stacks").join(name);
    let o = Std::new("python3")
        .arg(root().join("scripts/build-stack-image.py"))
        .arg(root().join(format!("tests/stacks/{name}.txt")))
        .arg(&out)
        .env("CUDALINT_WHEELS", cache().join("wheels"))
        .output()
        .expect("run python3 scripts/build-stack-image.py");
    assert!(
        o.status.success(),
        "scripts/build-stack-image.py could not build {name} (PyPI must be reachable, and about 11 GB \
         free under {} for the torch stack): {}",
        cache().display(),
        String::from_utf8_lossy(&o.stderr)
    );
    format!("oci:{}", out.display())
}

/// The stock torch 2.8.0 closure, built once per test run.
pub(crate) fn torch_image() -> &'static str {
    static IMAGE: OnceLock<String> = OnceLock::new();
    IMAGE.get_or_init(|| build("torch-2.8.0-cu128"))
}

/// The stock `pip install vllm==0.20.0` closure: vLLM and torch 2.11, both CUDA 13.
pub(crate) fn vllm_cu13_image() -> &'static str {
    static IMAGE: OnceLock<String> = OnceLock::new();
    IMAGE.get_or_init(|| build("torch-2.11.0-vllm-0.20.0-cu13"))
}

/// The scan's JSON report and exit code (never 2: the scan must finish).
fn scan(gpus: &str, driver: &str) -> (i32, Value) {
    scan_image(torch_image(), gpus, driver)
}

pub(crate) fn scan_image(image: &str, gpus: &str, driver: &str) -> (i32, Value) {
    let out = Command::cargo_bin("cudalint")
        .unwrap()
        .args(["scan", image, "--gpu", gpus, "--driver", driver, "--quiet", "--format", "json"])
        .output()
        .unwrap();
    let code = out.status.code().unwrap();
    assert!(code != 2, "scan did not finish: {}", String::from_utf8_lossy(&out.stderr));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    keep(image, gpus, driver);
    (code, r)
}

/// The text report, kept under target/verdict-reports/ for people to read (not compared).
fn keep(image: &str, gpus: &str, driver: &str) {
    let out = Command::cargo_bin("cudalint")
        .unwrap()
        .args(["scan", image, "--gpu", gpus, "--driver", driver, "--quiet"])
        .output()
        .unwrap();
    let dir = root().join("target/verdict-reports");
    std::fs::create_dir_all(&dir).unwrap();
    let stack = image.rsplit('/').next().unwrap_or("image");
    let name = format!("{stack}-{}-{driver}.txt", gpus.replace([',', ' '], "_"));
    std::fs::write(dir.join(name), out.stdout).unwrap();
}

pub(crate) fn findings(r: &Value) -> Vec<&Value> {
    r["findings"].as_array().unwrap().iter().collect()
}

pub(crate) fn brief(r: &Value) -> Vec<String> {
    findings(r)
        .iter()
        .map(|f| {
            format!(
                "{} {} {} {}",
                f["severity"].as_str().unwrap(),
                f["rule"].as_str().unwrap(),
                f["path"].as_str().unwrap_or("image"),
                f["target"].as_str().unwrap_or("")
            )
        })
        .collect()
}

pub(crate) fn count(r: &Value, severity: &str) -> usize {
    findings(r).iter().filter(|f| f["severity"] == severity).count()
}

/// Every headline says what its target's findings say: `fails` exactly where an error is left
/// for that target (its own or an image-wide one).
pub(crate) fn headlines_agree(r: &Value) {
    for h in r["headlines"].as_array().unwrap() {
        let t = h["target"].as_str().unwrap();
        let errors = findings(r)
            .iter()
            .filter(|f| f["severity"] == "error" && (f["target"].is_null() || f["target"] == t))
            .count();
        assert_eq!(h["verdict"] == "fails", errors > 0, "{t}: {h} against {:#?}", brief(r));
    }
}

#[test]
fn the_stock_torch_stack_passes_on_the_gpus_it_is_built_for() {
    for (gpus, driver) in [("A100,L4,H100,RTX 5090", "580.65.06"), ("H100", "550.54.14")] {
        let (code, r) = scan(gpus, driver);
        assert_eq!(code, 0, "{gpus} {driver}: {:#?}", brief(&r));
        assert_eq!(count(&r, "error"), 0, "{gpus} {driver}: {:#?}", brief(&r));
        assert!(count(&r, "warning") <= 3, "{gpus} {driver}: {:#?}", brief(&r));
        // Nothing NVIDIA's own libraries do by design is a finding: CUPTI's and cuSPARSELt's
        // data-kept cubins, cuBLAS's and cuDNN's per-GPU kernel sets.
        let noise: Vec<String> = brief(&r).into_iter().filter(|f| f.contains("CL015") || f.contains("CL002")).collect();
        assert!(noise.is_empty(), "{gpus} {driver}: {noise:#?}");
        for h in r["headlines"].as_array().unwrap() {
            assert!(h["text"].as_str().unwrap().contains(": runs"), "{h}");
        }
        headlines_agree(&r);
        // Every CUDA library of the closure is judged, torch's own first among them.
        let rows: Vec<&str> = r["matrix"].as_array().unwrap().iter().map(|m| m["path"].as_str().unwrap()).collect();
        for lib in [
            "torch/lib/libtorch_cuda.so",
            "nvidia/cudnn/lib/libcudnn_engines_precompiled.so.9",
            "nvidia/cusparselt/lib/libcusparseLt.so.0",
        ] {
            assert!(rows.iter().any(|p| p.ends_with(lib)), "{lib} not in the matrix: {rows:#?}");
        }
    }
}

#[test]
fn the_stock_torch_stack_fails_on_pascal_naming_libtorch_cuda() {
    let (code, r) = scan("GTX 1080 Ti", "580.65.06");
    assert_eq!(code, 1, "{:#?}", brief(&r));
    let cl001: Vec<&str> =
        findings(&r).iter().filter(|f| f["rule"] == "CL001").filter_map(|f| f["path"].as_str()).collect();
    assert!(cl001.iter().any(|p| p.ends_with("torch/lib/libtorch_cuda.so")), "{cl001:#?}");
    let h = r["headlines"][0]["text"].as_str().unwrap();
    assert!(h.starts_with("GTX 1080 Ti · driver 580.65.06: fails — ") && h.contains("libtorch_cuda.so"), "{h}");
    headlines_agree(&r);
}

/// Volta is one of torch 2.8's architectures: it runs there, on a CUDA 12.2 driver too. cuSPARSELt
/// (compute capability 8.0 and newer) is an optional library torch checks for, not a failure.
#[test]
fn the_stock_torch_stack_runs_on_volta_without_cusparselt() {
    for driver in ["535.104.05", "580.65.06"] {
        let (code, r) = scan("V100", driver);
        assert_eq!(code, 0, "{driver}: {:#?}", brief(&r));
        let h = r["headlines"][0]["text"].as_str().unwrap();
        assert!(
            h.contains("runs (native)")
                && h.contains("libcusparseLt.so.0 (for compute capability 8.0 and newer) unavailable"),
            "{h}"
        );
        let row = r["matrix"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["path"].as_str().unwrap().ends_with("libcusparseLt.so.0"))
            .unwrap();
        assert_eq!(row["cells"][0]["class"], "arch-gated", "{row}");
        headlines_agree(&r);
    }
}

/// What CUPTI (shipped twice: its own wheel and inside triton) keeps as data and loads itself is
/// detail: visible in the inventory, flagged as library-managed, never an error.
#[test]
fn cupti_data_problems_are_detail_not_errors() {
    let out = Command::cargo_bin("cudalint")
        .unwrap()
        .args(["scan", torch_image(), "--quiet", "--format", "inventory"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let inv: Value = serde_json::from_slice(&out.stdout).unwrap();
    let files = inv["files"].as_array().unwrap();
    let cupti: Vec<&Value> = files
        .iter()
        .filter(|f| f["path"].as_str().unwrap().rsplit('/').next().unwrap().starts_with("libcupti.so"))
        .collect();
    assert!(cupti.len() >= 4, "CUPTI copies: {:?}", cupti.iter().map(|f| &f["path"]).collect::<Vec<_>>());
    // Its bare cubins kept in `.rodata` are not all complete device ELFs (cuobjdump says the
    // library "does not contain device code"): the inventory shows what could not be read.
    for f in &cupti {
        let hidden = f["hidden_cubins"].as_array().unwrap();
        let damaged =
            hidden.iter().filter(|h| h["cubin"]["problems"].as_array().is_some_and(|p| !p.is_empty())).count();
        assert!(
            damaged > 0 && damaged < hidden.len(),
            "{}: {damaged} of {} hidden cubins with problems",
            f["path"],
            hidden.len()
        );
    }
    let (code, r) = scan("H100", "580.65.06");
    assert_eq!(code, 0);
    assert!(!brief(&r).iter().any(|f| f.contains("libcupti")), "{:#?}", brief(&r));
    // H100 is native everywhere but in cuFile 1.13.1.3, which carries no sm_9x SASS, only
    // compute_80 PTX above its cubins: the one JIT the headline counts.
    // Libraries that load their own kernel sets (CUPTI, cuFFT) are not judged.
    let h = r["headlines"][0]["text"].as_str().unwrap();
    assert!(h.ends_with(": runs (PTX JIT for 1 binary, 9.8 KiB: milliseconds)"), "{h}");
    for m in r["matrix"].as_array().unwrap() {
        let (path, c) = (m["path"].as_str().unwrap(), &m["cells"][0]);
        let want = if path.ends_with("/nvidia/cufile/lib/libcufile.so.0") {
            "jit"
        } else if c["text"].as_str().unwrap().starts_with("lib-managed") {
            "n/a"
        } else {
            "native"
        };
        assert_eq!(c["class"], want, "{path}: {c}");
    }
}

/// Code compiled at run time: torch 2.8.0's Triton (ptxas 12.8.93) and NVRTC (12.8.93) know no
/// sm_103 (B300) or sm_121 (GB10); the eager path runs there, torch.compile and the jiterator
/// ops do not. On H100 and RTX 5090 they do.
#[test]
fn torch_compile_on_b300_and_gb10_is_a_warning_naming_triton_and_the_fix() {
    let (code, r) = scan("B300,GB10,H100,RTX 5090", "580.65.06");
    // GB10 comes with an arm64 host (DGX Spark) and this image is linux/amd64: that error alone;
    // the compilers' findings are warnings.
    assert_eq!(code, 1, "{:#?}", brief(&r));
    let errors: Vec<(&Value, &Value)> =
        findings(&r).iter().filter(|f| f["severity"] == "error").map(|f| (&f["rule"], &f["target"])).collect();
    assert_eq!(errors, [(&Value::from("CL024"), &Value::from("GB10"))], "{:#?}", brief(&r));
    let all = findings(&r);
    for (gpu, arch) in [("B300", "sm_103a"), ("GB10", "sm_121a")] {
        let triton: Vec<&&Value> = all
            .iter()
            .filter(|f| f["rule"] == "CL021" && f["target"] == gpu)
            .filter(|f| f["path"].as_str().unwrap().ends_with("triton/backends/nvidia/bin/ptxas"))
            .collect();
        assert_eq!(triton.len(), 1, "{gpu}: {:#?}", brief(&r));
        let m = triton[0]["message"].as_str().unwrap();
        assert!(m.contains(&format!("triton 3.4.0's ptxas 12.8 knows no {arch}")), "{m}");
        let fix = triton[0]["fix"].as_str().unwrap();
        assert!(fix.starts_with("install triton >= 3.6.0 (torch 2.10.0 pins it)"), "{fix}");
        assert!(fix.contains("TRITON_PTXAS_PATH"), "{fix}");
        let jiterator = findings(&r)
            .iter()
            .filter(|f| f["rule"] == "CL021" && f["target"] == gpu)
            .any(|f| f["path"].as_str().unwrap().ends_with("nvidia/cuda_nvrtc/lib/libnvrtc.so.12"));
        assert!(jiterator, "{gpu}: {:#?}", brief(&r));
        let h = r["headlines"].as_array().unwrap().iter().find(|h| h["target"] == gpu).unwrap();
        let text = h["text"].as_str().unwrap();
        let compiled = format!("torch.compile / Triton kernels fail (triton 3.4.0's ptxas 12.8 knows no {arch})");
        if gpu == "GB10" {
            assert!(text.contains(": fails — GB10 comes with an arm64 host only; the image is linux/amd64"), "{text}");
        } else {
            assert!(text.contains("runs its ahead-of-time kernels") && text.contains(&compiled), "{text}");
        }
    }
    for gpu in ["H100", "RTX 5090"] {
        let compiled: Vec<String> = brief(&r).into_iter().filter(|f| f.contains("CL02") && f.ends_with(gpu)).collect();
        assert!(compiled.is_empty(), "{gpu}: {compiled:#?}");
    }
    // The compilers are listed with the versions their own bytes carry.
    let compilers = r["compilers"].as_array().unwrap();
    let ptxas =
        compilers.iter().find(|c| c["path"].as_str().unwrap().ends_with("triton/backends/nvidia/bin/ptxas")).unwrap();
    assert_eq!(
        (&ptxas["kind"], &ptxas["version"], &ptxas["source"], &ptxas["package"]),
        (&Value::from("ptxas"), &Value::from("12.8.93"), &Value::from("banner"), &Value::from("triton 3.4.0"))
    );
    assert!(compilers.iter().any(|c| c["kind"] == "nvjitlink" && c["version"] == "12.8.93"), "{compilers:#?}");
    headlines_agree(&r);
}

/// CuPy compiles its kernels with NVRTC and clamps the architecture by NVRTC release: with NVRTC
/// 12.6 it asks for an sm_90 cubin on an RTX 5090, which does not load; 12.8 asks for sm_120.
#[test]
fn cupy_with_an_old_nvrtc_fails_on_rtx_5090_and_passes_with_12_8() {
    static OLD: OnceLock<String> = OnceLock::new();
    static NEW: OnceLock<String> = OnceLock::new();
    let old = OLD.get_or_init(|| build("cupy-13.6.0-nvrtc-12.6"));
    let (code, r) = scan_image(old, "RTX 5090,H100", "580.65.06");
    assert_eq!(code, 1, "{:#?}", brief(&r));
    let f = findings(&r).iter().find(|f| f["rule"] == "CL020").copied().expect("CL020");
    assert_eq!(f["target"], "RTX 5090");
    assert_eq!(f["package"], "cupy-cuda12x 13.6.0 (pypi)");
    let m = f["message"].as_str().unwrap();
    assert!(m.contains("asks NVRTC 12.6 for sm_90") && m.contains("CUDA_ERROR_NO_BINARY_FOR_GPU"), "{m}");
    assert!(f["fix"].as_str().unwrap().contains("nvidia-cuda-nvrtc-cu12>=12.8"), "{}", f["fix"]);
    assert!(!brief(&r).iter().any(|b| b.contains("CL020") && b.ends_with("H100")), "{:#?}", brief(&r));
    headlines_agree(&r);
    // The CycloneDX SBOM lists the NVRTC under its package, with its version and where it came from.
    let out = Command::cargo_bin("cudalint")
        .unwrap()
        .args(["scan", old, "--quiet", "--format", "cyclonedx"])
        .output()
        .unwrap();
    let bom: Value = serde_json::from_slice(&out.stdout).unwrap();
    let pkg = bom["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "nvidia-cuda-nvrtc-cu12")
        .expect("the NVRTC package");
    let lib = &pkg["components"][0];
    let props: Vec<(String, String)> = lib["properties"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["name"].as_str().unwrap().to_string(), p["value"].as_str().unwrap().to_string()))
        .collect();
    assert!(props.contains(&("cudalint:compiler".into(), "nvrtc".into())), "{props:?}");
    assert!(props.contains(&("cudalint:compiler-version".into(), "12.6.77".into())), "{props:?}");

    let new = NEW.get_or_init(|| build("cupy-13.6.0-nvrtc-12.8"));
    let (code, r) = scan_image(new, "RTX 5090,H100", "580.65.06");
    assert_eq!(code, 0, "{:#?}", brief(&r));
    headlines_agree(&r);
}

/// JAX 0.6.2's XLA assembles with the first ptxas it finds, here the pip nvcc wheel's: 12.6 knows
/// no sm_120 (a warning: XLA falls back to the driver's JIT), 12.8 does.
#[test]
fn jax_with_an_old_nvcc_wheel_warns_on_rtx_5090_and_not_with_12_8() {
    static OLD: OnceLock<String> = OnceLock::new();
    static NEW: OnceLock<String> = OnceLock::new();
    let old = OLD.get_or_init(|| build("jax-0.6.2-nvcc-12.6"));
    let (code, r) = scan_image(old, "RTX 5090,H100", "580.65.06");
    assert_eq!(code, 0, "a warning: {:#?}", brief(&r));
    let all = findings(&r);
    let f: Vec<&&Value> = all.iter().filter(|f| f["rule"] == "CL021").collect();
    assert_eq!(f.len(), 1, "{:#?}", brief(&r));
    assert_eq!(
        (&f[0]["target"], &f[0]["package"]),
        (&Value::from("RTX 5090"), &Value::from("jax-cuda12-plugin 0.6.2 (pypi)"))
    );
    assert!(f[0]["path"].as_str().unwrap().ends_with("nvidia/cuda_nvcc/bin/ptxas"), "{}", f[0]["path"]);
    assert!(f[0]["message"].as_str().unwrap().contains("ptxas 12.6 knows no sm_120"), "{}", f[0]["message"]);
    headlines_agree(&r);
    let new = NEW.get_or_init(|| build("jax-0.6.2-nvcc-12.8"));
    let (code, r) = scan_image(new, "RTX 5090,H100", "580.65.06");
    assert_eq!(code, 0);
    assert!(!brief(&r).iter().any(|b| b.contains("CL02")), "{:#?}", brief(&r));
    let checks = r["compiler_checks"].as_array().unwrap();
    assert!(
        checks
            .iter()
            .any(|c| c["consumer"] == "jax-cuda12-plugin" && c["version"] == "12.8.93" && c["knows_target"] == true),
        "{checks:#?}"
    );
}

/// The static verdicts on run-time compilers against the compilers themselves: the ptxas and
/// NVRTC each stack carries, taken out of the image and run for the architecture
/// (scripts/toolchain-check.py, which scripts/device-check.sh runs for the GPU at hand).
#[test]
fn the_image_compilers_themselves_agree_with_the_static_verdicts() {
    let bin = assert_cmd::cargo::cargo_bin("cudalint");
    let cupy = build("cupy-13.6.0-nvrtc-12.6");
    let jax = build("jax-0.6.2-nvcc-12.6");
    for (image, arch) in [
        (torch_image(), "9.0"),
        (torch_image(), "10.3"),
        (torch_image(), "12.1"),
        (&cupy, "12.0"),
        (&jax, "12.0"),
        (&jax, "9.0"),
    ] {
        let o = Std::new("python3")
            .arg(root().join("scripts/toolchain-check.py"))
            .args([image, "--arch", arch, "--cudalint"])
            .arg(&bin)
            .output()
            .expect("run python3 scripts/toolchain-check.py");
        let table = String::from_utf8_lossy(&o.stdout);
        assert_eq!(o.status.code(), Some(0), "{image} on {arch}:\n{table}{}", String::from_utf8_lossy(&o.stderr));
        // Something was run and compared: a row per compiler check.
        assert!(table.lines().count() >= 2, "{image} on {arch}: {table}");
    }
}

fn cli(args: &[&str]) -> (i32, String) {
    let out = Command::cargo_bin("cudalint").unwrap().args(args).arg("--quiet").output().unwrap();
    let code = out.status.code().unwrap();
    assert_ne!(code, 2, "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    (code, String::from_utf8(out.stdout).unwrap())
}

fn support(image: &str) -> Value {
    let (code, out) = cli(&["support", image, "--format", "json"]);
    assert_eq!(code, 0);
    serde_json::from_str(&out).unwrap()
}

fn result<'a>(s: &'a Value, gpu: &str) -> &'a str {
    s["gpus"].as_array().unwrap().iter().find(|g| g["name"] == gpu).unwrap()["result"].as_str().unwrap()
}

/// torch 2.8 (CUDA 12.8) runs from Volta to Blackwell on a CUDA 12 driver and fails on Pascal.
#[test]
fn the_cuda_12_torch_stack_runs_from_volta_to_blackwell() {
    let s = support(torch_image());
    let summary = s["summary"].as_str().unwrap();
    assert!(
        summary.starts_with("runs on compute capability 7.0–12.0 (Volta → Blackwell) with driver ≥ 525.60.13"),
        "{summary}"
    );
    assert!(summary.contains("fails on Pascal and older (no code for it in libtorch_cuda.so)"), "{summary}");
    assert_eq!(s["floor"]["cuda"], "12.0");
    for gpu in ["V100", "T4", "A100", "L4", "H100", "B200", "RTX 5090"] {
        assert!(["native", "jit", "arch-gated"].contains(&result(&s, gpu)), "{gpu}: {}", result(&s, gpu));
    }
    assert_eq!(result(&s, "GTX 1080 Ti"), "fails");
    // torch.compile's bundled ptxas 12.8 knows no sm_103: the eager path runs, the compiler falls short.
    assert_eq!(result(&s, "B300"), "runtime-compiler");
}

/// vLLM 0.20 with torch 2.11 (CUDA 13.0): Ampere to Blackwell with a 580 driver; CUDA 13 cannot
/// build for Volta; on Turing, torch 2.11's own libtorch_cuda_linalg.so carries no sm_75
/// (cuobjdump 13.5 lists sm_80, 86, 90, 100 and 120 only).
#[test]
fn the_cuda_13_vllm_stack_needs_580_and_fails_on_volta() {
    let s = support(vllm_cu13_image());
    let summary = s["summary"].as_str().unwrap();
    assert!(
        summary.starts_with("runs on compute capability 8.0–12.0 (Ampere → Blackwell) with driver ≥ 580.65.06"),
        "{summary}"
    );
    assert!(summary.contains("fails on Volta and older (CUDA 13 builds: torch, torchaudio, torchvision"), "{summary}");
    assert!(summary.contains("fails on Turing (no code for it in libtorch_cuda_linalg.so)"), "{summary}");
    assert_eq!(s["floor"]["driver"], "580.65.06");
    for gpu in ["A100", "L4", "H100", "B200", "B300", "RTX 5090"] {
        assert!(
            s["gpus"]
                .as_array()
                .unwrap()
                .iter()
                .any(|g| g["name"] == gpu && (g["min_driver"] == "580.65.06" || g["min_driver"] == "580.82.07")),
            "{gpu}"
        );
        assert!(["native", "jit", "arch-gated"].contains(&result(&s, gpu)), "{gpu}: {}", result(&s, gpu));
    }
    // flashinfer-cubin's 10,560 Blackwell cubins are what flashinfer loads per GPU: no failure on
    // H100, where none is for it: not judged, said in the row's detail (CL028).
    for g in s["gpus"].as_array().unwrap() {
        assert!(!g["binaries"].to_string().contains("flashinfer_cubin/cubins"), "a loose cubin decides a verdict: {g}");
    }
    let h100 = s["gpus"].as_array().unwrap().iter().find(|g| g["name"] == "H100").unwrap();
    assert!(h100["detail"].as_str().unwrap().contains("not judged: "), "{h100}");
    assert!(h100["headline"].as_str().unwrap().contains("0 of 10,560 loose kernel files for it"), "{h100}");
}

/// The vLLM stack's reports stay readable: flashinfer-cubin's 10,560 cubins are one matrix row
/// (they were 10,560, a 3.5 MB Markdown and 10,697 lines of text), so the Markdown fits a GitHub
/// step summary (1 MiB) with room to spare and the text is a few screens; JSON too keeps one row
/// for the set, with its count.
#[test]
fn the_vllm_stacks_reports_fit_a_step_summary() {
    let dir = tempfile::tempdir().unwrap();
    let at = |f: &str| dir.path().join(f);
    let mut args =
        vec!["scan".to_string(), vllm_cu13_image().to_string(), "--gpu".into(), "V100,T4,H100,B300,RTX5090".into()];
    for f in ["text", "markdown", "json"] {
        args.push("--format".into());
        args.push(format!("{f}={}", at(f).display()));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    cli(&args);
    let md = std::fs::read_to_string(at("markdown")).unwrap();
    assert!(md.len() < 512 << 10, "Markdown is {} bytes", md.len());
    assert!(md.contains("flashinfer_cubin/cubins/` (10,560 files, package flashinfer-cubin)"), "{md}");
    let text = std::fs::read_to_string(at("text")).unwrap();
    assert!(text.lines().count() < 400, "text is {} lines", text.lines().count());
    // One grid line for the set, none for a cubin of it (findings name the set's directory).
    assert_eq!(text.lines().filter(|l| l.contains("flashinfer_cubin/cubins/ (10,560 files")).count(), 1, "{text}");
    assert!(!text.lines().any(|l| l.contains("flashinfer_cubin/cubins/") && l.contains(".cubin")), "{text}");
    let json: Value = serde_json::from_str(&std::fs::read_to_string(at("json")).unwrap()).unwrap();
    let cubins: Vec<&Value> = json["matrix"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["path"].as_str().unwrap().contains("flashinfer_cubin/cubins/"))
        .collect();
    assert_eq!(cubins.len(), 1);
    assert_eq!(cubins[0]["kernel_set"]["files"], 10_560);
}

/// The upgrade from the CUDA 12 stack to the CUDA 13 one drops Volta and Turing and raises the
/// floor; back the other way nothing is lost; an image against itself changes nothing.
#[test]
fn diff_of_the_cuda_12_and_13_stacks_names_volta_and_the_floor() {
    let (old, new) = (torch_image(), vllm_cu13_image());
    let dir = tempfile::tempdir().unwrap();
    let md_path = dir.path().join("diff.md");
    let md_arg = format!("markdown={}", md_path.display());
    // One run, two views: Markdown to a file, JSON on standard output.
    let (code, out) = cli(&["diff", old, new, "--format", &md_arg, "--format", "json", "--driver", "550.54.15"]);
    assert_eq!(code, 1, "{out}");
    let d: Value = serde_json::from_str(&out).unwrap();
    let lost: Vec<&str> = d["lost"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert!(lost.contains(&"V100") && lost.contains(&"T4"), "{lost:?}");
    assert!(!lost.contains(&"H100"), "{lost:?}");
    assert_eq!(d["floor"]["old"], "525.60.13");
    assert_eq!(d["floor"]["new"], "580.65.06");
    let failures = d["failures"].to_string();
    assert!(failures.contains("V100") && failures.contains("above the fleet's 550.54.15"), "{failures}");
    // torch's own build changed: cu12 -> cu13 NVIDIA packages, torch 2.8 -> 2.11.
    let pkgs = d["packages"].to_string();
    assert!(pkgs.contains("nvidia-cublas-cu12 12.8.4.1") && pkgs.contains("torch 2.11.0"), "{pkgs}");
    let md = std::fs::read_to_string(&md_path).unwrap();
    assert!(md.contains("driver floor raised: 525.60.13 (CUDA 12.0) → 580.65.06 (CUDA 13.0)"), "{md}");
    assert!(md.contains("- lost: ") && md.contains("V100"), "{md}");
    let (code, out) = cli(&["diff", new, old, "--format", "json"]);
    assert_eq!(code, 0, "{out}");
    let back: Value = serde_json::from_str(&out).unwrap();
    assert!(back["lost"].as_array().unwrap().is_empty() && back["gained"].to_string().contains("V100"));
    let (code, out) = cli(&["diff", old, old, "--format", "json"]);
    assert_eq!(code, 0);
    let same: Value = serde_json::from_str(&out).unwrap();
    assert!(same["gpus"].as_array().unwrap().is_empty() && same["binaries"].as_array().unwrap().is_empty());
}
