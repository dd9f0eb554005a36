//! Issue 22, layer compression: every compression a runtime reads a layer in (containerd:
//! gzip, zstd with skippable frames; `docker load`: bzip2, gzip, xz, zstd) is read the same way,
//! and what cudalint lists is what a reference reader (Python's `tarfile` over Python's
//! `lzma`/`bz2`, or libzstd, decompressing) finds in the layer. docs/reading.md.

use std::io::Write;
use std::path::Path;
use std::process::Command as Std;

use cudalint::image::{ImageReport, ScanOptions, Verify, scan};
use cudalint::layer::decode::Compression;
use serde_json::Value;

use crate::images::{Ent, hex_of, sha, tar};
use crate::util::read_fixture;

fn opts(verify: Verify) -> ScanOptions {
    ScanOptions { progress: false, verify, ..ScanOptions::default() }
}

fn write_blob(dir: &Path, b: &[u8]) {
    let p = dir.join("blobs/sha256").join(hex_of(&sha(b)));
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, b).unwrap();
}

fn config(diff_id: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "architecture": "amd64", "os": "linux", "config": {"Env": ["CUDA_VERSION=12.9.1"]},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
    }))
    .unwrap()
}

/// An OCI layout whose one layer is `blob` (any bytes), its diff_id that of `tar` (what the
/// runtime unpacks). The media type says gzip whatever the blob is: runtimes sniff, as we do.
fn oci_with_blob(dir: &Path, tar: &[u8], blob: &[u8]) -> String {
    let config = config(&sha(tar));
    write_blob(dir, &config);
    write_blob(dir, blob);
    let manifest = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": sha(&config), "size": config.len()},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": sha(blob), "size": blob.len()}],
    }))
    .unwrap();
    write_blob(dir, &manifest);
    let index = serde_json::json!({"schemaVersion": 2, "manifests": [{
        "mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": sha(&manifest), "size": manifest.len(),
        "annotations": {"org.opencontainers.image.ref.name": "latest"}}]});
    std::fs::write(dir.join("index.json"), serde_json::to_vec(&index).unwrap()).unwrap();
    std::fs::write(dir.join("oci-layout"), br#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();
    format!("oci:{}", dir.display())
}

/// `docker save` (legacy) whose `layer.tar` is `blob`: `docker load` sniffs and decompresses
/// it (moby DecompressStream); no blob digest, so the diff_id is checked over the inflated tar.
fn docker_archive_with_blob(path: &Path, tar: &[u8], blob: &[u8]) -> String {
    let config = config(&sha(tar));
    let cfg_name = format!("{}.json", hex_of(&sha(&config)));
    let mut t = tar::Builder::new(Vec::new());
    let mut add = |name: &str, data: &[u8]| {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_mtime(0);
        t.append_data(&mut h, name, data).unwrap();
    };
    let layer = format!("{:064x}/layer.tar", 1);
    add(&layer, blob);
    add(&cfg_name, &config);
    let manifest = serde_json::json!([{"Config": cfg_name, "RepoTags": ["demo:1"], "Layers": [layer]}]);
    add("manifest.json", &serde_json::to_vec(&manifest).unwrap());
    std::fs::write(path, t.into_inner().unwrap()).unwrap();
    path.display().to_string()
}

/// The layer's contents: two CUDA libraries (ELF), text, a directory, a symlink.
fn layer(lib_a: &'static str, lib_b: &'static str) -> Vec<u8> {
    tar(&[
        Ent::Dir("usr/lib/"),
        Ent::File(lib_a, read_fixture("libsm90a.so")),
        Ent::File("etc/motd", b"hello\n".to_vec()),
        Ent::File(lib_b, read_fixture("libmulti.so")),
        Ent::Symlink("usr/lib/libalias.so", "libsm90a.so"),
        // Incompressible bytes, so the streams span several blocks and frames.
        Ent::File(
            "usr/share/noise.bin",
            (0..300_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect(),
        ),
    ])
}

/// What Python sees: `kind` names the decompressor (`xz`, `bz2`, or `tar` for bytes already
/// inflated); the regular members, their bytes, and which are ELF.
fn reference(tarball: &[u8], kind: &str) -> Value {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("blob");
    std::fs::write(&p, tarball).unwrap();
    let script = r#"
import bz2, io, json, lzma, sys, tarfile
raw = open(sys.argv[1], 'rb').read()
data = {'xz': lzma.decompress, 'bz2': bz2.decompress, 'tar': bytes}[sys.argv[2]](raw)
files, elf, size = 0, [], 0
with tarfile.open(fileobj=io.BytesIO(data), mode='r:') as t:
    for m in t.getmembers():
        if m.isreg():
            files += 1
            size += m.size
            if t.extractfile(m).read(4) == b'\x7fELF':
                elf.append('/' + m.name)
print(json.dumps({'files': files, 'bytes': size, 'elf': sorted(elf)}))
"#;
    let out = Std::new("python3").args(["-c", script]).arg(&p).arg(kind).output().expect("python3");
    assert!(out.status.success(), "python3: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// cudalint's view in the reference's terms (its files are the ELF ones: every ELF here is a
/// CUDA library).
fn listing(r: &ImageReport) -> Value {
    let mut elf: Vec<String> = r.files.iter().map(|f| f.file.path.clone()).collect();
    elf.sort();
    serde_json::json!({"files": r.stats.files, "bytes": r.stats.file_bytes, "elf": elf})
}

fn xz(b: &[u8]) -> Vec<u8> {
    let mut e = liblzma::write::XzEncoder::new(Vec::new(), 6);
    e.write_all(b).unwrap();
    e.finish().unwrap()
}

fn bzip2(b: &[u8]) -> Vec<u8> {
    let mut e = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::best());
    e.write_all(b).unwrap();
    e.finish().unwrap()
}

/// A zstd skippable frame holding `data`.
fn skippable(nibble: u8, data: &[u8]) -> Vec<u8> {
    let mut f = (0x184D_2A50u32 | u32::from(nibble & 0xF)).to_le_bytes().to_vec();
    f.extend_from_slice(&(data.len() as u32).to_le_bytes());
    f.extend_from_slice(data);
    f
}

/// What pzstd writes: the input cut into chunks, each a skippable frame (holding the size of
/// the frame after it) and a zstd frame.
fn pzstd(b: &[u8], chunks: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for c in b.chunks(b.len().div_ceil(chunks)) {
        let frame = zstd::encode_all(c, 3).unwrap();
        out.extend(skippable(0, &(frame.len() as u32).to_le_bytes()));
        out.extend(frame);
    }
    out
}

fn check(spec: &str, want: &Value, compression: Compression, verify: Verify) {
    let r = scan(spec, &opts(verify)).unwrap_or_else(|e| panic!("{spec}: {e}"));
    assert_eq!(&listing(&r), want, "{spec} ({verify:?})");
    let l = &r.image.layers[0];
    assert_eq!(l.compression, compression, "{spec}");
    if verify != Verify::Never {
        assert!(l.verified, "{spec}: the bytes read were hashed and matched ({verify:?})");
    }
}

#[test]
fn xz_and_bzip2_layers_are_read_as_docker_load_reads_them() {
    let t = layer("usr/lib/libsm90a.so", "opt/app/libmulti.so");
    let want = reference(&t, "tar");
    assert_eq!(want["elf"].as_array().unwrap().len(), 2, "{want}");
    for (blob, kind, c) in [
        (xz(&t), "xz", Compression::Xz),
        (bzip2(&t), "bz2", Compression::Bzip2),
        // Concatenated streams (pbzip2, `xz` of appended files): both read to the end.
        ([xz(&t[..40_960]), xz(&t[40_960..])].concat(), "xz", Compression::Xz),
        ([bzip2(&t[..40_960]), bzip2(&t[40_960..])].concat(), "bz2", Compression::Bzip2),
    ] {
        assert_eq!(reference(&blob, kind), want, "Python's {kind} reads the tar back");
        let d = tempfile::tempdir().unwrap();
        for verify in [Verify::Auto, Verify::Always] {
            check(&oci_with_blob(&d.path().join("oci"), &t, &blob), &want, c, verify);
            check(&docker_archive_with_blob(&d.path().join("img.tar"), &t, &blob), &want, c, verify);
        }
    }
}

#[test]
fn pzstd_output_is_read_whole() {
    let t = layer("usr/lib/libsm90a.so", "opt/app/libmulti.so");
    let want = reference(&t, "tar");
    let blob = pzstd(&t, 3);
    assert!(blob[..4] == [0x50, 0x2A, 0x4D, 0x18], "starts with a skippable frame");
    assert_eq!(reference(&zstd::decode_all(&blob[..]).unwrap(), "tar"), want, "libzstd reads it back");
    let d = tempfile::tempdir().unwrap();
    for verify in [Verify::Auto, Verify::Always] {
        check(&oci_with_blob(&d.path().join("oci"), &t, &blob), &want, Compression::Zstd, verify);
        check(&docker_archive_with_blob(&d.path().join("img.tar"), &t, &blob), &want, Compression::Zstd, verify);
    }
}

/// A tar hidden in a zstd skippable frame: its bytes are a valid tar (the frame's magic and
/// size are the first member's name), and a zstd frame follows. The runtime's decoder skips the
/// frame and unpacks the second tar; read as a plain tar the blob shows the decoy.
fn decoy_blob(real: &[u8]) -> Vec<u8> {
    let mut decoy = tar(&[
        Ent::RawFile(b"AAAAAAAA".to_vec(), Vec::new()),
        Ent::File("usr/lib/libdecoy.so", read_fixture("libmulti.so")),
    ]);
    let size = (decoy.len() - 8) as u32;
    let mut h = tar::Header::new_old();
    h.as_mut_bytes().copy_from_slice(&decoy[..512]);
    h.as_mut_bytes()[..4].copy_from_slice(&0x184D_2A5Au32.to_le_bytes());
    h.as_mut_bytes()[4..8].copy_from_slice(&size.to_le_bytes());
    h.set_cksum();
    decoy[..512].copy_from_slice(h.as_bytes());
    assert!(cudalint::layer::tar::looks_like_tar(&decoy), "the frame reads as a tar header");
    [decoy, zstd::encode_all(real, 3).unwrap()].concat()
}

#[test]
fn a_tar_in_a_skippable_frame_is_skipped_as_the_runtime_skips_it() {
    let t = layer("usr/lib/libsm90a.so", "opt/app/libmulti.so");
    let want = reference(&t, "tar");
    let blob = decoy_blob(&t);
    let raw = reference(&blob, "tar");
    assert_eq!(raw["elf"], serde_json::json!(["/usr/lib/libdecoy.so"]), "read as a tar, the blob is the decoy");
    assert_eq!(reference(&zstd::decode_all(&blob[..]).unwrap(), "tar"), want, "libzstd skips the decoy");
    let d = tempfile::tempdir().unwrap();
    for verify in [Verify::Auto, Verify::Always, Verify::Never] {
        // `auto` once read such a blob in place, unhashed, as the decoy tar.
        check(&oci_with_blob(&d.path().join("oci"), &t, &blob), &want, Compression::Zstd, verify);
        check(&docker_archive_with_blob(&d.path().join("img.tar"), &t, &blob), &want, Compression::Zstd, verify);
    }
    // The digest covers every byte read, the skipped frame's too: one byte of the decoy
    // changed and the blob digest no longer matches.
    let mut tampered = blob.clone();
    tampered[600] ^= 1;
    let d = tempfile::tempdir().unwrap();
    let spec = oci_with_blob(d.path(), &t, &blob);
    let p = d.path().join("blobs/sha256").join(hex_of(&sha(&blob)));
    std::fs::write(&p, &tampered).unwrap();
    let Err(e) = scan(&spec, &opts(Verify::Auto)) else { panic!("a tampered skippable frame is refused") };
    let e = e.to_string();
    assert!(e.contains("digest") || e.contains("does not match"), "{e}");
}

#[test]
fn an_unknown_compression_is_refused_without_quoting_its_bytes() {
    let t = layer("usr/lib/libsm90a.so", "opt/app/libmulti.so");
    let mut garbage = b"\x1b]0;pwned\x07GARBAGE".to_vec();
    garbage.resize(4096, b'Z');
    let lz4 = [&[0x04, 0x22, 0x4D, 0x18][..], &[7u8; 600]].concat();
    for (blob, needle) in [(garbage, "neither a tar archive"), (lz4, "lz4")] {
        let d = tempfile::tempdir().unwrap();
        for spec in [
            oci_with_blob(&d.path().join("oci"), &t, &blob),
            docker_archive_with_blob(&d.path().join("i.tar"), &t, &blob),
        ] {
            let e = scan(&spec, &opts(Verify::Auto)).err().unwrap_or_else(|| panic!("{spec}: refused")).to_string();
            assert!(e.contains(needle), "{e}");
            assert!(!e.contains("pwned") && !e.contains("ZZZ") && !e.contains('\x1b'), "{e}");
        }
    }
}

/// zstd as a streaming writer (libzstd's CLI from a pipe) writes it: the content size unknown,
/// so the frame header asks the whole `1 << log` window.
fn zstd_window(b: &[u8], log: u32) -> Vec<u8> {
    let mut e = zstd::stream::write::Encoder::new(Vec::new(), 1).unwrap();
    e.window_log(log).unwrap();
    e.long_distance_matching(log > 27).unwrap();
    e.include_contentsize(false).unwrap();
    e.write_all(b).unwrap();
    e.finish().unwrap()
}

/// xz with an LZMA2 dictionary of `dict` bytes (`xz --lzma2=preset=0,dict=...`).
fn xz_dict(b: &[u8], dict: u32) -> Vec<u8> {
    let mut o = liblzma::stream::LzmaOptions::new_preset(0).unwrap();
    o.dict_size(dict);
    let mut f = liblzma::stream::Filters::new();
    f.lzma2(&o);
    let s = liblzma::stream::Stream::new_stream_encoder(&f, liblzma::stream::Check::Crc64).unwrap();
    let mut e = liblzma::write::XzEncoder::new_stream(Vec::new(), s);
    e.write_all(b).unwrap();
    e.finish().unwrap()
}

/// Issue 36: a decoder's window is what the blob's header declares (libzstd's and liblzma's own
/// encoders wrote these), held from one memory budget for the scan. A layer whose window cannot
/// fit the budget is refused naming the layer and the window; one that fits is read as before,
/// however many layers wait for room; a later zstd frame or xz block asking more than the first
/// draws it from the budget first, and is refused where the budget cannot give it.
#[test]
fn decoder_windows_are_held_from_one_memory_budget() {
    use cudalint::layer::budget::MemoryBudget;
    use cudalint::layer::decode::window;
    let t = layer("usr/lib/libsm90a.so", "opt/app/libmulti.so");
    let want = reference(&t, "tar");
    let long = zstd_window(&t, 27);
    let big_xz = xz_dict(&t, 128 << 20);
    assert_eq!(window(Compression::Zstd, &long), 128 << 20);
    assert_eq!(window(Compression::Zstd, &zstd_window(&t, 20)), 1 << 20);
    assert_eq!(window(Compression::Xz, &big_xz), (128 << 20) + (1 << 20));
    assert_eq!(window(Compression::Xz, &xz_dict(&t, 3 << 20)), (3 << 20) + (1 << 20));
    // pzstd's skippable frame first: the window of the frame after it.
    assert_eq!(window(Compression::Zstd, &[skippable(0, b"1234"), long.clone()].concat()), 128 << 20);
    let d = tempfile::tempdir().unwrap();
    // xz: the dictionary and liblzma's own state.
    for (name, blob, held) in [("zstd", &long, "zstd window of 128 MiB"), ("xz", &big_xz, "xz window of 129 MiB")] {
        let spec = oci_with_blob(&d.path().join(name), &t, blob);
        let small = ScanOptions { memory: std::sync::Arc::new(MemoryBudget::new(64 << 20)), ..opts(Verify::Auto) };
        let e = scan(&spec, &small).unwrap_err().to_string();
        assert!(e.contains(&hex_of(&sha(blob))[..12]), "{name}: names the layer: {e}");
        assert!(e.contains(held) && e.contains("memory budget of 64 MiB"), "{name}: {e}");
        let r = scan(&spec, &opts(Verify::Auto)).unwrap();
        assert_eq!(listing(&r), want, "{name}");
    }
    // A first frame (or xz stream) with a 1 MiB window, then one asking 128 MiB: the larger
    // window is drawn from the budget before the decoder may allocate it, so the default budget
    // reads it whole and a 64 MiB one refuses it, naming the layer and the window.
    let split = [zstd_window(&t[..20_480], 20), zstd_window(&t[20_480..], 27)].concat();
    let split_xz = [xz_dict(&t[..20_480], 1 << 20), xz_dict(&t[20_480..], 128 << 20)].concat();
    assert_eq!(reference(&zstd::decode_all(&split[..]).unwrap(), "tar"), want, "libzstd reads it whole");
    for (name, blob, asks) in [
        ("split", &split, "later zstd frame asks a window of 128 MiB"),
        ("split-xz", &split_xz, "later xz block asks a dictionary over"),
    ] {
        let spec = oci_with_blob(&d.path().join(name), &t, blob);
        assert_eq!(listing(&scan(&spec, &opts(Verify::Auto)).unwrap()), want, "{name}");
        let small = ScanOptions { memory: std::sync::Arc::new(MemoryBudget::new(64 << 20)), ..opts(Verify::Auto) };
        let e = scan(&spec, &small).unwrap_err().to_string();
        assert!(e.contains(&hex_of(&sha(blob))[..12]), "{name}: names the layer: {e}");
        assert!(e.contains(asks) && e.contains("memory budget of 64 MiB"), "{name}: {e}");
    }
}

/// Every file over 1 MB under `dir`, sorted: real compiled bytes.
#[cfg(feature = "slow-tests")]
fn real_bytes(dir: &Path, out: &mut Vec<u8>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for p in entries {
        let m = std::fs::symlink_metadata(&p).unwrap();
        if m.is_dir() {
            real_bytes(&p, out);
        } else if m.is_file() && m.len() > 1 << 20 {
            out.extend(std::fs::read(&p).unwrap());
        }
    }
}

/// Issue 36, where it bites: 8 layers written by `zstd --long=27` from a pipe and 8 by
/// `xz --lzma2=preset=0,dict=128MiB`, each 150 MB of real compiled bytes (NVIDIA's compilers,
/// scripts/fetch-cuda-tools.sh) so every window fills, scanned at --jobs 1, 4, 8 and 16 under the
/// default 256 MiB budget: the same inventory at every --jobs, and with a budget one window
/// cannot fit, a refusal naming the layer. (Peak memory and time: scripts/bench-scan.py.)
#[cfg(feature = "slow-tests")]
#[test]
fn long_window_layers_read_the_same_at_every_jobs_within_one_budget() {
    use cudalint::layer::budget::MemoryBudget;
    const SLICE: usize = 150_000_000;
    let mut pool = Vec::new();
    real_bytes(&crate::toolchains::cuda_tools(), &mut pool);
    assert!(pool.len() > SLICE, "{} bytes of compilers", pool.len());
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("oci");
    let (mut diff_ids, mut layers) = (Vec::new(), Vec::new());
    for i in 0..16 {
        let at = (i * 37_000_000) % (pool.len() - SLICE);
        let name = format!("opt/long/part{i:02}.bin");
        let t = tar(&[Ent::File(Box::leak(name.into_boxed_str()), pool[at..at + SLICE].to_vec())]);
        let (tool, args): (&str, &[&str]) = if i % 2 == 0 {
            ("zstd", &["-q", "-1", "--long=27", "-T2", "-c"])
        } else {
            ("xz", &["-q", "-T2", "--lzma2=preset=0,dict=128MiB", "-c"])
        };
        let mut child = Std::new(crate::scan::which(tool))
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let feed = std::thread::spawn(move || stdin.write_all(&t).map(|()| t));
        let blob = child.wait_with_output().unwrap().stdout;
        let t = feed.join().unwrap().unwrap();
        assert!(cudalint::layer::decode::window(Compression::Zstd, &blob) == 128 << 20 || i % 2 == 1);
        write_blob(&dir, &blob);
        diff_ids.push(sha(&t));
        layers.push(serde_json::json!({"mediaType": "application/vnd.oci.image.layer.v1.tar+zstd", "digest": sha(&blob), "size": blob.len()}));
    }
    let config = serde_json::to_vec(&serde_json::json!({
        "architecture": "amd64", "os": "linux", "rootfs": {"type": "layers", "diff_ids": diff_ids}}))
    .unwrap();
    write_blob(&dir, &config);
    let manifest = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": sha(&config), "size": config.len()},
        "layers": layers}))
    .unwrap();
    write_blob(&dir, &manifest);
    let index = serde_json::json!({"schemaVersion": 2, "manifests": [{
        "mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": sha(&manifest), "size": manifest.len()}]});
    std::fs::write(dir.join("index.json"), serde_json::to_vec(&index).unwrap()).unwrap();
    std::fs::write(dir.join("oci-layout"), br#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();
    let spec = format!("oci:{}", dir.display());
    let files = |jobs: usize| {
        let r =
            scan(&spec, &ScanOptions { jobs, ..opts(Verify::Auto) }).unwrap_or_else(|e| panic!("--jobs {jobs}: {e}"));
        assert_eq!(r.stats.files, 16, "--jobs {jobs}");
        (serde_json::to_value(&r.files).unwrap(), r.stats.file_bytes)
    };
    let want = files(1);
    assert_eq!(want.1, 16 * SLICE as u64);
    for jobs in [4, 8, 16] {
        assert_eq!(files(jobs), want, "--jobs {jobs}");
    }
    let small =
        ScanOptions { jobs: 8, memory: std::sync::Arc::new(MemoryBudget::new(100 << 20)), ..opts(Verify::Auto) };
    let e = scan(&spec, &small).unwrap_err().to_string();
    assert!(e.contains("window of 12") && e.contains("memory budget of 100 MiB"), "{e}");
}
