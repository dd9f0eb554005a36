//! A forward window over an [`Input`]: the scanner looks at up to [`WINDOW`] bytes at a time,
//! hops over what it does not need (a seek on seekable inputs, read-and-drop on streams), and can
//! ask for byte ranges to be kept as they stream past ("captures": how a one-pass reader gets
//! the ELF section table that sits at the end of the file).

use std::io;

use memchr::memmem;

use crate::input::Input;

pub const WINDOW: usize = 1 << 20;
/// Read-ahead on seekable inputs: about one entry header, so hopping from entry header to
/// entry header leaves the payloads unread (the kernel's own read-ahead keeps calls cheap).
const READ_AHEAD: usize = 512;

pub struct Capture {
    pub off: u64,
    /// The kept bytes, when held in memory (empty when spilled to a file).
    pub data: Vec<u8>,
    len: u64,
    filled: u64,
    /// Where the bytes go when the range is too large to hold in memory: an unnamed temporary
    /// file (see [`Capture::spilling`]).
    spill: Option<std::fs::File>,
    /// Why the bytes could not be kept (a temporary file that could not be made or written).
    pub failed: Option<String>,
    /// Kept in case it holds what a later header points at; cut short at the first fatbin
    /// container (see [`Window::end_speculative`]).
    speculative: bool,
    /// Where a speculative capture was cut short.
    pub cut_at: Option<u64>,
}

/// Largest range a spilling capture holds in memory; larger ones go to a temporary file, so a
/// stream can keep a large table whose place it learns only later (TensorFlow's 87 MB `.dynstr`,
/// 20 MB `.rela.dyn`) without the memory.
pub const SPILL_OVER: u64 = 16 << 20;

impl Capture {
    pub fn new(off: u64, len: usize) -> Capture {
        Capture {
            off,
            data: vec![0; len],
            len: len as u64,
            filled: 0,
            spill: None,
            failed: None,
            speculative: false,
            cut_at: None,
        }
    }

    /// A capture held in memory up to [`SPILL_OVER`] bytes and in a temporary file beyond.
    pub fn spilling(off: u64, len: u64) -> Capture {
        if len <= SPILL_OVER {
            return Capture::new(off, len as usize);
        }
        let mut c = Capture { len, ..Capture::new(off, 0) };
        match tempfile::tempfile() {
            Ok(f) => c.spill = Some(f),
            Err(e) => c.failed = Some(format!("no temporary file for {len:#x} bytes: {e}")),
        }
        c
    }

    pub fn len(&self) -> u64 {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn complete(&self) -> bool {
        self.filled == self.len && self.failed.is_none()
    }
    /// Whether `[off, off+len)` lies inside this capture's range.
    pub fn covers(&self, off: u64, len: u64) -> bool {
        off >= self.off && off.checked_add(len).is_some_and(|e| e <= self.off + self.len)
    }
    /// The bytes of `[off, off+len)`, when this capture is complete and covers them.
    pub fn get(&self, off: u64, len: u64) -> Option<Vec<u8>> {
        if !self.complete() || !self.covers(off, len) {
            return None;
        }
        let s = usize::try_from(off - self.off).ok()?;
        let n = usize::try_from(len).ok()?;
        match &self.spill {
            None => self.data.get(s..s.checked_add(n)?).map(<[u8]>::to_vec),
            Some(f) => {
                use std::os::unix::fs::FileExt;
                let mut v = vec![0; n];
                f.read_exact_at(&mut v, s as u64).ok()?;
                Some(v)
            }
        }
    }
    /// Copies the part of `bytes` (which start at absolute offset `at`) that falls in range.
    fn offer(&mut self, at: u64, bytes: &[u8]) {
        let end = self.off + self.len;
        let lo = at.max(self.off);
        let hi = (at + bytes.len() as u64).min(end);
        if lo < hi && self.failed.is_none() {
            let src = &bytes[(lo - at) as usize..(hi - at) as usize];
            let dst = lo - self.off;
            match &self.spill {
                None => self.data[dst as usize..dst as usize + src.len()].copy_from_slice(src),
                Some(f) => {
                    use std::os::unix::fs::FileExt;
                    if let Err(e) = f.write_all_at(src, dst) {
                        self.failed = Some(format!("temporary file: {e}"));
                        return;
                    }
                }
            }
            self.filled += src.len() as u64;
        }
    }
}

/// Keeps a region around each occurrence of a pattern in the bytes that stream past (outside
/// given ranges): how a one-pass reader keeps a table whose place it learns only later (lld writes
/// `.shstrtab` before a large `.strtab`, the section table after both). Memory is bounded:
/// `max` regions of at most `2 * radius` bytes, plus `2 * (radius + pattern length)` bytes of
/// look-back.
pub struct Watch {
    pattern: &'static [u8],
    /// Sorted ranges where a match is ignored.
    skip: Vec<(u64, u64)>,
    radius: usize,
    max: usize,
    end: u64,
    /// The bytes offered last, ending at `next`.
    recent: Vec<u8>,
    next: u64,
    pub regions: Vec<Capture>,
}

impl Watch {
    pub fn new(pattern: &'static [u8], skip: Vec<(u64, u64)>, radius: usize, max: usize, end: u64) -> Watch {
        Watch { pattern, skip, radius, max: max.max(2), end, recent: Vec::new(), next: 0, regions: Vec::new() }
    }

    fn offer(&mut self, at: u64, bytes: &[u8]) {
        if at != self.next {
            // Bytes were skipped: what was kept no longer leads up to these.
            self.recent.clear();
        }
        for r in self.regions.iter_mut().filter(|r| !r.complete()) {
            r.offer(at, bytes);
        }
        let end = at + bytes.len() as u64;
        {
            let k = self.pattern.len() - 1;
            // A match that straddles the previous offer and this one.
            let tail = &self.recent[self.recent.len().saturating_sub(k)..];
            let mut joint = tail.to_vec();
            joint.extend_from_slice(&bytes[..k.min(bytes.len())]);
            let base = at - tail.len() as u64;
            let mut hits: Vec<u64> = memmem::find_iter(&joint, self.pattern).map(|p| base + p as u64).collect();
            hits.extend(memmem::find_iter(bytes, self.pattern).map(|p| at + p as u64));
            hits.retain(|&h| !self.skip.iter().any(|&(a, b)| h >= a && h < b));
            for h in hits {
                self.add(h, at, bytes);
            }
        }
        // A match ending in the next offer starts up to `pattern.len()` bytes back, its region
        // `radius` before that.
        let keep = self.radius + self.pattern.len();
        self.recent.extend_from_slice(&bytes[bytes.len().saturating_sub(2 * keep)..]);
        if self.recent.len() > 2 * keep {
            self.recent.drain(..self.recent.len() - keep);
        }
        self.next = end;
    }

    fn add(&mut self, hit: u64, at: u64, bytes: &[u8]) {
        let lo = hit.saturating_sub(self.radius as u64);
        let hi = hit.saturating_add(self.radius as u64).min(self.end);
        let mut c = Capture::new(lo, (hi - lo) as usize);
        c.offer(at - self.recent.len() as u64, &self.recent);
        c.offer(at, bytes);
        if self.regions.len() >= self.max {
            // Keep the first half and the latest: the table sits early (GNU ld: just before
            // the section table) or late (lld: after the symbol table).
            self.regions.remove(self.max / 2);
        }
        self.regions.push(c);
    }
}

pub struct Window<'a> {
    input: &'a mut dyn Input,
    buf: Vec<u8>,
    lo: usize,
    hi: usize,
    /// Absolute offset of `buf[lo]`.
    start: u64,
    seekable: bool,
    pub captures: Vec<Capture>,
    pub watch: Option<Watch>,
}

impl<'a> Window<'a> {
    pub fn new(input: &'a mut dyn Input) -> Window<'a> {
        let seekable = input.seekable();
        let start = input.pos();
        // No bigger than the input: most files in an image are small.
        let size = usize::try_from(input.len().saturating_sub(start)).unwrap_or(WINDOW).clamp(64, WINDOW);
        Window { input, buf: vec![0; size], lo: 0, hi: 0, start, seekable, captures: Vec::new(), watch: None }
    }

    /// Keeps the bytes of `[off, off+len)` as they go by (streams). Bytes already consumed
    /// cannot be captured any more; those still buffered are.
    pub fn capture(&mut self, off: u64, len: usize) {
        let mut c = Capture::new(off, len);
        c.offer(self.start, &self.buf[self.lo..self.hi]);
        self.captures.push(c);
    }

    /// Like [`Window::capture`], for ranges that may be large: held in memory up to
    /// [`SPILL_OVER`] bytes, in a temporary file beyond.
    pub fn capture_spilling(&mut self, off: u64, len: u64) {
        let mut c = Capture::spilling(off, len);
        c.offer(self.start, &self.buf[self.lo..self.hi]);
        self.captures.push(c);
    }

    /// A spilling capture of a range that may hold tables a later header points at; it ends at
    /// the first fatbin container found inside it ([`Window::end_speculative`]).
    pub fn capture_speculative(&mut self, off: u64, len: u64) {
        self.capture_spilling(off, len);
        if let Some(c) = self.captures.last_mut() {
            c.speculative = true;
        }
    }

    /// Device code starts at `at`: every linker writes its tables (`.dynsym`, `.dynstr`,
    /// `.rela.dyn`) before it, so speculative captures stop there instead of keeping the rest
    /// (lld puts `.rodata` and `.nv_fatbin` in the first segment: 500 MB of TensorFlow's).
    pub fn end_speculative(&mut self, at: u64) {
        for c in self.captures.iter_mut().filter(|c| c.speculative && at > c.off && at < c.off + c.len) {
            c.len = at - c.off;
            c.filled = c.filled.min(c.len);
            c.data.truncate(c.len as usize);
            c.cut_at = Some(at);
            if let Some(f) = &c.spill {
                // Best effort: what lies past the new end is never read.
                let _ = f.set_len(c.len);
            }
        }
    }

    /// Starts a [`Watch`] (streams only; a seekable input reads what it needs directly).
    pub fn watch(&mut self, mut watch: Watch) {
        watch.next = self.start;
        watch.offer(self.start, &self.buf[self.lo..self.hi]);
        self.watch = Some(watch);
    }

    pub fn seekable(&self) -> bool {
        self.seekable
    }
    /// Length of the whole input.
    pub fn total_len(&self) -> u64 {
        self.input.len()
    }
    /// Absolute offset of the first unconsumed byte.
    pub fn offset(&self) -> u64 {
        self.start
    }
    pub fn buffered(&self) -> &[u8] {
        &self.buf[self.lo..self.hi]
    }
    /// Random access to the underlying input (seekable inputs only).
    pub fn read_at(&mut self, off: u64, buf: &mut [u8]) -> Option<io::Result<()>> {
        self.input.read_at(off, buf)
    }
    pub fn bytes_read(&self) -> u64 {
        self.input.bytes_read()
    }

    /// Reads more bytes after those buffered: on a stream as many as fit (large sequential
    /// reads), on a seekable input what was asked for plus a modest read-ahead, so hopping over
    /// payloads does not drag them in.
    fn refill(&mut self, want: usize) -> io::Result<usize> {
        if self.lo > 0 {
            self.buf.copy_within(self.lo..self.hi, 0);
            self.hi -= self.lo;
            self.lo = 0;
        }
        let room = self.buf.len() - self.hi;
        let n = if self.seekable { room.min(want.max(READ_AHEAD)) } else { room };
        let at = self.start + self.hi as u64;
        let n = self.input.read(&mut self.buf[self.hi..self.hi + n])?;
        for c in &mut self.captures {
            c.offer(at, &self.buf[self.hi..self.hi + n]);
        }
        if let Some(wt) = &mut self.watch {
            wt.offer(at, &self.buf[self.hi..self.hi + n]);
        }
        self.hi += n;
        Ok(n)
    }

    /// Makes at least `min(n, WINDOW)` bytes available unless the input ends first.
    pub fn fill(&mut self, n: usize) -> io::Result<&[u8]> {
        let n = n.min(self.buf.len());
        while self.hi - self.lo < n {
            let want = n - (self.hi - self.lo);
            if self.refill(want)? == 0 {
                break;
            }
        }
        Ok(self.buffered())
    }

    /// Consumes bytes up to absolute offset `to` (forward only).
    pub fn consume_to(&mut self, to: u64) -> io::Result<()> {
        let to = to.min(self.input.len());
        if to <= self.start {
            return Ok(());
        }
        let n = to - self.start;
        if n <= (self.hi - self.lo) as u64 {
            self.lo += n as usize;
            self.start = to;
            return Ok(());
        }
        self.lo = 0;
        self.hi = 0;
        let pending = self.captures.iter().any(|c| !c.complete() && c.off < to) || self.watch.is_some();
        if self.seekable || !pending {
            self.input.skip_to(to)?;
        } else {
            // Stream past the skipped bytes so the captures see them.
            self.start = self.input.pos();
            while self.start < to {
                let want = usize::try_from(to - self.start).unwrap_or(usize::MAX).min(self.buf.len());
                let at = self.start;
                let got = self.input.read(&mut self.buf[..want])?;
                if got == 0 {
                    break;
                }
                for c in &mut self.captures {
                    c.offer(at, &self.buf[..got]);
                }
                if let Some(wt) = &mut self.watch {
                    wt.offer(at, &self.buf[..got]);
                }
                self.start += got as u64;
            }
        }
        self.start = self.input.pos();
        Ok(())
    }

    /// Reads exactly `len` bytes starting at the current offset into a new buffer and consumes
    /// them. The caller bounds `len`.
    pub fn take(&mut self, len: usize) -> io::Result<Vec<u8>> {
        let mut out = Vec::with_capacity(len);
        while out.len() < len {
            if self.hi == self.lo && self.refill(len - out.len())? == 0 {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "input ended inside a payload"));
            }
            let n = (len - out.len()).min(self.hi - self.lo);
            out.extend_from_slice(&self.buf[self.lo..self.lo + n]);
            self.lo += n;
            self.start += n as u64;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::StreamInput;

    /// Reads `data` through a stream that hands out `chunk` bytes per read.
    struct Chunked<'d> {
        data: &'d [u8],
        chunk: usize,
    }
    impl io::Read for Chunked<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = buf.len().min(self.chunk).min(self.data.len());
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    fn watched(data: &[u8], chunk: usize, skip: Vec<(u64, u64)>, max: usize) -> Vec<Capture> {
        let mut input = StreamInput::new(Chunked { data, chunk }, data.len() as u64);
        let mut w = Window::new(&mut input);
        w.watch(Watch::new(b"\0.shstrtab\0", skip, 16, max, data.len() as u64));
        w.consume_to(data.len() as u64).unwrap();
        w.watch.take().unwrap().regions
    }

    #[test]
    fn a_watch_keeps_the_bytes_around_each_match_whatever_the_read_sizes() {
        let mut data = vec![b'x'; 300];
        data[100..111].copy_from_slice(b"\0.shstrtab\0");
        data[289..300].copy_from_slice(b"\0.shstrtab\0");
        for chunk in [1, 3, 7, 64, 1000] {
            let r = watched(&data, chunk, Vec::new(), 8);
            assert_eq!(r.len(), 2, "chunk {chunk}");
            assert!(r.iter().all(Capture::complete), "chunk {chunk}");
            assert_eq!(r[0].off, 84);
            assert_eq!(r[0].data, data[84..116]);
            // Clipped to the end of the input, so it completes.
            assert_eq!(r[1].data, data[273..]);
        }
        // Inside a skipped range (a loaded segment): ignored.
        assert_eq!(watched(&data, 64, vec![(90, 120)], 8).len(), 1);
    }

    #[test]
    fn a_watch_keeps_at_most_max_regions_first_and_latest() {
        let mut data = vec![b'x'; 2000];
        for i in 0..20 {
            data[50 + i * 90..61 + i * 90].copy_from_slice(b"\0.shstrtab\0");
        }
        let r = watched(&data, 128, Vec::new(), 4);
        let offs: Vec<u64> = r.iter().map(|c| c.off + 16).collect();
        assert_eq!(offs, [50, 140, 50 + 18 * 90, 50 + 19 * 90]);
    }

    #[test]
    fn a_large_capture_spills_and_gives_back_the_bytes_a_small_one_would() {
        let len = SPILL_OVER as usize + 4096;
        let data: Vec<u8> = (0..len + 1000).map(|i| (i * 7 + i / 251) as u8).collect();
        let mut input = StreamInput::new(Chunked { data: &data, chunk: 65_536 }, data.len() as u64);
        let mut w = Window::new(&mut input);
        w.capture_spilling(10, len as u64);
        w.capture(20, 100);
        w.consume_to(data.len() as u64).unwrap();
        let (big, small) = (&w.captures[0], &w.captures[1]);
        assert!(big.data.is_empty(), "spilled, not held");
        assert!(big.complete() && small.complete());
        assert_eq!(big.get(20, 100).unwrap(), small.data);
        assert_eq!(big.get(len as u64 - 90, 100).unwrap(), data[len - 90..len + 10]);
        assert_eq!(big.get(len as u64, 11), None, "past its end");
    }

    #[test]
    fn a_speculative_capture_ends_at_device_code() {
        let data = vec![5u8; 4000];
        let mut input = StreamInput::new(Chunked { data: &data, chunk: 512 }, data.len() as u64);
        let mut w = Window::new(&mut input);
        w.capture_speculative(0, 3000);
        w.capture(0, 3000);
        w.consume_to(1000).unwrap();
        w.end_speculative(1500);
        w.consume_to(data.len() as u64).unwrap();
        let (spec, plain) = (&w.captures[0], &w.captures[1]);
        assert_eq!((spec.len(), spec.cut_at), (1500, Some(1500)));
        assert!(spec.complete());
        assert_eq!(spec.get(1400, 100).unwrap(), data[1400..1500]);
        assert_eq!(spec.get(1400, 101), None);
        // Only speculative captures stop.
        assert_eq!(plain.len(), 3000);
    }
}
