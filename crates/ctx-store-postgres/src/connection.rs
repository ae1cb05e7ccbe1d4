//! The connection pool every statement goes through: TLS, reconnects
//! within the store's window, and the count of round trips.
//!
//! A statement is a closure over a pooled [`Client`]
//! ([`Shared::with`]); a connection that breaks (a server restart, a
//! failover) is replaced and the statement run again until the reconnect
//! window closes. A statement that fails for any other reason fails at
//! once: retrying would only repeat it.
//!
//! Each pooled connection keeps the statements prepared on it
//! ([`Prepared`]): the statements a worker sends for every task (the
//! claim, the commit and the settle behind it, the fenced writes) are
//! parsed once per connection, and the server plans them once too when
//! their generic plan is as good as a custom one (every condition of
//! theirs names its run and task, and the claim comes in two texts, for
//! one run and for any run, rather than an `$1 IS NULL OR` that no
//! generic plan can use an index for).

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use std::collections::HashMap;
use tokio_postgres::error::SqlState;

use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Client, Row, Statement};

use crate::error::{Error, Result};
use crate::store::StoreOptions;
use crate::url::StoreUrl;

/// What every clone of a [`PgStore`](crate::PgStore) shares: the server,
/// the idle connections and the counters.
pub(crate) struct Shared {
    pub(crate) url: StoreUrl,
    pub(crate) tls: tokio_postgres_rustls::MakeRustlsConnect,
    pool: Mutex<Vec<(Client, Prepared)>>,
    pub(crate) options: StoreOptions,
    pub(crate) round_trips: AtomicU64,
}

pub(crate) type PgError = tokio_postgres::Error;

fn tls_config() -> tokio_postgres_rustls::MakeRustlsConnect {
    let mut roots = rustls::RootCertStore::empty();
    // Certificates the system trusts; ones that do not load are skipped,
    // as every other rustls client on the machine skips them.
    for cert in rustls_native_certs::load_native_certs().certs {
        let _ = roots.add(cert);
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map(|b| b.with_root_certificates(roots).with_no_client_auth())
        // The ring provider supports the default versions; should it ever
        // not, TLS falls back to the bare default (sslmode=prefer then
        // connects in plain text, sslmode=require fails with a message).
        .unwrap_or_else(|_| {
            rustls::ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_protocol_versions(rustls::DEFAULT_VERSIONS)
            .map(|b| {
                b.with_root_certificates(rustls::RootCertStore::empty())
                    .with_no_client_auth()
            })
            .unwrap_or_else(|_| {
                rustls::ClientConfig::builder()
                    .with_root_certificates(rustls::RootCertStore::empty())
                    .with_no_client_auth()
            })
        });
    tokio_postgres_rustls::MakeRustlsConnect::new(config)
}

/// Whether `e` means the connection is gone (retry on a new one) rather
/// than that the statement failed.
pub(crate) fn is_disconnect(e: &PgError) -> bool {
    if e.is_closed() {
        return true;
    }
    if let Some(code) = e.code() {
        return *code == SqlState::ADMIN_SHUTDOWN
            || *code == SqlState::CRASH_SHUTDOWN
            || *code == SqlState::CANNOT_CONNECT_NOW;
    }
    std::error::Error::source(e).is_some_and(|s| s.downcast_ref::<std::io::Error>().is_some())
}

/// The statements prepared on one connection, by the address and length
/// of their text (each is a `&'static str`). A clone shares the cache;
/// it lives as long as its connection, whose server-side statements
/// they are.
#[derive(Clone, Default)]
pub(crate) struct Prepared(Arc<Mutex<HashMap<(usize, usize), Statement>>>);

impl Prepared {
    /// `sql`, prepared on `c` with its parameters' `types` the first
    /// time (one round trip), then taken from the cache.
    pub(crate) async fn get(
        &self,
        c: &Client,
        sql: &'static str,
        types: &[Type],
    ) -> Result<Statement, PgError> {
        let key = (sql.as_ptr() as usize, sql.len());
        if let Some(s) = self.0.lock().ok().and_then(|m| m.get(&key).cloned()) {
            return Ok(s);
        }
        let s = c.prepare_typed(sql, types).await?;
        if let Ok(mut m) = self.0.lock() {
            m.insert(key, s.clone());
        }
        Ok(s)
    }
}

/// Whether `e` says a prepared statement is missing on the server
/// connection (`26000`) or its name is taken there (`42P05`): the
/// connection's [`Prepared`] cache no longer matches its server side.
fn is_lost_statement(e: &PgError) -> bool {
    e.code().is_some_and(|c| {
        *c == SqlState::INVALID_SQL_STATEMENT_NAME || *c == SqlState::DUPLICATE_PSTATEMENT
    })
}

/// Whether the server broke a lock cycle by failing this statement: a
/// commit takes its task's row, then its budget's purse, where a resume
/// takes the run's row and purses first, then task rows; the statement, or the
/// transaction, was rolled back whole and is tried again.
fn is_deadlock(e: &PgError) -> bool {
    e.code()
        .is_some_and(|c| *c == SqlState::T_R_DEADLOCK_DETECTED)
}

fn is_auth(e: &PgError) -> bool {
    e.code().is_some_and(|c| {
        *c == SqlState::INVALID_PASSWORD || *c == SqlState::INVALID_AUTHORIZATION_SPECIFICATION
    })
}

impl Shared {
    pub(crate) fn new(url: &StoreUrl, options: StoreOptions) -> Shared {
        Shared {
            url: url.clone(),
            tls: tls_config(),
            pool: Mutex::new(Vec::new()),
            options,
            round_trips: AtomicU64::new(0),
        }
    }

    async fn connect(&self) -> Result<Client, PgError> {
        let (client, connection) = self.url.config.connect(self.tls.clone()).await?;
        tokio::spawn(async move {
            // Ends when the client is dropped or the server goes away; the
            // next statement on this client then fails as closed.
            let _ = connection.await;
        });
        Ok(client)
    }

    pub(crate) async fn client(&self, deadline: Instant) -> Result<Client> {
        Ok(self.pooled(deadline).await?.0)
    }

    /// A pooled connection (or a new one) with its prepared statements.
    async fn pooled(&self, deadline: Instant) -> Result<(Client, Prepared)> {
        loop {
            let pooled = self.pool.lock().ok().and_then(|mut p| p.pop());
            if let Some((c, prepared)) = pooled {
                if !c.is_closed() {
                    return Ok((c, prepared));
                }
                continue;
            }
            match self.connect().await {
                Ok(c) => return Ok((c, Prepared::default())),
                Err(e) if is_auth(&e) => {
                    return Err(Error::Auth {
                        url: self.url.display().to_string(),
                        source: e,
                    });
                }
                Err(e) if Instant::now() < deadline => {
                    drop(e);
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
                Err(e) => {
                    return Err(Error::Unreachable {
                        url: self.url.display().to_string(),
                        source: e,
                    });
                }
            }
        }
    }

    pub(crate) fn give_back(&self, client: Client) {
        self.give_back_prepared(client, Prepared::default());
    }

    fn give_back_prepared(&self, client: Client, prepared: Prepared) {
        if !client.is_closed()
            && let Ok(mut p) = self.pool.lock()
            && p.len() < 32
        {
            p.push((client, prepared));
        }
    }

    /// Runs `f` on a pooled connection, reconnecting and running it again
    /// while the connection breaks within the reconnect window. `f` gets
    /// the client by value and hands it back, so a transaction can borrow
    /// it mutably, and is told whether this is a retry (a commit checks
    /// whether its first try went through). `trips` is how many round
    /// trips `f` makes (for the figures in docs/scaling.md); `context`
    /// names the statement in its error.
    pub(crate) async fn with<T, F, Fut>(
        &self,
        context: &(dyn Fn() -> String + Sync),
        trips: u64,
        mut f: F,
    ) -> Result<T>
    where
        F: FnMut(Client, bool) -> Fut,
        Fut: Future<Output = (Client, Result<T, PgError>)>,
    {
        self.with_prepared(context, trips, |c, _, retry| f(c, retry))
            .await
    }

    /// [`with`](Self::with), `f` also given the connection's prepared
    /// statements ([`Prepared`]).
    pub(crate) async fn with_prepared<T, F, Fut>(
        &self,
        context: &(dyn Fn() -> String + Sync),
        trips: u64,
        mut f: F,
    ) -> Result<T>
    where
        F: FnMut(Client, Prepared, bool) -> Fut,
        Fut: Future<Output = (Client, Result<T, PgError>)>,
    {
        let deadline = Instant::now() + self.options.reconnect_window;
        let mut retry = false;
        let mut lost_statement = false;
        loop {
            let (client, prepared) = self.pooled(deadline).await?;
            self.round_trips.fetch_add(trips, Ordering::Relaxed);
            let (client, r) = f(client, prepared.clone(), retry).await;
            match r {
                Ok(v) => {
                    self.give_back_prepared(client, prepared);
                    return Ok(v);
                }
                Err(e) if is_disconnect(&e) && Instant::now() < deadline => {
                    drop(client);
                    retry = true;
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
                Err(e) if is_lost_statement(&e) && !lost_statement => {
                    // The server side of this connection no longer holds a
                    // statement its cache names (a `DEALLOCATE`, or a pooler
                    // that moved it to another server connection): the
                    // connection is dropped with its stale cache, and a
                    // fresh one prepares them again, once. `retry` makes a
                    // commit check whether a statement of its pipeline
                    // went through before the other failed.
                    drop(client);
                    lost_statement = true;
                    retry = true;
                }
                Err(e) if is_deadlock(&e) && Instant::now() < deadline => {
                    self.give_back_prepared(client, prepared);
                }
                Err(e) if is_disconnect(&e) => {
                    return Err(Error::Unreachable {
                        url: self.url.display().to_string(),
                        source: e,
                    });
                }
                Err(e) => {
                    self.give_back_prepared(client, prepared);
                    return Err(Error::Query {
                        url: self.url.display().to_string(),
                        context: context(),
                        source: e,
                    });
                }
            }
        }
    }

    /// The rows of one read-only statement, through [`with`](Self::with).
    pub(crate) async fn query(
        &self,
        context: &(dyn Fn() -> String + Sync),
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>> {
        self.with(context, 1, |c, _| async move {
            let r = c.query(sql, params).await;
            (c, r)
        })
        .await
    }

    /// The rows of one statement with typed parameters, through
    /// [`with`](Self::with): one round trip, where [`query`](Self::query)
    /// prepares the statement first (two). For the statements a worker
    /// sends for every task.
    pub(crate) async fn query_typed(
        &self,
        context: &(dyn Fn() -> String + Sync),
        sql: &str,
        params: &[(&(dyn ToSql + Sync), Type)],
    ) -> Result<Vec<Row>> {
        self.with(context, 1, |c, _| async move {
            let r = c.query_typed(sql, params).await;
            (c, r)
        })
        .await
    }

    /// The rows of one statement prepared once per connection
    /// ([`Prepared`]) with its parameters' `types`, through
    /// [`with`](Self::with): one round trip, and none spent parsing it
    /// again. For the statements a worker sends for every task.
    pub(crate) async fn query_prepared(
        &self,
        context: &(dyn Fn() -> String + Sync),
        sql: &'static str,
        types: &[Type],
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>> {
        self.with_prepared(context, 1, |c, prepared, _| async move {
            let r = match prepared.get(&c, sql, types).await {
                Ok(s) => c.query(&s, params).await,
                Err(e) => Err(e),
            };
            (c, r)
        })
        .await
    }

    /// The error for a run `run_id` that is not in the store.
    pub(crate) fn no_run(&self, run_id: &str) -> Error {
        Error::NoRun {
            url: self.url.display().to_string(),
            run_id: run_id.to_string(),
        }
    }

    pub(crate) fn corrupt(&self, run_id: &str, what: String, source: serde_json::Error) -> Error {
        Error::Corrupt {
            url: self.url.display().to_string(),
            run_id: run_id.to_string(),
            what,
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The test server's URL (`scripts/postgres.sh start`), or `None`
    /// (skip) outside CI.
    fn server() -> Option<StoreUrl> {
        match std::env::var("CTX_TEST_POSTGRES_URL") {
            Ok(u) if !u.is_empty() => Some(StoreUrl::parse(&u, |_| None).unwrap()),
            _ => {
                assert!(
                    std::env::var_os("CI").is_none(),
                    "CTX_TEST_POSTGRES_URL is not set and CI is: run `cargo xtask test`"
                );
                eprintln!("skipped: CTX_TEST_POSTGRES_URL is not set");
                None
            }
        }
    }

    /// A connection whose server side lost the statements its cache
    /// names (here by `DEALLOCATE ALL`; a transaction pooler does it by
    /// handing out another server connection) is replaced, and the
    /// statement runs: before, every later statement on that connection
    /// failed with `prepared statement "s0" does not exist`.
    #[test]
    fn a_statement_lost_on_the_server_is_prepared_again_on_a_fresh_connection() {
        let Some(url) = server() else {
            return;
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let shared = Shared::new(&url, StoreOptions::default());
            let context = || "the test".to_string();
            const SQL: &str = "SELECT $1::int4 + 1";
            let two = shared
                .query_prepared(&context, SQL, &[Type::INT4], &[&1i32])
                .await
                .unwrap();
            assert_eq!(two[0].get::<_, i32>(0), 2);
            // The one pooled connection, with its cache, loses its statements.
            shared
                .with(&context, 1, |c, _| async move {
                    let r = c.batch_execute("DEALLOCATE ALL").await;
                    (c, r)
                })
                .await
                .unwrap();
            let three = shared
                .query_prepared(&context, SQL, &[Type::INT4], &[&2i32])
                .await
                .unwrap();
            assert_eq!(three[0].get::<_, i32>(0), 3);
        });
    }
}
