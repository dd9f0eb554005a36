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
//! Whoever else can write the directory must not decide what a scan sees (docs/trust.md):
//! - every entry is authenticated: an HMAC-SHA256 over its key and bytes, keyed by a secret
//!   outside the directory ([`CacheKey`]: `CUDALINT_CACHE_KEY`, else
//!   `$XDG_CONFIG_HOME/cudalint/cache.key`, made 0600 on first use). The body hash alone can be
//!   recomputed by anyone; the MAC cannot without the key. An entry whose MAC fails is ignored
//!   (counted as untrusted) and the layer analysed again. Processes that share a directory share
//!   the key, or they merely fail to use each other's entries.
//! - `layers/` and everything in it is reached through a directory descriptor and opened with
//!   `O_NOFOLLOW`: a planted symlink (as `layers/` itself, an entry or a lock) is refused, never
//!   followed, so neither a scan nor `cache clean` writes or deletes outside the directory.
//! - entries and locks are opened `O_NONBLOCK` and must be regular files (`fstat`): a FIFO or a
//!   device is refused instead of hanging the scan.
//!
//! Entry format (`layers/<key>.json.zst`): [`MAC_MAGIC`], the 32-byte MAC, then the entry proper
//! (zstd): one header line of JSON `{"schema","digest","analyzer","variant","sha256"}`, a newline,
//! then the `AnalyzedLayer` as JSON, whose sha256 (hex) the header names. `<key>` is the hex sha256
//! of `analyzer NUL digest NUL variant`, where analyzer is `<crate version>+<ANALYSIS_VERSION>+<each
//! package record kind with its version>+k<the knowledge base's digest>` and variant the analysis options (`variant()`). The entry
//! proper (without the MAC) is also what an analysis store and an attestation carry.
//!
//! Files: `codec.rs` (the entry proper: [`encode`], [`decode`], [`decode_within`]),
//! `safe_fs.rs` (descriptor-relative, `O_NOFOLLOW` file operations, [`write_new_file`]) and
//! `wheels.rs` (the lockfiles' wheels, `wheels/`, with the same rules); this file is the cache
//! itself and its key.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crate::inspect::InspectOptions;
use crate::layer::AnalyzedLayer;

mod codec;
mod safe_fs;
mod wheels;

pub use codec::{Decoded, decode, decode_within, encode};
pub use safe_fs::{open_regular_path, write_new_file};
pub use wheels::{WheelCache, sha256_of};

/// The most an entry file may be on disk (compressed entries are far smaller than `MAX_ENTRY`):
/// it is read whole to check its MAC before anything of it is decoded.
const MAX_FILE: u64 = 64 << 20;
/// How long a process waits for another's lock on a key before analysing the layer itself.
pub const DEFAULT_LOCK_TIMEOUT: Duration = Duration::from_secs(600);
/// What an authenticated entry file starts with (then the MAC, then the entry).
pub const MAC_MAGIC: &[u8] = b"cudalint-layer-mac-v1\n";
/// The environment variable that holds the cache key's secret (at least `MIN_SECRET` bytes).
pub const KEY_ENV: &str = "CUDALINT_CACHE_KEY";
const MIN_SECRET: usize = 16;

pub struct LayerCache {
    dir: PathBuf,
    lock_timeout: Duration,
    stats: CacheStats,
    /// Resolved on first use; None: no usable key, so the cache is neither read nor written.
    key: OnceLock<Option<CacheKey>>,
    warned: AtomicBool,
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
    /// Entries ignored because their MAC failed (written without this key: by another key's
    /// process, an older cudalint, or someone forging a verdict), or because they were not
    /// regular files (a symlink, a FIFO); the layer was analysed again.
    pub untrusted: AtomicU64,
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
    /// A cache in `dir`, authenticated by the key [`CacheKey::load`] finds on first use.
    pub fn new(dir: PathBuf) -> LayerCache {
        LayerCache {
            dir,
            lock_timeout: DEFAULT_LOCK_TIMEOUT,
            stats: CacheStats::default(),
            key: OnceLock::new(),
            warned: AtomicBool::new(false),
        }
    }

    /// Authenticates entries with `key` instead of the configured one.
    pub fn with_key(self, key: CacheKey) -> LayerCache {
        let _ = self.key.set(Some(key));
        self
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
        hex::encode(Sha256::digest(format!("{}\0{digest}\0{variant}", codec::analyzer())))
    }

    fn entry_name(k: &LayerKey) -> String {
        format!("{}.json.zst", k.hex())
    }

    /// The key, or None (said once on stderr): without one nothing is read or written, since
    /// nothing read could be told from a forgery.
    fn mac_key(&self) -> Option<&CacheKey> {
        self.key
            .get_or_init(|| match CacheKey::load() {
                Ok(k) => Some(k),
                Err(why) => {
                    self.warn(&format!("not used: {why}"));
                    None
                }
            })
            .as_ref()
    }

    fn warn(&self, what: &str) {
        if !self.warned.swap(true, Ordering::Relaxed) {
            eprintln!("cudalint: layer cache {}: {what}", crate::escape::text(&self.dir.display().to_string()));
        }
    }

    /// `layers/`, opened without following a link; created if `create`.
    fn layers(&self, create: bool) -> io::Result<safe_fs::DirFd> {
        if create {
            std::fs::create_dir_all(&self.dir)?;
        }
        safe_fs::DirFd::open(&self.dir)?.subdir("layers", create)
    }

    pub fn get(&self, k: &LayerKey) -> Option<AnalyzedLayer> {
        let key = self.mac_key()?;
        let layers = self.layers(false).ok()?;
        let name = Self::entry_name(k);
        let bytes = match layers.read_regular(&name, MAX_FILE) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return None,
            Err(e) => {
                // A link, a FIFO, a device, a directory or an oversized file where an entry
                // belongs: ignored (and replaced by the next put), never followed or read.
                self.stats.untrusted.fetch_add(1, Ordering::Relaxed);
                self.warn(&format!("{name}: {e}; ignored"));
                return None;
            }
        };
        let Some(entry) = key.open(&k.hex(), &bytes) else {
            self.stats.untrusted.fetch_add(1, Ordering::Relaxed);
            return None;
        };
        let parsed = decode(entry, &k.digest, &k.variant);
        if parsed.is_none() {
            // Authentic but unreadable (cannot happen short of a bug): drop it, analyse again.
            self.stats.dropped.fetch_add(1, Ordering::Relaxed);
            let _ = layers.remove(&name);
        } else {
            self.stats.hits.fetch_add(1, Ordering::Relaxed);
        }
        parsed
    }

    /// Stores an analysis; a layer whose digest was not verified is not stored, nor is anything
    /// without a key (returns false).
    pub fn put(&self, k: &LayerKey, layer: &AnalyzedLayer) -> io::Result<bool> {
        let Some(key) = self.mac_key() else { return Ok(false) };
        let Some(entry) = encode(&k.digest, &k.variant, layer)? else { return Ok(false) };
        let sealed = key.seal(&k.hex(), &entry);
        self.layers(true)?.replace(&Self::entry_name(k), &sealed, 0o600, true)?;
        Ok(true)
    }

    /// Takes the key's lock, waiting while another process holds it, at most `lock_timeout`.
    pub fn lock(&self, k: &LayerKey) -> KeyLock {
        let open = self.layers(true).and_then(|d| d.open_lock(&format!("{}.lock", k.hex())));
        // A cache we cannot lock is still a cache: the layer is analysed without single flight.
        let file = match open {
            Ok(f) => f,
            Err(e) => {
                if e.kind() == io::ErrorKind::InvalidData {
                    self.warn(&format!("lock {}.lock: {e}; analysing without single flight", k.hex()));
                }
                return KeyLock { _file: None };
            }
        };
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

    /// Removes every entry and lock file; returns how many entries. Names are removed, never
    /// followed: a `layers/` that is a link is refused, a link inside is removed as a link.
    pub fn clean(&self) -> io::Result<u64> {
        let layers = match self.layers(false) {
            Ok(d) => d,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(e),
        };
        let mut n = 0;
        for name in layers.names()? {
            let is_entry = !name.ends_with(".lock");
            if layers.remove(&name).is_ok() && is_entry {
                n += 1;
            }
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

/// The hex key of a layer's analysis (`analyzer NUL digest NUL variant`, hashed).
pub fn key(digest: &str, variant: &str) -> String {
    LayerCache::key(digest, variant)
}

/// The secret that authenticates cache entries: whoever holds it can write entries this
/// process trusts, so it lives outside the cache directory and is shared only by the processes
/// that share the cache (a Kubernetes Job's pods: the same Secret, as `CUDALINT_CACHE_KEY` or
/// mounted as the key file).
#[derive(Clone)]
pub struct CacheKey([u8; 32]);

impl CacheKey {
    /// The key of a secret (any bytes, at least 16 of them to be worth the name).
    pub fn from_secret(secret: &[u8]) -> Result<CacheKey, String> {
        if secret.len() < MIN_SECRET {
            return Err(format!("the cache key's secret is shorter than {MIN_SECRET} bytes"));
        }
        let mut h = Sha256::new();
        h.update(b"cudalint layer cache key\0");
        h.update(secret);
        Ok(CacheKey(h.finalize().into()))
    }

    /// `CUDALINT_CACHE_KEY`, else the key file ([`key_path`]), made with a fresh random secret
    /// (mode 0600) when there is none. A key file that others may write, or that another user
    /// owns, is refused: they could make this process trust what they like.
    pub fn load() -> Result<CacheKey, String> {
        if let Some(v) = std::env::var_os(KEY_ENV).filter(|v| !v.is_empty()) {
            use std::os::unix::ffi::OsStrExt;
            return CacheKey::from_secret(v.as_bytes()).map_err(|e| format!("{KEY_ENV}: {e}"));
        }
        let p =
            key_path().ok_or_else(|| format!("no key (set {KEY_ENV}, or XDG_CONFIG_HOME or HOME for a key file)"))?;
        let shown = || crate::escape::text(&p.display().to_string());
        match safe_fs::read_key_file(&p) {
            Ok(secret) => CacheKey::from_secret(trim_secret(&secret)).map_err(|e| format!("{}: {e}", shown())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                safe_fs::create_key_file(&p).map_err(|e| format!("{}: cannot create the cache key: {e}", shown()))?;
                let secret = safe_fs::read_key_file(&p).map_err(|e| format!("{}: {e}", shown()))?;
                CacheKey::from_secret(trim_secret(&secret)).map_err(|e| format!("{}: {e}", shown()))
            }
            Err(e) => Err(format!("{}: {e}", shown())),
        }
    }

    /// The MAC of an entry filed under `name` (the hex key).
    fn mac(&self, name: &str, entry: &[u8]) -> [u8; 32] {
        hmac_sha256(&self.0, &[b"cudalint layer cache entry v1\0", name.as_bytes(), b"\0", entry])
    }

    /// The file bytes of an entry: magic, MAC, entry.
    pub fn seal(&self, name: &str, entry: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(MAC_MAGIC.len() + 32 + entry.len());
        out.extend_from_slice(MAC_MAGIC);
        out.extend_from_slice(&self.mac(name, entry));
        out.extend_from_slice(entry);
        out
    }

    /// The entry inside `file` if its MAC, for `name`, is right.
    pub fn open<'a>(&self, name: &str, file: &'a [u8]) -> Option<&'a [u8]> {
        let rest = file.strip_prefix(MAC_MAGIC)?;
        let (mac, entry) = rest.split_at_checked(32)?;
        let want = self.mac(name, entry);
        // Constant time: a forger learns nothing from how fast a guess is refused.
        let diff = mac.iter().zip(want.iter()).fold(0u8, |acc, (a, b)| acc | (a ^ b));
        (diff == 0).then_some(entry)
    }
}

/// A key file holds its secret as text (a line of hex when cudalint made it).
fn trim_secret(b: &[u8]) -> &[u8] {
    b.trim_ascii()
}

/// `$XDG_CONFIG_HOME/cudalint/cache.key`, else `~/.config/cudalint/cache.key`.
pub fn key_path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").filter(|h| !h.is_empty()).map(|h| Path::new(&h).join(".config")))?;
    Some(base.join("cudalint").join("cache.key"))
}

/// HMAC-SHA256 (RFC 2104) of the concatenated `parts`, with a key of at most one block.
fn hmac_sha256(key: &[u8; 32], parts: &[&[u8]]) -> [u8; 32] {
    let mut block = [0u8; 64];
    block[..32].copy_from_slice(key);
    let mut inner = Sha256::new();
    inner.update(block.map(|b| b ^ 0x36));
    for p in parts {
        inner.update(p);
    }
    let mut outer = Sha256::new();
    outer.update(block.map(|b| b ^ 0x5c));
    outer.update(inner.finalize());
    outer.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::codec::tests::{A, B, layer};
    use super::*;

    fn k(digest: &str, variant: &str) -> LayerKey {
        LayerKey { digest: digest.into(), variant: variant.into() }
    }

    fn key(secret: &str) -> CacheKey {
        CacheKey::from_secret(secret.as_bytes()).unwrap()
    }

    fn cache(dir: &Path) -> LayerCache {
        LayerCache::new(dir.to_path_buf()).with_key(key("a secret of sixteen bytes or more"))
    }

    #[test]
    fn a_short_secret_is_not_a_key() {
        assert!(CacheKey::from_secret(b"short").is_err());
    }

    #[test]
    fn unverified_analyses_are_never_stored() {
        let dir = tempfile::tempdir().unwrap();
        let c = cache(dir.path());
        assert!(!c.put(&k(A, "v"), &layer(A, false)).unwrap());
        assert!(c.get(&k(A, "v")).is_none());
        // An analysis filed under another layer's digest is refused too.
        assert!(!c.put(&k(B, "v"), &layer(A, true)).unwrap());
        assert!(c.put(&k(A, "v"), &layer(A, true)).unwrap());
        assert_eq!(c.get(&k(A, "v")).unwrap().info.size, 42);
    }

    #[test]
    fn a_lock_held_elsewhere_is_waited_for_at_most_the_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let c = cache(dir.path()).with_lock_timeout(Duration::from_millis(200));
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

    #[test]
    fn hmac_is_rfc_4231() {
        // Test case 2: key "Jefe" (zero-padded, as HMAC pads any short key).
        let mut k = [0u8; 32];
        k[..4].copy_from_slice(b"Jefe");
        assert_eq!(
            hex::encode(hmac_sha256(&k, &[b"what do ya want ", b"for nothing?"])),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    fn entry_file(dir: &Path, k: &LayerKey) -> PathBuf {
        dir.join("layers").join(LayerCache::entry_name(k))
    }

    /// The entry proper of a file, with its body edited and its body hash made right again: what
    /// anyone who can write the directory can do.
    fn forge(entry: &[u8]) -> Vec<u8> {
        let plain = String::from_utf8(zstd::decode_all(entry).unwrap()).unwrap();
        let (head, body) = plain.split_once('\n').unwrap();
        let body = body.replace("\"size\":42", "\"size\":7");
        let mut h: serde_json::Value = serde_json::from_str(head).unwrap();
        h["sha256"] = hex::encode(Sha256::digest(body.as_bytes())).into();
        zstd::encode_all(format!("{h}\n{body}").as_bytes(), 3).unwrap()
    }

    #[test]
    fn entries_without_the_keys_mac_are_never_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let c = cache(dir.path());
        let ka = k(A, "v");
        assert!(c.put(&ka, &layer(A, true)).unwrap());
        let file = std::fs::read(entry_file(dir.path(), &ka)).unwrap();
        let entry = key("a secret of sixteen bytes or more").open(&ka.hex(), &file).unwrap().to_vec();
        assert_eq!(decode(&entry[..], A, "v").unwrap().info.size, 42);
        // Rewritten with a body hash that checks out, the old MAC kept: untrusted.
        let mut rewritten = file[..MAC_MAGIC.len() + 32].to_vec();
        rewritten.extend_from_slice(&forge(&entry));
        std::fs::write(entry_file(dir.path(), &ka), &rewritten).unwrap();
        assert!(c.get(&ka).is_none());
        // Minted without any MAC (an entry as a store or an attestation carries it): untrusted.
        std::fs::write(entry_file(dir.path(), &ka), forge(&entry)).unwrap();
        assert!(c.get(&ka).is_none());
        assert_eq!(c.stats().untrusted.load(Ordering::Relaxed), 2);
        // Sealed with another key: untrusted; with this one, the forgery would be believed, which
        // is why the key stays out of the directory.
        std::fs::write(entry_file(dir.path(), &ka), key("another secret, same length").seal(&ka.hex(), &forge(&entry)))
            .unwrap();
        assert!(c.get(&ka).is_none());
        assert_eq!(c.stats().untrusted.load(Ordering::Relaxed), 3);
        std::fs::write(
            entry_file(dir.path(), &ka),
            key("a secret of sixteen bytes or more").seal(&ka.hex(), &forge(&entry)),
        )
        .unwrap();
        assert_eq!(c.get(&ka).unwrap().info.size, 7);
        // A MAC binds the entry to its name: moved under another key's name, it is untrusted.
        let kb = k(A, "w");
        std::fs::copy(entry_file(dir.path(), &ka), entry_file(dir.path(), &kb)).unwrap();
        assert!(c.get(&kb).is_none());
        assert_eq!(c.stats().hits.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_symlinked_layers_directory_is_neither_written_nor_cleaned() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("precious"), b"keep").unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("layers")).unwrap();
        let c = cache(dir.path());
        let ka = k(A, "v");
        assert!(c.put(&ka, &layer(A, true)).is_err());
        assert!(c.get(&ka).is_none());
        assert!(c.lock(&ka)._file.is_none());
        let e = c.clean().unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        let left: Vec<_> = std::fs::read_dir(outside.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, ["precious"], "nothing written or removed outside the cache");
    }

    #[test]
    fn planted_links_fifos_and_devices_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("target");
        std::fs::write(&target, b"keep").unwrap();
        let c = cache(dir.path());
        let ka = k(A, "v");
        std::fs::create_dir_all(dir.path().join("layers")).unwrap();
        // An entry that is a link to a file elsewhere: not read; put replaces the link.
        std::os::unix::fs::symlink(&target, entry_file(dir.path(), &ka)).unwrap();
        assert!(c.get(&ka).is_none());
        assert!(c.put(&ka, &layer(A, true)).unwrap());
        assert_eq!(std::fs::read(&target).unwrap(), b"keep");
        assert!(!std::fs::symlink_metadata(entry_file(dir.path(), &ka)).unwrap().file_type().is_symlink());
        assert!(c.get(&ka).is_some());
        // A FIFO as an entry and as a lock: refused at once (opening one to read or write
        // would wait for the other end forever).
        let kb = k(B, "v");
        let fifo = |p: PathBuf| {
            let c = std::ffi::CString::new(p.into_os_string().into_encoded_bytes()).unwrap();
            // SAFETY: a valid NUL-terminated path.
            assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        };
        fifo(entry_file(dir.path(), &kb));
        fifo(dir.path().join("layers").join(format!("{}.lock", kb.hex())));
        assert!(c.get(&kb).is_none());
        assert!(c.lock(&kb)._file.is_none());
        // /dev/zero linked in as an entry: refused as a link, never read.
        let kc = k(A, "c");
        std::os::unix::fs::symlink("/dev/zero", entry_file(dir.path(), &kc)).unwrap();
        assert!(c.get(&kc).is_none());
        assert_eq!(c.stats().untrusted.load(Ordering::Relaxed), 3);
        // `clean` removes the names, links as links.
        assert_eq!(c.clean().unwrap(), 3);
        assert_eq!(std::fs::read(&target).unwrap(), b"keep");
        assert_eq!(std::fs::read_dir(dir.path().join("layers")).unwrap().count(), 0);
    }
}
