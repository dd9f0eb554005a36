//! Blobs as byte streams: downloaded while they are read, bounded by their descriptor's size,
//! resumed where a dropped connection stopped, retried with backoff.

use std::io::{self, Read};
use std::sync::atomic::Ordering;
use std::time::Instant;

use reqwest::StatusCode;

use super::RegistryError;
use super::client::{Remote, backoff};
use super::http::{Body, BodyError};
use crate::digest::{self, DigestAlgorithm, Hasher};

impl Remote {
    /// A blob as a byte stream, downloaded while it is read: never more than `size` bytes (its
    /// descriptor's), a dropped connection resumed where it stopped (range request), 429/5xx
    /// retried with backoff. sha256 is checked by the caller (the layer walker hashes as it
    /// reads); any other algorithm is checked here, the mismatch an error at the end.
    pub fn blob(&self, digest: &str, size: Option<u64>) -> Result<BlobReader, RegistryError> {
        let algorithm = digest::parse(digest)?.algorithm().clone();
        let (tx, rx) = tokio::sync::mpsc::channel::<io::Result<bytes::Bytes>>(16);
        let inner = self.inner.clone();
        let digest = digest.to_string();
        let url = inner.url(&format!("/v2/{}/blobs/{digest}", self.reference.repository()));
        let limit = size.unwrap_or(u64::MAX);
        self.rt.spawn(async move {
            let what = format!("blob {digest}");
            let mut hasher = (algorithm != DigestAlgorithm::Sha256).then(|| Hasher::new(&algorithm)).flatten();
            let mut got: u64 = 0;
            let mut attempt = 0;
            let fail = |m: String| io::Error::other(m);
            loop {
                let from = (got > 0).then_some(got);
                let failure = match inner.fetch(url.clone(), None, from, &what).await {
                    Ok(res) if from.is_some() && res.status() != StatusCode::PARTIAL_CONTENT => {
                        let _ = tx
                            .send(Err(fail("connection dropped and the registry does not resume downloads".into())))
                            .await;
                        return;
                    }
                    Ok(res) => {
                        let mut body = match Body::new(res, limit - got, inner.limits, &what) {
                            Ok(b) => b,
                            Err(e) => {
                                let _ = tx.send(Err(fail(e.to_string()))).await;
                                return;
                            }
                        };
                        let mut err = None;
                        loop {
                            match body.chunk().await {
                                Ok(Some(b)) => {
                                    got += b.len() as u64;
                                    inner.downloaded.fetch_add(b.len() as u64, Ordering::Relaxed);
                                    if let Some(h) = hasher.as_mut() {
                                        h.update(&b);
                                    }
                                    let t = Instant::now();
                                    if tx.send(Ok(b)).await.is_err() {
                                        return;
                                    }
                                    body.paused(t.elapsed());
                                }
                                Ok(None) => break,
                                Err(e) => {
                                    err = Some(e);
                                    break;
                                }
                            }
                        }
                        match err {
                            None => {
                                if let Some(h) = hasher {
                                    let actual = h.finish();
                                    if actual != digest {
                                        let _ = tx
                                            .send(Err(fail(format!(
                                                "digest mismatch: expected {digest}, content is {actual}"
                                            ))))
                                            .await;
                                    }
                                }
                                return;
                            }
                            Some(BodyError::Fatal(e)) => {
                                let _ = tx.send(Err(fail(e.to_string()))).await;
                                return;
                            }
                            Some(BodyError::Transport(m)) => m,
                        }
                    }
                    Err(f) if !f.transport => {
                        let _ = tx.send(Err(fail(f.error.to_string()))).await;
                        return;
                    }
                    Err(f) => f.error.to_string(),
                };
                if attempt >= inner.retries || Instant::now() >= inner.limits.deadline {
                    let _ =
                        tx.send(Err(fail(format!("download failed after {} attempts: {failure}", attempt + 1)))).await;
                    return;
                }
                tokio::time::sleep(backoff(attempt)).await;
                attempt += 1;
            }
        });
        Ok(BlobReader { rx, cur: bytes::Bytes::new() })
    }
}

/// A blob being downloaded, read as it arrives; a failure (or a digest mismatch) is the read's
/// error.
pub struct BlobReader {
    rx: tokio::sync::mpsc::Receiver<io::Result<bytes::Bytes>>,
    cur: bytes::Bytes,
}

impl BlobReader {
    /// A reader fed by the other end's sends (a stream another task downloads): a sent error
    /// is the read's, a dropped sender its end.
    pub fn channel() -> (tokio::sync::mpsc::Sender<io::Result<bytes::Bytes>>, BlobReader) {
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        (tx, BlobReader { rx, cur: bytes::Bytes::new() })
    }
}

impl Read for BlobReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.cur.is_empty() {
            match self.rx.blocking_recv() {
                Some(Ok(b)) => self.cur = b,
                Some(Err(e)) => return Err(e),
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.cur.len());
        buf[..n].copy_from_slice(&self.cur[..n]);
        let _ = self.cur.split_to(n);
        Ok(n)
    }
}
