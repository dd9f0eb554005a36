//! `cudalint audit` on the manifests in fixtures/k8s (one of each workload kind, a Helm-rendered
//! GPU inference server, a `kubectl get -o json` List) and a three-pool cluster's nodes, against
//! real images: local (OCI layout, docker-archive) and in a loopback registry.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

use crate::images::{Comp, Ent, Image, docker_archive_legacy, oci_layout, tar, tar_dir};
#[cfg(feature = "slow-tests")]
use crate::registry::{Proxy, Registry};
use crate::util::{read_fixture, root};

fn k8s(p: &str) -> PathBuf {
    root().join("fixtures/k8s").join(p)
}

/// The three images the manifests name, sharing a base layer (a host library without CUDA), as
/// images built from one base do: `multi-arch` (sm_75..sm_90 + compute_90, static CUDA 13.5
/// runtime), `llm-hopper` (sm_90a only), `blackwell-kernels` (sm_100f, sm_103a).
fn images() -> Vec<(&'static str, Image)> {
    let base = tar(&[Ent::File("usr/lib/x86_64-linux-gnu/libplain.so", read_fixture("libplain.so"))]);
    let one = |path: &'static str, fixture: &str| {
        Image::new(vec![(base.clone(), Comp::Gzip), (tar(&[Ent::File(path, read_fixture(fixture))]), Comp::Gzip)])
    };
    vec![
        ("ml/multi-arch:1.4.0", one("opt/app/lib/libmulti.so", "libmulti.so")),
        ("ml/llm-hopper:2.0", one("opt/llm/lib/libsm90a.so", "libsm90a.so")),
        ("ml/blackwell-kernels:0.9", one("opt/vision/libsm100f.so", "libsm100f.so")),
    ]
}

fn cudalint() -> Command {
    Command::cargo_bin("cudalint").unwrap()
}

/// (workload, container, [(pool's GPU, verdict, [rules])]) of a JSON report, and the container
/// verdicts.
type PoolVerdict = (String, String, Vec<String>);
type Verdict = (String, String, String, Vec<PoolVerdict>);
type Verdicts = Vec<Verdict>;

fn verdicts(report: &Value) -> Verdicts {
    let mut out = Vec::new();
    for w in report["workloads"].as_array().unwrap() {
        let id = format!("{} {}", w["kind"].as_str().unwrap(), w["name"].as_str().unwrap());
        for c in w["containers"].as_array().unwrap() {
            let pools = c["pools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| {
                    let gpu = p["pool"].as_str().unwrap().split(',').next().unwrap().to_string();
                    let rules = p["findings"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|f| f["rule"].as_str().unwrap().to_string())
                        .collect();
                    (gpu, p["verdict"].as_str().unwrap().to_string(), rules)
                })
                .collect();
            out.push((
                id.clone(),
                c["name"].as_str().unwrap().to_string(),
                c["verdict"].as_str().unwrap().to_string(),
                pools,
            ));
        }
    }
    out
}

fn v(w: &str, c: &str, verdict: &str, pools: &[(&str, &str, &[&str])]) -> Verdict {
    (
        w.into(),
        c.into(),
        verdict.into(),
        pools
            .iter()
            .map(|(p, v, r)| (p.to_string(), v.to_string(), r.iter().map(|x| x.to_string()).collect()))
            .collect(),
    )
}

const A10G: &str = "NVIDIA A10G";
const H100: &str = "NVIDIA H100 80GB HBM3";
const L4: &str = "NVIDIA L4";

/// What the cluster in fixtures/k8s/nodes.json makes of the manifests: each line follows from
/// the placement rules and the device code (sm_90a runs on 9.0 only; sm_86 SASS runs on 8.6 and
/// 8.9; sm_100f on none of them) and the L4 pool's driver 535 (CUDA 12.2) being older than the
/// CUDA 13.5 runtime linked into multi-arch (read with --deep).
fn expected() -> Verdicts {
    vec![
        // Helm chart: affinity In [H100, A10G], but the H100 nodes are tainted dedicated=llm.
        v("Deployment release-triton-inference-server", "triton-inference-server", "runs", &[(A10G, "runs", &[])]),
        // kubectl List: no constraint, Blackwell-only code.
        v(
            "Deployment vision",
            "vision",
            "fails",
            // Not H100: it does not tolerate dedicated=llm. On the L4 pool (driver 535) the
            // image's CUDA 13 runtime fails first: the driver floor, said once (CL005); and even
            // with a newer driver its Blackwell-only code has no kernel for an L4 (CL001).
            &[(A10G, "fails", &["CL001"]), (L4, "fails", &["CL005", "CL001"])],
        ),
        // nodeSelector on the node group label, and it tolerates dedicated=llm.
        v("Deployment ranker", "ranker", "runs", &[(H100, "runs", &[])]),
        v("Deployment embedder", "embedder", "runs", &[(A10G, "runs", &[])]),
        // Gt 8 on the compute major.
        v("StatefulSet llm", "server", "runs", &[(H100, "runs", &[])]),
        v(
            "DaemonSet gpu-burn-check",
            "check",
            "fails",
            &[(A10G, "runs", &[]), (H100, "runs", &[]), (L4, "fails", &["CL005"])],
        ),
        // In [A10G, L4] AND NotIn the L4 node group: A10G only; the init container is audited.
        v("Job warmup", "warm-cache", "fails", &[(A10G, "fails", &["CL001"])]),
        v("CronJob nightly-eval", "eval", "unschedulable", &[]),
        v("Pod debug-l4", "shell", "fails", &[(L4, "fails", &["CL005"])]),
    ]
}

fn manifests() -> [PathBuf; 3] {
    ["helm-triton.yaml", "kubectl-deployments.json", "workloads.yaml"].map(|f| k8s(&format!("manifests/{f}")))
}

fn json_of(stdout: &[u8]) -> Value {
    serde_json::from_slice(stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(stdout)))
}

#[test]
fn local_images_every_workload_kind_and_pool() {
    let d = tempfile::tempdir().unwrap();
    let imgs = images();
    // multi-arch as an OCI layout, llm-hopper as `docker save` output, blackwell as an oci-archive.
    let multi = d.path().join("multi");
    oci_layout(&multi, &[&imgs[0].1]);
    let hopper = d.path().join("hopper.tar");
    std::fs::write(&hopper, docker_archive_legacy(&imgs[1].1, "ml/llm-hopper:2.0")).unwrap();
    let bw_dir = d.path().join("bw");
    oci_layout(&bw_dir, &[&imgs[2].1]);
    let bw = d.path().join("bw.tar");
    std::fs::write(&bw, tar_dir(&bw_dir)).unwrap();
    let map = [
        format!("registry.example.com/ml/multi-arch:1.4.0=oci:{}", multi.display()),
        format!("registry.example.com/ml/triton-server:25.01-py3=oci:{}", multi.display()),
        format!("registry.example.com/ml/llm-hopper:2.0=docker-archive:{}", hopper.display()),
        format!("registry.example.com/ml/blackwell-kernels:0.9=oci-archive:{}", bw.display()),
    ];
    let run = |format: &str, dir_input: bool| {
        let mut c = cudalint();
        c.arg("audit");
        if dir_input {
            c.arg(k8s("manifests"));
        } else {
            c.args(manifests());
        }
        c.arg("--nodes").arg(k8s("nodes.json")).args(["--deep", "--quiet", "--no-cache", "--format", format]);
        for m in &map {
            c.arg("--image").arg(m);
        }
        c.output().unwrap()
    };
    let o = run("json", false);
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
    let r = json_of(&o.stdout);
    assert_eq!(verdicts(&r), expected());
    assert_eq!(r["workloads_without_gpu"], 1, "the CPU-only pod");
    // Namespace; the chart's ServiceAccount, ConfigMap, Service and HPA.
    assert_eq!(r["other_objects"], 5);
    assert_eq!(r["failed"], true);
    assert_eq!(r["incomplete"], false);
    // Three pools, by GPU and driver, each named by its GPU alone (no two share one); GFD's
    // newer driver-version labels read on the H100 nodes.
    let pools: Vec<(&str, &str, &str, &str, usize)> = r["pools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let s = |k: &str| p[k].as_str().unwrap();
            (
                s("name"),
                s("product"),
                s("driver"),
                p["node_groups"][0].as_str().unwrap(),
                p["nodes"].as_array().unwrap().len(),
            )
        })
        .collect();
    assert_eq!(
        pools,
        [
            (A10G, "NVIDIA-A10G", "580.65.06", "a10g-pool", 2),
            (H100, "NVIDIA-H100-80GB-HBM3", "580.65.06", "h100-pool", 2),
            (L4, "NVIDIA-L4", "535.104.05", "l4-legacy", 1)
        ]
    );
    // A placement fix for the one workload that fails on some pools and runs on others: the
    // DaemonSet, kept off the L4 pool by product (the compute major does not tell an L4 from an
    // A10G).
    let fixes: Vec<(&str, &Value)> = r["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| !w["placement_fix"].is_null())
        .map(|w| (w["name"].as_str().unwrap(), &w["placement_fix"]))
        .collect();
    assert_eq!(fixes.len(), 1, "{fixes:#?}");
    let (name, fix) = fixes[0];
    assert_eq!(name, "gpu-burn-check");
    assert_eq!(fix["runs_on"], serde_json::json!([A10G, H100]));
    assert_eq!(fix["kept_off"], serde_json::json!([L4]));
    assert_eq!(
        fix["requirement"],
        serde_json::json!({"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-A10G", "NVIDIA-H100-80GB-HBM3"]})
    );
    assert!(fix["alternative"].is_null());
    assert_eq!(fix["pod_spec"], "spec.template.spec");
    assert!(fix["kubectl"].as_str().unwrap().starts_with("kubectl patch daemonset gpu-burn-check -n kube-system "));
    // Four image references, the CPU-only ones never scanned.
    let imgs_seen: Vec<&str> = r["images"].as_array().unwrap().iter().map(|i| i["image"].as_str().unwrap()).collect();
    assert_eq!(imgs_seen.len(), 4);
    assert!(imgs_seen.iter().all(|i| i.starts_with("registry.example.com/ml/")), "{imgs_seen:?}");
    // A directory reads the same manifests.
    let o2 = run("json", true);
    assert_eq!(verdicts(&json_of(&o2.stdout)), expected());

    // The text report, temp paths redacted.
    let t = run("text", false);
    let text = String::from_utf8(t.stdout).unwrap().replace(&d.path().display().to_string(), "[TMP]");
    let text = text.replace(&root().display().to_string(), "[ROOT]");
    insta::assert_snapshot!("audit_text_three_pools", text);

    // Markdown and JUnit carry one row / test case per container and pool.
    let cases: usize = expected().iter().map(|e| e.3.len().max(1)).sum();
    let md = String::from_utf8(run("markdown", false).stdout).unwrap();
    let verdict_rows = md
        .lines()
        .filter(|l| l.split('|').nth(5).is_some_and(|v| ["runs", "fails", "unschedulable"].contains(&v.trim())))
        .count();
    assert_eq!(verdict_rows, cases, "{md}");
    let junit = String::from_utf8(run("junit", false).stdout).unwrap();
    assert_eq!(junit.matches("<testcase ").count(), cases);
    let failing: usize =
        expected().iter().map(|e| e.3.iter().filter(|p| p.1 == "fails").count() + usize::from(e.3.is_empty())).sum();
    assert_eq!(junit.matches("<failure").count(), failing);
    let xsd = std::process::Command::new(crate::scan::which("xmllint"))
        .args(["--noout", "--schema"])
        .arg(root().join("tests/schemas/junit.xsd"))
        .arg("-")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut xsd.stdin.as_ref().unwrap(), junit.as_bytes()).unwrap();
    let out = xsd.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    // SARIF: one run per linted image and pool set, valid SARIF 2.1.0 (the schema as reports.rs
    // reads it), every error-level result one of the pool findings above.
    let sarif: Value = serde_json::from_slice(&run("sarif", false).stdout).unwrap();
    let text = std::fs::read_to_string(root().join("tests/schemas/sarif-schema-2.1.0.json")).unwrap();
    let text = text.replace(r#"[a-zA-Z]{2}]?$"#, r#"[a-zA-Z]{2}\\]?$"#);
    let validator = jsonschema::validator_for(&serde_json::from_str(&text).unwrap()).unwrap();
    let errors: Vec<String> = validator.iter_errors(&sarif).map(|e| format!("{e} at {}", e.instance_path())).collect();
    assert!(errors.is_empty(), "{errors:#?}");
    let mut errors: Vec<String> = sarif["runs"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["results"].as_array().unwrap())
        .filter(|r| r["level"] == "error")
        .map(|r| r["ruleId"].as_str().unwrap().to_string())
        .collect();
    errors.sort();
    // One lint per image and pool set: blackwell on A10G (CL001) and on L4, whose 535 driver
    // cannot run its CUDA 13 runtime at all (CL005, the driver first) and which has no kernel
    // for an L4 even with a newer driver (CL001), llm-hopper on A10G (CL001), multi-arch on all
    // pools and on L4 alone (CL005 x2); the two llm-hopper workloads on H100 share one clean lint.
    assert_eq!(errors, ["CL001", "CL001", "CL001", "CL005", "CL005", "CL005"]);
}

#[test]
#[cfg(feature = "slow-tests")]
fn loopback_registry_each_image_pulled_once_with_a_shared_cache() {
    let reg = Registry::start(false, None);
    let imgs = images();
    for (name, img) in &imgs {
        let layout = tempfile::tempdir().unwrap();
        oci_layout(layout.path(), &[img]);
        reg.push(layout.path(), name, None);
    }
    // The triton chart's image is the multi-arch one under another name.
    let layout = tempfile::tempdir().unwrap();
    oci_layout(layout.path(), &[&imgs[0].1]);
    reg.push(layout.path(), "ml/triton-server:25.01-py3", None);
    let proxy = Proxy::start(reg.port);
    // The manifests as they are, the registry host pointed at the loopback one.
    let d = tempfile::tempdir().unwrap();
    let mut args: Vec<PathBuf> = Vec::new();
    for m in manifests() {
        let text = std::fs::read_to_string(&m).unwrap().replace("registry.example.com", &proxy.host());
        let p = d.path().join(m.file_name().unwrap());
        std::fs::write(&p, text).unwrap();
        args.push(p);
    }
    let cache = d.path().join("cache");
    let o = cudalint()
        .arg("audit")
        .args(&args)
        .arg("--nodes")
        .arg(k8s("nodes.json"))
        .args(["--deep", "--quiet", "--format", "json", "--cache-dir"])
        .arg(&cache)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
    let r = json_of(&o.stdout);
    assert_eq!(verdicts(&r), expected());
    for i in r["images"].as_array().unwrap() {
        assert!(i["error"].is_null(), "{i}");
        assert!(i["manifest_digest"].as_str().unwrap().starts_with("sha256:"), "{i}");
    }
    // Each image's manifest fetched once although several workloads use it, and the base layer
    // the images share downloaded once: the cache is shared across images.
    let reqs = proxy.requests.lock().unwrap().clone();
    for (name, _) in &imgs {
        let (repo, tag) = name.split_once(':').unwrap();
        let gets =
            reqs.iter().filter(|q| q.starts_with("GET ") && q.contains(&format!("/v2/{repo}/manifests/{tag}"))).count();
        assert_eq!(gets, 1, "{name}: {reqs:#?}");
    }
    // skopeo may recompress layers on push: the registry's digests are read back from it.
    let mut layers = std::collections::BTreeSet::new();
    for (name, _) in &imgs {
        let o = cudalint::image::ScanOptions { progress: false, ..Default::default() };
        let r = cudalint::image::scan(&format!("{}/{name}", reg.host()), &o).unwrap();
        layers.extend(r.image.layers.iter().map(|l| l.digest.clone()));
    }
    assert_eq!(layers.len(), 1 + imgs.len(), "one shared base layer and one layer per image");
    for l in &layers {
        assert_eq!(proxy.blob_gets(l), 1, "{l}: {reqs:#?}");
    }
}

#[test]
fn fail_closed_unscannable_image_unlabelled_pool_and_bad_manifests() {
    let d = tempfile::tempdir().unwrap();
    let imgs = images();
    let multi = d.path().join("multi");
    oci_layout(&multi, &[&imgs[0].1]);
    let deploy = |image: &str, extra: &str| {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: app}}\nspec:\n  template:\n    spec:\n{extra}      containers:\n      - name: c\n        image: {image}\n        resources: {{limits: {{nvidia.com/gpu: 1}}}}\n"
        )
    };
    let write = |name: &str, text: &str| -> PathBuf {
        let p = d.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let run = |manifest: &Path, nodes: &Path, maps: &[String]| {
        let mut c = cudalint();
        c.arg("audit").arg(manifest).arg("--nodes").arg(nodes).args(["--quiet", "--no-cache", "--format", "json"]);
        for m in maps {
            c.arg("--image").arg(m);
        }
        c.output().unwrap()
    };
    let nodes = k8s("nodes.json");
    // An image that cannot be read: exit 2, its container unknown, the others still judged.
    let two = write(
        "two.yaml",
        &format!(
            "{}---\n{}",
            deploy("reg.invalid/missing:1", ""),
            deploy("reg.invalid/ok:1", "").replace("name: app", "name: other")
        ),
    );
    let missing = d.path().join("nonexistent");
    let o = run(
        &two,
        &nodes,
        &[
            format!("reg.invalid/missing:1=oci:{}", missing.display()),
            format!("reg.invalid/ok:1=oci:{}", multi.display()),
        ],
    );
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    let r = json_of(&o.stdout);
    assert_eq!(r["incomplete"], true);
    let vs = verdicts(&r);
    assert_eq!(vs[0].2, "unknown");
    assert!(vs[0].3.iter().all(|p| p.1 == "unknown"));
    // Judged: its CUDA 13 code runs on the A10G pool (580) and not on the L4 pool (535), which a
    // lean scan now says from the toolkit of its registered code (CL005).
    assert_eq!(vs[1].2, "fails", "{vs:?}");
    assert_eq!(vs[1].3.iter().map(|p| p.1.as_str()).collect::<Vec<_>>(), ["runs", "fails"], "{vs:?}");
    let err = r["images"][0]["error"].as_str().unwrap();
    assert!(err.contains("nonexistent"), "{err}");

    // A GPU node without GPU feature discovery labels: a pool that cannot be judged.
    let mut n: Value = serde_json::from_slice(&std::fs::read(&nodes).unwrap()).unwrap();
    let labels = n["items"][4]["metadata"]["labels"].as_object_mut().unwrap();
    labels.retain(|k, _| !k.starts_with("nvidia.com/"));
    let unlabelled = write("nodes-unlabelled.json", &n.to_string());
    let one = write("one.yaml", &deploy("reg.invalid/ok:1", ""));
    let ok_map = [format!("reg.invalid/ok:1=oci:{}", multi.display())];
    let o = run(&one, &unlabelled, &ok_map);
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    let r = json_of(&o.stdout);
    let unknown: Vec<&str> = r["workloads"][0]["containers"][0]["pools"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["verdict"] == "unknown")
        .map(|p| p["pool"].as_str().unwrap())
        .collect();
    assert_eq!(unknown, ["GPU (no GPU feature discovery labels)"]);
    // ... but a workload kept off that pool is judged.
    let pinned = write(
        "pinned.yaml",
        &deploy("reg.invalid/ok:1", "      nodeSelector: {nvidia.com/gpu.product: NVIDIA-A10G}\n"),
    );
    let o = run(&pinned, &unlabelled, &ok_map);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));

    // Bad input: exit 2 and a message naming the file, before any image is read.
    for (name, text, says) in [
        ("broken.yaml", "kind: Deployment\nmetadata: {name: x\n", "broken.yaml: document 1"),
        ("nospec.yaml", "kind: Deployment\nmetadata: {name: x}\nspec: {}\n", "no pod spec"),
        (
            "badop.yaml",
            &deploy(
                "reg.invalid/ok:1",
                "      affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: a, operator: Near}]}]}}}\n",
            ),
            "unknown operator \"Near\"",
        ),
    ] {
        let p = write(name, text);
        let o = run(&p, &nodes, &ok_map);
        assert_eq!(o.status.code(), Some(2), "{name}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(name) && err.contains(says), "{name}: {err}");
        assert!(o.stdout.is_empty(), "no partial report for {name}");
    }
    // Nodes without any GPU: refused.
    let cpu =
        write("cpu-nodes.json", r#"{"kind":"List","items":[{"kind":"Node","metadata":{"name":"n","labels":{}}}]}"#);
    let o = run(&one, &cpu, &ok_map);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no GPU nodes"));
}

#[test]
fn markdown_keeps_hostile_names_inside_their_cells() {
    // A container name and an image reference that a manifest may carry: a pipe would split the
    // cell, a backtick would close the code span around the image.
    let d = tempfile::tempdir().unwrap();
    let imgs = images();
    let multi = d.path().join("multi");
    oci_layout(&multi, &[&imgs[0].1]);
    let image = "reg.invalid/a`b|c:1";
    let manifest = d.path().join("m.yaml");
    std::fs::write(
        &manifest,
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: app}}\nspec:\n  template:\n    spec:\n      containers:\n      - name: \"c|x\"\n        image: \"{image}\"\n        resources: {{limits: {{nvidia.com/gpu: 1}}}}\n"
        ),
    )
    .unwrap();
    let o = cudalint()
        .arg("audit")
        .arg(&manifest)
        .arg("--nodes")
        .arg(k8s("nodes.json"))
        .args(["--quiet", "--no-cache", "--format", "markdown", "--image"])
        .arg(format!("{image}=oci:{}", multi.display()))
        .output()
        .unwrap();
    let md = String::from_utf8(o.stdout).unwrap();
    let rows: Vec<&str> = md.lines().filter(|l| l.starts_with('|') && !l.starts_with("|---")).collect();
    assert!(rows.iter().any(|l| l.contains("c\\|x")), "{md}");
    assert!(rows.iter().any(|l| l.contains("``reg.invalid/a`b\\|c:1``")), "{md}");
    // Cell borders are the pipes not escaped with a backslash: every row of a table has as many
    // as its header (tables are runs of lines that start with a pipe).
    let borders =
        |row: &str| row.char_indices().filter(|&(i, c)| c == '|' && (i == 0 || row.as_bytes()[i - 1] != b'\\')).count();
    let mut tables = 0;
    for table in md.split("\n\n").filter(|b| b.starts_with('|')) {
        tables += 1;
        let mut lines = table.lines();
        let header = borders(lines.next().unwrap());
        for row in lines.filter(|l| !l.starts_with("|---")) {
            assert_eq!(borders(row), header, "{row}");
        }
    }
    // Verdicts, causes (the L4 pool's driver) and what holds whatever the pool.
    assert_eq!(tables, 3, "{md}");
    assert!(rows.len() > 2, "{md}");
}

#[test]
fn ptx_only_on_a_pool_runs_through_jit_and_fail_on_warning_gates_it() {
    let d = tempfile::tempdir().unwrap();
    // bigptx-cu129.fatbin: sm_80 SASS and 1.2 MiB of compute_80 PTX (CUDA 12.9): native on 8.6
    // and 8.9, a JIT at first use worth a warning on 9.0.
    let img = Image::new(vec![(
        tar(&[Ent::File("opt/k/bigptx.fatbin", read_fixture("../verdict/bigptx-cu129.fatbin"))]),
        Comp::Zstd,
    )]);
    let layout = d.path().join("img");
    oci_layout(&layout, &[&img]);
    let m = d.path().join("d.yaml");
    std::fs::write(
        &m,
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: k, namespace: ml}\nspec:\n  template:\n    spec:\n      tolerations: [{key: dedicated, operator: Exists}]\n      containers:\n      - {name: k, image: reg.invalid/k:1, resources: {requests: {nvidia.com/gpu: 1}}}\n",
    )
    .unwrap();
    let run = |extra: &[&str]| {
        cudalint()
            .arg("audit")
            .arg(&m)
            .arg("--nodes")
            .arg(k8s("nodes.json"))
            .args(["--quiet", "--no-cache", "--format", "json", "--image"])
            .arg(format!("reg.invalid/k:1=oci:{}", layout.display()))
            .args(extra)
            .output()
            .unwrap()
    };
    let o = run(&[]);
    let r = json_of(&o.stdout);
    let vs = verdicts(&r);
    let pools: Vec<(&str, &str)> = vs[0].3.iter().map(|p| (p.0.as_str(), p.1.as_str())).collect();
    assert_eq!(pools, [(A10G, "runs"), (H100, "runs-jit"), (L4, "runs")], "{vs:?}");
    assert_eq!(vs[0].3[1].2, ["CL003"]);
    assert_eq!(vs[0].2, "runs");
    assert_eq!(o.status.code(), Some(0), "a warning does not fail the default gate");
    // The JIT warning fails the gate when asked to.
    let o = run(&["--fail-on", "warning"]);
    assert_eq!(o.status.code(), Some(1));
}

/// Merges a strategic-merge patch as the API server does for the fields a placement fix sets:
/// maps merge key by key, lists without a merge key (nodeSelectorTerms, matchExpressions) and
/// scalars are replaced.
fn strategic_merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                strategic_merge(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
        (t, p) => *t = p.clone(),
    }
}

#[test]
fn placement_fix_applied_back_keeps_every_workload_where_it_runs() {
    let d = tempfile::tempdir().unwrap();
    let imgs = images();
    let (multi, hopper) = (d.path().join("multi"), d.path().join("hopper"));
    oci_layout(&multi, &[&imgs[0].1]);
    oci_layout(&hopper, &[&imgs[1].1]);
    // No selector on the Job (the H100 taint tolerated): it lands on every pool, and its
    // sm_90a-only image runs on the H100 alone. The CronJob's two ORed terms both need the fix.
    // The Pod has no namespace. The Deployment's two GPU containers must both run. The last
    // Deployment's first term, on the L4s alone, would match no node once the A10G is required.
    let manifest = r#"apiVersion: batch/v1
kind: Job
metadata: {name: train, namespace: ml}
spec:
  template:
    spec:
      restartPolicy: Never
      tolerations: [{key: dedicated, operator: Exists}]
      containers:
      - {name: train, image: reg.invalid/hopper:1, resources: {limits: {nvidia.com/gpu: 1}}}
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: nightly, namespace: ml}
spec:
  schedule: "0 3 * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          affinity:
            nodeAffinity:
              requiredDuringSchedulingIgnoredDuringExecution:
                nodeSelectorTerms:
                - matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a]}]
                - matchFields: [{key: metadata.name, operator: In, values: [ip-10-0-14-7.ec2.internal]}]
          containers:
          - {name: eval, image: reg.invalid/multi:1, resources: {limits: {nvidia.com/gpu: 1}}}
---
apiVersion: v1
kind: Pod
metadata: {name: probe}
spec:
  containers:
  - {name: probe, image: reg.invalid/multi:1, resources: {limits: {nvidia.com/gpu: 1}}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: pair, namespace: serving}
spec:
  selector: {matchLabels: {app: pair}}
  template:
    metadata: {labels: {app: pair}}
    spec:
      tolerations: [{key: dedicated, operator: Equal, value: llm}]
      containers:
      - {name: embed, image: reg.invalid/multi:1, resources: {limits: {nvidia.com/gpu: 1}}}
      - {name: llm, image: reg.invalid/hopper:1, resources: {limits: {nvidia.com/gpu: 1}}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: either, namespace: serving}
spec:
  selector: {matchLabels: {app: either}}
  template:
    metadata: {labels: {app: either}}
    spec:
      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
            - matchExpressions: [{key: nvidia.com/gpu.product, operator: In, values: [NVIDIA-L4]}]
            - matchExpressions: [{key: nvidia.com/gpu.product, operator: In, values: [NVIDIA-A10G]}]
      containers:
      - {name: embed, image: reg.invalid/multi:1, resources: {limits: {nvidia.com/gpu: 1}}}
"#;
    let audit = |path: &Path, format: &str| {
        cudalint()
            .arg("audit")
            .arg(path)
            .arg("--nodes")
            .arg(k8s("nodes.json"))
            .args(["--quiet", "--no-cache", "--format", format, "--image"])
            .arg(format!("reg.invalid/multi:1=oci:{}", multi.display()))
            .arg("--image")
            .arg(format!("reg.invalid/hopper:1=oci:{}", hopper.display()))
            .output()
            .unwrap()
    };
    let before = d.path().join("before.yaml");
    std::fs::write(&before, manifest).unwrap();
    let o = audit(&before, "json");
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
    let r = json_of(&o.stdout);
    let fix = |name: &str| -> Value {
        let w = r["workloads"].as_array().unwrap().iter().find(|w| w["name"] == name).unwrap();
        w["placement_fix"].clone()
    };
    let product =
        |values: &[&str]| serde_json::json!({"key": "nvidia.com/gpu.product", "operator": "In", "values": values});
    let gt8 = serde_json::json!({"key": "nvidia.com/gpu.compute.major", "operator": "Gt", "values": ["8"]});
    // (workload, the fix but its patch and command, changes in place with `kubectl patch`?)
    let summary = |runs: &[&str], off: &[&str], req: &Value, alt: Option<&Value>, pod_spec: &str| {
        let mut v = serde_json::json!({"runs_on": runs, "kept_off": off, "requirement": req, "pod_spec": pod_spec});
        if let Some(a) = alt {
            v["alternative"] = a.clone();
        }
        v
    };
    let (h100, a10g) = (product(&["NVIDIA-H100-80GB-HBM3"]), product(&["NVIDIA-A10G"]));
    let want: [(&str, Value, bool); 5] = [
        ("train", summary(&[H100], &[A10G, L4], &h100, Some(&gt8), "spec.template.spec"), false),
        ("nightly", summary(&[A10G], &[L4], &a10g, None, "spec.jobTemplate.spec.template.spec"), true),
        ("probe", summary(&[A10G], &[L4], &a10g, None, "spec"), false),
        ("pair", summary(&[H100], &[A10G, L4], &h100, Some(&gt8), "spec.template.spec"), true),
        ("either", summary(&[A10G], &[L4], &a10g, None, "spec.template.spec"), true),
    ];
    for (name, expected, in_place) in &want {
        let f = fix(name);
        let mut got = f.clone();
        for k in ["patch", "kubectl"] {
            got.as_object_mut().unwrap_or_else(|| panic!("{name}: no fix")).remove(k);
        }
        assert_eq!(&got, expected, "{name}");
        let (req, pod_spec) = (&expected["requirement"], expected["pod_spec"].as_str().unwrap());
        // The affinity sits at the pod spec's path in the patch.
        let ptr: String = pod_spec.split('.').map(|k| format!("/{k}")).collect();
        let terms = f["patch"]
            .pointer(&format!(
                "{ptr}/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms"
            ))
            .unwrap_or_else(|| panic!("{name}: {f:#}"));
        assert!(terms.as_array().unwrap().iter().all(|t| t["matchExpressions"].as_array().unwrap().contains(req)));
        // `kubectl patch` sends the same body as the manifest patch, without the object's name.
        match f["kubectl"].as_str() {
            Some(cmd) => {
                assert!(*in_place, "{name}: {cmd}");
                let body = cmd.split_once(" -p '").unwrap().1.strip_suffix('\'').unwrap();
                let mut patch = f["patch"].clone();
                for k in ["apiVersion", "kind", "metadata"] {
                    patch.as_object_mut().unwrap().remove(k);
                }
                assert_eq!(serde_json::from_str::<Value>(body).unwrap(), patch, "{name}");
            }
            None => assert!(!in_place, "{name}"),
        }
    }
    let cron = fix("nightly");
    let terms = &cron["patch"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        ["nodeSelectorTerms"];
    assert_eq!(terms.as_array().unwrap().len(), 2, "both ORed terms kept: {terms:#}");
    assert!(terms[1]["matchFields"].is_array());
    assert_eq!(fix("probe")["patch"]["metadata"], serde_json::json!({"name": "probe"}));
    // The term on the L4s is dropped: with the A10G required, it can match no node.
    let terms = &fix("either")["patch"]["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        ["nodeSelectorTerms"];
    assert_eq!(
        terms,
        &serde_json::json!([{"matchExpressions": [
            {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-A10G"]},
            {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-A10G"]}
        ]}])
    );
    assert_eq!(fix("train")["patch"]["apiVersion"], "batch/v1");

    // The Markdown's YAML patches are those patches.
    let md = String::from_utf8(audit(&before, "markdown").stdout).unwrap();
    let yaml: Vec<Value> = md
        .split("```yaml\n")
        .skip(1)
        .map(|b| serde_yaml_ng::from_str(b.split("\n```").next().unwrap()).unwrap())
        .collect();
    let patches: Vec<Value> = want.iter().map(|w| fix(w.0)["patch"].clone()).collect();
    assert_eq!(yaml, patches, "{md}");

    // Applied to the manifest, each patch keeps its workload on the pools where it runs: audited
    // again, every container runs wherever it can land, on exactly those pools, and the gate
    // passes.
    let mut docs: Vec<Value> =
        serde_yaml_ng::Deserializer::from_str(manifest).map(|d| serde::Deserialize::deserialize(d).unwrap()).collect();
    for p in &patches {
        let doc =
            docs.iter_mut().find(|d| d["kind"] == p["kind"] && d["metadata"]["name"] == p["metadata"]["name"]).unwrap();
        strategic_merge(doc, p);
    }
    let after = d.path().join("after.yaml");
    let text: Vec<String> = docs.iter().map(|d| serde_yaml_ng::to_string(d).unwrap()).collect();
    std::fs::write(&after, text.join("---\n")).unwrap();
    let o = audit(&after, "json");
    let r2 = json_of(&o.stdout);
    for (name, expected, _) in &want {
        let w = r2["workloads"].as_array().unwrap().iter().find(|w| w["name"] == *name).unwrap();
        assert!(w["placement_fix"].is_null(), "{name}");
        for c in w["containers"].as_array().unwrap() {
            assert_eq!(c["verdict"], "runs", "{name}: {c:#}");
            let pools: Vec<Value> = c["pools"].as_array().unwrap().iter().map(|p| p["pool"].clone()).collect();
            assert_eq!(Value::Array(pools), expected["runs_on"], "{name}");
        }
    }
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stdout));
}

#[test]
fn text_says_each_cause_once_with_its_pools_and_the_constraint() {
    let d = tempfile::tempdir().unwrap();
    let imgs = images();
    let bw = d.path().join("bw");
    oci_layout(&bw, &[&imgs[2].1]);
    // Blackwell-only code on a cluster without Blackwell: no kernel image on either pool it can
    // land on, said once with both pools, each pool's GPU in its own words.
    let m = d.path().join("m.yaml");
    std::fs::write(
        &m,
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: v, namespace: ml}\nspec:\n  template:\n    spec:\n      affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: nvidia.com/gpu.compute.major, operator: Lt, values: ['9']}]}]}}}\n      containers:\n      - {name: v, image: reg.invalid/bw:1, resources: {limits: {nvidia.com/gpu: 1}}}\n",
    )
    .unwrap();
    let o = cudalint()
        .arg("audit")
        .arg(&m)
        .arg("--nodes")
        .arg(k8s("nodes.json"))
        .args(["--deep", "--quiet", "--no-cache", "--image"])
        .arg(format!("reg.invalid/bw:1=oci:{}", bw.display()))
        .output()
        .unwrap();
    let t = String::from_utf8(o.stdout).unwrap();
    assert!(t.contains("placement: required node affinity nvidia.com/gpu.compute.major Lt 9\n"), "{t}");
    let cl001: Vec<&str> = t.lines().filter(|l| l.contains(" CL001 ")).collect();
    assert_eq!(cl001, ["  error CL001 no-kernel-image  /opt/vision/libsm100f.so  on NVIDIA A10G and NVIDIA L4"], "{t}");
    assert!(t.contains("no kernel image for NVIDIA A10G (compute capability 8.6)"), "{t}");
    assert!(t.contains("no kernel image for NVIDIA L4 (compute capability 8.9)"), "{t}");
    // The driver is the driver's, named once: not a GPU named after its pool's driver.
    assert!(t.contains("NVIDIA L4 runs driver 535.104.05 (CUDA 12.2)"), "{t}");
    assert!(t.contains("upgrade the driver on the NVIDIA L4 nodes (driver 535.104.05) to 580.65.06"), "{t}");
    assert!(!t.contains(", driver 535.104.05 runs") && !t.contains(", driver 535.104.05 to"), "{t}");
    // Fails wherever it lands: nothing to keep it on.
    assert!(!t.contains("place it where it runs"), "{t}");
    // What is found about the image whatever the pool is said once, under the image.
    assert_eq!(t.matches(" CL007 ").count(), 1, "{t}");
}

#[test]
fn scan_targets_from_nodes_has_one_target_per_pool_named_as_audit_names_them() {
    let d = tempfile::tempdir().unwrap();
    // Mid-upgrade: one A10G node of the same node group on a newer driver makes a fourth pool;
    // the two A10G pools are told apart by driver.
    let mut n: Value = serde_json::from_slice(&std::fs::read(k8s("nodes.json")).unwrap()).unwrap();
    let labels = n["items"][1]["metadata"]["labels"].as_object_mut().unwrap();
    assert_eq!(labels["kubernetes.io/hostname"], "ip-10-0-14-7.ec2.internal");
    labels.insert("nvidia.com/cuda.driver.major".into(), "590".into());
    labels.insert("nvidia.com/cuda.driver.minor".into(), "44".into());
    labels.insert("nvidia.com/cuda.driver.rev".into(), "01".into());
    let nodes = d.path().join("nodes.json");
    std::fs::write(&nodes, n.to_string()).unwrap();
    let o = cudalint()
        .args([
            "scan",
            crate::util::fixture("libmulti.so").to_str().unwrap(),
            "--quiet",
            "--format",
            "json",
            "--targets-from",
        ])
        .arg(&nodes)
        .output()
        .unwrap();
    let r = json_of(&o.stdout);
    let targets: Vec<(String, String, String)> = r["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let s = |k: &str| t[k].as_str().unwrap().to_string();
            (s("name"), s("cc"), s("driver"))
        })
        .collect();
    let want = [
        ("NVIDIA A10G on driver 580.65.06", "8.6", "580.65.06"),
        ("NVIDIA A10G on driver 590.44.01", "8.6", "590.44.01"),
        (H100, "9.0", "580.65.06"),
        (L4, "8.9", "535.104.05"),
    ];
    assert_eq!(targets, want.map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string())), "{r:#}");
    // The audit of the same nodes names the same pools (a manifest without GPU workloads judges
    // nothing, and still reads the cluster).
    let m = d.path().join("cpu.yaml");
    std::fs::write(&m, "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c, image: x}]\n")
        .unwrap();
    let o = cudalint()
        .arg("audit")
        .arg(&m)
        .arg("--nodes")
        .arg(&nodes)
        .args(["--quiet", "--format", "json"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    let pools: Vec<String> = json_of(&o.stdout)["pools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(pools, targets.iter().map(|t| t.0.clone()).collect::<Vec<_>>());
}

/// fixtures/k8s/nodes.json with a second L4 node, `ip-10-0-77-6.ec2.internal`, on driver
/// 580.65.06 (the older label names, as the first L4 node has them), in node group `group`;
/// None: neither L4 node in a node group, so that only the driver tells their pools apart.
fn nodes_with_second_l4(dir: &Path, group: Option<&str>) -> PathBuf {
    const GROUP: &str = "eks.amazonaws.com/nodegroup";
    let mut n: Value = serde_json::from_slice(&std::fs::read(k8s("nodes.json")).unwrap()).unwrap();
    let items = n["items"].as_array_mut().unwrap();
    let first = items.iter().position(|n| n["metadata"]["name"] == "ip-10-0-77-5.ec2.internal").unwrap();
    let mut second = items[first].clone();
    second["metadata"]["name"] = "ip-10-0-77-6.ec2.internal".into();
    let l = second["metadata"]["labels"].as_object_mut().unwrap();
    l.insert("kubernetes.io/hostname".into(), "ip-10-0-77-6.ec2.internal".into());
    for (k, v) in [("major", "580"), ("minor", "65"), ("rev", "06")] {
        l.insert(format!("nvidia.com/cuda.driver.{k}"), v.into());
    }
    match group {
        Some(g) => {
            l.insert(GROUP.into(), g.into());
        }
        None => {
            l.remove(GROUP);
            items[first]["metadata"]["labels"].as_object_mut().unwrap().remove(GROUP);
        }
    }
    items.push(second);
    let path = dir.join(format!("nodes-{}.json", group.unwrap_or("no-groups")));
    std::fs::write(&path, n.to_string()).unwrap();
    path
}

/// The manifest with each placement fix's patch merged into the workload it names.
fn patched(manifest: &str, fixes: &[&Value]) -> String {
    let mut docs: Vec<Value> =
        serde_yaml_ng::Deserializer::from_str(manifest).map(|d| serde::Deserialize::deserialize(d).unwrap()).collect();
    for f in fixes {
        let p = &f["patch"];
        let doc =
            docs.iter_mut().find(|d| d["kind"] == p["kind"] && d["metadata"]["name"] == p["metadata"]["name"]).unwrap();
        strategic_merge(doc, p);
    }
    let text: Vec<String> = docs.iter().map(|d| serde_yaml_ng::to_string(d).unwrap()).collect();
    text.join("---\n")
}

/// Audits `manifest` with multi-arch (CUDA 13 runtime: fails on a 535 driver) and llm-hopper.
struct Audit {
    dir: tempfile::TempDir,
    nodes: PathBuf,
}

impl Audit {
    fn new(group: Option<&str>) -> Audit {
        let dir = tempfile::tempdir().unwrap();
        let imgs = images();
        oci_layout(&dir.path().join("multi"), &[&imgs[0].1]);
        oci_layout(&dir.path().join("hopper"), &[&imgs[1].1]);
        let nodes = nodes_with_second_l4(dir.path(), group);
        Audit { dir, nodes }
    }

    fn run(&self, manifest: &Path, format: &str) -> std::process::Output {
        let mut c = cudalint();
        c.arg("audit").arg(manifest).arg("--nodes").arg(&self.nodes);
        c.args(["--deep", "--quiet", "--no-cache", "--format", format]);
        for (image, dir) in [("ml/multi-arch:1.4.0", "multi"), ("ml/llm-hopper:2.0", "hopper")] {
            let local = self.dir.path().join(dir);
            c.arg("--image").arg(format!("registry.example.com/{image}=oci:{}", local.display()));
        }
        c.output().unwrap()
    }

    /// The workload's placement fix in the JSON report of `manifest`.
    fn fixes(&self, manifest: &Path) -> (Value, String) {
        let o = self.run(manifest, "json");
        let text = String::from_utf8(self.run(manifest, "text").stdout).unwrap();
        (json_of(&o.stdout), text)
    }

    /// Applies every placement fix to `manifest` and audits it again: each workload that had one
    /// runs on every pool it can land on, exactly `runs_on`, and gets none; the gate passes.
    fn fixes_hold(&self, manifest: &str, report: &Value) {
        let fixes: Vec<&Value> = report["workloads"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| &w["placement_fix"])
            .filter(|f| !f.is_null())
            .collect();
        let after = self.dir.path().join("after.yaml");
        std::fs::write(&after, patched(manifest, &fixes)).unwrap();
        let o = self.run(&after, "json");
        let r = json_of(&o.stdout);
        let fixed = |name: &str| report["workloads"].as_array().unwrap().iter().find(|b| b["name"] == name).unwrap();
        for w in r["workloads"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|w| !fixed(w["name"].as_str().unwrap())["placement_fix"].is_null())
        {
            let name = w["name"].as_str().unwrap();
            let before = fixed(name);
            assert!(w["placement_fix"].is_null() && w["no_placement_fix"].is_null(), "{name}: {w:#}");
            for c in w["containers"].as_array().unwrap() {
                assert_eq!(c["verdict"], "runs", "{name}: {c:#}");
                let pools: Vec<Value> = c["pools"].as_array().unwrap().iter().map(|p| p["pool"].clone()).collect();
                assert_eq!(Value::Array(pools), before["placement_fix"]["runs_on"], "{name}");
            }
        }
        assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stdout));
    }
}

/// Every GPU, every node group (tolerates every taint), multi-arch: fails on a 535 driver.
const EVERYWHERE: &str = r#"apiVersion: apps/v1
kind: DaemonSet
metadata: {name: check, namespace: kube-system}
spec:
  selector: {matchLabels: {app: check}}
  template:
    metadata: {labels: {app: check}}
    spec:
      tolerations: [{operator: Exists}]
      containers:
      - {name: check, image: registry.example.com/ml/multi-arch:1.4.0, resources: {limits: {nvidia.com/gpu: 1}}}
"#;

/// On the L4 nodes alone, multi-arch: runs on the 580 driver, fails on the 535.
const ON_L4: &str = r#"apiVersion: apps/v1
kind: Deployment
metadata: {name: l4-only, namespace: ml}
spec:
  selector: {matchLabels: {app: l4}}
  template:
    metadata: {labels: {app: l4}}
    spec:
      nodeSelector: {nvidia.com/gpu.product: NVIDIA-L4}
      containers:
      - {name: serve, image: registry.example.com/ml/multi-arch:1.4.0, resources: {limits: {nvidia.com/gpu: 1}}}
"#;

#[test]
fn pools_of_one_gpu_told_apart_by_driver_say_it_once_and_are_placed_by_its_major() {
    let a = Audit::new(None);
    const OLD: &str = "NVIDIA L4 on driver 535.104.05";
    const NEW: &str = "NVIDIA L4 on driver 580.65.06";
    // The fixture workloads: where a finding speaks of the L4 pool on 535, the GPU is the GPU's
    // name and the driver is said once.
    let o = a.run(&k8s("manifests/workloads.yaml"), "text");
    let t = String::from_utf8(o.stdout).unwrap();
    assert!(t.contains(&format!("    fails    {OLD}  ")), "{t}");
    assert!(t.contains("; NVIDIA L4 runs driver 535.104.05 (CUDA 12.2): every CUDA call fails"), "{t}");
    assert!(
        t.contains(
            "      fix: upgrade the driver on the NVIDIA L4 nodes (driver 535.104.05) to 580.65.06 or newer, or use the image's CUDA 12 build\n"
        ),
        "{t}"
    );
    assert!(!t.contains("driver 535.104.05 runs driver") && !t.contains("driver 535.104.05 (driver"), "{t}");
    // The DaemonSet fails on the L4 pool on 535 alone. The driver's major would keep it off, but
    // the H100 nodes carry it under GPU feature discovery's newer name only: said, not patched.
    assert!(
        t.contains(&format!(
            "\n  no placement patch: the driver's major would keep it on NVIDIA A10G, NVIDIA H100 80GB HBM3 and {NEW}, off {OLD}, but their nodes carry it under two names, nvidia.com/cuda.driver.major and nvidia.com/cuda.driver-version.major (GPU feature discovery's newer one), and a node selector matches one\n"
        )),
        "{t}"
    );

    // `scan --targets-from` names the pools alike, and says each driver once.
    let o = cudalint()
        .args(["scan", "--deep", "--quiet", "--no-cache"])
        .arg(format!("oci:{}", a.dir.path().join("multi").display()))
        .arg("--targets-from")
        .arg(&a.nodes)
        .output()
        .unwrap();
    let t = String::from_utf8(o.stdout).unwrap();
    assert!(
        t.contains(
            "targets: NVIDIA A10G (8.6), driver 580.65.06; NVIDIA H100 80GB HBM3 (9.0), driver 580.65.06; NVIDIA L4 (8.9), driver 535.104.05; NVIDIA L4 (8.9), driver 580.65.06\n"
        ),
        "{t}"
    );
    assert!(t.contains("\n✗ NVIDIA L4 · driver 535.104.05: fails"), "{t}");
    assert!(t.contains("\n✓ NVIDIA L4 · driver 580.65.06: runs"), "{t}");
    assert!(!t.contains("on driver 535.104.05 (8.9), driver") && !t.contains("on driver 535.104.05 ·"), "{t}");

    // A workload on the L4 nodes: kept off the 535 driver by its major, which admits the 535
    // nodes once upgraded; applied, the patch keeps it where it runs.
    let m = a.dir.path().join("l4.yaml");
    std::fs::write(&m, ON_L4).unwrap();
    let (r, t) = a.fixes(&m);
    let fix = &r["workloads"][0]["placement_fix"];
    assert_eq!(fix["runs_on"], serde_json::json!([NEW]));
    assert_eq!(fix["kept_off"], serde_json::json!([OLD]));
    assert_eq!(
        fix["requirement"],
        serde_json::json!({"key": "nvidia.com/cuda.driver.major", "operator": "Gt", "values": ["535"]})
    );
    assert!(fix["alternative"].is_null(), "{fix:#}");
    assert!(
        t.contains(&format!(
            "\n  place it where it runs: on {NEW}, off {OLD}, with the required node affinity nvidia.com/cuda.driver.major Gt 535\n"
        )),
        "{t}"
    );
    a.fixes_hold(ON_L4, &r);
}

#[test]
fn pools_of_one_gpu_in_two_node_groups_are_placed_by_node_group() {
    let a = Audit::new(Some("l4-new"));
    const OLD: &str = "NVIDIA L4 in l4-legacy";
    const NEW: &str = "NVIDIA L4 in l4-new";
    let manifest = format!("{EVERYWHERE}---\n{ON_L4}");
    let m = a.dir.path().join("m.yaml");
    std::fs::write(&m, &manifest).unwrap();
    let (r, t) = a.fixes(&m);
    // The pool is named by its node group; the driver is said beside it.
    assert!(t.contains("; NVIDIA L4 in l4-legacy runs driver 535.104.05 (CUDA 12.2): every CUDA call fails"), "{t}");
    assert!(
        t.contains(
            "fix: upgrade the driver on the NVIDIA L4 nodes in l4-legacy (driver 535.104.05) to 580.65.06 or newer"
        ),
        "{t}"
    );
    let fix = |name: &str| {
        r["workloads"].as_array().unwrap().iter().find(|w| w["name"] == name).unwrap()["placement_fix"].clone()
    };
    let group =
        |values: &[&str]| serde_json::json!({"key": "eks.amazonaws.com/nodegroup", "operator": "In", "values": values});
    // Everywhere: neither the product nor the compute major keeps it off the L4s on 535 alone;
    // the node groups where it runs do (the driver's major would, but for its two label names).
    let everywhere = fix("check");
    assert_eq!(everywhere["runs_on"], serde_json::json!([A10G, H100, NEW]));
    assert_eq!(everywhere["kept_off"], serde_json::json!([OLD]));
    assert_eq!(everywhere["requirement"], group(&["a10g-pool", "h100-pool", "l4-new"]));
    assert!(everywhere["alternative"].is_null(), "{everywhere:#}");
    // On the L4s: the node group, or the driver's major (the L4 nodes carry one name).
    let l4 = fix("l4-only");
    assert_eq!(l4["runs_on"], serde_json::json!([NEW]));
    assert_eq!(l4["requirement"], group(&["l4-new"]));
    assert_eq!(
        l4["alternative"],
        serde_json::json!({"key": "nvidia.com/cuda.driver.major", "operator": "Gt", "values": ["535"]})
    );
    assert!(
        t.contains(&format!(
            "\n  place it where it runs: on {NEW}, off {OLD}, with the required node affinity eks.amazonaws.com/nodegroup In [l4-new]\n    (or nvidia.com/cuda.driver.major Gt 535: nodes moved to a newer driver too)\n"
        )),
        "{t}"
    );
    a.fixes_hold(&manifest, &r);
}
