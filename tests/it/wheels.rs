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
        assert_eq!(code, 0, "{src}: {:#?}", r["findings"]);
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
