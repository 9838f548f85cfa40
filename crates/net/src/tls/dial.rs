//! A link's way out: TCP to an address, and over it, when the link has TLS, the handshake
//! against the name the address gives (the host part of the address the client dials,
//! so a cluster map's addresses are also what the certificates are checked against).
//! Every link between ferry processes dials here (clients, gateways, replicas, the config
//! group's members).

use std::sync::Arc;
use std::time::Duration;

use rustls_pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

/// A byte stream a link runs over: TCP, or TLS over TCP.
pub trait LinkStream: AsyncRead + AsyncWrite + Unpin + Send + Sync {}
impl<S: AsyncRead + AsyncWrite + Unpin + Send + Sync> LinkStream for S {}

/// Connects to `addr` within `timeout`, the handshake included, over TLS when `tls` is
/// given (the certificate must name the host part of `addr`).
pub async fn dial(
    addr: &str,
    tls: Option<&Arc<rustls::ClientConfig>>,
    timeout: Duration,
) -> std::io::Result<Box<dyn LinkStream>> {
    let connect = async {
        let stream = connect_tcp(addr).await?;
        let stream: Box<dyn LinkStream> = match tls {
            None => Box::new(stream),
            Some(tls) => Box::new(handshake(stream, addr, tls).await?),
        };
        Ok(stream)
    };
    tokio::time::timeout(timeout, connect)
        .await
        .unwrap_or_else(|_| Err(timed_out(timeout)))
}

/// TCP to `addr`, with Nagle's delay off (requests and replies are small and awaited).
pub async fn connect_tcp(addr: &str) -> std::io::Result<TcpStream> {
    let stream = TcpStream::connect(addr).await?;
    let _ = stream.set_nodelay(true);
    Ok(stream)
}

/// The TLS handshake over `stream`, dialed to `addr`, with `tls`. The error says what a
/// user can act on (a listener that closed the connection likely serves no TLS).
pub async fn handshake(
    stream: TcpStream,
    addr: &str,
    tls: &Arc<rustls::ClientConfig>,
) -> std::io::Result<TlsStream<TcpStream>> {
    let name = server_name_of(addr).map_err(std::io::Error::other)?;
    tokio_rustls::TlsConnector::from(Arc::clone(tls))
        .connect(name, stream)
        .await
        .map_err(|err| {
            std::io::Error::other(match err.kind() {
                std::io::ErrorKind::UnexpectedEof => {
                    "the node closed the connection during the TLS handshake (does it serve TLS?)".to_string()
                }
                _ => format!("TLS handshake failed: {err}"),
            })
        })
}

/// The error of a dial that took longer than `timeout`.
pub fn timed_out(timeout: Duration) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::TimedOut, format!("timed out after {timeout:?}"))
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

    #[tokio::test]
    async fn a_handshake_with_a_listener_that_speaks_no_tls_says_so() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        // A plain listener that reads the client's hello and closes the connection.
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let mut hello = [0u8; 4096];
                let _ = tokio::io::AsyncReadExt::read(&mut stream, &mut hello).await;
                let _ = tokio::io::AsyncWriteExt::shutdown(&mut stream).await;
            }
        });
        let roots = rustls::RootCertStore::empty();
        let tls = Arc::new(
            rustls::ClientConfig::builder_with_provider(crate::tls::provider())
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(roots)
                .with_no_client_auth(),
        );
        let err = match dial(&addr, Some(&tls), Duration::from_secs(10)).await {
            Ok(_) => panic!("a handshake with a plain listener succeeded"),
            Err(err) => err.to_string(),
        };
        assert!(err.contains("does it serve TLS?"), "{err}");
    }
}
