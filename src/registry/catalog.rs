//! Registry-wide scans: the repositories (`/v2/_catalog`) and tags of a registry, filtered and
//! split into shards deterministically, so many machines can share one registry.

use std::cmp::Ordering;
use std::time::Instant;

use oci_client::Reference;
use sha2::{Digest, Sha256};

use super::RegistryError;
use super::{RegistryOptions, Remote};
use crate::escape::text as esc;

fn glob(patterns: &[String]) -> Result<Option<globset::GlobSet>, RegistryError> {
    if patterns.is_empty() {
        return Ok(None);
    }
    let mut b = globset::GlobSetBuilder::new();
    for p in patterns {
        b.add(globset::Glob::new(p).map_err(|e| RegistryError::Glob(format!("bad glob {p:?}: {e}")))?);
    }
    b.build().map(Some).map_err(|e| RegistryError::Glob(e.to_string()))
}

/// Tags compared with digit runs as numbers (`v1.10` after `v1.9`): "newest" for `--newest`.
pub fn natural_cmp(a: &str, b: &str) -> Ordering {
    let chunks = |s: &str| -> Vec<(bool, String)> {
        let mut out: Vec<(bool, String)> = Vec::new();
        for c in s.chars() {
            let d = c.is_ascii_digit();
            match out.last_mut() {
                Some((kind, buf)) if *kind == d => buf.push(c),
                _ => out.push((d, c.to_string())),
            }
        }
        out
    };
    let (ca, cb) = (chunks(a), chunks(b));
    for (x, y) in ca.iter().zip(&cb) {
        let o = match (x.0, y.0) {
            (true, true) => {
                let (p, q) = (x.1.trim_start_matches('0'), y.1.trim_start_matches('0'));
                p.len().cmp(&q.len()).then_with(|| p.cmp(q))
            }
            _ => x.1.cmp(&y.1),
        };
        if o != Ordering::Equal {
            return o;
        }
    }
    ca.len().cmp(&cb.len()).then_with(|| a.cmp(b))
}

/// The shard (0..n) an image belongs to: a hash of its name, so adding images never moves others.
pub fn shard_of(image: &str, n: u64) -> u64 {
    let h = Sha256::digest(image.as_bytes());
    u64::from_be_bytes(h[..8].try_into().expect("8 bytes")) % n.max(1)
}

pub struct Selection {
    pub repos: Vec<String>,
    pub tags: Vec<String>,
    pub newest: Option<usize>,
    /// (K, N): keep shard K of N.
    pub shard: Option<(u64, u64)>,
    /// Repositories that hold no images to scan: cudalint's own analysis store, whose claim
    /// and analysis artifacts are not images.
    pub exclude: Vec<String>,
}

/// Every `registry/repo:tag` to scan, sorted.
pub fn list(registry: &str, sel: &Selection, ro: &RegistryOptions) -> Result<Vec<String>, RegistryError> {
    let repo_glob = glob(&sel.repos)?;
    let tag_glob = glob(&sel.tags)?;
    let probe = Reference::with_tag(registry.to_string(), "catalog".to_string(), "latest".to_string());
    // One deadline for the whole listing.
    let deadline = Instant::now() + ro.deadline;
    let remote = Remote::connect_scoped(probe, ro, "registry:catalog:*".into(), deadline)?;
    let mut repos = remote.listing("/v2/_catalog", "repositories", "catalog")?;
    repos.retain(|r| repo_glob.as_ref().is_none_or(|g| g.is_match(r)) && !sel.exclude.contains(r));
    repos.sort();
    repos.dedup();
    let mut images = Vec::new();
    for repo in repos {
        let r = Reference::with_tag(registry.to_string(), repo.clone(), "latest".to_string());
        let remote = Remote::connect_scoped(r, ro, format!("repository:{repo}:pull"), deadline)?;
        let what = format!("tags of {}", esc(&repo));
        let mut tags = remote.listing(&format!("/v2/{repo}/tags/list"), "tags", &what)?;
        tags.retain(|t| tag_glob.as_ref().is_none_or(|g| g.is_match(t)));
        tags.sort_by(|a, b| natural_cmp(a, b));
        tags.dedup();
        if let Some(n) = sel.newest {
            let skip = tags.len().saturating_sub(n);
            tags.drain(..skip);
        }
        images.extend(tags.into_iter().map(|t| format!("{registry}/{repo}:{t}")));
    }
    if let Some((k, n)) = sel.shard {
        images.retain(|i| shard_of(i, n) == k);
    }
    images.sort();
    Ok(images)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn natural_order_and_stable_shards() {
        let mut v = vec!["v1.10", "v1.9", "v1.2", "latest", "v1.10-rc1"];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(v, ["latest", "v1.2", "v1.9", "v1.10", "v1.10-rc1"]);
        let all: Vec<u64> = (0..100).map(|i| shard_of(&format!("r/x:{i}"), 4)).collect();
        assert!((0..4).all(|k| all.contains(&k)));
        assert_eq!(shard_of("r/x:1", 4), shard_of("r/x:1", 4));
    }
}
