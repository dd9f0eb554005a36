//! The layer cache: a layer's analysis, keyed by its digest and the analyzer's version and
//! options, so a layer seen before is neither downloaded nor read again. Entries are written
//! atomically (temporary file, then rename); an unreadable entry is dropped and rebuilt. Only
//! layers whose digest was verified are stored.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::image::AnalyzedLayer;

/// Bumped whenever the analysis of a layer would come out differently for the same bytes
/// (2: package records per layer; sparse entries and non-UTF-8 names read exactly).
const ANALYSIS_VERSION: u32 = 2;
const SCHEMA: &str = "cudalint.layer-cache/v1";

pub struct LayerCache {
    dir: PathBuf,
}

#[derive(Serialize, Deserialize)]
struct Entry {
    schema: String,
    analyzer: String,
    digest: String,
    layer: AnalyzedLayer,
}

fn analyzer() -> String {
    format!("{}+{ANALYSIS_VERSION}", env!("CARGO_PKG_VERSION"))
}

/// `$XDG_CACHE_HOME/cudalint`, else `~/.cache/cudalint`.
pub fn default_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))?;
    Some(base.join("cudalint"))
}

impl LayerCache {
    pub fn new(dir: PathBuf) -> LayerCache {
        LayerCache { dir }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `variant` names the analysis options that change the result (lean, every cubin).
    fn path(&self, digest: &str, variant: &str) -> PathBuf {
        let key = Sha256::digest(format!("{}\0{digest}\0{variant}", analyzer()));
        self.dir.join("layers").join(format!("{}.json.zst", hex::encode(&key[..16])))
    }

    pub fn get(&self, digest: &str, variant: &str) -> Option<AnalyzedLayer> {
        let p = self.path(digest, variant);
        let bytes = std::fs::read(&p).ok()?;
        let parsed = zstd::decode_all(&bytes[..])
            .ok()
            .and_then(|json| serde_json::from_slice::<Entry>(&json).ok())
            .filter(|e| e.schema == SCHEMA && e.analyzer == analyzer() && e.digest == digest && e.layer.info.verified);
        if parsed.is_none() {
            // Corrupt or foreign: drop it, the layer is analysed again.
            let _ = std::fs::remove_file(&p);
        }
        parsed.map(|e| e.layer)
    }

    /// Stores `layer` only if its bytes were verified against `digest`: an analysis of bytes
    /// read under `--verify never` may not be those of the genuine blob, and a later scan would
    /// trust it (cache poisoning).
    pub fn put(&self, digest: &str, variant: &str, layer: &AnalyzedLayer) -> io::Result<()> {
        if !layer.info.verified || layer.info.digest != digest {
            return Ok(());
        }
        let p = self.path(digest, variant);
        let dir = p.parent().expect("cache path has a parent");
        std::fs::create_dir_all(dir)?;
        let entry = Entry { schema: SCHEMA.into(), analyzer: analyzer(), digest: digest.into(), layer: layer.clone() };
        let json = serde_json::to_vec(&entry).map_err(io::Error::other)?;
        let data = zstd::encode_all(&json[..], 3)?;
        let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
        tmp.write_all(&data)?;
        tmp.as_file().sync_all()?;
        tmp.persist(&p).map_err(|e| e.error)?;
        Ok(())
    }

    /// Removes every entry; returns how many.
    pub fn clean(&self) -> io::Result<u64> {
        let dir = self.dir.join("layers");
        let mut n = 0;
        match std::fs::read_dir(&dir) {
            Ok(rd) => {
                for e in rd.flatten() {
                    if std::fs::remove_file(e.path()).is_ok() {
                        n += 1;
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::{AnalyzedLayer, LayerInfo};
    use crate::layer::analyze::LayerSummary;
    use crate::layer::decode::Compression;

    fn layer(digest: &str, verified: bool) -> AnalyzedLayer {
        AnalyzedLayer {
            info: LayerInfo {
                digest: digest.into(),
                diff_id: None,
                size: 1,
                compression: Compression::Gzip,
                verified,
                stats: Default::default(),
            },
            summary: LayerSummary::default(),
        }
    }

    /// A `--verify never` analysis (of bytes that may not be the blob's) is never stored, so a
    /// later verifying scan cannot trust it; a verified one is, under its own digest only.
    #[test]
    fn only_verified_analyses_are_cached() {
        let d = tempfile::tempdir().unwrap();
        let c = LayerCache::new(d.path().to_path_buf());
        let digest = format!("sha256:{}", "a".repeat(64));
        c.put(&digest, "v", &layer(&digest, false)).unwrap();
        assert!(c.get(&digest, "v").is_none());
        assert!(!d.path().join("layers").exists() || std::fs::read_dir(d.path().join("layers")).unwrap().count() == 0);
        let other = format!("sha256:{}", "b".repeat(64));
        c.put(&digest, "v", &layer(&other, true)).unwrap();
        assert!(c.get(&digest, "v").is_none(), "stored under a digest it was not verified against");
        c.put(&digest, "v", &layer(&digest, true)).unwrap();
        assert!(c.get(&digest, "v").is_some_and(|l| l.info.verified));
        assert!(c.get(&digest, "w").is_none());
        // An entry written unverified by an older version is not trusted either.
        let p = c.path(&digest, "u");
        let entry =
            Entry { schema: SCHEMA.into(), analyzer: analyzer(), digest: digest.clone(), layer: layer(&digest, false) };
        std::fs::write(&p, zstd::encode_all(&serde_json::to_vec(&entry).unwrap()[..], 3).unwrap()).unwrap();
        assert!(c.get(&digest, "u").is_none());
        assert!(!p.exists(), "dropped");
    }
}
