//! Run-time compilers in an image (ptxas, nvcc, NVRTC, nvJitLink, nvPTXCompiler): told by their
//! file names, versioned by the release banner NVIDIA's tools carry as plain bytes
//! (`Cuda compilation tools, release 12.8, V12.8.93`, the line `ptxas --version` prints). The
//! banner is found in one forward pass: on streams every byte the inspector reads or skips goes
//! through [`Tap`], on seekable inputs the file is read once more in chunks (never held whole).

use std::io;

use serde::{Deserialize, Serialize};

use crate::input::Input;

crate::schema::words! {
    /// The kind of a run-time compiler.
    pub enum CompilerKind {
        Ptxas = "ptxas",
        Nvcc = "nvcc",
        Nvrtc = "nvrtc",
        NvJitLink = "nvjitlink",
        NvPtxCompiler = "nvptxcompiler",
    }
}

/// What a run-time compiler is, and its version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Toolchain {
    /// ptxas, nvcc, nvrtc, nvjitlink, nvptxcompiler.
    pub kind: CompilerKind,
    /// `12.8.93`, or `12.8` where only the release is known; empty when nothing says.
    pub version: String,
    /// Where the version comes from: `banner` (the file's own bytes), `file-name`
    /// (`libnvrtc.so.12.8.93`), `package` (the package record that owns it), or empty.
    pub source: String,
    /// Found by its bytes linked into another library (NVRTC inside `libfoo.so`): it compiles
    /// for that library only, never for whoever loads the compiler by name.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub linked: bool,
}

impl Toolchain {
    /// `12.8` of `12.8.93`.
    pub fn release(&self) -> Option<(u16, u16)> {
        let mut it = self.version.split('.');
        Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
    }
}

/// The kind of run-time compiler a file name says, if any (the knowledge base's
/// `[[compiler_file]]` rows).
pub fn kind_of(name: &str) -> Option<CompilerKind> {
    crate::knowledge::get().compiler_kind(name).and_then(|k| k.parse().ok())
}

/// `libnvrtc.so.12.8.93` -> `12.8.93`; None when the name carries no major.minor.
pub fn version_from_name(name: &str) -> Option<String> {
    let (_, v) = name.split_once(".so.")?;
    let parts: Vec<&str> = v.split('.').collect();
    (parts.len() >= 2 && parts.iter().all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())))
        .then(|| v.to_string())
}

const BANNER: &[u8] = b"Cuda compilation tools, release ";
/// Enough of what follows the banner for `12.8, V12.8.93`.
const TAIL: usize = 32;

/// Finds the first release banner in bytes fed in file order, across chunk boundaries.
#[derive(Debug, Default)]
pub struct BannerFinder {
    carry: Vec<u8>,
    found: Option<String>,
}

impl BannerFinder {
    pub fn found(&self) -> Option<&str> {
        self.found.as_deref()
    }

    /// The end of the input: a banner within the last bytes is read with what there is.
    pub fn finish(&mut self) {
        if self.found.is_none()
            && let Some(i) = memchr::memmem::find(&self.carry, BANNER)
        {
            self.found = parse_release(&self.carry[i + BANNER.len()..]);
        }
    }

    pub fn feed(&mut self, chunk: &[u8]) {
        if self.found.is_some() || chunk.is_empty() {
            return;
        }
        let keep = BANNER.len() + TAIL;
        let mut buf = std::mem::take(&mut self.carry);
        buf.extend_from_slice(chunk);
        let mut from = 0;
        while let Some(i) = memchr::memmem::find(&buf[from..], BANNER).map(|i| i + from) {
            let tail = &buf[i + BANNER.len()..];
            if tail.len() < TAIL {
                // Possibly cut by the chunk's end: decided by the next chunk, or by `finish`.
                break;
            }
            if let Some(v) = parse_release(tail) {
                self.found = Some(v);
                return;
            }
            from = i + 1;
        }
        let start = buf.len().saturating_sub(keep);
        self.carry = buf[start..].to_vec();
    }
}

/// `12.8, V12.8.93` -> `12.8.93`; `12.9, V\x07` (a format stub) -> `12.9`.
pub(crate) fn parse_release(tail: &[u8]) -> Option<String> {
    let num = |s: &[u8]| s.iter().take_while(|b| b.is_ascii_digit() || **b == b'.').count();
    let n = num(tail);
    let release = std::str::from_utf8(&tail[..n]).ok()?.trim_end_matches('.');
    let (major, minor) = release.split_once('.')?;
    if major.is_empty() || minor.is_empty() || minor.contains('.') {
        return None;
    }
    let rest = &tail[n..];
    if let Some(v) = rest.strip_prefix(b", V") {
        let m = num(v);
        let full = std::str::from_utf8(&v[..m]).ok()?.trim_end_matches('.');
        if full.starts_with(&format!("{release}.")) {
            return Some(full.to_string());
        }
    }
    Some(release.to_string())
}

/// What a [`Tap`] shows the bytes to.
pub trait Watcher {
    /// `chunk` starts at file offset `at`.
    fn see(&mut self, at: u64, chunk: &[u8]);
    /// Nothing more to learn: skips stay skips.
    fn satisfied(&self) -> bool;
}

impl Watcher for BannerFinder {
    fn see(&mut self, _at: u64, chunk: &[u8]) {
        self.feed(chunk);
    }
    fn satisfied(&self) -> bool {
        self.found().is_some()
    }
}

/// An [`Input`] that shows every byte read or skipped, in order, to a [`Watcher`]. A skip
/// becomes a read: a stream has to pass those bytes anyway.
pub struct Tap<'a, W: Watcher = BannerFinder> {
    pub inner: &'a mut dyn Input,
    pub finder: W,
    /// Reused for skips turned into reads (allocated at the first real skip).
    buf: Vec<u8>,
}

impl<'a, W: Watcher + Default> Tap<'a, W> {
    pub fn new(inner: &'a mut dyn Input) -> Tap<'a, W> {
        Tap { inner, finder: W::default(), buf: Vec::new() }
    }
}

impl<W: Watcher> Input for Tap<'_, W> {
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn pos(&self) -> u64 {
        self.inner.pos()
    }
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let at = self.inner.pos();
        let n = self.inner.read(buf)?;
        self.finder.see(at, &buf[..n]);
        Ok(n)
    }
    fn skip_to(&mut self, pos: u64) -> io::Result<()> {
        if self.finder.satisfied() || pos <= self.inner.pos() {
            return self.inner.skip_to(pos);
        }
        if self.buf.is_empty() {
            self.buf = vec![0u8; 1 << 20];
        }
        let buf = &mut self.buf;
        while self.inner.pos() < pos {
            let want = ((pos - self.inner.pos()) as usize).min(buf.len());
            let at = self.inner.pos();
            let n = self.inner.read(&mut buf[..want])?;
            if n == 0 {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "input ends before the position asked for"));
            }
            self.finder.see(at, &buf[..n]);
        }
        Ok(())
    }
    fn read_at(&mut self, off: u64, buf: &mut [u8]) -> Option<io::Result<()>> {
        self.inner.read_at(off, buf)
    }
    fn bytes_read(&self) -> u64 {
        self.inner.bytes_read()
    }
}

/// The banner of a whole seekable input, read in chunks (the position does not move).
pub fn banner_at(input: &mut dyn Input) -> io::Result<Option<String>> {
    let len = input.len();
    let mut finder = BannerFinder::default();
    let mut buf = vec![0u8; 1 << 20];
    let mut off = 0u64;
    while off < len && finder.found().is_none() {
        let n = ((len - off) as usize).min(buf.len());
        match input.read_at(off, &mut buf[..n]) {
            Some(Ok(())) => finder.feed(&buf[..n]),
            Some(Err(e)) => return Err(e),
            None => return Ok(None),
        }
        off += n as u64;
    }
    finder.finish();
    Ok(finder.found().map(str::to_string))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_banner_cut_by_a_chunk_boundary_is_found() {
        let text = b"\0\0junk Cuda compilation tools, release 12.8, V12.8.93\0Build cuda_12.8";
        for cut in 1..text.len() {
            let mut f = BannerFinder::default();
            f.feed(&text[..cut]);
            f.feed(&text[cut..]);
            f.finish();
            assert_eq!(f.found(), Some("12.8.93"), "cut at {cut}");
        }
    }

    #[test]
    fn a_format_stub_gives_the_release_only() {
        let mut f = BannerFinder::default();
        f.feed(b"ptxas\0Cuda compilation tools, release 12.9, V\x07\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0");
        assert_eq!(f.found(), Some("12.9"));
        assert_eq!(version_from_name("libnvrtc.so.12.8.93").as_deref(), Some("12.8.93"));
        assert_eq!(version_from_name("libnvrtc.so.12"), None);
        assert_eq!(kind_of("libnvrtc-builtins.so.12.8"), None);
        assert_eq!(kind_of("libnvrtc.alt.so.12"), Some(CompilerKind::Nvrtc));
    }
}

#[cfg(test)]
mod stream_tests {
    use crate::input::{SliceInput, StreamInput};
    use crate::inspect::{InspectOptions, inspect_input};

    /// NVIDIA's bin2c (fixtures/bin/nvidia-bin2c-13.5) placed as `ptxas`: a stream and a
    /// seekable read find the same banner, lean or deep.
    #[test]
    fn streams_and_seekable_inputs_read_the_same_banner() {
        let bytes = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/bin/nvidia-bin2c-13.5")).unwrap();
        for lean in [true, false] {
            let opts = InspectOptions { lean, ..Default::default() };
            let seek = inspect_input(&mut SliceInput::new(&bytes), "/usr/bin/ptxas", &opts).unwrap();
            let mut stream = StreamInput::new(&bytes[..], bytes.len() as u64);
            let streamed = inspect_input(&mut stream, "/usr/bin/ptxas", &opts).unwrap();
            let want = Some(super::Toolchain {
                kind: super::CompilerKind::Ptxas,
                version: "13.5.37".into(),
                source: "banner".into(),
                linked: false,
            });
            assert_eq!(seek.toolchain, want, "seekable, lean {lean}");
            assert_eq!(streamed.toolchain, want, "stream, lean {lean}");
        }
    }
}
