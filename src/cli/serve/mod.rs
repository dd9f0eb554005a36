//! `cudalint serve`: scan on push. The registry's notifications (CNCF distribution's
//! `notifications: endpoints:` webhook) are posted to `/events`; each pushed image is queued
//! (bounded, once per manifest), scanned, judged for the targets and, with `--attest`, attested
//! by a pool of workers; `/healthz` and `/metrics` (Prometheus) are served beside.
//!
//! One file per part: `event` (the envelope and which events become scans), `queue` (bounded,
//! single flight per manifest), `worker` (image or not, then the scan), `http` (the endpoints),
//! `metrics`.

mod budget;
mod event;
mod http;
mod journal;
mod metrics;
mod queue;
mod worker;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use super::args::{PolicyArgs, ReadArgs, RegistryArgs, TargetArgs, scan_options};

#[derive(clap::Args, Debug)]
// `--platform` is `scan`'s flag (one platform, default the host's); here it filters what is
// pushed, several at once, default all, so its help says so.
#[command(mut_arg("platform", |a| a.help(
    "Platforms to scan (os/arch[/variant], comma-separated: linux/amd64,linux/arm64); default: \
     every platform pushed. An image of another platform is skipped (its config is read, no layer)."
)))]
pub struct ServeArgs {
    /// Address to listen on (plain HTTP): the registry posts its events to http://ADDR/events;
    /// GET /healthz and GET /metrics (Prometheus text) are served beside. Port 0: any free port
    /// (the log names it).
    #[arg(long, default_value = "127.0.0.1:8080", value_name = "ADDR:PORT")]
    pub listen: SocketAddr,
    /// Images scanned at once (each also reads --jobs layers at once). Default: half the CPUs,
    /// 2 to 4, so one slow registry contact does not hold every push.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub workers: Option<u32>,
    /// Keep the accepted jobs in DIR (journal.jsonl, synced before the registry is answered
    /// 200): after a crash or restart the unfinished ones are scanned; jobs given up on after
    /// 3 attempts are listed in failed.jsonl. Without it the queue lives in memory only. The
    /// directory must be this user's alone.
    #[arg(long, value_name = "DIR", env = "CUDALINT_SERVE_STATE_DIR")]
    pub state_dir: Option<std::path::PathBuf>,
    /// Seconds before a failed scan is tried again; the next pause is four times longer, and
    /// after the third attempt the job is given up on (counted in /metrics).
    #[arg(long, value_name = "SECS", default_value_t = 5)]
    pub retry_pause: u64,
    /// Images that may wait for a worker; beyond, events are answered 503 and the registry sends
    /// them again later.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..))]
    pub queue: u32,
    /// The token the registry must send as `Authorization: Bearer TOKEN` (its endpoint's
    /// `headers:`); other requests to /events are answered 401. Without it anyone who reaches
    /// the address can have images scanned. Prefer the environment to the command line, which
    /// other users of the machine can read.
    #[arg(long, env = "CUDALINT_SERVE_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// The registry as cudalint reaches it (HOST:PORT), in place of the name each event gives
    /// (the host of its target URL, else of the push request): when the registry is known to
    /// cudalint by another name than to its clients (a Service name in a cluster), and to pin
    /// which registry is read whatever an event says.
    #[arg(long, value_name = "HOST[:PORT]")]
    pub registry_url: Option<String>,
    /// Seconds a client may take to send a request's head (a new connection's first, or the
    /// next on a kept-alive one) before it is closed. Idle connections are also closed earlier
    /// when the connection budget needs their slot.
    #[arg(long, value_name = "SECS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub header_timeout: u64,
    #[command(flatten)]
    pub targets: TargetArgs,
    #[command(flatten)]
    pub policy: PolicyArgs,
    #[command(flatten)]
    pub read: ReadArgs,
    #[command(flatten)]
    pub registry: RegistryArgs,
}

pub fn run(mut a: ServeArgs) -> anyhow::Result<ExitCode> {
    let policy = a.policy.load_with_targets(a.targets.spec())?;
    if a.registry.from_attestation {
        anyhow::bail!(
            "--from-attestation: serve scans the images pushed; judge attested images with `scan` or `support`"
        );
    }
    if let Some(u) = &a.registry_url
        && (u.is_empty() || u.contains(['/', '@']))
    {
        anyhow::bail!(
            "--registry-url {}: give HOST[:PORT], no scheme or path (plain HTTP beyond loopback: --insecure-registry HOST[:PORT])",
            crate::escape::text(u)
        );
    }
    // Anyone who reaches the address can queue scans (and make serve contact the registry):
    // without a token that is this machine only.
    if a.token.is_none() && !a.listen.ip().is_loopback() {
        anyhow::bail!(
            "--listen {}: without --token (or CUDALINT_SERVE_TOKEN) serve listens on loopback only; give the \
             token the registry sends, or listen on 127.0.0.1",
            a.listen
        );
    }
    let platforms = super::args::platforms(a.read.platform.take().as_deref())?;
    let mut opts = scan_options(&a.read, &a.registry, policy.config.memory)?;
    opts.progress = false;
    // What a registry's webhook names is in that registry: never answered from a local store.
    opts.image_src = vec![crate::image::ImageSrc::Remote];
    // One registry contact that trickles holds a worker: serve's own bounds are tighter than a
    // one-off scan's (each still overridable).
    if a.registry.registry_stall_timeout.is_none() {
        opts.registry.stall_timeout = SERVE_STALL;
    }
    if a.registry.registry_deadline.is_none() {
        opts.registry.deadline = SERVE_DEADLINE;
    }
    if a.registry_url.is_none() {
        // The registry host then comes from each event, which the pusher's Host header can set:
        // a password goes only where --registry-credentials names (docs/trust.md).
        opts.registry
            .images_named_by_input("serve without --registry-url takes each image's registry from its event")
            .map_err(anyhow::Error::msg)?;
    }
    let queue = Arc::new(queue::Queue::new(a.queue as usize));
    let metrics = Arc::new(metrics::Metrics::default());
    let journal = match &a.state_dir {
        Some(d) => {
            let (j, replay) = journal::Journal::open(d, a.registry_url.as_deref())?;
            if !replay.is_empty() {
                eprintln!("cudalint serve: {} job(s) accepted before a restart queued again", replay.len());
            }
            for job in replay {
                if queue.restore(job.spec(), job) {
                    metrics::add(&metrics.replayed);
                }
            }
            Some(Arc::new(j))
        }
        None => None,
    };
    let scanner = Arc::new(worker::Scanner {
        policy,
        opts,
        platforms,
        queue: queue.clone(),
        metrics: metrics.clone(),
        journal: journal.clone(),
        retry_pause: Duration::from_secs(a.retry_pause),
    });
    let workers_wanted = a.workers.unwrap_or_else(|| {
        let cpus = std::thread::available_parallelism().map_or(2, |n| n.get() as u32);
        (cpus / 2).clamp(2, 4)
    });
    let mut workers = Vec::new();
    for i in 0..workers_wanted {
        let s = scanner.clone();
        workers.push(std::thread::Builder::new().name(format!("scan-{i}")).spawn(move || s.work())?);
    }
    if a.token.is_none() {
        eprintln!("cudalint serve: note: no --token: anyone who reaches {} can have images scanned", a.listen);
    }
    let app = Arc::new(http::App {
        queue: queue.clone(),
        metrics,
        token: a.token,
        registry_url: a.registry_url,
        journal: journal.clone(),
        accepting: std::sync::Mutex::new(()),
        budget: budget::Budget::default(),
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("serve-http")
        .enable_all()
        .build()
        .context("starting the HTTP runtime")?;
    let served = rt.block_on(serve(app, a.listen, Duration::from_secs(a.header_timeout)));
    // Stopped (or never started): no new job; the scans under way finish (their attestations
    // would otherwise be cut off halfway), those waiting are dropped and named.
    let dropped = queue.close();
    if !dropped.is_empty() {
        let names: Vec<String> = dropped.iter().map(|k| crate::escape::text(k)).collect();
        let kept = if journal.is_some() { "kept in --state-dir for the next start" } else { "lost: no --state-dir" };
        eprintln!("cudalint serve: not scanned ({} waiting when stopped, {kept}): {}", names.len(), names.join(", "));
    }
    for w in workers {
        let _ = w.join();
    }
    served?;
    eprintln!("cudalint serve: stopped");
    Ok(ExitCode::SUCCESS)
}

/// Connections one client address may hold at once: more are closed as soon as accepted, so
/// one client's slow or idle connections cannot take every slot (the probes' among them).
/// Beyond, the budget of all addresses together ([`budget`]) sheds idle connections.
const PER_CLIENT: usize = 32;
/// serve's registry bounds where the command line gives none: a stall, and one image in all.
const SERVE_STALL: Duration = Duration::from_secs(15);
const SERVE_DEADLINE: Duration = Duration::from_secs(900);

/// Accepts connections until SIGTERM or SIGINT. Every connection is accepted (none waits in the
/// backlog behind a full house, as the probe would): the budget makes room by closing idle ones.
async fn serve(app: Arc<http::App>, addr: SocketAddr, header_timeout: Duration) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await.with_context(|| format!("--listen {addr}"))?;
    eprintln!(
        "cudalint serve: listening on http://{} (POST /events, GET /healthz, GET /metrics)",
        listener.local_addr().context("the listening address")?
    );
    let clients: Clients = Arc::default();
    let stop = stopped();
    tokio::pin!(stop);
    loop {
        let (stream, peer) = tokio::select! {
            _ = &mut stop => break,
            r = listener.accept() => match r {
                Ok(s) => s,
                Err(e) => {
                    // Out of file descriptors and the like: wait rather than spin.
                    eprintln!("cudalint serve: accepting a connection: {e}");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                }
            },
        };
        let Some(client) = PerClient::enter(&clients, peer.ip()) else {
            drop(stream);
            continue;
        };
        let (ticket, shed) = app.budget.admit();
        metrics::add_n(&app.metrics.connections_shed, shed);
        let Some(ticket) = ticket else {
            metrics::add(&app.metrics.connections_refused);
            drop(stream);
            continue;
        };
        let ticket = Arc::new(ticket);
        let app = app.clone();
        tokio::spawn(async move {
            let t = ticket.clone();
            let svc = hyper::service::service_fn(move |req| http::respond(app.clone(), t.clone(), req));
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                // Headers that trickle in hold a slot at most this long.
                .header_read_timeout(header_timeout)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), svc);
            // Shed: dropped, which closes the socket. Only an idle connection is shed (see
            // http::respond).
            tokio::select! {
                _ = conn => {}
                _ = ticket.close.notified() => {}
            }
            drop(client);
        });
    }
    eprintln!("cudalint serve: stopping: no more events are taken");
    Ok(())
}

type Clients = Arc<std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, usize>>>;

/// One connection of a client address, counted while it lives.
struct PerClient {
    clients: Clients,
    ip: std::net::IpAddr,
}

impl PerClient {
    /// None when the address holds [`PER_CLIENT`] connections already.
    fn enter(clients: &Clients, ip: std::net::IpAddr) -> Option<PerClient> {
        let mut m = clients.lock().unwrap_or_else(|p| p.into_inner());
        let n = m.entry(ip).or_default();
        if *n >= PER_CLIENT {
            return None;
        }
        *n += 1;
        Some(PerClient { clients: clients.clone(), ip })
    }
}

impl Drop for PerClient {
    fn drop(&mut self) {
        let mut m = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = m.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.ip);
            }
        }
    }
}

/// SIGTERM (Kubernetes stopping the pod) or SIGINT.
async fn stopped() {
    #[cfg(unix)]
    if let Ok(mut term) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        return;
    }
    let _ = tokio::signal::ctrl_c().await;
}
