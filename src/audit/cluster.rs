//! The cluster's GPU nodes (`kubectl get nodes -o json`), grouped into pools by what GPU feature
//! discovery says about their GPU and driver, and the scheduling constraints of a pod spec
//! (`nodeName`, `nodeSelector`, required node affinity) evaluated over their labels.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use super::error::AuditError;
use crate::cuda::gfd;
use crate::lint::targets::Target;

#[derive(Debug, Clone)]
pub struct Node {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    /// `spec.taints` with effect NoSchedule or NoExecute (PreferNoSchedule does not keep a pod
    /// off).
    pub taints: Vec<Taint>,
    /// Its GPU, driver and node group, as pools group it.
    pub gpu: gfd::PoolNode,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taint {
    pub key: String,
    pub value: String,
    pub effect: String,
}

/// Nodes with the same GPU, compute capability and driver (`gfd::pools`, as `scan
/// --targets-from` groups them too), and the lint target they are judged as.
#[derive(Debug, Clone, Serialize)]
pub struct Pool {
    #[serde(flatten)]
    pub pool: gfd::GpuPool,
    /// Named as the pool; None: the nodes have GPUs but not the GPU feature discovery labels to
    /// judge them by.
    pub target: Option<Target>,
}

impl std::ops::Deref for Pool {
    type Target = gfd::GpuPool;
    fn deref(&self) -> &gfd::GpuPool {
        &self.pool
    }
}

fn has_gpus(node: &Value, labels: &BTreeMap<String, String>) -> bool {
    let capacity = ["/status/capacity/nvidia.com~1gpu", "/status/allocatable/nvidia.com~1gpu"]
        .iter()
        .filter_map(|p| node.pointer(p))
        .any(|v| v.as_str().map_or(v.as_u64().is_some_and(|n| n > 0), |s| s.trim() != "0"));
    capacity || gfd::says_gpus(|k| labels.get(k).map(String::as_str))
}

/// The GPU nodes of a `kubectl get nodes -o json` document (a List, an array or one Node), in
/// name order.
pub fn nodes(doc: &Value, origin: &str) -> Result<Vec<Node>, AuditError> {
    let items: Vec<&Value> = match doc {
        Value::Array(a) => a.iter().collect(),
        v if v.get("items").is_some() => {
            v["items"].as_array().ok_or_else(|| AuditError::input(origin, "items is not a list"))?.iter().collect()
        }
        v => vec![v],
    };
    let mut out = Vec::new();
    for n in items {
        if let Some(k) = n.get("kind").and_then(Value::as_str)
            && k != "Node"
        {
            return Err(AuditError::input(origin, format!("a {k}, not a Node (expected `kubectl get nodes -o json`)")));
        }
        let name = n
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .ok_or_else(|| AuditError::input(origin, "a node without metadata.name"))?
            .to_string();
        let mut labels: BTreeMap<String, String> = BTreeMap::new();
        if let Some(m) = n.pointer("/metadata/labels").and_then(Value::as_object) {
            for (k, v) in m {
                labels.insert(k.clone(), v.as_str().map(String::from).unwrap_or_else(|| v.to_string()));
            }
        }
        if !has_gpus(n, &labels) {
            continue;
        }
        let gpu = gfd::PoolNode::of(&name, |k| labels.get(k).map(String::as_str))
            .map_err(|e| AuditError::input(origin, format!("node {name}: {e}")))?;
        gfd::normalise(&mut labels);
        let mut taints = Vec::new();
        for t in n.pointer("/spec/taints").and_then(Value::as_array).into_iter().flatten() {
            let field = |k: &str| t.get(k).and_then(Value::as_str).unwrap_or("").to_string();
            let effect = field("effect");
            if effect == "NoSchedule" || effect == "NoExecute" {
                taints.push(Taint { key: field("key"), value: field("value"), effect });
            }
        }
        out.push(Node { name, labels, taints, gpu });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// The pools the nodes form, by name, each with its lint target.
pub fn pools(nodes: &[Node]) -> Vec<Pool> {
    let grouped: Vec<gfd::PoolNode> = nodes.iter().map(|n| n.gpu.clone()).collect();
    gfd::pools(&grouped).into_iter().map(|p| Pool { target: crate::lint::targets::pool(&p), pool: p }).collect()
}

/// Where a pod may be scheduled, as written in its spec.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Placement {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// `requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms`, as written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub required_affinity: Option<Value>,
    /// As written.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Value>,
}

impl Placement {
    pub fn of(pod: &Value, origin: &str) -> Result<Placement, AuditError> {
        let mut p = Placement {
            node_name: pod.get("nodeName").and_then(Value::as_str).map(String::from),
            ..Default::default()
        };
        if let Some(sel) = pod.get("nodeSelector").filter(|v| !v.is_null()) {
            let m = sel.as_object().ok_or_else(|| AuditError::input(origin, "nodeSelector is not a map"))?;
            for (k, v) in m {
                let v = v.as_str().map(String::from).unwrap_or_else(|| v.to_string());
                p.node_selector.insert(k.clone(), v);
            }
        }
        let terms =
            pod.pointer("/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms");
        if let Some(t) = terms.filter(|t| !t.is_null()) {
            if !t.is_array() {
                return Err(AuditError::input(origin, "nodeSelectorTerms is not a list"));
            }
            p.required_affinity = Some(t.clone());
            // Checked once here, so matching cannot fail later.
            let probe =
                Node { name: String::new(), labels: BTreeMap::new(), taints: Vec::new(), gpu: Default::default() };
            p.matches(&probe).map_err(|e| AuditError::input(origin, e.to_string()))?;
        }
        if let Some(t) = pod.get("tolerations").filter(|v| !v.is_null()) {
            p.tolerations = t.as_array().ok_or_else(|| AuditError::input(origin, "tolerations is not a list"))?.clone();
        }
        Ok(p)
    }

    /// A toleration of the pod, or the one the ExtendedResourceToleration admission plugin adds
    /// to every pod that requests `nvidia.com/gpu` (GKE enables it; GPU node pools there are
    /// tainted `nvidia.com/gpu`).
    fn tolerates(&self, t: &Taint) -> bool {
        if t.key == super::manifest::GPU_RESOURCE && t.effect == "NoSchedule" {
            return true;
        }
        self.tolerations.iter().any(|x| {
            let f = |k: &str| x.get(k).and_then(Value::as_str).unwrap_or("");
            let effect_ok = f("effect").is_empty() || f("effect") == t.effect;
            let key_ok = match f("operator") {
                "Exists" => f("key").is_empty() || f("key") == t.key,
                // Equal is the default operator.
                _ => f("key") == t.key && f("value") == t.value,
            };
            effect_ok && key_ok
        })
    }

    pub fn unconstrained(&self) -> bool {
        self.node_name.is_none() && self.node_selector.is_empty() && self.required_affinity.is_none()
    }

    /// The pod may be scheduled on the node (as far as name, labels and taints decide).
    pub fn matches(&self, node: &Node) -> Result<bool, AuditError> {
        if self.node_name.as_ref().is_some_and(|n| n != &node.name) {
            return Ok(false);
        }
        // A pod bound by nodeName skips the scheduler: only NoExecute taints keep it off.
        let untolerated = node
            .taints
            .iter()
            .filter(|t| self.node_name.is_none() || t.effect == "NoExecute")
            .any(|t| !self.tolerates(t));
        if untolerated {
            return Ok(false);
        }
        if !self.node_selector.iter().all(|(k, v)| node.labels.get(k) == Some(v)) {
            return Ok(false);
        }
        let Some(terms) = &self.required_affinity else { return Ok(true) };
        let mut any = false;
        // Every term is evaluated (not short-circuited) so that a bad one is always reported.
        for t in terms.as_array().into_iter().flatten() {
            any |= term_matches(t, node).map_err(AuditError::Selector)?;
        }
        Ok(any)
    }
}

/// A node selector requirement as it reads: `nvidia.com/gpu.product In [NVIDIA-A10G, NVIDIA-L4]`,
/// `nvidia.com/gpu.compute.major Gt 8`, `spot Exists`.
pub fn requirement_text(e: &Value) -> String {
    let f = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or("?");
    let values: Vec<String> = e
        .get("values")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|v| v.as_str().map(String::from).unwrap_or_else(|| v.to_string()))
        .collect();
    match (f("operator"), values.as_slice()) {
        (op @ ("Exists" | "DoesNotExist"), _) => format!("{} {op}", f("key")),
        (op @ ("Gt" | "Lt"), [v]) => format!("{} {op} {v}", f("key")),
        (op, vs) => format!("{} {op} [{}]", f("key"), vs.join(", ")),
    }
}

/// Required node affinity's nodeSelectorTerms as they read: a term's requirements joined by
/// `and`, the terms by `or` (parenthesised where both appear).
pub fn terms_text(terms: &Value) -> String {
    let terms: Vec<Vec<String>> = terms
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            ["matchExpressions", "matchFields"]
                .iter()
                .flat_map(|k| t.get(k).and_then(Value::as_array).into_iter().flatten())
                .map(requirement_text)
                .collect()
        })
        .collect();
    let several = terms.len() > 1;
    let texts: Vec<String> = terms
        .into_iter()
        .map(|t| match t.len() {
            0 => "(an empty term: no node)".to_string(),
            n if n > 1 && several => format!("({})", t.join(" and ")),
            _ => t.join(" and "),
        })
        .collect();
    texts.join(" or ")
}

/// One nodeSelectorTerm: all its expressions and fields hold. An empty term matches no node.
fn term_matches(term: &Value, node: &Node) -> Result<bool, String> {
    let exprs = term.get("matchExpressions").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let fields = term.get("matchFields").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    if exprs.is_empty() && fields.is_empty() {
        return Ok(false);
    }
    let mut all = true;
    for e in exprs {
        all &= requirement(e, |k| node.labels.get(k).map(String::as_str))?;
    }
    for f in fields {
        // Only metadata.name is a supported field selector for nodes.
        let key = f.get("key").and_then(Value::as_str).unwrap_or("");
        if key != "metadata.name" {
            return Err(format!("matchFields key {key:?} is not supported by Kubernetes (only metadata.name)"));
        }
        all &= requirement(f, |_| Some(node.name.as_str()))?;
    }
    Ok(all)
}

fn requirement<'a>(e: &Value, get: impl Fn(&str) -> Option<&'a str>) -> Result<bool, String> {
    let key = e.get("key").and_then(Value::as_str).ok_or("a matchExpression without a key")?;
    let op = e.get("operator").and_then(Value::as_str).ok_or_else(|| format!("matchExpression {key}: no operator"))?;
    let values: Vec<String> = e
        .get("values")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(|v| v.as_str().map(String::from).unwrap_or_else(|| v.to_string())).collect())
        .unwrap_or_default();
    let label = get(key);
    let int = |what: &str| -> Result<i64, String> {
        match values.as_slice() {
            [v] => v.parse().map_err(|_| format!("matchExpression {key} {op}: {v:?} is not an integer")),
            _ => Err(format!("matchExpression {key} {what}: needs exactly one value")),
        }
    };
    Ok(match op {
        "In" => label.is_some_and(|l| values.iter().any(|v| v == l)),
        "NotIn" => !label.is_some_and(|l| values.iter().any(|v| v == l)),
        "Exists" => label.is_some(),
        "DoesNotExist" => label.is_none(),
        "Gt" => {
            let bound = int(op)?;
            label.and_then(|l| l.parse::<i64>().ok()).is_some_and(|l| l > bound)
        }
        "Lt" => {
            let bound = int(op)?;
            label.and_then(|l| l.parse::<i64>().ok()).is_some_and(|l| l < bound)
        }
        _ => return Err(format!("matchExpression {key}: unknown operator {op:?}")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, labels: &[(&str, &str)]) -> Node {
        Node {
            name: name.into(),
            labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            taints: Vec::new(),
            gpu: Default::default(),
        }
    }

    fn placement(yaml: &str) -> Result<Placement, String> {
        let pod: Value = serde_yaml_ng::from_str(yaml).unwrap();
        Placement::of(&pod, "p.yaml").map_err(|e| e.to_string())
    }

    #[test]
    fn selector_and_affinity_operators() {
        let h100 =
            node("h1", &[("nvidia.com/gpu.product", "NVIDIA-H100-80GB-HBM3"), ("nvidia.com/gpu.compute.major", "9")]);
        let l4 = node(
            "l1",
            &[("nvidia.com/gpu.product", "NVIDIA-L4"), ("nvidia.com/gpu.compute.major", "8"), ("spot", "yes")],
        );
        let check = |yaml: &str| -> (bool, bool) {
            let p = placement(yaml).unwrap();
            (p.matches(&h100).unwrap(), p.matches(&l4).unwrap())
        };
        assert_eq!(check("{}"), (true, true));
        assert_eq!(check("nodeSelector: {nvidia.com/gpu.product: NVIDIA-L4}"), (false, true));
        assert_eq!(check("nodeName: h1"), (true, false));
        let aff = |exprs: &str| {
            format!(
                "affinity: {{nodeAffinity: {{requiredDuringSchedulingIgnoredDuringExecution: {{nodeSelectorTerms: {exprs}}}}}}}"
            )
        };
        assert_eq!(
            check(&aff("[{matchExpressions: [{key: nvidia.com/gpu.compute.major, operator: Gt, values: ['8']}]}]")),
            (true, false)
        );
        assert_eq!(
            check(&aff("[{matchExpressions: [{key: nvidia.com/gpu.compute.major, operator: Lt, values: ['9']}]}]")),
            (false, true)
        );
        assert_eq!(check(&aff("[{matchExpressions: [{key: spot, operator: DoesNotExist}]}]")), (true, false));
        assert_eq!(check(&aff("[{matchExpressions: [{key: spot, operator: Exists}]}]")), (false, true));
        assert_eq!(check(&aff("[{matchExpressions: [{key: spot, operator: NotIn, values: [yes]}]}]")), (true, false));
        // Terms are ORed, expressions within a term ANDed.
        assert_eq!(
            check(&aff(
                "[{matchExpressions: [{key: spot, operator: Exists}, {key: nvidia.com/gpu.product, operator: In, values: [NVIDIA-H100-80GB-HBM3]}]}]"
            )),
            (false, false)
        );
        assert_eq!(
            check(&aff(
                "[{matchExpressions: [{key: spot, operator: Exists}]}, {matchFields: [{key: metadata.name, operator: In, values: [h1]}]}]"
            )),
            (true, true)
        );
        assert_eq!(check(&aff("[{}]")), (false, false), "an empty term matches nothing");
        let p = placement(&aff(
            "[{matchExpressions: [{key: spot, operator: Exists}, {key: nvidia.com/gpu.compute.major, operator: Gt, values: ['8']}]}, {matchFields: [{key: metadata.name, operator: In, values: [h1, h2]}]}]",
        ))
        .unwrap();
        assert_eq!(
            terms_text(p.required_affinity.as_ref().unwrap()),
            "(spot Exists and nvidia.com/gpu.compute.major Gt 8) or metadata.name In [h1, h2]"
        );
        let e = placement(&aff("[{matchExpressions: [{key: a, operator: Near, values: [x]}]}]")).unwrap_err();
        assert!(e.contains("p.yaml") && e.contains("Near"), "{e}");
        let e = placement(&aff("[{matchExpressions: [{key: a, operator: Gt, values: ['1', '2']}]}]")).unwrap_err();
        assert!(e.contains("exactly one"), "{e}");
    }

    #[test]
    fn taints_and_tolerations() {
        let mut n = node("h1", &[]);
        let taint = |k: &str, v: &str, e: &str| Taint { key: k.into(), value: v.into(), effect: e.into() };
        n.taints = vec![taint("nvidia.com/gpu", "present", "NoSchedule"), taint("dedicated", "llm", "NoSchedule")];
        let ok = |yaml: &str| placement(yaml).unwrap().matches(&n).unwrap();
        // The GPU taint is tolerated implicitly; the other one is not.
        assert!(!ok("{}"));
        assert!(ok("tolerations: [{key: dedicated, operator: Equal, value: llm, effect: NoSchedule}]"));
        assert!(ok("tolerations: [{key: dedicated, value: llm}]"), "Equal is the default, any effect");
        assert!(!ok("tolerations: [{key: dedicated, value: other}]"));
        assert!(!ok("tolerations: [{key: dedicated, operator: Exists, effect: NoExecute}]"));
        assert!(ok("tolerations: [{operator: Exists}]"), "an empty key with Exists tolerates everything");
        // nodeName bypasses the scheduler: NoSchedule does not apply, NoExecute does.
        assert!(ok("nodeName: h1"));
        n.taints.push(taint("maintenance", "", "NoExecute"));
        assert!(!placement("nodeName: h1").unwrap().matches(&n).unwrap());
        assert!(
            placement("{nodeName: h1, tolerations: [{key: maintenance, operator: Exists}]}")
                .unwrap()
                .matches(&n)
                .unwrap()
        );
    }

    #[test]
    fn pools_by_gpu_and_driver_new_and_old_labels() {
        let doc = serde_json::json!({"kind": "List", "items": [
            {"kind": "Node", "metadata": {"name": "cpu-1", "labels": {"kubernetes.io/os": "linux"}}},
            {"kind": "Node", "metadata": {"name": "a-2", "labels": {"nvidia.com/gpu.product": "NVIDIA-A10G",
                "nvidia.com/gpu.compute.major": "8", "nvidia.com/gpu.compute.minor": "6",
                "nvidia.com/cuda.driver-version.major": "535", "nvidia.com/cuda.driver-version.minor": "104",
                "nvidia.com/cuda.driver-version.revision": "05"}}},
            {"kind": "Node", "metadata": {"name": "a-1", "labels": {"nvidia.com/gpu.product": "NVIDIA-A10G",
                "nvidia.com/gpu.compute.major": "8", "nvidia.com/gpu.compute.minor": "6",
                "nvidia.com/cuda.driver.major": "535", "nvidia.com/cuda.driver.minor": "104", "nvidia.com/cuda.driver.rev": "05"}}},
            {"kind": "Node", "metadata": {"name": "x-1", "labels": {}}, "status": {"capacity": {"nvidia.com/gpu": "8"}}},
        ]});
        let n = nodes(&doc, "nodes.json").unwrap();
        assert_eq!(n.iter().map(|n| n.name.as_str()).collect::<Vec<_>>(), ["a-1", "a-2", "x-1"]);
        let p = pools(&n);
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].name, "GPU (no GPU feature discovery labels)");
        assert!(p[0].target.is_none());
        assert_eq!(p[1].name, "NVIDIA A10G");
        assert_eq!(p[1].describe(), "NVIDIA A10G (sm_86), driver 535.104.05 (CUDA 12.2)");
        assert_eq!(p[1].nodes, ["a-1", "a-2"]);
        let t = p[1].target.as_ref().unwrap();
        assert_eq!((t.name.as_str(), t.cc.to_string()), ("NVIDIA A10G", "8.6".into()));
        let e =
            nodes(&serde_json::json!({"kind": "Pod", "metadata": {"name": "x"}}), "n.json").unwrap_err().to_string();
        assert!(e.contains("not a Node"), "{e}");
    }
}
