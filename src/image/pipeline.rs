//! One road for every image source that has layers: resolve the platform's config and layers,
//! take what the caches know, read the rest in parallel (by seeking where a blob is a range of
//! a file, else as one stream), check digests and assemble the report. A source only says where
//! its documents and blobs are ([`LayerSource`]); everything else happens here, once.

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use super::oci::{Platform, Resolved};
use super::progress::Progress;
use super::{ImageReport, ScanError, ScanOptions, SourceKind, assemble};
use crate::cache::LayerKey;
use crate::layer::blob::{self, Counting, Outcome};
use crate::layer::{AnalyzedLayer, LayerRef};

/// A layer's bytes as its source offers them.
pub enum Blob<'a> {
    /// `[off, off+len)` of a file on disk: an uncompressed tar there is walked by seeking
    /// (file contents hopped over) unless `--verify always` wants every byte hashed.
    Seekable { file: &'a File, off: u64, len: u64 },
    /// A stream read once, front to back (a download).
    Stream(Box<dyn Read + Send + 'a>),
}

/// Where an image's documents and layer blobs are. Implemented by the image archives, the OCI
/// layout directory and the registry; [`run`] does the rest.
pub trait LayerSource: Sync {
    /// What reports call this kind of source (`docker-archive`, `oci-archive`, `oci`, `registry`).
    fn kind(&self) -> SourceKind;

    /// The config and ordered layers of the image for `platform`.
    fn resolve(&mut self, platform: &Platform) -> Result<Resolved, ScanError>;

    /// Locates (or opens) every layer before any is read, so a missing one fails the scan
    /// before work starts; returns the bytes to read when known (the progress bar's total).
    fn prepare(&mut self, layers: &[LayerRef]) -> Result<Option<u64>, ScanError>;

    /// A layer's blob, ready to read.
    fn open(&self, layer: &LayerRef) -> Result<Blob<'_>, ScanError>;

    /// Whether opening a blob starts a download (a registry): its memory is then held before
    /// it is opened, so no connection waits on the budget.
    fn downloads(&self) -> bool {
        false
    }

    /// Whether a layer's analysis may be taken from the caches by its digest, unread: true
    /// where the bytes are fetched by that digest (a registry). A local archive's layers are
    /// always read and checked, so a tampered file fails closed rather than passing on an
    /// analysis of the bytes its manifest claims (and local scans write no cache).
    fn trusts_digests(&self) -> bool {
        false
    }

    /// Analyses known before any layer is read, by layer id (a registry image's
    /// attestation, `--from-attestation`): every layer must then be among them.
    fn known(
        &mut self,
        _resolved: &Resolved,
        _opts: &ScanOptions,
    ) -> Result<Option<HashMap<String, AnalyzedLayer>>, ScanError> {
        Ok(None)
    }

    /// Whether [`LayerSource::finish`] wants the layers' analyses (they are cloned for it).
    fn keeps_layers(&self) -> bool {
        false
    }

    /// Last words on the assembled report: the source's own statistics, attestations.
    fn finish(
        &mut self,
        _report: &mut ImageReport,
        _layers: Option<Vec<AnalyzedLayer>>,
        _opts: &ScanOptions,
    ) -> Result<(), ScanError> {
        Ok(())
    }
}

/// Reads an image from `source`: resolve, caches, parallel layer reads, digest checks, report.
pub fn run(source: &mut dyn LayerSource, opts: &ScanOptions) -> Result<ImageReport, ScanError> {
    let platform = opts.platform.clone().unwrap_or_else(Platform::host);
    let resolved = source.resolve(&platform)?;
    let total = source.prepare(&resolved.layers)?;
    let known = source.known(&resolved, opts)?;
    let cacheable = source.trusts_digests();
    let progress = Progress::new(opts.progress, total, resolved.layers.len());
    let from_cache = AtomicU64::new(0);
    let src: &dyn LayerSource = source;
    let layers = parallel(&resolved.layers, opts.jobs, |l: &LayerRef| {
        let skipped = || {
            from_cache.fetch_add(1, Ordering::Relaxed);
            progress.add(l.size.unwrap_or(0));
        };
        if let Some(known) = &known {
            // Fail closed: a layer the known analyses do not cover is an error, not a read.
            let h = known
                .get(&l.id())
                .cloned()
                .ok_or_else(|| ScanError::Layer { layer: l.id(), message: "not in the image's attestation".into() })?;
            skipped();
            return Ok(h);
        }
        let key = l.digest.as_deref().filter(|_| cacheable).map(|d| LayerKey::new(d, &opts.inspect));
        if let Some(key) = &key
            && let Some(h) = cached(key, opts, &skipped)
        {
            return Ok(h);
        }
        // Single flight: whoever holds the key's lock analyses the layer; the others wait for
        // its entry (the lock is released when this closure returns, the entry written).
        let _lock = key.as_ref().zip(opts.cache.as_ref()).map(|(k, c)| c.lock(k));
        if let Some(key) = &key {
            if let Some(h) = cached(key, opts, &skipped) {
                return Ok(h);
            }
            // A small layer is analysed here rather than claimed (it was looked up above).
            let from_store = opts.store.as_ref().filter(|st| st.claims(l.size)).and_then(|st| match st.claim(key) {
                super::analysis_store::Claim::Theirs => st.wait_for(key),
                // A shard that pushed its analysis and released its claim after this one last
                // looked leaves no live claim, only its entry: look once more before analysing.
                super::analysis_store::Claim::Mine => st.get(key),
            });
            if let Some(h) = from_store {
                // Counted as a store hit by `get`.
                keep_store_hit(key, opts, &h);
                skipped();
                return Ok(h);
            }
        }
        // A download is not started before its decoder could run: the most its media type
        // allows is held first, and cut to what its header asks once the first bytes are in.
        let held = if src.downloads() {
            let most = crate::layer::budget::LAYER_OVERHEAD
                + crate::layer::decode::most_for_media_type(l.media_type.as_deref());
            Some(opts.memory.reserve(most.min(opts.memory.total())).map_err(|total| ScanError::Layer {
                layer: l.id(),
                message: format!("the memory budget of {} (--memory) holds no layer", crate::layer::budget::mib(total)),
            })?)
        } else {
            None
        };
        let analyzed = read(src.open(l)?, l, opts, &progress, held)?;
        opts.counts.analysed.fetch_add(1, Ordering::Relaxed);
        if let Some(key) = &key {
            // Only verified analyses are stored (the cache refuses others); a failed write only
            // costs a later read.
            if let Some(c) = &opts.cache {
                let _ = c.put(key, &analyzed);
            }
            if let Some(st) = &opts.store {
                st.put(key, &analyzed);
            }
        }
        Ok(analyzed)
    });
    progress.finish();
    let layers = layers?;
    let kept = source.keeps_layers().then(|| layers.clone());
    let mut report = assemble(source.kind(), Some(&resolved), None, layers);
    report.stats.layers_from_cache = from_cache.load(Ordering::Relaxed);
    source.finish(&mut report, kept, opts)?;
    Ok(report)
}

/// Keeps what the analysis store handed over in the local cache, only if its signature verified:
/// the local cache's MAC would otherwise launder it into this machine's own truth.
fn keep_store_hit(key: &LayerKey, opts: &ScanOptions, h: &AnalyzedLayer) {
    if let (Some(c), Some(st)) = (&opts.cache, &opts.store)
        && st.verifies()
    {
        let _ = c.put(key, h);
    }
}

/// A layer's analysis from the local cache, else from the analysis store (then kept locally if
/// its signature verified).
fn cached(key: &LayerKey, opts: &ScanOptions, skipped: &dyn Fn()) -> Option<AnalyzedLayer> {
    let local = || {
        let h = opts.cache.as_deref()?.get(key)?;
        skipped();
        Some(h)
    };
    let remote = || {
        let h = opts.store.as_deref()?.get(key)?;
        keep_store_hit(key, opts, &h);
        skipped();
        Some(h)
    };
    local().or_else(remote)
}

/// Reads one layer's blob and checks it against its digests.
fn read(
    blob: Blob<'_>,
    l: &LayerRef,
    opts: &ScanOptions,
    progress: &Progress,
    held: Option<crate::layer::budget::Reservation<'_>>,
) -> Result<AnalyzedLayer, ScanError> {
    let o: Outcome = match blob {
        Blob::Seekable { file, off, len } => blob::from_file(
            file,
            off,
            len,
            l,
            blob::Reading { verify: opts.verify, inspect: &opts.inspect, budget: &opts.memory },
            |n| progress.add(n),
        )?,
        Blob::Stream(r) => {
            let mut r = Counting::new(r, |n| progress.add(n));
            blob::stream(&mut r, l, &opts.inspect, blob::wants_tar_digest(l, opts.verify), &opts.memory, held)?
        }
    };
    Ok(blob::check(l, o, opts.verify)?)
}

/// Runs `work` for every item on up to `jobs` threads; results in item order. Stops handing
/// out work after the first error.
pub fn parallel<T: Sync, R: Send>(
    items: &[T],
    jobs: usize,
    work: impl Fn(&T) -> Result<R, ScanError> + Sync,
) -> Result<Vec<R>, ScanError> {
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let results: Mutex<Vec<Option<Result<R, ScanError>>>> = Mutex::new((0..items.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..jobs.clamp(1, items.len().max(1)) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= items.len() || failed.load(Ordering::Relaxed) {
                        break;
                    }
                    let r = work(&items[i]);
                    if r.is_err() {
                        failed.store(true, Ordering::Relaxed);
                    }
                    results.lock().unwrap()[i] = Some(r);
                }
            });
        }
    });
    let results = results.into_inner().unwrap();
    // The first error in item order, so the message does not depend on thread timing.
    if let Some(e) = results.iter().position(|r| matches!(r, Some(Err(_)))) {
        let mut results = results;
        return Err(results.swap_remove(e).unwrap().err().unwrap());
    }
    Ok(results.into_iter().map(|r| r.expect("every item ran").ok().unwrap()).collect())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::cache::LayerCache;

    /// One empty-tar layer served as a stream, counting how often it is opened.
    struct Mem {
        tar: Vec<u8>,
        trusts: bool,
        opened: AtomicUsize,
    }

    impl LayerSource for Mem {
        fn kind(&self) -> SourceKind {
            SourceKind::Oci
        }
        fn resolve(&mut self, _: &Platform) -> Result<Resolved, ScanError> {
            let digest = crate::digest::sha256(&self.tar);
            Ok(Resolved {
                name: None,
                manifest_digest: None,
                config_digest: None,
                config: Default::default(),
                layers: vec![LayerRef {
                    key: "l".into(),
                    digest: Some(digest.clone()),
                    diff_id: Some(digest),
                    size: Some(self.tar.len() as u64),
                    media_type: None,
                }],
            })
        }
        fn prepare(&mut self, layers: &[LayerRef]) -> Result<Option<u64>, ScanError> {
            Ok(Some(layers.iter().filter_map(|l| l.size).sum()))
        }
        fn open(&self, _: &LayerRef) -> Result<Blob<'_>, ScanError> {
            self.opened.fetch_add(1, Ordering::Relaxed);
            Ok(Blob::Stream(Box::new(&self.tar[..])))
        }
        fn trusts_digests(&self) -> bool {
            self.trusts
        }
    }

    #[test]
    fn the_cache_serves_any_source_that_fetches_by_digest_and_no_other() {
        let dir = tempfile::tempdir().unwrap();
        let opts = ScanOptions { cache: Some(Arc::new(LayerCache::new(dir.path().into()))), ..Default::default() };
        for trusts in [false, true] {
            let mut src = Mem { tar: vec![0; 1024], trusts, opened: AtomicUsize::new(0) };
            let first = run(&mut src, &opts).unwrap();
            let second = run(&mut src, &opts).unwrap();
            assert!(first.image.layers[0].verified);
            assert_eq!(first.stats.layers_from_cache, 0);
            // A local source's layers are read every time; a digest-fetched one once.
            let (opened, cached) = if trusts { (1, 1) } else { (2, 0) };
            assert_eq!(src.opened.load(Ordering::Relaxed), opened, "trusts digests: {trusts}");
            assert_eq!(second.stats.layers_from_cache, cached);
        }
    }
}
