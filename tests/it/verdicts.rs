//! The gate's answer on an image that combines several real CUDA libraries the way serving
//! stacks ship them: per-architecture modules (cuBLAS's layout), an 'a'-only and an 'f'-only
//! extension beside portable kernels in one Python package (FlashAttention-3's pattern),
//! per-CUDA-version siblings (bitsandbytes), data-kept cubins (onnxruntime), a driver library,
//! and the package records that say who owns what. Judged on three target sets.

use cudalint::image::{ImageReport, ScanOptions, scan};
use cudalint::lint::coverage::Class;
use cudalint::lint::rules::{self, FailOn, Severity};
use cudalint::lint::{HeadlineVerdict, LintOptions, LintReport, config, run, targets};

use crate::images::{Comp, Ent, Image, oci_layout, tar};
use crate::util::read_fixture;

const SITE: &str = "usr/lib/python3.12/site-packages";

fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

fn stack_image(dir: &std::path::Path) -> ImageReport {
    let f = |p: &str, fixture: &str| Ent::File(leak(format!("{SITE}/{p}")), read_fixture(fixture));
    let text = |p: &str, t: &str| Ent::File(leak(format!("{SITE}/{p}")), t.as_bytes().to_vec());
    let base = tar(&[
        Ent::File("usr/local/cuda/lib64/libcudart.so.12.9.79", read_fixture("libcudart.so.12.9.79")),
        Ent::File("usr/lib/x86_64-linux-gnu/libcuda.so.1", read_fixture("libsm90a.so")),
    ]);
    let app = tar(&[
        f("vllm/_C.so", "libmulti.so"),
        f("vllm/_flash3.so", "libsm90a.so"),
        f("vllm/_blackwell.so", "libsm100f.so"),
        text(
            "vllm-0.33.0.dist-info/RECORD",
            "vllm/_C.so,sha256=x,1\nvllm/_flash3.so,sha256=x,1\nvllm/_blackwell.so,sha256=x,1\nvllm/__init__.py,,\n",
        ),
        f("nvidia/cublas/lib/libcublasLt.so.12", "../verdict/libperarch.so"),
        text("nvidia_cublas_cu12-12.9.1.4.dist-info/RECORD", "nvidia/cublas/lib/libcublasLt.so.12,,\n"),
        f("bitsandbytes/libbitsandbytes_cuda129.so", "libmulti.so"),
        f("bitsandbytes/libbitsandbytes_cuda130.so", "libsm90a.so"),
        f("onnxruntime/capi/libonnxruntime_providers_cuda.so", "../verdict/libortlike.so"),
    ]);
    let img = Image::new(vec![(base, Comp::Gzip), (app, Comp::Zstd)]);
    oci_layout(dir, &[&img]);
    let opts = ScanOptions { progress: false, ..ScanOptions::default() };
    scan(&format!("oci:{}", dir.display()), &opts).unwrap()
}

fn lint(inv: &ImageReport, gpus: &[&str], driver: &str) -> LintReport {
    let rules = rules::load(&[]).unwrap();
    let (d, c) = targets::driver(driver).unwrap();
    let targets = gpus
        .iter()
        .map(|g| {
            let mut t = targets::gpu(g).unwrap();
            t.driver = Some(d.clone());
            t.driver_cuda = Some(c);
            t
        })
        .collect();
    let cfg = config::Config::default();
    let opts = LintOptions {
        rules: &rules,
        targets,
        fail_on: FailOn::Error,
        config: &cfg,
        extra_ignores: vec![],
        baseline: None,
        device: None,
    };
    run(inv, opts).unwrap()
}

/// The text report, kept under target/verdict-reports/ for people to read (not compared).
fn keep(r: &LintReport, name: &str) {
    let dir = crate::util::root().join("target/verdict-reports");
    std::fs::create_dir_all(&dir).unwrap();
    let text = cudalint::report::text::render(r, &Default::default()).unwrap();
    std::fs::write(dir.join(format!("{name}.txt")), text).unwrap();
}

fn count(r: &LintReport, s: Severity) -> usize {
    r.findings.iter().filter(|f| f.severity == s).count()
}

fn codes(r: &LintReport) -> Vec<String> {
    r.findings.iter().map(|f| format!("{} {}", f.rule, f.path.as_deref().unwrap_or("image"))).collect()
}

#[test]
fn the_stack_passes_quietly_on_its_own_gpu_and_driver() {
    let dir = tempfile::tempdir().unwrap();
    let inv = stack_image(dir.path());
    let r = lint(&inv, &["H100"], "580.65.06");
    keep(&r, "h100-580");
    // The one error is the driver library shipped in the image (CL008): every verdict passes.
    let errors: Vec<String> = codes(&r).into_iter().filter(|c| !c.starts_with("CL008")).collect();
    assert_eq!(count(&r, Severity::Error), 1, "{:#?}", codes(&r));
    assert!(errors.iter().all(|c| !c.starts_with("CL00") || c.starts_with("CL007")), "{errors:#?}");
    assert!(count(&r, Severity::Warning) <= 3, "{:#?}", codes(&r));
    assert_eq!(r.headlines.len(), 1);
    // The shipped driver library is an error for every target: the headline never says "runs"
    // above it, and names it.
    assert_eq!(
        r.headlines[0].text,
        "H100 · driver 580.65.06: fails — driver-library-in-image (libcuda.so.1)",
        "{:#?}",
        codes(&r)
    );
    // The sm_100f extension is gated (its package runs here), not an error.
    let blackwell = r.matrix.iter().find(|m| m.path.ends_with("_blackwell.so")).unwrap();
    assert_eq!(blackwell.cells[0].class, Class::ArchGated);
    assert_eq!(blackwell.package.as_ref().unwrap().name, "vllm");
    let gated = r.findings.iter().find(|f| f.rule == "CL016").unwrap();
    assert_eq!(gated.package.as_deref(), Some("vllm 0.33.0 (pypi)"));
    // The driver library's own kernels are no coverage: CL008 only.
    let drv: Vec<&str> = r
        .findings
        .iter()
        .filter(|f| f.path.as_deref().is_some_and(|p| p.contains("libcuda.so")))
        .map(|f| f.rule.as_str())
        .collect();
    assert_eq!(drv, ["CL008"]);
}

#[test]
fn an_old_driver_fails_first_with_the_floor() {
    let dir = tempfile::tempdir().unwrap();
    let inv = stack_image(dir.path());
    let r = lint(&inv, &["H100"], "550.54.14");
    keep(&r, "h100-550");
    assert!(r.failed);
    // Errors first; image-wide ones (CL008, no target) before the target's own, whose first is
    // the driver floor.
    let first = r.findings.iter().find(|f| f.target.is_some()).unwrap();
    assert_eq!((first.rule.as_str(), first.path.as_deref()), ("CL005", None), "{:#?}", codes(&r));
    assert!(first.message.contains("580.65.06"), "{}", first.message);
    assert!(r.headlines[0].text.contains("fails — the image needs driver ≥ 580.65.06"), "{}", r.headlines[0].text);
    // Driver-dependent per-binary verdicts step aside on a target the driver cannot serve; the
    // stack has code for Hopper, so no architecture rule fires either.
    assert!(!r.findings.iter().any(|f| ["CL001", "CL002", "CL004"].contains(&f.rule.as_str())), "{:#?}", codes(&r));
}

#[test]
fn an_older_gpu_fails_naming_the_binaries() {
    let dir = tempfile::tempdir().unwrap();
    let inv = stack_image(dir.path());
    let r = lint(&inv, &["V100"], "580.65.06");
    keep(&r, "v100-580");
    assert!(r.failed);
    let cl001: Vec<&str> = r.findings.iter().filter(|f| f.rule == "CL001").filter_map(|f| f.path.as_deref()).collect();
    // onnxruntime's data-kept sm_70 cubins do not count: its registered kernels start at sm_75.
    assert!(cl001.iter().any(|p| p.ends_with("libonnxruntime_providers_cuda.so")), "{cl001:?}");
    assert!(cl001.iter().any(|p| p.ends_with("libcublasLt.so.12")), "{cl001:?}");
    // Only the bitsandbytes build the runtime (12.9) selects is judged.
    assert!(cl001.iter().all(|p| !p.ends_with("_cuda130.so")), "{cl001:?}");
    assert!(r.headlines[0].text.starts_with("V100 · driver 580.65.06: fails — "), "{}", r.headlines[0].text);
    // A fix users can carry out: the package build, not an arch list for NVIDIA's library.
    let cublas = r
        .findings
        .iter()
        .find(|f| f.rule == "CL001" && f.path.as_deref().unwrap().ends_with("libcublasLt.so.12"))
        .unwrap();
    assert!(cublas.fix.contains("nvidia-cublas-cu12"), "{}", cublas.fix);
    assert!(!cublas.fix.contains("TORCH_CUDA_ARCH_LIST"), "{}", cublas.fix);
    let ort = r
        .findings
        .iter()
        .find(|f| f.rule == "CL001" && f.path.as_deref().unwrap().ends_with("providers_cuda.so"))
        .unwrap();
    assert!(ort.fix.contains("CUDA 13 cannot build for compute capability 7.0"), "{}", ort.fix);
}

/// Headlines come from what is left after the baseline: a target whose every error is in the
/// baseline no longer reads "fails" (nor "runs": it reads "accepted", and says what would fail);
/// one whose errors remain keeps "fails". The exit status follows the same findings.
#[test]
fn headlines_follow_the_findings_after_the_baseline() {
    let dir = tempfile::tempdir().unwrap();
    let inv = stack_image(dir.path());
    let full = lint(&inv, &["V100"], "580.65.06");
    assert_eq!(full.headlines[0].verdict, HeadlineVerdict::Fails);
    let rules = rules::load(&[]).unwrap();
    let (d, c) = targets::driver("580.65.06").unwrap();
    let mut t = targets::gpu("V100").unwrap();
    t.driver = Some(d);
    t.driver_cuda = Some(c);
    let cfg = config::Config::default();
    let judge = |baseline: std::collections::BTreeSet<String>| {
        run(
            &inv,
            LintOptions {
                rules: &rules,
                targets: vec![t.clone()],
                fail_on: FailOn::Error,
                config: &cfg,
                extra_ignores: vec![],
                baseline: Some(baseline),
                device: None,
            },
        )
        .unwrap()
    };
    let all: std::collections::BTreeSet<String> = full.findings.iter().map(|f| f.fingerprint.clone()).collect();
    let r = judge(all);
    assert!(!r.failed);
    assert_eq!(r.headlines[0].verdict, HeadlineVerdict::Accepted, "{}", r.headlines[0].text);
    assert!(r.headlines[0].text.contains("would fail: "), "{}", r.headlines[0].text);
    // Only the per-target errors in the baseline: the image-wide driver library still fails it.
    let per_target: std::collections::BTreeSet<String> =
        full.findings.iter().filter(|f| f.target.is_some()).map(|f| f.fingerprint.clone()).collect();
    let r = judge(per_target);
    assert!(r.failed);
    assert_eq!(r.headlines[0].text, "V100 · driver 580.65.06: fails — driver-library-in-image (libcuda.so.1)");
}

/// One cause, said once: CUDA 13 builds cannot target Volta. The image-level CL019 names the
/// binaries; each binary's CL001 stays in the report (JSON, SARIF) with the cause it folds into,
/// and the text report shows the one finding.
#[test]
fn one_cause_behind_many_binaries_is_said_once() {
    let dir = tempfile::tempdir().unwrap();
    let inv = stack_image(dir.path());
    let r = lint(&inv, &["V100"], "580.65.06");
    let cause = r.findings.iter().find(|f| f.rule == "CL019").expect("CL019");
    assert!(
        cause.message.starts_with("CUDA 13 builds cannot target Volta (V100, compute capability 7.0)"),
        "{}",
        cause.message
    );
    let folded: Vec<&str> =
        r.findings.iter().filter(|f| f.cause.as_deref() == Some("CL019")).filter_map(|f| f.path.as_deref()).collect();
    assert!(folded.len() >= 3, "{folded:?}");
    assert!(cause.message.contains(&format!("{} binaries", folded.len())), "{}", cause.message);
    let text = cudalint::report::text::render(&r, &Default::default()).unwrap();
    assert!(!text.contains("error   CL001"), "{text}");
    assert!(text.contains(&format!("stands for {} CL001 findings", folded.len())), "{text}");
    let json = cudalint::report::json::render(&r, &Default::default()).unwrap();
    assert_eq!(json.matches("\"cause\": \"CL019\"").count(), folded.len(), "{json}");
}
