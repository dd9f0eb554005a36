//! `NVIDIA_REQUIRE_CUDA` and `NVIDIA_REQUIRE_ARCH`, the constraints the NVIDIA container toolkit
//! checks before it starts a container (docs/cuda-binaries.md §5h, §5j).

use std::collections::BTreeSet;

use super::{Cc, CudaVersion, DriverVersion, gpus, tables};

/// `cuda>=12.9 brand=tesla,driver>=535,driver<536`: space-separated alternatives, each a
/// comma-separated conjunction (nvidia-container-toolkit). The weakest driver CUDA version any
/// alternative admits.
pub fn cuda_weakest(req: &str) -> Option<CudaVersion> {
    let mut weakest: Option<CudaVersion> = None;
    for alt in req.split_whitespace() {
        let mut bound: Option<CudaVersion> = None;
        for c in alt.split(',') {
            if let Some(v) = c.strip_prefix("cuda>=").and_then(CudaVersion::parse) {
                bound = bound.max(Some(v));
            } else if let Some(d) = c.strip_prefix("driver>=").and_then(|d| {
                let d = if d.contains('.') { d.to_string() } else { format!("{d}.0") };
                DriverVersion::parse(&d)
            }) {
                bound = bound.max(tables::cuda_for_driver(&d));
            }
        }
        // An alternative with no bound admits any driver.
        let b = bound.unwrap_or(CudaVersion::new(0, 0));
        weakest = Some(weakest.map_or(b, |w| w.min(b)));
    }
    weakest
}

/// `arch>=8.0`, `arch=9.0` constraints -> the known CCs they admit.
pub fn arch_ccs(req: &str) -> Option<Vec<Cc>> {
    let known: BTreeSet<Cc> = gpus::GPUS.iter().map(|g| g.cc).collect();
    let mut any = false;
    let mut out = BTreeSet::new();
    for alt in req.split_whitespace() {
        for c in alt.split(',') {
            let (op, v) = if let Some(v) = c.strip_prefix("arch>=") {
                (">=", v)
            } else if let Some(v) = c.strip_prefix("arch=") {
                ("=", v)
            } else {
                continue;
            };
            let Some(cc) = Cc::parse(v) else { continue };
            any = true;
            out.extend(known.iter().filter(|k| if op == "=" { **k == cc } else { **k >= cc }).copied());
        }
    }
    any.then(|| out.into_iter().collect())
}

// TEMP until a-req merges (replaced by its emitter).
pub fn constraint(cuda: CudaVersion, runs: &BTreeSet<Cc>) -> String {
    match runs.first() {
        Some(lo) => format!("cuda>={cuda},arch>={lo}"),
        None => format!("cuda>={cuda}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvidia_require_cuda_alternatives() {
        let w = cuda_weakest("cuda>=12.9 brand=tesla,driver>=535,driver<536").unwrap();
        assert_eq!(w, CudaVersion::new(12, 2));
        assert_eq!(cuda_weakest("cuda>=13.0").unwrap(), CudaVersion::new(13, 0));
        let ccs = arch_ccs("arch>=9.0").unwrap();
        assert!(ccs.contains(&Cc::parse("9.0").unwrap()) && ccs.contains(&Cc::parse("12.1").unwrap()));
        assert!(!ccs.contains(&Cc::parse("8.9").unwrap()));
    }
}
