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

// Headers on which readers could disagree (issue 22): each input is built byte by byte, and
// cudalint's reading is compared with a reference reader's (Python's `tarfile`, which reads
// these cases as Go's archive/tar does) or, where no reference reads as Go does, with the rule
// from Go's source (docs/reading.md, "Layer tars"). Either cudalint lists what the reference
// lists, or it refuses the layer with exit 2 naming the entry (or offset) and the layer.

const USTAR: &[u8; 8] = b"ustar\x0000";
const GNU: &[u8; 8] = b"ustar  \x00";

fn set_sum(b: &mut [u8; 512]) {
    b[148..156].fill(b' ');
    let sum: u32 = b.iter().map(|&c| u32::from(c)).sum();
    b[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
}

/// A header block: `name` in the name field, the typeflag, `size` in octal, magic and version.
fn hdr(name: &[u8], typeflag: u8, size: u64, magic: &[u8; 8]) -> [u8; 512] {
    let mut b = [0u8; 512];
    b[..name.len()].copy_from_slice(name);
    b[100..108].copy_from_slice(b"0000644\0");
    b[108..116].copy_from_slice(b"0000000\0");
    b[116..124].copy_from_slice(b"0000000\0");
    b[124..136].copy_from_slice(format!("{size:011o}\0").as_bytes());
    b[136..148].copy_from_slice(b"00000000000\0");
    b[156] = typeflag;
    b[257..265].copy_from_slice(magic);
    set_sum(&mut b);
    b
}

fn with_link(mut b: [u8; 512], link: &[u8]) -> [u8; 512] {
    b[157..157 + link.len()].copy_from_slice(link);
    set_sum(&mut b);
    b
}

/// `d` padded to whole blocks.
fn blocks(d: &[u8]) -> Vec<u8> {
    let mut v = d.to_vec();
    v.resize(d.len().div_ceil(512) * 512, 0);
    v
}

/// A whole entry: header and padded data.
fn entry(h: [u8; 512], d: &[u8]) -> Vec<u8> {
    [h.to_vec(), blocks(d)].concat()
}

/// A PAX record block (`x` or `g`) of these records.
fn pax(typeflag: u8, records: &[(&str, &[u8])]) -> Vec<u8> {
    let mut d = Vec::new();
    for (k, v) in records {
        let body = k.len() + v.len() + 3;
        let mut n = body + body.to_string().len();
        if (n).to_string().len() != body.to_string().len() {
            n += 1;
        }
        d.extend_from_slice(format!("{n} {k}=").as_bytes());
        d.extend_from_slice(v);
        d.push(b'\n');
    }
    entry(hdr(b"PaxHeaders/x", typeflag, d.len() as u64, USTAR), &d)
}

/// A GNU `L` (or `K`) entry holding `name` as is.
fn gnu_long(typeflag: u8, name: &[u8]) -> Vec<u8> {
    entry(hdr(b"././@LongLink", typeflag, name.len() as u64, GNU), name)
}

fn end() -> Vec<u8> {
    vec![0; 1024]
}

/// Python's `tarfile` reading of `t`: the normalized paths of its regular members holding
/// exactly `lib`'s bytes.
fn python_libs(t: &[u8], lib: &[u8]) -> Vec<String> {
    let script = r#"
import hashlib, io, posixpath, sys, tarfile
want, out = sys.argv[1], set()
with tarfile.open(fileobj=io.BytesIO(sys.stdin.buffer.read()), mode="r:") as tf:
    for m in tf:
        if m.isreg() and hashlib.sha256(tf.extractfile(m).read()).hexdigest() == want:
            out.add(posixpath.normpath("/" + m.name.lstrip("/")))
sys.stdout.write("".join(p + "\0" for p in sorted(out)))
"#;
    let mut child = std::process::Command::new(which("python3"))
        .args(["-c", script, crate::images::hex_of(&sha(lib))])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), t).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "python3 tarfile failed");
    String::from_utf8(out.stdout).unwrap().split_terminator('\0').map(str::to_string).collect()
}

/// cudalint against a reference: exit 2 naming `entry` and the layer (returns true), or the
/// reference's library paths exactly (returns false).
fn same_or_refused(layer: Vec<u8>, want: &[String], entry: &str) -> bool {
    let (code, err, digest) = cli_one_layer(layer.clone(), Comp::None);
    if code == Some(2) {
        assert!(err.contains(entry) && err.contains(&digest), "a refusal names {entry:?} and the layer: {err}");
        return true;
    }
    assert_eq!(paths(&report(vec![(layer, Comp::None)])), want, "{err}");
    false
}

fn lib() -> Vec<u8> {
    read_fixture("libsm90a.so")
}

#[test]
fn header_only_entries_have_no_data_whatever_their_size_says() {
    // archive/tar reader.go handleRegularFile: isHeaderOnlyType entries skip no data, so a
    // size (in the header or PAX) covering the next entry hides nothing from the runtime.
    let lib = lib();
    let file = entry(hdr(b"opt/hidden/libsm90a.so", b'0', lib.len() as u64, USTAR), &lib);
    let covers = file.len() as u64;
    for t in [b'1', b'2', b'3', b'4', b'5', b'6'] {
        let cover = with_link(hdr(b"opt/x", t, covers, USTAR), b"opt/y");
        let by_pax = [
            pax(b'x', &[("size", covers.to_string().as_bytes())]),
            with_link(hdr(b"opt/x", t, 0, USTAR), b"opt/y").to_vec(),
        ]
        .concat();
        for head in [cover.to_vec(), by_pax] {
            let layer = [head, file.clone(), end()].concat();
            let want = python_libs(&layer, &lib);
            assert_eq!(want, ["/opt/hidden/libsm90a.so"], "type {}", t as char);
            assert!(!same_or_refused(layer, &want, "opt/x"), "type {} is read, not refused", t as char);
        }
    }
}

#[test]
fn regular_files_named_with_a_trailing_slash() {
    // Go (Reader.next): TypeReg '0' stays a file whatever its name (moby and containerd Clean
    // it); only TypeRegA '\0' with a trailing slash is a directory, and then has no data.
    let lib = lib();
    let reg = [entry(hdr(b"opt/hidden/libsm90a.so/", b'0', lib.len() as u64, USTAR), &lib), end()].concat();
    let want = python_libs(&reg, &lib);
    assert_eq!(want, ["/opt/hidden/libsm90a.so"]);
    assert!(!same_or_refused(reg, &want, "libsm90a.so"));

    let file = entry(hdr(b"opt/next/libsm90a.so", 0, lib.len() as u64, USTAR), &lib);
    let rega = [hdr(b"opt/d/", 0, file.len() as u64, USTAR).to_vec(), file, end()].concat();
    let want = python_libs(&rega, &lib);
    assert_eq!(want, ["/opt/next/libsm90a.so"]);
    assert!(!same_or_refused(rega, &want, "opt/d"));
}

#[test]
fn gnu_long_names_are_c_strings() {
    // Go (Reader.next, parseString) and Python (nts) read a long name up to its first NUL.
    let lib = lib();
    let layer = [
        gnu_long(b'L', b"opt/long/libsm90a.so\0opt/after-nul/libsm90a.so"),
        entry(hdr(b"opt/ustar/libsm90a.so", b'0', lib.len() as u64, GNU), &lib),
        end(),
    ]
    .concat();
    let want = python_libs(&layer, &lib);
    assert_eq!(want, ["/opt/long/libsm90a.so"]);
    assert!(!same_or_refused(layer, &want, "libsm90a.so"));
    // A long name that is empty up to its NUL is no name: Go keeps the header's
    // (`if gnuLongName != ""`); Python would use the empty name, so this is the Go rule.
    let layer = [
        gnu_long(b'L', b"\0opt/after-nul/libsm90a.so"),
        entry(hdr(b"opt/ustar/libsm90a.so", b'0', lib.len() as u64, GNU), &lib),
        end(),
    ]
    .concat();
    assert!(!same_or_refused(layer, &["/opt/ustar/libsm90a.so".to_string()], "libsm90a.so"));
}

#[test]
fn pax_records_are_read_by_their_length_and_disagreeing_names_are_refused() {
    let lib = lib();
    let file = |name: &[u8]| entry(hdr(name, b'0', lib.len() as u64, USTAR), &lib);
    // A value holding a newline: the record's length says where it ends (Go parsePAXRecord,
    // Python alike); the `tar` crate splits records at newlines.
    let layer = [pax(b'x', &[("path", b"opt/nl\n/libsm90a.so")]), file(b"opt/ustar/libsm90a.so"), end()].concat();
    let want = python_libs(&layer, &lib);
    assert_eq!(want, ["/opt/nl\n/libsm90a.so"]);
    assert!(!same_or_refused(layer, &want, "libsm90a.so"));
    // A GNU long name and a PAX path that differ: Go takes the long name (applied after
    // mergePAX), Python the one read last: refused.
    for order in [true, false] {
        let (x, l) = (pax(b'x', &[("path", b"opt/pax/libsm90a.so")]), gnu_long(b'L', b"opt/gnu/libsm90a.so"));
        let head = if order { [x, l].concat() } else { [l, x].concat() };
        let layer = [head, file(b"opt/ustar/libsm90a.so"), end()].concat();
        assert!(same_or_refused(layer, &[], "disagree"));
    }
    // The same name both ways is read.
    let layer = [
        pax(b'x', &[("path", b"opt/both/libsm90a.so")]),
        gnu_long(b'L', b"opt/both/libsm90a.so"),
        file(b"opt/ustar/libsm90a.so"),
        end(),
    ]
    .concat();
    let want = python_libs(&layer, &lib);
    assert_eq!(want, ["/opt/both/libsm90a.so"]);
    assert!(!same_or_refused(layer, &want, "libsm90a.so"));
    // A malformed record fails the header in Go (ErrHeader): refused, not read around.
    let mut bad = pax(b'x', &[("path", b"opt/pax/libsm90a.so")]);
    bad[512] = b'9';
    let layer = [bad, file(b"opt/ustar/libsm90a.so"), end()].concat();
    assert!(same_or_refused(layer, &[], "PAX header"));
}

#[test]
fn global_headers_between_an_extended_header_and_its_entry_are_refused() {
    let lib = lib();
    let file = entry(hdr(b"opt/ustar/libsm90a.so", b'0', lib.len() as u64, USTAR), &lib);
    // A leading global header (git archive writes one) is read past, as every reader does.
    let layer = [pax(b'g', &[("comment", b"0123abcd")]), file.clone(), end()].concat();
    let want = python_libs(&layer, &lib);
    assert_eq!(want, ["/opt/ustar/libsm90a.so"]);
    assert!(!same_or_refused(layer, &want, "libsm90a.so"));
    // Between a long name and its file: Go's Next returns the global header and drops the long
    // name; Python and GNU tar carry it over to the file. Refused.
    let layer = [gnu_long(b'L', b"opt/gnu/libsm90a.so"), pax(b'g', &[("comment", b"x")]), file.clone(), end()].concat();
    assert_eq!(python_libs(&layer, &lib), ["/opt/gnu/libsm90a.so"], "Python carries the name over");
    assert!(same_or_refused(layer, &[], "global header"));
    let layer = [pax(b'x', &[("path", b"opt/pax/libsm90a.so")]), pax(b'g', &[("comment", b"x")]), file, end()].concat();
    assert!(same_or_refused(layer, &[], "global header"));
}

#[test]
fn prefixes_are_read_per_format_as_go_does() {
    let lib = lib();
    let n = lib.len() as u64;
    let with_prefix = |mut b: [u8; 512], prefix: &[u8]| {
        b[345..345 + prefix.len()].copy_from_slice(prefix);
        set_sum(&mut b);
        b
    };
    // ustar magic with a version other than "00": Go (getFormat) does not look at the version
    // and joins the prefix; so does Python; the `tar` crate read the name alone.
    for version in [b"\0\0", b"  ", b"01"] {
        let mut magic = *USTAR;
        magic[6..].copy_from_slice(version);
        let layer = [entry(with_prefix(hdr(b"libsm90a.so", b'0', n, &magic), b"opt/pre"), &lib), end()].concat();
        let want = python_libs(&layer, &lib);
        assert_eq!(want, ["/opt/pre/libsm90a.so"]);
        assert!(!same_or_refused(layer, &want, "libsm90a.so"));
    }
    // A GNU header whose atime field does not parse (the pre-Go 1.8 writer's prefix): Go
    // falls back to the ustar prefix (readHeader, golang.org/issue/12594); so does Python.
    let layer = [entry(with_prefix(hdr(b"libsm90a.so", b'0', n, GNU), b"opt/gnupre"), &lib), end()].concat();
    let want = python_libs(&layer, &lib);
    assert_eq!(want, ["/opt/gnupre/libsm90a.so"]);
    assert!(!same_or_refused(layer, &want, "libsm90a.so"));
    // star (the `tar\0` trailer): Go reads a 131-byte prefix, then atime and ctime; Python
    // reads 155 bytes. The Go rule: a prefix filling all 131 bytes ends there.
    let prefix = format!("opt/{}", "s".repeat(127));
    let mut b = with_prefix(hdr(b"libsm90a.so", b'0', n, USTAR), prefix.as_bytes());
    b[476..488].copy_from_slice(b"zzzzzzzzzzz\0");
    b[508..512].copy_from_slice(b"tar\0");
    set_sum(&mut b);
    let layer = [entry(b, &lib), end()].concat();
    assert_ne!(python_libs(&layer, &lib), [format!("/{prefix}/libsm90a.so")], "Python reads past 131 bytes");
    assert!(!same_or_refused(layer, &[format!("/{prefix}/libsm90a.so")], "libsm90a.so"));
}

#[test]
fn a_lone_zero_block_before_more_entries_is_refused() {
    let lib = lib();
    let file = |name: &[u8]| entry(hdr(name, b'0', lib.len() as u64, USTAR), &lib);
    let a = file(b"opt/a/libsm90a.so");
    // Go (readHeader): a zero block then a header is ErrHeader (the runtime refuses the layer);
    // Python stops at the zero block. The Go rule: refused, naming the offset.
    let layer = [a.clone(), vec![0; 512], file(b"opt/b/libsm90a.so"), end()].concat();
    assert_eq!(python_libs(&layer, &lib), ["/opt/a/libsm90a.so"]);
    let at = format!("{:#x}", a.len() + 512);
    assert!(same_or_refused(layer, &[], &at));
    // One zero block then the end of the input, or two then anything: the end, as in Go.
    for layer in [[a.clone(), vec![0; 512]].concat(), [a.clone(), end(), vec![0x55; 512]].concat()] {
        let want = python_libs(&layer, &lib);
        assert_eq!(want, ["/opt/a/libsm90a.so"]);
        assert!(!same_or_refused(layer, &want, "libsm90a.so"));
    }
}

#[test]
fn hard_links_are_resolved_as_containerd_links_them() {
    // containerd (archive/tar.go hardlinkRootPath) resolves symbolic links in the target's
    // directory and links the file the layers below left; the link keeps the file's bytes
    // when a later layer whites the target out. The rule, three layers at a time.
    let lib = lib();
    let gnu = |name: &[u8], t: u8, link: &[u8]| with_link(hdr(name, t, 0, GNU), link).to_vec();
    let whiteout = [entry(hdr(b"real/.wh.libsm90a.so", b'0', 0, GNU), b""), end()].concat();
    // Through a symbolic link to a directory, in the same layer.
    let layer = [
        entry(hdr(b"real/libsm90a.so", b'0', lib.len() as u64, GNU), &lib),
        gnu(b"d", b'2', b"real"),
        gnu(b"opt/x.so", b'1', b"d/libsm90a.so"),
        end(),
    ]
    .concat();
    let r = report(vec![(layer, Comp::None), (whiteout.clone(), Comp::None)]);
    assert_eq!(paths(&r), ["/opt/x.so"]);
    // To a lower layer's file, which a later layer whites out.
    let lower = [entry(hdr(b"real/libsm90a.so", b'0', lib.len() as u64, GNU), &lib), end()].concat();
    let link = [gnu(b"opt/keep.so", b'1', b"real/libsm90a.so"), end()].concat();
    let r = report(vec![(lower.clone(), Comp::None), (link, Comp::None), (whiteout.clone(), Comp::None)]);
    assert_eq!(paths(&r), ["/opt/keep.so"]);
    // Through a lower layer's symbolic link to a lower layer's file.
    let lower = [lower[..lower.len() - 1024].to_vec(), gnu(b"d", b'2', b"/real"), end()].concat();
    let link = [gnu(b"opt/via.so", b'1', b"d/libsm90a.so"), end()].concat();
    let r = report(vec![(lower, Comp::None), (link, Comp::None), (whiteout, Comp::None)]);
    assert_eq!(paths(&r), ["/opt/via.so"]);
    // A GNU long link and a PAX linkpath that differ: Go takes the long link; refused.
    let layer = [
        entry(hdr(b"real/libsm90a.so", b'0', lib.len() as u64, GNU), &lib),
        pax(b'x', &[("linkpath", b"real/other.so")]),
        gnu_long(b'K', b"real/libsm90a.so"),
        gnu(b"opt/x.so", b'1', b"ignored"),
        end(),
    ]
    .concat();
    assert!(same_or_refused(layer, &[], "disagree"));
}
