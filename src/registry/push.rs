//! Writing to a registry: blob uploads, manifest PUTs, and the one way cudalint pushes an OCI
//! artifact (analysis-store claims and entries, attestations): [`Remote::push_artifact`].

use std::sync::atomic::Ordering;

use reqwest::{Method, StatusCode};

use super::RegistryError;
use super::client::Remote;
use super::http;
use super::media::MediaType;
use crate::digest;
use crate::escape::text as esc;

/// The config of every artifact cudalint pushes, and the payload of one that is all annotations.
const EMPTY: &[u8] = b"{}";

/// An OCI artifact: an image manifest whose config is the empty descriptor and whose one layer
/// is the payload.
pub struct Artifact<'a> {
    pub artifact_type: &'a str,
    /// The payload's media type, and its bytes. An artifact that is its annotations alone
    /// carries the empty JSON (`{}`, `MediaType::EmptyJSON`).
    pub payload_type: &'a str,
    pub payload: &'a [u8],
    /// The manifest the artifact is about (the referrers API lists it there).
    pub subject: Option<Subject<'a>>,
    pub annotations: &'a [(&'a str, &'a str)],
    /// Tagged so, or (`None`) put by its own digest.
    pub tag: Option<&'a str>,
    /// How messages name the manifest (`manifest`, `attestation manifest`).
    pub label: &'a str,
}

/// A descriptor of the manifest an artifact is about.
pub struct Subject<'a> {
    pub media_type: &'a str,
    pub digest: &'a str,
    pub size: usize,
}

/// What the registry made of a pushed artifact.
pub struct Pushed {
    /// The manifest's digest (sha256) and size.
    pub digest: String,
    pub size: usize,
    /// The registry took the subject itself (it answered `OCI-Subject`): its referrers API lists
    /// the artifact. Otherwise the pusher maintains the referrers tag schema's index.
    pub subject_indexed: bool,
}

impl Artifact<'_> {
    /// The manifest's bytes (serde_json's objects keep keys sorted: the same artifact is always
    /// the same bytes, and so the same digest).
    pub fn manifest(&self) -> Vec<u8> {
        let descriptor = |media_type: &str, digest: &str, size: usize| serde_json::json!({"mediaType": media_type, "digest": digest, "size": size});
        let empty = MediaType::EmptyJSON.to_string();
        let mut m = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": MediaType::ImageManifest.to_string(),
            "artifactType": self.artifact_type,
            "config": descriptor(&empty, &digest::sha256(EMPTY), EMPTY.len()),
            "layers": [descriptor(self.payload_type, &digest::sha256(self.payload), self.payload.len())],
        });
        if let Some(s) = &self.subject {
            m["subject"] = descriptor(s.media_type, s.digest, s.size);
        }
        if !self.annotations.is_empty() {
            let a: serde_json::Map<String, serde_json::Value> =
                self.annotations.iter().map(|(k, v)| (k.to_string(), (*v).into())).collect();
            m["annotations"] = a.into();
        }
        serde_json::to_vec(&m).expect("json")
    }
}

impl Remote {
    /// Pushes an artifact into this connection's repository: the empty config, the payload,
    /// then the manifest (under its tag, or its digest).
    pub fn push_artifact(&self, a: &Artifact) -> Result<Pushed, RegistryError> {
        self.upload(EMPTY)?;
        if a.payload != EMPTY {
            self.upload(a.payload)?;
        }
        let body = a.manifest();
        let (digest, size) = (digest::sha256(&body), body.len());
        let name = a.tag.unwrap_or(&digest);
        let path = format!("/v2/{}/manifests/{name}", self.reference.repository());
        let content_type = MediaType::ImageManifest.to_string();
        let res = self.send(Method::PUT, &path, Some(&content_type), body, &format!("{} {name}", a.label))?;
        Ok(Pushed { digest, size, subject_indexed: res.headers().contains_key("oci-subject") })
    }

    /// A blob, uploaded monolithically (POST, then PUT with the digest) unless already there.
    pub fn upload(&self, data: &[u8]) -> Result<(), RegistryError> {
        let digest = digest::sha256(data);
        let repo = self.reference.repository();
        let what = format!("blob {digest}");
        match self.send(Method::HEAD, &format!("/v2/{repo}/blobs/{digest}"), None, Vec::new(), &what) {
            Ok(_) => return Ok(()),
            // A registry that cannot be reached will not take the upload either.
            Err(e) if e.is_unreachable() => return Err(e),
            Err(_) => {}
        }
        let res = self.send(Method::POST, &format!("/v2/{repo}/blobs/uploads/"), None, Vec::new(), &what)?;
        let loc = res
            .headers()
            .get(reqwest::header::LOCATION)
            .and_then(|l| l.to_str().ok())
            .ok_or_else(|| RegistryError::request(&what, "upload started without a Location"))?;
        let mut url = self.inner.base.join(loc).map_err(|e| RegistryError::request(&what, e.to_string()))?;
        if url.host_str() != self.inner.base.host_str() || url.port() != self.inner.base.port() {
            // Credentials go to the registry's own host only.
            return Err(RegistryError::request(&what, format!("upload location {} is on another host", esc(loc))));
        }
        url.query_pairs_mut().append_pair("digest", &digest);
        self.send_url(Method::PUT, url, Some("application/octet-stream"), data.to_vec(), &what)?;
        Ok(())
    }

    pub fn send(
        &self,
        method: Method,
        path: &str,
        content_type: Option<&str>,
        body: Vec<u8>,
        what: &str,
    ) -> Result<reqwest::Response, RegistryError> {
        self.send_url(method, self.inner.url(path), content_type, body, what)
    }

    /// One request with the connection's authorization (renewed once on 401); non-success is an
    /// error.
    pub fn send_url(
        &self,
        method: Method,
        url: reqwest::Url,
        content_type: Option<&str>,
        body: Vec<u8>,
        what: &str,
    ) -> Result<reqwest::Response, RegistryError> {
        let inner = &self.inner;
        self.rt.block_on(async {
            let mut renewed = false;
            loop {
                let auth = inner.auth.current();
                let mut r = inner.http.request(method.clone(), url.clone()).body(body.clone());
                if let Some(a) = &auth {
                    r = r.header(reqwest::header::AUTHORIZATION, a);
                }
                if let Some(c) = content_type {
                    r = r.header(reqwest::header::CONTENT_TYPE, c);
                }
                inner.requests.fetch_add(1, Ordering::Relaxed);
                let res = http::send(r, inner.limits, what, body.len() as u64).await.map_err(|f| f.error)?;
                if res.status() == StatusCode::UNAUTHORIZED && !renewed {
                    renewed = true;
                    inner.renew().await.map_err(|f| f.error)?;
                    continue;
                }
                if !res.status().is_success() {
                    return Err(http::status_error(res, inner.limits, what).await);
                }
                return Ok(res);
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::media::{IN_TOTO, LAYER_ANALYSIS, LAYER_ANALYSIS_ENTRY, LAYER_CLAIM};

    /// The three manifests cudalint pushes are the bytes they were when each was built by hand
    /// (the `json!` below is the hand-built one): stores and attestations already pushed read the
    /// same, and an attestation's digest does not move.
    #[test]
    fn artifacts_are_the_manifests_built_by_hand_before() {
        let empty = b"{}";
        let e = digest::sha256(empty);
        let (manifest, empty_type) =
            ("application/vnd.oci.image.manifest.v1+json", "application/vnd.oci.empty.v1+json");
        let claim = Artifact {
            artifact_type: LAYER_CLAIM,
            payload_type: MediaType::EmptyJSON.as_ref(),
            payload: empty,
            subject: None,
            annotations: &[
                ("dev.cudalint.claim.id", "c1"),
                ("dev.cudalint.claim.at", "17"),
                ("dev.cudalint.layer.digest", "sha256:l"),
            ],
            tag: Some("cudalint-claim-k"),
            label: "manifest",
        };
        let by_hand = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": manifest,
            "artifactType": LAYER_CLAIM,
            "config": {"mediaType": empty_type, "digest": e, "size": empty.len()},
            "layers": [{"mediaType": empty_type, "digest": e, "size": empty.len()}],
            "annotations": {"dev.cudalint.claim.id": "c1", "dev.cudalint.claim.at": "17".to_string(),
                            "dev.cudalint.layer.digest": "sha256:l"},
        });
        assert_eq!(claim.manifest(), serde_json::to_vec(&by_hand).unwrap());

        let entry = b"entry bytes";
        let analysis = Artifact {
            artifact_type: LAYER_ANALYSIS,
            payload_type: LAYER_ANALYSIS_ENTRY,
            payload: entry,
            subject: None,
            annotations: &[("dev.cudalint.layer.digest", "sha256:l")],
            tag: Some("cudalint-layer-k"),
            label: "manifest",
        };
        let by_hand = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": manifest,
            "artifactType": LAYER_ANALYSIS,
            "config": {"mediaType": empty_type, "digest": e, "size": empty.len()},
            "layers": [{"mediaType": LAYER_ANALYSIS_ENTRY, "digest": digest::sha256(entry), "size": entry.len()}],
            "annotations": {"dev.cudalint.layer.digest": "sha256:l"},
        });
        assert_eq!(analysis.manifest(), serde_json::to_vec(&by_hand).unwrap());

        let statement = br#"{"_type":"x"}"#;
        let attestation = Artifact {
            artifact_type: IN_TOTO,
            payload_type: IN_TOTO,
            payload: statement,
            subject: Some(Subject { media_type: manifest, digest: "sha256:s", size: 42 }),
            annotations: &[("in-toto.io/predicate-type", "https://cudalint.dev/attestation/inventory/v1")],
            tag: None,
            label: "attestation manifest",
        };
        let by_hand = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": manifest,
            "artifactType": IN_TOTO,
            "config": {"mediaType": empty_type, "digest": e, "size": empty.len()},
            "layers": [{"mediaType": IN_TOTO, "digest": digest::sha256(statement), "size": statement.len()}],
            "subject": {"mediaType": manifest, "digest": "sha256:s", "size": 42},
            "annotations": {"in-toto.io/predicate-type": "https://cudalint.dev/attestation/inventory/v1"},
        });
        let bytes = attestation.manifest();
        assert_eq!(bytes, serde_json::to_vec(&by_hand).unwrap());
        // Keys sorted, as serde_json wrote them by hand (no `preserve_order`).
        assert!(
            bytes.starts_with(br#"{"annotations":{"in-toto.io/predicate-type""#),
            "{}",
            String::from_utf8_lossy(&bytes)
        );
    }
}
