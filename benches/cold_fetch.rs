//! Cold fetch data path: how to move segment bytes that are not in memory
//! to a client socket. Compares, on the same file and socket, in one run:
//!
//! - **direct read + write**: O_DIRECT `pread` of an aligned 1 MiB range into
//!   a user buffer, then `write` to the socket (what the broker does);
//! - **splice**: io_uring `IORING_OP_SPLICE` file → pipe → socket, through
//!   the page cache, no user-space buffer;
//! - **sendfile**: `sendfile(2)` file → socket, through the page cache, one
//!   system call per range (what the broker does for sealed segments).
//!
//! The page cache is dropped for the file (`POSIX_FADV_DONTNEED`) before
//! every run so both paths read from the device. A reader thread on the
//! other core drains the socket. `cargo bench --bench cold_fetch`.

mod common;

use std::{
    fs::File,
    io::{Read, Write},
    net::{TcpListener, TcpStream},
    os::{
        fd::AsRawFd,
        unix::fs::{FileExt, OpenOptionsExt},
    },
    path::Path,
    time::{Duration, Instant},
};

use io_uring::{opcode, squeue, types, IoUring};

const FILE_BYTES: usize = 256 << 20;
const CHUNK: usize = 1 << 20;
const REPS: usize = 5;

fn main() {
    core_affinity::set_for_current(core_affinity::CoreId { id: 0 });
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-data/cold");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("segment.log");
    write_file(&path);
    println!("# cold fetch data path\n{}", common::machine_and_commit());
    println!("params: {} MiB file, {} KiB per read, {REPS} repetitions, medians", FILE_BYTES >> 20, CHUNK >> 10);
    let (mut direct, mut ahead, mut splice, mut sendfile) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..REPS {
        drop_cache(&path);
        direct.push(run(&path, direct_read_write));
        drop_cache(&path);
        ahead.push(run(&path, direct_read_ahead));
        drop_cache(&path);
        splice.push(run(&path, splice_to_socket));
        drop_cache(&path);
        sendfile.push(run(&path, sendfile_to_socket));
    }
    let (d, a, s) = (common::median(direct), common::median(ahead), common::median(splice));
    let f = common::median(sendfile);
    println!("| path | MB/s (median) | ratio to direct read + write |\n|---|---:|---:|");
    println!("| O_DIRECT pread + write | {d:.0} | 1.00 |");
    println!("| O_DIRECT pread with the next range read ahead + write | {a:.0} | {:.2} |", a / d);
    println!("| io_uring splice file -> pipe -> socket | {s:.0} | {:.2} |", s / d);
    println!("| sendfile file -> socket | {f:.0} | {:.2} |", f / d);
    let _ = std::fs::remove_dir_all(&dir);
}

fn write_file(path: &Path) {
    let mut f = File::create(path).unwrap();
    let block: Vec<u8> = (0..CHUNK).map(|i| (i % 251) as u8).collect();
    for _ in 0..FILE_BYTES / CHUNK {
        f.write_all(&block).unwrap();
    }
    f.sync_all().unwrap();
}

fn drop_cache(path: &Path) {
    let f = File::open(path).unwrap();
    // SAFETY: plain syscall on an open descriptor.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
}

/// Serves the whole file into a loopback socket with `send`, while a reader
/// on the other core drains and counts it. Returns MB/s.
fn run(path: &Path, send: fn(&Path, &mut TcpStream)) -> f64 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let reader = std::thread::spawn(move || {
        core_affinity::set_for_current(core_affinity::CoreId { id: 1 });
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = vec![0u8; 1 << 20];
        let mut total = 0usize;
        while total < FILE_BYTES {
            let n = s.read(&mut buf).unwrap();
            assert!(n > 0);
            total += n;
        }
        total
    });
    let mut s = TcpStream::connect(addr).unwrap();
    let start = Instant::now();
    send(path, &mut s);
    let total = reader.join().unwrap();
    let elapsed: Duration = start.elapsed();
    total as f64 / elapsed.as_secs_f64() / 1e6
}

fn direct_read_write(path: &Path, s: &mut TcpStream) {
    let f = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_DIRECT).open(path).unwrap();
    let mut buf = vec![0u8; CHUNK + 4096];
    let at = buf.as_ptr().align_offset(4096);
    let mut pos = 0u64;
    while (pos as usize) < FILE_BYTES {
        let n = f.read_at(&mut buf[at..at + CHUNK], pos).unwrap();
        s.write_all(&buf[at..at + n]).unwrap();
        pos += n as u64;
    }
}

/// Like `direct_read_write`, but the next 1 MiB is read by a helper thread
/// while the current one is sent: one read ahead, as a sequential consumer
/// of cold data would want.
fn direct_read_ahead(path: &Path, s: &mut TcpStream) {
    let f =
        std::sync::Arc::new(std::fs::OpenOptions::new().read(true).custom_flags(libc::O_DIRECT).open(path).unwrap());
    let read = |f: std::sync::Arc<File>, pos: u64| {
        std::thread::spawn(move || {
            let mut buf = vec![0u8; CHUNK + 4096];
            let at = buf.as_ptr().align_offset(4096);
            let n = f.read_at(&mut buf[at..at + CHUNK], pos).unwrap();
            (buf, at, n)
        })
    };
    let mut next = Some(read(f.clone(), 0));
    let mut pos = 0u64;
    while let Some(pending) = next.take() {
        let (buf, at, n) = pending.join().unwrap();
        pos += n as u64;
        if (pos as usize) < FILE_BYTES && n > 0 {
            next = Some(read(f.clone(), pos));
        }
        s.write_all(&buf[at..at + n]).unwrap();
    }
}

fn splice_to_socket(path: &Path, s: &mut TcpStream) {
    let f = File::open(path).unwrap();
    let mut fds = [0i32; 2];
    // SAFETY: pipe(2) fills the two descriptors; F_SETPIPE_SZ on our pipe.
    unsafe {
        assert_eq!(libc::pipe(fds.as_mut_ptr()), 0);
        libc::fcntl(fds[1], libc::F_SETPIPE_SZ, CHUNK as libc::c_int);
    }
    let mut ring = IoUring::new(8).unwrap();
    let mut pos = 0i64;
    while (pos as usize) < FILE_BYTES {
        // file -> pipe, then pipe -> socket, linked so they run in order.
        let into_pipe = opcode::Splice::new(types::Fd(f.as_raw_fd()), pos, types::Fd(fds[1]), -1, CHUNK as u32)
            .build()
            .flags(squeue::Flags::IO_LINK)
            .user_data(1);
        let out =
            opcode::Splice::new(types::Fd(fds[0]), -1, types::Fd(s.as_raw_fd()), -1, CHUNK as u32).build().user_data(2);
        // SAFETY: the entries reference descriptors that outlive the ring's use.
        unsafe {
            ring.submission().push(&into_pipe).unwrap();
            ring.submission().push(&out).unwrap();
        }
        ring.submit_and_wait(2).unwrap();
        let mut moved = 0;
        for cqe in ring.completion() {
            assert!(cqe.result() >= 0, "splice failed: {}", cqe.result());
            if cqe.user_data() == 2 {
                moved = cqe.result() as i64;
            }
        }
        // A short pipe -> socket move leaves bytes in the pipe: drain them.
        let mut left = CHUNK as i64 - moved;
        while left > 0 && pos as usize + (CHUNK - left as usize) < FILE_BYTES {
            let out = opcode::Splice::new(types::Fd(fds[0]), -1, types::Fd(s.as_raw_fd()), -1, left as u32).build();
            unsafe { ring.submission().push(&out).unwrap() };
            ring.submit_and_wait(1).unwrap();
            let n = ring.completion().next().unwrap().result();
            assert!(n > 0, "splice drain failed: {n}");
            left -= n as i64;
        }
        pos += CHUNK as i64;
    }
    // SAFETY: closing the pipe we created.
    unsafe {
        libc::close(fds[0]);
        libc::close(fds[1]);
    }
}

fn sendfile_to_socket(path: &Path, s: &mut TcpStream) {
    let f = File::open(path).unwrap();
    let mut pos: libc::off_t = 0;
    while (pos as usize) < FILE_BYTES {
        let want = CHUNK.min(FILE_BYTES - pos as usize);
        // SAFETY: both descriptors are open; `pos` is advanced by the kernel.
        let n = unsafe { libc::sendfile(s.as_raw_fd(), f.as_raw_fd(), &mut pos, want) };
        assert!(n > 0, "sendfile failed: {}", std::io::Error::last_os_error());
    }
}
