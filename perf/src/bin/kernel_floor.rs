//! The kernel's floor for a broker's CPU per GiB on this host: the least
//! work any broker must do to move payload between a TCP socket and the
//! page cache, with nothing else (no protocol, no batching logic).
//!
//! - `produce`: a sender thread writes over loopback TCP; the receiving
//!   thread (the "broker") `recv`s into a 1 MiB buffer, optionally CRC32Cs
//!   it (Kafka's batch check), and `pwrite`s it at the end of a file.
//! - `consume`: the file (written and read once beforehand, so it is in the
//!   page cache) is `sendfile`d to the socket in 1 MiB steps; a thread reads
//!   and discards.
//!
//! - `wake`: two threads pinned to cores 0 and 1 pass an eventfd back and
//!   forth, `--gap-us` apart: the CPU a round trip between two sleeping
//!   threads costs here (two wakes), the floor under a cross-shard call.
//!
//! Reports the broker thread's CPU seconds (utime + stime, `RUSAGE_THREAD`)
//! per GiB. Loopback TCP does much of the receive side's protocol work in
//! the sender's context, so the produce figure is a lower bound.
//!
//! usage: kernel_floor (produce|consume) --dir D [--gib G] [--crc]
//!        kernel_floor wake [--gap-us N] [--round-trips N]

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};

const STEP_BYTES: usize = 1 << 20;
const GIB: f64 = (1u64 << 30) as f64;

struct Args {
    mode: String,
    dir: PathBuf,
    gib: u64,
    crc: bool,
    gap_us: u64,
    round_trips: u64,
}

fn parse_args() -> Result<Args> {
    let mut it = std::env::args().skip(1);
    let mode = it.next().context("mode: produce or consume")?;
    let mut args = Args {
        mode,
        dir: PathBuf::new(),
        gib: 2,
        crc: false,
        gap_us: 0,
        round_trips: 20_000,
    };
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--dir" => args.dir = PathBuf::from(it.next().context("--dir D")?),
            "--gib" => args.gib = it.next().context("--gib G")?.parse()?,
            "--crc" => args.crc = true,
            "--gap-us" => args.gap_us = it.next().context("--gap-us N")?.parse()?,
            "--round-trips" => args.round_trips = it.next().context("--round-trips N")?.parse()?,
            other => bail!("unknown flag {other}"),
        }
    }
    if args.dir.as_os_str().is_empty() && args.mode != "wake" {
        bail!("--dir is required");
    }
    Ok(args)
}

/// CPU seconds so far of this thread (`RUSAGE_THREAD`) or the process.
fn cpu_s(who: libc::c_int) -> f64 {
    // SAFETY: getrusage writes into the zeroed struct we pass.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(who, &mut usage) };
    assert_eq!(rc, 0, "getrusage");
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

fn thread_cpu_s() -> f64 {
    cpu_s(libc::RUSAGE_THREAD)
}

fn pin_to_core(core: usize) {
    // SAFETY: a zeroed cpu_set_t with one bit set, passed by reference.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(core, &mut set);
        let rc = libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
        assert_eq!(rc, 0, "sched_setaffinity to core {core}");
    }
}

fn eventfd() -> Result<std::fs::File> {
    // SAFETY: eventfd returns a new descriptor we own, or -1.
    let fd = unsafe { libc::eventfd(0, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    // SAFETY: fd is a fresh descriptor owned by nothing else.
    Ok(unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) })
}

/// One eventfd signal: write 1, or read (blocking until one is there).
fn signal(mut f: &std::fs::File) -> std::io::Result<()> {
    f.write_all(&1u64.to_ne_bytes())
}
fn wait(mut f: &std::fs::File) -> std::io::Result<()> {
    let mut raw = [0u8; 8];
    f.read_exact(&mut raw)
}

fn wake(args: &Args) -> Result<()> {
    let (ping, pong) = (
        std::sync::Arc::new(eventfd()?),
        std::sync::Arc::new(eventfd()?),
    );
    let n = args.round_trips;
    let peer = {
        let (ping, pong) = (ping.clone(), pong.clone());
        std::thread::spawn(move || -> std::io::Result<()> {
            pin_to_core(1);
            for _ in 0..n {
                wait(&ping)?;
                signal(&pong)?;
            }
            Ok(())
        })
    };
    pin_to_core(0);
    let gap = std::time::Duration::from_micros(args.gap_us);
    let started = Instant::now();
    let cpu_before_s = cpu_s(libc::RUSAGE_SELF);
    for _ in 0..n {
        if !gap.is_zero() {
            std::thread::sleep(gap);
        }
        signal(&ping)?;
        wait(&pong)?;
    }
    let cpu_s_total = cpu_s(libc::RUSAGE_SELF) - cpu_before_s;
    let elapsed_s = started.elapsed().as_secs_f64();
    peer.join().expect("peer")?;
    let per_us = |s: f64| s / n as f64 * 1e6;
    println!(
        "{{\"mode\": \"wake\", \"gap_us\": {}, \"round_trips\": {n}, \
         \"wall_us_per_round_trip\": {:.1}, \"cpu_us_per_round_trip\": {:.1}}}",
        args.gap_us,
        per_us(elapsed_s) - args.gap_us as f64,
        per_us(cpu_s_total),
    );
    Ok(())
}

fn produce(args: &Args, path: &Path) -> Result<()> {
    let total_bytes = args.gib << 30;
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let sender = std::thread::spawn(move || -> Result<()> {
        let mut socket = TcpStream::connect(addr)?;
        let payload = vec![0x5au8; STEP_BYTES];
        let mut sent = 0u64;
        while sent < total_bytes {
            socket.write_all(&payload)?;
            sent += STEP_BYTES as u64;
        }
        Ok(())
    });
    let (mut socket, _) = listener.accept()?;
    let file = OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .open(path)?;
    let mut buf = vec![0u8; STEP_BYTES];
    let mut position = 0u64;
    let mut crc = 0u32;
    let started = Instant::now();
    let cpu_before_s = thread_cpu_s();
    loop {
        let mut filled = 0;
        while filled < buf.len() {
            let n = socket.read(&mut buf[filled..])?;
            if n == 0 {
                break;
            }
            filled += n;
        }
        if filled == 0 {
            break;
        }
        if args.crc {
            crc = crc32c::crc32c_append(crc, &buf[..filled]);
        }
        file.write_all_at(&buf[..filled], position)?;
        position += filled as u64;
    }
    let cpu_s = thread_cpu_s() - cpu_before_s;
    let elapsed_s = started.elapsed().as_secs_f64();
    sender.join().expect("sender")?;
    report("produce", args, position, cpu_s, elapsed_s, crc);
    Ok(())
}

fn consume(args: &Args, path: &Path) -> Result<()> {
    let total_bytes = args.gib << 30;
    {
        let mut file = File::create(path)?;
        let payload = vec![0x5au8; STEP_BYTES];
        for _ in 0..(total_bytes / STEP_BYTES as u64) {
            file.write_all(&payload)?;
        }
    }
    // Read once so the sendfile pass is served from the page cache.
    let file = File::open(path)?;
    let mut scratch = vec![0u8; STEP_BYTES];
    for step in 0..(total_bytes / STEP_BYTES as u64) {
        file.read_exact_at(&mut scratch, step * STEP_BYTES as u64)?;
    }
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let reader = std::thread::spawn(move || -> Result<u64> {
        let mut socket = TcpStream::connect(addr)?;
        let mut buf = vec![0u8; STEP_BYTES];
        let mut received = 0u64;
        loop {
            let n = socket.read(&mut buf)?;
            if n == 0 {
                return Ok(received);
            }
            received += n as u64;
        }
    });
    let (socket, _) = listener.accept()?;
    let started = Instant::now();
    let cpu_before_s = thread_cpu_s();
    let mut offset: libc::off_t = 0;
    while (offset as u64) < total_bytes {
        let want = STEP_BYTES.min((total_bytes - offset as u64) as usize);
        // SAFETY: both descriptors are open; the kernel advances `offset`.
        let n = unsafe { libc::sendfile(socket.as_raw_fd(), file.as_raw_fd(), &mut offset, want) };
        if n < 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        if n == 0 {
            bail!("sendfile made no progress at {offset}");
        }
    }
    let cpu_s = thread_cpu_s() - cpu_before_s;
    drop(socket);
    let elapsed_s = started.elapsed().as_secs_f64();
    let received = reader.join().expect("reader")?;
    assert_eq!(received, total_bytes, "the reader got every byte");
    report("consume", args, total_bytes, cpu_s, elapsed_s, 0);
    Ok(())
}

fn report(mode: &str, args: &Args, bytes: u64, cpu_s: f64, elapsed_s: f64, crc: u32) {
    let gib = bytes as f64 / GIB;
    println!(
        "{{\"mode\": \"{mode}\", \"crc\": {}, \"bytes\": {bytes}, \"elapsed_s\": {elapsed_s:.3}, \
         \"mb_per_s\": {:.1}, \"broker_thread_cpu_s\": {cpu_s:.3}, \"cpu_s_per_gib\": {:.3}, \
         \"crc32c\": {crc}}}",
        args.crc,
        bytes as f64 / 1e6 / elapsed_s,
        cpu_s / gib,
    );
}

fn main() -> Result<()> {
    let args = parse_args()?;
    if args.mode == "wake" {
        return wake(&args);
    }
    std::fs::create_dir_all(&args.dir)?;
    let path = args.dir.join("kernel-floor.data");
    let result = match args.mode.as_str() {
        "produce" => produce(&args, &path),
        "consume" => consume(&args, &path),
        other => Err(anyhow::anyhow!("unknown mode {other}")),
    };
    std::fs::remove_file(&path).ok();
    result
}
