//! Workload manifests: files, or directories walked for them; multi-document YAML (Helm
//! `template` output, `kubectl get -o yaml`) or JSON (`kubectl get -o json`), `List` kinds
//! flattened, each workload's pod template found and its containers that request
//! `nvidia.com/gpu` picked out.

use std::io::Read;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::AuditError;

/// Largest manifest or nodes file read (a `kubectl get all -A -o json` of a big cluster is tens
/// of MiB; beyond this the input is refused rather than held in memory).
pub const MAX_INPUT: u64 = 256 << 20;

/// The extended resource the NVIDIA device plugin advertises.
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";

/// What names a workload in the reports.
#[derive(Debug, Clone, Serialize)]
pub struct WorkloadMeta {
    /// As written (`apps/v1`); the placement patch names it.
    #[serde(skip)]
    pub api_version: String,
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
    /// File (and document number) it came from.
    pub source: String,
}

impl WorkloadMeta {
    /// `Deployment inference/triton`.
    pub fn id(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.kind, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }
}

/// A workload that runs pods: where its pod spec sits.
#[derive(Debug, Clone)]
pub struct Workload {
    pub meta: WorkloadMeta,
    /// The pod spec (`spec.template.spec`, `spec.jobTemplate.spec.template.spec`, or `spec`).
    pub pod: Value,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuContainer {
    pub name: String,
    pub init: bool,
    pub image: String,
    /// The `nvidia.com/gpu` quantity as written (limits, else requests).
    pub gpus: String,
}

/// The manifest files of the inputs: a directory is read, recursively and in name order, for
/// `*.yaml`, `*.yml` and `*.json` (one without any is an error); a file or `-` is itself.
pub fn expand(paths: &[String]) -> Result<Vec<String>, AuditError> {
    let mut out = Vec::new();
    for p in paths {
        let path = std::path::Path::new(p);
        if p != "-" && path.is_dir() {
            let mut files: Vec<String> = Vec::new();
            let mut stack = vec![path.to_path_buf()];
            while let Some(d) = stack.pop() {
                for e in std::fs::read_dir(&d).map_err(|e| AuditError::input(d.display(), e.to_string()))? {
                    let e = e.map_err(|e| AuditError::input(d.display(), e.to_string()))?;
                    let f = e.path();
                    // Symlinked directories are not followed (no cycles).
                    if e.file_type().is_ok_and(|t| t.is_dir()) {
                        stack.push(f);
                    } else if f.extension().is_some_and(|x| x == "yaml" || x == "yml" || x == "json") {
                        files.push(f.display().to_string());
                    }
                }
            }
            files.sort();
            if files.is_empty() {
                return Err(AuditError::input(p, "no *.yaml, *.yml or *.json files"));
            }
            out.extend(files);
        } else {
            out.push(p.clone());
        }
    }
    Ok(out)
}

/// Reads a file (or `-`, standard input) with the size bound.
pub fn read_input(path: &str) -> Result<String, AuditError> {
    let mut buf = Vec::new();
    let r = if path == "-" {
        std::io::stdin().lock().take(MAX_INPUT + 1).read_to_end(&mut buf)
    } else {
        std::fs::File::open(path).and_then(|f| f.take(MAX_INPUT + 1).read_to_end(&mut buf))
    };
    r.map_err(|e| AuditError::input(path, e.to_string()))?;
    if buf.len() as u64 > MAX_INPUT {
        return Err(AuditError::input(path, format!("larger than {} MiB; refused", MAX_INPUT >> 20)));
    }
    String::from_utf8(buf).map_err(|e| AuditError::input(path, format!("not UTF-8 text: {e}")))
}

/// Every document of a YAML stream or JSON text; empty documents (Helm's `---` with only a
/// `# Source:` comment) are dropped.
pub fn documents(text: &str, origin: &str) -> Result<Vec<Value>, AuditError> {
    let t = text.trim_start_matches('\u{feff}').trim_start();
    if t.starts_with('{') || t.starts_with('[') {
        let v: Value = serde_json::from_str(t).map_err(|e| AuditError::input(origin, e.to_string()))?;
        return Ok(match v {
            Value::Array(a) => a,
            v => vec![v],
        });
    }
    let mut out = Vec::new();
    for (i, doc) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let v = Value::deserialize(doc).map_err(|e| AuditError::input(origin, format!("document {}: {e}", i + 1)))?;
        if !v.is_null() {
            out.push(v);
        }
    }
    Ok(out)
}

/// `List`, `DeploymentList`, ...: the items, recursively; anything else as is.
fn flatten(v: Value, out: &mut Vec<Value>) {
    let is_list = v.get("kind").and_then(Value::as_str).is_some_and(|k| k.ends_with("List"))
        && v.get("items").is_some_and(Value::is_array);
    if is_list {
        if let Value::Object(mut m) = v
            && let Some(Value::Array(items)) = m.remove("items")
        {
            for i in items {
                flatten(i, out);
            }
        }
    } else {
        out.push(v);
    }
}

fn str_at<'a>(v: &'a Value, ptr: &str) -> Option<&'a str> {
    v.pointer(ptr).and_then(Value::as_str)
}

/// The workloads among the objects of one input; other kinds (Service, ConfigMap, ...) are
/// counted in `skipped`.
pub fn workloads(text: &str, origin: &str, skipped: &mut usize) -> Result<Vec<Workload>, AuditError> {
    let mut objects = Vec::new();
    for d in documents(text, origin)? {
        flatten(d, &mut objects);
    }
    let mut out = Vec::new();
    for (i, o) in objects.into_iter().enumerate() {
        let Some(kind) = str_at(&o, "/kind").map(String::from) else {
            return Err(AuditError::input(
                origin,
                format!("object {} has no kind (not a Kubernetes manifest?)", i + 1),
            ));
        };
        let Some(pod_path) = pod_spec_path(&kind) else {
            *skipped += 1;
            continue;
        };
        let pod_ptr: String = pod_path.iter().map(|k| format!("/{k}")).collect();
        let name = str_at(&o, "/metadata/name")
            .or_else(|| str_at(&o, "/metadata/generateName"))
            .ok_or_else(|| AuditError::input(origin, format!("{kind} (object {}) has no metadata.name", i + 1)))?
            .to_string();
        let pod = o
            .pointer(&pod_ptr)
            .filter(|p| p.is_object())
            .cloned()
            .ok_or_else(|| AuditError::input(origin, format!("{kind} {name}: no pod spec at {pod_ptr}")))?;
        let meta = WorkloadMeta {
            api_version: str_at(&o, "/apiVersion").unwrap_or_default().to_string(),
            kind,
            namespace: str_at(&o, "/metadata/namespace").map(String::from),
            name,
            source: origin.to_string(),
        };
        out.push(Workload { meta, pod });
    }
    Ok(out)
}

/// Where a workload kind keeps its pod spec (`spec.template.spec` of a Deployment); None: a
/// kind that runs no pods.
pub fn pod_spec_path(kind: &str) -> Option<&'static [&'static str]> {
    Some(match kind {
        "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet" | "ReplicationController" | "Job" => {
            &["spec", "template", "spec"]
        }
        "CronJob" => &["spec", "jobTemplate", "spec", "template", "spec"],
        "PodTemplate" => &["template", "spec"],
        "Pod" => &["spec"],
        _ => return None,
    })
}

/// A quantity as written: `1`, `"2"`; absent or zero is no GPU.
fn quantity(v: Option<&Value>) -> Option<String> {
    let s = match v? {
        Value::String(s) => s.trim().to_string(),
        Value::Number(n) => n.to_string(),
        _ => return None,
    };
    let zero = s.parse::<f64>().is_ok_and(|x| x == 0.0);
    (!s.is_empty() && !zero).then_some(s)
}

/// The containers (init containers too) that request `nvidia.com/gpu`.
pub fn gpu_containers(w: &Workload) -> Result<Vec<GpuContainer>, AuditError> {
    let mut out = Vec::new();
    for (key, init) in [("initContainers", true), ("containers", false)] {
        let Some(list) = w.pod.get(key) else { continue };
        let list = list.as_array().ok_or_else(|| {
            AuditError::input(format!("{}: {}", w.meta.source, w.meta.id()), format!("{key} is not a list"))
        })?;
        for c in list {
            let res = c.get("resources");
            let gpus = quantity(res.and_then(|r| r.pointer("/limits/nvidia.com~1gpu")))
                .or_else(|| quantity(res.and_then(|r| r.pointer("/requests/nvidia.com~1gpu"))));
            let Some(gpus) = gpus else { continue };
            let name = c.get("name").and_then(Value::as_str).unwrap_or("(unnamed)").to_string();
            let image = c
                .get("image")
                .and_then(Value::as_str)
                .filter(|i| !i.trim().is_empty())
                .ok_or_else(|| {
                    AuditError::input(
                        format!("{}: {}", w.meta.source, w.meta.id()),
                        format!("container {name} requests {GPU_RESOURCE} but has no image"),
                    )
                })?
                .trim()
                .to_string();
            out.push(GpuContainer { name, init, image, gpus });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helm_stream_lists_and_gpu_requests() {
        let text = "---\n# Source: chart/templates/svc.yaml\n---\napiVersion: v1\nkind: Service\nmetadata: {name: s}\n---\n\
            apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: nightly, namespace: ml}\nspec:\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          containers:\n          - name: train\n            image: reg/train:1\n            resources: {limits: {nvidia.com/gpu: 2}}\n          - name: sidecar\n            image: reg/log:1\n---\n\
            apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: p}\n  spec:\n    initContainers:\n    - {name: warm, image: reg/warm:1, resources: {requests: {nvidia.com/gpu: \"1\"}}}\n    containers:\n    - {name: main, image: reg/main:1, resources: {limits: {nvidia.com/gpu: 0}}}\n";
        let mut skipped = 0;
        let w = workloads(text, "t.yaml", &mut skipped).unwrap();
        assert_eq!(skipped, 1);
        assert_eq!(w.iter().map(|w| w.meta.id()).collect::<Vec<_>>(), ["CronJob ml/nightly", "Pod p"]);
        let c = gpu_containers(&w[0]).unwrap();
        assert_eq!(
            c,
            [GpuContainer { name: "train".into(), init: false, image: "reg/train:1".into(), gpus: "2".into() }]
        );
        let c = gpu_containers(&w[1]).unwrap();
        assert_eq!(c.len(), 1, "a zero GPU limit is no GPU");
        assert!(c[0].init && c[0].gpus == "1");
    }

    #[test]
    fn bad_input_names_the_file() {
        let mut s = 0;
        let e =
            workloads("kind: Deployment\nmetadata: {name: x}\nspec: {}\n", "d.yaml", &mut s).unwrap_err().to_string();
        assert!(e.contains("d.yaml") && e.contains("no pod spec"), "{e}");
        let e = workloads("a: [1\n", "broken.yaml", &mut s).unwrap_err().to_string();
        assert!(e.starts_with("broken.yaml: document 1"), "{e}");
        let e = workloads("{\"kind\": ", "x.json", &mut s).unwrap_err().to_string();
        assert!(e.starts_with("x.json: "), "{e}");
        // Alias expansion is bounded (a "billion laughs" document is refused, not expanded).
        let mut bomb = String::from("a: &a [x, x, x, x, x, x, x, x, x]\n");
        for i in 0..12 {
            let p = if i == 0 { "a".to_string() } else { format!("b{}", i - 1) };
            bomb.push_str(&format!("b{i}: &b{i} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"));
        }
        assert!(workloads(&bomb, "bomb.yaml", &mut s).is_err());
    }
}
