//! What `/metrics` says, in the Prometheus text format (version 0.0.4): counters since start,
//! and the queue and the last scan as gauges.

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Default)]
pub struct Metrics {
    pub events_received: AtomicU64,
    pub events_ignored: AtomicU64,
    pub events_deduplicated: AtomicU64,
    pub events_rejected: AtomicU64,
    /// Events naming another registry host than --registry-url (read from it all the same).
    pub events_other_host: AtomicU64,
    pub skipped: AtomicU64,
    pub scans_pass: AtomicU64,
    pub scans_fail: AtomicU64,
    pub scans_failed: AtomicU64,
    /// Failed jobs queued again after a pause, and jobs given up on after their last attempt.
    pub retries: AtomicU64,
    pub abandoned: AtomicU64,
    /// Jobs a previous run accepted and did not finish, queued again at start (`--state-dir`).
    pub replayed: AtomicU64,
    pub attestations: AtomicU64,
    pub running: AtomicU64,
    /// Seconds of the last finished scan and when it finished (Unix time), as f64 bits.
    pub last_scan_seconds: AtomicU64,
    pub last_scan_time: AtomicU64,
    /// Idle connections closed to make room for a new one (docs/serve.md, "Connections").
    pub connections_shed: AtomicU64,
    /// New connections closed at once: every connection held was answering a request.
    pub connections_refused: AtomicU64,
    /// Requests without the token answered 503: the share they may take was in use.
    pub requests_refused: AtomicU64,
    /// Webhook answers by status code, in the order of [`CODES`].
    pub responses: [AtomicU64; CODES.len()],
}

/// The status codes the webhook answers with.
pub const CODES: [u16; 8] = [200, 400, 401, 404, 405, 408, 413, 503];

pub fn add(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

pub fn add_n(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

impl Metrics {
    pub fn answered(&self, code: u16) {
        if let Some(i) = CODES.iter().position(|&c| c == code) {
            add(&self.responses[i]);
        }
    }

    pub fn scan_took(&self, seconds: f64) {
        self.last_scan_seconds.store(seconds.to_bits(), Ordering::Relaxed);
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
        self.last_scan_time.store(now.to_bits(), Ordering::Relaxed);
    }

    /// The page; `queued`: jobs waiting now; `pending`: jobs in the journal not done
    /// (`--state-dir`); `open`: connections held now.
    pub fn render(&self, queued: usize, pending: Option<usize>, open: usize) -> String {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let float = |c: &AtomicU64| f64::from_bits(get(c));
        let mut o = String::new();
        let mut family = |name: &str, kind: &str, help: &str, samples: &[(&str, String)]| {
            o.push_str(&format!("# HELP cudalint_serve_{name} {help}\n# TYPE cudalint_serve_{name} {kind}\n"));
            for (labels, v) in samples {
                o.push_str(&format!("cudalint_serve_{name}{labels} {v}\n"));
            }
        };
        let one = |v: u64| [("", v.to_string())];
        family(
            "events_received_total",
            "counter",
            "Registry events received (every action).",
            &one(get(&self.events_received)),
        );
        family(
            "events_ignored_total",
            "counter",
            "Events that are not a manifest push (pulls, deletes, blob pushes and mounts).",
            &one(get(&self.events_ignored)),
        );
        family(
            "events_deduplicated_total",
            "counter",
            "Manifests already queued, being scanned, or scanned lately by this process (pushed again, or images of a pushed index).",
            &one(get(&self.events_deduplicated)),
        );
        family(
            "events_rejected_total",
            "counter",
            "Manifest pushes refused because the queue was full (answered 503; the registry resends).",
            &one(get(&self.events_rejected)),
        );
        family(
            "events_other_host_total",
            "counter",
            "Manifest pushes whose event names another registry host than --registry-url (the manifest is read from --registry-url; nothing is sent to the host named).",
            &one(get(&self.events_other_host)),
        );
        family(
            "manifests_skipped_total",
            "counter",
            "Pushed manifests not scanned: not an image (artifacts, signatures, attestations), or no platform asked for.",
            &one(get(&self.skipped)),
        );
        family(
            "scans_done_total",
            "counter",
            "Images scanned and judged, by verdict (fail: a finding at --fail-on).",
            &[
                ("{verdict=\"pass\"}", get(&self.scans_pass).to_string()),
                ("{verdict=\"fail\"}", get(&self.scans_fail).to_string()),
            ],
        );
        family(
            "scans_failed_total",
            "counter",
            "Images that could not be scanned, judged or attested (the log says why).",
            &one(get(&self.scans_failed)),
        );
        family(
            "scan_retries_total",
            "counter",
            "Failed jobs queued again after a pause (each is tried 3 times in all).",
            &one(get(&self.retries)),
        );
        family(
            "scans_abandoned_total",
            "counter",
            "Jobs given up on after their last attempt (with --state-dir, recorded in failed.jsonl).",
            &one(get(&self.abandoned)),
        );
        family(
            "jobs_replayed_total",
            "counter",
            "Jobs accepted before a restart and not finished then, queued again at start (--state-dir).",
            &one(get(&self.replayed)),
        );
        family(
            "attestations_pushed_total",
            "counter",
            "Images whose attestations (--attest) were pushed.",
            &one(get(&self.attestations)),
        );
        family(
            "connections_shed_total",
            "counter",
            "Idle connections (no request, or one not yet sent whole) closed to make room for a new one: the longest idle first, those that never sent the token before those that did.",
            &one(get(&self.connections_shed)),
        );
        family(
            "connections_refused_total",
            "counter",
            "New connections closed at once because every connection held was answering a request.",
            &one(get(&self.connections_refused)),
        );
        family(
            "requests_refused_total",
            "counter",
            "Requests answered 503 (and their connection closed): requests without the token, GET /healthz aside, held their whole share of the connections, or the connection had just been closed to make room.",
            &one(get(&self.requests_refused)),
        );
        let codes: Vec<(String, String)> =
            CODES.iter().zip(&self.responses).map(|(c, n)| (format!("{{code=\"{c}\"}}"), get(n).to_string())).collect();
        let codes: Vec<(&str, String)> = codes.iter().map(|(l, v)| (l.as_str(), v.clone())).collect();
        family("webhook_responses_total", "counter", "Answers to POST /events, by status code.", &codes);
        family("queue_depth", "gauge", "Images waiting for a worker.", &one(queued as u64));
        family("scans_running", "gauge", "Images being scanned now.", &one(get(&self.running)));
        family("connections_open", "gauge", "Connections held now (at most 256).", &one(open as u64));
        if let Some(p) = pending {
            family(
                "jobs_pending",
                "gauge",
                "Jobs accepted and not finished (waiting, running or waiting to be retried), as the journal holds them.",
                &one(p as u64),
            );
        }
        family(
            "last_scan_seconds",
            "gauge",
            "How long the last finished scan took (0: none yet).",
            &[("", float(&self.last_scan_seconds).to_string())],
        );
        family(
            "last_scan_timestamp_seconds",
            "gauge",
            "When the last scan finished (Unix time; 0: none yet).",
            &[("", float(&self.last_scan_time).to_string())],
        );
        o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_is_prometheus_text_with_every_family_typed() {
        let m = Metrics::default();
        add(&m.events_received);
        add(&m.scans_fail);
        m.answered(401);
        m.answered(999);
        m.scan_took(1.5);
        let page = m.render(3, Some(2), 5);
        for line in [
            "cudalint_serve_events_received_total 1",
            "cudalint_serve_scans_done_total{verdict=\"pass\"} 0",
            "cudalint_serve_scans_done_total{verdict=\"fail\"} 1",
            "cudalint_serve_webhook_responses_total{code=\"401\"} 1",
            "cudalint_serve_queue_depth 3",
            "cudalint_serve_jobs_pending 2",
            "cudalint_serve_connections_open 5",
            "cudalint_serve_last_scan_seconds 1.5",
        ] {
            assert!(page.lines().any(|l| l == line), "{line}\n{page}");
        }
        // Every sample belongs to a family declared with HELP and TYPE just before it.
        let mut declared = std::collections::HashSet::new();
        for l in page.lines() {
            if let Some(rest) = l.strip_prefix("# TYPE ") {
                declared.insert(rest.split(' ').next().unwrap().to_string());
            } else if !l.starts_with('#') {
                let name = l.split(['{', ' ']).next().unwrap();
                assert!(declared.contains(name), "{l}");
                let value = l.rsplit(' ').next().unwrap();
                assert!(value.parse::<f64>().is_ok(), "{l}");
            }
        }
    }
}
