//! The layer cache: a layer's analysis, keyed by its digest, the analyser's version and the
//! options that change the analysis, so a layer seen before is neither downloaded nor read again.
//!
//! The directory may be shared by several processes (shards of a registry scan on one volume):
//! - single flight: a process that misses takes an advisory lock on the key's lock file
//!   (`layers/<key>.lock`, `flock`), checks the cache again and only then analyses; the others
//!   wait for its entry instead of repeating the work. The kernel drops the lock of a killed
//!   process; a holder that hangs (a frozen pod, a lock lost on a network filesystem) blocks the
//!   others at most `lock_timeout`, after which they analyse the layer themselves.
//! - entries are written atomically (temporary file in the same directory, then rename);
//! - an entry carries its whole key and the sha256 of its body, both checked on read: a corrupt,
//!   truncated or foreign entry is dropped and rebuilt, never trusted;
//! - only analyses of layers whose digest was verified are stored, so a `--verify never` scan of a
//!   blob that does not match its digest cannot poison the cache.
//!
//! Entry format (`layers/<key>.json.zst`, zstd): one header line of JSON
//! `{"schema","digest","analyzer","variant","sha256"}`, a newline, then the `AnalyzedLayer` as
//! JSON, whose sha256 (hex) the header names. `<key>` is the hex sha256 of
//! `analyzer NUL digest NUL variant`, where analyzer is `<crate version>+<ANALYSIS_VERSION>+<each
//! package record kind with its version>` and variant the analysis options (`variant()`).

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::inspect::InspectOptions;
use crate::layer::AnalyzedLayer;

/// Bumped whenever the analysis of a layer would come out differently for the same bytes
/// (2: package records per layer; sparse entries and non-UTF-8 names read exactly). A package
/// record parser has its own version instead (`packages::RECORDS`), folded into the key too.
const ANALYSIS_VERSION: u32 = 2;
/// The most an entry may decompress to: a bound, so a hostile or broken entry cannot exhaust
/// memory (it is dropped instead).
const MAX_ENTRY: u64 = 512 << 20;
/// How long a process waits for another's lock on a key before analysing the layer itself.
pub const DEFAULT_LOCK_TIMEOUT: Duration = Duration::from_secs(600);

pub struct LayerCache {
    dir: PathBuf,
    lock_timeout: Duration,
    stats: CacheStats,
}

/// What the cache did in this process.
#[derive(Default, Debug)]
pub struct CacheStats {
    /// Entries found (including those another process wrote while this one waited).
    pub hits: AtomicU64,
    /// Locks this process had to wait for (another process was analysing the layer).
    pub lock_waits: AtomicU64,
    /// Locks given up on after `lock_timeout` (the layer was analysed anyway).
    pub stale_locks: AtomicU64,
    /// Entries dropped because they were corrupt or did not match their key.
    pub dropped: AtomicU64,
}

#[derive(Serialize, Deserialize, PartialEq, Debug)]
struct Header {
    schema: String,
    digest: String,
    analyzer: String,
    variant: String,
    /// sha256 (hex) of the body that follows the header line.
    sha256: String,
}

fn analyzer() -> String {
    format!("{}+{ANALYSIS_VERSION}+{}", env!("CARGO_PKG_VERSION"), crate::packages::record_versions())
}

/// The part of the key naming the analysis options: every field of `InspectOptions` (its Debug
/// form), so an option added later changes the key instead of reusing analyses made without it.
pub fn variant(o: &InspectOptions) -> String {
    format!("{o:?}")
}

/// What a layer's analysis is filed under, here, in an analysis store and in attestations: the
/// layer's digest and the analysis options. Made only by [`LayerKey::new`], so every source and
/// every store agree on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayerKey {
    pub digest: String,
    pub variant: String,
}

impl LayerKey {
    pub fn new(digest: &str, o: &InspectOptions) -> LayerKey {
        LayerKey { digest: digest.to_string(), variant: variant(o) }
    }

    /// The hex key (`analyzer NUL digest NUL variant`, hashed): file and tag names.
    pub fn hex(&self) -> String {
        key(&self.digest, &self.variant)
    }
}

/// `$XDG_CACHE_HOME/cudalint`, else `~/.cache/cudalint`.
pub fn default_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))?;
    Some(base.join("cudalint"))
}

/// A held key lock (released on drop, or by the kernel when the process dies). `None` inside:
/// the lock could not be had (stale, or the lock file could not be opened); the caller analyses
/// the layer all the same.
pub struct KeyLock {
    _file: Option<File>,
}

impl LayerCache {
    pub fn new(dir: PathBuf) -> LayerCache {
        LayerCache { dir, lock_timeout: DEFAULT_LOCK_TIMEOUT, stats: CacheStats::default() }
    }

    pub fn with_lock_timeout(mut self, t: Duration) -> LayerCache {
        self.lock_timeout = t;
        self
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn stats(&self) -> &CacheStats {
        &self.stats
    }

    /// `variant` names the analysis options that change the result (lean, every cubin).
    fn key(digest: &str, variant: &str) -> String {
        hex::encode(Sha256::digest(format!("{}\0{digest}\0{variant}", analyzer())))
    }

    fn path(&self, k: &LayerKey) -> PathBuf {
        self.dir.join("layers").join(format!("{}.json.zst", k.hex()))
    }

    pub fn get(&self, k: &LayerKey) -> Option<AnalyzedLayer> {
        let p = self.path(k);
        let file = File::open(&p).ok()?;
        let parsed = decode(file, &k.digest, &k.variant);
        if parsed.is_none() {
            // Corrupt or foreign: drop it, the layer is analysed again.
            self.stats.dropped.fetch_add(1, Ordering::Relaxed);
            let _ = std::fs::remove_file(&p);
        } else {
            self.stats.hits.fetch_add(1, Ordering::Relaxed);
        }
        parsed
    }

    /// Stores an analysis; a layer whose digest was not verified is not stored (returns false).
    pub fn put(&self, k: &LayerKey, layer: &AnalyzedLayer) -> io::Result<bool> {
        let Some(data) = encode(&k.digest, &k.variant, layer)? else { return Ok(false) };
        let p = self.path(k);
        let dir = p.parent().expect("cache path has a parent");
        std::fs::create_dir_all(dir)?;
        let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
        tmp.write_all(&data)?;
        tmp.as_file().sync_all()?;
        tmp.persist(&p).map_err(|e| e.error)?;
        Ok(true)
    }

    /// Takes the key's lock, waiting while another process holds it, at most `lock_timeout`.
    pub fn lock(&self, k: &LayerKey) -> KeyLock {
        let p = self.dir.join("layers").join(format!("{}.lock", k.hex()));
        let open = std::fs::create_dir_all(self.dir.join("layers"))
            .and_then(|_| OpenOptions::new().create(true).truncate(false).write(true).open(&p));
        // A cache we cannot lock is still a cache: the layer is analysed without single flight.
        let Ok(file) = open else { return KeyLock { _file: None } };
        let start = Instant::now();
        let mut waited = false;
        let mut pause = Duration::from_millis(20);
        loop {
            match try_lock(&file) {
                Ok(true) => return KeyLock { _file: Some(file) },
                Ok(false) => {}
                Err(_) => return KeyLock { _file: None },
            }
            if !waited {
                waited = true;
                self.stats.lock_waits.fetch_add(1, Ordering::Relaxed);
            }
            if start.elapsed() >= self.lock_timeout {
                self.stats.stale_locks.fetch_add(1, Ordering::Relaxed);
                return KeyLock { _file: None };
            }
            std::thread::sleep(pause.min(self.lock_timeout.saturating_sub(start.elapsed())));
            pause = (pause * 2).min(Duration::from_millis(500));
        }
    }

    /// Removes every entry and lock file; returns how many entries.
    pub fn clean(&self) -> io::Result<u64> {
        let dir = self.dir.join("layers");
        let mut n = 0;
        match std::fs::read_dir(&dir) {
            Ok(rd) => {
                for e in rd.flatten() {
                    let is_entry = !e.file_name().to_string_lossy().ends_with(".lock");
                    if std::fs::remove_file(e.path()).is_ok() && is_entry {
                        n += 1;
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        Ok(n)
    }
}

/// An exclusive `flock` without waiting: true if taken, false if another holds it. The lock
/// belongs to the open file (released on close, or by the kernel when the process dies).
#[cfg(unix)]
fn try_lock(f: &File) -> io::Result<bool> {
    use rustix::fs::{FlockOperation, flock};
    match flock(f, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(true),
        Err(e) if e == rustix::io::Errno::WOULDBLOCK => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// No advisory locks here: every process analyses what it misses (entries stay atomic).
#[cfg(not(unix))]
fn try_lock(_: &File) -> io::Result<bool> {
    Ok(true)
}

/// The entry's bytes (the file format above), or None for a layer whose digest was not verified
/// (never stored, here or in a registry).
pub fn encode(digest: &str, variant: &str, layer: &AnalyzedLayer) -> io::Result<Option<Vec<u8>>> {
    if !layer.info.verified || layer.info.digest != digest {
        return Ok(None);
    }
    let body = serde_json::to_vec(layer).map_err(io::Error::other)?;
    let header = Header {
        schema: crate::schema::LAYER_CACHE.into(),
        digest: digest.into(),
        analyzer: analyzer(),
        variant: variant.into(),
        sha256: hex::encode(Sha256::digest(&body)),
    };
    let mut plain = serde_json::to_vec(&header).map_err(io::Error::other)?;
    plain.push(b'\n');
    plain.extend_from_slice(&body);
    Ok(Some(zstd::encode_all(&plain[..], 3)?))
}

/// The hex key of a layer's analysis (`analyzer NUL digest NUL variant`, hashed).
pub fn key(digest: &str, variant: &str) -> String {
    LayerCache::key(digest, variant)
}

/// The entry's layer if it decompresses within bounds, its header names exactly this key and
/// its body hashes to what the header says.
pub fn decode(entry: impl Read, digest: &str, variant: &str) -> Option<AnalyzedLayer> {
    decode_bounded(entry, digest, variant, MAX_ENTRY)
}

fn decode_bounded(entry: impl Read, digest: &str, variant: &str, max: u64) -> Option<AnalyzedLayer> {
    let mut plain = Vec::new();
    zstd::stream::read::Decoder::new(entry).ok()?.take(max + 1).read_to_end(&mut plain).ok()?;
    if plain.len() as u64 > max {
        return None;
    }
    let nl = plain.iter().position(|&b| b == b'\n')?;
    let header: Header = serde_json::from_slice(&plain[..nl]).ok()?;
    let body = &plain[nl + 1..];
    let want = Header {
        schema: crate::schema::LAYER_CACHE.into(),
        digest: digest.into(),
        analyzer: analyzer(),
        variant: variant.into(),
        sha256: hex::encode(Sha256::digest(body)),
    };
    if header != want {
        return None;
    }
    let layer: AnalyzedLayer = serde_json::from_slice(body).ok()?;
    (layer.info.digest == digest && layer.info.verified).then_some(layer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layer::LayerInfo;

    fn k(digest: &str, variant: &str) -> LayerKey {
        LayerKey { digest: digest.into(), variant: variant.into() }
    }

    fn layer(digest: &str, verified: bool) -> AnalyzedLayer {
        AnalyzedLayer {
            info: LayerInfo {
                digest: digest.into(),
                diff_id: None,
                size: 42,
                compression: crate::layer::decode::Compression::Gzip,
                verified,
                stats: Default::default(),
            },
            summary: Default::default(),
        }
    }

    const A: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    #[test]
    fn unverified_analyses_are_never_stored() {
        let dir = tempfile::tempdir().unwrap();
        let c = LayerCache::new(dir.path().to_path_buf());
        assert!(!c.put(&k(A, "v"), &layer(A, false)).unwrap());
        assert!(c.get(&k(A, "v")).is_none());
        // An analysis filed under another layer's digest is refused too.
        assert!(!c.put(&k(B, "v"), &layer(A, true)).unwrap());
        assert!(c.put(&k(A, "v"), &layer(A, true)).unwrap());
        assert_eq!(c.get(&k(A, "v")).unwrap().info.size, 42);
    }

    #[test]
    fn an_entry_is_read_only_under_its_own_key_and_with_its_own_body() {
        let e = encode(A, "lean", &layer(A, true)).unwrap().unwrap();
        assert!(decode(&e[..], A, "lean").is_some());
        assert!(decode(&e[..], B, "lean").is_none(), "another digest");
        assert!(decode(&e[..], A, "deep").is_none(), "other analysis options");
        let plain = zstd::decode_all(&e[..]).unwrap();
        let changed = String::from_utf8(plain).unwrap().replace("\"size\":42", "\"size\":43");
        assert!(decode(&zstd::encode_all(changed.as_bytes(), 3).unwrap()[..], A, "lean").is_none(), "body hash");
        // An entry that decodes past the bound is dropped, not read into memory whole.
        let n = zstd::decode_all(&e[..]).unwrap().len() as u64;
        assert!(decode_bounded(&e[..], A, "lean", n).is_some());
        assert!(decode_bounded(&e[..], A, "lean", n - 1).is_none());
    }

    #[test]
    fn a_lock_held_elsewhere_is_waited_for_at_most_the_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let c = LayerCache::new(dir.path().to_path_buf()).with_lock_timeout(Duration::from_millis(200));
        let held = c.lock(&k(A, "v"));
        assert!(held._file.is_some());
        // Another open file description: the same as another process.
        let other = c.lock(&k(A, "v"));
        assert!(other._file.is_none());
        assert_eq!(c.stats().stale_locks.load(Ordering::Relaxed), 1);
        drop(held);
        assert!(c.lock(&k(A, "v"))._file.is_some());
        assert!(c.lock(&k(B, "v"))._file.is_some(), "keys lock independently");
    }
}
