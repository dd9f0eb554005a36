//! Image tarballs (`docker save` output in both layouts, oci-archive) read from a file with
//! seeks (a [`LayerSource`]), or from standard input in one pass.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

use super::oci::{self, Platform, Resolved, Store};
use super::pipeline::{self, Blob, LayerSource};
use super::progress::Progress;
use super::{ImageReport, ScanError, ScanOptions, SourceKind, assemble};
use crate::digest::MAX_JSON;
use crate::input::{FileInput, Input, InputReader, StreamInput, SubInput, read_full};
use crate::layer::LayerRef;
use crate::layer::blob::{self, Counting, Outcome};
use crate::layer::decode::{self, Compression, READ_BUF};
use crate::layer::path::normalize;
use crate::layer::tar::{Kind, TarWalker};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// `manifest.json` (docker save, both the legacy and the Docker 25+ OCI layout).
    Docker,
    /// `index.json` only (oci-archive).
    Oci,
}

/// Member name as stored, without `./` or a leading `/`.
fn member_name(raw: &[u8]) -> Option<String> {
    normalize(raw).ok().map(|(p, _)| p.trim_start_matches('/').to_string())
}

/// Follows symlinks between members (Docker 25+ links `<id>/layer.tar` to `blobs/sha256/...`).
fn follow(links: &HashMap<String, String>, key: &str) -> String {
    let mut k = key.to_string();
    for _ in 0..8 {
        match links.get(&k) {
            Some(t) => k = t.clone(),
            None => break,
        }
    }
    k
}

fn link_target(name: &str, target: &[u8]) -> Option<String> {
    let dir = name.rsplit_once('/').map_or("", |(d, _)| d);
    let t = String::from_utf8_lossy(target);
    let joined = if t.starts_with('/') { t.to_string() } else { format!("{dir}/{t}") };
    member_name(joined.as_bytes())
}

struct ArchiveStore {
    file: File,
    path: String,
    members: HashMap<String, (u64, u64)>,
    links: HashMap<String, String>,
}

impl ArchiveStore {
    fn lookup(&self, key: &str) -> Result<(u64, u64), ScanError> {
        self.members
            .get(&follow(&self.links, key))
            .copied()
            .ok_or_else(|| ScanError::Input { what: self.path.clone(), message: format!("no member {key}") })
    }
}

impl Store for ArchiveStore {
    fn read_small(&mut self, key: &str) -> Result<Vec<u8>, ScanError> {
        let (off, size) = self.lookup(key)?;
        if size > MAX_JSON {
            return Err(ScanError::Input {
                what: self.path.clone(),
                message: format!("{key} is {size} bytes, more than a manifest can be"),
            });
        }
        let mut v = vec![0; size as usize];
        FileInput::new(&self.file, off, size)
            .read_at(0, &mut v)
            .expect("seekable")
            .map_err(|e| ScanError::io(format!("{}:{key}", self.path), e))?;
        Ok(v)
    }
}

/// `files`: whether the archive has `manifest.json` and `index.json`.
fn resolve(
    store: &mut dyn Store,
    files: (bool, bool),
    layout: Option<Layout>,
    want: Option<&str>,
    platform: &Platform,
    what: &str,
) -> Result<(Resolved, SourceKind), ScanError> {
    let layout = match layout {
        Some(l) => l,
        None if files.0 => Layout::Docker,
        None if files.1 => Layout::Oci,
        None => {
            return Err(ScanError::Input {
                what: what.to_string(),
                message: "a tar archive without manifest.json or index.json is not an image (for a root filesystem, extract it and use dir:)".into(),
            });
        }
    };
    Ok(match layout {
        Layout::Docker => (oci::resolve_docker_archive(store, want, files.1)?, SourceKind::DockerArchive),
        Layout::Oci => {
            let mut r = oci::resolve_oci(store, want, platform)?;
            // An archive on disk titles a bare-tag image by its file name (a stream has none).
            if std::path::Path::new(what).is_file() {
                r.name = oci::qualify_tag(r.name, std::path::Path::new(what));
            }
            (r, SourceKind::OciArchive)
        }
    })
}

/// An image tarball on disk: plain tars are indexed and their layers read in place (by seeking
/// where a layer is an uncompressed tar); compressed ones are read in one pass, as a stream.
pub fn scan_file(
    path: &Path,
    layout: Option<Layout>,
    want: Option<&str>,
    opts: &ScanOptions,
) -> Result<ImageReport, ScanError> {
    let file = File::open(path).map_err(|e| ScanError::io(path, e))?;
    let len = file.metadata().map_err(|e| ScanError::io(path, e))?.len();
    if len == 0 {
        return Err(ScanError::input(path, "empty file: not an image archive"));
    }
    let mut head = [0u8; decode::SNIFF_LEN];
    let n = head.len().min(len as usize);
    FileInput::new(&file, 0, len).read_at(0, &mut head[..n]).expect("seekable").map_err(|e| ScanError::io(path, e))?;
    let compression = decode::sniff(&head[..n]);
    if compression != Compression::None {
        // `docker save img | gzip`: one pass through the decompressor, as from standard input.
        let platform = opts.platform.clone().unwrap_or_else(Platform::host);
        let raw = BufReader::with_capacity(READ_BUF, &file);
        let window = decode::window(compression, &head[..n]);
        let label = path.display().to_string();
        let dec = archive_decoder(opts, compression, raw, window, &label)?;
        return scan_stream(dec, &label, compression, layout, want, &platform, opts);
    }
    let mut source = ArchiveFile::index(path, file, len, layout, want)?;
    pipeline::run(&mut source, opts)
}

/// A plain image tarball on disk, its members indexed: a layer source.
struct ArchiveFile {
    store: ArchiveStore,
    layout: Option<Layout>,
    want: Option<String>,
    /// What `resolve` found: docker-archive or oci-archive.
    kind: SourceKind,
}

impl ArchiveFile {
    fn index(
        path: &Path,
        file: File,
        len: u64,
        layout: Option<Layout>,
        want: Option<&str>,
    ) -> Result<ArchiveFile, ScanError> {
        let mut members = HashMap::new();
        let mut links = HashMap::new();
        {
            let mut input = FileInput::new(&file, 0, len).strict();
            let mut walker = TarWalker::new(&mut input);
            while let Some(e) =
                walker.next_entry().map_err(|e| ScanError::input(path, format!("not a readable image archive: {e}")))?
            {
                let Some(name) = member_name(&e.path) else { continue };
                match e.kind {
                    Kind::File => {
                        members.insert(name, (e.data_offset, e.size));
                    }
                    Kind::Symlink | Kind::Hardlink => {
                        let target = e.link.as_deref().unwrap_or_default();
                        let t = if e.kind == Kind::Hardlink { member_name(target) } else { link_target(&name, target) };
                        if let Some(t) = t {
                            links.insert(name, t);
                        }
                    }
                    _ => {}
                }
            }
        }
        let store = ArchiveStore { file, path: path.display().to_string(), members, links };
        Ok(ArchiveFile { store, layout, want: want.map(str::to_string), kind: SourceKind::DockerArchive })
    }
}

impl LayerSource for ArchiveFile {
    fn kind(&self) -> SourceKind {
        self.kind
    }

    fn resolve(&mut self, platform: &Platform) -> Result<Resolved, ScanError> {
        let files = (self.store.members.contains_key("manifest.json"), self.store.members.contains_key("index.json"));
        let what = self.store.path.clone();
        let (resolved, kind) = resolve(&mut self.store, files, self.layout, self.want.as_deref(), platform, &what)?;
        self.kind = kind;
        Ok(resolved)
    }

    fn prepare(&mut self, layers: &[LayerRef]) -> Result<Option<u64>, ScanError> {
        let mut total = 0;
        for l in layers {
            total += self.store.lookup(&l.key)?.1;
        }
        Ok(Some(total))
    }

    fn open(&self, l: &LayerRef) -> Result<Blob<'_>, ScanError> {
        let (off, len) = self.store.lookup(&l.key)?;
        Ok(Blob::Seekable { file: &self.store.file, off, len })
    }
}

struct MemStore {
    small: HashMap<String, Vec<u8>>,
    links: HashMap<String, String>,
    /// Bytes held in `small`, bounded by [`MAX_JSON_TOTAL`].
    held: u64,
}

/// JSON documents a streamed archive may hold in memory in all (the manifest can come last,
/// so every one is kept until it is known which matter). Real images hold a few MiB.
const MAX_JSON_TOTAL: u64 = 64 << 20;

impl Store for MemStore {
    fn read_small(&mut self, key: &str) -> Result<Vec<u8>, ScanError> {
        self.small
            .get(&follow(&self.links, key))
            .cloned()
            .ok_or_else(|| ScanError::Image(format!("the streamed archive has no {key} (or it is not JSON)")))
    }
}

/// Standard input or a pipe: an image archive, plain or compressed (sniffed from its first bytes).
pub fn scan_reader<R: Read>(
    mut reader: R,
    label: &str,
    platform: &Platform,
    opts: &ScanOptions,
) -> Result<ImageReport, ScanError> {
    let mut head = [0u8; decode::SNIFF_LEN];
    let n = crate::layer::pipe::read_full_dyn(&mut reader, &mut head).map_err(|e| ScanError::io(label, e))?;
    if n == 0 {
        return Err(ScanError::Input { what: label.to_string(), message: "empty: no image archive was given".into() });
    }
    let compression = decode::sniff(&head[..n]);
    if compression == Compression::None
        && let Some(why) = decode::unreadable(&head[..n])
    {
        return Err(ScanError::Input { what: label.to_string(), message: format!("not an image archive: {why}") });
    }
    let window = decode::window(compression, &head[..n]);
    let raw = BufReader::with_capacity(READ_BUF, std::io::Cursor::new(head).take(n as u64).chain(reader));
    let dec = archive_decoder(opts, compression, raw, window, label)?;
    scan_stream(dec, label, compression, None, None, platform, opts)
}

/// An image archive on a byte stream (`docker save img | cudalint scan -`): every blob is
/// analysed as it passes (the manifest may come last), then the manifest picks the layers.
/// `compression`: what the archive itself was wrapped in (already undone by `reader`).
pub fn scan_stream<R: Read>(
    reader: R,
    label: &str,
    compression: Compression,
    layout: Option<Layout>,
    want: Option<&str>,
    platform: &Platform,
    opts: &ScanOptions,
) -> Result<ImageReport, ScanError> {
    let progress = Progress::new(opts.progress, None, 0);
    let counted = Counting::new(reader, |n| progress.add(n));
    let mut outer = StreamInput::unbounded(BufReader::with_capacity(READ_BUF, counted));
    let mut walker = TarWalker::new(&mut outer);
    let mut store = MemStore { small: HashMap::new(), links: HashMap::new(), held: 0 };
    let mut outcomes: HashMap<String, Result<Outcome, ScanError>> = HashMap::new();
    let wrapped = match compression {
        Compression::None => String::new(),
        c => format!(" ({}-compressed)", c.name()),
    };
    let bad = |e: &dyn std::fmt::Display| ScanError::Input {
        what: label.to_string(),
        message: format!("not a readable image archive{wrapped}: {e}"),
    };
    while let Some(e) = walker.next_entry().map_err(|e| bad(&e))? {
        let Some(name) = member_name(&e.path) else { continue };
        match e.kind {
            // Links between members, as the seek path follows them: Docker before 25 links a
            // repeated layer's `<id>/layer.tar` to the first copy (a hard link names the member).
            Kind::Symlink | Kind::Hardlink => {
                let target = e.link.as_deref().unwrap_or_default();
                let t = if e.kind == Kind::Hardlink { member_name(target) } else { link_target(&name, target) };
                if let Some(t) = t {
                    store.links.insert(name, t);
                }
            }
            Kind::File if e.size > 0 => {
                let mut sub = SubInput::new(walker.input(), e.data_offset, e.size).map_err(|e| bad(&e))?;
                let mut head = [0u8; 1];
                read_full(&mut sub, &mut head).map_err(|e| bad(&e))?;
                if e.size <= MAX_JSON && (head[0] == b'{' || head[0] == b'[') {
                    store.held += e.size;
                    if store.held > MAX_JSON_TOTAL {
                        return Err(ScanError::Input {
                            what: label.to_string(),
                            message: format!(
                                "the archive holds more than {} MiB of JSON documents (at member {name}); \
                                 an image needs a few: refused rather than buffered",
                                MAX_JSON_TOTAL >> 20
                            ),
                        });
                    }
                    let mut v = vec![0; e.size as usize];
                    v[0] = head[0];
                    read_full(&mut sub, &mut v[1..]).map_err(|e| bad(&e))?;
                    store.small.insert(name, v);
                } else {
                    progress.message(name.clone());
                    let digest = digest_of_blob_name(&name);
                    let l = LayerRef {
                        key: name.clone(),
                        digest: digest.clone(),
                        diff_id: None,
                        size: None,
                        media_type: None,
                    };
                    let mut raw = std::io::Cursor::new(head).chain(InputReader(&mut sub));
                    // Legacy layer names are no digests: the tar's own digest is what the config's
                    // diff_ids name, so it is always hashed; a digest-named blob (Docker 25 OCI
                    // layout) only under `--verify always`.
                    let want_tar = digest.is_none() || opts.verify == super::Verify::Always;
                    outcomes.insert(
                        name,
                        blob::stream(&mut raw, &l, &opts.inspect, want_tar, &opts.memory, None)
                            .map_err(ScanError::from),
                    );
                }
            }
            _ => {}
        }
    }
    // Whatever follows the archive's end marker is not part of it.
    let files = (store.small.contains_key("manifest.json"), store.small.contains_key("index.json"));
    let (resolved, source) = resolve(&mut store, files, layout, want, platform, label)?;
    // A layer may be listed more than once (every step that changes nothing makes the same
    // empty layer): its blob is stored once and was read once; each listing takes a copy of its
    // analysis, the last one the analysis itself.
    let keys: Vec<String> = resolved.layers.iter().map(|l| follow(&store.links, &l.key)).collect();
    let mut listings: HashMap<&str, usize> = HashMap::new();
    for key in &keys {
        *listings.entry(key).or_default() += 1;
    }
    let mut layers = Vec::new();
    for (l, key) in resolved.layers.iter().zip(&keys) {
        let left = listings.get_mut(key.as_str()).expect("counted above");
        *left -= 1;
        let o = match outcomes.get(key) {
            Some(Ok(o)) if *left > 0 => o.clone(),
            Some(_) => outcomes.remove(key).expect("present")?,
            None => {
                return Err(ScanError::Layer { layer: l.id(), message: format!("not in the archive (member {key})") });
            }
        };
        layers.push(blob::check(l, o, opts.verify)?);
    }
    progress.finish();
    Ok(assemble(source, Some(&resolved), None, layers))
}

fn digest_of_blob_name(name: &str) -> Option<String> {
    let mut it = name.rsplit('/');
    let hex = it.next()?;
    let alg = it.next()?;
    (it.next() == Some("blobs") && alg == "sha256" && hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| format!("sha256:{hex}"))
}

/// A whole archive's decoder window (`docker save img | zstd`), held from the scan's budget for
/// the scan: its layers then draw from what is left.
/// The decoder of a compressed image archive, its window held from the scan's budget for the
/// whole scan (its layers are read while it runs); a later frame's larger window is drawn from
/// what is free then.
fn archive_decoder<'a, R: std::io::BufRead + 'a>(
    opts: &'a ScanOptions,
    compression: Compression,
    raw: R,
    window: u64,
    what: &str,
) -> Result<Box<dyn Read + 'a>, ScanError> {
    use crate::layer::budget::mib;
    let total = opts.memory.total();
    let mut held = opts.memory.reserve_for_the_scan(window).map_err(|room| {
        ScanError::input(
            what,
            format!(
                "its decoder window of {} does not fit the memory budget of {} (--memory), which can give it at most {}",
                mib(window),
                mib(total),
                mib(room)
            ),
        )
    })?;
    let grow = Box::new(move |w: u64| {
        held.grow(w)
            .map_err(|room| format!("the memory budget of {} (--memory) has {} free for it", mib(total), mib(room)))
    });
    decode::decoder(compression, raw, window, grow).map_err(|e| ScanError::io(what, e))
}
