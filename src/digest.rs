//! Content digests (OCI `algorithm:encoded`): the algorithms cudalint can compute, hashing as
//! bytes pass, checking a document against its digest, and the one error for a digest that is
//! refused or does not match. Parsing and algorithm names are oci-spec's ([`Digest`],
//! [`DigestAlgorithm`]); what this adds is the computing. A digest whose algorithm cudalint
//! cannot compute is refused, never trusted.
//!
//! A new algorithm: one row in [`SUPPORTED`].

use std::str::FromStr;

use sha2::Digest as _;
use sha2::digest::DynDigest;

use crate::escape::text as esc;
pub use oci_spec::image::{Digest, DigestAlgorithm};

/// JSON documents (manifests, configs, indexes, listing pages) larger than this are refused.
pub const MAX_JSON: u64 = 16 << 20;

/// A hash function's fresh state.
type State = Box<dyn DynDigest + Send>;

/// An algorithm and how to start hashing by it.
type Row = (DigestAlgorithm, fn() -> State);

/// The algorithms cudalint computes, in the order messages name them.
const SUPPORTED: &[Row] = &[
    (DigestAlgorithm::Sha256, || Box::new(sha2::Sha256::new())),
    (DigestAlgorithm::Sha512, || Box::new(sha2::Sha512::new())),
];

/// The algorithms cudalint computes.
pub fn algorithms() -> impl Iterator<Item = &'static DigestAlgorithm> {
    SUPPORTED.iter().map(|(a, _)| a)
}

/// Their names joined by `sep` ("sha256, sha512"), for messages.
fn names(sep: &str) -> String {
    algorithms().map(|a| a.as_ref()).collect::<Vec<_>>().join(sep)
}

/// Why a digest was refused, or what did not match it. Digests are escaped by the constructors
/// (they may come from a user or a registry); `what` is the caller's text, escaped by the caller.
#[derive(Debug, thiserror::Error)]
pub enum DigestError {
    /// A digest to fetch by (a reference, a descriptor) whose algorithm cudalint cannot
    /// compute: refused before anything is read.
    #[error("digest {digest}: algorithm {alg:?} cannot be verified ({} can)", names(" and "))]
    Unsupported { digest: String, alg: String },
    /// Content read whose digest's algorithm cudalint cannot compute.
    #[error("{what}: digest {digest}: algorithm not supported ({}): cannot verify it", names(", "))]
    Unverifiable { what: String, digest: String },
    /// A digest of a supported algorithm whose encoded part is not its length of lowercase hex
    /// (digests become parts of URLs and paths).
    #[error("digest {0} is malformed")]
    Malformed(String),
    #[error("{what}: digest mismatch: expected {expected}, content is {actual}")]
    Mismatch { what: String, expected: String, actual: String },
}

impl DigestError {
    pub fn unverifiable(what: &str, digest: &str) -> DigestError {
        DigestError::Unverifiable { what: what.to_string(), digest: esc(digest) }
    }

    pub fn mismatch(what: &str, expected: &str, actual: String) -> DigestError {
        DigestError::Mismatch { what: what.to_string(), expected: esc(expected), actual }
    }
}

/// `digest`, accepted only when cudalint can compute its algorithm and it is well formed.
pub fn parse(digest: &str) -> Result<Digest, DigestError> {
    let (alg, _) = digest.split_once(':').unwrap_or(("", digest));
    if Hasher::new(&DigestAlgorithm::from(alg)).is_none() {
        return Err(DigestError::Unsupported { digest: esc(digest), alg: esc(alg) });
    }
    Digest::from_str(digest).map_err(|_| DigestError::Malformed(esc(digest)))
}

/// A digest computed as bytes pass (`update`), by one of the supported algorithms.
pub struct Hasher {
    algorithm: DigestAlgorithm,
    state: State,
}

impl Hasher {
    /// `None` for an algorithm cudalint cannot compute.
    pub fn new(algorithm: &DigestAlgorithm) -> Option<Hasher> {
        let (a, state) = SUPPORTED.iter().find(|(a, _)| a == algorithm)?;
        Some(Hasher { algorithm: a.clone(), state: state() })
    }

    pub fn sha256() -> Hasher {
        Hasher::new(&DigestAlgorithm::Sha256).expect("sha256 is supported")
    }

    /// The hasher for `digest`'s algorithm (the part before `:`; the rest is not looked at).
    pub fn for_digest(digest: &str) -> Option<Hasher> {
        Hasher::new(&DigestAlgorithm::from(digest.split_once(':')?.0))
    }

    pub fn algorithm(&self) -> &DigestAlgorithm {
        &self.algorithm
    }

    pub fn update(&mut self, b: &[u8]) {
        self.state.update(b);
    }

    /// `algorithm:hex`.
    pub fn finish(self) -> String {
        format!("{}:{}", self.algorithm, hex::encode(self.state.finalize()))
    }
}

/// The `sha256:` digest of `b`.
pub fn sha256(b: &[u8]) -> String {
    let mut h = Hasher::sha256();
    h.update(b);
    h.finish()
}

/// The digest of `b` by `algorithm`, if cudalint can compute it.
pub fn compute(algorithm: &DigestAlgorithm, b: &[u8]) -> Option<String> {
    let mut h = Hasher::new(algorithm)?;
    h.update(b);
    Some(h.finish())
}

/// Checks `bytes` (`what`, in messages) against `digest`.
pub fn verify(what: &str, digest: &str, bytes: &[u8]) -> Result<(), DigestError> {
    let Some(mut h) = Hasher::for_digest(digest) else {
        return Err(DigestError::unverifiable(what, digest));
    };
    h.update(bytes);
    let actual = h.finish();
    if actual != digest {
        return Err(DigestError::mismatch(what, digest, actual));
    }
    Ok(())
}

/// The digest a blob's file name carries: `blobs/<alg>/<hex>` (an OCI layout) or `<hex>.json`
/// (sha256, a docker-archive config).
pub fn from_blob_name(name: &str) -> Option<String> {
    let base = name.rsplit('/').next()?;
    let hex = base.strip_suffix(".json").unwrap_or(base);
    let alg = if name.contains("blobs/") { name.split('/').rev().nth(1)? } else { "sha256" };
    let algorithm = algorithms().find(|a| a.as_ref() == alg)?;
    let len = algorithm.digest_hexlen()? as usize;
    (hex.len() == len && hex.bytes().all(|b| b.is_ascii_hexdigit())).then(|| format!("{alg}:{hex}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_refuses_what_cannot_be_checked_and_says_why() {
        let a = "a".repeat(64);
        assert_eq!(parse(&format!("sha256:{a}")).unwrap().digest(), a);
        assert!(parse(&format!("sha512:{}", "b".repeat(128))).is_ok());
        let e = parse(&format!("md5:{a}")).unwrap_err();
        assert!(matches!(e, DigestError::Unsupported { .. }), "{e}");
        assert_eq!(
            e.to_string(),
            format!("digest md5:{a}: algorithm \"md5\" cannot be verified (sha256 and sha512 can)")
        );
        assert!(matches!(parse("nocolon"), Err(DigestError::Unsupported { .. })));
        assert!(matches!(parse("sha256:ABC"), Err(DigestError::Malformed(_))));
        assert!(matches!(parse(&format!("sha256:{}", "A".repeat(64))), Err(DigestError::Malformed(_))));
        assert!(matches!(parse(&format!("sha512:{a}")), Err(DigestError::Malformed(_))));
    }

    #[test]
    fn hashing_and_verifying() {
        let empty = "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        assert_eq!(sha256(b""), empty);
        let mut h = Hasher::for_digest("sha512:").unwrap();
        h.update(b"a");
        h.update(b"bc");
        assert_eq!(Some(h.finish()), compute(&DigestAlgorithm::Sha512, b"abc"));
        assert!(Hasher::for_digest("sha384:").is_none());
        assert!(verify("x", empty, b"").is_ok());
        let e = verify("config x", empty, b"y").unwrap_err();
        assert!(e.to_string().starts_with(&format!("config x: digest mismatch: expected {empty}, content is sha256:")));
        let e = verify("config x", "sha384:ab", b"").unwrap_err();
        assert_eq!(
            e.to_string(),
            "config x: digest sha384:ab: algorithm not supported (sha256, sha512): cannot verify it"
        );
    }

    #[test]
    fn blob_names() {
        let a = "a".repeat(64);
        assert_eq!(from_blob_name(&format!("blobs/sha256/{a}")), Some(format!("sha256:{a}")));
        assert_eq!(from_blob_name(&format!("{a}.json")), Some(format!("sha256:{a}")));
        assert_eq!(from_blob_name(&format!("blobs/sha512/{a}")), None);
        assert_eq!(from_blob_name(&format!("blobs/md5/{a}")), None);
        assert_eq!(from_blob_name("abc/layer.tar"), None);
    }
}
