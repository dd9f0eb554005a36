//! RPM's package database: the sqlite `rpmdb.sqlite` of rpm 4.16+ (RHEL, UBI, Rocky and Alma 9,
//! Fedora 33+), whose `Packages` table holds one rpm header blob a package. The database is read
//! with sqlite itself (rusqlite, bundled), opened read-only and immutable with its schema
//! distrusted; the header blobs are parsed here, bounded (the `rpm` crate parses headers only
//! inside whole package files, behind the lead and magic an rpmdb blob does not have).
//!
//! Header blob layout (rpm's `headerImport`, lib/header.c): `il` and `dl` (big-endian u32), `il`
//! index entries of 16 bytes (tag, type, offset, count), then `dl` bytes of data. Files are
//! `DIRNAMES[DIRINDEXES[i]] + BASENAMES[i]`, or `OLDFILENAMES` in headers from rpm < 4.

use std::path::Path;

use super::{LayerPackages, Package, ReadResult, RpmQualifiers, interesting};

/// An rpmdb larger than this is not read (a RHEL 9 image with the CUDA toolkit holds ~60 MB).
pub const MAX_DB: u64 = 1 << 30;
/// One package's header blob larger than this is not read (the CUDA toolkit's largest, with
/// thousands of files, is a few MB).
const MAX_BLOB: i64 = 64 << 20;
/// Index entries one header may have (rpm's own bound, `HEADER_TAGS_MAX`).
const MAX_TAGS: usize = 0xffff;
/// Data one header may have (rpm's `HEADER_DATA_MAX`).
const MAX_DATA: usize = 256 << 20;
/// Packages one database may list (a full Fedora workstation has ~6,000): past this, the rest is
/// not read, so a crafted database of tiny headers cannot fill memory.
pub const MAX_PACKAGES: usize = 100_000;

/// Why Berkeley DB and ndb databases are not read, as the note says.
pub const LEGACY: &str = "rpm database in Berkeley DB or ndb format (RHEL/CentOS 7 and 8, Amazon Linux 2, SUSE) \
     is not read: no well-kept crate reads it; its packages are not named (files are still scanned)";

const TAG_NAME: u32 = 1000;
const TAG_VERSION: u32 = 1001;
const TAG_RELEASE: u32 = 1002;
const TAG_EPOCH: u32 = 1003;
const TAG_ARCH: u32 = 1022;
const TAG_OLDFILENAMES: u32 = 1027;
const TAG_DIRINDEXES: u32 = 1116;
const TAG_BASENAMES: u32 = 1117;
const TAG_DIRNAMES: u32 = 1118;

const TYPE_INT32: u32 = 4;
const TYPE_STRING: u32 = 6;
const TYPE_STRING_ARRAY: u32 = 8;
const TYPE_I18NSTRING: u32 = 9;

/// Where rpm keeps its database: `/var/lib/rpm`, or `/usr/lib/sysimage/rpm` (Fedora 36+,
/// openSUSE; `/var/lib/rpm` is a link there).
pub fn is_db_dir(dir: &str) -> bool {
    dir.ends_with("/var/lib/rpm") || dir.ends_with("/usr/lib/sysimage/rpm")
}

/// `rpmdb.sqlite-wal`: rpm checkpoints its log when it closes the database, so a log with
/// content means the image was saved while rpm had it open; what the log holds is not read,
/// only its length (from the spilled copy, so a large log is never held in memory).
pub fn wal(_l: &mut LayerPackages, _dir: &str, _name: &str, file: &Path) -> ReadResult {
    let len = std::fs::metadata(file).map_err(|e| e.to_string())?.len();
    if len == 0 {
        return Ok(());
    }
    Err(format!(
        "rpm's write-ahead log holds {len} bytes not yet in rpmdb.sqlite; packages recorded only there are not named"
    ))
}

/// One installed package, as its header says.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Header {
    name: String,
    version: String,
    release: String,
    epoch: Option<u32>,
    arch: Option<String>,
    files: Vec<String>,
}

/// Reads `rpmdb.sqlite` (a temporary copy at `file`): every package with an architecture (the
/// `gpg-pubkey` pseudo-packages have none) and the files of it that can carry device code.
pub fn sqlite(l: &mut LayerPackages, _dir: &str, _name: &str, file: &Path) -> ReadResult {
    l.rpmdb = true;
    use rusqlite::{Connection, OpenFlags, config::DbConfig};
    let e = |e: rusqlite::Error| format!("not an rpm sqlite database ({e})");
    // immutable: the copy is private and unchanging, so sqlite takes no locks and ignores any
    // log; the schema is the image's, so nothing in it (views, triggers, functions) is trusted.
    let uri = format!("file:{}?immutable=1", crate::escape::uri_path(&file.to_string_lossy()));
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let db = Connection::open_with_flags(uri, flags).map_err(e)?;
    db.set_db_config(DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true).map_err(e)?;
    db.set_db_config(DbConfig::SQLITE_DBCONFIG_TRUSTED_SCHEMA, false).map_err(e)?;
    // A view or virtual table named Packages could make any query cost anything.
    let kind: Option<String> = db
        .query_row("SELECT type FROM sqlite_schema WHERE name = 'Packages'", [], |r| r.get(0))
        .or_else(|err| if err == rusqlite::Error::QueryReturnedNoRows { Ok(None) } else { Err(err) })
        .map_err(e)?;
    if kind.as_deref() != Some("table") {
        return Err("not an rpm sqlite database (no `Packages` table)".into());
    }
    let mut stmt = db
        .prepare("SELECT hnum, CASE WHEN length(blob) <= ?1 THEN blob END, length(blob) FROM Packages ORDER BY hnum")
        .map_err(e)?;
    let mut rows = stmt.query([MAX_BLOB]).map_err(e)?;
    let (mut bad, mut first_bad) = (0usize, None);
    let mut read = 0usize;
    while let Some(row) = rows.next().map_err(e)? {
        if read == MAX_PACKAGES {
            return Err(format!("more than {MAX_PACKAGES} packages: the rest not read"));
        }
        read += 1;
        let hnum: i64 = row.get(0).map_err(e)?;
        let blob: Option<Vec<u8>> = row.get(1).map_err(e)?;
        let parsed = match blob {
            Some(b) => parse_header(&b),
            None => {
                Err(format!("header of {} bytes, over the bound of {MAX_BLOB}", row.get::<_, i64>(2).unwrap_or(-1)))
            }
        };
        match parsed {
            Ok(h) => add(l, h),
            Err(why) => {
                bad += 1;
                first_bad.get_or_insert(format!("package {hnum}: {why}"));
            }
        }
    }
    match first_bad {
        None => Ok(()),
        Some(first) => Err(format!("{bad} package header(s) not read, first {first}")),
    }
}

/// Adds one package (with its purl qualifiers) and the files of it worth keeping. Each header is
/// an installed package of its own (multilib pairs differ in arch), so it is pushed without the
/// search for an equal one that `LayerPackages::add` makes: that search made a large database
/// quadratic.
fn add(l: &mut LayerPackages, h: Header) {
    let Some(arch) = h.arch else { return };
    let i = l.packages.len();
    let q = RpmQualifiers { index: i, arch, epoch: h.epoch };
    let version = format!("{}-{}", h.version, h.release);
    l.packages.push(Package::rpm(&h.name, &version, &q, None));
    l.rpm.push(q);
    for f in h.files {
        l.owned.push((f, i));
    }
}

/// One header blob (as rpmdb stores it: no magic), bounded as rpm's `headerImport` bounds it.
pub(super) fn parse_header(blob: &[u8]) -> Result<Header, String> {
    let be = |at: usize| -> Option<u32> { Some(u32::from_be_bytes(blob.get(at..at + 4)?.try_into().ok()?)) };
    let (il, dl) = (be(0).ok_or("truncated")? as usize, be(4).ok_or("truncated")? as usize);
    if il == 0 || il > MAX_TAGS || dl > MAX_DATA {
        return Err(format!("{il} tags, {dl} bytes of data: not a header"));
    }
    let start = 8 + il * 16;
    let data = blob
        .get(start..start + dl)
        .ok_or_else(|| format!("{} bytes, shorter than its {il} tags and {dl} bytes", blob.len()))?;
    let mut h = Header::default();
    let (mut dirnames, mut basenames, mut dirindexes) = (Vec::new(), Vec::new(), Vec::new());
    for k in 0..il {
        let at = 8 + k * 16;
        let field = |i: usize| be(at + 4 * i).ok_or("truncated");
        let (tag, ty, off, count) = (field(0)?, field(1)?, field(2)? as usize, field(3)? as usize);
        let what = || format!("tag {tag} unreadable (outside its data, unterminated or not UTF-8)");
        match (tag, ty) {
            (TAG_NAME, TYPE_STRING | TYPE_I18NSTRING) => h.name = string(data, off).ok_or_else(what)?,
            (TAG_VERSION, TYPE_STRING) => h.version = string(data, off).ok_or_else(what)?,
            (TAG_RELEASE, TYPE_STRING) => h.release = string(data, off).ok_or_else(what)?,
            (TAG_ARCH, TYPE_STRING) => h.arch = Some(string(data, off).ok_or_else(what)?),
            (TAG_EPOCH, TYPE_INT32) => h.epoch = int32s(data, off, count.min(1)).ok_or_else(what)?.first().copied(),
            (TAG_OLDFILENAMES, TYPE_STRING_ARRAY) => h.files = strings(data, off, count).ok_or_else(what)?,
            (TAG_BASENAMES, TYPE_STRING_ARRAY) => basenames = strings(data, off, count).ok_or_else(what)?,
            (TAG_DIRNAMES, TYPE_STRING_ARRAY) => dirnames = strings(data, off, count).ok_or_else(what)?,
            (TAG_DIRINDEXES, TYPE_INT32) => dirindexes = int32s(data, off, count).ok_or_else(what)?,
            _ => {}
        }
    }
    if h.name.is_empty() || h.version.is_empty() {
        return Err("no name or version".into());
    }
    if basenames.len() != dirindexes.len() {
        return Err(format!("{} file names but {} directory indexes", basenames.len(), dirindexes.len()));
    }
    for (base, d) in basenames.iter().zip(dirindexes) {
        let dir = dirnames.get(d as usize).ok_or_else(|| format!("directory index {d} of {}", dirnames.len()))?;
        h.files.push(format!("{dir}{base}"));
    }
    h.files.retain(|f| f.starts_with('/') && interesting(f));
    Ok(h)
}

/// The NUL-terminated string at `off`. It names the package (name, version, release, arch), so
/// bytes that are not UTF-8 refuse the header: a lossy copy would put a name in the report (and a
/// purl) that the database does not hold.
fn string(data: &[u8], off: usize) -> Option<String> {
    let s = data.get(off..)?;
    let end = memchr::memchr(0, s)?;
    std::str::from_utf8(&s[..end]).ok().map(str::to_owned)
}

/// `count` NUL-terminated strings from `off`; each takes a byte at least, so a count larger than
/// the data is refused before anything is allocated.
fn strings(data: &[u8], off: usize, count: usize) -> Option<Vec<String>> {
    if count > data.len().saturating_sub(off) {
        return None;
    }
    let mut out = Vec::with_capacity(count);
    let mut at = off;
    for _ in 0..count {
        let s = data.get(at..)?;
        let end = memchr::memchr(0, s)?;
        out.push(String::from_utf8_lossy(&s[..end]).into_owned());
        at += end + 1;
    }
    Some(out)
}

/// `count` big-endian 32-bit integers from `off`.
fn int32s(data: &[u8], off: usize, count: usize) -> Option<Vec<u32>> {
    let bytes = data.get(off..off.checked_add(count.checked_mul(4)?)?)?;
    Some(bytes.chunks_exact(4).map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]])).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A header blob of `(tag, type, count, data)` entries, laid out as rpm lays them out.
    fn blob(entries: &[(u32, u32, u32, Vec<u8>)]) -> Vec<u8> {
        let mut index = Vec::new();
        let mut data = Vec::new();
        for (tag, ty, count, bytes) in entries {
            if *ty == TYPE_INT32 {
                while data.len() % 4 != 0 {
                    data.push(0);
                }
            }
            for v in [*tag, *ty, data.len() as u32, *count] {
                index.extend_from_slice(&v.to_be_bytes());
            }
            data.extend_from_slice(bytes);
        }
        let mut out = Vec::new();
        out.extend_from_slice(&(entries.len() as u32).to_be_bytes());
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        out.extend(index);
        out.extend(data);
        out
    }

    fn s(v: &str) -> (u32, Vec<u8>) {
        (1, format!("{v}\0").into_bytes())
    }

    fn strs(v: &[&str]) -> (u32, Vec<u8>) {
        (v.len() as u32, v.iter().flat_map(|s| format!("{s}\0").into_bytes()).collect())
    }

    fn ints(v: &[u32]) -> (u32, Vec<u8>) {
        (v.len() as u32, v.iter().flat_map(|i| i.to_be_bytes()).collect())
    }

    fn entry(tag: u32, ty: u32, (count, bytes): (u32, Vec<u8>)) -> (u32, u32, u32, Vec<u8>) {
        (tag, ty, count, bytes)
    }

    fn cudart() -> Vec<(u32, u32, u32, Vec<u8>)> {
        vec![
            entry(TAG_NAME, TYPE_STRING, s("cuda-cudart-12-9")),
            entry(TAG_VERSION, TYPE_STRING, s("12.9.79")),
            entry(TAG_RELEASE, TYPE_STRING, s("1")),
            entry(TAG_EPOCH, TYPE_INT32, ints(&[2])),
            entry(TAG_ARCH, TYPE_STRING, s("x86_64")),
            entry(TAG_DIRINDEXES, TYPE_INT32, ints(&[0, 0, 1])),
            entry(TAG_BASENAMES, TYPE_STRING_ARRAY, strs(&["libcudart.so.12", "libcudart.so.12.9.79", "README"])),
            entry(TAG_DIRNAMES, TYPE_STRING_ARRAY, strs(&["/usr/local/cuda-12.9/lib64/", "/usr/share/doc/cuda/"])),
        ]
    }

    #[test]
    fn reads_a_header_blob_as_rpm_lays_it_out() {
        let h = parse_header(&blob(&cudart())).unwrap();
        assert_eq!((h.name.as_str(), h.version.as_str(), h.release.as_str()), ("cuda-cudart-12-9", "12.9.79", "1"));
        assert_eq!((h.epoch, h.arch.as_deref()), (Some(2), Some("x86_64")));
        assert_eq!(
            h.files,
            ["/usr/local/cuda-12.9/lib64/libcudart.so.12", "/usr/local/cuda-12.9/lib64/libcudart.so.12.9.79"]
        );
        let mut l = LayerPackages::default();
        add(&mut l, h);
        assert_eq!(l.packages[0].version, "12.9.79-1");
        assert_eq!(l.rpm, [RpmQualifiers { index: 0, arch: "x86_64".into(), epoch: Some(2) }]);
        assert_eq!(l.owned.len(), 2);
    }

    /// Every way a hostile blob can lie about its sizes is an error, never a panic or a large
    /// allocation.
    #[test]
    fn refuses_headers_that_lie_about_their_sizes() {
        let good = blob(&cudart());
        for cut in [0, 3, 8, 20, good.len() - 1] {
            assert!(parse_header(&good[..cut]).is_err(), "cut at {cut}");
        }
        let mut huge = good.clone();
        huge[..4].copy_from_slice(&0x0100_0000u32.to_be_bytes());
        assert!(parse_header(&huge).unwrap_err().contains("not a header"));
        let mut e = cudart();
        e[6] = entry(TAG_BASENAMES, TYPE_STRING_ARRAY, (u32::MAX, b"a\0".to_vec()));
        assert!(parse_header(&blob(&e)).is_err());
        let mut e = cudart();
        e[5] = entry(TAG_DIRINDEXES, TYPE_INT32, ints(&[0, 0, 7]));
        assert_eq!(parse_header(&blob(&e)).unwrap_err(), "directory index 7 of 2");
        let mut e = cudart();
        e[5] = entry(TAG_DIRINDEXES, TYPE_INT32, ints(&[0]));
        assert!(parse_header(&blob(&e)).unwrap_err().contains("3 file names but 1"));
        let mut e = cudart();
        e[0] = entry(TAG_NAME, TYPE_STRING, (1, b"no terminator".to_vec()));
        e.truncate(1);
        assert!(parse_header(&blob(&e)).is_err());
        // A name that is not UTF-8 is refused, not reported as a lossy copy the database lacks.
        let mut e = cudart();
        e[0] = entry(TAG_NAME, TYPE_STRING, (1, b"cuda-\xff\0".to_vec()));
        assert!(parse_header(&blob(&e)).unwrap_err().starts_with("tag 1000 unreadable"));
    }

    /// `gpg-pubkey` pseudo-packages have no architecture and are no package of the image.
    #[test]
    fn pubkeys_are_not_packages() {
        let mut l = LayerPackages::default();
        let h = parse_header(&blob(&[
            entry(TAG_NAME, TYPE_STRING, s("gpg-pubkey")),
            entry(TAG_VERSION, TYPE_STRING, s("fd431d51")),
            entry(TAG_RELEASE, TYPE_STRING, s("4ae0493b")),
        ]))
        .unwrap();
        add(&mut l, h);
        assert!(l.packages.is_empty());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 512, .. Default::default() })]

        /// A real header with bytes changed and cut anywhere: an error or a header whose file
        /// names come from its own bytes, never a panic or an allocation beyond them.
        #[test]
        fn mutated_headers_never_panic(
            edits in proptest::collection::vec((proptest::prelude::any::<usize>(), proptest::prelude::any::<u8>()), 1..16),
            cut in proptest::prelude::any::<usize>(),
        ) {
            let mut b = blob(&cudart());
            for (at, v) in edits {
                let i = at % b.len();
                b[i] = v;
            }
            if cut % 3 == 0 {
                b.truncate(cut % (b.len() + 1));
            }
            // The package's name is in the blob's bytes as it is reported; each file name is a
            // directory and a base name from them.
            if let Ok(h) = parse_header(&b) {
                proptest::prop_assert!(b.windows(h.name.len()).any(|w| w == h.name.as_bytes()));
                proptest::prop_assert!(h.files.len() <= b.len());
                proptest::prop_assert!(h.files.iter().all(|f| f.len() <= 2 * b.len()));
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(b in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512)) {
            let _ = parse_header(&b);
        }
    }

    #[test]
    fn a_log_with_content_is_a_note() {
        let mut l = LayerPackages::default();
        let f = tempfile::NamedTempFile::new().unwrap();
        assert_eq!(wal(&mut l, "/var/lib/rpm", "rpmdb.sqlite-wal", f.path()), Ok(()));
        std::fs::write(f.path(), b"x").unwrap();
        assert!(wal(&mut l, "/var/lib/rpm", "rpmdb.sqlite-wal", f.path()).unwrap_err().contains("1 bytes"));
    }
}
