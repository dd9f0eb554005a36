//! A GNU sparse file read as GNU tar extracts it: its stored regions at their offsets, zeros
//! in the holes between them.
//!
//! Holes are free to store, so a few bytes of tar can claim a file of exabytes. Reading with
//! seeks only touches what the inspector asks for, but a forward read (a streamed layer) hands
//! out every zero: past [`MAX_HOLE_READ`] of them the read fails (the scan stops, exit 2) rather
//! than running for days. Sparse files that are not inspected (`lastlog` and other data files
//! with huge holes) are never read and cost nothing.

use std::io;

use super::tar::Region;
use crate::input::Input;

/// Zeros a forward read may hand out from holes.
pub const MAX_HOLE_READ: u64 = 4 << 30;

pub struct SparseInput<'a> {
    parent: &'a mut dyn Input,
    /// Offset of the first stored byte in `parent`.
    start: u64,
    /// (region, offset of its data from `start`).
    map: Vec<(Region, u64)>,
    len: u64,
    pos: u64,
    zeros_read: u64,
}

impl<'a> SparseInput<'a> {
    /// `map` must be sorted and non-overlapping (the tar walker checks it).
    pub fn new(parent: &'a mut dyn Input, start: u64, map: &[Region], len: u64) -> io::Result<Self> {
        parent.skip_to(start)?;
        let mut stored = 0;
        let map = map
            .iter()
            .filter(|r| r.len > 0)
            .map(|&r| {
                let at = stored;
                stored += r.len;
                (r, at)
            })
            .collect();
        Ok(SparseInput { parent, start, map, len, pos: 0, zeros_read: 0 })
    }

    /// The region holding `pos`, or the first one after it.
    fn locate(&self, pos: u64) -> Option<&(Region, u64)> {
        let i = self.map.partition_point(|(r, _)| r.offset + r.len <= pos);
        self.map.get(i)
    }
}

fn cut_off() -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, "sparse file data cut off")
}

impl Input for SparseInput<'_> {
    fn len(&self) -> u64 {
        self.len
    }
    fn pos(&self) -> u64 {
        self.pos
    }
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.len.saturating_sub(self.pos);
        if left == 0 || buf.is_empty() {
            return Ok(0);
        }
        let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let pos = self.pos;
        let n = match self.locate(pos).copied() {
            Some((r, at)) if r.offset <= pos => {
                let k = want.min(usize::try_from(r.offset + r.len - pos).unwrap_or(usize::MAX));
                self.parent.skip_to(self.start + at + (pos - r.offset))?;
                let got = self.parent.read(&mut buf[..k])?;
                if got == 0 {
                    return Err(cut_off());
                }
                got
            }
            next => {
                let end = next.map_or(self.len, |(r, _)| r.offset);
                let k = want.min(usize::try_from(end - pos).unwrap_or(usize::MAX));
                self.zeros_read += k as u64;
                if self.zeros_read > MAX_HOLE_READ {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!(
                            "sparse file of {} bytes: more than {MAX_HOLE_READ} bytes of holes read; refused",
                            self.len
                        ),
                    ));
                }
                buf[..k].fill(0);
                k
            }
        };
        self.pos += n as u64;
        Ok(n)
    }
    fn skip_to(&mut self, pos: u64) -> io::Result<()> {
        // The parent moves when data is read: skipping a hole costs nothing.
        self.pos = self.pos.max(pos.min(self.len));
        Ok(())
    }
    fn read_at(&mut self, off: u64, buf: &mut [u8]) -> Option<io::Result<()>> {
        if !self.parent.seekable() {
            return None;
        }
        if off.checked_add(buf.len() as u64).is_none_or(|e| e > self.len) {
            return Some(Err(io::Error::new(io::ErrorKind::UnexpectedEof, "read past the end of the sparse file")));
        }
        let mut done = 0;
        while done < buf.len() {
            let pos = off + done as u64;
            let rest = buf.len() - done;
            match self.locate(pos).copied() {
                Some((r, at)) if r.offset <= pos => {
                    let k = rest.min(usize::try_from(r.offset + r.len - pos).unwrap_or(usize::MAX));
                    if let Some(Err(e)) =
                        self.parent.read_at(self.start + at + (pos - r.offset), &mut buf[done..done + k])
                    {
                        return Some(Err(e));
                    }
                    done += k;
                }
                next => {
                    let end = next.map_or(self.len, |(r, _)| r.offset);
                    let k = rest.min(usize::try_from(end - pos).unwrap_or(usize::MAX));
                    buf[done..done + k].fill(0);
                    done += k;
                }
            }
        }
        Some(Ok(()))
    }
    fn bytes_read(&self) -> u64 {
        self.parent.bytes_read()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::{SliceInput, StreamInput, read_full};

    fn map() -> Vec<Region> {
        vec![Region { offset: 2, len: 3 }, Region { offset: 8, len: 2 }, Region { offset: 12, len: 0 }]
    }
    const WANT: &[u8] = b"\0\0abc\0\0\0de\0\0\0\0";

    #[test]
    fn holes_read_as_zeros_by_stream_and_by_seek() {
        let stored = b"XXabcde";
        let mut s = StreamInput::new(&stored[..], 7);
        s.skip_to(2).unwrap();
        let mut sp = SparseInput::new(&mut s, 2, &map(), 12).unwrap();
        let mut out = vec![0xEE; 20];
        assert_eq!(read_full(&mut sp, &mut out).unwrap(), 12);
        assert_eq!(&out[..12], &WANT[..12]);
        let mut s = SliceInput::new(stored);
        let mut sp = SparseInput::new(&mut s, 2, &map(), 14).unwrap();
        for off in 0..14 {
            for len in 0..=14 - off {
                let mut b = vec![0xEE; len];
                sp.read_at(off as u64, &mut b).unwrap().unwrap();
                assert_eq!(b, &WANT[off..off + len], "{off}+{len}");
            }
        }
        assert!(sp.read_at(10, &mut [0; 5]).unwrap().is_err());
        sp.skip_to(3).unwrap();
        let mut b = [0; 6];
        assert_eq!(read_full(&mut sp, &mut b).unwrap(), 6);
        assert_eq!(&b, &WANT[3..9]);
    }

    #[test]
    fn missing_stored_data_is_an_error() {
        let stored = b"ab";
        let mut s = StreamInput::new(&stored[..], 2);
        let mut sp = SparseInput::new(&mut s, 0, &map(), 12).unwrap();
        let mut out = [0; 12];
        assert!(read_full(&mut sp, &mut out).is_err());
    }

    #[test]
    fn a_hollow_file_read_forward_is_refused_after_the_hole_budget() {
        let stored = b"ab";
        let mut s = StreamInput::new(&stored[..], 2);
        let map = [Region { offset: 0, len: 2 }];
        let mut sp = SparseInput::new(&mut s, 0, &map, 1 << 50).unwrap();
        let mut buf = vec![0u8; 16 << 20];
        let mut total = 0u64;
        let err = loop {
            match sp.read(&mut buf) {
                Ok(n) => total += n as u64,
                Err(e) => break e,
            }
        };
        assert!(err.to_string().contains("bytes of holes read"), "{err}");
        assert!(total <= MAX_HOLE_READ + 2, "{total}");
    }
}
