//! What can go wrong in the device library: the driver missing or refusing a call, no GPU, the
//! load worker's input unreadable. The messages are the ones users see on the command line.

use super::driver::error_name;

#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    #[error("no NVIDIA driver on this machine (libcuda.so.1 not found): --on-device needs a GPU node")]
    NoDriver,
    #[error("the NVIDIA driver does not initialise: cuInit: {} ({code})", error_name(*.code))]
    Init { code: u32 },
    /// A driver call returned an error.
    #[error("{what}: {} ({code})", error_name(*.code))]
    Call { what: &'static str, code: u32 },
    #[error("the NVIDIA driver sees no GPU")]
    NoGpu,
    #[error("no device {asked:?} (the driver sees {seen})")]
    NoSuchDevice { asked: Vec<u32>, seen: usize },
    #[error("parameter sizes need a CUDA 12.4+ driver (cuFuncGetParamInfo)")]
    NoParamInfo,
    #[error("kernel name with NUL")]
    NulInName,
    #[error("module does not load: {0}")]
    ModuleDoesNotLoad(String),
    #[error("canary PTX does not load: {error} {log}")]
    CanaryDoesNotLoad { error: String, log: String },
    #[error("thread {thread} wrote {wrote}, expected {expected}")]
    CanaryWrongValue { thread: usize, wrote: u32, expected: usize },
    /// A worker's standard input ended early or could not be read.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("bad frame: {0}")]
    BadFrame(serde_json::Error),
    #[error(transparent)]
    Json(serde_json::Error),
}
