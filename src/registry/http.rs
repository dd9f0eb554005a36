//! The HTTP side of registry pulls, written on reqwest so every byte is under our bounds:
//! credentials go only where the policy allows (the registry's own host; a token realm on that
//! host or, over HTTPS, on a host the user allowed), every body is read with a size limit, a
//! stall timeout (a minimum rate, so a trickling server ends too) and the scan's deadline.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_LENGTH, LINK, RANGE, WWW_AUTHENTICATE};
use reqwest::{Response, StatusCode, Url};

use super::error::{RealmRefusal, RegistryError};
use crate::escape::text as esc;

/// Bytes that must arrive within one stall window for a body to count as progressing.
pub const STALL_BYTES: u64 = 16 * 1024;
/// Most bytes of a token response or an error body read.
const SMALL_BODY: u64 = 64 * 1024;

/// `localhost`, 127.0.0.0/8 and ::1, parsed as addresses (never by prefix: `127.evil.example`
/// is a name like any other).
pub fn is_loopback(host: &str) -> bool {
    let h = match host.strip_prefix('[') {
        Some(rest) => rest.split_once(']').map_or(rest, |(h, _)| h),
        None => match host.rsplit_once(':') {
            Some((h, p)) if !h.contains(':') && p.bytes().all(|b| b.is_ascii_digit()) => h,
            _ => host,
        },
    };
    h.eq_ignore_ascii_case("localhost") || h.parse::<IpAddr>().is_ok_and(|a| a.is_loopback())
}

/// `host[:port]` of a URL, as registries are named.
fn authority(u: &Url) -> String {
    // IPv6 hosts come bracketed.
    let host = u.host_str().unwrap_or("");
    match u.port() {
        Some(p) => format!("{host}:{p}"),
        None => host.to_string(),
    }
}

/// What a request may cost: a stall window and the scan's deadline.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub stall: Duration,
    pub deadline: Instant,
    /// Who answers, in messages ("registry", "server" for a package index or a wheel's host).
    pub peer: &'static str,
}

impl Limits {
    fn left(&self, what: &str) -> Result<Duration, RegistryError> {
        self.deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| deadline_error(what))
    }
}

pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

/// `text` with the user info of every URL in it masked, as pip and uv print URLs: the password
/// of `user:password@` becomes `****` (`user:****@`), a user info of one word (a token) becomes
/// `****@`. Every message that can carry a URL a user gave (a package index, find-links, a
/// lock's wheel URL), and every error a library made from one, goes through this.
pub fn redact_urls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        out.push_str(&rest[..i + 3]);
        rest = &rest[i + 3..];
        // The authority ends at the path, query or fragment, or where the URL ends in the text;
        // its user info at its last `@` (a raw `@` in a password is the password's).
        let end = rest
            .find(|c: char| matches!(c, '/' | '?' | '#' | '"' | '\'' | '<' | '>' | '`') || c.is_whitespace())
            .unwrap_or(rest.len());
        if let Some(at) = rest[..end].rfind('@') {
            match rest[..at].split_once(':') {
                Some((user, _)) => {
                    out.push_str(user);
                    out.push_str(":****@");
                }
                None => out.push_str("****@"),
            }
            rest = &rest[at + 1..];
        }
    }
    out.push_str(rest);
    out
}

pub fn deadline_error(what: &str) -> RegistryError {
    RegistryError::Deadline { what: what.to_string() }
}

/// A request that failed: whether it is worth another try (or, on loopback, plain HTTP).
pub struct Failure {
    pub error: RegistryError,
    pub transport: bool,
}

pub fn transport_failure(what: &str, e: &reqwest::Error, deadline: Instant) -> Failure {
    if Instant::now() >= deadline {
        return Failure { error: deadline_error(what), transport: false };
    }
    let msg = if e.is_timeout() { "timed out".to_string() } else { esc(&error_chain(e)) };
    let transport = e.is_connect() || e.is_request() || e.is_timeout() || e.is_body();
    let what = what.to_string();
    let error = if transport {
        RegistryError::Unreachable { what, message: msg }
    } else {
        RegistryError::Request { what, message: msg }
    };
    Failure { error, transport }
}

/// A registry (or index) that stopped answering within the stall window.
fn stalled(what: &str, lim: &Limits, answer: &str) -> RegistryError {
    RegistryError::Unreachable {
        what: what.to_string(),
        message: format!(
            "the {} stalled ({answer} in {} s, --registry-stall-timeout)",
            lim.peer,
            lim.stall.as_secs_f64()
        ),
    }
}

/// Why a body could not be read: the connection (worth resuming) or a bound (final).
pub enum BodyError {
    Transport(String),
    Fatal(RegistryError),
}

impl BodyError {
    pub fn into_error(self, what: &str) -> RegistryError {
        match self {
            BodyError::Transport(e) => RegistryError::Unreachable { what: what.to_string(), message: e },
            BodyError::Fatal(e) => e,
        }
    }
}

/// A response body read chunk by chunk: at most `limit` bytes (a larger Content-Length is
/// refused before reading), ending with an error when fewer than `STALL_BYTES` arrive in a
/// stall window or the deadline passes.
pub struct Body {
    pub res: Response,
    limit: u64,
    pub got: u64,
    lim: Limits,
    what: String,
    window_start: Instant,
    window_bytes: u64,
}

impl Body {
    pub fn new(res: Response, limit: u64, lim: Limits, what: &str) -> Result<Body, RegistryError> {
        if let Some(n) = declared_length(&res)
            && n > limit
        {
            return Err(RegistryError::request(
                what,
                format!("the {} announces {n} bytes, more than the {limit} it may be", lim.peer),
            ));
        }
        Ok(Body { res, limit, got: 0, lim, what: what.to_string(), window_start: Instant::now(), window_bytes: 0 })
    }

    /// Time spent waiting for our own reader (a full pipe) is not the registry's stall.
    pub fn paused(&mut self, d: Duration) {
        self.window_start += d;
    }

    pub async fn chunk(&mut self) -> Result<Option<bytes::Bytes>, BodyError> {
        let what = &self.what;
        let stall_end = self.window_start + self.lim.stall;
        let wait = stall_end.min(self.lim.deadline).saturating_duration_since(Instant::now());
        let chunk = match tokio::time::timeout(wait, self.res.chunk()).await {
            Ok(Ok(c)) => c,
            // The request's own timeout is the deadline: say so, not "error decoding".
            Ok(Err(_)) if Instant::now() >= self.lim.deadline => return Err(BodyError::Fatal(deadline_error(what))),
            Ok(Err(e)) => return Err(BodyError::Transport(esc(&error_chain(&e)))),
            Err(_) if Instant::now() >= self.lim.deadline => return Err(BodyError::Fatal(deadline_error(what))),
            Err(_) => {
                return Err(BodyError::Fatal(stalled(what, &self.lim, &format!("fewer than {STALL_BYTES} bytes"))));
            }
        };
        let Some(chunk) = chunk else { return Ok(None) };
        self.got += chunk.len() as u64;
        if self.got > self.limit {
            return Err(BodyError::Fatal(RegistryError::request(
                what,
                format!("the {} sent more than the {} bytes it may be", self.lim.peer, self.limit),
            )));
        }
        self.window_bytes += chunk.len() as u64;
        if self.window_bytes >= STALL_BYTES {
            self.window_start = Instant::now();
            self.window_bytes = 0;
        }
        Ok(Some(chunk))
    }
}

fn declared_length(res: &Response) -> Option<u64> {
    res.headers().get(CONTENT_LENGTH)?.to_str().ok()?.trim().parse().ok()
}

/// A whole body, bounded (manifests, configs, token and listing responses).
pub async fn read_all(res: Response, limit: u64, lim: Limits, what: &str) -> Result<Vec<u8>, RegistryError> {
    let mut b = Body::new(res, limit, lim, what)?;
    let mut v = Vec::new();
    while let Some(c) = b.chunk().await.map_err(|e| e.into_error(what))? {
        v.extend_from_slice(&c);
    }
    Ok(v)
}

/// A registry's error in a message: status and the start of its body, control characters
/// escaped (the body is the registry's to choose).
pub async fn status_error(res: Response, lim: Limits, what: &str) -> RegistryError {
    let status = res.status();
    let body = read_all(res, SMALL_BODY, lim, what).await.unwrap_or_default();
    let body = String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned();
    let detail = if body.trim().is_empty() { String::new() } else { format!(": {}", esc(body.trim())) };
    let what = what.to_string();
    match status {
        StatusCode::NOT_FOUND => RegistryError::NotFound { what, detail },
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => RegistryError::Denied { what, status, detail },
        status => RegistryError::Status { what, status, detail },
    }
}

/// One `WWW-Authenticate` challenge: its scheme and parameters.
#[derive(Debug, PartialEq)]
pub struct Challenge {
    pub scheme: String,
    pub params: Vec<(String, String)>,
}

impl Challenge {
    pub fn parse(h: &str) -> Option<Challenge> {
        let h = h.trim();
        let (scheme, rest) = h.split_once(' ').unwrap_or((h, ""));
        let mut params = Vec::new();
        let mut s = rest.trim();
        while !s.is_empty() {
            let (k, r) = s.split_once('=')?;
            let r = r.trim_start();
            let (v, r) = if let Some(q) = r.strip_prefix('"') {
                let mut v = String::new();
                let mut it = q.char_indices();
                let mut end = None;
                while let Some((i, c)) = it.next() {
                    match c {
                        '\\' => {
                            if let Some((_, n)) = it.next() {
                                v.push(n)
                            }
                        }
                        '"' => {
                            end = Some(i + 1);
                            break;
                        }
                        c => v.push(c),
                    }
                }
                (v, &q[end?..])
            } else {
                let e = r.find(',').unwrap_or(r.len());
                (r[..e].trim().to_string(), &r[e..])
            };
            params.push((k.trim().to_ascii_lowercase(), v));
            s = r.trim_start().trim_start_matches(',').trim_start();
        }
        Some(Challenge { scheme: scheme.to_ascii_lowercase(), params })
    }

    pub fn get(&self, k: &str) -> Option<&str> {
        self.params.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str())
    }
}

/// Whether Basic credentials for `registry` (reached over `scheme`) may go to token realm
/// `realm`: on the registry's own host over the same or a safer scheme, or over HTTPS to a
/// host the user allowed (`--allow-auth-host`). Otherwise why not.
pub fn realm_allowed(realm: &Url, registry: &str, scheme: &str, allowed: &[String]) -> Result<(), RealmRefusal> {
    let host = authority(realm);
    let https = realm.scheme() == "https";
    if !realm.username().is_empty() || realm.password().is_some() {
        return Err(RealmRefusal::CredentialsInUrl);
    }
    let same = host.eq_ignore_ascii_case(registry)
        || (realm.host_str() == reg_host(registry) && realm.port().is_none() && !registry.contains(':'));
    if same {
        return if https || scheme == "http" {
            Ok(())
        } else {
            Err(RealmRefusal::Downgraded { realm: esc(realm.as_str()), registry: esc(registry) })
        };
    }
    let named = allowed
        .iter()
        .any(|a| a.eq_ignore_ascii_case(&host) || realm.host_str().is_some_and(|h| a.eq_ignore_ascii_case(h)));
    match (named, https) {
        (true, true) => Ok(()),
        (true, false) => Err(RealmRefusal::PlainHttp { realm: esc(realm.as_str()) }),
        (false, _) => {
            Err(RealmRefusal::OtherHost { realm: esc(realm.as_str()), registry: esc(registry), host: esc(&host) })
        }
    }
}

fn reg_host(registry: &str) -> Option<&str> {
    if registry.starts_with('[') {
        return registry.split_once(']').map(|(h, _)| h.trim_start_matches('['));
    }
    Some(registry.rsplit_once(':').map_or(registry, |(h, _)| h))
}

/// The next page of a paginated listing (`Link: <...>; rel="next"`), resolved against `base`;
/// refused when it leaves the registry (it would carry our token elsewhere).
pub fn next_link(res: &Response, base: &Url) -> Result<Option<Url>, String> {
    let Some(link) = res.headers().get(LINK) else { return Ok(None) };
    let link = link.to_str().map_err(|_| "unreadable Link header".to_string())?;
    for part in link.split(',') {
        let mut segs = part.split(';');
        let target = segs.next().unwrap_or("").trim();
        let next = segs.any(|s| {
            let s = s.trim().to_ascii_lowercase();
            s == "rel=\"next\"" || s == "rel=next"
        });
        if !next {
            continue;
        }
        let t = target.strip_prefix('<').and_then(|t| t.strip_suffix('>')).ok_or("malformed Link header")?;
        let u = base.join(t).map_err(|e| format!("bad Link target {}: {e}", esc(t)))?;
        if u.origin() != base.origin() {
            return Err(format!("Link header points to another host: {}", esc(u.as_str())));
        }
        return Ok(Some(u));
    }
    Ok(None)
}

/// Builds a GET with the headers a registry needs.
pub fn get(
    client: &reqwest::Client,
    url: Url,
    accept: Option<&str>,
    auth: Option<&str>,
    from: Option<u64>,
) -> reqwest::RequestBuilder {
    let mut r = client.get(url);
    if let Some(a) = accept {
        r = r.header(ACCEPT, a);
    }
    if let Some(a) = auth {
        r = r.header(AUTHORIZATION, a);
    }
    if let Some(f) = from {
        r = r.header(RANGE, format!("bytes={f}-"));
    }
    r
}

/// Sends within the deadline, `sending` bytes of body. The answer's headers must come within
/// the stall window (plus one window per `STALL_BYTES` sent): a registry that takes the
/// connection and never answers has stalled as much as one that stops sending.
pub async fn send(r: reqwest::RequestBuilder, lim: Limits, what: &str, sending: u64) -> Result<Response, Failure> {
    let left = lim.left(what).unwrap_or(Duration::from_millis(1));
    let windows = u32::try_from(1 + sending / STALL_BYTES).unwrap_or(u32::MAX);
    let answer = lim.stall.saturating_mul(windows).min(left);
    match tokio::time::timeout(answer, r.timeout(left).send()).await {
        Ok(Ok(res)) => Ok(res),
        Ok(Err(e)) => Err(transport_failure(what, &e, lim.deadline)),
        Err(_) if Instant::now() >= lim.deadline => Err(Failure { error: deadline_error(what), transport: false }),
        Err(_) => Err(Failure { error: stalled(what, &lim, "no answer"), transport: true }),
    }
}

pub fn www_authenticate(res: &Response) -> Option<Challenge> {
    res.headers().get_all(WWW_AUTHENTICATE).iter().filter_map(|v| v.to_str().ok()).find_map(|v| {
        let c = Challenge::parse(v)?;
        (c.scheme == "bearer" || c.scheme == "basic").then_some(c)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_shown_without_their_passwords() {
        assert_eq!(
            redact_urls("http://ci-bot:TOKEN@127.0.0.1:8/simple/x/: HTTP 404 (from https://tok@h/a#b)"),
            "http://ci-bot:****@127.0.0.1:8/simple/x/: HTTP 404 (from https://****@h/a#b)"
        );
        assert_eq!(redact_urls("https://u:p@ss:w@h?x=1 and https://h/p@1"), "https://u:****@h?x=1 and https://h/p@1");
        assert_eq!(redact_urls("url (http://u:a,b)c@[::1]:5/x)"), "url (http://u:****@[::1]:5/x)");
        assert_eq!(redact_urls("no url here, nor ://"), "no url here, nor ://");
        assert_eq!(redact_urls("\"http://u:p@h\""), "\"http://u:****@h\"");
    }

    #[test]
    fn loopback_is_parsed_not_prefixed() {
        for h in
            ["localhost", "localhost:5000", "127.0.0.1", "127.0.0.1:5000", "127.8.9.10:1", "[::1]", "[::1]:5000", "::1"]
        {
            assert!(is_loopback(h), "{h}");
        }
        for h in [
            "127.evil.example",
            "127.evil.example:5000",
            "127.0.0.1.nip.io",
            "localhost.evil",
            "10.0.0.1",
            "[::2]:1",
            "127.1",
        ] {
            assert!(!is_loopback(h), "{h}");
        }
    }

    #[test]
    fn challenges_and_realms() {
        let c =
            Challenge::parse(r#"Bearer realm="https://auth.example/token",service="reg \"x\"",scope="a,b""#).unwrap();
        assert_eq!(c.scheme, "bearer");
        assert_eq!(c.get("realm"), Some("https://auth.example/token"));
        assert_eq!(c.get("service"), Some("reg \"x\""));
        assert_eq!(c.get("scope"), Some("a,b"));
        let u = |s: &str| Url::parse(s).unwrap();
        assert_eq!(realm_allowed(&u("https://reg.example/token"), "reg.example", "https", &[]), Ok(()));
        assert_eq!(realm_allowed(&u("http://127.0.0.1:5000/token"), "127.0.0.1:5000", "http", &[]), Ok(()));
        // Same host, downgraded to HTTP: refused.
        let downgraded =
            Err(RealmRefusal::Downgraded { realm: "http://reg.example/token".into(), registry: "reg.example".into() });
        assert_eq!(realm_allowed(&u("http://reg.example/token"), "reg.example", "https", &[]), downgraded);
        let other = realm_allowed(&u("https://auth.example/token"), "reg.example", "https", &[]);
        assert_eq!(
            other,
            Err(RealmRefusal::OtherHost {
                realm: "https://auth.example/token".into(),
                registry: "reg.example".into(),
                host: "auth.example".into(),
            })
        );
        assert!(other.unwrap_err().to_string().contains("pass --allow-auth-host auth.example"));
        let allow = vec!["auth.example".to_string()];
        assert_eq!(realm_allowed(&u("https://auth.example/token"), "reg.example", "https", &allow), Ok(()));
        assert_eq!(
            realm_allowed(&u("http://auth.example/token"), "reg.example", "https", &allow),
            Err(RealmRefusal::PlainHttp { realm: "http://auth.example/token".into() })
        );
        assert_eq!(
            realm_allowed(&u("https://user:pw@reg.example/token"), "reg.example", "https", &[]),
            Err(RealmRefusal::CredentialsInUrl)
        );
        // Another port on the same address is another service.
        assert!(matches!(
            realm_allowed(&u("http://127.0.0.1:6000/token"), "127.0.0.1:5000", "http", &[]),
            Err(RealmRefusal::OtherHost { .. })
        ));
    }
}
