//! Where listening sockets come from: bound at start, or handed over by the instance a new one
//! replaces (`tollgate serve --upgrade`), so that an upgrade or a config-changing restart loses
//! no connection (docs/operations.md, "Upgrades and restarts").
//!
//! Why a handover: a new process on the same `SO_REUSEPORT` port gets its own sockets, and when
//! the old process closes its own the kernel resets the connections queued on them. Handed over,
//! the new process accepts from the very sockets the old one did (the same queues): the old one
//! stops accepting only once the new one accepts, and then finishes what it accepted.
//!
//! The exchange, over the Unix socket `server.upgrade_socket`, on which every running instance
//! listens (`background::upgrades`): the new process connects; the old one sends one message, a
//! text naming each socket's role (`proxy`, `metrics`) line by line, with the sockets themselves
//! as `SCM_RIGHTS`; the new one answers `accepting` once its accept loops run, and the old one
//! stops as on SIGTERM. A new process that goes away before answering leaves the old one serving.

use std::io::{IoSlice, IoSliceMut, Read, Write};
use std::mem::MaybeUninit;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, SocketType,
};

/// The listen backlog (Pingora's).
const BACKLOG: i32 = 65_535;
/// Sockets one handover carries at most: a proxy socket per thread and the metrics one.
pub const MAX_SOCKETS: usize = 64;
/// The first line of a handover message, so that something else on the path is not mistaken
/// for an instance.
const HELLO: &str = "tollgate-handover 1";
/// What the new process answers once it accepts.
pub const ACCEPTING: &[u8] = b"accepting\n";
/// How long the new process waits for the old one's message.
const RECEIVE_TIMEOUT: Duration = Duration::from_secs(10);

/// What a listening socket is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Proxy,
    Metrics,
}

impl Role {
    fn as_str(self) -> &'static str {
        match self {
            Role::Proxy => "proxy",
            Role::Metrics => "metrics",
        }
    }
}

/// The listening sockets of one process.
#[derive(Debug, Default)]
pub struct Sockets {
    /// One per proxy service (`listen::layout`), and any more an old process with more
    /// threads handed over (each accepted from too, or connections queued there would wait).
    pub proxy: Vec<TcpListener>,
    pub metrics: Option<TcpListener>,
}

impl Sockets {
    /// Copies of every socket with its role, for handing over to a later process.
    pub fn copies(&self) -> std::io::Result<Vec<(Role, TcpListener)>> {
        let mut out = Vec::new();
        for l in &self.proxy {
            out.push((Role::Proxy, l.try_clone()?));
        }
        if let Some(m) = &self.metrics {
            out.push((Role::Metrics, m.try_clone()?));
        }
        Ok(out)
    }
}

/// Binds a listening TCP socket on `addr` (joined to the address's other sockets with
/// `SO_REUSEPORT` when `reuse_port`), close-on-exec, blocking until the service that accepts
/// on it makes it non-blocking.
pub fn bind(addr: SocketAddr, reuse_port: bool) -> std::io::Result<TcpListener> {
    let family = match addr {
        SocketAddr::V4(_) => AddressFamily::INET,
        SocketAddr::V6(_) => AddressFamily::INET6,
    };
    let fd = rustix::net::socket_with(
        family,
        SocketType::STREAM,
        rustix::net::SocketFlags::CLOEXEC,
        None,
    )?;
    rustix::net::sockopt::set_socket_reuseaddr(&fd, true)?;
    if reuse_port {
        rustix::net::sockopt::set_socket_reuseport(&fd, true)?;
    }
    rustix::net::bind(&fd, &addr)?;
    rustix::net::listen(&fd, BACKLOG)?;
    Ok(TcpListener::from(fd))
}

/// Refuses a peer that runs as another user: only this user's processes may take this
/// instance's sockets, or hand it theirs (the socket file's mode says the same; this holds
/// for root too).
pub fn same_user(conn: &UnixStream) -> std::io::Result<()> {
    let peer = rustix::net::sockopt::socket_peercred(conn)?;
    if peer.uid != rustix::process::getuid() {
        return Err(std::io::Error::other(format!(
            "the process at the other end (pid {}) runs as another user",
            peer.pid.as_raw_nonzero()
        )));
    }
    Ok(())
}

/// The old process's side: sends `sockets` on `conn`.
pub fn send(conn: &UnixStream, sockets: &[(Role, TcpListener)]) -> std::io::Result<()> {
    same_user(conn)?;
    let mut text = format!("{HELLO}\n");
    for (role, _) in sockets {
        text.push_str(role.as_str());
        text.push('\n');
    }
    let fds: Vec<_> = sockets.iter().map(|(_, l)| l.as_fd()).collect();
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_SOCKETS))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if fds.len() > MAX_SOCKETS || !control.push(SendAncillaryMessage::ScmRights(&fds)) {
        return Err(std::io::Error::other("too many sockets to hand over"));
    }
    let sent = rustix::net::sendmsg(
        conn,
        &[IoSlice::new(text.as_bytes())],
        &mut control,
        SendFlags::empty(),
    )?;
    if sent != text.len() {
        return Err(std::io::Error::other("handover message cut short"));
    }
    Ok(())
}

/// What a new process took over.
pub struct Inherited {
    pub sockets: Vec<(Role, TcpListener)>,
    /// The connection to the old process, to tell it when this one accepts.
    pub old: UnixStream,
}

/// Why no socket was taken over.
#[derive(Debug)]
pub enum NoHandover {
    /// Nothing listens on the path: no instance is running there (a first start).
    NoInstance,
    /// An instance answered, but the handover failed.
    Failed(String),
}

/// The new process's side: connects to the instance on `path` and takes its sockets.
pub fn receive(path: &Path) -> Result<Inherited, NoHandover> {
    let old = match UnixStream::connect(path) {
        Ok(s) => s,
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
            ) =>
        {
            return Err(NoHandover::NoInstance)
        }
        Err(e) => return Err(NoHandover::Failed(format!("{}: {e}", path.display()))),
    };
    let failed = |e: std::io::Error| NoHandover::Failed(e.to_string());
    same_user(&old).map_err(failed)?;
    old.set_read_timeout(Some(RECEIVE_TIMEOUT))
        .map_err(failed)?;
    let mut buf = [0u8; 4096];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_SOCKETS))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let got = rustix::net::recvmsg(
        &old,
        &mut [IoSliceMut::new(&mut buf)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )
    .map_err(|e| failed(e.into()))?;
    let mut fds: Vec<OwnedFd> = Vec::new();
    for msg in control.drain() {
        if let RecvAncillaryMessage::ScmRights(received) = msg {
            fds.extend(received);
        }
    }
    let text = std::str::from_utf8(&buf[..got.bytes])
        .map_err(|_| NoHandover::Failed("the handover message is not text".into()))?;
    let roles = parse(text).map_err(NoHandover::Failed)?;
    if roles.len() != fds.len() {
        return Err(NoHandover::Failed(format!(
            "{} sockets named, {} received",
            roles.len(),
            fds.len()
        )));
    }
    let sockets = roles
        .into_iter()
        .zip(fds)
        .map(|(r, fd)| (r, TcpListener::from(fd)))
        .collect();
    // Reading the answer back is the old process's business; ours is only to write.
    old.set_read_timeout(None).map_err(failed)?;
    Ok(Inherited { sockets, old })
}

/// The roles a handover message names, in the order of its sockets.
fn parse(text: &str) -> Result<Vec<Role>, String> {
    let mut lines = text.lines();
    if lines.next() != Some(HELLO) {
        return Err("not a tollgate handover".into());
    }
    lines
        .map(|l| match l {
            "proxy" => Ok(Role::Proxy),
            "metrics" => Ok(Role::Metrics),
            other => Err(format!("unknown socket role `{other}`")),
        })
        .collect()
}

/// Sorts inherited sockets into this process's: the proxy ones listening on `listen`, the
/// metrics one on `metrics`; a socket on another address (the config moved the listener) is
/// closed, with a warning, since nothing here would accept from it.
pub fn adopt(
    inherited: Vec<(Role, TcpListener)>,
    listen: SocketAddr,
    metrics: Option<SocketAddr>,
) -> Sockets {
    let mut out = Sockets::default();
    for (role, l) in inherited {
        let addr = l.local_addr().ok();
        match role {
            Role::Proxy if addr == Some(listen) => out.proxy.push(l),
            Role::Metrics if addr.is_some() && addr == metrics && out.metrics.is_none() => {
                out.metrics = Some(l)
            }
            _ => {
                tracing::warn!(
                    ?role,
                    ?addr,
                    "inherited socket not on a configured address; closed"
                );
            }
        }
    }
    out
}

/// This process's listening sockets: taken over from the instance listening on `upgrade_from`
/// (`--upgrade`) when one does, the rest bound here. `proxy_sockets` is how many proxy
/// sockets the thread layout wants (`listen::layout`).
/// `Err`: a socket that cannot be bound, or a handover that an instance began and failed: the
/// start fails, and the running instance serves on.
pub fn open(
    listen: SocketAddr,
    proxy_sockets: usize,
    metrics: Option<SocketAddr>,
    upgrade_from: Option<&Path>,
) -> Result<(Sockets, Option<UnixStream>), String> {
    let (mut sockets, old) = match upgrade_from.map(receive) {
        None => (Sockets::default(), None),
        Some(Ok(inherited)) => {
            let n = inherited.sockets.len();
            let s = adopt(inherited.sockets, listen, metrics);
            tracing::info!(
                sockets = n,
                "listening sockets taken over from the running instance"
            );
            (s, Some(inherited.old))
        }
        Some(Err(NoHandover::NoInstance)) => {
            tracing::info!("--upgrade: no instance to take over from; binding the listeners");
            (Sockets::default(), None)
        }
        Some(Err(NoHandover::Failed(e))) => {
            return Err(format!("cannot take the listening sockets over: {e}"))
        }
    };
    // `SO_REUSEPORT` even for one socket (unless on any free port): a later instance with more
    // threads takes this one over and binds the rest beside it.
    let reuse_port = listen.port() != 0;
    while sockets.proxy.len() < proxy_sockets {
        let l = bind(listen, reuse_port).map_err(|e| format!("cannot listen on {listen}: {e}"))?;
        sockets.proxy.push(l);
    }
    if let (None, Some(addr)) = (&sockets.metrics, metrics) {
        let l = bind(addr, false)
            .map_err(|e| format!("cannot listen on {addr} (server.metrics_listen): {e}"))?;
        sockets.metrics = Some(l);
    }
    Ok((sockets, old))
}

/// The new process tells the old one it accepts; the old one then stops.
pub fn tell_accepting(mut old: UnixStream) -> std::io::Result<()> {
    old.write_all(ACCEPTING)
}

/// The old process waits for the new one to accept: true when it said so, false when it went
/// away first (the old process then serves on).
pub fn wait_accepting(mut conn: UnixStream) -> bool {
    let mut buf = [0u8; ACCEPTING.len()];
    conn.read_exact(&mut buf).is_ok() && buf == ACCEPTING
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sockets_go_over_with_their_roles_and_still_listen() {
        let a = bind("127.0.0.1:0".parse().unwrap(), false).unwrap();
        let addr = a.local_addr().unwrap();
        let m = bind("127.0.0.1:0".parse().unwrap(), false).unwrap();
        let maddr = m.local_addr().unwrap();
        let (old_side, new_side) = UnixStream::pair().unwrap();
        send(&old_side, &[(Role::Proxy, a), (Role::Metrics, m)]).unwrap();
        // What `receive` does after connecting.
        let mut buf = [0u8; 4096];
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_SOCKETS))];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let got = rustix::net::recvmsg(
            &new_side,
            &mut [IoSliceMut::new(&mut buf)],
            &mut control,
            RecvFlags::CMSG_CLOEXEC,
        )
        .unwrap();
        let roles = parse(std::str::from_utf8(&buf[..got.bytes]).unwrap()).unwrap();
        let fds: Vec<OwnedFd> = control
            .drain()
            .flat_map(|m| match m {
                RecvAncillaryMessage::ScmRights(f) => f.collect::<Vec<_>>(),
                _ => vec![],
            })
            .collect();
        let inherited: Vec<_> = roles
            .into_iter()
            .zip(fds)
            .map(|(r, f)| (r, TcpListener::from(f)))
            .collect();
        let s = adopt(inherited, addr, Some(maddr));
        assert_eq!(s.proxy.len(), 1);
        assert!(s.metrics.is_some());
        // The inherited socket is the same one: a connection made now is accepted from it.
        let _c = std::net::TcpStream::connect(addr).unwrap();
        assert!(s.proxy[0].accept().is_ok());
        tell_accepting(new_side).unwrap();
        assert!(wait_accepting(old_side));
    }

    #[test]
    fn a_message_from_something_else_is_refused() {
        assert!(parse("hello\nproxy\n").is_err());
        assert!(parse(&format!("{HELLO}\nproxy\nweird\n")).is_err());
        assert_eq!(
            parse(&format!("{HELLO}\nproxy\nmetrics\n")).unwrap(),
            vec![Role::Proxy, Role::Metrics]
        );
    }

    #[test]
    fn no_instance_on_the_path_is_a_first_start() {
        let p = std::env::temp_dir().join(format!("tollgate-none-{}.sock", std::process::id()));
        assert!(matches!(receive(&p), Err(NoHandover::NoInstance)));
    }
}
