//! Digests cudalint can check (OCI: sha256, sha512), computed as bytes pass.

use sha2::{Digest as _, Sha256, Sha512};

/// A digest algorithm cudalint can check (OCI: sha256, sha512).
pub enum Hasher {
    Sha256(Sha256),
    Sha512(Sha512),
}

impl Hasher {
    /// The hasher for `digest`'s algorithm; `None` for an algorithm cudalint cannot check.
    pub fn for_digest(digest: &str) -> Option<Hasher> {
        match digest.split_once(':').map(|(a, _)| a) {
            Some("sha256") => Some(Hasher::Sha256(Sha256::new())),
            Some("sha512") => Some(Hasher::Sha512(Sha512::new())),
            _ => None,
        }
    }
    pub fn update(&mut self, b: &[u8]) {
        match self {
            Hasher::Sha256(h) => h.update(b),
            Hasher::Sha512(h) => h.update(b),
        }
    }
    pub fn finish(self) -> String {
        match self {
            Hasher::Sha256(h) => format!("sha256:{}", hex::encode(h.finalize())),
            Hasher::Sha512(h) => format!("sha512:{}", hex::encode(h.finalize())),
        }
    }
}
