//! A real NVIDIA package judged as users install it: the `nvidia-nvjpeg-cu12` wheel (pinned by
//! version and sha256, fetched by scripts/fetch-test-wheels.sh), scanned as a wheel and as an
//! image whose site-packages holds it with its own dist-info record.

use std::path::PathBuf;
use std::process::Command as Std;

use assert_cmd::Command;

use crate::images::{Comp, Ent, Image, oci_layout, tar};
use crate::util::root;

/// The pinned wheel, fetched if needed.
pub fn wheel() -> PathBuf {
    let out = Std::new(root().join("scripts/fetch-test-wheels.sh")).output().expect("run scripts/fetch-test-wheels.sh");
    assert!(
        out.status.success(),
        "scripts/fetch-test-wheels.sh failed (PyPI must be reachable): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
    std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().contains("nvidia_nvjpeg_cu12-12.4.0.76"))
        .expect("the pinned nvjpeg wheel")
}

fn json(args: &[&str]) -> (i32, serde_json::Value) {
    let out = Command::cargo_bin("cudalint").unwrap().args(args).args(["--format", "json"]).output().unwrap();
    let code = out.status.code().unwrap();
    assert!(code != 2, "scan did not finish: {}", String::from_utf8_lossy(&out.stderr));
    (code, serde_json::from_slice(&out.stdout).unwrap())
}

fn class(r: &serde_json::Value, target: &str) -> String {
    let row = &r["matrix"][0];
    row["cells"].as_array().unwrap().iter().find(|c| c["target"] == target).unwrap()["class"].as_str().unwrap().into()
}

/// The wheel's members under site-packages, as pip lays them out.
fn site_packages_image(dir: &std::path::Path, whl: &std::path::Path) -> String {
    let mut zip = zip::ZipArchive::new(std::fs::File::open(whl).unwrap()).unwrap();
    let mut entries = Vec::new();
    for i in 0..zip.len() {
        let mut m = zip.by_index(i).unwrap();
        let mut data = Vec::new();
        std::io::Read::read_to_end(&mut m, &mut data).unwrap();
        let path = format!("usr/local/lib/python3.12/dist-packages/{}", m.name());
        entries.push(Ent::File(Box::leak(path.into_boxed_str()), data));
    }
    let img = Image::new(vec![(tar(&entries), Comp::Gzip)]);
    oci_layout(dir, &[&img]);
    format!("oci:{}", dir.display())
}

#[test]
fn nvjpeg_is_judged_as_the_package_it_is() {
    let whl = wheel();
    let dir = tempfile::tempdir().unwrap();
    let image = site_packages_image(dir.path(), &whl);
    for src in [whl.to_str().unwrap(), image.as_str()] {
        let (code, r) = json(&["scan", src, "--gpu", "V100,H100,B200,RTX 5090,GB10"]);
        // An x86_64 wheel (and the amd64 image it is installed in) does not reach GB10's arm64
        // host: that error alone; its code would run there natively.
        assert_eq!(code, 1, "{src}: {:#?}", r["findings"]);
        let errors: Vec<&serde_json::Value> =
            r["findings"].as_array().unwrap().iter().filter(|f| f["severity"] == "error").collect();
        assert!(
            errors.iter().all(|f| f["rule"] == "CL024" && f["target"] == "GB10") && errors.len() == 1,
            "{errors:#?}"
        );
        let row = &r["matrix"][0];
        assert!(row["path"].as_str().unwrap().ends_with("nvidia/nvjpeg/lib/libnvjpeg.so.12"));
        assert_eq!(row["package"]["purl"], "pkg:pypi/nvidia-nvjpeg-cu12@12.4.0.76", "{src}");
        for t in ["V100", "H100", "B200", "RTX 5090", "GB10"] {
            assert_eq!(class(&r, t), "native", "{src} on {t}");
        }
    }
    // Kepler: CUDA 12 builds cannot target it; the fix is the package's CUDA 11 build.
    let (code, r) = json(&["scan", &image, "--gpu", "K80"]);
    assert_eq!(code, 1);
    let f = r["findings"].as_array().unwrap().iter().find(|f| f["rule"] == "CL001").unwrap();
    let fix = f["fix"].as_str().unwrap();
    assert!(fix.contains("install nvidia-nvjpeg-cu11 instead"), "{fix}");
    assert!(!fix.contains("TORCH_CUDA_ARCH_LIST"), "{fix}");
    // A CUDA 11.4 driver: the package's CUDA 12 libraries need 525.60.13, said once.
    let (code, r) = json(&["scan", &image, "--gpu", "V100", "--driver", "470.82.01"]);
    assert_eq!(code, 1);
    let first = &r["findings"][0];
    assert_eq!(first["rule"], "CL005");
    let msg = first["message"].as_str().unwrap();
    assert!(msg.contains("525.60.13") && msg.contains("nvidia-nvjpeg-cu12"), "{msg}");
}

/// The pinned wheel re-zipped with `extra` members added (a `*.dist-info/variant.json` listed in
/// its RECORD), under a variant wheel's name (PEP 825: the label after the platform tag).
fn rezip(dir: &std::path::Path, label: &str, extra: &[(&str, &[u8])]) -> PathBuf {
    let whl = wheel();
    let mut zin = zip::ZipArchive::new(std::fs::File::open(&whl).unwrap()).unwrap();
    let out = dir.join(format!("nvidia_nvjpeg_cu12-12.4.0.76-py3-none-manylinux2014_x86_64-{label}.whl"));
    let mut z = zip::ZipWriter::new(std::fs::File::create(&out).unwrap());
    let deflate = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    for i in 0..zin.len() {
        let mut m = zin.by_index(i).unwrap();
        let mut data = Vec::new();
        std::io::Read::read_to_end(&mut m, &mut data).unwrap();
        if m.name().ends_with(".dist-info/RECORD") {
            for (name, _) in extra {
                data.extend_from_slice(format!("{name},,\n").as_bytes());
            }
        }
        z.start_file(m.name(), deflate).unwrap();
        std::io::Write::write_all(&mut z, &data).unwrap();
    }
    for (name, data) in extra {
        z.start_file(*name, deflate).unwrap();
        std::io::Write::write_all(&mut z, data).unwrap();
    }
    z.finish().unwrap();
    out
}

const VARIANT_JSON: &str = "nvidia_nvjpeg_cu12-12.4.0.76.dist-info/variant.json";

/// A variant.json as PEP 825 lays it out (the shape variantlib writes), declaring `sm_arch`.
fn variant_json(label: &str, sm_arch: &[&str], lower: &str) -> String {
    serde_json::json!({
        "$schema": "https://variants-schema.wheelnext.dev/v0.0.3.json",
        "default-priorities": {"namespace": ["nvidia"]},
        "providers": {"nvidia": {"requires": ["nvidia-variant-provider>=0.0.1,<1.0.0"],
                                 "plugin-api": "nvidia_variant_provider.plugin:NvidiaVariantPlugin"}},
        "variants": {label: {"nvidia": {"sm_arch": sm_arch, "cuda_version_lower_bound": [lower]}}}
    })
    .to_string()
}

fn cl023(r: &serde_json::Value) -> Vec<&serde_json::Value> {
    r["findings"].as_array().unwrap().iter().filter(|f| f["rule"] == "CL023").collect()
}

/// nvjpeg 12.4.0.76 carries SASS for 5.0 to 12.1 and compute_121 PTX, and needs a CUDA 12 driver:
/// a variant.json that declares what it has passes; one that also declares Kepler (3.7, which
/// no CUDA 12 build reaches, and PTX never compiles down to) or a CUDA 11.8 lower bound is CL023,
/// exit 1; the wheel without variant.json has no CL023. The variant.json is in the inventory.
#[test]
fn a_variant_wheel_is_held_to_what_its_variant_json_declares() {
    let dir = tempfile::tempdir().unwrap();
    let good = variant_json("cu12", &["80_real", "90_real", "120_real", "121_virtual"], "12.0");
    let good = rezip(dir.path(), "cu12", &[(VARIANT_JSON, good.as_bytes())]);
    let (code, r) = json(&["scan", good.to_str().unwrap(), "--gpu", "H100"]);
    assert_eq!(code, 0, "{:#}", r["findings"]);
    assert!(cl023(&r).is_empty());

    let inv = cudalint::image::scan(good.to_str().unwrap(), &cudalint::image::ScanOptions::default()).unwrap();
    assert_eq!(inv.variants.len(), 1, "{:?}", inv.variants);
    let v = &inv.variants[0];
    assert_eq!((v.path.as_str(), v.label.as_str()), (format!("/{VARIANT_JSON}").as_str(), "cu12"));
    assert_eq!((v.distribution.as_str(), v.version.as_str()), ("nvidia-nvjpeg-cu12", "12.4.0.76"));
    let shown: Vec<String> = v.properties.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [
            "nvidia :: cuda_version_lower_bound :: 12.0",
            "nvidia :: sm_arch :: 80_real",
            "nvidia :: sm_arch :: 90_real",
            "nvidia :: sm_arch :: 120_real",
            "nvidia :: sm_arch :: 121_virtual",
        ]
    );

    let bad = variant_json("cu12k80", &["37_real", "90_real"], "11.8");
    let bad = rezip(dir.path(), "cu12k80", &[(VARIANT_JSON, bad.as_bytes())]);
    let (code, r) = json(&["scan", bad.to_str().unwrap(), "--gpu", "H100"]);
    assert_eq!(code, 1, "{:#}", r["findings"]);
    let found = cl023(&r);
    assert_eq!(found.len(), 1, "{found:#?}");
    let (msg, fix) = (found[0]["message"].as_str().unwrap(), found[0]["fix"].as_str().unwrap());
    assert!(found[0]["path"].as_str().unwrap().ends_with("/libnvjpeg.so.12"));
    assert_eq!(found[0]["severity"], "error");
    assert!(msg.contains("nvidia :: sm_arch :: 37_real") && !msg.contains("90_real"), "{msg}");
    assert!(msg.contains("compute capability 3.7"), "{msg}");
    assert!(msg.contains("cuda_version_lower_bound :: 11.8") && msg.contains("older than CUDA 12.0"), "{msg}");
    assert!(
        fix.contains("drop nvidia :: sm_arch :: 37_real") && fix.contains("lower_bound :: 12.0 or higher"),
        "{fix}"
    );

    // The same wheel installed in an image's site-packages: the same finding.
    let img = tempfile::tempdir().unwrap();
    let image = site_packages_image(img.path(), &bad);
    let (code, r) = json(&["scan", &image, "--gpu", "H100"]);
    assert_eq!(code, 1);
    let found = cl023(&r);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(
        found[0]["message"]
            .as_str()
            .unwrap()
            .contains(&format!("/usr/local/lib/python3.12/dist-packages/{VARIANT_JSON}"))
    );

    let (code, r) = json(&["scan", wheel().to_str().unwrap(), "--gpu", "H100"]);
    assert_eq!(code, 0);
    assert!(cl023(&r).is_empty());
}

/// A variant.json past 1 MiB, or one that is not PEP 825 variant metadata, is not read: the scan
/// notes why and judges no declaration.
#[test]
fn oversized_or_malformed_variant_json_is_noted_not_judged() {
    let dir = tempfile::tempdir().unwrap();
    let mut big = variant_json("cu12", &["37_real"], "11.8").into_bytes();
    big.resize((1 << 20) + 1, b' ');
    let big = rezip(dir.path(), "big", &[(VARIANT_JSON, &big)]);
    let inv = cudalint::image::scan(big.to_str().unwrap(), &cudalint::image::ScanOptions::default()).unwrap();
    assert!(inv.variants.is_empty());
    let note = format!("/{VARIANT_JSON}: wheel-variant record of 1048577 bytes, over its bound of 1048576 bytes");
    assert!(inv.notes.iter().any(|n| n.contains(&note)), "{:?}", inv.notes);
    let (code, r) = json(&["scan", big.to_str().unwrap(), "--gpu", "H100"]);
    assert_eq!(code, 0);
    assert!(cl023(&r).is_empty());

    let two = r#"{"variants": {"a": {"nvidia": {"sm_arch": ["37_real"]}}, "b": {}}}"#;
    let two = rezip(dir.path(), "two", &[(VARIANT_JSON, two.as_bytes())]);
    let inv = cudalint::image::scan(two.to_str().unwrap(), &cudalint::image::ScanOptions::default()).unwrap();
    assert_eq!(inv.variants[0].error.as_deref(), Some("`variants` holds 2 labels; a wheel's holds exactly one"));
    assert!(inv.notes.iter().any(|n| n.contains("not read as wheel variant metadata")), "{:?}", inv.notes);
    let (code, r) = json(&["scan", two.to_str().unwrap(), "--gpu", "H100"]);
    assert_eq!(code, 0);
    assert!(cl023(&r).is_empty());
}

/// What `supported` says of a wheel of fixture libraries is what NVIDIA's cuobjdump listed for
/// them (fixtures/bin/*.list.txt): the architectures every library carries, SASS as `_real`, PTX
/// as `_virtual`. An 'a'-only library beside them is an optional extension and changes nothing;
/// alone, it is all the wheel has. The libraries need libcudart.so.13: CUDA 13.0 as lower bound.
#[test]
fn supported_properties_are_what_cuobjdump_lists_in_every_binary() {
    let dir = tempfile::tempdir().unwrap();
    let build = |name: &str, libs: &[&str]| {
        let whl = dir.path().join(format!("{name}-1.0-py3-none-linux_x86_64.whl"));
        let mut z = zip::ZipWriter::new(std::fs::File::create(&whl).unwrap());
        let deflate = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
        let mut record = String::new();
        for lib in libs {
            z.start_file(format!("{name}/lib/{lib}"), deflate).unwrap();
            std::io::Write::write_all(&mut z, &crate::util::read_fixture(lib)).unwrap();
            record.push_str(&format!("{name}/lib/{lib},,\n"));
        }
        z.start_file(format!("{name}-1.0.dist-info/RECORD"), deflate).unwrap();
        std::io::Write::write_all(&mut z, record.as_bytes()).unwrap();
        z.finish().unwrap();
        let inv = cudalint::image::scan(whl.to_str().unwrap(), &cudalint::image::ScanOptions::default()).unwrap();
        cudalint::lint::variants::supported(&inv).iter().map(ToString::to_string).collect::<Vec<_>>()
    };
    let listed = |libs: &[&str]| {
        let mut common: Option<std::collections::BTreeSet<String>> = None;
        for lib in libs {
            let mine = crate::cuobjdump::load_list(lib)
                .into_iter()
                .map(|(kind, arch)| {
                    let n = arch.strip_prefix("sm_").unwrap().to_string();
                    format!("nvidia :: sm_arch :: {n}_{}", if kind == "ELF" { "real" } else { "virtual" })
                })
                .collect();
            common = Some(match common {
                None => mine,
                Some(c) => c.intersection(&mine).cloned().collect(),
            });
        }
        let mut want: Vec<String> = common.unwrap().into_iter().collect();
        want.push("nvidia :: cuda_version_lower_bound :: 13.0".into());
        want.sort();
        want
    };
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    let libs = ["libmulti.so", "libzstd.so"];
    let want = listed(&libs);
    assert_eq!(want.len(), 4, "{want:?}"); // sm_80, sm_90, compute_90 in both
    assert_eq!(sorted(build("two", &libs)), want);
    assert_eq!(sorted(build("gated", &["libmulti.so", "libzstd.so", "libsm90a.so"])), want);
    assert_eq!(
        sorted(build("three", &["libmulti.so", "libzstd.so", "libnocompress.so"])),
        listed(&["libmulti.so", "libzstd.so", "libnocompress.so"])
    );
    assert_eq!(
        sorted(build("alone", &["libsm90a.so"])),
        [
            "nvidia :: cuda_version_lower_bound :: 13.0",
            "nvidia :: sm_arch :: 90a_real",
            "nvidia :: sm_arch :: 90a_virtual"
        ]
    );
}

/// What `supported` says of the real wheel is what NVIDIA's cuobjdump lists for its one
/// library: every SASS architecture as `_real`, every PTX one as `_virtual` (its only binary, so
/// the intersection is that list), and the CUDA 12 floor as the lower bound.
#[cfg(feature = "slow-tests")]
#[test]
fn supported_properties_of_nvjpeg_match_cuobjdump() {
    let dir = tempfile::tempdir().unwrap();
    let mut zip = zip::ZipArchive::new(std::fs::File::open(wheel()).unwrap()).unwrap();
    zip.extract(dir.path()).unwrap();
    let lib = dir.path().join("nvidia/nvjpeg/lib/libnvjpeg.so.12");
    let cuobjdump = crate::toolchains::cuda_tools().join("cu13/nvidia/cu13/bin/cuobjdump");
    let out = Std::new(&cuobjdump).args(["-all", "-lelf", "-lptx"]).arg(&lib).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let listed = crate::cuobjdump::parse_list(&String::from_utf8(out.stdout).unwrap());
    let mut want: Vec<String> = listed
        .iter()
        .map(|(kind, arch)| {
            let n = arch.strip_prefix("sm_").unwrap();
            format!("nvidia :: sm_arch :: {n}_{}", if kind == "ELF" { "real" } else { "virtual" })
        })
        .collect();
    want.push("nvidia :: cuda_version_lower_bound :: 12.0".into());
    want.sort();
    want.dedup();
    let inv = cudalint::image::scan(wheel().to_str().unwrap(), &cudalint::image::ScanOptions::default()).unwrap();
    let mut got: Vec<String> = cudalint::lint::variants::supported(&inv).iter().map(ToString::to_string).collect();
    got.sort();
    assert_eq!(got, want);
    assert!(got.contains(&"nvidia :: sm_arch :: 121_virtual".to_string()), "{got:?}");
}

/// A variant.json is the final filesystem's: a later layer that removes its dist-info (`pip
/// uninstall` in a later step) takes it away, and one that rewrites it is the one read.
#[test]
fn a_later_layer_removes_or_replaces_a_variant_json() {
    let site = "usr/local/lib/python3.12/site-packages";
    let path: &'static str = Box::leak(format!("{site}/demo-1.0.dist-info/variant.json").into_boxed_str());
    let declares = |v: &str| format!(r#"{{"variants": {{"x": {{"nvidia": {{"sm_arch": ["{v}"]}}}}}}}}"#).into_bytes();
    let first = tar(&[Ent::File(path, declares("80_real"))]);
    let scan = |layers: Vec<Vec<u8>>| {
        let dir = tempfile::tempdir().unwrap();
        let img = Image::new(layers.into_iter().map(|l| (l, Comp::Gzip)).collect());
        oci_layout(dir.path(), &[&img]);
        let opts = cudalint::image::ScanOptions::default();
        let inv = cudalint::image::scan(&format!("oci:{}", dir.path().display()), &opts).unwrap();
        inv.variants
            .iter()
            .map(|v| v.properties.iter().map(ToString::to_string).collect::<Vec<_>>())
            .collect::<Vec<_>>()
    };
    assert_eq!(scan(vec![first.clone()]), [["nvidia :: sm_arch :: 80_real"]]);
    let whiteout: &'static str = Box::leak(format!("{site}/.wh.demo-1.0.dist-info").into_boxed_str());
    assert!(scan(vec![first.clone(), tar(&[Ent::File(whiteout, Vec::new())])]).is_empty());
    assert_eq!(scan(vec![first, tar(&[Ent::File(path, declares("90_real"))])]), [["nvidia :: sm_arch :: 90_real"]]);
}
