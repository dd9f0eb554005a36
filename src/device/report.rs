//! What `--on-device` reports: per device its canary and every module's driver outcome beside
//! the static verdict, and the modules left out. Statuses are enums that serialize to the words
//! the JSON reports and the rules (`module.how`, ...) have always used.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::driver::{DeviceInfo, Function, Load};
use crate::cuda::compat::ImageKind;

/// Writes an enum as the word it serializes to, and reads it back (rule cases name a `how`).
macro_rules! words {
    ($t:ty { $($v:ident => $w:literal),* $(,)? }) => {
        impl $t {
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$v => $w),*
                }
            }
        }
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
        impl std::str::FromStr for $t {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                match s {
                    $($w => Ok(Self::$v),)*
                    _ => Err(format!("unknown {}: {s:?}", stringify!($t))),
                }
            }
        }
    };
}

/// How a module's load went on the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum How {
    /// A cubin of the module loads on its own.
    Native,
    /// Only its PTX does.
    Jit,
    /// The whole module did not load.
    Failed,
    /// It loaded, but none of its images did on its own.
    Unknown,
    /// The load worker died or hung on it: no result code.
    Crashed,
}
words!(How { Native => "native", Jit => "jit", Failed => "failed", Unknown => "unknown", Crashed => "crashed" });

/// The static verdict's kind (`cuda::compat::Verdict` without its details).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StaticResult {
    Native,
    Jit,
    NoImage,
    PtxTooNew,
    JitDisabled,
}
words!(StaticResult {
    Native => "native",
    Jit => "jit",
    NoImage => "no-image",
    PtxTooNew => "ptx-too-new",
    JitDisabled => "jit-disabled",
});

/// How a module reaches the driver in production; only registered and standalone modules
/// count for the binary's verdict.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Loading {
    /// Not known (results judged outside a run, as the rule cases do).
    #[default]
    #[serde(rename = "")]
    Unset,
    Registered,
    Standalone,
    LibraryManaged,
    /// A module of the host driver's own libraries.
    DriverLibrary,
}
words!(Loading {
    Unset => "",
    Registered => "registered",
    Standalone => "standalone",
    LibraryManaged => "library-managed",
    DriverLibrary => "driver-library",
});

impl From<crate::module::Loading> for Loading {
    fn from(l: crate::module::Loading) -> Loading {
        match l {
            crate::module::Loading::Registered => Loading::Registered,
            crate::module::Loading::Standalone => Loading::Standalone,
            crate::module::Loading::LibraryManaged => Loading::LibraryManaged,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LaunchStatus {
    Launched,
    Faulted,
    TimedOut,
    Skipped,
}
words!(LaunchStatus { Launched => "launched", Faulted => "faulted", TimedOut => "timed-out", Skipped => "skipped" });

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

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ModuleResult {
    pub binary: String,
    pub module: String,
    pub device: u32,
    /// The static verdict for this device and its driver.
    pub static_result: StaticResult,
    pub static_image: String,
    /// The error the static analysis predicts (0: loads).
    pub static_error: u32,
    /// What `cuModuleLoadData` on the whole container returned.
    pub driver: Load,
    pub how: How,
    pub entries: Vec<EntryResult>,
    /// Milliseconds spent compiling PTX (the PTX entries loaded on their own).
    pub jit_ms: f64,
    pub functions: Vec<Function>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub launches: Vec<LaunchResult>,
    #[serde(default)]
    pub loading: Loading,
    /// The driver did not do what the static verdict says.
    pub disagrees: bool,
    #[serde(default)]
    pub disagreement: String,
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
