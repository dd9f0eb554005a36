//! SARIF 2.1.0 (`--format sarif`) for GitHub code scanning.

use std::collections::BTreeMap;

use serde_sarif::sarif;

use super::{RenderConfig, ReportError};
use crate::escape;
use crate::lint::LintReport;
use crate::lint::rules::{Rule, Severity, markdown as rule_markdown};

/// The rules' descriptors come from `cfg.rules` (those the findings use).
pub fn render(r: &LintReport, cfg: &RenderConfig) -> Result<String, ReportError> {
    let mut s = serde_json::to_string_pretty(&log(vec![run(r, cfg.rules)])).expect("serializes");
    s.push('\n');
    Ok(s)
}

/// A SARIF 2.1.0 log of `runs`.
pub fn log(runs: Vec<sarif::Run>) -> sarif::Sarif {
    sarif::Sarif::builder().schema(sarif::SCHEMA_URL.to_string()).version(serde_json::json!("2.1.0")).runs(runs).build()
}

/// cudalint as a SARIF tool, with the descriptors of `rules`.
fn tool(version: &str, rules: Vec<sarif::ReportingDescriptor>) -> sarif::Tool {
    let driver = sarif::ToolComponent::builder()
        .name("cudalint")
        .version(version.to_string())
        .information_uri("https://github.com/cudalint/cudalint")
        .rules(rules)
        .build();
    sarif::Tool::builder().driver(driver).build()
}

fn level(s: Severity) -> sarif::ResultLevel {
    match s {
        Severity::Error => sarif::ResultLevel::Error,
        Severity::Warning => sarif::ResultLevel::Warning,
        Severity::Info => sarif::ResultLevel::Note,
    }
}

fn props(pairs: &[(&str, Option<String>)]) -> sarif::PropertyBag {
    let mut bag = sarif::PropertyBag::builder().build();
    for (k, v) in pairs {
        if let Some(v) = v {
            bag.additional_properties.insert((*k).to_string(), serde_json::Value::String(v.clone()));
        }
    }
    bag
}

/// One report's run, for GitHub code scanning: the rules its findings use, with their docs; each
/// result located at the file's path inside the image (without the leading `/`), with the layer
/// and image digests.
pub fn run(r: &LintReport, rules: &[Rule]) -> sarif::Run {
    let used: std::collections::BTreeSet<&str> = r.findings.iter().map(|f| f.rule.as_str()).collect();
    let descriptors: Vec<sarif::ReportingDescriptor> = rules
        .iter()
        .filter(|rule| used.contains(rule.code.as_str()))
        .map(|rule| {
            sarif::ReportingDescriptor::builder()
                .id(rule.code.clone())
                .name(rule.name.clone())
                .short_description(sarif::MultiformatMessageString::builder().text(rule.summary.clone()).build())
                .full_description(
                    sarif::MultiformatMessageString::builder().text(rule.docs.what.trim().to_string()).build(),
                )
                .help(
                    sarif::MultiformatMessageString::builder()
                        .text(format!("{}\n\nFix: {}", rule.docs.why.trim(), rule.docs.fix.trim()))
                        .markdown(rule_markdown(rule))
                        .build(),
                )
                .default_configuration(
                    sarif::ReportingConfiguration::builder()
                        .level(serde_json::json!(sarif_level_name(rule.severity)))
                        .build(),
                )
                .build()
        })
        .collect();
    let image_uri = escape::uri_path(r.image.name.as_deref().unwrap_or("image"));
    let image_digest = r.image.manifest_digest.clone().or_else(|| r.image.config_digest.clone());
    let results: Vec<sarif::Result> = r
        .findings
        .iter()
        .map(|f| {
            let uri = f
                .path
                .as_deref()
                .map(|p| escape::uri_path(p.trim_start_matches('/')))
                .unwrap_or_else(|| image_uri.clone());
            let loc = sarif::Location::builder()
                .physical_location(
                    sarif::PhysicalLocation::builder()
                        .artifact_location(sarif::ArtifactLocation::builder().uri(uri).build())
                        .build(),
                )
                .build();
            let mut fps = BTreeMap::new();
            fps.insert("cudalint/v1".to_string(), f.fingerprint.clone());
            sarif::Result::builder()
                .rule_id(f.rule.clone())
                .level(level(f.severity))
                .message(
                    sarif::Message::builder()
                        .text(match &f.step {
                            Some(step) => format!("{} Made by the Dockerfile step `{step}`. Fix: {}", f.message, f.fix),
                            None => format!("{} Fix: {}", f.message, f.fix),
                        })
                        .build(),
                )
                .locations(vec![loc])
                .partial_fingerprints(fps)
                .properties(props(&[
                    ("layer", f.layer.clone()),
                    ("step", f.step.clone()),
                    ("package", f.package.clone()),
                    ("purl", f.purl.clone()),
                    ("image", r.image.name.clone()),
                    ("imageDigest", image_digest.clone()),
                    ("target", f.target.clone()),
                ]))
                .build()
        })
        .collect();
    sarif::Run::builder().tool(tool(r.tool.version, descriptors)).results(results).build()
}

fn sarif_level_name(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "note",
    }
}
