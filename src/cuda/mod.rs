//! CUDA knowledge: compute capabilities, GPU names, version tables (PTX ISA, drivers, toolkits)
//! and the rules by which the driver picks (or fails to pick) an image — docs/cuda-binaries.md §4 and §5.

pub mod arches;
pub mod compat;
pub mod drivers;
pub mod fix;
pub mod gfd;
pub mod gpus;
pub mod require;
pub mod tables;
pub mod toolchains;

use std::fmt;

use serde::Serialize;

/// A compute capability, `9.0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cc {
    pub major: u8,
    pub minor: u8,
}

impl Cc {
    /// From an SM number as fatbin headers and cubins store it: 90 -> 9.0, 103 -> 10.3.
    pub fn from_sm(sm: u32) -> Cc {
        Cc { major: (sm / 10).min(255) as u8, minor: (sm % 10) as u8 }
    }
    pub fn sm(self) -> u32 {
        u32::from(self.major) * 10 + u32::from(self.minor)
    }
    /// `9.0`, `8.9`, `90`, `sm_90`, `sm_90a`, `compute_90` (suffix ignored here).
    pub fn parse(s: &str) -> Option<Cc> {
        let t = s.trim().to_ascii_lowercase();
        let t = t.strip_prefix("sm_").or_else(|| t.strip_prefix("compute_")).unwrap_or(&t);
        let t = t.trim_end_matches(['a', 'f']);
        if let Some((a, b)) = t.split_once('.') {
            return Some(Cc { major: a.parse().ok()?, minor: b.parse().ok()? });
        }
        let n: u32 = t.parse().ok()?;
        (10..=255 * 10).contains(&n).then(|| Cc::from_sm(n))
    }
}

impl fmt::Display for Cc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

impl Serialize for Cc {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

/// Architecture names (`sm_90a`, `compute_100f`, `jit compute_80`) in the order people read
/// them: SASS, then PTX, then Tile IR, each by number (`sm_75, sm_80, sm_100, sm_100a`), not as
/// strings (`sm_100` before `sm_70`). Anything else after them, as a string.
pub fn arch_key(s: &str) -> (u8, u32, &str, &str) {
    let name = s.rsplit(' ').next().unwrap_or(s);
    let (rank, rest) = match name.split_once('_') {
        Some(("sm", r)) => (0, r),
        Some(("compute", r)) => (1, r),
        Some(("tile", r)) => (2, r),
        _ => return (3, 0, "", s),
    };
    let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
    match rest[..digits].parse() {
        Ok(n) => (rank, n, &rest[digits..], s),
        Err(_) => (3, 0, "", s),
    }
}

/// `archs` sorted by [`arch_key`], duplicates dropped: the one order every list of
/// architectures is shown in (facts, messages, matrix cells, diffs).
pub fn sorted_archs(archs: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut v: Vec<String> = archs.into_iter().collect();
    v.sort_by(|a, b| arch_key(a).cmp(&arch_key(b)));
    v.dedup();
    v
}

/// A CUDA version, `12.2` (the driver's CUDA version, a toolkit, a runtime).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CudaVersion {
    pub major: u16,
    pub minor: u16,
}

impl CudaVersion {
    pub const fn new(major: u16, minor: u16) -> CudaVersion {
        CudaVersion { major, minor }
    }
    /// `12.2`, `12.2.140`, `12` (minor 0).
    pub fn parse(s: &str) -> Option<CudaVersion> {
        let mut it = s.trim().split('.');
        let major = it.next()?.parse().ok()?;
        let minor = it.next().map_or(Some(0), |m| m.parse().ok())?;
        Some(CudaVersion { major, minor })
    }
}

impl fmt::Display for CudaVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

impl Serialize for CudaVersion {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

/// An NVIDIA driver version, `535.104.05`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DriverVersion(pub Vec<u32>);

impl DriverVersion {
    pub fn parse(s: &str) -> Option<DriverVersion> {
        let parts: Option<Vec<u32>> = s.trim().split('.').map(|p| p.parse().ok()).collect();
        let parts = parts?;
        (!parts.is_empty() && parts[0] >= 100).then_some(DriverVersion(parts))
    }
    pub fn branch(&self) -> u32 {
        self.0[0]
    }
}

impl fmt::Display for DriverVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> =
            self.0.iter().enumerate().map(|(i, p)| if i == 2 { format!("{p:02}") } else { p.to_string() }).collect();
        write!(f, "{}", parts.join("."))
    }
}

impl Serialize for DriverVersion {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::sorted_archs;

    #[test]
    fn architectures_sort_by_number_sass_first() {
        let v = ["sm_120a", "compute_120", "sm_70", "sm_100a", "sm_100", "sm_75", "compute_75", "sm_90a", "sm_70"];
        assert_eq!(
            sorted_archs(v.map(String::from)),
            ["sm_70", "sm_75", "sm_90a", "sm_100", "sm_100a", "sm_120a", "compute_75", "compute_120"]
        );
        let cells = ["jit compute_90", "sm_100", "sm_80", "✗ 209"];
        assert_eq!(sorted_archs(cells.map(String::from)), ["sm_80", "sm_100", "jit compute_90", "✗ 209"]);
    }
}
