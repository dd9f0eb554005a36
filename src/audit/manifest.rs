//! Workload manifests: files, or directories walked for them; multi-document YAML (Helm
//! `template` output, `kubectl get -o yaml`) or JSON (`kubectl get -o json`), `List` kinds
//! flattened, each workload's pod template found and its containers that request
//! `nvidia.com/gpu` picked out.

use std::io::Read;

use serde::Serialize;
use serde_json::Value;

use super::error::AuditError;

pub use crate::bounded::MAX_INPUT;

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

/// Every document of a YAML stream or JSON text, as far as the audit reads it ([`bounded`]);
/// empty documents (Helm's `---` with only a `# Source:` comment) are dropped.
pub fn documents(text: &str, origin: &str) -> Result<Vec<Value>, AuditError> {
    crate::bounded::documents(text, crate::bounded::Shape::Top).map_err(|e| AuditError::input(origin, e))
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

    fn docs(text: &str) -> Result<Vec<Value>, String> {
        crate::bounded::documents(text, crate::bounded::Shape::Top)
    }

    #[test]
    fn only_what_the_audit_reads_is_kept() {
        let node = r#"{"kind":"List","items":[{"kind":"Node","metadata":{"name":"n1","labels":{"a":"b"},
            "annotations":{"x":"y"},"managedFields":[{"m":1}]},"spec":{"taints":[{"key":"k","effect":"NoSchedule"}],
            "podCIDR":"10.0.0.0/24"},"status":{"capacity":{"nvidia.com/gpu":"8"},"images":[{"names":["a"]}]}}]}"#;
        let v = docs(node).unwrap();
        assert_eq!(
            v[0],
            serde_json::json!({"kind":"List","items":[{"kind":"Node","metadata":{"name":"n1","labels":{"a":"b"}},
                "spec":{"taints":[{"key":"k","effect":"NoSchedule"}]},"status":{"capacity":{"nvidia.com/gpu":"8"}}}]})
        );
        let pod = "kind: CronJob\nmetadata: {name: c, annotations: {big: x}}\nspec:\n  schedule: '* * * * *'\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          nodeSelector: {a: b}\n          volumes: [{name: v}]\n          containers:\n          - {name: t, image: i, env: [{name: E}], resources: {limits: {nvidia.com/gpu: 1}}}\n";
        assert_eq!(
            docs(pod).unwrap()[0],
            serde_json::json!({"kind":"CronJob","metadata":{"name":"c"},"spec":{"jobTemplate":{"spec":{"template":{"spec":{
                "nodeSelector":{"a":"b"},"containers":[{"name":"t","image":"i","resources":{"limits":{"nvidia.com/gpu":1}}}]}}}}}})
        );
        // A bare label map (a target file) keeps its scalars.
        assert_eq!(
            docs(r#"{"nvidia.com/gpu.product":"H100","x":{"y":1}}"#).unwrap()[0],
            serde_json::json!({"nvidia.com/gpu.product":"H100"})
        );
    }

    #[test]
    fn merge_keys_apply_as_kubernetes_applies_them_and_duplicate_keys_are_refused() {
        let text = "kind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - &gpu {name: a, image: i, resources: {limits: {nvidia.com/gpu: 1}}}\n  - <<: *gpu\n    name: b\n";
        let mut s = 0;
        let w = workloads(text, "m.yaml", &mut s).unwrap();
        let c = gpu_containers(&w[0]).unwrap();
        assert_eq!(c.iter().map(|c| (c.name.as_str(), c.gpus.as_str())).collect::<Vec<_>>(), [("a", "1"), ("b", "1")]);
        for dup in [
            "kind: Pod\nmetadata: {name: p}\nspec:\n  containers: []\n  containers: [{name: a, image: i, resources: {limits: {nvidia.com/gpu: 1}}}]\n",
            r#"{"kind":"Pod","metadata":{"name":"p"},"spec":{"nodeSelector":{"a":"1","a":"2"}}}"#,
        ] {
            let e = workloads(dup, "d", &mut s).unwrap_err().to_string();
            assert!(e.contains("given twice"), "{e}");
        }
        // Outside what is kept, a repeated key is read past like the rest.
        assert!(docs(r#"{"kind":"Pod","metadata":{"name":"p","annotations":{"a":1,"a":2}}}"#).is_ok());
    }

    /// `levels` of aliases, each `fan` times the one below, the bottom a list of `width` strings.
    fn alias_bomb(levels: usize, fan: usize, width: usize, under: &str) -> String {
        let mut t = format!(
            "kind: ConfigMap\nmetadata:\n  name: x\n{under}:\n  a0: &a0 [{}]\n",
            vec!["xxxxxxxxxxxxxxxx"; width].join(", ")
        );
        for i in 1..=levels {
            t.push_str(&format!("  a{i}: &a{i} [{}]\n", vec![format!("*a{}", i - 1); fan].join(", ")));
        }
        t
    }

    #[test]
    fn aliases_expand_a_little_never_a_lot_kept_or_not() {
        // Merge-key style reuse is fine.
        assert!(docs(&alias_bomb(1, 20, 10, "data")).is_ok());
        // 1000 x 60^3: refused, whether the aliases land where the audit keeps values or where
        // it reads past them.
        for under in ["data", "spec"] {
            let e = docs(&alias_bomb(3, 60, 1000, under)).unwrap_err();
            assert!(e.contains("alias bomb"), "{under}: {e}");
        }
    }

    #[test]
    fn flow_nesting_is_measured_as_libyaml_would_parse_it() {
        use crate::bounded::{MAX_FLOW_DEPTH, flow_depth};
        let deep = |n: usize| format!("a: {}{}\n", "[".repeat(n), "]".repeat(n));
        assert!(flow_depth(&deep(MAX_FLOW_DEPTH)).is_ok());
        assert!(flow_depth(&deep(MAX_FLOW_DEPTH + 1)).unwrap_err().contains("nested deeper"));
        for hidden in [
            // After an anchor, a tag, a sequence entry, an explicit key, a document marker.
            format!("a: &x {}", "[".repeat(300)),
            format!("a: !!seq {}", "[".repeat(300)),
            format!("- - {}", "[".repeat(300)),
            format!("? {}", "{".repeat(300)),
            format!("--- {}", "[".repeat(300)),
            // A quote that starts no quoted scalar, inside a flow collection.
            format!("a: [don't, {}", "[".repeat(300)),
            // Past a block scalar, back at its key's indentation.
            format!("a:\n  b: |\n    text [[[\n  c: {}", "[".repeat(300)),
            format!("a:\n  |\n    text\nb: {}", "[".repeat(300)),
            format!("- |\n  text\n- {}", "[".repeat(300)),
        ] {
            assert!(flow_depth(&hidden).is_err(), "{hidden:.40}");
        }
        for text in [
            // Brackets that are text: in plain, quoted and block scalars, and comments.
            format!("a: x{}\n", "[".repeat(300)),
            format!("a: \"{}\"\nb: '{}'\n", "[".repeat(300), "{".repeat(300)),
            format!("a: |\n  {}\n  more\nb: c\n", "[".repeat(300)),
            format!("- >-\n  {}\n- x\n", "[".repeat(300)),
            format!("a: 1 # {}\n", "[".repeat(300)),
            format!("a: [\"{}\", 'it''s {}']\n", "[".repeat(300), "[".repeat(300)),
        ] {
            assert!(flow_depth(&text).is_ok(), "{text:.40}");
            assert!(serde_yaml_ng::from_str::<serde_json::Value>(&text).is_ok(), "valid YAML: {text:.40}");
        }
    }

    #[test]
    fn yaml_documents_and_streams_are_bounded_in_size() {
        let big = format!(
            "kind: Pod\nmetadata:\n  name: p\n  annotations: {{a: \"{}\"}}\n",
            "x".repeat(crate::bounded::MAX_YAML_DOCUMENT)
        );
        let e = docs(&format!("kind: A\n---\n{big}")).unwrap_err();
        assert!(e.contains("the document at line 2") && e.contains("give JSON"), "{e}");
        // The same as JSON: read (the string is read past, not kept).
        let json = serde_json::to_string(&serde_yaml_ng::from_str::<Value>(&big).unwrap()).unwrap();
        assert!(docs(&json).unwrap()[0] == serde_json::json!({"kind":"Pod","metadata":{"name":"p"}}));
        // Many documents each within the bound: read.
        let small = "kind: A\nmetadata: {name: a}\n---\n".repeat(1000);
        assert_eq!(docs(&small).unwrap().len(), 1000);
    }

    #[test]
    fn what_is_kept_is_bounded_in_memory() {
        let keys: Vec<String> = (0..1_200_000).map(|i| format!("\"k{i}\":1")).collect();
        let text = format!("{{\"kind\":\"Pod\",\"spec\":{{\"nodeSelector\":{{{}}}}}}}", keys.join(","));
        let e = docs(&text).unwrap_err();
        assert!(e.contains("more than 128 MiB"), "{e}");
        // Read past, the same map costs nothing.
        let text = text.replace("nodeSelector", "overhead");
        assert!(docs(&text).is_ok());
    }
}
