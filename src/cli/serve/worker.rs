//! A worker: takes a pushed manifest off the queue, reads it (manifest only) to tell images from
//! everything else a registry holds, and scans, judges and attests each image exactly as `scan
//! --attest` does (`crate::image::scan`, `Policy::judge`, the support attestation).

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::Value;

use super::event::Job;
use super::journal::Journal;
use super::metrics::{Metrics, add};
use super::queue::Queue;
use crate::escape::text as esc;
use crate::image::{Platform, ScanOptions};
use crate::lint::policy::Policy;
use crate::registry::media::{self, DOCKER_MANIFEST, MediaType};
use crate::registry::{Remote, parse_reference};

/// What a pushed manifest is.
#[derive(Debug, PartialEq, Eq)]
pub enum Kind {
    Image,
    /// An index: its image manifests (digest, platform); the entries that are not images left out.
    Index(Vec<(String, Option<Platform>)>),
    /// Anything else, and what it is instead.
    NotImage(String),
}

/// Whether `manifest` (the bytes the registry holds, pushed under `tag`) is an image, an index
/// of images, or neither: told exactly as `cudalint registry` tells it
/// ([`media::not_an_image`]: artifact types, configs, layers, and an empty index by its tag
/// schema), so that an image pushed under a signature's tag name is scanned all the same.
pub fn classify(manifest: &[u8], tag: Option<&str>) -> Kind {
    let s = |v: &Value, p: &str| v.pointer(p).and_then(Value::as_str).map(str::to_string);
    let Ok(v) = serde_json::from_slice::<Value>(manifest) else {
        return Kind::NotImage("a manifest that is not JSON".into());
    };
    if let Some(n) = media::not_an_image(manifest, tag) {
        return Kind::NotImage(esc(&n.to_string()));
    }
    let Some(list) = v.get("manifests").and_then(Value::as_array) else { return Kind::Image };
    let images: Vec<(String, Option<Platform>)> = list
        .iter()
        .filter(|d| {
            let mt = s(d, "/mediaType").unwrap_or_default();
            (mt == MediaType::ImageManifest.as_ref() || mt == DOCKER_MANIFEST) && media::is_image_entry(d)
        })
        .filter_map(|d| {
            let platform = match (s(d, "/platform/os"), s(d, "/platform/architecture")) {
                (Some(os), Some(arch)) => Some(Platform { os, arch, variant: s(d, "/platform/variant") }),
                _ => None,
            };
            Some((s(d, "/digest")?, platform))
        })
        .collect();
    if images.is_empty() {
        // Nested indexes and unknown entry types: an index cudalint reads no image from.
        return Kind::NotImage(format!("an index of no image ({} entries)", list.len()));
    }
    Kind::Index(images)
}

/// What every worker shares.
pub struct Scanner {
    pub policy: Policy,
    pub opts: ScanOptions,
    /// `--platform`: the platforms scanned (empty: all).
    pub platforms: Vec<Platform>,
    pub queue: Arc<Queue<Job>>,
    pub metrics: Arc<Metrics>,
    /// `--state-dir`: where accepted jobs are kept until done.
    pub journal: Option<Arc<Journal>>,
    /// `--retry-pause`: before the first retry; each next one is four times longer.
    pub retry_pause: Duration,
}

/// Scans of one job before it is given up on (reported in /metrics and `failed.jsonl`).
const ATTEMPTS: u32 = 3;

/// How one image's scan ended.
struct Verdict {
    failed: bool,
    findings: usize,
}

impl Scanner {
    /// Takes jobs until the queue closes.
    pub fn work(&self) {
        while let Some((key, job)) = self.queue.take() {
            match self.job(&job) {
                Ok(()) => {
                    self.queue.finish(&key, true);
                    if let Some(j) = &self.journal {
                        j.done(&key, true);
                    }
                }
                Err(e) => {
                    self.queue.finish(&key, false);
                    self.retry_or_give_up(key, job, e);
                }
            }
        }
    }

    /// A failed job is queued again after a pause that grows, [`ATTEMPTS`] times in all; then
    /// it is given up on, counted and recorded. (It stays in the journal meanwhile: a restart
    /// replays it.)
    fn retry_or_give_up(&self, key: String, mut job: Job, error: String) {
        job.attempts += 1;
        if job.attempts < ATTEMPTS {
            add(&self.metrics.retries);
            let pause = self.retry_pause * 4u32.pow(job.attempts - 1);
            let queue = self.queue.clone();
            std::thread::spawn(move || {
                std::thread::sleep(pause);
                queue.restore(key, job);
            });
            return;
        }
        eprintln!("cudalint serve: gave up on {} after {} attempts: {}", job.label(), job.attempts, esc(&error));
        if let Some(j) = &self.journal {
            j.failed(&job, job.attempts, &error);
            j.done(&key, false);
        }
        add(&self.metrics.abandoned);
    }

    fn skip(&self, label: &str, why: &str) {
        add(&self.metrics.skipped);
        eprintln!("cudalint serve: skipped: {label}: {why}");
    }

    fn wanted(&self, p: Option<&Platform>) -> bool {
        self.platforms.is_empty() || p.is_some_and(|p| self.platforms.iter().any(|c| c.accepts(p)))
    }

    /// One pushed manifest. Ok when it is settled (scanned, or no image to scan), so that more
    /// events naming it are duplicates; else why it failed (it is tried again).
    fn job(&self, job: &Job) -> Result<(), String> {
        let label = job.label();
        let kind = match self.read(job) {
            Ok(k) => k,
            Err(e) => {
                add(&self.metrics.scans_failed);
                let e = format!("{e:#}");
                eprintln!("cudalint serve: error: {label}: {}", esc(&e));
                return Err(e);
            }
        };
        match kind {
            (Kind::NotImage(why), _) => {
                self.skip(&label, &format!("not an image ({why})"));
                Ok(())
            }
            (Kind::Image, platform) if !self.wanted(platform.as_ref()) => {
                let p = platform.map_or_else(|| "an unknown platform".into(), |p| p.to_string());
                self.skip(&label, &format!("an image for {}, not a --platform asked for", esc(&p)));
                Ok(())
            }
            (Kind::Image, _) => self.scan(job, &label),
            (Kind::Index(images), _) => {
                let chosen: Vec<&(String, Option<Platform>)> =
                    images.iter().filter(|(_, p)| self.wanted(p.as_ref())).collect();
                if chosen.is_empty() {
                    self.skip(&label, "an index with no image for the --platform asked for");
                    return Ok(());
                }
                let mut settled = Ok(());
                for (digest, platform) in chosen {
                    // Its images are pushed (and their events sent) before it: most are queued,
                    // being scanned or done already.
                    let image = job.with_digest(digest);
                    let p = platform.as_ref().map_or_else(|| "an image".into(), |p| p.to_string());
                    let image_label = format!("{} ({} of {label})", esc(&image.spec()), esc(&p));
                    if !self.queue.claim(&image.spec()) {
                        add(&self.metrics.events_deduplicated);
                        continue;
                    }
                    let r = self.scan(&image, &image_label);
                    self.queue.finish(&image.spec(), r.is_ok());
                    settled = settled.and(r);
                }
                settled
            }
        }
    }

    /// The manifest and what it is; the platform of an image when --platform chooses.
    fn read(&self, job: &Job) -> anyhow::Result<(Kind, Option<Platform>)> {
        let reference = parse_reference(&job.spec())?;
        let remote = Remote::connect(reference.clone(), &self.opts.registry)?;
        let (manifest, _) = remote.manifest(&reference)?;
        let kind = classify(&manifest, job.tag.as_deref());
        if kind != Kind::Image || self.platforms.is_empty() {
            return Ok((kind, None));
        }
        let v: Value = serde_json::from_slice(&manifest)?;
        let config =
            v.pointer("/config/digest").and_then(Value::as_str).context("an image manifest without a config")?;
        let c: Value = serde_json::from_slice(&remote.small_blob(config)?).context("its image config")?;
        let s = |k: &str| c.get(k).and_then(Value::as_str).map(str::to_string);
        let platform = match (s("os"), s("architecture")) {
            (Some(os), Some(arch)) => Some(Platform { os, arch, variant: s("variant") }),
            _ => None,
        };
        Ok((kind, platform))
    }

    /// Scans, judges and attests one image; else why not.
    fn scan(&self, job: &Job, label: &str) -> Result<(), String> {
        eprintln!("cudalint serve: scanning {label}");
        add(&self.metrics.running);
        let started = Instant::now();
        let spec = job.spec();
        // A scan that panics (a bug, a hostile image) costs that image, not the worker.
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.judge(&spec)))
            .unwrap_or_else(|_| Err(anyhow::anyhow!("the scan panicked")));
        self.metrics.running.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        let took = started.elapsed().as_secs_f64();
        self.metrics.scan_took(took);
        match r {
            Ok(v) => {
                add(if v.failed { &self.metrics.scans_fail } else { &self.metrics.scans_pass });
                if self.opts.attest {
                    add(&self.metrics.attestations);
                }
                eprintln!(
                    "cudalint serve: {label}: {} ({} findings{}) in {took:.1} s",
                    if v.failed { "fails" } else { "passes" },
                    v.findings,
                    if self.opts.attest { ", attestation pushed" } else { "" }
                );
                Ok(())
            }
            Err(e) => {
                add(&self.metrics.scans_failed);
                let e = format!("{e:#}");
                eprintln!("cudalint serve: error: {label}: {}", esc(&e));
                Err(e)
            }
        }
    }

    /// `scan --attest`'s path: the scan (which pushes the inventory attestation), the verdict,
    /// and the support matrix beside it.
    fn judge(&self, spec: &str) -> anyhow::Result<Verdict> {
        let inventory = crate::image::scan(spec, &self.opts)?;
        let report = self.policy.judge(&inventory, &self.policy.targets, None)?;
        if self.opts.attest {
            match crate::lint::support::support(&self.policy, spec, &inventory) {
                Ok((support, _)) => crate::cli::support::attach(spec, &self.opts, &inventory, &support)?,
                Err(e @ crate::lint::support::SupportError::NothingToJudge) => {
                    eprintln!("cudalint serve: note: {}: no support attestation pushed: {e}", esc(spec))
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(Verdict { failed: report.failed, findings: report.findings.len() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(v: Value) -> Vec<u8> {
        serde_json::to_vec(&v).unwrap()
    }

    const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

    #[test]
    fn images_and_indexes_of_them_are_told_from_artifacts() {
        let c = |m: &[u8]| classify(m, Some("1"));
        let image = |config: &str, layer: &str| {
            json(serde_json::json!({"schemaVersion": 2, "mediaType": OCI_MANIFEST,
                "config": {"mediaType": config, "digest": "sha256:1", "size": 1},
                "layers": [{"mediaType": layer, "digest": "sha256:2", "size": 2}]}))
        };
        let oci_config = "application/vnd.oci.image.config.v1+json";
        let not_image = |k: Kind| match k {
            Kind::NotImage(why) => why,
            k => panic!("{k:?}"),
        };
        assert_eq!(c(&image(oci_config, "application/vnd.oci.image.layer.v1.tar+gzip")), Kind::Image);
        let docker = image(
            "application/vnd.docker.container.image.v1+json",
            "application/vnd.docker.image.rootfs.diff.tar.gzip",
        );
        assert_eq!(c(&docker), Kind::Image);
        let helm =
            image("application/vnd.cncf.helm.config.v1+json", "application/vnd.cncf.helm.chart.content.v1.tar+gzip");
        assert_eq!(not_image(c(&helm)), "Helm chart, application/vnd.cncf.helm.config.v1+json");
        let cosign = image(oci_config, "application/vnd.dev.cosign.simplesigning.v1+json");
        assert_eq!(not_image(c(&cosign)), "cosign signature, application/vnd.dev.cosign.simplesigning.v1+json");
        let mut sbom: Value =
            serde_json::from_slice(&image("application/vnd.oci.empty.v1+json", "text/spdx+json")).unwrap();
        sbom["artifactType"] = "application/spdx+json".into();
        assert_eq!(not_image(c(&json(sbom))), "SBOM, application/spdx+json");
        assert!(matches!(c(b"not json"), Kind::NotImage(_)));
        // A tag name proves nothing: an image pushed as a signature's tag is scanned; an empty
        // index under the referrers tag schema is not an image.
        let sig = format!("sha256-{}.sig", "a".repeat(64));
        assert_eq!(
            classify(&image(oci_config, "application/vnd.oci.image.layer.v1.tar+gzip"), Some(&sig)),
            Kind::Image
        );
        let empty = json(serde_json::json!({"schemaVersion": 2, "manifests": []}));
        assert!(matches!(classify(&empty, Some(&sig[..71])), Kind::NotImage(_)));
        assert!(matches!(classify(&empty, Some("1")), Kind::NotImage(w) if w.contains("no image")));

        // BuildKit's index: two images and their attestation manifests.
        let index = json(serde_json::json!({"schemaVersion": 2, "manifests": [
            {"mediaType": OCI_MANIFEST, "digest": "sha256:a", "size": 1, "platform": {"os": "linux", "architecture": "amd64"}},
            {"mediaType": OCI_MANIFEST, "digest": "sha256:b", "size": 1, "platform": {"os": "linux", "architecture": "arm64", "variant": "v8"}},
            {"mediaType": OCI_MANIFEST, "digest": "sha256:c", "size": 1, "platform": {"os": "unknown", "architecture": "unknown"},
             "annotations": {"vnd.docker.reference.type": "attestation-manifest", "vnd.docker.reference.digest": "sha256:a"}},
        ]}));
        let Kind::Index(images) = c(&index) else { panic!() };
        let got: Vec<(&str, String)> =
            images.iter().map(|(d, p)| (d.as_str(), p.as_ref().unwrap().to_string())).collect();
        assert_eq!(got, [("sha256:a", "linux/amd64".to_string()), ("sha256:b", "linux/arm64/v8".to_string())]);
        // The referrers tag schema's index that --attest writes: artifacts only.
        let referrers = json(
            serde_json::json!({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [{"mediaType": OCI_MANIFEST, "digest": "sha256:d", "size": 1, "artifactType": "application/vnd.in-toto+json"}]}),
        );
        assert_eq!(not_image(c(&referrers)), "index of in-toto attestations, application/vnd.in-toto+json");
    }
}
