//! A rule case (a `[[test]]` table of a rule file) made real: its image built as an OCI layout
//! and scanned, its targets, what a GPU would have answered, and the lint report. Shared by the
//! `it` tests (as `crate::rules`) and the per-case runner `tests/rule_cases.rs`; both crates hold
//! `images` and `util` at their root.

use cudalint::image::{ImageReport, ScanOptions, scan};
use cudalint::lint::policy::TargetSpec;
use cudalint::lint::rules::{self, Rule, RuleTest};
use cudalint::lint::{LintOptions, LintReport, config, run, targets};

use crate::images::{Comp, Ent, Image, oci_layout, tar};
use crate::util::read_fixture;

pub fn image_for(case: &RuleTest, dir: &std::path::Path) -> ImageReport {
    if let Some(lock) = &case.lock {
        use sha2::Digest;
        let wheel =
            crate::util::root().join("fixtures/lock/wheels/demo_kernels-1.0.0-py3-none-manylinux_2_28_x86_64.whl");
        let sha = hex::encode(sha2::Sha256::digest(std::fs::read(&wheel).unwrap()));
        let text = lock.replace("WHEEL_SHA256", &sha).replace("WHEEL", &wheel.display().to_string());
        let p = dir.join("pylock.toml");
        std::fs::write(&p, text).unwrap();
        let opts = ScanOptions { progress: false, ..ScanOptions::default() };
        return scan(&p.display().to_string(), &opts).unwrap();
    }
    let entries: Vec<Ent> = case
        .files
        .iter()
        .map(|(path, fixture)| {
            Ent::File(Box::leak(path.trim_start_matches('/').to_string().into_boxed_str()), read_fixture(fixture))
        })
        .chain(case.text.iter().map(|(path, text)| {
            Ent::File(Box::leak(path.trim_start_matches('/').to_string().into_boxed_str()), text.as_bytes().to_vec())
        }))
        .collect();
    let mut img = Image::new(vec![(tar(&entries), Comp::Gzip)]);
    img.env = case.env.iter().map(|e| &*Box::leak(e.clone().into_boxed_str())).collect();
    // A fixed directory name: the image is titled after it (`image:latest`), in snapshots too.
    let dir = dir.join("image");
    oci_layout(&dir, &[&img]);
    let mut opts = ScanOptions { progress: false, ..ScanOptions::default() };
    opts.inspect.lean = !case.deep;
    scan(&format!("oci:{}", dir.display()), &opts).unwrap()
}

pub fn targets_for(case: &RuleTest) -> Vec<targets::Target> {
    // The library's own merge of targets and driver, as the command line's flags take it.
    let spec = TargetSpec {
        gpus: case.gpus.clone(),
        archs: case.arch.clone(),
        from: vec![],
        driver: case.driver.clone(),
        cuda_driver: case.cuda_driver.clone(),
    };
    spec.resolve(&config::Config::default()).unwrap()
}

/// What a GPU would have answered (`device` in a rule case), judged by the same comparison
/// `--on-device` uses.
pub fn device_for(case: &RuleTest, inv: &ImageReport) -> Option<cudalint::device::DeviceReport> {
    use cudalint::cuda::{Cc, CudaVersion, compat};
    let d = case.device.as_ref()?;
    let cc = Cc::parse(&d.cc).unwrap();
    let cuda = CudaVersion::parse(&d.driver_cuda).unwrap();
    let mut modules = Vec::new();
    for f in &inv.files {
        let b = cudalint::lint::facts::binary(f);
        for m in &b.modules {
            let verdict = compat::decide(&m.images, cc, Some(cuda), compat::JitEnv::default());
            let load = cudalint::device::driver::Load {
                result: d.result,
                error: cudalint::device::error_name(d.result),
                ms: 1.0,
                jit_ms: None,
                log: String::new(),
            };
            let how = d.how.parse().unwrap();
            modules.push(cudalint::device::judge(&b.facts.path, &m.label, 0, &verdict, load, how, vec![]));
        }
    }
    Some(cudalint::device::DeviceReport {
        driver_version: i32::from(cuda.major) * 1000 + i32::from(cuda.minor) * 10,
        devices: vec![cudalint::device::driver::DeviceInfo {
            index: 0,
            name: "test GPU".into(),
            cc: cc.to_string(),
            driver_cuda: cuda.to_string(),
        }],
        canary: vec![],
        modules,
        skipped: vec![],
    })
}

pub fn lint(rules: &[Rule], case: &RuleTest) -> LintReport {
    let dir = tempfile::tempdir().unwrap();
    let inv = image_for(case, dir.path());
    let device = device_for(case, &inv);
    lint_inventory(rules, case, &inv, device)
}

/// The same case judged with a given device report.
pub fn lint_with_device(rules: &[Rule], case: &RuleTest, device: cudalint::device::DeviceReport) -> LintReport {
    let dir = tempfile::tempdir().unwrap();
    let inv = image_for(case, dir.path());
    lint_inventory(rules, case, &inv, Some(device))
}

fn lint_inventory(
    rules: &[Rule],
    case: &RuleTest,
    inv: &ImageReport,
    device: Option<cudalint::device::DeviceReport>,
) -> LintReport {
    let cfg = config::Config::default();
    let opts = LintOptions {
        rules,
        targets: targets_for(case),
        fail_on: rules::FailOn::Error,
        config: &cfg,
        extra_ignores: vec![],
        baseline: None,
        device,
    };
    run(inv, opts).unwrap()
}
