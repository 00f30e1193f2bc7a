//! An in-process gateway in front of the mock upstream, filing into one
//! session: what the gateway tests that speak plain HTTP share.

#![allow(dead_code)] // each test file uses its part

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cairn_calls::{PriceTable, ResponseStore};
use cairn_gateway::{Activity, Filing, Gateway, GatewayConfig, SharedSession};
use cairn_journal::{ModelCall, RecordBody};
use cairn_sessions::Session;
use cairn_store::Store;
use cairn_testkit::upstream::{Script, Upstream};

pub struct Rig {
    _dir: tempfile::TempDir,
    pub store: Store,
    pub session: SharedSession,
    pub upstream: Upstream,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    pub activity: Activity,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    served: Option<tokio::task::JoinHandle<()>>,
}

impl Rig {
    pub async fn start(script: Script) -> Rig {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("store")).unwrap();
        let session = Session::create_without_model(&store, dir.path(), "rig").unwrap();
        let session: SharedSession = Arc::new(Mutex::new(session));
        let upstream = Upstream::start(script);
        let config = GatewayConfig {
            openai_upstream: upstream.openai_base_url(),
            anthropic_upstream: upstream.base_url(),
            ..GatewayConfig::default()
        };
        let gateway = Gateway::bind(
            config,
            &store,
            Filing::Fixed(session.clone()),
            Arc::new(PriceTable::default()),
        )
        .await
        .unwrap();
        let base = format!("http://{}", gateway.local_addr());
        let activity = gateway.activity();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let served = tokio::spawn(async move {
            gateway
                .serve(async {
                    let _ = stopped.await;
                })
                .await
                .unwrap();
        });
        Rig {
            _dir: dir,
            store,
            session,
            upstream,
            base,
            activity,
            stop: Some(stop),
            served: Some(served),
        }
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> &str {
        self.base.trim_start_matches("http://")
    }

    /// Every `model_call` of the session, in journal order.
    pub fn calls(&self) -> Vec<ModelCall> {
        let s = self.session.lock().unwrap();
        let scan =
            cairn_journal::read_journal(&self.store.journal_path(s.id()), s.id().as_str()).unwrap();
        scan.records
            .into_iter()
            .filter_map(|r| match r.body {
                RecordBody::ModelCall(m) => Some(m),
                _ => None,
            })
            .collect()
    }

    pub fn responses(&self) -> ResponseStore {
        ResponseStore::new(&self.store)
    }

    /// Waits until no client connection is open: each has been served,
    /// judged and closed.
    pub async fn wait_for_no_connection(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.activity.connections() > 0 {
            assert!(
                Instant::now() < deadline,
                "{} connection(s) still open",
                self.activity.connections()
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Tells the gateway to stop (the first stage: no new connection, the
    /// open ones finish and close).
    pub fn begin_stop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }

    /// Stops the gateway and waits until it has.
    pub async fn stop(&mut self) {
        self.begin_stop();
        if let Some(h) = self.served.take() {
            h.await.unwrap();
        }
    }
}
