//! The registry's notifications: CNCF distribution's event envelope (its `notifications:
//! endpoints:` webhook, media type `application/vnd.docker.distribution.events.v1+json`, `v2`
//! from distribution 3 on; GitLab's container registry, a fork, posts the same). Only what a scan
//! needs is read: the action, the target's media type, digest, repository, URL and tag, and the
//! request's host. Which events become scans is decided here from the event alone, without
//! asking the registry anything, so the webhook answers at once.

use serde::Deserialize;

use crate::escape::text as esc;
use crate::registry::media::{DOCKER_MANIFEST, DOCKER_MANIFEST_LIST, MediaType};

/// One POST: one or more events, not necessarily related.
#[derive(Debug, Deserialize)]
pub struct Envelope {
    #[serde(default)]
    pub events: Vec<Event>,
}

/// Fields are optional as Go's `omitempty` leaves them out; `null` reads as absent.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Event {
    pub action: Option<String>,
    pub target: Target,
    pub request: RequestRecord,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Target {
    pub media_type: Option<String>,
    pub digest: Option<String>,
    pub repository: Option<String>,
    pub url: Option<String>,
    pub tag: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct RequestRecord {
    /// The Host header of the request that caused the event: the registry's name to its client.
    pub host: Option<String>,
}

/// The most an envelope may be: distribution sends a few KiB per event.
pub const MAX_BODY: usize = 1 << 20;

/// Reads a POSTed body as an envelope; the error says why it is not one.
pub fn parse(body: &[u8]) -> Result<Envelope, String> {
    let v: serde_json::Value = serde_json::from_slice(body).map_err(|e| format!("not JSON: {e}"))?;
    if !v.get("events").is_some_and(|e| e.is_array()) {
        return Err("not a registry event envelope: no \"events\" array".into());
    }
    serde_json::from_value(v).map_err(|e| format!("not a registry event envelope: {e}"))
}

/// A manifest to scan: `host/repository@digest`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, Deserialize)]
pub struct Job {
    pub host: String,
    pub repository: String,
    pub digest: String,
    /// The tag it was pushed under, for the log (none when pushed by digest).
    pub tag: Option<String>,
    /// Scans of it that failed so far (it is tried again, with a pause, a few times).
    #[serde(default)]
    pub attempts: u32,
}

impl Job {
    /// The registry reference cudalint reads it by; also its identity in the queue (one scan per
    /// manifest of a repository: attestations are pushed into the subject's repository).
    pub fn spec(&self) -> String {
        format!("{}/{}@{}", self.host, self.repository, self.digest)
    }

    /// Another manifest of the same repository: an image of a pushed index.
    pub fn with_digest(&self, digest: &str) -> Job {
        Job { digest: digest.to_string(), tag: None, attempts: 0, ..self.clone() }
    }

    /// How the log names it: the spec, and the tag it was pushed under.
    pub fn label(&self) -> String {
        match &self.tag {
            Some(t) => format!("{} (tag {})", esc(&self.spec()), esc(t)),
            None => esc(&self.spec()),
        }
    }
}

/// What becomes of one event.
#[derive(Debug, PartialEq, Eq)]
pub enum Decision {
    /// Not a manifest push (pulls, deletes, blob pushes and mounts): counted, not logged, as a
    /// registry sends many of them.
    Ignore,
    /// A manifest push that is not scanned, and why (logged).
    Skip(String),
    Scan(Job),
}

/// The manifest media types a scan reads (images, and indexes of them).
fn is_manifest_type(mt: &str) -> bool {
    [MediaType::ImageManifest.as_ref(), MediaType::ImageIndex.as_ref(), DOCKER_MANIFEST, DOCKER_MANIFEST_LIST]
        .contains(&mt)
}

/// The scan (or not) of `event`. `registry_url`: `--registry-url`, the registry as cudalint
/// reaches it, in place of the name the event gives.
pub fn decide(event: &Event, registry_url: Option<&str>) -> Decision {
    let t = &event.target;
    let mt = t.media_type.as_deref().unwrap_or_default();
    if event.action.as_deref() != Some("push") || !is_manifest_type(mt) {
        return match (event.action.as_deref(), mt) {
            // Schema 1 and unknown manifest types are manifests all the same: say why they are passed.
            (Some("push"), mt) if mt.contains("manifest") => Decision::Skip(format!(
                "{}: manifest type {} is not read by cudalint",
                esc(t.repository.as_deref().unwrap_or("?")),
                esc(mt)
            )),
            _ => Decision::Ignore,
        };
    }
    let repo = t.repository.as_deref().unwrap_or_default();
    let digest = t.digest.as_deref().unwrap_or_default();
    let named = || format!("{}@{}", esc(repo), esc(digest));
    // A signature's or the referrers schema's tag is not skipped here: a name proves nothing, the
    // worker reads the manifest and tells (an image pushed as `sha256-<hex>.sig` is scanned).
    let host = match registry_url.map(str::to_string).map_or_else(|| host_of(event), Ok) {
        Ok(h) => h,
        Err(e) => return Decision::Skip(format!("{}: {e}", named())),
    };
    let job = Job { host, repository: repo.to_string(), digest: digest.to_string(), tag: t.tag.clone(), attempts: 0 };
    match check(&job) {
        Ok(()) => Decision::Scan(job),
        Err(e) => Decision::Skip(format!("{}: {e}", named())),
    }
}

/// The registry's name as the event gives it: the host of the target's URL (distribution builds
/// it from its `http.host` setting, else from the request), else the request's Host header.
pub fn host_of(event: &Event) -> Result<String, String> {
    let from_url = event.target.url.as_deref().and_then(|u| reqwest::Url::parse(u).ok()).and_then(|u| {
        let host = u.host_str()?.to_string();
        Some(match u.port() {
            Some(p) => format!("{host}:{p}"),
            None => host,
        })
    });
    from_url
        .or_else(|| event.request.host.clone())
        .filter(|h| !h.is_empty())
        .ok_or_else(|| "the event names no registry host (no target URL, no request host): set --registry-url".into())
}

/// The job reads as the reference it means: a digest, a repository name, and a host that is a
/// registry (a bare word such as `registry` would be read as a Docker Hub repository).
fn check(job: &Job) -> Result<(), String> {
    crate::digest::parse(&job.digest).map_err(|e| e.to_string())?;
    if job.repository.is_empty() || job.host.contains(['/', '@']) || job.host.is_empty() {
        return Err(format!(
            "no image reference in host {:?} and repository {:?}",
            esc(&job.host),
            esc(&job.repository)
        ));
    }
    let r = crate::registry::parse_reference(&job.spec()).map_err(|e| e.to_string())?;
    if r.registry() != job.host || r.repository() != job.repository {
        return Err(format!(
            "{} would be read as {}/{}: name the registry as HOST:PORT or by a dotted name (--registry-url)",
            esc(&job.spec()),
            esc(r.registry()),
            esc(r.repository())
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:4f1a8a2b8d3e8d4a9b1c7f6e5d4c3b2a1f0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c";

    /// An envelope as distribution 2.8 posts it (fields abridged: id, timestamp, actor, source).
    fn envelope(action: &str, mt: &str, tag: Option<&str>) -> String {
        let tag = tag.map(|t| format!(r#""tag": "{t}","#)).unwrap_or_default();
        format!(
            r#"{{"events": [{{
               "id": "3c8f0c2e", "timestamp": "2025-01-01T00:00:00Z", "action": "{action}",
               "target": {{"mediaType": "{mt}", "size": 528, "digest": "{D}", "length": 528,
                 "repository": "team/app", {tag}
                 "url": "http://registry.example:5000/v2/team/app/manifests/{D}"}},
               "request": {{"id": "r1", "addr": "10.0.0.9:5123", "host": "127.0.0.1:5000", "method": "PUT",
                 "useragent": "skopeo"}},
               "actor": {{}}, "source": {{"addr": "node:5000", "instanceID": "i1"}}
            }}]}}"#
        )
    }

    fn one(text: &str, url: Option<&str>) -> Decision {
        let e = parse(text.as_bytes()).unwrap();
        assert_eq!(e.events.len(), 1);
        decide(&e.events[0], url)
    }

    #[test]
    fn a_manifest_push_is_scanned_at_the_host_its_url_names_unless_overridden() {
        let oci = MediaType::ImageManifest.to_string();
        let Decision::Scan(j) = one(&envelope("push", &oci, Some("1")), None) else { panic!() };
        assert_eq!(j.spec(), format!("registry.example:5000/team/app@{D}"));
        assert_eq!(j.tag.as_deref(), Some("1"));
        let Decision::Scan(j) = one(&envelope("push", DOCKER_MANIFEST_LIST, None), Some("reg.internal:443")) else {
            panic!()
        };
        assert_eq!(j.spec(), format!("reg.internal:443/team/app@{D}"));
        // No URL: the request's Host.
        let text = envelope("push", &oci, None).replace("http://registry.example:5000/v2/team/app/manifests/", "");
        let Decision::Scan(j) = one(&text, None) else { panic!() };
        assert_eq!(j.host, "127.0.0.1:5000");
    }

    #[test]
    fn pulls_deletes_and_blobs_are_ignored_and_artifact_tags_read() {
        let oci = MediaType::ImageManifest.to_string();
        assert_eq!(one(&envelope("pull", &oci, Some("1")), None), Decision::Ignore);
        assert_eq!(one(&envelope("delete", "", None), None), Decision::Ignore);
        assert_eq!(one(&envelope("push", "application/octet-stream", None), None), Decision::Ignore);
        assert_eq!(
            one(&envelope("mount", "application/vnd.oci.image.layer.v1.tar+gzip", None), None),
            Decision::Ignore
        );
        let schema1 = "application/vnd.docker.distribution.manifest.v1+prettyjws";
        assert!(matches!(one(&envelope("push", schema1, None), None), Decision::Skip(w) if w.contains("not read")));
        // Signature and referrers tags are read like any other: the manifest tells (the worker).
        let hex = "a".repeat(64);
        for tag in [format!("sha256-{hex}"), format!("sha256-{hex}.sig"), "sha256-latest".into()] {
            assert!(matches!(one(&envelope("push", &oci, Some(&tag)), None), Decision::Scan(_)), "{tag}");
        }
    }

    #[test]
    fn events_that_name_no_usable_reference_are_skipped_with_the_reason() {
        let oci = MediaType::ImageManifest.to_string();
        let no_host = envelope("push", &oci, None)
            .replace("http://registry.example:5000/v2/team/app/manifests/", "")
            .replace("\"host\": \"127.0.0.1:5000\",", "");
        assert!(matches!(one(&no_host, None), Decision::Skip(w) if w.contains("--registry-url")));
        // A bare word would be Docker Hub's `registry/team/app`.
        assert!(
            matches!(one(&envelope("push", &oci, None), Some("registry")), Decision::Skip(w) if w.contains("would be read as"))
        );
        let bad = envelope("push", &oci, None).replace(D, "sha256:nothex");
        assert!(matches!(one(&bad, None), Decision::Skip(_)));
    }

    #[test]
    fn what_is_not_an_envelope_is_an_error_never_a_panic() {
        for body in ["", "{", "[]", "{\"events\": 3}", "{\"events\": [{\"action\": 5}]}", "\u{0}\u{1}"] {
            assert!(parse(body.as_bytes()).is_err(), "{body:?}");
        }
        assert!(parse(b"{\"events\": []}").unwrap().events.is_empty());
        // Nulls and unknown fields are tolerated.
        let e = parse(br#"{"events": [{"action": "push", "target": {"tag": null, "extra": 1}}]}"#).unwrap();
        assert_eq!(decide(&e.events[0], None), Decision::Ignore);
    }
}
