//! What several audit formats write alike: a finding's place and the summary line.

use crate::audit::report::{AuditReport, AuditVerdict};
use crate::lint::Finding;

/// A finding's path in the image, or `image` for one about the whole image.
pub fn where_(f: &Finding) -> String {
    f.path.clone().unwrap_or_else(|| "image".into())
}

/// GPU containers by verdict.
#[derive(Default)]
struct Counts {
    containers: usize,
    runs: usize,
    fails: usize,
    unschedulable: usize,
    unknown: usize,
}

fn counts(r: &AuditReport) -> Counts {
    let mut c = Counts::default();
    for ct in r.workloads.iter().flat_map(|w| &w.containers) {
        c.containers += 1;
        match ct.verdict {
            AuditVerdict::Runs | AuditVerdict::RunsJit => c.runs += 1,
            AuditVerdict::Fails => c.fails += 1,
            AuditVerdict::Unschedulable => c.unschedulable += 1,
            AuditVerdict::Unknown => c.unknown += 1,
        }
    }
    c
}

pub fn summary_line(r: &AuditReport) -> String {
    let c = counts(r);
    format!(
        "{} workload(s), {} GPU container(s): {} run on every pool they can land on, {} fail on some pool, {} fit no GPU pool, {} could not be judged; fails at {}: {}",
        r.workloads.len(),
        c.containers,
        c.runs,
        c.fails,
        c.unschedulable,
        c.unknown,
        r.fail_on.as_str(),
        if r.incomplete {
            "INCOMPLETE"
        } else if r.failed {
            "FAILED"
        } else {
            "passed"
        }
    )
}
