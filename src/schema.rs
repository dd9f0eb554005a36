//! Names and versions of every JSON document cudalint writes or reads, and the `tool` stamp they
//! carry. Ground floor: any module may import this, it imports nothing of the crate.
//!
//! A version is bumped on any incompatible change to its document (docs/schema.md).

use serde::Serialize;

/// `cudalint inspect --format json`.
pub const INSPECT: &str = "cudalint.inspect/v1";
/// `cudalint scan --format json` without rules: the image inventory.
pub const SCAN: &str = "cudalint.scan/v1";
/// `cudalint lint` / `scan` with rules, JSON.
pub const LINT: &str = "cudalint.lint/v3";
/// `cudalint audit --format json`.
pub const AUDIT: &str = "cudalint.audit/v1";
/// `--baseline` files.
pub const BASELINE: &str = "cudalint.baseline/v1";
/// `cudalint registry` summaries (and the shard files merged into them).
pub const REGISTRY_SUMMARY: &str = "cudalint.registry-summary/v1";
/// Entries of the layer-analysis cache and store.
pub const LAYER_CACHE: &str = "cudalint.layer-cache/v2";

/// Which program wrote a document.
#[derive(Debug, Clone, Serialize)]
pub struct Tool {
    pub name: &'static str,
    pub version: &'static str,
}

impl Tool {
    pub fn current() -> Tool {
        Tool { name: env!("CARGO_PKG_NAME"), version: env!("CARGO_PKG_VERSION") }
    }
}
