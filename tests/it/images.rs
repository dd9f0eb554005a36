//! Builds real image archives for the tests: layers written with the `tar` crate, compressed
//! with flate2/zstd, laid out as OCI layouts, oci-archives and docker-archives (legacy and
//! Docker 25+), exactly as the formats specify.

use std::io::Write;
use std::path::Path;

use sha2::{Digest, Sha256};
use tar::{EntryType, Header};

pub fn sha(b: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(b)))
}

pub fn hex_of(d: &str) -> &str {
    d.strip_prefix("sha256:").unwrap()
}

pub enum Ent {
    File(&'static str, Vec<u8>),
    Dir(&'static str),
    Symlink(&'static str, &'static str),
    Hardlink(&'static str, &'static str),
    /// A raw path written byte for byte (hostile names the tar crate would refuse).
    RawFile(Vec<u8>, Vec<u8>),
}

fn header(path: &[u8], kind: EntryType, size: u64, mode: u32) -> Header {
    let mut h = Header::new_gnu();
    h.set_entry_type(kind);
    h.set_size(size);
    h.set_mode(mode);
    h.set_mtime(0);
    let name = &mut h.as_old_mut().name;
    name[..path.len()].copy_from_slice(path);
    h.set_cksum();
    h
}

pub fn tar(entries: &[Ent]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for e in entries {
        match e {
            Ent::File(p, data) => {
                let mut h = Header::new_gnu();
                h.set_size(data.len() as u64);
                h.set_mode(0o755);
                h.set_mtime(0);
                h.set_entry_type(EntryType::Regular);
                b.append_data(&mut h, p, &data[..]).unwrap();
            }
            Ent::Dir(p) => {
                let mut h = Header::new_gnu();
                h.set_entry_type(EntryType::Directory);
                h.set_mode(0o755);
                h.set_size(0);
                b.append_data(&mut h, p, std::io::empty()).unwrap();
            }
            Ent::Symlink(p, t) => {
                let mut h = Header::new_gnu();
                h.set_entry_type(EntryType::Symlink);
                h.set_size(0);
                b.append_link(&mut h, p, t).unwrap();
            }
            Ent::Hardlink(p, t) => {
                let mut h = Header::new_gnu();
                h.set_entry_type(EntryType::Link);
                h.set_size(0);
                b.append_link(&mut h, p, t).unwrap();
            }
            Ent::RawFile(p, data) => {
                let h = header(p, EntryType::Regular, data.len() as u64, 0o644);
                b.append(&h, &data[..]).unwrap();
            }
        }
    }
    b.into_inner().unwrap()
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Comp {
    None,
    Gzip,
    Zstd,
}

pub fn compress(tar: &[u8], c: Comp) -> Vec<u8> {
    match c {
        Comp::None => tar.to_vec(),
        Comp::Gzip => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(tar).unwrap();
            e.finish().unwrap()
        }
        Comp::Zstd => zstd::encode_all(tar, 3).unwrap(),
    }
}

fn media_type(c: Comp) -> &'static str {
    match c {
        Comp::None => "application/vnd.oci.image.layer.v1.tar",
        Comp::Gzip => "application/vnd.oci.image.layer.v1.tar+gzip",
        Comp::Zstd => "application/vnd.oci.image.layer.v1.tar+zstd",
    }
}

/// An image: layers (uncompressed tar bytes and how to compress each) and a config.
pub struct Image {
    pub layers: Vec<(Vec<u8>, Comp)>,
    pub arch: &'static str,
    pub env: Vec<&'static str>,
    /// The config's `history` entries (none: no `history` at all).
    pub history: Vec<serde_json::Value>,
}

pub struct Built {
    pub config: Vec<u8>,
    pub blobs: Vec<Vec<u8>>,
    pub manifest: Vec<u8>,
}

impl Image {
    pub fn new(layers: Vec<(Vec<u8>, Comp)>) -> Image {
        Image { layers, arch: "amd64", env: vec!["CUDA_VERSION=12.9.1"], history: Vec::new() }
    }

    pub fn build(&self) -> Built {
        let diff_ids: Vec<String> = self.layers.iter().map(|(t, _)| sha(t)).collect();
        let mut config = serde_json::json!({
            "architecture": self.arch, "os": "linux",
            "config": {"Env": self.env},
            "rootfs": {"type": "layers", "diff_ids": diff_ids},
        });
        if !self.history.is_empty() {
            config["history"] = self.history.clone().into();
        }
        let config = serde_json::to_vec(&config).unwrap();
        let blobs: Vec<Vec<u8>> = self.layers.iter().map(|(t, c)| compress(t, *c)).collect();
        let layers: Vec<serde_json::Value> = blobs
            .iter()
            .zip(&self.layers)
            .map(|(b, (_, c))| serde_json::json!({"mediaType": media_type(*c), "digest": sha(b), "size": b.len()}))
            .collect();
        let manifest = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": sha(&config), "size": config.len()},
            "layers": layers,
        }))
        .unwrap();
        Built { config, blobs, manifest }
    }
}

fn write_blob(dir: &Path, b: &[u8]) {
    let p = dir.join("blobs/sha256").join(hex_of(&sha(b)));
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, b).unwrap();
}

/// An OCI image layout directory holding one or more images (an index when several).
pub fn oci_layout(dir: &Path, images: &[&Image]) {
    let mut manifests = Vec::new();
    for img in images {
        let b = img.build();
        write_blob(dir, &b.config);
        for blob in &b.blobs {
            write_blob(dir, blob);
        }
        write_blob(dir, &b.manifest);
        manifests.push(serde_json::json!({
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": sha(&b.manifest), "size": b.manifest.len(),
            "platform": {"architecture": img.arch, "os": "linux"},
        }));
    }
    let index = if manifests.len() == 1 {
        let mut m = manifests.remove(0);
        m["annotations"] = serde_json::json!({"org.opencontainers.image.ref.name": "latest"});
        serde_json::json!({"schemaVersion": 2, "manifests": [m]})
    } else {
        // A nested index, as registries and buildx write multi-platform images.
        let inner = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": manifests,
        }))
        .unwrap();
        write_blob(dir, &inner);
        serde_json::json!({"schemaVersion": 2, "manifests": [{
            "mediaType": "application/vnd.oci.image.index.v1+json", "digest": sha(&inner), "size": inner.len(),
            "annotations": {"org.opencontainers.image.ref.name": "latest"}}]})
    };
    std::fs::write(dir.join("index.json"), serde_json::to_vec(&index).unwrap()).unwrap();
    std::fs::write(dir.join("oci-layout"), br#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();
}

/// A tar of a directory's files (sorted), as oci-archive and docker-archive files are.
pub fn tar_dir(dir: &Path) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    let mut files = Vec::new();
    collect(dir, dir, &mut files);
    files.sort();
    for rel in files {
        b.append_path_with_name(dir.join(&rel), &rel).unwrap();
    }
    b.into_inner().unwrap()
}

fn collect(root: &Path, d: &Path, out: &mut Vec<String>) {
    for e in std::fs::read_dir(d).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            collect(root, &p, out);
        } else {
            out.push(p.strip_prefix(root).unwrap().to_string_lossy().into_owned());
        }
    }
}

/// `docker save` before Docker 25: `<id>/layer.tar` (uncompressed), `<config>.json`,
/// `manifest.json`, `repositories`.
pub fn docker_archive_legacy(img: &Image, tag: &str) -> Vec<u8> {
    let b = img.build();
    let cfg_name = format!("{}.json", hex_of(&sha(&b.config)));
    let mut t = tar::Builder::new(Vec::new());
    let mut layer_names = Vec::new();
    let add = |t: &mut tar::Builder<Vec<u8>>, name: &str, data: &[u8]| {
        let mut h = Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_mtime(0);
        t.append_data(&mut h, name, data).unwrap();
    };
    for (i, (tarbytes, _)) in img.layers.iter().enumerate() {
        let id = format!("{:064x}", i + 1);
        let name = format!("{id}/layer.tar");
        add(&mut t, &name, tarbytes);
        layer_names.push(name);
    }
    add(&mut t, &cfg_name, &b.config);
    let manifest = serde_json::json!([{"Config": cfg_name, "RepoTags": [tag], "Layers": layer_names}]);
    add(&mut t, "manifest.json", &serde_json::to_vec(&manifest).unwrap());
    t.into_inner().unwrap()
}

/// `docker save a b`: several images in one legacy docker-archive, layers named by their
/// uncompressed digest (shared layers stored once, as Docker does).
pub fn docker_archive_multi(imgs: &[(&Image, &str)]) -> Vec<u8> {
    let mut t = tar::Builder::new(Vec::new());
    let add = |t: &mut tar::Builder<Vec<u8>>, name: &str, data: &[u8]| {
        let mut h = Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_mtime(0);
        t.append_data(&mut h, name, data).unwrap();
    };
    let mut entries = Vec::new();
    let mut written = std::collections::HashSet::new();
    for (img, tag) in imgs {
        let b = img.build();
        let cfg_name = format!("{}.json", hex_of(&sha(&b.config)));
        let mut layer_names = Vec::new();
        for (tarbytes, _) in &img.layers {
            let name = format!("{}/layer.tar", hex_of(&sha(tarbytes)));
            if written.insert(name.clone()) {
                add(&mut t, &name, tarbytes);
            }
            layer_names.push(name);
        }
        if written.insert(cfg_name.clone()) {
            add(&mut t, &cfg_name, &b.config);
        }
        entries.push(serde_json::json!({"Config": cfg_name, "RepoTags": [tag], "Layers": layer_names}));
    }
    add(&mut t, "manifest.json", &serde_json::to_vec(&entries).unwrap());
    t.into_inner().unwrap()
}

/// `docker save` from Docker 25 on: an OCI layout (`index.json`, `blobs/sha256/...`) with a
/// `manifest.json` beside it whose entry names the same blobs. `listed` is what
/// `manifest.json` names, `indexed` what `index.json` names (the same image in a real one),
/// both as `docker.io/library/{tag}`.
pub fn docker_archive_25(listed: &Image, indexed: &Image, tag: &str) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    for img in [listed, indexed] {
        let b = img.build();
        for blob in b.blobs.iter().chain([&b.config, &b.manifest]) {
            write_blob(dir.path(), blob);
        }
    }
    let l = listed.build();
    let i = indexed.build();
    let blob_name = |b: &[u8]| format!("blobs/sha256/{}", hex_of(&sha(b)));
    let manifest = serde_json::json!([{
        "Config": blob_name(&l.config), "RepoTags": [tag],
        "Layers": l.blobs.iter().map(|b| blob_name(b)).collect::<Vec<_>>(),
    }]);
    std::fs::write(dir.path().join("manifest.json"), serde_json::to_vec(&manifest).unwrap()).unwrap();
    let index = serde_json::json!({"schemaVersion": 2, "manifests": [{
        "mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": sha(&i.manifest), "size": i.manifest.len(),
        "annotations": {"io.containerd.image.name": format!("docker.io/library/{tag}"),
                        "org.opencontainers.image.ref.name": tag.rsplit(':').next().unwrap()}}]});
    std::fs::write(dir.path().join("index.json"), serde_json::to_vec(&index).unwrap()).unwrap();
    std::fs::write(dir.path().join("oci-layout"), br#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();
    tar_dir(dir.path())
}
