//! The on-device mode without a GPU: the plain no-driver answer, the load plan (which modules
//! and entries, SASS/PTX split, bytes as the driver will get them), child-process isolation
//! with real children that crash or hang, and the rendering of device results and
//! disagreements. On a GPU node, scripts/device-check.sh runs the real thing.

use std::process::Command as Proc;
use std::time::Duration;

use assert_cmd::Command;
use cudalint::device::{self, How, isolate};
use cudalint::image::{ScanOptions, scan};
use cudalint::lint::rules::{self, RuleTest};

use crate::images::{Comp, Ent, Image, oci_layout, tar};
use crate::util::{fixture, read_fixture};

fn driver_present() -> bool {
    // SAFETY: only probes whether libcuda can be opened.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

#[test]
fn without_a_driver_on_device_says_so_and_exits_2() {
    let out = Command::cargo_bin("cudalint")
        .unwrap()
        .args(["scan", "--on-device", "--quiet"])
        .arg(fixture("libsm90a.so"))
        .output()
        .unwrap();
    if driver_present() {
        // A GPU node: the run happens and reports its devices.
        assert!(out.status.code() != Some(2), "{}", String::from_utf8_lossy(&out.stderr));
        assert!(String::from_utf8_lossy(&out.stdout).contains("on device: GPU"));
    } else {
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("no NVIDIA driver") && err.contains("--on-device needs a GPU node"), "{err}");
        assert!(out.stdout.is_empty(), "no report when the check that was asked for cannot run");
    }
}

fn keep() -> ScanOptions {
    let mut o = ScanOptions { progress: false, ..ScanOptions::default() };
    o.inspect.keep_modules = true;
    o
}

#[test]
fn load_plan_splits_modules_into_sass_and_ptx_as_the_driver_gets_them() {
    let d = tempfile::tempdir().unwrap();
    let layer = tar(&[
        Ent::File("lib/libmulti.so", read_fixture("libmulti.so")),
        Ent::File("lib/libconcat.so", read_fixture("libconcat.so")),
        Ent::File("lib/librdc.so", read_fixture("librdc.so")),
        Ent::File("kernels/sm90a.cubin", read_fixture("abi8_sm90a.cubin")),
        Ent::File("kernels/vecadd.ptx", read_fixture("vecadd.ptx")),
    ]);
    oci_layout(d.path(), &[&Image::new(vec![(layer.clone(), Comp::Gzip)])]);
    let streamed = scan(&format!("oci:{}", d.path().display()), &keep()).unwrap();
    let plans = device::plan(&streamed);
    let by = |b: &str| plans.iter().filter(|p| p.binary == b).collect::<Vec<_>>();

    // libmulti: two kernel modules (the device-link stub is not loaded), 4 SASS + 1 PTX each.
    let multi = by("/lib/libmulti.so");
    assert_eq!(multi.len(), 2);
    for p in &multi {
        assert!(p.whole.starts_with(&[0x50, 0xED, 0x55, 0xBA]), "whole container, as the runtime registers it");
        let sass: Vec<&str> = p
            .entries
            .iter()
            .filter(|e| e.kind == cudalint::cuda::compat::ImageKind::Sass)
            .map(|e| e.label.as_str())
            .collect();
        let ptx: Vec<&device::EntryLoad> =
            p.entries.iter().filter(|e| e.kind == cudalint::cuda::compat::ImageKind::Ptx).collect();
        assert_eq!(sass, ["sm_75", "sm_80", "sm_86", "sm_90"]);
        assert_eq!(ptx.len(), 1);
        let text = ptx[0].bytes.as_ref().unwrap();
        assert!(
            text.ends_with(&[0]) && String::from_utf8_lossy(text).contains(".target sm_90"),
            "decompressed, NUL-terminated PTX"
        );
        for e in p.entries.iter().filter(|e| e.kind == cudalint::cuda::compat::ImageKind::Sass) {
            let c = cudalint::inspect::cubin::parse(&mut &e.bytes.as_ref().unwrap()[..], true).unwrap();
            assert_eq!(c.arch(), e.label);
            assert!(c.kernel_count.unwrap() > 0);
        }
        assert!(!p.kernels.is_empty());
    }
    // Concatenated entries: the images come out of the decompressed blob.
    let concat = by("/lib/libconcat.so");
    assert_eq!(concat.len(), 2);
    assert!(
        concat.iter().all(|p| p.entries.len() == 3
            && p.entries.iter().all(|e| e.bytes.as_ref().is_ok_and(|b| b.starts_with(b"\x7fELF"))))
    );
    // -rdc: only the linked module; relocatable material is never loaded.
    assert_eq!(by("/lib/librdc.so").len(), 1);
    // A bare cubin and a PTX file are modules of their own.
    assert_eq!(by("/kernels/sm90a.cubin")[0].whole.as_slice(), &read_fixture("abi8_sm90a.cubin")[..]);
    let ptx = &by("/kernels/vecadd.ptx")[0];
    assert_eq!(&ptx.whole[..ptx.whole.len() - 1], &read_fixture("vecadd.ptx")[..]);

    // Read by seeking (uncompressed layer) or streamed (gzip), the bytes are the same.
    let d2 = tempfile::tempdir().unwrap();
    oci_layout(d2.path(), &[&Image::new(vec![(layer, Comp::None)])]);
    let seeked = device::plan(&scan(&format!("oci:{}", d2.path().display()), &keep()).unwrap());
    assert_eq!(seeked.len(), plans.len());
    for (a, b) in seeked.iter().zip(&plans) {
        assert_eq!(
            (a.binary.as_str(), a.label.as_str(), a.whole.as_slice()),
            (b.binary.as_str(), b.label.as_str(), b.whole.as_slice())
        );
    }
    // Without --on-device nothing is kept.
    assert!(
        device::plan(
            &scan(&format!("oci:{}", d2.path().display()), &ScanOptions { progress: false, ..ScanOptions::default() })
                .unwrap()
        )
        .is_empty()
    );
}

#[test]
fn damaged_modules_are_reported_not_handed_to_the_driver() {
    // The driver trusts a fatbin's sizes; what the inspector found damaged is never loaded.
    let layer = tar(&[
        Ent::File("lib/payload.fatbin", read_fixture("damaged-payload-size.fatbin")),
        Ent::File("lib/header.fatbin", read_fixture("damaged-header-size.fatbin")),
        Ent::File("lib/libsm90a.so", read_fixture("libsm90a.so")),
    ]);
    let d = tempfile::tempdir().unwrap();
    oci_layout(d.path(), &[&Image::new(vec![(layer, Comp::Gzip)])]);
    let inv = scan(&format!("oci:{}", d.path().display()), &keep()).unwrap();
    let (plans, skipped) = device::plan_all(&inv);
    assert!(plans.iter().all(|p| p.binary == "/lib/libsm90a.so") && plans.len() == 2, "{plans:?}");
    // header.fatbin has no container at all; payload.fatbin's entry runs past its end.
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert_eq!((skipped[0].binary.as_str(), skipped[0].module.as_str()), ("/lib/payload.fatbin", "container@0x0"));
    assert!(skipped[0].reason.starts_with("damaged: payload of 0x7ffffffffffffff0 bytes runs past"), "{skipped:?}");
    // A bare cubin whose section table lies outside it: not loaded either.
    let (p2, s2) = device::plan_all(&scan(fixture("damaged-shoff.cubin").to_str().unwrap(), &keep()).unwrap());
    assert!(p2.is_empty() && s2.len() == 1 && s2[0].reason.contains("section table"), "{p2:?} {s2:?}");
}

#[test]
fn a_damaged_cubin_kept_as_data_is_listed_not_dropped() {
    // libortlike.so keeps two bare sm_70 cubins in .rodata; the second one's symbol table is sent
    // past its end. The plan must say it left that module out, not lose it.
    let lib = read_fixture("../verdict/libortlike.so");
    let scan_lib = |bytes: &[u8]| {
        let layer = tar(&[Ent::File("lib/libort.so", bytes.to_vec())]);
        let d = tempfile::tempdir().unwrap();
        oci_layout(d.path(), &[&Image::new(vec![(layer, Comp::Gzip)])]);
        scan(&format!("oci:{}", d.path().display()), &keep()).unwrap()
    };
    let intact = scan_lib(&lib);
    let hidden = &intact.files.iter().find(|f| f.file.path == "/lib/libort.so").unwrap().file.hidden_cubins;
    assert_eq!(hidden.len(), 2, "the fixture keeps two cubins as data");
    let (plans, skipped) = device::plan_all(&intact);
    assert!(skipped.is_empty(), "{skipped:?}");

    // Raw ELF64 header fields of the cubin: e_shoff at 0x28, e_shentsize and e_shnum at 0x3a.
    let at = hidden[1].offset as usize;
    let u16_at = |o: usize| u16::from_le_bytes(lib[o..o + 2].try_into().unwrap()) as usize;
    let shoff = u64::from_le_bytes(lib[at + 0x28..at + 0x30].try_into().unwrap()) as usize;
    let (shentsize, shnum) = (u16_at(at + 0x3a), u16_at(at + 0x3c));
    let mut bad = lib.clone();
    let symtab = (0..shnum)
        .map(|i| at + shoff + i * shentsize)
        .find(|&sh| u32::from_le_bytes(lib[sh + 4..sh + 8].try_into().unwrap()) == 2)
        .expect("the cubin has a symbol table");
    bad[symtab + 0x18..symtab + 0x20].copy_from_slice(&0x7fff_ffffu64.to_le_bytes());

    let (bad_plans, bad_skipped) = device::plan_all(&scan_lib(&bad));
    assert_eq!(bad_plans.len() + 1, plans.len(), "{bad_plans:?}");
    assert_eq!(bad_skipped.len(), 1, "{bad_skipped:?}");
    assert_eq!(bad_skipped[0].binary, "/lib/libort.so");
    assert!(bad_skipped[0].reason.starts_with("damaged: symbol table"), "{bad_skipped:?}");
}

fn sh(script: &str) -> Proc {
    let mut c = Proc::new("sh");
    c.args(["-c", script]);
    c
}

#[test]
fn isolated_children_that_crash_or_hang_do_not_take_the_parent_down() {
    let ok = isolate::run(
        &mut sh("read x; echo start k1; echo done k1 0; echo got $x"),
        b"hello\n",
        Duration::from_secs(10),
    )
    .unwrap();
    assert!(ok.status.unwrap().success() && !ok.timed_out);
    assert_eq!(ok.lines, ["start k1", "done k1 0", "got hello"]);

    let crash = isolate::run(&mut sh("echo start k2; kill -SEGV $$"), b"", Duration::from_secs(10)).unwrap();
    assert_eq!(crash.signal(), Some(11), "{crash:?}");
    assert_eq!(crash.lines, ["start k2"]);

    let t0 = std::time::Instant::now();
    let hang = isolate::run(&mut sh("echo start k3; exec sleep 30"), b"", Duration::from_millis(500)).unwrap();
    assert!(hang.timed_out && hang.status.is_none());
    assert_eq!(hang.lines, ["start k3"]);
    assert!(t0.elapsed() < Duration::from_secs(10), "killed at the deadline");
    assert!(crash.ending().contains("signal 11") && hang.ending().contains("time ran out"));

    // The deadline is for silence: a child that keeps reporting progress runs on past it.
    let busy = isolate::run(
        &mut sh("for i in 1 2 3 4 5 6; do echo tick $i; sleep 0.2; done; echo oops >&2; exit 3"),
        b"",
        Duration::from_millis(700),
    )
    .unwrap();
    assert!(!busy.timed_out && busy.lines.len() == 6, "{busy:?}");
    assert_eq!((busy.status.unwrap().code(), busy.stderr.as_str()), (Some(3), "oops"));
}

#[test]
fn static_and_driver_outcomes_compared() {
    use cudalint::cuda::compat::Verdict;
    let native = Verdict::Native { image: "sm_90".into() };
    assert!(device::compare(&native, 0, How::Native).is_none());
    assert!(device::compare(&native, 209, How::Failed).unwrap().contains("CUDA_ERROR_NO_BINARY_FOR_GPU"));
    assert!(device::compare(&native, 0, How::Jit).unwrap().contains("went jit"));
    let none = Verdict::NoImage { error: 209, arch_specific: vec![], format_needs_cuda: None };
    assert!(device::compare(&none, 209, How::Failed).is_none());
    assert!(device::compare(&none, 0, How::Native).is_some());
    let too_new = Verdict::PtxTooNew {
        error: 222,
        image: "compute_80".into(),
        ptx_isa: "9.5".into(),
        needs_cuda: cudalint::cuda::CudaVersion::new(13, 5),
        driver_cuda: cudalint::cuda::CudaVersion::new(12, 8),
    };
    assert!(device::compare(&too_new, 218, How::Failed).unwrap().contains("222"));
}

#[test]
fn device_results_and_a_disagreement_in_every_format() {
    let rules = rules::load(&[]).unwrap();
    let case = RuleTest {
        expect: "fire".into(),
        files: [
            ("/opt/lib/libsm90a.so".to_string(), "libsm90a.so".to_string()),
            ("/opt/lib/libzstd.so".to_string(), "libzstd.so".to_string()),
        ]
        .into(),
        device: Some(rules::DeviceCase {
            cc: "9.0".into(),
            driver_cuda: "12.8".into(),
            result: 0,
            how: "native".into(),
        }),
        ..Default::default()
    };
    let mut r = crate::rules::lint(&rules, &case);
    assert!(!r.findings.iter().any(|f| f.rule == "CL013"), "all agree: {:#?}", r.findings);
    // Make one module disagree, as a GPU might: predicted native, the driver refuses it.
    let dev = r.device.as_mut().unwrap();
    let m = dev.modules.iter().position(|m| m.binary == "/opt/lib/libsm90a.so").unwrap();
    let (b, label) = (dev.modules[m].binary.clone(), dev.modules[m].module.clone());
    let refused = cudalint::device::driver::Load {
        result: 209,
        error: "CUDA_ERROR_NO_BINARY_FOR_GPU".into(),
        ms: 0.5,
        jit_ms: None,
        log: String::new(),
    };
    let native = cudalint::cuda::compat::Verdict::Native { image: "sm_90a".into() };
    dev.modules[m] = device::judge(&b, &label, 0, &native, refused, How::Failed, vec![]);
    let redo = crate::rules::lint_with_device(&rules, &case, dev.clone());
    let f: Vec<_> = redo.findings.iter().filter(|f| f.rule == "CL013").collect();
    assert_eq!(f.len(), 1, "{:#?}", redo.findings);
    assert!(f[0].message.contains(&label) && f[0].path.as_deref() == Some(b.as_str()));
    let text = cudalint::report::text::render(&redo, &Default::default()).unwrap();
    assert!(text.contains("on device: GPU 0 test GPU (9.0), driver CUDA 12.8"), "{text}");
    assert!(text.contains("CUDA_ERROR_NO_BINARY_FOR_GPU (209)"), "{text}");
    let md = cudalint::report::markdown::render(&redo, &Default::default()).unwrap();
    assert!(md.contains("### On device"));
    let json: serde_json::Value =
        serde_json::from_str(&cudalint::report::json::render(&redo, &Default::default()).unwrap()).unwrap();
    assert_eq!(json["device"]["modules"].as_array().unwrap().iter().filter(|m| m["disagrees"] == true).count(), 1);
    let sarif: serde_json::Value = serde_json::from_str(
        &cudalint::report::sarif::render(
            &redo,
            &cudalint::report::RenderConfig { rules: &rules, ..Default::default() },
        )
        .unwrap(),
    )
    .unwrap();
    assert!(sarif["runs"][0]["results"].as_array().unwrap().iter().any(|x| x["ruleId"] == "CL013"));
    assert!(cudalint::report::junit::render(&redo, &Default::default()).unwrap().contains("CL013"));
}

#[test]
fn statuses_serialize_to_the_words_reports_have_always_used() {
    use cudalint::device::{LaunchStatus, Loading, StaticResult};
    let words = |v: serde_json::Value| v.as_str().unwrap().to_string();
    for (h, w) in [
        (How::Native, "native"),
        (How::Jit, "jit"),
        (How::Failed, "failed"),
        (How::Unknown, "unknown"),
        (How::Crashed, "crashed"),
    ] {
        assert_eq!((words(serde_json::to_value(h).unwrap()), h.to_string()), (w.to_string(), w.to_string()));
        assert_eq!(w.parse::<How>().unwrap(), h);
    }
    for (s, w) in [
        (LaunchStatus::Launched, "launched"),
        (LaunchStatus::Faulted, "faulted"),
        (LaunchStatus::TimedOut, "timed-out"),
        (LaunchStatus::Skipped, "skipped"),
    ] {
        assert_eq!((words(serde_json::to_value(s).unwrap()), s.to_string()), (w.to_string(), w.to_string()));
    }
    for (s, w) in [
        (StaticResult::Native, "native"),
        (StaticResult::Jit, "jit"),
        (StaticResult::NoImage, "no-image"),
        (StaticResult::PtxTooNew, "ptx-too-new"),
        (StaticResult::JitDisabled, "jit-disabled"),
    ] {
        assert_eq!((words(serde_json::to_value(s).unwrap()), s.to_string()), (w.to_string(), w.to_string()));
    }
    for (l, w) in [
        (Loading::Unset, ""),
        (Loading::Registered, "registered"),
        (Loading::Standalone, "standalone"),
        (Loading::LibraryManaged, "library-managed"),
        (Loading::DriverLibrary, "driver-library"),
    ] {
        assert_eq!((words(serde_json::to_value(l).unwrap()), l.to_string()), (w.to_string(), w.to_string()));
        assert_eq!(serde_json::from_value::<Loading>(serde_json::json!(w)).unwrap(), l);
    }
    assert!("sideways".parse::<How>().is_err());
}

#[test]
fn device_errors_read_as_before() {
    use cudalint::device::DeviceError;
    assert_eq!(DeviceError::NoSuchDevice { asked: vec![3], seen: 1 }.to_string(), "no device [3] (the driver sees 1)");
    assert_eq!(DeviceError::Call { what: "cuDeviceGet", code: 101 }.to_string(), "cuDeviceGet: CUDA error 101 (101)");
    assert_eq!(
        DeviceError::Init { code: 100 }.to_string(),
        "the NVIDIA driver does not initialise: cuInit: CUDA error 100 (100)"
    );
}

#[test]
fn verdicts_and_device_plan_read_one_module_list() {
    let layer = tar(&[
        Ent::File("lib/libmulti.so", read_fixture("libmulti.so")),
        Ent::File("lib/librdc.so", read_fixture("librdc.so")),
        Ent::File("kernels/sm90a.cubin", read_fixture("abi8_sm90a.cubin")),
        Ent::File("kernels/vecadd.ptx", read_fixture("vecadd.ptx")),
    ]);
    let d = tempfile::tempdir().unwrap();
    oci_layout(d.path(), &[&Image::new(vec![(layer, Comp::Gzip)])]);
    let inv = scan(&format!("oci:{}", d.path().display()), &keep()).unwrap();
    let plans = device::plan(&inv);
    for f in &inv.files {
        let b = cudalint::lint::facts::binary(f);
        let found = cudalint::module::modules(&f.file);
        // The verdicts count the model's modules that count, in its order.
        let counted: Vec<&str> = found.modules.iter().filter(|m| m.counts()).map(|m| m.label.as_str()).collect();
        assert_eq!(b.modules.iter().map(|m| m.label.as_str()).collect::<Vec<_>>(), counted);
        assert_eq!((b.facts.kernel_less_modules, b.facts.hidden_modules), (found.kernel_less, found.hidden));
        // Every counted module is loaded on the device, with the images the verdict reads.
        for m in &b.modules {
            let p = plans.iter().find(|p| p.binary == b.facts.path && p.label == m.label).unwrap();
            assert_eq!(p.images, m.images, "{}", m.label);
        }
    }
    assert_eq!(plans.iter().filter(|p| p.binary == "/lib/libmulti.so").count(), 2);
}
