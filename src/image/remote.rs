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
use crate::registry::media::{self, MediaType, NotImage};
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

/// The subject of attestations: the image manifest `digest` in `remote`'s repository (fetched
/// unless among the documents already `known`).
fn subject(remote: &Remote, digest: &str, known: &HashMap<String, Vec<u8>>) -> Result<attest::Subject, ScanError> {
    let m = match known.get(digest) {
        Some(m) => m.clone(),
        None => {
            let r = &remote.reference;
            remote.manifest(&Reference::with_digest(r.registry().into(), r.repository().into(), digest.into()))?.0
        }
    };
    Ok(attest::Subject {
        repository: remote.reference.repository().into(),
        digest: digest.to_string(),
        size: m.len(),
        media_type: media_type_of(&m),
    })
}

/// A connection that may push into `reference`'s repository.
fn pusher(reference: &Reference, opts: &ScanOptions) -> Result<Remote, ScanError> {
    let scope = format!("repository:{}:pull,push", reference.repository());
    Ok(Remote::connect_scoped(reference.clone(), &opts.registry, scope, Instant::now() + opts.registry.deadline)?)
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
    /// What reading the attestations had to say (passed over, unsigned), for the report.
    notes: Vec<String>,
    /// The attestation the layer analyses came from (`--from-attestation`).
    attested_from: Option<super::AttestationUse>,
    /// The scan's counters (layers pulled).
    counts: std::sync::Arc<super::LayerCounts>,
    /// The reference's manifest and digest when already read (by [`probe`]): resolved from
    /// these bytes, not read again.
    top: Option<(Vec<u8>, String)>,
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
            notes: Vec::new(),
            attested_from: None,
            counts: opts.counts.clone(),
            top: None,
        })
    }
}

/// A registry tag that is not an image, as scan errors say it.
fn not_an_image(spec: &str, what: &NotImage) -> ScanError {
    ScanError::Image(format!("{}: not an image ({})", esc(spec), esc(&what.to_string())))
}

/// The index an image is resolved from, without the entries that are no image: artifacts
/// listed in it (`artifactType`) and BuildKit's attestation manifests. (Only the top index can
/// be rewritten: nested ones are verified against their digests as read.)
fn images_only(index: &[u8]) -> Vec<u8> {
    let mut v: serde_json::Value = match serde_json::from_slice(index) {
        Ok(v) => v,
        Err(_) => return index.to_vec(),
    };
    if let Some(entries) = v.get_mut("manifests").and_then(|m| m.as_array_mut()) {
        entries.retain(media::is_image_entry);
    }
    serde_json::to_vec(&v).expect("json")
}

impl LayerSource for RemoteImage {
    fn kind(&self) -> SourceKind {
        SourceKind::Registry
    }

    fn resolve(&mut self, platform: &Platform) -> Result<Resolved, ScanError> {
        let (top, top_digest) = match self.top.take() {
            Some(t) => t,
            None => self.remote.manifest(&self.reference)?,
        };
        if let Some(what) = media::not_an_image(&top, self.reference.tag()) {
            return Err(not_an_image(&self.reference.whole(), &what));
        }
        let mt = media_type_of(&top);
        let index = if mt.contains("index") || mt.contains("manifest.list") {
            images_only(&top)
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

    fn downloads(&self) -> bool {
        true
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
        let subject = subject(&self.remote, d, &self.known)?;
        let attested = if opts.from_attestation {
            let b = attest::read(&self.remote, &subject, &crate::cache::variant(&opts.inspect), &opts.trust)?;
            self.notes = b.notes;
            self.attested_from = b.from;
            b.value
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
        report.notes.append(&mut self.notes);
        report.image.attestation = self.attested_from.take();
        if let (Some(layers), Some(s)) = (layers, &self.subject) {
            let variant = crate::cache::variant(&opts.inspect);
            let st = attest::statement(s, &self.reference.whole(), &variant, &layers, report)?;
            attest::push(&pusher(&self.reference, opts)?, s, attest::PREDICATE_TYPE, &st, opts.sign.as_deref())?;
        }
        Ok(())
    }
}

/// Scans an image in a registry.
pub fn scan(spec: &str, opts: &ScanOptions) -> Result<ImageReport, ScanError> {
    pipeline::run(&mut RemoteImage::connect(spec, opts)?, opts)
}

/// What a registry tag holds, told from its manifest (and, for an index of several platforms,
/// its indexes), never a layer.
pub enum Probe {
    /// An image, or an index of images: its manifest's digest, and the platforms it offers when
    /// it is an index of several (sorted, each once; None: one image, scanned whatever its
    /// platform, as `scan` does).
    Image { digest: String, platforms: Option<Vec<Platform>> },
    /// Anything else (a Helm chart, a signature, an SBOM, an analysis-store entry): skipped.
    NotImage { digest: String, what: NotImage },
}

/// Reads the registry tag `spec`'s manifest and tells what it is ([`Probe`]). A single image:
/// its manifest and config are read; an index: the indexes only.
pub fn probe(spec: &str, opts: &ScanOptions) -> Result<Probe, ScanError> {
    let mut image = RemoteImage::connect(spec, opts)?;
    let (top, digest) = image.remote.manifest(&image.reference)?;
    if let Some(what) = media::not_an_image(&top, image.reference.tag()) {
        return Ok(Probe::NotImage { digest, what });
    }
    image.top = Some((top, digest.clone()));
    // `resolve_oci` is what chooses a platform (for `scan` too): asked for one no image has, it
    // takes a single manifest whatever its platform and, among several, names every platform
    // there is. Asking it keeps this list and the manifest each platform's scan reads the same.
    let nowhere = Platform { os: String::new(), arch: String::new(), variant: None };
    let platforms = match image.resolve(&nowhere) {
        Ok(_) => None,
        // Several manifests, none with a platform: the scan says so (no platform to choose).
        Err(ScanError::Platform { available, .. }) if available.is_empty() => None,
        Err(ScanError::Platform { available, .. }) => {
            let mut ps = available
                .iter()
                .map(|p| Platform::parse(p))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| ScanError::Image(format!("{}: {e} in its index", esc(spec))))?;
            ps.sort_by_key(Platform::to_string);
            ps.dedup();
            Some(ps)
        }
        Err(e) => return Err(e),
    };
    Ok(Probe::Image { digest, platforms })
}

/// The creation time (`created` of the image config, as written; None if it has none) of each
/// of `tags` of `registry`'s repository `repo`, in order, over one connection: manifests and
/// configs only, no layer. An index is dated by its `prefer` image, else by its first platform's
/// (platforms of one build are created together). Err: the connection failed; an inner Err: that
/// tag could not be read.
pub fn creation_times(
    registry: &str,
    repo: &str,
    tags: &[String],
    prefer: &Platform,
    opts: &ScanOptions,
) -> Result<Vec<Result<Option<String>, ScanError>>, ScanError> {
    let Some(first) = tags.first() else { return Ok(Vec::new()) };
    let mut image = RemoteImage::connect(&format!("{registry}/{repo}:{first}"), opts)?;
    let mut out = Vec::with_capacity(tags.len());
    for tag in tags {
        let one = parse_reference(&format!("{registry}/{repo}:{tag}")).map_err(ScanError::from).and_then(|r| {
            // Another tag of the same repository: the connection (and its token) serves it too.
            image.reference = r.clone();
            image.remote.reference = r;
            let resolved = match image.resolve(prefer) {
                Err(ScanError::Platform { available, .. }) if !available.is_empty() => {
                    let p = Platform::parse(&available[0]).map_err(|e| ScanError::Image(e.to_string()))?;
                    image.resolve(&p)
                }
                r => r,
            }?;
            Ok(resolved.config.created().clone())
        });
        out.push(one);
    }
    Ok(out)
}

/// The support matrix attached to the registry image `spec` (`support --from-attestation`):
/// the platform's manifest is resolved (manifests and the config are read, no layer), and the
/// support statement its trust believes is read ([`attest::read_support`]).
pub fn read_support<T>(
    spec: &str,
    opts: &ScanOptions,
    parse: &dyn Fn(&serde_json::Value) -> Result<T, String>,
) -> Result<attest::Believed<T>, ScanError> {
    let mut image = RemoteImage::connect(spec, opts)?;
    let resolved = image.resolve(&opts.platform.clone().unwrap_or_else(Platform::host))?;
    let Some(d) = &resolved.manifest_digest else {
        return Err(ScanError::Image(format!("{}: no manifest digest to read an attestation of", esc(spec))));
    };
    let subject = subject(&image.remote, d, &image.known)?;
    attest::read_support(&image.remote, &subject, &opts.trust, parse)
}

/// Pushes the support statement of the registry image `spec`'s manifest `manifest_digest` (the
/// one its scan read: `ImageReport.image.manifest_digest`) beside the inventory attestation:
/// `support` is the `cudalint.support/v1` document. One push-scoped connection; the manifest is
/// read again by digest for the subject's size and media type. Returns the attestation
/// manifest's digest.
pub fn attach_support(
    spec: &str,
    opts: &ScanOptions,
    manifest_digest: &str,
    support: &serde_json::Value,
) -> Result<String, ScanError> {
    let reference = parse_reference(spec)?;
    let push = pusher(&reference, opts)?;
    let subject = subject(&push, manifest_digest, &HashMap::new())?;
    let st = attest::support_statement(&subject, &reference.whole(), support);
    attest::push(&push, &subject, attest::SUPPORT_PREDICATE_TYPE, &st, opts.sign.as_deref())
}
