//! [`run`], in the phases an audit goes through: read the cluster's GPU pools, read the GPU
//! workloads, find the pools each may land on, scan each distinct image once, then judge every
//! GPU container on every pool it may land on.

use std::collections::{BTreeMap, BTreeSet};

use super::cluster::{self, Node, Placement, Pool};
use super::error::AuditError;
use super::manifest::{self, GpuContainer, Workload};
use super::place;
use super::report::{AuditContainer, AuditImage, AuditReport, AuditVerdict, AuditWorkload, PoolResult};
use crate::image::{ImageReport, ScanOptions};
use crate::lint::LintReport;
use crate::lint::rules::EvalError;
use crate::lint::targets::Target;
use crate::schema::{self, Tool};

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

/// Lints one image against targets (the gate's rules, config, ignores and baseline).
pub type Judge<'a> = dyn Fn(&ImageReport, Vec<Target>) -> Result<LintReport, EvalError> + 'a;

/// Reads the inputs (failing on the first bad one, before any image is scanned), scans each
/// image once and judges every GPU container on every pool it can land on.
pub fn run(
    input: &AuditInput,
    scan: &ScanOptions,
    judge: &Judge,
    fail_on: crate::lint::rules::FailOn,
) -> Result<AuditReport, AuditError> {
    let (nodes, pools) = read_cluster(&input.nodes)?;
    let mut notes: Vec<String> = pools
        .iter()
        .filter(|p| p.target.as_ref().is_some_and(|t| t.driver_cuda.is_none()))
        .map(|p| format!("pool {}: no driver version labels; driver checks skipped there", p.name))
        .collect();
    let read = read_workloads(&input.manifests)?;
    let lands = landings(&nodes, &pools, &read.gpu)?;
    let (images, scanned) = scan_images(&read.gpu, &input.image_map, scan);
    let judged = judge_containers(read.gpu, lands, (&nodes, &pools), &images, &scanned, judge, fail_on)?;
    for n in judged.lints.iter().flat_map(|l| &l.notes) {
        if !notes.contains(n) {
            notes.push(n.clone());
        }
    }
    Ok(AuditReport {
        schema: schema::AUDIT,
        tool: Tool::current(),
        pools,
        images,
        workloads: judged.workloads,
        workloads_without_gpu: read.without_gpu,
        other_objects: read.other_objects,
        fail_on,
        failed: judged.failed,
        incomplete: judged.incomplete,
        notes,
        lints: judged.lints,
    })
}

/// The GPU nodes of every nodes file (a node given twice counts once, as first given), in name
/// order, and the pools they form, grouped once over all the files so that pools are named
/// alike whatever file their nodes came from.
fn read_cluster(files: &[String]) -> Result<(Vec<Node>, Vec<Pool>), AuditError> {
    if files.is_empty() {
        return Err(AuditError::Nothing("no nodes given (--nodes: `kubectl get nodes -o json` output)".into()));
    }
    let mut nodes: Vec<Node> = Vec::new();
    let mut seen = BTreeSet::new();
    for f in files {
        let text = manifest::read_input(f)?;
        for doc in manifest::documents(&text, f)? {
            nodes.extend(cluster::nodes(&doc, f)?.into_iter().filter(|n| seen.insert(n.name.clone())));
        }
    }
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    let pools = cluster::pools(&nodes);
    if pools.is_empty() {
        return Err(AuditError::Nothing(format!(
            "{}: no GPU nodes (none has nvidia.com/gpu capacity or GPU feature discovery labels)",
            files.join(", ")
        )));
    }
    Ok((nodes, pools))
}

/// A workload with at least one GPU container, and where its pods may be scheduled.
struct GpuWorkload {
    workload: Workload,
    placement: Placement,
    containers: Vec<GpuContainer>,
}

/// The workloads of every manifest, in input order, and what else was read.
struct Workloads {
    gpu: Vec<GpuWorkload>,
    without_gpu: usize,
    other_objects: usize,
}

fn read_workloads(manifests: &[String]) -> Result<Workloads, AuditError> {
    let files = manifest::expand(manifests)?;
    if files.is_empty() {
        return Err(AuditError::Nothing("no manifests given".into()));
    }
    let mut read = Workloads { gpu: Vec::new(), without_gpu: 0, other_objects: 0 };
    for f in &files {
        let text = manifest::read_input(f)?;
        for workload in manifest::workloads(&text, f, &mut read.other_objects)? {
            let containers = manifest::gpu_containers(&workload)?;
            if containers.is_empty() {
                read.without_gpu += 1;
                continue;
            }
            let placement = Placement::of(&workload.pod, &format!("{}: {}", f, workload.meta.id()))?;
            read.gpu.push(GpuWorkload { workload, placement, containers });
        }
    }
    Ok(read)
}

/// A pool a workload may land on: its index among the pools, and its nodes that match.
struct Landing {
    pool: usize,
    nodes: Vec<String>,
}

/// For each workload, the pools it may land on (none: it fits no GPU node).
fn landings(nodes: &[Node], pools: &[Pool], workloads: &[GpuWorkload]) -> Result<Vec<Vec<Landing>>, AuditError> {
    let by_name: BTreeMap<&str, &Node> = nodes.iter().map(|n| (n.name.as_str(), n)).collect();
    let pool_nodes: Vec<Vec<&Node>> =
        pools.iter().map(|p| p.nodes.iter().filter_map(|n| by_name.get(n.as_str()).copied()).collect()).collect();
    let mut out = Vec::new();
    for w in workloads {
        let mut per_pool = Vec::new();
        for (pool, members) in pool_nodes.iter().enumerate() {
            let mut matching = Vec::new();
            for n in members {
                if w.placement.matches(n)? {
                    matching.push(n.name.clone());
                }
            }
            if !matching.is_empty() {
                per_pool.push(Landing { pool, nodes: matching });
            }
        }
        out.push(per_pool);
    }
    Ok(out)
}

/// Scans each distinct image of the GPU containers once: what was scanned for each (or why it
/// could not be), and the inventories by image reference.
fn scan_images(
    workloads: &[GpuWorkload],
    image_map: &BTreeMap<String, String>,
    scan: &ScanOptions,
) -> (Vec<AuditImage>, BTreeMap<String, ImageReport>) {
    let distinct: BTreeSet<&str> =
        workloads.iter().flat_map(|w| w.containers.iter().map(|c| c.image.as_str())).collect();
    let mut images = Vec::new();
    let mut scanned = BTreeMap::new();
    for image in distinct {
        // Unmapped references always go to the registry: a manifest never names a local file.
        let spec = image_map.get(image).cloned().unwrap_or_else(|| format!("docker://{image}"));
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
    (images, scanned)
}

/// The lint reports behind the verdicts: each image linted once per distinct set of
/// (judgeable) pools.
#[derive(Default)]
struct Lints {
    reports: Vec<LintReport>,
    index: BTreeMap<(String, Vec<usize>), usize>,
}

impl Lints {
    /// The report of `image` on the pools `judgeable`, linted on first use.
    fn of(
        &mut self,
        image: &str,
        inv: &ImageReport,
        judgeable: &[usize],
        pools: &[Pool],
        judge: &Judge,
    ) -> Result<usize, AuditError> {
        let key = (image.to_string(), judgeable.to_vec());
        if let Some(i) = self.index.get(&key) {
            return Ok(*i);
        }
        let targets = judgeable.iter().filter_map(|i| pools[*i].target.clone()).collect();
        let report = judge(inv, targets).map_err(|source| AuditError::Judge { image: image.to_string(), source })?;
        self.reports.push(report);
        self.index.insert(key, self.reports.len() - 1);
        Ok(self.reports.len() - 1)
    }
}

/// Every workload's containers judged, and what the gate makes of them.
struct Judged {
    workloads: Vec<AuditWorkload>,
    lints: Vec<LintReport>,
    /// A container that fails or fits no pool, or a finding at or above `fail_on`.
    failed: bool,
    /// A container that could not be judged.
    incomplete: bool,
}

fn judge_containers(
    workloads: Vec<GpuWorkload>,
    lands: Vec<Vec<Landing>>,
    (nodes, pools): (&[Node], &[Pool]),
    images: &[AuditImage],
    scanned: &BTreeMap<String, ImageReport>,
    judge: &Judge,
    fail_on: crate::lint::rules::FailOn,
) -> Result<Judged, AuditError> {
    let mut lints = Lints::default();
    let mut out = Judged { workloads: Vec::new(), lints: Vec::new(), failed: false, incomplete: false };
    for (w, land) in workloads.into_iter().zip(lands) {
        let judgeable: Vec<usize> = land.iter().map(|l| l.pool).filter(|i| pools[*i].target.is_some()).collect();
        let mut containers = Vec::new();
        for c in w.containers {
            let lint = match scanned.get(&c.image) {
                Some(inv) => Some(lints.of(&c.image, inv, &judgeable, pools, judge)?),
                None => None,
            };
            let scan_error = images.iter().find(|i| i.image == c.image).and_then(|i| i.error.as_deref());
            let ac = judge_container(c, &land, pools, lint.map(|i| &lints.reports[i]), scan_error);
            out.incomplete |= ac.verdict == AuditVerdict::Unknown;
            out.failed |= matches!(ac.verdict, AuditVerdict::Unschedulable | AuditVerdict::Fails)
                || ac
                    .findings
                    .iter()
                    .chain(ac.pools.iter().flat_map(|p| &p.findings))
                    .any(|f| fail_on.fails(f.severity));
            containers.push(ac);
        }
        let (placement_fix, no_placement_fix) =
            match place::suggest(&w.workload.meta, &w.placement, &containers, nodes, pools) {
                Some(place::Suggestion::Fix(f)) => (Some(*f), None),
                Some(place::Suggestion::None(why)) => (None, Some(why)),
                None => (None, None),
            };
        out.workloads.push(AuditWorkload {
            meta: w.workload.meta,
            placement: w.placement,
            containers,
            placement_fix,
            no_placement_fix,
        });
    }
    out.lints = lints.reports;
    Ok(out)
}

/// One container on each pool it may land on, from its image's lint report (None: the image
/// was not scanned, for `scan_error`).
fn judge_container(
    c: GpuContainer,
    land: &[Landing],
    pools: &[Pool],
    lint: Option<&LintReport>,
    scan_error: Option<&str>,
) -> AuditContainer {
    let results: Vec<PoolResult> = land
        .iter()
        .map(|l| {
            let pool = &pools[l.pool];
            let mut pr = PoolResult {
                pool: pool.name.clone(),
                nodes: l.nodes.clone(),
                verdict: AuditVerdict::Unknown,
                findings: Vec::new(),
                reason: None,
            };
            match (lint, &pool.target) {
                (_, None) => {
                    pr.reason = Some("the nodes carry no nvidia.com/gpu.compute.major/minor labels".into());
                }
                (None, _) => {
                    pr.reason = Some(format!("image not scanned: {}", scan_error.unwrap_or_default()));
                }
                (Some(l), Some(_)) => {
                    pr.findings =
                        l.findings.iter().filter(|f| f.target.as_deref() == Some(&pool.name)).cloned().collect();
                    // The pool's verdict is the scan's headline for it: one evaluation, after
                    // ignores and the baseline.
                    if let Some(h) = l.headlines.iter().find(|h| h.target == pool.name) {
                        pr.verdict = AuditVerdict::of_headline(h.verdict);
                    }
                }
            }
            pr
        })
        .collect();
    let verdict = if lint.is_none() || results.iter().any(|p| p.verdict == AuditVerdict::Unknown) {
        AuditVerdict::Unknown
    } else if land.is_empty() {
        AuditVerdict::Unschedulable
    } else if results.iter().any(|p| p.verdict == AuditVerdict::Fails) {
        AuditVerdict::Fails
    } else {
        AuditVerdict::Runs
    };
    AuditContainer {
        name: c.name,
        init: c.init,
        image: c.image,
        gpus: c.gpus,
        verdict,
        pools: results,
        findings: lint.map(|l| l.findings.iter().filter(|f| f.target.is_none()).cloned().collect()).unwrap_or_default(),
    }
}
