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

/// The config media types of images (OCI, Docker): a manifest with any other config is an
/// artifact.
pub const IMAGE_CONFIGS: [&str; 2] =
    ["application/vnd.oci.image.config.v1+json", "application/vnd.docker.container.image.v1+json"];

/// A layer media type of an image: an OCI or Docker filesystem layer (tar, compressed or not,
/// nondistributable or foreign included).
pub fn is_image_layer(media_type: &str) -> bool {
    media_type.starts_with("application/vnd.oci.image.layer.")
        || media_type.starts_with("application/vnd.docker.image.rootfs.")
}

/// What the media types of well-known artifacts are, in words (a summary line names both).
fn artifact_kind(media_type: &str) -> Option<&'static str> {
    let m = media_type.to_ascii_lowercase();
    let m = m.as_str();
    Some(match m {
        _ if m.starts_with("application/vnd.cncf.helm.") => "Helm chart",
        _ if m.starts_with("application/vnd.dev.cosign.simplesigning.") => "cosign signature",
        _ if m.starts_with("application/vnd.dev.sigstore.bundle") => "Sigstore bundle",
        _ if m.starts_with("application/vnd.cncf.notary.") => "Notary signature",
        "application/vnd.dsse.envelope.v1+json" => "DSSE attestation",
        IN_TOTO => "in-toto attestation",
        LAYER_ANALYSIS | LAYER_ANALYSIS_ENTRY => "cudalint analysis store entry",
        LAYER_CLAIM => "cudalint analysis store claim",
        _ if m.contains("spdx") || m.contains("cyclonedx") || m.contains("syft") => "SBOM",
        _ if m.contains("wasm") => "WebAssembly module",
        _ if m.starts_with("application/vnd.oci.image.index.") || m == DOCKER_MANIFEST_LIST => "index",
        _ => return None,
    })
}

/// A manifest that is not an image (nor an index of images): what it is, in words, and the
/// media type (or tag schema) that tells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotImage {
    pub kind: String,
    pub media_type: String,
}

impl std::fmt::Display for NotImage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}, {}", self.kind, self.media_type)
    }
}

/// The annotation BuildKit sets on an index entry that is an attestation manifest
/// (`attestation-manifest`) rather than an image.
pub const DOCKER_REFERENCE_TYPE: &str = "vnd.docker.reference.type";

/// Whether an index entry (a descriptor) names an image manifest or index: not an artifact
/// (`artifactType`), not BuildKit's attestation manifest (its annotation, or its platform
/// `unknown/unknown`).
pub fn is_image_entry(d: &serde_json::Value) -> bool {
    let s = |v: &serde_json::Value, k: &str| v.get(k).and_then(|x| x.as_str()).map(str::to_string);
    if s(d, "artifactType").is_some() {
        return false;
    }
    if d.get("annotations").and_then(|a| a.get(DOCKER_REFERENCE_TYPE)).is_some() {
        return false;
    }
    let platform = d.get("platform").cloned().unwrap_or_default();
    s(&platform, "os").as_deref() != Some("unknown")
}

/// The tag schemas of signatures and attestations stored beside an image: cosign's
/// `sha256-<hex>.sig` / `.att` / `.sbom`, and the OCI referrers tag schema's `sha256-<hex>`.
fn tag_schema(tag: &str) -> Option<&'static str> {
    let rest = tag.strip_prefix("sha256-")?;
    let (hex, suffix) = rest.split_once('.').unwrap_or((rest, ""));
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    Some(match suffix {
        "sig" => "cosign signature",
        "att" => "cosign attestation",
        "sbom" => "cosign SBOM",
        "" => "referrers index",
        _ => return None,
    })
}

/// What a manifest (or index) read by tag `tag` is when it is not an image: told by its
/// `artifactType`, its config's media type, its layers' media types, for an index by its
/// entries (none an image: artifacts or attestation manifests), and an empty index by the tag
/// schemas of signatures and attestations. None: an image or an index holding images, whatever
/// the tag (or a document this cannot read: the scan says what is wrong with it).
pub fn not_an_image(manifest: &[u8], tag: Option<&str>) -> Option<NotImage> {
    let v: serde_json::Value = serde_json::from_slice(manifest).ok()?;
    let s = |v: &serde_json::Value, k: &str| v.get(k).and_then(|x| x.as_str()).map(str::to_string);
    let named = |media_type: String, others: &[String]| {
        let kind =
            std::iter::once(&media_type).chain(others).find_map(|m| artifact_kind(m)).unwrap_or("artifact").to_string();
        Some(NotImage { kind, media_type })
    };
    let by_tag = || {
        let kind = tag_schema(tag?)?;
        Some(NotImage { kind: kind.to_string(), media_type: format!("tag {}", tag?) })
    };
    let artifact_type = s(&v, "artifactType");
    if let Some(entries) = v.get("manifests").and_then(|m| m.as_array()) {
        if let Some(t) = artifact_type {
            return named(t, &[]);
        }
        if entries.is_empty() {
            return by_tag();
        }
        if entries.iter().any(is_image_entry) {
            // It holds images: scanned whatever its tag is called (a name proves nothing).
            return None;
        }
        // Every entry is an artifact or an attestation: a referrers index (the tag schema's,
        // or one an attestation tool keeps), named by what its entries are.
        let types: Vec<String> = entries.iter().filter_map(|e| s(e, "artifactType")).collect();
        let kind = types.iter().find_map(|t| artifact_kind(t)).unwrap_or("attestation");
        let media_type = types.first().cloned().unwrap_or_else(|| "attestation-manifest".into());
        return Some(NotImage { kind: format!("index of {kind}s"), media_type });
    }
    let config = v.get("config").and_then(|c| s(c, "mediaType"));
    let layers: Vec<String> =
        v.get("layers").and_then(|l| l.as_array()).into_iter().flatten().filter_map(|l| s(l, "mediaType")).collect();
    let mut others: Vec<String> = config.iter().cloned().collect();
    others.extend(layers.iter().cloned());
    // An image config and image layers make an image whatever `artifactType` says: containerd
    // unpacks and runs it by those types, so a label must not hide it from the gate.
    let image_config = config.as_deref().is_some_and(|c| IMAGE_CONFIGS.contains(&c));
    if image_config && layers.iter().all(|l| is_image_layer(l)) {
        return None;
    }
    if let Some(t) = artifact_type {
        return named(t, &others);
    }
    if let Some(c) = config.filter(|c| !IMAGE_CONFIGS.contains(&c.as_str())) {
        return named(c, &layers);
    }
    if let Some(l) = layers.iter().find(|l| !is_image_layer(l)) {
        return named(l.clone(), &layers);
    }
    // An image manifest: scanned, whatever its tag is called. cosign's signatures and
    // attestations are told by their layers above; a tag schema alone would let an image
    // pushed as `sha256-<hex>.sig` pass the gate unread.
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(artifact_type: Option<&str>, config: &str, layers: &[&str]) -> Vec<u8> {
        let mut m = serde_json::json!({
            "schemaVersion": 2, "mediaType": MediaType::ImageManifest.to_string(),
            "config": {"mediaType": config, "digest": "sha256:c", "size": 2},
            "layers": layers.iter().map(|l| serde_json::json!({"mediaType": l, "digest": "sha256:l", "size": 1})).collect::<Vec<_>>(),
        });
        if let Some(t) = artifact_type {
            m["artifactType"] = t.into();
        }
        serde_json::to_vec(&m).unwrap()
    }

    fn what(m: &[u8], tag: Option<&str>) -> Option<String> {
        not_an_image(m, tag).map(|n| n.to_string())
    }

    #[test]
    fn images_and_artifacts_are_told_apart_by_media_types_and_tag_schemas() {
        let oci = "application/vnd.oci.image.config.v1+json";
        let gz = "application/vnd.oci.image.layer.v1.tar+gzip";
        let empty = MediaType::EmptyJSON.to_string();
        // Images: OCI and Docker, no layers at all, nondistributable and zstd layers.
        assert_eq!(what(&manifest(None, oci, &[gz, "application/vnd.oci.image.layer.v1.tar+zstd"]), Some("1")), None);
        let docker = manifest(
            None,
            "application/vnd.docker.container.image.v1+json",
            &["application/vnd.docker.image.rootfs.diff.tar.gzip"],
        );
        assert_eq!(what(&docker, Some("latest")), None);
        assert_eq!(what(&manifest(None, oci, &[]), None), None);
        // Helm: its config type; its chart layer names it too.
        let helm = manifest(
            None,
            "application/vnd.cncf.helm.config.v1+json",
            &["application/vnd.cncf.helm.chart.content.v1.tar+gzip"],
        );
        assert_eq!(what(&helm, Some("0.1.0")).unwrap(), "Helm chart, application/vnd.cncf.helm.config.v1+json");
        // cosign: an image config, a simple-signing layer.
        let sig = manifest(None, oci, &["application/vnd.dev.cosign.simplesigning.v1+json"]);
        assert_eq!(what(&sig, None).unwrap(), "cosign signature, application/vnd.dev.cosign.simplesigning.v1+json");
        let att = manifest(None, oci, &["application/vnd.dsse.envelope.v1+json"]);
        assert_eq!(what(&att, None).unwrap(), "DSSE attestation, application/vnd.dsse.envelope.v1+json");
        // OCI 1.1 artifacts: artifactType first, whatever the config.
        let sbom = manifest(Some("application/spdx+json"), &empty, &["application/spdx+json"]);
        assert_eq!(what(&sbom, None).unwrap(), "SBOM, application/spdx+json");
        // An image config and image layers labelled as an SBOM: containerd runs it, so it is an
        // image (scanned), whatever the label.
        assert_eq!(what(&manifest(Some("application/spdx+json"), oci, &[gz]), None), None);
        let store = manifest(Some(LAYER_ANALYSIS), &empty, &[LAYER_ANALYSIS_ENTRY]);
        assert_eq!(what(&store, None).unwrap(), format!("cudalint analysis store entry, {LAYER_ANALYSIS}"));
        assert_eq!(
            what(&manifest(Some(IN_TOTO), &empty, &[IN_TOTO]), None).unwrap(),
            format!("in-toto attestation, {IN_TOTO}")
        );
        // The empty config without artifactType: named by its layers, else an artifact.
        assert_eq!(what(&manifest(None, &empty, &["text/spdx"]), None).unwrap(), format!("SBOM, {empty}"));
        assert_eq!(
            what(&manifest(None, &empty, &["application/x-thing"]), None).unwrap(),
            format!("artifact, {empty}")
        );
        // An image layer list with one foreign blob is not an image.
        assert_eq!(
            what(&manifest(None, oci, &[gz, "application/octet-stream"]), None).unwrap(),
            "artifact, application/octet-stream"
        );
        // Tag schemas: cosign's suffixes, the referrers tag schema, name an empty index; an
        // image is scanned whatever its tag says (an image pushed as `sha256-<hex>.sig` holds
        // device code like any other).
        let hex = "a".repeat(64);
        let image = manifest(None, oci, &[gz]);
        let empty_index = serde_json::to_vec(
            &serde_json::json!({"schemaVersion": 2, "mediaType": MediaType::ImageIndex.to_string(), "manifests": []}),
        )
        .unwrap();
        for (suffix, kind) in [
            (".sig", "cosign signature"),
            (".att", "cosign attestation"),
            (".sbom", "cosign SBOM"),
            ("", "referrers index"),
        ] {
            let tag = format!("sha256-{hex}{suffix}");
            assert_eq!(what(&empty_index, Some(&tag)).unwrap(), format!("{kind}, tag {tag}"));
            assert_eq!(what(&image, Some(&tag)), None, "{tag}");
        }
        for tag in [format!("sha256-{}.sig", "a".repeat(63)), format!("sha256-{hex}.old"), format!("x-sha256-{hex}")] {
            assert_eq!(what(&image, Some(&tag)), None, "{tag}");
            assert_eq!(what(&empty_index, Some(&tag)), None, "{tag}");
        }
    }

    #[test]
    fn an_index_is_an_image_while_any_entry_is_one() {
        let entry = |extra: serde_json::Value| {
            let mut d =
                serde_json::json!({"mediaType": MediaType::ImageManifest.to_string(), "digest": "sha256:d", "size": 1});
            d.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            d
        };
        let index = |entries: Vec<serde_json::Value>| {
            serde_json::to_vec(&serde_json::json!({"schemaVersion": 2, "mediaType": MediaType::ImageIndex.to_string(), "manifests": entries})).unwrap()
        };
        let image = entry(serde_json::json!({"platform": {"os": "linux", "architecture": "amd64"}}));
        let buildkit = entry(serde_json::json!({
            "platform": {"os": "unknown", "architecture": "unknown"},
            "annotations": {"vnd.docker.reference.type": "attestation-manifest", "vnd.docker.reference.digest": "sha256:d"}}));
        let referrer = entry(serde_json::json!({"artifactType": IN_TOTO}));
        assert!(is_image_entry(&image) && !is_image_entry(&buildkit) && !is_image_entry(&referrer));
        assert_eq!(not_an_image(&index(vec![image.clone(), buildkit.clone()]), Some("1")), None);
        assert_eq!(
            what(&index(vec![referrer]), Some(&format!("sha256-{}", "b".repeat(64)))).unwrap(),
            format!("index of in-toto attestations, {IN_TOTO}")
        );
        assert_eq!(what(&index(vec![buildkit]), None).unwrap(), "index of attestations, attestation-manifest");
        // An empty index is left to the scan (which says it names no image).
        assert_eq!(not_an_image(&index(vec![]), None), None);
        // Not JSON: left to the scan too.
        assert_eq!(not_an_image(b"<html>", None), None);
    }
}
