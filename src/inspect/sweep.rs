//! Run-time compilers told by their bytes, not their names: NVRTC, nvJitLink and the PTX
//! assembler (ptxas, nvPTXCompiler) wherever they are — a library of their own under any name, a
//! copy linked into another library, an executable anywhere — and the compilers a binary names
//! for `dlopen` (`libnvrtc.so.12`).
//!
//! What was measured on NVIDIA's binaries (docs/runtime-compilers.md): every one of them carries
//! the release banner `Cuda compilation tools, release X.Y, VX.Y.Z` in `.rodata`, beside strings
//! that tell which it is: `NVRTC_ERROR_INVALID_OPTION` (NVRTC's error names), `NVJITLINK_ERROR`
//! (nvJitLink's), `Ptx optimizing assembler` (the assembler, which NVRTC and nvJitLink also carry,
//! so it decides only when neither of those is there). A banner elsewhere is not a compiler: each
//! cubin's tool note (`.note.nv.tkinfo`, inside `.nv_fatbin`) holds `ptxas\0Cuda compilation
//! tools, …` — the ptxas that built it — and cuobjdump or nvdisasm carry the banner with none of
//! the three markers. So only hits inside `.rodata` sections count, on streams and seekable
//! inputs alike: a stream records hits anywhere (the section table comes last) and keeps those in
//! range at the end; a seekable input reads only those sections.

use std::io;
use std::sync::OnceLock;

use aho_corasick::AhoCorasick;

use super::toolchain::{self, CompilerKind, Toolchain};
use crate::input::Input;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pat {
    Banner,
    Nvrtc,
    NvJitLink,
    Assembler,
    /// A name a binary may `dlopen`: `libnvrtc.so…`, `libnvJitLink.so…`.
    Loads,
}

const PATTERNS: &[(&[u8], Pat)] = &[
    (b"Cuda compilation tools, release ", Pat::Banner),
    (b"NVRTC_ERROR_INVALID_OPTION", Pat::Nvrtc),
    (b"NVJITLINK_ERROR", Pat::NvJitLink),
    (b"Ptx optimizing assembler", Pat::Assembler),
    (b"libnvrtc.so", Pat::Loads),
    (b"libnvJitLink.so", Pat::Loads),
];

/// Bytes after a hit kept to read what follows it (the banner's version, a library name).
const TAIL: usize = 40;
/// Hits kept per file: cubins' tool notes can repeat the banner thousands of times in one
/// library; past this, what the file is stays unknown (never a guess).
const MAX_HITS: usize = 1 << 14;

fn matcher() -> &'static AhoCorasick {
    static M: OnceLock<AhoCorasick> = OnceLock::new();
    M.get_or_init(|| AhoCorasick::new(PATTERNS.iter().map(|(p, _)| p)).expect("fixed patterns build"))
}

#[derive(Debug, Clone)]
struct Hit {
    off: u64,
    pat: Pat,
    /// The banner's version (`12.8.93`), or the library name (`libnvrtc.so.12`).
    text: String,
}

/// Feeds on bytes in file order (chunks with their offsets) and records every hit.
#[derive(Debug, Default)]
pub struct Sweep {
    carry: Vec<u8>,
    /// File offset of `carry[0]`.
    carry_at: u64,
    /// Hits starting before this offset are recorded already.
    next: u64,
    hits: Vec<Hit>,
    overflow: bool,
}

impl Sweep {
    pub fn feed(&mut self, at: u64, chunk: &[u8]) {
        self.feed_inner(at, chunk, false);
    }

    /// The end of a range: hits within its last bytes are read with what there is.
    pub fn finish(&mut self) {
        let at = self.carry_at + self.carry.len() as u64;
        self.feed_inner(at, &[], true);
        self.carry.clear();
    }

    fn feed_inner(&mut self, at: u64, chunk: &[u8], last: bool) {
        if self.overflow {
            return;
        }
        // A gap (a seekable read of the next section) ends what the carry could continue.
        if at != self.carry_at + self.carry.len() as u64 {
            self.carry.clear();
            self.carry_at = at;
        }
        let mut buf = std::mem::take(&mut self.carry);
        buf.extend_from_slice(chunk);
        let start = self.carry_at;
        let longest = PATTERNS.iter().map(|(p, _)| p.len()).max().unwrap_or(0);
        let mut keep_from = buf.len().saturating_sub(longest + TAIL);
        for m in matcher().find_iter(&buf) {
            let abs = start + m.start() as u64;
            if abs < self.next {
                continue;
            }
            if !last && buf.len() - m.end() < TAIL {
                // Possibly cut by the chunk's end: decided with the next chunk.
                keep_from = keep_from.min(m.start());
                break;
            }
            let (_, pat) = PATTERNS[m.pattern().as_usize()];
            let tail = &buf[m.end()..(m.end() + TAIL).min(buf.len())];
            let text = match pat {
                Pat::Banner => toolchain::parse_release(tail).unwrap_or_default(),
                Pat::Loads => name_at(&buf[m.start()..(m.end() + TAIL).min(buf.len())]),
                _ => String::new(),
            };
            self.next = abs + 1;
            if self.hits.len() >= MAX_HITS {
                self.overflow = true;
                self.hits.clear();
                return;
            }
            self.hits.push(Hit { off: abs, pat, text });
        }
        self.carry_at = start + keep_from as u64;
        self.carry = buf[keep_from..].to_vec();
    }

    /// What the hits inside `ranges` (file offsets, `[start, end)`) say the file is, given
    /// whether it is an executable of its own (no SONAME, an interpreter) and its names.
    pub fn verdict(&self, ranges: &[(u64, u64)], executable: bool, names: &[&str]) -> Found {
        let inside = |h: &&Hit| ranges.iter().any(|&(a, b)| h.off >= a && h.off < b);
        let hits: Vec<&Hit> = self.hits.iter().filter(inside).collect();
        let has = |p: Pat| hits.iter().any(|h| h.pat == p);
        let version = hits.iter().find(|h| h.pat == Pat::Banner && !h.text.is_empty()).map(|h| h.text.clone());
        let kind = match version {
            None => None,
            Some(_) if has(Pat::Nvrtc) => Some(CompilerKind::Nvrtc),
            Some(_) if has(Pat::NvJitLink) => Some(CompilerKind::NvJitLink),
            Some(_) if has(Pat::Assembler) && executable => Some(CompilerKind::Ptxas),
            Some(_) if has(Pat::Assembler) => Some(CompilerKind::NvPtxCompiler),
            Some(_) => None,
        };
        let toolchain = kind.map(|kind| {
            // A library of the compiler's own (renamed or vendored, `libnvrtc-5e1a.so.12`) serves
            // whoever loads it; a copy linked into another library serves only that library.
            let own = executable || names.iter().any(|n| own_name(kind, n));
            Toolchain { kind, version: version.clone().unwrap_or_default(), source: "banner".into(), linked: !own }
        });
        let mut loads: Vec<String> = hits
            .iter()
            .filter(|h| h.pat == Pat::Loads && !h.text.is_empty())
            // A compiler's own strings name itself.
            .filter(|h| !kind.is_some_and(|k| own_name(k, &h.text)))
            .map(|h| h.text.clone())
            .collect();
        loads.sort();
        loads.dedup();
        Found { toolchain, loads }
    }

    /// Reads `ranges` of a seekable input (the position does not move) in chunks; what a
    /// (damaged) section table places past the end of the file is not there to read.
    pub fn read_at(&mut self, input: &mut dyn Input, ranges: &[(u64, u64)]) -> io::Result<()> {
        let mut buf = vec![0u8; 1 << 20];
        let len = input.len();
        for &(a, b) in ranges {
            let b = b.min(len);
            let mut off = a;
            while off < b {
                let n = ((b - off) as usize).min(buf.len());
                match input.read_at(off, &mut buf[..n]) {
                    Some(Ok(())) => self.feed(off, &buf[..n]),
                    Some(Err(e)) => return Err(e),
                    None => return Ok(()),
                }
                off += n as u64;
            }
            self.finish();
        }
        Ok(())
    }
}

impl toolchain::Watcher for Sweep {
    fn see(&mut self, at: u64, chunk: &[u8]) {
        self.feed(at, chunk);
    }
    fn satisfied(&self) -> bool {
        false
    }
}

/// What a file's bytes say.
#[derive(Debug, Default)]
pub struct Found {
    pub toolchain: Option<Toolchain>,
    /// Compiler libraries it names for loading, sorted: `libnvrtc.so.12`.
    pub loads: Vec<String>,
}

/// Whether a file name or SONAME is the compiler's own library's (`libnvrtc…`).
fn own_name(kind: CompilerKind, name: &str) -> bool {
    let prefix = match kind {
        CompilerKind::Nvrtc => "libnvrtc",
        CompilerKind::NvJitLink => "libnvJitLink",
        CompilerKind::NvPtxCompiler => "libnvptxcompiler",
        CompilerKind::Ptxas | CompilerKind::Nvcc => return false,
    };
    name.starts_with(prefix)
}

/// The printable name a `Loads` hit starts: `libnvrtc.so.12`, up to the first byte no file name
/// holds (a `%d` format stays, as `libnvrtc.so.%d`).
fn name_at(b: &[u8]) -> String {
    let n = b.iter().take_while(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-' | b'%')).count();
    String::from_utf8_lossy(&b[..n]).trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text() -> Vec<u8> {
        let mut v = vec![0u8; 100];
        v.extend_from_slice(
            b"Build system must define TOOLS_VERSION_EXTENDED\0Cuda compilation tools, release 12.8, V12.8.93\0",
        );
        v.extend_from_slice(&[0u8; 50]);
        v.extend_from_slice(b"NVRTC_ERROR_INVALID_OPTION\0Ptx optimizing assembler\0libnvJitLink.so.12\0");
        v.extend_from_slice(&[0u8; 60]);
        v
    }

    #[test]
    fn hits_cut_by_any_chunk_boundary_are_found_once() {
        let t = text();
        for cut in 1..t.len() {
            let mut s = Sweep::default();
            s.feed(0, &t[..cut]);
            s.feed(cut as u64, &t[cut..]);
            s.finish();
            let f = s.verdict(&[(0, t.len() as u64)], false, &["libfoo.so"]);
            let tc = f.toolchain.expect("a toolchain");
            assert_eq!((tc.kind, tc.version.as_str(), tc.linked), (CompilerKind::Nvrtc, "12.8.93", true), "cut {cut}");
            assert_eq!(f.loads, vec!["libnvJitLink.so.12".to_string()], "cut {cut}");
            assert_eq!(s.hits.len(), 4, "cut {cut}");
        }
    }

    #[test]
    fn hits_outside_the_ranges_and_a_bare_banner_are_no_compiler() {
        let t = text();
        let mut s = Sweep::default();
        s.feed(0, &t);
        s.finish();
        assert!(s.verdict(&[(0, 10)], false, &[]).toolchain.is_none());
        let mut bare = Sweep::default();
        bare.feed(0, b"\0Cuda compilation tools, release 13.0, V13.0.88\0cuobjdump\0");
        bare.finish();
        assert!(bare.verdict(&[(0, 100)], true, &[]).toolchain.is_none());
        // Its own library, under a vendored name, is not "linked into" another.
        let own = s.verdict(&[(0, t.len() as u64)], false, &["libnvrtc-5e1a2b3c.so.12"]);
        assert!(!own.toolchain.unwrap().linked);
    }
}
