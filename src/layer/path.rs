//! Paths inside an image: every tar path is read as an absolute path under the image root.
//!
//! Tar paths are bytes, not necessarily UTF-8. They are kept as strings in a lossless escape
//! ([`escape`]): bytes that are not UTF-8 become `\xNN` and a literal backslash becomes
//! `\x5c`, so two names that differ in any byte stay two names (as files, duplicates and
//! whiteout targets), and valid UTF-8 names without a backslash read as they are.

use std::borrow::Cow;

/// Longest path accepted (Linux PATH_MAX); longer entries are reported and skipped.
pub const MAX_PATH: usize = 4096;

/// `./a//b/../c` -> `/a/c`. `..` never climbs above the root, so a hostile `../../etc/x`
/// names `/etc/x` inside the image (nothing is ever written to disk; this keeps the inventory
/// honest). The flag says the path tried to climb out or was absolute.
pub fn normalize(raw: &[u8]) -> Result<(String, bool), String> {
    if raw.len() > MAX_PATH {
        return Err(format!("path of {} bytes exceeds the {MAX_PATH}-byte limit", raw.len()));
    }
    Ok(normalize_escaped(&escape(raw)))
}

/// [`normalize`] for a path already escaped (a symbolic link's target joined to its directory).
pub fn normalize_escaped(s: &str) -> (String, bool) {
    let mut parts: Vec<&str> = Vec::new();
    let mut climbed = false;
    for c in s.split('/') {
        match c {
            "" | "." => {}
            ".." => climbed |= parts.pop().is_none(),
            c => parts.push(c),
        }
    }
    let mut out = String::with_capacity(s.len() + 1);
    for p in &parts {
        out.push('/');
        out.push_str(p);
    }
    if out.is_empty() {
        out.push('/');
    }
    (out, climbed)
}

/// Raw path bytes as a string, losslessly (see the module notes).
pub fn escape(raw: &[u8]) -> Cow<'_, str> {
    if let Ok(s) = std::str::from_utf8(raw)
        && !s.contains('\\')
    {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(raw.len() + 8);
    for chunk in raw.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c == '\\' {
                out.push_str("\\x5c");
            } else {
                out.push(c);
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    Cow::Owned(out)
}

pub fn parent(p: &str) -> &str {
    match p.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &p[..i],
    }
}

pub fn file_name(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

pub fn join(dir: &str, name: &str) -> String {
    if dir == "/" { format!("/{name}") } else { format!("{dir}/{name}") }
}

/// `p` is `dir` or lies under it.
pub fn within(p: &str, dir: &str) -> bool {
    dir == "/" || p == dir || (p.starts_with(dir) && p.as_bytes().get(dir.len()) == Some(&b'/'))
}

pub fn hash(p: &str) -> u128 {
    xxhash_rust::xxh3::xxh3_128(p.as_bytes())
}

/// Proper ancestors of `p`, nearest first (`/a/b/c` -> `/a/b`, `/a`).
pub fn ancestors(p: &str) -> impl Iterator<Item = &str> {
    let mut cur = p;
    std::iter::from_fn(move || {
        let i = cur.rfind('/')?;
        if i == 0 {
            return None;
        }
        cur = &cur[..i];
        Some(cur)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Package records bound the paths they keep as the walk bounds names.
    #[test]
    fn package_records_bound_paths_as_the_walk_does() {
        assert_eq!(MAX_PATH, crate::packages::MAX_PATH);
    }

    #[test]
    fn hostile_paths_stay_inside_the_root() {
        assert_eq!(normalize(b"./usr//lib/../lib64/x.so").unwrap(), ("/usr/lib64/x.so".into(), false));
        assert_eq!(normalize(b"../../etc/passwd").unwrap(), ("/etc/passwd".into(), true));
        assert_eq!(normalize(b"/abs/x").unwrap().0, "/abs/x");
        assert_eq!(normalize(b"./").unwrap().0, "/");
        assert!(normalize(&vec![b'a'; MAX_PATH + 1]).is_err());
        assert!(within("/a/b", "/a") && !within("/ab", "/a") && within("/a", "/a"));
        assert_eq!(ancestors("/a/b/c").collect::<Vec<_>>(), ["/a/b", "/a"]);
    }

    #[test]
    fn escape_is_lossless_and_leaves_plain_names_alone() {
        assert!(matches!(escape("usr/lib/ü.so".as_bytes()), Cow::Borrowed("usr/lib/ü.so")));
        assert_eq!(escape(b"a\xff\xfe/b"), "a\\xff\\xfe/b");
        assert_eq!(escape(b"a\\xff"), "a\\x5cxff");
        // Names that only differ in invalid UTF-8 (or in a literal `\xff`) stay distinct.
        let names: [&[u8]; 5] =
            [b"lib\xff.so", b"lib\xfe.so", b"lib\xef\xbf\xbd.so", b"lib\\xff.so", b"lib\\x5cxff.so"];
        let escaped: std::collections::BTreeSet<_> = names.iter().map(|n| escape(n)).collect();
        assert_eq!(escaped.len(), names.len());
        assert_eq!(normalize(b"./d/\xff/../x").unwrap().0, "/d/x");
    }
}
