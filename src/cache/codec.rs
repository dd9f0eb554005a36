//! The entry proper of a layer's analysis (zstd): one header line of JSON
//! `{"schema","digest","analyzer","variant","sha256"}`, a newline, then the `AnalyzedLayer` as
//! JSON, whose sha256 (hex) the header names. The layer cache seals it with a MAC; an analysis
//! store and an attestation carry it as it is.

use std::io::{self, Read};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::layer::AnalyzedLayer;

/// Bumped whenever the analysis of a layer would come out differently for the same bytes
/// (2: package records per layer; sparse entries and non-UTF-8 names read exactly; 3: tar
/// headers read by Go's archive/tar rules, hard links kept for the merge; 4: packages' `.py` imports). A package
/// record parser has its own version instead (`packages::RECORDS`), folded into the key too.
const ANALYSIS_VERSION: u32 = 5;
/// The most an entry may decompress to: a bound, so a hostile or broken entry cannot exhaust
/// memory (it is dropped instead).
const MAX_ENTRY: u64 = 512 << 20;

#[derive(Serialize, Deserialize, PartialEq, Debug)]
struct Header {
    schema: String,
    digest: String,
    analyzer: String,
    variant: String,
    /// sha256 (hex) of the body that follows the header line.
    sha256: String,
}

/// What made an analysis: the crate, the analysis and record formats, and the knowledge base
/// (which files the inspector keeps and which requirements a record lists depend on it: a row
/// added by `--knowledge` must not reuse analyses made without it).
pub(super) fn analyzer() -> String {
    let k = &crate::knowledge::get().digest;
    let k = k.strip_prefix("sha256:").unwrap_or(k).get(..12).unwrap_or_default();
    format!("{}+{ANALYSIS_VERSION}+{}+k{k}", env!("CARGO_PKG_VERSION"), crate::packages::record_versions())
}

/// The entry's bytes (the file format above), or None for a layer whose digest was not verified
/// (never stored, here or in a registry).
pub fn encode(digest: &str, variant: &str, layer: &AnalyzedLayer) -> io::Result<Option<Vec<u8>>> {
    if !layer.info.verified || layer.info.digest != digest {
        return Ok(None);
    }
    let body = serde_json::to_vec(layer).map_err(io::Error::other)?;
    let header = Header {
        schema: crate::schema::LAYER_CACHE.into(),
        digest: digest.into(),
        analyzer: analyzer(),
        variant: variant.into(),
        sha256: hex::encode(Sha256::digest(&body)),
    };
    let mut plain = serde_json::to_vec(&header).map_err(io::Error::other)?;
    plain.push(b'\n');
    plain.extend_from_slice(&body);
    Ok(Some(zstd::encode_all(&plain[..], 3)?))
}

/// The entry's layer if it decompresses within bounds, its header names exactly this key and
/// its body hashes to what the header says.
pub fn decode(entry: impl Read, digest: &str, variant: &str) -> Option<AnalyzedLayer> {
    decode_bounded(entry, digest, variant, MAX_ENTRY)
}

fn decode_bounded(entry: impl Read, digest: &str, variant: &str, max: u64) -> Option<AnalyzedLayer> {
    decode_within(entry, digest, variant, max).map(|d| d.layer)
}

/// An entry read by [`decode_within`].
pub struct Decoded {
    pub layer: AnalyzedLayer,
    /// Decompressed bytes it took.
    pub size: u64,
    /// Its body's SHA-256 (hex), as its header records it: equal bodies, equal analyses.
    pub sha256: String,
}

/// [`decode`] within `max` decompressed bytes (a caller's budget over several entries, as an
/// attestation's).
pub fn decode_within(entry: impl Read, digest: &str, variant: &str, max: u64) -> Option<Decoded> {
    let mut plain = Vec::new();
    zstd::stream::read::Decoder::new(entry).ok()?.take(max + 1).read_to_end(&mut plain).ok()?;
    if plain.len() as u64 > max {
        return None;
    }
    let nl = plain.iter().position(|&b| b == b'\n')?;
    let header: Header = serde_json::from_slice(&plain[..nl]).ok()?;
    let body = &plain[nl + 1..];
    let want = Header {
        schema: crate::schema::LAYER_CACHE.into(),
        digest: digest.into(),
        analyzer: analyzer(),
        variant: variant.into(),
        sha256: hex::encode(Sha256::digest(body)),
    };
    if header != want {
        return None;
    }
    let layer: AnalyzedLayer = serde_json::from_slice(body).ok()?;
    (layer.info.digest == digest && layer.info.verified).then_some(Decoded {
        layer,
        size: plain.len() as u64,
        sha256: header.sha256,
    })
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::layer::LayerInfo;

    pub(crate) fn layer(digest: &str, verified: bool) -> AnalyzedLayer {
        AnalyzedLayer {
            info: LayerInfo {
                digest: digest.into(),
                diff_id: None,
                size: 42,
                compression: crate::layer::decode::Compression::Gzip,
                verified,
                step: None,
                stats: Default::default(),
            },
            summary: Default::default(),
        }
    }

    pub(crate) const A: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    pub(crate) const B: &str = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    /// What the inspector keeps depends on the library rows: analyses are keyed by the knowledge
    /// in use, and a file added with `--knowledge` changes that key.
    #[test]
    fn the_analyzer_names_the_knowledge_in_use() {
        let k = &crate::knowledge::get().digest;
        assert!(analyzer().ends_with(&format!("+k{}", &k["sha256:".len()..][..12])), "{}", analyzer());
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("ours.toml");
        std::fs::write(&f, "[[related]]\nprefix = \"ours-\"\nsource = \"us\"\n").unwrap();
        let with = crate::knowledge::Knowledge::load(&[f]).unwrap();
        assert_ne!(with.digest, *k);
    }

    #[test]
    fn an_entry_is_read_only_under_its_own_key_and_with_its_own_body() {
        let e = encode(A, "lean", &layer(A, true)).unwrap().unwrap();
        assert!(decode(&e[..], A, "lean").is_some());
        assert!(decode(&e[..], B, "lean").is_none(), "another digest");
        assert!(decode(&e[..], A, "deep").is_none(), "other analysis options");
        let plain = zstd::decode_all(&e[..]).unwrap();
        let changed = String::from_utf8(plain).unwrap().replace("\"size\":42", "\"size\":43");
        assert!(decode(&zstd::encode_all(changed.as_bytes(), 3).unwrap()[..], A, "lean").is_none(), "body hash");
        // An entry that decodes past the bound is dropped, not read into memory whole.
        let n = zstd::decode_all(&e[..]).unwrap().len() as u64;
        assert!(decode_bounded(&e[..], A, "lean", n).is_some());
        assert!(decode_bounded(&e[..], A, "lean", n - 1).is_none());
    }
}
