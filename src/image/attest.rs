//! Inventory attestations: `scan --attest` pushes an in-toto statement about an image manifest
//! (its subject) holding the image's inventory and the analysis of each layer; `scan
//! --from-attestation` reads it back and judges the image (for any targets) without pulling a
//! layer. Attached as an OCI referrer: the manifest names the image as `subject`; where the
//! registry does not answer the referrers API (the CNCF distribution registry 2.x), the referrers
//! tag schema's index (`sha256-<hex>` tag) lists it. Format: docs/schema.md.

use std::collections::HashMap;

use base64::Engine as _;
use oci_client::Reference;
use reqwest::Method;

use super::{ImageReport, ScanError};
use crate::escape::text as esc;
use crate::layer::AnalyzedLayer;
use crate::registry::media::{IN_TOTO, MediaType};
use crate::registry::{self, Artifact, Remote};

pub const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";
pub const PREDICATE_TYPE: &str = "https://cudalint.dev/attestation/inventory/v1";
const PREDICATE_ANNOTATION: &str = "in-toto.io/predicate-type";
/// The most a statement may be (it holds every layer's analysis).
const MAX_STATEMENT: u64 = 64 << 20;

/// The subject: the image manifest the layers were read from.
pub struct Subject {
    pub repository: String,
    pub digest: String,
    pub size: usize,
    pub media_type: String,
}

/// The statement (JSON bytes). Every layer's analysis goes in as its cache entry (key and body
/// hash inside); a layer whose digest was not verified cannot be attested.
pub fn statement(
    subject: &Subject,
    name: &str,
    variant: &str,
    layers: &[AnalyzedLayer],
    report: &ImageReport,
) -> Result<Vec<u8>, ScanError> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut entries = Vec::new();
    for l in layers {
        let e = crate::cache::encode(&l.info.digest, variant, l)
            .map_err(|e| ScanError::Input { what: "attestation".into(), message: e.to_string() })?
            .ok_or_else(|| ScanError::Layer {
                layer: l.info.digest.clone(),
                message: "not verified against its digest: cannot be attested (--verify)".into(),
            })?;
        entries.push(serde_json::json!({"digest": l.info.digest, "entry": b64.encode(e)}));
    }
    let (alg, hex) = subject.digest.split_once(':').expect("digests are algorithm:hex");
    let st = serde_json::json!({
        "_type": STATEMENT_TYPE,
        "subject": [{"name": name, "digest": {alg: hex}}],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "tool": {"name": "cudalint", "version": env!("CARGO_PKG_VERSION")},
            "variant": variant,
            "layers": entries,
            "inventory": report,
        },
    });
    Ok(serde_json::to_vec(&st).expect("json"))
}

/// The statement as an artifact about `subject`.
fn artifact<'a>(subject: &'a Subject, statement: &'a [u8]) -> Artifact<'a> {
    Artifact {
        artifact_type: IN_TOTO,
        payload_type: IN_TOTO,
        payload: statement,
        subject: Some(registry::Subject {
            media_type: &subject.media_type,
            digest: &subject.digest,
            size: subject.size,
        }),
        annotations: &[(PREDICATE_ANNOTATION, PREDICATE_TYPE)],
        tag: None,
        label: "attestation manifest",
    }
}

/// Pushes the statement as a referrer of `subject` (into `remote`'s repository, the subject's),
/// and lists it in the referrers tag schema's index when the registry did not take the subject
/// itself (no `OCI-Subject` in its answer).
pub fn push(remote: &Remote, subject: &Subject, statement: &[u8]) -> Result<String, ScanError> {
    let pushed = remote.push_artifact(&artifact(subject, statement))?;
    let (digest, size) = (pushed.digest, pushed.size);
    if pushed.subject_indexed {
        return Ok(digest);
    }
    let repo = &subject.repository;
    // Referrers tag schema: read-modify-write of the subject's index (a concurrent writer may
    // drop an entry; the statement itself stays pushed).
    let tag = fallback_tag(&subject.digest);
    let mut index =
        match remote.manifest(&Reference::with_tag(remote.reference.registry().into(), repo.clone(), tag.clone())) {
            Ok((b, _)) => serde_json::from_slice::<serde_json::Value>(&b).unwrap_or_default(),
            Err(_) => serde_json::Value::Null,
        };
    let index_type = MediaType::ImageIndex.to_string();
    if !index.get("manifests").is_some_and(|m| m.is_array()) {
        index = serde_json::json!({"schemaVersion": 2, "mediaType": index_type, "manifests": []});
    }
    let list = index["manifests"].as_array_mut().expect("array");
    list.retain(|d| d.get("digest").and_then(|d| d.as_str()) != Some(digest.as_str()));
    list.push(serde_json::json!({
        "mediaType": MediaType::ImageManifest.to_string(), "digest": digest, "size": size, "artifactType": IN_TOTO,
        "annotations": {PREDICATE_ANNOTATION: PREDICATE_TYPE},
    }));
    remote.send(
        Method::PUT,
        &format!("/v2/{repo}/manifests/{tag}"),
        Some(&index_type),
        serde_json::to_vec(&index).expect("json"),
        &format!("referrers index {tag}"),
    )?;
    Ok(digest)
}

fn fallback_tag(digest: &str) -> String {
    let (alg, hex) = digest.split_once(':').unwrap_or(("sha256", digest));
    let t = format!("{alg}-{hex}");
    t.chars().take(128).collect()
}

/// The referrers of `digest` with our artifact type: the referrers API, else the tag schema.
fn referrers(remote: &Remote, repo: &str, digest: &str) -> Vec<String> {
    let index = match remote.referrers(repo, digest, IN_TOTO) {
        Ok(b) => Some(b),
        Err(_) => remote
            .manifest(&Reference::with_tag(remote.reference.registry().into(), repo.into(), fallback_tag(digest)))
            .ok()
            .map(|(b, _)| b),
    };
    let v: serde_json::Value = index.and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default();
    let mut out = Vec::new();
    for d in v.get("manifests").and_then(|m| m.as_array()).into_iter().flatten() {
        let ours = d.get("artifactType").and_then(|a| a.as_str()) == Some(IN_TOTO)
            && d.pointer(&format!("/annotations/{}", PREDICATE_ANNOTATION.replace('/', "~1"))).and_then(|a| a.as_str())
                == Some(PREDICATE_TYPE);
        if let (true, Some(m)) = (ours, d.get("digest").and_then(|d| d.as_str())) {
            out.push(m.to_string());
        }
    }
    out
}

/// The layer analyses of the newest valid cudalint attestation of `subject` (by layer digest):
/// its statement names the subject, and each entry names its own layer, this cudalint's analysis
/// version and these options, and hashes right. None found: an error (fail closed, nothing is
/// pulled in its place).
pub fn read(remote: &Remote, subject: &Subject, variant: &str) -> Result<HashMap<String, AnalyzedLayer>, ScanError> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let (alg, hex) = subject.digest.split_once(':').expect("digests are algorithm:hex");
    let mut why = String::from("none is attached");
    for m in referrers(remote, &subject.repository, &subject.digest).iter().rev() {
        let r = Reference::with_digest(remote.reference.registry().into(), subject.repository.clone(), m.clone());
        let found = (|| -> Result<HashMap<String, AnalyzedLayer>, String> {
            let (mb, _) = remote.manifest(&r).map_err(|e| e.to_string())?;
            let mv: serde_json::Value = serde_json::from_slice(&mb).map_err(|e| e.to_string())?;
            let layer = mv.pointer("/layers/0").ok_or("no statement in the attestation")?;
            if layer.get("size").and_then(|s| s.as_u64()).is_none_or(|s| s > MAX_STATEMENT) {
                return Err("statement missing or too large".into());
            }
            let d = layer.get("digest").and_then(|d| d.as_str()).ok_or("statement without a digest")?;
            let sb = remote.small_blob_bounded(d, MAX_STATEMENT).map_err(|e| e.to_string())?;
            let st: serde_json::Value = serde_json::from_slice(&sb).map_err(|e| e.to_string())?;
            if st["_type"] != STATEMENT_TYPE || st["predicateType"] != PREDICATE_TYPE {
                return Err("not a cudalint inventory statement".into());
            }
            if !st["subject"].as_array().is_some_and(|s| s.iter().any(|s| s["digest"][alg] == hex)) {
                return Err("its statement is about another image".into());
            }
            let mut out = HashMap::new();
            for e in st["predicate"]["layers"].as_array().ok_or("no layers in the predicate")? {
                let digest = e["digest"].as_str().ok_or("a layer without a digest")?;
                let bytes = b64.decode(e["entry"].as_str().unwrap_or_default()).map_err(|e| e.to_string())?;
                let l = crate::cache::decode(&bytes[..], digest, variant).ok_or_else(|| {
                    format!("layer {digest}: made by another cudalint or with other options, or altered")
                })?;
                out.insert(digest.to_string(), l);
            }
            Ok(out)
        })();
        match found {
            Ok(m) => return Ok(m),
            Err(e) => why = format!("attestation {m}: {}", esc(&e)),
        }
    }
    Err(ScanError::Image(format!(
        "no usable cudalint attestation for {}@{}: {why} (push one with `cudalint scan --attest`)",
        esc(&subject.repository),
        esc(&subject.digest)
    )))
}
