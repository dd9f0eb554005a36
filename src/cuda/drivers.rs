//! Which drivers can drive which GPU at all (docs/cuda-binaries.md §5g), which runtimes need which driver
//! (§5b, §5i), and which GPUs forward compatibility serves (§5h).
//!
//! The tables themselves are one row per compute capability in `arches.rs` and one per product
//! in `gpus.rs`.

use super::arches::{FirstDriver, arch};
use super::{Cc, DriverVersion};

/// The first Linux driver that drives this GPU, if the tables know it (Jetson parts run the
/// driver of their Jetson Linux release and have none).
pub fn first_driver(name: &str, cc: Cc) -> Option<FirstDriver> {
    let product = super::gpus::GPUS.iter().find(|g| g.name == name).and_then(|g| g.first_driver.clone());
    product.or_else(|| arch(cc).and_then(|a| a.first_driver.clone()))
}

/// The last driver branch that drives this GPU (docs/cuda-binaries.md §5g).
pub fn last_branch(cc: Cc) -> Option<u32> {
    arch(cc).and_then(|a| a.last_branch)
}

/// Why `driver` cannot drive the GPU, or None when it can (or the tables cannot tell).
pub fn cannot_drive(name: &str, cc: Cc, driver: &DriverVersion) -> Option<String> {
    if let Some(f) = first_driver(name, cc) {
        let first = DriverVersion::parse(f.version).expect("table");
        let too_old = if f.exact { *driver < first } else { driver.branch() < first.branch() };
        if too_old {
            return Some(format!(
                "{name} (compute capability {cc}) needs driver {} or newer (R{} branch); driver {driver} predates it, so the kernel module does not drive the GPU at all",
                f.version,
                first.branch()
            ));
        }
    }
    if let Some(last) = last_branch(cc)
        && driver.branch() > last
    {
        return Some(format!(
            "R{last} is the last driver branch for compute capability {cc} ({name}); driver {driver} does not drive it"
        ));
    }
    None
}

/// GPUs that CUDA forward compatibility (`cuda-compat`) serves: data-center parts and
/// professional RTX boards; GeForce and TITAN get error 804 (docs/cuda-binaries.md §5h). By the
/// knowledge base's GPU classes (rules/knowledge/stack.toml).
pub fn forward_compat_supported(name: &str) -> bool {
    crate::knowledge::get().forward_compat(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> DriverVersion {
        DriverVersion::parse(s).unwrap()
    }
    fn cc(s: &str) -> Cc {
        Cc::parse(s).unwrap()
    }

    #[test]
    fn blackwell_on_a_cuda_12_2_driver_is_not_driven() {
        let why = cannot_drive("B200", cc("10.0"), &d("535.104.05")).unwrap();
        assert!(why.contains("570.133.20"), "{why}");
        // The documented HGX B200 minimum is exact: 570.86 is too old, 570.133.20 is enough.
        assert!(cannot_drive("B200", cc("10.0"), &d("570.86.15")).is_some());
        assert!(cannot_drive("B200", cc("10.0"), &d("570.133.20")).is_none());
        assert!(cannot_drive("GB10", cc("12.1"), &d("575.57.08")).is_some());
        assert!(cannot_drive("H100", cc("9.0"), &d("535.104.05")).is_none());
        // Branch-only bounds: any 530 driver may drive an L4.
        assert!(cannot_drive("L4", cc("8.9"), &d("530.30.02")).is_none());
    }

    #[test]
    fn volta_ends_with_r580() {
        assert!(cannot_drive("V100", cc("7.0"), &d("580.95.05")).is_none());
        assert!(cannot_drive("V100", cc("7.0"), &d("590.44.01")).unwrap().contains("R580"));
        assert!(!forward_compat_supported("RTX 4090"));
        assert!(forward_compat_supported("H100") && forward_compat_supported("RTX PRO 6000 Blackwell"));
    }
}
