//! Paths inside an image: every tar path is read as an absolute path under the image root.

/// Longest path accepted (Linux PATH_MAX); longer entries are reported and skipped.
pub const MAX_PATH: usize = 4096;

/// `./a//b/../c` -> `/a/c`. `..` never climbs above the root, so a hostile `../../etc/x`
/// names `/etc/x` inside the image (nothing is ever written to disk; this keeps the inventory
/// honest). The flag says the path tried to climb out or was absolute.
pub fn normalize(raw: &[u8]) -> Result<(String, bool), String> {
    if raw.len() > MAX_PATH {
        return Err(format!("path of {} bytes exceeds the {MAX_PATH}-byte limit", raw.len()));
    }
    let s = String::from_utf8_lossy(raw);
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
    Ok((out, climbed))
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
}
