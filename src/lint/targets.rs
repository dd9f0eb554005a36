//! Deployment targets: GPUs (by name, compute capability, `nvidia-smi` CSV, or Kubernetes node
//! labels written by GPU feature discovery), each with the driver it runs under, if known.

use serde::Serialize;

use super::error::ConfigError;
use crate::cuda::{Cc, CudaVersion, DriverVersion, gfd, gpus, tables};

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Target {
    /// What the user called it: `H100`, `sm_90`, `node-a (NVIDIA A10G)`.
    pub name: String,
    pub cc: Cc,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver: Option<DriverVersion>,
    /// The driver's CUDA version (given, or from the driver's branch).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver_cuda: Option<CudaVersion>,
    /// A pool of Kubernetes nodes (`--targets-from nodes.json`, `audit`): the parts its name is
    /// made of, for sentences that say its driver on their own.
    #[serde(skip)]
    pub pool: Option<NodePool>,
}

/// What a pool's name (`NVIDIA L4 in l4-legacy`, `NVIDIA L4 on driver 535.104.05`) is made of,
/// besides its driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodePool {
    /// The GPU's name (`NVIDIA L4`).
    pub gpu: String,
    /// The node group the pool's name gives (`l4-legacy`).
    pub group: Option<String>,
}

impl Target {
    /// A target with no driver, not a pool.
    pub fn new(name: impl Into<String>, cc: Cc) -> Target {
        Target { name: name.into(), cc, driver: None, driver_cuda: None, pool: None }
    }

    /// The GPU's name: a pool's GPU (`NVIDIA L4`), else the target's name.
    pub fn gpu(&self) -> &str {
        self.pool.as_ref().map_or(&self.name, |p| &p.gpu)
    }

    /// The node group a pool's name gives.
    pub fn group(&self) -> Option<&str> {
        self.pool.as_ref().and_then(|p| p.group.as_deref())
    }

    /// What a sentence that says the driver on its own calls the target: a pool by its GPU and
    /// the node group its name gives (`NVIDIA L4`, `NVIDIA L4 in l4-legacy`), never by the
    /// driver its name may give (`NVIDIA L4 on driver 535.104.05`); else its name.
    pub fn called(&self) -> String {
        match &self.pool {
            Some(NodePool { gpu, group: Some(g) }) => format!("{gpu} in {g}"),
            Some(NodePool { gpu, group: None }) => gpu.clone(),
            None => self.name.clone(),
        }
    }

    /// What a fix that changes the driver acts on: a pool's nodes by GPU, node group and driver
    /// (`the NVIDIA L4 nodes (driver 535.104.05)`, `the NVIDIA L4 nodes in l4-legacy (driver
    /// 535.104.05)`); else the target's name.
    pub fn nodes(&self) -> String {
        let Some(p) = &self.pool else { return self.name.clone() };
        let mut s = format!("the {} nodes", p.gpu);
        if let Some(g) = &p.group {
            s.push_str(&format!(" in {g}"));
        }
        match (&self.driver, self.driver_cuda) {
            (Some(d), _) => s.push_str(&format!(" (driver {d})")),
            (None, Some(c)) => s.push_str(&format!(" (CUDA {c} driver)")),
            _ => {}
        }
        s
    }

    /// `H100 (9.0), driver 535.104.05`; a pool as [`Target::called`], its driver said once.
    pub fn label(&self) -> String {
        let mut s = format!("{} ({})", self.called(), self.cc);
        if let Some(d) = &self.driver {
            s.push_str(&format!(", driver {d}"));
        } else if let Some(c) = &self.driver_cuda {
            s.push_str(&format!(", CUDA {c} driver"));
        }
        s
    }

    /// A GPU the driver reports (`--on-device` with no targets named: the node's own GPUs),
    /// with the driver's CUDA version; `None` when the driver's compute capability is unreadable.
    pub fn from_device(d: &crate::device::driver::DeviceInfo) -> Option<Target> {
        Some(Target {
            name: format!("GPU {} ({})", d.index, d.name),
            cc: Cc::parse(&d.cc)?,
            driver: None,
            driver_cuda: CudaVersion::parse(&d.driver_cuda),
            pool: None,
        })
    }
}

/// AMD Instinct/Radeon, Intel Gaudi/Arc/Max, Google TPU and AWS Trainium/Inferentia names.
fn other_vendor(name: &str) -> bool {
    let n = name.trim().to_ascii_lowercase();
    // MI300X, AMD Instinct MI250: a word `mi` and digits.
    let amd_mi =
        n.split_whitespace().any(|w| w.strip_prefix("mi").is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit())));
    amd_mi
        || ["amd", "radeon", "instinct", "gaudi", "intel", "tpu", "trainium", "inferentia", "arc a", "max 1"]
            .iter()
            .any(|w| n.starts_with(w) || n.contains(&format!(" {w}")))
}

/// `H100`, `rtx 4090`, `NVIDIA A10G`: a GPU name, or an error naming the closest ones.
pub fn gpu(name: &str) -> Result<Target, ConfigError> {
    match gpus::lookup(name) {
        Some(g) => Ok(Target::new(g.name, g.cc)),
        // Nearest NVIDIA names would only mislead for another vendor's accelerator.
        None if other_vendor(name) => Err(ConfigError::new(format!(
            "{name:?} is not an NVIDIA GPU: CUDA device code runs on NVIDIA GPUs only (see `cudalint gpus`)"
        ))),
        None => Err(ConfigError::new(format!(
            "unknown GPU {name:?}; closest: {} (see `cudalint gpus`), or name its architecture with --arch (sm_90, 8.9)",
            gpus::closest(name, 4).join(", ")
        ))),
    }
}

/// `sm_90`, `8.9`, `90`, `sm_90a` (its CC), `sm_100f` (every known CC of the family from 10.0 up).
pub fn arch(spec: &str) -> Result<Vec<Target>, ConfigError> {
    let cc = Cc::parse(spec)
        .ok_or_else(|| ConfigError::new(format!("{spec:?} is not an architecture (sm_90, 8.9, sm_100f)")))?;
    let s = spec.trim().to_ascii_lowercase();
    if s.ends_with('f') {
        let mut ccs: Vec<Cc> =
            gpus::GPUS.iter().map(|g| g.cc).filter(|c| c.major == cc.major && c.minor >= cc.minor).collect();
        ccs.push(cc);
        ccs.sort();
        ccs.dedup();
        return Ok(ccs.into_iter().map(|c| Target::new(format!("sm_{}", c.sm()), c)).collect());
    }
    Ok(vec![Target::new(format!("sm_{}", cc.sm()), cc)])
}

pub fn driver(spec: &str) -> Result<(DriverVersion, CudaVersion), ConfigError> {
    let d = DriverVersion::parse(spec).ok_or_else(|| {
        // A CUDA version where the driver's belongs is the common slip: say which flag takes it.
        let hint = match cuda_version(spec) {
            Some(c) => format!(
                ": {c} is a CUDA version; give it as --cuda-driver {c} (config: cuda_driver), or the driver's \
                 own version as --driver"
            ),
            None => String::new(),
        };
        ConfigError::new(format!("{spec:?} is not a driver version (535.104.05){hint}"))
    })?;
    let c = tables::cuda_for_driver(&d)
        .ok_or_else(|| ConfigError::new(format!("driver {d} is older than any CUDA 11 driver")))?;
    Ok((d, c))
}

/// `--cuda-driver` (config `cuda_driver`): the CUDA version a driver reports, `MAJOR[.MINOR]`
/// (12.2). A driver version there (550.54.15) is refused naming `--driver`, never read as CUDA
/// 550.54.
pub fn cuda_driver(spec: &str) -> Result<CudaVersion, ConfigError> {
    if let Some(c) = cuda_version(spec) {
        return Ok(c);
    }
    let hint = if DriverVersion::parse(spec).is_some() {
        format!(": it is a driver version; give it as --driver {} (config: driver)", spec.trim())
    } else {
        String::new()
    };
    Err(ConfigError::new(format!("{spec:?} is not a CUDA version (12.2){hint}")))
}

/// `MAJOR[.MINOR]` with a major a CUDA release can have (below 100, where drivers start).
fn cuda_version(spec: &str) -> Option<CudaVersion> {
    let s = spec.trim();
    let parts: Vec<&str> = s.split('.').collect();
    let digits = |p: &&str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
    if parts.len() > 2 || !parts.iter().all(digits) {
        return None;
    }
    CudaVersion::parse(s).filter(|c| c.major < 100)
}

/// Targets from a file: `nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv`
/// output, or Kubernetes nodes as JSON (`kubectl get nodes -o json`, one node, or a list) with
/// GPU feature discovery labels.
pub fn from_file(path: &str) -> Result<Vec<Target>, ConfigError> {
    // Read within the audit's bounds: size, memory, and only the parts of a node read here.
    let text = read_bounded(path).map_err(|e| ConfigError::at(path, None, e))?;
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        let v = crate::bounded::json(&text, crate::bounded::Shape::Top).map_err(|e| ConfigError::at(path, None, e))?;
        let t = from_nodes(&v).map_err(|e| e.in_file(path))?;
        if t.is_empty() {
            let m = format!(
                "no node carries the {}/{} labels of GPU feature discovery",
                gfd::COMPUTE_MAJOR,
                gfd::COMPUTE_MINOR
            );
            return Err(ConfigError::at(path, None, m));
        }
        Ok(t)
    } else {
        from_nvidia_smi(&text).map_err(|e| e.in_file(path))
    }
}

/// The file's text, if it is no larger than the audit's inputs may be.
fn read_bounded(path: &str) -> Result<String, String> {
    use std::io::Read;
    let max = crate::bounded::MAX_INPUT;
    let mut buf = Vec::new();
    std::fs::File::open(path).and_then(|f| f.take(max + 1).read_to_end(&mut buf)).map_err(|e| e.to_string())?;
    if buf.len() as u64 > max {
        return Err(format!("larger than {} MiB; refused", max >> 20));
    }
    String::from_utf8(buf).map_err(|e| format!("not UTF-8 text: {e}"))
}

/// Errors carry the line (of `csv`) but no file: `from_file` names it.
pub fn from_nvidia_smi(csv: &str) -> Result<Vec<Target>, ConfigError> {
    let mut lines = csv.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
    let (_, header) = lines.next().ok_or_else(|| ConfigError::new("empty nvidia-smi output"))?;
    let cols: Vec<String> = header.split(',').map(|c| c.trim().to_ascii_lowercase()).collect();
    let col = |name: &str| cols.iter().position(|c| c.starts_with(name));
    let (Some(ni), Some(ci)) = (col("name"), col("compute_cap")) else {
        return Err(ConfigError::new(
            "expected the columns of `nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv`",
        ));
    };
    let di = col("driver_version");
    let mut out = Vec::new();
    for (n, line) in lines {
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        let at = |message: String| ConfigError { file: None, line: Some(n + 1), message };
        let name = f.get(ni).ok_or_else(|| at("missing name".into()))?;
        let cc = f.get(ci).and_then(|c| Cc::parse(c)).ok_or_else(|| at("bad compute_cap".into()))?;
        let (driver, driver_cuda) = match di.and_then(|i| f.get(i)) {
            Some(d) => {
                let (d, c) = driver(d).map_err(|e| at(e.message))?;
                (Some(d), Some(c))
            }
            None => (None, None),
        };
        out.push(Target { name: name.to_string(), cc, driver, driver_cuda, pool: None });
    }
    Ok(out)
}

/// One target per GPU pool: nodes with the same GPU product, compute capability and driver,
/// grouped and named as `cudalint audit` groups and names them (`gfd::pools`), so that a scan
/// has a column per pool, not per node. Nodes without the compute capability labels are left
/// out: none labelled gives an empty list (a cluster audit reports such nodes as not judgeable;
/// a target file refuses it).
pub fn from_nodes(v: &serde_json::Value) -> Result<Vec<Target>, ConfigError> {
    let items: Vec<&serde_json::Value> = match v {
        serde_json::Value::Array(a) => a.iter().collect(),
        v if v.get("items").is_some() => v["items"].as_array().into_iter().flatten().collect(),
        v => vec![v],
    };
    let mut nodes = Vec::new();
    for (i, node) in items.into_iter().enumerate() {
        let labels = node.pointer("/metadata/labels").unwrap_or(node);
        let get = |k: &str| labels.get(k).and_then(|x| x.as_str());
        let name = node
            .pointer("/metadata/name")
            .and_then(|n| n.as_str())
            .map_or_else(|| format!("node {}", i + 1), String::from);
        let n = gfd::PoolNode::of(&name, get).map_err(|e| ConfigError::new(format!("node {name}: {e}")))?;
        match (&n.gpu.cc, &n.gpu.product) {
            (Some(_), _) => nodes.push(n),
            // A GPU node the labels cannot place is not a target left out in silence: the
            // verdict would skip the GPUs it has (audit stops on such a pool the same way).
            (None, Some(product)) => {
                return Err(ConfigError::new(format!(
                    "node {name}: {}={product} but no {}/{} labels: its GPUs cannot be judged (run GPU feature \
                     discovery there, or name them with --gpu)",
                    gfd::PRODUCT,
                    gfd::COMPUTE_MAJOR,
                    gfd::COMPUTE_MINOR
                )));
            }
            (None, None) => {}
        }
    }
    Ok(gfd::pools(&nodes).iter().filter_map(pool).collect())
}

/// A pool's target, named as the pool; None without compute capability labels.
pub fn pool(p: &gfd::GpuPool) -> Option<Target> {
    Some(Target {
        name: p.name.clone(),
        cc: p.cc?,
        driver: p.driver.clone(),
        driver_cuda: p.driver_cuda,
        pool: Some(NodePool { gpu: p.gpu.clone(), group: p.named_group.clone() }),
    })
}

/// Same CC and driver once only, in a stable order.
pub fn dedup(mut t: Vec<Target>) -> Vec<Target> {
    let mut seen = std::collections::HashSet::new();
    t.retain(|x| seen.insert((x.cc, x.driver_cuda, x.name.clone())));
    t
}

#[cfg(test)]
mod tests {
    /// A driver version where a CUDA version belongs, and the reverse, are refused naming the
    /// flag that takes them (550.54.15 was read as CUDA 550.54; 12.4 got no hint).
    #[test]
    fn driver_and_cuda_versions_are_not_taken_for_each_other() {
        use super::{CudaVersion, cuda_driver, driver};
        assert_eq!(cuda_driver("12.4").unwrap(), CudaVersion { major: 12, minor: 4 });
        assert_eq!(cuda_driver("13").unwrap(), CudaVersion { major: 13, minor: 0 });
        let e = cuda_driver("550.54.15").unwrap_err().to_string();
        assert!(e.contains("is not a CUDA version") && e.contains("--driver 550.54.15"), "{e}");
        let e = cuda_driver("12.4.1").unwrap_err().to_string();
        assert!(e.contains("is not a CUDA version") && !e.contains("--driver"), "{e}");
        assert!(driver("535.104.05").is_ok());
        let e = driver("12.4").unwrap_err().to_string();
        assert!(e.contains("is not a driver version") && e.contains("--cuda-driver 12.4"), "{e}");
        let e = driver("latest").unwrap_err().to_string();
        assert!(!e.contains("--cuda-driver"), "{e}");
    }

    #[test]
    fn other_vendors_are_told_apart_from_every_nvidia_name() {
        for g in gpus::GPUS {
            for n in std::iter::once(&g.name).chain(g.aliases) {
                assert!(!other_vendor(n), "{n}");
            }
        }
        for n in ["MI300X", "mi250", "AMD Instinct MI325X", "Radeon PRO W7900", "Intel Gaudi 3", "TPU v5e"] {
            assert!(other_vendor(n), "{n}");
        }
    }

    use super::*;

    #[test]
    fn nvidia_smi_and_node_labels() {
        let csv =
            "name, compute_cap, driver_version\nNVIDIA H100 80GB HBM3, 9.0, 535.104.05\nNVIDIA L4, 8.9, 550.54.15\n";
        let t = from_nvidia_smi(csv).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!((t[0].cc.to_string(), t[0].driver_cuda.unwrap().to_string()), ("9.0".into(), "12.2".into()));
        let nodes = serde_json::json!({"items": [{"metadata": {"name": "gpu-a", "labels": {
            "nvidia.com/gpu.compute.major": "8", "nvidia.com/gpu.compute.minor": "6",
            "nvidia.com/gpu.product": "NVIDIA-A10G", "nvidia.com/cuda.driver.major": "535",
            "nvidia.com/cuda.driver.minor": "104", "nvidia.com/cuda.driver.rev": "05"}}}]});
        let t = from_nodes(&nodes).unwrap();
        assert_eq!(t[0].name, "NVIDIA A10G");
        assert_eq!(t[0].driver.as_ref().unwrap().to_string(), "535.104.05");
        let newer = serde_json::json!([{"metadata": {"name": "gpu-b", "labels": {
            "nvidia.com/gpu.compute.major": "9", "nvidia.com/gpu.compute.minor": "0",
            "nvidia.com/cuda.driver-version.major": "580", "nvidia.com/cuda.driver-version.minor": "65",
            "nvidia.com/cuda.driver-version.revision": "06"}}}]);
        assert_eq!(from_nodes(&newer).unwrap()[0].driver.as_ref().unwrap().to_string(), "580.65.06");
        assert_eq!(
            arch("sm_100f").unwrap().iter().map(|t| t.cc.to_string()).collect::<Vec<_>>(),
            ["10.0", "10.3", "10.7"]
        );
        assert!(gpu("H1000").unwrap_err().to_string().contains("H100"));
        assert!(from_nodes(&serde_json::json!({"metadata": {"name": "cpu-node"}})).unwrap().is_empty());
        // A GPU node without compute capability labels is an error, not a target left out.
        let half = serde_json::json!([
            {"metadata": {"name": "ok", "labels": {"nvidia.com/gpu.compute.major": "8", "nvidia.com/gpu.compute.minor": "9"}}},
            {"metadata": {"name": "bare", "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}},
        ]);
        let e = from_nodes(&half).unwrap_err().to_string();
        assert!(e.contains("node bare: nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3 but no"), "{e}");
    }

    #[test]
    fn pools_are_called_by_gpu_and_group_their_driver_said_once() {
        let l4 = |name: &str, major: &str, group: &str| {
            let mut labels = serde_json::json!({"nvidia.com/gpu.compute.major": "8", "nvidia.com/gpu.compute.minor": "9",
                "nvidia.com/gpu.product": "NVIDIA-L4", "nvidia.com/cuda.driver.major": major,
                "nvidia.com/cuda.driver.minor": "65", "nvidia.com/cuda.driver.rev": "06"});
            if !group.is_empty() {
                labels["eks.amazonaws.com/nodegroup"] = group.into();
            }
            serde_json::json!({"metadata": {"name": name, "labels": labels}})
        };
        // Told apart by driver: called by the GPU, the driver said beside it.
        let t = from_nodes(&serde_json::json!([l4("a", "535", ""), l4("b", "580", "")])).unwrap();
        assert_eq!(t[0].name, "NVIDIA L4 on driver 535.65.06");
        assert_eq!((t[0].gpu(), t[0].called(), t[0].group()), ("NVIDIA L4", "NVIDIA L4".to_string(), None));
        assert_eq!(t[0].label(), "NVIDIA L4 (8.9), driver 535.65.06");
        assert_eq!(t[0].nodes(), "the NVIDIA L4 nodes (driver 535.65.06)");
        // Told apart by node group: called by both.
        let t = from_nodes(&serde_json::json!([l4("a", "535", "old"), l4("b", "580", "new")])).unwrap();
        assert_eq!(t[1].name, "NVIDIA L4 in old");
        assert_eq!((t[1].called(), t[1].group()), ("NVIDIA L4 in old".to_string(), Some("old")));
        assert_eq!(t[1].nodes(), "the NVIDIA L4 nodes in old (driver 535.65.06)");
        // Not a pool: its name.
        let h = Target::new("H100", Cc::parse("9.0").unwrap());
        assert_eq!((h.gpu(), h.called(), h.nodes()), ("H100", "H100".to_string(), "H100".to_string()));
    }
}
