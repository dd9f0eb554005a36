//! What can go wrong in a report: an SBOM `--enrich` cannot work on, a registry summary or shard
//! set `merge` cannot put together. The texts are what users see (and tests check).

/// An error of the report layer.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    // The SBOM given to --enrich, refused before the scan (`origin` names it).
    #[error("{origin}: not JSON: {source}")]
    SbomNotJson { origin: String, source: serde_json::Error },
    #[error("{origin}: not a CycloneDX SBOM (no \"bomFormat\": \"CycloneDX\")")]
    NotCycloneDx { origin: String },
    #[error("{origin}: CycloneDX specVersion {spec:?}; cudalint enriches 1.4 to 1.6")]
    CycloneDxVersion { origin: String, spec: String },
    #[error("{origin}: already carries cudalint: properties; enrich the SBOM as its tool wrote it")]
    AlreadyEnriched { origin: String },
    /// The SBOM's structure, found while editing it (JSON serde accepted but the span scanner did
    /// not, or `components` nested too deeply).
    #[error("{0}")]
    SbomShape(&'static str),
    /// A component or key serde could not read while editing.
    #[error(transparent)]
    SbomJson(serde_json::Error),

    // The shard labels of registry summaries.
    #[error(transparent)]
    Shard(#[from] crate::registry::shard::ShardError),

    // A summary.json given to `merge` (`origin` names it).
    #[error("{origin}:{}: {source}", source.line())]
    SummaryJson { origin: String, source: serde_json::Error },
    #[error("{origin}: not a cudalint registry summary")]
    NotSummary { origin: String },
    #[error("{origin}: summary of {found}, not {expected}")]
    OtherRegistry { origin: String, found: String, expected: String },
}

/// The span scanner's refusals, as the SBOM's: the same texts.
impl From<crate::bounded::json_spans::SpanError> for ReportError {
    fn from(e: crate::bounded::json_spans::SpanError) -> Self {
        use crate::bounded::json_spans::SpanError;
        match e {
            SpanError::Shape(why) => ReportError::SbomShape(why),
            SpanError::Json(e) => ReportError::SbomJson(e),
        }
    }
}
