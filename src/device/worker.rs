//! Both sides of the load worker's protocol (`cudalint device-child --load`): the parent writes
//! each module as a `Frame` line followed by the bytes it announces; the worker loads the module
//! whole, then image by image, and prints `start I` before and `done I JSON` after each. A module
//! that crashes or hangs the driver ends that worker; the parent reports it and starts the next
//! worker after it.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::DeviceError;
use super::driver::{Driver, Function, Load};
use super::isolate;
use super::plan::ModulePlan;

/// What the load worker did with one module.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Loaded {
    pub load: Load,
    pub functions: Vec<Function>,
    /// The module's extracted images, each loaded on its own, in plan order.
    pub entries: Vec<Load>,
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

/// Every module loaded by a worker process: the driver is handed whatever the image holds, and a
/// module that crashes or hangs it ends that worker, is reported as such (the reason, in words),
/// and the next worker carries on after it.
pub(super) fn load_isolated(device: u32, plans: &Arc<Vec<ModulePlan>>, quiet: Duration) -> Vec<Result<Loaded, String>> {
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

/// One module as the worker received it.
#[derive(Debug, PartialEq)]
struct Received {
    whole: Vec<u8>,
    images: Vec<Vec<u8>>,
    kernels: Vec<String>,
}

/// Reads the next module `feed` wrote; None at the end of the input.
fn receive(input: &mut impl std::io::BufRead) -> Result<Option<Received>, DeviceError> {
    let mut line = String::new();
    if input.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let frame: Frame = serde_json::from_str(&line).map_err(DeviceError::BadFrame)?;
    let mut read = |n: usize| -> Result<Vec<u8>, DeviceError> {
        let mut b = vec![0u8; n];
        input.read_exact(&mut b)?;
        Ok(b)
    };
    let whole = read(frame.whole)?;
    let images = frame.entries.iter().map(|&n| read(n)).collect::<Result<Vec<_>, _>>()?;
    Ok(Some(Received { whole, images, kernels: frame.kernels }))
}

/// The worker side of `load_isolated`: reads modules from standard input (a `Frame` line, then
/// its bytes), loads each whole and then image by image, and prints `start I` before and
/// `done I JSON` after each.
pub fn load_worker(device: u32) -> Result<(), DeviceError> {
    use std::io::Write;
    let driver = Driver::load()?;
    driver.use_device(device)?;
    let mut input = std::io::BufReader::with_capacity(1 << 20, std::io::stdin().lock());
    let mut out = std::io::stdout().lock();
    let mut i = 0;
    while let Some(Received { whole, images, kernels }) = receive(&mut input)? {
        let _ = writeln!(out, "start {i}");
        let _ = out.flush();
        let (load, module) = driver.load_module(&whole);
        let functions = module.as_ref().map(|m| driver.functions(m, &kernels)).unwrap_or_default();
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
                    driver.functions(&m, &kernels);
                    l.ms += t.elapsed().as_secs_f64() * 1000.0;
                    driver.unload(m);
                }
                l
            })
            .collect();
        let done = Loaded { load, functions, entries };
        let _ = writeln!(out, "done {i} {}", serde_json::to_string(&done).map_err(DeviceError::Json)?);
        let _ = out.flush();
        i += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::compat::ImageKind;
    use crate::device::plan::EntryLoad;

    fn plan(whole: &[u8], entries: Vec<Result<Vec<u8>, String>>, kernels: &[&str]) -> ModulePlan {
        ModulePlan {
            binary: "/lib/x.so".into(),
            label: "m".into(),
            loading: Default::default(),
            whole: Arc::new(whole.to_vec()),
            images: Vec::new(),
            entries: entries
                .into_iter()
                .map(|bytes| EntryLoad { label: "sm_90".into(), kind: ImageKind::Sass, bytes })
                .collect(),
            kernels: kernels.iter().map(|k| k.to_string()).collect(),
        }
    }

    #[test]
    fn the_worker_reads_back_what_the_parent_feeds_it() {
        // Bytes that look like frame lines must not confuse the reader: sizes decide.
        let plans = [
            plan(
                b"\x50\xed\x55\xba whole\n{\"x\":1}\n",
                vec![Ok(b"cubin\n".to_vec()), Err("not extracted".into())],
                &["k1"],
            ),
            plan(b"", vec![], &[]),
            plan(b"ptx\0", vec![Ok(b"a".to_vec()), Ok(b"bb".to_vec())], &["k2", "k3"]),
        ];
        let mut wire = Vec::new();
        feed(&mut wire, &plans).unwrap();
        let mut input = &wire[..];
        let mut got = Vec::new();
        while let Some(r) = receive(&mut input).unwrap() {
            got.push(r);
        }
        let want: Vec<Received> = plans
            .iter()
            .map(|p| Received {
                whole: p.whole.to_vec(),
                // Images that could not be extracted are not sent: the parent skips them too.
                images: p.entries.iter().filter_map(|e| e.bytes.clone().ok()).collect(),
                kernels: p.kernels.clone(),
            })
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_cut_or_garbled_frame_is_an_error() {
        let mut wire = Vec::new();
        feed(&mut wire, &[plan(b"whole", vec![Ok(b"cubin".to_vec())], &[])]).unwrap();
        let cut = &wire[..wire.len() - 2];
        assert!(matches!(receive(&mut &cut[..]), Err(DeviceError::Io(_))));
        assert!(matches!(receive(&mut &b"not json\n"[..]), Err(DeviceError::BadFrame(_))));
    }
}
