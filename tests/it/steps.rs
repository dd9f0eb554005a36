//! The Dockerfile step behind each finding: the image config's `history` paired with its
//! layers as `docker history` pairs them, carried on findings in every format, and the fix for a
//! library compiled during the build says where the architecture list goes.

use assert_cmd::Command;

use crate::images::{Comp, Ent, Image, oci_layout, tar};
use crate::util::{read_fixture, root};

fn scan(spec: &str, format: &str) -> (Option<i32>, String) {
    let o = Command::cargo_bin("cudalint")
        .unwrap()
        .args(["scan", spec, "--gpu", "L4", "--quiet", "--no-cache", "--format", format])
        .output()
        .unwrap();
    (o.status.code(), String::from_utf8_lossy(&o.stdout).into_owned())
}

fn cl001(json: &str) -> serde_json::Value {
    let r: serde_json::Value = serde_json::from_str(json).unwrap();
    r["findings"].as_array().unwrap().iter().find(|f| f["rule"] == "CL001").cloned().expect("a CL001 finding")
}

/// Built by buildah 1.28 (`buildah bud --layers --timestamp 0`) from
/// fixtures/images/buildah-history.Dockerfile: FROM scratch, an ENV (no layer), a COPY of
/// libzstd.so and a COPY of libsm90a.so (a layer each), a LABEL (no layer). buildah writes the
/// classic builder's `/bin/sh -c #(nop) COPY file:<hash> in <dest>`.
#[test]
fn a_real_builders_history_names_the_step_of_each_finding_in_every_format() {
    let spec = format!("oci-archive:{}", root().join("fixtures/images/buildah-history.tar").display());
    let (code, json) = scan(&spec, "json");
    assert_eq!(code, Some(1), "{json}");
    let f = cl001(&json);
    assert_eq!(f["path"], "/opt/app/lib/libsm90a.so");
    let step = f["step"].as_str().unwrap();
    assert!(step.starts_with("COPY file:") && step.ends_with(" in /opt/app/lib/libsm90a.so"), "{step}");
    // A COPY builds nothing: the fix is the ordinary rebuild, not an arch list before the step.
    assert!(!f["fix"].as_str().unwrap().contains("before that step"), "{f}");
    let (_, inv) = scan(&spec, "inventory");
    let inv: serde_json::Value = serde_json::from_str(&inv).unwrap();
    let steps: Vec<&str> =
        inv["image"]["layers"].as_array().unwrap().iter().map(|l| l["step"].as_str().unwrap()).collect();
    assert_eq!(steps.len(), 2);
    assert!(steps[0].ends_with(" in /usr/lib/libzstd.so") && steps[1] == step, "{steps:?}");
    for (format, want) in [
        ("text", format!("made by: {step}")),
        ("markdown", format!("made by `{step}`")),
        ("sarif", format!("Made by the Dockerfile step `{step}`")),
    ] {
        let (code, out) = scan(&spec, format);
        assert_eq!(code, Some(1), "{format}");
        assert!(out.contains(&want), "{format}: {want}\n{out}");
    }
    let (_, sarif) = scan(&spec, "sarif");
    let sarif: serde_json::Value = serde_json::from_str(&sarif).unwrap();
    let r = &sarif["runs"][0]["results"].as_array().unwrap().iter().find(|r| r["ruleId"] == "CL001").unwrap().clone();
    assert_eq!(r["properties"]["step"], step);
}

/// The history BuildKit writes (`created_by` ending `# buildkit`, `comment`
/// `buildkit.dockerfile.v0`, `empty_layer` for ENV and WORKDIR), for a Dockerfile whose RUN
/// compiled libsm90a.so with nvcc for sm_90a only (the fixture is that library, built by the
/// PyPI nvcc as scripts/build-fixtures.sh does).
fn buildkit_image(history_for_layers: usize) -> Image {
    let mut img = Image::new(vec![
        (tar(&[Ent::File("src/kernels.cu", b"__global__ void k() {}\n".to_vec())]), Comp::Gzip),
        (tar(&[Ent::File("opt/app/lib/libsm90a.so", read_fixture("libsm90a.so"))]), Comp::Gzip),
    ]);
    let bk = |created_by: &str, empty: bool| {
        let mut h = serde_json::json!({"created": "2026-12-06T00:00:00Z", "created_by": created_by,
                                       "comment": "buildkit.dockerfile.v0"});
        if empty {
            h["empty_layer"] = true.into();
        }
        h
    };
    let mut history = vec![
        bk("ENV CUDA_VERSION=12.9.1", true),
        bk("COPY kernels.cu /src/ # buildkit", false),
        bk(
            "RUN /bin/sh -c nvcc -shared -Xcompiler -fPIC -arch=sm_90a -o /opt/app/lib/libsm90a.so /src/kernels.cu # buildkit",
            false,
        ),
        bk("WORKDIR /app", true),
    ];
    if history_for_layers == 1 {
        history.remove(1);
    }
    img.history = history;
    img
}

#[test]
fn a_library_compiled_during_the_build_is_fixed_before_its_step() {
    let d = tempfile::tempdir().unwrap();
    oci_layout(d.path(), &[&buildkit_image(2)]);
    let spec = format!("oci:{}", d.path().display());
    let (code, json) = scan(&spec, "json");
    assert_eq!(code, Some(1), "{json}");
    let f = cl001(&json);
    let step = "RUN nvcc -shared -Xcompiler -fPIC -arch=sm_90a -o /opt/app/lib/libsm90a.so /src/kernels.cu";
    assert_eq!(f["step"], step);
    let fix = f["fix"].as_str().unwrap();
    for part in ["ENV TORCH_CUDA_ARCH_LIST=\"", "before that step", step, "no GPU is visible"] {
        assert!(fix.contains(part), "{part}: {fix}");
    }
    // The list it proposes covers the target (8.9) and keeps what the build had (9.0a).
    assert!(fix.contains("8.9") && fix.contains("9.0a"), "{fix}");
}

#[test]
fn a_history_that_does_not_match_the_layers_names_no_step_and_says_so() {
    let d = tempfile::tempdir().unwrap();
    oci_layout(d.path(), &[&buildkit_image(1)]);
    let (code, json) = scan(&format!("oci:{}", d.path().display()), "json");
    assert_eq!(code, Some(1), "{json}");
    let f = cl001(&json);
    assert!(f.get("step").is_none(), "{f}");
    let r: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert!(r["notes"].to_string().contains("history has 1 entries that made a layer, for 2 layers"), "{}", r["notes"]);
}

/// The HTML grid's layer column and each finding show the Dockerfile step that made the
/// binary's layer, escaped, with the layer's whole digest on hover; a cut digest is shown only
/// where no step is known.
#[test]
fn html_names_the_step_of_a_layer_with_its_digest_on_hover() {
    let d = tempfile::tempdir().unwrap();
    let mut img = buildkit_image(2);
    img.history[2]["created_by"] =
        "RUN /bin/sh -c nvcc -arch=sm_90a -o /opt/app/lib/libsm90a.so /src/kernels.cu && echo '<b>built</b>' # buildkit"
            .into();
    oci_layout(d.path(), &[&img]);
    let spec = format!("oci:{}", d.path().display());
    let (_, json) = scan(&spec, "json");
    let j: serde_json::Value = serde_json::from_str(&json).unwrap();
    let row = &j["matrix"][0];
    let step = "RUN nvcc -arch=sm_90a -o /opt/app/lib/libsm90a.so /src/kernels.cu && echo '<b>built</b>'";
    assert_eq!(row["step"], step, "{row}");
    let layer = row["layer"].as_str().unwrap();
    assert!(layer.starts_with("sha256:") && layer.len() == 71, "{layer}");
    let (code, html) = scan(&spec, "html");
    assert_eq!(code, Some(1));
    let shown = "RUN nvcc -arch=sm_90a -o /opt/app/lib/libsm90a.so /src/kernels.cu &amp;&amp; echo &#39;&lt;b&gt;built&lt;/b&gt;&#39;";
    let title = format!("<code title=\"layer {layer}: {shown}\">");
    // The grid shows the step's first 80 characters; the finding all of it.
    let row = html.split("<tr ").find(|r| r.starts_with("data-path=\"/opt/app/lib/libsm90a.so\"")).unwrap();
    let cut = "RUN nvcc -arch=sm_90a -o /opt/app/lib/libsm90a.so /src/kernels.cu &amp;&amp; echo &#39;&lt;b&gt;bu…";
    assert!(row.contains(&format!("<td>{title}{cut}</code></td>")), "the grid's layer column: {row}");
    assert!(html.contains(&format!("made by {title}{shown}</code>")), "the finding: {html}");
    assert!(!html.contains("<b>built") && !html.contains(&format!("{}…", &layer[..19])), "{html}");
}
