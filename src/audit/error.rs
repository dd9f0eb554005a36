//! Why an audit could not run.

/// Why an audit could not run; each names what it is about.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// An input file, or a document or object in it, that the audit cannot read.
    #[error("{origin}: {message}")]
    Input { origin: String, message: String },
    /// A node selector term that Kubernetes itself would refuse.
    #[error("{0}")]
    Selector(String),
    /// Nothing to audit: no manifests, no nodes, or no node with GPUs.
    #[error("{0}")]
    Nothing(String),
    /// Judging an image's inventory failed.
    #[error("{image}: {source}")]
    Judge { image: String, source: crate::lint::rules::EvalError },
}

impl AuditError {
    pub(crate) fn input(origin: impl std::fmt::Display, message: impl Into<String>) -> AuditError {
        AuditError::Input { origin: origin.to_string(), message: message.into() }
    }
}
