//! The CI gate: an image inventory, deployment targets and rules in; findings, a coverage
//! matrix and an exit status out. `report.rs` holds what comes out, `run.rs` computes it in
//! phases.

pub mod compilers;
pub mod config;
pub mod coverage;
pub mod diff;
mod error;
pub mod facts;
pub mod imports;
pub mod kernel_sets;
pub mod policy;
mod report;
pub mod rules;
mod run;
mod source_builds;
pub mod support;
pub mod targets;
pub mod unjudged;
pub mod variables;
pub mod variants;
pub mod verdict;

pub use report::{
    CompilerCheck, Detail, Finding, Headline, HeadlineVerdict, LintImage, LintReport, MatrixCell, MatrixRow, Package,
    ROOT_CAUSE_RULE, Suppressed,
};
pub use run::{LintOptions, run};
