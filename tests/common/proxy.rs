//! A TCP proxy for tests that holds back the broker's answers once: after
//! `stall_after` it delays the next bytes from the broker by `stall`, on
//! whichever connection carries them first. What a broker pausing for a GC,
//! a slow fsync or a page-cache flush looks like from the client.

use std::{
    io::{Read, Write},
    net::{Shutdown, TcpListener, TcpStream},
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

pub struct StallingProxy {
    pub addr: String,
    stalled: Arc<AtomicBool>,
}

impl StallingProxy {
    /// Listens on `listener`, forwarding each connection to `upstream`.
    pub fn start(listener: TcpListener, upstream: String, stall_after: Duration, stall: Duration) -> Self {
        let addr = listener.local_addr().unwrap().to_string();
        let stalled = Arc::new(AtomicBool::new(false));
        let armed_at = Instant::now() + stall_after;
        let flag = stalled.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(server) = TcpStream::connect(&upstream) else { return };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                std::thread::spawn(move || pump(c2, s2, None));
                let flag = flag.clone();
                std::thread::spawn(move || pump(server, client, Some((armed_at, stall, flag))));
            }
        });
        Self { addr, stalled }
    }

    /// Whether the stall has happened.
    pub fn stalled(&self) -> bool {
        self.stalled.load(Ordering::SeqCst)
    }
}

fn pump(mut from: TcpStream, mut to: TcpStream, stall: Option<(Instant, Duration, Arc<AtomicBool>)>) {
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if let Some((at, pause, flag)) = &stall {
            if Instant::now() >= *at && !flag.swap(true, Ordering::SeqCst) {
                std::thread::sleep(*pause);
            }
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}
