//! SARIF 2.1.0 (`--format sarif`): the scan's SARIF run of every linted image, in one log.

use serde_sarif::sarif;

use crate::audit::report::AuditReport;
use crate::report::{RenderConfig, sarif as lint_sarif};

/// The rules' descriptors come from `cfg.rules` (those each run's findings use).
pub fn render(r: &AuditReport, cfg: &RenderConfig) -> String {
    let mut runs: Vec<sarif::Run> = r.lints.iter().map(|l| lint_sarif::run(l, cfg.rules)).collect();
    if runs.is_empty() {
        // A run without results, so that the log still names the tool.
        let driver = sarif::ToolComponent::builder().name("cudalint").version(r.tool.version.to_string()).build();
        runs.push(sarif::Run::builder().tool(sarif::Tool::builder().driver(driver).build()).results(vec![]).build());
    }
    // Through a JSON value, whose keys are sorted, as the audit's SARIF always was.
    let log = serde_json::to_value(lint_sarif::log(runs)).expect("serializes");
    let mut s = serde_json::to_string_pretty(&log).expect("serializes");
    s.push('\n');
    s
}
