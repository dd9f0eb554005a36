//! Images straight from registries (OCI distribution API, through oci-client): references like
//! `registry/repo:tag`, `@sha256:...`, `docker://`, Docker Hub short names; anonymous, bearer-token
//! and basic auth with credentials from `--username`/`--password-stdin`, the environment or
//! Docker's config.json and credential helpers, each sent only to its own registry; layers
//! streamed into the layer walker, digests verified at the end, analyses cached by digest.

pub mod catalog;

use std::collections::HashMap;
use std::io::{self, Read};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures_util::StreamExt;
use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};

use crate::cache::LayerCache;
use crate::image::oci::{self, LayerRef, MAX_JSON, Platform, Store, sha256};
use crate::image::progress::Progress;
use crate::image::{AnalyzedLayer, ImageReport, ScanError, ScanOptions, assemble};

const MANIFEST_TYPES: &[&str] = &[
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.docker.distribution.manifest.v2+json",
];

#[derive(Clone)]
pub struct RegistryOptions {
    /// Explicit credentials (`--username`, `--password-stdin`): for the image's registry only.
    pub username: Option<String>,
    pub password: Option<String>,
    /// Hosts (`host[:port]`) that may be reached over plain HTTP.
    pub insecure: Vec<String>,
    /// Extra CA certificates (PEM) trusted besides the system's.
    pub ca_certs: Vec<PathBuf>,
    pub cache: Option<Arc<LayerCache>>,
    pub connect_timeout: Duration,
    pub read_timeout: Duration,
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
            ca_certs: Vec::new(),
            cache: None,
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(60),
            retries: 3,
        }
    }
}

/// `docker://` stripped; Docker Hub short names completed by oci-client's rules.
pub fn parse_reference(spec: &str) -> Result<Reference, ScanError> {
    let s = spec.strip_prefix("docker://").unwrap_or(spec);
    Reference::try_from(s).map_err(|e| ScanError::Usage(format!("{spec:?} is not an image reference: {e}")))
}

fn is_loopback(host: &str) -> bool {
    let h = host.rsplit_once(':').map_or(host, |(h, p)| if p.bytes().all(|b| b.is_ascii_digit()) { h } else { host });
    h == "localhost" || h.starts_with("127.") || h == "[::1]" || h == "::1"
}

fn env_nonempty(k: &str) -> Option<String> {
    std::env::var(k).ok().filter(|v| !v.is_empty())
}

/// Credentials for `host`, in order: the command line (only for the image's own registry), the
/// environment (`CUDALINT_REGISTRY_USERNAME`/`_PASSWORD`, limited to `CUDALINT_REGISTRY_HOST`
/// when set), Docker's config.json and credential helpers, else anonymous.
pub fn credentials(host: &str, image_host: &str, o: &RegistryOptions) -> RegistryAuth {
    if host == image_host
        && let (Some(u), Some(p)) = (&o.username, &o.password)
    {
        return RegistryAuth::Basic(u.clone(), p.clone());
    }
    if let (Some(u), Some(p)) = (env_nonempty("CUDALINT_REGISTRY_USERNAME"), env_nonempty("CUDALINT_REGISTRY_PASSWORD"))
        && env_nonempty("CUDALINT_REGISTRY_HOST").is_none_or(|h| h == host)
    {
        return RegistryAuth::Basic(u, p);
    }
    let keys: Vec<&str> = if host == "index.docker.io" || host == "docker.io" || host == "registry-1.docker.io" {
        vec!["https://index.docker.io/v1/", "index.docker.io", "docker.io"]
    } else {
        vec![host]
    };
    for k in keys {
        match docker_credential::get_credential(k) {
            Ok(docker_credential::DockerCredential::UsernamePassword(u, p)) => return RegistryAuth::Basic(u, p),
            Ok(docker_credential::DockerCredential::IdentityToken(t)) => return RegistryAuth::Bearer(t),
            Err(_) => {}
        }
    }
    RegistryAuth::Anonymous
}

/// A connection to one registry for one repository.
pub struct Remote {
    rt: tokio::runtime::Runtime,
    pub(crate) client: Arc<Client>,
    pub reference: Reference,
    pub(crate) auth: RegistryAuth,
    retries: u32,
    /// Layer bytes received (statistics; tests and benchmarks count on it).
    pub downloaded: Arc<AtomicU64>,
    pub requests: Arc<AtomicU64>,
}

fn client_config(o: &RegistryOptions, http_hosts: Vec<String>) -> Result<ClientConfig, ScanError> {
    let mut certs = Vec::new();
    for p in &o.ca_certs {
        let data = std::fs::read(p).map_err(|e| ScanError::io(p, e))?;
        certs.push(Certificate { encoding: CertificateEncoding::Pem, data });
    }
    Ok(ClientConfig {
        protocol: if http_hosts.is_empty() { ClientProtocol::Https } else { ClientProtocol::HttpsExcept(http_hosts) },
        extra_root_certificates: certs,
        // Platforms are chosen here, from the index, not by the client.
        platform_resolver: None,
        connect_timeout: Some(o.connect_timeout),
        read_timeout: Some(o.read_timeout),
        user_agent: concat!("cudalint/", env!("CARGO_PKG_VERSION")),
        ..ClientConfig::default()
    })
}

fn registry_error(what: &str, e: impl std::fmt::Display) -> ScanError {
    ScanError::Format(format!("{what}: {e}"))
}

/// Registry errors in words a user acts on (never with credentials in them).
fn describe(what: &str, e: &oci_client::errors::OciDistributionError) -> ScanError {
    use oci_client::errors::OciDistributionError as E;
    match e {
        E::UnauthorizedError { .. } | E::AuthenticationFailure(_) => ScanError::Format(format!(
            "{what}: authentication failed, or no access (check the credentials for this registry)"
        )),
        E::ImageManifestNotFoundError(_) => ScanError::Format(format!("{what}: not found in the registry")),
        E::ServerError { code: 404, .. } => ScanError::Format(format!("{what}: not found in the registry (404)")),
        other => registry_error(what, other),
    }
}

/// 429, 5xx and transport failures are worth another try; 401/403/404 are not.
fn retryable(e: &oci_client::errors::OciDistributionError) -> bool {
    use oci_client::errors::OciDistributionError as E;
    match e {
        E::RequestError(r) => {
            r.is_connect()
                || r.is_timeout()
                || r.is_request()
                || r.is_body()
                || r.status().is_some_and(|s| s.as_u16() == 429 || s.is_server_error())
        }
        E::ServerError { code, .. } => *code == 429 || *code >= 500,
        E::IoError(_) => true,
        _ => false,
    }
}

fn backoff(attempt: u32) -> Duration {
    Duration::from_millis(200u64.saturating_mul(1 << attempt.min(6)))
}

impl Remote {
    pub fn connect(reference: Reference, o: &RegistryOptions) -> Result<Remote, ScanError> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| ScanError::io("tokio runtime", e))?;
        let host = reference.resolve_registry().to_string();
        let auth = credentials(&host, &host, o);
        let mut http: Vec<String> = o.insecure.clone();
        let mut remote = Remote {
            client: Arc::new(Client::new(client_config(o, http.clone())?)),
            rt,
            reference,
            auth,
            retries: o.retries,
            downloaded: Arc::new(AtomicU64::new(0)),
            requests: Arc::new(AtomicU64::new(0)),
        };
        // A loopback registry may speak plain HTTP: try TLS first, then fall back (as Docker does).
        match remote.check_auth() {
            Ok(()) => Ok(remote),
            Err(e) if is_loopback(&host) && !http.contains(&host) && e.1 => {
                http.push(host);
                remote.client = Arc::new(Client::new(client_config(o, http)?));
                remote.check_auth().map_err(|e| e.0)?;
                Ok(remote)
            }
            Err(e) => Err(e.0),
        }
    }

    /// Authenticates for pulling (a wrong password fails here, clearly). The flag says whether
    /// the failure was the transport (worth trying plain HTTP on loopback).
    fn check_auth(&self) -> Result<(), (ScanError, bool)> {
        let host = self.reference.resolve_registry().to_string();
        self.requests.fetch_add(1, Ordering::Relaxed);
        let r = self.rt.block_on(self.client.auth(&self.reference, &self.auth, oci_client::RegistryOperation::Pull));
        match r {
            Ok(_) => Ok(()),
            Err(e) => {
                let transport = matches!(&e, oci_client::errors::OciDistributionError::RequestError(r) if r.is_connect() || r.is_request());
                let msg = match &e {
                    oci_client::errors::OciDistributionError::AuthenticationFailure(_) => {
                        format!("{host}: authentication failed (check the credentials for this registry)")
                    }
                    other => format!("{host}: {other}"),
                };
                Err((ScanError::Format(msg), transport))
            }
        }
    }

    pub(crate) fn with_retries<T, F, Fut>(&self, what: &str, f: F) -> Result<T, ScanError>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<T, oci_client::errors::OciDistributionError>>,
    {
        let mut attempt = 0;
        loop {
            self.requests.fetch_add(1, Ordering::Relaxed);
            match self.rt.block_on(f()) {
                Ok(v) => return Ok(v),
                Err(e) if attempt < self.retries && retryable(&e) => {
                    std::thread::sleep(backoff(attempt));
                    attempt += 1;
                }
                Err(e) => return Err(describe(what, &e)),
            }
        }
    }

    /// A manifest or index by tag or digest: its bytes and the digest of those bytes.
    pub fn manifest(&self, reference: &Reference) -> Result<(Vec<u8>, String), ScanError> {
        let (bytes, _) = self.with_retries(&format!("manifest {}", reference.whole()), || async {
            self.client.pull_manifest_raw(reference, &self.auth, MANIFEST_TYPES).await
        })?;
        if bytes.len() as u64 > MAX_JSON {
            return Err(ScanError::Format(format!(
                "manifest {} is {} bytes, more than a manifest can be",
                reference.whole(),
                bytes.len()
            )));
        }
        let digest = sha256(&bytes);
        if let Some(want) = reference.digest()
            && want != digest
        {
            return Err(ScanError::Digest {
                what: format!("manifest {}", reference.whole()),
                expected: want.into(),
                actual: digest,
            });
        }
        Ok((bytes.to_vec(), digest))
    }

    /// A small blob (an image config) read whole, bounded.
    pub fn small_blob(&self, digest: &str) -> Result<Vec<u8>, ScanError> {
        let mut reader = self.blob(digest)?;
        let mut v = Vec::new();
        (&mut reader)
            .take(MAX_JSON + 1)
            .read_to_end(&mut v)
            .map_err(|e| registry_error(&format!("blob {digest}"), e))?;
        if v.len() as u64 > MAX_JSON {
            return Err(ScanError::Format(format!("blob {digest} is larger than a config can be")));
        }
        Ok(v)
    }

    /// A blob as a byte stream, downloaded while it is read. A dropped connection is resumed
    /// where it stopped (range request); 429/5xx are retried with backoff. The caller checks the
    /// digest of what it read.
    pub fn blob(&self, digest: &str) -> Result<BlobReader, ScanError> {
        let (tx, rx) = tokio::sync::mpsc::channel::<io::Result<bytes::Bytes>>(16);
        let client = self.client.clone();
        let reference = self.reference.clone();
        let digest = digest.to_string();
        let retries = self.retries;
        let downloaded = self.downloaded.clone();
        let requests = self.requests.clone();
        self.rt.spawn(async move {
            let mut got: u64 = 0;
            let mut attempt = 0;
            loop {
                requests.fetch_add(1, Ordering::Relaxed);
                let stream = if got == 0 {
                    client.pull_blob_stream(&reference, digest.as_str()).await.map(|s| (s.content_length, s.stream))
                } else {
                    match client.pull_blob_stream_partial(&reference, digest.as_str(), got, None).await {
                        Ok(oci_client::client::BlobResponse::Partial(s)) => {
                            Ok((s.content_length.map(|l| l + got), s.stream))
                        }
                        Ok(oci_client::client::BlobResponse::Full(_)) => {
                            // The server ignored the range: the stream cannot be resumed.
                            let _ = tx
                                .send(Err(io::Error::other(
                                    "connection dropped and the registry does not resume downloads",
                                )))
                                .await;
                            return;
                        }
                        Err(e) => Err(e),
                    }
                };
                let failure = match stream {
                    Ok((len, mut s)) => {
                        let mut err = None;
                        while let Some(chunk) = s.next().await {
                            match chunk {
                                Ok(b) => {
                                    got += b.len() as u64;
                                    downloaded.fetch_add(b.len() as u64, Ordering::Relaxed);
                                    if tx.send(Ok(b)).await.is_err() {
                                        return;
                                    }
                                }
                                Err(e) => {
                                    err = Some(e);
                                    break;
                                }
                            }
                        }
                        match err {
                            None => return,
                            // Everything arrived and the client's own digest check objected: the
                            // scan's digest check reports it (expected vs actual).
                            Some(_) if len.is_some_and(|l| got >= l) => return,
                            Some(e) => e.to_string(),
                        }
                    }
                    Err(e) if !retryable(&e) => {
                        let _ = tx.send(Err(io::Error::other(e.to_string()))).await;
                        return;
                    }
                    Err(e) => e.to_string(),
                };
                if attempt >= retries {
                    let _ = tx
                        .send(Err(io::Error::other(format!(
                            "download failed after {} attempts: {failure}",
                            attempt + 1
                        ))))
                        .await;
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

/// The registry seen as an image layout: `index.json` is the reference's manifest (or an index
/// made of it), blobs are fetched by digest (manifests first, then blobs).
struct RemoteStore<'a> {
    remote: &'a Remote,
    index: Vec<u8>,
    known: HashMap<String, Vec<u8>>,
    /// Digests an index lists: fetched from the manifests endpoint; anything else is a blob.
    manifests: std::collections::HashSet<String>,
}

impl RemoteStore<'_> {
    fn learn(&mut self, json: &[u8]) {
        let v: serde_json::Value = serde_json::from_slice(json).unwrap_or_default();
        for m in v.get("manifests").and_then(|m| m.as_array()).into_iter().flatten() {
            if let Some(d) = m.get("digest").and_then(|d| d.as_str()) {
                self.manifests.insert(d.to_string());
            }
        }
    }
}

impl Store for RemoteStore<'_> {
    fn read_small(&mut self, key: &str) -> Result<Vec<u8>, ScanError> {
        if key == "index.json" {
            let index = self.index.clone();
            self.learn(&index);
            return Ok(index);
        }
        let digest = key.strip_prefix("blobs/").map(|k| k.replacen('/', ":", 1)).unwrap_or_else(|| key.to_string());
        if let Some(b) = self.known.get(&digest) {
            return Ok(b.clone());
        }
        if !self.manifests.contains(&digest) {
            return self.remote.small_blob(&digest);
        }
        let by_digest = Reference::with_digest(
            self.remote.reference.registry().to_string(),
            self.remote.reference.repository().to_string(),
            digest.clone(),
        );
        let (b, _) = self.remote.manifest(&by_digest)?;
        self.learn(&b);
        Ok(b)
    }
}

fn media_type_of(json: &[u8]) -> String {
    let v: serde_json::Value = serde_json::from_slice(json).unwrap_or_default();
    match v.get("mediaType").and_then(|m| m.as_str()) {
        Some(m) => m.to_string(),
        None if v.get("manifests").is_some() => "application/vnd.oci.image.index.v1+json".into(),
        None => "application/vnd.oci.image.manifest.v1+json".into(),
    }
}

/// Scans an image in a registry.
pub fn scan(spec: &str, opts: &ScanOptions, ro: &RegistryOptions) -> Result<ImageReport, ScanError> {
    let reference = parse_reference(spec)?;
    let remote = Remote::connect(reference.clone(), ro)?;
    let (top, top_digest) = remote.manifest(&reference)?;
    let mt = media_type_of(&top);
    let index = if mt.contains("index") || mt.contains("manifest.list") {
        top.clone()
    } else {
        serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "manifests": [{"mediaType": mt, "digest": top_digest, "size": top.len()}],
        }))
        .expect("json")
    };
    let mut store = RemoteStore {
        remote: &remote,
        index,
        known: HashMap::from([(top_digest.clone(), top)]),
        manifests: Default::default(),
    };
    let platform = opts.platform.clone().unwrap_or_else(Platform::host);
    let mut resolved = oci::resolve_oci(&mut store, None, &platform)?;
    resolved.name = Some(reference.whole());
    let variant = format!("lean={} every_cubin={}", opts.inspect.lean, opts.inspect.every_cubin);
    let total: u64 = resolved.layers.iter().filter_map(|l| l.size).sum();
    let progress = Progress::new(opts.progress, Some(total), resolved.layers.len());
    let from_cache = AtomicU64::new(0);
    let layers = crate::image::layers::parallel(&resolved.layers, opts.jobs, |l: &LayerRef| {
        let digest = l.digest.clone().expect("registry layers have digests");
        if let Some(c) = &ro.cache
            && let Some(hit) = c.get(&digest, &variant)
        {
            from_cache.fetch_add(1, Ordering::Relaxed);
            progress.add(l.size.unwrap_or(0));
            return Ok(hit);
        }
        let mut reader = crate::image::progress::Counting::new(remote.blob(&digest)?, &progress);
        let o = crate::image::layers::stream(&mut reader, l, &opts.inspect, false)?;
        let analyzed: AnalyzedLayer = crate::image::layers::check(l, o, opts.verify)?;
        if let Some(c) = &ro.cache {
            // A failed write only costs a later download.
            let _ = c.put(&digest, &variant, &analyzed);
        }
        Ok(analyzed)
    });
    progress.finish();
    let mut report = assemble("registry", Some(&resolved), Some(reference.whole()), layers?);
    report.stats.downloaded_bytes = remote.downloaded.load(Ordering::Relaxed);
    report.stats.layers_from_cache = from_cache.load(Ordering::Relaxed);
    Ok(report)
}
