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

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::inspect::InspectOptions;
use crate::layer::AnalyzedLayer;

/// Bumped whenever the analysis of a layer would come out differently for the same bytes
/// (2: package records per layer; sparse entries and non-UTF-8 names read exactly; 3: tar
/// headers read by Go's archive/tar rules, hard links kept for the merge). A package
/// record parser has its own version instead (`packages::RECORDS`), folded into the key too.
const ANALYSIS_VERSION: u32 = 3;
/// The most an entry may decompress to: a bound, so a hostile or broken entry cannot exhaust
/// memory (it is dropped instead).
const MAX_ENTRY: u64 = 512 << 20;
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

#[derive(Serialize, Deserialize, PartialEq, Debug)]
struct Header {
    schema: String,
    digest: String,
    analyzer: String,
    variant: String,
    /// sha256 (hex) of the body that follows the header line.
    sha256: String,
}

/// What made an analysis: the crate, the analysis and record formats, and the knowledge base
/// (which files the inspector keeps and which requirements a record lists depend on it: a row
/// added by `--knowledge` must not reuse analyses made without it).
fn analyzer() -> String {
    let k = &crate::knowledge::get().digest;
    let k = k.strip_prefix("sha256:").unwrap_or(k).get(..12).unwrap_or_default();
    format!("{}+{ANALYSIS_VERSION}+{}+k{k}", env!("CARGO_PKG_VERSION"), crate::packages::record_versions())
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
        hex::encode(Sha256::digest(format!("{}\0{digest}\0{variant}", analyzer())))
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
    fn layers(&self, create: bool) -> io::Result<safe::DirFd> {
        if create {
            std::fs::create_dir_all(&self.dir)?;
        }
        safe::DirFd::open(&self.dir)?.subdir("layers", create)
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
    decode_within(entry, digest, variant, max).map(|d| d.layer)
}

/// An entry read by [`decode_within`].
pub struct Decoded {
    pub layer: AnalyzedLayer,
    /// Decompressed bytes it took.
    pub size: u64,
    /// Its body's SHA-256 (hex), as its header records it: equal bodies, equal analyses.
    pub sha256: String,
}

/// [`decode`] within `max` decompressed bytes (a caller's budget over several entries, as an
/// attestation's).
pub fn decode_within(entry: impl Read, digest: &str, variant: &str, max: u64) -> Option<Decoded> {
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
    (layer.info.digest == digest && layer.info.verified).then_some(Decoded {
        layer,
        size: plain.len() as u64,
        sha256: header.sha256,
    })
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
        match safe::read_key_file(&p) {
            Ok(secret) => CacheKey::from_secret(trim_secret(&secret)).map_err(|e| format!("{}: {e}", shown())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                safe::create_key_file(&p).map_err(|e| format!("{}: cannot create the cache key: {e}", shown()))?;
                let secret = safe::read_key_file(&p).map_err(|e| format!("{}: {e}", shown()))?;
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

/// Writes `bytes` to `dir/name` (one plain file name) without following anything planted there:
/// the bytes go to a new temporary file (created exclusively, `O_NOFOLLOW`) in `dir`, which is
/// then renamed over `name`, replacing whatever was there (a symlink is replaced, not followed;
/// a directory is an error). For directories others may write to (a shared `--output-dir`).
/// `dir` itself is the caller's to choose, and is followed if a link.
pub fn write_new_file(dir: &Path, name: &str, bytes: &[u8]) -> io::Result<()> {
    safe::DirFd::open(dir)?.replace(name, bytes, 0o666, false)
}

/// File operations relative to a directory descriptor, never following a link at the last
/// step and never blocking on a FIFO.
mod safe {
    use std::ffi::OsString;
    use std::fs::File;
    use std::io::{self, Read, Write};
    use std::os::fd::OwnedFd;
    use std::os::unix::ffi::OsStringExt;
    use std::path::Path;
    use std::sync::atomic::{AtomicU64, Ordering};

    use rustix::fs::{AtFlags, FileType, Mode, OFlags};

    pub struct DirFd(OwnedFd);

    fn plain_name(name: &str) -> io::Result<&str> {
        if name.is_empty() || name == "." || name == ".." || name.contains('/') || name.contains('\0') {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{name:?} is not a plain file name")));
        }
        Ok(name)
    }

    fn refused(what: &str) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidData, what.to_string())
    }

    /// Why an open with `O_NOFOLLOW` failed, in words (ELOOP: the name is a symlink).
    fn explain(e: rustix::io::Errno) -> io::Error {
        if e == rustix::io::Errno::LOOP || e == rustix::io::Errno::NOTDIR {
            refused("a symbolic link or not a directory: refused, not followed")
        } else {
            e.into()
        }
    }

    fn kind_of(fd: &OwnedFd) -> io::Result<FileType> {
        Ok(FileType::from_raw_mode(rustix::fs::fstat(fd)?.st_mode))
    }

    fn what(t: FileType) -> &'static str {
        match t {
            FileType::Fifo => "a FIFO",
            FileType::Socket => "a socket",
            FileType::CharacterDevice | FileType::BlockDevice => "a device",
            FileType::Directory => "a directory",
            FileType::Symlink => "a symbolic link",
            _ => "not a regular file",
        }
    }

    impl DirFd {
        /// `path` as a directory (followed: the caller named it).
        pub fn open(path: &Path) -> io::Result<DirFd> {
            let fd = rustix::fs::open(path, OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())?;
            Ok(DirFd(fd))
        }

        /// The subdirectory `name`, never through a link; made (0700) if `create`.
        pub fn subdir(&self, name: &str, create: bool) -> io::Result<DirFd> {
            let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            match rustix::fs::openat(&self.0, plain_name(name)?, flags, Mode::empty()) {
                Ok(fd) => Ok(DirFd(fd)),
                Err(rustix::io::Errno::NOENT) if create => {
                    match rustix::fs::mkdirat(&self.0, name, Mode::from_raw_mode(0o700)) {
                        Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                        Err(e) => return Err(e.into()),
                    }
                    rustix::fs::openat(&self.0, name, flags, Mode::empty()).map(DirFd).map_err(explain)
                }
                Err(e) => Err(explain(e)),
            }
        }

        /// The whole of the regular file `name`, at most `limit` bytes (a larger one is an
        /// error); a link, FIFO, device or directory is refused without blocking.
        pub fn read_regular(&self, name: &str, limit: u64) -> io::Result<Vec<u8>> {
            let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
            let fd = rustix::fs::openat(&self.0, plain_name(name)?, flags, Mode::empty()).map_err(explain)?;
            let t = kind_of(&fd)?;
            if t != FileType::RegularFile {
                return Err(refused(what(t)));
            }
            let mut buf = Vec::new();
            File::from(fd).take(limit + 1).read_to_end(&mut buf)?;
            if buf.len() as u64 > limit {
                return Err(refused("larger than an entry may be"));
            }
            Ok(buf)
        }

        /// A lock file `name`, opened or made, a regular file only.
        pub fn open_lock(&self, name: &str) -> io::Result<File> {
            let flags = OFlags::RDWR | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
            let fd =
                rustix::fs::openat(&self.0, plain_name(name)?, flags, Mode::from_raw_mode(0o600)).map_err(explain)?;
            let t = kind_of(&fd)?;
            if t != FileType::RegularFile {
                return Err(refused(what(t)));
            }
            Ok(File::from(fd))
        }

        /// Writes `name` anew: a temporary file made exclusively beside it (mode `mode`, less
        /// the umask), synced if `sync`, renamed over `name`.
        pub fn replace(&self, name: &str, bytes: &[u8], mode: u32, sync: bool) -> io::Result<()> {
            let name = plain_name(name)?;
            static SEQ: AtomicU64 = AtomicU64::new(0);
            let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            let (tmp, fd) = loop {
                let nanos =
                    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
                let tmp = format!(".tmp-{}-{}-{nanos:x}", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed));
                match rustix::fs::openat(&self.0, tmp.as_str(), flags, Mode::from_raw_mode(mode)) {
                    Ok(fd) => break (tmp, fd),
                    Err(rustix::io::Errno::EXIST) => continue,
                    Err(e) => return Err(e.into()),
                }
            };
            let mut f = File::from(fd);
            let written = f.write_all(bytes).and_then(|_| if sync { f.sync_all() } else { Ok(()) });
            let renamed = written.and_then(|_| Ok(rustix::fs::renameat(&self.0, tmp.as_str(), &self.0, name)?));
            if renamed.is_err() {
                let _ = self.remove(&tmp);
            }
            renamed
        }

        /// Removes the name `name` (a link is removed as a link).
        pub fn remove(&self, name: &str) -> io::Result<()> {
            Ok(rustix::fs::unlinkat(&self.0, plain_name(name)?, AtFlags::empty())?)
        }

        /// The names in the directory (not `.` and `..`; names that are not UTF-8 are left out:
        /// cudalint never makes one).
        pub fn names(&self) -> io::Result<Vec<String>> {
            let mut out = Vec::new();
            for e in rustix::fs::Dir::read_from(&self.0)? {
                let e = e?;
                let name = OsString::from_vec(e.file_name().to_bytes().to_vec());
                if let Ok(n) = name.into_string()
                    && n != "."
                    && n != ".."
                {
                    out.push(n);
                }
            }
            Ok(out)
        }
    }

    /// The key file's bytes (at most 4 KiB). It may be a link (a Kubernetes Secret mount is
    /// one); it must be a regular file that neither group nor others may write, owned by this
    /// user or root.
    pub fn read_key_file(p: &Path) -> io::Result<Vec<u8>> {
        use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
        let f = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(p)?;
        let m = f.metadata()?;
        if !m.is_file() {
            return Err(refused("not a regular file"));
        }
        if m.mode() & 0o022 != 0 {
            return Err(refused("group or others may write it: refused (chmod 600)"));
        }
        // SAFETY: getuid has no preconditions and cannot fail.
        let me = unsafe { libc::getuid() };
        if m.uid() != me && m.uid() != 0 {
            return Err(refused("owned by another user: refused"));
        }
        let mut buf = Vec::new();
        f.take(4097).read_to_end(&mut buf)?;
        if buf.len() > 4096 {
            return Err(refused("larger than 4 KiB: not a key"));
        }
        Ok(buf)
    }

    /// Makes the key file with a fresh random secret (64 hex digits), 0600 in a 0700 directory,
    /// atomically: written whole under a temporary name, then linked to its name, so a process
    /// that races this one reads one whole key or the other, and both keep the first.
    pub fn create_key_file(p: &Path) -> io::Result<()> {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        let dir = p.parent().ok_or_else(|| refused("no directory"))?;
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
        let mut secret = [0u8; 32];
        File::open("/dev/urandom")?.read_exact(&mut secret)?;
        let tmp = dir.join(format!(".cache.key.{}", std::process::id()));
        let _ = std::fs::remove_file(&tmp);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)?;
        let written = f.write_all(format!("{}\n", hex::encode(secret)).as_bytes()).and_then(|_| f.sync_all());
        let linked = written.and_then(|_| match std::fs::hard_link(&tmp, p) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
            r => r,
        });
        let _ = std::fs::remove_file(&tmp);
        linked
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the inspector keeps depends on the library rows: analyses are keyed by the knowledge
    /// in use, and a file added with `--knowledge` changes that key.
    #[test]
    fn the_analyzer_names_the_knowledge_in_use() {
        let k = &crate::knowledge::get().digest;
        assert!(analyzer().ends_with(&format!("+k{}", &k["sha256:".len()..][..12])), "{}", analyzer());
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("ours.toml");
        std::fs::write(&f, "[[related]]\nprefix = \"ours-\"\nsource = \"us\"\n").unwrap();
        let with = crate::knowledge::Knowledge::load(&[f]).unwrap();
        assert_ne!(with.digest, *k);
    }
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
                step: None,
                stats: Default::default(),
            },
            summary: Default::default(),
        }
    }

    const A: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    fn key(secret: &str) -> CacheKey {
        CacheKey::from_secret(secret.as_bytes()).unwrap()
    }

    fn cache(dir: &Path) -> LayerCache {
        LayerCache::new(dir.to_path_buf()).with_key(key("a secret of sixteen bytes or more"))
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

    #[test]
    fn write_new_file_replaces_a_planted_link_instead_of_following_it() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("victim");
        std::fs::write(&target, b"keep").unwrap();
        std::os::unix::fs::symlink(&target, dir.path().join("report.json")).unwrap();
        write_new_file(dir.path(), "report.json", b"{}").unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"keep");
        assert_eq!(std::fs::read(dir.path().join("report.json")).unwrap(), b"{}");
        // Written again: replaced whole, no temporary file left behind.
        write_new_file(dir.path(), "report.json", b"[]").unwrap();
        assert_eq!(std::fs::read(dir.path().join("report.json")).unwrap(), b"[]");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        for bad in ["", ".", "..", "a/b", "../x"] {
            let e = write_new_file(dir.path(), bad, b"x").unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{bad:?}");
        }
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        assert!(write_new_file(dir.path(), "sub", b"x").is_err(), "a directory is not replaced");
    }

    #[test]
    fn the_key_file_is_made_private_once_and_refused_if_others_may_write_it() {
        use std::os::unix::fs::PermissionsExt;
        let home = tempfile::tempdir().unwrap();
        let p = home.path().join("cudalint/cache.key");
        safe::create_key_file(&p).unwrap();
        let first = safe::read_key_file(&p).unwrap();
        assert_eq!(first.trim_ascii().len(), 64);
        assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::metadata(p.parent().unwrap()).unwrap().permissions().mode() & 0o777, 0o700);
        // Made again (a racing process): the first key stays.
        safe::create_key_file(&p).unwrap();
        assert_eq!(safe::read_key_file(&p).unwrap(), first);
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o620)).unwrap();
        assert!(safe::read_key_file(&p).unwrap_err().to_string().contains("may write"));
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        // A Secret mount is a link: followed.
        let link = home.path().join("mounted.key");
        std::os::unix::fs::symlink(&p, &link).unwrap();
        assert_eq!(safe::read_key_file(&link).unwrap(), first);
        assert!(CacheKey::from_secret(b"short").is_err());
    }
}
