//! Authentication: which credentials go to which registry (the command line, the environment,
//! Docker's config.json and credential helpers), and getting the `Authorization` a registry
//! accepts: none, Basic to the registry itself, or a bearer token from the challenge's realm,
//! which receives credentials only when `http::realm_allowed` says so.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use reqwest::{StatusCode, Url};

use super::error::{RegistryError, TokenError};
use super::http::{self, Challenge, Failure, Limits};
use super::options::RegistryOptions;
use crate::escape::text as esc;

fn env_nonempty(k: &str) -> Option<String> {
    std::env::var(k).ok().filter(|v| !v.is_empty())
}

/// What we may present to a registry.
#[derive(Clone)]
pub enum Credentials {
    Anonymous,
    Basic(String, String),
    /// An identity token from Docker's config: sent as a bearer token to the registry itself.
    Token(String),
}

/// Credentials for `host`, in order: the command line, where `o` lets it go to that host (see
/// [`RegistryOptions::credentials_go_to`]); the environment (`CUDALINT_REGISTRY_USERNAME` and
/// `_PASSWORD`): for `CUDALINT_REGISTRY_HOST` only when that is set, else as the command line;
/// Docker's config.json and credential helpers (their own entry per host); else anonymous.
pub fn credentials(host: &str, o: &RegistryOptions) -> Credentials {
    let explicit = o.credentials_go_to(host);
    if explicit && let (Some(u), Some(p)) = (&o.username, &o.password) {
        return Credentials::Basic(u.clone(), p.clone());
    }
    if let (Some(u), Some(p)) = (env_nonempty("CUDALINT_REGISTRY_USERNAME"), env_nonempty("CUDALINT_REGISTRY_PASSWORD"))
    {
        let to_here = match env_nonempty("CUDALINT_REGISTRY_HOST") {
            Some(h) => super::options::same_host(&h, host),
            None => explicit,
        };
        if to_here {
            return Credentials::Basic(u, p);
        }
    }
    let keys: Vec<&str> = if host == "index.docker.io" || host == "docker.io" || host == "registry-1.docker.io" {
        vec!["https://index.docker.io/v1/", "index.docker.io", "docker.io"]
    } else {
        vec![host]
    };
    for k in keys {
        match docker_credential::get_credential(k) {
            Ok(docker_credential::DockerCredential::UsernamePassword(u, p)) => return Credentials::Basic(u, p),
            Ok(docker_credential::DockerCredential::IdentityToken(t)) => return Credentials::Token(t),
            Err(_) => {}
        }
    }
    Credentials::Anonymous
}

/// How one connection authenticates, and the `Authorization` the registry last accepted.
pub(super) struct Auth {
    /// `host[:port]` of the registry.
    pub registry: String,
    pub creds: Credentials,
    pub allow_auth_hosts: Vec<String>,
    /// The token scope this connection asks for.
    pub scope: String,
    authorization: Mutex<Option<String>>,
}

/// What a request to the registry needs besides the credentials.
pub(super) struct Transport<'a> {
    pub http: &'a reqwest::Client,
    /// `scheme://host[:port]/`
    pub base: &'a Url,
    pub limits: Limits,
    pub requests: &'a AtomicU64,
}

impl Auth {
    pub fn new(registry: String, creds: Credentials, allow_auth_hosts: Vec<String>, scope: String) -> Auth {
        Auth { registry, creds, allow_auth_hosts, scope, authorization: Mutex::new(None) }
    }

    /// The `Authorization` value to send, if any.
    pub fn current(&self) -> Option<String> {
        self.authorization.lock().expect("auth lock").clone()
    }

    /// Asks `/v2/` how to authenticate, gets the `Authorization` value and keeps it.
    pub async fn renew(&self, t: &Transport<'_>) -> Result<(), Failure> {
        let a = self.authenticate(t).await?;
        *self.authorization.lock().expect("auth lock") = a;
        Ok(())
    }

    async fn authenticate(&self, t: &Transport<'_>) -> Result<Option<String>, Failure> {
        let what = format!("registry {}", esc(&self.registry));
        t.requests.fetch_add(1, Ordering::Relaxed);
        let url = t.base.join("/v2/").expect("registry paths are valid URLs");
        let res = http::send(http::get(t.http, url, None, None, None), t.limits, &what, 0).await?;
        if res.status().is_success() {
            return Ok(None);
        }
        if res.status() != StatusCode::UNAUTHORIZED {
            let error = http::status_error(res, t.limits, &what).await;
            return Err(Failure { error, transport: false });
        }
        let fail = |m: String| Failure { error: RegistryError::request(&what, m), transport: false };
        let Some(ch) = http::www_authenticate(&res) else {
            return Err(fail("asks for authentication without saying how (no WWW-Authenticate)".into()));
        };
        if ch.scheme == "basic" {
            return match &self.creds {
                Credentials::Basic(u, p) => Ok(Some(basic(t.http, t.base, u, p))),
                Credentials::Token(t) => Ok(Some(format!("Bearer {t}"))),
                Credentials::Anonymous => {
                    Err(fail("needs credentials (--username/--password-stdin or docker login)".into()))
                }
            };
        }
        if let Credentials::Token(t) = &self.creds {
            return Ok(Some(format!("Bearer {t}")));
        }
        match self.token(t, &ch, &what).await {
            Ok(token) => Ok(Some(token)),
            Err(reason) => Err(Failure { error: RegistryError::Token { what, reason }, transport: false }),
        }
    }

    /// A bearer token from the challenge's realm, with our credentials where the realm may
    /// have them.
    async fn token(&self, t: &Transport<'_>, ch: &Challenge, what: &str) -> Result<String, TokenError> {
        let realm = ch.get("realm").ok_or(TokenError::NoRealm)?;
        let mut url =
            Url::parse(realm).map_err(|e| TokenError::BadRealm { realm: esc(realm), message: e.to_string() })?;
        if !matches!(url.scheme(), "https" | "http") {
            return Err(TokenError::NotHttp(esc(realm)));
        }
        let send_creds = match &self.creds {
            Credentials::Basic(..) => {
                http::realm_allowed(&url, &self.registry, t.base.scheme(), &self.allow_auth_hosts)?;
                true
            }
            _ => false,
        };
        {
            let mut q = url.query_pairs_mut();
            if let Some(s) = ch.get("service") {
                q.append_pair("service", s);
            }
            q.append_pair("scope", &self.scope);
        }
        let mut req = http::get(t.http, url, None, None, None);
        if let (true, Credentials::Basic(u, p)) = (send_creds, &self.creds) {
            req = req.basic_auth(u, Some(p));
        }
        t.requests.fetch_add(1, Ordering::Relaxed);
        let twhat = format!("{what} token");
        let res = http::send(req, t.limits, &twhat, 0).await.map_err(|f| TokenError::Request(f.error.to_string()))?;
        if !res.status().is_success() {
            return Err(TokenError::Request(http::status_error(res, t.limits, &twhat).await.to_string()));
        }
        let body =
            http::read_all(res, 64 << 10, t.limits, &twhat).await.map_err(|e| TokenError::Request(e.to_string()))?;
        let v: serde_json::Value = serde_json::from_slice(&body).map_err(|e| TokenError::Response(e.to_string()))?;
        let token = v
            .get("token")
            .or_else(|| v.get("access_token"))
            .and_then(|t| t.as_str())
            .filter(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_graphic()))
            .ok_or(TokenError::NoToken)?;
        Ok(format!("Bearer {token}"))
    }
}

/// The `Authorization: Basic` value (through reqwest, which encodes it).
fn basic(client: &reqwest::Client, base: &Url, u: &str, p: &str) -> String {
    client
        .get(base.clone())
        .basic_auth(u, Some(p))
        .build()
        .ok()
        .and_then(|r| r.headers().get(reqwest::header::AUTHORIZATION).and_then(|v| v.to_str().ok()).map(str::to_string))
        .unwrap_or_default()
}
