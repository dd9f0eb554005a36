//! What `--on-device` reports: per device its canary and every module's driver outcome beside
//! the static verdict, and the modules left out. Statuses are enums that serialize to the words
//! the JSON reports and the rules (`module.how`, ...) have always used.

use serde::{Deserialize, Serialize};

use super::driver::{DeviceInfo, Function, Load};
use crate::cuda::compat::ImageKind;
// The static verdict's kind and how a module reaches the driver are the library's words.
pub use crate::cuda::compat::StaticResult;
pub use crate::module::Loading;
use crate::schema::{documented, words};

words! {
    /// How a module's load went on the device.
    pub enum How {
        /// A cubin of the module loads on its own.
        Native = "native",
        /// Only its PTX does.
        Jit = "jit",
        /// The whole module did not load.
        Failed = "failed",
        /// It loaded, but none of its images did on its own.
        Unknown = "unknown",
        /// The load worker died or hung on it: no result code.
        Crashed = "crashed",
    }
}

words! {
    pub enum LaunchStatus {
        Launched = "launched",
        Faulted = "faulted",
        TimedOut = "timed-out",
        Skipped = "skipped",
    }
}

/// A module the static analysis saw but that is not handed to the driver.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SkippedModule {
    pub binary: String,
    pub module: String,
    pub reason: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EntryResult {
    pub image: String,
    pub kind: ImageKind,
    #[serde(flatten)]
    pub load: Load,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LaunchResult {
    pub kernel: String,
    pub status: LaunchStatus,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

documented! {
    #[derive(Debug, Clone, Serialize, Deserialize)]
    pub struct ModuleResult {
        /// the file
        pub binary: String,
        /// `.nv_fatbin@0x2680`
        pub module: String,
        /// ordinal
        pub device: u32,
        /// the static verdict: native, jit, no-image, ptx-too-new, jit-disabled
        pub static_result: StaticResult,
        /// the image it picks
        pub static_image: String,
        /// the error it predicts (0: loads)
        pub static_error: u32,
        /// `{result, error, ms, jit_ms, log}` of `cuModuleLoadData` on the whole container
        pub driver: Load,
        /// native, jit, failed, crashed, unknown
        pub how: How,
        /// each SASS/PTX image loaded on its own
        pub entries: Vec<EntryResult>,
        /// milliseconds spent compiling PTX
        pub jit_ms: f64,
        /// `{name, registers, shared_bytes, local_bytes, max_threads_per_block}`
        pub functions: Vec<Function>,
        /// `{kernel, status, detail}` with `--launch` (absent without)
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        pub launches: Vec<LaunchResult>,
        /// how the module reaches the driver in production: registered, standalone, library-managed, driver-library
        #[serde(default)]
        pub loading: Loading,
        /// the driver did not do what the static verdict says
        pub disagrees: bool,
        /// how
        #[serde(default)]
        pub disagreement: String,
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Canary {
    pub device: u32,
    pub ok: bool,
    pub detail: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeviceReport {
    pub driver_version: i32,
    pub devices: Vec<DeviceInfo>,
    pub canary: Vec<Canary>,
    pub modules: Vec<ModuleResult>,
    /// Modules not handed to the driver, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<SkippedModule>,
}
