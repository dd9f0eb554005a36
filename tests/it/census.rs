//! The census of real CUDA wheels (tests/census/wheels.txt, run by scripts/census.py): every ELF
//! file of torch 2.4–2.9, TensorFlow 2.18/2.21, cuDNN, JAX's CUDA plugins, ONNX Runtime (CUDA 12
//! and 13), CuPy, xformers, bitsandbytes, RAPIDS and vLLM, installed as pip lays it out, gives the
//! same inventory by seek (`inspect`), by stream (`docker save` on stdin) and as `dir:`; its
//! SONAME and CUDA `DT_NEEDED` are readelf's, its fatbin entries cuobjdump's, and nothing in it
//! is CL015. About 8 GB of wheels, fetched once into wheels/ of the test cache (shared with the stacks)
//! (`$CUDALINT_CENSUS_WHEELS`, else `$CUDALINT_TEST_CACHE`, else `~/.cache/cudalint-test`), each unpacked in turn under `$TMPDIR` (up to 2 GB).
//!
//! The open-world census (tests/census/open_world.toml, run by scripts/census_open.py): 14 wheels
//! no knowledge row names, and two cupy-cuda11x + NVRTC 11.8 images, each judged on H100, L4,
//! RTX 5090, B200 and V100 against a truth written before the first scan: no CL015, the wheel
//! read by seek and the installed tree by stream give the same report, every compiler the
//! truth finds by bytes is listed, no silent `runs`, and each GPU's class is the truth's. The
//! wheels (2.3 GB, 1.7 GB of them shared with the census above) stream from the cache, never unpacked.

use std::process::Command;

use crate::util::root;

#[test]
fn every_elf_file_of_the_census_wheels_reads_the_same_in_every_transport() {
    let bin = assert_cmd::cargo::cargo_bin("cudalint");
    let out = Command::new("python3")
        .arg(root().join("scripts/census.py"))
        .arg(&bin)
        .output()
        .expect("run python3 scripts/census.py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "scripts/census.py failed ({}; exit 2: it could not run: PyPI must be reachable the first time, with \
         about 8 GB free in the test cache (~/.cache/cudalint-test)):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_open_world_census_judges_each_wheel_as_its_truth_says() {
    let bin = assert_cmd::cargo::cargo_bin("cudalint");
    let out = Command::new("python3")
        .arg(root().join("scripts/census_open.py"))
        .arg(&bin)
        .output()
        .expect("run python3 scripts/census_open.py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "scripts/census_open.py failed ({}; exit 1: a check failed, each failure above names its check and \
         the truth's why; exit 2: it could not run, e.g. PyPI unreachable for a missing wheel):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}
