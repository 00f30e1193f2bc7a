//! The object pool's [`RemoteObjects`] on S3-compatible storage, through
//! the `object_store` crate, run on a private tokio runtime.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use cairn_objects::{ObjectHash, PutOutcome, RemoteEntry, RemoteError, RemoteFiles, RemoteObjects};
use futures_util::{StreamExt, TryStreamExt};
use object_store::aws::{AmazonS3, AmazonS3Builder, AmazonS3ConfigKey, S3ConditionalPut};
use object_store::client::{HttpError, HttpErrorKind};
use object_store::path::Path;
use object_store::{
    BackoffConfig, ClientConfigKey, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload,
    RetryConfig,
};

use crate::location::Location;
use crate::retry::{Backoff, Growth};
use crate::S3Error;

/// A create-only put that meets `409 Conflict` (S3's answer while another
/// conditional write of the same key is in flight) is tried again: five
/// tries in all, 0.1, 0.2, 0.4 and 0.8 s apart.
const CONFLICT: Backoff = Backoff {
    retries: 4,
    first: Duration::from_millis(100),
    growth: Growth::Doubling,
    cap: Duration::from_secs(1),
};

/// How to reach an S3-compatible store. Whatever is not set here comes
/// from the environment ([`S3Config::from_env`]) or the defaults below.
///
/// Defaults: region `us-east-1`; AWS's endpoint for the region; HTTPS only;
/// connect timeout 5 s; request timeout 120 s; up to 3 retries with backoff
/// (100 ms doubling, at most 2 s apart, none after 15 s) of requests that
/// could not connect or met a server error, as `object_store` retries.
/// The [`Debug`] output never shows a secret.
#[derive(Clone, Default)]
pub struct S3Config {
    from_env: bool,
    endpoint: Option<String>,
    region: Option<String>,
    credentials: Option<(String, String)>,
    token: Option<String>,
    allow_http: Option<bool>,
    connect_timeout: Option<Duration>,
    request_timeout: Option<Duration>,
}

impl std::fmt::Debug for S3Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Config")
            .field("from_env", &self.from_env)
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("credentials", &self.credentials.as_ref().map(|_| "<set>"))
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .field("allow_http", &self.allow_http)
            .finish_non_exhaustive()
    }
}

impl S3Config {
    /// Nothing from the environment: only what is set on this value.
    pub fn new() -> Self {
        Self::default()
    }

    /// The usual AWS environment first, then what is set on this value:
    /// `AWS_ENDPOINT_URL` (or `AWS_ENDPOINT_URL_S3`), `AWS_REGION` /
    /// `AWS_DEFAULT_REGION`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
    /// `AWS_SESSION_TOKEN`, `AWS_ALLOW_HTTP=true` for a plain-http endpoint,
    /// and the rest `object_store`'s `AmazonS3Builder::from_env` reads
    /// (web identity, container credentials). Without credentials in the
    /// environment the instance metadata service is asked for them.
    pub fn from_env() -> Self {
        S3Config {
            from_env: true,
            ..Self::default()
        }
    }

    /// The endpoint, e.g. `http://127.0.0.1:9000` (path-style requests).
    pub fn endpoint(mut self, url: impl Into<String>) -> Self {
        self.endpoint = Some(url.into());
        self
    }

    /// The region requests are signed for.
    pub fn region(mut self, region: impl Into<String>) -> Self {
        self.region = Some(region.into());
        self
    }

    /// Static credentials: an access key id and its secret.
    pub fn credentials(mut self, key_id: impl Into<String>, secret: impl Into<String>) -> Self {
        self.credentials = Some((key_id.into(), secret.into()));
        self
    }

    /// A session token to go with the credentials.
    pub fn session_token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// Allows a plain-http endpoint. Default: false (HTTPS only).
    pub fn allow_http(mut self, allow: bool) -> Self {
        self.allow_http = Some(allow);
        self
    }

    /// How long connecting may take. Default: 5 s.
    pub fn connect_timeout(mut self, t: Duration) -> Self {
        self.connect_timeout = Some(t);
        self
    }

    /// How long one request may take in all. Default: 120 s.
    pub fn request_timeout(mut self, t: Duration) -> Self {
        self.request_timeout = Some(t);
        self
    }

    /// Opens the pool at `url`, `s3://BUCKET[/PREFIX]` (rules in
    /// `location.rs`), without contacting the server: see
    /// [`S3Objects::check`].
    ///
    /// # Errors
    /// [`S3Error::BadUrl`]; [`S3Error::Config`] when the settings do not make
    /// a client (an http endpoint without `allow_http`, a key id without a
    /// secret); [`S3Error::Runtime`].
    pub fn open(&self, url: &str) -> Result<S3Objects, S3Error> {
        let loc = Location::parse(url)?;
        let config_error = |reason: String| S3Error::Config {
            url: loc.url(),
            reason,
        };
        let mut b = match self.from_env {
            true => AmazonS3Builder::from_env(),
            false => AmazonS3Builder::new(),
        };
        if let Some(e) = &self.endpoint {
            b = b.with_endpoint(e);
        }
        if let Some(r) = &self.region {
            b = b.with_region(r);
        }
        if let Some((id, secret)) = &self.credentials {
            b = b.with_access_key_id(id).with_secret_access_key(secret);
        }
        if let Some(t) = &self.token {
            b = b.with_token(t);
        }
        if let Some(a) = self.allow_http {
            b = b.with_allow_http(a);
        }
        let ms = |d: Duration| format!("{}ms", d.as_millis().max(1));
        b = b
            .with_bucket_name(&loc.bucket)
            .with_conditional_put(S3ConditionalPut::ETagMatch)
            .with_config(
                AmazonS3ConfigKey::Client(ClientConfigKey::ConnectTimeout),
                ms(self.connect_timeout.unwrap_or(Duration::from_secs(5))),
            )
            .with_config(
                AmazonS3ConfigKey::Client(ClientConfigKey::Timeout),
                ms(self.request_timeout.unwrap_or(Duration::from_secs(120))),
            )
            .with_retry(RetryConfig {
                backoff: BackoffConfig {
                    init_backoff: Duration::from_millis(100),
                    max_backoff: Duration::from_secs(2),
                    base: 2.0,
                },
                max_retries: 3,
                retry_timeout: Duration::from_secs(15),
            });
        let endpoint = b
            .get_config_value(&AmazonS3ConfigKey::S3Endpoint)
            .or_else(|| b.get_config_value(&AmazonS3ConfigKey::Endpoint))
            .unwrap_or_else(|| {
                let region = b
                    .get_config_value(&AmazonS3ConfigKey::Region)
                    .unwrap_or_else(|| "us-east-1".into());
                format!("https://s3.{region}.amazonaws.com")
            });
        let http_allowed = b
            .get_config_value(&AmazonS3ConfigKey::Client(ClientConfigKey::AllowHttp))
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
        if endpoint.starts_with("http://") && !http_allowed {
            return Err(config_error(format!(
                "the endpoint {endpoint} is plain http: set AWS_ALLOW_HTTP=true to allow it"
            )));
        }
        let store = b.build().map_err(|e| config_error(e.to_string()))?;
        Ok(S3Objects {
            name: loc.url(),
            loc,
            endpoint,
            store: Arc::new(store),
        })
    }
}

/// A content-addressed object pool in an S3 bucket, under
/// `PREFIX/objects/<aa>/<rest>` like the local layout, each object its
/// stored encoding. Synchronous: requests run on the remote stores' one
/// runtime (`bridge.rs`) and the calling thread waits, so it may be used
/// from any thread, inside another runtime too.
///
/// Create-only puts use `If-None-Match: *`, which S3 (since 2024) and most
/// compatible stores honour: `412 Precondition Failed` means the object is
/// there, a successful dedup. A store that ignores the header would let a
/// put overwrite, which for content-addressed names still writes the same
/// object (what is fetched is checked against its name either way).
///
/// A `HEAD` cannot tell a missing object from a missing bucket, so
/// [`RemoteObjects::contains`] answers `false` for both; a put or a get then
/// names the bucket ([`S3Error::NoSuchBucket`]). [`S3Objects::check`] asks
/// up front.
pub struct S3Objects {
    loc: Location,
    name: String,
    endpoint: String,
    store: Arc<AmazonS3>,
}

impl std::fmt::Debug for S3Objects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Objects")
            .field("url", &self.name)
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

/// What a failed request comes down to.
enum Failure {
    /// Connecting or talking to the endpoint failed.
    Unreachable(String),
    /// 404, with the server's error code when it sent one.
    NotFound(Option<String>),
    /// 412 (or 304) on a create-only put: the object is there.
    Exists,
    /// 409 on a create-only put: another write of the key is in flight.
    Conflict,
    /// 401/403, or an error code that says the credentials are wrong.
    Denied(String),
    /// Anything else, in words.
    Other(String),
}

impl S3Objects {
    /// Opens `url` with [`S3Config::from_env`].
    ///
    /// # Errors
    /// As [`S3Config::open`].
    pub fn open(url: &str) -> Result<S3Objects, S3Error> {
        S3Config::from_env().open(url)
    }

    /// The endpoint requests go to.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Asks the server for one page of the pool's listing: the bucket
    /// exists, the credentials are accepted and the endpoint answers.
    ///
    /// # Errors
    /// [`S3Error::Unreachable`], [`S3Error::NoSuchBucket`],
    /// [`S3Error::Denied`], [`S3Error::Request`].
    pub fn check(&self) -> Result<(), S3Error> {
        let dir = self.loc.objects_dir();
        let store = Arc::clone(&self.store);
        let path = Path::from(dir.as_str());
        let first = self.run(async move { store.list(Some(&path)).next().await })?;
        match first {
            None | Some(Ok(_)) => Ok(()),
            Some(Err(e)) => Err(self.failure("listing", &dir, classify_listing(&e))),
        }
    }

    /// Runs `fut` on the remote stores' runtime and waits for it.
    fn run<T: Send + 'static>(
        &self,
        fut: impl Future<Output = T> + Send + 'static,
    ) -> Result<T, S3Error> {
        crate::bridge::run(fut).map_err(|e| S3Error::Runtime(e.to_string()))
    }

    fn failure(&self, action: &'static str, key: &str, f: Failure) -> S3Error {
        let bucket = self.loc.bucket.clone();
        let endpoint = self.endpoint.clone();
        match f {
            Failure::Unreachable(reason) => S3Error::Unreachable { endpoint, reason },
            Failure::NotFound(Some(code)) if code == "NoSuchBucket" => {
                S3Error::NoSuchBucket { bucket, endpoint }
            }
            Failure::Denied(code) => S3Error::Denied {
                bucket,
                endpoint,
                code,
            },
            other => S3Error::Request {
                action,
                bucket,
                key: key.to_owned(),
                endpoint,
                reason: match other {
                    Failure::NotFound(code) => format!(
                        "not found ({})",
                        code.as_deref().unwrap_or("404 without an error code")
                    ),
                    Failure::Exists => "it exists already".into(),
                    Failure::Conflict => {
                        "another write of it is in flight (409 Conflict); try again".into()
                    }
                    Failure::Other(reason) => reason,
                    _ => String::new(),
                },
            },
        }
    }

    fn contains_key(&self, key: &str) -> Result<bool, S3Error> {
        let store = Arc::clone(&self.store);
        let path = Path::from(key);
        match self.run(async move { store.head(&path).await })? {
            Ok(_) => Ok(true),
            Err(e) => match classify(&e) {
                Failure::NotFound(_) => Ok(false),
                f => Err(self.failure("looking up", key, f)),
            },
        }
    }

    fn get_key(&self, key: &str) -> Result<Option<Vec<u8>>, S3Error> {
        let store = Arc::clone(&self.store);
        let path = Path::from(key);
        let got = self.run(async move {
            match store.get(&path).await {
                Ok(r) => r.bytes().await,
                Err(e) => Err(e),
            }
        })?;
        match got {
            Ok(b) => Ok(Some(b.to_vec())),
            Err(e) => match classify(&e) {
                Failure::NotFound(code) if code.as_deref() != Some("NoSuchBucket") => Ok(None),
                f => Err(self.failure("reading", key, f)),
            },
        }
    }

    fn put_key(&self, key: &str, bytes: &[u8]) -> Result<PutOutcome, S3Error> {
        let payload = Bytes::copy_from_slice(bytes);
        let put = |_| {
            let store = Arc::clone(&self.store);
            let path = Path::from(key);
            let body = PutPayload::from(payload.clone());
            let put = self.run(async move {
                store
                    .put_opts(&path, body, PutOptions::from(PutMode::Create))
                    .await
            })?;
            Ok(put.map_err(|e| classify(&e)))
        };
        // 409: another write of the key is in flight; tried again.
        let put = CONFLICT.run(
            |n| match put(n) {
                Ok(Err(Failure::Conflict)) => Err(None),
                Ok(other) => Ok(other),
                Err(e) => Err(Some(e)),
            },
            Option::is_none,
        );
        match put {
            Ok(Ok(_)) => Ok(PutOutcome::Created),
            Ok(Err(Failure::Exists)) => Ok(PutOutcome::AlreadyThere),
            // A put never meets a missing key: a 404 is the bucket's.
            Ok(Err(Failure::NotFound(_))) => Err(S3Error::NoSuchBucket {
                bucket: self.loc.bucket.clone(),
                endpoint: self.endpoint.clone(),
            }),
            Ok(Err(f)) => Err(self.failure("storing", key, f)),
            Err(None) => Err(self.failure("storing", key, Failure::Conflict)),
            Err(Some(e)) => Err(e),
        }
    }

    fn list_keys(
        &self,
        hex_prefix: &str,
        visit: &mut dyn FnMut(RemoteEntry),
    ) -> Result<(), S3Error> {
        if !hex_prefix
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            return Ok(()); // no object's name starts with it
        }
        let mut dir = self.loc.objects_dir();
        if hex_prefix.len() >= 2 {
            dir = format!("{dir}/{}", &hex_prefix[..2]);
        }
        for meta in self.list_below(&dir)? {
            let Some(hash) = self.loc.hash_of(meta.location.as_ref()) else {
                continue;
            };
            if hash.to_hex().starts_with(hex_prefix) {
                visit(RemoteEntry {
                    hash,
                    stored_bytes: meta.size,
                    last_modified: Some(meta.last_modified.into()),
                });
            }
        }
        Ok(())
    }
}

impl S3Objects {
    /// Every object below the key `dir`, at any depth (as many requests as
    /// the listing has pages).
    fn list_below(&self, dir: &str) -> Result<Vec<object_store::ObjectMeta>, S3Error> {
        let store = Arc::clone(&self.store);
        let path = Path::from(dir);
        let listed = self.run(async move {
            store
                .list(Some(&path))
                .try_collect::<Vec<object_store::ObjectMeta>>()
                .await
        })?;
        listed.map_err(|e| self.failure("listing", dir, classify_listing(&e)))
    }
}

impl RemoteObjects for S3Objects {
    fn name(&self) -> &str {
        &self.name
    }

    fn contains(&self, hash: &ObjectHash) -> Result<bool, RemoteError> {
        Ok(self.contains_key(&self.loc.key_of(hash))?)
    }

    fn put_create(&self, hash: &ObjectHash, stored: &[u8]) -> Result<PutOutcome, RemoteError> {
        Ok(self.put_key(&self.loc.key_of(hash), stored)?)
    }

    fn get(&self, hash: &ObjectHash) -> Result<Option<Vec<u8>>, RemoteError> {
        Ok(self.get_key(&self.loc.key_of(hash))?)
    }

    fn list(
        &self,
        hex_prefix: &str,
        visit: &mut dyn FnMut(RemoteEntry),
    ) -> Result<(), RemoteError> {
        Ok(self.list_keys(hex_prefix, visit)?)
    }

    fn get_head(&self, hash: &ObjectHash, n: usize) -> Result<Option<Vec<u8>>, RemoteError> {
        let key = self.loc.key_of(hash);
        let store = Arc::clone(&self.store);
        let path = Path::from(key.as_str());
        let options = object_store::GetOptions {
            range: Some(object_store::GetRange::Bounded(0..n as u64)),
            ..Default::default()
        };
        let got = self.run(async move {
            match store.get_opts(&path, options).await {
                Ok(r) => r.bytes().await,
                Err(e) => Err(e),
            }
        })?;
        match got {
            Ok(b) => Ok(Some(b.to_vec())),
            Err(e) => match classify(&e) {
                Failure::NotFound(code) if code.as_deref() != Some("NoSuchBucket") => Ok(None),
                // A range past a short object's end: read it whole.
                _ if e.to_string().contains("416") || e.to_string().contains("range") => {
                    Ok(self.get_key(&key)?.map(|mut b| {
                        b.truncate(n);
                        b
                    }))
                }
                f => Err(self.failure("reading", &key, f).into()),
            },
        }
    }

    fn delete(&self, hash: &ObjectHash) -> Result<(), RemoteError> {
        let key = self.loc.key_of(hash);
        let store = Arc::clone(&self.store);
        let path = Path::from(key.as_str());
        let done = self.run(async move { store.delete(&path).await })?;
        match done {
            Ok(()) => Ok(()),
            Err(e) => match classify(&e) {
                Failure::NotFound(code) if code.as_deref() != Some("NoSuchBucket") => Ok(()),
                f => Err(self.failure("deleting", &key, f).into()),
            },
        }
    }
}

impl S3Objects {
    fn file_key(&self, rel: &str) -> Result<String, S3Error> {
        self.loc.file_key(rel).ok_or_else(|| S3Error::BadUrl {
            url: rel.chars().take(300).collect(),
            reason: "a file's path is `/`-separated letters, digits, `.`, `_` and `-`".into(),
        })
    }
}

/// Manifests under `PREFIX/files/<path below a store's root>`.
impl RemoteFiles for S3Objects {
    fn get_file(&self, rel: &str) -> Result<Option<Vec<u8>>, RemoteError> {
        Ok(self.get_key(&self.file_key(rel)?)?)
    }

    fn put_file(&self, rel: &str, bytes: &[u8]) -> Result<PutOutcome, RemoteError> {
        Ok(self.put_key(&self.file_key(rel)?, bytes)?)
    }

    fn list_files(&self, rel: &str) -> Result<Vec<String>, RemoteError> {
        let dir = self.file_key(rel)?;
        let store = Arc::clone(&self.store);
        let path = Path::from(dir.as_str());
        let listed = self.run(async move { store.list_with_delimiter(Some(&path)).await })?;
        let listed = listed.map_err(|e| self.failure("listing", &dir, classify_listing(&e)))?;
        let mut names: Vec<String> = listed
            .objects
            .iter()
            .filter_map(|m| m.location.filename().map(str::to_owned))
            .collect();
        names.sort();
        Ok(names)
    }

    fn list_tree(&self, rel: &str) -> Result<Vec<String>, RemoteError> {
        let dir = self.file_key(rel)?;
        let below = format!("{dir}/");
        let mut paths: Vec<String> = self
            .list_below(&dir)?
            .iter()
            .filter_map(|m| m.location.as_ref().strip_prefix(&below).map(str::to_owned))
            .collect();
        paths.sort();
        Ok(paths)
    }
}

/// As [`classify`], for a listing, where a 404 can only be the bucket's.
fn classify_listing(e: &object_store::Error) -> Failure {
    match classify(e) {
        Failure::NotFound(_) => Failure::NotFound(Some("NoSuchBucket".into())),
        f => f,
    }
}

/// Reduces an `object_store` error to what it means here, and to words
/// that hold no credential: the transport's innermost error, or the
/// server's `Code` and `Message`, never its whole body.
fn classify(e: &object_store::Error) -> Failure {
    use object_store::Error as E;
    if let Some(reason) = transport(e) {
        return Failure::Unreachable(reason);
    }
    let text = e.to_string();
    let code = between(&text, "<Code>", "</Code>");
    // Some requests (listings) report a 404 as a generic error.
    if code.as_deref() == Some("NoSuchBucket") || status(&text).starts_with("404") {
        return Failure::NotFound(code);
    }
    match e {
        E::NotFound { .. } => return Failure::NotFound(code),
        E::AlreadyExists { source, .. } => {
            let precondition = source
                .downcast_ref::<E>()
                .is_some_and(|s| matches!(s, E::Precondition { .. } | E::NotModified { .. }));
            return match precondition {
                true => Failure::Exists,
                false => Failure::Conflict,
            };
        }
        E::Precondition { .. } | E::NotModified { .. } => return Failure::Exists,
        E::PermissionDenied { .. } | E::Unauthenticated { .. } => {
            return Failure::Denied(code.unwrap_or_else(|| status(&text)))
        }
        _ => {}
    }
    if let Some(code) = &code {
        if matches!(
            code.as_str(),
            "InvalidAccessKeyId"
                | "SignatureDoesNotMatch"
                | "AccessDenied"
                | "ExpiredToken"
                | "InvalidToken"
                | "InvalidSecurity"
        ) {
            return Failure::Denied(code.clone());
        }
    }
    Failure::Other(match (code, between(&text, "<Message>", "</Message>")) {
        (Some(c), Some(m)) => format!("{c}: {m}"),
        (Some(c), None) => c,
        _ if text.contains("status code: ") => status(&text),
        _ => innermost(e),
    })
}

/// The innermost cause of a transport failure, when `e` is one.
fn transport(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(h) = err.downcast_ref::<HttpError>() {
            return match h.kind() {
                HttpErrorKind::Timeout => Some(format!("no answer in time: {}", innermost(h))),
                HttpErrorKind::Connect | HttpErrorKind::Request | HttpErrorKind::Interrupted => {
                    Some(innermost(h))
                }
                _ => None,
            };
        }
        cur = err.source();
    }
    None
}

/// The message of the last error in `e`'s source chain.
fn innermost(e: &(dyn std::error::Error + 'static)) -> String {
    let mut last = e;
    while let Some(next) = last.source() {
        last = next;
    }
    let mut s: String = last.to_string().chars().take(300).collect();
    if s.is_empty() {
        s = "no detail".into();
    }
    s
}

/// The HTTP status in an `object_store` error's text, e.g. `403 Forbidden`.
fn status(text: &str) -> String {
    text.split_once("status code: ")
        .map(|(_, rest)| rest.split(':').next().unwrap_or(rest).trim().to_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "no status".into())
}

/// The text between `open` and `close`, CDATA unwrapped, when present.
fn between(text: &str, open: &str, close: &str) -> Option<String> {
    let start = text.find(open)? + open.len();
    let len = text[start..].find(close)?;
    let inner = text[start..start + len].trim();
    let inner = inner
        .strip_prefix("<![CDATA[")
        .and_then(|s| s.strip_suffix("]]>"))
        .unwrap_or(inner);
    Some(inner.chars().take(200).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_errors_are_reduced_to_code_and_message() {
        let body = "Error performing PUT http://h/b/k in 3ms - Server returned non-2xx status code: \
                    403 Forbidden: <?xml version=\"1.0\"?><Error><Code>SignatureDoesNotMatch</Code>\
                    <Message><![CDATA[The request signature we calculated does not match]]></Message>\
                    <AWSAccessKeyId>AKIDEXAMPLE</AWSAccessKeyId><StringToSign>secret-ish</StringToSign></Error>";
        assert_eq!(
            between(body, "<Code>", "</Code>").as_deref(),
            Some("SignatureDoesNotMatch")
        );
        assert_eq!(
            between(body, "<Message>", "</Message>").as_deref(),
            Some("The request signature we calculated does not match")
        );
        assert_eq!(status(body), "403 Forbidden");
        assert_eq!(status("nothing here"), "no status");
        assert_eq!(between("<Code>", "<Code>", "</Code>"), None);
    }

    #[test]
    fn config_debug_shows_no_secret() {
        let c = S3Config::new()
            .credentials("AKID-visible-nowhere", "the-secret")
            .session_token("the-token");
        let shown = format!("{c:?}");
        assert!(!shown.contains("the-secret") && !shown.contains("the-token"));
        assert!(!shown.contains("AKID-visible-nowhere"));
    }

    #[test]
    fn a_plain_http_endpoint_needs_allow_http() {
        let e = S3Config::new()
            .endpoint("http://127.0.0.1:9")
            .credentials("k", "s")
            .open("s3://b/p")
            .unwrap_err();
        assert!(
            matches!(&e, S3Error::Config { reason, .. } if reason.contains("AWS_ALLOW_HTTP")),
            "{e}"
        );
        let s3 = S3Config::new()
            .endpoint("http://127.0.0.1:9")
            .credentials("k", "s")
            .allow_http(true)
            .open("s3://b/p")
            .unwrap();
        assert_eq!(s3.name(), "s3://b/p");
        assert_eq!(s3.endpoint(), "http://127.0.0.1:9");
    }
}
