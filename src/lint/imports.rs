//! Extension modules a Python package imports only on demand, by the package's own `.py` files
//! (read as the layers streamed past, `layer::python`): one that `import pkg` does not load is
//! optional, and its kernels failing on a GPU fail only the code path that imports it.
//!
//! Required (judged as any binary) unless every one of these holds: the file is an extension
//! module of a package directory (`pkg/_ext.cpython-311-x86_64-linux-gnu.so`, `_C.abi3.so`,
//! `_ext.so`); the package has its `__init__.py` and every `.py` file of it was read; no
//! module-level import reaches it from `pkg/__init__.py`, transitively through the modules those
//! imports load (a module's import loads its parent packages too); and some `.py` file of the
//! package names it in an import statement (inside a function, behind `try/except ImportError`,
//! or in a module the package does not import). What no import statement names (loaded by
//! `ctypes`, `importlib`, another package) stays required: no evidence, no downgrade.

use std::collections::{BTreeMap, BTreeSet};

use super::facts::Binary;
use crate::image::ImageReport;
use crate::layer::python::{How, PyFile, PyImport, module_at};

/// What decides an extension module, for [`on_demand`].
#[derive(Debug, Default)]
pub struct OnDemand {
    /// By binary index: where the package imports it, in words
    /// (`pkg/backends/fa3.py:12, inside a function`).
    pub sites: BTreeMap<usize, String>,
    /// By binary index: extension modules the package's own imports load when it is imported,
    /// or whose package's `.py` files could not all be read (fail closed): judged as any binary,
    /// never as an optional extension for other chips (CL016's guess from its code alone).
    pub required: BTreeSet<usize>,
    /// Extension modules judged required only because the package's imports could not all be
    /// read (fail closed), said once a package.
    pub notes: Vec<String>,
}

/// An extension module's file-name suffix after its first `.` (CPython's
/// `importlib.machinery.EXTENSION_SUFFIXES`: `cpython-311-x86_64-linux-gnu.so`, `abi3.so`, `so`).
fn extension_suffix(s: &str) -> bool {
    s == "so"
        || s.strip_suffix(".so")
            .is_some_and(|tag| tag.starts_with("cpython-") || tag == "abi3" || tag.starts_with("pypy"))
}

/// Where and how each site imports, in words.
fn site(site_dir: &str, f: &PyFile, i: &PyImport) -> String {
    let rel = f.path.strip_prefix(site_dir).unwrap_or(&f.path).trim_start_matches('/');
    let how = match i.how {
        How::Function => "inside a function",
        How::Guarded => "behind try/except ImportError",
        How::Module => "at module level of a module the package does not import when it is imported",
    };
    format!("{rel}:{}, {how}", i.line)
}

/// The extension modules among `binaries` that their package imports only on demand.
pub fn on_demand(scan: &ImageReport, binaries: &[Binary]) -> OnDemand {
    let mut out = OnDemand::default();
    if scan.python.is_empty() {
        return out;
    }
    // A wheel scanned as itself names its members under its site directory (`/pkg/_C.so`).
    let wheel = scan.image.source == crate::image::SourceKind::Wheel;
    // Each package's `.py` files: (site directory, top-level package) -> files.
    let mut packages: BTreeMap<(String, String), Vec<&PyFile>> = BTreeMap::new();
    for f in &scan.python {
        if let Some((site_dir, _)) = module_at(&f.path, wheel, |s| s == "py") {
            let top = f.module.split('.').next().unwrap_or_default();
            packages.entry((site_dir.to_string(), top.to_string())).or_default().push(f);
        }
    }
    let mut noted: BTreeSet<(String, String)> = BTreeSet::new();
    for (bi, b) in binaries.iter().enumerate() {
        let Some((site_dir, ext)) = module_at(&b.facts.path, wheel, extension_suffix) else { continue };
        let top = ext.split('.').next().unwrap_or_default();
        let key = (site_dir.to_string(), top.to_string());
        let Some(files) = packages.get(&key) else { continue };
        // Import sites that name the extension, first by path and line.
        let mut sites: Vec<(&PyFile, &PyImport)> =
            files.iter().flat_map(|f| f.imports.iter().filter(|i| i.module == ext).map(move |i| (*f, i))).collect();
        if !files.iter().any(|f| f.module == top && f.path.ends_with("/__init__.py")) {
            continue;
        }
        if scan.python_cut || files.iter().any(|f| f.unread.is_some()) {
            if noted.insert(key.clone()) {
                let why = files
                    .iter()
                    .find_map(|f| f.unread.as_ref().map(|w| format!("{} not read: {w}", f.path)))
                    .unwrap_or_else(|| "a layer had more `.py` files than cudalint reads".into());
                out.notes.push(format!(
                    "{site_dir}/{top}: {why}; its extension modules are judged as imported when the package is \
                     (their failures stay errors)"
                ));
            }
            out.required.insert(bi);
            continue;
        }
        if loaded_at_import(files, top).contains(ext.as_str()) {
            out.required.insert(bi);
            continue;
        }
        if sites.is_empty() {
            continue;
        }
        sites.sort_by(|a, b| (&a.0.path, a.1.line).cmp(&(&b.0.path, b.1.line)));
        let mut words: Vec<String> = sites.iter().take(2).map(|(f, i)| site(site_dir, f, i)).collect();
        if sites.len() > 2 {
            words.push(format!("and {} more", sites.len() - 2));
        }
        out.sites.insert(bi, words.join("; "));
    }
    out
}

/// Whether a package's `.py` file is code the package itself uses: its module is reached from
/// the package's `__init__.py` by its own imports of any kind (module level, in a function,
/// guarded), as item 5 tells optional code by. A file of a module nothing of the package imports
/// (a tool script: ONNX Runtime's `transformers/models/whisper/whisper_jump_times.py`) is not.
/// Fail closed: where the package's files are not all read, or it has no `__init__.py`, every
/// file counts.
pub fn used_by_package(scan: &ImageReport) -> impl Fn(&PyFile) -> bool + '_ {
    let wheel = scan.image.source == crate::image::SourceKind::Wheel;
    let mut packages: BTreeMap<(String, String), Vec<&PyFile>> = BTreeMap::new();
    for f in &scan.python {
        if let Some((site_dir, _)) = module_at(&f.path, wheel, |s| s == "py") {
            let top = f.module.split('.').next().unwrap_or_default();
            packages.entry((site_dir.to_string(), top.to_string())).or_default().push(f);
        }
    }
    let reached: BTreeMap<(String, String), Option<BTreeSet<String>>> = packages
        .iter()
        .map(|((site, top), files)| {
            let whole = !scan.python_cut
                && files.iter().all(|f| f.unread.is_none())
                && files.iter().any(|f| f.module == *top && f.path.ends_with("/__init__.py"));
            let set = whole.then(|| reached(files, top, false).into_iter().map(str::to_string).collect());
            ((site.clone(), top.clone()), set)
        })
        .collect();
    move |f: &PyFile| {
        let Some((site_dir, _)) = module_at(&f.path, wheel, |s| s == "py") else { return true };
        let top = f.module.split('.').next().unwrap_or_default();
        match reached.get(&(site_dir.to_string(), top.to_string())) {
            Some(Some(set)) => set.contains(&f.module),
            _ => true,
        }
    }
}

/// The modules `import top` loads: `top` and, transitively, every module a module-level import
/// of a loaded module names, with their parent packages.
fn loaded_at_import<'a>(files: &[&'a PyFile], top: &'a str) -> BTreeSet<&'a str> {
    reached(files, top, true)
}

/// The modules reached from `top` by the package's own imports: only module-level ones
/// (`import top` loads them), or any.
fn reached<'a>(files: &[&'a PyFile], top: &'a str, module_level: bool) -> BTreeSet<&'a str> {
    let by_module: BTreeMap<&str, &PyFile> = files.iter().map(|f| (f.module.as_str(), *f)).collect();
    let mut loaded: BTreeSet<&str> = BTreeSet::new();
    let mut work: Vec<&str> = vec![top];
    while let Some(m) = work.pop() {
        if !loaded.insert(m) {
            continue;
        }
        let Some(f) = by_module.get(m) else { continue };
        for i in f.imports.iter().filter(|i| !module_level || i.how == How::Module) {
            let name = i.module.as_str();
            // `import a.b.c` loads `a`, `a.b` and `a.b.c`.
            work.extend(name.char_indices().filter(|(_, c)| *c == '.').map(|(at, _)| &name[..at]));
            work.push(name);
        }
    }
    loaded
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extension_suffixes_are_cpythons() {
        for ok in ["so", "abi3.so", "cpython-311-x86_64-linux-gnu.so", "pypy310-pp73-x86_64-linux-gnu.so"] {
            assert!(extension_suffix(ok), "{ok}");
        }
        for bad in ["so.12", "py", "x.so", "so.1.2"] {
            assert!(!extension_suffix(bad), "{bad}");
        }
    }
}
