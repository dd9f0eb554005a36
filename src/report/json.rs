//! The lint report as JSON (`--format json`, schema `cudalint.lint/v3` in docs/schema.md).

use super::{RenderConfig, ReportError};
use crate::lint::LintReport;

pub fn render(r: &LintReport, _cfg: &RenderConfig) -> Result<String, ReportError> {
    let mut s = serde_json::to_string_pretty(r).expect("serializes");
    s.push('\n');
    Ok(s)
}
