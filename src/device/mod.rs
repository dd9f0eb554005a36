//! On-device proof: the image's modules loaded on the real GPU(s) the way the CUDA runtime loads
//! them (`cuModuleLoadData` on the whole container), their SASS and PTX entries loaded on their
//! own to see whether the driver used native code or JIT (JIT timed, its log kept), functions
//! enumerated and their attributes queried, a canary kernel run, optionally every kernel launched
//! in an isolated child process; and every driver outcome compared with the static verdict.

pub mod driver;
pub mod isolate;

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::cuda::compat::{self, Image, ImageKind, JitEnv, Verdict};
use crate::cuda::{Cc, CudaVersion};
use crate::image::ImageReport;
use crate::inspect::decompress::decompress;
use crate::inspect::fatbin::{Compression, EntryKind};
use crate::inspect::{Container, Entry};
use driver::{DeviceInfo, Driver, Function, Load};

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
    /// How the module reaches the driver in production (registered, standalone,
    /// library-managed, driver-library): what the static verdicts count it for.
    pub loading: String,
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

/// A module the static analysis saw but that is not handed to the driver.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SkippedModule {
    pub binary: String,
    pub module: String,
    pub reason: String,
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
        let b = crate::lint::facts::binary(f);
        if !b.facts.loadable {
            continue;
        }
        let registered = if !b.facts.driver_library.is_empty() {
            "driver-library"
        } else if r.cubin.is_some() || r.ptx.is_some() || b.facts.kind == "fatbin" {
            "standalone"
        } else {
            "registered"
        };
        let managed = if b.facts.driver_library.is_empty() { "library-managed" } else { "driver-library" };
        let containers =
            r.containers.iter().map(|c| (c, registered)).chain(r.hidden_containers.iter().map(|c| (c, managed)));
        for (c, loading) in containers {
            if c.relocatable || c.kernel_less() {
                continue;
            }
            if c.problem_count() > 0 {
                let first = c
                    .problems
                    .iter()
                    .chain(
                        c.entries
                            .iter()
                            .flat_map(|e| e.problems.iter().chain(e.images.iter().flat_map(|i| &i.problems))),
                    )
                    .next()
                    .map_or_else(|| "damaged entries".to_string(), |p| p.message.clone());
                skipped.push(SkippedModule {
                    binary: r.path.clone(),
                    module: c.label(),
                    reason: format!("damaged: {first}"),
                });
                continue;
            }
            let Some(bytes) = &c.bytes else {
                skipped.push(SkippedModule {
                    binary: r.path.clone(),
                    module: c.label(),
                    reason: "its bytes were not captured".into(),
                });
                continue;
            };
            let (entries, kernels) = entry_loads(c, bytes);
            plans.push(ModulePlan {
                binary: r.path.clone(),
                label: c.label(),
                loading: loading.into(),
                whole: bytes.clone(),
                images: crate::lint::facts::container_images(c),
                entries,
                kernels,
            });
        }
        for h in &r.hidden_cubins {
            if let Some(bytes) = &h.bytes
                && h.cubin.loadable()
                && h.cubin.problems.is_empty()
            {
                let img = Image {
                    kind: ImageKind::Sass,
                    cc: Cc::from_sm(h.cubin.sm),
                    suffix: h.cubin.suffix,
                    isa: None,
                    needs_driver: None,
                };
                plans.push(ModulePlan {
                    binary: r.path.clone(),
                    label: h.label(),
                    loading: managed.into(),
                    whole: bytes.clone(),
                    images: vec![img],
                    entries: vec![EntryLoad {
                        label: h.cubin.arch(),
                        kind: ImageKind::Sass,
                        bytes: Ok(bytes.to_vec()),
                    }],
                    kernels: h.cubin.kernels.clone(),
                });
            }
        }
        let cubin_problem = r.cubin.as_ref().and_then(|c| c.problems.first()).cloned();
        if let Some(why) = cubin_problem.or_else(|| {
            (r.cubin.is_some() || r.ptx.is_some()).then(|| r.problems.first().map(|p| p.message.clone())).flatten()
        }) {
            let module = if r.cubin.is_some() { "cubin" } else { "ptx" };
            skipped.push(SkippedModule {
                binary: r.path.clone(),
                module: module.into(),
                reason: format!("damaged: {why}"),
            });
            continue;
        }
        if let (Some(c), Some(bytes)) = (&r.cubin, &r.bytes) {
            let img =
                Image { kind: ImageKind::Sass, cc: Cc::from_sm(c.sm), suffix: c.suffix, isa: None, needs_driver: None };
            plans.push(ModulePlan {
                binary: r.path.clone(),
                label: "cubin".into(),
                loading: "standalone".into(),
                whole: bytes.clone(),
                images: vec![img],
                entries: vec![EntryLoad { label: c.arch(), kind: ImageKind::Sass, bytes: Ok(bytes.to_vec()) }],
                kernels: c.kernels.clone(),
            });
        }
        if let (Some(p), Some(bytes)) = (&r.ptx, &r.bytes) {
            let img = Image {
                kind: ImageKind::Ptx,
                cc: Cc::from_sm(p.sm),
                suffix: p.suffix,
                isa: Some((p.version[0], p.version[1])),
                needs_driver: None,
            };
            let text = nul_terminated(bytes.to_vec());
            plans.push(ModulePlan {
                binary: r.path.clone(),
                label: "ptx".into(),
                loading: "standalone".into(),
                whole: Arc::new(text.clone()),
                images: vec![img],
                entries: vec![EntryLoad {
                    label: format!("compute_{}{}", p.sm, p.suffix.as_str()),
                    kind: ImageKind::Ptx,
                    bytes: Ok(text),
                }],
                kernels: Vec::new(),
            });
        }
    }
    (plans, skipped)
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EntryResult {
    pub image: String,
    pub kind: ImageKind,
    #[serde(flatten)]
    pub load: Load,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LaunchResult {
    pub kernel: String,
    /// launched, faulted, timed-out, skipped.
    pub status: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ModuleResult {
    pub binary: String,
    pub module: String,
    pub device: u32,
    /// The static verdict for this device and its driver (`native`, `jit`, `no-image` ...).
    pub static_result: String,
    pub static_image: String,
    /// The error the static analysis predicts (0: loads).
    pub static_error: u32,
    /// What `cuModuleLoadData` on the whole container returned.
    pub driver: Load,
    /// native (a cubin of the module loads on its own), jit (only PTX does), failed.
    pub how: String,
    pub entries: Vec<EntryResult>,
    /// Milliseconds spent compiling PTX (the PTX entries loaded on their own).
    pub jit_ms: f64,
    pub functions: Vec<Function>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub launches: Vec<LaunchResult>,
    /// How the module reaches the driver in production (registered, standalone,
    /// library-managed, driver-library); only the first two count for the binary's verdict.
    #[serde(default)]
    pub loading: String,
    /// The driver did not do what the static verdict says.
    pub disagrees: bool,
    #[serde(default)]
    pub disagreement: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Canary {
    pub device: u32,
    pub ok: bool,
    pub detail: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeviceReport {
    pub driver_version: i32,
    pub devices: Vec<DeviceInfo>,
    pub canary: Vec<Canary>,
    pub modules: Vec<ModuleResult>,
    /// Modules not handed to the driver, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<SkippedModule>,
}

pub struct DeviceOptions {
    /// Device ordinals; all when empty.
    pub devices: Vec<u32>,
    pub launch: bool,
    /// How long one kernel launch may take before its child process is killed.
    pub timeout: Duration,
    /// How long one module load (JIT included) may take before the load worker is killed.
    pub load_timeout: Duration,
    pub jit_env: JitEnv,
}

fn static_name(v: &Verdict) -> (&'static str, String) {
    match v {
        Verdict::Native { image } => ("native", image.clone()),
        Verdict::Jit { image, .. } => ("jit", image.clone()),
        Verdict::NoImage { .. } => ("no-image", String::new()),
        Verdict::PtxTooNew { image, .. } => ("ptx-too-new", image.clone()),
        Verdict::JitDisabled { image, .. } => ("jit-disabled", image.clone()),
    }
}

/// Compares the driver's outcome with the static verdict: the result code, and for modules that
/// load, whether native code or the JIT was what made them load.
pub fn compare(v: &Verdict, driver_result: u32, how: &str) -> Option<String> {
    let expected = v.error().unwrap_or(0);
    let (name, image) = static_name(v);
    if expected != driver_result {
        return Some(format!(
            "static analysis predicts {} ({name}{}), the driver returned {}",
            if expected == 0 {
                "a successful load".to_string()
            } else {
                format!("{} ({expected})", driver::error_name(expected))
            },
            if image.is_empty() { String::new() } else { format!(" {image}") },
            if driver_result == 0 {
                "success".to_string()
            } else {
                format!("{} ({driver_result})", driver::error_name(driver_result))
            }
        ));
    }
    if expected == 0 && how != name && (how == "native" || how == "jit") {
        return Some(format!("static analysis predicts {name} ({image}), but the driver's load went {how}"));
    }
    None
}

/// A module's outcome on a device set against its static verdict there.
pub fn judge(
    binary: &str,
    module: &str,
    device: u32,
    verdict: &Verdict,
    driver: Load,
    how: &str,
    entries: Vec<EntryResult>,
) -> ModuleResult {
    let jit_ms =
        entries.iter().filter(|e| e.kind != ImageKind::Sass && e.load.result == 0).fold(0.0, |a, e| a + e.load.ms);
    let (name, image) = static_name(verdict);
    let disagreement = if how == "crashed" {
        // No result code to compare: the driver never answered.
        Some(format!(
            "static analysis predicts {name}{}, but {}",
            if image.is_empty() { String::new() } else { format!(" {image}") },
            driver.error
        ))
    } else {
        compare(verdict, driver.result, how)
    };
    ModuleResult {
        binary: binary.into(),
        module: module.into(),
        device,
        static_result: name.into(),
        static_image: image,
        static_error: verdict.error().unwrap_or(0),
        driver,
        how: how.into(),
        entries,
        jit_ms,
        functions: Vec::new(),
        launches: Vec::new(),
        loading: String::new(),
        disagrees: disagreement.is_some(),
        disagreement: disagreement.unwrap_or_default(),
    }
}

pub fn run(driver: &Driver, plans: &Arc<Vec<ModulePlan>>, o: &DeviceOptions) -> Result<DeviceReport, String> {
    let all = driver.devices()?;
    if all.is_empty() {
        return Err("the NVIDIA driver sees no GPU".into());
    }
    let chosen: Vec<&(DeviceInfo, Cc)> =
        all.iter().filter(|(d, _)| o.devices.is_empty() || o.devices.contains(&d.index)).collect();
    if chosen.is_empty() {
        return Err(format!("no device {:?} (the driver sees {})", o.devices, all.len()));
    }
    let driver_cuda: CudaVersion = driver.cuda_version();
    let mut report = DeviceReport {
        driver_version: driver.version,
        devices: Vec::new(),
        canary: Vec::new(),
        modules: Vec::new(),
        skipped: Vec::new(),
    };
    for (info, cc) in chosen {
        driver.use_device(info.index)?;
        report.devices.push(info.clone());
        let canary = driver.canary();
        report.canary.push(Canary { device: info.index, ok: canary.is_ok(), detail: canary.unwrap_or_else(|e| e) });
        let loaded = load_isolated(info.index, plans, o.load_timeout);
        for (p, outcome) in plans.iter().zip(loaded) {
            let verdict = compat::decide(&p.images, *cc, Some(driver_cuda), o.jit_env);
            let (load, functions, mut results) = match outcome {
                Ok(l) => (l.load, l.functions, l.entries.into_iter()),
                Err(why) => {
                    let crashed = Load::refused(999, why);
                    let mut r = judge(&p.binary, &p.label, info.index, &verdict, crashed, "crashed", Vec::new());
                    r.loading = p.loading.clone();
                    report.modules.push(r);
                    continue;
                }
            };
            // The worker loaded only the images that could be extracted, in order.
            let entries: Vec<EntryResult> = p
                .entries
                .iter()
                .map(|e| {
                    let load = match &e.bytes {
                        Ok(_) => results
                            .next()
                            .unwrap_or_else(|| Load::refused(999, "no result from the load worker".into())),
                        Err(err) => Load::refused(200, format!("not extracted: {err}")),
                    };
                    EntryResult { image: e.label.clone(), kind: e.kind, load }
                })
                .collect();
            let native = entries.iter().any(|e| e.kind == ImageKind::Sass && e.load.result == 0);
            let jit = entries.iter().any(|e| e.kind != ImageKind::Sass && e.load.result == 0);
            let how = if load.result != 0 {
                "failed"
            } else if native {
                "native"
            } else if jit {
                "jit"
            } else {
                "unknown"
            };
            let launches = if o.launch && load.result == 0 {
                launch_isolated(info.index, p, &functions, o.timeout)
            } else {
                Vec::new()
            };
            let mut r = judge(&p.binary, &p.label, info.index, &verdict, load, how, entries);
            r.loading = p.loading.clone();
            r.functions = functions;
            r.launches = launches;
            report.modules.push(r);
        }
    }
    Ok(report)
}

/// What the load worker did with one module.
#[derive(Debug, Serialize, Deserialize)]
struct Loaded {
    load: Load,
    functions: Vec<Function>,
    /// The module's extracted images, each loaded on its own, in plan order.
    entries: Vec<Load>,
}

/// One module as the load worker reads it: this line, then the bytes it announces.
#[derive(Debug, Serialize, Deserialize)]
struct Frame {
    whole: usize,
    entries: Vec<usize>,
    kernels: Vec<String>,
}

fn feed(w: &mut dyn std::io::Write, plans: &[ModulePlan]) -> std::io::Result<()> {
    for p in plans {
        let ok: Vec<&Vec<u8>> = p.entries.iter().filter_map(|e| e.bytes.as_ref().ok()).collect();
        let frame =
            Frame { whole: p.whole.len(), entries: ok.iter().map(|b| b.len()).collect(), kernels: p.kernels.clone() };
        writeln!(w, "{}", serde_json::to_string(&frame).map_err(std::io::Error::other)?)?;
        w.write_all(&p.whole)?;
        for b in ok {
            w.write_all(b)?;
        }
    }
    w.flush()
}

/// Every module loaded by a worker process (`cudalint device-child --load`): the driver is handed
/// whatever the image holds, and a module that crashes or hangs it ends that worker, is reported
/// as such, and the next worker carries on after it.
fn load_isolated(device: u32, plans: &Arc<Vec<ModulePlan>>, quiet: Duration) -> Vec<Result<Loaded, String>> {
    let exe = std::env::current_exe().unwrap_or_else(|_| "cudalint".into());
    let n = plans.len();
    let mut out: Vec<Option<Result<Loaded, String>>> = (0..n).map(|_| None).collect();
    let mut start = 0;
    while start < n {
        let mut cmd = std::process::Command::new(&exe);
        cmd.args(["device-child", "--load", "--device", &device.to_string()]);
        let (ps, from) = (Arc::clone(plans), start);
        let outcome = match isolate::run_with(&mut cmd, move |w| feed(w, &ps[from..]), quiet) {
            Ok(o) => o,
            Err(e) => {
                let why = format!("the load worker did not start: {e}");
                out[start..].iter_mut().for_each(|o| *o = Some(Err(why.clone())));
                break;
            }
        };
        let mut running: Option<usize> = None;
        for line in &outcome.lines {
            if let Some(i) = line.strip_prefix("start ").and_then(|i| i.parse::<usize>().ok()) {
                running = Some(from + i);
            } else if let Some((i, json)) = line.strip_prefix("done ").and_then(|r| r.split_once(' ')) {
                let Ok(i) = i.parse::<usize>() else { continue };
                let Some(slot) = out.get_mut(from + i) else { continue };
                *slot = Some(
                    serde_json::from_str(json).map_err(|e| format!("unreadable answer from the load worker: {e}")),
                );
                running = None;
                start = from + i + 1;
            }
        }
        if let Some(i) = running {
            let what = if outcome.timed_out {
                format!("the driver did not finish within {} s", quiet.as_secs())
            } else {
                format!("the driver {}", outcome.ending())
            };
            out[i] = Some(Err(format!("{what} while loading this module (isolated; the scan went on)")));
            start = i + 1;
        } else if start < n {
            // The worker failed outside any module (no driver, no device): the rest cannot load.
            let why = format!("the load worker {}: {}", outcome.ending(), outcome.stderr);
            out[start..].iter_mut().for_each(|o| *o = Some(Err(why.clone())));
            break;
        }
    }
    out.into_iter().map(|o| o.unwrap_or_else(|| Err("not loaded".into()))).collect()
}

/// The worker side of `load_isolated`: reads modules from standard input (a `Frame` line, then
/// its bytes), loads each whole and then image by image, and prints `start I` before and
/// `done I JSON` after each.
pub fn load_worker(device: u32) -> Result<(), String> {
    use std::io::{BufRead, Read, Write};
    let driver = Driver::load()?;
    driver.use_device(device)?;
    let mut input = std::io::BufReader::with_capacity(1 << 20, std::io::stdin().lock());
    let mut out = std::io::stdout().lock();
    let mut line = String::new();
    for i in 0.. {
        line.clear();
        if input.read_line(&mut line).map_err(|e| e.to_string())? == 0 {
            return Ok(());
        }
        let frame: Frame = serde_json::from_str(&line).map_err(|e| format!("bad frame: {e}"))?;
        let mut read = |n: usize| -> Result<Vec<u8>, String> {
            let mut b = vec![0u8; n];
            input.read_exact(&mut b).map_err(|e| e.to_string())?;
            Ok(b)
        };
        let whole = read(frame.whole)?;
        let images = frame.entries.iter().map(|&n| read(n)).collect::<Result<Vec<_>, _>>()?;
        let _ = writeln!(out, "start {i}");
        let _ = out.flush();
        let (load, module) = driver.load_module(&whole);
        let functions = module.as_ref().map(|m| driver.functions(m, &frame.kernels)).unwrap_or_default();
        if let Some(m) = module {
            driver.unload(m);
        }
        let entries = images
            .iter()
            .map(|b| {
                let (mut l, m) = driver.load_module(b);
                if let Some(m) = m {
                    // Under lazy loading (the default since CUDA 12.2) code may be finalised on
                    // first use: asking for the functions forces it, so the time counts the whole
                    // compilation.
                    let t = std::time::Instant::now();
                    driver.functions(&m, &frame.kernels);
                    l.ms += t.elapsed().as_secs_f64() * 1000.0;
                    driver.unload(m);
                }
                l
            })
            .collect();
        let done = Loaded { load, functions, entries };
        let _ = writeln!(out, "done {i} {}", serde_json::to_string(&done).map_err(|e| e.to_string())?);
        let _ = out.flush();
    }
    Ok(())
}

/// Every kernel of the module launched once, in child processes (`cudalint device-child`): a
/// fault ends that child, the next one carries on after the kernel that faulted.
fn launch_isolated(device: u32, p: &ModulePlan, functions: &[Function], timeout: Duration) -> Vec<LaunchResult> {
    let names: Vec<String> =
        if functions.is_empty() { p.kernels.clone() } else { functions.iter().map(|f| f.name.clone()).collect() };
    let exe = std::env::current_exe().unwrap_or_else(|_| "cudalint".into());
    let mut results: Vec<LaunchResult> = Vec::new();
    let mut start = 0;
    while start < names.len() {
        let mut cmd = std::process::Command::new(&exe);
        cmd.args(["device-child", "--device", &device.to_string(), "--skip", &start.to_string()]);
        cmd.args(&names);
        let outcome = match isolate::run(&mut cmd, &p.whole, timeout) {
            Ok(o) => o,
            Err(e) => {
                results.extend(names[start..].iter().map(|n| LaunchResult {
                    kernel: n.clone(),
                    status: "skipped".into(),
                    detail: e.to_string(),
                }));
                break;
            }
        };
        let mut running: Option<String> = None;
        for line in &outcome.lines {
            if let Some(n) = line.strip_prefix("start ") {
                running = Some(n.to_string());
            } else if let Some(rest) = line.strip_prefix("done ") {
                let (n, code) = rest.rsplit_once(' ').unwrap_or((rest, "0"));
                let code: u32 = code.parse().unwrap_or(1);
                let status = if code == 0 { "launched" } else { "faulted" };
                results.push(LaunchResult {
                    kernel: n.to_string(),
                    status: status.into(),
                    detail: if code == 0 { String::new() } else { driver::error_name(code) },
                });
                running = None;
                start += 1;
            } else if let Some(rest) = line.strip_prefix("skip ") {
                let (n, why) = rest.split_once(' ').unwrap_or((rest, ""));
                results.push(LaunchResult { kernel: n.to_string(), status: "skipped".into(), detail: why.into() });
                start += 1;
            }
        }
        if let Some(n) = running {
            let (status, detail) = if outcome.timed_out {
                ("timed-out", format!("no result within {} s", timeout.as_secs()))
            } else {
                (
                    "faulted",
                    format!(
                        "the child process died{}",
                        outcome.signal().map(|s| format!(" (signal {s})")).unwrap_or_default()
                    ),
                )
            };
            results.push(LaunchResult { kernel: n, status: status.into(), detail });
            start += 1;
        } else if outcome.timed_out || outcome.status.is_some_and(|s| !s.success()) && results.len() == start {
            // Died before starting a kernel: nothing more will work in this module.
            results.extend(names[start..].iter().map(|n| LaunchResult {
                kernel: n.clone(),
                status: "skipped".into(),
                detail: "child failed before launching".into(),
            }));
            break;
        }
    }
    results
}

/// The child side of `launch_isolated`: loads the module from standard input and launches the
/// kernels from `skip` on, printing `start NAME` before and `done NAME CODE` after each. After a
/// fault the context is unusable, so it stops there.
pub fn child(device: u32, skip: usize, names: &[String]) -> Result<(), String> {
    use std::io::{Read, Write};
    let driver = Driver::load()?;
    driver.use_device(device)?;
    let mut image = Vec::new();
    std::io::stdin().read_to_end(&mut image).map_err(|e| e.to_string())?;
    let (load, m) = driver.load_module(&image);
    let m = m.ok_or_else(|| format!("module does not load: {}", load.error))?;
    let mut out = std::io::stdout().lock();
    for n in names.iter().skip(skip) {
        let _ = writeln!(out, "start {n}");
        let _ = out.flush();
        match driver.launch_zeroed(&m, n) {
            Ok(code) => {
                let _ = writeln!(out, "done {n} {code}");
                let _ = out.flush();
                if code != 0 {
                    break;
                }
            }
            Err(why) => {
                let _ = writeln!(out, "skip {n} {why}");
            }
        }
    }
    Ok(())
}
