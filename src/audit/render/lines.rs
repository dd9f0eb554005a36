//! What several audit formats write alike: a finding's place, the causes of a workload's
//! verdicts (one per rule and place, with the pools it holds on), the findings about whole
//! images, a workload's placement in words, and the summary line.

use std::collections::{BTreeMap, BTreeSet};

use crate::audit::cluster::terms_text;
use crate::audit::report::{AuditReport, AuditVerdict, AuditWorkload};
use crate::lint::Finding;
use crate::lint::rules::Severity;

/// A finding's path in the image, or `image` for one about the whole image.
pub fn where_(f: &Finding) -> String {
    f.path.clone().unwrap_or_else(|| "image".into())
}

/// One cause in a workload: a rule at one place in one image, on the pools where it holds
/// (findings about a pool; those about the whole image are [`image_findings`]).
pub struct Cause<'a> {
    pub severity: Severity,
    pub rule: &'a str,
    pub name: &'a str,
    /// Where in the image (`image` for the image as a whole).
    pub at: String,
    pub image: &'a str,
    /// The GPU containers it is about, in manifest order.
    pub containers: Vec<&'a str>,
    /// In pool-name order.
    pub pools: Vec<&'a str>,
    /// Each distinct message and fix once, in pool order: a message names the pool's GPU and
    /// driver (its compute capability, the driver it runs), so pools may differ there.
    pub messages: Vec<&'a str>,
    pub fixes: Vec<&'a str>,
}

/// The workload's causes, most severe first, then by rule, place and image.
pub fn causes(w: &AuditWorkload) -> Vec<Cause<'_>> {
    fn push<'a>(v: &mut Vec<&'a str>, s: &'a str) {
        if !v.contains(&s) {
            v.push(s);
        }
    }
    type Key<'a> = (std::cmp::Reverse<Severity>, &'a str, String, &'a str);
    let mut by: BTreeMap<Key<'_>, Cause<'_>> = BTreeMap::new();
    for c in &w.containers {
        let mut pools: Vec<_> = c.pools.iter().collect();
        pools.sort_by(|a, b| a.pool.cmp(&b.pool));
        for p in pools {
            for f in &p.findings {
                let key = (std::cmp::Reverse(f.severity), f.rule.as_str(), where_(f), c.image.as_str());
                let e = by.entry(key).or_insert_with(|| Cause {
                    severity: f.severity,
                    rule: &f.rule,
                    name: &f.name,
                    at: where_(f),
                    image: &c.image,
                    containers: Vec::new(),
                    pools: Vec::new(),
                    messages: Vec::new(),
                    fixes: Vec::new(),
                });
                push(&mut e.containers, c.name.as_str());
                push(&mut e.pools, p.pool.as_str());
                push(&mut e.messages, f.message.as_str());
                push(&mut e.fixes, f.fix.as_str());
            }
        }
    }
    let mut out: Vec<Cause<'_>> = by.into_values().collect();
    for c in &mut out {
        c.pools.sort();
    }
    out
}

/// The findings about a whole image (whatever the pool) once per image, by image, then most
/// severe first, rule and place.
pub fn image_findings(r: &AuditReport) -> Vec<(&str, &Finding)> {
    let mut seen = BTreeSet::new();
    let mut out: Vec<(&str, &Finding)> = r
        .workloads
        .iter()
        .flat_map(|w| &w.containers)
        .flat_map(|c| c.findings.iter().map(move |f| (c.image.as_str(), f)))
        .filter(|(image, f)| seen.insert((*image, f.fingerprint.as_str())))
        .collect();
    out.sort_by(|a, b| {
        (a.0, std::cmp::Reverse(a.1.severity), &a.1.rule, where_(a.1)).cmp(&(
            b.0,
            std::cmp::Reverse(b.1.severity),
            &b.1.rule,
            where_(b.1),
        ))
    });
    out
}

/// Where the workload's pods may be scheduled, in words: `nodeName n1`, `nodeSelector k=v`,
/// `required node affinity nvidia.com/gpu.compute.major Gt 8`, `tolerates dedicated`.
pub fn placement_parts(w: &AuditWorkload) -> Vec<String> {
    let p = &w.placement;
    let mut parts = Vec::new();
    if p.unconstrained() {
        parts.push("no nodeSelector or node affinity".into());
    }
    if let Some(n) = &p.node_name {
        parts.push(format!("nodeName {n}"));
    }
    if !p.node_selector.is_empty() {
        let s: Vec<String> = p.node_selector.iter().map(|(k, v)| format!("{k}={v}")).collect();
        parts.push(format!("nodeSelector {}", s.join(",")));
    }
    if let Some(t) = &p.required_affinity {
        parts.push(format!("required node affinity {}", terms_text(t)));
    }
    if !p.tolerations.is_empty() {
        let keys: Vec<&str> = p
            .tolerations
            .iter()
            .map(|t| t.get("key").and_then(serde_json::Value::as_str).filter(|k| !k.is_empty()).unwrap_or("*"))
            .collect();
        parts.push(format!("tolerates {}", keys.join(",")));
    }
    parts
}

/// `a`, `a and b`, `a, b and c`.
pub fn and_list(items: &[&str]) -> String {
    joined(items, "and")
}

/// `a`, `a or b`, `a, b or c`: after a negative.
pub fn or_list(items: &[&str]) -> String {
    joined(items, "or")
}

fn joined(items: &[&str], conjunction: &str) -> String {
    match items {
        [] => String::new(),
        [one] => one.to_string(),
        [rest @ .., last] => format!("{} {conjunction} {last}", rest.join(", ")),
    }
}

/// GPU containers by verdict.
#[derive(Default)]
struct Counts {
    containers: usize,
    runs: usize,
    fails: usize,
    unschedulable: usize,
    unknown: usize,
}

fn counts(r: &AuditReport) -> Counts {
    let mut c = Counts::default();
    for ct in r.workloads.iter().flat_map(|w| &w.containers) {
        c.containers += 1;
        match ct.verdict {
            AuditVerdict::Runs | AuditVerdict::RunsJit => c.runs += 1,
            AuditVerdict::Fails => c.fails += 1,
            AuditVerdict::Unschedulable => c.unschedulable += 1,
            AuditVerdict::Unknown => c.unknown += 1,
        }
    }
    c
}

pub fn summary_line(r: &AuditReport) -> String {
    let c = counts(r);
    format!(
        "{} workload(s), {} GPU container(s): {} run on every pool they can land on, {} fail on some pool, {} fit no GPU pool, {} could not be judged; fails at {}: {}",
        r.workloads.len(),
        c.containers,
        c.runs,
        c.fails,
        c.unschedulable,
        c.unknown,
        r.fail_on.as_str(),
        if r.incomplete {
            "INCOMPLETE"
        } else if r.failed {
            "FAILED"
        } else {
            "passed"
        }
    )
}
