//! Byte inputs the inspector reads. Two shapes, one trait:
//! - seekable (a file on disk, a file inside an uncompressed layer, a buffer): skips are free and
//!   any range can be read on demand, so only the bytes the inspector needs are read;
//! - streaming (a file inside a compressed layer, standard input): one forward pass, skips read
//!   and discard.

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::FileExt;

pub trait Input {
    /// Total length in bytes (known up front: a file's size, a tar entry's size).
    fn len(&self) -> u64;
    /// Position of the next byte `read` returns.
    fn pos(&self) -> u64;
    /// Reads up to `buf.len()` bytes at the current position; 0 only at the end.
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize>;
    /// Moves forward to `pos` (never backwards) without handing out the bytes in between.
    fn skip_to(&mut self, pos: u64) -> io::Result<()>;
    /// Random access, without moving the position. `None` for streams.
    fn read_at(&mut self, off: u64, buf: &mut [u8]) -> Option<io::Result<()>>;
    /// Bytes actually fetched from the underlying file or stream (for statistics).
    fn bytes_read(&self) -> u64;

    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    fn seekable(&mut self) -> bool {
        self.read_at(0, &mut []).is_some()
    }
}

fn eof(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, what.to_string())
}

/// A byte range of a file on disk, read with `pread`: no shared seek position, so several
/// inspectors can read slices of one file (an image archive) at once.
pub struct FileInput<'a> {
    file: &'a File,
    base: u64,
    len: u64,
    pos: u64,
    fetched: u64,
    strict: bool,
}

impl<'a> FileInput<'a> {
    pub fn new(file: &'a File, base: u64, len: u64) -> Self {
        FileInput { file, base, len, pos: 0, fetched: 0, strict: false }
    }

    /// Skipping past the end is an error, as it is on a stream: a tar walked by seeking must
    /// not take a cut-off archive (an entry's data running past the end) for a short one.
    pub fn strict(mut self) -> Self {
        self.strict = true;
        self
    }
}

impl Input for FileInput<'_> {
    fn len(&self) -> u64 {
        self.len
    }
    fn pos(&self) -> u64 {
        self.pos
    }
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = within(buf.len(), self.len, self.pos);
        if n == 0 {
            return Ok(0);
        }
        let got = self.file.read_at(&mut buf[..n], self.base + self.pos)?;
        if got == 0 {
            return Err(eof("file is shorter than its recorded size"));
        }
        self.pos += got as u64;
        self.fetched += got as u64;
        Ok(got)
    }
    fn skip_to(&mut self, pos: u64) -> io::Result<()> {
        if self.strict && pos > self.len {
            return Err(eof("the file ends inside an entry (truncated)"));
        }
        self.pos = self.pos.max(pos.min(self.len));
        Ok(())
    }
    fn read_at(&mut self, off: u64, buf: &mut [u8]) -> Option<io::Result<()>> {
        if buf.is_empty() {
            return Some(Ok(()));
        }
        let end = off.checked_add(buf.len() as u64);
        if end.is_none_or(|e| e > self.len) {
            return Some(Err(eof("read past the end of the file")));
        }
        self.fetched += buf.len() as u64;
        Some(self.file.read_exact_at(buf, self.base + off))
    }
    fn bytes_read(&self) -> u64 {
        self.fetched
    }
}

/// A forward-only stream of known length (a tar entry of a compressed layer).
pub struct StreamInput<R: Read> {
    inner: R,
    len: u64,
    pos: u64,
}

impl<R: Read> StreamInput<R> {
    pub fn new(inner: R, len: u64) -> Self {
        StreamInput { inner, len, pos: 0 }
    }
    /// A stream whose length is not known up front (a decompressed layer): it simply ends.
    pub fn unbounded(inner: R) -> Self {
        StreamInput { inner, len: u64::MAX, pos: 0 }
    }
    pub fn into_inner(self) -> R {
        self.inner
    }
}

impl<R: Read> Input for StreamInput<R> {
    fn len(&self) -> u64 {
        self.len
    }
    fn pos(&self) -> u64 {
        self.pos
    }
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = within(buf.len(), self.len, self.pos);
        if n == 0 {
            return Ok(0);
        }
        let got = loop {
            match self.inner.read(&mut buf[..n]) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => break r?,
            }
        };
        if got == 0 && self.len != u64::MAX {
            return Err(eof("stream ended before the entry's recorded size"));
        }
        self.pos += got as u64;
        Ok(got)
    }
    fn skip_to(&mut self, pos: u64) -> io::Result<()> {
        let target = pos.min(self.len);
        let mut scratch = [0u8; 64 * 1024];
        while self.pos < target {
            let n = (target - self.pos).min(scratch.len() as u64) as usize;
            if self.read(&mut scratch[..n])? == 0 {
                return Err(eof("stream ended inside an entry"));
            }
        }
        Ok(())
    }
    fn read_at(&mut self, _off: u64, _buf: &mut [u8]) -> Option<io::Result<()>> {
        None
    }
    fn bytes_read(&self) -> u64 {
        self.pos
    }
}

/// A buffer in memory (fuzzing, decompressed payloads, tests).
pub struct SliceInput<'a> {
    data: &'a [u8],
    pos: u64,
    fetched: u64,
}

impl<'a> SliceInput<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        SliceInput { data, pos: 0, fetched: 0 }
    }
}

impl Input for SliceInput<'_> {
    fn len(&self) -> u64 {
        self.data.len() as u64
    }
    fn pos(&self) -> u64 {
        self.pos
    }
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let start = self.pos as usize;
        let n = buf.len().min(self.data.len() - start);
        buf[..n].copy_from_slice(&self.data[start..start + n]);
        self.pos += n as u64;
        self.fetched += n as u64;
        Ok(n)
    }
    fn skip_to(&mut self, pos: u64) -> io::Result<()> {
        self.pos = self.pos.max(pos.min(self.len()));
        Ok(())
    }
    fn read_at(&mut self, off: u64, buf: &mut [u8]) -> Option<io::Result<()>> {
        let r =
            usize::try_from(off).ok().and_then(|o| Some(o..o.checked_add(buf.len())?)).and_then(|r| self.data.get(r));
        Some(match r {
            Some(src) => {
                buf.copy_from_slice(src);
                self.fetched += buf.len() as u64;
                Ok(())
            }
            None => Err(eof("read past the end of the buffer")),
        })
    }
    fn bytes_read(&self) -> u64 {
        self.fetched
    }
}

/// A window `[start, start+len)` of another input, positioned at its own 0 (an `ar` member).
/// The parent must be positioned at or before `start` when the window is created.
pub struct SubInput<'a> {
    parent: &'a mut dyn Input,
    start: u64,
    len: u64,
    pos: u64,
}

impl<'a> SubInput<'a> {
    pub fn new(parent: &'a mut dyn Input, start: u64, len: u64) -> io::Result<Self> {
        let len = len.min(parent.len().saturating_sub(start));
        parent.skip_to(start)?;
        Ok(SubInput { parent, start, len, pos: 0 })
    }
}

impl Input for SubInput<'_> {
    fn len(&self) -> u64 {
        self.len
    }
    fn pos(&self) -> u64 {
        self.pos
    }
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = within(buf.len(), self.len, self.pos);
        if n == 0 {
            return Ok(0);
        }
        self.parent.skip_to(self.start + self.pos)?;
        let got = self.parent.read(&mut buf[..n])?;
        self.pos += got as u64;
        Ok(got)
    }
    fn skip_to(&mut self, pos: u64) -> io::Result<()> {
        self.pos = self.pos.max(pos.min(self.len));
        self.parent.skip_to(self.start + self.pos)
    }
    fn read_at(&mut self, off: u64, buf: &mut [u8]) -> Option<io::Result<()>> {
        if off.checked_add(buf.len() as u64).is_none_or(|e| e > self.len) {
            return Some(Err(eof("read past the end of the archive member")));
        }
        self.parent.read_at(self.start + off, buf)
    }
    fn bytes_read(&self) -> u64 {
        self.parent.bytes_read()
    }
}

/// An input whose first bytes were already read (to sniff the format) and are served again.
pub struct Prefixed<'a> {
    head: &'a [u8],
    inner: &'a mut dyn Input,
    pos: u64,
}

impl<'a> Prefixed<'a> {
    /// `inner` must be positioned right after `head`, which it returned from offset 0.
    pub fn new(head: &'a [u8], inner: &'a mut dyn Input) -> Self {
        Prefixed { head, inner, pos: 0 }
    }
}

impl Input for Prefixed<'_> {
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn pos(&self) -> u64 {
        self.pos
    }
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if let Some(rest) = usize::try_from(self.pos).ok().and_then(|p| self.head.get(p..)).filter(|r| !r.is_empty()) {
            let n = rest.len().min(buf.len());
            buf[..n].copy_from_slice(&rest[..n]);
            self.pos += n as u64;
            return Ok(n);
        }
        self.inner.skip_to(self.pos)?;
        let n = self.inner.read(buf)?;
        self.pos += n as u64;
        Ok(n)
    }
    fn skip_to(&mut self, pos: u64) -> io::Result<()> {
        self.pos = self.pos.max(pos.min(self.len()));
        if self.pos > self.head.len() as u64 {
            self.inner.skip_to(self.pos)?;
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

/// Reads until `buf` is full or the input ends; returns how many bytes were read.
pub fn read_full(input: &mut dyn Input, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        let got = input.read(&mut buf[n..])?;
        if got == 0 {
            break;
        }
        n += got;
    }
    Ok(n)
}

/// An [`Input`] read as a plain byte stream from its current position.
pub struct InputReader<'a>(pub &'a mut dyn Input);

impl Read for InputReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }
}

/// How much of a `want`-byte read fits before `len` when at `pos`.
fn within(want: usize, len: u64, pos: u64) -> usize {
    want.min(usize::try_from(len.saturating_sub(pos)).unwrap_or(usize::MAX))
}
