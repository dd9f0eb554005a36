//! `NVIDIA_REQUIRE_CUDA`, `NVIDIA_REQUIRE_ARCH` and the other `NVIDIA_REQUIRE_*` variables: the
//! constraints the NVIDIA container toolkit checks before it starts a container
//! (docs/cuda-binaries.md §5h, §5j).
//!
//! The language is libnvidia-container's (`src/cli/dsl.c`, keys in `src/cli/configure.c`; line
//! numbers below are those of NVIDIA/libnvidia-container at 61bfaf38 for dsl.c and e27a4a75 for
//! configure.c):
//!
//! * A requirement is alternatives separated by the space character only (`strsep(" ")`,
//!   dsl.c:144); each alternative is constraints separated by `,` (dsl.c:147). Empty pieces are
//!   skipped (dsl.c:145, 148). A tab or newline is no separator: it ends up in a key or a value
//!   and the constraint is invalid.
//! * A constraint is `key op value`: the key is everything before the first of `<>=!`, which must
//!   not be empty (dsl.c:98); the operator is the whole run of `<>=!` characters that follows and
//!   must be one of `=`, `!=`, `<`, `<=`, `>`, `>=` (dsl.c:24-31, 101-112) — compared with
//!   `strncmp` over the run's length, so a lone `!` reads as `!=` and `==`, `=>`, `=<` are invalid;
//!   the value is the rest and must not be empty (dsl.c:111).
//! * Keys, matched case-insensitively (dsl.c:116): `cuda` (the driver's CUDA version, `major.minor`
//!   from NVML), `driver` (the driver version, `535.104.05`), `arch` (each device's compute
//!   capability, `major.minor`), `brand` (`Tesla`, `GeForce`, ..., compared case-insensitively with
//!   `=` or `!=` only, dsl.c:80-87) — configure.c:47-52. Any other key is invalid (dsl.c:125).
//! * Versions are digits and dots only (dsl.c:39-42), compared number by number with trailing zero
//!   parts ignored (`9` = `9.0`, dsl.c:44-75); a part that is no number (a leading dot) or overflows
//!   is invalid (dsl.c:45-48). So `arch>=9.0a` is invalid.
//! * An invalid constraint fails the whole check with `invalid expression` (dsl.c:150-152), but
//!   evaluation is lazy: an alternative stops at its first false constraint and the requirement at
//!   its first true alternative (dsl.c:154-158), so a bad constraint errs only where it is reached.
//!   A false constraint whose `key op value` text does not fit 128 bytes is invalid too
//!   (dsl.c:119). [`parse`] rejects every such constraint, reached or not.
//! * An alternative of commas only ends the evaluation with the previous alternative's result
//!   (dsl.c:157-158 with `ret` untouched): it admits everything when it comes first, nothing
//!   after a false alternative.
//! * Each `--require` argument is evaluated on its own and all must hold (configure.c:331-360),
//!   once per visible GPU and per MIG device's parent: `arch` and `brand` are checked on every
//!   device; with no device visible they hold (configure.c:203-222), as `cuda`/`driver` do when
//!   the driver reports none (configure.c:181-200). At most 16 requirements (configure.c:92-96).
//!
//! The toolkit passes every `NVIDIA_REQUIRE_*` variable but `NVIDIA_REQUIRE_JETPACK*` as one
//! `--require` each; an image with `CUDA_VERSION` and no (or an empty) `NVIDIA_REQUIRE_CUDA` gets
//! `cuda>=major.minor`; `NVIDIA_DISABLE_REQUIRE` set to a true boolean (Go's `ParseBool`) turns the
//! check off (nvidia-container-toolkit `internal/config/image/cuda_image.go:101-147`,
//! `cmd/nvidia-container-runtime-hook/main.go:145-147`). The legacy hook and the CSV (Jetson) mode
//! check them; CDI mode does not.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use super::{Cc, CudaVersion, DriverVersion, gpus, tables};

/// The longest requirement cudalint reads; a longer one is refused ([`RequireError::TooLong`]).
pub const MAX_LEN: usize = 4096;

/// libnvidia-container's buffer for reporting a false constraint (dsl.c:15, 119).
const EXPR_MAX: usize = 128;

/// The characters that make up an operator (dsl.c:98, 101).
const OP_CHARS: [char; 4] = ['<', '>', '=', '!'];

/// What a constraint tests (configure.c:47-52).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Key {
    /// The CUDA version the driver reports, `major.minor`.
    Cuda,
    /// The driver version, `535.104.05`.
    Driver,
    /// The compute capability of each device, `major.minor`.
    Arch,
    /// The brand NVML reports for each device (`Tesla`, `GeForce`, ...).
    Brand,
}

impl Key {
    pub const ALL: [Key; 4] = [Key::Cuda, Key::Driver, Key::Arch, Key::Brand];

    pub fn as_str(self) -> &'static str {
        match self {
            Key::Cuda => "cuda",
            Key::Driver => "driver",
            Key::Arch => "arch",
            Key::Brand => "brand",
        }
    }

    fn is_version(self) -> bool {
        self != Key::Brand
    }
}

/// A comparison (dsl.c:24-31).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Op {
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Eq => "=",
            Op::Ne => "!=",
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
        }
    }

    /// The operator a run of `<>=!` characters names: `strncmp(run, op, len(run))` against the
    /// table in order (dsl.c:103-110), so `!` alone is `!=`.
    fn from_run(run: &str) -> Option<Op> {
        Some(match run {
            "=" => Op::Eq,
            "!=" | "!" => Op::Ne,
            "<" => Op::Lt,
            "<=" => Op::Le,
            ">" => Op::Gt,
            ">=" => Op::Ge,
            _ => return None,
        })
    }

    fn holds(self, o: Ordering) -> bool {
        match self {
            Op::Eq => o.is_eq(),
            Op::Ne => o.is_ne(),
            Op::Lt => o.is_lt(),
            Op::Le => o.is_le(),
            Op::Gt => o.is_gt(),
            Op::Ge => o.is_ge(),
        }
    }
}

/// `cuda>=12.0`: one test of a key against a value, as written (the value is checked by [`parse`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Constraint {
    pub key: Key,
    pub op: Op,
    pub value: String,
}

/// Constraints that must all hold (`cuda>=12.0,arch>=8.0`). Empty for a piece of commas only.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Alternative(pub Vec<Constraint>);

/// Alternatives of which one must hold (`cuda>=13.0 brand=tesla,driver>=535`). Empty (the empty
/// string) admits everything (dsl.c:134).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Requirement(pub Vec<Alternative>);

/// Why libnvidia-container would answer `invalid expression` (or cudalint will not read it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequireError {
    #[error("{len} bytes, more than the {MAX_LEN} cudalint reads")]
    TooLong { len: usize },
    #[error("`{0}` has no key before its operator")]
    NoKey(String),
    #[error("`{0}` has no operator (=, !=, <, <=, >, >=)")]
    NoOperator(String),
    #[error("`{constraint}`: `{op}` is no operator (=, !=, <, <=, >, >=)")]
    BadOperator { constraint: String, op: String },
    #[error("`{0}` has no value after its operator")]
    NoValue(String),
    #[error("`{constraint}`: `{key}` is no key (cuda, driver, arch, brand)")]
    UnknownKey { constraint: String, key: String },
    #[error("`{constraint}`: `{value}` is no version (digits and dots, starting with a digit)")]
    BadVersion { constraint: String, value: String },
    #[error("`{constraint}`: brand takes = or != only")]
    BrandOperator { constraint: String },
    #[error("`{0}` is too long for the toolkit to report (128 bytes) and is invalid wherever it does not hold")]
    TooLongToReport(String),
}

/// Parses a requirement the way libnvidia-container reads it, rejecting every constraint it
/// would call an `invalid expression` wherever it reached it (see the module docs).
pub fn parse(s: &str) -> Result<Requirement, RequireError> {
    if s.len() > MAX_LEN {
        return Err(RequireError::TooLong { len: s.len() });
    }
    let mut alts = Vec::new();
    for piece in s.split(' ').filter(|p| !p.is_empty()) {
        let constraints: Result<Vec<Constraint>, RequireError> =
            piece.split(',').filter(|c| !c.is_empty()).map(parse_constraint).collect();
        alts.push(Alternative(constraints?));
    }
    Ok(Requirement(alts))
}

fn parse_constraint(c: &str) -> Result<Constraint, RequireError> {
    let start = match c.find(OP_CHARS) {
        None => return Err(RequireError::NoOperator(c.into())),
        Some(0) => return Err(RequireError::NoKey(c.into())),
        Some(i) => i,
    };
    let (key_text, rest) = c.split_at(start);
    let end = rest.find(|ch: char| !OP_CHARS.contains(&ch)).unwrap_or(rest.len());
    let (run, value) = rest.split_at(end);
    let op = Op::from_run(run).ok_or_else(|| RequireError::BadOperator { constraint: c.into(), op: run.into() })?;
    if value.is_empty() {
        return Err(RequireError::NoValue(c.into()));
    }
    let key = Key::ALL
        .into_iter()
        .find(|k| k.as_str().eq_ignore_ascii_case(key_text))
        .ok_or_else(|| RequireError::UnknownKey { constraint: c.into(), key: key_text.into() })?;
    if key.is_version() && version(value).is_none() {
        return Err(RequireError::BadVersion { constraint: c.into(), value: value.into() });
    }
    if key == Key::Brand && !matches!(op, Op::Eq | Op::Ne) {
        return Err(RequireError::BrandOperator { constraint: c.into() });
    }
    // "%s %s %s" of the key as written, the operator's table string and the value (dsl.c:119).
    if key_text.len() + op.as_str().len() + value.len() + 2 >= EXPR_MAX {
        return Err(RequireError::TooLongToReport(c.into()));
    }
    Ok(Constraint { key, op, value: value.into() })
}

/// A version as dsl_compare_version reads it: digits and dots, a number first, numbers that fit
/// below `UINTMAX_MAX` (dsl.c:39-48); runs of dots separate parts.
fn version(s: &str) -> Option<Vec<u64>> {
    if !s.starts_with(|c: char| c.is_ascii_digit()) || !s.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return None;
    }
    s.split('.').filter(|p| !p.is_empty()).map(|p| p.parse::<u64>().ok().filter(|n| *n != u64::MAX)).collect()
}

/// Compares part by part, a missing part counting as 0 (dsl.c:44-75).
fn compare(a: &[u64], b: &[u64]) -> Ordering {
    let n = a.len().max(b.len());
    (0..n).map(|i| a.get(i).unwrap_or(&0).cmp(b.get(i).unwrap_or(&0))).find(|o| o.is_ne()).unwrap_or(Ordering::Equal)
}

/// What the toolkit knows about one device of a node when it checks a requirement. `None` is
/// what libnvidia-container treats as "holds": no device visible (`arch`, `brand`), or no version
/// from the driver (`cuda`, `driver`) — configure.c:181-222.
#[derive(Debug, Clone, Copy, Default)]
pub struct Node<'a> {
    pub cuda: Option<CudaVersion>,
    pub driver: Option<&'a DriverVersion>,
    pub arch: Option<Cc>,
    pub brand: Option<&'a str>,
}

impl Constraint {
    pub fn holds(&self, node: &Node) -> bool {
        let ours: Vec<u64> = match self.key {
            Key::Brand => {
                return node.brand.is_none_or(|b| (self.op == Op::Eq) == b.eq_ignore_ascii_case(&self.value));
            }
            Key::Cuda => match node.cuda {
                Some(c) => vec![c.major.into(), c.minor.into()],
                None => return true,
            },
            Key::Driver => match node.driver {
                Some(d) => d.0.iter().map(|p| u64::from(*p)).collect(),
                None => return true,
            },
            Key::Arch => match node.arch {
                Some(c) => vec![c.major.into(), c.minor.into()],
                None => return true,
            },
        };
        version(&self.value).is_some_and(|v| self.op.holds(compare(&ours, &v)))
    }
}

impl Alternative {
    /// The oldest driver CUDA version this alternative's `cuda` and `driver` lower bounds admit
    /// (`None` when it has none).
    fn cuda_floor(&self) -> Option<CudaVersion> {
        let mut floor = None;
        for c in &self.0 {
            let Some(v) = version(&c.value) else { continue };
            let strict = match c.op {
                Op::Ge | Op::Eq => false,
                Op::Gt => true,
                _ => continue,
            };
            let bound = match c.key {
                Key::Cuda => cuda_at_least(&v, strict),
                Key::Driver => {
                    let parts: Option<Vec<u32>> = v.iter().map(|p| u32::try_from(*p).ok()).collect();
                    parts.and_then(|p| tables::cuda_for_driver(&DriverVersion(p)))
                }
                _ => continue,
            };
            floor = floor.max(bound);
        }
        floor
    }

    fn arch_holds(&self, cc: Cc) -> bool {
        let node = Node { arch: Some(cc), ..Node::default() };
        self.0.iter().filter(|c| c.key == Key::Arch).all(|c| c.holds(&node))
    }
}

/// The oldest `major.minor` at or above (above, when `strict`) the version `v`.
fn cuda_at_least(v: &[u64], strict: bool) -> Option<CudaVersion> {
    let major = u16::try_from(v.first().copied().unwrap_or(0)).ok()?;
    let minor = u16::try_from(v.get(1).copied().unwrap_or(0)).ok()?;
    let base = [u64::from(major), u64::from(minor)];
    let bump = match compare(&base, v) {
        Ordering::Less => true,
        Ordering::Equal => strict,
        Ordering::Greater => false,
    };
    Some(CudaVersion::new(major, if bump { minor.checked_add(1)? } else { minor }))
}

impl Requirement {
    /// Whether libnvidia-container lets a container start on this node (dsl.c:144-163).
    pub fn admits(&self, node: &Node) -> bool {
        for (i, alt) in self.0.iter().enumerate() {
            if alt.0.is_empty() {
                return i == 0;
            }
            if alt.0.iter().all(|c| c.holds(node)) {
                return true;
            }
        }
        self.0.is_empty()
    }

    /// The alternatives evaluation can reach: up to the first one of commas only.
    fn reachable(&self) -> impl Iterator<Item = &Alternative> {
        self.0.iter().take_while(|a| !a.0.is_empty())
    }

    /// Whether some alternative (that evaluation reaches) tests `arch`.
    pub fn has_arch(&self) -> bool {
        self.reachable().any(|a| a.0.iter().any(|c| c.key == Key::Arch))
    }

    /// Whether a device of this compute capability passes on some node: one reachable
    /// alternative's `arch` constraints hold (its other constraints taken as met).
    pub fn admits_arch(&self, cc: Cc) -> bool {
        self.0.first().is_none_or(|a| a.0.is_empty()) || self.reachable().any(|a| a.arch_holds(cc))
    }

    /// The oldest driver CUDA version some alternative admits, from its `cuda` and `driver` lower
    /// bounds (0.0 for an alternative without one); `None` without alternatives.
    pub fn cuda_weakest(&self) -> Option<CudaVersion> {
        if self.0.first().is_some_and(|a| a.0.is_empty()) {
            return Some(CudaVersion::new(0, 0));
        }
        self.reachable().map(|a| a.cuda_floor().unwrap_or(CudaVersion::new(0, 0))).min()
    }

    /// Whether some reachable alternative bounds the driver's CUDA version or driver version from below.
    pub fn has_cuda_floor(&self) -> bool {
        self.reachable().any(|a| a.cuda_floor().is_some())
    }
}

impl fmt::Display for Constraint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}{}", self.key.as_str(), self.op.as_str(), self.value)
    }
}

impl fmt::Display for Alternative {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str(",");
        }
        let parts: Vec<String> = self.0.iter().map(Constraint::to_string).collect();
        f.write_str(&parts.join(","))
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(Alternative::to_string).collect();
        f.write_str(&parts.join(" "))
    }
}

/// `cuda>=12.9 brand=tesla,driver>=535,driver<536`: the weakest driver CUDA version any
/// alternative admits (its `cuda` and `driver` lower bounds; an alternative without one admits
/// any driver). `None` when the requirement is empty or invalid.
pub fn cuda_weakest(req: &str) -> Option<CudaVersion> {
    parse(req).ok()?.cuda_weakest()
}

/// The known compute capabilities (`gpus::GPUS`) a requirement's `arch` constraints admit; `None`
/// when it has none (it admits every GPU) or is invalid.
pub fn arch_ccs(req: &str) -> Option<Vec<Cc>> {
    let r = parse(req).ok()?;
    r.has_arch().then(|| known_ccs().into_iter().filter(|cc| r.admits_arch(*cc)).collect())
}

/// Every compute capability of the GPU table.
pub fn known_ccs() -> BTreeSet<Cc> {
    gpus::GPUS.iter().map(|g| g.cc).collect()
}

/// The requirements the container toolkit checks for an image, as `(variable, requirement)`:
/// every `NVIDIA_REQUIRE_*` variable but `NVIDIA_REQUIRE_JETPACK*`, plus `("CUDA_VERSION",
/// "cuda>=X.Y")` for an image with `CUDA_VERSION` and an empty or unset `NVIDIA_REQUIRE_CUDA`;
/// none when `NVIDIA_DISABLE_REQUIRE` is true (nvidia-container-toolkit
/// `internal/config/image/cuda_image.go:101-147`).
pub fn from_env(env: &BTreeMap<String, String>) -> Vec<(String, String)> {
    if env.get("NVIDIA_DISABLE_REQUIRE").is_some_and(|v| go_parse_bool(v) == Some(true)) {
        return Vec::new();
    }
    let mut out: Vec<(String, String)> = env
        .iter()
        .filter(|(k, _)| k.starts_with("NVIDIA_REQUIRE_") && !k.starts_with("NVIDIA_REQUIRE_JETPACK"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let legacy = env.get("NVIDIA_REQUIRE_CUDA").is_none_or(String::is_empty);
    if let Some(c) = env.get("CUDA_VERSION").filter(|_| legacy).and_then(|v| CudaVersion::parse(v)) {
        out.push(("CUDA_VERSION".into(), format!("cuda>={c}")));
    }
    out
}

/// Go's `strconv.ParseBool`.
fn go_parse_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// The shortest requirement that admits drivers of CUDA `cuda` or newer on exactly the GPUs of
/// `runs` among the known compute capabilities (`gpus::GPUS`, plus any other in `runs`):
/// `cuda>=13.0,arch>=7.5` when `runs` is every known CC from 7.5 up, `cuda>=12.0,arch>=7.0,arch<10.0`
/// for 7.0 to 9.0, one alternative per unbroken stretch of known CCs (each repeating the `cuda`
/// bound) when `runs` has holes, `arch=X` for a stretch of one inside the table. A stretch that
/// reaches the newest known CC has no upper bound (GPUs newer than the table pass), one that
/// starts at the oldest has no lower bound. `cuda>=0.0` is left out; all CCs and CUDA 0.0 give
/// the empty requirement, which admits everything; no CCs give `arch<0`, which admits no GPU.
///
/// Set as `NVIDIA_REQUIRE_CUDA` (or any `NVIDIA_REQUIRE_*`), libnvidia-container checks it on
/// every visible GPU before the container starts (with no GPU visible, `arch` holds) and refuses
/// the container with `requirement error: unsatisfied condition: ...` when the driver reports
/// an older CUDA version or a GPU's compute capability is outside every alternative; unless
/// `NVIDIA_DISABLE_REQUIRE` is true, and not in CDI mode, which does not check requirements.
pub fn constraint(cuda: CudaVersion, runs: &BTreeSet<Cc>) -> String {
    let universe: Vec<Cc> = known_ccs().union(runs).copied().collect();
    let head = (cuda != CudaVersion::new(0, 0)).then(|| format!("cuda>={cuda}"));
    let with_head = |arch: Vec<String>| head.iter().cloned().chain(arch).collect::<Vec<_>>().join(",");
    if runs.is_empty() {
        return with_head(vec!["arch<0".into()]);
    }
    let last = universe.len() - 1;
    let mut alts = Vec::new();
    let mut i = 0;
    while i <= last {
        if !runs.contains(&universe[i]) {
            i += 1;
            continue;
        }
        let lo = i;
        while i <= last && runs.contains(&universe[i]) {
            i += 1;
        }
        let hi = i - 1;
        let mut arch = Vec::new();
        if lo == hi && lo > 0 && hi < last {
            arch.push(format!("arch={}", universe[lo]));
        } else {
            if lo > 0 {
                arch.push(format!("arch>={}", universe[lo]));
            }
            if hi < last {
                arch.push(format!("arch<{}", universe[hi + 1]));
            }
        }
        alts.push(with_head(arch));
    }
    alts.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cc(s: &str) -> Cc {
        Cc::parse(s).unwrap()
    }

    #[test]
    fn nvidia_require_cuda_alternatives() {
        let w = cuda_weakest("cuda>=12.9 brand=tesla,driver>=535,driver<536").unwrap();
        assert_eq!(w, CudaVersion::new(12, 2));
        assert_eq!(cuda_weakest("cuda>=13.0").unwrap(), CudaVersion::new(13, 0));
        let ccs = arch_ccs("arch>=9.0").unwrap();
        assert!(ccs.contains(&cc("9.0")) && ccs.contains(&cc("12.1")));
        assert!(!ccs.contains(&cc("8.9")));
    }

    /// Accepted as libnvidia-container accepts them (NVIDIA/libnvidia-container src/cli/dsl.c
    /// at 61bfaf38, src/cli/configure.c at e27a4a75).
    #[test]
    fn accepts_what_libnvidia_container_accepts() {
        let ok = |s: &str| parse(s).unwrap_or_else(|e| panic!("{s:?}: {e}"));
        // Keys match case-insensitively: str_case_equal (dsl.c:116).
        assert_eq!(ok("CUDA>=12.0 Arch=9.0").to_string(), "cuda>=12.0 arch=9.0");
        // Empty pieces between spaces and commas are skipped (dsl.c:145, 148).
        assert_eq!(ok("  cuda>=12.0,,arch>=8.0,  driver>=535 ").to_string(), "cuda>=12.0,arch>=8.0 driver>=535");
        // The empty requirement: ret starts true (dsl.c:134).
        assert_eq!(ok(""), Requirement(vec![]));
        // A lone `!` is `!=`: strncmp over the operator run's length, 1 (dsl.c:104).
        assert_eq!(ok("cuda!12.0").0[0].0[0].op, Op::Ne);
        // Every operator of the table (dsl.c:24-31) on every version key; = and != on brand
        // (dsl_compare_string, dsl.c:80-87, via check_device_brand, configure.c:214-222).
        for k in ["cuda", "driver", "arch"] {
            for op in ["=", "!=", "<", "<=", ">", ">="] {
                ok(&format!("{k}{op}1.2.3"));
            }
        }
        ok("brand=tesla,brand!=GeForce");
        // Repeated and trailing dots pass the strspn check and are skipped (dsl.c:39, 59-60).
        ok("driver>=535..104. arch=9");
        // A brand value may carry operator characters after its first one: only the run right
        // after the key is the operator (dsl.c:101).
        assert_eq!(ok("brand=a=b").0[0].0[0].value, "a=b");
        // An alternative of commas only (dsl.c:147-158).
        assert_eq!(ok("cuda>=99 ,").0.len(), 2);
    }

    /// Rejected where libnvidia-container answers "invalid expression" (dsl.c:150-152).
    #[test]
    fn rejects_what_libnvidia_container_rejects() {
        use RequireError as E;
        let err = |s: &str| parse(s).expect_err(s);
        // No key: strcspn(expr, "<>=!") == 0 (dsl.c:98).
        assert!(matches!(err(">=12.0"), E::NoKey(_)));
        // No operator: strspn(ptr, "<>=!") == 0 (dsl.c:101).
        assert!(matches!(err("cuda"), E::NoOperator(_)));
        assert!(matches!(err("cuda12.0"), E::NoOperator(_)));
        // An operator run that names no table entry over its length (dsl.c:103-112).
        for bad in ["cuda==12.0", "cuda=>12.0", "cuda=<12.0", "cuda>>12.0", "cuda!==12.0", "cuda<>12.0"] {
            assert!(matches!(err(bad), E::BadOperator { .. }), "{bad}");
        }
        // Empty value (dsl.c:111).
        assert!(matches!(err("cuda>="), E::NoValue(_)));
        // Unknown key (dsl.c:115-125); keys are configure.c:47-52 only.
        assert!(matches!(err("compute>=8.0"), E::UnknownKey { .. }));
        assert!(matches!(err("cuda >=12.0"), E::NoOperator(_)), "the space splits it");
        // A tab is no separator: it stays in the value (dsl.c:144 splits on " " only).
        assert!(matches!(err("cuda>=12.0\tarch>=8.0"), E::BadVersion { .. }));
        // Versions are digits and dots (dsl.c:39-42): no 'a' suffix, no 'v' prefix.
        for bad in ["arch>=9.0a", "cuda>=v12", "driver>=535.104.05-1", "cuda>=12.0<13"] {
            assert!(matches!(err(bad), E::BadVersion { .. }), "{bad}");
        }
        // A leading dot: strtoumax reads no digit (dsl.c:45-48); overflow to UINTMAX_MAX.
        assert!(matches!(err("arch>=.5"), E::BadVersion { .. }));
        assert!(matches!(err("cuda>=99999999999999999999"), E::BadVersion { .. }));
        // brand compares strings with = and != only (dsl.c:86).
        assert!(matches!(err("brand>=tesla"), E::BrandOperator { .. }));
        // A false constraint too long to report is invalid (dsl.c:119, EXPR_MAX 128).
        assert!(matches!(err(&format!("brand={}", "x".repeat(130))), E::TooLongToReport(_)));
        // An invalid constraint anywhere rejects the whole requirement.
        assert!(matches!(err("cuda>=12.0 arch>=9.0a"), E::BadVersion { .. }));
        // Our own bound.
        assert!(matches!(err(&"cuda>=12.0 ".repeat(400)), E::TooLong { .. }));
    }

    /// Evaluation as dsl_evaluate does it, per device (configure.c:331-360).
    #[test]
    fn evaluates_like_libnvidia_container() {
        let node = |cuda: (u16, u16), arch: &str| Node {
            cuda: Some(CudaVersion::new(cuda.0, cuda.1)),
            arch: Some(cc(arch)),
            ..Node::default()
        };
        let r = parse("cuda>=12.4 brand=tesla,driver>=470,driver<471").unwrap();
        assert!(r.admits(&node((12, 4), "9.0")));
        let d535 = DriverVersion::parse("535.104.05").unwrap();
        assert!(!r.admits(&Node { driver: Some(&d535), brand: Some("Tesla"), ..node((12, 2), "9.0") }));
        let d470 = DriverVersion::parse("470.82.01").unwrap();
        let tesla_470 = Node { driver: Some(&d470), brand: Some("Tesla"), ..node((11, 4), "7.0") };
        assert!(r.admits(&tesla_470), "brand compares case-insensitively (dsl.c:83)");
        assert!(!r.admits(&Node { brand: Some("GeForce"), ..tesla_470 }));
        // Trailing zero parts do not count (dsl.c:62-63): arch 9.0 = 9 = 9.0.0.
        assert!(parse("arch=9").unwrap().admits(&node((13, 0), "9.0")));
        assert!(parse("arch<=9.0.0").unwrap().admits(&node((13, 0), "9.0")));
        // Numbers, not strings: 10.0 > 9.0.
        assert!(parse("arch>9.0").unwrap().admits(&node((13, 0), "10.0")));
        assert!(!parse("arch<10.0").unwrap().admits(&node((13, 0), "10.0")));
        // No device visible: arch and brand hold (configure.c:203-222).
        let no_device = Node { cuda: Some(CudaVersion::new(13, 0)), ..Node::default() };
        assert!(parse("cuda>=13.0,arch=0").unwrap().admits(&no_device));
        // Commas only: the previous alternative's result (dsl.c:157-158).
        assert!(parse(", cuda>=99").unwrap().admits(&node((12, 0), "9.0")));
        assert!(!parse("cuda>=99 , cuda>=1").unwrap().admits(&node((12, 0), "9.0")));
        assert!(parse("").unwrap().admits(&node((12, 0), "9.0")));
    }

    #[test]
    fn weakest_and_arch_follow_the_alternatives() {
        assert_eq!(cuda_weakest("cuda>12.4"), Some(CudaVersion::new(12, 5)));
        assert_eq!(cuda_weakest("cuda>=12.4.1"), Some(CudaVersion::new(12, 5)));
        assert_eq!(cuda_weakest("cuda=12.8,arch>=8.0 cuda>=13.0"), Some(CudaVersion::new(12, 8)));
        assert_eq!(cuda_weakest("arch>=8.0"), Some(CudaVersion::new(0, 0)));
        assert_eq!(cuda_weakest("cuda>=12.0 arch>=9.0a"), None, "invalid");
        assert_eq!(cuda_weakest(""), None);
        assert!(!parse("arch>=8.0").unwrap().has_cuda_floor());
        // An upper bound narrows: arch>=7.0,arch<10.0 is 7.0 to 9.0 (the old reading took the union).
        let ccs = arch_ccs("cuda>=12.0,arch>=7.0,arch<10.0").unwrap();
        assert_eq!(ccs.first(), Some(&cc("7.0")));
        assert_eq!(ccs.last(), Some(&cc("9.0")));
        // An alternative without arch admits every GPU.
        assert_eq!(arch_ccs("arch=9.0 brand=tesla").unwrap().len(), known_ccs().len());
        assert_eq!(arch_ccs("cuda>=12.0"), None);
    }

    #[test]
    fn toolkit_collects_the_require_variables() {
        let pairs = |kv: &[(&str, &str)]| -> Vec<(String, String)> {
            kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        let env = |kv: &[(&str, &str)]| -> BTreeMap<String, String> { pairs(kv).into_iter().collect() };
        let got = from_env(&env(&[
            ("NVIDIA_REQUIRE_CUDA", "cuda>=12.4"),
            ("NVIDIA_REQUIRE_ARCH", "arch>=8.0"),
            ("NVIDIA_REQUIRE_JETPACK", "csv-mounts=all"),
            ("CUDA_VERSION", "12.4.1"),
        ]));
        assert_eq!(got, pairs(&[("NVIDIA_REQUIRE_ARCH", "arch>=8.0"), ("NVIDIA_REQUIRE_CUDA", "cuda>=12.4")]));
        let legacy = from_env(&env(&[("CUDA_VERSION", "12.4.1"), ("NVIDIA_REQUIRE_CUDA", "")]));
        assert_eq!(legacy, pairs(&[("NVIDIA_REQUIRE_CUDA", ""), ("CUDA_VERSION", "cuda>=12.4")]));
        assert!(
            from_env(&env(&[("NVIDIA_REQUIRE_CUDA", "cuda>=12.4"), ("NVIDIA_DISABLE_REQUIRE", "true")])).is_empty()
        );
        assert_eq!(
            from_env(&env(&[("NVIDIA_REQUIRE_CUDA", "cuda>=12.4"), ("NVIDIA_DISABLE_REQUIRE", "yes")])).len(),
            1
        );
    }

    #[test]
    fn constraint_reads_as_documented() {
        let known: Vec<Cc> = known_ccs().into_iter().collect();
        let from = |lo: &str| known.iter().copied().filter(|c| *c >= cc(lo)).collect::<BTreeSet<Cc>>();
        assert_eq!(constraint(CudaVersion::new(13, 0), &from("7.5")), "cuda>=13.0,arch>=7.5");
        let mid: BTreeSet<Cc> = known.iter().copied().filter(|c| *c >= cc("7.0") && *c <= cc("9.0")).collect();
        assert_eq!(constraint(CudaVersion::new(12, 0), &mid), "cuda>=12.0,arch>=7.0,arch<10.0");
        assert_eq!(constraint(CudaVersion::new(12, 0), &known.iter().copied().collect()), "cuda>=12.0");
        assert_eq!(constraint(CudaVersion::new(12, 0), &[cc("9.0")].into()), "cuda>=12.0,arch=9.0");
        assert_eq!(
            constraint(CudaVersion::new(12, 8), &[cc("8.0"), cc("9.0"), cc("10.0")].into()),
            "cuda>=12.8,arch=8.0 cuda>=12.8,arch>=9.0,arch<10.3"
        );
        assert_eq!(constraint(CudaVersion::new(12, 0), &BTreeSet::new()), "cuda>=12.0,arch<0");
        assert_eq!(constraint(CudaVersion::new(0, 0), &from("0.0")), "");
    }

    /// Emitter -> parser -> evaluation: every stretch of known CCs and sets with holes admit
    /// exactly their CCs, and drivers of exactly CUDA `cuda` and newer.
    #[test]
    fn constraint_round_trips_through_the_parser() {
        let known: Vec<Cc> = known_ccs().into_iter().collect();
        let n = known.len();
        let mut sets: Vec<BTreeSet<Cc>> = Vec::new();
        for lo in 0..n {
            for hi in lo..n {
                let stretch: BTreeSet<Cc> = known[lo..=hi].iter().copied().collect();
                let hole: BTreeSet<Cc> = known.iter().copied().filter(|c| !stretch.contains(c)).collect();
                sets.push(stretch);
                sets.push(hole);
            }
        }
        // Scattered sets from a fixed linear congruential sequence.
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for _ in 0..200 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            sets.push(known.iter().enumerate().filter(|(i, _)| (x >> (i + 11)) & 1 == 1).map(|(_, c)| *c).collect());
        }
        let cudas =
            [CudaVersion::new(11, 8), CudaVersion::new(12, 0), CudaVersion::new(12, 9), CudaVersion::new(13, 0)];
        let drivers = [(11, 4), (11, 8), (12, 0), (12, 2), (12, 9), (13, 0), (13, 1), (14, 0)];
        for runs in &sets {
            for cuda in cudas {
                let text = constraint(cuda, runs);
                let req = parse(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
                let stretches = known.windows(2).filter(|w| !runs.contains(&w[0]) && runs.contains(&w[1])).count()
                    + usize::from(runs.contains(&known[0]));
                assert_eq!(req.0.len(), stretches.max(1), "{text}: one alternative per stretch");
                for &c in &known {
                    for (ma, mi) in drivers {
                        let d = CudaVersion::new(ma, mi);
                        let node = Node { cuda: Some(d), arch: Some(c), ..Node::default() };
                        let want = runs.contains(&c) && d >= cuda;
                        assert_eq!(req.admits(&node), want, "{text} on {c} with a CUDA {d} driver");
                    }
                }
                assert_eq!(req.cuda_weakest(), Some(cuda), "{text}");
                if !runs.is_empty() {
                    let admitted: BTreeSet<Cc> = known.iter().copied().filter(|c| req.admits_arch(*c)).collect();
                    assert_eq!(&admitted, runs, "{text}");
                }
            }
        }
    }
}
