//! What a registry connection may do and cost: credentials given on the command line, hosts
//! reached over plain HTTP or trusted with credentials, CA certificates, timeouts, retries.

use std::path::PathBuf;
use std::time::Duration;

#[derive(Clone)]
pub struct RegistryOptions {
    /// Explicit credentials (`--username`, `--password-stdin`): for the registry
    /// `credentials_for` says, nowhere else.
    pub username: Option<String>,
    pub password: Option<String>,
    /// The one registry (`host[:port]`, `--registry-credentials`) the explicit pair, or an
    /// unscoped `CUDALINT_REGISTRY_USERNAME`/`_PASSWORD`, may go to. None: the registry of the
    /// image being read (its pulls, its attestation pushes, the listing `cudalint registry`
    /// makes), if `credentials_to_image_registry`; never the analysis store.
    pub credentials_host: Option<String>,
    /// False where the images are named by an input, not the user (`audit`): without
    /// `credentials_host` the pair then goes nowhere.
    pub credentials_to_image_registry: bool,
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
            .field("credentials_host", &self.credentials_host)
            .field("credentials_to_image_registry", &self.credentials_to_image_registry)
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
            credentials_host: None,
            credentials_to_image_registry: true,
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

/// Whether two `host[:port]` name the same registry: case aside, and Docker Hub by any of its
/// names.
pub fn same_host(a: &str, b: &str) -> bool {
    fn canonical(h: &str) -> String {
        let h = h.trim().trim_end_matches('/').to_ascii_lowercase();
        match h.as_str() {
            "docker.io" | "index.docker.io" | "registry-1.docker.io" => "docker.io".into(),
            _ => h,
        }
    }
    canonical(a) == canonical(b)
}

impl RegistryOptions {
    /// Whether a connection to `host` may carry the explicit pair (or an unscoped environment
    /// pair): to the named host only, where one is named; else to the image's registry. A
    /// password given for one registry must never reach another.
    pub fn credentials_go_to(&self, host: &str) -> bool {
        match &self.credentials_host {
            Some(h) => same_host(h, host),
            None => self.credentials_to_image_registry,
        }
    }

    /// The options for a connection that is not to an image's registry (the analysis store):
    /// the pair goes along only where `--registry-credentials` named that host.
    pub fn not_for_an_image(&self) -> RegistryOptions {
        RegistryOptions { credentials_to_image_registry: false, ..self.clone() }
    }

    /// The options for images named by an input rather than the user (`audit`'s manifests):
    /// the pair goes only to a host `--registry-credentials` named. An explicit pair without one
    /// is an error, not a password sent to whichever registry a manifest names.
    pub fn images_named_by_input(&mut self, what: &str) -> Result<(), String> {
        if self.credentials_host.is_none() && self.username.is_some() {
            return Err(format!(
                "--username: {what} names the images, so name the registry the credentials are for with \
                 --registry-credentials HOST"
            ));
        }
        self.credentials_to_image_registry = false;
        Ok(())
    }
}
