//! Registry-wide scans: the repositories (`/v2/_catalog`) and tags of a registry, filtered and
//! split into shards deterministically, so many machines can share one registry.

use std::cmp::Ordering;
use std::time::Instant;

use oci_client::Reference;

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

/// Tags compared with digit runs as numbers (`v1.10` after `v1.9`): `--newest`'s tiebreak
/// between tags created at the same time.
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

/// An RFC 3339 time (`created` of an image config: `2024-05-01T12:34:56.123456789Z`, or with
/// an offset) as UTC seconds and nanoseconds, comparable; None if it is not one. Parsed here,
/// not compared as text: offsets and fraction lengths differ between image builders.
pub fn parse_time(s: &str) -> Option<(i64, u32)> {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let t = b.get(r)?;
        t.iter().all(u8::is_ascii_digit).then(|| t.iter().fold(0i64, |n, d| n * 10 + i64::from(d - b'0')))
    };
    let sep = |i: usize, c: &[u8]| b.get(i).is_some_and(|x| c.contains(x));
    if !(sep(4, b"-") && sep(7, b"-") && sep(10, b"Tt ") && sep(13, b":") && sep(16, b":")) {
        return None;
    }
    let (y, mo, d, h, mi, sec) = (num(0..4)?, num(5..7)?, num(8..10)?, num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut i = 19;
    let mut nanos = 0u32;
    if sep(i, b".") {
        let digits = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 {
            return None;
        }
        for k in 0..9 {
            let d = if k < digits { u32::from(b[i + 1 + k] - b'0') } else { 0 };
            nanos = nanos * 10 + d;
        }
        i += 1 + digits;
    }
    let offset = match b.get(i..)? {
        b"Z" | b"z" => 0,
        [sign @ (b'+' | b'-'), ..] if b.len() == i + 6 && sep(i + 3, b":") => {
            let (oh, om) = (num(i + 1..i + 3)?, num(i + 4..i + 6)?);
            let o = oh * 3600 + om * 60;
            if *sign == b'+' { o } else { -o }
        }
        _ => return None,
    };
    // Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some((days * 86_400 + h * 3600 + mi * 60 + sec - offset, nanos))
}

/// The `n` newest of `tags`, given each one's creation time (`created`, in the same order;
/// None where it could not be read): newest creation time first, tags created at the same
/// time in natural order (`v10` before `v9`), tags without a creation time after all others.
pub fn newest(tags: Vec<String>, created: &[Option<String>], n: usize) -> Vec<String> {
    let mut keyed: Vec<(Option<(i64, u32)>, String)> = tags
        .into_iter()
        .enumerate()
        .map(|(i, t)| (created.get(i).cloned().flatten().as_deref().and_then(parse_time), t))
        .collect();
    // Descending: `Some` above `None`, later times above earlier, later tags above earlier.
    keyed.sort_by(|(ta, a), (tb, b)| tb.cmp(ta).then_with(|| natural_cmp(b, a)));
    keyed.into_iter().take(n).map(|(_, t)| t).collect()
}

/// `list`'s question for `--newest`: the creation time of each of a repository's tags (RFC 3339,
/// as the image config says it; None where it cannot be read), in the order asked.
pub type CreationTimes<'a> = dyn FnMut(&str, &[String]) -> Vec<Option<String>> + 'a;

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

/// Every `registry/repo:tag` to scan, sorted. With `--newest`, `created(repo, tags)` gives the
/// creation time of each of a repository's tags (asked only of repositories with more tags than
/// that): the registry's API knows names, not ages, so reading image configs is the caller's.
pub fn list(
    registry: &str,
    sel: &Selection,
    ro: &RegistryOptions,
    created: &mut CreationTimes<'_>,
) -> Result<Vec<String>, RegistryError> {
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
        if let Some(n) = sel.newest.filter(|&n| n < tags.len()) {
            let times = created(&repo, &tags);
            tags = newest(tags, &times, n);
        }
        if let Some((k, n)) = sel.shard {
            tags.retain(|t| super::shard::of(&format!("{repo}:{t}"), n) == k);
        }
        images.extend(tags.into_iter().map(|t| format!("{registry}/{repo}:{t}")));
    }
    images.sort();
    Ok(images)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn natural_order() {
        let mut v = vec!["v1.10", "v1.9", "v1.2", "latest", "v1.10-rc1"];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(v, ["latest", "v1.2", "v1.9", "v1.10", "v1.10-rc1"]);
    }

    #[test]
    fn times_parse_to_utc_and_compare_across_offsets_and_fractions() {
        assert_eq!(parse_time("1970-01-01T00:00:00Z"), Some((0, 0)));
        assert_eq!(parse_time("2000-03-01T00:00:00Z"), Some((951_868_800, 0)));
        assert_eq!(parse_time("2024-05-01T12:34:56.5Z"), Some((1_714_566_896, 500_000_000)));
        assert_eq!(parse_time("2024-05-01T14:34:56.5+02:00"), parse_time("2024-05-01T12:34:56.500Z"));
        assert_eq!(parse_time("2024-05-01T10:34:56.123456789-02:00"), Some((1_714_566_896, 123_456_789)));
        assert!(parse_time("0001-01-01T00:00:00Z").unwrap() < parse_time("1970-01-01T00:00:00Z").unwrap());
        for bad in [
            "",
            "2024-05-01",
            "2024-05-01T12:34:56",
            "2024-13-01T00:00:00Z",
            "2024-05-01T12:34:56.Z",
            "x024-05-01T12:34:56Z",
        ] {
            assert_eq!(parse_time(bad), None, "{bad}");
        }
    }

    #[test]
    fn newest_orders_by_creation_time_then_natural_order_unreadable_last() {
        let tags: Vec<String> = ["v14", "v15", "zstd", "latest", "v9", "old"].map(String::from).to_vec();
        let t = |s: &str| Some(s.to_string());
        let created = [
            t("2024-01-01T00:00:00Z"),
            t("2024-01-01T00:00:00Z"),
            None,
            t("2024-03-01T00:00:00Z"),
            t("2024-02-01T00:00:00+00:00"),
            t("not a time"),
        ];
        assert_eq!(newest(tags.clone(), &created, 3), ["latest", "v9", "v15"]);
        assert_eq!(newest(tags.clone(), &created, 4), ["latest", "v9", "v15", "v14"]);
        // Unreadable times come after every readable one, among themselves in natural order.
        assert_eq!(newest(tags, &created, 6)[4..], ["zstd", "old"]);
    }
}
