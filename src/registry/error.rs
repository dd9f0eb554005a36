//! What can go wrong talking to a registry. Every string a registry chose is escaped before it
//! is put in one of these (`crate::escape::text`); the texts are what users and tests see.

use reqwest::StatusCode;

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// A local file the client needs (a CA certificate), or the runtime it could not start.
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("{path}: not a PEM certificate: {message}")]
    Certificate { path: String, message: String },
    #[error("{spec} is not an image reference: {message}")]
    Reference { spec: String, message: String },
    /// A glob of `--repo`/`--tag` that does not parse.
    #[error("{0}")]
    Glob(String),
    #[error("digest {digest}: algorithm {alg:?} cannot be verified (sha256 and sha512 can)")]
    UnsupportedDigest { digest: String, alg: String },
    #[error("digest {0} is malformed")]
    MalformedDigest(String),
    #[error("{what}: digest mismatch: expected {expected}, content is {actual}")]
    Digest { what: String, expected: String, actual: String },
    #[error("{what}: the registry deadline (--registry-deadline) passed before it finished")]
    Deadline { what: String },
    #[error("{what}: not found in the registry (404){detail}")]
    NotFound { what: String, detail: String },
    #[error("{what}: authentication failed, or no access ({status}; check the credentials for this registry){detail}")]
    Denied { what: String, status: StatusCode, detail: String },
    #[error("{what}: the registry answered {status}{detail}")]
    Status { what: String, status: StatusCode, detail: String },
    /// A request that failed, or a registry that broke the protocol or a bound (a size, the
    /// stall timeout, pagination, authentication): `what` names the request.
    #[error("{what}: {message}")]
    Request { what: String, message: String },
}

impl RegistryError {
    pub fn request(what: impl Into<String>, message: impl Into<String>) -> RegistryError {
        RegistryError::Request { what: what.into(), message: message.into() }
    }

    pub fn io(path: impl AsRef<std::path::Path>, source: std::io::Error) -> RegistryError {
        RegistryError::Io { path: path.as_ref().display().to_string(), source }
    }
}
