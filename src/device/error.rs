//! What can go wrong in the device library: the driver missing or refusing a call, no GPU, the
//! load worker's input unreadable. The messages are the ones users see on the command line.

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

/// `CUDA_ERROR_NO_BINARY_FOR_GPU` and friends: the number and the driver's name for it.
pub fn error_name(code: u32) -> String {
    if code == 0 {
        return "CUDA_SUCCESS".into();
    }
    // The driver knows the names; without one loaded, the numbers cudalint reasons about.
    match code {
        1 => "CUDA_ERROR_INVALID_VALUE",
        2 => "CUDA_ERROR_OUT_OF_MEMORY",
        200 => "CUDA_ERROR_INVALID_IMAGE",
        209 => "CUDA_ERROR_NO_BINARY_FOR_GPU",
        218 => "CUDA_ERROR_INVALID_PTX",
        221 => "CUDA_ERROR_JIT_COMPILER_NOT_FOUND",
        222 => "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
        223 => "CUDA_ERROR_JIT_COMPILATION_DISABLED",
        400 => "CUDA_ERROR_INVALID_HANDLE",
        500 => "CUDA_ERROR_NOT_FOUND",
        700 => "CUDA_ERROR_ILLEGAL_ADDRESS",
        719 => "CUDA_ERROR_LAUNCH_FAILED",
        913 => "CUDA_ERROR_FUNCTION_NOT_LOADED",
        999 => "CUDA_ERROR_UNKNOWN",
        _ => return format!("CUDA error {code}"),
    }
    .to_string()
}
