//! GPU feature discovery (NVIDIA's `gpu-feature-discovery`, run by the GPU operator and the
//! device plugin): the Kubernetes node labels it writes about a node's GPU and driver, known
//! here once for the target reader (`lint::targets::from_nodes`) and the cluster audit.

use std::collections::BTreeMap;

/// `NVIDIA-A10G`: the GPU's marketing name, spaces as dashes.
pub const PRODUCT: &str = "nvidia.com/gpu.product";
pub const COMPUTE_MAJOR: &str = "nvidia.com/gpu.compute.major";
pub const COMPUTE_MINOR: &str = "nvidia.com/gpu.compute.minor";
pub const PRESENT: &str = "nvidia.com/gpu.present";
pub const COUNT: &str = "nvidia.com/gpu.count";
pub const DRIVER_MAJOR: &str = "nvidia.com/cuda.driver.major";
pub const DRIVER_MINOR: &str = "nvidia.com/cuda.driver.minor";
pub const DRIVER_REV: &str = "nvidia.com/cuda.driver.rev";

/// Newer GPU feature discovery writes `cuda.driver-version.{major,minor,revision}` beside (and
/// eventually instead of) `cuda.driver.{major,minor,rev}`: (older, newer).
const DRIVER_RENAMES: [(&str, &str); 3] = [
    (DRIVER_MAJOR, "nvidia.com/cuda.driver-version.major"),
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
}
