//! `cudalint scan` on real images built here (images.rs) in every layout the tool reads, with
//! whiteouts, opaque directories, overwrites, links, duplicates, hostile paths and damage.

use std::collections::BTreeMap;
use std::path::Path;

use assert_cmd::Command;
use cudalint::image::{ImageReport, Platform, ScanError, ScanOptions, Verify, scan};

use crate::images::{Comp, Ent, Image, compress, docker_archive_legacy, oci_layout, sha, tar, tar_dir};
use crate::util::{fixture, read_fixture};

fn opts() -> ScanOptions {
    ScanOptions { progress: false, ..ScanOptions::default() }
}

fn run(spec: &str) -> ImageReport {
    scan(spec, &opts()).unwrap_or_else(|e| panic!("{spec}: {e}"))
}

/// path -> (layer index, hard links, symlinks, device code?)
fn inventory(r: &ImageReport) -> BTreeMap<String, (usize, Vec<String>, Vec<String>, bool)> {
    r.files
        .iter()
        .map(|f| {
            let layer = r.image.layers.iter().position(|l| Some(&l.digest) == f.layer.as_ref()).unwrap_or(usize::MAX);
            (f.file.path.clone(), (layer, f.hardlinks.clone(), f.symlinks.clone(), f.file.has_device_code()))
        })
        .collect()
}

fn files_json(r: &ImageReport) -> serde_json::Value {
    let mut v = serde_json::to_value(&r.files).unwrap();
    // The layer digest names the blob, which differs with the compression; compare the rest.
    for f in v.as_array_mut().unwrap() {
        f.as_object_mut().unwrap().remove("layer");
    }
    v
}

/// Two layers exercising every rule of applying layers.
fn layered(c1: Comp, c2: Comp) -> Image {
    let plain = read_fixture("libplain.so");
    let l1 = tar(&[
        Ent::Dir("opt"),
        Ent::File("opt/a/libsm90a.so", read_fixture("libsm90a.so")),
        Ent::File("opt/b/libsm100f.so", read_fixture("libsm100f.so")),
        Ent::File("opt/c/libdebug.so", read_fixture("libdebug.so")),
        Ent::File("opt/d/libconcat.so", read_fixture("libconcat.so")),
        Ent::File("opt/e/libzstd.so", read_fixture("libzstd.so")),
        Ent::Symlink("opt/e/liby.so", "libzstd.so"),
        Ent::Symlink("usr/lib/libx.so", "/opt/e/libzstd.so"),
        Ent::Symlink("opt/e/dangling.so", "nothing.so"),
        Ent::Symlink("opt/e/loop.so", "loop.so"),
        // Duplicate entries: the later one wins.
        Ent::File("opt/g/dup.so", read_fixture("libsm90a.so")),
        Ent::File("opt/g/dup.so", plain.clone()),
        Ent::File("opt/g/dup2.so", plain.clone()),
        Ent::File("opt/g/dup2.so", read_fixture("libconcat.so")),
        Ent::RawFile(b"../../../opt/escape/libnocompress.so".to_vec(), read_fixture("libnocompress.so")),
        Ent::File("usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05", plain.clone()),
    ]);
    let l2 = tar(&[
        Ent::File("opt/a/.wh.libsm90a.so", vec![]),
        Ent::File("opt/.wh.b", vec![]),
        Ent::File("opt/c/.wh..wh..opq", vec![]),
        Ent::File("opt/c/libnocompress.so", read_fixture("libnocompress.so")),
        Ent::File("opt/d/libconcat.so", plain.clone()),
        Ent::File("opt/h/libsm90a-2.so", read_fixture("libsm90a.so")),
        Ent::Hardlink("opt/h/alias.so", "opt/h/libsm90a-2.so"),
        Ent::File("opt/archive/libstatic.a", read_fixture("libstatic.a")),
    ]);
    Image::new(vec![(l1, c1), (l2, c2)])
}

fn expected_layered() -> BTreeMap<String, (usize, Vec<String>, Vec<String>, bool)> {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    [
        ("/opt/archive/libstatic.a", (1, s(&[]), s(&[]), true)),
        ("/opt/c/libnocompress.so", (1, s(&[]), s(&[]), true)),
        ("/opt/e/libzstd.so", (0, s(&[]), s(&["/opt/e/liby.so", "/usr/lib/libx.so"]), true)),
        ("/opt/escape/libnocompress.so", (0, s(&[]), s(&[]), true)),
        ("/opt/g/dup2.so", (0, s(&[]), s(&[]), true)),
        ("/opt/h/alias.so", (1, s(&["/opt/h/libsm90a-2.so"]), s(&[]), true)),
        ("/usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05", (0, s(&[]), s(&[]), false)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

#[test]
fn layers_apply_whiteouts_opaque_dirs_overwrites_and_links() {
    let dir = tempfile::tempdir().unwrap();
    oci_layout(dir.path(), &[&layered(Comp::Gzip, Comp::Zstd)]);
    let r = run(&format!("oci:{}", dir.path().display()));
    assert_eq!(inventory(&r), expected_layered());
    assert!(
        r.notes.iter().any(|n| n.contains("climbs above the image root") && n.contains("/opt/escape/libnocompress.so")),
        "{:?}",
        r.notes
    );
    assert!(r.image.layers.iter().all(|l| l.verified));
    assert_eq!(r.image.platform.as_deref(), Some("linux/amd64"));
    assert_eq!(r.image.env.get("CUDA_VERSION").map(String::as_str), Some("12.9.1"));
}

#[test]
fn every_layout_and_compression_gives_the_same_inventory() {
    let tmp = tempfile::tempdir().unwrap();
    let mut reports = Vec::new();
    for (i, (c1, c2)) in
        [(Comp::Gzip, Comp::Zstd), (Comp::None, Comp::None), (Comp::Zstd, Comp::Gzip)].into_iter().enumerate()
    {
        let d = tmp.path().join(format!("layout{i}"));
        oci_layout(&d, &[&layered(c1, c2)]);
        reports.push((format!("oci {c1:?}/{c2:?}"), run(&format!("oci:{}", d.display()))));
        let archive = tmp.path().join(format!("oci{i}.tar"));
        std::fs::write(&archive, tar_dir(&d)).unwrap();
        reports.push((format!("oci-archive {c1:?}/{c2:?}"), run(&format!("oci-archive:{}", archive.display()))));
    }
    let legacy = tmp.path().join("legacy.tar");
    std::fs::write(&legacy, docker_archive_legacy(&layered(Comp::None, Comp::None), "test/layered:1")).unwrap();
    let r = run(legacy.to_str().unwrap());
    assert_eq!(r.image.source.as_str(), "docker-archive");
    assert_eq!(r.image.name.as_deref(), Some("test/layered:1"));
    reports.push(("docker-archive legacy".into(), r));
    // The same archive on standard input, read in one pass.
    let out = Command::cargo_bin("cudalint")
        .unwrap()
        .args(["scan", "-", "--format", "inventory", "--quiet"])
        .pipe_stdin(&legacy)
        .unwrap()
        .output()
        .unwrap();
    // Exit 0: the image ships a driver library (CL008), but a listing alone never fails the gate.
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let stdin: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let (name0, first) = &reports[0];
    let want = files_json(first);
    let mut stdin_files = stdin["files"].clone();
    for f in stdin_files.as_array_mut().unwrap() {
        f.as_object_mut().unwrap().remove("layer");
    }
    assert_eq!(stdin_files, want, "stdin vs {name0}");
    for (name, r) in &reports {
        assert_eq!(files_json(r), want, "{name} vs {name0}");
        assert_eq!(inventory(r).keys().collect::<Vec<_>>(), expected_layered().keys().collect::<Vec<_>>(), "{name}");
    }
}

#[test]
fn seekable_uncompressed_layers_are_read_sparsely_and_verified_on_request() {
    let d = tempfile::tempdir().unwrap();
    oci_layout(d.path(), &[&layered(Comp::None, Comp::None)]);
    let spec = format!("oci:{}", d.path().display());
    let r = run(&spec);
    assert!(r.image.layers.iter().all(|l| !l.verified), "auto does not hash layers read by seeking");
    let always = ScanOptions { verify: Verify::Always, ..opts() };
    let r = scan(&spec, &always).unwrap();
    assert!(r.image.layers.iter().all(|l| l.verified));
}

fn corrupt_blob(dir: &Path, digest: &str, f: impl FnOnce(&mut Vec<u8>)) {
    let p = dir.join("blobs/sha256").join(crate::images::hex_of(digest));
    let mut b = std::fs::read(&p).unwrap();
    f(&mut b);
    std::fs::write(&p, b).unwrap();
}

#[test]
fn wrong_digest_is_a_scan_error_naming_the_layer() {
    let d = tempfile::tempdir().unwrap();
    let img = layered(Comp::Gzip, Comp::None);
    oci_layout(d.path(), &[&img]);
    let built = img.build();
    let gz = sha(&built.blobs[0]);
    // Same length, one byte changed inside the compressed stream's trailer (CRC): still inflates.
    corrupt_blob(d.path(), &gz, |b| {
        let n = b.len();
        b[n - 6] ^= 0xFF;
    });
    let e = scan(&format!("oci:{}", d.path().display()), &opts()).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains(&gz), "{msg}");
    // The uncompressed layer, damaged: caught when asked to verify everything.
    let plain = sha(&built.blobs[1]);
    corrupt_blob(d.path(), &gz, |b| *b = built.blobs[0].clone());
    // A byte of file data (damage to headers or the trailer is a tar error, found first).
    let lib = read_fixture("libnocompress.so");
    corrupt_blob(d.path(), &plain, |b| {
        let at = memchr::memmem::find(b, &lib).unwrap() + lib.len() / 2;
        b[at] ^= 0x01;
    });
    let always = ScanOptions { verify: Verify::Always, ..opts() };
    let e = scan(&format!("oci:{}", d.path().display()), &always).unwrap_err();
    assert!(matches!(e, ScanError::Digest { .. }), "{e}");
    assert!(e.to_string().contains(&plain), "{e}");
}

#[test]
fn truncated_gzip_layer_fails_closed_with_exit_2() {
    let d = tempfile::tempdir().unwrap();
    let img = layered(Comp::Gzip, Comp::None);
    oci_layout(d.path(), &[&img]);
    let gz = sha(&img.build().blobs[0]);
    corrupt_blob(d.path(), &gz, |b| b.truncate(b.len() / 2));
    let spec = format!("oci:{}", d.path().display());
    let e = scan(&spec, &opts()).unwrap_err();
    assert!(e.to_string().contains(&gz), "{e}");
    // The layout's descriptor gives the blob's size: the cut is caught before inflating.
    assert!(e.to_string().contains("its descriptor says"), "{e}");
    // Without a descriptor (a docker-archive member), inflating finds it.
    let full = compress(&img.layers[0].0, Comp::Gzip);
    let cut = Image::new(vec![(full[..full.len() / 2].to_vec(), Comp::None)]);
    let archive = d.path().join("cut-gzip-layer.tar");
    std::fs::write(&archive, docker_archive_legacy(&cut, "cut:1")).unwrap();
    let e = scan(archive.to_str().unwrap(), &opts()).unwrap_err();
    assert!(e.to_string().contains(&sha(&cut.layers[0].0)), "{e}");
    assert!(e.to_string().contains("gzip stream is corrupt or truncated"), "{e}");
    let out =
        Command::cargo_bin("cudalint").unwrap().args(["scan", &spec, "--quiet", "--gpu", "H100"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty(), "no partial report");
    assert!(String::from_utf8_lossy(&out.stderr).contains(&gz));
}

#[test]
fn multi_platform_index_selects_by_platform_and_lists_what_exists() {
    let d = tempfile::tempdir().unwrap();
    let amd = Image::new(vec![(tar(&[Ent::File("lib/libsm90a.so", read_fixture("libsm90a.so"))]), Comp::Gzip)]);
    let mut arm = Image::new(vec![(tar(&[Ent::File("lib/libsm100f.so", read_fixture("libsm100f.so"))]), Comp::Gzip)]);
    arm.arch = "arm64";
    oci_layout(d.path(), &[&amd, &arm]);
    let spec = format!("oci:{}", d.path().display());
    let pick = |p: &str| scan(&spec, &ScanOptions { platform: Some(Platform::parse(p).unwrap()), ..opts() });
    let r = pick("linux/arm64").unwrap();
    assert_eq!(r.files.iter().map(|f| f.file.path.as_str()).collect::<Vec<_>>(), ["/lib/libsm100f.so"]);
    assert_eq!(r.image.platform.as_deref(), Some("linux/arm64"));
    let r = pick("linux/amd64").unwrap();
    assert_eq!(r.files.iter().map(|f| f.file.path.as_str()).collect::<Vec<_>>(), ["/lib/libsm90a.so"]);
    let e = pick("linux/s390x").unwrap_err().to_string();
    assert!(e.contains("linux/s390x") && e.contains("linux/amd64") && e.contains("linux/arm64"), "{e}");
}

#[test]
fn hostile_tar_metadata_is_refused_not_allocated() {
    // A GNU long name claiming 2 GiB: the walker refuses it before allocating.
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::GNULongName);
    h.set_size(2 << 30);
    h.as_old_mut().name[..13].copy_from_slice(b"././@LongLink");
    h.set_cksum();
    let mut layer = h.as_bytes().to_vec();
    layer.extend(vec![0u8; 4096]);
    let d = tempfile::tempdir().unwrap();
    oci_layout(d.path(), &[&Image::new(vec![(layer, Comp::Gzip)])]);
    let e = scan(&format!("oci:{}", d.path().display()), &opts()).unwrap_err().to_string();
    assert!(e.contains("exceeds the"), "{e}");
    // A path longer than PATH_MAX is skipped with a note.
    let long = [b"a/".repeat(2100), b"lib.so".to_vec()].concat();
    let mut b = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_size(4);
    h.set_entry_type(tar::EntryType::Regular);
    b.append_data(&mut h, String::from_utf8(long).unwrap(), &b"abcd"[..]).unwrap();
    let d = tempfile::tempdir().unwrap();
    oci_layout(d.path(), &[&Image::new(vec![(b.into_inner().unwrap(), Comp::None)])]);
    let r = run(&format!("oci:{}", d.path().display()));
    assert!(r.notes.iter().any(|n| n.contains("exceeds the 4096-byte limit")), "{:?}", r.notes);
}

#[test]
fn demo_image_as_the_readme_scans_it() {
    let r = run(fixture("../demo/demo-image.tar").to_str().unwrap());
    let paths: Vec<&str> = r.files.iter().map(|f| f.file.path.as_str()).collect();
    assert!(paths.contains(&"/opt/app/lib/libsm90a.so"));
    assert!(paths.contains(&"/opt/app/lib/libsm100f.so"));
    assert!(!paths.contains(&"/opt/app/lib/libdebug.so"), "deleted by a whiteout in layer 2");
    let cudart = r.files.iter().find(|f| f.file.path == "/usr/local/cuda/lib64/libcudart.so.12.9.79").unwrap();
    assert_eq!(cudart.file.cudart.as_ref().unwrap().version, "12.9.79");
    assert_eq!(cudart.symlinks, ["/usr/local/cuda/lib64/libcudart.so", "/usr/local/cuda/lib64/libcudart.so.12"]);
    assert_eq!(r.image.name.as_deref(), Some("cudalint-demo:latest"));
    assert!(r.image.layers[0].verified && r.image.layers[0].compression == cudalint::layer::decode::Compression::Gzip);
}

#[test]
fn rootfs_directory_file_and_wheel() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    std::fs::create_dir_all(root.join("usr/lib")).unwrap();
    std::fs::write(root.join("usr/lib/libsm90a.so"), read_fixture("libsm90a.so")).unwrap();
    std::fs::hard_link(root.join("usr/lib/libsm90a.so"), root.join("usr/lib/hard.so")).unwrap();
    std::os::unix::fs::symlink("libsm90a.so", root.join("usr/lib/soft.so")).unwrap();
    std::fs::write(root.join("usr/lib/README"), b"not a library at all").unwrap();
    let r = run(&format!("dir:{}", root.display()));
    assert_eq!(inventory(&r).len(), 1, "{:?}", inventory(&r));
    let f = &r.files[0];
    assert_eq!(
        (f.file.path.as_str(), f.hardlinks.as_slice()),
        ("/usr/lib/hard.so", &["/usr/lib/libsm90a.so".to_string()][..])
    );
    assert_eq!(f.symlinks, ["/usr/lib/soft.so"]);

    let r = run(fixture("libsm100f.so").to_str().unwrap());
    assert_eq!(r.image.source.as_str(), "file");
    assert!(r.files[0].file.has_device_code());

    let whl = root.join("pkg-1.0-py3-none-linux_x86_64.whl");
    let mut z = zip::ZipWriter::new(std::fs::File::create(&whl).unwrap());
    let deflate = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
    z.start_file("pkg/lib/libconcat.so", deflate).unwrap();
    std::io::Write::write_all(&mut z, &read_fixture("libconcat.so")).unwrap();
    z.start_file("pkg/__init__.py", deflate).unwrap();
    std::io::Write::write_all(&mut z, b"# nothing\n").unwrap();
    z.finish().unwrap();
    let r = run(whl.to_str().unwrap());
    assert_eq!(r.image.source.as_str(), "wheel");
    assert_eq!(r.files.iter().map(|f| f.file.path.as_str()).collect::<Vec<_>>(), ["/pkg/lib/libconcat.so"]);
    assert_eq!(r.files[0].file.containers.len(), 3);
}

/// skopeo (a Debian package; scripts/install-test-deps.sh installs it) converts the OCI layout
/// into a docker-archive and an oci-archive: three encodings of one image, one inventory.
#[test]
fn skopeo_conversions_give_identical_inventories() {
    let skopeo = which("skopeo");
    let d = tempfile::tempdir().unwrap();
    let layout = d.path().join("layout");
    // docker-archive cannot carry zstd layers (skopeo refuses the conversion).
    oci_layout(&layout, &[&layered(Comp::Gzip, Comp::None)]);
    let src = format!("oci:{}:latest", layout.display());
    let da = d.path().join("docker.tar");
    let oa = d.path().join("oci.tar");
    for dst in
        [format!("docker-archive:{}:test/skopeo:1", da.display()), format!("oci-archive:{}:latest", oa.display())]
    {
        let out =
            std::process::Command::new(&skopeo).args(["--insecure-policy", "copy", "-q", &src, &dst]).output().unwrap();
        assert!(out.status.success(), "skopeo copy {dst}: {}", String::from_utf8_lossy(&out.stderr));
    }
    let a = run(&format!("oci:{}", layout.display()));
    let b = run(da.to_str().unwrap());
    let c = run(oa.to_str().unwrap());
    assert_eq!(b.image.source.as_str(), "docker-archive");
    assert_eq!(c.image.source.as_str(), "oci-archive");
    assert_eq!(files_json(&a), files_json(&b));
    assert_eq!(files_json(&a), files_json(&c));
    assert_eq!(inventory(&a), expected_layered());
}

pub fn which(tool: &str) -> String {
    let found = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(tool))
        .find(|p| p.is_file());
    match found {
        Some(p) => p.display().to_string(),
        None => panic!(
            "`{tool}` is needed by this test and is not installed: run scripts/install-test-deps.sh (Debian package {tool})"
        ),
    }
}

/// The empty tar's digest: the layer every build step that changes nothing makes.
const EMPTY_LAYER: &str = "sha256:5f70bf18a086007016e948b04aed3b82103a36bea41755b6cddfaf10ace3c6ef";

/// An image whose layers repeat, as builds make them: the empty layer twice, and a layer
/// holding a CUDA library twice, with a layer between that deletes the library (so the second
/// copy is what puts it back) and adds another.
fn repeating(c: Comp) -> Image {
    let lib = tar(&[Ent::File("opt/cuda/libsm90a.so", read_fixture("libsm90a.so"))]);
    let empty = tar(&[]);
    assert_eq!(sha(&empty), EMPTY_LAYER);
    let mid = tar(&[
        Ent::File("opt/cuda/.wh.libsm90a.so", vec![]),
        Ent::File("opt/plain/libconcat.so", read_fixture("libconcat.so")),
    ]);
    Image::new(vec![(lib.clone(), c), (empty.clone(), c), (mid, c), (empty, c), (lib, c)])
}

/// How a legacy `docker save` archive stores a layer listed again.
#[derive(Clone, Copy, Debug)]
enum Repeat {
    /// The manifest names the same member again (podman and skopeo: `<diff_id>.tar`).
    Listed,
    /// `<id>/layer.tar` is a symbolic link to the first copy (Docker before 25, podman).
    Symlink,
    /// `<id>/layer.tar` is a hard link to the first copy.
    Hardlink,
}

/// A legacy docker-archive of `img` whose repeated layers are stored once. `reversed`: the
/// members in the opposite order to the manifest's, `manifest.json` first (links still
/// follow the member they name, as a tar needs).
fn legacy_repeating(img: &Image, repeat: Repeat, reversed: bool) -> Vec<u8> {
    let b = img.build();
    let cfg_name = format!("{}.json", crate::images::hex_of(&sha(&b.config)));
    enum Member {
        File(Vec<u8>),
        Symlink(String),
        Hardlink(String),
    }
    let mut names = vec![String::new(); img.layers.len()];
    let mut members: Vec<(String, Member)> = Vec::new();
    let mut first: BTreeMap<String, String> = BTreeMap::new();
    let order: Vec<usize> =
        if reversed { (0..img.layers.len()).rev().collect() } else { (0..img.layers.len()).collect() };
    for i in order {
        let layer = &img.layers[i].0;
        let digest = sha(layer);
        let own = match repeat {
            Repeat::Listed => format!("{}.tar", crate::images::hex_of(&digest)),
            Repeat::Symlink | Repeat::Hardlink => format!("{:064x}/layer.tar", i + 1),
        };
        names[i] = match (first.get(&digest), repeat) {
            (None, _) => {
                first.insert(digest, own.clone());
                members.push((own.clone(), Member::File(layer.clone())));
                own
            }
            (Some(stored), Repeat::Listed) => stored.clone(),
            (Some(stored), Repeat::Symlink) => {
                members.push((own.clone(), Member::Symlink(format!("../{stored}"))));
                own
            }
            (Some(stored), Repeat::Hardlink) => {
                members.push((own.clone(), Member::Hardlink(stored.clone())));
                own
            }
        };
    }
    let manifest = serde_json::json!([{"Config": cfg_name, "RepoTags": ["test/repeat:1"], "Layers": names}]);
    let docs = [("manifest.json".to_string(), serde_json::to_vec(&manifest).unwrap()), (cfg_name, b.config)];
    let docs = docs.into_iter().map(|(n, d)| (n, Member::File(d)));
    let all: Vec<(String, Member)> =
        if reversed { docs.chain(members).collect() } else { members.into_iter().chain(docs).collect() };
    let mut t = tar::Builder::new(Vec::new());
    for (name, m) in all {
        let mut h = tar::Header::new_gnu();
        h.set_mode(0o644);
        h.set_mtime(0);
        match m {
            Member::File(data) => {
                h.set_size(data.len() as u64);
                t.append_data(&mut h, &name, &data[..]).unwrap();
            }
            Member::Symlink(to) => {
                h.set_entry_type(tar::EntryType::Symlink);
                h.set_size(0);
                t.append_link(&mut h, &name, &to).unwrap();
            }
            Member::Hardlink(to) => {
                h.set_entry_type(tar::EntryType::Link);
                h.set_size(0);
                t.append_link(&mut h, &name, &to).unwrap();
            }
        }
    }
    t.into_inner().unwrap()
}

/// A scan's JSON document (`format`: json or inventory), its exit code and stderr: by path, or
/// with the same bytes on standard input.
fn scan_json(archive: &Path, stdin: bool, format: &str) -> (Option<i32>, serde_json::Value, String) {
    let mut c = Command::cargo_bin("cudalint").unwrap();
    c.args(["scan", "--format", format, "--quiet", "--gpu", "H100"]);
    if stdin {
        c.arg("-").pipe_stdin(archive).unwrap();
    } else {
        c.arg(archive);
    }
    let out = c.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let mut v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    // What differs by design: an oci-archive on disk is titled by its file name (a stream has
    // none), and an uncompressed layer read by seeking is not hashed unless asked to be.
    if let Some(image) = v.get_mut("image").and_then(|i| i.as_object_mut()) {
        image.remove("name");
        for l in image.get_mut("layers").and_then(|l| l.as_array_mut()).into_iter().flatten() {
            l.as_object_mut().unwrap().remove("verified");
        }
    }
    (out.status.code(), v, stderr)
}

/// `archive` read by path and from standard input: the same exit (0) and the same findings and
/// inventory; returns the inventory's files, less their layer digests (which name compressed
/// blobs), and the image's layer digests.
fn same_by_path_and_stream(what: &str, archive: &Path) -> (serde_json::Value, Vec<String>) {
    let mut inventory = serde_json::Value::Null;
    for format in ["json", "inventory"] {
        let (code, path, err) = scan_json(archive, false, format);
        assert_eq!(code, Some(0), "{what} by path, --format {format}: {err}");
        let (code, stream, err) = scan_json(archive, true, format);
        assert_eq!(code, Some(0), "{what} from stdin, --format {format}: {err}");
        assert_eq!(stream, path, "{what}: --format {format} from stdin vs by path");
        inventory = path;
    }
    let layers: Vec<String> =
        inventory["image"]["layers"].as_array().unwrap().iter().map(|l| l["digest"].as_str().unwrap().into()).collect();
    let mut files = inventory["files"].take();
    for f in files.as_array_mut().unwrap() {
        let layer = f.as_object_mut().unwrap().remove("layer").unwrap();
        // The library comes from the last listing of its layer (the first is whited out).
        if f["path"] == "/opt/cuda/libsm90a.so" {
            assert_eq!(layer.as_str(), Some(layers[4].as_str()), "{what}");
        }
    }
    (files, layers)
}

/// Every image-archive shape whose layers repeat (the empty layer, a library's layer) and whose
/// members come in another order than the manifest lists them reads the same from standard
/// input, in one pass, as by path: each stored blob is read once and its analysis serves every
/// listing, which keeps its position in the image.
#[test]
fn repeated_layers_read_the_same_by_path_and_from_stdin_in_every_archive_shape() {
    let tmp = tempfile::tempdir().unwrap();
    let plain = repeating(Comp::None);
    let mut shapes: Vec<(String, Vec<u8>)> = Vec::new();
    for repeat in [Repeat::Listed, Repeat::Symlink, Repeat::Hardlink] {
        for reversed in [false, true] {
            shapes.push((format!("legacy {repeat:?} reversed={reversed}"), legacy_repeating(&plain, repeat, reversed)));
        }
    }
    shapes.push(("Docker 25+".into(), crate::images::docker_archive_25(&plain, &plain, "test/repeat:1")));
    for c in [Comp::None, Comp::Gzip] {
        let d = tmp.path().join(format!("layout-{c:?}"));
        oci_layout(&d, &[&repeating(c)]);
        shapes.push((format!("oci-archive {c:?}"), tar_dir(&d)));
    }
    let mut first: Option<(String, serde_json::Value)> = None;
    for (i, (what, bytes)) in shapes.iter().enumerate() {
        let p = tmp.path().join(format!("{i}.tar"));
        std::fs::write(&p, bytes).unwrap();
        let (files, layers) = same_by_path_and_stream(what, &p);
        assert_eq!(layers.len(), 5, "{what}: every listing keeps its position");
        assert_eq!(layers[1], layers[3], "{what}");
        assert_eq!(layers[0], layers[4], "{what}");
        let paths: Vec<&str> = files.as_array().unwrap().iter().map(|f| f["path"].as_str().unwrap()).collect();
        assert_eq!(paths, ["/opt/cuda/libsm90a.so", "/opt/plain/libconcat.so"], "{what}");
        match &first {
            None => first = Some((what.clone(), files)),
            Some((name0, want)) => assert_eq!(&files, want, "{what} vs {name0}"),
        }
    }
}

/// skopeo writes the repeating image as a docker-archive and an oci-archive (the writer
/// podman save uses): each reads the same by path and from standard input.
#[test]
fn skopeo_archives_with_repeated_layers_read_the_same_by_path_and_from_stdin() {
    let skopeo = which("skopeo");
    let d = tempfile::tempdir().unwrap();
    let layout = d.path().join("layout");
    oci_layout(&layout, &[&repeating(Comp::Gzip)]);
    let src = format!("oci:{}:latest", layout.display());
    let da = d.path().join("docker.tar");
    let oa = d.path().join("oci.tar");
    let mut seen = Vec::new();
    for (dst, file) in [
        (format!("docker-archive:{}:test/repeat:1", da.display()), &da),
        (format!("oci-archive:{}:latest", oa.display()), &oa),
    ] {
        let out =
            std::process::Command::new(&skopeo).args(["--insecure-policy", "copy", "-q", &src, &dst]).output().unwrap();
        assert!(out.status.success(), "skopeo copy {dst}: {}", String::from_utf8_lossy(&out.stderr));
        seen.push(same_by_path_and_stream(&dst, file).0);
    }
    assert_eq!(seen[0], seen[1]);
}

/// A real `podman build` whose steps repeat layers (COPY of an empty directory makes the empty
/// layer; the same COPY twice makes one layer twice), saved in both of podman's formats: `podman
/// save IMG | cudalint scan -` reads as `podman save -o x.tar IMG; cudalint scan x.tar`. Podman
/// runs rootful with its own storage under a temporary directory (vfs: no overlay mounts).
#[cfg(feature = "slow-tests")]
#[test]
fn podman_saves_of_a_build_with_repeated_layers_read_the_same_by_path_and_from_a_pipe() {
    let d = tempfile::tempdir().unwrap();
    let built = crate::local_stores::Podman::new(d.path());
    crate::local_stores::build(&built, d.path());
    let podman = |args: &[&str]| built.cmd(args);
    let config: serde_json::Value = serde_json::from_str(&crate::util::run(&mut podman(&[
        "image",
        "inspect",
        "--format",
        "{{json .RootFS.Layers}}",
        "localhost/repeat:1",
    ])))
    .unwrap();
    let diff_ids: Vec<&str> = config.as_array().unwrap().iter().map(|l| l.as_str().unwrap()).collect();
    assert_eq!(diff_ids.len(), 4, "{diff_ids:?}");
    assert_eq!((diff_ids[1], diff_ids[3]), (EMPTY_LAYER, EMPTY_LAYER), "{diff_ids:?}");
    let bin = assert_cmd::cargo::cargo_bin("cudalint");
    for format in ["docker-archive", "oci-archive"] {
        let file = d.path().join(format!("{format}.tar"));
        crate::util::run(podman(&["save", "--format", format, "-o"]).arg(&file).arg("localhost/repeat:1"));
        let by_path = crate::util::run(
            std::process::Command::new(&bin).args(["scan", "--format", "inventory", "--quiet"]).arg(&file),
        );
        let mut save = podman(&["save", "--format", format, "localhost/repeat:1"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let piped = std::process::Command::new(&bin)
            .args(["scan", "--format", "inventory", "--quiet", "-"])
            .stdin(save.stdout.take().unwrap())
            .output()
            .unwrap();
        assert!(save.wait().unwrap().success(), "podman save --format {format}");
        assert_eq!(piped.status.code(), Some(0), "{format} from a pipe: {}", String::from_utf8_lossy(&piped.stderr));
        let mut by_path: serde_json::Value = serde_json::from_str(&by_path).unwrap();
        let mut piped: serde_json::Value = serde_json::from_slice(&piped.stdout).unwrap();
        for v in [&mut by_path, &mut piped] {
            // As in scan_json: the file name titles an oci-archive, seeks leave layers unhashed.
            v["image"].as_object_mut().unwrap().remove("name");
            for l in v["image"]["layers"].as_array_mut().unwrap() {
                l.as_object_mut().unwrap().remove("verified");
            }
        }
        assert_eq!(piped, by_path, "podman save --format {format}: from a pipe vs by path");
        assert_eq!(by_path["image"]["layers"].as_array().unwrap().len(), 4, "{format}");
        assert_eq!(by_path["files"][0]["path"], "/opt/cuda/libsm90a.so", "{format}");
    }
}
