//! What library names say, from the knowledge base's `[[library]]` rows
//! (`rules/knowledge/libraries.toml`): to the inspector (a CUDA library in `DT_NEEDED` or on
//! disk), to the verdicts (closed source, a SONAME major that is the CUDA major, the GPUs its
//! callers load it on), to the module model (the host driver's own files) and to the package
//! list. Adding a library is one row there.

pub use crate::knowledge::{Driver, Named};
use crate::knowledge::{Library, Row};

/// The rows whose prefix starts `name` (a file name, a SONAME or a `DT_NEEDED` entry), or a
/// directory of the path it is.
pub fn matching(name: &str) -> impl Iterator<Item = &'static Row<Library>> + '_ {
    crate::knowledge::get().libraries_of(name)
}

/// A CUDA library's name (`DT_NEEDED`, SONAME or file name).
pub fn is_cuda_library(name: &str) -> bool {
    matching(name).any(|l| match l.named {
        Named::Any => name.starts_with(&l.prefix),
        Named::Shared => name.strip_prefix(l.prefix.as_str()).is_some_and(|r| r.starts_with(".so")),
        Named::No => false,
    })
}

/// One of NVIDIA's closed-source libraries, by file name.
pub fn closed_source(name: &str) -> bool {
    matching(name).any(|l| l.closed)
}

/// The row that says which GPUs a library's callers load it on, by path or file name.
pub fn dispatched(path: &str) -> Option<&'static Row<Library>> {
    matching(path).find(|l| l.dispatch.is_some() || !l.later.is_empty())
}

/// A library its callers load only on some GPUs (a `dispatch` row), by path or file name.
pub fn optional(path: &str) -> bool {
    dispatched(path).is_some()
}

/// A shared CUDA runtime's name (`libcudart.so.12`; a `cuda_runtime` row).
pub fn is_cuda_runtime(name: &str) -> bool {
    cuda_runtime_version(name).is_some_and(|v| !v.is_empty())
}

/// The version a shared CUDA runtime's file name or SONAME carries (`libcudart.so.12.9.79` ->
/// `12.9.79`, `libcudart.so` -> ``); None for other names.
pub fn cuda_runtime_version(name: &str) -> Option<&str> {
    matching(name).filter(|l| l.cuda_runtime).find_map(|l| {
        let rest = name.strip_prefix(l.prefix.as_str())?.strip_prefix(".so")?;
        if rest.is_empty() { Some(rest) } else { rest.strip_prefix('.') }
    })
}

/// The driver version a host driver library's file name carries (`libcuda.so.570.133.20` ->
/// `570.133.20`).
pub fn driver_version_of(name: &str) -> Option<&str> {
    matching(name)
        .filter(|l| l.driver == Some(Driver::Libcuda))
        .find_map(|l| name.strip_prefix(l.prefix.as_str())?.strip_prefix('.'))
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
    crate::knowledge::get()
        .libraries
        .iter()
        .any(|l| l.soname_is_cuda && l.prefix == base)
        .then_some(major)
        .filter(|m| (9..=20).contains(m))
}

/// A package whose name (any case) is one of these libraries' packages.
pub fn cuda_package(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    crate::knowledge::get().libraries.iter().any(|l| !l.package.is_empty() && n.starts_with(&l.package))
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
