//! What can go wrong talking to a registry. Every string a registry chose is escaped before it
//! is put in one of these (`crate::escape::text`); the texts are what users and tests see.

use reqwest::StatusCode;

use crate::digest::DigestError;

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
    /// A digest refused (an algorithm cudalint cannot compute, malformed) or not matching.
    #[error(transparent)]
    Digest(#[from] DigestError),
    #[error("{what}: the registry deadline (--registry-deadline) passed before it finished")]
    Deadline { what: String },
    #[error("{what}: not found in the registry (404){detail}")]
    NotFound { what: String, detail: String },
    #[error("{what}: authentication failed, or no access ({status}; check the credentials for this registry){detail}")]
    Denied { what: String, status: StatusCode, detail: String },
    /// No bearer token from the registry's token realm, and why.
    #[error("{what}: {reason}")]
    Token { what: String, reason: TokenError },
    #[error("{what}: the registry answered {status}{detail}")]
    Status { what: String, status: StatusCode, detail: String },
    /// A request that failed, or a registry that broke the protocol or a bound (a size,
    /// pagination, authentication): `what` names the request.
    #[error("{what}: {message}")]
    Request { what: String, message: String },
    /// The registry could not be reached or stopped answering: no connection, a dropped one,
    /// a timeout, a stall (fewer than `http::STALL_BYTES` in the stall window, or no answer at
    /// all). What an analysis store that went away fails with.
    #[error("{what}: {message}")]
    Unreachable { what: String, message: String },
}

impl RegistryError {
    pub fn request(what: impl Into<String>, message: impl Into<String>) -> RegistryError {
        RegistryError::Request { what: what.into(), message: message.into() }
    }

    pub fn io(path: impl AsRef<std::path::Path>, source: std::io::Error) -> RegistryError {
        RegistryError::Io { path: path.as_ref().display().to_string(), source }
    }

    /// The registry is gone as a whole, not failing this one request: unreachable, past the
    /// deadline, or a gateway in front of it saying it is (502, 503, 504). A 500 or 429 is one
    /// request's: distribution answers 500 to a read racing a write of the same tag.
    pub fn is_unreachable(&self) -> bool {
        match self {
            RegistryError::Unreachable { .. } | RegistryError::Deadline { .. } => true,
            RegistryError::Status { status, .. } => matches!(
                *status,
                StatusCode::BAD_GATEWAY | StatusCode::SERVICE_UNAVAILABLE | StatusCode::GATEWAY_TIMEOUT
            ),
            _ => false,
        }
    }
}

/// Why no bearer token was had from a challenge's realm.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("the bearer challenge names no realm")]
    NoRealm,
    #[error("token realm {realm}: {message}")]
    BadRealm { realm: String, message: String },
    #[error("token realm {0} is not HTTP(S)")]
    NotHttp(String),
    /// The realm may not receive our credentials.
    #[error(transparent)]
    Refused(#[from] RealmRefusal),
    /// The token request failed (transport, status, size, deadline): the request's own error.
    #[error("{0}")]
    Request(String),
    #[error("token response: {0}")]
    Response(String),
    #[error("the token response holds no usable token")]
    NoToken,
}

/// Why Basic credentials may not go to a token realm.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RealmRefusal {
    /// `https://user:pass@host/...`: the realm would receive credentials of its choosing.
    #[error("the realm URL carries credentials of its own")]
    CredentialsInUrl,
    /// On the registry's own host, but over plain HTTP while the registry is reached over HTTPS.
    #[error("the token realm {realm} is plain HTTP while the registry {registry} is reached over HTTPS")]
    Downgraded { realm: String, registry: String },
    /// On a host the user allowed, but over plain HTTP.
    #[error("realm {realm} is plain HTTP; credentials go to other hosts only over HTTPS")]
    PlainHttp { realm: String },
    /// On another host (or port) than the registry's, not allowed by `--allow-auth-host`.
    #[error(
        "the token realm {realm} is not on the registry's host {registry}; pass --allow-auth-host {host} to send credentials there"
    )]
    OtherHost { realm: String, registry: String, host: String },
}
