//! Where a store is and how its stream must be set up: the `nats://`
//! location, connecting, and the stream settings that are created or
//! refused (DESIGN §12: nothing that could drop a record).

use std::time::Duration;

use async_nats::jetstream::{self, kv, stream};
use cairn_journal::RemoteJournalError;

use super::batch::{batches_from, direct_batches_from};
use super::classify::{classify, is_stream_not_found, Failure};
use super::JetStreamConfig;

/// A parsed `nats://` location.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Location {
    /// `HOST:PORT`, one or more.
    pub(super) servers: Vec<String>,
    pub(super) prefix: String,
    /// `?replicas=N`, when given.
    pub(super) replicas: Option<usize>,
}

impl Location {
    pub(super) fn parse(url: &str) -> Result<Location, RemoteJournalError> {
        let bad = |reason: &str| {
            RemoteJournalError::BadUrl {
            url: url.chars().take(300).collect(),
            reason: format!("{reason}; write it as nats://HOST:PORT/PREFIX (several servers as HOST:PORT,HOST:PORT; PREFIX letters, digits, `_` and `-`)"),
        }
        };
        let rest = url
            .strip_prefix("nats://")
            .ok_or_else(|| bad("it does not start with nats://"))?;
        let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (hosts, prefix) = rest
            .split_once('/')
            .ok_or_else(|| bad("it names no PREFIX"))?;
        let prefix = prefix.strip_suffix('/').unwrap_or(prefix);
        if prefix.is_empty()
            || prefix.len() > 64
            || !prefix
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(bad("its PREFIX is not 1-64 letters, digits, `_` or `-`"));
        }
        let mut servers = Vec::new();
        for h in hosts.split(',') {
            let Some((host, port)) = h.rsplit_once(':') else {
                return Err(bad(&format!("`{h}` has no :PORT")));
            };
            if host.is_empty() || port.parse::<u16>().is_err() || h.contains('@') {
                return Err(bad(&format!("`{h}` is not HOST:PORT")));
            }
            servers.push(h.to_owned());
        }
        let mut replicas = None;
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            match pair.split_once('=') {
                Some(("replicas", n)) => match n.parse::<usize>() {
                    Ok(n @ 1..=5) => replicas = Some(n),
                    _ => return Err(bad("replicas is 1 to 5")),
                },
                _ => return Err(bad(&format!("`{pair}` is not a known option (replicas=N)"))),
            }
        }
        Ok(Location {
            servers,
            prefix: prefix.to_owned(),
            replicas,
        })
    }

    pub(super) fn url(&self) -> String {
        format!("nats://{}/{}", self.servers.join(","), self.prefix)
    }

    pub(super) fn stream(&self) -> String {
        format!("CAIRN_{}", self.prefix)
    }

    pub(super) fn subjects(&self) -> String {
        format!("{}.runs.>", self.prefix)
    }

    pub(super) fn subject(&self, run: &str) -> String {
        format!("{}.runs.{run}", self.prefix)
    }

    pub(super) fn leases(&self) -> String {
        format!("CAIRN_{}_leases", self.prefix)
    }
}

pub(super) async fn connect(
    loc: &Location,
    name: &str,
    config: &JetStreamConfig,
) -> Result<Connected, RemoteJournalError> {
    let failed =
        |action: &str, e: &(dyn std::error::Error + 'static)| classify(e).into_error(name, action);
    let addrs: Vec<async_nats::ServerAddr> = loc
        .servers
        .iter()
        .map(|s| format!("nats://{s}").parse())
        .collect::<Result<_, _>>()
        .map_err(|e: std::io::Error| RemoteJournalError::BadUrl {
            url: name.to_owned(),
            reason: e.to_string(),
        })?;
    let client = async_nats::ConnectOptions::new()
        .name("cairn")
        .connection_timeout(config.connect_timeout)
        .request_timeout(Some(config.ack_timeout))
        .connect(addrs)
        .await
        .map_err(|e| RemoteJournalError::Unreachable {
            remote: name.to_owned(),
            reason: e.to_string(),
        })?;
    let version = client.server_info().version;
    let batching = batches_from(&version);
    let js = jetstream::new(client);
    let (stream, atomic, direct) = match js.get_stream(loc.stream()).await {
        Ok(mut s) => {
            let info = s
                .info()
                .await
                .map_err(|e| failed("read the stream's configuration", &e))?;
            check_stream(loc, name, &info.config)?;
            let mut atomic = info.config.allow_atomic_publish;
            if batching && !atomic {
                // A stream made before, or by a server before 2.12: atomic
                // batches allowed now (they change nothing else). Without
                // the permission, records go one by one as before.
                let mut allowed = info.config.clone();
                allowed.allow_atomic_publish = true;
                match js.update_stream(&allowed).await {
                    Ok(i) => atomic = i.config.allow_atomic_publish,
                    Err(e) => {
                        tracing::debug!("the stream {} keeps atomic batches off: {e}", loc.stream())
                    }
                }
            }
            let direct = info.config.allow_direct;
            (s, atomic, direct)
        }
        Err(e) if is_stream_not_found(&e) => {
            let made = js
                .create_stream(safe_stream(loc, config.replicas))
                .await
                .map_err(|e| failed(&format!("create the stream {}", loc.stream()), &e))?;
            // As the server reports it: one before 2.12 drops the setting.
            let config = &made.cached_info().config;
            let (atomic, direct) = (config.allow_atomic_publish, config.allow_direct);
            (made, atomic, direct)
        }
        Err(e) => {
            return Err(match classify(&e) {
                Failure::Refused(reason) => RemoteJournalError::Failed {
                    remote: name.to_owned(),
                    action: format!("open the stream {}", loc.stream()),
                    reason,
                },
                _ => RemoteJournalError::Unreachable {
                    remote: name.to_owned(),
                    reason: format!(
                        "JetStream did not answer ({e}); is the server started with -js?"
                    ),
                },
            })
        }
    };
    let leases = match js.get_key_value(loc.leases()).await {
        Ok(kv) => kv,
        Err(e) if !is_stream_not_found(&e) => {
            return Err(failed(&format!("open the bucket {}", loc.leases()), &e))
        }
        Err(_) => {
            // The bucket's stream, made as `nats kv add` makes it: made here
            // rather than by `create_key_value`, which needs an account-info
            // answer that servers before 2.10 do not give.
            // Another host may make it at the same moment: theirs will do.
            let made = js.create_stream(lease_stream(loc, config.replicas)).await;
            js.get_key_value(loc.leases())
                .await
                .map_err(|e| match &made {
                    Err(m) => failed(&format!("create the bucket {}", loc.leases()), m),
                    Ok(_) => failed(&format!("open the bucket {}", loc.leases()), &e),
                })?
        }
    };
    Ok(Connected {
        js,
        stream,
        leases,
        batches: batching && atomic,
        direct_batches: direct_batches_from(&version) && direct,
    })
}

/// A connection, its stream and its lease bucket.
pub(super) struct Connected {
    pub(super) js: jetstream::Context,
    pub(super) stream: stream::Stream,
    pub(super) leases: kv::Store,
    /// Whether records may go in atomic batches: a server of 2.12 or later,
    /// and a stream configured (as the server reports it) to allow them.
    pub(super) batches: bool,
    /// Whether records may be read by batched direct gets: a server of
    /// 2.11 or later, and a stream with `allow_direct`.
    pub(super) direct_batches: bool,
}

/// The settings a stream this creates has.
fn safe_stream(loc: &Location, replicas: usize) -> stream::Config {
    stream::Config {
        name: loc.stream(),
        description: Some(
            "cairn session journals: one subject per session, one message per record".into(),
        ),
        subjects: vec![loc.subjects()],
        retention: stream::RetentionPolicy::Limits,
        discard: stream::DiscardPolicy::New,
        max_age: Duration::ZERO,
        max_messages: -1,
        max_bytes: -1,
        max_messages_per_subject: -1,
        max_message_size: -1,
        storage: stream::StorageType::File,
        num_replicas: replicas,
        duplicate_window: Duration::from_secs(120),
        deny_delete: true,
        deny_purge: true,
        allow_direct: true,
        // Records appended together go as one atomic batch (`batch.rs`);
        // a server before 2.12 drops this.
        allow_atomic_publish: true,
        ..Default::default()
    }
}

/// The stream of the lease bucket: one value per key, no age limit.
fn lease_stream(loc: &Location, replicas: usize) -> stream::Config {
    let bucket = loc.leases();
    stream::Config {
        name: format!("KV_{bucket}"),
        subjects: vec![format!("$KV.{bucket}.>")],
        max_messages_per_subject: 1,
        discard: stream::DiscardPolicy::New,
        storage: stream::StorageType::File,
        num_replicas: replicas,
        allow_rollup: true,
        deny_delete: true,
        allow_direct: true,
        duplicate_window: Duration::from_secs(120),
        max_age: Duration::ZERO,
        max_messages: -1,
        max_bytes: -1,
        max_message_size: -1,
        ..Default::default()
    }
}

/// Refuses a stream configuration under which a stored record could go.
fn check_stream(loc: &Location, name: &str, c: &stream::Config) -> Result<(), RemoteJournalError> {
    let refuse = |setting: String, fix: &str| {
        Err(RemoteJournalError::Unsafe {
            remote: name.to_owned(),
            setting: format!("stream {} has {setting}", c.name),
            fix: fix.to_owned(),
        })
    };
    if c.retention != stream::RetentionPolicy::Limits {
        return refuse(
            format!("retention {:?}, which removes records once consumed", c.retention),
            "set retention to limits (`nats stream edit --retention limits` cannot change it: recreate the stream)",
        );
    }
    if !c.max_age.is_zero() {
        return refuse(
            format!("max_age {:?}, which deletes older records", c.max_age),
            "set max_age to 0 (unlimited): `nats stream edit --max-age 0`",
        );
    }
    if c.discard == stream::DiscardPolicy::Old {
        return refuse(
            "discard old, which deletes the oldest records at a limit".into(),
            "set discard to new: `nats stream edit --discard new`",
        );
    }
    for (setting, value) in [
        ("max_msgs", c.max_messages),
        ("max_bytes", c.max_bytes),
        ("max_msgs_per_subject", c.max_messages_per_subject),
    ] {
        if value > 0 {
            return refuse(
                format!("{setting} {value}, a limit on the records kept"),
                &format!("set {setting} to -1 (unlimited)"),
            );
        }
    }
    if c.storage == stream::StorageType::Memory {
        return refuse(
            "memory storage, which loses every record when the server stops".into(),
            "use file storage (recreate the stream with --storage file)",
        );
    }
    if c.max_message_size > 0 && c.max_message_size < 1 << 20 {
        return refuse(
            format!(
                "max_msg_size {}, smaller than a record may be",
                c.max_message_size
            ),
            "set max_msg_size to -1 (the server's max_payload applies)",
        );
    }
    if !c.subjects.iter().any(|s| s == &loc.subjects()) {
        return refuse(
            format!("subjects {:?}, not {}", c.subjects, loc.subjects()),
            &format!("add the subject {} to the stream", loc.subjects()),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_parse() {
        let l = Location::parse("nats://127.0.0.1:4222/team").unwrap();
        assert_eq!(l.servers, vec!["127.0.0.1:4222"]);
        assert_eq!(l.prefix, "team");
        assert_eq!(l.subject("r1"), "team.runs.r1");
        assert_eq!(l.stream(), "CAIRN_team");
        let l = Location::parse("nats://a:1,b:2/x_y-z?replicas=3").unwrap();
        assert_eq!(l.servers, vec!["a:1", "b:2"]);
        assert_eq!(l.replicas, Some(3));
        for bad in [
            "http://a:1/x",
            "nats://a:1",
            "nats://a:1/",
            "nats://a/x",
            "nats://a:99999/x",
            "nats://a:1/x.y",
            "nats://a:1/x/y",
            "nats://u@a:1/x",
            "nats://a:1/x?replicas=9",
            "nats://a:1/x?ttl=3",
        ] {
            assert!(Location::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn unsafe_streams_are_refused_with_the_setting_named() {
        let loc = Location::parse("nats://a:1/t").unwrap();
        assert!(check_stream(&loc, "n", &safe_stream(&loc, 1)).is_ok());
        let cases: Vec<(stream::Config, &str)> = vec![
            (
                stream::Config {
                    max_age: Duration::from_secs(60),
                    ..safe_stream(&loc, 1)
                },
                "max_age",
            ),
            (
                stream::Config {
                    discard: stream::DiscardPolicy::Old,
                    ..safe_stream(&loc, 1)
                },
                "discard",
            ),
            (
                stream::Config {
                    retention: stream::RetentionPolicy::WorkQueue,
                    ..safe_stream(&loc, 1)
                },
                "retention",
            ),
            (
                stream::Config {
                    max_messages_per_subject: 10,
                    ..safe_stream(&loc, 1)
                },
                "max_msgs_per_subject",
            ),
            (
                stream::Config {
                    storage: stream::StorageType::Memory,
                    ..safe_stream(&loc, 1)
                },
                "memory",
            ),
            (
                stream::Config {
                    subjects: vec!["other.>".into()],
                    ..safe_stream(&loc, 1)
                },
                "subjects",
            ),
        ];
        for (c, named) in cases {
            let e = check_stream(&loc, "n", &c).unwrap_err().to_string();
            assert!(e.contains(named), "{e}");
        }
    }
}
