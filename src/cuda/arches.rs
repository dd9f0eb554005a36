//! One row per compute capability: what cudalint knows of it beyond its GPUs' names — whether
//! PyTorch's `TORCH_CUDA_ARCH_LIST` accepts it (docs/cuda-binaries.md §6), the first Linux driver
//! that drives it (§5g) and the last driver branch that does. A new compute capability is one row
//! here (plus its GPUs in `gpus.rs`, and the CUDA releases that build it in `tables.rs`).
//!
//! First drivers: where NVIDIA documents an exact version (A100's 450.51.05 release notes, HGX
//! B200's 570.133.20 in the GPU Operator docs) it is compared in full; elsewhere the doc's values
//! are upper bounds taken from the open kernel modules' README, so only the branch is compared
//! and the message names the first version known to work. A product whose first driver differs
//! from its compute capability's says so in its own `gpus.rs` row.

use super::Cc;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FirstDriver {
    /// The version to name: `570.133.20`.
    pub version: &'static str,
    /// Compare full versions (documented minimum) or only the branch (upper bound).
    pub exact: bool,
}

pub const fn exact(version: &'static str) -> FirstDriver {
    FirstDriver { version, exact: true }
}
pub const fn branch(version: &'static str) -> FirstDriver {
    FirstDriver { version, exact: false }
}

pub struct Arch {
    pub cc: Cc,
    /// `TORCH_CUDA_ARCH_LIST` accepts it (no 'f' suffix anywhere).
    pub torch: bool,
    pub first_driver: Option<FirstDriver>,
    /// The last driver branch that drives it: Kepler ends with R470; Maxwell, Pascal and Volta
    /// with R580. Jetson parts (5.3, 6.2, 7.2) follow Jetson Linux instead and have none.
    pub last_branch: Option<u32>,
}

const fn a(major: u8, minor: u8, torch: bool, first_driver: Option<FirstDriver>, last_branch: Option<u32>) -> Arch {
    Arch { cc: Cc { major, minor }, torch, first_driver, last_branch }
}

const T: bool = true;

/// Oldest first.
pub static ARCHES: &[Arch] = &[
    a(3, 0, false, None, Some(470)),
    a(3, 2, false, None, Some(470)),
    a(3, 5, T, None, Some(470)),
    a(3, 7, T, None, Some(470)),
    a(5, 0, T, None, Some(580)),
    a(5, 2, T, None, Some(580)),
    a(5, 3, T, None, None),
    a(6, 0, T, None, Some(580)),
    a(6, 1, T, None, Some(580)),
    a(6, 2, T, None, None),
    a(7, 0, T, None, Some(580)),
    a(7, 2, T, None, None),
    a(7, 5, T, Some(branch("410.48")), None),
    a(8, 0, T, Some(exact("450.51.05")), None),
    a(8, 6, T, Some(branch("455.23")), None),
    a(8, 7, T, None, None),
    a(8, 9, T, Some(branch("520.56.06")), None),
    a(9, 0, T, Some(branch("520.56.06")), None),
    a(10, 0, T, Some(exact("570.133.20")), None),
    a(10, 3, T, Some(branch("580.82.07")), None),
    // Rubin (secondary sources only; ptxas has sm_107 from CUDA 13.4): whether torch's list takes
    // "10.7" and its first driver are unknown, so fixes name 10.3 for it as before this row.
    a(10, 7, false, None, None),
    a(11, 0, T, None, None),
    a(12, 0, T, Some(branch("570.86.16")), None),
    a(12, 1, T, Some(branch("580.82.07")), None),
];

/// The row of a compute capability, if cudalint knows it.
pub fn arch(cc: Cc) -> Option<&'static Arch> {
    ARCHES.iter().find(|r| r.cc == cc)
}

/// The compute capabilities `TORCH_CUDA_ARCH_LIST` accepts, oldest first.
pub fn torch_archs() -> impl DoubleEndedIterator<Item = Cc> {
    ARCHES.iter().filter(|r| r.torch).map(|r| r.cc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_sorted_unique_and_their_drivers_parse() {
        assert!(ARCHES.windows(2).all(|w| w[0].cc < w[1].cc));
        for r in ARCHES {
            if let Some(f) = &r.first_driver {
                assert!(super::super::DriverVersion::parse(f.version).is_some(), "{}", f.version);
            }
        }
    }
}
