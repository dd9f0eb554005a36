//! Text for people (`--format text`): the pools, the images with what is found about each as a
//! whole, then each workload's placement, its containers' verdicts per pool, a line per cause
//! with the pools it holds on, the placement that keeps it where it runs, and the summary line.

use std::fmt::Write;

use super::lines::{and_list, causes, image_findings, placement_parts, summary_line, where_};
use crate::audit::cluster::requirement_text;
use crate::audit::manifest::GPU_RESOURCE;
use crate::audit::place::alternative_admits;
use crate::audit::report::{AuditContainer, AuditReport, AuditVerdict, AuditWorkload};
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

fn nodes(n: usize) -> String {
    if n == 1 { "1 node".into() } else { format!("{n} nodes") }
}

fn cluster(out: &mut String, r: &AuditReport) {
    let total: usize = r.pools.iter().map(|p| p.nodes.len()).sum();
    let _ = writeln!(out, "cluster: {total} GPU node(s) in {} pool(s)", r.pools.len());
    let w = r.pools.iter().map(|p| p.name.chars().count()).max().unwrap_or(0);
    let rows: Vec<(String, String)> = r
        .pools
        .iter()
        .map(|p| {
            let cc = p.cc.map(|c| format!("sm_{}", c.sm())).unwrap_or_else(|| "sm_?".into());
            let driver = match (&p.driver, p.driver_cuda) {
                (Some(d), Some(c)) => format!("driver {d} (CUDA {c})"),
                (Some(d), None) => format!("driver {d}"),
                _ => "driver not labelled".into(),
            };
            (format!("{cc}  {driver}"), p.name.clone())
        })
        .collect();
    let dw = rows.iter().map(|r| r.0.chars().count()).max().unwrap_or(0);
    for (p, (gpu, _)) in r.pools.iter().zip(&rows) {
        let groups = if p.node_groups.is_empty() { String::new() } else { format!("{}: ", p.node_groups.join(", ")) };
        let _ = writeln!(out, "  {:<w$}  {gpu:<dw$}  {groups}{}", p.name, p.nodes.join(", "));
    }
}

fn images(out: &mut String, r: &AuditReport, paint: Paint) {
    let _ = writeln!(out, "images: {}", r.images.len());
    let about = image_findings(r);
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
        for (_, f) in about.iter().filter(|(image, _)| *image == i.image) {
            let _ = writeln!(out, "    {} {} {}  {}", f.severity.as_str(), f.rule, f.name, where_(f));
            let _ = writeln!(out, "      {}", f.message);
        }
    }
}

fn workload(out: &mut String, wl: &AuditWorkload, r: &AuditReport, paint: Paint) {
    let _ = writeln!(out, "\n{}  ({})", wl.meta.id(), wl.meta.source);
    let _ = writeln!(out, "  placement: {}", placement_parts(wl).join("; "));
    for c in &wl.containers {
        let _ = writeln!(out, "  {}", container_line(c));
        if c.pools.is_empty() {
            let _ = writeln!(
                out,
                "    {} no GPU node matches its placement (nodeName, nodeSelector, affinity, taints)",
                verdict(paint, AuditVerdict::Unschedulable)
            );
        }
        let w = c.pools.iter().map(|p| p.pool.chars().count()).max().unwrap_or(0);
        for pr in &c.pools {
            let _ = write!(out, "    {} {:<w$}  {}", verdict(paint, pr.verdict), pr.pool, nodes(pr.nodes.len()));
            // The pool's other nodes are kept off by the placement: name the ones it may use.
            let pool_size = r.pools.iter().find(|p| p.name == pr.pool).map_or(0, |p| p.nodes.len());
            if pr.nodes.len() < pool_size {
                let _ = write!(out, ": {}", pr.nodes.join(", "));
            }
            out.push('\n');
            if let Some(reason) = &pr.reason {
                let _ = writeln!(out, "             {reason}");
            }
        }
    }
    let several = wl.containers.len() > 1;
    for cause in causes(wl) {
        let who = if several { format!(" (container {})", cause.containers.join(", ")) } else { String::new() };
        let _ = writeln!(
            out,
            "  {} {} {}  {}{who}  on {}",
            cause.severity.as_str(),
            cause.rule,
            cause.name,
            cause.at,
            and_list(&cause.pools)
        );
        for m in &cause.messages {
            let _ = writeln!(out, "      {m}");
        }
        for f in &cause.fixes {
            let _ = writeln!(out, "      fix: {f}");
        }
    }
    if let Some(fix) = &wl.placement_fix {
        let runs: Vec<&str> = fix.runs_on.iter().map(String::as_str).collect();
        let off: Vec<&str> = fix.kept_off.iter().map(String::as_str).collect();
        let _ = writeln!(
            out,
            "  place it where it runs: on {}, off {}, with the required node affinity {}",
            and_list(&runs),
            and_list(&off),
            requirement_text(&fix.requirement)
        );
        if let Some(alt) = &fix.alternative {
            let admits = alternative_admits(alt).map(|a| format!(": {a}")).unwrap_or_default();
            let _ = writeln!(out, "    (or {}{admits})", requirement_text(alt));
        }
        match &fix.kubectl {
            Some(cmd) => {
                let _ = writeln!(out, "    {cmd}");
            }
            None => {
                let _ = writeln!(
                    out,
                    "    the pod spec of a {} cannot change once it is created: patch the manifest (kustomize patches:) and re-create it",
                    wl.meta.kind
                );
                for line in fix.yaml().lines() {
                    let _ = writeln!(out, "      {line}");
                }
            }
        }
    }
    if let Some(why) = &wl.no_placement_fix {
        let _ = writeln!(out, "  {why}");
    }
}

pub fn render(r: &AuditReport, cfg: &RenderConfig) -> String {
    let paint = Paint(cfg.color);
    let mut out = String::new();
    cluster(&mut out, r);
    images(&mut out, r, paint);
    for wl in &r.workloads {
        workload(&mut out, wl, r, paint);
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
