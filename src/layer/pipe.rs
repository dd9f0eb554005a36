//! Byte streams between threads, in recycled chunks: a layer is read, decompressed and analysed
//! by three threads at once (reading standard input or a file / inflating / walking the tar
//! and inspecting), so one large gzip layer keeps more than one core busy.

use std::io::{self, Read};
use std::sync::mpsc::{Receiver, Sender, SyncSender, channel, sync_channel};

pub const CHUNK: usize = 1 << 20;
/// Chunks in flight between two stages (bounds memory: DEPTH x CHUNK per stage).
const DEPTH: usize = 4;

pub struct PipeWriter {
    tx: SyncSender<io::Result<Vec<u8>>>,
    free: Receiver<Vec<u8>>,
}

pub struct PipeReader {
    rx: Receiver<io::Result<Vec<u8>>>,
    free: Sender<Vec<u8>>,
    cur: Vec<u8>,
    pos: usize,
}

pub fn pipe() -> (PipeWriter, PipeReader) {
    let (tx, rx) = sync_channel(DEPTH);
    let (ftx, frx) = channel();
    (PipeWriter { tx, free: frx }, PipeReader { rx, free: ftx, cur: Vec::new(), pos: 0 })
}

impl PipeWriter {
    /// Copies `r` to the reader end until `r` ends. An error reading `r` is passed on to the
    /// reader (and returned); a reader that went away ends the copy quietly. `tap` sees every
    /// chunk (hashing it in this thread, alongside the next stage's work).
    pub fn pump<R: Read + ?Sized>(self, r: &mut R, mut tap: impl FnMut(&[u8])) -> io::Result<()> {
        loop {
            let mut buf = self.free.try_recv().unwrap_or_else(|_| vec![0; CHUNK]);
            buf.resize(CHUNK, 0);
            match read_full_dyn(r, &mut buf) {
                Ok(0) => return Ok(()),
                Ok(n) => {
                    buf.truncate(n);
                    tap(&buf);
                    if self.tx.send(Ok(buf)).is_err() {
                        return Ok(());
                    }
                }
                Err(e) => {
                    let kind = e.kind();
                    let msg = e.to_string();
                    let _ = self.tx.send(Err(io::Error::new(kind, msg)));
                    return Err(e);
                }
            }
        }
    }
}

pub fn read_full_dyn<R: Read + ?Sized>(r: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

impl io::BufRead for PipeReader {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        while self.pos == self.cur.len() {
            match self.rx.recv() {
                Ok(Ok(next)) => {
                    let done = std::mem::replace(&mut self.cur, next);
                    let _ = self.free.send(done);
                    self.pos = 0;
                }
                Ok(Err(e)) => return Err(e),
                // The writer finished (or went away after passing on its error).
                Err(_) => break,
            }
        }
        Ok(&self.cur[self.pos..])
    }

    fn consume(&mut self, n: usize) {
        self.pos = (self.pos + n).min(self.cur.len());
    }
}

impl Read for PipeReader {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let avail = io::BufRead::fill_buf(self)?;
        let n = out.len().min(avail.len());
        out[..n].copy_from_slice(&avail[..n]);
        io::BufRead::consume(self, n);
        Ok(n)
    }
}
