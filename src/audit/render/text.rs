//! Text for people (`--format text`): the pools, the images, then each workload's placement and
//! its containers' verdicts per pool with the findings behind them, and the summary line.

use std::fmt::Write;

use super::lines::{summary_line, where_};
use crate::audit::manifest::GPU_RESOURCE;
use crate::audit::report::{AuditContainer, AuditReport, AuditVerdict};
use crate::report::RenderConfig;
use crate::report::text::Paint;

fn container_line(c: &AuditContainer) -> String {
    format!("{}{} {}  ({} GPU)", if c.init { "init container " } else { "container " }, c.name, c.image, c.gpus)
}

/// The verdict padded to a column, green when it runs natively, yellow through JIT, red else.
fn verdict(paint: Paint, v: AuditVerdict) -> String {
    let s = format!("{:<8}", v.as_str());
    match v {
        AuditVerdict::Runs => paint.wrap("32", &s),
        AuditVerdict::RunsJit => paint.wrap("33", &s),
        AuditVerdict::Fails | AuditVerdict::Unschedulable | AuditVerdict::Unknown => paint.wrap("1;31", &s),
    }
}

pub fn render(r: &AuditReport, cfg: &RenderConfig) -> String {
    let paint = Paint(cfg.color);
    let mut out = String::new();
    let nodes: usize = r.pools.iter().map(|p| p.nodes.len()).sum();
    let _ = writeln!(out, "cluster: {nodes} GPU node(s) in {} pool(s)", r.pools.len());
    let w = r.pools.iter().map(|p| p.name.chars().count()).max().unwrap_or(0);
    for pool in &r.pools {
        let cc = pool.target.as_ref().map(|t| format!("sm_{}", t.cc.sm())).unwrap_or_else(|| "?".into());
        let _ = writeln!(out, "  {:<w$}  {cc:<7} {}", pool.name, pool.nodes.join(", "));
    }
    let _ = writeln!(out, "images: {}", r.images.len());
    for i in &r.images {
        match &i.error {
            Some(e) => {
                let _ = writeln!(out, "  {}  {}: {e}", i.image, paint.wrap("1;31", "NOT SCANNED"));
            }
            None => {
                let via = if i.scanned == format!("docker://{}", i.image) {
                    String::new()
                } else {
                    format!(" (as {})", i.scanned)
                };
                let _ = writeln!(out, "  {}{via}", i.image);
            }
        }
    }
    for wl in &r.workloads {
        let _ = writeln!(out, "\n{}  ({})", wl.meta.id(), wl.meta.source);
        let mut parts = Vec::new();
        if let Some(n) = &wl.placement.node_name {
            parts.push(format!("nodeName {n}"));
        }
        if !wl.placement.node_selector.is_empty() {
            let s: Vec<String> = wl.placement.node_selector.iter().map(|(k, v)| format!("{k}={v}")).collect();
            parts.push(format!("nodeSelector {}", s.join(",")));
        }
        if wl.placement.required_affinity.is_some() {
            parts.push("required node affinity".into());
        }
        if !wl.placement.tolerations.is_empty() {
            let keys: Vec<&str> = wl
                .placement
                .tolerations
                .iter()
                .map(|t| t.get("key").and_then(serde_json::Value::as_str).filter(|k| !k.is_empty()).unwrap_or("*"))
                .collect();
            parts.push(format!("tolerates {}", keys.join(",")));
        }
        if wl.placement.unconstrained() {
            parts.insert(0, "no nodeSelector or node affinity".into());
        }
        let _ = writeln!(out, "  placement: {}", parts.join("; "));
        for c in &wl.containers {
            let _ = writeln!(out, "  {}", container_line(c));
            if c.pools.is_empty() {
                let _ = writeln!(
                    out,
                    "    {} no GPU node matches its placement (nodeName, nodeSelector, affinity, taints)",
                    verdict(paint, AuditVerdict::Unschedulable)
                );
            }
            for pr in &c.pools {
                let _ = writeln!(out, "    {} {}  [{}]", verdict(paint, pr.verdict), pr.pool, pr.nodes.join(", "));
                if let Some(reason) = &pr.reason {
                    let _ = writeln!(out, "           {reason}");
                }
                for f in &pr.findings {
                    let _ = writeln!(out, "           {} {} {}  {}", f.severity.as_str(), f.rule, f.name, where_(f));
                    let _ = writeln!(out, "             {}", f.message);
                    let _ = writeln!(out, "             fix: {}", f.fix);
                }
            }
            for f in &c.findings {
                let _ = writeln!(out, "    {} {} {}  {} (every pool)", f.severity.as_str(), f.rule, f.name, where_(f));
                let _ = writeln!(out, "           {}", f.message);
            }
        }
    }
    if r.workloads.is_empty() {
        let _ = writeln!(out, "\nno workload requests {GPU_RESOURCE}");
    }
    out.push('\n');
    for n in &r.notes {
        let _ = writeln!(out, "note: {n}");
    }
    let _ = writeln!(
        out,
        "read: {} workload(s) without GPUs, {} other object(s) skipped",
        r.workloads_without_gpu, r.other_objects
    );
    let _ = writeln!(out, "{}", summary_line(r));
    out
}
