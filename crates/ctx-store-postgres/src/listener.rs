//! Wake-ups for idle workers: `LISTEN ctx_ready` on a connection of its
//! own (see [`PgStore::listen`]).

use std::sync::Arc;
use std::time::Duration;

use crate::PgStore;
use crate::connection::{PgError, Shared};

/// Wakes a worker when tasks may have become ready (see
/// [`PgStore::listen`]). Dropping it closes its connection.
#[derive(Debug)]
pub struct Listener {
    notify: Arc<tokio::sync::Notify>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Listener {
    /// Resolves at the next notification (or at once when one came since
    /// the last call: a wake-up is never lost between two waits).
    pub async fn ready(&self) {
        self.notify.notified().await;
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Some(t) = &self.task {
            t.abort();
        }
    }
}

/// One listening connection, until it breaks: `LISTEN ctx_ready`, then a
/// wake-up per notification.
async fn listen_once(shared: &Shared, notify: &tokio::sync::Notify) -> Result<(), PgError> {
    let (client, mut connection) = shared.url.config.connect(shared.tls.clone()).await?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let driver = tokio::spawn(async move {
        // Polling for messages also drives the client's own statements.
        while let Some(Ok(m)) = std::future::poll_fn(|cx| connection.poll_message(cx)).await {
            if let tokio_postgres::AsyncMessage::Notification(_) = m
                && tx.send(()).is_err()
            {
                break;
            }
        }
    });
    let listening = client.batch_execute("LISTEN ctx_ready").await;
    if listening.is_ok() {
        // Whatever became ready while this connection was not listening.
        notify.notify_one();
        while rx.recv().await.is_some() {
            notify.notify_one();
        }
    }
    driver.abort();
    drop(client);
    listening
}

impl PgStore {
    /// Listens for tasks becoming ready: registrations, resumes, releases,
    /// and commits that bring a dependent's ready counter to zero each send
    /// a `NOTIFY ctx_ready` in their transaction, so a waiting worker wakes
    /// at the commit instead of at its next poll. The listener holds a
    /// connection of its own (outside the pool) and reconnects, with a
    /// wake-up, when it breaks: a notification sent while it was away is
    /// covered by that wake-up. Leases that lapse send nothing (no
    /// statement runs when they do), so workers keep polling as well.
    pub fn listen(&self) -> Listener {
        let notify = Arc::new(tokio::sync::Notify::new());
        let task = self.rt.handle().map(|h| {
            let (shared, notify) = (Arc::clone(&self.shared), Arc::clone(&notify));
            h.spawn(async move {
                loop {
                    let _ = listen_once(&shared, &notify).await;
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
            })
        });
        Listener { notify, task }
    }
}
