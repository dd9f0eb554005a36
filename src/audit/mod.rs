//! Kubernetes pre-deploy audit: workload manifests and the cluster's nodes in; for every
//! container that requests `nvidia.com/gpu`, the GPU node pools it can be scheduled on, and
//! whether its image's device code runs on each (the lint gate with the pools as targets).
//!
//! Each distinct image is scanned once (the layer cache is shared through the scan options) and
//! linted once per distinct set of pools its containers can land on.

pub mod cluster;
pub mod manifest;
pub mod render;

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::image::{ImageReport, ScanOptions};
use crate::lint::rules::Severity;
use crate::lint::targets::Target;
use crate::lint::{Finding, LintReport};
use crate::schema::{self, Tool};
use cluster::{Placement, Pool};

/// What the audit reads.
#[derive(Debug, Clone, Default)]
pub struct AuditInput {
    /// Manifest files (`-`: standard input); directories are read for `*.yaml`, `*.yml`, `*.json`.
    pub manifests: Vec<String>,
    /// `kubectl get nodes -o json` files.
    pub nodes: Vec<String>,
    /// Image references as written in the manifests -> what to scan instead (a local archive or
    /// layout, a mirror). Unmapped references are pulled from their registry.
    pub image_map: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct AuditImage {
    /// As written in the manifests.
    pub image: String,
    /// What was scanned for it.
    pub scanned: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub manifest_digest: Option<String>,
    /// Why it could not be scanned (its containers are then `unknown`, and the audit exits 2).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PoolResult {
    pub pool: String,
    /// The pool's nodes the pod may be scheduled on.
    pub nodes: Vec<String>,
    /// runs, runs-jit (some code only through PTX JIT), fails, unknown.
    pub verdict: String,
    /// Findings about this pool (target-specific rules).
    pub findings: Vec<Finding>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct AuditContainer {
    pub name: String,
    pub init: bool,
    pub image: String,
    pub gpus: String,
    /// runs (on every pool it can land on), fails (on at least one), unschedulable (no GPU pool
    /// matches its placement), unknown (image not scanned or a pool not judgeable).
    pub verdict: String,
    pub pools: Vec<PoolResult>,
    /// Findings about the image or its binaries, whatever the pool.
    pub findings: Vec<Finding>,
}

#[derive(Debug, Clone, Serialize)]
pub struct AuditWorkload {
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
    pub source: String,
    pub placement: Placement,
    pub containers: Vec<AuditContainer>,
}

impl AuditWorkload {
    pub fn id(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.kind, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct AuditReport {
    pub schema: &'static str,
    pub tool: Tool,
    pub pools: Vec<Pool>,
    pub images: Vec<AuditImage>,
    /// Workloads with at least one GPU container, in input order.
    pub workloads: Vec<AuditWorkload>,
    /// Workloads read that request no GPU.
    pub workloads_without_gpu: usize,
    /// Objects that are not workloads (Services, ConfigMaps, ...).
    pub other_objects: usize,
    pub fail_on: Severity,
    /// A finding at or above `fail_on`, or a container that cannot be scheduled on any GPU pool
    /// (exit 1).
    pub failed: bool,
    /// An image could not be scanned or a pool could not be judged (exit 2).
    pub incomplete: bool,
    pub notes: Vec<String>,
    /// The lint reports behind the verdicts (one per image and set of pools), for the SARIF,
    /// JUnit and Markdown renderers.
    #[serde(skip)]
    pub lints: Vec<LintReport>,
}

/// Why an audit could not run; each names what it is about.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// An input file, or a document or object in it, that the audit cannot read.
    #[error("{origin}: {message}")]
    Input { origin: String, message: String },
    /// A node selector term that Kubernetes itself would refuse.
    #[error("{0}")]
    Selector(String),
    /// Nothing to audit: no manifests, no nodes, or no node with GPUs.
    #[error("{0}")]
    Nothing(String),
    /// Judging an image's inventory failed.
    #[error("{image}: {source}")]
    Judge { image: String, source: crate::lint::rules::EvalError },
}

impl AuditError {
    pub(crate) fn input(origin: impl std::fmt::Display, message: impl Into<String>) -> AuditError {
        AuditError::Input { origin: origin.to_string(), message: message.into() }
    }
}

/// Lints one image against targets (the gate's rules, config, ignores and baseline).
pub type Judge<'a> = dyn Fn(&ImageReport, Vec<Target>) -> Result<LintReport, crate::lint::rules::EvalError> + 'a;

fn expand(paths: &[String]) -> Result<Vec<String>, AuditError> {
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

/// Reads the inputs (failing on the first bad one, before any image is scanned), scans each
/// image once and judges every GPU container on every pool it can land on.
pub fn run(
    input: &AuditInput,
    scan: &ScanOptions,
    judge: &Judge,
    fail_on: Severity,
) -> Result<AuditReport, AuditError> {
    if input.nodes.is_empty() {
        return Err(AuditError::Nothing("no nodes given (--nodes: `kubectl get nodes -o json` output)".into()));
    }
    let mut nodes = Vec::new();
    let mut pools: Vec<Pool> = Vec::new();
    for f in &input.nodes {
        let text = manifest::read_input(f)?;
        for doc in manifest::documents(&text, f)? {
            let (n, p) = cluster::nodes(&doc, f)?;
            nodes.extend(n);
            for p in p {
                match pools.iter_mut().find(|q| q.name == p.name) {
                    Some(q) => q.nodes.extend(p.nodes),
                    None => pools.push(p),
                }
            }
        }
    }
    pools.sort_by(|a, b| a.name.cmp(&b.name));
    for p in &mut pools {
        p.nodes.sort();
        p.nodes.dedup();
    }
    if pools.is_empty() {
        return Err(AuditError::Nothing(format!(
            "{}: no GPU nodes (none has nvidia.com/gpu capacity or GPU feature discovery labels)",
            input.nodes.join(", ")
        )));
    }
    let mut notes = Vec::new();
    for p in pools.iter().filter(|p| p.target.as_ref().is_some_and(|t| t.driver_cuda.is_none())) {
        notes.push(format!("pool {}: no driver version labels; driver checks skipped there", p.name));
    }

    let mut other_objects = 0;
    let mut workloads = Vec::new();
    let mut without_gpu = 0;
    let files = expand(&input.manifests)?;
    if files.is_empty() {
        return Err(AuditError::Nothing("no manifests given".into()));
    }
    for f in &files {
        let text = manifest::read_input(f)?;
        for w in manifest::workloads(&text, f, &mut other_objects)? {
            let containers = manifest::gpu_containers(&w)?;
            if containers.is_empty() {
                without_gpu += 1;
                continue;
            }
            let placement = Placement::of(&w.pod, &format!("{}: {}", f, w.id()))?;
            workloads.push((w, placement, containers));
        }
    }

    // Where each workload may land: (pool index, matching nodes).
    let by_name: BTreeMap<&str, &cluster::Node> = nodes.iter().map(|n| (n.name.as_str(), n)).collect();
    let pool_nodes: Vec<Vec<&cluster::Node>> =
        pools.iter().map(|p| p.nodes.iter().filter_map(|n| by_name.get(n.as_str()).copied()).collect()).collect();
    let mut landing: Vec<Vec<(usize, Vec<String>)>> = Vec::new();
    for (_, placement, _) in &workloads {
        let mut per_pool = Vec::new();
        for (i, members) in pool_nodes.iter().enumerate() {
            let mut matching = Vec::new();
            for n in members {
                if placement.matches(n)? {
                    matching.push(n.name.clone());
                }
            }
            if !matching.is_empty() {
                per_pool.push((i, matching));
            }
        }
        landing.push(per_pool);
    }

    // Scan each distinct image once.
    let distinct: BTreeSet<&str> =
        workloads.iter().flat_map(|(_, _, cs)| cs.iter().map(|c| c.image.as_str())).collect();
    let mut images = Vec::new();
    let mut scanned: BTreeMap<String, ImageReport> = BTreeMap::new();
    for image in distinct {
        // Unmapped references always go to the registry: a manifest never names a local file.
        let spec = input.image_map.get(image).cloned().unwrap_or_else(|| format!("docker://{image}"));
        let mut a = AuditImage { image: image.to_string(), scanned: spec.clone(), manifest_digest: None, error: None };
        if spec == "-" {
            a.error = Some("standard input cannot be an audit image".into());
        } else {
            match crate::image::scan(&spec, scan) {
                Ok(r) => {
                    a.manifest_digest = r.image.manifest_digest.clone().or_else(|| r.image.config_digest.clone());
                    scanned.insert(image.to_string(), r);
                }
                Err(e) => a.error = Some(format!("{spec}: {e}")),
            }
        }
        images.push(a);
    }

    // Lint each image once per distinct set of (judgeable) pools.
    let mut lints: Vec<LintReport> = Vec::new();
    let mut lint_of: BTreeMap<(String, Vec<usize>), usize> = BTreeMap::new();
    let mut out_workloads = Vec::new();
    let (mut failed, mut incomplete) = (false, false);
    for ((w, placement, containers), land) in workloads.into_iter().zip(landing) {
        let judgeable: Vec<usize> = land.iter().map(|(i, _)| *i).filter(|i| pools[*i].target.is_some()).collect();
        let mut out_containers = Vec::new();
        for c in containers {
            let mut ac = AuditContainer {
                name: c.name,
                init: c.init,
                image: c.image.clone(),
                gpus: c.gpus,
                verdict: String::new(),
                pools: Vec::new(),
                findings: Vec::new(),
            };
            let lint = match scanned.get(&c.image) {
                Some(inv) => {
                    let key = (c.image.clone(), judgeable.clone());
                    let idx = match lint_of.get(&key) {
                        Some(i) => *i,
                        None => {
                            let targets = judgeable.iter().filter_map(|i| pools[*i].target.clone()).collect();
                            lints.push(
                                judge(inv, targets)
                                    .map_err(|source| AuditError::Judge { image: c.image.clone(), source })?,
                            );
                            lint_of.insert(key, lints.len() - 1);
                            lints.len() - 1
                        }
                    };
                    Some(&lints[idx])
                }
                None => None,
            };
            let scan_error = images.iter().find(|i| i.image == c.image).and_then(|i| i.error.clone());
            for (i, matching) in &land {
                let pool = &pools[*i];
                let mut pr = PoolResult {
                    pool: pool.name.clone(),
                    nodes: matching.clone(),
                    verdict: String::new(),
                    findings: Vec::new(),
                    reason: None,
                };
                match (lint, &pool.target) {
                    (_, None) => {
                        pr.verdict = "unknown".into();
                        pr.reason = Some("the nodes carry no nvidia.com/gpu.compute.major/minor labels".into());
                    }
                    (None, _) => {
                        pr.verdict = "unknown".into();
                        pr.reason = Some(format!("image not scanned: {}", scan_error.clone().unwrap_or_default()));
                    }
                    (Some(l), Some(_)) => {
                        pr.findings =
                            l.findings.iter().filter(|f| f.target.as_deref() == Some(&pool.name)).cloned().collect();
                        // The pool's verdict is the scan's headline for it: one evaluation,
                        // after ignores and the baseline (an accepted target runs as configured).
                        pr.verdict = match l.headlines.iter().find(|h| h.target == pool.name) {
                            Some(h) if h.verdict == crate::lint::HeadlineVerdict::Accepted => "runs".into(),
                            Some(h) => h.verdict.as_str().into(),
                            None => "unknown".into(),
                        };
                    }
                }
                ac.pools.push(pr);
            }
            if let Some(l) = lint {
                ac.findings = l.findings.iter().filter(|f| f.target.is_none()).cloned().collect();
            }
            ac.verdict = if land.is_empty() {
                "unschedulable"
            } else if ac.pools.iter().any(|p| p.verdict == "unknown") {
                "unknown"
            } else if ac.pools.iter().any(|p| p.verdict == "fails") {
                "fails"
            } else {
                "runs"
            }
            .into();
            if lint.is_none() {
                ac.verdict = "unknown".into();
            }
            incomplete |= ac.verdict == "unknown";
            failed |= ac.verdict == "unschedulable"
                || ac.verdict == "fails"
                || ac.findings.iter().chain(ac.pools.iter().flat_map(|p| &p.findings)).any(|f| f.severity >= fail_on);
            out_containers.push(ac);
        }
        out_workloads.push(AuditWorkload {
            kind: w.kind,
            namespace: w.namespace,
            name: w.name,
            source: w.source,
            placement,
            containers: out_containers,
        });
    }
    for l in &lints {
        for n in &l.notes {
            if !notes.contains(n) {
                notes.push(n.clone());
            }
        }
    }
    Ok(AuditReport {
        schema: schema::AUDIT,
        tool: Tool::current(),
        pools,
        images,
        workloads: out_workloads,
        workloads_without_gpu: without_gpu,
        other_objects,
        fail_on,
        failed,
        incomplete,
        notes,
        lints,
    })
}
