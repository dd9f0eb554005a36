//! Talking to one registry for one repository: connecting (TLS, the loopback HTTP fallback,
//! authentication through `auth`), GETs retried and bounded, manifests, small blobs,
//! listings, referrers. Blob streams are in `blob`, writes in `push`.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use oci_client::Reference;
use reqwest::{StatusCode, Url};

use super::RegistryError;
use super::auth::{Auth, Transport, credentials};
use super::http::{self, Failure, Limits};
use super::media::{self, MediaType};
use super::options::RegistryOptions;
use crate::digest::{self, MAX_JSON};
use crate::escape::text as esc;

/// The most a manifest or index may be (the distribution spec's registries refuse larger).
pub const MAX_MANIFEST: u64 = 4 << 20;
/// Manifests and configs one scan may read (an index may list the same digest many times, and
/// indexes may nest: a bound, not a depth, is what keeps the fan-out finite).
pub const MAX_MANIFEST_READS: usize = 1024;

/// `docker://` stripped; Docker Hub short names completed by oci-client's rules; a digest is
/// refused unless cudalint can check it.
pub fn parse_reference(spec: &str) -> Result<Reference, RegistryError> {
    let s = spec.strip_prefix("docker://").unwrap_or(spec);
    let r = Reference::try_from(s).map_err(|e| RegistryError::Reference { spec: esc(spec), message: e.to_string() })?;
    if let Some(d) = r.digest() {
        digest::parse(d)?;
    }
    Ok(r)
}

pub use super::http::is_loopback;

/// The part of a connection shared with download tasks.
pub(super) struct Inner {
    pub http: reqwest::Client,
    /// `scheme://host[:port]/`
    pub base: Url,
    pub auth: Auth,
    pub limits: Limits,
    pub retries: u32,
    pub retry_unreachable: bool,
    pub downloaded: Arc<AtomicU64>,
    pub requests: Arc<AtomicU64>,
}

pub(super) fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(200u64.saturating_mul(1 << attempt.min(6)))
}

impl Inner {
    pub fn url(&self, path: &str) -> Url {
        self.base.join(path).expect("registry paths are valid URLs")
    }

    fn transport(&self) -> Transport<'_> {
        Transport { http: &self.http, base: &self.base, limits: self.limits, requests: &self.requests }
    }

    /// Asks the registry how to authenticate (again: after a 401) and keeps what it accepts.
    pub async fn renew(&self) -> Result<(), Failure> {
        self.auth.renew(&self.transport()).await
    }

    /// A GET on the registry with its authorization, retried on 429/5xx and dropped
    /// connections; a 401 renews the token once. Non-success statuses become errors.
    pub async fn fetch(
        &self,
        url: Url,
        accept: Option<&str>,
        from: Option<u64>,
        what: &str,
    ) -> Result<reqwest::Response, Failure> {
        let mut attempt = 0;
        let mut renewed = false;
        loop {
            let auth = self.auth.current();
            self.requests.fetch_add(1, Ordering::Relaxed);
            let r = http::send(http::get(&self.http, url.clone(), accept, auth.as_deref(), from), self.limits, what, 0)
                .await;
            let retry = match r {
                Ok(res) if res.status().is_success() => return Ok(res),
                Ok(res) if res.status() == StatusCode::UNAUTHORIZED && !renewed => {
                    renewed = true;
                    self.renew().await?;
                    continue;
                }
                Ok(res) if res.status() == StatusCode::TOO_MANY_REQUESTS || res.status().is_server_error() => {
                    Failure { error: http::status_error(res, self.limits, what).await, transport: true }
                }
                Ok(res) => {
                    return Err(Failure { error: http::status_error(res, self.limits, what).await, transport: false });
                }
                Err(f) => {
                    if !f.transport || !self.retry_unreachable || Instant::now() >= self.limits.deadline {
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

/// A connection to one registry for one repository.
pub struct Remote {
    pub(super) rt: tokio::runtime::Runtime,
    pub(super) inner: Arc<Inner>,
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
        let auth = Auth::new(host.clone(), credentials(&host, o), o.allow_auth_hosts.clone(), scope);
        let mut inner = Inner {
            http: http_client(o)?,
            base,
            auth,
            limits: Limits { stall: o.stall_timeout, deadline, peer: "registry" },
            retries: o.retries,
            retry_unreachable: o.retry_unreachable,
            downloaded: downloaded.clone(),
            requests: requests.clone(),
        };
        // A loopback registry may speak plain HTTP: try TLS first, then fall back (as Docker
        // does). Loopback is an address (or `localhost`), never a name that looks like one.
        match rt.block_on(inner.renew()) {
            Ok(()) => {}
            Err(f) if f.transport && scheme == "https" && is_loopback(&host) => {
                inner.base.set_scheme("http").expect("http scheme");
                rt.block_on(inner.renew()).map_err(|f| f.error)?
            }
            Err(f) => return Err(f.error),
        }
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
        let accept = media::manifest_accept();
        if let Some(want) = reference.digest() {
            digest::parse(want)?;
        }
        let (bytes, _) = self.rt.block_on(self.inner.small(url, Some(&accept), MAX_MANIFEST, &what))?;
        let digest = match reference.digest() {
            Some(want) => {
                digest::verify(&what, want, &bytes)?;
                want.to_string()
            }
            None => digest::sha256(&bytes),
        };
        Ok((bytes, digest))
    }

    /// A small blob (an image config) read whole, bounded, and verified.
    pub fn small_blob(&self, digest: &str) -> Result<Vec<u8>, RegistryError> {
        self.small_blob_bounded(digest, MAX_JSON)
    }

    /// A blob of at most `limit` bytes read whole and verified.
    pub fn small_blob_bounded(&self, digest: &str, limit: u64) -> Result<Vec<u8>, RegistryError> {
        digest::parse(digest)?;
        let what = format!("blob {}", esc(digest));
        let url = self.inner.url(&format!("/v2/{}/blobs/{digest}", self.reference.repository()));
        let (v, _) = self.rt.block_on(self.inner.small(url, None, limit, &what))?;
        digest::verify(&what, digest, &v)?;
        Ok(v)
    }

    /// The referrers index of `digest` in `repo` (the referrers API), filtered by
    /// `artifact_type`: bounded like a manifest.
    pub fn referrers(&self, repo: &str, digest: &str, artifact_type: &str) -> Result<Vec<u8>, RegistryError> {
        let what = format!("referrers of {}", esc(digest));
        let mut url = self.inner.url(&format!("/v2/{repo}/referrers/{digest}"));
        url.query_pairs_mut().append_pair("artifactType", artifact_type);
        let index = MediaType::ImageIndex.to_string();
        let (b, _) = self.rt.block_on(self.inner.small(url, Some(&index), MAX_MANIFEST, &what))?;
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
}
