//! The S3 backend against a real S3 API: moto in server mode on a loopback
//! port, one server per test, killed when the test ends.
//!
//! The tests that need moto are `#[ignore]`d: `--ignored` runs them with
//! `CAIRN_MOTO_SERVER` naming the `moto_server` of a venv with
//! `crates/cairn-remote/python/requirements.txt` (`.ci/run` makes one);
//! they fail when it is missing. The unreachable-endpoint test needs no
//! server and always runs.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime};

use cairn_objects::{
    fetch_missing, upload, NoProgress, ObjectError, ObjectHash, ObjectPool, PutOutcome,
    RemoteObjects, StoreLock,
};
use cairn_remote::{S3Config, S3Error, S3Objects};
use cairn_store::Store;

use cairn_testkit::nats::free_port;
use cairn_testkit::s3::{Moto, KEY_ID, SECRET};

/// A client of `moto` with the test credentials.
fn config(moto: &Moto) -> S3Config {
    S3Config::new()
        .endpoint(moto.endpoint())
        .region("us-east-1")
        .credentials(KEY_ID, SECRET)
        .allow_http(true)
}

fn open(moto: &Moto, url: &str) -> S3Objects {
    config(moto).open(url).unwrap()
}

fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn pool_at(root: &Path) -> (ObjectPool, StoreLock) {
    let store = Store::open(root).unwrap();
    let pool = ObjectPool::open(&store).unwrap();
    let lock = StoreLock::shared(&store).unwrap();
    (pool, lock)
}

/// Every file in a pool's fan-out directories (objects and temporaries).
fn pool_files(pool: &ObjectPool) -> Vec<String> {
    let mut out = Vec::new();
    for fan in std::fs::read_dir(pool.dir()).unwrap() {
        let fan = fan.unwrap().path();
        if fan.is_dir() {
            for f in std::fs::read_dir(&fan).unwrap() {
                out.push(f.unwrap().file_name().to_string_lossy().into_owned());
            }
        }
    }
    out
}

/// A pool with three blobs and a 2.5 MiB file stored as chunks (the default
/// threshold, 1 MiB): the named objects, and every object including chunks.
fn filled_pool(dir: &Path) -> (ObjectPool, StoreLock, Vec<ObjectHash>, Vec<ObjectHash>) {
    let (pool, lock) = pool_at(&dir.join("a"));
    let mut named: Vec<ObjectHash> = ["alpha", "beta", "gamma"]
        .iter()
        .map(|s| pool.put_bytes(&lock, s.as_bytes()).unwrap().hash)
        .collect();
    let file = dir.join("big.bin");
    std::fs::write(&file, noise(5 << 19, 11)).unwrap();
    let big = pool.put_file(&lock, &file).unwrap().hash;
    named.push(big);
    let chunks = pool
        .chunk_list(&big)
        .unwrap()
        .expect("the big file is chunked");
    assert!(chunks.len() > 10, "{} chunks", chunks.len());
    let mut all = named.clone();
    all.extend(chunks.iter().map(|c| c.hash));
    (pool, lock, named, all)
}

fn s3_error(e: &ObjectError) -> &S3Error {
    match e {
        ObjectError::Remote { source, .. } => source
            .downcast_ref::<S3Error>()
            .unwrap_or_else(|| panic!("not an S3Error: {e}")),
        other => panic!("not a remote error: {other}"),
    }
}

#[test]
#[ignore = "needs moto: .ci/run installs it"]
fn a_pool_round_trips_through_s3_and_repeating_moves_nothing() {
    cairn_testkit::s3::require();
    let moto = Moto::start();
    moto.create_bucket("pool");
    let s3 = open(&moto, "s3://pool/team/cairn");
    s3.check().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (a, _lock, named, all) = filled_pool(dir.path());

    let up = upload(&a, &s3, &named, &NoProgress).unwrap();
    assert_eq!(up.objects as usize, all.len());
    assert_eq!(up.present, 0);
    for h in &all {
        assert!(s3.contains(h).unwrap());
        assert_eq!(s3.get(h).unwrap().unwrap(), a.stored_bytes(h).unwrap());
    }
    // The listing: every object, with its size and a fresh time; a hex
    // prefix narrows it.
    let mut listed = BTreeSet::new();
    s3.list("", &mut |e| {
        assert_eq!(
            e.stored_bytes,
            a.stored_bytes(&e.hash).unwrap().len() as u64
        );
        let age = SystemTime::now()
            .duration_since(e.last_modified.unwrap())
            .unwrap_or_default();
        assert!(age < Duration::from_secs(3600), "{age:?}");
        listed.insert(e.hash);
    })
    .unwrap();
    assert_eq!(listed, all.iter().copied().collect::<BTreeSet<_>>());
    let hex = named[0].to_hex();
    for prefix in [&hex[..1], &hex[..3], &hex[..]] {
        let mut some = Vec::new();
        s3.list(prefix, &mut |e| some.push(e.hash)).unwrap();
        assert!(some.contains(&named[0]), "{prefix}");
        assert!(some.iter().all(|h| h.to_hex().starts_with(prefix)));
    }

    // Again: nothing new is written.
    let again = upload(&a, &s3, &named, &NoProgress).unwrap();
    assert_eq!((again.objects, again.bytes), (0, 0));
    assert_eq!(again.present as usize, named.len());

    // Into an empty pool elsewhere: every object verifies there.
    let (b, lock) = pool_at(&dir.path().join("b"));
    let down = fetch_missing(&b, &lock, &s3, &named, &NoProgress).unwrap();
    assert_eq!(down.objects as usize, all.len());
    assert_eq!(down.bytes, up.bytes);
    for h in &all {
        b.verify(h).unwrap();
        assert_eq!(b.stored_bytes(h).unwrap(), a.stored_bytes(h).unwrap());
    }
    for h in &named {
        assert_eq!(b.get(h).unwrap(), a.get(h).unwrap());
    }
    let again = fetch_missing(&b, &lock, &s3, &named, &NoProgress).unwrap();
    assert_eq!(again.objects, 0);
    assert_eq!(again.present as usize, named.len());
}

#[test]
#[ignore = "needs moto: .ci/run installs it"]
fn puts_are_create_only_and_moto_answers_412() {
    cairn_testkit::s3::require();
    let moto = Moto::start();
    moto.create_bucket("once");
    let s3 = open(&moto, "s3://once");
    let h = ObjectHash::of(b"a name");
    assert_eq!(s3.put_create(&h, b"first").unwrap(), PutOutcome::Created);
    assert_eq!(
        s3.put_create(&h, b"second, different").unwrap(),
        PutOutcome::AlreadyThere
    );
    assert_eq!(s3.get(&h).unwrap().unwrap(), b"first");
    assert_eq!(s3.get(&ObjectHash::of(b"never put")).unwrap(), None);
    assert!(!s3.contains(&ObjectHash::of(b"never put")).unwrap());

    // The server itself: a second `If-None-Match: *` put is 412 (which
    // object_store reports as AlreadyExists caused by Precondition).
    use object_store::aws::AmazonS3Builder;
    use object_store::{ObjectStore, PutMode, PutOptions};
    let raw = AmazonS3Builder::new()
        .with_endpoint(moto.endpoint())
        .with_region("us-east-1")
        .with_access_key_id(KEY_ID)
        .with_secret_access_key(SECRET)
        .with_allow_http(true)
        .with_bucket_name("once")
        .build()
        .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let path = object_store::path::Path::from("raw/key");
    let put = |body: &'static [u8]| {
        rt.block_on(raw.put_opts(&path, body.into(), PutOptions::from(PutMode::Create)))
    };
    put(b"one").unwrap();
    match put(b"two") {
        Err(object_store::Error::AlreadyExists { source, .. }) => assert!(
            matches!(
                source.downcast_ref::<object_store::Error>(),
                Some(object_store::Error::Precondition { .. })
            ),
            "not a 412: {source}"
        ),
        other => panic!("a second create-only put: {other:?}"),
    }
}

#[test]
#[ignore = "needs moto: .ci/run installs it"]
fn a_damaged_object_in_the_bucket_is_refused_and_nothing_is_imported() {
    cairn_testkit::s3::require();
    let moto = Moto::start();
    moto.create_bucket("damaged");
    let s3 = open(&moto, "s3://damaged/p");
    let dir = tempfile::tempdir().unwrap();
    let (a, _lock, named, _) = filled_pool(dir.path());
    // Put straight into the bucket under a valid name: another object's
    // bytes, then a sound upload of everything else (which leaves it).
    let bad = named[1];
    let wrong = a.stored_bytes(&named[0]).unwrap();
    assert_eq!(s3.put_create(&bad, &wrong).unwrap(), PutOutcome::Created);
    let up = upload(&a, &s3, &named, &NoProgress).unwrap();
    assert_eq!(up.present, 1);
    assert_eq!(s3.get(&bad).unwrap().unwrap(), wrong);

    let (b, lock) = pool_at(&dir.path().join("b"));
    let err = fetch_missing(&b, &lock, &s3, &named, &NoProgress).unwrap_err();
    match &err {
        ObjectError::FetchedCorrupt { hash, origin, .. } => {
            assert_eq!(*hash, bad);
            assert_eq!(origin, "s3://damaged/p");
        }
        other => panic!("{other}"),
    }
    assert!(err.is_integrity());
    assert!(pool_files(&b).is_empty(), "{:?}", pool_files(&b));

    // A chunk flipped in the bucket: the big file is refused, naming it.
    let (c, lock) = pool_at(&dir.path().join("c"));
    let big = named[3];
    let chunk = a.chunk_list(&big).unwrap().unwrap()[4].hash;
    let s3b = open(&moto, "s3://damaged/q");
    let mut flipped = a.stored_bytes(&chunk).unwrap();
    let at = flipped.len() / 2;
    flipped[at] ^= 0x20;
    s3b.put_create(&chunk, &flipped).unwrap();
    upload(&a, &s3b, &[big], &NoProgress).unwrap();
    let err = fetch_missing(&c, &lock, &s3b, &[big], &NoProgress).unwrap_err();
    assert!(
        matches!(err, ObjectError::FetchedCorrupt { hash, .. } if hash == chunk),
        "{err}"
    );
    assert!(pool_files(&c).is_empty(), "{:?}", pool_files(&c));
}

#[test]
fn an_unreachable_endpoint_is_named_within_seconds() {
    // No server: a loopback port nothing listens on.
    let port = free_port();
    let endpoint = format!("http://127.0.0.1:{port}");
    let s3 = S3Config::new()
        .endpoint(&endpoint)
        .region("us-east-1")
        .credentials(KEY_ID, SECRET)
        .allow_http(true)
        .open("s3://nowhere/p")
        .unwrap();
    let start = Instant::now();
    let e = s3.check().unwrap_err();
    assert!(
        matches!(&e, S3Error::Unreachable { endpoint: ep, .. } if *ep == endpoint),
        "{e}"
    );
    assert!(e.is_unreachable());
    assert!(e.to_string().contains(&endpoint), "{e}");
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "{:?}",
        start.elapsed()
    );

    let dir = tempfile::tempdir().unwrap();
    let (pool, lock) = pool_at(dir.path());
    let put = pool.put_bytes(&lock, b"going nowhere").unwrap();
    let start = Instant::now();
    let err = upload(&pool, &s3, &[put.hash], &NoProgress).unwrap_err();
    assert!(s3_error(&err).is_unreachable(), "{err}");
    let shown = err.to_string();
    assert!(
        shown.contains(&endpoint) && shown.contains("s3://nowhere/p"),
        "{shown}"
    );
    assert!(!shown.contains(SECRET), "{shown}");
    assert!(start.elapsed() < Duration::from_secs(10));
}

#[test]
#[ignore = "needs moto: .ci/run installs it"]
fn a_missing_bucket_is_named() {
    cairn_testkit::s3::require();
    let moto = Moto::start();
    let s3 = open(&moto, "s3://no-such-bucket/p");
    let e = s3.check().unwrap_err();
    assert!(
        matches!(&e, S3Error::NoSuchBucket { bucket, .. } if bucket == "no-such-bucket"),
        "{e}"
    );
    assert!(
        e.to_string().contains("`no-such-bucket` does not exist"),
        "{e}"
    );

    let dir = tempfile::tempdir().unwrap();
    let (pool, lock) = pool_at(dir.path());
    let put = pool.put_bytes(&lock, b"no bucket for me").unwrap();
    let err = upload(&pool, &s3, &[put.hash], &NoProgress).unwrap_err();
    assert!(
        matches!(s3_error(&err), S3Error::NoSuchBucket { bucket, .. } if bucket == "no-such-bucket"),
        "{err}"
    );
    // A get names the bucket too, rather than reading as "no such object".
    let e = s3.get(&put.hash).unwrap_err();
    assert!(e.to_string().contains("no-such-bucket"), "{e}");
}

#[test]
#[ignore = "needs moto: .ci/run installs it"]
fn refused_credentials_are_named_and_never_shown() {
    cairn_testkit::s3::require();
    // Moto checks signatures against its IAM users from the first request.
    let moto = Moto::start_with(&[("INITIAL_NO_AUTH_ACTION_COUNT", "0")]);
    let s3 = open(&moto, "s3://guarded/p");
    let e = s3.check().unwrap_err();
    assert!(
        matches!(&e, S3Error::Denied { code, bucket, .. } if code == "InvalidAccessKeyId" && bucket == "guarded"),
        "{e}"
    );
    let shown = e.to_string();
    assert!(shown.contains("AWS_ACCESS_KEY_ID"), "{shown}");
    assert!(
        !shown.contains(SECRET) && !shown.contains(KEY_ID),
        "{shown}"
    );
    let err = s3
        .put_create(&ObjectHash::of(b"x"), b"x")
        .map(|_| ())
        .unwrap_err();
    let e = err.downcast_ref::<S3Error>().unwrap();
    assert!(matches!(e, S3Error::Denied { .. }), "{e}");
    assert!(!format!("{e} {e:?} {s3:?}").contains(SECRET));
}

/// Run by [`opens_from_the_aws_environment`] in a child process, whose
/// environment it sets: the environment is never changed in this one.
fn from_env_child() {
    let url = std::env::var("CAIRN_S3_CHILD_URL").unwrap();
    let s3 = S3Objects::open(&url).unwrap();
    s3.check().unwrap();
    let h = ObjectHash::of(b"from the environment");
    assert_eq!(s3.put_create(&h, b"bytes").unwrap(), PutOutcome::Created);
    assert_eq!(s3.get(&h).unwrap().unwrap(), b"bytes");
    assert_eq!(s3.endpoint(), std::env::var("AWS_ENDPOINT_URL").unwrap());
}

#[test]
#[ignore = "needs moto: .ci/run installs it"]
fn opens_from_the_aws_environment() {
    if std::env::var_os("CAIRN_S3_CHILD_URL").is_some() {
        return from_env_child();
    }
    cairn_testkit::s3::require();
    let moto = Moto::start();
    moto.create_bucket("env");
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "opens_from_the_aws_environment",
            "--include-ignored",
            "--nocapture",
        ])
        .env("CAIRN_S3_CHILD_URL", "s3://env/from/env")
        .env("AWS_ENDPOINT_URL", moto.endpoint())
        .env("AWS_REGION", "us-east-1")
        .env("AWS_ACCESS_KEY_ID", KEY_ID)
        .env("AWS_SECRET_ACCESS_KEY", SECRET)
        .env("AWS_ALLOW_HTTP", "true")
        .output()
        .unwrap();
    let shown = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{shown}");
    assert!(shown.contains("1 passed"), "{shown}");
    // Without AWS_ALLOW_HTTP the plain-http endpoint is refused, saying so.
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "opens_from_the_aws_environment",
            "--include-ignored",
            "--nocapture",
        ])
        .env("CAIRN_S3_CHILD_URL", "s3://env/from/env")
        .env("AWS_ENDPOINT_URL", moto.endpoint())
        .env("AWS_ACCESS_KEY_ID", KEY_ID)
        .env("AWS_SECRET_ACCESS_KEY", SECRET)
        .env_remove("AWS_ALLOW_HTTP")
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(shown.contains("AWS_ALLOW_HTTP=true"), "{shown}");
    assert!(!shown.contains(SECRET), "{shown}");
}
