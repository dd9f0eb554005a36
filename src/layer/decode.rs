//! Layer blobs: compression sniffed from the first bytes (never trusted from a media type),
//! and the blob's SHA-256 computed over exactly the bytes read.

use std::cell::RefCell;
use std::io::{self, BufRead, BufReader, Read};
use std::rc::Rc;

use sha2::{Digest, Sha256};

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Compression {
    None,
    Gzip,
    Zstd,
}

pub fn sniff(head: &[u8]) -> Compression {
    if head.starts_with(&[0x1F, 0x8B]) {
        Compression::Gzip
    } else if head.starts_with(&[0x28, 0xB5, 0x2F, 0xFD]) {
        Compression::Zstd
    } else {
        Compression::None
    }
}

/// Hashes everything read through it. The state is shared so it can be read after the reader
/// has been handed to a decoder.
pub struct Hashing<R> {
    inner: R,
    state: Rc<RefCell<HashState>>,
}

#[derive(Default)]
pub struct HashState {
    hasher: Sha256,
    pub count: u64,
}

impl HashState {
    pub fn digest(&self) -> String {
        format!("sha256:{}", hex::encode(self.hasher.clone().finalize()))
    }
}

impl<R: Read> Hashing<R> {
    pub fn new(inner: R) -> (Self, Rc<RefCell<HashState>>) {
        let state = Rc::new(RefCell::new(HashState::default()));
        (Hashing { inner, state: state.clone() }, state)
    }
}

impl<R: Read> Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        let mut s = self.state.borrow_mut();
        s.hasher.update(&buf[..n]);
        s.count += n as u64;
        Ok(n)
    }
}

/// Large reads keep inflate and the tar walk fed (small reads cost ~40% more).
pub const READ_BUF: usize = 1 << 20;

/// The decompressed stream of a layer blob whose compressed bytes come from `raw`.
pub fn decoder<'a, R: BufRead + 'a>(kind: Compression, raw: R) -> io::Result<Box<dyn Read + 'a>> {
    Ok(match kind {
        Compression::None => Box::new(raw),
        Compression::Gzip => Box::new(BufReader::with_capacity(READ_BUF, flate2::bufread::MultiGzDecoder::new(raw))),
        // The decoder's default window limit (128 MiB) stays: a frame asking for more is refused
        // rather than allowed to allocate it.
        Compression::Zstd => {
            Box::new(BufReader::with_capacity(READ_BUF, zstd::stream::read::Decoder::with_buffer(raw)?))
        }
    })
}
