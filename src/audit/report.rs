//! What an audit found: the pools, the images scanned, and a verdict per workload, container
//! and pool, with the findings behind it. Every format in `render/` renders this.

use serde::Serialize;
use serde_json::Value;

use super::cluster::{Placement, Pool};
use super::manifest::WorkloadMeta;
use crate::lint::{Finding, HeadlineVerdict, LintReport};
use crate::schema::Tool;

/// A verdict on a container, or on one pool it can land on; serialized as [`AuditVerdict::as_str`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditVerdict {
    /// Runs on the pool; a container: on every pool it can land on.
    Runs,
    /// Runs on the pool, some code only through PTX JIT (a pool's verdict only).
    RunsJit,
    /// Fails on the pool; a container: on at least one.
    Fails,
    /// No GPU pool matches the container's placement (a container's verdict only).
    Unschedulable,
    /// The image was not scanned, or the pool cannot be judged.
    Unknown,
}

impl AuditVerdict {
    /// The word the JSON report and the other formats write.
    pub fn as_str(self) -> &'static str {
        match self {
            AuditVerdict::Runs => "runs",
            AuditVerdict::RunsJit => "runs-jit",
            AuditVerdict::Fails => "fails",
            AuditVerdict::Unschedulable => "unschedulable",
            AuditVerdict::Unknown => "unknown",
        }
    }

    /// Runs, natively or through JIT.
    pub fn runs(self) -> bool {
        matches!(self, AuditVerdict::Runs | AuditVerdict::RunsJit)
    }

    /// A pool's verdict from the lint headline's verdict for it: an accepted target runs as
    /// configured.
    pub(crate) fn of_headline(v: HeadlineVerdict) -> AuditVerdict {
        match v {
            HeadlineVerdict::Runs | HeadlineVerdict::Accepted => AuditVerdict::Runs,
            HeadlineVerdict::RunsJit => AuditVerdict::RunsJit,
            HeadlineVerdict::Fails => AuditVerdict::Fails,
        }
    }
}

impl Serialize for AuditVerdict {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
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
    pub verdict: AuditVerdict,
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
    pub verdict: AuditVerdict,
    pub pools: Vec<PoolResult>,
    /// Findings about the image or its binaries, whatever the pool.
    pub findings: Vec<Finding>,
}

#[derive(Debug, Clone, Serialize)]
pub struct AuditWorkload {
    /// Kind, namespace, name and the file it came from.
    #[serde(flatten)]
    pub meta: WorkloadMeta,
    pub placement: Placement,
    pub containers: Vec<AuditContainer>,
    /// Fails on some pools it can land on and runs on others: the affinity that keeps it where
    /// it runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub placement_fix: Option<PlacementFix>,
    /// Fails on some pools it can land on and runs on others, but no label tells them apart:
    /// why no placement is offered, in a sentence.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub no_placement_fix: Option<String>,
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
    pub fail_on: crate::lint::rules::FailOn,
    /// A finding at or above `fail_on`, or a container that cannot be scheduled on any GPU pool
    /// (exit 1).
    pub failed: bool,
    /// An image could not be scanned or a pool could not be judged (exit 2).
    pub incomplete: bool,
    pub notes: Vec<String>,
    /// The lint reports behind the verdicts (one per image and set of pools), for SARIF.
    #[serde(skip)]
    pub lints: Vec<LintReport>,
}

/// The placement that keeps a workload where it runs.
#[derive(Debug, Clone, Serialize)]
pub struct PlacementFix {
    /// The pools it runs on (every GPU container), kept.
    pub runs_on: Vec<String>,
    /// The pools it fails on, or cannot be judged on, left out.
    pub kept_off: Vec<String>,
    /// The node selector requirement added to each of the pod's required nodeSelectorTerms:
    /// `{key, operator, values}`: `nvidia.com/gpu.product In`, `nvidia.com/gpu.compute.major Gt`;
    /// for pools of one GPU, the node group label In, else `nvidia.com/cuda.driver.major` Gt (or
    /// In).
    pub requirement: Value,
    /// Another requirement that would keep it on the same pools: `nvidia.com/gpu.compute.major`
    /// Gt, which also admits GPUs of a newer major that no pool has yet, unjudged; for pools of
    /// one GPU, the driver's major beside the node group.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alternative: Option<Value>,
    /// Where the workload keeps its pod spec: `spec.template.spec`,
    /// `spec.jobTemplate.spec.template.spec`, `spec`.
    pub pod_spec: String,
    /// A strategic-merge patch naming the workload (apiVersion, kind, name, namespace) with the
    /// pod's `affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution` at the pod
    /// spec: the existing nodeSelectorTerms, each with the requirement added (a list that a
    /// patch replaces whole), or one term with it alone.
    pub patch: Value,
    /// `kubectl patch ...` for the workload in the cluster; absent for a Job or a Pod, whose pod
    /// spec cannot be changed once created (patch the manifest, and re-create).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kubectl: Option<String>,
}

impl PlacementFix {
    /// The patch as YAML (a kustomize patch file).
    pub fn yaml(&self) -> String {
        serde_yaml_ng::to_string(&self.patch).expect("a JSON value serializes as YAML")
    }
}
