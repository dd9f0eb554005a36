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

use super::{LayerPackages, MAX_PATH, Package, ReadResult, RpmQualifiers, interesting};

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
    /// Its files past the layer's bound were not made (`LayerPackages::fits` said no).
    cut: bool,
}

/// SQLite virtual-machine steps one database's read may take. rpm's own databases take 10 a
/// package with the queries below (100,001 packages: 1.0M, the schema 101); past this, the read is
/// interrupted and the rest not read, whatever the schema makes a step cost.
const MAX_STEPS: u64 = 64 * MAX_PACKAGES as u64;
/// The longest value (and row) sqlite may make or read: a header's bound and room for the rest
/// of its row, so a header over its bound is still refused alone; a row past this stops the read.
const MAX_VALUE: i32 = (MAX_BLOB + (1 << 20)) as i32;
/// Steps between two looks at the budget.
const STEPS_A_CHECK: i32 = 1000;

/// What rpm's `Packages` table is (lib/backend/sqlite.c): anything else is refused unread.
const RPM_TABLE: &str = "rpm's table has the plain columns `hnum` INTEGER PRIMARY KEY and `blob`";

/// Reads `rpmdb.sqlite` (a temporary copy at `file`): every package with an architecture (the
/// `gpg-pubkey` pseudo-packages have none) and the files of it that can carry device code.
pub fn sqlite(l: &mut LayerPackages, _dir: &str, _name: &str, file: &Path) -> ReadResult {
    read_db(l, file, MAX_STEPS)
}

/// Opens the database bounded by work, not only by bytes: sqlite's limits cap any one value
/// (a header's bound) and any statement the schema holds, and a progress handler interrupts the
/// connection past `steps` virtual-machine steps. All of it per connection: sqlite's heap limit
/// is the process's, shared with every other layer of the scan.
fn open(file: &Path, steps: u64) -> Result<rusqlite::Connection, rusqlite::Error> {
    use rusqlite::{Connection, OpenFlags, config::DbConfig, limits::Limit};
    // immutable: the copy is private and unchanging, so sqlite takes no locks and ignores any
    // log; the schema is the image's, so nothing in it (views, triggers, functions) is trusted.
    let uri = format!("file:{}?immutable=1", crate::escape::uri_path(&file.to_string_lossy()));
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let db = Connection::open_with_flags(uri, flags)?;
    db.set_db_config(DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true)?;
    db.set_db_config(DbConfig::SQLITE_DBCONFIG_TRUSTED_SCHEMA, false)?;
    // Before the first statement, which parses the schema: its statements are bounded too.
    for (limit, most) in [
        (Limit::SQLITE_LIMIT_LENGTH, MAX_VALUE),
        (Limit::SQLITE_LIMIT_SQL_LENGTH, 1 << 20),
        (Limit::SQLITE_LIMIT_COLUMN, 100),
        (Limit::SQLITE_LIMIT_EXPR_DEPTH, 64),
        (Limit::SQLITE_LIMIT_COMPOUND_SELECT, 4),
        (Limit::SQLITE_LIMIT_VDBE_OP, 10_000),
        (Limit::SQLITE_LIMIT_FUNCTION_ARG, 8),
        (Limit::SQLITE_LIMIT_ATTACHED, 0),
        (Limit::SQLITE_LIMIT_LIKE_PATTERN_LENGTH, 64),
        (Limit::SQLITE_LIMIT_VARIABLE_NUMBER, 4),
        (Limit::SQLITE_LIMIT_TRIGGER_DEPTH, 1),
        (Limit::SQLITE_LIMIT_WORKER_THREADS, 0),
    ] {
        db.set_limit(limit, most)?;
    }
    let mut left = steps / STEPS_A_CHECK as u64;
    db.progress_handler(
        STEPS_A_CHECK,
        Some(move || {
            left = left.saturating_sub(1);
            left == 0
        }),
    )?;
    Ok(db)
}

/// Why the database was not read (or not all of it), for the note.
fn why(e: rusqlite::Error, steps: u64) -> String {
    match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::OperationInterrupted) => {
            format!("reading it took more than {steps} sqlite steps: the rest not read")
        }
        Some(rusqlite::ErrorCode::TooBig) => format!("a row or value over {MAX_VALUE} bytes: the rest not read"),
        _ => format!("not an rpm sqlite database ({e})"),
    }
}

/// `Packages` as rpm makes it, or why not: a table (not a view or a virtual table, whose every
/// read runs what the image chose) of the two plain columns, `hnum` its integer key (so rows
/// come in its order with no sort) and `blob` (not generated: a generated column computes its
/// expression at every read).
fn check_schema(db: &rusqlite::Connection) -> Result<Result<(), String>, rusqlite::Error> {
    use rusqlite::OptionalExtension;
    let row = db
        .query_row("SELECT type, rootpage, sql FROM sqlite_schema WHERE name = 'Packages'", [], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, Option<i64>>(1)?, r.get::<_, Option<String>>(2)?))
        })
        .optional()?;
    let Some((kind, root, sql)) = row.filter(|(kind, ..)| kind == "table") else {
        return Ok(Err("no `Packages` table".into()));
    };
    let plain = sql
        .as_deref()
        .is_some_and(|s| s.trim_start().get(..12).is_some_and(|w| w.eq_ignore_ascii_case("CREATE TABLE")));
    if root.unwrap_or(0) == 0 || !plain {
        return Ok(Err(format!("`Packages` is a virtual {kind}; {RPM_TABLE}")));
    }
    let mut stmt = db.prepare("SELECT name, type, pk, hidden FROM pragma_table_xinfo('Packages') ORDER BY cid")?;
    let columns = stmt
        .query_map([], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, i64>(2)?, r.get::<_, i64>(3)?))
        })?
        .take(8)
        .collect::<Result<Vec<_>, _>>()?;
    if let Some((name, ..)) = columns.iter().find(|c| matches!(c.3, 2 | 3)) {
        return Ok(Err(format!("`Packages` column {} is generated; {RPM_TABLE}", super::quoted(name))));
    }
    let rpms = match &columns[..] {
        [(h, ty, 1, 0), (b, _, 0, 0)] => h == "hnum" && ty.eq_ignore_ascii_case("INTEGER") && b == "blob",
        _ => false,
    };
    if !rpms {
        let names: Vec<String> = columns.iter().map(|c| super::quoted(&c.0)).collect();
        return Ok(Err(format!("`Packages` has the columns {}; {RPM_TABLE}", names.join(", "))));
    }
    Ok(Ok(()))
}

/// [`sqlite`] with a budget of `steps` virtual-machine steps.
fn read_db(l: &mut LayerPackages, file: &Path, steps: u64) -> ReadResult {
    l.rpmdb = true;
    let e = |e: rusqlite::Error| why(e, steps);
    let db = open(file, steps).map_err(e)?;
    check_schema(&db).map_err(e)?.map_err(|why| format!("not an rpm sqlite database ({why})"))?;
    let mut stmt = db
        .prepare("SELECT hnum, CASE WHEN length(blob) <= ?1 THEN blob END, length(blob) FROM Packages ORDER BY hnum")
        .map_err(e)?;
    let mut rows = stmt.query([MAX_BLOB]).map_err(e)?;
    let (mut bad, mut first_bad, mut cut) = (0usize, None, None);
    let mut read = 0usize;
    let mut notes = Vec::new();
    loop {
        let row = match rows.next() {
            Ok(Some(row)) => row,
            Ok(None) => break,
            Err(err) => {
                notes.push(e(err));
                break;
            }
        };
        if read == MAX_PACKAGES {
            notes.push(format!("more than {MAX_PACKAGES} packages: the rest not read"));
            break;
        }
        read += 1;
        let hnum: i64 = row.get(0).map_err(e)?;
        // Parsed where sqlite holds it: a header up to its bound is not copied again.
        let parsed = match row.get_ref(1).map_err(e)? {
            rusqlite::types::ValueRef::Blob(b) => parse_header(b, &mut |bytes| l.fits(bytes)),
            rusqlite::types::ValueRef::Null => match row.get::<_, Option<i64>>(2).map_err(e)? {
                Some(len) => Err(format!("header of {len} bytes, over the bound of {MAX_BLOB}")),
                None => Err("no header".into()),
            },
            _ => Err("a header that is not a blob".into()),
        };
        match parsed {
            Ok(h) => {
                if h.cut && cut.is_none() {
                    cut = Some(format!("package {hnum}: {}", super::cut_note("file paths")));
                }
                add(l, h)
            }
            Err(why) => {
                bad += 1;
                first_bad.get_or_insert(format!("package {hnum}: {why}"));
            }
        }
    }
    // What was read is kept; each way the rest was not is said, the first cut first.
    if let Some(first) = first_bad {
        notes.insert(0, format!("{bad} package header(s) not read, first {first}"));
    }
    if let Some(cut) = cut {
        notes.insert(0, cut);
    }
    if notes.is_empty() { Ok(()) } else { Err(notes.join("; ")) }
}

/// Adds one package (with its purl qualifiers) and the files of it worth keeping. Each header is
/// an installed package of its own (multilib pairs differ in arch), so it is pushed without the
/// search for an equal one that `LayerPackages::add` makes.
fn add(l: &mut LayerPackages, h: Header) {
    let Some(arch) = h.arch else { return };
    let q = RpmQualifiers { index: l.packages.len(), arch, epoch: h.epoch };
    let version = format!("{}-{}", h.version, h.release);
    let i = l.push(Package::rpm(&h.name, &version, &q, None));
    l.rpm.push(q);
    for f in h.files {
        l.owned.push((f, i));
    }
}

/// Directory names one header may have (the largest packages have a few thousand): the index
/// that joins them to base names is held while the header is read.
const MAX_DIRS: usize = 1 << 18;

/// One header blob (as rpmdb stores it: no magic), bounded as rpm's `headerImport` bounds it.
/// Files are made last, each counted by `fits` (with [`super::path_cost`]) before it is made:
/// a few bytes of base names can join a long directory name many times over, so a header's size
/// does not bound its paths. Past what `fits` allows, the rest are not made (`cut`).
pub(super) fn parse_header(blob: &[u8], fits: &mut dyn FnMut(usize) -> bool) -> Result<Header, String> {
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
    let (mut old, mut dirnames, mut basenames) = (Strings::default(), Strings::default(), Strings::default());
    let mut dirindexes: &[u8] = &[];
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
            (TAG_EPOCH, TYPE_INT32) => h.epoch = int32s(data, off, count.min(1)).ok_or_else(what)?.next(),
            (TAG_OLDFILENAMES, TYPE_STRING_ARRAY) => old = strings(data, off, count).ok_or_else(what)?,
            (TAG_BASENAMES, TYPE_STRING_ARRAY) => basenames = strings(data, off, count).ok_or_else(what)?,
            (TAG_DIRNAMES, TYPE_STRING_ARRAY) => dirnames = strings(data, off, count).ok_or_else(what)?,
            (TAG_DIRINDEXES, TYPE_INT32) => {
                let bytes = count.checked_mul(4).and_then(|n| data.get(off..off.checked_add(n)?));
                dirindexes = bytes.ok_or_else(what)?;
            }
            _ => {}
        }
    }
    if h.name.is_empty() || h.version.is_empty() {
        return Err("no name or version".into());
    }
    if basenames.count != dirindexes.len() / 4 {
        return Err(format!("{} file names but {} directory indexes", basenames.count, dirindexes.len() / 4));
    }
    if dirnames.count > MAX_DIRS {
        return Err(format!("{} directory names, over the bound of {MAX_DIRS}", dirnames.count));
    }
    // rpm's directory names end in `/`, so a file's last component is its base name's: what
    // makes it worth keeping is known before the path is made.
    let dirs: Vec<&[u8]> = dirnames.iter().collect();
    if let Some(n) = dirs.iter().position(|d| d.last() != Some(&b'/')) {
        return Err(format!("directory name {n} does not end in `/`"));
    }
    let indexes = || dirindexes.chunks_exact(4).map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]) as usize);
    if let Some(d) = indexes().find(|d| *d >= dirs.len()) {
        return Err(format!("directory index {d} of {}", dirs.len()));
    }
    let lossy = String::from_utf8_lossy;
    let joined = basenames.iter().zip(indexes()).map(|(base, d)| (dirs[d], base));
    for (dir, base) in old.iter().map(|f| (&[][..], f)).chain(joined) {
        let base = lossy(base);
        // A path longer than the walkers take names no file of the image.
        let len = dir.len() + base.len();
        let absolute = dir.first().or(base.as_bytes().first()) == Some(&b'/');
        if !interesting(&base) || len > MAX_PATH || !absolute {
            continue;
        }
        if !fits(super::path_cost(len)) {
            h.cut = true;
            break;
        }
        h.files.push(format!("{}{base}", lossy(dir)));
    }
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

/// A header's array of NUL-terminated strings, checked whole and then walked in place: nothing
/// is allocated per string, whatever the count.
#[derive(Debug, Default, Clone, Copy)]
struct Strings<'a> {
    /// From the first string to the last one's NUL.
    bytes: &'a [u8],
    count: usize,
}

impl<'a> Strings<'a> {
    fn iter(self) -> impl Iterator<Item = &'a [u8]> {
        self.bytes.split(|b| *b == 0).take(self.count)
    }
}

/// `count` NUL-terminated strings from `off`, each inside the data.
fn strings(data: &[u8], off: usize, count: usize) -> Option<Strings<'_>> {
    let s = data.get(off..)?;
    // Each takes a byte at least.
    if count > s.len() {
        return None;
    }
    let mut at = 0;
    for _ in 0..count {
        at += memchr::memchr(0, &s[at..])? + 1;
    }
    Some(Strings { bytes: &s[..at], count })
}

/// `count` big-endian 32-bit integers from `off`.
fn int32s(data: &[u8], off: usize, count: usize) -> Option<impl Iterator<Item = u32>> {
    let bytes = data.get(off..off.checked_add(count.checked_mul(4)?)?)?;
    Some(bytes.chunks_exact(4).map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]])))
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
        let h = parse_header(&blob(&cudart()), &mut |_| true).unwrap();
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
            assert!(parse_header(&good[..cut], &mut |_| true).is_err(), "cut at {cut}");
        }
        let mut huge = good.clone();
        huge[..4].copy_from_slice(&0x0100_0000u32.to_be_bytes());
        assert!(parse_header(&huge, &mut |_| true).unwrap_err().contains("not a header"));
        let mut e = cudart();
        e[6] = entry(TAG_BASENAMES, TYPE_STRING_ARRAY, (u32::MAX, b"a\0".to_vec()));
        assert!(parse_header(&blob(&e), &mut |_| true).is_err());
        let mut e = cudart();
        e[5] = entry(TAG_DIRINDEXES, TYPE_INT32, ints(&[0, 0, 7]));
        assert_eq!(parse_header(&blob(&e), &mut |_| true).unwrap_err(), "directory index 7 of 2");
        let mut e = cudart();
        e[5] = entry(TAG_DIRINDEXES, TYPE_INT32, ints(&[0]));
        assert!(parse_header(&blob(&e), &mut |_| true).unwrap_err().contains("3 file names but 1"));
        let mut e = cudart();
        e[0] = entry(TAG_NAME, TYPE_STRING, (1, b"no terminator".to_vec()));
        e.truncate(1);
        assert!(parse_header(&blob(&e), &mut |_| true).is_err());
        // A name that is not UTF-8 is refused, not reported as a lossy copy the database lacks.
        let mut e = cudart();
        e[0] = entry(TAG_NAME, TYPE_STRING, (1, b"cuda-\xff\0".to_vec()));
        assert!(parse_header(&blob(&e), &mut |_| true).unwrap_err().starts_with("tag 1000 unreadable"));
    }

    /// A header whose few bytes join into many long paths: each path is counted before it is
    /// made, none past what `fits` allows, and the header says it was cut; paths rpm could not
    /// have installed (longer than the walkers take) are passed over uncounted.
    #[test]
    fn a_headers_paths_are_counted_before_they_are_made() {
        let n = 10_000;
        let long_dir = format!("/{}/", "d".repeat(3000));
        let mut e = cudart();
        e[5] = entry(TAG_DIRINDEXES, TYPE_INT32, ints(&vec![0; n]));
        e[6] = entry(TAG_BASENAMES, TYPE_STRING_ARRAY, strs(&vec!["a.so"; n]));
        e[7] = entry(TAG_DIRNAMES, TYPE_STRING_ARRAY, strs(&[&long_dir]));
        let b = blob(&e);
        let mut room = 1 << 20;
        let mut fits = |cost: usize| match usize::checked_sub(room, cost) {
            Some(left) => {
                room = left;
                true
            }
            None => false,
        };
        let h = parse_header(&b, &mut fits).unwrap();
        assert!(h.cut);
        assert_eq!(h.files.len(), (1 << 20) / super::super::path_cost(3006));
        let mut e = cudart();
        e[7] = entry(TAG_DIRNAMES, TYPE_STRING_ARRAY, strs(&[&format!("/{}/", "d".repeat(MAX_PATH)), "/x/"]));
        let h = parse_header(&blob(&e), &mut |_| panic!("a path no walker takes is not counted")).unwrap();
        assert!(h.files.is_empty() && !h.cut, "{h:?}");
        // rpm's directory names end in `/`; one that does not is no rpm header.
        let mut e = cudart();
        e[7] = entry(TAG_DIRNAMES, TYPE_STRING_ARRAY, strs(&["/usr/local/cuda-12.9/lib64", "/x/"]));
        assert_eq!(parse_header(&blob(&e), &mut |_| true).unwrap_err(), "directory name 0 does not end in `/`");
    }

    /// A database as an image's author may write it, with sqlite itself.
    fn db(schema: &str, rows: usize) -> tempfile::NamedTempFile {
        let f = tempfile::NamedTempFile::new().unwrap();
        let c = rusqlite::Connection::open(f.path()).unwrap();
        c.execute_batch(schema).unwrap();
        let header = blob(&cudart());
        for _ in 0..rows {
            c.execute("INSERT INTO Packages (blob) VALUES (?1)", [&header]).unwrap();
        }
        f
    }

    const RPMS: &str = "CREATE TABLE 'Packages' (hnum INTEGER PRIMARY KEY AUTOINCREMENT,blob BLOB NOT NULL)";

    /// rpm's own table is read; anything else named `Packages` (a virtual table, a generated
    /// column, other columns, an unkeyed `hnum` that would need a sort) is refused before a row
    /// is read, saying why.
    #[test]
    fn only_rpms_plain_packages_table_is_read() {
        let read = |schema: &str| {
            // Rows only where they can be written (not into a generated column).
            let f = db(schema, if schema == RPMS { 3 } else { 0 });
            let mut l = LayerPackages::default();
            (sqlite(&mut l, "/var/lib/rpm", "rpmdb.sqlite", f.path()), l.packages.len())
        };
        assert_eq!(read(RPMS), (Ok(()), 3));
        let refused = |schema: &str| {
            let (r, n) = read(schema);
            assert_eq!(n, 0, "{schema}");
            r.unwrap_err()
        };
        assert_eq!(
            refused("CREATE VIRTUAL TABLE Packages USING fts5(hnum, blob)"),
            format!("not an rpm sqlite database (`Packages` is a virtual table; {RPM_TABLE})")
        );
        assert_eq!(
            refused("CREATE TABLE Packages (hnum INTEGER PRIMARY KEY, blob BLOB AS (zeroblob(8)) STORED, b2 BLOB)"),
            format!("not an rpm sqlite database (`Packages` column `blob` is generated; {RPM_TABLE})")
        );
        assert_eq!(
            refused("CREATE TABLE Packages (hnum INTEGER, blob BLOB)"),
            format!("not an rpm sqlite database (`Packages` has the columns `hnum`, `blob`; {RPM_TABLE})")
        );
        assert!(
            refused("CREATE TABLE Packages (hnum INTEGER PRIMARY KEY, blob BLOB, \"x\u{1b}\" INT)")
                .contains("`x\\x1b`")
        );
    }

    /// Past its step budget the read is interrupted: what was read is kept, and the note says
    /// the rest was not. The limits hold whatever a statement asks (here a value longer than a
    /// header may be).
    #[test]
    fn the_read_stops_at_its_step_budget_and_values_at_their_bound() {
        let f = db(RPMS, 2000);
        let mut l = LayerPackages::default();
        assert_eq!(read_db(&mut l, f.path(), MAX_STEPS), Ok(()));
        assert_eq!(l.packages.len(), 2000);
        let mut l = LayerPackages::default();
        let note = read_db(&mut l, f.path(), 10_000).unwrap_err();
        assert_eq!(note, "reading it took more than 10000 sqlite steps: the rest not read");
        assert!(!l.packages.is_empty() && l.packages.len() < 2000, "{}", l.packages.len());
        let c = open(f.path(), MAX_STEPS).unwrap();
        let big = c.query_row("SELECT length(hex(zeroblob(?1)))", [MAX_VALUE / 2 + 1], |r| r.get::<_, i64>(0));
        assert_eq!(big.unwrap_err().sqlite_error_code(), Some(rusqlite::ErrorCode::TooBig));
    }

    /// `gpg-pubkey` pseudo-packages have no architecture and are no package of the image.
    #[test]
    fn pubkeys_are_not_packages() {
        let mut l = LayerPackages::default();
        let h = parse_header(
            &blob(&[
                entry(TAG_NAME, TYPE_STRING, s("gpg-pubkey")),
                entry(TAG_VERSION, TYPE_STRING, s("fd431d51")),
                entry(TAG_RELEASE, TYPE_STRING, s("4ae0493b")),
            ]),
            &mut |_| true,
        )
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
            if let Ok(h) = parse_header(&b, &mut |_| true) {
                proptest::prop_assert!(b.windows(h.name.len()).any(|w| w == h.name.as_bytes()));
                proptest::prop_assert!(h.files.len() <= b.len());
                proptest::prop_assert!(h.files.iter().all(|f| f.len() <= 2 * b.len()));
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(b in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512)) {
            let _ = parse_header(&b, &mut |_| true);
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
