//! Registry scans at scale: shards of `cudalint registry` sharing one cache directory analyse
//! each layer once (single flight), and a killed or hung holder of a layer's lock does not block
//! the others past the timeout. Against the real `docker-registry` on loopback.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command as Proc, Stdio};
use std::time::Duration;

use sha2::Digest as _;

use assert_cmd::Command;

use crate::images::{Comp, Ent, Image, oci_layout, tar};
use crate::registry::Registry;
use crate::scan::which;
use crate::util::read_fixture;

/// Three images sharing a large base layer, each pushed under three tags (9 images, 4 unique
/// layers if the pushes keep the blobs as built).
fn shared_layer_registry() -> (Registry, Vec<tempfile::TempDir>) {
    let reg = Registry::start(false, None);
    let mut big = read_fixture("libmulti.so");
    big.extend(vec![7u8; 4 << 20]);
    let base = tar(&[
        Ent::File("usr/lib/libmulti-padded.bin", big),
        Ent::File("usr/lib/libsm90a.so", read_fixture("libsm90a.so")),
    ]);
    let mut layouts = Vec::new();
    for (i, repo) in ["scale/a", "scale/b", "scale/c"].iter().enumerate() {
        let app =
            tar(&[Ent::File(["opt/a/libx.so", "opt/b/libx.so", "opt/c/libx.so"][i], read_fixture("libsm100f.so"))]);
        let img = Image::new(vec![(base.clone(), Comp::Gzip), (app, Comp::None)]);
        let layout = tempfile::tempdir().unwrap();
        oci_layout(layout.path(), &[&img]);
        for tag in ["1", "2", "3"] {
            reg.push(layout.path(), &format!("{repo}:{tag}"), None);
        }
        layouts.push(layout);
    }
    (reg, layouts)
}

fn registry_cmd(reg: &Registry, out: &Path, cache: &Path, extra: &[&str]) -> Proc {
    let mut c = Proc::new(assert_cmd::cargo::cargo_bin("cudalint"));
    c.args(["registry", &reg.host(), "--quiet", "--gpu", "H100", "--output-dir"])
        .arg(out)
        .arg("--cache-dir")
        .arg(cache)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    c
}

fn summary(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap()
}

fn stat(s: &serde_json::Value, k: &str) -> u64 {
    s["stats"][k].as_u64().unwrap_or_else(|| panic!("summary has no stats.{k}: {s}"))
}

fn entries(cache: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(cache.join("layers"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".json.zst"))
        .collect();
    v.sort();
    v
}

fn locks(cache: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(cache.join("layers"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".lock"))
        .collect();
    v.sort();
    v
}

#[test]
fn four_shards_on_one_cache_dir_analyse_each_unique_layer_once() {
    let (reg, _layouts) = shared_layer_registry();
    let work = tempfile::tempdir().unwrap();
    // One process, its own cache: the unique layers are what it analyses (and stores).
    let one_cache = work.path().join("one-cache");
    let one = work.path().join("one");
    let o = registry_cmd(&reg, &one, &one_cache, &[]).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
    let whole = summary(&one);
    let unique = entries(&one_cache).len() as u64;
    assert_eq!(stat(&whole, "layers_analysed"), unique);
    assert_eq!(stat(&whole, "layers_pulled"), unique);
    assert!(unique < 18, "the images share layers: {unique} unique of 18");

    // Four shards at once on one shared directory.
    let shared = work.path().join("shared-cache");
    let children: Vec<_> = (0..4)
        .map(|k| {
            let d = work.path().join(format!("shard{k}"));
            (d.clone(), registry_cmd(&reg, &d, &shared, &["--shard", &format!("{k}/4")]).spawn().unwrap())
        })
        .collect();
    let mut parts = Vec::new();
    for (d, c) in children {
        let o = c.wait_with_output().unwrap();
        assert_ne!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
        parts.push(d.join("summary.json"));
    }
    let merged = work.path().join("merged.json");
    let o = Command::cargo_bin("cudalint").unwrap().arg("merge").args(&parts).arg("-o").arg(&merged).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
    let m: serde_json::Value = serde_json::from_slice(&std::fs::read(&merged).unwrap()).unwrap();
    assert_eq!(m["images"], whole["images"], "the shards' verdicts are the whole run's");
    assert_eq!(stat(&m, "layers_analysed"), unique, "layers analysed across shards: {}", m["stats"]);
    assert_eq!(stat(&m, "layers_pulled"), unique, "layers pulled across shards: {}", m["stats"]);
    assert_eq!(stat(&m, "stale_locks"), 0);
    assert_eq!(entries(&shared).len() as u64, unique);
}

#[test]
fn a_killed_or_hung_lock_holder_does_not_block_the_others() {
    let (reg, _layouts) = shared_layer_registry();
    let work = tempfile::tempdir().unwrap();
    let cache = work.path().join("cache");
    let first = work.path().join("first");
    let o = registry_cmd(&reg, &first, &cache, &["--repo", "scale/a"]).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
    let lock_files = locks(&cache);
    assert_eq!(lock_files.len(), entries(&cache).len());
    assert!(!lock_files.is_empty());

    // A killed holder: a process takes every layer's lock and dies by SIGKILL mid-"analysis".
    // The kernel drops its locks; the next run waits for nothing, even with the default
    // (600 s) lock timeout. The entries are gone, so the layers must be analysed again.
    for e in entries(&cache) {
        std::fs::remove_file(e).unwrap();
    }
    let mut script = String::new();
    for (i, l) in lock_files.iter().enumerate() {
        let fd = 10 + i;
        script.push_str(&format!("exec {fd}>'{}'; '{}' {fd}; ", l.display(), which("flock")));
    }
    script.push_str("echo locked; exec sleep 600");
    let mut holder = Proc::new(which("bash")).arg("-c").arg(&script).stdout(Stdio::piped()).spawn().unwrap();
    let mut line = String::new();
    BufReader::new(holder.stdout.take().unwrap()).read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "locked");
    holder.kill().unwrap();
    holder.wait().unwrap();
    let after_kill = work.path().join("after-kill");
    // The bound only turns a hang into a failure; nothing is asserted about time.
    let o = Command::from_std(registry_cmd(&reg, &after_kill, &cache, &["--repo", "scale/a"]))
        .timeout(Duration::from_secs(300))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
    let s = summary(&after_kill);
    assert_eq!(stat(&s, "lock_waits"), 0, "{}", s["stats"]);
    assert_eq!(stat(&s, "layers_analysed"), lock_files.len() as u64, "{}", s["stats"]);

    // A hung holder (a frozen pod): this process holds every lock and never lets go. The run
    // waits --cache-lock-timeout per layer, then analyses the layers itself.
    for e in entries(&cache) {
        std::fs::remove_file(e).unwrap();
    }
    let held: Vec<std::fs::File> = lock_files
        .iter()
        .map(|l| {
            let f = std::fs::OpenOptions::new().write(true).open(l).unwrap();
            rustix::fs::flock(&f, rustix::fs::FlockOperation::LockExclusive).unwrap();
            f
        })
        .collect();
    let hung = work.path().join("hung");
    let o = Command::from_std(registry_cmd(&reg, &hung, &cache, &["--repo", "scale/a", "--cache-lock-timeout", "1"]))
        .timeout(Duration::from_secs(300))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
    let s = summary(&hung);
    assert_eq!(s["images"], summary(&first)["images"]);
    // Each layer's lock was given up on once; its analysis was stored, so later images hit.
    assert_eq!(stat(&s, "stale_locks"), lock_files.len() as u64, "{}", s["stats"]);
    assert_eq!(stat(&s, "layers_analysed"), lock_files.len() as u64, "{}", s["stats"]);
    drop(held);
}

#[test]
fn a_cache_entry_under_another_key_or_with_a_changed_body_is_not_trusted() {
    let (reg, _layouts) = shared_layer_registry();
    let work = tempfile::tempdir().unwrap();
    let cache = work.path().join("cache");
    let first = work.path().join("first");
    let o = registry_cmd(&reg, &first, &cache, &["--repo", "scale/a", "--tag", "1"]).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
    let files = entries(&cache);
    assert_eq!(files.len(), 2);
    let raw: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(f).unwrap()).collect();
    // Swapped: each file now holds the other layer's (well-formed, self-consistent) entry.
    std::fs::write(&files[0], &raw[1]).unwrap();
    std::fs::write(&files[1], &raw[0]).unwrap();
    let swapped = work.path().join("swapped");
    registry_cmd(&reg, &swapped, &cache, &["--repo", "scale/a", "--tag", "1"]).output().unwrap();
    let s = summary(&swapped);
    assert_eq!(stat(&s, "cache_hits"), 0, "{}", s["stats"]);
    assert_eq!(stat(&s, "layers_analysed"), 2, "{}", s["stats"]);
    assert_eq!(s["images"], summary(&first)["images"]);
    // A body changed after its header (a flipped verdict-relevant byte), its MAC kept: not
    // trusted. (The entry follows its MAC: `cudalint::cache::MAC_MAGIC`, 32 bytes.)
    let file = std::fs::read(&files[0]).unwrap();
    let (mac, entry) = file.split_at(cudalint::cache::MAC_MAGIC.len() + 32);
    let good = zstd::decode_all(entry).unwrap();
    let text = String::from_utf8(good).unwrap();
    assert!(text.contains("\"verified\":true"));
    let forged = text.replacen("\"size\":", "\"size\":1", 1);
    assert_ne!(forged, text);
    std::fs::write(&files[0], [mac, &zstd::encode_all(forged.as_bytes(), 3).unwrap()[..]].concat()).unwrap();
    let changed = work.path().join("changed");
    registry_cmd(&reg, &changed, &cache, &["--repo", "scale/a", "--tag", "1"]).output().unwrap();
    let s = summary(&changed);
    assert_eq!(stat(&s, "cache_hits"), 1, "{}", s["stats"]);
    assert_eq!(stat(&s, "layers_analysed"), 1, "{}", s["stats"]);
}

/// A bare HTTP/1.1 request to the loopback registry (no auth): status and body.
fn http(reg: &Registry, method: &str, path: &str, content_type: &str, body: &[u8]) -> (u16, Vec<u8>) {
    let (status, _, body) = reg.http(method, path, content_type, body);
    (status, body)
}

/// The flags of a shard sharing the analysis store `store` unsigned, claiming every layer
/// (single flight is what these tests watch, on layers too small to be claimed by default).
fn unsigned_store(store: &str) -> [&str; 5] {
    ["--store-claim-min", "0", "--analysis-store", store, "--trust-unsigned"]
}

fn store_tags(reg: &Registry) -> Vec<String> {
    let (st, body) = http(reg, "GET", "/v2/cudalint/analyses/tags/list", "text/plain", b"");
    assert_eq!(st, 200, "{}", String::from_utf8_lossy(&body));
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
    let mut t: Vec<String> = serde_json::from_value(v["tags"].clone()).unwrap();
    t.sort();
    t
}

#[test]
fn shards_without_a_shared_volume_share_analyses_through_the_registry() {
    let (reg, _layouts) = shared_layer_registry();
    let work = tempfile::tempdir().unwrap();
    let store = format!("{}/cudalint/analyses", reg.host());
    let (key, public) = crate::signing::keypair(work.path(), "shards");
    let (_, stranger) = crate::signing::keypair(work.path(), "stranger");
    let (key, public, stranger) = (key.to_str().unwrap(), public.to_str().unwrap(), stranger.to_str().unwrap());
    // `cache`: the run's own cache directory (pods on different nodes), unless shared.
    let run_in = |name: &str, cache: &str, extra: &[&str]| {
        let d = work.path().join(name);
        let o = registry_cmd(
            &reg,
            &d,
            &work.path().join(format!("{cache}-cache")),
            &[&["--repo", "scale/a"], extra].concat(),
        )
        .output()
        .unwrap();
        assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
        summary(&d)
    };
    let run = |name: &str, extra: &[&str]| run_in(name, name, extra);
    let signed = ["--store-claim-min", "0", "--analysis-store", &store, "--sign-key", key, "--verify-key", public];

    // A store believed without a key or --trust-unsigned: refused.
    let o = registry_cmd(
        &reg,
        &work.path().join("nokey"),
        &work.path().join("nokey-cache"),
        &["--store-claim-min", "0", "--analysis-store", &store],
    )
    .output()
    .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--verify-key"), "{}", String::from_utf8_lossy(&o.stderr));

    let first = run("first", &signed);
    let unique = stat(&first, "layers_analysed");
    assert_eq!(stat(&first, "store_pushed"), unique, "{}", first["stats"]);
    let all = store_tags(&reg);
    let tags: Vec<String> = all.iter().filter(|t| t.starts_with("cudalint-layer-")).cloned().collect();
    assert_eq!(tags.len() as u64, unique, "{all:?}");
    // Besides the analyses, only their (released) claims.
    assert!(all.iter().all(|t| t.starts_with("cudalint-layer-") || t.starts_with("cudalint-claim-")), "{all:?}");
    // Each stored analysis is signed: openssl verifies its annotation over the entry blob.
    for t in &tags {
        use base64::Engine as _;
        let (_, m) = http(&reg, "GET", &format!("/v2/cudalint/analyses/manifests/{t}"), "text/plain", b"");
        let m: serde_json::Value = serde_json::from_slice(&m).unwrap();
        let sig = m["annotations"]["dev.cudalint.signature"].as_str().expect("a signature annotation");
        let sig = base64::engine::general_purpose::STANDARD.decode(sig).unwrap();
        let layer = &m["layers"][0];
        let (_, entry) =
            http(&reg, "GET", &format!("/v2/cudalint/analyses/blobs/{}", layer["digest"].as_str().unwrap()), "", b"");
        let payload_type = layer["mediaType"].as_str().unwrap();
        assert!(crate::signing::openssl_verifies(Path::new(public), payload_type, &entry, &sig), "{t}");
        assert!(!crate::signing::openssl_verifies(Path::new(stranger), payload_type, &entry, &sig), "{t}");
    }
    // Another node: nothing pulled, nothing analysed, the same verdicts; what it read verified,
    // so its local cache keeps it (a later run without the store reads it there).
    let second = run("second", &signed);
    assert_eq!(stat(&second, "layers_pulled"), 0, "{}", second["stats"]);
    assert_eq!(stat(&second, "layers_analysed"), 0, "{}", second["stats"]);
    assert_eq!(stat(&second, "store_hits"), unique, "{}", second["stats"]);
    assert_eq!(second["images"], first["images"]);
    let again = run_in("second-again", "second", &["--no-remote-cache"]);
    assert_eq!(stat(&again, "layers_analysed"), 0, "{}", again["stats"]);
    assert!(stat(&again, "cache_hits") >= unique, "{}", again["stats"]);
    // --no-remote-cache: the store is neither read nor written.
    let off = run("off", &["--store-claim-min", "0", "--analysis-store", &store, "--no-remote-cache"]);
    assert_eq!(stat(&off, "store_hits"), 0);
    assert_eq!(stat(&off, "layers_analysed"), unique);
    // Another key: every stored analysis passed over and the layers analysed here (and not
    // stored: with no key to sign them, they would only displace signed ones).
    let strange = run("strange", &["--store-claim-min", "0", "--analysis-store", &store, "--verify-key", stranger]);
    assert_eq!(stat(&strange, "store_hits"), 0, "{}", strange["stats"]);
    assert!(stat(&strange, "store_untrusted") >= unique, "{}", strange["stats"]);
    assert_eq!(stat(&strange, "layers_analysed"), unique, "{}", strange["stats"]);
    assert_eq!(strange["images"], first["images"]);
    assert_eq!(stat(&strange, "store_pushed"), 0, "{}", strange["stats"]);
    // --trust-unsigned: used for this run, but not sealed into the local cache as its own.
    let loose = run("loose", &unsigned_store(&store));
    assert_eq!(stat(&loose, "layers_analysed"), 0, "{}", loose["stats"]);
    assert_eq!((stat(&loose, "unsigned_trust"), stat(&second, "unsigned_trust")), (1, 0));
    assert!(stat(&loose, "store_hits") >= unique, "{}", loose["stats"]);
    let after = run_in("loose-again", "loose", &["--no-remote-cache"]);
    assert_eq!(stat(&after, "layers_analysed"), unique, "{}", after["stats"]);
    // An entry stored under another layer's key (a tag moved to another analysis) is not read.
    let (st, m0) = http(&reg, "GET", &format!("/v2/cudalint/analyses/manifests/{}", tags[0]), "text/plain", b"");
    assert_eq!(st, 200);
    let (st, body) = http(
        &reg,
        "PUT",
        &format!("/v2/cudalint/analyses/manifests/{}", tags[1]),
        "application/vnd.oci.image.manifest.v1+json",
        &m0,
    );
    assert_eq!(st, 201, "{}", String::from_utf8_lossy(&body));
    let moved = run("moved", &signed);
    assert_eq!(stat(&moved, "store_hits"), unique - 1, "{}", moved["stats"]);
    assert_eq!(stat(&moved, "layers_analysed"), 1, "{}", moved["stats"]);
    assert_eq!(moved["images"], first["images"]);
    // A stored analysis whose signature was stripped: passed over.
    let mut m: serde_json::Value = serde_json::from_slice(&m0).unwrap();
    m["annotations"].as_object_mut().unwrap().remove("dev.cudalint.signature");
    let (st, _) = http(
        &reg,
        "PUT",
        &format!("/v2/cudalint/analyses/manifests/{}", tags[0]),
        "application/vnd.oci.image.manifest.v1+json",
        &serde_json::to_vec(&m).unwrap(),
    );
    assert_eq!(st, 201);
    let stripped = run("stripped", &["--store-claim-min", "0", "--analysis-store", &store, "--verify-key", public]);
    assert!(stat(&stripped, "store_untrusted") >= 1, "{}", stripped["stats"]);
    assert_eq!(stat(&stripped, "layers_analysed"), 1, "{}", stripped["stats"]);
    assert_eq!(stripped["images"], first["images"]);
}

#[test]
fn the_analysis_store_in_the_scanned_registry_is_not_scanned_as_images() {
    // The first run fills the store (claims and analyses under cudalint/analyses); the second
    // lists the whole registry again: the store's artifacts are not images and not its subject.
    let (reg, _layouts) = shared_layer_registry();
    let work = tempfile::tempdir().unwrap();
    let store = format!("{}/cudalint/analyses", reg.host());
    let run = |name: &str| {
        let d = work.path().join(name);
        let o = registry_cmd(&reg, &d, &work.path().join(format!("{name}-cache")), &unsigned_store(&store))
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{name}: {}", String::from_utf8_lossy(&o.stderr));
        summary(&d)
    };
    let first = run("first");
    let second = run("second");
    assert!(stat(&second, "store_hits") > 0, "{}", second["stats"]);
    assert_eq!(second["images"], first["images"]);
    let names: Vec<&str> = second["images"].as_array().unwrap().iter().map(|i| i["image"].as_str().unwrap()).collect();
    assert!(names.iter().all(|n| !n.contains("/cudalint/analyses")), "{names:?}");
}

#[test]
fn four_shards_on_different_nodes_analyse_each_unique_layer_once_through_the_store() {
    let (reg, _layouts) = shared_layer_registry();
    let work = tempfile::tempdir().unwrap();
    let store = format!("{}/cudalint/analyses", reg.host());
    let one = work.path().join("one");
    let o = registry_cmd(&reg, &one, &work.path().join("one-cache"), &[]).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
    let whole = summary(&one);
    let unique = stat(&whole, "layers_analysed");
    let children: Vec<_> = (0..4)
        .map(|k| {
            let d = work.path().join(format!("shard{k}"));
            let cache = work.path().join(format!("cache{k}"));
            let shard = format!("{k}/4");
            let args = [&["--shard", &shard][..], &unsigned_store(&store)].concat();
            (d.clone(), registry_cmd(&reg, &d, &cache, &args).spawn().unwrap())
        })
        .collect();
    let mut parts = Vec::new();
    for (d, c) in children {
        let o = c.wait_with_output().unwrap();
        assert_ne!(o.status.code(), Some(2), "{}", String::from_utf8_lossy(&o.stderr));
        parts.push(d.join("summary.json"));
    }
    let merged = work.path().join("merged.json");
    Command::cargo_bin("cudalint").unwrap().arg("merge").args(&parts).arg("-o").arg(&merged).output().unwrap();
    let m: serde_json::Value = serde_json::from_slice(&std::fs::read(&merged).unwrap()).unwrap();
    assert_eq!(m["images"], whole["images"]);
    // A registry has no compare-and-swap: claims are best effort (a claimant whose push lands
    // after another's settle time also analyses), so on a loaded machine one or two layers may
    // be analysed twice; never fewer than the unique layers, never without pushing them.
    let analysed = stat(&m, "layers_analysed");
    assert!((unique..=unique + 2).contains(&analysed), "{}", m["stats"]);
    assert_eq!(stat(&m, "layers_pulled"), analysed, "{}", m["stats"]);
    assert!(stat(&m, "store_pushed") >= unique, "{}", m["stats"]);
}

#[test]
fn a_claim_left_by_a_killed_shard_does_not_block_the_others() {
    let (reg, _layouts) = shared_layer_registry();
    let work = tempfile::tempdir().unwrap();
    let store = format!("{}/cudalint/analyses", reg.host());
    let run = |name: &str, extra: &[&str]| {
        let d = work.path().join(name);
        let args = [&["--repo", "scale/a", "--tag", "1"][..], &unsigned_store(&store), extra].concat();
        let o = Command::from_std(registry_cmd(&reg, &d, &work.path().join(format!("{name}-cache")), &args))
            .timeout(Duration::from_secs(300))
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
        summary(&d)
    };
    let first = run("first", &[]);
    let all = store_tags(&reg);
    let (layers, claims): (Vec<String>, Vec<String>) = all.into_iter().partition(|t| t.starts_with("cudalint-layer-"));
    assert_eq!(layers.len(), 2);
    assert_eq!(claims.len(), 2);
    // The analyses disappear (deleted), and each layer carries a live claim by a shard that
    // will never finish (killed): `at` now, or long ago.
    let set_claims = |at: u64| {
        for t in &claims {
            let (st, m) = http(&reg, "GET", &format!("/v2/cudalint/analyses/manifests/{t}"), "text/plain", b"");
            assert_eq!(st, 200);
            let mut v: serde_json::Value = serde_json::from_slice(&m).unwrap();
            v["annotations"]["dev.cudalint.claim.id"] = "killed-shard".into();
            v["annotations"]["dev.cudalint.claim.at"] = at.to_string().into();
            let body = serde_json::to_vec(&v).unwrap();
            let path = format!("/v2/cudalint/analyses/manifests/{t}");
            let (st, b) = http(&reg, "PUT", &path, "application/vnd.oci.image.manifest.v1+json", &body);
            assert_eq!(st, 201, "{}", String::from_utf8_lossy(&b));
        }
    };
    let delete_analyses = || {
        for t in &layers {
            let (st, m) = http(&reg, "GET", &format!("/v2/cudalint/analyses/manifests/{t}"), "text/plain", b"");
            assert_eq!(st, 200);
            let d = format!("sha256:{}", hex::encode(sha2::Sha256::digest(&m)));
            let (st, b) = http(&reg, "DELETE", &format!("/v2/cudalint/analyses/manifests/{d}"), "text/plain", b"");
            assert_eq!(st, 202, "{}", String::from_utf8_lossy(&b));
        }
    };
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    delete_analyses();
    set_claims(now);
    // A live claim (younger than the timeout when the run meets it): waited for at most
    // --cache-lock-timeout, then analysed here.
    let waited = run("waited", &["--cache-lock-timeout", "10"]);
    assert_eq!(stat(&waited, "store_claim_waits"), 2, "{}", waited["stats"]);
    assert_eq!(stat(&waited, "layers_analysed"), 2, "{}", waited["stats"]);
    assert_eq!(waited["images"], first["images"]);
    // A claim older than the timeout (the default 600 s here) is not waited for at all.
    delete_analyses();
    set_claims(now - 3600);
    let stale = run("stale", &[]);
    assert_eq!(stat(&stale, "store_claim_waits"), 0, "{}", stale["stats"]);
    assert_eq!(stat(&stale, "layers_analysed"), 2, "{}", stale["stats"]);
    // A claim dated ten years ahead (a lease that would never run out) is as stale.
    delete_analyses();
    set_claims(now + 10 * 365 * 24 * 3600);
    let future = run("future", &[]);
    assert_eq!(stat(&future, "store_claim_waits"), 0, "{}", future["stats"]);
    assert_eq!(stat(&future, "layers_analysed"), 2, "{}", future["stats"]);
    // A fresh claim that is never renewed (its shard was killed just after claiming, or lost
    // the store), with the default 600 s timeout: waited for only until its lease runs out.
    // (The run's bound of 300 s would fail a wait for the whole timeout.)
    delete_analyses();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    set_claims(now);
    let unrenewed = run("unrenewed", &[]);
    assert_eq!(stat(&unrenewed, "store_claim_waits"), 2, "{}", unrenewed["stats"]);
    assert_eq!(stat(&unrenewed, "layers_analysed"), 2, "{}", unrenewed["stats"]);
    assert_eq!(unrenewed["images"], first["images"]);
}

fn scan_cmd(spec: &str, extra: &[&str]) -> std::process::Output {
    Command::cargo_bin("cudalint")
        .unwrap()
        .args(["scan", spec, "--quiet", "--no-cache"])
        .args(extra)
        .timeout(Duration::from_secs(120))
        .output()
        .unwrap()
}

#[test]
fn an_attested_image_is_judged_for_new_targets_without_pulling_a_layer() {
    let (reg, _layouts) = shared_layer_registry();
    let work = tempfile::tempdir().unwrap();
    let inv = work.path().join("inv.json");
    let spec = format!("{}/scale/a:1", reg.host());
    // The inventory alone never fails the gate: a text report beside it makes the verdict the
    // exit code.
    let inv_to = format!("inventory={}", inv.display());
    let o = scan_cmd(&spec, &["--attest", "--gpu", "H100", "--format", &inv_to, "--format", "text=/dev/null"]);
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
    let pulled: serde_json::Value = serde_json::from_slice(&std::fs::read(&inv).unwrap()).unwrap();
    let manifest = pulled["image"]["manifest_digest"].as_str().unwrap().to_string();
    // The loopback registry has no referrers API: the tag schema's index lists the statement.
    let (st, tags) = http(&reg, "GET", "/v2/scale/a/tags/list", "text/plain", b"");
    assert_eq!(st, 200);
    let fallback = manifest.replace(':', "-");
    assert!(String::from_utf8_lossy(&tags).contains(&fallback), "{}", String::from_utf8_lossy(&tags));
    let (st, index) = http(&reg, "GET", &format!("/v2/scale/a/manifests/{fallback}"), "text/plain", b"");
    assert_eq!(st, 200);
    let index: serde_json::Value = serde_json::from_slice(&index).unwrap();
    let referrer = index["manifests"][0]["digest"].as_str().unwrap();
    let (_, m) = http(&reg, "GET", &format!("/v2/scale/a/manifests/{referrer}"), "text/plain", b"");
    let m: serde_json::Value = serde_json::from_slice(&m).unwrap();
    assert_eq!(m["subject"]["digest"], manifest.as_str());
    assert_eq!(m["artifactType"], "application/vnd.in-toto+json");

    // Judged again, for other targets, through a proxy that counts requests: no layer pulled.
    let proxy = crate::registry::Proxy::start(reg.port);
    let via = format!("{}/scale/a:1", proxy.host());
    let inv2 = work.path().join("inv2.json");
    let inv2_to = format!("inventory={}", inv2.display());
    for gpu in ["H100", "A100", "B300", "RTX 5090"] {
        let attested = scan_cmd(
            &via,
            &[
                "--from-attestation",
                "--trust-unsigned",
                "--gpu",
                gpu,
                "--format",
                &inv2_to,
                "--format",
                "text=/dev/null",
            ],
        );
        let fresh = scan_cmd(&spec, &["--gpu", gpu, "--format", "text=/dev/null"]);
        assert_eq!(attested.status.code(), fresh.status.code(), "{gpu}: {}", String::from_utf8_lossy(&attested.stderr));
        let read: serde_json::Value = serde_json::from_slice(&std::fs::read(&inv2).unwrap()).unwrap();
        assert_eq!(read["files"], pulled["files"]);
    }
    // Other analysis options than the attested ones: the attestation does not apply (exit 2).
    let o = scan_cmd(&via, &["--from-attestation", "--trust-unsigned", "--deep", "--gpu", "H100"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("with other options"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // An image without an attestation: exit 2, nothing pulled in its place.
    let o =
        scan_cmd(&format!("{}/scale/b:1", proxy.host()), &["--from-attestation", "--trust-unsigned", "--gpu", "H100"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("no usable cudalint attestation"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // (scale/b shares the base layer: not pulled either.)
    for l in pulled["image"]["layers"].as_array().unwrap() {
        assert_eq!(proxy.blob_gets(l["digest"].as_str().unwrap()), 0, "{:?}", proxy.requests.lock().unwrap());
    }
}

#[test]
fn a_store_that_goes_away_mid_run_is_noticed_once_per_shard_and_bypassed() {
    let (reg, _layouts) = shared_layer_registry();
    // The store lives in a registry of its own, behind a proxy that stops it after its first
    // few answers: the connections and lookups before that are served, then it is gone.
    let store_reg = Registry::start(false, None);
    let work = tempfile::tempdir().unwrap();
    let plain = work.path().join("plain");
    let o = registry_cmd(&reg, &plain, &work.path().join("plain-cache"), &[]).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
    let unique = stat(&summary(&plain), "layers_analysed");
    // Dropped: connections refused and cut; frozen: connections taken and never answered
    // (a stopped process), which only the store's stall bound ends.
    for (mode, hang) in [("dropped", false), ("frozen", true)] {
        let proxy = crate::registry::Proxy::start(store_reg.port);
        proxy.hang.store(hang, std::sync::atomic::Ordering::SeqCst);
        proxy.cut_after.store(4096, std::sync::atomic::Ordering::SeqCst);
        let store = format!("{}/cudalint/analyses-{mode}", proxy.host());
        let children: Vec<_> = (0..4)
            .map(|k| {
                let d = work.path().join(format!("{mode}{k}"));
                let cache = work.path().join(format!("{mode}{k}-cache"));
                let c = registry_cmd(
                    &reg,
                    &d,
                    &cache,
                    &[&["--shard", &format!("{k}/4")][..], &unsigned_store(&store)].concat(),
                );
                (d, c)
            })
            .map(|(d, mut c)| (d, c.spawn().unwrap()))
            .collect();
        let mut parts = Vec::new();
        for (d, c) in children {
            let o = c.wait_with_output().unwrap();
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(1), "{mode}: {err}");
            let s = summary(&d);
            // Shards split by a hash of repo:tag, which gives each of the 4 at least one of
            // the 9 images (not of the registry's address, whose port is random). Each shard
            // noticed once, said so once, and analysed the rest here.
            assert!(!s["images"].as_array().unwrap().is_empty(), "{mode} {}", d.display());
            assert_eq!(stat(&s, "store_unreachable"), 1, "{mode} {}: {}", d.display(), s["stats"]);
            assert_eq!(err.matches("analysing locally").count(), 1, "{mode}: {err}");
            parts.push(d.join("summary.json"));
        }
        let merged = work.path().join(format!("{mode}.json"));
        let o =
            Command::cargo_bin("cudalint").unwrap().arg("merge").args(&parts).arg("-o").arg(&merged).output().unwrap();
        assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(text.contains("store: unreachable in 4 of 4 shards after "), "{text}");
        let m: serde_json::Value = serde_json::from_slice(&std::fs::read(&merged).unwrap()).unwrap();
        // The same verdicts as without a store; lookups reached it before it went (it went
        // away mid-run), and without it the shards analysed what they needed.
        assert_eq!(m["images"], summary(&plain)["images"], "{mode}");
        assert!(stat(&m, "store_lookups") >= 1, "{mode}: {}", m["stats"]);
        assert!(stat(&m, "layers_analysed") >= unique, "{mode}: {}", m["stats"]);
        assert!(proxy.requests.lock().unwrap().iter().any(|r| r.contains("/cudalint/analyses-")), "{mode}");
    }
}

/// The inventory statements attached to `repo`'s manifest `digest`, newest last: (the layer's
/// media type, the statement as its bytes, the envelope when signed).
fn statements(reg: &Registry, repo: &str, digest: &str) -> Vec<(String, Vec<u8>, Option<Vec<u8>>)> {
    let (st, index) =
        http(reg, "GET", &format!("/v2/{repo}/manifests/{}", digest.replace(':', "-")), "text/plain", b"");
    assert_eq!(st, 200);
    let index: serde_json::Value = serde_json::from_slice(&index).unwrap();
    let mut out = Vec::new();
    let inventory = "https://cudalint.dev/attestation/inventory/v1";
    let entries = index["manifests"].as_array().unwrap();
    for d in entries.iter().filter(|d| d["annotations"]["in-toto.io/predicate-type"] == inventory) {
        let (_, m) =
            http(reg, "GET", &format!("/v2/{repo}/manifests/{}", d["digest"].as_str().unwrap()), "text/plain", b"");
        let m: serde_json::Value = serde_json::from_slice(&m).unwrap();
        let layer = &m["layers"][0];
        let (st, blob) = http(reg, "GET", &format!("/v2/{repo}/blobs/{}", layer["digest"].as_str().unwrap()), "", b"");
        assert_eq!(st, 200);
        let media_type = layer["mediaType"].as_str().unwrap().to_string();
        if media_type == "application/vnd.dsse.envelope.v1+json" {
            let (payload_type, payload, _) = crate::signing::open_envelope(&blob);
            assert_eq!(payload_type, "application/vnd.in-toto+json");
            out.push((media_type, payload, Some(blob)));
        } else {
            out.push((media_type, blob, None));
        }
    }
    out
}

/// `statement` with every layer's analysis emptied (no file, so nothing to fail): what a pusher
/// who relabels another layer's analysis attaches. Its entries decode as this cudalint's.
fn forged_clean(statement: &[u8], variant: &str) -> Vec<u8> {
    forged(statement, variant, |_| {})
}

/// `statement` with every layer's analysis emptied and then changed by `also`, re-encoded as this
/// cudalint encodes entries.
fn forged(statement: &[u8], variant: &str, also: impl Fn(&mut cudalint::layer::AnalyzedLayer)) -> Vec<u8> {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut st: serde_json::Value = serde_json::from_slice(statement).unwrap();
    for e in st["predicate"]["layers"].as_array_mut().unwrap() {
        let digest = e["digest"].as_str().unwrap().to_string();
        let bytes = b64.decode(e["entry"].as_str().unwrap()).unwrap();
        let mut l = cudalint::cache::decode(&bytes[..], &digest, variant).expect("an honest entry decodes");
        l.summary.files.clear();
        also(&mut l);
        let forged = cudalint::cache::encode(&digest, variant, &l).unwrap().unwrap();
        e["entry"] = b64.encode(forged).into();
    }
    serde_json::to_vec(&st).unwrap()
}

/// Attaches `statement` (inventory) to `repo`'s manifest `digest`, signed with `key` if given.
fn attach(reg: &Registry, repo: &str, digest: &str, statement: &[u8], key: Option<&Path>) {
    use cudalint::image::attest;
    let remote = cudalint::registry::Remote::connect(
        cudalint::registry::parse_reference(&format!("{}/{repo}:x", reg.host())).unwrap(),
        &Default::default(),
    )
    .unwrap();
    let (_, m) = http(reg, "GET", &format!("/v2/{repo}/manifests/{digest}"), "text/plain", b"");
    let subject = attest::Subject {
        repository: repo.into(),
        digest: digest.into(),
        size: m.len(),
        media_type: "application/vnd.oci.image.manifest.v1+json".into(),
    };
    let signer = key.map(|k| cudalint::image::sign::Signer::from_pem_file(k).unwrap());
    attest::push(&remote, &subject, attest::PREDICATE_TYPE, statement, signer.as_ref()).unwrap();
}

#[test]
fn a_forged_inventory_attestation_decides_no_verdict() {
    let (reg, _layouts) = shared_layer_registry();
    let work = tempfile::tempdir().unwrap();
    let (key, public) = crate::signing::keypair(work.path(), "honest");
    let (other, _) = crate::signing::keypair(work.path(), "other");
    let (key, public, other) = (key.to_str().unwrap(), public.to_str().unwrap(), other.to_str().unwrap());
    let spec = format!("{}/scale/a:1", reg.host());
    let err = |o: &std::process::Output| String::from_utf8_lossy(&o.stderr).into_owned();
    let inv = work.path().join("inv.json");
    let inv_to = format!("inventory={}", inv.display());

    // Believing needs a key, or an explicit --trust-unsigned.
    let o = scan_cmd(&spec, &["--from-attestation", "--gpu", "H100"]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert!(err(&o).contains("--verify-key"), "{}", err(&o));

    // An honest unsigned attestation (scan --attest without a key), then a forged one beside it.
    let o = scan_cmd(&spec, &["--attest", "--gpu", "H100", "--format", &inv_to, "--format", "text=/dev/null"]);
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    let manifest =
        serde_json::from_slice::<serde_json::Value>(&std::fs::read(&inv).unwrap()).unwrap()["image"]["manifest_digest"]
            .as_str()
            .unwrap()
            .to_string();
    let honest = statements(&reg, "scale/a", &manifest);
    assert_eq!(honest.len(), 1);
    assert_eq!(honest[0].0, "application/vnd.in-toto+json", "unsigned: the statement as it is");
    let st: serde_json::Value = serde_json::from_slice(&honest[0].1).unwrap();
    let variant = st["predicate"]["variant"].as_str().unwrap().to_string();
    let forged = forged_clean(&honest[0].1, &variant);
    attach(&reg, "scale/a", &manifest, &forged, None);

    // Believing whatever is attached, the forged statement turns the failure into a pass.
    let o = scan_cmd(&spec, &["--from-attestation", "--trust-unsigned", "--gpu", "H100", "--format", "json"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(report.to_string().contains("--trust-unsigned"), "the report says what it believed: {report}");
    assert_eq!(report["image"]["attestation"]["signed"], false, "{}", report["image"]);
    let o = scan_cmd(&spec, &["--from-attestation", "--trust-unsigned", "--gpu", "H100", "--format", "text"]);
    let head = String::from_utf8_lossy(&o.stdout).lines().take(3).collect::<Vec<_>>().join("\n");
    assert!(head.contains("judged from attestation sha256:") && head.contains("UNSIGNED"), "{head}");

    // With a key and only unsigned statements: both passed over, the layers read, exit 1.
    let o = scan_cmd(&spec, &["--from-attestation", "--verify-key", public, "--gpu", "H100", "--format", "text"]);
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("it is not signed") && text.contains("its layers were read"), "{text}");

    // Signed by the honest key: believed, judged without pulling a layer; the forged statement,
    // unsigned or signed by another key, is passed over.
    let o = scan_cmd(&spec, &["--attest", "--sign-key", key, "--gpu", "H100", "-o", "/dev/null"]);
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    attach(&reg, "scale/a", &manifest, &forged, Some(Path::new(other)));
    let all = statements(&reg, "scale/a", &manifest);
    assert_eq!(all.len(), 4);
    let signed: Vec<_> = all.iter().filter_map(|(_, st, env)| env.as_ref().map(|e| (st, e))).collect();
    assert_eq!(signed.len(), 2);
    // The signature, checked by openssl over the DSSE encoding: the honest key signed the
    // honest statement (its body is the unsigned one's, but for the subject name) and not the
    // forged one.
    let verdicts: Vec<bool> = signed
        .iter()
        .map(|(st, env)| {
            let (payload_type, payload, sig) = crate::signing::open_envelope(env);
            assert_eq!(&&payload, st);
            crate::signing::openssl_verifies(Path::new(public), &payload_type, &payload, &sig)
        })
        .collect();
    assert_eq!(verdicts, [true, false]);
    let proxy = crate::registry::Proxy::start(reg.port);
    let via = format!("{}/scale/a:1", proxy.host());
    let o = scan_cmd(&via, &["--from-attestation", "--verify-key", public, "--gpu", "H100", "--format", "json"]);
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let notes = report["notes"].to_string();
    assert!(notes.contains("it is not signed") && notes.contains("does not verify"), "{notes}");
    assert_eq!(report["image"]["attestation"]["signed"], true, "{}", report["image"]);
    let pulled: serde_json::Value = serde_json::from_slice(&std::fs::read(&inv).unwrap()).unwrap();
    for l in pulled["image"]["layers"].as_array().unwrap() {
        assert_eq!(proxy.blob_gets(l["digest"].as_str().unwrap()), 0, "{:?}", proxy.requests.lock().unwrap());
    }

    // Two statements the honest key signed that disagree: no verdict (exit 2), naming both.
    attach(&reg, "scale/a", &manifest, &forged, Some(Path::new(key)));
    let o = scan_cmd(&via, &["--from-attestation", "--verify-key", public, "--gpu", "H100"]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert!(err(&o).contains("two signed cudalint attestations disagree"), "{}", err(&o));
}

/// scale/a attested honestly (unsigned), then a forged statement attached after it: every layer's
/// analysis emptied (a pass) and `notes` bytes of one byte added to its notes, hashing right.
/// Returns the registry (and its layouts), the image and the forged statement's size.
fn inflated_attestation(notes: usize) -> (Registry, Vec<tempfile::TempDir>, String, usize) {
    let (reg, layouts) = shared_layer_registry();
    let work = tempfile::tempdir().unwrap();
    let spec = format!("{}/scale/a:1", reg.host());
    let inv = work.path().join("inv.json");
    let inv_to = format!("inventory={}", inv.display());
    let o = scan_cmd(&spec, &["--attest", "--gpu", "H100", "--format", &inv_to, "--format", "text=/dev/null"]);
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
    let manifest =
        serde_json::from_slice::<serde_json::Value>(&std::fs::read(&inv).unwrap()).unwrap()["image"]["manifest_digest"]
            .as_str()
            .unwrap()
            .to_string();
    let honest = statements(&reg, "scale/a", &manifest);
    let st: serde_json::Value = serde_json::from_slice(&honest[0].1).unwrap();
    let variant = st["predicate"]["variant"].as_str().unwrap().to_string();
    let bomb = forged(&honest[0].1, &variant, |l| l.summary.notes.push("x".repeat(notes)));
    attach(&reg, "scale/a", &manifest, &bomb, None);
    (reg, layouts, spec, bomb.len())
}

/// `scan --from-attestation --trust-unsigned` of `spec` (H100, `extra`): its output and peak RSS
/// (KiB, as the process itself measured it).
fn scan_unsigned_peak(spec: &str, extra: &[&str]) -> (std::process::Output, u64) {
    let o = Command::cargo_bin("cudalint")
        .unwrap()
        .args(["scan", spec, "--quiet", "--no-cache", "--from-attestation", "--trust-unsigned", "--gpu", "H100"])
        .args(extra)
        .env("CUDALINT_STATS", "1")
        .timeout(Duration::from_secs(300))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    let line = stderr.lines().find(|l| l.starts_with("cudalint-stats:")).expect("a stats line");
    let rss = line.split("peak_rss=").nth(1).unwrap().trim_end_matches(" kB").trim().parse().unwrap();
    (o, rss)
}

/// A small statement whose entries decompress to far more than a layer's analysis may take (each
/// entry 160 MiB of notes, a few hundred KiB compressed) is refused as a whole, within the 256 MiB
/// bound, not inflated: believed unsigned, the older honest statement decides.
#[test]
fn an_attestation_whose_entries_inflate_past_the_bound_is_not_believed() {
    let (_reg, _layouts, spec, size) = inflated_attestation(160 << 20);
    assert!(size < 4 << 20, "{size} bytes");
    // Within the bound, the same statement without the notes would pass the gate (exit 0).
    let (o, rss) = scan_unsigned_peak(&spec, &[]);
    assert_eq!(o.status.code(), Some(1), "the honest statement decides: {}", String::from_utf8_lossy(&o.stderr));
    assert!(rss < 768 << 10, "peak RSS {rss} KiB");
}

/// A statement of a few KiB whose entries decompress to 200 MiB (each layer's analysis emptied,
/// its notes 100 MiB of one byte, hashing right): within the 256 MiB all entries may take, but
/// thousands of times its own size. Believed unsigned it judged the image (a pass) at a peak of
/// some 650 MiB; now its entries may take at most 64 times their size (at least 16 MiB), it is
/// passed over with a note saying so, and the honest statement decides (exit 1).
#[test]
fn a_small_attestation_that_inflates_thousandfold_is_passed_over_within_a_small_peak() {
    let (_reg, _layouts, spec, size) = inflated_attestation(100 << 20);
    assert!(size < 64 << 10, "{size} bytes");
    let (o, rss) = scan_unsigned_peak(&spec, &["--format", "json"]);
    assert_eq!(o.status.code(), Some(1), "the honest statement decides: {}", String::from_utf8_lossy(&o.stderr));
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let notes = report["notes"].to_string();
    assert!(
        notes.contains("passed over") && notes.contains("past the 16 MiB its entries may decompress to (64 times the"),
        "{notes}"
    );
    assert!(rss < 160 << 10, "peak RSS {rss} KiB");
}
