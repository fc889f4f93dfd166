//! Listen addresses in the exporter convention (`--web.listen-address`, repeatable): `:8771`
//! is every interface, IPv6 and IPv4 on one dual-stack socket (IPv4 alone where the host has no
//! IPv6); `127.0.0.1:8771` or `[::1]:8771` one address; a host name its first address.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};

/// One parsed `--web.listen-address`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listen {
    /// `:PORT`: every interface.
    Any(u16),
    /// `HOST:PORT`, resolved.
    Addr(SocketAddr),
}

impl std::fmt::Display for Listen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Listen::Any(port) => write!(f, ":{port}"),
            Listen::Addr(a) => write!(f, "{a}"),
        }
    }
}

/// Parses a listen address (`:8771`, `127.0.0.1:8771`, `[::1]:8771`, `localhost:8771`).
///
/// # Errors
/// A message naming the bad address.
pub fn parse_listen(addr: &str) -> Result<Listen, String> {
    let bad = || {
        format!(
            "--web.listen-address {addr:?} is not HOST:PORT or :PORT (HOST an address or a name that resolves)"
        )
    };
    if let Some(port) = addr.strip_prefix(':') {
        return port.parse().map(Listen::Any).map_err(|_| bad());
    }
    use std::net::ToSocketAddrs;
    match addr.to_socket_addrs().map(|mut a| a.next()) {
        Ok(Some(a)) => Ok(Listen::Addr(a)),
        _ => Err(bad()),
    }
}

/// Binds `listen` (non-blocking, for tokio). `:PORT` binds `[::]:PORT` with `IPV6_V6ONLY` off,
/// so IPv4 clients reach it as `::ffff:a.b.c.d`; where IPv6 is unavailable (no IPv6 socket, no
/// IPv6 address to bind: a kernel booted with `ipv6.disable=1`), `0.0.0.0:PORT`.
///
/// # Errors
/// The bind error (the IPv4 one where IPv6 fell back).
pub fn bind(listen: Listen) -> std::io::Result<std::net::TcpListener> {
    match listen {
        Listen::Addr(a) => bind_one(a, None),
        Listen::Any(port) => {
            let v6 = SocketAddr::from((Ipv6Addr::UNSPECIFIED, port));
            match bind_one(v6, Some(false)) {
                Ok(l) => Ok(l),
                Err(e) if ipv6_unavailable(&e) => {
                    tracing::info!(
                        "IPv6 is unavailable on this host ({e}); listening on IPv4 only"
                    );
                    bind_one(SocketAddr::from((Ipv4Addr::UNSPECIFIED, port)), None)
                }
                Err(e) => Err(e),
            }
        }
    }
}

/// Errors that mean "no IPv6 here", not "the port is taken".
fn ipv6_unavailable(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EAFNOSUPPORT | libc::EADDRNOTAVAIL | libc::EPROTONOSUPPORT)
    )
}

fn bind_one(addr: SocketAddr, only_v6: Option<bool>) -> std::io::Result<std::net::TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if let Some(v6only) = only_v6 {
        s.set_only_v6(v6only)?;
    }
    // As std and tokio do: a restarted exporter binds at once despite TIME_WAIT connections.
    s.set_reuse_address(true)?;
    s.bind(&addr.into())?;
    s.listen(1024)?;
    s.set_nonblocking(true)?;
    Ok(s.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_exporter_forms() {
        assert_eq!(parse_listen(":8771"), Ok(Listen::Any(8771)));
        assert_eq!(
            parse_listen("127.0.0.1:9"),
            Ok(Listen::Addr("127.0.0.1:9".parse().unwrap()))
        );
        assert_eq!(
            parse_listen("[::1]:9"),
            Ok(Listen::Addr("[::1]:9".parse().unwrap()))
        );
        assert_eq!(Listen::Any(8771).to_string(), ":8771");
        for bad in [":", ":x", ":70000", "nohost", "1.2.3.4"] {
            assert!(parse_listen(bad).is_err(), "{bad}");
        }
    }
}
