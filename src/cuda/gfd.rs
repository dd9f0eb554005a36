//! GPU feature discovery (NVIDIA's `gpu-feature-discovery`, run by the GPU operator and the
//! device plugin): the Kubernetes node labels it writes about a node's GPU and driver, and the
//! pools nodes form by them ([`pools`]), known here once for `scan --targets-from nodes.json`
//! (`lint::targets::from_file`) and the cluster audit, so that both name the same pools alike.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::{Cc, CudaVersion, DriverVersion, tables};

/// `NVIDIA-A10G`: the GPU's marketing name, spaces as dashes.
pub const PRODUCT: &str = "nvidia.com/gpu.product";
pub const COMPUTE_MAJOR: &str = "nvidia.com/gpu.compute.major";
pub const COMPUTE_MINOR: &str = "nvidia.com/gpu.compute.minor";
pub const PRESENT: &str = "nvidia.com/gpu.present";
pub const COUNT: &str = "nvidia.com/gpu.count";
pub const DRIVER_MAJOR: &str = "nvidia.com/cuda.driver.major";
pub const DRIVER_MINOR: &str = "nvidia.com/cuda.driver.minor";
pub const DRIVER_REV: &str = "nvidia.com/cuda.driver.rev";
/// [`DRIVER_MAJOR`] as newer GPU feature discovery names it.
pub const DRIVER_MAJOR_NEW: &str = "nvidia.com/cuda.driver-version.major";

/// Newer GPU feature discovery writes `cuda.driver-version.{major,minor,revision}` beside (and
/// eventually instead of) `cuda.driver.{major,minor,rev}`: (older, newer).
const DRIVER_RENAMES: [(&str, &str); 3] = [
    (DRIVER_MAJOR, DRIVER_MAJOR_NEW),
    (DRIVER_MINOR, "nvidia.com/cuda.driver-version.minor"),
    (DRIVER_REV, "nvidia.com/cuda.driver-version.revision"),
];

/// A label's value; a driver label missing under its older name is read under its newer one.
pub fn label<'a>(get: impl Fn(&str) -> Option<&'a str>, key: &str) -> Option<&'a str> {
    get(key).or_else(|| DRIVER_RENAMES.iter().find(|(old, _)| *old == key).and_then(|(_, new)| get(new)))
}

/// Copies the newer driver labels to the older names where those are missing, so that a node
/// selector on either name matches.
pub fn normalise(labels: &mut BTreeMap<String, String>) {
    for (old, new) in DRIVER_RENAMES {
        if !labels.contains_key(old)
            && let Some(v) = labels.get(new).cloned()
        {
            labels.insert(old.to_string(), v);
        }
    }
}

/// The labels say the node has GPUs (a node may say so only by its `nvidia.com/gpu` capacity).
pub fn says_gpus<'a>(get: impl Fn(&str) -> Option<&'a str>) -> bool {
    get(PRESENT) == Some("true") || get(COUNT).is_some_and(|v| v != "0") || get(COMPUTE_MAJOR).is_some()
}

/// The driver version the labels give, `major.minor.rev` (`major.minor` without a revision);
/// None without major and minor.
pub fn driver<'a>(get: impl Fn(&str) -> Option<&'a str>) -> Option<String> {
    let get = |k: &str| label(&get, k);
    let (a, b) = (get(DRIVER_MAJOR)?, get(DRIVER_MINOR)?);
    Some(match get(DRIVER_REV) {
        Some(r) if !r.is_empty() => format!("{a}.{b}.{r}"),
        _ => format!("{a}.{b}"),
    })
}

/// The labels managed Kubernetes services put on a node to name the node group it belongs to
/// (EKS, GKE, AKS, Karpenter): what a pool's nodes are called in the cluster.
pub const NODE_GROUP_LABELS: [&str; 4] = [
    "eks.amazonaws.com/nodegroup",
    "cloud.google.com/gke-nodepool",
    "kubernetes.azure.com/agentpool",
    "karpenter.sh/nodepool",
];

/// What GPU feature discovery says about one node's GPU and driver: what pools group by.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct NodeGpu {
    /// `nvidia.com/gpu.product` as written (`NVIDIA-L4`): what a node selector matches.
    pub product: Option<String>,
    /// None: the node has GPUs but no compute capability labels (it cannot be judged).
    pub cc: Option<Cc>,
    pub driver: Option<DriverVersion>,
    /// The driver's CUDA version, from its branch.
    pub driver_cuda: Option<CudaVersion>,
}

impl NodeGpu {
    /// From a node's labels (older or newer driver label names); an error names the label.
    pub fn of<'a>(get: impl Fn(&str) -> Option<&'a str>) -> Result<NodeGpu, String> {
        let get = |k: &str| label(&get, k);
        let cc = match (get(COMPUTE_MAJOR), get(COMPUTE_MINOR)) {
            (Some(ma), Some(mi)) => Some(Cc {
                major: ma.trim().parse().map_err(|_| format!("bad {COMPUTE_MAJOR} {ma:?}"))?,
                minor: mi.trim().parse().map_err(|_| format!("bad {COMPUTE_MINOR} {mi:?}"))?,
            }),
            _ => None,
        };
        let (driver, driver_cuda) = match driver(get) {
            Some(spec) => {
                let d = DriverVersion::parse(&spec).ok_or_else(|| format!("{spec:?} is not a driver version"))?;
                let c = tables::cuda_for_driver(&d)
                    .ok_or_else(|| format!("driver {d} is older than any CUDA 11 driver"))?;
                (Some(d), Some(c))
            }
            None => (None, None),
        };
        Ok(NodeGpu { product: get(PRODUCT).map(String::from), cc, driver, driver_cuda })
    }

    /// The GPU's name for sentences: the product label with its dashes as spaces (`NVIDIA L4`),
    /// else by compute capability (`sm_89 GPU`).
    pub fn gpu_name(&self) -> String {
        match (&self.product, self.cc) {
            (Some(p), _) => p.replace('-', " "),
            (None, Some(cc)) => format!("sm_{} GPU", cc.sm()),
            (None, None) => "GPU".into(),
        }
    }
}

/// One node as [`pools`] groups it.
#[derive(Debug, Clone, Default)]
pub struct PoolNode {
    pub name: String,
    pub gpu: NodeGpu,
    /// Its node group ([`NODE_GROUP_LABELS`]), if a label names one.
    pub group: Option<String>,
    /// The label that names its node group: what a node selector on the group must use.
    pub group_label: Option<&'static str>,
    /// The label that carries its driver's major, as the node has it ([`DRIVER_MAJOR`] or its
    /// newer name): what a node selector on the driver must use, the other name being absent.
    pub driver_major_label: Option<&'static str>,
}

impl PoolNode {
    pub fn of<'a>(name: &str, get: impl Fn(&str) -> Option<&'a str> + Copy) -> Result<PoolNode, String> {
        let group_label = NODE_GROUP_LABELS.into_iter().find(|k| get(k).is_some());
        Ok(PoolNode {
            name: name.to_string(),
            gpu: NodeGpu::of(get)?,
            group: group_label.and_then(get).map(String::from),
            group_label,
            driver_major_label: [DRIVER_MAJOR, DRIVER_MAJOR_NEW].into_iter().find(|k| get(k).is_some()),
        })
    }
}

/// Nodes with the same GPU product, compute capability and driver.
#[derive(Debug, Clone, Serialize)]
pub struct GpuPool {
    /// Unique among the pools, and what sentences about the pool call it: the GPU's name
    /// (`NVIDIA L4`), qualified only where two pools have the same GPU (`NVIDIA L4 in
    /// l4-legacy`, else `NVIDIA L4 on driver 535.104.05`). Nodes without compute capability
    /// labels: `NVIDIA L4 (no GPU feature discovery labels)`.
    pub name: String,
    /// The GPU's name (`NVIDIA L4`).
    pub gpu: String,
    /// `nvidia.com/gpu.product` as the nodes carry it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub product: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cc: Option<Cc>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver: Option<DriverVersion>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver_cuda: Option<CudaVersion>,
    /// The node groups its nodes belong to, sorted.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub node_groups: Vec<String>,
    /// The node group its name gives (`l4-legacy` for `NVIDIA L4 in l4-legacy`): what
    /// sentences about it say besides its GPU, the driver being said on its own.
    #[serde(skip)]
    pub named_group: Option<String>,
    /// Sorted, each once.
    pub nodes: Vec<String>,
}

impl GpuPool {
    /// The GPU and driver in words: `NVIDIA L4 (sm_89), driver 535.104.05 (CUDA 12.2)`.
    pub fn describe(&self) -> String {
        let mut s = self.gpu.clone();
        if let Some(cc) = self.cc {
            s.push_str(&format!(" (sm_{})", cc.sm()));
        }
        match (&self.driver, self.driver_cuda) {
            (Some(d), Some(c)) => s.push_str(&format!(", driver {d} (CUDA {c})")),
            (Some(d), None) => s.push_str(&format!(", driver {d}")),
            _ if self.cc.is_some() => s.push_str(", driver not labelled"),
            _ => {}
        }
        s
    }
}

/// The pools the nodes form, by name; a node listed twice (in two `kubectl get nodes` files)
/// counts once, as it was first given.
pub fn pools(nodes: &[PoolNode]) -> Vec<GpuPool> {
    let mut seen = BTreeSet::new();
    let mut by_gpu: BTreeMap<&NodeGpu, (BTreeSet<String>, BTreeSet<String>)> = BTreeMap::new();
    for n in nodes.iter().filter(|n| seen.insert(n.name.as_str())) {
        let e = by_gpu.entry(&n.gpu).or_default();
        e.0.insert(n.name.clone());
        e.1.extend(n.group.clone());
    }
    let mut out: Vec<GpuPool> = by_gpu
        .into_iter()
        .map(|(g, (nodes, groups))| GpuPool {
            name: String::new(),
            gpu: g.gpu_name(),
            product: g.product.clone(),
            cc: g.cc,
            driver: g.driver.clone(),
            driver_cuda: g.driver_cuda,
            node_groups: groups.into_iter().collect(),
            named_group: None,
            nodes: nodes.into_iter().collect(),
        })
        .collect();
    name_pools(&mut out);
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Names each pool by its GPU, qualified where pools share it: by node group where each of them
/// is one distinct group, else by driver, else by compute capability, else numbered.
fn name_pools(pools: &mut [GpuPool]) {
    let base = |p: &GpuPool| match p.cc {
        Some(_) => p.gpu.clone(),
        None => format!("{} (no GPU feature discovery labels)", p.gpu),
    };
    let mut by_base: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, p) in pools.iter().enumerate() {
        by_base.entry(base(p)).or_default().push(i);
    }
    type Qualifier = fn(&GpuPool) -> Option<String>;
    let qualifiers: [Qualifier; 3] = [
        |p| match p.node_groups.as_slice() {
            [g] => Some(format!("in {g}")),
            _ => None,
        },
        |p| match (&p.driver, p.driver_cuda) {
            (Some(d), _) => Some(format!("on driver {d}")),
            (None, Some(c)) => Some(format!("on a CUDA {c} driver")),
            (None, None) => Some("with no driver labels".into()),
        },
        |p| p.cc.map(|c| format!("(sm_{})", c.sm())),
    ];
    for (base, members) in by_base {
        if let [only] = members.as_slice() {
            pools[*only].name = base;
            continue;
        }
        let distinct = |q: &Qualifier| {
            let qs: Option<BTreeSet<String>> = members.iter().map(|i| q(&pools[*i])).collect();
            qs.is_some_and(|s| s.len() == members.len())
        };
        match qualifiers.iter().position(|q| distinct(q)) {
            Some(n) => {
                let (q, by_group) = (qualifiers[n], n == 0);
                for i in &members {
                    pools[*i].name = format!("{base} {}", q(&pools[*i]).unwrap_or_default());
                    if by_group {
                        pools[*i].named_group = pools[*i].node_groups.first().cloned();
                    }
                }
            }
            None => {
                for (n, i) in members.iter().enumerate() {
                    pools[*i].name = format!("{base} #{}", n + 1);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newer_driver_labels_stand_in_for_the_older() {
        let mut l: BTreeMap<String, String> = [
            ("nvidia.com/cuda.driver-version.major", "580"),
            ("nvidia.com/cuda.driver-version.minor", "65"),
            ("nvidia.com/cuda.driver-version.revision", "06"),
            (DRIVER_MAJOR, "575"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let get = |l: &BTreeMap<String, String>, k: &str| l.get(k).cloned();
        assert_eq!(driver(|k| l.get(k).map(String::as_str)).as_deref(), Some("575.65.06"));
        normalise(&mut l);
        assert_eq!(get(&l, DRIVER_MAJOR).as_deref(), Some("575"), "an older label is kept");
        assert_eq!(get(&l, DRIVER_REV).as_deref(), Some("06"));
        assert!(!says_gpus(|k| l.get(k).map(String::as_str)));
    }

    fn pool_node(name: &str, labels: &[(&str, &str)]) -> PoolNode {
        let l: BTreeMap<&str, &str> = labels.iter().copied().collect();
        PoolNode::of(name, |k| l.get(k).copied()).unwrap()
    }

    fn gpu(product: &str, cc: (&str, &str), driver: (&str, &str, &str), group: &str) -> Vec<(&'static str, String)> {
        let mut l = vec![
            (COMPUTE_MAJOR, cc.0.to_string()),
            (COMPUTE_MINOR, cc.1.to_string()),
            (DRIVER_MAJOR, driver.0.to_string()),
            (DRIVER_MINOR, driver.1.to_string()),
            (DRIVER_REV, driver.2.to_string()),
            ("eks.amazonaws.com/nodegroup", group.to_string()),
        ];
        if !product.is_empty() {
            l.push((PRODUCT, product.to_string()));
        }
        l
    }

    fn node(name: &str, l: &[(&'static str, String)]) -> PoolNode {
        let l: Vec<(&str, &str)> = l.iter().map(|(k, v)| (*k, v.as_str())).collect();
        pool_node(name, &l)
    }

    #[test]
    fn pools_are_named_by_gpu_and_told_apart_only_where_they_share_it() {
        let l4_old = gpu("NVIDIA-L4", ("8", "9"), ("535", "104", "05"), "l4-legacy");
        let l4_new = gpu("NVIDIA-L4", ("8", "9"), ("580", "65", "06"), "l4-new");
        let h100 = gpu("NVIDIA-H100-80GB-HBM3", ("9", "0"), ("580", "65", "06"), "h100");
        let nodes = [node("l4-b", &l4_new), node("l4-a", &l4_old), node("h-1", &h100), node("h-1", &l4_old)];
        let p = pools(&nodes);
        let names: Vec<&str> = p.iter().map(|p| p.name.as_str()).collect();
        // One node group each: the group tells the L4 pools apart; the H100 is alone in its GPU.
        // The second `h-1` is the same node given twice: counted once, as first given.
        assert_eq!(names, ["NVIDIA H100 80GB HBM3", "NVIDIA L4 in l4-legacy", "NVIDIA L4 in l4-new"]);
        assert_eq!(p[0].nodes, ["h-1"]);
        assert_eq!(p[1].describe(), "NVIDIA L4 (sm_89), driver 535.104.05 (CUDA 12.2)");
        assert_eq!(p[1].product.as_deref(), Some("NVIDIA-L4"));
        // Sentences say the group the name gives; the H100's group is in no name.
        assert_eq!(p[1].named_group.as_deref(), Some("l4-legacy"));
        assert_eq!(p[0].named_group, None);
        assert_eq!(nodes[1].group_label, Some("eks.amazonaws.com/nodegroup"));
        assert_eq!(nodes[1].driver_major_label, Some(DRIVER_MAJOR));

        // A node group mid-upgrade: the same group, two drivers.
        let mid = gpu("NVIDIA-L4", ("8", "9"), ("580", "65", "06"), "l4-legacy");
        let p = pools(&[node("a", &l4_old), node("b", &mid), node("c", &l4_old)]);
        let names: Vec<&str> = p.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["NVIDIA L4 on driver 535.104.05", "NVIDIA L4 on driver 580.65.06"]);
        assert_eq!(p[0].nodes, ["a", "c"]);
        assert_eq!(p[0].named_group, None, "named by the driver");

        // No product label: named by the architecture.
        let bare = gpu("", ("8", "0"), ("580", "65", "06"), "x");
        assert_eq!(pools(&[node("n", &bare)])[0].name, "sm_80 GPU");
        assert!(PoolNode::of("n", |k| (k == COMPUTE_MAJOR || k == COMPUTE_MINOR).then_some("x")).is_err());
    }
}
