//! Images read where a CI job's build left them: Podman's API service (the Docker Engine API
//! Podman serves, read as `podman:` and as `docker-daemon:`), and containerd's content store
//! after `ctr images import`. Real daemons from Debian's packages, each on a socket and storage
//! under a temporary directory; what each source reads must equal `podman save` by path and
//! from a pipe, findings included.

use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::scan::which;
use crate::util::fixture;

/// A daemon started for one test, stopped with it.
struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn wait_for_socket(p: &Path, d: &mut Daemon, what: &str) {
    let start = Instant::now();
    while !std::fs::metadata(p).is_ok_and(|m| m.file_type().is_socket()) {
        if let Ok(Some(status)) = d.0.try_wait() {
            panic!("{what} exited before listening: {status}");
        }
        assert!(start.elapsed() < Duration::from_secs(60), "{what} did not listen on {} in 60 s", p.display());
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Podman with its own storage (vfs: no overlay mounts) under `dir`.
pub struct Podman {
    bin: String,
    storage: Vec<String>,
}

impl Podman {
    pub fn new(dir: &Path) -> Podman {
        Podman {
            bin: which("podman"),
            storage: vec![
                format!("--root={}", dir.join("root").display()),
                format!("--runroot={}", dir.join("run").display()),
                "--storage-driver=vfs".to_string(),
            ],
        }
    }

    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.bin);
        c.args(&self.storage).args(args);
        c
    }

    /// Its API service on `sock` (what `systemctl start podman.socket` runs).
    fn service(&self, sock: &Path) -> Daemon {
        let child = self
            .cmd(&["system", "service", "--time=0", &format!("unix://{}", sock.display())])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut d = Daemon(child);
        wait_for_socket(sock, &mut d, "podman system service");
        d
    }
}

/// containerd with its root, state and socket under `dir`.
fn containerd(dir: &Path) -> (Daemon, PathBuf) {
    let bin = which("containerd");
    let sock = dir.join("containerd.sock");
    let config = dir.join("config.toml");
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        &config,
        format!(
            "version = 2\nroot = \"{}\"\nstate = \"{}\"\n[grpc]\n  address = \"{}\"\n",
            dir.join("root").display(),
            dir.join("state").display(),
            sock.display()
        ),
    )
    .unwrap();
    let child =
        Command::new(bin).arg("--config").arg(&config).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let mut d = Daemon(child);
    wait_for_socket(&sock, &mut d, "containerd");
    (d, sock)
}

fn cudalint() -> Command {
    let mut c = Command::new(assert_cmd::cargo::cargo_bin("cudalint"));
    // No daemon of the machine's own is asked: only the ones each test starts.
    c.env("DOCKER_HOST", "unix:///nonexistent/docker.sock")
        .env("CONTAINER_HOST", "unix:///nonexistent/podman.sock")
        .env("CONTAINERD_ADDRESS", "/nonexistent/containerd.sock")
        .env_remove("CONTAINERD_NAMESPACE");
    c
}

/// The inventory and the findings for an L4 of `cudalint scan IMAGE` with `env` (the input on
/// standard input from `stdin` when given), minus what names the source, which is returned
/// apart as "source_kind".
fn judged(
    env: &[(&str, &str)],
    image: &str,
    stdin: Option<&dyn Fn() -> Stdio>,
) -> (serde_json::Value, serde_json::Value) {
    let run = |format: &str| {
        let out = cudalint()
            .envs(env.iter().copied())
            .args(["scan", "--quiet", "--gpu", "L4", "--format", format, image])
            .stdin(stdin.map_or_else(Stdio::null, |s| s()))
            .output()
            .unwrap();
        assert!(
            matches!(out.status.code(), Some(0 | 1)),
            "{image} --format {format}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let mut inventory = run("inventory");
    let source = inventory["image"]["source"].clone();
    let image = inventory["image"].as_object_mut().unwrap();
    // A docker-archive has no manifest digest, containerd's import keeps the manifest it made.
    for k in ["name", "source", "manifest_digest"] {
        image.remove(k);
    }
    // Seeks leave layers unhashed; streams hash them.
    for l in image["layers"].as_array_mut().unwrap() {
        l.as_object_mut().unwrap().remove("verified");
    }
    inventory["source_kind"] = source;
    let lint = run("json");
    (inventory, lint["findings"].clone())
}

fn without_source(mut v: serde_json::Value) -> serde_json::Value {
    v.as_object_mut().unwrap().remove("source_kind");
    v
}

/// The Containerfile of the issue: repeated empty layers (COPY of an empty directory, twice)
/// and a CUDA library (sm_90a only: fails an L4), built by a real `podman build`.
pub fn build(podman: &Podman, dir: &Path) {
    let ctx = dir.join("ctx");
    std::fs::create_dir_all(ctx.join("empty")).unwrap();
    std::fs::copy(fixture("libsm90a.so"), ctx.join("libsm90a.so")).unwrap();
    std::fs::write(
        ctx.join("Containerfile"),
        "FROM scratch\nCOPY libsm90a.so /opt/cuda/\nCOPY empty/ /\nCOPY libsm90a.so /opt/cuda/\nCOPY empty/ /\n",
    )
    .unwrap();
    crate::util::run(podman.cmd(&["build", "-q", "--network=none", "-t", "localhost/repeat:1"]).arg(&ctx));
}

#[test]
fn podman_and_containerd_stores_read_as_podman_save_does_by_path_and_from_a_pipe() {
    let d = tempfile::tempdir().unwrap();
    let podman = Podman::new(d.path());
    build(&podman, d.path());
    let tar = d.path().join("saved.tar");
    crate::util::run(podman.cmd(&["save", "-o"]).arg(&tar).arg("localhost/repeat:1"));

    // By path, and from `podman save IMG |`.
    let (by_path, findings) = judged(&[], tar.to_str().unwrap(), None);
    assert_eq!(by_path["source_kind"], "docker-archive");
    assert_eq!(by_path["image"]["layers"].as_array().unwrap().len(), 4, "{by_path}");
    assert_eq!(by_path["files"][0]["path"], "/opt/cuda/libsm90a.so");
    assert!(findings.as_array().unwrap().iter().any(|f| f["rule"] == "CL001"), "sm_90a on an L4: {findings}");
    let saves = std::sync::Mutex::new(Vec::new());
    let pipe = || {
        let mut save = podman.cmd(&["save", "localhost/repeat:1"]).stdout(Stdio::piped()).spawn().unwrap();
        let out = Stdio::from(save.stdout.take().unwrap());
        saves.lock().unwrap().push(save);
        out
    };
    let (from_pipe, pipe_findings) = judged(&[], "-", Some(&pipe));
    for mut s in saves.into_inner().unwrap() {
        assert!(s.wait().unwrap().success(), "podman save");
    }
    assert_eq!(from_pipe["source_kind"], "docker-archive");
    assert_eq!(from_pipe, by_path, "podman save | cudalint scan - vs by path");
    assert_eq!(pipe_findings, findings);

    // `podman:IMG` from Podman's API service; and the same socket as Docker's Engine API.
    let sock = d.path().join("podman.sock");
    let _service = podman.service(&sock);
    let host = format!("unix://{}", sock.display());
    let (from_podman, podman_findings) = judged(&[("CONTAINER_HOST", &host)], "podman:localhost/repeat:1", None);
    assert_eq!(from_podman["source_kind"], "podman");
    assert_eq!(without_source(from_podman), without_source(by_path.clone()), "podman: vs by path");
    assert_eq!(podman_findings, findings);
    let (from_docker_api, _) = judged(&[("DOCKER_HOST", &host)], "docker-daemon:localhost/repeat:1", None);
    assert_eq!(from_docker_api["source_kind"], "docker-daemon");
    assert_eq!(without_source(from_docker_api), without_source(by_path.clone()), "docker-daemon: vs by path");

    // A bare name: the stores in --image-src order; Docker's socket is absent, Podman holds it.
    let out = cudalint()
        .env("CONTAINER_HOST", &host)
        .args(["scan", "--format", "inventory", "localhost/repeat:1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["image"]["source"], "podman");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains(&format!("reading localhost/repeat:1 from Podman at {host}")), "{said}");
    // Not there: "no such image", exit 2; and with the registry left out, the stores tried.
    let out = cudalint()
        .env("CONTAINER_HOST", &host)
        .args(["scan", "--format", "inventory", "podman:localhost/absent:1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no such image"), "{}", String::from_utf8_lossy(&out.stderr));
    let out = cudalint()
        .env("CONTAINER_HOST", &host)
        .args(["scan", "--format", "inventory", "--image-src", "docker,podman", "localhost/absent:1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("not in the local stores tried (docker, podman)"), "{said}");

    // containerd, after `ctr images import` of the saved archive (no unpacking: the content
    // store alone), in a namespace of its own.
    let (_containerd, csock) = containerd(&d.path().join("containerd"));
    let ctr = which("ctr");
    let ns = "cudalint-test";
    crate::util::run(
        Command::new(&ctr).arg("--address").arg(&csock).args(["-n", ns, "images", "import", "--no-unpack"]).arg(&tar),
    );
    let listed =
        crate::util::run(Command::new(&ctr).arg("--address").arg(&csock).args(["-n", ns, "images", "ls", "-q"]));
    let name =
        listed.lines().find(|l| l.contains("repeat")).unwrap_or_else(|| panic!("imported: {listed}")).to_string();
    let csock_s = csock.display().to_string();
    let ctd_env = [("CONTAINERD_ADDRESS", csock_s.as_str()), ("CONTAINERD_NAMESPACE", ns)];
    let with_ctd = |c: &mut Command| {
        c.envs(ctd_env);
    };
    let (from_containerd, ctd_findings) = judged(&ctd_env, &format!("containerd:{name}"), None);
    assert_eq!(from_containerd["source_kind"], "containerd");
    assert_eq!(without_source(from_containerd), without_source(by_path.clone()), "containerd: vs by path");
    assert_eq!(ctd_findings, findings);
    // The bare name finds it in containerd when only containerd is asked.
    let mut c = cudalint();
    with_ctd(&mut c);
    let out =
        c.args(["scan", "--quiet", "--format", "inventory", "--image-src", "containerd", &name]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()["image"]["source"], "containerd");
    // Another namespace does not hold it.
    let mut c = cudalint();
    with_ctd(&mut c);
    let out = c
        .args(["scan", "--format", "inventory", "--containerd-namespace", "other", &format!("containerd:{name}")])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no such image in namespace other"));

    // A layer removed from the content store fails the scan naming it (fail closed), as a
    // cluster that discards unpacked layers would have it.
    let layer = by_path["image"]["layers"][0]["digest"].as_str().unwrap().to_string();
    crate::util::run(Command::new(&ctr).arg("--address").arg(&csock).args(["-n", ns, "content", "rm", &layer]));
    let mut c = cudalint();
    with_ctd(&mut c);
    let out = c.args(["scan", "--format", "inventory", &format!("containerd:{name}")]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains(&layer) && said.contains("not in containerd's content store"), "{said}");
}

/// A daemon that takes the connection and never answers, one that trickles a byte at a time,
/// or one that answers with what is not an archive: each ends in a clear exit 2 within the
/// stall window, never a clean result. containerd's client is held to the same window.
#[test]
fn a_daemon_that_stalls_trickles_or_sends_garbage_fails_the_scan() {
    use std::io::{Read, Write};
    let d = tempfile::tempdir().unwrap();
    for case in ["stall", "trickle", "garbage", "containerd-stall"] {
        let sock = d.path().join(format!("{case}.sock"));
        let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let reply_case = case;
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { return };
                std::thread::spawn(move || {
                    let mut buf = [0u8; 4096];
                    let _ = conn.read(&mut buf);
                    let head = "HTTP/1.1 200 OK\r\nContent-Type: application/x-tar\r\nConnection: close\r\n";
                    match reply_case {
                        "garbage" => {
                            let body = b"not a tar archive at all";
                            let _ = write!(conn, "{head}Content-Length: {}\r\n\r\n", body.len());
                            let _ = conn.write_all(body);
                        }
                        "trickle" => {
                            let _ = write!(conn, "{head}Content-Length: 10000000\r\n\r\n");
                            for _ in 0..100 {
                                if conn.write_all(b"\0").is_err() {
                                    return;
                                }
                                std::thread::sleep(Duration::from_millis(200));
                            }
                        }
                        // Accepts, reads, and says nothing.
                        _ => std::thread::sleep(Duration::from_secs(30)),
                    }
                });
            }
        });
        let mut c = cudalint();
        c.args(["scan", "--quiet", "--format", "inventory", "--registry-stall-timeout", "1"]);
        if case == "containerd-stall" {
            c.arg("--containerd-address").arg(&sock).arg("containerd:localhost/x:1");
        } else {
            c.env("CONTAINER_HOST", format!("unix://{}", sock.display())).arg("podman:localhost/x:1");
        }
        let out = c.output().unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{case}: {said}");
        match case {
            "garbage" => assert!(said.contains("not a readable image archive"), "{case}: {said}"),
            "containerd-stall" => assert!(said.contains("no answer in 1 s"), "{case}: {said}"),
            _ => assert!(said.contains("stalled"), "{case}: {said}"),
        }
    }
}

/// A name that could step out of the API's image path, or a socket path that is a plain
/// file, is refused before anything is sent.
#[test]
fn names_and_sockets_that_are_not_what_they_claim_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let plain = d.path().join("not-a-socket");
    std::fs::write(&plain, b"").unwrap();
    let out = cudalint()
        .env("CONTAINER_HOST", format!("unix://{}", plain.display()))
        .args(["scan", "--format", "inventory", "podman:localhost/x:1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no socket there"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = cudalint().args(["scan", "--format", "inventory", "podman:../../containers/json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not an image name"));
}

/// A path-like argument naming no file is "no such file", not a registry lookup.
#[test]
fn a_missing_path_is_no_such_file_not_a_registry_lookup() {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir(d.path().join("build")).unwrap();
    for spec in ["build/img.tar", "image.tar.gz", "./x", "out/locks/pylock.toml"] {
        let out =
            cudalint().current_dir(d.path()).args(["scan", "--quiet", "--format", "inventory", spec]).output().unwrap();
        let said = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{spec}: {said}");
        assert!(said.contains("No such file or directory"), "{spec}: {said}");
        assert!(!said.contains("registry") && !said.contains("docker.io"), "{spec}: {said}");
    }
}

/// Docker's own daemon (Debian's docker.io), rootful with vfs storage and no networking of its
/// own under a temporary directory: an image its classic builder makes reads the same through
/// `docker-daemon:`, a bare name, `docker save |` and `docker save -o`.
#[test]
fn docker_daemon_images_read_as_docker_save_does() {
    let d = tempfile::tempdir().unwrap();
    let sock = d.path().join("docker.sock");
    let child = Command::new(which("dockerd"))
        .args(["--iptables=false", "--ip6tables=false", "--bridge=none", "--storage-driver=vfs"])
        .arg("--data-root")
        .arg(d.path().join("root"))
        .arg("--exec-root")
        .arg(d.path().join("exec"))
        .arg("--pidfile")
        .arg(d.path().join("docker.pid"))
        .arg("-H")
        .arg(format!("unix://{}", sock.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut daemon = Daemon(child);
    wait_for_socket(&sock, &mut daemon, "dockerd");
    let host = format!("unix://{}", sock.display());
    let docker = |args: &[&str]| {
        let mut c = Command::new(which("docker"));
        c.env("DOCKER_HOST", &host).env("DOCKER_BUILDKIT", "0").args(args);
        c
    };
    let ctx = d.path().join("ctx");
    std::fs::create_dir_all(&ctx).unwrap();
    std::fs::copy(fixture("libsm90a.so"), ctx.join("libsm90a.so")).unwrap();
    std::fs::write(
        ctx.join("Dockerfile"),
        // (Docker 20.10's classic builder on vfs cannot commit the empty layer an empty COPY
        // makes; podman's build above covers that shape.)
        "FROM scratch\nCOPY libsm90a.so /opt/cuda/\nCOPY libsm90a.so /opt/lib/\n",
    )
    .unwrap();
    // The daemon may take a moment to answer after its socket appears.
    let start = Instant::now();
    while !docker(&["version"]).output().unwrap().status.success() {
        assert!(start.elapsed() < Duration::from_secs(60), "dockerd did not answer in 60 s");
        std::thread::sleep(Duration::from_millis(200));
    }
    crate::util::run(docker(&["build", "-q", "-t", "dk/repeat:1"]).arg(&ctx));
    let tar = d.path().join("saved.tar");
    crate::util::run(docker(&["save", "-o"]).arg(&tar).arg("dk/repeat:1"));
    let (by_path, findings) = judged(&[], tar.to_str().unwrap(), None);
    assert_eq!(by_path["files"].as_array().unwrap().len(), 2, "{by_path}");
    assert!(findings.as_array().unwrap().iter().any(|f| f["rule"] == "CL001"), "{findings}");
    let saves = std::sync::Mutex::new(Vec::new());
    let pipe = || {
        let mut save = docker(&["save", "dk/repeat:1"]).stdout(Stdio::piped()).spawn().unwrap();
        let out = Stdio::from(save.stdout.take().unwrap());
        saves.lock().unwrap().push(save);
        out
    };
    let (from_pipe, pipe_findings) = judged(&[], "-", Some(&pipe));
    for mut s in saves.into_inner().unwrap() {
        assert!(s.wait().unwrap().success(), "docker save");
    }
    assert_eq!(from_pipe, by_path, "docker save | cudalint scan - vs by path");
    assert_eq!(pipe_findings, findings);
    let (from_daemon, daemon_findings) = judged(&[("DOCKER_HOST", &host)], "docker-daemon:dk/repeat:1", None);
    assert_eq!(from_daemon["source_kind"], "docker-daemon");
    assert_eq!(without_source(from_daemon), without_source(by_path), "docker-daemon: vs by path");
    assert_eq!(daemon_findings, findings);
    let out =
        cudalint().env("DOCKER_HOST", &host).args(["scan", "--format", "inventory", "dk/repeat:1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()["image"]["source"], "docker-daemon");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains(&format!("reading dk/repeat:1 from Docker at {host}")), "{said}");
}
