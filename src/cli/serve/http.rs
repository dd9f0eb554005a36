//! The HTTP side: `POST /events` (the registry's webhook), `GET /healthz`, `GET /metrics`. The
//! webhook only parses, checks and queues, so the registry, which waits for the answer within
//! its endpoint's `timeout`, is answered at once; scans run in the workers.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};

use super::budget::{Budget, Class, Refused, Ticket, UNPROVEN};
use super::event::{self, Decision, Job, MAX_BODY};
use super::metrics::{Metrics, add};
use super::queue::{Offer, Queue};

/// What the handlers share.
pub struct App {
    pub queue: Arc<Queue<Job>>,
    pub metrics: Arc<Metrics>,
    /// `--token`: the bearer token the registry must send.
    pub token: Option<String>,
    /// `--registry-url`.
    pub registry_url: Option<String>,
    /// `--state-dir`: accepted jobs are recorded here before the 200.
    pub journal: Option<Arc<super::journal::Journal>>,
    /// Held while one envelope's jobs are journaled and queued.
    pub accepting: std::sync::Mutex<()>,
    /// The connections held (for /metrics).
    pub budget: Budget,
}

/// How long a client may take to send a body of at most [`MAX_BODY`].
const BODY_TIMEOUT: Duration = Duration::from_secs(30);

type Reply = Response<Full<Bytes>>;

fn reply(code: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Reply {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = code;
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_str(content_type).expect("ascii"));
    r
}

fn text(code: StatusCode, body: impl Into<String>) -> Reply {
    let mut b = body.into();
    b.push('\n');
    reply(code, "text/plain; charset=utf-8", b)
}

/// What a request is, by its head: the probe, the registry (its token), anyone else.
fn class(app: &App, req: &Request<Incoming>) -> Class {
    if req.uri().path() == "/healthz" && matches!(*req.method(), Method::GET | Method::HEAD) {
        Class::Probe
    } else if app.token.as_deref().is_some_and(|t| authorized(req, t)) {
        Class::Token
    } else {
        Class::Other
    }
}

/// One request of the connection `ticket` holds: answered if the budget has room for its class
/// (always for the probe and the token), else 503 and the connection closed. The connection is
/// busy (never shed) while the answer is made; hyper writes a made answer out in the same poll
/// of the connection, before a shed can close it (that takes effect at its next poll), so no
/// answer is cut off, and a client that does not read its answers is idle, and shed.
pub async fn respond(app: Arc<App>, ticket: Arc<Ticket>, req: Request<Incoming>) -> Result<Reply, Infallible> {
    let _busy = match ticket.begin(class(&app, &req)) {
        Ok(b) => b,
        Err(why) => {
            add(&app.metrics.requests_refused);
            let why = match why {
                Refused::Full => format!("busy: {UNPROVEN} requests without the token are being answered; try again"),
                Refused::Shed => "busy: this connection is being closed to make room; try again".to_string(),
            };
            let mut r = text(StatusCode::SERVICE_UNAVAILABLE, why);
            r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            r.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
            return Ok(r);
        }
    };
    handle(app, req).await
}

async fn handle(app: Arc<App>, req: Request<Incoming>) -> Result<Reply, Infallible> {
    let path = req.uri().path().to_string();
    let r = match (path.as_str(), req.method()) {
        ("/healthz", &Method::GET | &Method::HEAD) => text(StatusCode::OK, "ok"),
        ("/metrics", &Method::GET) => reply(
            StatusCode::OK,
            "text/plain; version=0.0.4; charset=utf-8",
            app.metrics.render(app.queue.depth(), app.journal.as_ref().map(|j| j.pending()), app.budget.open()),
        ),
        ("/events", &Method::POST) => {
            let r = events(&app, req).await;
            app.metrics.answered(r.status().as_u16());
            r
        }
        ("/healthz" | "/metrics" | "/events", _) => {
            let allow = if path == "/events" { "POST" } else { "GET, HEAD" };
            let mut r = text(StatusCode::METHOD_NOT_ALLOWED, format!("{path}: {allow} only"));
            r.headers_mut().insert(header::ALLOW, HeaderValue::from_static(allow));
            r
        }
        _ => text(StatusCode::NOT_FOUND, "not found: POST /events, GET /healthz, GET /metrics"),
    };
    Ok(r)
}

/// The token compared in time independent of where it differs.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Whether the request carries `Authorization: Bearer TOKEN` (the scheme in any case).
fn authorized(req: &Request<Incoming>, token: &str) -> bool {
    req.headers().get_all(header::AUTHORIZATION).iter().any(|v| {
        let v = v.as_bytes();
        v.len() > 7 && v[..7].eq_ignore_ascii_case(b"bearer ") && same(v[7..].trim_ascii(), token.as_bytes())
    })
}

async fn events(app: &Arc<App>, req: Request<Incoming>) -> Reply {
    if let Some(t) = &app.token
        && !authorized(&req, t)
    {
        let mut r = text(StatusCode::UNAUTHORIZED, "a bearer token is required (Authorization: Bearer TOKEN)");
        r.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer realm=\"cudalint serve\""));
        return r;
    }
    let declared = req.headers().get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    let too_large = || {
        let mut r = text(StatusCode::PAYLOAD_TOO_LARGE, format!("an event envelope is at most {MAX_BODY} bytes"));
        // The rest of the body is not read: the connection cannot carry another request.
        r.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
        r
    };
    if declared.is_some_and(|n| n > MAX_BODY as u64) {
        return too_large();
    }
    let body = match tokio::time::timeout(BODY_TIMEOUT, Limited::new(req.into_body(), MAX_BODY).collect()).await {
        Err(_) => return text(StatusCode::REQUEST_TIMEOUT, "the body did not arrive in time"),
        Ok(Err(e)) if e.is::<LengthLimitError>() => return too_large(),
        Ok(Err(e)) => return text(StatusCode::BAD_REQUEST, format!("reading the body: {e}")),
        Ok(Ok(b)) => b.to_bytes(),
    };
    let envelope = match event::parse(&body) {
        Ok(e) => e,
        Err(e) => return text(StatusCode::BAD_REQUEST, e),
    };
    let m = &app.metrics;
    let (mut ignored, mut skipped) = (0, 0);
    let mut scans = Vec::new();
    for e in &envelope.events {
        add(&m.events_received);
        match event::decide(e, app.registry_url.as_deref()) {
            Decision::Ignore => {
                add(&m.events_ignored);
                ignored += 1;
            }
            Decision::Skip(why) => {
                add(&m.skipped);
                skipped += 1;
                eprintln!("cudalint serve: skipped: {why}");
            }
            Decision::Scan(job) => {
                // Read from --registry-url all the same (no credential goes where an event
                // points), but counted: a pusher naming other hosts shows in /metrics.
                if let Some(u) = &app.registry_url
                    && event::host_of(e).is_ok_and(|h| !h.eq_ignore_ascii_case(u))
                {
                    add(&m.events_other_host);
                }
                scans.push(job)
            }
        }
    }
    let accepted = {
        let app = app.clone();
        // Blocking (the journal syncs to disk): off the threads that answer /healthz.
        tokio::task::spawn_blocking(move || accept(&app, scans)).await
    };
    let (queued, duplicate, full) = match accepted {
        Ok(Ok(counts)) => counts,
        Ok(Err(e)) => {
            eprintln!("cudalint serve: journal: {e}: events answered 503");
            let mut r = text(StatusCode::SERVICE_UNAVAILABLE, "the job journal cannot be written");
            r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("10"));
            return r;
        }
        Err(e) => return text(StatusCode::SERVICE_UNAVAILABLE, format!("accepting the events: {e}")),
    };
    let counts = serde_json::json!({
        "received": envelope.events.len(), "queued": queued, "duplicate": duplicate, "ignored": ignored, "skipped": skipped,
    });
    let mut body = counts.to_string();
    body.push('\n');
    if full {
        let mut r = reply(StatusCode::SERVICE_UNAVAILABLE, "application/json", body);
        r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("10"));
        return r;
    }
    reply(StatusCode::OK, "application/json", body)
}

/// Queues the scans of one envelope: (queued, duplicates, refused). With a journal, what the
/// queue would take is on disk (synced) before it is queued, so a done record never precedes its
/// job's, and the 200 comes only after; envelopes are accepted one at a time for that.
fn accept(app: &App, scans: Vec<Job>) -> std::io::Result<(u64, u64, bool)> {
    let m = &app.metrics;
    let _one = app.accepting.lock().unwrap_or_else(|p| p.into_inner());
    let mut journaled = std::collections::BTreeSet::new();
    if let Some(j) = &app.journal {
        let mut fresh = Vec::new();
        for job in &scans {
            if app.queue.admits(&job.spec()) && journaled.insert(job.spec()) {
                fresh.push(job.clone());
            }
        }
        j.add(&fresh)?;
    }
    let (mut queued, mut duplicate, mut full) = (0, 0, false);
    for job in scans {
        let key = job.spec();
        match app.queue.offer(key.clone(), job) {
            Offer::Queued => {
                journaled.remove(&key);
                queued += 1;
            }
            Offer::Duplicate => {
                add(&m.events_deduplicated);
                duplicate += 1;
            }
            // The whole envelope comes again: what was queued from it is a duplicate then.
            Offer::Full | Offer::Closed => {
                add(&m.events_rejected);
                full = true;
            }
        }
    }
    if let Some(j) = &app.journal {
        // Journaled but refused (the queue filled or closed meanwhile): the registry resends it.
        for key in journaled {
            j.done(&key, true);
        }
    }
    Ok((queued, duplicate, full))
}

#[cfg(test)]
mod tests {
    use super::same;

    #[test]
    fn tokens_compare_whole() {
        assert!(same(b"s3cret", b"s3cret"));
        assert!(!same(b"s3cret", b"s3cre"));
        assert!(!same(b"s3cret", b"s3creT"));
        assert!(!same(b"", b"x"));
    }
}
