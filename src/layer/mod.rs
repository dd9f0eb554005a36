//! Layers: a layer's descriptor, reading its blob (tar walking, compression, digests), the
//! per-layer analysis and the merge of layers into the image's final filesystem. "Layer" names
//! one thing here: a tar blob of an image and what was learned from it.

pub mod analyze;
pub mod blob;
pub mod budget;
pub mod decode;
pub mod merge;
pub mod path;
pub mod pipe;
pub mod python;
pub mod sparse;
pub mod tar;

use serde::Serialize;

use analyze::{LayerStats, LayerSummary};
use decode::Compression;

/// A layer of the chosen image, in order.
#[derive(Debug, Clone)]
pub struct LayerRef {
    /// Key in the store.
    pub key: String,
    /// Digest of the blob bytes, when known (OCI descriptors, blob file names).
    pub digest: Option<String>,
    /// Digest of the uncompressed tar (config `rootfs.diff_ids`).
    pub diff_id: Option<String>,
    pub size: Option<u64>,
    pub media_type: Option<String>,
}

impl LayerRef {
    /// The digest that names this layer in reports.
    pub fn id(&self) -> String {
        self.digest.clone().or_else(|| self.diff_id.clone()).unwrap_or_else(|| self.key.clone())
    }
}

#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct LayerInfo {
    pub digest: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff_id: Option<String>,
    pub size: u64,
    pub compression: Compression,
    /// The content was hashed and matched its digest. False only where `--verify auto` read an
    /// uncompressed layer by seeking.
    pub verified: bool,
    /// The Dockerfile step that made the layer, from the image config's `history` (as `docker
    /// history` shows it); absent where the image records none or its history does not match
    /// its layers. Set per image, never cached (a layer can be shared by images built apart).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    #[serde(flatten)]
    pub stats: LayerStats,
}

/// A layer as analysed, with what is needed to describe it.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct AnalyzedLayer {
    pub info: LayerInfo,
    pub summary: LayerSummary,
}
