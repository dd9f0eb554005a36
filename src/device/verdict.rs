//! The driver's outcome set against the static verdict: the result code, and for modules that
//! load, whether native code or the JIT made them load.

use super::driver::Load;
use super::error::error_name;
use super::report::{EntryResult, How, Loading, ModuleResult, StaticResult};
use crate::cuda::compat::{ImageKind, Verdict};

fn static_name(v: &Verdict) -> (StaticResult, String) {
    (v.kind(), v.image().to_string())
}

/// Compares the driver's outcome with the static verdict: the result code, and for modules that
/// load, whether native code or the JIT was what made them load.
pub fn compare(v: &Verdict, driver_result: u32, how: How) -> Option<String> {
    let expected = v.error().unwrap_or(0);
    let (name, image) = static_name(v);
    if expected != driver_result {
        return Some(format!(
            "static analysis predicts {} ({name}{}), the driver returned {}",
            if expected == 0 {
                "a successful load".to_string()
            } else {
                format!("{} ({expected})", error_name(expected))
            },
            if image.is_empty() { String::new() } else { format!(" {image}") },
            if driver_result == 0 {
                "success".to_string()
            } else {
                format!("{} ({driver_result})", error_name(driver_result))
            }
        ));
    }
    let went = match how {
        How::Native => Some(StaticResult::Native),
        How::Jit => Some(StaticResult::Jit),
        _ => None,
    };
    if expected == 0 && went.is_some_and(|w| w != name) {
        return Some(format!("static analysis predicts {name} ({image}), but the driver's load went {how}"));
    }
    None
}

/// A module's outcome on a device set against its static verdict there.
pub fn judge(
    binary: &str,
    module: &str,
    device: u32,
    verdict: &Verdict,
    driver: Load,
    how: How,
    entries: Vec<EntryResult>,
) -> ModuleResult {
    let jit_ms =
        entries.iter().filter(|e| e.kind != ImageKind::Sass && e.load.result == 0).fold(0.0, |a, e| a + e.load.ms);
    let (name, image) = static_name(verdict);
    let disagreement = if how == How::Crashed {
        // No result code to compare: the driver never answered.
        Some(format!(
            "static analysis predicts {name}{}, but {}",
            if image.is_empty() { String::new() } else { format!(" {image}") },
            driver.error
        ))
    } else {
        compare(verdict, driver.result, how)
    };
    ModuleResult {
        binary: binary.into(),
        module: module.into(),
        device,
        static_result: name,
        static_image: image,
        static_error: verdict.error().unwrap_or(0),
        driver,
        how,
        entries,
        jit_ms,
        functions: Vec::new(),
        launches: Vec::new(),
        loading: Loading::Unset,
        disagrees: disagreement.is_some(),
        disagreement: disagreement.unwrap_or_default(),
    }
}
