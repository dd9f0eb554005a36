//! The knowledge base as users extend it: `--knowledge FILE` and `[knowledge] extend` add or
//! replace rows, the verdicts cite the row that decided, and a bad file stops the run at its line.

use std::path::Path;

use assert_cmd::Command;

use crate::images::{Comp, Ent, Image, oci_layout, tar};
use crate::util::read_fixture;

/// An image with an in-house kernel library (all sm_90a) beside its package's portable one, and
/// an NVRTC 12.6 a run-time compiling package of ours would load.
fn image(dir: &Path) -> String {
    let ents = vec![
        Ent::File("opt/app/our_pkg/_our_fused_attn.so", read_fixture("libsm90a.so")),
        Ent::File("opt/app/our_pkg/_C.so", read_fixture("libmulti.so")),
        Ent::File(
            "usr/local/lib/python3.11/site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12.6.77",
            read_fixture("libplain.so"),
        ),
        Ent::File(
            "usr/local/lib/python3.11/site-packages/ourjit-1.0.dist-info/RECORD",
            b"ourjit/__init__.py,,\n".to_vec(),
        ),
    ];
    let img = Image::new(vec![(tar(&ents), Comp::Gzip)]);
    let d = dir.join("img");
    oci_layout(&d, &[&img]);
    format!("oci:{}", d.display())
}

const OURS: &str = r#"
[[library]]
prefix = "_our_fused_attn"
named = "no"
dispatch = { min = "9.0", below = "10.0", by = "our_pkg/attention.py picks it on Hopper only" }
source = "our_pkg 1.4, attention.py line 88"
cases = [{ name = "fused-attn-gated-on-l4", file = "_our_fused_attn.so", optional = true }]

[[consumer]]
package = "ourjit"
compiler = "nvrtc"
what = "ourjit's kernels, compiled by NVRTC at import"
central = true
"#;

fn scan(dir: &Path, spec: &str, args: &[&str]) -> (Option<i32>, serde_json::Value, String) {
    let o = Command::cargo_bin("cudalint")
        .unwrap()
        .current_dir(dir)
        .args(["scan", spec, "--quiet", "--format", "json"])
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    let json = serde_json::from_slice(&o.stdout).unwrap_or(serde_json::Value::Null);
    (o.status.code(), json, stderr)
}

fn findings<'a>(r: &'a serde_json::Value, rule: &str) -> Vec<&'a serde_json::Value> {
    r["findings"].as_array().map(|f| f.iter().filter(|f| f["rule"] == rule).collect()).unwrap_or_default()
}

#[test]
fn a_users_rows_gate_their_library_and_judge_their_compiler_citing_the_row() {
    let d = tempfile::tempdir().unwrap();
    let spec = image(d.path());
    std::fs::write(d.path().join("ours.toml"), OURS).unwrap();
    let no_cache = ["--no-cache", "--gpu", "L4"];

    // Without the rows: an sm_90a-only library is an error on an L4, and nothing compiles at run time.
    let (code, r, err) = scan(d.path(), &spec, &no_cache);
    assert_eq!(code, Some(1), "{err}\n{r}");
    assert!(!findings(&r, "CL006").is_empty() || !findings(&r, "CL001").is_empty(), "{r}");
    assert!(r["compiler_checks"].to_string().find("ourjit").is_none(), "{r}");

    // With them: gated on the L4 (CL016 names who gates it and the row), and ourjit's NVRTC judged.
    let mut args = no_cache.to_vec();
    args.extend(["--knowledge", "ours.toml"]);
    let (code, r, err) = scan(d.path(), &spec, &args);
    let gated = findings(&r, "CL016");
    assert_eq!(gated.len(), 1, "{err}\n{r}");
    let m = gated[0]["message"].as_str().unwrap();
    assert!(m.contains("our_pkg/attention.py picks it on Hopper only") && m.contains("knowledge: ours.toml:2"), "{m}");
    assert!(findings(&r, "CL006").is_empty() && findings(&r, "CL001").is_empty(), "{r}");
    let cell = r["matrix"].as_array().unwrap().iter().find(|row| row["path"] == "/opt/app/our_pkg/_our_fused_attn.so");
    let why = cell.unwrap()["cells"][0]["why"].as_str().unwrap();
    assert!(why.starts_with("loaded only on compute capability 9.0 to 9.x") && why.contains("ours.toml:2"), "{why}");
    // NVRTC 12.6 knows sm_89: ourjit runs on an L4; on an RTX 5090 it cannot (central: an error).
    assert_eq!(code, Some(0), "{err}\n{r}");
    let mut on_5090 = vec!["--no-cache", "--gpu", "RTX 5090", "--knowledge", "ours.toml"];
    let (code, r, _) = scan(d.path(), &spec, &on_5090);
    assert_eq!(code, Some(1), "{r}");
    let c = findings(&r, "CL020");
    assert!(c.len() == 1 && c[0]["message"].as_str().unwrap().contains("ourjit's kernels"), "{r}");

    // The same rows from cudalint.toml's [knowledge] extend.
    std::fs::create_dir(d.path().join("kb")).unwrap();
    std::fs::rename(d.path().join("ours.toml"), d.path().join("kb/ours.toml")).unwrap();
    std::fs::write(d.path().join("cudalint.toml"), "[knowledge]\nextend = [\"kb/ours.toml\"]\n").unwrap();
    on_5090.truncate(3);
    let (code, r, err) = scan(d.path(), &spec, &on_5090);
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(findings(&r, "CL020").len(), 1, "{r}");
}

/// A row with the key of a built-in one replaces it: vLLM's FlashAttention 2 build without its
/// dispatch row is judged by its code alone on a T4 (an 'a'-only extension of a package that runs).
#[test]
fn a_row_with_a_built_in_key_replaces_it() {
    let d = tempfile::tempdir().unwrap();
    let ents = vec![
        Ent::File(
            "usr/local/lib/python3.11/site-packages/vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so",
            read_fixture("libsm90a.so"),
        ),
        Ent::File("usr/local/lib/python3.11/site-packages/vllm/_C.abi3.so", read_fixture("libmulti.so")),
    ];
    let img = Image::new(vec![(tar(&ents), Comp::Gzip)]);
    oci_layout(&d.path().join("img"), &[&img]);
    let spec = format!("oci:{}", d.path().join("img").display());
    let (code, r, err) = scan(d.path(), &spec, &["--no-cache", "--gpu", "T4"]);
    assert_eq!(code, Some(0), "{err}\n{r}");
    assert!(findings(&r, "CL016")[0]["message"].as_str().unwrap().contains("_is_fa2_supported"), "{r}");
    std::fs::write(
        d.path().join("no-dispatch.toml"),
        "[[library]]\nprefix = \"_vllm_fa2_C\"\nnamed = \"no\"\nsource = \"us\"\n",
    )
    .unwrap();
    let (code, r, err) = scan(d.path(), &spec, &["--no-cache", "--gpu", "T4", "--knowledge", "no-dispatch.toml"]);
    assert_eq!(code, Some(0), "{err}\n{r}");
    let m = findings(&r, "CL016")[0]["message"].as_str().unwrap().to_string();
    assert!(m.starts_with("carries only code for") && !m.contains("_is_fa2_supported"), "{m}");
}

#[test]
fn a_bad_knowledge_file_stops_the_run_at_its_line() {
    let d = tempfile::tempdir().unwrap();
    let spec = image(d.path());
    std::fs::write(d.path().join("bad.toml"), "[[library]]\nprefix = \"x\"\nsource = \"s\"\nclosed = \"yes\"\n")
        .unwrap();
    let (code, _, err) = scan(d.path(), &spec, &["--no-cache", "--gpu", "L4", "--knowledge", "bad.toml"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("bad.toml:4"), "{err}");
    std::fs::write(
        d.path().join("cc.toml"),
        "[[library]]\nprefix = \"x\"\nsource = \"s\"\ndispatch = { min = \"Hopper\", by = \"us\" }\n",
    )
    .unwrap();
    let (code, _, err) = scan(d.path(), &spec, &["--no-cache", "--gpu", "L4", "--knowledge", "cc.toml"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("cc.toml") && err.contains("\"Hopper\" is not a compute capability"), "{err}");
    // Rows that would match everything, or load a library nowhere, are refused before they decide.
    for (name, text, says) in [
        ("empty.toml", "[[library]]\nprefix = \"\"\ndriver = \"libcuda\"\nsource = \"s\"\n", "empty library prefix"),
        (
            "zero.toml",
            "[[library]]\nprefix = \"x\"\nsource = \"s\"\ndispatch = { below = \"0.0\", by = \"us\" }\n",
            "loads it nowhere",
        ),
        (
            "order.toml",
            "[[library]]\nprefix = \"x\"\nsource = \"s\"\ndispatch = { min = \"9.0\", below = \"8.0\", by = \"us\" }\n",
            "is not below",
        ),
        ("env.toml", "[[env]]\nprefixes = [\"\"]\nsource = \"s\"\n", "empty prefix"),
        (
            "kind.toml",
            "[[compiler_file]]\nkey = \"k\"\nnames = [\"ourcc\"]\nkind = \"ptxass\"\nsource = \"s\"\n",
            "is not one of",
        ),
        (
            "sm.toml",
            "[[source_build]]\npackage = \"p\"\nvariable = \"V\"\ndefault = \"d\"\ndefault_archs = [\"8.0\"]\nsource = \"s\"\n",
            "\"8.0\" is not an SM number",
        ),
        (
            "setting.toml",
            "[[source_build]]\npackage = \"p\"\nvariable = \"V\"\ndefault = \"d\"\nsetting = \"V=80\"\nsource = \"s\"\n",
            "with {sm} or {torch}",
        ),
    ] {
        std::fs::write(d.path().join(name), text).unwrap();
        let (code, _, err) = scan(d.path(), &spec, &["--no-cache", "--gpu", "L4", "--knowledge", name]);
        assert_eq!(code, Some(2), "{name}: {err}");
        assert!(err.contains(name) && err.contains(says), "{name}: {err}");
    }
    let (code, _, err) = scan(d.path(), &spec, &["--no-cache", "--gpu", "L4", "--knowledge", "missing.toml"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--knowledge missing.toml"), "{err}");
}
