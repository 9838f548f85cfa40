//! The config group's frames on a stream (the format is `ferry_config::wire`'s): read and
//! written by its members (`ferry-confignode`) and by everyone who asks them
//! (`ferry_client::config_group`), through these two functions.

use ferry_config::wire::{header, Channel, HEADER_BYTES};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The next frame's channel and body, or `None` at a clean end of stream.
pub async fn read_frame<S: AsyncRead + Unpin>(stream: &mut S) -> std::io::Result<Option<(Channel, Vec<u8>)>> {
    let mut head = [0u8; HEADER_BYTES];
    match stream.read_exact(&mut head).await {
        Ok(_) => {}
        Err(err) if err.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(err) => return Err(err),
    }
    let (channel, len) = header(head).map_err(|err| std::io::Error::new(std::io::ErrorKind::InvalidData, err))?;
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body).await?;
    Ok(Some((channel, body)))
}

/// Writes a whole frame (as [`ferry_config::wire::encode`] made it).
pub async fn write_frame<S: AsyncWrite + Unpin>(stream: &mut S, frame: &[u8]) -> std::io::Result<()> {
    stream.write_all(frame).await?;
    stream.flush().await
}
