//! Layer blobs: compression sniffed from the first bytes (never trusted from a media type),
//! and the blob's SHA-256 computed over exactly the bytes read.
//!
//! What is sniffed is what the runtimes sniff: containerd's `DetectCompression`
//! (`pkg/archive/compression/compression.go`: gzip, zstd frames and zstd *skippable* frames) and
//! moby's `DecompressStream` (`docker load`: bzip2, gzip, xz, zstd). docs/reading.md
//! lists each case.

use std::io::{self, BufRead, Read};

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Compression {
    None,
    Gzip,
    Zstd,
    Xz,
    Bzip2,
}

impl Compression {
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "tar",
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
            Compression::Xz => "xz",
            Compression::Bzip2 => "bzip2",
        }
    }
}

/// How many leading bytes `sniff` and `unreadable` look at (a tar header block: an
/// uncompressed blob's first header is checked before it is read as a tar).
pub const SNIFF_LEN: usize = 512;

const ZSTD_MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];
const XZ_MAGIC: [u8; 6] = [0xFD, 0x37, 0x7A, 0x58, 0x5A, 0x00];

/// A zstd skippable frame: little-endian magic 0x184D2A50..=0x184D2A5F, a u32 size, then that
/// many bytes the decoder skips. containerd calls a blob zstd when it starts with one and holds
/// at least 8 bytes (pzstd writes one first); the zstd decoder skips it.
fn skippable(head: &[u8]) -> bool {
    head.len() >= 8 && u32::from_le_bytes([head[0], head[1], head[2], head[3]]) & 0xFFFF_FFF0 == 0x184D_2A50
}

pub fn sniff(head: &[u8]) -> Compression {
    if head.starts_with(&[0x1F, 0x8B]) {
        Compression::Gzip
    } else if head.starts_with(&ZSTD_MAGIC) || skippable(head) {
        Compression::Zstd
    } else if head.starts_with(&XZ_MAGIC) {
        Compression::Xz
    } else if head.starts_with(b"BZh") {
        Compression::Bzip2
    } else {
        Compression::None
    }
}

/// Why a blob that sniffs as no compression cannot be read as a tar, judged from its first
/// [`SNIFF_LEN`] bytes; None when it may be one (a tar header, zero blocks, or too short to
/// tell: the tar walk then says what is wrong). The text never quotes the blob's bytes: they
/// are an attacker's, and a header that is not one only echoes noise (or a terminal escape).
pub fn unreadable(head: &[u8]) -> Option<String> {
    if head.iter().all(|&b| b == 0) || super::tar::looks_like_tar(head) {
        return None;
    }
    let known = [
        (&[0x04, 0x22, 0x4D, 0x18][..], "lz4"),
        (&[0x5D, 0x00, 0x00][..], "lzma (legacy .lzma)"),
        (b"LZIP", "lzip"),
        (&[0x1F, 0x9D][..], "compress (.Z)"),
        (b"PK\x03\x04", "zip"),
        (b"7z\xBC\xAF\x27\x1C", "7z"),
    ];
    if let Some((_, what)) = known.iter().find(|(m, _)| head.starts_with(m)) {
        return Some(format!(
            "{what} data, which neither docker nor containerd reads as a layer (gzip, zstd, xz, bzip2 or a plain tar \
             are): refused"
        ));
    }
    if head.len() < SNIFF_LEN {
        return None;
    }
    Some(
        "neither a tar archive (its first 512 bytes are no tar header) nor gzip, zstd, xz or bzip2 data: an unknown \
         compression or a corrupt blob, refused"
            .into(),
    )
}

/// Large reads keep inflate and the tar walk fed (small reads cost ~40% more).
pub const READ_BUF: usize = 1 << 20;

/// The most memory a zstd window or an xz dictionary may ask for: zstd's decoder refuses a
/// window over 128 MiB (its default limit, kept), and xz is held to the same (plus liblzma's own
/// bookkeeping). gzip and bzip2 need little by construction (32 KiB window, 900 kB blocks).
/// None bounds the inflated size: it streams through the walk, never held.
pub const MAX_WINDOW: u64 = 128 << 20;
const XZ_MEMLIMIT: u64 = MAX_WINDOW + (8 << 20);

/// Bytes of a blob's start read to learn what its decoder needs: a zstd frame header after
/// pzstd's skippable frame, an xz stream header and its first block header.
pub const HEADER_LEN: usize = 4096;

/// The memory a decoder of `kind` asks for, from the header bytes `head` (the blob's first
/// bytes): the zstd window of the first frame (skippable frames skipped), the xz dictionary of
/// the first block; a small constant for gzip and bzip2. Where the header cannot be read from
/// `head`, the most the decoder is allowed ([`MAX_WINDOW`]).
pub fn window(kind: Compression, head: &[u8]) -> u64 {
    match kind {
        Compression::None => 0,
        // A 32 KiB window and inflate's state.
        Compression::Gzip => 64 << 10,
        // 900 kB blocks: bzip2's own estimate of its decoder is 3.7 MB.
        Compression::Bzip2 => 4 << 20,
        Compression::Zstd => zstd_window(head).unwrap_or(MAX_WINDOW),
        Compression::Xz => xz_dictionary(head).map_or(MAX_WINDOW, |d| d + XZ_SLACK),
    }
}

/// The most a layer of `media_type` may ask before its bytes are seen: gzip's small window for a
/// gzip or plain tar type (a blob that turns out otherwise asks again), else [`MAX_WINDOW`].
pub fn most_for_media_type(media_type: Option<&str>) -> u64 {
    match media_type.unwrap_or_default() {
        m if m.ends_with("+zstd") || m.ends_with(".zstd") || m.ends_with("+xz") => MAX_WINDOW + XZ_SLACK,
        m if m.ends_with("gzip") || m.ends_with(".tar") => window(Compression::Gzip, &[]),
        _ => MAX_WINDOW + XZ_SLACK,
    }
}

/// What liblzma's decoder holds besides the dictionary (its own estimate is under 100 KiB).
const XZ_SLACK: u64 = 1 << 20;

/// RFC 8878 §3.1.1.1: the Window_Descriptor, or the content size of a single-segment frame.
fn zstd_window(mut b: &[u8]) -> Option<u64> {
    while skippable(b) {
        let size = u32::from_le_bytes(b[4..8].try_into().ok()?) as usize;
        b = b.get(8usize.checked_add(size)?..)?;
    }
    let b = b.strip_prefix(&ZSTD_MAGIC)?;
    let fhd = *b.first()?;
    let single = fhd & 0x20 != 0;
    let dict_len = [0, 1, 2, 4][usize::from(fhd & 3)];
    let fcs_len = match fhd >> 6 {
        0 => usize::from(single),
        1 => 2,
        2 => 4,
        _ => 8,
    };
    if !single {
        let wd = *b.get(1)?;
        let log = 10 + u32::from(wd >> 3);
        let base = 1u64 << log;
        return Some(base + (base / 8) * u64::from(wd & 7));
    }
    let at = 1 + dict_len;
    let f = b.get(at..at + fcs_len)?;
    let mut v = [0u8; 8];
    v[..fcs_len].copy_from_slice(f);
    let size = u64::from_le_bytes(v) + if fcs_len == 2 { 256 } else { 0 };
    Some(size.max(1 << 10))
}

/// The xz format (tukaani's xz-file-format 1.2.1 §3.1, §5.3.1): the LZMA2 dictionary size in the
/// first block's filter flags.
fn xz_dictionary(b: &[u8]) -> Option<u64> {
    let b = b.get(12..)?;
    let size = (usize::from(*b.first()?) + 1) * 4;
    if b[0] == 0 {
        // An index: a stream without blocks needs no dictionary.
        return Some(0);
    }
    let h = b.get(..size)?;
    let flags = h[1];
    let mut at = 2;
    fn varint(h: &[u8], at: &mut usize) -> Option<u64> {
        let mut v = 0u64;
        for i in 0..9 {
            let byte = *h.get(*at)?;
            *at += 1;
            v |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }
    if flags & 0x40 != 0 {
        varint(h, &mut at)?;
    }
    if flags & 0x80 != 0 {
        varint(h, &mut at)?;
    }
    let mut dict = 0;
    for _ in 0..=(flags & 3) {
        let (id, props) = (varint(h, &mut at)?, varint(h, &mut at)?);
        let p = h.get(at..at.checked_add(usize::try_from(props).ok()?)?)?;
        at += p.len();
        if id == 0x21 && p.len() == 1 {
            let bits = u32::from(p[0] & 0x3f);
            dict = if bits >= 40 { u64::from(u32::MAX) } else { (2 | u64::from(bits & 1)) << (bits / 2 + 11) };
        }
    }
    Some(dict)
}

/// The decompressed stream of a layer blob whose compressed bytes come from `raw`. Read it
/// in large chunks: it has no buffer of its own. `window`: what the scan's memory budget holds
/// for its window ([`window`]); a later frame or block asking more is refused, never allocated.
pub fn decoder<'a, R: BufRead + 'a>(kind: Compression, raw: R, window: u64) -> io::Result<Box<dyn Read + 'a>> {
    let window = window.min(MAX_WINDOW);
    Ok(match kind {
        Compression::None => Box::new(raw),
        Compression::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(raw)),
        // The window the budget holds is the limit (128 MiB at most, the decoder's default): a
        // frame asking for more is refused rather than allowed to allocate it. Skippable frames
        // (pzstd's first) are skipped, as every zstd decoder does; every frame after the first
        // is read (`zstd -d`, klauspost).
        Compression::Zstd => {
            let mut d = zstd::stream::read::Decoder::with_buffer(raw)?;
            d.window_log_max(window.next_power_of_two().ilog2().clamp(10, 27))?;
            Box::new(d)
        }
        // `xz -d -c -q` (moby's xzDecompress): concatenated streams and stream padding read,
        // integrity checks verified, memory held to what the budget holds (at most XZ_MEMLIMIT).
        Compression::Xz => {
            let limit = (window + XZ_SLACK).min(XZ_MEMLIMIT);
            let stream = liblzma::stream::Stream::new_stream_decoder(limit, liblzma::stream::CONCATENATED)
                .map_err(io::Error::other)?;
            Box::new(liblzma::bufread::XzDecoder::new_stream(raw, stream))
        }
        // Go's compress/bzip2 (moby) reads concatenated streams, as pbzip2 writes them.
        Compression::Bzip2 => Box::new(bzip2::bufread::MultiBzDecoder::new(raw)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniffs_what_the_runtimes_sniff() {
        assert_eq!(sniff(&[0x1F, 0x8B, 8, 0]), Compression::Gzip);
        assert_eq!(sniff(&ZSTD_MAGIC), Compression::Zstd);
        for m in [0x50u8, 0x5A, 0x5F] {
            assert_eq!(sniff(&[m, 0x2A, 0x4D, 0x18, 0, 0, 0, 0]), Compression::Zstd, "{m:#x}");
            // containerd wants 8 bytes (the frame's size too).
            assert_eq!(sniff(&[m, 0x2A, 0x4D, 0x18, 0, 0, 0]), Compression::None);
        }
        assert_eq!(sniff(&[0x60, 0x2A, 0x4D, 0x18, 0, 0, 0, 0]), Compression::None);
        assert_eq!(sniff(&XZ_MAGIC), Compression::Xz);
        assert_eq!(sniff(&XZ_MAGIC[..5]), Compression::None);
        assert_eq!(sniff(b"BZh91AY&SY"), Compression::Bzip2);
        assert_eq!(sniff(b"usr/\0"), Compression::None);
    }

    #[test]
    fn refusals_never_quote_the_blob() {
        let mut head = vec![0u8; SNIFF_LEN];
        let name = b"\x1b]0;pwned\x07garbage!";
        head[..name.len()].copy_from_slice(name);
        head[148..156].copy_from_slice(b"\x1b[2Jxyz\0");
        let e = unreadable(&head).unwrap();
        assert!(!e.contains("pwned") && !e.contains('\x1b') && !e.contains("xyz"), "{e}");
        assert!(unreadable(&[0u8; SNIFF_LEN]).is_none(), "zero blocks: an empty tar");
        assert!(unreadable(b"short").is_none(), "the tar walk says what is short");
        assert!(unreadable(&[0x04, 0x22, 0x4D, 0x18, 1, 2]).unwrap().starts_with("lz4"));
    }
}
