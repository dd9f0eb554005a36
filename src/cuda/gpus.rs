//! GPU products and their compute capabilities (docs/cuda-binaries.md §5d, from NVIDIA's CUDA GPUs pages; rows the
//! doc marks unconfirmed are kept, flagged). Names match case-, space- and dash-insensitively,
//! with the usual vendor words ("NVIDIA", "GeForce", "Tesla") and memory/form-factor suffixes
//! as `nvidia-smi` prints them ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB") tolerated.

use super::Cc;
use super::arches::{FirstDriver, branch, exact};

pub struct Gpu {
    pub name: &'static str,
    pub cc: Cc,
    pub aliases: &'static [&'static str],
    /// From secondary sources only (docs/cuda-binaries.md [S]/[U]).
    pub unconfirmed: bool,
    /// The product's own first driver where it differs from its compute capability's
    /// (`arches.rs`): NVIDIA documents one, or the product came later than its architecture.
    pub first_driver: Option<FirstDriver>,
    /// The hosts it comes in: any CPU, or arm64 only (Grace superchips, Jetson modules).
    pub host: Host,
}

crate::schema::words! {
    /// The hosts a GPU comes in, for matching an image's platform.
    pub enum Host {
        /// Discrete GPUs: x86_64 and arm64 servers and workstations.
        Any = "any",
        /// Built with an arm64 CPU (Grace superchips, DGX Spark): arm64 images only.
        Arm64 = "arm64",
        /// A Jetson module: arm64 images only, and its driver comes with Jetson Linux (JetPack).
        Jetson = "jetson",
    }
}

impl Host {
    /// Whether an image of `platform` (`linux/amd64`, `linux/arm64/v8`; unknown: yes) runs on
    /// such a host at all.
    pub fn runs(self, platform: Option<&str>) -> bool {
        let Some(p) = platform else { return true };
        let arch = p.split('/').nth(1).unwrap_or(p);
        self == Host::Any || matches!(arch, "arm64" | "aarch64")
    }
}

const fn g(name: &'static str, major: u8, minor: u8, aliases: &'static [&'static str]) -> Gpu {
    Gpu { name, cc: Cc { major, minor }, aliases, unconfirmed: false, first_driver: None, host: Host::Any }
}
impl Gpu {
    const fn first_driver(self, d: FirstDriver) -> Gpu {
        Gpu { first_driver: Some(d), ..self }
    }
    const fn arm64(self) -> Gpu {
        Gpu { host: Host::Arm64, ..self }
    }
    const fn jetson(self) -> Gpu {
        Gpu { host: Host::Jetson, ..self }
    }
}

const fn u(name: &'static str, major: u8, minor: u8, aliases: &'static [&'static str]) -> Gpu {
    Gpu { name, cc: Cc { major, minor }, aliases, unconfirmed: true, first_driver: None, host: Host::Any }
}

/// The architecture a compute capability belongs to, by NVIDIA's names (docs/cuda-binaries.md §5d).
pub fn architecture(cc: Cc) -> &'static str {
    match (cc.major, cc.minor) {
        (0..=2, _) => "Fermi or older",
        (3, _) => "Kepler",
        (5, _) => "Maxwell",
        (6, _) => "Pascal",
        (7, 0..=4) => "Volta",
        (7, _) => "Turing",
        (8, 9) => "Ada",
        (8, _) => "Ampere",
        (9, _) => "Hopper",
        (10..=12, _) => "Blackwell",
        _ => "a future architecture",
    }
}

pub static GPUS: &[Gpu] = &[
    u("K80", 3, 7, &["Tesla K80"]),
    u("K40", 3, 5, &["Tesla K40", "K20"]),
    g("M60", 5, 2, &["Tesla M60"]),
    g("M40", 5, 2, &["Tesla M40"]),
    g("Jetson Nano", 5, 3, &["Jetson TX1"]).jetson(),
    g("P100", 6, 0, &["Tesla P100"]),
    g("P40", 6, 1, &["Tesla P40"]),
    g("P4", 6, 1, &["Tesla P4"]),
    g("GTX 1080 Ti", 6, 1, &["GTX 1080", "GTX 1070", "GTX 1060", "TITAN Xp"]),
    g("Jetson TX2", 6, 2, &[]).jetson(),
    g("V100", 7, 0, &["Tesla V100", "TITAN V", "Quadro GV100"]),
    g("Jetson AGX Xavier", 7, 2, &["Xavier NX", "Jetson Xavier NX"]).jetson(),
    u("T4", 7, 5, &["Tesla T4"]),
    u("RTX 2080 Ti", 7, 5, &["RTX 2080", "RTX 2070", "RTX 2060", "Quadro RTX 8000", "Quadro RTX 6000", "TITAN RTX"]),
    u("A100", 8, 0, &["A100 SXM4", "A100 PCIe", "A100 80GB", "A100 40GB"]),
    u("A30", 8, 0, &[]),
    u("A800", 8, 0, &[]),
    g("A40", 8, 6, &[]),
    g("A10", 8, 6, &[]),
    u("A10G", 8, 6, &[]),
    g("A16", 8, 6, &[]),
    g("A2", 8, 6, &[]),
    g("RTX A6000", 8, 6, &["RTX A5000", "RTX A4000", "RTX A3000", "RTX A2000"]).first_driver(branch("460.27.04")),
    g("RTX 3090", 8, 6, &["RTX 3090 Ti", "RTX 3080", "RTX 3080 Ti", "RTX 3070", "RTX 3060"]),
    g("Jetson AGX Orin", 8, 7, &["Orin", "Orin NX", "Orin Nano", "Jetson Orin"]).jetson(),
    g("L4", 8, 9, &[]).first_driver(branch("530.41.03")),
    g("L40", 8, 9, &[]),
    g("L40S", 8, 9, &[]).first_driver(branch("535.104.05")),
    g("RTX 6000 Ada", 8, 9, &["RTX 5000 Ada", "RTX 4500 Ada", "RTX 4000 Ada", "RTX 2000 Ada"]),
    g("RTX 4090", 8, 9, &["RTX 4080", "RTX 4070 Ti", "RTX 4070", "RTX 4060 Ti", "RTX 4060", "RTX 4050"]),
    g("H100", 9, 0, &["H100 SXM", "H100 PCIe", "H100 NVL", "H100 80GB HBM3"]),
    g("H200", 9, 0, &["H200 NVL"]).first_driver(branch("550.90.07")),
    g("GH200", 9, 0, &["GH200 480GB"]).first_driver(branch("535.129.03")).arm64(),
    u("H800", 9, 0, &[]),
    u("H20", 9, 0, &[]),
    g("B200", 10, 0, &[]).first_driver(exact("570.133.20")),
    g("GB200", 10, 0, &[]).first_driver(exact("570.133.20")).arm64(),
    u("B100", 10, 0, &[]).first_driver(exact("570.133.20")),
    g("B300", 10, 3, &[]),
    g("GB300", 10, 3, &[]).arm64(),
    u("Rubin", 10, 7, &["VR200"]),
    g("Jetson Thor", 11, 0, &["Jetson T5000", "Jetson T4000", "Thor"]).jetson(),
    g(
        "RTX PRO 6000 Blackwell",
        12,
        0,
        &[
            "RTX PRO 6000 Blackwell Server Edition",
            "RTX PRO 6000 Blackwell Workstation Edition",
            "RTX PRO 6000 Blackwell Max-Q",
            "RTX PRO 5000 Blackwell",
            "RTX PRO 4500 Blackwell",
            "RTX PRO 4000 Blackwell",
            "RTX PRO 2000 Blackwell",
        ],
    ),
    g("RTX 5090", 12, 0, &["RTX 5080", "RTX 5070 Ti", "RTX 5070", "RTX 5060 Ti", "RTX 5060", "RTX 5050"]),
    g("GB10", 12, 1, &["DGX Spark"]).arm64(),
];

/// Lowercase alphanumerics only, vendor words dropped: "NVIDIA GeForce RTX 4090" -> "rtx4090".
pub fn normalize(name: &str) -> String {
    let lower = name.to_lowercase();
    let mut s: String = lower.chars().filter(char::is_ascii_alphanumeric).collect();
    for word in ["nvidia", "geforce", "tesla", "quadro"] {
        if let Some(rest) = s.strip_prefix(word) {
            s = rest.to_string();
        }
    }
    s
}

/// Memory sizes and form factors `nvidia-smi` appends ("80gbhbm3", "sxm480gb", "pcie").
fn strip_variant(n: &str) -> &str {
    for marker in ["sxm", "pcie", "nvl", "hbm"] {
        if let Some(i) = n.find(marker) {
            return &n[..i];
        }
    }
    // "a10080gb" -> "a100"
    let bytes = n.as_bytes();
    if n.ends_with("gb") {
        let mut i = n.len() - 2;
        while i > 0 && bytes[i - 1].is_ascii_digit() {
            i -= 1;
        }
        if i > 0 && i < n.len() - 2 {
            return &n[..i];
        }
    }
    n
}

pub fn lookup(name: &str) -> Option<&'static Gpu> {
    let n = normalize(name);
    let exact = |k: &str| GPUS.iter().find(|g| normalize(g.name) == k || g.aliases.iter().any(|a| normalize(a) == k));
    exact(&n).or_else(|| exact(strip_variant(&n)))
}

/// The known names closest to `name` (for "did you mean").
pub fn closest(name: &str, n: usize) -> Vec<&'static str> {
    let key = normalize(name);
    let mut all: Vec<(usize, &'static str)> = GPUS
        .iter()
        .flat_map(|g| std::iter::once(g.name).chain(g.aliases.iter().copied()))
        .map(|cand| (edit_distance(&key, &normalize(cand)), cand))
        .collect();
    all.sort();
    all.into_iter().take(n).map(|(_, c)| c).collect()
}

/// Levenshtein distance, for "did you mean" (GPU names, config keys).
pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            cur.push((prev[j] + usize::from(ca != *cb)).min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A GPU's compute capability is a row of `arches::ARCHES`: a GPU row alone (Rubin's 10.7
    /// had none) leaves the arch's facts to chance.
    #[test]
    fn every_gpu_has_its_compute_capability_row() {
        for g in GPUS {
            assert!(
                super::super::arches::arch(g.cc).is_some(),
                "{} ({}.{}) has no row in ARCHES",
                g.name,
                g.cc.major,
                g.cc.minor
            );
        }
    }

    #[test]
    fn names_as_people_and_nvidia_smi_write_them() {
        assert_eq!(lookup("H100").unwrap().cc, Cc { major: 9, minor: 0 });
        assert_eq!(lookup("rtx 4090").unwrap().cc, Cc { major: 8, minor: 9 });
        assert_eq!(lookup("NVIDIA GeForce RTX 4090").unwrap().cc, Cc { major: 8, minor: 9 });
        assert_eq!(lookup("NVIDIA H100 80GB HBM3").unwrap().name, "H100");
        assert_eq!(lookup("NVIDIA A100-SXM4-80GB").unwrap().name, "A100");
        assert_eq!(lookup("Tesla T4").unwrap().cc, Cc { major: 7, minor: 5 });
        assert_eq!(lookup("a10g").unwrap().cc, Cc { major: 8, minor: 6 });
        assert!(lookup("H1000").is_none());
        assert_eq!(closest("H1000", 3)[0], "H100");
    }
}
