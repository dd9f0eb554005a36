//! A layer-analysis store in a registry repository (`--analysis-store HOST/REPO`): shards on
//! different nodes, with no shared volume, share their layer analyses through the registry.
//!
//! Each analysis is an OCI artifact (artifact type `application/vnd.cudalint.layer-analysis.v1`)
//! whose one blob is the layer cache's entry (header naming the key, body hash; see
//! `crate::cache`), tagged `cudalint-layer-<key>` where `<key>` is the cache key (hex sha256 of
//! analyser version, layer digest and analysis options). A layer blob cannot be the `subject` of
//! a referrer (subjects are manifests), so lookup is by that tag: one manifest GET per layer
//! before it is pulled. An entry is used only when its header names exactly the key looked up
//! and its body hashes to what the header says; anything else is ignored and the layer pulled.
//! A stored analysis is trusted as far as the repository is: whoever can push there can make
//! the scan see what they like in a layer.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use oci_client::Reference;

use super::ScanError;
use crate::cache::LayerKey;
use crate::escape::text as esc;
use crate::layer::AnalyzedLayer;
use crate::registry::media::{LAYER_ANALYSIS, LAYER_ANALYSIS_ENTRY, LAYER_CLAIM, MediaType};
use crate::registry::{Artifact, RegistryError, RegistryOptions, Remote, parse_reference};

/// An entry blob larger than this is not read (the cache's own bound on a decoded entry is
/// larger; compressed entries are far smaller).
const MAX_ENTRY_BLOB: u64 = 64 << 20;
/// How long a claimant gives concurrent claimants' pushes to land before a claim that still
/// reads as its own is its own: long enough on a loaded machine (a registry has no
/// compare-and-swap; the last writer wins).
pub const CLAIM_SETTLE: Duration = Duration::from_secs(1);
/// The longest pause between two reads of a settling claim.
const SETTLE_POLL: Duration = Duration::from_millis(400);

pub struct AnalysisStore {
    remote: Remote,
    /// How long a claim holds: others wait for its analysis at most this long, and a claim
    /// older than this (a killed shard's) is ignored.
    claim_timeout: Duration,
    /// See [`CLAIM_SETTLE`].
    claim_settle: Duration,
    pub claim_waits: AtomicU64,
    pub hits: AtomicU64,
    pub pushed: AtomicU64,
    pub push_errors: AtomicU64,
    warned: AtomicBool,
}

fn tag(k: &LayerKey) -> String {
    format!("cudalint-layer-{}", k.hex())
}

/// Asks `check` until it answers or `deadline` passes (a last ask at the deadline), pausing
/// 100 ms at first and doubling up to `cap`: the store's waits are polls of the registry, which
/// cannot notify.
fn poll<T>(deadline: Instant, cap: Duration, mut check: impl FnMut() -> Option<T>) -> Option<T> {
    let mut pause = Duration::from_millis(100);
    loop {
        if let Some(v) = check() {
            return Some(v);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return None;
        }
        std::thread::sleep(pause.min(left));
        pause = (pause * 2).min(cap);
    }
}

fn claim_tag(k: &LayerKey) -> String {
    format!("cudalint-claim-{}", k.hex())
}

fn now_secs() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// What a shard that missed a layer in the store does.
pub enum Claim {
    /// Analyse it (no one else is, or their claim is stale).
    Mine,
    /// Another shard claimed it first: wait for its analysis (`wait_for`).
    Theirs,
}

impl AnalysisStore {
    /// Connects to `repo` (`host/name`) asking for pull and push.
    pub fn connect(repo: &str, o: &RegistryOptions) -> Result<AnalysisStore, ScanError> {
        let r = parse_reference(repo)?;
        // The store's tags are its own: a tag or digest in the name is a mistake.
        if r.digest().is_some() || r.tag().is_some_and(|t| t != "latest") {
            return Err(ScanError::Input {
                what: format!("--analysis-store {}", esc(repo)),
                message: "name a repository (host/name), without a tag or digest".into(),
            });
        }
        let r = Reference::with_tag(r.registry().to_string(), r.repository().to_string(), "latest".into());
        let scope = format!("repository:{}:pull,push", r.repository());
        // The store is not the image's registry: it gets its own credentials (environment for
        // its host, Docker's config), the command line's only where --registry-credentials
        // names its host. A store lives for the whole run (many images), not one image's deadline.
        let remote = Remote::connect_scoped(
            r,
            &o.not_for_an_image(),
            scope,
            Instant::now() + Duration::from_secs(7 * 24 * 3600),
        )?;
        Ok(AnalysisStore {
            remote,
            claim_timeout: crate::cache::DEFAULT_LOCK_TIMEOUT,
            claim_settle: CLAIM_SETTLE,
            claim_waits: AtomicU64::new(0),
            hits: AtomicU64::new(0),
            pushed: AtomicU64::new(0),
            push_errors: AtomicU64::new(0),
            warned: AtomicBool::new(false),
        })
    }

    pub fn with_claim_timeout(mut self, t: Duration) -> AnalysisStore {
        self.claim_timeout = t;
        self
    }

    pub fn with_claim_settle(mut self, t: Duration) -> AnalysisStore {
        self.claim_settle = t;
        self
    }

    fn reference(&self, tag: String) -> Reference {
        Reference::with_tag(
            self.remote.reference.registry().to_string(),
            self.remote.reference.repository().to_string(),
            tag,
        )
    }

    /// The claim on a key as (id, unix seconds), if one can be read.
    fn read_claim(&self, tag: &str) -> Option<(String, u64)> {
        let (m, _) = self.remote.manifest(&self.reference(tag.to_string())).ok()?;
        let v: serde_json::Value = serde_json::from_slice(&m).ok()?;
        if v.get("artifactType").and_then(|a| a.as_str()) != Some(LAYER_CLAIM) {
            return None;
        }
        let a = v.get("annotations")?;
        let id = a.get("dev.cudalint.claim.id")?.as_str()?.to_string();
        let at = a.get("dev.cudalint.claim.at")?.as_str()?.parse().ok()?;
        Some((id, at))
    }

    /// Single flight across nodes, as far as a registry allows (it has no compare-and-swap):
    /// a live claim by another shard means wait; else push ours, let concurrent claimants'
    /// pushes land, and read it back: the last writer analyses, the others wait. A claim older
    /// than the timeout (a killed shard) counts for nothing. Any registry failure: analyse here.
    ///
    /// The claim is read back as it settles, not once after a fixed sleep: a claimant whose
    /// claim was overwritten knows it lost at the first read that shows another live claim; one
    /// whose claim still stands can know it won only when the settle time has passed.
    pub fn claim(&self, k: &LayerKey) -> Claim {
        let t = claim_tag(k);
        let digest = &k.digest;
        let live = |at: u64| now_secs().saturating_sub(at) < self.claim_timeout.as_secs();
        if self.read_claim(&t).is_some_and(|(_, at)| live(at)) {
            return Claim::Theirs;
        }
        let seed = format!("{} {} {:?} {digest}", std::process::id(), now_secs(), Instant::now());
        let id = crate::digest::sha256(seed.as_bytes())["sha256:".len()..][..32].to_string();
        let pushed = self.write_claim(&t, &id, now_secs(), digest);
        if pushed.is_err() {
            return Claim::Mine;
        }
        // Paid in full only by the shard that wins, which found no analysis and no live claim.
        let overwritten = poll(Instant::now() + self.claim_settle, SETTLE_POLL, || {
            self.read_claim(&t).filter(|(other, at)| *other != id && live(*at))
        });
        if overwritten.is_some() { Claim::Theirs } else { Claim::Mine }
    }

    /// Pushes a claim; `at` 0 releases it (a claim that old is stale to everyone).
    fn write_claim(&self, t: &str, id: &str, at: u64, digest: &str) -> Result<(), RegistryError> {
        let at = at.to_string();
        self.remote.push_artifact(&Artifact {
            artifact_type: LAYER_CLAIM,
            payload_type: MediaType::EmptyJSON.as_ref(),
            payload: b"{}",
            subject: None,
            annotations: &[
                ("dev.cudalint.claim.id", id),
                ("dev.cudalint.claim.at", &at),
                ("dev.cudalint.layer.digest", digest),
            ],
            tag: Some(t),
            label: "manifest",
        })?;
        Ok(())
    }

    /// Waits for another shard's analysis of a layer, at most the claim timeout.
    pub fn wait_for(&self, k: &LayerKey) -> Option<AnalyzedLayer> {
        self.claim_waits.fetch_add(1, Ordering::Relaxed);
        poll(Instant::now() + self.claim_timeout, Duration::from_millis(500), || self.get(k))
    }

    pub fn repository(&self) -> String {
        format!("{}/{}", self.remote.reference.registry(), self.remote.reference.repository())
    }

    /// The stored analysis of a layer, if there is one whose key matches; any failure to read
    /// it (absent, unreachable, malformed, another key) is a miss: the layer is pulled.
    pub fn get(&self, k: &LayerKey) -> Option<AnalyzedLayer> {
        let (m, _) = self.remote.manifest(&self.reference(tag(k))).ok()?;
        let v: serde_json::Value = serde_json::from_slice(&m).ok()?;
        if v.get("artifactType").and_then(|a| a.as_str()) != Some(LAYER_ANALYSIS) {
            return None;
        }
        let layers = v.get("layers")?.as_array()?;
        let [l] = &layers[..] else { return None };
        if l.get("mediaType").and_then(|m| m.as_str()) != Some(LAYER_ANALYSIS_ENTRY)
            || l.get("size").and_then(|s| s.as_u64()).is_none_or(|s| s > MAX_ENTRY_BLOB)
        {
            return None;
        }
        let blob_digest = l.get("digest")?.as_str()?;
        // Verified against its digest by small_blob; then the header must name this key.
        let entry = self.remote.small_blob(blob_digest).ok()?;
        let layer = crate::cache::decode(&entry[..], &k.digest, &k.variant)?;
        self.hits.fetch_add(1, Ordering::Relaxed);
        Some(layer)
    }

    /// Stores an analysis (verified layers only). A failure is counted and said once on stderr:
    /// it costs later shards a pull, never a wrong result.
    pub fn put(&self, k: &LayerKey, layer: &AnalyzedLayer) {
        let entry = match crate::cache::encode(&k.digest, &k.variant, layer) {
            Ok(Some(e)) => e,
            _ => return,
        };
        let pushed = self
            .push(&tag(k), &k.digest, &entry)
            .and_then(|_| self.write_claim(&claim_tag(k), "released", 0, &k.digest));
        match pushed {
            Ok(()) => {
                self.pushed.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                self.push_errors.fetch_add(1, Ordering::Relaxed);
                if !self.warned.swap(true, Ordering::Relaxed) {
                    eprintln!("cudalint: analysis store {}: {e} (analyses are not shared)", esc(&self.repository()));
                }
            }
        }
    }

    fn push(&self, tag: &str, layer_digest: &str, entry: &[u8]) -> Result<(), RegistryError> {
        self.remote.push_artifact(&Artifact {
            artifact_type: LAYER_ANALYSIS,
            payload_type: LAYER_ANALYSIS_ENTRY,
            payload: entry,
            subject: None,
            annotations: &[("dev.cudalint.layer.digest", layer_digest)],
            tag: Some(tag),
            label: "manifest",
        })?;
        Ok(())
    }
}
