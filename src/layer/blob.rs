//! Reading one layer blob: seekable when it is an uncompressed tar in a file (file contents are
//! hopped over), otherwise one streaming pass through the decompressor; digests checked.

use super::budget::{LAYER_OVERHEAD, MemoryBudget, Reservation, mib};
use std::fs::File;
use std::io::{self, Read};

use super::analyze::{LayerError, LayerSummary, analyze};
use super::decode::{self, Compression};
use super::pipe::{pipe, read_full_dyn};
use super::{AnalyzedLayer, LayerInfo, LayerRef};
use crate::digest::{DigestError, Hasher};
use crate::input::{FileInput, Input, InputReader, StreamInput};
use crate::inspect::InspectOptions;

/// How much of what is read is hashed against its digest. The CLI maps its `--verify` values
/// onto this (no clap here: the layer reader does not know about command lines).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Verify {
    /// Hash every blob that is read whole anyway (compressed layers, streams, manifests,
    /// configs) against its digest; uncompressed layers read by seeking are not hashed. A
    /// layer's diff_id is checked where no blob digest authenticates it (legacy docker-archive
    /// layers).
    #[default]
    Auto,
    /// Hash every layer, reading uncompressed ones in full, and check compressed layers'
    /// diff_ids too (a second hash over every inflated byte).
    Always,
    /// Hash nothing.
    Never,
}

/// Why a layer blob was refused. The image scan turns these into its own `Layer`/`Digest`
/// errors, with the same text.
#[derive(Debug, thiserror::Error)]
pub enum BlobError {
    #[error("layer {layer}: {message}")]
    Layer { layer: String, message: String },
    #[error(transparent)]
    Digest(#[from] DigestError),
}

/// Counts bytes read through it (progress bars): `F` is called with each read's length.
pub struct Counting<R, F> {
    inner: R,
    count: F,
}

impl<R, F: Fn(u64)> Counting<R, F> {
    pub fn new(inner: R, count: F) -> Self {
        Counting { inner, count }
    }
}

impl<R: Read, F: Fn(u64)> Read for Counting<R, F> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        (self.count)(n as u64);
        Ok(n)
    }
}

/// What reading a layer blob produced, before its digests are checked.
#[derive(Clone)]
pub struct Outcome {
    pub summary: LayerSummary,
    pub compression: Compression,
    /// Bytes of the blob read.
    pub size: u64,
    /// SHA-256 of the blob bytes (None when read by seeking).
    pub blob_digest: Option<String>,
    /// SHA-256 of the uncompressed tar, when computed.
    pub tar_digest: Option<String>,
}

fn layer_err(l: &LayerRef, e: impl std::fmt::Display) -> BlobError {
    BlobError::Layer { layer: l.id(), message: e.to_string() }
}

/// Hashes what passes through it (the uncompressed tar, in the thread that walks it, so the
/// hash runs beside inflating rather than after it).
struct Hashing<R> {
    inner: R,
    hasher: Option<Hasher>,
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        if let Some(h) = self.hasher.as_mut() {
            h.update(&buf[..n]);
        }
        Ok(n)
    }
}

/// The hasher for a digest to check; sha256 where the digest is unknown or its algorithm is not
/// supported (`check` then refuses to call the layer verified).
fn hasher_for(digest: Option<&String>) -> Hasher {
    digest.and_then(|d| Hasher::for_digest(d)).unwrap_or_else(Hasher::sha256)
}

/// Reads a layer blob from a byte stream in one pass, in up to three threads: this one reads
/// and hashes the blob's bytes, one decompresses them (compressed blobs only), one walks the
/// tar, hashes it (when its diff_id is known, or `want_tar_digest`) and inspects its files.
pub fn stream<R: Read + ?Sized>(
    raw: &mut R,
    l: &LayerRef,
    inspect: &InspectOptions,
    want_tar_digest: bool,
    budget: &MemoryBudget,
    held: Option<Reservation<'_>>,
) -> Result<Outcome, BlobError> {
    let mut first = [0u8; decode::HEADER_LEN];
    let n = read_full_dyn(raw, &mut first).map_err(|e| layer_err(l, format!("reading the blob: {e}")))?;
    let compression = decode::sniff(&first[..n]);
    if compression == Compression::None
        && let Some(why) = decode::unreadable(&first[..n])
    {
        return Err(layer_err(l, why));
    }
    // The decoder's window and the layer's buffers are held from the scan's budget before either
    // is made: a layer waits while others hold it, and one that could never fit is refused.
    let window = decode::window(compression, &first[..n]);
    // What was held before the download started (the most its media type allows) becomes what
    // its header asks.
    let need = window + LAYER_OVERHEAD;
    let held = match held {
        Some(mut r) => r.resize(need).map(|()| r),
        None => budget.reserve(need),
    }
    .map_err(|total| {
        layer_err(
            l,
            format!(
                "its {} window of {} and the layer's buffers ({}) do not fit the memory budget of {} \
                 (--memory): refused rather than allocated",
                name(compression),
                mib(window),
                mib(LAYER_OVERHEAD),
                mib(total)
            ),
        )
    })?;
    // A later frame or block asking a larger window draws it through the inflate thread.
    let held = std::sync::Mutex::new(held);
    let total = budget.total();
    let mut raw = io::Cursor::new(&first[..n]).chain(raw);
    let (raw_w, raw_r) = pipe();
    let mut blob = hasher_for(l.digest.as_ref());
    let alg = blob.algorithm().clone();
    // The uncompressed tar is hashed when the caller wants its digest checked (the config's
    // rootfs.diff_ids): always where no blob digest authenticates the bytes, and under
    // `--verify always` besides; an uncompressed blob is its own tar, hashed once where the
    // algorithms agree.
    let tar_hasher = want_tar_digest
        .then(|| hasher_for(l.diff_id.as_ref()))
        .filter(|h| compression != Compression::None || *h.algorithm() != alg);
    // The walk hashes the tar as it reads it: on two cores inflating is the critical path, and
    // the walk (SHA-256 included, which outruns zstd's and gzip's output) keeps up on the other
    // core; handing copies of every inflated chunk to a hash thread cost the inflate thread a
    // copy and an allocation per chunk.
    let mut size = 0u64;
    std::thread::scope(|s| {
        let (tar_r, inflate) = if compression == Compression::None {
            (raw_r, None)
        } else {
            let (tar_w, tar_r) = pipe();
            let inflate = s.spawn(move || -> io::Result<()> {
                let held = &held;
                let grow = Box::new(move |w: u64| {
                    let mut r = held.lock().unwrap_or_else(|e| e.into_inner());
                    r.grow(w + LAYER_OVERHEAD).map_err(|room| {
                        format!(
                            "with the layer's buffers ({}) it does not fit the memory budget of {} (--memory), \
                             which can give it at most {}",
                            mib(LAYER_OVERHEAD),
                            mib(total),
                            mib(room)
                        )
                    })
                });
                let mut dec = decode::decoder(compression, raw_r, window, grow)?;
                tar_w.pump(&mut dec, |_| {})
            });
            (tar_r, Some(inflate))
        };
        let walk = s.spawn(move || -> Result<(LayerSummary, Option<String>), LayerError> {
            let mut input = StreamInput::unbounded(Hashing { inner: tar_r, hasher: tar_hasher });
            let summary = analyze(&mut input, inspect)?;
            // Read to the end so the digests cover the whole blob (tar padding, trailing frames).
            io::copy(&mut InputReader(&mut input), &mut io::sink())?;
            Ok((summary, input.into_inner().hasher.map(Hasher::finish)))
        });
        let fed = raw_w.pump(&mut raw, |c| {
            blob.update(c);
            size += c.len() as u64;
        });
        let inflated = inflate.map(|t| t.join().expect("inflate thread"));
        let walked = walk.join().expect("walk thread");
        if let Err(e) = fed {
            return Err(layer_err(l, format!("reading the blob: {e}")));
        }
        let corrupt = |e: &io::Error| {
            if decode::is_over_budget(e) {
                // A window the budget would not give: the decoder's text says which and why.
                return layer_err(l, e.to_string());
            }
            layer_err(l, format!("{} stream is corrupt or truncated: {e}", name(compression)))
        };
        if let Some(Err(e)) = inflated {
            return Err(corrupt(&e));
        }
        let (summary, tar_hashed) = walked.map_err(|e| match e {
            LayerError::Tar(t) => layer_err(l, format!("not a readable tar stream: {t}")),
            LayerError::Io(e) => corrupt(&e),
        })?;
        let blob_digest = blob.finish();
        // An uncompressed blob is its own tar: its digest stands for the diff_id where both use
        // the same algorithm (else the diff_id goes unchecked unless it was hashed above).
        let same_alg = |d: &String| d.split(':').next() == blob_digest.split(':').next();
        let tar_digest = tar_hashed.or_else(|| {
            (compression == Compression::None && l.diff_id.as_ref().is_none_or(same_alg)).then(|| blob_digest.clone())
        });
        Ok(Outcome { summary, compression, size, blob_digest: Some(blob_digest), tar_digest })
    })
}

fn name(c: Compression) -> &'static str {
    c.name()
}

/// Whether a layer's uncompressed tar is hashed to check its diff_id. A verified blob digest
/// already authenticates the bytes (and a runtime refuses a layer whose tar does not match its
/// diff_id when it unpacks it), so by default the diff_id is checked only where no blob digest
/// is known; `--verify always` checks both: on two cores the second SHA-256 over every
/// inflated byte costs more than zstd itself.
pub fn wants_tar_digest(l: &LayerRef, verify: Verify) -> bool {
    l.diff_id.is_some() && (l.digest.is_none() || verify == Verify::Always)
}

/// How a blob is read: which digests are checked, what the inspector reads, the scan's budget.
pub struct Reading<'a> {
    pub verify: Verify,
    pub inspect: &'a InspectOptions,
    pub budget: &'a MemoryBudget,
}

/// Reads a layer blob stored at `[off, off+size)` of a file.
pub fn from_file(
    file: &File,
    off: u64,
    size: u64,
    l: &LayerRef,
    how: Reading<'_>,
    progress: impl Fn(u64),
) -> Result<Outcome, BlobError> {
    let Reading { verify, inspect, budget } = how;
    if let Some(want) = l.size.filter(|&w| w != size) {
        return Err(layer_err(l, format!("blob is {size} bytes, its descriptor says {want}")));
    }
    let mut input = FileInput::new(file, off, size).strict();
    let mut head = [0u8; decode::SNIFF_LEN];
    let n = head.len().min(size as usize);
    input.read_at(0, &mut head[..n]).expect("file input is seekable").map_err(|e| layer_err(l, e))?;
    let compression = decode::sniff(&head[..n]);
    if compression == Compression::None
        && let Some(why) = decode::unreadable(&head[..n])
    {
        return Err(layer_err(l, why));
    }
    // Only a blob every runtime reads as a plain tar is walked in place, unhashed under `auto`:
    // anything sniffed as compressed (a zstd skippable frame included: the decoder skips it, so
    // a tar hidden inside one is not what is unpacked) is streamed and hashed whole.
    if compression == Compression::None && verify != Verify::Always {
        let _held = budget.reserve(LAYER_OVERHEAD).map_err(|total| {
            layer_err(
                l,
                format!("the layer's buffers ({}) do not fit the memory budget of {}", mib(LAYER_OVERHEAD), mib(total)),
            )
        })?;
        let summary = analyze(&mut input, inspect).map_err(|e| layer_err(l, format!("not a readable tar: {e}")))?;
        progress(size);
        return Ok(Outcome { summary, compression, size, blob_digest: None, tar_digest: None });
    }
    let mut raw = Counting::new(InputReader(&mut input), progress);
    stream(&mut raw, l, inspect, wants_tar_digest(l, verify), budget, None)
}

/// Checks an outcome against the layer's digests and describes the layer.
pub fn check(l: &LayerRef, o: Outcome, verify: Verify) -> Result<AnalyzedLayer, BlobError> {
    if let Some(want) = l.size
        && want != o.size
        && o.blob_digest.is_some()
    {
        return Err(layer_err(l, format!("blob is {} bytes, its descriptor says {want}", o.size)));
    }
    let mut verified = false;
    if verify != Verify::Never {
        for want in [&l.digest, &l.diff_id].into_iter().flatten() {
            if Hasher::for_digest(want).is_none() {
                return Err(DigestError::unverifiable(&format!("layer {}", l.id()), want).into());
            }
        }
        let pairs = [(&l.digest, &o.blob_digest, "blob"), (&l.diff_id, &o.tar_digest, "uncompressed tar")];
        for (want, got, what) in pairs {
            if let (Some(want), Some(got)) = (want, got) {
                if want != got {
                    return Err(DigestError::mismatch(&format!("layer {} ({what})", l.id()), want, got.clone()).into());
                }
                verified = true;
            }
        }
    }
    Ok(AnalyzedLayer {
        info: LayerInfo {
            digest: l.id(),
            diff_id: l.diff_id.clone(),
            size: o.size,
            compression: o.compression,
            verified,
            step: None,
            stats: o.summary.stats,
        },
        summary: o.summary,
    })
}
