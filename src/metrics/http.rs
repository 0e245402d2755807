//! The `/metrics` endpoint: a minimal HTTP/1.1 server on shard 0. Each
//! scrape asks every shard for its snapshot over the shard mesh (the
//! shards' counters are never shared), then encodes them.

use std::rc::Rc;

use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::net::{TcpListener, TcpStream};

use crate::shard::{messages::Metrics, Shard};

/// Largest request head read from a scraper.
const HEAD_BYTES_MAX: usize = 8 << 10;

pub async fn serve(shard: Rc<Shard>, listener: TcpListener) {
    loop {
        match listener.accept().await {
            Ok(stream) => {
                let shard = shard.clone();
                glommio::spawn_local(async move {
                    if let Err(e) = answer(&shard, stream).await {
                        log::debug!("metrics: {e}");
                    }
                })
                .detach();
            }
            Err(e) => {
                log::warn!("metrics: accept failed: {e}");
                glommio::timer::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }
}

/// Every shard's snapshot, in shard order.
pub async fn gather(shard: &Rc<Shard>) -> Vec<crate::metrics::snapshot::ShardSnapshot> {
    let mut out = Vec::with_capacity(shard.count);
    for target in 0..shard.count {
        match shard.ask(target, Metrics).await {
            Ok(s) => out.push(*s),
            Err(_) => log::warn!("metrics: shard {target} did not answer"),
        }
    }
    out
}

async fn answer(shard: &Rc<Shard>, mut stream: TcpStream) -> Result<(), String> {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf).await.map_err(|e| e.to_string())?;
        if n == 0 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
        if head.len() > HEAD_BYTES_MAX {
            return respond(
                &mut stream,
                "431 Request Header Fields Too Large",
                "text/plain",
                "request head too large\n",
            )
            .await;
        }
    }
    let line = String::from_utf8_lossy(&head[..head.iter().position(|&b| b == b'\r').unwrap_or(0)]).into_owned();
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = path.split('?').next().unwrap_or("");
    match (method, path) {
        ("GET", "/metrics") => {
            let text = crate::metrics::expose::render(gather(shard).await)?;
            respond(&mut stream, "200 OK", "application/openmetrics-text; version=1.0.0; charset=utf-8", &text).await
        }
        ("GET", "/") => respond(&mut stream, "200 OK", "text/plain", "shardlog: metrics at /metrics\n").await,
        ("GET", _) => respond(&mut stream, "404 Not Found", "text/plain", "only /metrics here\n").await,
        _ => respond(&mut stream, "405 Method Not Allowed", "text/plain", "GET only\n").await,
    }
}

async fn respond(stream: &mut TcpStream, status: &str, content_type: &str, body: &str) -> Result<(), String> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.map_err(|e| e.to_string())?;
    stream.write_all(body.as_bytes()).await.map_err(|e| e.to_string())?;
    stream.close().await.map_err(|e| e.to_string())
}
