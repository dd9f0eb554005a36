//! Report sinks: one file per output format of `cudalint scan`, dispatched by the one match in
//! [`render`]; `inspect` has a human listing and a JSON document (schema in docs/schema.md), and
//! `registry` renders the summary of a registry run. Output is sorted and free of timestamps, so
//! snapshots and CI diffs are stable.
//!
//! A new format is a file with a `render` function (and its `mod` line), a [`Format`] variant
//! with its name, and an arm in [`render`]; the command line lists it from [`Format::ALL`].

use crate::image::ImageReport;
use crate::lint::LintReport;
use crate::lint::rules::Rule;

pub mod cyclonedx;
pub mod enrich;
mod error;
pub mod html;
pub mod inspect;
pub mod json;
pub mod junit;
mod lines;
/// `1 file`, `2 files`, `10,560 files`: the reports' counting, for the command line's notes too.
pub(crate) use lines::count;
pub mod markdown;
pub mod registry;
pub mod sarif;
pub mod scan;
pub mod support;
pub mod text;

pub use error::ReportError;

crate::schema::words! {
    /// An output format of `cudalint scan`, by its name on the command line, in the order
    /// `--help` lists them.
    pub enum Format {
        Text = "text",
        Json = "json",
        Sarif = "sarif",
        Junit = "junit",
        Markdown = "markdown",
        Html = "html",
        Cyclonedx = "cyclonedx",
        /// The scan's file listing as JSON.
        Inventory = "inventory",
        /// The scan's file listing as text.
        Listing = "listing",
    }
}

impl Format {
    /// A listing of what the image holds (SBOM, inventory) rather than a verdict: needs no
    /// targets, and a run that asks only for these never fails the gate.
    pub fn is_inventory(self) -> bool {
        matches!(self, Format::Cyclonedx | Format::Inventory | Format::Listing)
    }
}

/// What a scan produced: the judged report and the inventory it was judged from.
#[derive(Clone, Copy)]
pub struct Subject<'a> {
    pub report: &'a LintReport,
    pub inventory: &'a ImageReport,
}

/// How to render: what the formats need beside the report.
#[derive(Clone, Copy, Default)]
pub struct RenderConfig<'a> {
    /// ANSI colours (text).
    pub color: bool,
    /// The rules the report was judged with (SARIF lists the ones its findings use).
    pub rules: &'a [Rule],
    /// An SBOM to enrich instead of writing cudalint's own (CycloneDX).
    pub sbom: Option<&'a enrich::Sbom>,
    /// Text: list folded findings and detail problems too (`scan -v`).
    pub verbose: bool,
    /// Text: the terminal's width, to wrap findings and fit the grid to; `None` (files, pipes)
    /// keeps each message on one line.
    pub width: Option<usize>,
}

/// A rendered report, and what the renderer has to tell the user beside it (for stderr).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    pub text: String,
    pub note: Option<String>,
}

impl From<String> for Rendered {
    fn from(text: String) -> Self {
        Rendered { text, note: None }
    }
}

/// The one dispatch from a format to its renderer.
pub fn render(format: Format, s: &Subject, cfg: &RenderConfig) -> Result<Rendered, ReportError> {
    Ok(match format {
        Format::Text => text::render(s.report, cfg)?.into(),
        Format::Json => json::render(s.report, cfg)?.into(),
        Format::Sarif => sarif::render(s.report, cfg)?.into(),
        Format::Junit => junit::render(s.report, cfg)?.into(),
        Format::Markdown => markdown::render(s.report, cfg)?.into(),
        Format::Html => html::render(s.report, cfg)?.into(),
        Format::Cyclonedx => match cfg.sbom {
            // `--enrich`: that SBOM, enriched, instead of cudalint's own.
            Some(sbom) => enrich::render(sbom, s.report, s.inventory)?,
            None => cyclonedx::render(s.report, s.inventory).into(),
        },
        Format::Inventory => scan::json(s.inventory).into(),
        Format::Listing => scan::text(s.inventory).into(),
    })
}

/// Sizes for people (`1.1 MiB`, `904 B`): the lint's one formatter, so findings and listings agree.
pub use crate::lint::facts::human_size as human_bytes;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_format_name_parses() {
        for f in Format::ALL {
            assert_eq!(f.as_str().parse::<Format>().unwrap(), *f);
        }
        assert!("xml".parse::<Format>().is_err());
    }
}
