//! Images in registries, read through the registry client: the registry seen as an OCI layout
//! (manifests and configs fetched by digest, verified), layers streamed as they download. Cached
//! and stored analyses, attestations: the pipeline asks, this source answers.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::time::Instant;

use oci_client::Reference;

use super::oci::{self, Platform, Resolved, Store};
use super::pipeline::{self, Blob, LayerSource};
use super::{ImageReport, ScanError, ScanOptions, SourceKind, attest};
use crate::escape::text as esc;
use crate::layer::{AnalyzedLayer, LayerRef};
use crate::registry::media::MediaType;
use crate::registry::{MAX_MANIFEST_READS, Remote, parse_reference};

/// The registry seen as an image layout: `index.json` is the reference's manifest (or an index
/// made of it), blobs are fetched by digest (manifests first, then blobs), each once.
struct RemoteStore<'a> {
    remote: &'a Remote,
    index: Vec<u8>,
    /// Documents already fetched, by digest (verified).
    known: HashMap<String, Vec<u8>>,
    /// Digests an index lists: fetched from the manifests endpoint; anything else is a blob.
    manifests: HashSet<String>,
    reads: usize,
}

impl RemoteStore<'_> {
    fn learn(&mut self, json: &[u8]) {
        let v: serde_json::Value = serde_json::from_slice(json).unwrap_or_default();
        for m in v.get("manifests").and_then(|m| m.as_array()).into_iter().flatten() {
            if let Some(d) = m.get("digest").and_then(|d| d.as_str()) {
                self.manifests.insert(d.to_string());
            }
        }
    }
}

impl Store for RemoteStore<'_> {
    fn read_small(&mut self, key: &str) -> Result<Vec<u8>, ScanError> {
        if key == "index.json" {
            let index = self.index.clone();
            self.learn(&index);
            return Ok(index);
        }
        self.reads += 1;
        if self.reads > MAX_MANIFEST_READS {
            return Err(ScanError::Image(format!(
                "{}: its image indexes fan out to more than {MAX_MANIFEST_READS} manifests",
                esc(&self.remote.reference.whole())
            )));
        }
        let digest = key.strip_prefix("blobs/").map(|k| k.replacen('/', ":", 1)).unwrap_or_else(|| key.to_string());
        if let Some(b) = self.known.get(&digest) {
            return Ok(b.clone());
        }
        let b = if self.manifests.contains(&digest) {
            let by_digest = Reference::with_digest(
                self.remote.reference.registry().to_string(),
                self.remote.reference.repository().to_string(),
                digest.clone(),
            );
            let (b, _) = self.remote.manifest(&by_digest)?;
            self.learn(&b);
            b
        } else {
            self.remote.small_blob(&digest)?
        };
        self.known.insert(digest, b.clone());
        Ok(b)
    }
}

fn media_type_of(json: &[u8]) -> String {
    let v: serde_json::Value = serde_json::from_slice(json).unwrap_or_default();
    match v.get("mediaType").and_then(|m| m.as_str()) {
        Some(m) => m.to_string(),
        None if v.get("manifests").is_some() => MediaType::ImageIndex.to_string(),
        None => MediaType::ImageManifest.to_string(),
    }
}

/// An image in a registry, as a layer source.
pub struct RemoteImage {
    spec: String,
    reference: Reference,
    remote: Remote,
    /// Manifests, configs and indexes fetched while resolving, by digest.
    known: HashMap<String, Vec<u8>>,
    /// The image manifest an attestation is about (`--attest`, `--from-attestation`).
    subject: Option<attest::Subject>,
    /// `--attest`: push an attestation of the report (the layers are kept for it).
    push: bool,
    /// The scan's counters (layers pulled).
    counts: std::sync::Arc<super::LayerCounts>,
}

impl RemoteImage {
    pub fn connect(spec: &str, opts: &ScanOptions) -> Result<RemoteImage, ScanError> {
        let reference = parse_reference(spec)?;
        let remote = Remote::connect(reference.clone(), &opts.registry)?;
        Ok(RemoteImage {
            spec: spec.to_string(),
            reference,
            remote,
            known: HashMap::new(),
            subject: None,
            push: false,
            counts: opts.counts.clone(),
        })
    }

    fn by_digest(&self, digest: &str) -> Reference {
        Reference::with_digest(
            self.reference.registry().to_string(),
            self.reference.repository().to_string(),
            digest.to_string(),
        )
    }
}

impl LayerSource for RemoteImage {
    fn kind(&self) -> SourceKind {
        SourceKind::Registry
    }

    fn resolve(&mut self, platform: &Platform) -> Result<Resolved, ScanError> {
        let (top, top_digest) = self.remote.manifest(&self.reference)?;
        let mt = media_type_of(&top);
        let index = if mt.contains("index") || mt.contains("manifest.list") {
            top.clone()
        } else {
            serde_json::to_vec(&serde_json::json!({
                "schemaVersion": 2,
                "manifests": [{"mediaType": mt, "digest": top_digest, "size": top.len()}],
            }))
            .expect("json")
        };
        let mut store = RemoteStore {
            remote: &self.remote,
            index,
            known: HashMap::from([(top_digest, top)]),
            manifests: Default::default(),
            reads: 0,
        };
        let mut resolved = oci::resolve_oci(&mut store, None, platform)?;
        resolved.name = Some(self.reference.whole());
        self.known = store.known;
        Ok(resolved)
    }

    fn prepare(&mut self, layers: &[LayerRef]) -> Result<Option<u64>, ScanError> {
        Ok(Some(layers.iter().filter_map(|l| l.size).sum()))
    }

    fn open(&self, l: &LayerRef) -> Result<Blob<'_>, ScanError> {
        let digest = l.digest.clone().expect("registry layers have digests");
        crate::digest::parse(&digest)
            .map_err(|e| ScanError::Layer { layer: digest.clone(), message: e.to_string() })?;
        self.counts.pulled.fetch_add(1, Ordering::Relaxed);
        // The walker hashes the blob by its digest's algorithm; the download checks sha512
        // digests itself too (a mismatch ends the stream with an error).
        Ok(Blob::Stream(Box::new(self.remote.blob(&digest, l.size)?)))
    }

    fn trusts_digests(&self) -> bool {
        // Blobs are fetched by digest and verified as they arrive: an analysis filed under a
        // verified digest is one of the same bytes.
        true
    }

    fn known(
        &mut self,
        resolved: &Resolved,
        opts: &ScanOptions,
    ) -> Result<Option<HashMap<String, AnalyzedLayer>>, ScanError> {
        if !opts.attest && !opts.from_attestation {
            return Ok(None);
        }
        let Some(d) = &resolved.manifest_digest else {
            return Err(ScanError::Image(format!(
                "{}: no manifest digest to attach an attestation to",
                esc(&self.spec)
            )));
        };
        let m = match self.known.get(d) {
            Some(m) => m.clone(),
            None => self.remote.manifest(&self.by_digest(d))?.0,
        };
        let subject = attest::Subject {
            repository: self.reference.repository().into(),
            digest: d.clone(),
            size: m.len(),
            media_type: media_type_of(&m),
        };
        let attested = if opts.from_attestation {
            Some(attest::read(&self.remote, &subject, &crate::cache::variant(&opts.inspect))?)
        } else {
            None
        };
        self.subject = Some(subject);
        self.push = opts.attest;
        Ok(attested)
    }

    fn keeps_layers(&self) -> bool {
        self.push
    }

    fn finish(
        &mut self,
        report: &mut ImageReport,
        layers: Option<Vec<AnalyzedLayer>>,
        opts: &ScanOptions,
    ) -> Result<(), ScanError> {
        report.stats.downloaded_bytes = self.remote.downloaded.load(Ordering::Relaxed);
        if let (Some(layers), Some(s)) = (layers, &self.subject) {
            let variant = crate::cache::variant(&opts.inspect);
            let st = attest::statement(s, &self.reference.whole(), &variant, &layers, report)?;
            let scope = format!("repository:{}:pull,push", self.reference.repository());
            let push = Remote::connect_scoped(
                self.reference.clone(),
                &opts.registry,
                scope,
                Instant::now() + opts.registry.deadline,
            )?;
            attest::push(&push, s, &st)?;
        }
        Ok(())
    }
}

/// Scans an image in a registry.
pub fn scan(spec: &str, opts: &ScanOptions) -> Result<ImageReport, ScanError> {
    pipeline::run(&mut RemoteImage::connect(spec, opts)?, opts)
}
