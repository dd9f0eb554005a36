//! What to load on the device: every module of the module model (`crate::module`) that has
//! bytes and is not damaged, as the runtime hands it to the driver (the whole container), and
//! its SASS and PTX images extracted to be loaded on their own.

use std::sync::Arc;

use super::report::{Loading, SkippedModule};
use crate::cuda::compat::{Image, ImageKind};
use crate::image::ImageReport;
use crate::inspect::decompress::decompress;
use crate::inspect::fatbin::{Compression, EntryKind};
use crate::inspect::{Container, Entry};
use crate::module::{self, Source};

/// One image of a module, ready to load on its own.
#[derive(Debug, Clone)]
pub struct EntryLoad {
    pub label: String,
    pub kind: ImageKind,
    /// The cubin, or NUL-terminated PTX; an error when it could not be extracted.
    pub bytes: Result<Vec<u8>, String>,
}

/// What will be loaded for one module.
#[derive(Debug, Clone)]
pub struct ModulePlan {
    pub binary: String,
    pub label: String,
    /// How the module reaches the driver in production: what the static verdicts count it for.
    pub loading: Loading,
    pub whole: Arc<Vec<u8>>,
    pub images: Vec<Image>,
    pub entries: Vec<EntryLoad>,
    /// Kernel names from the cubins (for drivers that cannot enumerate functions).
    pub kernels: Vec<String>,
}

fn payload(c: &[u8], container: &Container, e: &Entry) -> Result<Vec<u8>, String> {
    let rel = e.offset.checked_sub(container.offset).ok_or("entry before its container")?;
    let start = rel + u64::from(e.header_size);
    let len = if e.compression == Compression::None { e.payload_size } else { e.compressed_size };
    let raw = usize::try_from(start)
        .ok()
        .and_then(|s| c.get(s..s.checked_add(usize::try_from(len).ok()?)?))
        .ok_or("payload outside the container bytes")?;
    decompress(e.compression, raw, e.uncompressed_size)
}

fn nul_terminated(mut ptx: Vec<u8>) -> Vec<u8> {
    if let Some(end) = ptx.iter().position(|&b| b == 0) {
        ptx.truncate(end);
    }
    ptx.push(0);
    ptx
}

fn entry_loads(c: &Container, bytes: &[u8]) -> (Vec<EntryLoad>, Vec<String>) {
    let mut out = Vec::new();
    let mut kernels = Vec::new();
    for e in &c.entries {
        // A concatenated entry's images sit in its decompressed blob.
        let (items, blob): (Vec<&Entry>, Option<Result<Vec<u8>, String>>) = if e.kind == EntryKind::Concatenated {
            (e.images.iter().collect(), Some(payload(bytes, c, e)))
        } else {
            (vec![e], None)
        };
        for i in items {
            let kind = match i.kind {
                EntryKind::Elf if i.cubin.as_ref().is_none_or(|c| c.loadable()) => ImageKind::Sass,
                EntryKind::Ptx => ImageKind::Ptx,
                _ => continue,
            };
            let data = match &blob {
                Some(Ok(b)) => usize::try_from(i.offset)
                    .ok()
                    .and_then(|o| b.get(o..o.checked_add(usize::try_from(i.payload_size).ok()?)?))
                    .map(<[u8]>::to_vec)
                    .ok_or_else(|| "image outside the concatenated blob".to_string()),
                Some(Err(e)) => Err(e.clone()),
                None => payload(bytes, c, i),
            };
            let data = match kind {
                ImageKind::Ptx => data.map(nul_terminated),
                _ => data,
            };
            if let (ImageKind::Sass, Ok(d)) = (kind, &data)
                && let Ok(info) = crate::inspect::cubin::parse(&mut &d[..], true)
            {
                kernels.extend(info.kernels);
            }
            out.push(EntryLoad { label: i.arch.clone(), kind, bytes: data });
        }
    }
    kernels.sort();
    kernels.dedup();
    (out, kernels)
}

/// Which modules are loaded and how: every module the static analysis counts (kernel-less stubs
/// and relocatable material excluded), its entries split into SASS and PTX.
pub fn plan(inv: &ImageReport) -> Vec<ModulePlan> {
    plan_all(inv).0
}

/// As `plan`, with the modules left out on purpose: the driver is no validator (it trusts the
/// sizes in a fatbin and may read past the buffer), so a module the inspector found damaged is
/// reported, not loaded.
pub fn plan_all(inv: &ImageReport) -> (Vec<ModulePlan>, Vec<SkippedModule>) {
    let mut plans = Vec::new();
    let mut skipped = Vec::new();
    for f in &inv.files {
        let r = &f.file;
        let found = module::modules(r);
        let driver_library = found.driver_library.is_driver();
        for m in found.modules {
            let skip = |reason: String| SkippedModule { binary: r.path.clone(), module: m.label.clone(), reason };
            // Nothing is left out unsaid: a damaged module, or one whose bytes were not kept,
            // is listed with its reason (bare cubins kept as data too).
            if let Some(why) = &m.damage {
                skipped.push(skip(format!("damaged: {why}")));
                continue;
            }
            let container = m.source.container(r);
            let Some(bytes) = m.bytes.clone() else {
                skipped.push(skip("its bytes were not captured".into()));
                continue;
            };
            // The host driver's own modules are their own class, except whole cubin and PTX
            // files, which are loaded as they are.
            let loading = match m.source {
                Source::CubinFile | Source::PtxFile => m.loading,
                _ if driver_library => Loading::DriverLibrary,
                _ => m.loading,
            };
            let (whole, entries, kernels) = match (container, m.source) {
                (Some(c), _) => {
                    let (entries, kernels) = entry_loads(c, &bytes);
                    (bytes, entries, kernels)
                }
                (None, Source::PtxFile) => {
                    let text = nul_terminated(bytes.to_vec());
                    let label =
                        r.ptx.as_ref().map(|p| format!("compute_{}{}", p.sm, p.suffix.as_str())).unwrap_or_default();
                    let entry = EntryLoad { label, kind: ImageKind::Ptx, bytes: Ok(text.clone()) };
                    (Arc::new(text), vec![entry], m.kernels)
                }
                (None, _) => {
                    let label = match m.source {
                        Source::HiddenCubin(i) => r.hidden_cubins[i].cubin.arch(),
                        _ => r.cubin.as_ref().map(|c| c.arch()).unwrap_or_default(),
                    };
                    let entry = EntryLoad { label, kind: ImageKind::Sass, bytes: Ok(bytes.to_vec()) };
                    (bytes, vec![entry], m.kernels)
                }
            };
            plans.push(ModulePlan {
                binary: r.path.clone(),
                label: m.label,
                loading,
                whole,
                images: m.images,
                entries,
                kernels,
            });
        }
    }
    (plans, skipped)
}
