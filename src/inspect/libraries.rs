//! NVIDIA's libraries, one row each: what their names say to the inspector (a CUDA library in
//! `DT_NEEDED` or on disk), to the verdicts (closed source, a SONAME major that is the CUDA
//! major, optional for its callers), to the module model (the host driver's own files) and to
//! the package list (a CUDA-related package). Adding a library is one row here.

/// Which file names of a library mark a file as CUDA's (`DT_NEEDED`, a SONAME, a file in a
/// layer): what the inspector keeps without looking inside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Named {
    /// Every name that starts with the prefix.
    Any,
    /// Only its shared objects (`libcudart.so*`): the static runtime is linked into binaries,
    /// which are found by their own content.
    Shared,
    /// None: known to the verdicts only.
    No,
}

/// The host driver's files, which the image must not carry (except the forward-compatibility
/// package's copies).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Driver {
    /// `libcuda.so`, `libcudadebugger.so`.
    Libcuda,
    /// `libnvidia-*.so.*`.
    Libnvidia,
}

#[derive(Debug, Clone, Copy)]
pub struct Library {
    /// File-name prefix: `libcublas` matches `libcublas.so.12` and `libcublasLt.so.12`.
    pub prefix: &'static str,
    pub named: Named,
    /// Closed source: rebuilt by nobody but NVIDIA, only replaced by another build.
    pub closed: bool,
    /// Its SONAME major is the CUDA major (`libcudart.so.13`; not cuFFT, cuSPARSE, cuRAND,
    /// cuDNN, NCCL: docs/cuda-binaries.md §5i). Matched on the exact base name.
    pub soname_is_cuda: bool,
    /// Optional for its callers, which check the GPU before using it (cuSPARSELt: 2:4 sparsity,
    /// 8.0 and newer): without code for the GPU it is arch-gated where the stack's code runs.
    pub optional: bool,
    pub driver: Option<Driver>,
    /// Prefix of its Debian and conda package names (lower case): such a package ties an image
    /// to a CUDA version.
    pub package: Option<&'static str>,
}

const fn lib(prefix: &'static str) -> Library {
    Library {
        prefix,
        named: Named::Any,
        closed: true,
        soname_is_cuda: false,
        optional: false,
        driver: None,
        package: None,
    }
}

const fn open(prefix: &'static str) -> Library {
    Library { closed: false, ..lib(prefix) }
}

const fn host(prefix: &'static str, named: Named, d: Driver) -> Library {
    Library { named, driver: Some(d), ..open(prefix) }
}

const fn soname(l: Library) -> Library {
    Library { soname_is_cuda: true, ..l }
}

const fn package(l: Library, p: &'static str) -> Library {
    Library { package: Some(p), ..l }
}

pub static LIBRARIES: &[Library] = &[
    package(host("libcuda.so", Named::Any, Driver::Libcuda), "libcuda"),
    host("libcudadebugger.so", Named::No, Driver::Libcuda),
    host("libnvidia-", Named::Any, Driver::Libnvidia),
    soname(Library { named: Named::Shared, ..lib("libcudart") }),
    package(soname(lib("libcublas")), "libcublas"),
    soname(lib("libcublasLt")),
    soname(lib("libnvblas")),
    soname(lib("libnvrtc")),
    package(soname(lib("libnvJitLink")), "libnvjitlink"),
    package(lib("libcudnn"), "libcudnn"),
    package(lib("libnccl"), "libnccl"),
    package(lib("libcufft"), "libcufft"),
    lib("libcurand"),
    package(lib("libcusparse"), "libcusparse"),
    Library { optional: true, ..lib("libcusparseLt") },
    lib("libcusolver"),
    lib("libnvjpeg"),
    lib("libnpp"),
    lib("libcufile"),
    lib("libnvshmem"),
    lib("libcutensor"),
    lib("libcudss"),
    lib("libnvinfer"),
    Library { named: Named::No, ..lib("libnvonnxparser") },
    lib("libnvToolsExt"),
    lib("libcupti"),
    Library { named: Named::No, ..lib("libnvperf") },
    open("libtensorrt"),
    open("libnvptxcompiler"),
    open("libnvfatbin"),
];

/// The rows whose prefix starts `name` (a file name, a SONAME or a `DT_NEEDED` entry).
pub fn matching(name: &str) -> impl Iterator<Item = &'static Library> + '_ {
    LIBRARIES.iter().filter(move |l| name.starts_with(l.prefix))
}

/// A CUDA library's name (`DT_NEEDED`, SONAME or file name).
pub fn is_cuda_library(name: &str) -> bool {
    matching(name).any(|l| match l.named {
        Named::Any => true,
        Named::Shared => name[l.prefix.len()..].starts_with(".so"),
        Named::No => false,
    })
}

/// One of NVIDIA's closed-source libraries, by file name.
pub fn closed_source(name: &str) -> bool {
    matching(name).any(|l| l.closed)
}

/// Kernel libraries of other projects whose callers check the compute capability before using
/// them, by file-name prefix: FlashAttention 2 needs 8.0 and FlashAttention 3 and FlashMLA 9.0,
/// and vLLM picks another attention backend below that.
pub static OPTIONAL_KERNELS: &[&str] =
    &["_vllm_fa2_C", "_vllm_fa3_C", "_flashmla_C", "_flashmla_extension_C", "flash_attn_2_cuda", "flash_attn_3"];

/// A library its callers treat as optional (NVIDIA's, see `Library::optional`, or one of
/// [`OPTIONAL_KERNELS`]), by file name.
pub fn optional(name: &str) -> bool {
    matching(name).any(|l| l.optional) || OPTIONAL_KERNELS.iter().any(|p| name.starts_with(p))
}

/// The host driver's library this file name belongs to, if any.
pub fn driver(name: &str) -> Option<Driver> {
    matching(name).find_map(|l| l.driver)
}

/// The CUDA major a runtime or math library SONAME names (`libcudart.so.13`, `libcublasLt.so.12`,
/// `libcudart.so.11.0`); None for libraries whose SONAME major is not the CUDA major.
pub fn cuda_major_of_soname(name: &str) -> Option<u16> {
    let (base, ver) = name.split_once(".so.")?;
    let major: u16 = ver.split('.').next()?.parse().ok()?;
    LIBRARIES.iter().any(|l| l.soname_is_cuda && l.prefix == base).then_some(major).filter(|m| (9..=20).contains(m))
}

/// A package whose name (any case) is one of these libraries' packages.
pub fn cuda_package(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    LIBRARIES.iter().filter_map(|l| l.package).any(|p| n.starts_with(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(is_cuda_library("libcudart.so.12"));
        assert!(!is_cuda_library("libcudart_static.a"));
        assert!(closed_source("libcudart_static.a"));
        assert!(is_cuda_library("libcuda.so.1"));
        assert!(!is_cuda_library("libcudadebugger.so.1"));
        assert_eq!(driver("libcudadebugger.so.1"), Some(Driver::Libcuda));
        assert!(!closed_source("libcuda.so.1"));
        assert!(closed_source("libcusparseLt.so.0") && optional("libcusparseLt.so.0"));
        assert!(!optional("libcusparse.so.12"));
        assert_eq!(cuda_major_of_soname("libcublasLt.so.12"), Some(12));
        assert_eq!(cuda_major_of_soname("libcufft.so.11"), None);
        assert_eq!(cuda_major_of_soname("libcudart.so.11.0"), Some(11));
        assert!(cuda_package("libnvJitLink-12-8") && cuda_package("libcuda1") && !cuda_package("libnvinfer10"));
        assert!(!is_cuda_library("libnvonnxparser.so.10") && closed_source("libnvonnxparser.so.10"));
    }
}
