//! `cudalint support` and `cudalint diff` on images built here from real nvcc binaries: every
//! GPU of the table is one row, each row says what a one-target `scan` of that GPU says, and
//! `diff` fails when an upgrade drops a GPU or raises the floor above the fleet's driver.

use std::path::Path;

use assert_cmd::Command;
use serde_json::Value;

use crate::images::{Comp, Ent, Image, oci_layout, tar};
use crate::util::read_fixture;

/// An OCI layout with `files` (image path, fixture) in one layer.
fn image(dir: &Path, files: &[(&'static str, &str)]) -> String {
    let entries: Vec<Ent> = files.iter().map(|(p, f)| Ent::File(p, read_fixture(f))).collect();
    let img = Image::new(vec![(tar(&entries), Comp::Gzip)]);
    oci_layout(dir, &[&img]);
    format!("oci:{}", dir.display())
}

fn cudalint(args: &[&str]) -> (i32, String, String) {
    let out = Command::cargo_bin("cudalint").unwrap().args(args).arg("--quiet").output().unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn support_json(image: &str) -> Value {
    let (code, out, err) = cudalint(&["support", image, "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).unwrap()
}

fn row<'a>(s: &'a Value, gpu: &str) -> &'a Value {
    s["gpus"].as_array().unwrap().iter().find(|g| g["name"] == gpu).unwrap_or_else(|| panic!("no row for {gpu}"))
}

/// libstale.so (nvcc 13.5): SASS for sm_75, sm_80, sm_86 and sm_90, no PTX.
fn stale(dir: &Path) -> String {
    image(dir, &[("usr/lib/libstale.so", "../verdict/libstale.so")])
}

#[test]
fn every_gpu_is_one_row_and_the_summary_names_the_range() {
    let d = tempfile::tempdir().unwrap();
    let s = support_json(&stale(d.path()));
    assert_eq!(s["schema"], "cudalint.support/v1");
    // The rows are exactly the GPUs `cudalint gpus` lists.
    let names: Vec<&str> = s["gpus"].as_array().unwrap().iter().map(|g| g["name"].as_str().unwrap()).collect();
    let known: Vec<&str> = cudalint::cuda::gpus::GPUS.iter().map(|g| g.name).collect();
    assert_eq!(names.len(), known.len());
    for k in &known {
        assert_eq!(names.iter().filter(|n| *n == k).count(), 1, "{k}");
    }
    for gpu in ["T4", "A100", "L4", "H100"] {
        assert_eq!(row(&s, gpu)["result"], "native", "{gpu}");
        assert_eq!(row(&s, gpu)["min_driver"], "580.65.06", "{gpu}: the image's CUDA 13 floor");
    }
    // H200's own first driver is older than the floor; B200's is not known to be newer.
    for gpu in ["V100", "GTX 1080 Ti", "B200", "RTX 5090"] {
        let r = row(&s, gpu);
        assert_eq!(r["result"], "fails", "{gpu}");
        assert_eq!(r["binaries"][0], "/usr/lib/libstale.so", "{gpu}");
        assert!(r.get("min_driver").is_none(), "{gpu}: a failing GPU has no minimum driver");
    }
    // CUDA 13 cannot build for Volta: said as the cause, once.
    assert!(row(&s, "V100")["detail"].as_str().unwrap().starts_with("CUDA 13 builds cannot target Volta"));
    // An amd64 image on a Jetson or a Grace superchip.
    for gpu in ["Jetson AGX Orin", "GH200", "GB10"] {
        assert_eq!(row(&s, gpu)["result"], "n/a", "{gpu}");
    }
    let summary = s["summary"].as_str().unwrap();
    assert!(
        summary.starts_with("runs on compute capability 7.5–9.0 (Turing → Hopper) with driver ≥ 580.65.06"),
        "{summary}"
    );
    assert!(summary.contains("fails on Volta and older (CUDA 13 builds: libstale.so)"), "{summary}");
    assert!(summary.contains("fails on Blackwell"), "{summary}");
}

#[test]
fn every_cell_says_what_a_one_target_scan_says() {
    let d = tempfile::tempdir().unwrap();
    let img = stale(d.path());
    let s = support_json(&img);
    for g in s["gpus"].as_array().unwrap().iter().filter(|g| g["result"] != "n/a") {
        let name = g["name"].as_str().unwrap();
        let (code, out, err) = cudalint(&["scan", &img, "--gpu", name, "--format", "json"]);
        assert_ne!(code, 2, "{err}");
        let scan: Value = serde_json::from_str(&out).unwrap();
        let h = &scan["headlines"][0];
        assert_eq!(h["text"], g["headline"], "{name}");
        let fails = matches!(h["verdict"].as_str().unwrap(), "fails" | "accepted");
        assert_eq!(fails, g["result"] == "fails", "{name}: {} vs {}", h["verdict"], g["result"]);
        assert_eq!(code == 1, g["result"] == "fails", "{name}: exit {code}");
        // The binaries a `fails` names are those the scan's errors name.
        let mut errs: Vec<&str> = scan["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["severity"] == "error")
            .filter_map(|f| f["path"].as_str())
            .collect();
        errs.sort();
        errs.dedup();
        let named: Vec<&str> = g["binaries"].as_array().unwrap().iter().map(|b| b.as_str().unwrap()).collect();
        assert_eq!(named, errs, "{name}");
    }
}

#[test]
fn markdown_and_html_have_a_row_per_gpu() {
    let d = tempfile::tempdir().unwrap();
    let img = stale(d.path());
    let (code, md, err) = cudalint(&["support", &img, "--format", "markdown"]);
    assert_eq!(code, 0, "{err}");
    let rows = md.lines().filter(|l| l.starts_with("| ") && !l.starts_with("| Architecture")).count();
    assert_eq!(rows, cudalint::cuda::gpus::GPUS.len(), "{md}");
    assert!(md.contains("| Volta | V100 | 7.0 | fails |"), "{md}");
    let (code, html, err) = cudalint(&["support", &img, "--format", "html"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(html.matches("<tr data-gpu=").count(), cudalint::cuda::gpus::GPUS.len());
    assert!(html.contains("data-gpu=\"H100\" data-result=\"native\""), "{html}");
    // The scan report's grid, a column per compute capability (named by its first GPU).
    assert!(
        html.contains("<table id=\"matrix\">")
            && html.contains("<th data-target=\"RTX PRO 6000 Blackwell\"")
            && !html.contains("<th data-target=\"RTX 5090\"")
    );
}

#[test]
fn an_image_without_cuda_is_nothing_to_judge() {
    let d = tempfile::tempdir().unwrap();
    let entries = vec![Ent::File("etc/hostname", b"x\n".to_vec())];
    let img = Image::new(vec![(tar(&entries), Comp::Gzip)]);
    oci_layout(d.path(), &[&img]);
    let (code, out, err) = cudalint(&["support", &format!("oci:{}", d.path().display())]);
    assert_eq!(code, 2, "{out}");
    assert!(err.contains("nothing to judge"), "{err}");
}

#[test]
fn diff_names_what_an_upgrade_drops() {
    let d = tempfile::tempdir().unwrap();
    let old = stale(&d.path().join("old"));
    // sm_90a only: Turing, Ampere and Ada are lost.
    let new = image(&d.path().join("new"), &[("usr/lib/libsm90a.so", "libsm90a.so")]);
    let (code, out, err) = cudalint(&["diff", &old, &new, "--format", "json"]);
    assert_eq!(code, 1, "{err}");
    let j: Value = serde_json::from_str(&out).unwrap();
    let lost: Vec<&str> = j["lost"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    for gpu in ["T4", "A100", "L4"] {
        assert!(lost.contains(&gpu), "{lost:?}");
    }
    assert!(!lost.contains(&"H100"), "{lost:?}");
    assert!(j["gained"].as_array().unwrap().is_empty());
    assert!(j["floor"]["old"].is_string() && j["floor"]["new"].is_string());
    let bins: Vec<&str> = j["binaries"].as_array().unwrap().iter().map(|b| b["name"].as_str().unwrap()).collect();
    assert_eq!(bins, ["libsm90a.so", "libstale.so"]);
    // Only H100 matters to this fleet, and it still runs.
    let (code, _, err) = cudalint(&["diff", &old, &new, "--gpu", "H100"]);
    assert_eq!(code, 0, "{err}");
    let (code, md, _) = cudalint(&["diff", &old, &new, "--format", "markdown"]);
    assert_eq!(code, 1);
    assert!(md.contains("- lost: T4, RTX 2080 Ti, A100"), "{md}");
}

/// An OCI layout with `files` (image path, fixture) and the Python packages `dists` (dist-info
/// directory, the files its RECORD lists) in one layer.
fn image_with_packages(dir: &Path, files: &[(&'static str, &str)], dists: &[(&str, &[&str])]) -> String {
    let site = "usr/lib/python3.11/site-packages";
    let mut entries: Vec<Ent> = files.iter().map(|(p, f)| Ent::File(p, read_fixture(f))).collect();
    for (dist, owned) in dists {
        let record: String = owned.iter().map(|f| format!("{f},,\n")).collect();
        entries.push(Ent::File(Box::leak(format!("{site}/{dist}/RECORD").into_boxed_str()), record.into_bytes()));
    }
    let img = Image::new(vec![(tar(&entries), Comp::Gzip)]);
    oci_layout(dir, &[&img]);
    format!("oci:{}", dir.display())
}

/// `--gpu` narrows the GPU table to the named GPUs and counts the named ones that did not
/// change; `lost` still says every GPU the image dropped. Packages that went are listed as
/// removed, a second build of one name (cu11 beside cu12) and one known only as the owner of a
/// binary (flash-attn) included, and one that came as added.
#[test]
fn diff_with_gpus_narrows_the_table_counts_the_unchanged_and_lists_removed_packages() {
    let d = tempfile::tempdir().unwrap();
    let fa = "usr/lib/python3.11/site-packages/flash_attn/libfa.so";
    let old = image_with_packages(
        &d.path().join("old"),
        &[("usr/lib/libstale.so", "../verdict/libstale.so"), (fa, "../verdict/libstale.so")],
        &[
            ("nvidia_cublas_cu12-12.8.4.1.dist-info", &["nvidia/cublas/lib/x"]),
            ("nvidia_cublas_cu11-11.11.3.6.dist-info", &["nvidia/cublas/lib/y"]),
            ("flash_attn-2.8.3.dist-info", &["flash_attn/libfa.so"]),
        ],
    );
    // sm_90a only: A100 and T4 are lost, H100 and H200 run as before, B200 fails as before.
    let new = image_with_packages(
        &d.path().join("new"),
        &[("usr/lib/libsm90a.so", "libsm90a.so")],
        &[
            ("nvidia_cublas_cu12-12.8.4.1.dist-info", &["nvidia/cublas/lib/x"]),
            ("nvidia_nccl_cu12-2.27.3.dist-info", &["nvidia/nccl/lib/z"]),
        ],
    );
    let gpus = "H100,H200,B200,A100";
    let (code, out, err) = cudalint(&["diff", &old, &new, "--gpu", gpus, "--format", "json"]);
    assert_eq!(code, 1, "A100 is lost: {err}");
    let j: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["named"], serde_json::json!(["H100", "H200", "B200", "A100"]));
    let table: Vec<&str> = j["gpus"].as_array().unwrap().iter().map(|g| g["name"].as_str().unwrap()).collect();
    assert_eq!(table, ["A100"], "{}", j["gpus"]);
    assert_eq!(j["unchanged"], 3);
    let lost: Vec<&str> = j["lost"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    assert!(lost.contains(&"T4") && lost.contains(&"A100"), "lost names every GPU the image dropped: {lost:?}");
    let packages: Vec<(&str, &str, &str)> = j["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["change"].as_str().unwrap(), p["old"].as_str().unwrap(), p["new"].as_str().unwrap()))
        .collect();
    assert_eq!(
        packages,
        [
            ("removed", "flash-attn 2.8.3", ""),
            ("removed", "nvidia-cublas-cu11 11.11.3.6", ""),
            ("added", "", "nvidia-nccl-cu12 2.27.3"),
        ],
        "{}",
        j["packages"]
    );

    let (code, text, err) = cudalint(&["diff", &old, &new, "--gpu", gpus]);
    assert_eq!(code, 1, "{err}");
    assert!(text.contains("\nGPUs\n  A100 (8.0): native (≥ 580.65.06) → fails\n  3 GPUs unchanged\n"), "{text}");
    assert!(!text.contains("T4 (7.5)"), "the table is the named GPUs': {text}");
    for line in ["removed: flash-attn 2.8.3", "removed: nvidia-cublas-cu11 11.11.3.6", "added: nvidia-nccl-cu12 2.27.3"]
    {
        assert!(text.contains(&format!("\n  {line}\n")), "{line}: {text}");
    }
    let (_, md, _) = cudalint(&["diff", &old, &new, "--gpu", gpus, "--format", "markdown"]);
    assert!(md.contains("- 3 GPUs unchanged\n") && md.contains("- removed: nvidia-cublas-cu11 11.11.3.6\n"), "{md}");

    // No GPU named: every GPU that changed is in the table, and the count is of all the others.
    let (_, out, _) = cudalint(&["diff", &old, &new, "--format", "json"]);
    let j: Value = serde_json::from_str(&out).unwrap();
    let table: Vec<&str> = j["gpus"].as_array().unwrap().iter().map(|g| g["name"].as_str().unwrap()).collect();
    assert!(table.contains(&"T4") && table.contains(&"A100") && !table.contains(&"H100"), "{table:?}");
    let n_a = support_json(&old)["gpus"].as_array().unwrap().iter().filter(|g| g["result"] == "n/a").count();
    assert_eq!(
        j["unchanged"].as_u64().unwrap() as usize + table.len(),
        cudalint::cuda::gpus::GPUS.len() - n_a,
        "every GPU either image applies to is in the table or counted"
    );
}

#[test]
fn diff_of_an_image_with_itself_is_empty_and_passes() {
    let d = tempfile::tempdir().unwrap();
    let img = stale(d.path());
    let (code, out, err) = cudalint(&["diff", &img, &img, "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let j: Value = serde_json::from_str(&out).unwrap();
    for k in ["lost", "gained", "gpus", "binaries", "compilers", "packages", "failures"] {
        assert!(j[k].as_array().unwrap().is_empty(), "{k}: {}", j[k]);
    }
    assert_eq!(j["floor"]["old"], j["floor"]["new"]);
    // The floor was not raised: a fleet driver below it is no news of this change.
    let (code, out, _) = cudalint(&["diff", &img, &img, "--driver", "550.54.15"]);
    assert_eq!(code, 0, "{out}");
}

/// `image` with NVIDIA_REQUIRE_CUDA set to `require`.
fn stale_requiring(dir: &Path, require: &str) -> String {
    let entries = vec![Ent::File("usr/lib/libstale.so", read_fixture("../verdict/libstale.so"))];
    let mut img = Image::new(vec![(tar(&entries), Comp::Gzip)]);
    img.env = vec![Box::leak(format!("NVIDIA_REQUIRE_CUDA={require}").into_boxed_str())];
    oci_layout(dir, &[&img]);
    format!("oci:{}", dir.display())
}

fn require_rules(image: &str) -> Vec<String> {
    let (_, out, err) = cudalint(&["scan", image, "--gpu", "H100", "--format", "json"]);
    let r: Value = serde_json::from_str(&out).unwrap_or_else(|_| panic!("{err}"));
    let mut v: Vec<String> = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .inspect(|f| {
            if std::env::var_os("DBG").is_some() {
                eprintln!("{}", f["message"])
            }
        })
        .map(|f| f["rule"].as_str().unwrap().to_string())
        .filter(|c| c == "CL011" || c == "CL012")
        .collect();
    v.dedup();
    v
}

#[test]
fn the_emitted_requirement_is_the_toolkits_grammar_and_satisfies_cl011_and_cl012() {
    use cudalint::cuda::require::{Node, parse};
    use cudalint::cuda::{Cc, CudaVersion, DriverVersion};
    let d = tempfile::tempdir().unwrap();
    let img = stale(&d.path().join("plain"));
    let (code, out, err) = cudalint(&["support", &img, "--emit", "require"]);
    assert_eq!(code, 0, "{err}");
    // The constraint alone, one line.
    assert_eq!(out.lines().count(), 1, "{out}");
    let text = out.trim_end();
    assert_eq!(text, "cuda>=13.0,arch>=7.5,arch<10.0");
    // Parsed as libnvidia-container parses it, it admits exactly the GPUs the matrix runs on,
    // on a CUDA 13 driver and not on a CUDA 12 one.
    let req = parse(text).unwrap();
    let s = support_json(&img);
    let drv = DriverVersion::parse("580.65.06").unwrap();
    for g in s["gpus"].as_array().unwrap().iter().filter(|g| g["result"] != "n/a") {
        let cc = Cc::parse(g["compute_capability"].as_str().unwrap()).unwrap();
        let node = |cuda: CudaVersion| Node { cuda: Some(cuda), driver: Some(&drv), arch: Some(cc), brand: None };
        let runs = g["result"] != "fails";
        assert_eq!(req.admits(&node(CudaVersion::new(13, 0))), runs, "{}", g["name"]);
        assert!(!req.admits(&node(CudaVersion::new(12, 9))), "{}", g["name"]);
    }
    // The Dockerfile lines carry the same constraint.
    let (_, docker, _) = cudalint(&["support", &img, "--emit", "dockerfile"]);
    assert!(docker.contains(&format!("ENV NVIDIA_REQUIRE_CUDA=\"{text}\"")), "{docker}");
    // CL011/CL012 accept the emitted constraint and catch one too loose or too strict.
    let judged = |name: &str, req: &str| require_rules(&stale_requiring(&d.path().join(name), req));
    assert!(judged("exact", text).is_empty(), "{:?}", judged("exact2", text));
    assert_eq!(judged("loose-cuda", "cuda>=12.0,arch>=7.5,arch<10.0"), ["CL011"]);
    assert_eq!(judged("strict-arch", "cuda>=13.0,arch>=8.0,arch<10.0"), ["CL012"]);
    assert_eq!(judged("loose-arch", "cuda>=13.0,arch>=7.5"), ["CL012"]);
}

/// A wheel: its platform tag keeps it off Jetson and Grace, and the matrix lists the wheel-variant
/// properties its code supports (the sm_arch values cuobjdump's listing of libnvjpeg.so.12 holds,
/// checked against cuobjdump in wheels.rs).
#[test]
fn a_wheels_matrix_lists_its_variant_properties() {
    let w = crate::wheels::wheel();
    let s = support_json(&w.display().to_string());
    assert_eq!(s["image"]["platform"], "linux/amd64");
    assert_eq!(row(&s, "Jetson AGX Orin")["result"], "n/a");
    assert_eq!(row(&s, "H100")["result"], "native");
    let props: Vec<&str> = s["variant_properties"].as_array().unwrap().iter().map(|p| p.as_str().unwrap()).collect();
    assert!(props.contains(&"nvidia :: cuda_version_lower_bound :: 12.0"), "{props:?}");
    assert!(props.contains(&"nvidia :: sm_arch :: 90_real") && props.contains(&"nvidia :: sm_arch :: 50_real"));
    // Kepler fails, so no 37_real.
    assert!(!props.iter().any(|p| p.ends_with(":: 37_real")), "{props:?}");
}

/// A CI job sets the targets, driver and gate by environment as well as by flag.
#[test]
fn targets_driver_and_fail_on_come_from_the_environment_too() {
    let d = tempfile::tempdir().unwrap();
    let img = stale(d.path());
    let run = |env: &[(&str, &str)], args: &[&str]| {
        let mut c = Command::cargo_bin("cudalint").unwrap();
        c.args(["scan", &img, "--quiet", "--format", "json"]).args(args);
        for k in ["CUDALINT_GPU", "CUDALINT_DRIVER", "CUDALINT_FAIL_ON"] {
            c.env_remove(k);
        }
        c.envs(env.iter().copied());
        let out = c.output().unwrap();
        let r: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        (out.status.code().unwrap(), r)
    };
    let (code, r) = run(&[("CUDALINT_GPU", "V100,H100"), ("CUDALINT_DRIVER", "580.65.06")], &[]);
    assert_eq!(code, 1, "V100 fails");
    let names: Vec<&str> = r["targets"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["V100", "H100"]);
    assert_eq!(r["targets"][0]["driver"], "580.65.06");
    // A flag wins over the environment.
    let (code, r) = run(&[("CUDALINT_GPU", "V100")], &["--gpu", "H100"]);
    assert_eq!((code, r["targets"][0]["name"].as_str()), (0, Some("H100")));
    // H100 runs with a CL002 warning: the gate fails only when told to fail on warnings.
    let (code, r) = run(&[("CUDALINT_GPU", "H100"), ("CUDALINT_FAIL_ON", "warning")], &[]);
    assert_eq!((code, r["fail_on"].as_str()), (1, Some("warning")));
}
