//! Tar layers as GNU tar writes them (sparse files in every format, names that are not UTF-8)
//! and as a hostile producer could: each is read the way `tar -x` would read it, or the scan
//! stops with exit 2 naming the file and the layer.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use cudalint::image::{ImageReport, ScanOptions, scan};

use crate::images::{Comp, Ent, Image, oci_layout, sha, tar};
use crate::scan::which;
use crate::util::read_fixture;

const LIBS: [&str; 2] = ["libsm90a.so", "libsm100f.so"];

/// An OCI layout of one image with these layers; returns its directory and scan spec.
fn layout(layers: Vec<(Vec<u8>, Comp)>) -> (tempfile::TempDir, String, Image) {
    let d = tempfile::tempdir().unwrap();
    let img = Image::new(layers);
    oci_layout(d.path(), &[&img]);
    let spec = format!("oci:{}", d.path().display());
    (d, spec, img)
}

fn report(layers: Vec<(Vec<u8>, Comp)>) -> ImageReport {
    let (_d, spec, _) = layout(layers);
    scan(&spec, &ScanOptions { progress: false, ..ScanOptions::default() }).unwrap_or_else(|e| panic!("{spec}: {e}"))
}

/// The inventory without layer digests (they differ with the compression).
fn files_json(r: &ImageReport) -> serde_json::Value {
    let mut v = serde_json::to_value(&r.files).unwrap();
    for f in v.as_array_mut().unwrap() {
        f.as_object_mut().unwrap().remove("layer");
    }
    v
}

fn paths(r: &ImageReport) -> Vec<String> {
    r.files.iter().map(|f| f.file.path.clone()).collect()
}

/// `cudalint scan` of a one-layer image: (exit code, stderr); also returns the blob's digest.
fn cli_one_layer(layer: Vec<u8>, c: Comp) -> (Option<i32>, String, String) {
    let (_d, spec, img) = layout(vec![(layer, c)]);
    let digest = sha(&img.build().blobs[0]);
    let out =
        Command::cargo_bin("cudalint").unwrap().args(["scan", &spec, "--quiet", "--gpu", "H100"]).output().unwrap();
    if out.status.code() == Some(2) {
        assert!(out.stdout.is_empty(), "no partial report");
    }
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned(), digest)
}

/// A tree under `root/opt/lib` holding the fixture libraries, each followed by a hole (GNU tar
/// stores a file sparse only if the file system says it has holes; it then finds the zero
/// blocks inside the library too, with `--hole-detection=raw`).
fn tree(d: &Path) -> PathBuf {
    let root = d.join("root");
    std::fs::create_dir_all(root.join("opt/lib")).unwrap();
    for l in LIBS {
        let f = std::fs::File::create(root.join("opt/lib").join(l)).unwrap();
        let bytes = read_fixture(l);
        std::io::Write::write_all(&mut &f, &bytes).unwrap();
        f.set_len(bytes.len() as u64 + (1 << 20)).unwrap();
    }
    root
}

/// GNU tar of `root/opt` with these options.
fn gnu_tar(root: &Path, args: &[&str]) -> Vec<u8> {
    let out = root.with_extension("tar");
    let st = std::process::Command::new(which("tar"))
        .args(args)
        .arg("-C")
        .arg(root)
        .arg("-cf")
        .arg(&out)
        .arg("opt")
        .status()
        .unwrap();
    assert!(st.success(), "tar {args:?}");
    std::fs::read(out).unwrap()
}

/// Whether GNU tar really stored a file sparse: an old GNU `S` header, or PAX sparse records.
fn stored_sparse(t: &[u8]) -> bool {
    let sparse_header = t.chunks_exact(512).any(|b| b[156] == b'S' && &b[257..263] == b"ustar ");
    sparse_header || t.windows(11).any(|w| w == b"GNU.sparse.")
}

#[test]
fn gnu_sparse_files_are_read_in_full_in_every_format() {
    let d = tempfile::tempdir().unwrap();
    let root = tree(d.path());
    let plain = gnu_tar(&root, &["--format=gnu"]);
    assert!(!stored_sparse(&plain));
    let want = report(vec![(plain, Comp::None)]);
    assert_eq!(paths(&want), ["/opt/lib/libsm100f.so", "/opt/lib/libsm90a.so"]);
    assert!(want.files.iter().all(|f| f.file.has_device_code()));
    let want = files_json(&want);
    // The fixtures' zero-filled 512-byte blocks become holes ("raw" detection needs no file
    // system support for holes).
    for fmt in [
        &["--format=gnu"][..],
        &["--format=posix", "--sparse-version=0.0"],
        &["--format=posix", "--sparse-version=0.1"],
        &["--format=posix", "--sparse-version=1.0"],
    ] {
        let args = [fmt, &["--sparse", "--hole-detection=raw"]].concat();
        let t = gnu_tar(&root, &args);
        assert!(stored_sparse(&t), "{args:?}: GNU tar did not store the files sparse");
        for c in [Comp::None, Comp::Gzip, Comp::Zstd] {
            assert_eq!(files_json(&report(vec![(t.clone(), c)])), want, "{args:?} {c:?}");
        }
    }
}

/// A PAX header of these records, then a regular file entry named `ustar` with `data`.
fn pax_entry(records: &[(&str, &[u8])], ustar: &str, data: &[u8]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    b.append_pax_extensions(records.iter().copied()).unwrap();
    let mut h = tar::Header::new_ustar();
    h.set_size(data.len() as u64);
    h.set_mode(0o644);
    h.set_entry_type(tar::EntryType::Regular);
    b.append_data(&mut h, ustar, data).unwrap();
    b.into_inner().unwrap()
}

#[test]
fn unreadable_sparse_entries_stop_the_scan_naming_file_and_layer() {
    let lib = read_fixture("libsm90a.so");
    let n = lib.len().to_string();
    let half = (lib.len() / 2).to_string();
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (
            pax_entry(
                &[("GNU.sparse.major", b"2"), ("GNU.sparse.minor", b"0"), ("GNU.sparse.realsize", n.as_bytes())],
                "opt/v2/libsm90a.so",
                &lib,
            ),
            "GNU sparse format 2.0 is not supported",
        ),
        (
            pax_entry(
                &[("GNU.sparse.size", n.as_bytes()), ("GNU.sparse.map", format!("0,{n},16,{n}").as_bytes())],
                "opt/overlap/libsm90a.so",
                &[lib.clone(), lib.clone()].concat(),
            ),
            "overlap",
        ),
        (
            pax_entry(
                &[("GNU.sparse.size", n.as_bytes()), ("GNU.sparse.map", format!("0,{half}").as_bytes())],
                "opt/short/libsm90a.so",
                &lib,
            ),
            "sparse map covers",
        ),
        (
            pax_entry(
                &[("GNU.sparse.size", n.as_bytes()), ("GNU.sparse.frobnicate", b"1")],
                "opt/unknown/libsm90a.so",
                &lib,
            ),
            "unrecognised GNU sparse records",
        ),
    ];
    for (layer, why) in cases {
        for c in [Comp::None, Comp::Gzip] {
            let (code, err, digest) = cli_one_layer(layer.clone(), c);
            assert_eq!(code, Some(2), "{why}: {err}");
            assert!(err.contains(why) && err.contains("/libsm90a.so") && err.contains(&digest), "{why}: {err}");
        }
    }
}

#[test]
fn sparse_data_cut_off_stops_the_scan() {
    let d = tempfile::tempdir().unwrap();
    let root = tree(d.path());
    let t = gnu_tar(&root, &["--format=gnu", "--sparse", "--hole-detection=raw"]);
    assert!(stored_sparse(&t));
    // Cut inside the first library's stored data (its header is in the first blocks), at a
    // block boundary so that the cut is in the data, not in a header.
    let cut = t[..t.len() / 4 / 512 * 512].to_vec();
    for c in [Comp::None, Comp::Gzip] {
        let (code, err, digest) = cli_one_layer(cut.clone(), c);
        assert_eq!(code, Some(2), "{c:?}: {err}");
        assert!(err.contains("opt/lib/") && err.contains(&digest), "{c:?}: {err}");
    }
}

#[test]
fn names_that_differ_only_in_invalid_utf8_stay_distinct() {
    let lib = || read_fixture("libsm90a.so");
    let lower = tar(&[
        Ent::RawFile(b"opt/lib\xff.so".to_vec(), lib()),
        Ent::RawFile(b"opt/lib\xfe.so".to_vec(), lib()),
        Ent::RawFile(b"opt/lib\xef\xbf\xbd.so".to_vec(), lib()),
        Ent::RawFile(b"opt/d\xff/libsm90a.so".to_vec(), lib()),
        Ent::RawFile(b"opt/d\xfe/libsm90a.so".to_vec(), lib()),
    ]);
    let r = report(vec![(lower.clone(), Comp::Gzip)]);
    assert_eq!(
        paths(&r),
        [
            "/opt/d\\xfe/libsm90a.so",
            "/opt/d\\xff/libsm90a.so",
            "/opt/lib\\xfe.so",
            "/opt/lib\\xff.so",
            "/opt/lib\u{fffd}.so"
        ]
    );
    // Whiteouts of one of each pair hide only that one.
    let upper =
        tar(&[Ent::RawFile(b"opt/.wh.lib\xfe.so".to_vec(), vec![]), Ent::RawFile(b"opt/.wh.d\xff".to_vec(), vec![])]);
    let r = report(vec![(lower, Comp::Gzip), (upper, Comp::None)]);
    assert_eq!(paths(&r), ["/opt/d\\xfe/libsm90a.so", "/opt/lib\\xff.so", "/opt/lib\u{fffd}.so"]);
}

#[test]
fn gnu_tar_posix_names_that_are_not_utf8() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("root");
    let dir = root.join("opt");
    std::fs::create_dir_all(&dir).unwrap();
    for name in [&b"lib\xff.so"[..], b"lib\xfe.so"] {
        std::fs::write(dir.join(std::ffi::OsStr::from_bytes(name)), read_fixture("libsm90a.so")).unwrap();
    }
    let t = gnu_tar(&root, &["--format=posix"]);
    let r = report(vec![(t, Comp::Zstd)]);
    assert_eq!(paths(&r), ["/opt/lib\\xfe.so", "/opt/lib\\xff.so"]);
    assert!(r.files.iter().all(|f| f.file.has_device_code()));
}

#[test]
fn a_pax_path_that_is_not_utf8_is_used_not_the_ustar_name() {
    let lib = read_fixture("libsm90a.so");
    let layer = pax_entry(&[("path", b"opt/pax\xff/libsm90a.so")], "opt/ustar/libsm90a.so", &lib);
    let r = report(vec![(layer, Comp::None)]);
    assert_eq!(paths(&r), ["/opt/pax\\xff/libsm90a.so"]);
}

#[test]
fn many_whiteouts_hide_exactly_their_files() {
    // A lower layer of many files (a library every 100th), an upper layer whiting out most of
    // them and making one directory opaque: exactly the rest remains.
    let lib = read_fixture("libsm90a.so");
    let n = 2000;
    let mut lower = tar::Builder::new(Vec::new());
    let mut upper = tar::Builder::new(Vec::new());
    let add = |b: &mut tar::Builder<Vec<u8>>, p: &str, data: &[u8]| {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_entry_type(tar::EntryType::Regular);
        b.append_data(&mut h, p, data).unwrap();
    };
    for i in 0..n {
        let lib_here = i % 100 == 0;
        add(&mut lower, &format!("d{}/f{i}.so", i % 7), if lib_here { &lib } else { b"x" });
        if i % 2 == 1 || i % 200 == 100 {
            add(&mut upper, &format!("d{}/.wh.f{i}.so", i % 7), b"");
        }
    }
    add(&mut upper, "d3/.wh..wh..opq", b"");
    let r = report(vec![(lower.into_inner().unwrap(), Comp::Gzip), (upper.into_inner().unwrap(), Comp::Gzip)]);
    let mut want: Vec<String> =
        (0..n).filter(|i| i % 200 == 0 && i % 7 != 3).map(|i| format!("/d{}/f{i}.so", i % 7)).collect();
    want.sort();
    assert_eq!(paths(&r), want);
}

/// Inputs the `tar` fuzz target once crashed on (a file's stream ending before its recorded
/// size underflowed the container scan's look-back): every one must end in a result or an
/// error, read seekable and streamed, never a panic.
#[test]
fn fuzz_crashes_stay_fixed() {
    use cudalint::input::{SliceInput, StreamInput};
    use cudalint::inspect::InspectOptions;
    use cudalint::layer::analyze::analyze;
    let dir = crate::util::root().join("fuzz/regressions/tar");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let data = std::fs::read(e.unwrap().path()).unwrap();
        for lean in [true, false] {
            let opts = InspectOptions { lean, ..InspectOptions::default() };
            let _ = analyze(&mut StreamInput::unbounded(&data[..]), &opts);
            let _ = analyze(&mut SliceInput::new(&data), &opts);
        }
        n += 1;
    }
    assert!(n >= 5, "the regression inputs in {}", dir.display());
}
