//! The name a node's certificate must carry: the host part of the address the client
//! dials, so a cluster map's addresses are also what the certificates are checked against.

use std::sync::Arc;
use std::time::Duration;

use rustls_pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

/// A byte stream a link runs over: TCP, or TLS over TCP.
pub trait LinkStream: AsyncRead + AsyncWrite + Unpin + Send + Sync {}
impl<S: AsyncRead + AsyncWrite + Unpin + Send + Sync> LinkStream for S {}

/// Connects to `addr` within `timeout`, over TLS when `tls` is given (the certificate
/// must name the host part of `addr`).
pub async fn dial(
    addr: &str,
    tls: Option<&Arc<rustls::ClientConfig>>,
    timeout: Duration,
) -> std::io::Result<Box<dyn LinkStream>> {
    let timed_out = |what: &str| std::io::Error::new(std::io::ErrorKind::TimedOut, format!("{what} timed out"));
    let connect = async {
        let stream = TcpStream::connect(addr).await?;
        let _ = stream.set_nodelay(true);
        let stream: Box<dyn LinkStream> = match tls {
            None => Box::new(stream),
            Some(tls) => {
                let name = server_name_of(addr).map_err(std::io::Error::other)?;
                let stream = tokio_rustls::TlsConnector::from(Arc::clone(tls))
                    .connect(name, stream)
                    .await
                    .map_err(|err| std::io::Error::other(format!("TLS handshake failed: {err}")))?;
                Box::new(stream)
            }
        };
        Ok(stream)
    };
    tokio::time::timeout(timeout, connect)
        .await
        .unwrap_or_else(|_| Err(timed_out("connect")))
}

/// The host of `addr` (`HOST:PORT`, `[IPV6]:PORT`, or a bare host) as a TLS server name:
/// a DNS name or an IP address.
pub fn server_name_of(addr: &str) -> Result<ServerName<'static>, String> {
    let host = match addr.rsplit_once(':') {
        // An IPv6 address without a port has colons too; a bracketed one always a port.
        Some((host, port)) if port.parse::<u16>().is_ok() && (host.starts_with('[') || !host.contains(':')) => host,
        _ => addr,
    };
    let host = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    ServerName::try_from(host.to_string()).map_err(|err| {
        format!("{host:?} cannot be a TLS server name ({err}); address the node by a DNS name or an IP address")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_part_of_an_address_names_the_server() {
        let name = |addr| server_name_of(addr).map(|name| name.to_str().into_owned());
        assert_eq!(name("127.0.0.1:7700").unwrap(), "127.0.0.1");
        assert_eq!(name("[::1]:7700").unwrap(), "::1");
        assert_eq!(name("::1").unwrap(), "::1");
        assert_eq!(name("node-1.ferry.svc:7700").unwrap(), "node-1.ferry.svc");
        assert_eq!(name("localhost").unwrap(), "localhost");
        assert!(matches!(
            server_name_of("127.0.0.1:7700").unwrap(),
            ServerName::IpAddress(_)
        ));
        assert!(name("bad name!:7700")
            .unwrap_err()
            .contains("cannot be a TLS server name"));
    }
}
