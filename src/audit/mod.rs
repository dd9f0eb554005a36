//! Kubernetes pre-deploy audit: workload manifests and the cluster's nodes in; for every
//! container that requests `nvidia.com/gpu`, the GPU node pools it can be scheduled on, and
//! whether its image's device code runs on each (the lint gate with the pools as targets).
//!
//! Each distinct image is scanned once (the layer cache is shared through the scan options) and
//! linted once per distinct set of pools its containers can land on.
//!
//! The files: [`manifest`] (workloads) and [`cluster`] (nodes, pools, placement) read the
//! inputs, [`run()`] goes through the phases into a [`report::AuditReport`], [`place`] finds
//! the affinity that keeps a workload where it runs, and [`render`] writes the report, one file
//! per format.

pub mod cluster;
mod error;
pub mod manifest;
pub mod place;
pub mod render;
pub mod report;
mod run;

pub use error::AuditError;
pub use report::{AuditContainer, AuditImage, AuditReport, AuditVerdict, AuditWorkload, PlacementFix, PoolResult};
pub use run::{AuditInput, Judge, run};
