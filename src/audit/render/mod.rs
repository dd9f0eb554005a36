//! The audit's reports, one file per format, dispatched by the one match in [`render`].
//!
//! A new format is a file with a `render` function, an [`AuditFormat`] variant with its name in
//! [`AuditFormat::NAMES`], and an arm in [`render`].

use std::str::FromStr;

use super::report::AuditReport;
use crate::report::{RenderConfig, ReportError};

pub mod json;
pub mod junit;
mod lines;
pub mod markdown;
pub mod sarif;
pub mod text;

/// An output format of `cudalint audit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuditFormat {
    Text,
    Json,
    /// The scan's SARIF of every linted image, one run each.
    Sarif,
    /// A suite per workload, a test case per container and pool.
    Junit,
    Markdown,
}

impl AuditFormat {
    /// Every format with its name on the command line, in the order `--help` lists them.
    pub const NAMES: [(&'static str, AuditFormat); 5] = [
        ("text", AuditFormat::Text),
        ("json", AuditFormat::Json),
        ("sarif", AuditFormat::Sarif),
        ("junit", AuditFormat::Junit),
        ("markdown", AuditFormat::Markdown),
    ];
}

impl FromStr for AuditFormat {
    type Err = ReportError;

    fn from_str(s: &str) -> Result<Self, ReportError> {
        Self::NAMES.iter().find(|(n, _)| *n == s).map(|(_, f)| *f).ok_or_else(|| ReportError::UnknownFormat(s.into()))
    }
}

/// The one dispatch from a format to its renderer (`cfg`: colours for text, the rules for SARIF).
pub fn render(format: AuditFormat, r: &AuditReport, cfg: &RenderConfig) -> String {
    match format {
        AuditFormat::Text => text::render(r, cfg),
        AuditFormat::Json => json::render(r, cfg),
        AuditFormat::Sarif => sarif::render(r, cfg),
        AuditFormat::Junit => junit::render(r, cfg),
        AuditFormat::Markdown => markdown::render(r, cfg),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_format_name_parses() {
        for (name, f) in AuditFormat::NAMES {
            assert_eq!(name.parse::<AuditFormat>().unwrap(), f);
        }
        assert!("html".parse::<AuditFormat>().is_err());
    }
}
