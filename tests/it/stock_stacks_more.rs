//! More stock stacks judged on their own GPUs, as `stock_stack` judges torch 2.8 and vLLM:
//! `pip install torch==2.5.1` (CUDA 12.4; tests/stacks/torch-2.5.1-cu124.txt), `pip install
//! torch==2.7.0` (PyPI's default build, CUDA 12.6; tests/stacks/torch-2.7.0-cu126.txt)
//! and `pip install tensorflow[and-cuda]==2.21.0` (CUDA 12.9 components with cuDNN 9.28;
//! tests/stacks/tensorflow-2.21.0-and-cuda.txt), each pinned by version and sha256, fetched from
//! PyPI and stacked into one image layer as pip lays them out (scripts/build-stack-image.py:
//! about 3.0 GB of wheels and a 5.4 GB layer for torch 2.7, 4.9 GB for torch 2.5, 3.4 GB and 6.5 GB
//! for TensorFlow, cached in `$CUDALINT_TEST_CACHE`, else `~/.cache/cudalint-test`).
//!
//! On the GPUs its vendor builds for, each stack passes with no error and at most the PTX JIT
//! warnings a CUDA engineer keeps (TensorFlow's compute_90 PTX on Blackwell); on a GPU the vendor
//! dropped it fails naming the binary that lacks code: torch 2.5's and 2.7's libtorch_cuda.so on
//! Blackwell, cuDNN 9.28's sm_75+ libraries under TensorFlow on Volta and Pascal. Every headline
//! agrees with its target's findings, `support`'s summary names the binaries that fail each
//! architecture, and an image read in one pass from standard input (a `docker save`-style tar)
//! gets the verdicts of the same image read by seeking.

use std::process::{Command as Std, Stdio};
use std::sync::OnceLock;

use assert_cmd::Command;
use serde_json::Value;

use crate::stock_stack::{brief, build, count, findings, headlines_agree, scan_image};

const DRIVER: &str = "580.65.06";

/// The stock torch 2.7.0 closure (CUDA 12.6), built once per test run.
fn torch_image() -> &'static str {
    static IMAGE: OnceLock<String> = OnceLock::new();
    IMAGE.get_or_init(|| build("torch-2.7.0-cu126"))
}

/// The stock torch 2.5.1 closure (CUDA 12.4), built once per test run.
fn torch_2_5_image() -> &'static str {
    static IMAGE: OnceLock<String> = OnceLock::new();
    IMAGE.get_or_init(|| build("torch-2.5.1-cu124"))
}

/// The stock `tensorflow[and-cuda]` 2.21.0 closure, built once per test run.
fn tf_image() -> &'static str {
    static IMAGE: OnceLock<String> = OnceLock::new();
    IMAGE.get_or_init(|| build("tensorflow-2.21.0-and-cuda"))
}

/// The scan's JSON report and exit code (never 2: the scan must finish).
fn scan(image: &str, gpus: &str) -> (i32, Value) {
    scan_image(image, gpus, DRIVER)
}

/// The same image as a tar of its OCI layout on standard input (what `docker save` writes since
/// Docker 25: blobs first, then index.json and manifest.json), read in one pass.
fn scan_stream(image: &str, gpus: &str) -> (i32, Value) {
    let dir = image.strip_prefix("oci:").unwrap();
    let mut tar = Std::new("tar").args(["-C", dir, "-cf", "-", "."]).stdout(Stdio::piped()).spawn().expect("run tar");
    let out = Std::new(assert_cmd::cargo::cargo_bin("cudalint"))
        .args(["scan", "-", "--gpu", gpus, "--driver", DRIVER, "--quiet", "--format", "json"])
        .stdin(Stdio::from(tar.stdout.take().unwrap()))
        .output()
        .unwrap();
    assert!(tar.wait().unwrap().success(), "tar of {dir} failed");
    let code = out.status.code().unwrap();
    assert!(code != 2, "scan - did not finish: {}", String::from_utf8_lossy(&out.stderr));
    (code, serde_json::from_slice(&out.stdout).unwrap())
}

/// Paths of the error findings of one rule.
fn errors<'a>(r: &'a Value, rule: &str) -> Vec<&'a str> {
    findings(r)
        .into_iter()
        .filter(|f| f["severity"] == "error" && f["rule"] == rule)
        .filter_map(|f| f["path"].as_str())
        .collect()
}

fn headline(r: &Value) -> &str {
    r["headlines"][0]["text"].as_str().unwrap()
}

/// A clean pass: exit 0, no error, nothing unreadable, a `runs` headline.
fn passes(image: &str, gpu: &str) -> Value {
    let (code, r) = scan(image, gpu);
    assert_eq!(code, 0, "{gpu}: {:#?}", brief(&r));
    assert_eq!(count(&r, "error"), 0, "{gpu}: {:#?}", brief(&r));
    let unread: Vec<String> = brief(&r).into_iter().filter(|f| f.contains("CL015")).collect();
    assert!(unread.is_empty(), "{gpu}: {unread:#?}");
    assert!(headline(&r).starts_with(&format!("{gpu} · driver {DRIVER}: runs")), "{}", headline(&r));
    headlines_agree(&r);
    r
}

fn support(image: &str) -> Value {
    let out = Command::cargo_bin("cudalint")
        .unwrap()
        .args(["support", image, "--format", "json", "--quiet"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn gpu<'a>(s: &'a Value, name: &str) -> &'a Value {
    s["gpus"].as_array().unwrap().iter().find(|g| g["name"] == name).unwrap()
}

/// The fields a seek and a one-pass read must agree on.
fn verdicts(r: &Value) -> (Vec<String>, Vec<String>) {
    let mut f: Vec<String> =
        findings(r).iter().map(|f| format!("{} {} {}", f["target"], f["path"], f["message"])).collect();
    f.sort();
    let h = r["headlines"].as_array().unwrap().iter().map(|h| h["text"].as_str().unwrap().to_string()).collect();
    (f, h)
}

// torch 2.7.0 (CUDA 12.6): libtorch_cuda.so carries sm_50, sm_60, sm_70, sm_75, sm_80, sm_86,
// sm_89, sm_90 and sm_90a, no PTX; NCCL 2.26.2's device-linked module sm_50 … sm_90 (its compute_90
// PTX is only in the relocatable `__nv_relfatbin` inputs, which no driver loads).

#[test]
fn torch_2_7_passes_on_hopper_ampere_ada_and_volta() {
    for g in ["H100", "A100", "L4"] {
        let r = passes(torch_image(), g);
        assert_eq!(count(&r, "warning"), 0, "{g}: {:#?}", brief(&r));
        let rows: Vec<&str> = r["matrix"].as_array().unwrap().iter().map(|m| m["path"].as_str().unwrap()).collect();
        for lib in
            ["torch/lib/libtorch_cuda.so", "nvidia/cudnn/lib/libcudnn_ops.so.9", "cusparselt/lib/libcusparseLt.so.0"]
        {
            assert!(rows.iter().any(|p| p.ends_with(lib)), "{g}: {lib} not in the matrix: {rows:#?}");
        }
    }
    // Volta: torch's own code runs; cuSPARSELt (8.0 and newer) is an optional library.
    let r = passes(torch_image(), "V100");
    assert!(
        headline(&r).contains("runs (native)")
            && headline(&r).contains("libcusparseLt.so.0 (for compute capability 8.0 and newer) unavailable"),
        "{}",
        headline(&r)
    );
}

#[test]
fn torch_2_7_fails_on_rtx_5090_naming_libtorch_cuda() {
    let (code, r) = scan(torch_image(), "RTX 5090");
    assert_eq!(code, 1, "{:#?}", brief(&r));
    let cl001 = errors(&r, "CL001");
    assert!(cl001.iter().any(|p| p.ends_with("torch/lib/libtorch_cuda.so")), "{cl001:#?}");
    // Nothing else is an error: the rest of the stack (cuBLAS, cuDNN 9.5, ...) reaches Blackwell
    // through PTX, and NCCL 2.26.2 and libtorch_cuda_linalg.so have no code for it either.
    for p in &cl001 {
        assert!(
            ["torch/lib/libtorch_cuda.so", "torch/lib/libtorch_cuda_linalg.so", "nvidia/nccl/lib/libnccl.so.2"]
                .iter()
                .any(|l| p.ends_with(l)),
            "{p}"
        );
    }
    assert_eq!(count(&r, "error"), cl001.len(), "{:#?}", brief(&r));
    let h = headline(&r);
    assert!(h.starts_with(&format!("RTX 5090 · driver {DRIVER}: fails — ")) && h.contains("libtorch_cuda.so"), "{h}");
    headlines_agree(&r);
}

#[test]
fn torch_2_7_support_names_what_fails_on_blackwell() {
    let s = support(torch_image());
    let summary = s["summary"].as_str().unwrap();
    assert!(
        summary
            .contains("fails on Blackwell (no code for it in libnccl.so.2, libtorch_cuda.so, libtorch_cuda_linalg.so)"),
        "{summary}"
    );
    for g in ["RTX 5090", "B200"] {
        let row = gpu(&s, g);
        assert_eq!(row["result"], "fails", "{row}");
        let bins = row["binaries"].to_string();
        assert!(bins.contains("torch/lib/libtorch_cuda.so"), "{g}: {bins}");
        assert!(!bins.contains("nvidia/cublas") && !bins.contains("nvidia/cudnn"), "{g}: {bins}");
    }
    for g in ["A100", "L4", "H100"] {
        assert_eq!(gpu(&s, g)["result"], "native", "{g}");
    }
    assert_eq!(gpu(&s, "V100")["result"], "arch-gated");
    assert_eq!(s["floor"]["cuda"], "12.0");
}

/// torch 2.7 takes cuSPARSELt from a wheel (`nvidia-cusparselt-cu12` 0.6.3) whose
/// `cusparselt/lib/libcusparseLt.so.0` was rewritten by patchelf: `.gnu.hash`, `.dynstr` and `.dynamic` in an
/// appended segment (offset 0xd95f000 of 226 MiB), `.dynstr` before `.dynamic` and after all
/// device code. A one-pass read must keep that segment (the program headers announce it) to
/// read SONAME and DT_NEEDED (it reported CL015 on every GPU before issue 30).
#[test]
fn torch_2_7_read_in_one_pass_gets_the_same_verdicts() {
    let gpus = "H100,A100,L4,V100,RTX 5090";
    let (seek_code, seek) = scan(torch_image(), gpus);
    let (code, r) = scan_stream(torch_image(), gpus);
    assert_eq!(code, seek_code, "{:#?}", brief(&r));
    assert!(!brief(&r).iter().any(|f| f.contains("CL015")), "{:#?}", brief(&r));
    assert_eq!(verdicts(&r), verdicts(&seek));
    headlines_agree(&r);
}

// torch 2.5.1 (CUDA 12.4): libtorch_cuda.so carries sm_50, sm_60, sm_70, sm_75, sm_80, sm_86, sm_90
// and sm_90a, no PTX; it bundles cuSPARSELt as torch/lib/libcusparseLt-294d6944.so.0 (sm_80 and
// newer), a library patchelf rewrote (its `.dynstr` in an appended segment); NCCL 2.21.5 sm_50 …
// sm_90 and compute_90 PTX in relocatable inputs only.

#[test]
fn torch_2_5_passes_on_hopper_ampere_ada_and_volta() {
    for g in ["H100", "A100", "L4"] {
        let r = passes(torch_2_5_image(), g);
        assert_eq!(count(&r, "warning"), 0, "{g}: {:#?}", brief(&r));
        assert!(headline(&r).ends_with("runs (native)"), "{g}: {}", headline(&r));
    }
    let r = passes(torch_2_5_image(), "V100");
    assert!(
        headline(&r).contains("runs (native)")
            && headline(&r).contains("libcusparseLt-294d6944.so.0 (for compute capability 8.0 and newer) unavailable"),
        "{}",
        headline(&r)
    );
}

#[test]
fn torch_2_5_fails_on_rtx_5090_naming_libtorch_cuda() {
    let (code, r) = scan(torch_2_5_image(), "RTX 5090");
    assert_eq!(code, 1, "{:#?}", brief(&r));
    let cl001 = errors(&r, "CL001");
    assert!(cl001.iter().any(|p| p.ends_with("torch/lib/libtorch_cuda.so")), "{cl001:#?}");
    for p in &cl001 {
        assert!(
            ["torch/lib/libtorch_cuda.so", "torch/lib/libtorch_cuda_linalg.so", "nvidia/nccl/lib/libnccl.so.2"]
                .iter()
                .any(|l| p.ends_with(l)),
            "{p}"
        );
    }
    assert_eq!(count(&r, "error"), cl001.len(), "{:#?}", brief(&r));
    let h = headline(&r);
    assert!(h.starts_with(&format!("RTX 5090 · driver {DRIVER}: fails — ")) && h.contains("libtorch_cuda.so"), "{h}");
    headlines_agree(&r);
}

/// torch 2.5's bundled `libcusparseLt-294d6944.so.0` keeps `.dynstr` in a segment patchelf
/// appended after the device code: a one-pass read keeps it as the program headers announce it.
#[test]
fn torch_2_5_read_in_one_pass_gets_the_same_verdicts() {
    let gpus = "H100,A100,L4,V100,RTX 5090";
    let (seek_code, seek) = scan(torch_2_5_image(), gpus);
    let (code, r) = scan_stream(torch_2_5_image(), gpus);
    assert_eq!(code, seek_code, "{:#?}", brief(&r));
    assert!(!brief(&r).iter().any(|f| f.contains("CL015")), "{:#?}", brief(&r));
    assert_eq!(verdicts(&r), verdicts(&seek));
    headlines_agree(&r);
}

// TensorFlow 2.21.0 with its and-cuda extra: TensorFlow's own binaries carry sm_60, sm_70, sm_80,
// sm_89, sm_90 and compute_90 PTX; cuDNN 9.28's adv, cnn, ops and runtime-compiled engine
// libraries sm_75, sm_80, (sm_86,) sm_90a, sm_100f, sm_120f and compute_120f PTX.

#[test]
fn tensorflow_passes_on_hopper_ampere_ada_and_turing() {
    for g in ["H100", "A100", "L4", "RTX 4090", "T4"] {
        let r = passes(tf_image(), g);
        assert_eq!(count(&r, "warning"), 0, "{g}: {:#?}", brief(&r));
        let rows: Vec<&str> = r["matrix"].as_array().unwrap().iter().map(|m| m["path"].as_str().unwrap()).collect();
        for lib in [
            "tensorflow/libtensorflow_cc.so.2",
            "tensorflow/libtensorflow_framework.so.2",
            "nvidia/cudnn/lib/libcudnn_ops.so.9",
        ] {
            assert!(rows.iter().any(|p| p.ends_with(lib)), "{g}: {lib} not in the matrix: {rows:#?}");
        }
    }
}

#[test]
fn tensorflow_fails_on_volta_and_pascal_naming_cudnn() {
    for g in ["V100", "GTX 1080 Ti"] {
        let (code, r) = scan(tf_image(), g);
        assert_eq!(code, 1, "{g}: {:#?}", brief(&r));
        let cl001 = errors(&r, "CL001");
        assert_eq!(count(&r, "error"), cl001.len(), "{g}: {:#?}", brief(&r));
        // Only cuDNN lacks code there: TensorFlow's own binaries have sm_60 and sm_70.
        assert!(
            !cl001.is_empty() && cl001.iter().all(|p| p.contains("/nvidia/cudnn/lib/libcudnn_")),
            "{g}: {cl001:#?}"
        );
        assert!(cl001.iter().any(|p| p.ends_with("nvidia/cudnn/lib/libcudnn_ops.so.9")), "{g}: {cl001:#?}");
        let f = findings(&r).into_iter().find(|f| f["rule"] == "CL001").unwrap();
        assert_eq!(f["package"], "nvidia-cudnn-cu12 9.28.0.42 (pypi)");
        let h = headline(&r);
        assert!(h.starts_with(&format!("{g} · driver {DRIVER}: fails — libcudnn_")), "{h}");
        headlines_agree(&r);
    }
}

#[test]
fn tensorflow_runs_on_blackwell_through_ptx_jit_with_a_warning() {
    for g in ["RTX 5090", "B200"] {
        let (code, r) = scan(tf_image(), g);
        assert_eq!(code, 0, "{g}: {:#?}", brief(&r));
        assert_eq!(count(&r, "error"), 0, "{g}: {:#?}", brief(&r));
        // The warnings a CUDA engineer keeps: TensorFlow's compute_90 PTX compiled at first use.
        let w: Vec<&Value> = findings(&r).into_iter().filter(|f| f["severity"] == "warning").collect();
        assert!(!w.is_empty() && w.len() <= 3, "{g}: {:#?}", brief(&r));
        assert!(w.iter().all(|f| f["rule"] == "CL003"), "{g}: {:#?}", brief(&r));
        assert!(
            w.iter().any(|f| f["path"].as_str().unwrap().ends_with("tensorflow/libtensorflow_cc.so.2")),
            "{g}: {:#?}",
            brief(&r)
        );
        assert!(!brief(&r).iter().any(|f| f.contains("libcudnn")), "{g}: {:#?}", brief(&r));
        assert_eq!(r["headlines"][0]["verdict"], "runs-jit");
        assert!(headline(&r).starts_with(&format!("{g} · driver {DRIVER}: runs (PTX JIT for ")), "{}", headline(&r));
        headlines_agree(&r);
    }
}

#[test]
fn tensorflow_support_names_cudnn_for_volta() {
    let s = support(tf_image());
    let summary = s["summary"].as_str().unwrap();
    assert!(summary.starts_with("runs on compute capability 7.5–12.0 (Turing → Blackwell)"), "{summary}");
    assert!(summary.contains("fails on Volta and older (no code for it in libcudnn_adv.so.9"), "{summary}");
    for g in ["V100", "GTX 1080 Ti"] {
        let row = gpu(&s, g);
        assert_eq!(row["result"], "fails", "{row}");
        let bins = row["binaries"].as_array().unwrap();
        assert!(
            !bins.is_empty() && bins.iter().all(|b| b.as_str().unwrap().contains("/nvidia/cudnn/lib/libcudnn_")),
            "{g}: {bins:?}"
        );
    }
    for g in ["T4", "A100", "L4", "RTX 4090", "H100"] {
        assert_eq!(gpu(&s, g)["result"], "native", "{g}");
    }
    for g in ["RTX 5090", "B200"] {
        assert_eq!(gpu(&s, g)["result"], "jit", "{g}");
    }
}

/// TensorFlow's libraries (libtensorflow_cc.so.2: 249 fatbin wrappers set by a 20 MB `.rela.dyn`
/// 98 MiB into the file; libtensorflow_framework.so.2) read in one pass as by seeking.
#[test]
fn tensorflow_read_in_one_pass_gets_the_same_verdicts() {
    let gpus = "H100,A100,L4,RTX 4090,T4,V100,GTX 1080 Ti,RTX 5090,B200";
    let (seek_code, seek) = scan(tf_image(), gpus);
    let (code, r) = scan_stream(tf_image(), gpus);
    assert_eq!((code, seek_code), (1, 1), "{:#?}", brief(&r));
    assert!(!brief(&r).iter().any(|f| f.contains("CL015")), "{:#?}", brief(&r));
    assert_eq!(verdicts(&r), verdicts(&seek));
    headlines_agree(&r);
}
