//! Sharding a registry scan over machines: the `--shard K/N` flag, which images a shard takes,
//! and whether the summaries handed to `merge` are one complete set of shards.

use sha2::{Digest, Sha256};

/// A `--shard` value or a summary's shard label that does not hold.
#[derive(Debug, thiserror::Error)]
pub enum ShardError {
    #[error("--shard {shard:?}: expected K/N")]
    Syntax { shard: String },
    /// `part` is `K` or `N`.
    #[error("--shard {shard:?}: {part} is not a number")]
    NotNumber { shard: String, part: &'static str },
    #[error("--shard index/N needs JOB_COMPLETION_INDEX (set by Kubernetes Indexed Jobs)")]
    NoJobIndex,
    #[error("JOB_COMPLETION_INDEX is not a number")]
    BadJobIndex,
    #[error("--shard {k}/{n}: K must be in 0..N")]
    OutOfRange { k: u64, n: u64 },
    #[error("summaries of different shardings (of {n} and of {m}): merge the runs of one sharding")]
    Mixed { n: u64, m: u64 },
    /// The shards, `K/N` joined by `, `.
    #[error("shard {0} given more than once")]
    Twice(String),
    #[error("incomplete: shard {0} missing")]
    Missing(String),
}

/// `K/N` (0-based K), or `index/N` with K from JOB_COMPLETION_INDEX (Kubernetes Indexed Jobs):
/// the `--shard` flag, and the shard labels a summary records.
pub fn parse(s: &str) -> Result<(u64, u64), ShardError> {
    let (k, n) = s.split_once('/').ok_or_else(|| ShardError::Syntax { shard: s.to_string() })?;
    let n: u64 = n.parse().map_err(|_| ShardError::NotNumber { shard: s.to_string(), part: "N" })?;
    let k: u64 = if k == "index" {
        std::env::var("JOB_COMPLETION_INDEX")
            .map_err(|_| ShardError::NoJobIndex)?
            .parse()
            .map_err(|_| ShardError::BadJobIndex)?
    } else {
        k.parse().map_err(|_| ShardError::NotNumber { shard: s.to_string(), part: "K" })?
    };
    if n == 0 || k >= n {
        return Err(ShardError::OutOfRange { k, n });
    }
    Ok((k, n))
}

/// The shard (0..n) an image belongs to: a hash of its `repo:tag`, so adding images never moves
/// others, and the split does not depend on the address the registry is reached by (a mirror, a
/// port-forward, a loopback port).
pub fn of(repo_tag: &str, n: u64) -> u64 {
    let h = Sha256::digest(repo_tag.as_bytes());
    u64::from_be_bytes(h[..8].try_into().expect("8 bytes")) % n.max(1)
}

/// Sharded summaries must be one complete set: the same N, every K once. A missing shard would
/// otherwise merge into a report that looks whole.
pub fn check_complete(shards: &[String]) -> Result<(), ShardError> {
    if shards.is_empty() {
        return Ok(());
    }
    let parsed = shards.iter().map(|s| parse(s)).collect::<Result<Vec<_>, _>>()?;
    let n = parsed[0].1;
    if let Some((_, m)) = parsed.iter().find(|(_, m)| *m != n) {
        return Err(ShardError::Mixed { n, m: *m });
    }
    let mut seen = vec![0u32; n as usize];
    for (k, _) in &parsed {
        seen[*k as usize] += 1;
    }
    let twice: Vec<String> = (0..n).filter(|k| seen[*k as usize] > 1).map(|k| format!("{k}/{n}")).collect();
    if !twice.is_empty() {
        return Err(ShardError::Twice(twice.join(", ")));
    }
    let missing: Vec<String> = (0..n).filter(|k| seen[*k as usize] == 0).map(|k| format!("{k}/{n}")).collect();
    if !missing.is_empty() {
        return Err(ShardError::Missing(missing.join(", ")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_are_stable_and_cover_every_k() {
        let all: Vec<u64> = (0..100).map(|i| of(&format!("r/x:{i}"), 4)).collect();
        assert!((0..4).all(|k| all.contains(&k)));
        assert_eq!(of("r/x:1", 4), of("r/x:1", 4));
    }

    #[test]
    fn a_set_of_shards_is_whole_or_refused() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert!(check_complete(&s(&["1/2", "0/2"])).is_ok());
        assert!(matches!(check_complete(&s(&["0/2"])), Err(ShardError::Missing(m)) if m == "1/2"));
        assert!(matches!(check_complete(&s(&["0/2", "0/2", "1/2"])), Err(ShardError::Twice(t)) if t == "0/2"));
        assert!(matches!(check_complete(&s(&["0/2", "1/3"])), Err(ShardError::Mixed { n: 2, m: 3 })));
        assert!(matches!(parse("2/2"), Err(ShardError::OutOfRange { k: 2, n: 2 })));
        assert!(matches!(parse("a/2"), Err(ShardError::NotNumber { part: "K", .. })));
    }
}
