//! Media types, each spelled once: the OCI ones are oci-spec's [`MediaType`]; Docker's
//! manifest types (read, never written) and the artifact types cudalint pushes are here.

pub use oci_spec::image::MediaType;

/// Docker's manifest list (schema 2), read as an OCI image index.
pub const DOCKER_MANIFEST_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
/// Docker's image manifest (schema 2), read as an OCI image manifest.
pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";

/// A layer's analysis in an analysis store (`--analysis-store`), and its one blob (the layer
/// cache's entry, zstd).
pub const LAYER_ANALYSIS: &str = "application/vnd.cudalint.layer-analysis.v1";
pub const LAYER_ANALYSIS_ENTRY: &str = "application/vnd.cudalint.layer-analysis.v1+zstd";
/// A marker that a shard is analysing a layer (single flight across nodes).
pub const LAYER_CLAIM: &str = "application/vnd.cudalint.layer-claim.v1";
/// An in-toto statement (`scan --attest`): the artifact type and its blob's media type.
pub const IN_TOTO: &str = "application/vnd.in-toto+json";

/// The `Accept` of a manifest request: OCI and Docker indexes and manifests.
pub fn manifest_accept() -> String {
    [MediaType::ImageIndex.as_ref(), MediaType::ImageManifest.as_ref(), DOCKER_MANIFEST_LIST, DOCKER_MANIFEST]
        .join(", ")
}
