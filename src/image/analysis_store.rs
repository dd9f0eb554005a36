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
//! Whoever can push there could make the scan see what they like in a layer, so an entry is
//! believed only when its signature (`dev.cudalint.signature`) verifies against a --verify-key
//! (or, behind --trust-unsigned, as it is); only a verified one is kept in the local cache.
//!
//! A store that goes away (no connection, no answer, a gateway's 502/503/504) is noticed at its
//! first such failure and bypassed from then on: no lookup, claim or push is sent to it again,
//! every layer is analysed here, and the run's summary says so. Its requests are bounded by
//! [`STORE_STALL`], not the scan's own stall timeout, and not retried when they cannot reach
//! it: a cache is worth seconds, not minutes.
//! A shard that claimed layers and then lost the store (or was killed) stops renewing its
//! claims; the others stop waiting for them once the lease ([`CLAIM_LEASE`]) has passed.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use oci_client::Reference;

use super::ScanError;
use super::sign::{Signer, Trust};
use crate::cache::LayerKey;
use crate::escape::text as esc;
use crate::layer::AnalyzedLayer;
use crate::registry::media::{LAYER_ANALYSIS, LAYER_ANALYSIS_ENTRY, LAYER_CLAIM, MediaType};
use crate::registry::{Artifact, RegistryError, RegistryOptions, Remote, parse_reference};

/// An entry blob larger than this is not read (the cache's own bound on a decoded entry is
/// larger; compressed entries are far smaller).
const MAX_ENTRY_BLOB: u64 = 64 << 20;
/// The annotation of a stored analysis that holds its signature (base64 ECDSA P-256 over the
/// DSSE encoding of the entry blob, [`Signer::sign`]): the manifest is the pusher's to write,
/// the signature only the key holder's.
const SIGNATURE_ANNOTATION: &str = "dev.cudalint.signature";
/// Layers smaller than this (compressed) are not claimed (`--store-claim-min`): the claim's
/// settling (about [`CLAIM_SETTLE`]) costs more than analysing such a layer twice.
pub const CLAIM_MIN: u64 = 32 << 20;
/// How far ahead of this machine's clock a claim may be dated and still hold (clocks drift); a
/// claim dated further ahead is stale, not a lease that never ends.
const CLOCK_SKEW: u64 = 60;
/// How long a claimant gives concurrent claimants' pushes to land before a claim that still
/// reads as its own is its own: long enough on a loaded machine (a registry has no
/// compare-and-swap; the last writer wins).
pub const CLAIM_SETTLE: Duration = Duration::from_secs(1);
/// The longest pause between two reads of a settling claim.
const SETTLE_POLL: Duration = Duration::from_millis(400);
/// How long a store request may go without an answer (or without 16 KiB of one), and a
/// connection attempt may take, before the store counts as unreachable: short, because each
/// shard pays it once when the store freezes (a stopped process takes connections and never
/// answers), and a store slower than that to say anything costs less bypassed than waited for.
pub const STORE_STALL: Duration = Duration::from_secs(3);
/// How long a claim holds unless renewed (or the claim timeout, if shorter): its claimant
/// renews it every third of that while it analyses. A claimant that is killed, or that stopped
/// using the store (it found it unreachable), blocks the others this long at most.
pub const CLAIM_LEASE: Duration = Duration::from_secs(15);

/// The connection and what it knows of the store's health, shared with the thread that renews
/// claims.
struct Conn {
    /// None: the store was unreachable when the run began.
    remote: Option<Remote>,
    /// `host/name`, for messages.
    name: String,
    /// Analyses looked up (requests sent; none once the store is unreachable).
    lookups: AtomicU64,
    /// The store failed as a whole once: it is not asked again.
    down: AtomicBool,
}

impl Conn {
    /// The connection, while the store has not failed.
    fn remote(&self) -> Option<&Remote> {
        if self.down.load(Ordering::Relaxed) { None } else { self.remote.as_ref() }
    }

    /// `r`, noting a failure of the store as a whole: from then on it is bypassed.
    fn watch<T>(&self, r: Result<T, RegistryError>) -> Result<T, RegistryError> {
        if let Err(e) = &r
            && e.is_unreachable()
            && !self.down.swap(true, Ordering::Relaxed)
        {
            let n = self.lookups.load(Ordering::Relaxed);
            eprintln!(
                "cudalint: analysis store {}: {e}; unreachable after {n} lookups, analysing locally",
                esc(&self.name)
            );
        }
        r
    }

    /// The error of a request not sent because the store is bypassed.
    fn bypassed(&self) -> RegistryError {
        RegistryError::Unreachable { what: format!("analysis store {}", esc(&self.name)), message: "bypassed".into() }
    }

    fn reference(remote: &Remote, tag: String) -> Reference {
        Reference::with_tag(remote.reference.registry().to_string(), remote.reference.repository().to_string(), tag)
    }

    /// Pushes a claim; `at` 0 releases it (a claim that old is stale to everyone).
    fn write_claim(&self, t: &str, id: &str, at: u64, digest: &str) -> Result<(), RegistryError> {
        let Some(remote) = self.remote() else { return Err(self.bypassed()) };
        let at = at.to_string();
        self.watch(remote.push_artifact(&Artifact {
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
        }))?;
        Ok(())
    }
}

/// A claim this process holds (won, its analysis not yet pushed): renewed until then, or until
/// the claim timeout has passed since it was won (an analysis that failed is never pushed).
struct Held {
    id: String,
    digest: String,
    since: Instant,
}

/// The claims held, and the thread renewing them.
#[derive(Default)]
struct Renewal {
    held: Mutex<BTreeMap<String, Held>>,
    /// Held while claims are written: a release waits for a renewal in flight, so a renewal
    /// never lands after the release.
    writing: Mutex<()>,
    stop: AtomicBool,
}

pub struct AnalysisStore {
    conn: Arc<Conn>,
    renewal: Arc<Renewal>,
    renewer: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// How long another shard's claim may make this one wait for its analysis, at most; a
    /// claim older than this (or than [`CLAIM_LEASE`]) without renewal is ignored.
    claim_timeout: Duration,
    /// See [`CLAIM_SETTLE`].
    claim_settle: Duration,
    pub claim_waits: AtomicU64,
    pub hits: AtomicU64,
    pub pushed: AtomicU64,
    pub push_errors: AtomicU64,
    warned: AtomicBool,
    sign: Option<Arc<Signer>>,
    trust: Trust,
    untrusted: AtomicU64,
    claim_min: u64,
}

impl Drop for AnalysisStore {
    fn drop(&mut self) {
        self.renewal.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.renewer.lock().expect("renewer lock").take() {
            let _ = t.join();
        }
    }
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
    /// Connects to `repo` (`host/name`) asking for pull and push. A store that cannot be
    /// reached at all is not an error: it is bypassed from the start (said on stderr and in
    /// the summary); a refusal (credentials, a bad name) is.
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
        let name = format!("{}/{}", r.registry(), r.repository());
        let o = RegistryOptions {
            stall_timeout: o.stall_timeout.min(STORE_STALL),
            connect_timeout: o.connect_timeout.min(STORE_STALL),
            // A connection failure or stall is not retried: the first bypasses the store (a
            // retry would cost every shard another stall window; a store missed only costs
            // local analyses). A 500 or 429 is, as for any registry.
            retry_unreachable: false,
            // The store is not the image's registry: it gets its own credentials (environment
            // for its host, Docker's config), the command line's only where
            // --registry-credentials names its host.
            ..o.not_for_an_image()
        };
        // A store lives for the whole run (many images), not one image's deadline.
        let remote = match Remote::connect_scoped(r, &o, scope, Instant::now() + Duration::from_secs(7 * 24 * 3600)) {
            Ok(r) => Some(r),
            Err(e) if e.is_unreachable() => {
                eprintln!(
                    "cudalint: analysis store {}: {e}; unreachable after 0 lookups, analysing locally",
                    esc(&name)
                );
                None
            }
            Err(e) => return Err(e.into()),
        };
        Ok(AnalysisStore {
            conn: Arc::new(Conn { down: AtomicBool::new(remote.is_none()), remote, name, lookups: AtomicU64::new(0) }),
            renewal: Arc::default(),
            renewer: Mutex::new(None),
            claim_timeout: crate::cache::DEFAULT_LOCK_TIMEOUT,
            claim_settle: CLAIM_SETTLE,
            claim_waits: AtomicU64::new(0),
            hits: AtomicU64::new(0),
            pushed: AtomicU64::new(0),
            push_errors: AtomicU64::new(0),
            warned: AtomicBool::new(false),
            sign: None,
            trust: Trust::Nothing,
            untrusted: AtomicU64::new(0),
            claim_min: CLAIM_MIN,
        })
    }

    /// What this store's entries are signed with (`--sign-key`) and which it believes
    /// (`--verify-key`, `--trust-unsigned`; none: it is used to share this run's analyses, and
    /// believes none of them).
    pub fn with_trust(mut self, sign: Option<Arc<Signer>>, trust: Trust) -> AnalysisStore {
        self.sign = sign;
        self.trust = trust;
        self
    }

    /// Layers smaller than `bytes` are not claimed (0: every layer is).
    pub fn with_claim_min(mut self, bytes: u64) -> AnalysisStore {
        self.claim_min = bytes;
        self
    }

    /// Whether a layer of `size` bytes (compressed; unknown counts as large) is worth a claim.
    pub fn claims(&self, size: Option<u64>) -> bool {
        size.is_none_or(|s| s >= self.claim_min)
    }

    /// Whether what it hands over was checked against a key: only then is it kept in the local
    /// cache, sealed as this machine's own.
    pub fn verifies(&self) -> bool {
        matches!(self.trust, Trust::Keys(_))
    }

    /// Whether this run writes to the store: not when it believes only signed analyses and has
    /// no key to sign its own (its entries would displace signed ones that readers believe).
    fn stores(&self) -> bool {
        self.sign.is_some() || !matches!(self.trust, Trust::Keys(_))
    }

    /// Entries passed over: unsigned, or signed by no --verify-key.
    pub fn untrusted(&self) -> u64 {
        self.untrusted.load(Ordering::Relaxed)
    }

    pub fn with_claim_timeout(mut self, t: Duration) -> AnalysisStore {
        self.claim_timeout = t;
        self
    }

    pub fn with_claim_settle(mut self, t: Duration) -> AnalysisStore {
        self.claim_settle = t;
        self
    }

    /// Whether the store failed as a whole (unreachable, stalled, 502/503/504) and is bypassed.
    pub fn unreachable(&self) -> bool {
        self.conn.down.load(Ordering::Relaxed)
    }

    /// Analyses looked up in the store (requests sent).
    pub fn lookups(&self) -> u64 {
        self.conn.lookups.load(Ordering::Relaxed)
    }

    /// How long a claim holds without renewal.
    fn lease(&self) -> Duration {
        self.claim_timeout.min(CLAIM_LEASE)
    }

    /// Whether a claim made (or renewed) at `at` still holds.
    fn live(&self, at: u64) -> bool {
        let now = now_secs();
        at <= now + CLOCK_SKEW && now.saturating_sub(at) < self.lease().as_secs().max(1)
    }

    /// The claim on a key as (id, unix seconds), if one can be read.
    fn read_claim(&self, tag: &str) -> Option<(String, u64)> {
        let remote = self.conn.remote()?;
        let (m, _) = self.conn.watch(remote.manifest(&Conn::reference(remote, tag.to_string()))).ok()?;
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
    /// pushes land, and read it back: the last writer analyses (renewing its claim meanwhile),
    /// the others wait. A claim not renewed within the lease (a killed shard's) counts for
    /// nothing. Any registry failure: analyse here.
    ///
    /// The claim is read back as it settles, not once after a fixed sleep: a claimant whose
    /// claim was overwritten knows it lost at the first read that shows another live claim; one
    /// whose claim still stands can know it won only when the settle time has passed.
    pub fn claim(&self, k: &LayerKey) -> Claim {
        if self.conn.remote().is_none() || !self.stores() {
            return Claim::Mine;
        }
        let t = claim_tag(k);
        let digest = &k.digest;
        if self.read_claim(&t).is_some_and(|(_, at)| self.live(at)) {
            return Claim::Theirs;
        }
        let seed = format!("{} {} {:?} {digest}", std::process::id(), now_secs(), Instant::now());
        let id = crate::digest::sha256(seed.as_bytes())["sha256:".len()..][..32].to_string();
        let pushed = self.conn.write_claim(&t, &id, now_secs(), digest);
        if pushed.is_err() {
            return Claim::Mine;
        }
        // Paid in full only by the shard that wins, which found no analysis and no live claim.
        // A store that fails meanwhile ends the wait: no one else will get through either.
        let overwritten = poll(Instant::now() + self.claim_settle, SETTLE_POLL, || {
            if self.unreachable() {
                return Some(None);
            }
            self.read_claim(&t).filter(|(other, at)| *other != id && self.live(*at)).map(Some)
        });
        if overwritten.flatten().is_some() {
            return Claim::Theirs;
        }
        self.hold(t, Held { id, digest: digest.clone(), since: Instant::now() });
        Claim::Mine
    }

    /// Keeps a won claim renewed until its analysis is pushed ([`AnalysisStore::put`]).
    fn hold(&self, tag: String, h: Held) {
        self.renewal.held.lock().expect("claims lock").insert(tag, h);
        let mut renewer = self.renewer.lock().expect("renewer lock");
        if renewer.is_some() {
            return;
        }
        let (conn, renewal, timeout) = (self.conn.clone(), self.renewal.clone(), self.claim_timeout);
        let every = (self.lease() / 3).max(Duration::from_millis(200));
        *renewer = Some(std::thread::spawn(move || {
            loop {
                let next = Instant::now() + every;
                while Instant::now() < next {
                    if renewal.stop.load(Ordering::Relaxed) || conn.down.load(Ordering::Relaxed) {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                let _writing = renewal.writing.lock().expect("writing lock");
                let due: Vec<(String, String, String)> = {
                    let mut held = renewal.held.lock().expect("claims lock");
                    held.retain(|_, h| h.since.elapsed() < timeout);
                    held.iter().map(|(t, h)| (t.clone(), h.id.clone(), h.digest.clone())).collect()
                };
                for (t, id, digest) in due {
                    // A failure is the store's (noted by `watch`); the next round tries again.
                    let _ = conn.write_claim(&t, &id, now_secs(), &digest);
                }
            }
        }));
    }

    /// Waits for another shard's analysis of a layer: while its claim holds (renewed), at most
    /// the claim timeout, and no longer once the store fails (the claimant cannot push its
    /// analysis either).
    pub fn wait_for(&self, k: &LayerKey) -> Option<AnalyzedLayer> {
        self.claim_waits.fetch_add(1, Ordering::Relaxed);
        let t = claim_tag(k);
        poll(Instant::now() + self.claim_timeout, Duration::from_millis(500), || {
            if self.unreachable() {
                return Some(None);
            }
            if let Some(h) = self.get(k) {
                return Some(Some(h));
            }
            match self.read_claim(&t) {
                Some((_, at)) if self.live(at) => None,
                // Released (its analysis pushed just after the look above), or no longer
                // renewed: one more look, then analyse here.
                _ => Some(self.get(k)),
            }
        })
        .flatten()
    }

    pub fn repository(&self) -> String {
        self.conn.name.clone()
    }

    /// The stored analysis of a layer, if there is one whose key matches; any failure to read
    /// it (absent, unreachable, malformed, another key) is a miss: the layer is pulled.
    pub fn get(&self, k: &LayerKey) -> Option<AnalyzedLayer> {
        // Believing nothing (no --verify-key, no --trust-unsigned), there is nothing to ask for.
        if matches!(self.trust, Trust::Nothing) {
            return None;
        }
        let remote = self.conn.remote()?;
        self.conn.lookups.fetch_add(1, Ordering::Relaxed);
        let (m, _) = self.conn.watch(remote.manifest(&Conn::reference(remote, tag(k)))).ok()?;
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
        let entry = self.conn.watch(remote.small_blob(blob_digest)).ok()?;
        if let Trust::Keys(keys) = &self.trust {
            let b64 = base64::engine::general_purpose::STANDARD;
            let sig = v.get("annotations").and_then(|a| a.get(SIGNATURE_ANNOTATION)).and_then(|s| s.as_str());
            let sig = sig.and_then(|s| b64.decode(s).ok());
            if !sig.is_some_and(|sig| keys.verifies(LAYER_ANALYSIS_ENTRY, &entry, &sig)) {
                self.untrusted.fetch_add(1, Ordering::Relaxed);
                return None;
            }
        }
        let layer = crate::cache::decode(&entry[..], &k.digest, &k.variant)?;
        self.hits.fetch_add(1, Ordering::Relaxed);
        Some(layer)
    }

    /// Stores an analysis (verified layers only) and releases the claim on it. A failure is
    /// counted and said once on stderr: it costs later shards a pull, never a wrong result.
    pub fn put(&self, k: &LayerKey, layer: &AnalyzedLayer) {
        let t = claim_tag(k);
        self.renewal.held.lock().expect("claims lock").remove(&t);
        if self.unreachable() || !self.stores() {
            return;
        }
        let entry = match crate::cache::encode(&k.digest, &k.variant, layer) {
            Ok(Some(e)) => e,
            _ => return,
        };
        let pushed = self.push(&tag(k), &k.digest, &entry).and_then(|_| {
            let _writing = self.renewal.writing.lock().expect("writing lock");
            self.conn.write_claim(&t, "released", 0, &k.digest)
        });
        match pushed {
            Ok(()) => {
                self.pushed.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                self.push_errors.fetch_add(1, Ordering::Relaxed);
                // A store that went away has said so already (`watch`).
                if !self.unreachable() && !self.warned.swap(true, Ordering::Relaxed) {
                    eprintln!("cudalint: analysis store {}: {e} (analyses are not shared)", esc(&self.repository()));
                }
            }
        }
    }

    fn push(&self, tag: &str, layer_digest: &str, entry: &[u8]) -> Result<(), RegistryError> {
        let Some(remote) = self.conn.remote() else { return Err(self.conn.bypassed()) };
        let b64 = base64::engine::general_purpose::STANDARD;
        let sig = self.sign.as_ref().map(|k| b64.encode(k.sign(LAYER_ANALYSIS_ENTRY, entry)));
        let mut annotations = vec![("dev.cudalint.layer.digest", layer_digest)];
        if let Some(sig) = &sig {
            annotations.push((SIGNATURE_ANNOTATION, sig));
        }
        self.conn.watch(remote.push_artifact(&Artifact {
            artifact_type: LAYER_ANALYSIS,
            payload_type: LAYER_ANALYSIS_ENTRY,
            payload: entry,
            subject: None,
            annotations: &annotations,
            tag: Some(tag),
            label: "manifest",
        }))?;
        Ok(())
    }
}
