//! `cudalint serve` end to end: the CNCF distribution registry (Debian package `docker-registry`)
//! on loopback with its `notifications: endpoints:` pointed at a running `cudalint serve`;
//! images pushed with skopeo; the attestations looked for where `scan --attest` puts them.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command as Proc, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cudalint::registry::{RegistryOptions, Remote, parse_reference};

use crate::images::{Comp, Ent, Image, oci_layout, tar};
use crate::scan::which;
use crate::util::read_fixture;

const TOKEN: &str = "s3cret-webhook-token";
const INVENTORY_PREDICATE: &str = "https://cudalint.dev/attestation/inventory/v1";
const SUPPORT_PREDICATE: &str = "https://cudalint.dev/attestation/support/v1";

/// A running `cudalint serve`: its log lines are collected as they come.
struct Serve {
    child: Child,
    port: u16,
    log: Arc<Mutex<Vec<String>>>,
    _cwd: tempfile::TempDir,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Serve {
    /// Listens on a free loopback port (port 0; the log names it), in an empty directory so no
    /// cudalint.toml is found.
    fn start(args: &[&str]) -> Serve {
        Serve::start_with(args, &[])
    }

    /// With `env` set besides the token.
    fn start_with(args: &[&str], env: &[(&str, &str)]) -> Serve {
        let cwd = tempfile::tempdir().unwrap();
        let mut child = Proc::new(assert_cmd::cargo::cargo_bin("cudalint"))
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .envs(env.iter().copied())
            .env("CUDALINT_SERVE_TOKEN", TOKEN)
            .current_dir(cwd.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let lines = BufReader::new(child.stderr.take().unwrap());
        let l2 = log.clone();
        std::thread::spawn(move || {
            for line in lines.lines() {
                let Ok(line) = line else { break };
                if let Some(rest) = line.split("listening on http://127.0.0.1:").nth(1) {
                    let _ = tx.send(rest.split(' ').next().unwrap().parse::<u16>().unwrap());
                }
                l2.lock().unwrap().push(line);
            }
        });
        let port = rx.recv_timeout(Duration::from_secs(60)).unwrap_or_else(|_| {
            let status = child.try_wait();
            panic!("cudalint serve did not start ({status:?}): {:?}", log.lock().unwrap())
        });
        Serve { child, port, log, _cwd: cwd }
    }

    fn log(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    /// One request (HTTP/1.1, closed after): the status and the body.
    fn request(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> (u16, String) {
        let mut req = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n");
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
        let mut req = req.into_bytes();
        req.extend_from_slice(body);
        self.raw(&req)
    }

    /// `bytes` sent as they are, and the answer's status and body.
    fn raw(&self, bytes: &[u8]) -> (u16, String) {
        let (code, _, body) = self.answer(bytes);
        (code, body)
    }

    /// `bytes` sent as they are: the answer's status, head and body.
    fn answer(&self, bytes: &[u8]) -> (u16, String, String) {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        s.write_all(bytes).unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        let text = String::from_utf8_lossy(&out).into_owned();
        let code = text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or_else(|| panic!("no status: {text:?}"));
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        (code, head.to_string(), body.to_string())
    }

    fn post(&self, auth: Option<&str>, body: &[u8]) -> (u16, String) {
        let mut h = vec![("Content-Type", "application/vnd.docker.distribution.events.v1+json")];
        if let Some(a) = auth {
            h.push(("Authorization", a));
        }
        self.request("POST", "/events", &h, body)
    }

    /// A sample of /metrics (its labels included in `name`: `scans_done_total{verdict="pass"}`).
    fn metric(&self, name: &str) -> f64 {
        let (code, page) = self.request("GET", "/metrics", &[], b"");
        assert_eq!(code, 200);
        let full = format!("cudalint_serve_{name} ");
        page.lines()
            .find_map(|l| l.strip_prefix(&full))
            .unwrap_or_else(|| panic!("no {full:?} in\n{page}"))
            .parse()
            .unwrap()
    }

    fn scans_done(&self) -> f64 {
        self.metric("scans_done_total{verdict=\"pass\"}") + self.metric("scans_done_total{verdict=\"fail\"}")
    }

    /// Waits (bounded) until `f` holds, failing with the log when it never does.
    fn until(&self, what: &str, mut f: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !f() {
            assert!(Instant::now() < deadline, "{what}: not within 60 s; serve's log:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// The registry, notifying `serve` of every event with the bearer token.
struct Registry {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Registry {
    fn start(serve_port: u16) -> Registry {
        let dir = tempfile::tempdir().unwrap();
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        // As docs/serve.md shows it; a short backoff so a refused delivery comes again soon.
        let cfg = format!(
            "version: 0.1\nlog:\n  level: info\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\n\
             http:\n  addr: 127.0.0.1:{port}\nnotifications:\n  endpoints:\n    - name: cudalint\n      \
             url: http://127.0.0.1:{serve_port}/events\n      headers:\n        Authorization: [Bearer {TOKEN}]\n      \
             timeout: 5s\n      threshold: 3\n      backoff: 1s\n",
            dir.path().join("data").display()
        );
        let cfg_path = dir.path().join("config.yml");
        std::fs::write(&cfg_path, cfg).unwrap();
        let log = std::fs::File::create(dir.path().join("registry.log")).unwrap();
        let child = Proc::new(which("docker-registry"))
            .arg("serve")
            .arg(&cfg_path)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "docker-registry did not start on port {port}");
            std::thread::sleep(Duration::from_millis(50));
        }
        Registry { child, port, _dir: dir }
    }

    fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn push(&self, layout: &Path, repo_tag: &str) {
        let out = Proc::new(which("skopeo"))
            .args(["--insecure-policy", "copy", "-q", "--all", "--dest-tls-verify=false"])
            .arg(format!("oci:{}:latest", layout.display()))
            .arg(format!("docker://{}/{repo_tag}", self.host()))
            .output()
            .unwrap();
        assert!(out.status.success(), "skopeo push {repo_tag}: {}", String::from_utf8_lossy(&out.stderr));
    }

    fn remote(&self, repo: &str) -> Remote {
        Remote::connect(parse_reference(&format!("{}/{repo}:x", self.host())).unwrap(), &RegistryOptions::default())
            .unwrap()
    }

    /// The manifest `repo:tag` names, as bytes.
    fn manifest(&self, repo: &str, reference: &str) -> Option<Vec<u8>> {
        let sep = if reference.contains(':') { "@" } else { ":" };
        let r = parse_reference(&format!("{}/{repo}{sep}{reference}", self.host())).unwrap();
        self.remote(repo).manifest(&r).ok().map(|(b, _)| b)
    }

    /// The cudalint statements attached to `repo`'s manifest `digest` (this registry has no
    /// referrers API: the tag schema's index lists them), as (predicate type, statement); each
    /// checked to be an in-toto statement about `digest`.
    fn attached(&self, repo: &str, digest: &str) -> Vec<(String, serde_json::Value)> {
        let Some(index) = self.manifest(repo, &digest.replace(':', "-")) else { return Vec::new() };
        let index: serde_json::Value = serde_json::from_slice(&index).unwrap();
        let mut out = Vec::new();
        for d in index["manifests"].as_array().unwrap() {
            let m = self.manifest(repo, d["digest"].as_str().unwrap()).unwrap();
            let m: serde_json::Value = serde_json::from_slice(&m).unwrap();
            assert_eq!(m["subject"]["digest"], digest);
            assert_eq!(m["artifactType"], "application/vnd.in-toto+json");
            let st =
                self.remote(repo).small_blob_bounded(m["layers"][0]["digest"].as_str().unwrap(), 64 << 20).unwrap();
            let st: serde_json::Value = serde_json::from_slice(&st).unwrap();
            assert_eq!(st["_type"], "https://in-toto.io/Statement/v1");
            assert_eq!(st["subject"][0]["digest"]["sha256"], digest.strip_prefix("sha256:").unwrap());
            out.push((st["predicateType"].as_str().unwrap().to_string(), st));
        }
        out
    }
}

fn sha256(b: &[u8]) -> String {
    crate::images::sha(b)
}

fn image(arch: &'static str) -> Image {
    // libstale.so (nvcc 13.5): SASS for sm_75 to sm_90, no PTX.
    let mut img = Image::new(vec![(
        tar(&[Ent::File("usr/lib/libstale.so", read_fixture("../verdict/libstale.so"))]),
        Comp::Gzip,
    )]);
    img.arch = arch;
    img
}

/// A push event of `repo@digest` as distribution sends it.
fn push_event(host: &str, repo: &str, digest: &str) -> serde_json::Value {
    serde_json::json!({
        "id": "e1", "timestamp": "2025-01-01T00:00:00Z", "action": "push",
        "target": {"mediaType": "application/vnd.oci.image.manifest.v1+json", "size": 400, "digest": digest,
                   "length": 400, "repository": repo, "url": format!("http://{host}/v2/{repo}/manifests/{digest}"),
                   "tag": "1"},
        "request": {"id": "r1", "addr": "127.0.0.1:1", "host": host, "method": "PUT", "useragent": "test"},
        "actor": {}, "source": {"addr": "localhost:5000", "instanceID": "i1"},
    })
}

/// An envelope with `n` copies of a push event of `repo@digest`.
fn envelope(host: &str, repo: &str, digest: &str, n: usize) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({ "events": vec![push_event(host, repo, digest); n] })).unwrap()
}

#[test]
fn a_push_is_scanned_and_attested_through_serve_once_per_manifest() {
    let cache = tempfile::tempdir().unwrap();
    let serve = Serve::start(&["--gpu", "H100", "--attest", "--cache-dir", cache.path().to_str().unwrap()]);
    let reg = Registry::start(serve.port);
    let (code, body) = serve.request("GET", "/healthz", &[], b"");
    assert_eq!((code, body.trim()), (200, "ok"));

    // A push: the registry tells serve, serve scans it and attaches both attestations.
    let layout = tempfile::tempdir().unwrap();
    oci_layout(layout.path(), &[&image("amd64")]);
    reg.push(layout.path(), "serve/app:1");
    let digest = sha256(&reg.manifest("serve/app", "1").unwrap());
    serve.until("the attestations of serve/app:1", || reg.attached("serve/app", &digest).len() >= 2);
    let statements = reg.attached("serve/app", &digest);
    let types: Vec<&str> = statements.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(types, [INVENTORY_PREDICATE, SUPPORT_PREDICATE]);
    let name = format!("{}/serve/app@{digest}", reg.host());
    assert_eq!(statements[0].1["subject"][0]["name"], name.as_str());
    assert_eq!(statements[1].1["predicate"]["schema"], "cudalint.support/v1");

    // Counted; and the attestations' own pushes (artifact manifests, the referrers index) come
    // back as events that are skipped, not scanned.
    serve.until("the scan is counted", || serve.scans_done() == 1.0);
    serve.until("cudalint's own pushes are skipped", || serve.metric("manifests_skipped_total") >= 4.0);
    assert_eq!(serve.metric("attestations_pushed_total"), 1.0);
    assert_eq!(serve.metric("scans_failed_total"), 0.0);
    assert!(serve.metric("events_ignored_total") > 0.0, "blob pushes and pulls are ignored");
    assert!(
        serve.log().contains("skipped: ")
            && serve.log().contains("not an image (in-toto attestation, application/vnd.in-toto+json)")
    );

    // The same manifest under another tag: a duplicate, not a second scan.
    reg.push(layout.path(), "serve/app:2");
    serve.until("the second tag's event", || serve.metric("events_deduplicated_total") >= 1.0);
    assert_eq!(serve.scans_done(), 1.0);
    assert_eq!(serve.log().matches(&format!("scanning {name}")).count(), 1, "{}", serve.log());

    // A multi-platform image: its images are pushed (and scanned) before the index, whose own
    // event finds them done.
    let multi = tempfile::tempdir().unwrap();
    oci_layout(multi.path(), &[&image("amd64"), &image("arm64")]);
    let dedup_before = serve.metric("events_deduplicated_total");
    reg.push(multi.path(), "serve/multi:1");
    let index: serde_json::Value = serde_json::from_slice(&reg.manifest("serve/multi", "1").unwrap()).unwrap();
    let images: Vec<String> =
        index["manifests"].as_array().unwrap().iter().map(|m| m["digest"].as_str().unwrap().to_string()).collect();
    assert_eq!(images.len(), 2);
    for d in &images {
        serve.until("an image of the index is attested", || reg.attached("serve/multi", d).len() >= 2);
    }
    serve.until("the index's images found scanned", || serve.metric("events_deduplicated_total") >= dedup_before + 2.0);
    assert_eq!(serve.scans_done(), 3.0, "{}", serve.log());

    // One envelope naming a manifest twice: queued once. It is not in the registry: the scan
    // fails, is counted, and serve goes on.
    let ghost = format!("sha256:{}", "0".repeat(63) + "1");
    let (code, body) = serve.post(Some(&format!("Bearer {TOKEN}")), &envelope(&reg.host(), "serve/ghost", &ghost, 2));
    assert_eq!(code, 200, "{body}");
    let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!((answer["queued"].as_u64(), answer["duplicate"].as_u64()), (Some(1), Some(1)), "{body}");
    serve.until("the failed scan is counted", || serve.metric("scans_failed_total") == 1.0);
    assert!(serve.log().contains(&format!("error: {}/serve/ghost@{ghost}", reg.host())), "{}", serve.log());

    // The webhook's refusals.
    let good = envelope(&reg.host(), "serve/app", &digest, 1);
    assert_eq!(serve.post(None, &good).0, 401);
    assert_eq!(serve.post(Some("Bearer wrong"), &good).0, 401);
    assert_eq!(serve.post(Some(&format!("Basic {TOKEN}")), &good).0, 401);
    let auth = format!("Bearer {TOKEN}");
    for garbage in [&b"{\"events\": [{\"action\": 5}]}"[..], b"not json", b"", b"[]", &[0xff, 0xfe, 0x00]] {
        let (code, body) = serve.post(Some(&auth), garbage);
        assert_eq!(code, 400, "{:?}: {body}", String::from_utf8_lossy(garbage));
    }
    // Over 1 MiB: refused by its Content-Length before it is sent (so no unread body is left to
    // reset the connection), and when it comes chunked, once the count passes the bound.
    let head =
        format!("POST /events HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\nContent-Length: {}\r\n\r\n", 2 << 20);
    assert_eq!(serve.raw(head.as_bytes()).0, 413);
    let over = (1 << 20) + 1;
    let mut chunked = format!(
        "POST /events HTTP/1.1\r\nHost: x\r\nAuthorization: {auth}\r\nTransfer-Encoding: chunked\r\n\r\n{over:x}\r\n"
    )
    .into_bytes();
    chunked.extend(vec![b' '; over]);
    chunked.extend_from_slice(b"\r\n0\r\n\r\n");
    assert_eq!(serve.raw(&chunked).0, 413);
    assert_eq!(serve.request("GET", "/events", &[], b"").0, 405);
    assert_eq!(serve.request("GET", "/nope", &[], b"").0, 404);
    assert_eq!(serve.metric("webhook_responses_total{code=\"401\"}"), 3.0);
    assert_eq!(serve.metric("webhook_responses_total{code=\"400\"}"), 5.0);
    assert_eq!(serve.metric("webhook_responses_total{code=\"413\"}"), 2.0);
    assert_eq!(serve.scans_done(), 3.0, "no refused request was scanned");
    assert_eq!(serve.request("GET", "/healthz", &[], b"").0, 200);

    // SIGTERM: it stops taking events and exits 0.
    let mut serve = serve;
    let out = Proc::new("kill").args(["-TERM", &serve.child.id().to_string()]).output().unwrap();
    assert!(out.status.success());
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = serve.child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "serve did not stop on SIGTERM: {}", serve.log());
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(status.success(), "{status:?}: {}", serve.log());
    // The reader thread may still be taking the last lines.
    serve.until("the last log line", || serve.log().contains("cudalint serve: stopped"));
}

#[test]
fn serve_refuses_to_start_without_targets_or_with_a_registry_url_it_cannot_use() {
    let cwd = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        assert_cmd::Command::cargo_bin("cudalint")
            .unwrap()
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .current_dir(cwd.path())
            .timeout(Duration::from_secs(60))
            .output()
            .unwrap()
    };
    let o = run(&[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no targets"), "{}", String::from_utf8_lossy(&o.stderr));
    let o = run(&["--gpu", "H100", "--registry-url", "http://registry:5000"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("give HOST[:PORT]"), "{}", String::from_utf8_lossy(&o.stderr));
    // Credentials with no registry named: the event's host (the pusher's Host header) would get
    // them. Refused at start, naming the flag that scopes them.
    let o = assert_cmd::Command::cargo_bin("cudalint")
        .unwrap()
        .args(["serve", "--listen", "127.0.0.1:0", "--gpu", "H100", "--username", "u", "--password-stdin"])
        .write_stdin("secret\n")
        .current_dir(cwd.path())
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--registry-credentials"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn a_full_queue_answers_503_so_the_registry_sends_the_events_again() {
    // Nothing listens on port 9 of loopback: each scan fails at once, and the queue holds one.
    let serve = Serve::start(&["--gpu", "H100", "--queue", "1", "--registry-url", "127.0.0.1:9"]);
    // Ten manifests in one envelope: the one worker cannot empty the queue between two of them
    // (each of its jobs is a connection attempt; the webhook queues them in microseconds).
    let events: Vec<serde_json::Value> =
        (0..10).map(|i| push_event("registry.example:5000", "team/app", &format!("sha256:{i:064x}"))).collect();
    let body = serde_json::to_vec(&serde_json::json!({ "events": events })).unwrap();
    let mut req = format!(
        "POST /events HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(&body);
    let (code, head, body) = serve.answer(&req);
    assert_eq!(code, 503, "{body}");
    assert!(head.to_lowercase().contains("retry-after: "), "{head}");
    let answer: serde_json::Value = serde_json::from_str(&body).unwrap();
    let queued = answer["queued"].as_u64().unwrap();
    assert!((1..10).contains(&queued), "{body}");
    assert_eq!(serve.metric("events_rejected_total"), (10 - queued) as f64);
    assert_eq!(serve.metric("webhook_responses_total{code=\"503\"}"), 1.0);
    // What was queued is scanned (and fails: no registry), the rest waits for the resend.
    serve.until("the queued scans end", || serve.metric("scans_failed_total") == queued as f64);
    assert!(serve.log().contains("error: 127.0.0.1:9/team/app@sha256:"), "{}", serve.log());
}

/// A registry that accepts connections and never answers: each scan of an image there holds its
/// worker until the stall timeout.
fn tarpit() -> (u16, std::thread::JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let h = std::thread::spawn(move || {
        let mut held = Vec::new();
        for c in l.incoming().take(64) {
            held.push(c);
        }
    });
    (port, h)
}

/// An envelope of `n` pushes of distinct manifests of `repo`, from `from`.
fn pushes(repo: &str, from: usize, n: usize) -> Vec<u8> {
    let events: Vec<serde_json::Value> =
        (from..from + n).map(|i| push_event("registry.example:5000", repo, &format!("sha256:{i:064x}"))).collect();
    serde_json::to_vec(&serde_json::json!({ "events": events })).unwrap()
}

#[test]
fn accepted_pushes_survive_a_sigkill_and_are_retried_then_reported() {
    let state = tempfile::tempdir().unwrap();
    let dir = state.path().join("state");
    let dir_arg = dir.to_str().unwrap().to_string();
    let (trap, _t) = tarpit();
    let trap = format!("127.0.0.1:{trap}");
    // One worker, held by the tarpit: everything else waits in the queue when it is killed.
    let mut serve =
        Serve::start(&["--gpu", "H100", "--workers", "1", "--registry-url", &trap, "--state-dir", &dir_arg]);
    let auth = format!("Bearer {TOKEN}");
    let mut accepted = 0;
    for k in 0..4 {
        let (code, body) = serve.post(Some(&auth), &pushes("team/app", k * 5, 5));
        assert_eq!(code, 200, "{body}");
        accepted += serde_json::from_str::<serde_json::Value>(&body).unwrap()["queued"].as_u64().unwrap();
    }
    assert_eq!(accepted, 20);
    assert_eq!(serve.metric("jobs_pending"), 20.0);
    serve.child.kill().unwrap();
    serve.child.wait().unwrap();
    drop(serve);

    // Restarted (nothing listens on port 9 now: each scan fails at once): all 20 replayed, each
    // tried 3 times, then given up on and recorded, none lost.
    let serve = Serve::start(&[
        "--gpu",
        "H100",
        "--workers",
        "2",
        "--registry-url",
        "127.0.0.1:9",
        "--state-dir",
        &dir_arg,
        "--retry-pause",
        "1",
    ]);
    assert!(serve.log().contains("20 job(s) accepted before a restart queued again"), "{}", serve.log());
    assert_eq!(serve.metric("jobs_replayed_total"), 20.0);
    serve.until("every job given up on", || serve.metric("scans_abandoned_total") == 20.0);
    assert_eq!(serve.metric("scans_failed_total"), 60.0, "3 attempts each");
    assert_eq!(serve.metric("scan_retries_total"), 40.0);
    assert_eq!(serve.metric("jobs_pending"), 0.0);
    let failed = std::fs::read_to_string(dir.join("failed.jsonl")).unwrap();
    let mut images: Vec<String> = failed
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .inspect(|r| assert_eq!(r["attempts"], 3, "{r}"))
        .map(|r| r["image"].as_str().unwrap().to_string())
        .collect();
    images.sort();
    let want: Vec<String> = (0..20).map(|i| format!("127.0.0.1:9/team/app@sha256:{i:064x}")).collect();
    assert_eq!(images, want);
    drop(serve);
    // Nothing left to replay.
    let serve = Serve::start(&["--gpu", "H100", "--registry-url", "127.0.0.1:9", "--state-dir", &dir_arg]);
    assert_eq!(serve.metric("jobs_replayed_total"), 0.0);
}

#[test]
fn slow_clients_and_a_flood_of_posts_do_not_silence_healthz() {
    use socket2::{Domain, Socket, Type};
    let (trap, _t) = tarpit();
    // Heads may take an hour: the slow clients hold their connections for the whole test, so
    // the probe is answered because it is never starved, not because they timed out first.
    let serve = Serve::start(&[
        "--gpu",
        "H100",
        "--workers",
        "1",
        "--registry-url",
        &format!("127.0.0.1:{trap}"),
        "--header-timeout",
        "3600",
    ]);
    let connect_from = |ip: &str| {
        let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        s.bind(&format!("{ip}:0").parse::<std::net::SocketAddr>().unwrap().into()).unwrap();
        s.connect(&format!("127.0.0.1:{}", serve.port).parse::<std::net::SocketAddr>().unwrap().into()).map(|_| s)
    };
    // A tarpit event holds the worker.
    let auth = format!("Bearer {TOKEN}");
    assert_eq!(serve.post(Some(&auth), &pushes("team/trap", 0, 1)).0, 200);
    // 300 clients that send half a request head and wait, from one address...
    let mut slow = Vec::new();
    for _ in 0..300 {
        if let Ok(s) = connect_from("127.0.0.2") {
            let _ = s.send(b"POST /events HTTP/1.1\r\nHost: x\r\n");
            slow.push(s);
        }
    }
    // ... and 300 posts at once from another.
    let port = serve.port;
    let posts: Vec<_> = (0..300)
        .map(|i| {
            let auth = auth.clone();
            std::thread::spawn(move || {
                let body = pushes("team/flood", 1000 + i, 1);
                let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
                s.bind(&"127.0.0.3:0".parse::<std::net::SocketAddr>().unwrap().into()).unwrap();
                if s.connect(&format!("127.0.0.1:{port}").parse::<std::net::SocketAddr>().unwrap().into()).is_err() {
                    return;
                }
                let mut s: TcpStream = s.into();
                let head = format!(
                    "POST /events HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: {auth}\r\nContent-Length: {}\r\n\r\n",
                    body.len()
                );
                let _ = s.write_all(head.as_bytes()).and_then(|_| s.write_all(&body));
                let mut out = Vec::new();
                let _ = s.read_to_end(&mut out);
            })
        })
        .collect();
    // The probe, from its own address, is answered each time while they hold on.
    for _ in 0..10 {
        let (code, body) = serve.request("GET", "/healthz", &[], b"");
        assert_eq!((code, body.trim()), (200, "ok"));
    }
    for p in posts {
        p.join().unwrap();
    }
    drop(slow);
}

#[test]
fn without_a_token_serve_listens_on_loopback_only() {
    let cwd = tempfile::tempdir().unwrap();
    let o = assert_cmd::Command::cargo_bin("cudalint")
        .unwrap()
        .args(["serve", "--listen", "0.0.0.0:0", "--gpu", "H100"])
        .env_remove("CUDALINT_SERVE_TOKEN")
        .current_dir(cwd.path())
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("loopback only"), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn credentials_go_only_to_the_registry_url_whatever_an_event_names() {
    use crate::registry::{Gate, basic_of};
    let (home, elsewhere) = (Gate::start(), Gate::start());
    let env = [("CUDALINT_REGISTRY_USERNAME", "scanner"), ("CUDALINT_REGISTRY_PASSWORD", "pw-for-home")];
    let auth = format!("Bearer {TOKEN}");
    // Pinned: an event naming another host (its URL and the pusher's Host) is read from
    // --registry-url, which alone gets the pair; the other host is never contacted.
    let serve = Serve::start_with(&["--gpu", "H100", "--registry-url", &home.host(), "--retry-pause", "60"], &env);
    let (code, body) =
        serve.post(Some(&auth), &envelope(&elsewhere.host(), "team/app", &format!("sha256:{:064x}", 7), 1));
    assert_eq!(code, 200, "{body}");
    serve.until("the scan ends", || serve.metric("scans_failed_total") >= 1.0);
    assert_eq!(elsewhere.requests(), 0);
    assert_eq!(serve.metric("events_other_host_total"), 1.0);
    assert!(!home.auths().is_empty());
    assert!(home.auths().iter().all(|a| *a == basic_of("scanner", "pw-for-home")), "{:?}", home.auths());
    drop(serve);
    // Not pinned: the event's host is contacted, and gets no credential.
    let serve = Serve::start_with(&["--gpu", "H100", "--retry-pause", "60"], &env);
    let (code, body) =
        serve.post(Some(&auth), &envelope(&elsewhere.host(), "team/app", &format!("sha256:{:064x}", 8), 1));
    assert_eq!(code, 200, "{body}");
    serve.until("the scan ends", || serve.metric("scans_failed_total") >= 1.0);
    assert!(elsewhere.requests() > 0);
    assert!(elsewhere.auths().is_empty(), "{:?}", elsewhere.auths());
}

#[test]
fn connections_from_many_addresses_do_not_keep_out_healthz_or_the_registry() {
    use socket2::{Domain, Socket, Type};
    // Heads may take an hour: the flood's connections keep their slots for the whole test
    // (with the default 10 s they would free them, and the attack would only delay the probe).
    let serve = Serve::start(&["--gpu", "H100", "--registry-url", "127.0.0.1:9", "--header-timeout", "3600"]);
    let connect_from = |ip: &str| {
        let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        s.bind(&format!("{ip}:0").parse::<std::net::SocketAddr>().unwrap().into()).unwrap();
        s.connect(&format!("127.0.0.1:{}", serve.port).parse::<std::net::SocketAddr>().unwrap().into()).unwrap();
        s
    };
    // 9 addresses, each with the 32 connections one address may hold: 288, more than the 256
    // serve holds in all. They send nothing, half a head, or one whole request on a kept-alive
    // connection and then nothing.
    let mut flood = Vec::new();
    for a in 2..=10 {
        for k in 0..32 {
            let s = connect_from(&format!("127.0.0.{a}"));
            let sent: &[u8] = match k % 3 {
                0 => b"",
                1 => b"POST /events HTTP/1.1\r\nHost: x\r\n",
                _ => b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
            };
            let _ = s.send(sent);
            flood.push(s);
        }
    }
    // The probe and the registry (from 127.0.0.1) are answered all the same.
    let (code, body) = serve.request("GET", "/healthz", &[], b"");
    assert_eq!((code, body.trim()), (200, "ok"));
    let (code, body) = serve.post(Some(&format!("Bearer {TOKEN}")), &pushes("team/app", 0, 1));
    assert_eq!(code, 200, "{body}");
    assert_eq!(serde_json::from_str::<serde_json::Value>(&body).unwrap()["queued"], 1, "{body}");
    // The flood is what was shed: 32 of its own connections when it passed 256, one more for
    // the probe (the 256 it holds then are all idle).
    let shed = serve.metric("connections_shed_total");
    assert!(shed >= 33.0, "{shed} connections shed");
    assert!(serve.metric("connections_open") <= 256.0);
    assert_eq!(serve.metric("connections_refused_total"), 0.0);
    drop(flood);
}
