//! Reading one layer blob: seekable when it is an uncompressed tar in a file (file contents are
//! hopped over), otherwise one streaming pass through the decompressor; digests checked.

use std::fs::File;
use std::io::{self, Read};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::oci::LayerRef;
use super::progress::{Counting, Progress};
use super::{AnalyzedLayer, LayerInfo, ScanError};
use crate::input::{FileInput, Input, InputReader, StreamInput};
use crate::inspect::InspectOptions;
use crate::layer::analyze::{LayerError, LayerSummary, analyze};
use sha2::{Digest, Sha256};

use crate::layer::decode::{self, Compression};
use crate::layer::pipe::{pipe, read_full_dyn};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Default)]
pub enum Verify {
    /// Hash every blob that is read whole anyway (compressed layers, streams, manifests,
    /// configs); uncompressed layers read by seeking are not hashed.
    #[default]
    Auto,
    /// Hash every layer, reading uncompressed ones in full.
    Always,
    /// Hash nothing.
    Never,
}

/// What reading a layer blob produced, before its digests are checked.
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

fn layer_err(l: &LayerRef, e: impl std::fmt::Display) -> ScanError {
    ScanError::Layer { layer: l.id(), message: e.to_string() }
}

/// Reads a layer blob from a byte stream in one pass, in up to three threads: this one reads
/// and hashes the blob's bytes, one decompresses them (compressed blobs only), one walks the
/// tar and inspects its files.
pub fn stream<R: Read + ?Sized>(
    raw: &mut R,
    l: &LayerRef,
    inspect: &InspectOptions,
    want_tar_digest: bool,
) -> Result<Outcome, ScanError> {
    let mut first = [0u8; 4];
    let n = read_full_dyn(raw, &mut first).map_err(|e| layer_err(l, format!("reading the blob: {e}")))?;
    let compression = decode::sniff(&first[..n]);
    let mut raw = io::Cursor::new(&first[..n]).chain(raw);
    let (raw_w, raw_r) = pipe();
    let mut blob = Sha256::new();
    let mut size = 0u64;
    std::thread::scope(|s| {
        let (tar_r, inflate) = if compression == Compression::None {
            (raw_r, None)
        } else {
            let (tar_w, tar_r) = pipe();
            let inflate = s.spawn(move || -> io::Result<Option<String>> {
                let mut dec = decode::decoder(compression, raw_r)?;
                // The uncompressed tar is hashed only when its digest is the one to check
                // (legacy docker-archive layers, named by diff_id).
                let mut tar = want_tar_digest.then(Sha256::new);
                tar_w.pump(&mut dec, |c| {
                    if let Some(h) = tar.as_mut() {
                        h.update(c)
                    }
                })?;
                Ok(tar.map(|h| format!("sha256:{}", hex::encode(h.finalize()))))
            });
            (tar_r, Some(inflate))
        };
        let walk = s.spawn(move || -> Result<LayerSummary, LayerError> {
            let mut input = StreamInput::unbounded(tar_r);
            let summary = analyze(&mut input, inspect)?;
            // Read to the end so the digests cover the whole blob (tar padding, trailing frames).
            io::copy(&mut InputReader(&mut input), &mut io::sink())?;
            Ok(summary)
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
        let corrupt = |e: &dyn std::fmt::Display| {
            layer_err(l, format!("{} stream is corrupt or truncated: {e}", name(compression)))
        };
        let tar_from_inflate = match inflated {
            Some(Err(e)) => return Err(corrupt(&e)),
            Some(Ok(t)) => t,
            None => None,
        };
        let summary = walked.map_err(|e| match e {
            LayerError::Tar(t) => layer_err(l, format!("not a readable tar stream: {t}")),
            LayerError::Io(e) => corrupt(&e),
        })?;
        let blob_digest = format!("sha256:{}", hex::encode(blob.finalize()));
        // An uncompressed blob is its own tar.
        let tar_digest = tar_from_inflate.or_else(|| (compression == Compression::None).then(|| blob_digest.clone()));
        Ok(Outcome { summary, compression, size, blob_digest: Some(blob_digest), tar_digest })
    })
}

fn name(c: Compression) -> &'static str {
    match c {
        Compression::None => "tar",
        Compression::Gzip => "gzip",
        Compression::Zstd => "zstd",
    }
}

/// Reads a layer blob stored at `[off, off+size)` of a file.
pub fn from_file(
    file: &File,
    off: u64,
    size: u64,
    l: &LayerRef,
    verify: Verify,
    inspect: &InspectOptions,
    progress: &Progress,
) -> Result<Outcome, ScanError> {
    let mut input = FileInput::new(file, off, size);
    let mut head = [0u8; 4];
    let n = head.len().min(size as usize);
    input.read_at(0, &mut head[..n]).expect("file input is seekable").map_err(|e| layer_err(l, e))?;
    let compression = decode::sniff(&head[..n]);
    if compression == Compression::None && verify != Verify::Always {
        let summary = analyze(&mut input, inspect).map_err(|e| layer_err(l, format!("not a readable tar: {e}")))?;
        progress.add(size);
        return Ok(Outcome { summary, compression, size, blob_digest: None, tar_digest: None });
    }
    let mut raw = Counting::new(InputReader(&mut input), progress);
    let want_tar = l.digest.is_none() && l.diff_id.is_some();
    stream(&mut raw, l, inspect, want_tar)
}

/// Checks an outcome against the layer's digests and describes the layer.
pub fn check(l: &LayerRef, o: Outcome, verify: Verify) -> Result<AnalyzedLayer, ScanError> {
    if let Some(want) = l.size
        && want != o.size
        && o.blob_digest.is_some()
    {
        return Err(layer_err(l, format!("blob is {} bytes, its descriptor says {want}", o.size)));
    }
    let mut verified = false;
    if verify != Verify::Never {
        let pairs = [(&l.digest, &o.blob_digest, "blob"), (&l.diff_id, &o.tar_digest, "uncompressed tar")];
        for (want, got, what) in pairs {
            if let (Some(want), Some(got)) = (want, got) {
                if want != got {
                    return Err(ScanError::Digest {
                        what: format!("layer {} ({what})", l.id()),
                        expected: want.clone(),
                        actual: got.clone(),
                    });
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
            stats: o.summary.stats,
        },
        summary: o.summary,
    })
}

/// Runs `work` for every item on up to `jobs` threads; results in item order. Stops handing
/// out work after the first error.
pub fn parallel<T: Sync, R: Send>(
    items: &[T],
    jobs: usize,
    work: impl Fn(&T) -> Result<R, ScanError> + Sync,
) -> Result<Vec<R>, ScanError> {
    let next = AtomicUsize::new(0);
    let failed = std::sync::atomic::AtomicBool::new(false);
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
