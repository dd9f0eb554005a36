//! For a workload that fails on some of the pools it can land on and runs on others: the node
//! affinity requirement on GPU feature discovery labels that keeps it on the pools where it
//! runs, as a patch the user can apply (a strategic-merge patch, the shape kustomize's
//! `patches:` and `kubectl patch` both take).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::cluster::{Node, Placement, Pool};
use super::manifest::{WorkloadMeta, pod_spec_path};
use super::report::{AuditContainer, AuditVerdict, PlacementFix};
use crate::cuda::gfd;

/// Kinds whose pod spec `kubectl patch` can change in place.
fn patchable_in_place(kind: &str) -> bool {
    !matches!(kind, "Job" | "Pod")
}

/// What [`suggest`] makes of a workload that fails on some pools it can land on and runs on
/// others.
#[derive(Debug)]
pub enum Suggestion {
    Fix(Box<PlacementFix>),
    /// No label tells those pools apart: why, in a sentence.
    None(String),
}

/// The fix for a workload whose containers fail (or cannot be judged) on some pools it can land
/// on and run on others, if a label tells those pools apart; None where there is nothing to
/// place (it runs everywhere it lands, or nowhere).
pub fn suggest(
    meta: &WorkloadMeta,
    placement: &Placement,
    containers: &[AuditContainer],
    nodes: &[Node],
    pools: &[Pool],
) -> Option<Suggestion> {
    // A pod lands as a whole: a pool is kept when every GPU container runs there.
    let mut verdicts: BTreeMap<&str, (bool, Vec<&str>)> = BTreeMap::new();
    for c in containers {
        for p in &c.pools {
            let e = verdicts.entry(p.pool.as_str()).or_insert((true, Vec::new()));
            e.0 &= p.verdict.runs();
            e.1.extend(p.nodes.iter().map(String::as_str));
        }
    }
    let fails = containers.iter().flat_map(|c| &c.pools).any(|p| p.verdict == AuditVerdict::Fails);
    let runs_on: Vec<&str> = verdicts.iter().filter(|(_, v)| v.0).map(|(p, _)| *p).collect();
    let kept_off: Vec<&str> = verdicts.iter().filter(|(_, v)| !v.0).map(|(p, _)| *p).collect();
    if !fails || runs_on.is_empty() || kept_off.is_empty() {
        return None;
    }
    let keep: BTreeSet<&str> = verdicts.values().filter(|v| v.0).flat_map(|v| v.1.iter().copied()).collect();
    let pool = |name: &str| pools.iter().find(|p| p.name == name);
    let (kept, off): (Vec<&Pool>, Vec<&Pool>) =
        (runs_on.iter().filter_map(|p| pool(p)).collect(), kept_off.iter().filter_map(|p| pool(p)).collect());
    let kept_nodes: Vec<&Node> = nodes.iter().filter(|n| keep.contains(n.name.as_str())).collect();

    // A requirement is offered only if the placement it makes lands on exactly the nodes kept.
    let separating = |candidates: Vec<Value>| -> Vec<(Value, Value)> {
        candidates
            .into_iter()
            .map(|req| (terms_with(placement, &req, nodes, &keep), req))
            .filter(|(terms, _)| {
                let p = Placement { required_affinity: Some(terms.clone()), ..placement.clone() };
                nodes.iter().all(|n| p.matches(n).unwrap_or(false) == keep.contains(n.name.as_str()))
            })
            .collect()
    };
    // What the GPU is, first: the products judged to run (exactly what was audited), else
    // newer than every compute major it fails on (newer GPUs too, unjudged).
    let mut found = separating(by_gpu(&kept, &off));
    // Pools of one GPU: by the node groups where it runs, else by the driver's major, under
    // the one name every kept node carries it by.
    let driver_label = one(kept_nodes.iter().map(|n| n.gpu.driver_major_label));
    if found.is_empty() {
        found = separating(by_nodes(&kept_nodes, &off, driver_label));
    }
    let mut it = found.into_iter();
    let Some((terms, requirement)) = it.next() else {
        let names = |ps: &[&str]| super::render::lines::and_list(ps);
        // The nodes' labels are read under both names (`gfd::normalise`): would the driver's
        // major tell them apart, were it under one name on every node?
        let renamed =
            driver_label.is_none() && !separating(by_nodes(&kept_nodes, &off, Some(gfd::DRIVER_MAJOR))).is_empty();
        let why = if renamed {
            format!(
                "the driver's major would keep it on {}, off {}, but their nodes carry it under two names, {} and {} (GPU feature discovery's newer one), and a node selector matches one",
                names(&runs_on),
                names(&kept_off),
                gfd::DRIVER_MAJOR,
                gfd::DRIVER_MAJOR_NEW
            )
        } else {
            format!(
                "no single label (GPU product, compute major, node group, driver major) tells the nodes of {}, where it runs, from those of {}",
                names(&runs_on),
                names(&kept_off)
            )
        };
        return Some(Suggestion::None(format!("no placement patch: {why}")));
    };
    let alternative = it.next().map(|(_, r)| r);

    let Some(path) = pod_spec_path(&meta.kind) else {
        return Some(Suggestion::None(format!("no placement patch: a {} has no pod spec to patch", meta.kind)));
    };
    let mut body = json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}});
    for k in path.iter().rev() {
        body = Value::Object([(k.to_string(), body)].into_iter().collect());
    }
    let mut metadata = json!({"name": meta.name});
    if let Some(ns) = &meta.namespace {
        metadata["namespace"] = json!(ns);
    }
    let mut patch = json!({"apiVersion": api_version(meta), "kind": meta.kind, "metadata": metadata});
    if let (Some(p), Some(b)) = (patch.as_object_mut(), body.as_object()) {
        p.extend(b.clone());
    }
    let kubectl = patchable_in_place(&meta.kind).then(|| {
        let ns = meta.namespace.as_deref().map(|n| format!(" -n {}", shell_quote(n))).unwrap_or_default();
        format!(
            "kubectl patch {} {}{ns} --type strategic -p {}",
            meta.kind.to_ascii_lowercase(),
            shell_quote(&meta.name),
            shell_quote(&body.to_string())
        )
    });
    Some(Suggestion::Fix(Box::new(PlacementFix {
        runs_on: runs_on.iter().map(|s| s.to_string()).collect(),
        kept_off: kept_off.iter().map(|s| s.to_string()).collect(),
        requirement,
        alternative,
        pod_spec: path.join("."),
        patch,
        kubectl,
    })))
}

/// Requirements on what the GPU is: `nvidia.com/gpu.product In` the products where it runs,
/// `nvidia.com/gpu.compute.major Gt` every major where it fails.
fn by_gpu(kept: &[&Pool], off: &[&Pool]) -> Vec<Value> {
    let mut out = Vec::new();
    let products: Option<BTreeSet<&str>> = kept.iter().map(|p| p.product.as_deref()).collect();
    if let Some(products) = products {
        out.push(json!({"key": gfd::PRODUCT, "operator": "In", "values": products}));
    }
    let below = off.iter().filter_map(|p| p.cc).map(|c| c.major).max();
    let lowest_kept = kept.iter().filter_map(|p| p.cc).map(|c| c.major).min();
    if let Some(bound) = below.or(lowest_kept.and_then(|m| m.checked_sub(1))) {
        out.push(json!({"key": gfd::COMPUTE_MAJOR, "operator": "Gt", "values": [bound.to_string()]}));
    }
    out
}

/// The one value every item has, else None (a label name missing on a node, or two names).
fn one<T: Ord + Copy>(it: impl Iterator<Item = Option<T>>) -> Option<T> {
    let all: Option<BTreeSet<T>> = it.collect();
    all.filter(|s| s.len() == 1).and_then(|s| s.first().copied())
}

/// Requirements on which nodes, for pools of one GPU: the node group label (the one every kept
/// node carries) In the groups where it runs; the driver's major, as `driver_label`, Gt every
/// major where it fails (admitting nodes as they are upgraded), else In the majors where it
/// runs.
fn by_nodes(kept: &[&Node], off: &[&Pool], driver_label: Option<&'static str>) -> Vec<Value> {
    let mut out = Vec::new();
    if let Some(key) = one(kept.iter().map(|n| n.gpu.group_label)) {
        let groups: BTreeSet<&str> = kept.iter().filter_map(|n| n.gpu.group.as_deref()).collect();
        out.push(json!({"key": key, "operator": "In", "values": groups}));
    }
    if let Some(key) = driver_label {
        let majors: BTreeSet<u32> = kept.iter().filter_map(|n| n.gpu.gpu.driver.as_ref()).map(|d| d.branch()).collect();
        let failing = off.iter().filter_map(|p| p.driver.as_ref()).map(|d| d.branch()).max();
        match (majors.first(), failing) {
            (Some(lo), Some(f)) if *lo > f => {
                out.push(json!({"key": key, "operator": "Gt", "values": [f.to_string()]}));
            }
            _ => {
                let values: Vec<String> = majors.iter().map(u32::to_string).collect();
                out.push(json!({"key": key, "operator": "In", "values": values}));
            }
        }
    }
    out
}

/// What an alternative requirement admits besides the pools kept, in words.
pub fn alternative_admits(alt: &Value) -> Option<&'static str> {
    let f = |k: &str| alt.get(k).and_then(Value::as_str);
    let driver_major = |k: &str| k == gfd::DRIVER_MAJOR || k == gfd::DRIVER_MAJOR_NEW;
    match (f("key")?, f("operator")?) {
        (gfd::COMPUTE_MAJOR, "Gt") => Some("newer GPUs too, unjudged"),
        (k, "Gt") if driver_major(k) => Some("nodes moved to a newer driver too"),
        _ => None,
    }
}

/// The apiVersion as written, else the kind's current one.
fn api_version(meta: &WorkloadMeta) -> &str {
    if !meta.api_version.is_empty() {
        return &meta.api_version;
    }
    match meta.kind.as_str() {
        "Deployment" | "StatefulSet" | "DaemonSet" | "ReplicaSet" => "apps/v1",
        "Job" | "CronJob" => "batch/v1",
        _ => "v1",
    }
}

/// The placement's nodeSelectorTerms with `req` added to each, less the terms that it turns from
/// landing on some node to landing on none of `keep` (`gpu.product In [NVIDIA-L4]` and `In
/// [NVIDIA-A10G]`): they could only have placed the pod where it fails. A term that lands on no
/// node as written is kept (capacity to come), and so are all of them where none would remain.
fn terms_with(placement: &Placement, req: &Value, nodes: &[Node], keep: &BTreeSet<&str>) -> Value {
    let existing = placement.required_affinity.as_ref();
    let added = add_to_each(existing, req);
    let (Some(before), Some(after)) = (existing.and_then(Value::as_array), added.as_array()) else { return added };
    if before.len() != after.len() {
        return added;
    }
    let lands = |term: &Value, on: &dyn Fn(&Node) -> bool| {
        let p = Placement { required_affinity: Some(json!([term])), ..placement.clone() };
        nodes.iter().filter(|n| on(n)).any(|n| p.matches(n).unwrap_or(false))
    };
    let kept: Vec<Value> = before
        .iter()
        .zip(after)
        .filter(|(b, a)| !lands(b, &|_| true) || lands(a, &|n| keep.contains(n.name.as_str())))
        .map(|(_, a)| a.clone())
        .collect();
    if kept.is_empty() { added } else { Value::Array(kept) }
}

/// The nodeSelectorTerms with `req` added to each (terms are ORed, so each must carry it); an
/// empty term matches no node and stays empty. No terms: one with `req` alone.
fn add_to_each(existing: Option<&Value>, req: &Value) -> Value {
    let terms = existing.and_then(Value::as_array).filter(|t| !t.is_empty());
    let Some(terms) = terms else { return json!([{"matchExpressions": [req]}]) };
    let add = |t: &Value| {
        let empty = ["matchExpressions", "matchFields"]
            .iter()
            .all(|k| t.get(k).and_then(Value::as_array).is_none_or(Vec::is_empty));
        let mut t = t.clone();
        if !empty && let Some(m) = t.as_object_mut() {
            let exprs = m.entry("matchExpressions").or_insert_with(|| json!([]));
            if !exprs.is_array() {
                *exprs = json!([]);
            }
            if let Some(a) = exprs.as_array_mut() {
                a.push(req.clone());
            }
        }
        t
    };
    Value::Array(terms.iter().map(add).collect())
}

/// A word for a POSIX shell: as is when plain, else single-quoted.
fn shell_quote(s: &str) -> String {
    let plain = !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_./:=@,".contains(c));
    if plain { s.to_string() } else { format!("'{}'", s.replace('\'', r"'\''")) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requirement_joins_every_term_and_quotes_for_the_shell() {
        let req = json!({"key": "k", "operator": "Exists"});
        assert_eq!(add_to_each(None, &req), json!([{"matchExpressions": [req]}]));
        let existing = json!([
            {"matchExpressions": [{"key": "a", "operator": "Exists"}]},
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]},
            {}
        ]);
        assert_eq!(
            add_to_each(Some(&existing), &req),
            json!([
                {"matchExpressions": [{"key": "a", "operator": "Exists"}, req]},
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}], "matchExpressions": [req]},
                {}
            ])
        );
        assert_eq!(shell_quote("kube-system"), "kube-system");
        assert_eq!(shell_quote(r#"{"a":"it's"}"#), r#"'{"a":"it'\''s"}'"#);
    }
}
