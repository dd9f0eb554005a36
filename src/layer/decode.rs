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
/// liblzma's limit for the largest dictionary: the dictionary and its bookkeeping.
const XZ_MEMLIMIT: u64 = MAX_WINDOW + XZ_SLACK;

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

/// How a decoder asks the scan's memory budget for a larger window when a later zstd frame or xz
/// block needs one: `Ok` once it is held, else why not (the caller knows the budget and the layer).
pub type Grow<'a> = Box<dyn FnMut(u64) -> Result<(), String> + Send + 'a>;

/// The decompressed stream of a layer blob whose compressed bytes come from `raw`. Read it
/// in large chunks: it has no buffer of its own. `window`: what the scan's memory budget holds
/// for its window ([`window`]); a later zstd frame or xz block asking more draws it from the
/// budget through `grow` before the decoder may allocate it, and is refused (an error of kind
/// `OutOfMemory`) where it cannot, or where it is over [`MAX_WINDOW`].
pub fn decoder<'a, R: BufRead + 'a>(
    kind: Compression,
    raw: R,
    window: u64,
    grow: Grow<'a>,
) -> io::Result<Box<dyn Read + 'a>> {
    Ok(match kind {
        Compression::None => Box::new(raw),
        Compression::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(raw)),
        Compression::Zstd => Box::new(ZstdFrames::new(raw, window.min(MAX_WINDOW), grow)?),
        Compression::Xz => Box::new(XzBlocks::new(raw, window, grow)?),
        // Go's compress/bzip2 (moby) reads concatenated streams, as pbzip2 writes them.
        Compression::Bzip2 => Box::new(bzip2::bufread::MultiBzDecoder::new(raw)),
    })
}

fn over_budget(what: String, why: String) -> io::Error {
    io::Error::new(io::ErrorKind::OutOfMemory, format!("{what}: {why}; refused rather than allocated"))
}

/// Whether a decoder error is a window the budget would not give ([`decoder`]'s refusals).
pub fn is_over_budget(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::OutOfMemory
}

/// zstd, frame by frame (`zstd -d`, klauspost: every frame after the first is read; skippable
/// frames, pzstd's first, are skipped): each frame's header is read before the decoder sees it,
/// and the decoder's window limit (`ZSTD_d_windowLogMax`, settable only between frames) is raised
/// to what the frame asks once the budget holds it. The limit never exceeds 128 MiB, zstd's own
/// default.
struct ZstdFrames<'a, R> {
    raw: R,
    dctx: zstd::stream::raw::Decoder<'static>,
    /// The next frame's header, read ahead of the decoder (at most 18 bytes), and where the
    /// decoder has got to in it.
    head: Vec<u8>,
    fed: usize,
    /// Between frames: the next header must be read before any byte reaches the decoder.
    between: bool,
    /// The largest window held so far.
    held: u64,
    grow: Grow<'a>,
}

/// A zstd frame header's longest form: magic, descriptor, window, 4-byte dictionary id, 8-byte
/// content size (RFC 8878 §3.1.1).
const ZSTD_HEADER_MAX: usize = 18;

impl<'a, R: BufRead> ZstdFrames<'a, R> {
    fn new(raw: R, window: u64, grow: Grow<'a>) -> io::Result<Self> {
        let mut me = ZstdFrames {
            raw,
            dctx: zstd::stream::raw::Decoder::new()?,
            head: Vec::with_capacity(ZSTD_HEADER_MAX),
            fed: 0,
            between: true,
            held: 0,
            grow,
        };
        me.limit(window)?;
        me.held = window;
        Ok(me)
    }

    fn limit(&mut self, window: u64) -> io::Result<()> {
        let log = window.next_power_of_two().ilog2().clamp(10, 27);
        self.dctx.set_parameter(zstd::stream::raw::DParameter::WindowLogMax(log))
    }

    /// Tops the look-ahead up to `n` bytes (fewer at the end of the input).
    fn look(&mut self, n: usize) -> io::Result<()> {
        while self.head.len() < n {
            let buf = self.raw.fill_buf()?;
            if buf.is_empty() {
                break;
            }
            let take = buf.len().min(n - self.head.len());
            self.head.extend_from_slice(&buf[..take]);
            self.raw.consume(take);
        }
        Ok(())
    }

    /// Reads the next frame's header, skipping skippable frames, and holds its window. `false`
    /// at the clean end of the input.
    fn next_frame(&mut self) -> io::Result<bool> {
        loop {
            self.head.drain(..self.fed);
            self.fed = 0;
            self.look(ZSTD_HEADER_MAX)?;
            if self.head.is_empty() {
                return Ok(false);
            }
            if skippable(&self.head) {
                let size = u64::from(u32::from_le_bytes(self.head[4..8].try_into().expect("8 bytes")));
                let in_head = (self.head.len() as u64 - 8).min(size);
                self.head.drain(..8 + in_head as usize);
                let rest = size - in_head;
                if io::copy(&mut (&mut self.raw).take(rest), &mut io::sink())? < rest {
                    return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "zstd skippable frame truncated"));
                }
                continue;
            }
            // A header that does not parse is left to the decoder, which says what is wrong.
            if let Some(window) = zstd_window(&self.head) {
                if window > MAX_WINDOW {
                    return Err(over_budget(
                        format!("a zstd frame asks a window of {}", crate::layer::budget::mib(window)),
                        format!("over the {} any decoder is allowed", crate::layer::budget::mib(MAX_WINDOW)),
                    ));
                }
                if window > self.held {
                    (self.grow)(window).map_err(|why| {
                        over_budget(
                            format!("a later zstd frame asks a window of {}", crate::layer::budget::mib(window)),
                            why,
                        )
                    })?;
                    self.held = window;
                    self.limit(window)?;
                }
            }
            return Ok(true);
        }
    }
}

impl<R: BufRead> Read for ZstdFrames<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        use zstd::stream::raw::{InBuffer, Operation, OutBuffer};
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            if self.between {
                if !self.next_frame()? {
                    return Ok(0);
                }
                self.between = false;
            }
            let from_head = self.fed < self.head.len();
            let input: &[u8] = if from_head { &self.head[self.fed..] } else { self.raw.fill_buf()? };
            let eof = input.is_empty();
            let mut inb = InBuffer::around(input);
            let mut out = OutBuffer::around(&mut *buf);
            let hint = self.dctx.run(&mut inb, &mut out)?;
            let (used, made) = (inb.pos(), out.pos());
            if from_head {
                self.fed += used;
            } else {
                self.raw.consume(used);
            }
            if hint == 0 {
                // The frame is decoded and flushed: its successor's header is read next.
                self.between = true;
            }
            if made > 0 {
                return Ok(made);
            }
            if eof && !self.between {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "zstd frame truncated"));
            }
        }
    }
}

/// xz (`xz -d -c -q`, moby's xzDecompress): concatenated streams and stream padding read,
/// integrity checks verified. liblzma stops before a block whose dictionary is over its memory
/// limit (LZMA_MEMLIMIT_ERROR) and goes on once the limit is raised: the limit is doubled, each
/// time drawn from the budget first, up to 128 MiB and liblzma's bookkeeping.
struct XzBlocks<'a, R> {
    raw: R,
    stream: liblzma::stream::Stream,
    grow: Grow<'a>,
}

impl<'a, R: BufRead> XzBlocks<'a, R> {
    /// `held`: the dictionary and liblzma's bookkeeping, as [`window`] gives them.
    fn new(raw: R, held: u64, grow: Grow<'a>) -> io::Result<Self> {
        let stream = liblzma::stream::Stream::new_stream_decoder(held.min(XZ_MEMLIMIT), liblzma::stream::CONCATENATED)
            .map_err(io::Error::other)?;
        Ok(XzBlocks { raw, stream, grow })
    }

    /// Doubles the memory limit until liblzma takes it (it refuses a limit under what the block
    /// needs), each step held from the budget first.
    fn raise(&mut self) -> io::Result<()> {
        let mut now = self.stream.memlimit();
        loop {
            let dictionary = crate::layer::budget::mib(now.saturating_sub(XZ_SLACK));
            if now >= XZ_MEMLIMIT {
                return Err(over_budget(
                    format!("an xz block asks a dictionary over {dictionary}"),
                    format!("over the {} any decoder is allowed", crate::layer::budget::mib(MAX_WINDOW)),
                ));
            }
            let next = (now * 2).clamp(2 << 20, XZ_MEMLIMIT);
            (self.grow)(next)
                .map_err(|why| over_budget(format!("a later xz block asks a dictionary over {dictionary}"), why))?;
            match self.stream.set_memlimit(next) {
                Err(liblzma::stream::Error::MemLimit) => now = next,
                r => return r.map_err(io::Error::other),
            }
        }
    }
}

impl<R: BufRead> Read for XzBlocks<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        use liblzma::stream::{Action, Error, Status};
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            let input = self.raw.fill_buf()?;
            let eof = input.is_empty();
            let (in0, out0) = (self.stream.total_in(), self.stream.total_out());
            let ret = self.stream.process(input, buf, if eof { Action::Finish } else { Action::Run });
            let used = (self.stream.total_in() - in0) as usize;
            let made = (self.stream.total_out() - out0) as usize;
            self.raw.consume(used);
            let status = match ret {
                Err(Error::MemLimit) => {
                    self.raise()?;
                    if made > 0 {
                        return Ok(made);
                    }
                    continue;
                }
                r => r.map_err(io::Error::other)?,
            };
            if made > 0 || status == Status::StreamEnd {
                return Ok(made);
            }
            if eof {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "xz stream truncated"));
            }
            if used == 0 {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "corrupt xz stream"));
            }
        }
    }
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

    fn zstd_frame(data: &[u8], window_log: u32) -> Vec<u8> {
        let mut e = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
        e.window_log(window_log).unwrap();
        io::Write::write_all(&mut e, data).unwrap();
        e.finish().unwrap()
    }

    fn xz_stream(data: &[u8], preset: u32) -> Vec<u8> {
        let mut e = liblzma::write::XzEncoder::new(Vec::new(), preset);
        io::Write::write_all(&mut e, data).unwrap();
        e.finish().unwrap()
    }

    /// Reads `blob` as a decoder of `kind` started with the window its header asks, with a
    /// budget that grants up to `most`; the windows it was asked for, and what it read.
    fn read_within(kind: Compression, blob: &[u8], most: u64) -> (Vec<u64>, io::Result<Vec<u8>>) {
        let asked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = asked.clone();
        let grow: Grow = Box::new(move |w| {
            seen.lock().unwrap().push(w);
            if w <= most { Ok(()) } else { Err("the test's budget is smaller".into()) }
        });
        let first = window(kind, &blob[..blob.len().min(HEADER_LEN)]);
        let mut out = Vec::new();
        let r = decoder(kind, io::BufReader::new(blob), first, grow).unwrap().read_to_end(&mut out).map(|_| out);
        let asked = asked.lock().unwrap().clone();
        (asked, r)
    }

    #[test]
    fn a_later_zstd_frame_draws_its_larger_window_from_the_budget() {
        let (a, b) = (vec![7u8; 50_000], (0..200_000u32).map(|i| (i % 251) as u8).collect::<Vec<_>>());
        let small = zstd_frame(&a, 10);
        let large = zstd_frame(&b, 24);
        assert_eq!(zstd_window(&large), Some(16 << 20), "the second frame's header asks 16 MiB");
        // pzstd's skippable frame first, and one between the frames.
        let mut blob = vec![0x50, 0x2A, 0x4D, 0x18, 3, 0, 0, 0, 1, 2, 3];
        blob.extend_from_slice(&small);
        blob.extend_from_slice(&[0x5F, 0x2A, 0x4D, 0x18, 0, 0, 0, 0]);
        blob.extend_from_slice(&large);
        blob.extend_from_slice(&small);
        let (asked, read) = read_within(Compression::Zstd, &blob, 16 << 20);
        assert_eq!(asked, [16 << 20], "one growth, for the larger frame only");
        assert_eq!(read.unwrap(), [&a[..], &b[..], &a[..]].concat());

        let (asked, read) = read_within(Compression::Zstd, &blob, 8 << 20);
        assert_eq!(asked, [16 << 20]);
        let e = read.unwrap_err();
        assert!(is_over_budget(&e), "{e}");
        let text = e.to_string();
        assert!(text.contains("later zstd frame asks a window of 16 MiB") && text.contains("smaller"), "{text}");

        // A truncated frame is an error, not a short read.
        let (_, read) = read_within(Compression::Zstd, &blob[..blob.len() - 5], 16 << 20);
        assert_eq!(read.unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
    }

    #[test]
    fn a_later_xz_block_draws_its_larger_dictionary_from_the_budget() {
        let (a, b) = (vec![1u8; 30_000], (0..300_000u32).map(|i| (i % 253) as u8).collect::<Vec<_>>());
        // Preset 0: a 256 KiB dictionary; preset 6: 8 MiB.
        let blob = [xz_stream(&a, 0), xz_stream(&b, 6), xz_stream(&a, 0)].concat();
        let (asked, read) = read_within(Compression::Xz, &blob, 64 << 20);
        assert_eq!(read.unwrap(), [&a[..], &b[..], &a[..]].concat());
        assert!(asked.windows(2).all(|w| w[0] < w[1]), "{asked:?}");
        let last = *asked.last().expect("the 8 MiB dictionary asked for more");
        assert!(((8 << 20) + XZ_SLACK..=2 * ((8 << 20) + XZ_SLACK)).contains(&last), "{asked:?}");

        let (_, read) = read_within(Compression::Xz, &blob, 4 << 20);
        let e = read.unwrap_err();
        assert!(is_over_budget(&e), "{e}");
        assert!(e.to_string().contains("later xz block asks a dictionary over"), "{e}");
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
