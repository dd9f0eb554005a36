//! `cudalint diff OLD NEW`: what an upgrade changes in where an image runs — GPUs lost and
//! gained, the driver floor, the architectures and PTX each binary carries, run-time compilers,
//! and packages whose build changed (cu12 → cu13). Both sides are support matrices from the
//! same evaluation as `scan`.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::facts;
use super::report::LintImage;
use super::support::{Support, SupportReport};
use crate::cuda::DriverVersion;
use crate::image::ImageReport;
use crate::layer::path::file_name;
use crate::schema::Tool;

pub const SCHEMA: &str = crate::schema::DIFF;

/// Old and new value of one thing.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Change<T> {
    pub old: T,
    pub new: T,
}

/// A GPU whose result or minimum driver changed.
#[derive(Debug, Clone, Serialize)]
pub struct GpuChange {
    pub name: String,
    pub compute_capability: String,
    pub result: Change<Support>,
    pub min_driver: Change<Option<String>>,
}

/// A binary (matched by library name across the two images) whose device code changed.
#[derive(Debug, Clone, Serialize)]
pub struct BinaryChange {
    /// `libtorch_cuda.so`, `libcublas.so` (the CUDA major's `.12`/`.13` left out).
    pub name: String,
    /// Paths in the old and new image (empty: absent there).
    pub path: Change<String>,
    pub package: Change<String>,
    pub lost_sass: Vec<String>,
    pub gained_sass: Vec<String>,
    pub lost_ptx: Vec<String>,
    pub gained_ptx: Vec<String>,
}

/// A run-time compiler whose version changed, appeared or went.
#[derive(Debug, Clone, Serialize)]
pub struct CompilerChange {
    pub kind: String,
    /// The package that brings it (`triton`), or its file name.
    pub owner: String,
    pub version: Change<String>,
}

crate::schema::words! {
    /// What became of a package between the two images.
    pub enum PackageDelta {
        Added = "added",
        Removed = "removed",
        /// Another version, or another build of it (`nvidia-cublas-cu12` → `nvidia-cublas`).
        Changed = "changed",
    }
}

/// A package that came, went or changed: `torch 2.8.0 → 2.9.0`, `nvidia-cublas-cu12 →
/// nvidia-cublas`, `flash-attn 2.8.3` removed.
#[derive(Debug, Clone, Serialize)]
pub struct PackageChange {
    /// The name without its CUDA suffix (`nvidia-cublas`).
    pub name: String,
    pub change: PackageDelta,
    /// `nvidia-cublas-cu12 12.8.4.1`; empty: absent.
    pub old: String,
    pub new: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct DiffReport {
    pub schema: &'static str,
    pub tool: Tool,
    /// The images as they were named.
    pub old: String,
    pub new: String,
    pub old_image: LintImage,
    pub new_image: LintImage,
    /// GPUs the old image ran on and the new one does not.
    pub lost: Vec<String>,
    /// GPUs the new image runs on and the old one did not.
    pub gained: Vec<String>,
    /// The driver floor (minor-version-compatibility driver of the CUDA major needed).
    pub floor: Change<String>,
    pub floor_cuda: Change<String>,
    pub summary: Change<String>,
    /// The GPUs `--gpu` named (empty: none named): `gpus` and `unchanged` cover only these.
    pub named: Vec<String>,
    /// GPUs whose result or minimum driver changed (of `named`, where GPUs were named).
    pub gpus: Vec<GpuChange>,
    /// How many GPUs of the same scope kept their result and minimum driver (a GPU neither
    /// image applies to counts only where named).
    pub unchanged: usize,
    pub binaries: Vec<BinaryChange>,
    pub compilers: Vec<CompilerChange>,
    pub packages: Vec<PackageChange>,
    /// Why the diff fails the gate (exit 1): GPUs lost, a floor above `--driver`.
    pub failures: Vec<String>,
}

/// One side: its support matrix and the inventory it was judged from.
pub struct Side<'a> {
    pub support: &'a SupportReport,
    pub inventory: &'a ImageReport,
}

/// `gpus`: only these count for `lost` failing the gate (empty: every GPU the old image ran on);
/// `driver`: the fleet's driver, which the new floor must not exceed.
pub fn diff(old: Side, new: Side, gpus: &[String], driver: Option<&DriverVersion>) -> DiffReport {
    let result = |s: &SupportReport, name: &str| s.gpus.iter().find(|g| g.name == name).map(|g| g.result);
    let mut named: Vec<String> = Vec::new();
    for x in gpus.iter().filter_map(|g| crate::cuda::gpus::lookup(g)) {
        if !named.iter().any(|n| n == x.name) {
            named.push(x.name.to_string());
        }
    }
    let mut lost = Vec::new();
    let mut gained = Vec::new();
    let mut changes = Vec::new();
    let mut unchanged = 0;
    for o in &old.support.gpus {
        let Some(n) = new.support.gpus.iter().find(|g| g.name == o.name) else { continue };
        let asked = named.contains(&o.name);
        if o.result == Support::NotApplicable && n.result == Support::NotApplicable {
            unchanged += usize::from(asked);
            continue;
        }
        // Lost and gained say what the image did, whichever GPUs the fleet has; the table and
        // the count are the fleet's view.
        if o.result.runs() && !n.result.runs() {
            lost.push(o.name.clone());
        } else if !o.result.runs() && n.result.runs() {
            gained.push(o.name.clone());
        }
        if !(named.is_empty() || asked) {
            continue;
        }
        if o.result == n.result && o.min_driver == n.min_driver {
            unchanged += 1;
        } else {
            changes.push(GpuChange {
                name: o.name.clone(),
                compute_capability: o.compute_capability.clone(),
                result: Change { old: o.result, new: n.result },
                min_driver: Change { old: o.min_driver.clone(), new: n.min_driver.clone() },
            });
        }
    }
    let floor = Change { old: old.support.floor.driver.clone(), new: new.support.floor.driver.clone() };
    let mut failures = Vec::new();
    let watched: Vec<&str> =
        lost.iter().filter(|l| named.is_empty() || named.contains(l)).map(String::as_str).collect();
    if !watched.is_empty() {
        failures.push(format!("the new image no longer runs on {}", watched.join(", ")));
    }
    for x in &named {
        // A named GPU the new image does not run on fails the gate even if the old did not.
        if result(new.support, x).is_some_and(|r| !r.runs() && r != Support::NotApplicable) && !lost.contains(x) {
            failures.push(format!("the new image does not run on {x} (nor did the old one)"));
        }
    }
    // Raised above the fleet's driver: a floor the old image already had is no news.
    if let (Some(d), Some(n)) = (driver, DriverVersion::parse(&floor.new))
        && n > *d
        && DriverVersion::parse(&floor.old).is_none_or(|o| n > o)
    {
        let was = DriverVersion::parse(&floor.old).map_or(String::new(), |o| format!(" (was {o})"));
        failures.push(format!("the new image needs driver ≥ {n}{was}, above the fleet's {d}"));
    }
    DiffReport {
        schema: SCHEMA,
        tool: Tool::current(),
        old: old.support.reference.clone(),
        new: new.support.reference.clone(),
        old_image: old.support.image.clone(),
        new_image: new.support.image.clone(),
        lost,
        gained,
        floor,
        floor_cuda: Change { old: old.support.floor.cuda.clone(), new: new.support.floor.cuda.clone() },
        summary: Change { old: old.support.summary.clone(), new: new.support.summary.clone() },
        named,
        gpus: changes,
        unchanged,
        binaries: binaries(old.inventory, new.inventory),
        compilers: compilers(old.inventory, new.inventory),
        packages: packages(old.inventory, new.inventory),
        failures,
    }
}

/// `libcublas.so.12` -> `libcublas.so`; `libtorch_cuda.so` stays.
fn library_name(path: &str) -> String {
    let n = file_name(path);
    match n.find(".so") {
        Some(i) => n[..i + 3].to_string(),
        None => n.to_string(),
    }
}

/// The binaries with device code, by library name; a name held by several files in one image
/// keys each by its path instead.
fn keyed(inv: &ImageReport) -> BTreeMap<String, facts::Binary> {
    let mut bins: Vec<facts::Binary> = inv.files.iter().map(facts::binary).collect();
    // Per-GPU kernel sets a library loads itself are no binary's code: as `scan` counts them.
    super::kernel_sets::mark(&mut bins);
    bins.retain(|b| b.counted().next().is_some() && !b.facts.driver_library.is_driver());
    let mut count: BTreeMap<String, usize> = BTreeMap::new();
    for b in &bins {
        *count.entry(library_name(&b.facts.path)).or_default() += 1;
    }
    bins.into_iter()
        .map(|b| {
            let n = library_name(&b.facts.path);
            let key = if count[&n] > 1 { b.facts.path.clone() } else { n };
            (key, b)
        })
        .collect()
}

fn binaries(old: &ImageReport, new: &ImageReport) -> Vec<BinaryChange> {
    let (o, n) = (keyed(old), keyed(new));
    let keys: BTreeSet<&String> = o.keys().chain(n.keys()).collect();
    let set = |b: Option<&facts::Binary>, ptx: bool| -> BTreeSet<String> {
        b.map(|b| if ptx { b.facts.ptx.clone() } else { b.facts.sass.clone() })
            .unwrap_or_default()
            .into_iter()
            .collect()
    };
    let pkg = |b: Option<&facts::Binary>| {
        b.filter(|b| !b.facts.package.is_empty())
            .map(|b| format!("{} {}", b.facts.package, b.facts.package_version))
            .unwrap_or_default()
    };
    let mut out = Vec::new();
    for k in keys {
        let (ob, nb) = (o.get(k), n.get(k));
        let (os, ns, op, np) = (set(ob, false), set(nb, false), set(ob, true), set(nb, true));
        if os == ns && op == np {
            continue;
        }
        out.push(BinaryChange {
            name: k.clone(),
            path: Change {
                old: ob.map(|b| b.facts.path.clone()).unwrap_or_default(),
                new: nb.map(|b| b.facts.path.clone()).unwrap_or_default(),
            },
            package: Change { old: pkg(ob), new: pkg(nb) },
            lost_sass: by_number(os.difference(&ns)),
            gained_sass: by_number(ns.difference(&os)),
            lost_ptx: by_number(op.difference(&np)),
            gained_ptx: by_number(np.difference(&op)),
        });
    }
    out
}

/// `sm_50, sm_70, sm_100a` in the order of their numbers.
fn by_number<'a>(archs: impl Iterator<Item = &'a String>) -> Vec<String> {
    crate::cuda::sorted_archs(archs.cloned())
}

fn compilers(old: &ImageReport, new: &ImageReport) -> Vec<CompilerChange> {
    let key = |c: &super::compilers::Found| {
        let owner = c.package.split_whitespace().next().map(base_name).unwrap_or_else(|| library_name(&c.path));
        (c.kind.to_string(), owner)
    };
    let collect = |inv: &ImageReport| -> BTreeMap<(String, String), String> {
        super::compilers::inventory(inv).iter().map(|c| (key(c), c.version.clone())).collect()
    };
    let (o, n) = (collect(old), collect(new));
    let keys: BTreeSet<&(String, String)> = o.keys().chain(n.keys()).collect();
    keys.into_iter()
        .filter_map(|k| {
            let (ov, nv) = (o.get(k).cloned().unwrap_or_default(), n.get(k).cloned().unwrap_or_default());
            (ov != nv || o.contains_key(k) != n.contains_key(k)).then(|| CompilerChange {
                kind: k.0.clone(),
                owner: k.1.clone(),
                version: Change { old: ov, new: nv },
            })
        })
        .collect()
}

/// `nvidia-cublas-cu12` -> `nvidia-cublas`; `cupy-cuda12x` -> `cupy` (the knowledge base's builds).
fn base_name(name: &str) -> String {
    crate::knowledge::get().base_name(name).to_string()
}

/// The packages that matter to a GPU diff: those tied to CUDA by name, and those that own a file
/// of the inventory (device code, a CUDA library, a compiler), by manager and name.
fn cuda_owned(inv: &ImageReport) -> BTreeMap<(crate::packages::PackageManager, String), String> {
    inv.cuda_packages
        .iter()
        .chain(inv.files.iter().filter_map(|f| f.package.as_ref()))
        .map(|p| ((p.manager, p.name.clone()), format!("{} {}", p.name, p.version).trim_end().to_string()))
        .collect()
}

/// Each package added, removed or at another version; one removed and one added that are builds
/// of the same package (`nvidia-cublas-cu12` → `nvidia-cublas`) are one change. Several builds of
/// one name on a side (cu11 and cu12 both installed) are each listed: none hides another.
fn packages(old: &ImageReport, new: &ImageReport) -> Vec<PackageChange> {
    let (o, n) = (cuda_owned(old), cuda_owned(new));
    let mut out = Vec::new();
    let mut removed: BTreeMap<(crate::packages::PackageManager, String), Vec<&String>> = BTreeMap::new();
    let mut added: BTreeMap<(crate::packages::PackageManager, String), Vec<&String>> = BTreeMap::new();
    for (k, ov) in &o {
        match n.get(k) {
            Some(nv) if nv != ov => out.push(PackageChange {
                name: base_name(&k.1),
                change: PackageDelta::Changed,
                old: ov.clone(),
                new: nv.clone(),
            }),
            Some(_) => {}
            None => removed.entry((k.0, base_name(&k.1))).or_default().push(ov),
        }
    }
    for (k, nv) in n.iter().filter(|(k, _)| !o.contains_key(*k)) {
        added.entry((k.0, base_name(&k.1))).or_default().push(nv);
    }
    for (k, gone) in &removed {
        match (gone.as_slice(), added.get(k).map(Vec::as_slice)) {
            ([ov], Some([nv])) => out.push(PackageChange {
                name: k.1.clone(),
                change: PackageDelta::Changed,
                old: (*ov).clone(),
                new: (*nv).clone(),
            }),
            _ => out.extend(gone.iter().map(|ov| PackageChange {
                name: k.1.clone(),
                change: PackageDelta::Removed,
                old: (*ov).clone(),
                new: String::new(),
            })),
        }
    }
    for (k, came) in &added {
        if removed.get(k).is_some_and(|g| g.len() == 1) && came.len() == 1 {
            continue;
        }
        out.extend(came.iter().map(|nv| PackageChange {
            name: k.1.clone(),
            change: PackageDelta::Added,
            old: String::new(),
            new: (*nv).clone(),
        }));
    }
    out.sort_by(|a, b| (&a.name, &a.old, &a.new).cmp(&(&b.name, &b.old, &b.new)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn package_and_library_names_lose_their_cuda_major() {
        assert_eq!(base_name("nvidia-cublas-cu12"), "nvidia-cublas");
        assert_eq!(base_name("nvidia-cublas"), "nvidia-cublas");
        assert_eq!(base_name("cupy-cuda12x"), "cupy");
        assert_eq!(base_name("nvidia-cuda-runtime-cu12"), "nvidia-cuda-runtime");
        assert_eq!(base_name("torch"), "torch");
        assert_eq!(library_name("/x/nvidia/cu13/lib/libcublas.so.13"), "libcublas.so");
        assert_eq!(library_name("/x/torch/lib/libtorch_cuda.so"), "libtorch_cuda.so");
    }
}
