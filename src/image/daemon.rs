//! Images in a local Docker Engine or Podman, read where they are: the Engine API's
//! `GET /images/{name}/get` (the `docker save` stream, which Podman's compatible API serves too)
//! over the daemon's unix socket, read once through the same one-pass reader as
//! `docker save IMG | cudalint scan -`, never written to disk. The socket is found as each
//! engine's own client finds it (`DOCKER_HOST`; `CONTAINER_HOST`, else the rootful or rootless
//! default). The stream is under the registry's stall timeout and deadline.

use std::io;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::{ImageReport, ScanError, ScanOptions, SourceKind, archive};
use crate::escape::text as esc;
use crate::registry::RegistryError;
use crate::registry::http::{self, Body, BodyError, Limits};

/// The engines whose API serves `docker save` streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    Docker,
    Podman,
}

impl Engine {
    pub fn kind(self) -> SourceKind {
        match self {
            Engine::Docker => SourceKind::DockerDaemon,
            Engine::Podman => SourceKind::Podman,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Engine::Docker => "Docker",
            Engine::Podman => "Podman",
        }
    }

    /// Who answers, in the stall messages.
    fn peer(self) -> &'static str {
        match self {
            Engine::Docker => "Docker daemon",
            Engine::Podman => "Podman service",
        }
    }

    fn variable(self) -> &'static str {
        match self {
            Engine::Docker => "DOCKER_HOST",
            Engine::Podman => "CONTAINER_HOST",
        }
    }
}

/// Where an engine's API listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    Unix(PathBuf),
    /// `tcp://host:port` (plain HTTP, as `DOCKER_HOST=tcp://…` without `DOCKER_TLS_VERIFY`).
    Tcp(String),
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Unix(p) => write!(f, "unix://{}", p.display()),
            Endpoint::Tcp(a) => write!(f, "tcp://{a}"),
        }
    }
}

/// The engine's socket as its own client finds it: `DOCKER_HOST` (default
/// `/var/run/docker.sock`); `CONTAINER_HOST`, else `/run/podman/podman.sock` for root and
/// `$XDG_RUNTIME_DIR/podman/podman.sock` for others. `env` reads the environment (tests pass
/// their own).
pub fn endpoint(engine: Engine, env: &dyn Fn(&str) -> Option<String>) -> Result<Endpoint, ScanError> {
    let given = env(engine.variable()).filter(|v| !v.is_empty());
    let Some(v) = given else {
        return Ok(Endpoint::Unix(match engine {
            Engine::Docker => "/var/run/docker.sock".into(),
            Engine::Podman if euid() == 0 => "/run/podman/podman.sock".into(),
            Engine::Podman => {
                let dir =
                    env("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()).unwrap_or_else(|| format!("/run/user/{}", euid()));
                Path::new(&dir).join("podman/podman.sock")
            }
        }));
    };
    let refuse = |why: &str| ScanError::Input {
        what: format!("{}={}", engine.variable(), esc(&http::redact_urls(&v))),
        message: why.to_string(),
    };
    if let Some(p) = v.strip_prefix("unix://") {
        if p.is_empty() {
            return Err(refuse("no socket path after unix://"));
        }
        return Ok(Endpoint::Unix(p.into()));
    }
    if let Some(a) = v.strip_prefix("tcp://") {
        if engine == Engine::Docker && env("DOCKER_TLS_VERIFY").is_some_and(|t| !t.is_empty()) {
            return Err(refuse(
                "DOCKER_TLS_VERIFY is set: a TLS daemon connection is not supported; read the image with `docker save` \
                 instead",
            ));
        }
        let a = a.trim_end_matches('/');
        if a.is_empty() || a.contains(['/', '@', '?', '#']) {
            return Err(refuse("not host:port after tcp://"));
        }
        return Ok(Endpoint::Tcp(a.to_string()));
    }
    Err(refuse("only unix:// and tcp:// endpoints are read (for ssh://, forward the socket and use unix://)"))
}

fn euid() -> u32 {
    // SAFETY: geteuid cannot fail and touches no memory.
    unsafe { libc::geteuid() }
}

/// What a name may be on the way to the API's path: a reference or an image ID, nothing that
/// could step out of `/images/{name}/`.
fn check_name(name: &str) -> Result<(), ScanError> {
    let ok = !name.is_empty()
        && name.len() <= 512
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-/:@".contains(&b))
        && !name.split('/').any(|s| s.is_empty() || s == "." || s == "..");
    if ok { Ok(()) } else { Err(ScanError::Image(format!("{}: not an image name or ID", esc(name)))) }
}

/// Whether `endpoint` looks served: a unix socket that exists (a daemon that is not installed
/// has none). A TCP endpoint is tried.
pub fn present(endpoint: &Endpoint) -> bool {
    use std::os::unix::fs::FileTypeExt;
    match endpoint {
        Endpoint::Unix(p) => std::fs::metadata(p).is_ok_and(|m| m.file_type().is_socket()),
        Endpoint::Tcp(_) => true,
    }
}

/// An engine's API, as a client that speaks to it and no one else (no proxy, no redirects).
struct Api {
    engine: Engine,
    endpoint: Endpoint,
    rt: tokio::runtime::Runtime,
    client: reqwest::Client,
    lim: Limits,
}

impl Api {
    fn new(engine: Engine, endpoint: Endpoint, opts: &ScanOptions) -> Result<Api, ScanError> {
        let rt =
            tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().map_err(|e| {
                ScanError::Input { what: engine.name().into(), message: format!("no async runtime: {e}") }
            })?;
        // reqwest wants a TLS provider even for a client that never speaks TLS.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut b = reqwest::Client::builder().no_proxy().redirect(reqwest::redirect::Policy::none());
        if let Endpoint::Unix(p) = &endpoint {
            b = b.unix_socket(p.clone());
        }
        let client = b.build().map_err(|e| ScanError::Input {
            what: engine.name().into(),
            message: format!("no HTTP client: {}", http::error_chain(&e)),
        })?;
        let lim = Limits {
            stall: opts.registry.stall_timeout,
            deadline: Instant::now() + opts.registry.deadline,
            peer: engine.peer(),
        };
        Ok(Api { engine, endpoint, rt, client, lim })
    }

    fn url(&self, path: &str) -> String {
        // Over a unix socket the host is only the Host header's.
        let host = match &self.endpoint {
            Endpoint::Unix(_) => "localhost",
            Endpoint::Tcp(a) => a,
        };
        // Unversioned: each engine answers at its own API version (Docker 29 refuses clients
        // older than 1.44; Podman serves the same paths), and these two calls are in every one.
        format!("http://{host}{path}")
    }

    fn what(&self, name: &str) -> String {
        format!("{}:{} ({} at {})", self.prefix(), esc(name), self.engine.name(), self.endpoint)
    }

    fn prefix(&self) -> &'static str {
        match self.engine {
            Engine::Docker => "docker-daemon",
            Engine::Podman => "podman",
        }
    }

    /// `GET path`: the answer's headers, a 404 as `None`, any other failure an error.
    fn get(&self, path: &str, what: &str) -> Result<Option<reqwest::Response>, RegistryError> {
        let url = self.url(path);
        self.rt.block_on(async {
            let res = http::send(self.client.get(&url), self.lim, what, 0).await.map_err(|f| f.error)?;
            if res.status() == reqwest::StatusCode::NOT_FOUND {
                return Ok(None);
            }
            if !res.status().is_success() {
                return Err(http::status_error(res, self.lim, what).await);
            }
            Ok(Some(res))
        })
    }

    /// Whether the engine holds an image by this name (`GET /images/{name}/json`).
    fn has(&self, name: &str) -> Result<bool, ScanError> {
        let what = self.what(name);
        Ok(self.get(&format!("/images/{name}/json"), &what)?.is_some())
    }

    /// The image's `docker save` stream, read as it arrives.
    fn save(&self, name: &str) -> Result<crate::registry::BlobReader, ScanError> {
        let what = self.what(name);
        let Some(res) = self.get(&format!("/images/{name}/get"), &what)? else {
            return Err(ScanError::Image(format!("{what}: no such image")));
        };
        let (tx, reader) = crate::registry::BlobReader::channel();
        // Nothing bounds a `docker save` stream's length but the scan's own bounds (as on
        // standard input); stalls and the deadline do.
        let mut body = Body::new(res, u64::MAX, self.lim, &what)?;
        self.rt.spawn(async move {
            loop {
                match body.chunk().await {
                    Ok(Some(b)) => {
                        let t = Instant::now();
                        if tx.send(Ok(b)).await.is_err() {
                            return;
                        }
                        body.paused(t.elapsed());
                    }
                    Ok(None) => return,
                    Err(e) => {
                        let e = match e {
                            BodyError::Transport(m) => m,
                            BodyError::Fatal(e) => e.to_string(),
                        };
                        let _ = tx.send(Err(io::Error::other(e))).await;
                        return;
                    }
                }
            }
        });
        Ok(reader)
    }
}

/// Connects to `engine` (found by `env`), or says why not; `None` where it has no socket.
fn connect(engine: Engine, opts: &ScanOptions, required: bool) -> Result<Option<Api>, ScanError> {
    let ep = endpoint(engine, &|k| std::env::var(k).ok())?;
    if !present(&ep) {
        if !required {
            return Ok(None);
        }
        let hint = match engine {
            Engine::Docker => "is dockerd running? DOCKER_HOST names another socket",
            Engine::Podman => {
                "start it with `systemctl start podman.socket` (or `systemctl --user start podman.socket`) or \
                 `podman system service --time=0`; CONTAINER_HOST names another socket"
            }
        };
        return Err(ScanError::Input {
            what: format!("{} API at {ep}", engine.name()),
            message: format!("no socket there ({hint})"),
        });
    }
    Api::new(engine, ep, opts).map(Some)
}

/// Scans `name` from `engine`'s image store.
pub fn scan(engine: Engine, name: &str, opts: &ScanOptions) -> Result<ImageReport, ScanError> {
    check_name(name)?;
    let api = connect(engine, opts, true)?.expect("required");
    read(&api, name, opts)
}

fn read(api: &Api, name: &str, opts: &ScanOptions) -> Result<ImageReport, ScanError> {
    let platform = opts.platform.clone().unwrap_or_else(super::Platform::host);
    let label = api.what(name);
    let stream = api.save(name)?;
    let mut report = archive::scan_reader(stream, &label, &platform, opts)?;
    report.image.source = api.engine.kind();
    if report.image.name.is_none() {
        report.image.name = Some(name.to_string());
    }
    Ok(report)
}

/// For a bare `name:tag`: scans it from `engine` if that engine runs here and holds it.
/// `found` hears where, before the read starts.
pub fn try_scan(engine: Engine, name: &str, opts: &ScanOptions, found: &dyn Fn(&str)) -> Result<Lookup, ScanError> {
    if check_name(name).is_err() {
        return Ok(Lookup::Absent);
    }
    let api = match connect(engine, opts, false) {
        Ok(Some(api)) => api,
        Ok(None) => return Ok(Lookup::Absent),
        Err(e) => return Ok(Lookup::Unusable(e.to_string())),
    };
    match api.has(name) {
        Ok(true) => {}
        Ok(false) => return Ok(Lookup::Absent),
        Err(e) => return Ok(Lookup::Unusable(e.to_string())),
    }
    found(&format!("{} at {}", engine.name(), api.endpoint));
    read(&api, name, opts).map(|r| Lookup::Found(Box::new(r)))
}

/// What a local store said of a bare reference.
pub enum Lookup {
    /// It does not run here, or holds no such image.
    Absent,
    /// It could not be asked (permission denied, no answer): passed over, and said.
    Unusable(String),
    /// It held the image, and this is what was read: once a store has it, a failure is the
    /// scan's (never a fall through to another copy).
    Found(Box<ImageReport>),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
    }

    #[test]
    fn sockets_are_found_as_each_client_finds_them() {
        assert_eq!(endpoint(Engine::Docker, &env(&[])).unwrap(), Endpoint::Unix("/var/run/docker.sock".into()));
        assert_eq!(
            endpoint(Engine::Docker, &env(&[("DOCKER_HOST", "unix:///tmp/d.sock")])).unwrap(),
            Endpoint::Unix("/tmp/d.sock".into())
        );
        assert_eq!(
            endpoint(Engine::Docker, &env(&[("DOCKER_HOST", "tcp://127.0.0.1:2375")])).unwrap(),
            Endpoint::Tcp("127.0.0.1:2375".into())
        );
        assert_eq!(
            endpoint(Engine::Podman, &env(&[("CONTAINER_HOST", "unix:///run/p.sock")])).unwrap(),
            Endpoint::Unix("/run/p.sock".into())
        );
        // A password in the variable is not repeated in the refusal.
        let e = endpoint(Engine::Docker, &env(&[("DOCKER_HOST", "ssh://me:hunter2@host")])).unwrap_err().to_string();
        assert!(e.contains("ssh://") && !e.contains("hunter2"), "{e}");
        let e = endpoint(Engine::Docker, &env(&[("DOCKER_HOST", "tcp://h:2376"), ("DOCKER_TLS_VERIFY", "1")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("TLS"), "{e}");
    }

    #[test]
    fn names_cannot_step_out_of_the_images_path() {
        for ok in ["cudalint-demo:latest", "localhost/x/y:1", "sha256:0123abcd", "reg:5000/a@sha256:00"] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "../../containers/json", "a//b", "x?all=1", "a b", "x/./y", "a\u{1b}[31m"] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }
}
