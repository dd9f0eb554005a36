//! Layers applied in order, as a container runtime would: whiteouts, opaque directories and
//! overwrites from each layer hide what the layers below left; what remains on top is the image.

use std::collections::BTreeMap;

use super::analyze::{LayerFile, LayerSummary};
use super::path::{self, normalize_escaped};

/// A file of the final filesystem: its paths, the index of the layer its bytes come from.
pub struct Merged {
    pub layer: usize,
    pub file: LayerFile,
    /// Symbolic links (anywhere in the image) that resolve to one of its paths.
    pub symlinks: Vec<String>,
}

const MAX_LINK_HOPS: usize = 40;

pub fn merge(layers: Vec<LayerSummary>) -> Vec<Merged> {
    let mut live: Vec<(usize, LayerFile)> = Vec::new();
    let mut links: BTreeMap<String, String> = BTreeMap::new();
    for (i, mut l) in layers.into_iter().enumerate() {
        l.finish();
        let linked = hard_links(&live, &l, &links);
        for (_, f) in &mut live {
            f.paths.retain(|p| !l.hides(p));
        }
        for (target, p) in linked {
            match target {
                Target::Below(j) => live[j].1.paths.push(p),
                Target::Here(j) => l.files[j].paths.push(p),
            }
        }
        live.retain(|(_, f)| !f.paths.is_empty());
        links.retain(|p, _| !l.hides(p));
        for (p, t) in l.symlinks {
            links.insert(p, t);
        }
        for mut f in l.files {
            f.report.path = f.paths[0].clone();
            live.push((i, f));
        }
    }
    let mut out: Vec<Merged> = live
        .into_iter()
        .map(|(layer, mut file)| {
            file.paths.sort();
            file.report.path = file.paths[0].clone();
            Merged { layer, file, symlinks: Vec::new() }
        })
        .collect();
    // Which link resolves to which file.
    let mut index: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, m) in out.iter().enumerate() {
        for p in &m.file.paths {
            index.insert(p.as_str(), i);
        }
    }
    let mut attach: Vec<(usize, String)> = Vec::new();
    for l in links.keys() {
        if let Some(target) = resolve(&links, l)
            && let Some(&i) = index.get(target.as_str())
        {
            attach.push((i, l.clone()));
        }
    }
    for (i, l) in attach {
        out[i].symlinks.push(l);
    }
    out.sort_by(|a, b| a.file.paths[0].cmp(&b.file.paths[0]));
    out
}

enum Target {
    /// A file of the layers below (index in `live`).
    Below(usize),
    /// A file of this layer (index in its `files`).
    Here(usize),
}

/// The files this layer's unresolved hard links name. containerd (archive/tar.go,
/// `hardlinkRootPath`) resolves symbolic links in the target's directory inside the root and
/// links the file it finds, in the filesystem the layers below left (the snapshot being
/// applied); moby (pkg/archive createTarFile) calls link(2), which also follows them. A link
/// made to a file keeps its bytes when a later layer whites the target out, so the link is a
/// new name of that file, resolved before this layer's own whiteouts apply (an entry order
/// the summary does not keep: a link written after a whiteout of its target fails at the
/// runtime, and reading it here only adds a name).
fn hard_links(
    live: &[(usize, LayerFile)],
    l: &LayerSummary,
    links: &BTreeMap<String, String>,
) -> Vec<(Target, String)> {
    if l.hardlinks.is_empty() {
        return Vec::new();
    }
    let mut view = links.clone();
    view.extend(l.symlinks.iter().cloned());
    let mut index: BTreeMap<&str, Target> = BTreeMap::new();
    for (j, (_, f)) in live.iter().enumerate() {
        for p in &f.paths {
            index.insert(p.as_str(), Target::Below(j));
        }
    }
    // This layer's files replace what is below at the same path.
    for (j, f) in l.files.iter().enumerate() {
        for p in &f.paths {
            index.insert(p.as_str(), Target::Here(j));
        }
    }
    let mut out = Vec::new();
    for (p, t) in &l.hardlinks {
        // The final component is not followed (link(2) links a symbolic link itself).
        let dir = resolve(&view, path::parent(t));
        let found = dir.map(|d| path::join(&d, path::file_name(t)));
        let hit = found.as_deref().and_then(|f| index.get(f)).or_else(|| index.get(t.as_str()));
        match hit {
            Some(Target::Below(j)) => out.push((Target::Below(*j), p.clone())),
            Some(Target::Here(j)) => out.push((Target::Here(*j), p.clone())),
            None => {}
        }
    }
    out
}

/// Resolves `p` through the image's symbolic links (every component, like realpath inside the
/// image root). None for dangling chains that loop.
pub fn resolve(links: &BTreeMap<String, String>, p: &str) -> Option<String> {
    let mut pending: Vec<String> = p.split('/').filter(|c| !c.is_empty()).map(str::to_string).rev().collect();
    let mut cur = String::from("/");
    let mut hops = 0;
    while let Some(c) = pending.pop() {
        let next = match c.as_str() {
            "." => continue,
            ".." => path::parent(&cur).to_string(),
            c => path::join(&cur, c),
        };
        match links.get(&next) {
            Some(t) => {
                hops += 1;
                if hops > MAX_LINK_HOPS {
                    return None;
                }
                let base = if t.starts_with('/') { String::new() } else { cur.clone() };
                let (target, _) = normalize_escaped(&format!("{base}/{t}"));
                pending.extend(target.split('/').filter(|c| !c.is_empty()).map(str::to_string).rev());
                cur = String::from("/");
            }
            None => cur = next,
        }
    }
    Some(cur)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_relative_absolute_and_chained_links() {
        let links: BTreeMap<String, String> = [
            ("/usr/lib/libcudart.so", "libcudart.so.12"),
            ("/usr/lib/libcudart.so.12", "/usr/lib/real/libcudart.so.12.9.79"),
            ("/lib", "usr/lib"),
            ("/loop", "/loop"),
        ]
        .into_iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        assert_eq!(resolve(&links, "/usr/lib/libcudart.so").unwrap(), "/usr/lib/real/libcudart.so.12.9.79");
        assert_eq!(resolve(&links, "/lib/libcudart.so").unwrap(), "/usr/lib/real/libcudart.so.12.9.79");
        assert_eq!(resolve(&links, "/loop"), None);
    }
}
