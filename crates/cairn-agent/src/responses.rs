//! The response store, in process (DESIGN §7).
//!
//! Invariant: a completed model response is made durable under its
//! idempotency key BEFORE the assistant record that uses it is written. So if
//! the process dies between the two, the retry finds the response here and is
//! served from the store instead of being bought again, and the journal says
//! it was a replay.
//!
//! The key is derived from the run, the turn and the exact request (canonical
//! JSON of provider, model, base URL and request): a different request is a
//! different call and is never served a stored answer.
//!
//! Layout: `<store>/gateway/responses/<aa>/<key>.json`, each written by the
//! durable-write helper (temp file, fsync, rename, directory fsync).

use std::path::PathBuf;

use cairn_model::{ModelRequest, ModelResponse};
use cairn_store::{durable, Store};
use serde::{Deserialize, Serialize};

use crate::AgentError;

/// One stored response.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StoredResponse {
    /// The idempotency key.
    pub key: String,
    /// The run that bought it.
    pub run: String,
    /// The turn it answered.
    pub turn: u64,
    /// When it was stored.
    pub stored: String,
    /// The response.
    pub response: ModelResponse,
}

/// Completed responses by idempotency key.
#[derive(Clone, Debug)]
pub struct ResponseStore {
    dir: PathBuf,
}

/// What identifies one model call.
#[derive(Serialize)]
struct KeyParts<'a> {
    run: &'a str,
    turn: u64,
    provider: &'a str,
    model: &'a str,
    base_url: Option<&'a str>,
    request: &'a ModelRequest,
}

impl ResponseStore {
    /// The response store of `store`.
    pub fn new(store: &Store) -> Self {
        ResponseStore {
            dir: store.gateway_dir().join("responses"),
        }
    }

    /// The idempotency key of a call.
    pub fn key(
        run: &str,
        turn: u64,
        provider: &str,
        model: &str,
        base_url: Option<&str>,
        request: &ModelRequest,
    ) -> String {
        crate::canonical::hash(
            "cairn/response/v1\n",
            &KeyParts {
                run,
                turn,
                provider,
                model,
                base_url,
                request,
            },
        )
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir
            .join(&key[..2.min(key.len())])
            .join(format!("{key}.json"))
    }

    /// The stored response for `key`, if any.
    ///
    /// # Errors
    /// [`AgentError::StoredResponse`] when the file exists but does not read.
    pub fn get(&self, key: &str) -> Result<Option<StoredResponse>, AgentError> {
        let path = self.path(key);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(AgentError::StoredResponse {
                    path,
                    reason: e.to_string(),
                })
            }
        };
        match serde_json::from_slice::<StoredResponse>(&bytes) {
            Ok(s) if s.key == key => Ok(Some(s)),
            Ok(_) => Err(AgentError::StoredResponse {
                path,
                reason: "it is stored under the wrong key".into(),
            }),
            Err(e) => Err(AgentError::StoredResponse {
                path,
                reason: e.to_string(),
            }),
        }
    }

    /// Stores a response durably.
    ///
    /// # Errors
    /// IO errors from the durable write.
    pub fn put(&self, stored: &StoredResponse) -> Result<(), AgentError> {
        let path = self.path(&stored.key);
        if let Some(dir) = path.parent() {
            durable::create_dir_private(dir)?;
        }
        let bytes = serde_json::to_vec(stored).map_err(|e| AgentError::StoredResponse {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        durable::write_atomic(&path, &bytes)?;
        Ok(())
    }
}
