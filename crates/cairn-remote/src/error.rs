//! The S3 backend's one error type.
//!
//! Policy: every variant says what was wrong in the user's terms (the
//! endpoint that cannot be reached, the bucket that does not exist, the
//! credentials that were refused) and what to do next. Credentials never
//! appear in a message: a server's error body is reduced to its `Code` and
//! `Message`, never echoed whole (some echo the request they refused).

/// What went wrong talking to S3-compatible storage.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum S3Error {
    /// The location is not `s3://BUCKET[/PREFIX]`.
    #[error(
        "`{url}` is not an S3 location: {reason}; write it as s3://BUCKET or s3://BUCKET/PREFIX"
    )]
    BadUrl {
        /// The location given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The client could not be set up from the settings and environment.
    #[error("cannot set up the S3 client for {url}: {reason}")]
    Config {
        /// The location.
        url: String,
        /// What is wrong (no credential is ever shown).
        reason: String,
    },
    /// The endpoint did not answer: refused, unresolvable, or timed out.
    #[error("cannot reach the S3 endpoint {endpoint} ({reason}): check AWS_ENDPOINT_URL (and AWS_ALLOW_HTTP for a plain-http endpoint), that the server is running and that this machine can reach it")]
    Unreachable {
        /// The endpoint, as configured (or AWS's for the region).
        endpoint: String,
        /// What the connection attempt met.
        reason: String,
    },
    /// The bucket does not exist.
    #[error("the bucket `{bucket}` does not exist at {endpoint}: create it, or correct the bucket in the location")]
    NoSuchBucket {
        /// The bucket.
        bucket: String,
        /// The endpoint asked.
        endpoint: String,
    },
    /// The server refused the request's credentials or denied access.
    #[error("{endpoint} refused access to bucket `{bucket}` ({code}): check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or the role in use) and that they may read and write the bucket")]
    Denied {
        /// The bucket.
        bucket: String,
        /// The endpoint asked.
        endpoint: String,
        /// The server's error code (e.g. `InvalidAccessKeyId`) or status.
        code: String,
    },
    /// Any other failure of a request.
    #[error("{action} {key} in bucket `{bucket}` at {endpoint} failed: {reason}")]
    Request {
        /// What was being done, e.g. "storing".
        action: &'static str,
        /// The bucket.
        bucket: String,
        /// The key.
        key: String,
        /// The endpoint asked.
        endpoint: String,
        /// The server's code and message, or the client's error.
        reason: String,
    },
    /// The backend's runtime could not be started or lost a request.
    #[error(
        "the S3 backend's runtime failed: {0}; this is a bug in cairn or an exhausted machine"
    )]
    Runtime(String),
}

impl S3Error {
    /// True when the endpoint could not be reached at all.
    pub fn is_unreachable(&self) -> bool {
        matches!(self, S3Error::Unreachable { .. })
    }
}
