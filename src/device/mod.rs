//! On-device proof: the image's modules loaded on the real GPU(s) the way the CUDA runtime loads
//! them (`cuModuleLoadData` on the whole container), their SASS and PTX entries loaded on their
//! own to see whether the driver used native code or JIT (JIT timed, its log kept), functions
//! enumerated and their attributes queried, a canary kernel run, optionally every kernel launched
//! in an isolated child process; and every driver outcome compared with the static verdict.
//!
//! One job per file: `plan` (what to load), `worker` (the isolated load worker, both sides),
//! `launch` (kernel launches, both sides), `verdict` (driver outcome against the static
//! verdict), `report` (what is reported), `driver` (the CUDA driver API), `isolate` (running a
//! child process that may crash or hang, for `worker` and `launch`). This file runs them.

pub mod driver;
mod error;
pub mod isolate;
mod launch;
mod plan;
mod report;
mod verdict;
mod worker;

use std::sync::Arc;
use std::time::Duration;

use crate::cuda::compat::{self, ImageKind, JitEnv};
use crate::cuda::{Cc, CudaVersion};
use driver::{DeviceInfo, Driver, Load};

pub use error::{DeviceError, error_name};
pub use launch::child;
pub use plan::{EntryLoad, ModulePlan, plan, plan_all};
pub use report::{
    Canary, DeviceReport, EntryResult, How, LaunchResult, LaunchStatus, Loading, ModuleResult, SkippedModule,
    StaticResult,
};
pub use verdict::{compare, judge};
pub use worker::load_worker;

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

pub fn run(driver: &Driver, plans: &Arc<Vec<ModulePlan>>, o: &DeviceOptions) -> Result<DeviceReport, DeviceError> {
    let all = driver.devices()?;
    if all.is_empty() {
        return Err(DeviceError::NoGpu);
    }
    let chosen: Vec<&(DeviceInfo, Cc)> =
        all.iter().filter(|(d, _)| o.devices.is_empty() || o.devices.contains(&d.index)).collect();
    if chosen.is_empty() {
        return Err(DeviceError::NoSuchDevice { asked: o.devices.clone(), seen: all.len() });
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
        report.canary.push(Canary {
            device: info.index,
            ok: canary.is_ok(),
            detail: canary.unwrap_or_else(|e| e.to_string()),
        });
        let loaded = worker::load_isolated(info.index, plans, o.load_timeout);
        for (p, outcome) in plans.iter().zip(loaded) {
            let verdict = compat::decide(&p.images, *cc, Some(driver_cuda), o.jit_env);
            let (load, functions, mut results) = match outcome {
                Ok(l) => (l.load, l.functions, l.entries.into_iter()),
                Err(why) => {
                    let crashed = Load::refused(999, why);
                    let mut r = judge(&p.binary, &p.label, info.index, &verdict, crashed, How::Crashed, Vec::new());
                    r.loading = p.loading;
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
                How::Failed
            } else if native {
                How::Native
            } else if jit {
                How::Jit
            } else {
                How::Unknown
            };
            let launches = if o.launch && load.result == 0 {
                launch::launch_isolated(info.index, p, &functions, o.timeout)
            } else {
                Vec::new()
            };
            let mut r = judge(&p.binary, &p.label, info.index, &verdict, load, how, entries);
            r.loading = p.loading;
            r.functions = functions;
            r.launches = launches;
            report.modules.push(r);
        }
    }
    Ok(report)
}
