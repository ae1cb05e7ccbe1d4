//! A TCP proxy on the loopback that delays what it forwards: a network
//! round trip for the claims bench (`--rtt-us`). Every read is written on
//! half the round trip later, in order, each way; reads are not held
//! back behind one another's delay, so it adds latency, not a cap on
//! throughput. Threads and the system's sleep, not Tokio's timer, whose
//! millisecond ticks would stretch a sub-millisecond delay to a tick.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Starts the proxy in front of the server of `url`; the same URL
/// through the proxy.
pub fn start(url: &str, rtt: Duration) -> String {
    let config: tokio_postgres::Config = url.parse().expect("a postgres URL");
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
        _ => "127.0.0.1".to_string(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let upstream = format!("{host}:{port}");
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
    let local = listener.local_addr().expect("the proxy's address");
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            if let Ok(server) = TcpStream::connect(&upstream) {
                pipe(client, server, rtt / 2);
            }
        }
    });
    // The authority of the URL (after `user:password@`, before the path).
    let scheme = url.find("://").map_or(0, |i| i + 3);
    let rest = &url[scheme..];
    let end = rest.find('/').unwrap_or(rest.len());
    let at = rest[..end].rfind('@').map_or(0, |i| i + 1);
    format!("{}{}{local}{}", &url[..scheme], &rest[..at], &rest[end..])
}

/// Forwards both ways between `a` and `b`, each read `delay` late.
fn pipe(a: TcpStream, b: TcpStream, delay: Duration) {
    let _ = a.set_nodelay(true);
    let _ = b.set_nodelay(true);
    let (a2, b2) = (
        a.try_clone().expect("a socket"),
        b.try_clone().expect("a socket"),
    );
    one_way(a, b2, delay);
    one_way(b, a2, delay);
}

fn one_way(mut from: TcpStream, mut to: TcpStream, delay: Duration) {
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n) = from.read(&mut buf) {
            if n == 0
                || tx
                    .send((Instant::now() + delay, buf[..n].to_vec()))
                    .is_err()
            {
                break;
            }
        }
    });
    std::thread::spawn(move || {
        while let Ok((at, bytes)) = rx.recv() {
            std::thread::sleep(at.saturating_duration_since(Instant::now()));
            if to.write_all(&bytes).is_err() {
                break;
            }
        }
        let _ = to.shutdown(std::net::Shutdown::Write);
    });
}
