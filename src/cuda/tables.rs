//! Version tables from docs/cuda-binaries.md §4.2 and §5 (sources and confidence markers there).

use super::{Cc, CudaVersion, DriverVersion};

const fn v(major: u16, minor: u16) -> CudaVersion {
    CudaVersion::new(major, minor)
}

/// PTX ISA -> the CUDA release that introduced it (docs/cuda-binaries.md §5a).
static PTX_ISA: &[((u16, u16), CudaVersion)] = &[
    ((6, 0), v(9, 0)),
    ((6, 1), v(9, 1)),
    ((6, 2), v(9, 2)),
    ((6, 3), v(10, 0)),
    ((6, 4), v(10, 1)),
    ((6, 5), v(10, 2)),
    ((7, 0), v(11, 0)),
    ((7, 1), v(11, 1)),
    ((7, 2), v(11, 2)),
    ((7, 3), v(11, 3)),
    ((7, 4), v(11, 4)),
    ((7, 5), v(11, 5)),
    ((7, 6), v(11, 6)),
    ((7, 7), v(11, 7)),
    ((7, 8), v(11, 8)),
    ((8, 0), v(12, 0)),
    ((8, 1), v(12, 1)),
    ((8, 2), v(12, 2)),
    ((8, 3), v(12, 3)),
    ((8, 4), v(12, 4)),
    ((8, 5), v(12, 5)),
    ((8, 6), v(12, 7)),
    ((8, 7), v(12, 8)),
    ((8, 8), v(12, 9)),
    ((9, 0), v(13, 0)),
    ((9, 1), v(13, 1)),
    ((9, 2), v(13, 2)),
    ((9, 3), v(13, 3)),
    ((9, 4), v(13, 4)),
    ((9, 5), v(13, 5)),
];

/// The oldest driver that reads a concatenated fatbin entry (kind 0x100, `fatbinary --concat`,
/// docs/cuda-binaries.md §2.6). The format came with CUDA 13.4; a CUDA 13.0 driver (580.159, H200) answers a
/// module whose images are all concatenated with 209, as if it had no image (seen with
/// scripts/device-check.sh). 13.4 itself is inferred from the release that introduced it.
pub const CONCATENATED_NEEDS: CudaVersion = CudaVersion::new(13, 4);

/// The CUDA version a driver must support to JIT this PTX ISA. An ISA newer than the table is
/// assumed to follow the 9.x pattern (CUDA 13.x for 9.x); older than 6.0 needs no modern driver.
pub fn cuda_for_ptx_isa(isa: (u16, u16)) -> CudaVersion {
    if let Some((_, c)) = PTX_ISA.iter().find(|(i, _)| *i == isa) {
        return *c;
    }
    let newest = PTX_ISA.last().expect("table").0;
    if isa > newest {
        return v(isa.0 + 4, isa.1);
    }
    PTX_ISA.iter().rev().find(|(i, _)| *i <= isa).map_or(v(9, 0), |(_, c)| *c)
}

/// Driver branch -> the CUDA version it reports (docs/cuda-binaries.md §4.2; partly unconfirmed there).
static BRANCHES: &[(u32, CudaVersion)] = &[
    (450, v(11, 0)),
    (455, v(11, 1)),
    (460, v(11, 2)),
    (465, v(11, 3)),
    (470, v(11, 4)),
    (495, v(11, 5)),
    (510, v(11, 6)),
    (515, v(11, 7)),
    (520, v(11, 8)),
    (525, v(12, 0)),
    (530, v(12, 1)),
    (535, v(12, 2)),
    (545, v(12, 3)),
    (550, v(12, 4)),
    (555, v(12, 5)),
    (560, v(12, 6)),
    (565, v(12, 7)),
    (570, v(12, 8)),
    (575, v(12, 9)),
    (580, v(13, 0)),
    (590, v(13, 1)),
    (595, v(13, 2)),
    (610, v(13, 3)),
];

/// The CUDA version of a driver: the newest branch at or below its major number.
pub fn cuda_for_driver(d: &DriverVersion) -> Option<CudaVersion> {
    BRANCHES.iter().rev().find(|(b, _)| *b <= d.branch()).map(|(_, c)| *c)
}

/// Oldest driver branch that reports at least this CUDA version.
pub fn branch_for_cuda(c: CudaVersion) -> Option<u32> {
    BRANCHES.iter().find(|(_, v)| *v >= c).map(|(b, _)| *b)
}

/// Minor-version compatibility floor of a CUDA major (docs/cuda-binaries.md §5b): a runtime of that major runs on
/// any driver at or above it (API use; PTX newer than the driver is not covered).
pub fn minor_compat_floor(major: u16) -> Option<(&'static str, u32)> {
    match major {
        11 => Some(("450.80.02", 450)),
        12 => Some(("525.60.13", 525)),
        13 => Some(("580.65.06", 580)),
        _ => None,
    }
}

/// Driver the toolkit release notes list for all features of a release (docs/cuda-binaries.md §5b, GA values).
pub fn toolkit_driver(c: CudaVersion) -> Option<&'static str> {
    Some(match (c.major, c.minor) {
        (11, 0) => "450.51.05",
        (11, 1) => "455.23",
        (11, 2) => "460.27.03",
        (11, 3) => "465.19.01",
        (11, 4) => "470.42.01",
        (11, 5) => "495.29.05",
        (11, 6) => "510.39.01",
        (11, 7) => "515.43.04",
        (11, 8) => "520.61.05",
        (12, 0) => "525.60.13",
        (12, 1) => "530.30.02",
        (12, 2) => "535.54.03",
        (12, 3) => "545.23.06",
        (12, 4) => "550.54.14",
        (12, 5) => "555.42.02",
        (12, 6) => "560.28.03",
        (12, 8) => "570.26",
        (12, 9) => "575.51.03",
        (13, 0) => "580.65.06",
        _ => return None,
    })
}

/// The oldest driver to name in a fix for "needs CUDA `c`": the release-notes minimum when known,
/// else the branch.
pub fn driver_for(c: CudaVersion) -> String {
    match (toolkit_driver(c), branch_for_cuda(c)) {
        (Some(d), _) => d.to_string(),
        (None, Some(b)) => format!("{b} (R{b} branch)"),
        (None, None) => {
            let newest = BRANCHES.last().expect("table");
            format!("a CUDA {c} driver (newer than the R{} branch, which reports CUDA {})", newest.0, newest.1)
        }
    }
}

/// Oldest and newest compute capability a CUDA major's compilers build SASS for (docs/cuda-binaries.md §5c).
pub fn buildable(major: u64) -> Option<(Cc, Cc)> {
    let c = |ma, mi| Cc { major: ma, minor: mi };
    match major {
        11 => Some((c(3, 5), c(9, 0))),
        12 => Some((c(5, 0), c(12, 1))),
        13 => Some((c(7, 5), c(12, 1))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_agree_with_the_doc() {
        assert_eq!(cuda_for_ptx_isa((8, 5)), v(12, 5));
        assert_eq!(cuda_for_ptx_isa((8, 7)), v(12, 8));
        assert_eq!(cuda_for_ptx_isa((9, 5)), v(13, 5));
        assert_eq!(cuda_for_ptx_isa((9, 7)), v(13, 7));
        let d = DriverVersion::parse("535.104.05").unwrap();
        assert_eq!(cuda_for_driver(&d), Some(v(12, 2)));
        assert_eq!(cuda_for_driver(&DriverVersion::parse("580.95.05").unwrap()), Some(v(13, 0)));
        assert_eq!(d.to_string(), "535.104.05");
        assert_eq!(branch_for_cuda(v(12, 8)), Some(570));
    }
}
