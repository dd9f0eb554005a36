//! Which drivers can drive which GPU at all (docs/cuda-binaries.md §5g), which runtimes need which driver
//! (§5b, §5i), and which GPUs forward compatibility serves (§5h).
//!
//! First drivers: where NVIDIA documents an exact version for a product (A100's 450.51.05 release
//! notes, HGX B200's 570.133.20 in the GPU Operator docs) it is compared in full; elsewhere the
//! doc's values are upper bounds taken from the open kernel modules' README, so only the branch
//! is compared and the message names the first version known to work.

use super::{Cc, DriverVersion};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FirstDriver {
    /// The version to name: `570.133.20`.
    pub version: &'static str,
    /// Compare full versions (documented minimum) or only the branch (upper bound).
    pub exact: bool,
}

const fn exact(version: &'static str) -> FirstDriver {
    FirstDriver { version, exact: true }
}
const fn branch(version: &'static str) -> FirstDriver {
    FirstDriver { version, exact: false }
}

/// The first Linux driver that drives this GPU, if the tables know it (Jetson parts run the
/// driver of their Jetson Linux release and have none).
pub fn first_driver(name: &str, cc: Cc) -> Option<FirstDriver> {
    let by_name = match name {
        "H200" => Some(branch("550.90.07")),
        "GH200" => Some(branch("535.129.03")),
        "B200" | "GB200" | "B100" => Some(exact("570.133.20")),
        "L4" => Some(branch("530.41.03")),
        "L40S" => Some(branch("535.104.05")),
        "RTX A6000" => Some(branch("460.27.04")),
        _ => None,
    };
    if by_name.is_some() {
        return by_name;
    }
    match (cc.major, cc.minor) {
        (7, 5) => Some(branch("410.48")),
        (8, 0) => Some(exact("450.51.05")),
        (8, 6) => Some(branch("455.23")),
        (8, 9) | (9, 0) => Some(branch("520.56.06")),
        (10, 0) => Some(exact("570.133.20")),
        (10, 3) => Some(branch("580.82.07")),
        (12, 0) => Some(branch("570.86.16")),
        (12, 1) => Some(branch("580.82.07")),
        _ => None,
    }
}

/// The last driver branch that drives this GPU (docs/cuda-binaries.md §5g): Kepler ends with R470; Maxwell, Pascal
/// and Volta with R580. Jetson parts (5.3, 6.2, 7.2) follow Jetson Linux instead.
pub fn last_branch(cc: Cc) -> Option<u32> {
    match (cc.major, cc.minor) {
        (3, _) => Some(470),
        (5, 3) | (6, 2) | (7, 2) => None,
        (5, _) | (6, _) | (7, 0) => Some(580),
        _ => None,
    }
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
/// professional RTX boards; GeForce and TITAN get error 804 (docs/cuda-binaries.md §5h).
pub fn forward_compat_supported(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    let consumer = ["rtx 2", "rtx 3", "rtx 4", "rtx 5", "gtx"].iter().any(|p| n.starts_with(p));
    !consumer && !n.contains("titan")
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
