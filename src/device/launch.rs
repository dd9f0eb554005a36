//! Every kernel of a loaded module launched once with zero-filled parameters, in child
//! processes (`cudalint device-child`): a fault ends that child, and the next one carries on
//! after the kernel that faulted. Both sides of that protocol: the child prints `start NAME`
//! before and `done NAME CODE` (or `skip NAME WHY`) after each kernel.

use std::time::Duration;

use super::DeviceError;
use super::driver::{Driver, Function};
use super::error::error_name;
use super::isolate;
use super::plan::ModulePlan;
use super::report::{LaunchResult, LaunchStatus};

pub(super) fn launch_isolated(
    device: u32,
    p: &ModulePlan,
    functions: &[Function],
    timeout: Duration,
) -> Vec<LaunchResult> {
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
                    status: LaunchStatus::Skipped,
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
                let status = if code == 0 { LaunchStatus::Launched } else { LaunchStatus::Faulted };
                results.push(LaunchResult {
                    kernel: n.to_string(),
                    status,
                    detail: if code == 0 { String::new() } else { error_name(code) },
                });
                running = None;
                start += 1;
            } else if let Some(rest) = line.strip_prefix("skip ") {
                let (n, why) = rest.split_once(' ').unwrap_or((rest, ""));
                results.push(LaunchResult { kernel: n.to_string(), status: LaunchStatus::Skipped, detail: why.into() });
                start += 1;
            }
        }
        if let Some(n) = running {
            let (status, detail) = if outcome.timed_out {
                (LaunchStatus::TimedOut, format!("no result within {} s", timeout.as_secs()))
            } else {
                (
                    LaunchStatus::Faulted,
                    format!(
                        "the child process died{}",
                        outcome.signal().map(|s| format!(" (signal {s})")).unwrap_or_default()
                    ),
                )
            };
            results.push(LaunchResult { kernel: n, status, detail });
            start += 1;
        } else if outcome.timed_out || outcome.status.is_some_and(|s| !s.success()) && results.len() == start {
            // Died before starting a kernel: nothing more will work in this module.
            results.extend(names[start..].iter().map(|n| LaunchResult {
                kernel: n.clone(),
                status: LaunchStatus::Skipped,
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
pub fn child(device: u32, skip: usize, names: &[String]) -> Result<(), DeviceError> {
    use std::io::{Read, Write};
    let driver = Driver::load()?;
    driver.use_device(device)?;
    let mut image = Vec::new();
    std::io::stdin().read_to_end(&mut image)?;
    let (load, m) = driver.load_module(&image);
    let m = m.ok_or(DeviceError::ModuleDoesNotLoad(load.error))?;
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
