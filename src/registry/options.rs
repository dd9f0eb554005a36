//! What a registry connection may do and cost: credentials given on the command line, hosts
//! reached over plain HTTP or trusted with credentials, CA certificates, timeouts, retries.

use std::path::PathBuf;
use std::time::Duration;

#[derive(Clone)]
pub struct RegistryOptions {
    /// Explicit credentials (`--username`, `--password-stdin`): for the image's registry only.
    pub username: Option<String>,
    pub password: Option<String>,
    /// Hosts (`host[:port]`) that may be reached over plain HTTP.
    pub insecure: Vec<String>,
    /// Hosts a registry's token realm may be on to receive credentials (over HTTPS), besides
    /// the registry's own host (`--allow-auth-host`).
    pub allow_auth_hosts: Vec<String>,
    /// Extra CA certificates (PEM) trusted besides the system's.
    pub ca_certs: Vec<PathBuf>,
    pub connect_timeout: Duration,
    /// A response that delivers fewer than `http::STALL_BYTES` in this long has stalled.
    pub stall_timeout: Duration,
    /// All requests of one image (or one listing) end by then.
    pub deadline: Duration,
    /// Attempts after the first for a request that failed with 429, 5xx or a dropped connection.
    pub retries: u32,
    /// Whether a request that could not reach the registry (no connection, a stall) is tried
    /// again too, or fails at once (an analysis store: noticed once, then bypassed).
    pub retry_unreachable: bool,
}

// Credentials are never printed.
impl std::fmt::Debug for RegistryOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryOptions")
            .field("username", &self.username.as_ref().map(|_| "<set>"))
            .field("password", &self.password.as_ref().map(|_| "<set>"))
            .field("insecure", &self.insecure)
            .field("allow_auth_hosts", &self.allow_auth_hosts)
            .field("ca_certs", &self.ca_certs)
            .finish_non_exhaustive()
    }
}

impl Default for RegistryOptions {
    fn default() -> Self {
        RegistryOptions {
            username: None,
            password: None,
            insecure: Vec::new(),
            allow_auth_hosts: Vec::new(),
            ca_certs: Vec::new(),
            connect_timeout: Duration::from_secs(10),
            stall_timeout: Duration::from_secs(60),
            deadline: Duration::from_secs(3600),
            retries: 3,
            retry_unreachable: true,
        }
    }
}
