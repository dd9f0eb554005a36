//! Talking to one registry: authentication, manifests, blobs (streamed, resumed, bounded),
//! listings, referrers.

use std::collections::HashSet;
use std::io::{self, Read};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use oci_client::Reference;
use reqwest::{StatusCode, Url};
use sha2::{Digest as _, Sha256, Sha512};

mod push;

use super::RegistryError;
use super::http::{self, Body, BodyError, Challenge, Limits};
use crate::escape::text as esc;

const MANIFEST_TYPES: &[&str] = &[
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.docker.distribution.manifest.v2+json",
];

/// The most a manifest or index may be (the distribution spec's registries refuse larger).
pub const MAX_MANIFEST: u64 = 4 << 20;
/// The most a config or a listing page may be (the bound image sources put on JSON documents).
pub const MAX_JSON: u64 = 16 << 20;
/// Manifests and configs one scan may read (an index may list the same digest many times, and
/// indexes may nest: a bound, not a depth, is what keeps the fan-out finite).
pub const MAX_MANIFEST_READS: usize = 1024;

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
        }
    }
}

/// `docker://` stripped; Docker Hub short names completed by oci-client's rules.
pub fn parse_reference(spec: &str) -> Result<Reference, RegistryError> {
    let s = spec.strip_prefix("docker://").unwrap_or(spec);
    let r = Reference::try_from(s).map_err(|e| RegistryError::Reference { spec: esc(spec), message: e.to_string() })?;
    if let Some(d) = r.digest() {
        Algo::of(d)?;
    }
    Ok(r)
}

pub use super::http::is_loopback;

fn env_nonempty(k: &str) -> Option<String> {
    std::env::var(k).ok().filter(|v| !v.is_empty())
}

/// What we may present to a registry.
#[derive(Clone)]
pub enum Credentials {
    Anonymous,
    Basic(String, String),
    /// An identity token from Docker's config: sent as a bearer token to the registry itself.
    Token(String),
}

/// Credentials for `host`, in order: the command line (only for the image's own registry), the
/// environment (`CUDALINT_REGISTRY_USERNAME`/`_PASSWORD`, limited to `CUDALINT_REGISTRY_HOST`
/// when set), Docker's config.json and credential helpers, else anonymous.
pub fn credentials(host: &str, image_host: &str, o: &RegistryOptions) -> Credentials {
    if host == image_host
        && let (Some(u), Some(p)) = (&o.username, &o.password)
    {
        return Credentials::Basic(u.clone(), p.clone());
    }
    if let (Some(u), Some(p)) = (env_nonempty("CUDALINT_REGISTRY_USERNAME"), env_nonempty("CUDALINT_REGISTRY_PASSWORD"))
        && env_nonempty("CUDALINT_REGISTRY_HOST").is_none_or(|h| h == host)
    {
        return Credentials::Basic(u, p);
    }
    let keys: Vec<&str> = if host == "index.docker.io" || host == "docker.io" || host == "registry-1.docker.io" {
        vec!["https://index.docker.io/v1/", "index.docker.io", "docker.io"]
    } else {
        vec![host]
    };
    for k in keys {
        match docker_credential::get_credential(k) {
            Ok(docker_credential::DockerCredential::UsernamePassword(u, p)) => return Credentials::Basic(u, p),
            Ok(docker_credential::DockerCredential::IdentityToken(t)) => return Credentials::Token(t),
            Err(_) => {}
        }
    }
    Credentials::Anonymous
}

/// Digest algorithms a pull can verify; any other is refused (a digest we cannot check is not
/// a digest).
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Algo {
    Sha256,
    Sha512,
}

impl Algo {
    /// The algorithm of `digest`, which must be well formed (it becomes part of a URL).
    pub fn of(digest: &str) -> Result<Algo, RegistryError> {
        let (alg, hex) = digest.split_once(':').unwrap_or(("", digest));
        let (a, len) = match alg {
            "sha256" => (Algo::Sha256, 64),
            "sha512" => (Algo::Sha512, 128),
            _ => return Err(RegistryError::UnsupportedDigest { digest: esc(digest), alg: esc(alg) }),
        };
        if hex.len() != len || !hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
            return Err(RegistryError::MalformedDigest(esc(digest)));
        }
        Ok(a)
    }

    pub fn digest(self, b: &[u8]) -> String {
        match self {
            Algo::Sha256 => format!("sha256:{}", hex::encode(Sha256::digest(b))),
            Algo::Sha512 => format!("sha512:{}", hex::encode(Sha512::digest(b))),
        }
    }
}

/// Checks `bytes` against `digest` (sha256 or sha512).
pub fn verify(what: &str, digest: &str, bytes: &[u8]) -> Result<(), RegistryError> {
    let actual = Algo::of(digest)?.digest(bytes);
    if actual != digest {
        return Err(RegistryError::Digest { what: what.to_string(), expected: digest.to_string(), actual });
    }
    Ok(())
}

/// The part of a connection shared with download tasks.
struct Inner {
    http: reqwest::Client,
    /// `scheme://host[:port]/`
    base: Url,
    registry: String,
    creds: Credentials,
    allow_auth_hosts: Vec<String>,
    /// The token scope this connection asks for.
    scope: String,
    /// The `Authorization` value the registry accepted (a bearer token or Basic).
    authorization: Mutex<Option<String>>,
    limits: Limits,
    retries: u32,
    downloaded: Arc<AtomicU64>,
    requests: Arc<AtomicU64>,
}

/// A request that failed: whether it is worth another try (or, on loopback, plain HTTP).
struct Failure {
    error: RegistryError,
    transport: bool,
}

fn transport_failure(what: &str, e: &reqwest::Error, deadline: Instant) -> Failure {
    if Instant::now() >= deadline {
        return Failure { error: http::deadline_error(what), transport: false };
    }
    let msg = if e.is_timeout() { "timed out".to_string() } else { esc(&http::error_chain(e)) };
    Failure {
        error: RegistryError::request(what, msg),
        transport: e.is_connect() || e.is_request() || e.is_timeout() || e.is_body(),
    }
}

fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(200u64.saturating_mul(1 << attempt.min(6)))
}

impl Inner {
    fn url(&self, path: &str) -> Url {
        self.base.join(path).expect("registry paths are valid URLs")
    }

    /// Asks `/v2/` how to authenticate and gets the `Authorization` value: none, Basic (to the
    /// registry itself) or a bearer token from the realm, which receives credentials only when
    /// `http::realm_allowed` says so.
    async fn authenticate(&self) -> Result<Option<String>, Failure> {
        let what = format!("registry {}", esc(&self.registry));
        self.requests.fetch_add(1, Ordering::Relaxed);
        let res = http::send(http::get(&self.http, self.url("/v2/"), None, None, None), self.limits, &what)
            .await
            .map_err(|e| transport_failure(&what, &e, self.limits.deadline))?;
        if res.status().is_success() {
            return Ok(None);
        }
        if res.status() != StatusCode::UNAUTHORIZED {
            let error = http::status_error(res, self.limits, &what).await;
            return Err(Failure { error, transport: false });
        }
        let fail = |m: String| Failure { error: RegistryError::request(&what, m), transport: false };
        let Some(ch) = http::www_authenticate(&res) else {
            return Err(fail("asks for authentication without saying how (no WWW-Authenticate)".into()));
        };
        if ch.scheme == "basic" {
            return match &self.creds {
                Credentials::Basic(u, p) => Ok(Some(basic(&self.http, &self.base, u, p))),
                Credentials::Token(t) => Ok(Some(format!("Bearer {t}"))),
                Credentials::Anonymous => {
                    Err(fail("needs credentials (--username/--password-stdin or docker login)".into()))
                }
            };
        }
        if let Credentials::Token(t) = &self.creds {
            return Ok(Some(format!("Bearer {t}")));
        }
        self.token(&ch, &what).await.map(Some).map_err(fail)
    }

    async fn token(&self, ch: &Challenge, what: &str) -> Result<String, String> {
        let realm = ch.get("realm").ok_or("the bearer challenge names no realm")?;
        let mut url = Url::parse(realm).map_err(|e| format!("token realm {}: {e}", esc(realm)))?;
        if !matches!(url.scheme(), "https" | "http") {
            return Err(format!("token realm {} is not HTTP(S)", esc(realm)));
        }
        let send_creds = match &self.creds {
            Credentials::Basic(..) => {
                http::realm_allowed(&url, &self.registry, self.base.scheme(), &self.allow_auth_hosts)?;
                true
            }
            _ => false,
        };
        {
            let mut q = url.query_pairs_mut();
            if let Some(s) = ch.get("service") {
                q.append_pair("service", s);
            }
            q.append_pair("scope", &self.scope);
        }
        let mut req = http::get(&self.http, url, None, None, None);
        if let (true, Credentials::Basic(u, p)) = (send_creds, &self.creds) {
            req = req.basic_auth(u, Some(p));
        }
        self.requests.fetch_add(1, Ordering::Relaxed);
        let twhat = format!("{what} token");
        let res = http::send(req, self.limits, &twhat)
            .await
            .map_err(|e| transport_failure(&twhat, &e, self.limits.deadline).error.to_string())?;
        if !res.status().is_success() {
            return Err(http::status_error(res, self.limits, &twhat).await.to_string());
        }
        let body = http::read_all(res, 64 << 10, self.limits, &twhat).await.map_err(|e| e.to_string())?;
        let v: serde_json::Value = serde_json::from_slice(&body).map_err(|e| format!("token response: {e}"))?;
        let t = v
            .get("token")
            .or_else(|| v.get("access_token"))
            .and_then(|t| t.as_str())
            .filter(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_graphic()))
            .ok_or("the token response holds no usable token")?;
        Ok(format!("Bearer {t}"))
    }

    /// A GET on the registry with its authorization, retried on 429/5xx and dropped
    /// connections; a 401 renews the token once. Non-success statuses become errors.
    async fn fetch(
        &self,
        url: Url,
        accept: Option<&str>,
        from: Option<u64>,
        what: &str,
    ) -> Result<reqwest::Response, Failure> {
        let mut attempt = 0;
        let mut renewed = false;
        loop {
            let auth = self.authorization.lock().expect("auth lock").clone();
            self.requests.fetch_add(1, Ordering::Relaxed);
            let r =
                http::send(http::get(&self.http, url.clone(), accept, auth.as_deref(), from), self.limits, what).await;
            let retry = match r {
                Ok(res) if res.status().is_success() => return Ok(res),
                Ok(res) if res.status() == StatusCode::UNAUTHORIZED && !renewed => {
                    renewed = true;
                    let a = self.authenticate().await?;
                    *self.authorization.lock().expect("auth lock") = a;
                    continue;
                }
                Ok(res) if res.status() == StatusCode::TOO_MANY_REQUESTS || res.status().is_server_error() => {
                    Failure { error: http::status_error(res, self.limits, what).await, transport: true }
                }
                Ok(res) => {
                    return Err(Failure { error: http::status_error(res, self.limits, what).await, transport: false });
                }
                Err(e) => {
                    let f = transport_failure(what, &e, self.limits.deadline);
                    if !f.transport || Instant::now() >= self.limits.deadline {
                        return Err(f);
                    }
                    f
                }
            };
            if attempt >= self.retries {
                return Err(retry);
            }
            tokio::time::sleep(backoff(attempt)).await;
            attempt += 1;
        }
    }

    /// A small document, whole and bounded.
    async fn small(
        &self,
        url: Url,
        accept: Option<&str>,
        limit: u64,
        what: &str,
    ) -> Result<(Vec<u8>, Option<Url>), RegistryError> {
        let res = self.fetch(url.clone(), accept, None, what).await.map_err(|f| f.error)?;
        let next = http::next_link(&res, &url).map_err(|m| RegistryError::request(what, m))?;
        Ok((http::read_all(res, limit, self.limits, what).await?, next))
    }
}

/// The `Authorization: Basic` value (through reqwest, which encodes it).
fn basic(client: &reqwest::Client, base: &Url, u: &str, p: &str) -> String {
    client
        .get(base.clone())
        .basic_auth(u, Some(p))
        .build()
        .ok()
        .and_then(|r| r.headers().get(reqwest::header::AUTHORIZATION).and_then(|v| v.to_str().ok()).map(str::to_string))
        .unwrap_or_default()
}

/// A connection to one registry for one repository.
pub struct Remote {
    rt: tokio::runtime::Runtime,
    inner: Arc<Inner>,
    pub reference: Reference,
    /// Layer bytes received (statistics; tests and benchmarks count on it).
    pub downloaded: Arc<AtomicU64>,
    pub requests: Arc<AtomicU64>,
}

fn http_client(o: &RegistryOptions) -> Result<reqwest::Client, RegistryError> {
    let mut certs = Vec::new();
    for p in &o.ca_certs {
        let data = std::fs::read(p).map_err(|e| RegistryError::io(p, e))?;
        certs.push(
            reqwest::Certificate::from_pem(&data)
                .map_err(|e| RegistryError::Certificate { path: p.display().to_string(), message: e.to_string() })?,
        );
    }
    reqwest::Client::builder()
        .tls_certs_merge(certs)
        .connect_timeout(o.connect_timeout)
        .user_agent(concat!("cudalint/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| RegistryError::request("HTTP client", e.to_string()))
}

impl Remote {
    pub fn connect(reference: Reference, o: &RegistryOptions) -> Result<Remote, RegistryError> {
        let scope = format!("repository:{}:pull", reference.repository());
        Remote::connect_scoped(reference, o, scope, Instant::now() + o.deadline)
    }

    /// A connection asking for token `scope`; every request ends by `deadline`.
    pub fn connect_scoped(
        reference: Reference,
        o: &RegistryOptions,
        scope: String,
        deadline: Instant,
    ) -> Result<Remote, RegistryError> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| RegistryError::io("tokio runtime", e))?;
        let host = reference.resolve_registry().to_string();
        let scheme = if o.insecure.contains(&host) { "http" } else { "https" };
        let base = Url::parse(&format!("{scheme}://{host}/"))
            .map_err(|e| RegistryError::request(format!("registry {}", esc(&host)), e.to_string()))?;
        let downloaded = Arc::new(AtomicU64::new(0));
        let requests = Arc::new(AtomicU64::new(0));
        let mut inner = Inner {
            http: http_client(o)?,
            base,
            registry: host.clone(),
            creds: credentials(&host, &host, o),
            allow_auth_hosts: o.allow_auth_hosts.clone(),
            scope,
            authorization: Mutex::new(None),
            limits: Limits { stall: o.stall_timeout, deadline },
            retries: o.retries,
            downloaded: downloaded.clone(),
            requests: requests.clone(),
        };
        // A loopback registry may speak plain HTTP: try TLS first, then fall back (as Docker
        // does). Loopback is an address (or `localhost`), never a name that looks like one.
        let auth = match rt.block_on(inner.authenticate()) {
            Ok(a) => a,
            Err(f) if f.transport && scheme == "https" && is_loopback(&host) => {
                inner.base.set_scheme("http").expect("http scheme");
                rt.block_on(inner.authenticate()).map_err(|f| f.error)?
            }
            Err(f) => return Err(f.error),
        };
        *inner.authorization.lock().expect("auth lock") = auth;
        Ok(Remote { rt, inner: Arc::new(inner), reference, downloaded, requests })
    }

    /// A manifest or index by tag or digest: its bytes and their digest (by the reference's
    /// algorithm, else sha256).
    pub fn manifest(&self, reference: &Reference) -> Result<(Vec<u8>, String), RegistryError> {
        let what = format!("manifest {}", esc(&reference.whole()));
        let tail = reference
            .digest()
            .map(str::to_string)
            .or_else(|| reference.tag().map(str::to_string))
            .unwrap_or_else(|| "latest".into());
        let url = self.inner.url(&format!("/v2/{}/manifests/{}", reference.repository(), tail));
        let accept = MANIFEST_TYPES.join(", ");
        let (bytes, _) = self.rt.block_on(self.inner.small(url, Some(&accept), MAX_MANIFEST, &what))?;
        let digest = match reference.digest() {
            Some(want) => {
                verify(&what, want, &bytes)?;
                want.to_string()
            }
            None => Algo::Sha256.digest(&bytes),
        };
        Ok((bytes, digest))
    }

    /// A small blob (an image config) read whole, bounded, and verified.
    pub fn small_blob(&self, digest: &str) -> Result<Vec<u8>, RegistryError> {
        self.small_blob_bounded(digest, MAX_JSON)
    }

    /// A blob of at most `limit` bytes read whole and verified.
    pub fn small_blob_bounded(&self, digest: &str, limit: u64) -> Result<Vec<u8>, RegistryError> {
        Algo::of(digest)?;
        let what = format!("blob {}", esc(digest));
        let url = self.inner.url(&format!("/v2/{}/blobs/{digest}", self.reference.repository()));
        let (v, _) = self.rt.block_on(self.inner.small(url, None, limit, &what))?;
        verify(&what, digest, &v)?;
        Ok(v)
    }

    /// The referrers index of `digest` in `repo` (the referrers API), filtered by
    /// `artifact_type`: bounded like a manifest.
    pub fn referrers(&self, repo: &str, digest: &str, artifact_type: &str) -> Result<Vec<u8>, RegistryError> {
        let what = format!("referrers of {}", esc(digest));
        let mut url = self.inner.url(&format!("/v2/{repo}/referrers/{digest}"));
        url.query_pairs_mut().append_pair("artifactType", artifact_type);
        let index = "application/vnd.oci.image.index.v1+json";
        let (b, _) = self.rt.block_on(self.inner.small(url, Some(index), MAX_MANIFEST, &what))?;
        Ok(b)
    }

    /// Every entry of a paginated listing (`/v2/_catalog`, `/v2/<repo>/tags/list`), following
    /// `Link` headers (or `last=`): a page that adds nothing new, or a next page already
    /// visited, is an error, never an endless loop.
    pub fn listing(&self, path: &str, key: &str, what: &str) -> Result<Vec<String>, RegistryError> {
        const PAGE: usize = 1000;
        const MAX_PAGES: usize = 100_000;
        let mut url = self.inner.url(path);
        url.query_pairs_mut().append_pair("n", &PAGE.to_string());
        let mut seen_urls = HashSet::new();
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        loop {
            if !seen_urls.insert(url.clone()) || seen_urls.len() > MAX_PAGES {
                return Err(RegistryError::request(
                    what,
                    format!("pagination loops (page {} requested again)", esc(url.as_str())),
                ));
            }
            let (body, next) = self.rt.block_on(self.inner.small(url.clone(), None, MAX_JSON, what))?;
            let v: serde_json::Value = serde_json::from_slice(&body)
                .map_err(|e| RegistryError::request(what, format!("not a listing: {e}")))?;
            let page: Vec<String> = match v.get(key) {
                None | Some(serde_json::Value::Null) => Vec::new(),
                Some(a) => serde_json::from_value(a.clone())
                    .map_err(|e| RegistryError::request(what, format!("not a listing: {e}")))?,
            };
            let n = page.len();
            let last = page.last().cloned();
            let mut fresh = 0;
            for p in page {
                if seen.insert(p.clone()) {
                    fresh += 1;
                    out.push(p);
                }
            }
            let next = match (next, last) {
                (Some(n), _) => Some(n),
                // No Link header: a full page may have more after it.
                (None, Some(l)) if n >= PAGE => {
                    let mut u = self.inner.url(path);
                    u.query_pairs_mut().append_pair("n", &PAGE.to_string()).append_pair("last", &l);
                    Some(u)
                }
                _ => None,
            };
            let Some(next) = next else { return Ok(out) };
            if fresh == 0 {
                return Err(RegistryError::request(
                    what,
                    "pagination makes no progress (a page with nothing new points to another)",
                ));
            }
            url = next;
        }
    }

    /// A blob as a byte stream, downloaded while it is read: never more than `size` bytes (its
    /// descriptor's), a dropped connection resumed where it stopped (range request), 429/5xx
    /// retried with backoff. sha256 is checked by the caller (the layer walker hashes as it
    /// reads); any other algorithm is checked here, the mismatch an error at the end.
    pub fn blob(&self, digest: &str, size: Option<u64>) -> Result<BlobReader, RegistryError> {
        let algo = Algo::of(digest)?;
        let (tx, rx) = tokio::sync::mpsc::channel::<io::Result<bytes::Bytes>>(16);
        let inner = self.inner.clone();
        let digest = digest.to_string();
        let url = inner.url(&format!("/v2/{}/blobs/{digest}", self.reference.repository()));
        let limit = size.unwrap_or(u64::MAX);
        self.rt.spawn(async move {
            let what = format!("blob {digest}");
            let mut hasher = (algo == Algo::Sha512).then(Sha512::new);
            let mut got: u64 = 0;
            let mut attempt = 0;
            let fail = |m: String| io::Error::other(m);
            loop {
                let from = (got > 0).then_some(got);
                let failure = match inner.fetch(url.clone(), None, from, &what).await {
                    Ok(res) if from.is_some() && res.status() != StatusCode::PARTIAL_CONTENT => {
                        let _ = tx
                            .send(Err(fail("connection dropped and the registry does not resume downloads".into())))
                            .await;
                        return;
                    }
                    Ok(res) => {
                        let mut body = match Body::new(res, limit - got, inner.limits, &what) {
                            Ok(b) => b,
                            Err(e) => {
                                let _ = tx.send(Err(fail(e.to_string()))).await;
                                return;
                            }
                        };
                        let mut err = None;
                        loop {
                            match body.chunk().await {
                                Ok(Some(b)) => {
                                    got += b.len() as u64;
                                    inner.downloaded.fetch_add(b.len() as u64, Ordering::Relaxed);
                                    if let Some(h) = hasher.as_mut() {
                                        h.update(&b);
                                    }
                                    let t = Instant::now();
                                    if tx.send(Ok(b)).await.is_err() {
                                        return;
                                    }
                                    body.paused(t.elapsed());
                                }
                                Ok(None) => break,
                                Err(e) => {
                                    err = Some(e);
                                    break;
                                }
                            }
                        }
                        match err {
                            None => {
                                if let Some(h) = hasher {
                                    let actual = format!("sha512:{}", hex::encode(h.finalize()));
                                    if actual != digest {
                                        let _ = tx
                                            .send(Err(fail(format!(
                                                "digest mismatch: expected {digest}, content is {actual}"
                                            ))))
                                            .await;
                                    }
                                }
                                return;
                            }
                            Some(BodyError::Fatal(e)) => {
                                let _ = tx.send(Err(fail(e.to_string()))).await;
                                return;
                            }
                            Some(BodyError::Transport(m)) => m,
                        }
                    }
                    Err(f) if !f.transport => {
                        let _ = tx.send(Err(fail(f.error.to_string()))).await;
                        return;
                    }
                    Err(f) => f.error.to_string(),
                };
                if attempt >= inner.retries || Instant::now() >= inner.limits.deadline {
                    let _ =
                        tx.send(Err(fail(format!("download failed after {} attempts: {failure}", attempt + 1)))).await;
                    return;
                }
                tokio::time::sleep(backoff(attempt)).await;
                attempt += 1;
            }
        });
        Ok(BlobReader { rx, cur: bytes::Bytes::new() })
    }
}

pub struct BlobReader {
    rx: tokio::sync::mpsc::Receiver<io::Result<bytes::Bytes>>,
    cur: bytes::Bytes,
}

impl Read for BlobReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.cur.is_empty() {
            match self.rx.blocking_recv() {
                Some(Ok(b)) => self.cur = b,
                Some(Err(e)) => return Err(e),
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.cur.len());
        buf[..n].copy_from_slice(&self.cur[..n]);
        let _ = self.cur.split_to(n);
        Ok(n)
    }
}
