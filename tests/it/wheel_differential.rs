//! Issue 22, wheels, differentially: a few seed wheels written by Python's `zipfile`, a few
//! thousand mutants of them (a fixed-seed xorshift: bytes flipped and fields edited in the local
//! headers, the central directory and the end record; entries duplicated and removed; bytes put
//! before the archive; truncation), each read by one `python3` as pip installs it (every name of
//! `namelist()` not ending in `/`, `getinfo` then `open(...).read()`, the path checked as
//! `_install_wheel` does) and by `cudalint::image::scan`. Per mutant, cudalint refuses it, or
//! reads what pip would install: the same files (count and bytes) and the CUDA library where
//! pip writes it, analysed as the library itself is. docs/reading.md (`## Wheels`).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::util::fixture;

const WHEEL: &str = "demo-1.0-py3-none-manylinux_2_28_x86_64.whl";
const MUTANTS: usize = 3000;
/// The fewest mutants whose reading must be compared member by member (cudalint reads them and
/// so does zipfile): a test that compares nothing fails.
const MIN_COMPARED: usize = 250;

/// The seed wheels, written by zipfile: deflated with a directory entry, a symlink-mode member
/// holding the library and a UTF-8 name; stored with an archive comment; zip64 (extras and end
/// records). Each holds `lib` (libsm90a.so) and dist-info files.
const SEEDS: &str = r#"
import io, sys, zipfile
out, lib = sys.argv[1], open(sys.argv[2], 'rb').read()
meta = [('demo-1.0.dist-info/METADATA', b'Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n'),
        ('demo-1.0.dist-info/WHEEL', b'Wheel-Version: 1.0\nRoot-Is-Purelib: false\n'),
        ('demo-1.0.dist-info/RECORD', b'demo/__init__.py,,\n')]
def seed(path, method, build):
    with zipfile.ZipFile(path, 'w', method) as z:
        build(z)
def a(z):
    z.writestr('demo/__init__.py', b'print("demo")\n' * 8)
    z.writestr('demo/lib/', b'')
    z.writestr('demo/lib/libsm90a.so', lib)
    i = zipfile.ZipInfo('demo/lib/liblink.so')
    i.external_attr = 0o120777 << 16
    z.writestr(i, lib)
    z.writestr('demo/donn\u00e9es.txt', b'caf\xc3\xa9\n')
    for n, d in meta:
        z.writestr(n, d)
def b(z):
    z.comment = b'seed b'
    z.writestr('demo/__init__.py', b'')
    z.writestr('demo/lib/libsm90a.so', lib)
    z.writestr('demo/data.bin', bytes(range(256)))
    for n, d in meta:
        z.writestr(n, d)
def c(z):
    with z.open('demo/lib/libsm90a.so', 'w', force_zip64=True) as f:
        f.write(lib)
    z.writestr('demo/x.py', b'x = 1\n' * 40)
    for n, d in meta:
        z.writestr(n, d)
    zipfile.ZIP_FILECOUNT_LIMIT = 1  # the zip64 end record and locator, on close
seed(out + '/a.whl', zipfile.ZIP_DEFLATED, a)
seed(out + '/b.whl', zipfile.ZIP_STORED, b)
seed(out + '/c.whl', zipfile.ZIP_DEFLATED, c)
"#;

/// Reads mutants from stdin (u32 LE length, bytes) and prints, one JSON line each, what pip
/// installs: `{"files": [[name, size, sha256, is_the_library]]}` or `{"error": why}` where
/// zipfile raises (on opening or on reading any member) or pip refuses a path
/// (`_install_wheel`'s `assert_no_path_traversal`).
const PIP: &str = r#"
import hashlib, io, json, os, struct, sys, zipfile
lib = open(sys.argv[1], 'rb').read()
def is_within_directory(directory, target):  # pip/_internal/utils/unpacking.py
    abs_directory = os.path.abspath(directory)
    abs_target = os.path.abspath(target)
    return os.path.commonprefix([abs_directory, abs_target]) == abs_directory
inp, out = sys.stdin.buffer, sys.stdout
while True:
    h = inp.read(4)
    if len(h) < 4:
        break
    data = inp.read(struct.unpack('<I', h)[0])
    try:
        files = {}
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            for name in z.namelist():
                if name.endswith('/'):
                    continue
                dest = os.path.join('/site', os.path.normpath(name))
                if not is_within_directory('/site', dest):
                    raise ValueError('path traversal: %r' % name)
                with z.open(z.getinfo(name)) as f:
                    b = f.read()
                files[name] = [name, len(b), hashlib.sha256(b).hexdigest(), b == lib]
        r = {'files': list(files.values())}
    except Exception as e:
        r = {'error': '%s: %s' % (type(e).__name__, e)}
    out.write(json.dumps(r) + '\n')
out.flush()
"#;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }
}

fn le(b: &[u8], at: usize, w: usize) -> u64 {
    b[at..at + w].iter().rev().fold(0, |v, &x| (v << 8) | u64::from(x))
}

fn put(b: &mut [u8], at: usize, w: usize, v: u64) {
    if at + w <= b.len() {
        for (i, x) in b[at..at + w].iter_mut().enumerate() {
            *x = (v >> (8 * i)) as u8;
        }
    }
}

/// Where a seed's records are (the seeds are well formed).
struct Layout {
    /// (start, header length with name and extra) of each local header.
    locals: Vec<(usize, usize)>,
    /// (start, length) of each central directory entry.
    cds: Vec<(usize, usize)>,
    cd: (usize, usize),
    eocd: usize,
    /// The zip64 end record (its locator follows it).
    z64: Option<usize>,
}

fn layout(b: &[u8]) -> Layout {
    let eocd = memchr::memmem::rfind(b, b"PK\x05\x06").unwrap();
    let z64 = memchr::memmem::rfind(b, b"PK\x06\x06");
    let (start, size) = match z64 {
        Some(z) => (le(b, z + 48, 8) as usize, le(b, z + 40, 8) as usize),
        None => (le(b, eocd + 16, 4) as usize, le(b, eocd + 12, 4) as usize),
    };
    let (mut cds, mut locals, mut p) = (Vec::new(), Vec::new(), start);
    while p < start + size {
        let len = 46 + (le(b, p + 28, 2) + le(b, p + 30, 2) + le(b, p + 32, 2)) as usize;
        cds.push((p, len));
        let l = le(b, p + 42, 4) as usize;
        locals.push((l, 30 + (le(b, l + 26, 2) + le(b, l + 28, 2)) as usize));
        p += len;
    }
    Layout { locals, cds, cd: (start, size), eocd, z64 }
}

const LOCAL_FIELDS: &[(usize, usize)] = &[(4, 2), (6, 2), (8, 2), (14, 4), (18, 4), (22, 4), (26, 2), (28, 2)];
const CD_FIELDS: &[(usize, usize)] =
    &[(6, 2), (8, 2), (10, 2), (16, 4), (20, 4), (24, 4), (28, 2), (30, 2), (32, 2), (34, 2), (38, 4), (42, 4)];
const EOCD_FIELDS: &[(usize, usize)] = &[(4, 2), (6, 2), (8, 2), (10, 2), (12, 4), (16, 4), (20, 2)];
/// The zip64 end record's counts, size and offset, then its locator's disk, offset and disks.
const Z64_FIELDS: &[(usize, usize)] = &[(24, 8), (32, 8), (40, 8), (48, 8), (56 + 4, 4), (56 + 8, 8), (56 + 16, 4)];

/// A new value for a field of `w` bytes holding `old` at byte `at` of its record.
fn value(rng: &mut Rng, old: u64, w: usize, method: bool, attr: bool) -> u64 {
    let max = if w == 8 { u64::MAX } else { (1u64 << (8 * w)) - 1 };
    if method && rng.chance(2) {
        return [0, 1, 8, 9, 12, 14, 93, 99][rng.below(8)];
    }
    if attr && rng.chance(2) {
        return [0o120777u64 << 16, 0o160000 << 16, (0o040755 << 16) | 0x10, 0o100755 << 16, 0x10, 0][rng.below(6)];
    }
    match rng.below(6) {
        0 => 0,
        1 => max,
        2 => old ^ (1 << rng.below(8 * w)),
        3 => old.wrapping_add(rng.below(33) as u64).wrapping_sub(16) & max,
        4 => rng.below(4096) as u64,
        _ => rng.below(2 * old as usize + 2) as u64 & max,
    }
}

fn flip(rng: &mut Rng, m: &mut [u8], start: usize, len: usize) {
    if len > 0 && start + len <= m.len() {
        let at = start + rng.below(len);
        m[at] ^= 1 << rng.below(8);
    }
}

fn set(rng: &mut Rng, m: &mut [u8], base: usize, fields: &[(usize, usize)], method_at: usize, attr_at: usize) {
    let (off, w) = fields[rng.below(fields.len())];
    if base + off + w <= m.len() {
        let old = le(m, base + off, w);
        let v = value(rng, old, w, off == method_at, off == attr_at);
        put(m, base + off, w, v);
    }
}

/// One mutant of `seed`: one to three edits in place, then at most one that moves bytes.
fn mutate(rng: &mut Rng, seed: &[u8], l: &Layout) -> Vec<u8> {
    let mut m = seed.to_vec();
    for _ in 0..1 + rng.below(3) {
        let (li, ci) = (rng.below(l.locals.len()), rng.below(l.cds.len()));
        match rng.below(9) {
            0 => flip(rng, &mut m, l.locals[li].0, l.locals[li].1),
            1 => flip(rng, &mut m, l.cds[ci].0, l.cds[ci].1),
            2 => flip(rng, &mut m, l.eocd, 22),
            3 | 4 => set(rng, &mut m, l.locals[li].0, LOCAL_FIELDS, 8, usize::MAX),
            5 | 6 => set(rng, &mut m, l.cds[ci].0, CD_FIELDS, 10, 38),
            7 => match l.z64 {
                Some(z) if rng.chance(2) => set(rng, &mut m, z, Z64_FIELDS, usize::MAX, usize::MAX),
                _ => set(rng, &mut m, l.eocd, EOCD_FIELDS, usize::MAX, usize::MAX),
            },
            _ => {
                // A name byte, in the directory, its local header or both.
                let (c, lh) = (l.cds[ci], l.locals[ci]);
                let n = le(seed, c.0 + 28, 2) as usize;
                let k = rng.below(n);
                let byte = [b'\\', b'/', b'.', 0xC3, 0xFF, b'A', 0][rng.below(7)];
                let where_ = rng.below(3);
                if where_ != 1 {
                    m[c.0 + 46 + k] = byte;
                }
                if where_ != 0 {
                    m[lh.0 + 30 + k] = byte;
                }
            }
        }
    }
    if rng.chance(3) {
        return m;
    }
    let fix_end = rng.chance(2);
    // The end record's count and size moved with the directory (the end record moved too).
    let count_and_size = |m: &mut Vec<u8>, count: i64, size: i64| {
        let end = (l.eocd as i64 + size) as usize;
        if fix_end {
            for at in [end + 8, end + 10] {
                let v = le(m, at, 2) as i64 + count;
                put(m, at, 2, v as u64);
            }
            let v = le(m, end + 12, 4) as i64 + size;
            put(m, end + 12, 4, v as u64);
        }
    };
    match rng.below(8) {
        0 => {
            // Bytes before the archive: noise, or another zip.
            let mut pre: Vec<u8> = (0..1 + rng.below(64)).map(|_| rng.next() as u8).collect();
            if rng.chance(3) {
                pre = seed[..l.cd.0].to_vec();
            }
            if fix_end {
                let v = le(&m, l.eocd + 16, 4) + pre.len() as u64;
                put(&mut m, l.eocd + 16, 4, v);
            }
            pre.extend_from_slice(&m);
            pre
        }
        1 | 2 => {
            // An entry of the directory repeated, here or at its end.
            let (s, n) = l.cds[rng.below(l.cds.len())];
            let entry = m[s..s + n].to_vec();
            let at = if rng.chance(2) { s } else { l.cd.0 + l.cd.1 };
            m.splice(at..at, entry);
            count_and_size(&mut m, 1, n as i64);
            m
        }
        3 => {
            let (s, n) = l.cds[rng.below(l.cds.len())];
            m.drain(s..s + n);
            count_and_size(&mut m, -1, -(n as i64));
            m
        }
        4 => {
            // Two entries pointing at one local header.
            let (a, b) = (l.cds[rng.below(l.cds.len())].0, l.cds[rng.below(l.cds.len())].0);
            let v = le(&m, b + 42, 4);
            put(&mut m, a + 42, 4, v);
            m
        }
        5 => {
            let at = rng.below(m.len());
            m.truncate(at);
            m
        }
        6 => {
            m.extend((0..1 + rng.below(40)).map(|_| rng.next() as u8));
            m
        }
        _ => {
            // Bytes in the middle (between members, or in the directory).
            let at =
                if rng.chance(2) { l.locals[rng.below(l.locals.len())].0 } else { l.cds[rng.below(l.cds.len())].0 };
            let ins: Vec<u8> = (0..1 + rng.below(16)).map(|_| rng.next() as u8).collect();
            m.splice(at..at, ins);
            m
        }
    }
}

/// What pip installs in cudalint's terms: the files it counts (not a package record), their
/// bytes, and the paths where the CUDA library lands. None where cudalint could not compare
/// (two names of one path).
fn expected(files: &[Value]) -> Option<(u64, u64, BTreeSet<String>)> {
    let (mut count, mut bytes, mut cuda, mut paths) = (0, 0, BTreeSet::new(), BTreeSet::new());
    for f in files {
        let name = f[0].as_str().unwrap();
        let (path, _) = cudalint::layer::path::normalize(name.as_bytes()).ok()?;
        if !paths.insert(path.clone()) {
            return None;
        }
        if f[3].as_bool().unwrap() {
            cuda.insert(path.clone());
        }
        if cudalint::packages::record_kind(&path).is_none() {
            count += 1;
            bytes += f[1].as_u64().unwrap();
        }
    }
    Some((count, bytes, cuda))
}

fn library_report(f: &cudalint::image::ImageFile) -> Value {
    let mut v = serde_json::to_value(&f.file).unwrap();
    v.as_object_mut().unwrap().remove("path");
    v
}

/// Why cudalint refused, in a word.
fn reason(e: &str) -> &'static str {
    [
        ("share bytes", "shared bytes"),
        ("central directories disagree", "directories disagree"),
        ("LZMA", "lzma/bzip2"),
        ("bzip2", "lzma/bzip2"),
        ("compression method", "other method"),
        ("inflate to more than", "too large"),
        ("local header names another", "local name differs"),
        ("not a wheel", "zip crate refuses"),
        ("invalid Zip archive", "zip crate refuses"),
        ("not an image archive", "not taken for a wheel"),
        ("Invalid checksum", "crc"),
        ("checksum", "crc"),
    ]
    .iter()
    .find(|(k, _)| e.contains(k))
    .map_or("other", |(_, r)| r)
}

#[test]
fn mutated_wheels_are_read_as_zipfile_reads_them_or_refused() {
    let d = tempfile::tempdir().unwrap();
    let lib = fixture("libsm90a.so");
    let o = Command::new("python3")
        .args(["-c", SEEDS])
        .arg(d.path())
        .arg(&lib)
        .output()
        .expect("python3 is needed to write the seed wheels (Python's zipfile is the reference)");
    assert!(o.status.success(), "python3: {}", String::from_utf8_lossy(&o.stderr));
    let seeds: Vec<Vec<u8>> =
        ["a", "b", "c"].iter().map(|s| std::fs::read(d.path().join(format!("{s}.whl"))).unwrap()).collect();
    let layouts: Vec<Layout> = seeds.iter().map(|s| layout(s)).collect();
    assert!(layouts[2].z64.is_some(), "seed c has zip64 end records");

    let opts = cudalint::image::ScanOptions { progress: false, ..Default::default() };
    let scan = |bytes: &[u8]| {
        let p = d.path().join(WHEEL);
        std::fs::write(&p, bytes).unwrap();
        cudalint::image::scan(p.to_str().unwrap(), &opts).map_err(|e| e.to_string())
    };
    // The library as cudalint analyses it in a seed wheel: what every reading of it must find.
    let reference = {
        let r = scan(&seeds[0]).unwrap();
        assert_eq!(r.files.len(), 2, "the library and its symlink-mode copy");
        library_report(&r.files[0])
    };

    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mutants: Vec<Vec<u8>> = (0..MUTANTS)
        .map(|i| {
            let s = i % seeds.len();
            mutate(&mut rng, &seeds[s], &layouts[s])
        })
        .collect();

    let mut py = Command::new("python3")
        .args(["-c", PIP])
        .arg(&lib)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 is needed (Python's zipfile is the reference)");
    let mut stdin = py.stdin.take().unwrap();
    let feed = {
        let all = mutants.clone();
        std::thread::spawn(move || {
            for m in all {
                stdin.write_all(&(m.len() as u32).to_le_bytes()).unwrap();
                stdin.write_all(&m).unwrap();
            }
        })
    };
    let views: Vec<Value> = std::io::BufReader::new(py.stdout.take().unwrap())
        .lines()
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .collect();
    feed.join().unwrap();
    assert!(py.wait().unwrap().success());
    assert_eq!(views.len(), mutants.len(), "zipfile's reading of every mutant");

    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut bad = Vec::new();
    for (i, (m, view)) in mutants.iter().zip(&views).enumerate() {
        let ours = scan(m);
        let key = match (view.get("files"), &ours) {
            (None, Err(e)) => format!("both refuse ({})", reason(e)),
            (Some(_), Err(e)) => {
                let key = format!("zipfile reads, cudalint refuses ({})", reason(e));
                if !counts.contains_key(&key) {
                    println!("mutant {i}, first of {key}: {e}");
                }
                key
            }
            (None, Ok(_)) => {
                bad.push(format!("mutant {i}: pip fails ({}) where cudalint reads it", view["error"]));
                "pip fails, cudalint reads".into()
            }
            (Some(files), Ok(r)) => match expected(files.as_array().unwrap()) {
                None => "not comparable (two names of one path)".into(),
                Some((count, bytes, cuda)) => {
                    let got: BTreeSet<String> = r.files.iter().map(|f| f.file.path.clone()).collect();
                    let same = r.stats.files == count
                        && r.stats.file_bytes == bytes
                        && got == cuda
                        && r.files.iter().all(|f| library_report(f) == reference);
                    if !same {
                        bad.push(format!(
                            "mutant {i}: zipfile installs {count} files, {bytes} bytes, the library at {cuda:?}; \
                             cudalint reads {} files, {} bytes, CUDA files {got:?}",
                            r.stats.files, r.stats.file_bytes
                        ));
                    }
                    "compared".into()
                }
            },
        };
        *counts.entry(key).or_default() += 1;
    }
    println!("{} mutants: {counts:#?}", mutants.len());
    for b in &bad {
        eprintln!("{b}");
    }
    if let Some(at) = std::env::var_os("WHEEL_DIFF_KEEP") {
        for b in &bad {
            let i: usize = b["mutant ".len()..].split(':').next().unwrap().parse().unwrap();
            std::fs::write(Path::new(&at).join(format!("m{i}.whl")), &mutants[i]).unwrap();
        }
    }
    assert!(bad.is_empty(), "{} mutants read otherwise than zipfile (first: {})", bad.len(), bad[0]);
    let compared = counts.get("compared").copied().unwrap_or(0);
    assert!(compared >= MIN_COMPARED, "only {compared} mutants compared: {counts:?}");
}
