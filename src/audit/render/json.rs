//! JSON (`--format json`): the report as it is, schema `cudalint.audit/v1` (docs/schema.md).

use crate::audit::report::AuditReport;
use crate::report::RenderConfig;

pub fn render(r: &AuditReport, _cfg: &RenderConfig) -> String {
    let mut s = serde_json::to_string_pretty(r).expect("serializes");
    s.push('\n');
    s
}
