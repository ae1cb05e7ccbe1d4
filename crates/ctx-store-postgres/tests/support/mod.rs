//! A fresh database per test on the server `scripts/postgres.sh start`
//! started (`CTX_TEST_POSTGRES_URL`; `cargo xtask test` starts it).
//! Without the variable a test skips with a message, except in CI (`CI`
//! set), where it fails: CI must test against a real server.

#![allow(dead_code)]

use std::sync::atomic::{AtomicU32, Ordering};

/// The runtime a shared-store test drives its sessions and workers on:
/// two worker threads, as the CI machine has two cores.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// The admin URL, or `None` (skip) outside CI.
pub fn server_url(test: &str) -> Option<String> {
    match std::env::var("CTX_TEST_POSTGRES_URL") {
        Ok(u) if !u.is_empty() => Some(u),
        _ => {
            assert!(
                std::env::var_os("CI").is_none(),
                "{test}: CTX_TEST_POSTGRES_URL is not set and CI is: run `cargo xtask test`, which starts PostgreSQL with scripts/postgres.sh"
            );
            eprintln!(
                "{test}: skipped: CTX_TEST_POSTGRES_URL is not set (eval \"$(scripts/postgres.sh start)\" to run it)"
            );
            None
        }
    }
}

/// `url` with its database replaced by `db`.
pub fn with_db(url: &str, db: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let slash = base.rfind('/').unwrap_or(base.len());
    let mut out = format!("{}/{db}", &base[..slash]);
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    out
}

static N: AtomicU32 = AtomicU32::new(0);

/// A new empty database on the test server, named after `test`; its URL.
pub fn fresh_db(test: &str) -> Option<String> {
    let url = server_url(test)?;
    let db = format!(
        "ctx_t_{}_{}_{}",
        test.chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .take(30)
            .collect::<String>(),
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    );
    sql(
        &url,
        &[
            &format!("DROP DATABASE IF EXISTS {db}"),
            &format!("CREATE DATABASE {db}"),
        ],
    );
    Some(with_db(&url, &db))
}

/// A client of `url` and its connection's driver task (await it after
/// dropping the client to close the connection), panicking on failure.
pub async fn connect(
    url: &str,
) -> (
    tokio_postgres::Client,
    tokio::task::JoinHandle<Result<(), tokio_postgres::Error>>,
) {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("connecting to the test server: {e}"));
    (client, tokio::spawn(conn))
}

/// Runs `f` with a client of `url`, on a runtime of its own, then closes
/// the connection: for tests that read or write the tables by hand.
pub fn with_client<T>(url: &str, f: impl AsyncFnOnce(&tokio_postgres::Client) -> T) -> T {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (client, driver) = connect(url).await;
        let out = f(&client).await;
        drop(client);
        let _ = driver.await;
        out
    })
}

/// Runs `statements` on `url`, panicking on failure.
pub fn sql(url: &str, statements: &[&str]) {
    with_client(url, async |client| {
        for s in statements {
            client
                .batch_execute(s)
                .await
                .unwrap_or_else(|e| panic!("{s}: {e}"));
        }
    });
}
