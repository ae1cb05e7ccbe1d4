//! A TCP proxy on the loopback that delays what it forwards: a network
//! round trip for the claims bench (`--rtt-us`). Every read is written on
//! half the round trip later, in order, each way; reads are not held
//! back behind one another's delay, so it adds latency, not a cap on
//! throughput.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// Starts the proxy on `rt` in front of the server of `url`; the same URL
/// through the proxy.
pub fn start(rt: &tokio::runtime::Runtime, url: &str, rtt: Duration) -> String {
    let config: tokio_postgres::Config = url.parse().expect("a postgres URL");
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
        _ => "127.0.0.1".to_string(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let upstream = format!("{host}:{port}");
    let listener = rt
        .block_on(TcpListener::bind("127.0.0.1:0"))
        .expect("bind the proxy");
    let local = listener.local_addr().expect("the proxy's address");
    rt.spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let upstream = upstream.clone();
            tokio::spawn(async move {
                if let Ok(server) = TcpStream::connect(&upstream).await {
                    pipe(client, server, rtt / 2);
                }
            });
        }
    });
    // The authority of the URL (after `user:password@`, before the path).
    let scheme = url.find("://").map_or(0, |i| i + 3);
    let rest = &url[scheme..];
    let end = rest.find('/').unwrap_or(rest.len());
    let at = rest[..end].rfind('@').map_or(0, |i| i + 1);
    format!(
        "{}{}{local}{}",
        &url[..scheme],
        &rest[..at],
        &rest[end..]
    )
}

/// Forwards both ways between `a` and `b`, each read `delay` late.
fn pipe(a: TcpStream, b: TcpStream, delay: Duration) {
    let _ = a.set_nodelay(true);
    let _ = b.set_nodelay(true);
    let (ar, aw) = a.into_split();
    let (br, bw) = b.into_split();
    one_way(ar, bw, delay);
    one_way(br, aw, delay);
}

fn one_way(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    delay: Duration,
) {
    let (tx, mut rx) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    tokio::spawn(async move {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n) = from.read(&mut buf).await {
            if n == 0 || tx.send((Instant::now() + delay, buf[..n].to_vec())).is_err() {
                break;
            }
        }
    });
    tokio::spawn(async move {
        while let Some((at, bytes)) = rx.recv().await {
            tokio::time::sleep_until(at).await;
            if to.write_all(&bytes).await.is_err() {
                break;
            }
        }
        let _ = to.shutdown().await;
    });
}
