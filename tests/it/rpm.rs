//! RPM-based images (UBI, Rocky, Fedora) name their CUDA packages from RPM's own sqlite database:
//! real RPMs built by `rpmbuild` around real CUDA libraries, installed by `rpm --root` into a root
//! that becomes an image layer, scanned, and named as `pkg:rpm/...` in JSON, SARIF and CycloneDX.

use std::path::Path;
use std::process::Command as Std;

use assert_cmd::Command;
use serde_json::Value;

use crate::dir_packages::{file, inventory};
use crate::images::{Comp, Ent, Image, oci_layout, tar, tar_dir};
use crate::scan::which;
use crate::util::{fixture, run};

const CUDART: &str = "/usr/local/cuda-12.9/targets/x86_64-linux/lib/libcudart.so.12.9.79";
const HOPPER: &str = "/opt/llm/lib/libsm90a.so";
const CUDART_PURL: &str = "pkg:rpm/rhel/cuda-cudart-12-9@12.9.79-1?arch=x86_64&distro=rhel-9.4";
const HOPPER_PURL: &str = "pkg:rpm/rhel/llm-hopper-kernels@2.0-3.el9?arch=x86_64&epoch=2&distro=rhel-9.4";

/// Builds one binary RPM holding `src` at `dest`, exactly as given: no strip, no build-id links,
/// no dependency generation, so the library in the package is the fixture byte for byte.
fn rpmbuild(
    top: &Path,
    name: &str,
    epoch: Option<u32>,
    version: &str,
    release: &str,
    src: &Path,
    dest: &str,
) -> std::path::PathBuf {
    let epoch = epoch.map(|e| format!("Epoch: {e}\n")).unwrap_or_default();
    let dir = Path::new(dest).parent().unwrap().display().to_string();
    let spec = format!(
        "Name: {name}\n{epoch}Version: {version}\nRelease: {release}\nSummary: {name}\nLicense: NVIDIA\n\
         AutoReqProv: no\n%global debug_package %{{nil}}\n%global __os_install_post %{{nil}}\n\
         %description\n{name}\n%install\nmkdir -p %{{buildroot}}{dir}\ncp {} %{{buildroot}}{dest}\n\
         %files\n{dest}\n",
        src.display()
    );
    std::fs::create_dir_all(top).unwrap();
    let spec_path = top.join(format!("{name}.spec"));
    std::fs::write(&spec_path, spec).unwrap();
    run(Std::new(which("rpmbuild"))
        .args(["-bb", "--quiet", "--target", "x86_64"])
        .arg("--define")
        .arg(format!("_topdir {}", top.display()))
        .args(["--define", "_build_id_links none"])
        .arg(&spec_path));
    top.join(format!("RPMS/x86_64/{name}-{version}-{release}.x86_64.rpm"))
}

/// A root with both RPMs installed by `rpm` itself (its sqlite database at `/var/lib/rpm`) and
/// RHEL 9.4's `os-release`.
fn rpm_root(dir: &Path) -> std::path::PathBuf {
    let top = dir.join("rpmbuild");
    let cudart = rpmbuild(&top, "cuda-cudart-12-9", None, "12.9.79", "1", &fixture("libcudart.so.12.9.79"), CUDART);
    let hopper = rpmbuild(&top, "llm-hopper-kernels", Some(2), "2.0", "3.el9", &fixture("libsm90a.so"), HOPPER);
    let root = dir.join("root");
    std::fs::create_dir_all(root.join("etc")).unwrap();
    run(Std::new(which("rpm"))
        .arg("--root")
        .arg(&root)
        .args(["--dbpath", "/var/lib/rpm", "-i", "--nodeps", "--noscripts", "--ignorearch", "--nosignature"])
        .arg(&cudart)
        .arg(&hopper));
    std::fs::write(root.join("etc/os-release"), "NAME=\"Red Hat Enterprise Linux\"\nID=\"rhel\"\nVERSION_ID=\"9.4\"\n")
        .unwrap();
    assert!(root.join("var/lib/rpm/rpmdb.sqlite").is_file(), "rpm wrote no sqlite database");
    root
}

/// An OCI layout of a base layer and the RPM layer.
fn image(dir: &Path, rpm_layer: Vec<u8>) -> String {
    let base = tar(&[Ent::File("usr/lib64/libplain.so", crate::util::read_fixture("libplain.so"))]);
    let img = Image::new(vec![(base, Comp::Gzip), (rpm_layer, Comp::Gzip)]);
    let layout = dir.join("oci");
    oci_layout(&layout, &[&img]);
    format!("oci:{}", layout.display())
}

fn scan(image: &str, format: &str) -> (Option<i32>, String, String) {
    let out = Command::cargo_bin("cudalint")
        .unwrap()
        .args(["scan", image, "--gpu", "L4", "--quiet", "--format", format])
        .output()
        .unwrap();
    (out.status.code(), String::from_utf8(out.stdout).unwrap(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// The sm_90a library is judged (CL001 on L4) whatever its database says.
fn assert_hopper_judged(r: &Value) {
    let findings = &r["findings"];
    assert!(
        findings.as_array().unwrap().iter().any(|f| f["rule"] == "CL001" && f["path"] == HOPPER),
        "the library is judged all the same: {findings:#}"
    );
}

fn json(image: &str) -> Value {
    let (code, out, err) = scan(image, "json");
    assert_eq!(code, Some(1), "the sm_90a library cannot run on L4: {err}");
    serde_json::from_str(&out).unwrap()
}

/// [`json`], with the scan's peak resident memory in bytes: its `getrusage` maxrss, read by a
/// Python parent that runs nothing else (this process runs other tests' scans at once).
fn json_and_peak(image: &str) -> (Value, u64) {
    const PEAK: &str = "import resource, subprocess, sys\n\
        r = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE)\n\
        sys.stdout.buffer.write(r.stdout)\n\
        sys.stderr.write('maxrss_kib=%d exit=%d' % (resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, r.returncode))";
    let out = Std::new("python3")
        .args(["-c", PEAK])
        .arg(assert_cmd::cargo::cargo_bin("cudalint"))
        .args(["scan", image, "--gpu", "L4", "--quiet", "--format", "json"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let tail = err.rsplit_once("maxrss_kib=").unwrap_or_else(|| panic!("{err}")).1;
    let (kib, exit) = tail.split_once(" exit=").unwrap();
    assert_eq!(exit, "1", "the sm_90a library cannot run on L4: {err}");
    (serde_json::from_slice(&out.stdout).unwrap(), kib.parse::<u64>().unwrap() << 10)
}

/// Generous beside what a scan of these small images takes (~30 to ~100 MiB in a debug build),
/// far below what the attacks took on 3b91db5 (426 MiB for the generated column, 705 for the
/// amplifying header).
const PEAK_BOUND: u64 = 256 << 20;

#[test]
fn an_rpm_image_names_its_cuda_packages_in_json_sarif_and_cyclonedx() {
    let dir = tempfile::tempdir().unwrap();
    let root = rpm_root(dir.path());
    let img = image(dir.path(), tar_dir(&root));

    let r = json(&img);
    let f = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == "CL001" && f["path"] == HOPPER)
        .unwrap_or_else(|| panic!("no CL001 on {HOPPER}: {:#}", r["findings"]));
    assert_eq!(f["purl"], HOPPER_PURL, "{f:#}");
    assert_eq!(f["package"], "llm-hopper-kernels 2.0-3.el9 (rpm)", "{f:#}");
    let (_, inv, err) = scan(&img, "inventory");
    let inv: Value = serde_json::from_str(&inv).unwrap_or_else(|e| panic!("{e}: {err}"));
    for (path, purl) in [(CUDART, CUDART_PURL), (HOPPER, HOPPER_PURL)] {
        let f = inv["files"].as_array().unwrap().iter().find(|f| f["path"] == path).expect(path);
        assert_eq!(f["package"]["purl"], purl, "{f:#}");
        assert_eq!(f["package"]["manager"], "rpm");
    }
    let pkgs = inv["cuda_packages"].as_array().unwrap();
    assert!(pkgs.iter().any(|p| p["purl"] == CUDART_PURL), "a CUDA RPM ties the image to its CUDA: {pkgs:#?}");
    assert!(
        !r["notes"].to_string().contains("rpm"),
        "a sqlite rpmdb that rpm wrote reads without a note: {:#}",
        r["notes"]
    );

    let (_, sarif, err) = scan(&img, "sarif");
    let sarif: Value = serde_json::from_str(&sarif).unwrap_or_else(|e| panic!("{e}: {err}"));
    let results = sarif["runs"][0]["results"].as_array().unwrap();
    assert!(results.iter().any(|r| r["ruleId"] == "CL001" && r["properties"]["purl"] == HOPPER_PURL), "{results:#?}");

    let (_, cdx, err) = scan(&img, "cyclonedx");
    let cdx: Value = serde_json::from_str(&cdx).unwrap_or_else(|e| panic!("{e}: {err}"));
    // A component per package that installed device code (libcudart carries none).
    let purls: Vec<&str> = cdx["components"].as_array().unwrap().iter().filter_map(|c| c["purl"].as_str()).collect();
    assert_eq!(purls, [HOPPER_PURL]);
}

#[test]
fn a_rootfs_with_an_rpm_database_names_the_rpm_that_installed_a_library() {
    let dir = tempfile::tempdir().unwrap();
    let root = rpm_root(dir.path());
    let inv = inventory(&root);
    let f = file(&inv, "/libcudart.so.12.9.79");
    assert_eq!(f["path"], CUDART);
    assert_eq!(f["package"]["name"], "cuda-cudart-12-9", "{f:#}");
    assert_eq!(f["package"]["version"], "12.9.79-1");
    assert_eq!(f["package"]["purl"], CUDART_PURL);
}

/// A layer that replaces the database with bytes that are not sqlite: a note naming the file, the
/// verdict the binaries decide unchanged, the packages unnamed (never a guess from the older
/// database).
#[test]
fn a_corrupt_rpm_database_is_a_note_and_changes_no_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let root = rpm_root(dir.path());
    let db = std::fs::read(root.join("var/lib/rpm/rpmdb.sqlite")).unwrap();
    let mut torn = db.clone();
    torn.truncate(db.len() / 2);
    for b in &mut torn[..100] {
        *b = b'X';
    }
    let layout = dir.path().join("oci");
    let img = Image::new(vec![
        (tar_dir(&root), Comp::Gzip),
        (tar(&[Ent::File("var/lib/rpm/rpmdb.sqlite", torn)]), Comp::Gzip),
    ]);
    oci_layout(&layout, &[&img]);
    let r = json(&format!("oci:{}", layout.display()));
    let notes = r["notes"].to_string();
    assert!(notes.contains("/var/lib/rpm/rpmdb.sqlite: rpm-sqlite record not read"), "{notes}");
    assert_hopper_judged(&r);
    assert!(!r.to_string().contains("pkg:rpm/"), "no package from a database the last layer replaced: {r:#}");
}

/// Berkeley DB and ndb databases are not read (no maintained crate reads them): the scan says so
/// instead of naming nothing in silence.
#[test]
fn a_berkeley_db_rpm_database_is_named_as_unread() {
    let dir = tempfile::tempdir().unwrap();
    let layout = dir.path().join("oci");
    // The first page of a Berkeley DB hash database: magic 0x00061561 at offset 12.
    let mut bdb = vec![0u8; 4096];
    bdb[12..16].copy_from_slice(&0x0006_1561u32.to_le_bytes());
    let img = Image::new(vec![(
        tar(&[
            Ent::File("var/lib/rpm/Packages", bdb),
            Ent::File("opt/llm/lib/libsm90a.so", crate::util::read_fixture("libsm90a.so")),
        ]),
        Comp::Gzip,
    )]);
    oci_layout(&layout, &[&img]);
    let r = json(&format!("oci:{}", layout.display()));
    let notes = r["notes"].to_string();
    assert!(notes.contains("/var/lib/rpm/Packages: rpm-legacy record: rpm database in Berkeley DB"), "{notes}");
}

/// Writes an `rpmdb.sqlite` as an attacker would, with Python's sqlite3: `view` makes `Packages`
/// a view; `generated` gives it a generated `blob`; `amplify` holds the header naming `name` and
/// one whose few bytes join into far more paths; a number, a `Packages` table of that many copies
/// of one small header; otherwise a
/// `Packages` table with one header naming `name` (owning the sm_90a library) and one header
/// whose index lies about its data's size.
fn hostile_db(path: &Path, name: &str, mode: &str) {
    const SCRIPT: &str = r#"
import sqlite3, struct, sys
path, name, mode = sys.argv[1], sys.argv[2].encode(), sys.argv[3]
def header(entries):
    # entries: (tag, type, count, bytes); int32 data 4-aligned as rpm lays it out
    data, index = b"", b""
    for tag, ty, count, raw in entries:
        if ty == 4:
            data += b"\0" * (-len(data) % 4)
        index += struct.pack(">IIII", tag, ty, len(data), count)
        data += raw
    return struct.pack(">II", len(entries), len(data)) + index + data
good = header([
    (1000, 6, 1, name + b"\0"), (1001, 6, 1, b"1\0"), (1002, 6, 1, b"1\0"),
    (1022, 6, 1, b"x86_64\0"), (1116, 4, 1, struct.pack(">I", 0)),
    (1117, 8, 1, b"libsm90a.so\0"), (1118, 8, 1, b"/opt/llm/lib/\0"),
])
liar = bytearray(good)
liar[4:8] = struct.pack(">I", 1 << 27)
db = sqlite3.connect(path)
if mode == "view":
    db.execute("CREATE TABLE t (hnum INTEGER PRIMARY KEY, blob BLOB)")
    db.execute("CREATE VIEW Packages AS SELECT * FROM t")
elif mode == "generated":
    # Every read of `blob` computes 64 MiB of text: rpm's columns, one of them generated.
    db.execute("CREATE TABLE Packages (hnum INTEGER PRIMARY KEY AUTOINCREMENT, "
               "blob BLOB AS (CAST(replace(hex(zeroblob(1 << 24)), '0', 'ab') AS BLOB)))")
    db.executemany("INSERT INTO Packages (hnum) VALUES (?)", ((i,) for i in range(1, 5)))
elif mode == "amplify":
    # One header of 1 MiB: a directory name of 3,000 bytes and 116,000 base names `a.so` in it,
    # each 9 bytes of the header (name and index) and a 3,005-byte path once joined.
    n = 116_000
    amp = header([
        (1000, 6, 1, b"amplifier\0"), (1001, 6, 1, b"1\0"), (1002, 6, 1, b"1\0"),
        (1022, 6, 1, b"x86_64\0"), (1116, 4, n, struct.pack(">I", 0) * n),
        (1117, 8, n, b"a.so\0" * n), (1118, 8, 1, b"/" + b"d" * 3000 + b"/\0"),
    ])
    db.execute("CREATE TABLE Packages (hnum INTEGER PRIMARY KEY AUTOINCREMENT, blob BLOB NOT NULL)")
    db.execute("INSERT INTO Packages (blob) VALUES (?)", (good,))
    db.execute("INSERT INTO Packages (blob) VALUES (?)", (amp,))
elif mode.isdigit():
    db.execute("CREATE TABLE Packages (hnum INTEGER PRIMARY KEY AUTOINCREMENT, blob BLOB NOT NULL)")
    db.executemany("INSERT INTO Packages (blob) VALUES (?)", ((good,) for _ in range(int(mode))))
else:
    db.execute("CREATE TABLE Packages (hnum INTEGER PRIMARY KEY AUTOINCREMENT, blob BLOB NOT NULL)")
    db.execute("INSERT INTO Packages (blob) VALUES (?)", (good,))
    db.execute("INSERT INTO Packages (blob) VALUES (?)", (bytes(liar),))
db.commit()
db.close()
"#;
    run(Std::new("python3").args(["-c", SCRIPT]).arg(path).arg(name).arg(mode));
}

/// An image of the database at `db`, `os-release`, the sm_90a library and `extra` files.
fn hostile_image(dir: &Path, db: &Path, extra: Vec<Ent>) -> String {
    let layout = dir.join("oci");
    let mut files = vec![
        Ent::File("etc/os-release", b"ID=rhel\nVERSION_ID=9.4\n".to_vec()),
        Ent::File("var/lib/rpm/rpmdb.sqlite", std::fs::read(db).unwrap()),
        Ent::File("opt/llm/lib/libsm90a.so", crate::util::read_fixture("libsm90a.so")),
    ];
    files.extend(extra);
    let img = Image::new(vec![(tar(&files), Comp::Gzip)]);
    oci_layout(&layout, &[&img]);
    format!("oci:{}", layout.display())
}

/// A name with terminal escapes, a slash and URL syntax stays one escaped purl segment, and never
/// reaches the terminal raw; a header that lies about its size is counted in a note, not read.
#[test]
fn a_hostile_rpm_database_is_bounded_and_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("rpmdb.sqlite");
    hostile_db(&db, "evil\u{1b}[2J/../x?arch=y#z", "hostile");
    let img = hostile_image(dir.path(), &db, Vec::new());
    let r = json(&img);
    let f = r["findings"].as_array().unwrap().iter().find(|f| f["path"] == HOPPER).expect("the library is judged");
    let purl = f["purl"].as_str().unwrap_or_else(|| panic!("{f:#}"));
    assert!(purl.starts_with("pkg:rpm/rhel/evil%1B"), "{purl}");
    assert_eq!(purl.matches('/').count(), 2, "the name is one segment: {purl}");
    assert_eq!(purl.matches('?').count(), 1, "{purl}");
    assert!(purl.ends_with("@1-1?arch=x86_64&distro=rhel-9.4"), "{purl}");
    let notes = r["notes"].to_string();
    assert!(notes.contains("1 package header(s) not read, first package 2:"), "{notes}");

    let (code, text, _) = scan(&img, "text");
    assert_eq!(code, Some(1));
    assert!(text.contains("evil"), "the text report names the package: {text}");
    assert!(!text.contains('\u{1b}'), "{text:?}");
    let (_, md, _) = scan(&img, "markdown");
    assert!(md.contains("evil"), "the Markdown report names the package: {md}");
    // No raw escape, and the bracket cannot open a link.
    assert!(!md.contains('\u{1b}') && md.contains(r"\[2J") && !md.contains(r"x1b[2J"), "{md:?}");
}

/// A database of more packages than any real image has (rpm's own sqlite, tiny headers) is read
/// up to the bound and said to be cut, and a write-ahead log is measured, never held in memory:
/// neither can make a scan's memory grow with what the image holds.
#[test]
fn an_rpm_database_past_the_package_bound_is_cut_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("rpmdb.sqlite");
    // One more than `packages::rpm::MAX_PACKAGES`.
    hostile_db(&db, "tiny", "100001");
    let wal = Ent::File("var/lib/rpm/rpmdb.sqlite-wal", vec![7u8; 3 << 20]);
    let r = json(&hostile_image(dir.path(), &db, vec![wal]));
    let notes = r["notes"].to_string();
    assert!(notes.contains("rpm-sqlite record not read: more than 100000 packages: the rest not read"), "{notes}");
    assert!(notes.contains("rpm's write-ahead log holds 3145728 bytes"), "{notes}");
    assert_hopper_judged(&r);
}

/// A `Packages` that is a view (which could make a query cost anything) is refused.
#[test]
fn an_rpm_database_whose_packages_is_a_view_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("rpmdb.sqlite");
    hostile_db(&db, "x", "view");
    let r = json(&hostile_image(dir.path(), &db, Vec::new()));
    let notes = r["notes"].to_string();
    assert!(notes.contains("rpm-sqlite record not read: not an rpm sqlite database (no `Packages` table)"), "{notes}");
    assert!(!r.to_string().contains("pkg:rpm/"), "{r:#}");
}

/// A `Packages` whose `blob` is a generated column makes every read of it compute what the
/// image's author chose (on 3b91db5, 1.7 GiB for one constant expression): it is refused before
/// a row is read, in a note, and the rest of the image is judged as before.
#[test]
fn an_rpm_database_with_a_generated_column_is_refused_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("rpmdb.sqlite");
    hostile_db(&db, "x", "generated");
    let (r, peak) = json_and_peak(&hostile_image(dir.path(), &db, Vec::new()));
    assert!(peak < PEAK_BOUND, "the scan peaked at {} MiB", peak >> 20);
    let notes = r["notes"].to_string();
    assert!(
        notes.contains(
            "rpm-sqlite record not read: not an rpm sqlite database (`Packages` column `blob` is generated; \
             rpm's table has the plain columns `hnum` INTEGER PRIMARY KEY and `blob`)"
        ),
        "{notes}"
    );
    assert_hopper_judged(&r);
    assert!(!r.to_string().contains("pkg:rpm/"), "{r:#}");
}

/// One header of 1 MiB whose 116,000 base names share a 3,000-byte directory joins into 350 MB
/// of paths (1.5 GiB on 3b91db5 once copied into the lookups): the paths a layer keeps are
/// bounded, counted before they are made, and the cut is a note. The package read before it
/// still names its library.
#[test]
fn an_amplifying_rpm_header_is_cut_at_the_layers_path_bound_with_a_note() {
    use cudalint::packages::{LayerPackages, MAX_KEPT, RecordData, record_kind};
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("rpmdb.sqlite");
    hostile_db(&db, "llm-hopper-kernels", "amplify");
    let path = "/var/lib/rpm/rpmdb.sqlite";
    let mut l = LayerPackages::default();
    let note = l.read(record_kind(path).unwrap(), path, RecordData::File(&db)).unwrap_err();
    assert!(note.starts_with("package 2: file paths past the layer's bound of 32 MiB"), "{note}");
    let kept: usize = l.owned.iter().map(|(p, _)| p.len()).sum();
    assert!(kept <= MAX_KEPT && l.owned.len() < MAX_KEPT / 3000, "{} paths, {kept} bytes", l.owned.len());
    assert_eq!(l.packages.len(), 2, "both packages are named: {:?}", l.packages);

    let (r, peak) = json_and_peak(&hostile_image(dir.path(), &db, Vec::new()));
    assert!(peak < PEAK_BOUND, "the scan peaked at {} MiB", peak >> 20);
    let notes = r["notes"].to_string();
    assert!(notes.contains("rpm-sqlite record not read: package 2: file paths past the layer's bound"), "{notes}");
    let f = r["findings"].as_array().unwrap().iter().find(|f| f["path"] == HOPPER).expect("the library is judged");
    assert_eq!(f["rule"], "CL001");
    assert_eq!(f["purl"], "pkg:rpm/rhel/llm-hopper-kernels@1-1?arch=x86_64&distro=rhel-9.4", "{f:#}");
}

/// The database `rpm` wrote, with bytes changed anywhere (pages, the Packages b-tree, header
/// blobs inside it) and read as a scan reads it: a result or an error, never a panic, and never a
/// package with a name that is not in one of the database's header blobs. (The blobs, not the
/// file: a blob longer than a page is split over overflow pages, so a name a changed offset points
/// at may straddle two of them.)
#[test]
fn mutated_rpm_databases_are_read_or_refused_never_a_panic() {
    use cudalint::packages::{LayerPackages, RecordData, record_kind};
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestRunner};
    let dir = tempfile::tempdir().unwrap();
    let db = std::fs::read(rpm_root(dir.path()).join("var/lib/rpm/rpmdb.sqlite")).unwrap();
    let path = "/var/lib/rpm/rpmdb.sqlite";
    let kind = record_kind(path).expect("an rpm record");
    let copy = dir.path().join("mutated.sqlite");
    let mut runner = TestRunner::new(Config { cases: 64, ..Config::default() });
    let edits = proptest::collection::vec((any::<usize>(), any::<u8>()), 1..64);
    runner
        .run(&edits, |edits| {
            let mut b = db.clone();
            for (at, v) in edits {
                let i = at % b.len();
                b[i] = v;
            }
            std::fs::write(&copy, &b).unwrap();
            let mut l = LayerPackages::default();
            let _ = l.read(kind, path, RecordData::File(&copy));
            if !l.packages.is_empty() {
                let blobs = header_blobs(&copy);
                for p in &l.packages {
                    prop_assert!(
                        !p.name.is_empty()
                            && blobs.iter().any(|b| b.windows(p.name.len()).any(|w| w == p.name.as_bytes())),
                        "{:?} is in no header blob",
                        p.name
                    );
                }
            }
            Ok(())
        })
        .unwrap();
}

/// The header blobs SQLite reads from `db`, in table order, up to the first row it cannot read.
fn header_blobs(db: &Path) -> Vec<Vec<u8>> {
    use rusqlite::OpenFlags;
    // Opened as a scan opens it (immutable: no log is looked for), so both see the same rows.
    let uri = format!("file:{}?immutable=1", db.display());
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_URI;
    let Ok(c) = rusqlite::Connection::open_with_flags(uri, flags) else { return Vec::new() };
    let Ok(mut stmt) = c.prepare("SELECT blob FROM Packages ORDER BY hnum") else { return Vec::new() };
    let Ok(mut rows) = stmt.query([]) else { return Vec::new() };
    let mut out = Vec::new();
    while let Ok(Some(row)) = rows.next() {
        if let Ok(Some(b)) = row.get::<_, Option<Vec<u8>>>(0) {
            out.push(b);
        }
    }
    out
}
