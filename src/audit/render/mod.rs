//! The audit's reports, one file per format, dispatched by the one match in [`render`].
//!
//! A new format is a file with a `render` function (and its `mod` line), an [`AuditFormat`]
//! variant with its name, and an arm in [`render`]; the command line lists it from
//! [`AuditFormat::ALL`].

use super::report::AuditReport;
use crate::report::RenderConfig;

pub mod json;
pub mod junit;
pub(super) mod lines;
pub mod markdown;
pub mod sarif;
pub mod text;

crate::schema::words! {
    /// An output format of `cudalint audit`, by its name on the command line, in the order
    /// `--help` lists them.
    pub enum AuditFormat {
        Text = "text",
        Json = "json",
        /// The scan's SARIF of every linted image, one run each.
        Sarif = "sarif",
        /// A suite per workload, a test case per container and pool.
        Junit = "junit",
        Markdown = "markdown",
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
        for f in AuditFormat::ALL {
            assert_eq!(f.as_str().parse::<AuditFormat>().unwrap(), *f);
        }
        assert!("html".parse::<AuditFormat>().is_err());
    }
}
