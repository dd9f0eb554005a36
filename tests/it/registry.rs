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
use cudalint::registry::RegistryOptions;

use crate::images::{Comp, Ent, Image, oci_layout, tar};
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

    /// The file holding a blob in the registry's storage.
    pub fn blob_file(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").unwrap();
        self.dir.path().join("data/docker/registry/v2/blobs/sha256").join(&hex[..2]).join(hex).join("data")
    }
}

/// A TCP proxy that counts HTTP requests by path and can stop relaying (and refuse new
/// connections) after a number of response bytes: a registry that dies mid-download.
pub struct Proxy {
    pub port: u16,
    pub requests: Arc<Mutex<Vec<String>>>,
    pub cut_after: Arc<AtomicU64>,
    stopped: Arc<AtomicBool>,
}

impl Proxy {
    pub fn start(upstream: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let cut_after = Arc::new(AtomicU64::new(u64::MAX));
        let stopped = Arc::new(AtomicBool::new(false));
        let relayed = Arc::new(AtomicU64::new(0));
        let (r2, c2, s2) = (requests.clone(), cut_after.clone(), stopped.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(client) = conn else { continue };
                if s2.load(Ordering::SeqCst) {
                    drop(client);
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
                let (cut, stop, relayed) = (c2.clone(), s2.clone(), relayed.clone());
                std::thread::spawn(move || {
                    let mut buf = [0u8; 16384];
                    while let Ok(n) = s_in.read(&mut buf) {
                        if n == 0 {
                            break;
                        }
                        let total = relayed.fetch_add(n as u64, Ordering::SeqCst) + n as u64;
                        if total > cut.load(Ordering::SeqCst) {
                            // The registry "dies": this connection drops, no new one is served.
                            stop.store(true, Ordering::SeqCst);
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
        Proxy { port, requests, cut_after, stopped }
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
    o.registry = RegistryOptions {
        cache: cache.map(|c| Arc::new(cudalint::cache::LayerCache::new(c.to_path_buf()))),
        retries: 2,
        ..RegistryOptions::default()
    };
    o
}

fn cached_entries(dir: &Path) -> usize {
    std::fs::read_dir(dir.join("layers")).map(|r| r.count()).unwrap_or(0)
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
    assert_eq!(remote.image.source, "registry");
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
        .args(["scan", &spec, "--quiet", "--no-cache", "--ca-cert"])
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
        .args(["registry", &reg.host(), "--quiet", "--no-cache", "--shard", "index/3", "--output-dir"])
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
        .args(["registry", &reg.host(), "--quiet", "--no-cache", "--output-dir"])
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
