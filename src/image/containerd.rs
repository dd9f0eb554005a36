//! Images in containerd's store, read where they are: the image's target from the images
//! service, then every document and layer blob by digest from the content service, over
//! containerd's gRPC socket (`CONTAINERD_ADDRESS`, `CONTAINERD_NAMESPACE` and the flags, as
//! `ctr` reads them). The messages are the few fields of containerd's API protos cudalint
//! uses, declared with prost's derive (no protoc at build time); tonic carries them.
//!
//! Nothing is unpacked or copied: layers stream from the content store through the layer
//! walker, which checks each against its digest, as an OCI layout's blobs are.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::daemon::Lookup;
use super::oci::{self, Platform, Resolved, Store};
use super::pipeline::{Blob, LayerSource};
use super::{ImageReport, ScanError, ScanOptions, SourceKind};
use crate::digest::MAX_JSON;
use crate::escape::text as esc;
use crate::layer::LayerRef;

/// containerd's default socket and namespace (`ctr`'s defaults).
pub const DEFAULT_ADDRESS: &str = "/run/containerd/containerd.sock";
pub const DEFAULT_NAMESPACE: &str = "default";

/// Where containerd is and which namespace's images are meant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    pub address: PathBuf,
    pub namespace: String,
}

impl Default for Options {
    fn default() -> Self {
        Options { address: DEFAULT_ADDRESS.into(), namespace: DEFAULT_NAMESPACE.into() }
    }
}

/// The messages of containerd's API used here, field numbers as in its protos
/// (api/services/images/v1/images.proto, api/services/content/v1/content.proto,
/// api/types/descriptor.proto).
mod proto {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Descriptor {
        #[prost(string, tag = "1")]
        pub media_type: String,
        #[prost(string, tag = "2")]
        pub digest: String,
        #[prost(int64, tag = "3")]
        pub size: i64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Image {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(message, optional, tag = "3")]
        pub target: Option<Descriptor>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct GetImageRequest {
        #[prost(string, tag = "1")]
        pub name: String,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct GetImageResponse {
        #[prost(message, optional, tag = "1")]
        pub image: Option<Image>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct InfoRequest {
        #[prost(string, tag = "1")]
        pub digest: String,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Info {
        #[prost(string, tag = "1")]
        pub digest: String,
        #[prost(int64, tag = "2")]
        pub size: i64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct InfoResponse {
        #[prost(message, optional, tag = "1")]
        pub info: Option<Info>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ReadContentRequest {
        #[prost(string, tag = "1")]
        pub digest: String,
        #[prost(int64, tag = "2")]
        pub offset: i64,
        #[prost(int64, tag = "3")]
        pub size: i64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ReadContentResponse {
        #[prost(int64, tag = "1")]
        pub offset: i64,
        #[prost(bytes = "bytes", tag = "2")]
        pub data: bytes::Bytes,
    }
}

const GET_IMAGE: &str = "/containerd.services.images.v1.Images/Get";
const CONTENT_INFO: &str = "/containerd.services.content.v1.Content/Info";
const CONTENT_READ: &str = "/containerd.services.content.v1.Content/Read";

/// A connection to containerd, its namespace, and the scan's time bounds.
struct Client {
    rt: tokio::runtime::Runtime,
    channel: tonic::transport::Channel,
    opts: Options,
    /// The namespace as the header carries it, checked once at connect.
    namespace: tonic::metadata::MetadataValue<tonic::metadata::Ascii>,
    stall: Duration,
    deadline: Instant,
}

fn failed(opts: &Options, message: String) -> ScanError {
    ScanError::Input { what: format!("containerd at unix://{}", opts.address.display()), message }
}

/// A gRPC status as a message: its code and containerd's words, escaped.
fn status_text(s: &tonic::Status) -> String {
    format!("{:?}: {}", s.code(), esc(s.message()))
}

impl Client {
    fn connect(opts: &Options, scan: &ScanOptions) -> Result<Client, ScanError> {
        // Not a silent default namespace: a value no header can carry is refused.
        let namespace = opts
            .namespace
            .parse()
            .map_err(|_| failed(opts, format!("namespace {}: not a valid namespace name", esc(&opts.namespace))))?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .map_err(|e| failed(opts, format!("no async runtime: {e}")))?;
        let path = opts.address.clone();
        let stall = scan.registry.stall_timeout;
        let channel = rt
            .block_on(async {
                // The URI is only the :authority tonic sends; the connector dials the socket.
                let ep = tonic::transport::Endpoint::from_static("http://containerd")
                    .connect_timeout(stall)
                    .timeout(scan.registry.deadline);
                tokio::time::timeout(
                    stall,
                    ep.connect_with_connector(tower::service_fn(move |_: tonic::transport::Uri| {
                        let path = path.clone();
                        async move {
                            Ok::<_, io::Error>(hyper_util::rt::TokioIo::new(
                                tokio::net::UnixStream::connect(path).await?,
                            ))
                        }
                    })),
                )
                .await
            })
            .map_err(|_| failed(opts, format!("no answer in {} s (--registry-stall-timeout)", stall.as_secs_f64())))?
            .map_err(|e| failed(opts, crate::registry::http::error_chain(&e)))?;
        Ok(Client {
            rt,
            channel,
            opts: opts.clone(),
            namespace,
            stall,
            deadline: Instant::now() + scan.registry.deadline,
        })
    }

    fn request<T>(&self, msg: T) -> tonic::Request<T> {
        let mut r = tonic::Request::new(msg);
        r.metadata_mut().insert("containerd-namespace", self.namespace.clone());
        r
    }

    /// How long one call may wait for its answer: the stall window, within the deadline.
    fn wait(&self) -> Duration {
        self.stall.min(self.deadline.saturating_duration_since(Instant::now()))
    }

    fn unary<Q, A>(&self, path: &'static str, msg: Q) -> Result<A, tonic::Status>
    where
        Q: prost::Message + Send + Sync + 'static,
        A: prost::Message + Default + Send + Sync + 'static,
    {
        let req = self.request(msg);
        let wait = self.wait();
        self.rt.block_on(async {
            let mut grpc = tonic::client::Grpc::new(self.channel.clone());
            let call = async {
                grpc.ready().await.map_err(|e| tonic::Status::unavailable(e.to_string()))?;
                let codec = tonic_prost::ProstCodec::<Q, A>::default();
                grpc.unary(req, tonic::codegen::http::uri::PathAndQuery::from_static(path), codec).await
            };
            match tokio::time::timeout(wait, call).await {
                Ok(r) => r.map(tonic::Response::into_inner),
                Err(_) => Err(tonic::Status::deadline_exceeded(format!(
                    "containerd stalled (no answer in {} s, --registry-stall-timeout)",
                    wait.as_secs_f64()
                ))),
            }
        })
    }

    /// The image's name and target descriptor; `None` if the namespace has no such image.
    fn image(&self, name: &str) -> Result<Option<proto::Descriptor>, ScanError> {
        match self.unary::<_, proto::GetImageResponse>(GET_IMAGE, proto::GetImageRequest { name: name.into() }) {
            Ok(r) => match r.image.and_then(|i| i.target) {
                Some(t) => Ok(Some(t)),
                None => Err(failed(&self.opts, format!("image {}: no target descriptor", esc(name)))),
            },
            Err(s) if s.code() == tonic::Code::NotFound => Ok(None),
            Err(s) => Err(failed(&self.opts, format!("image {}: {}", esc(name), status_text(&s)))),
        }
    }

    /// The content store's size of `digest`, or why it has none.
    fn size(&self, digest: &str) -> Result<u64, String> {
        match self.unary::<_, proto::InfoResponse>(CONTENT_INFO, proto::InfoRequest { digest: digest.into() }) {
            Ok(r) => r.info.map(|i| i.size.max(0) as u64).ok_or_else(|| "no info".to_string()),
            Err(s) if s.code() == tonic::Code::NotFound => Err(format!(
                "not in containerd's content store (namespace {}): pulled for another platform, or its layers \
                 discarded after unpacking (discard_unpacked_layers); `ctr content fetch` brings it back",
                esc(&self.opts.namespace)
            )),
            Err(s) => Err(status_text(&s)),
        }
    }

    /// `digest`'s bytes as they arrive, at most `limit` of them (more is an error).
    fn read(self: &Arc<Self>, digest: &str, limit: u64) -> crate::registry::BlobReader {
        let (tx, reader) = crate::registry::BlobReader::channel();
        let me = self.clone();
        let digest = digest.to_string();
        self.rt.spawn(async move {
            let fail = |m: String| io::Error::other(m);
            let req = me.request(proto::ReadContentRequest { digest: digest.clone(), offset: 0, size: 0 });
            let mut grpc = tonic::client::Grpc::new(me.channel.clone());
            let start = async {
                grpc.ready().await.map_err(|e| tonic::Status::unavailable(e.to_string()))?;
                let codec = tonic_prost::ProstCodec::<proto::ReadContentRequest, proto::ReadContentResponse>::default();
                grpc.server_streaming(req, tonic::codegen::http::uri::PathAndQuery::from_static(CONTENT_READ), codec)
                    .await
            };
            let mut stream = match tokio::time::timeout(me.wait(), start).await {
                Ok(Ok(r)) => r.into_inner(),
                Ok(Err(s)) => {
                    let _ = tx.send(Err(fail(status_text(&s)))).await;
                    return;
                }
                Err(_) => {
                    let _ = tx.send(Err(fail("containerd stalled (no answer, --registry-stall-timeout)".into()))).await;
                    return;
                }
            };
            let mut got: u64 = 0;
            loop {
                let next = match tokio::time::timeout(me.wait(), stream.message()).await {
                    Ok(Ok(m)) => m,
                    Ok(Err(s)) => {
                        let _ = tx.send(Err(fail(status_text(&s)))).await;
                        return;
                    }
                    Err(_) => {
                        let _ =
                            tx.send(Err(fail("containerd stalled mid-blob (--registry-stall-timeout)".into()))).await;
                        return;
                    }
                };
                let Some(m) = next else { return };
                // Chunks come in order; one out of place is not this blob's bytes.
                if m.offset != got as i64 {
                    let _ = tx.send(Err(fail(format!("chunk at offset {} where {got} was due", m.offset)))).await;
                    return;
                }
                got += m.data.len() as u64;
                if got > limit {
                    let _ = tx.send(Err(fail(format!("more than the {limit} bytes its descriptor gives")))).await;
                    return;
                }
                if tx.send(Ok(m.data)).await.is_err() {
                    return;
                }
            }
        });
        reader
    }
}

/// Documents read from the content store (manifests, indexes, configs), and the synthetic
/// `index.json` naming the image's target, so `oci::resolve_oci` walks it as a layout's.
struct ContentStore {
    client: Arc<Client>,
    name: String,
    target: proto::Descriptor,
}

impl Store for ContentStore {
    fn read_small(&mut self, key: &str) -> Result<Vec<u8>, ScanError> {
        if key == "index.json" {
            let index = serde_json::json!({
                "schemaVersion": 2,
                "manifests": [{
                    "mediaType": self.target.media_type,
                    "digest": self.target.digest,
                    "size": self.target.size,
                    "annotations": { "io.containerd.image.name": self.name },
                }],
            });
            return Ok(index.to_string().into_bytes());
        }
        let digest = key.strip_prefix("blobs/").map(|k| k.replacen('/', ":", 1)).unwrap_or_default();
        let what = format!("containerd blob {}", esc(&digest));
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut std::io::Read::take(self.client.read(&digest, MAX_JSON), MAX_JSON + 1), &mut v)
            .map_err(|e| ScanError::Input { what, message: e.to_string() })?;
        Ok(v)
    }
}

/// An image in containerd, as a layer source.
struct Containerd {
    store: ContentStore,
}

impl LayerSource for Containerd {
    fn kind(&self) -> SourceKind {
        SourceKind::Containerd
    }

    fn resolve(&mut self, platform: &Platform) -> Result<Resolved, ScanError> {
        let mut r = oci::resolve_oci(&mut self.store, None, platform)?;
        r.name = Some(self.store.name.clone());
        Ok(r)
    }

    fn prepare(&mut self, layers: &[LayerRef]) -> Result<Option<u64>, ScanError> {
        let mut total = 0;
        for l in layers {
            let digest = l.digest.as_deref().unwrap_or_default();
            let size = self.store.client.size(digest).map_err(|message| ScanError::Layer { layer: l.id(), message })?;
            if l.size.is_some_and(|s| s != size) {
                return Err(ScanError::Layer {
                    layer: l.id(),
                    message: format!("{size} bytes in the content store, the manifest says {}", l.size.unwrap_or(0)),
                });
            }
            total += size;
        }
        Ok(Some(total))
    }

    fn open(&self, l: &LayerRef) -> Result<Blob<'_>, ScanError> {
        let digest = l.digest.clone().unwrap_or_default();
        Ok(Blob::Stream(Box::new(self.store.client.read(&digest, l.size.unwrap_or(u64::MAX)))))
    }
}

fn connect(opts: &ScanOptions, required: bool) -> Result<Option<Client>, ScanError> {
    let o = &opts.containerd;
    if !super::daemon::present(&super::daemon::Endpoint::Unix(o.address.clone())) {
        if !required {
            return Ok(None);
        }
        return Err(failed(
            o,
            "no socket there (is containerd running? CONTAINERD_ADDRESS or --containerd-address names another)".into(),
        ));
    }
    Client::connect(o, opts).map(Some)
}

fn read(client: Client, name: &str, target: proto::Descriptor, opts: &ScanOptions) -> Result<ImageReport, ScanError> {
    let client = Arc::new(client);
    let mut source = Containerd { store: ContentStore { client, name: name.to_string(), target } };
    super::pipeline::run(&mut source, opts)
}

/// Scans `name` from containerd's store (`containerd:NAME`). containerd keeps full names
/// (`docker.io/library/ubuntu:24.04`): a short one is tried as `ctr` users write it too.
pub fn scan(name: &str, opts: &ScanOptions) -> Result<ImageReport, ScanError> {
    let client = connect(opts, true)?.expect("required");
    for n in candidates(name) {
        if let Some(t) = client.image(&n)? {
            return read(client, &n, t, opts);
        }
    }
    Err(ScanError::Image(format!(
        "containerd:{}: no such image in namespace {} (at unix://{}; `ctr -n {} images ls` lists them)",
        esc(name),
        esc(&opts.containerd.namespace),
        opts.containerd.address.display(),
        esc(&opts.containerd.namespace),
    )))
}

/// For a bare reference: what containerd holds of it. `found` hears where, before the read
/// starts.
pub fn try_scan(name: &str, opts: &ScanOptions, found: &dyn Fn(&str)) -> Result<Lookup, ScanError> {
    let client = match connect(opts, false) {
        Ok(Some(c)) => c,
        Ok(None) => return Ok(Lookup::Absent),
        Err(e) => return Ok(Lookup::Unusable(e.to_string())),
    };
    for n in candidates(name) {
        match client.image(&n) {
            Ok(Some(t)) => {
                found(&format!(
                    "containerd at unix://{} (namespace {})",
                    opts.containerd.address.display(),
                    esc(&opts.containerd.namespace)
                ));
                return read(client, &n, t, opts).map(|r| Lookup::Found(Box::new(r)));
            }
            Ok(None) => {}
            Err(e) => return Ok(Lookup::Unusable(e.to_string())),
        }
    }
    Ok(Lookup::Absent)
}

/// The names `name` may be stored under: itself, then as docker normalises it
/// (`ubuntu` → `docker.io/library/ubuntu:latest`).
fn candidates(name: &str) -> Vec<String> {
    let mut out = vec![name.to_string()];
    if let Ok(r) = crate::registry::parse_reference(name) {
        let full = r.whole();
        if full != name {
            out.push(full);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A namespace no gRPC header can carry is refused, never sent as no namespace at all.
    #[test]
    fn a_namespace_no_header_can_carry_is_refused() {
        let opts = Options { address: "/nonexistent/containerd.sock".into(), namespace: "team\nb".into() };
        let e = Client::connect(&opts, &ScanOptions::default()).err().expect("refused").to_string();
        assert!(e.contains("not a valid namespace name") && e.contains("team\\nb"), "{e}");
    }
}
