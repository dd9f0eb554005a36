//! Which image of a module the driver uses on a device, or why none (docs/cuda-binaries.md §4.1–4.3, 4.7):
//! SASS runs forward within its major only; 'a' SASS/PTX only on its exact CC; 'f' within its
//! family (same major, equal or higher minor); PTX JITs forward to any newer CC if the driver
//! knows its ISA. Preferences among several matches are [U] in docs/cuda-binaries.md: exact SASS first, then
//! the newest SASS at or below the device, then the newest PTX at or below it.

use serde::Serialize;

use super::tables::cuda_for_ptx_isa;
use super::{Cc, CudaVersion};
use crate::inspect::fatbin::Suffix;
use crate::schema::words;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ImageKind {
    Sass,
    Ptx,
    /// CUDA Tile IR, JIT-compiled like PTX (CUDA 13.1+ drivers).
    TileIr,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Image {
    pub kind: ImageKind,
    pub cc: Cc,
    pub suffix: Suffix,
    /// PTX ISA `[major, minor]` (PTX images).
    pub isa: Option<(u16, u16)>,
    /// The oldest driver that can read the image at all, where its packaging needs one (images
    /// in a concatenated entry); None: any driver.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub needs_driver: Option<CudaVersion>,
}

impl Image {
    pub fn label(&self) -> String {
        let p = match self.kind {
            ImageKind::Sass => "sm_",
            ImageKind::Ptx => "compute_",
            ImageKind::TileIr => "tile_",
        };
        format!("{p}{}{}", self.cc.sm(), self.suffix.as_str())
    }
}

/// Same family: the families nvcc 13.5 encodes are 10.x, 11.x and 12.x, i.e. the major.
fn same_family(a: Cc, b: Cc) -> bool {
    a.major == b.major
}

/// A cubin for `img` runs on a device of CC `dev`.
pub fn sass_runs(img: Cc, suffix: Suffix, dev: Cc) -> bool {
    match suffix {
        Suffix::A => img == dev,
        Suffix::F => same_family(img, dev) && dev.minor >= img.minor,
        Suffix::None => img.major == dev.major && dev.minor >= img.minor,
    }
}

/// PTX for `img` can be JIT-compiled for a device of CC `dev`.
pub fn ptx_jits(img: Cc, suffix: Suffix, dev: Cc) -> bool {
    match suffix {
        Suffix::A => img == dev,
        Suffix::F => same_family(img, dev) && dev.minor >= img.minor,
        Suffix::None => dev >= img,
    }
}

/// Image settings from the environment the program runs with (docs/cuda-binaries.md §4.5).
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct JitEnv {
    /// `CUDA_FORCE_PTX_JIT=1`: cubins are ignored.
    pub force_ptx_jit: bool,
    /// `CUDA_DISABLE_PTX_JIT=1`: PTX is never compiled.
    pub disable_ptx_jit: bool,
}

impl JitEnv {
    /// From an image's (or a process's) environment: each switch is on only when set to `1`.
    pub fn from_env(env: &std::collections::BTreeMap<String, String>) -> JitEnv {
        let on = |k: &str| env.get(k).is_some_and(|v| v == "1");
        JitEnv { force_ptx_jit: on("CUDA_FORCE_PTX_JIT"), disable_ptx_jit: on("CUDA_DISABLE_PTX_JIT") }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "result", rename_all = "kebab-case")]
pub enum Verdict {
    /// A cubin runs as is.
    Native { image: String },
    /// The driver compiles this PTX at first use.
    Jit { image: String, ptx_isa: String, needs_cuda: CudaVersion },
    /// `CUDA_ERROR_NO_BINARY_FOR_GPU` (209): nothing runs here. `arch_specific` names 'a'
    /// images that would have matched but run only on their exact CC; `format_needs_cuda` is set
    /// when images that would run are packaged in a form this driver cannot read (the driver
    /// version that can).
    NoImage {
        error: u32,
        arch_specific: Vec<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        format_needs_cuda: Option<CudaVersion>,
    },
    /// `CUDA_ERROR_UNSUPPORTED_PTX_VERSION` (222): the only usable code is PTX newer than the
    /// driver understands.
    PtxTooNew { error: u32, image: String, ptx_isa: String, needs_cuda: CudaVersion, driver_cuda: CudaVersion },
    /// `CUDA_ERROR_JIT_COMPILATION_DISABLED` (223): only PTX would do, and JIT is disabled.
    JitDisabled { error: u32, image: String },
}

words! {
    /// A verdict's kind without its details (`module.static_result` of `--on-device`): the
    /// words `Verdict` serializes as its `result`.
    pub enum StaticResult {
        Native = "native",
        Jit = "jit",
        NoImage = "no-image",
        PtxTooNew = "ptx-too-new",
        JitDisabled = "jit-disabled",
    }
}

impl Verdict {
    pub fn kind(&self) -> StaticResult {
        match self {
            Verdict::Native { .. } => StaticResult::Native,
            Verdict::Jit { .. } => StaticResult::Jit,
            Verdict::NoImage { .. } => StaticResult::NoImage,
            Verdict::PtxTooNew { .. } => StaticResult::PtxTooNew,
            Verdict::JitDisabled { .. } => StaticResult::JitDisabled,
        }
    }
    /// The image the driver would use, empty when there is none.
    pub fn image(&self) -> &str {
        match self {
            Verdict::Native { image }
            | Verdict::Jit { image, .. }
            | Verdict::PtxTooNew { image, .. }
            | Verdict::JitDisabled { image, .. } => image,
            Verdict::NoImage { .. } => "",
        }
    }
    pub fn runs(&self) -> bool {
        matches!(self, Verdict::Native { .. } | Verdict::Jit { .. })
    }
    pub fn error(&self) -> Option<u32> {
        match self {
            Verdict::NoImage { error, .. } | Verdict::PtxTooNew { error, .. } | Verdict::JitDisabled { error, .. } => {
                Some(*error)
            }
            _ => None,
        }
    }
    /// `sm_90`, `jit compute_80`, `✗ 209` — a coverage-matrix cell.
    pub fn cell(&self) -> String {
        match self {
            Verdict::Native { image } => image.clone(),
            Verdict::Jit { image, .. } => format!("jit {image}"),
            Verdict::NoImage { error, .. } | Verdict::PtxTooNew { error, .. } | Verdict::JitDisabled { error, .. } => {
                format!("✗ {error}")
            }
        }
    }
}

pub fn isa_string(isa: (u16, u16)) -> String {
    format!("{}.{}", isa.0, isa.1)
}

/// Decides what happens when a module with these images is loaded on `dev` under a driver
/// whose CUDA version is `driver` (None: unknown, assumed new enough).
pub fn decide(images: &[Image], dev: Cc, driver: Option<CudaVersion>, env: JitEnv) -> Verdict {
    let readable = |i: &&Image| match (driver, i.needs_driver) {
        (Some(d), Some(n)) => d >= n,
        _ => true,
    };
    let seen: Vec<Image> = images.iter().filter(readable).cloned().collect();
    let v = decide_readable(&seen, dev, driver, env);
    match v {
        Verdict::NoImage { error, arch_specific, .. } if seen.len() < images.len() => {
            // Would what the driver cannot read have run? Then that is the reason, not the archs.
            let unread: Vec<Image> = images.iter().filter(|i| !readable(i)).cloned().collect();
            let would_run = decide_readable(&unread, dev, None, env).runs();
            let format_needs_cuda = if would_run { unread.iter().filter_map(|i| i.needs_driver).max() } else { None };
            Verdict::NoImage { error, arch_specific, format_needs_cuda }
        }
        v => v,
    }
}

fn decide_readable(images: &[Image], dev: Cc, driver: Option<CudaVersion>, env: JitEnv) -> Verdict {
    if !env.force_ptx_jit {
        let best = images
            .iter()
            .filter(|i| i.kind == ImageKind::Sass && sass_runs(i.cc, i.suffix, dev))
            .max_by_key(|i| (i.cc == dev, i.cc, i.suffix == Suffix::A));
        if let Some(i) = best {
            return Verdict::Native { image: i.label() };
        }
    }
    let mut jit: Vec<&Image> =
        images.iter().filter(|i| i.kind != ImageKind::Sass && ptx_jits(i.cc, i.suffix, dev)).collect();
    // Newest virtual architecture first; among equals the oldest ISA (most drivers know it).
    jit.sort_by_key(|i| (std::cmp::Reverse(i.cc), i.isa));
    if let Some(first) = jit.first() {
        if env.disable_ptx_jit {
            return Verdict::JitDisabled { error: 223, image: first.label() };
        }
        let needs = |i: &Image| match i.kind {
            ImageKind::TileIr => CudaVersion::new(13, 1),
            _ => i.isa.map_or(CudaVersion::new(9, 0), cuda_for_ptx_isa),
        };
        let usable = jit.iter().find(|i| driver.is_none_or(|d| d >= needs(i)));
        return match usable {
            Some(i) => Verdict::Jit {
                image: i.label(),
                ptx_isa: i.isa.map(isa_string).unwrap_or_default(),
                needs_cuda: needs(i),
            },
            None => Verdict::PtxTooNew {
                error: 222,
                image: first.label(),
                ptx_isa: first.isa.map(isa_string).unwrap_or_default(),
                needs_cuda: needs(first),
                driver_cuda: driver.expect("a driver rejected it"),
            },
        };
    }
    // 'a' code for this very major that would have run without its suffix (sm_100a on 10.3).
    let arch_specific = images
        .iter()
        .filter(|i| i.suffix == Suffix::A && i.cc.major == dev.major)
        .filter(|i| match i.kind {
            ImageKind::Sass => sass_runs(i.cc, Suffix::None, dev),
            _ => ptx_jits(i.cc, Suffix::None, dev),
        })
        .map(Image::label)
        .collect();
    Verdict::NoImage { error: 209, arch_specific, format_needs_cuda: None }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sass(sm: u32, s: Suffix) -> Image {
        Image { kind: ImageKind::Sass, cc: Cc::from_sm(sm), suffix: s, isa: None, needs_driver: None }
    }
    fn ptx(sm: u32, isa: (u16, u16)) -> Image {
        Image { kind: ImageKind::Ptx, cc: Cc::from_sm(sm), suffix: Suffix::None, isa: Some(isa), needs_driver: None }
    }
    fn on(images: &[Image], cc: &str, driver: Option<&str>) -> Verdict {
        decide(images, Cc::parse(cc).unwrap(), driver.and_then(CudaVersion::parse), JitEnv::default())
    }

    // The cases the rules of docs/cuda-binaries.md (§4.1, §4.2) spell out.
    #[test]
    fn sass_runs_forward_within_its_major_only() {
        let s80 = [sass(80, Suffix::None)];
        assert_eq!(on(&s80, "8.6", None), Verdict::Native { image: "sm_80".into() });
        assert_eq!(on(&s80, "8.9", None), Verdict::Native { image: "sm_80".into() });
        assert!(!on(&[sass(86, Suffix::None)], "8.0", None).runs());
        assert_eq!(on(&[sass(90, Suffix::None)], "10.0", None).error(), Some(209));
    }

    #[test]
    fn arch_and_family_specific_code() {
        let a = [sass(90, Suffix::A)];
        assert!(on(&a, "9.0", None).runs());
        assert_eq!(
            on(&a, "10.0", None),
            Verdict::NoImage { error: 209, arch_specific: vec![], format_needs_cuda: None }
        );
        let a100 = [sass(100, Suffix::A)];
        assert_eq!(
            on(&a100, "10.3", None),
            Verdict::NoImage { error: 209, arch_specific: vec!["sm_100a".into()], format_needs_cuda: None }
        );
        let f = [sass(100, Suffix::F)];
        assert_eq!(on(&f, "10.3", None), Verdict::Native { image: "sm_100f".into() });
        assert!(!on(&f, "12.0", None).runs());
        assert!(!on(&[sass(120, Suffix::A)], "12.1", None).runs());
    }

    #[test]
    fn ptx_jits_forward_if_the_driver_knows_its_isa() {
        let p = [ptx(80, (9, 0))];
        // compute_80 PTX from CUDA 13.0 on a 12.0 GPU: a 12.2 driver refuses it, 13.0 compiles it.
        assert_eq!(on(&p, "12.0", Some("12.2")).error(), Some(222));
        assert_eq!(
            on(&p, "12.0", Some("13.0")),
            Verdict::Jit { image: "compute_80".into(), ptx_isa: "9.0".into(), needs_cuda: CudaVersion::new(13, 0) }
        );
        assert!(on(&p, "12.0", None).runs());
        assert_eq!(on(&p, "7.5", None).error(), Some(209));
        // A matching cubin wins over PTX.
        assert_eq!(
            on(&[ptx(80, (9, 0)), sass(90, Suffix::None)], "9.0", Some("12.2")),
            Verdict::Native { image: "sm_90".into() }
        );
        let env = JitEnv { disable_ptx_jit: true, force_ptx_jit: false };
        assert_eq!(decide(&p, Cc::parse("9.0").unwrap(), None, env).error(), Some(223));
    }

    #[test]
    fn concatenated_images_need_a_driver_that_reads_them() {
        let mut a = vec![sass(80, Suffix::None), sass(90, Suffix::None)];
        for i in &mut a {
            i.needs_driver = Some(CudaVersion::new(13, 4));
        }
        // Seen on driver 580 (CUDA 13.0): 209, although sm_90 is there.
        assert_eq!(
            on(&a, "9.0", Some("13.0")),
            Verdict::NoImage { error: 209, arch_specific: vec![], format_needs_cuda: Some(CudaVersion::new(13, 4)) }
        );
        assert_eq!(on(&a, "9.0", Some("13.4")), Verdict::Native { image: "sm_90".into() });
        assert_eq!(on(&a, "9.0", None), Verdict::Native { image: "sm_90".into() });
        // Nothing in the concatenated entry would run anyway: the format is not the reason.
        assert_eq!(
            on(&a, "7.5", Some("13.0")),
            Verdict::NoImage { error: 209, arch_specific: vec![], format_needs_cuda: None }
        );
        // A readable image beside it still runs.
        a.push(sass(86, Suffix::None));
        assert_eq!(on(&a, "8.9", Some("13.0")), Verdict::Native { image: "sm_86".into() });
    }
}
