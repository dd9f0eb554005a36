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

/// The fix for a workload whose containers fail (or cannot be judged) on some pools it can land
/// on and run on others, if a GPU feature discovery label tells those pools apart.
pub fn suggest(
    meta: &WorkloadMeta,
    placement: &Placement,
    containers: &[AuditContainer],
    nodes: &[Node],
    pools: &[Pool],
) -> Option<PlacementFix> {
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

    let mut candidates = Vec::new();
    // The products judged to run: exactly what was audited.
    let products: Option<BTreeSet<&str>> = kept.iter().map(|p| p.product.as_deref()).collect();
    if let Some(products) = products {
        candidates.push(json!({"key": gfd::PRODUCT, "operator": "In", "values": products}));
    }
    // Newer than every major it fails on.
    let below = off.iter().filter_map(|p| p.cc).map(|c| c.major).max();
    let lowest_kept = kept.iter().filter_map(|p| p.cc).map(|c| c.major).min();
    if let Some(bound) = below.or(lowest_kept.and_then(|m| m.checked_sub(1))) {
        candidates.push(json!({"key": gfd::COMPUTE_MAJOR, "operator": "Gt", "values": [bound.to_string()]}));
    }
    // A requirement is offered only if the placement it makes lands on exactly the nodes kept.
    let separating: Vec<(Value, Value)> = candidates
        .into_iter()
        .map(|req| (terms_with(placement.required_affinity.as_ref(), &req), req))
        .filter(|(terms, _)| {
            let p = Placement { required_affinity: Some(terms.clone()), ..placement.clone() };
            nodes.iter().all(|n| p.matches(n).unwrap_or(false) == keep.contains(n.name.as_str()))
        })
        .collect();
    let mut it = separating.into_iter();
    let (terms, requirement) = it.next()?;
    let alternative = it.next().map(|(_, r)| r);

    let path = pod_spec_path(&meta.kind)?;
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
    Some(PlacementFix {
        runs_on: runs_on.iter().map(|s| s.to_string()).collect(),
        kept_off: kept_off.iter().map(|s| s.to_string()).collect(),
        requirement,
        alternative,
        pod_spec: path.join("."),
        patch,
        kubectl,
    })
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

/// The nodeSelectorTerms with `req` added to each (terms are ORed, so each must carry it); an
/// empty term matches no node and stays empty. No terms: one with `req` alone.
fn terms_with(existing: Option<&Value>, req: &Value) -> Value {
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
        assert_eq!(terms_with(None, &req), json!([{"matchExpressions": [req]}]));
        let existing = json!([
            {"matchExpressions": [{"key": "a", "operator": "Exists"}]},
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]},
            {}
        ]);
        assert_eq!(
            terms_with(Some(&existing), &req),
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
