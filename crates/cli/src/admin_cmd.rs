//! `ferry admin`: operations on a running storage node. `snapshot` asks it for a snapshot
//! of every tenant (RESP `SAVE`, or `BGSAVE` with `--background`) over its RESP port, as
//! any tenant may.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use ferry_resp::Reply;

use crate::CmdResult;

/// Longest reply line read back (a status or an error).
const MAX_REPLY_LINE_BYTES: u64 = 64 * 1024;

/// Flags of `ferry admin`.
#[derive(clap::Args)]
pub struct AdminArgs {
    #[command(subcommand)]
    command: AdminCommand,
}

#[derive(clap::Subcommand)]
enum AdminCommand {
    /// Take a snapshot of every tenant of a storage node started with --data-dir: waits
    /// until it is on disk (SAVE), or with --background starts it and returns (BGSAVE).
    /// The log it makes unneeded is removed. The node serves throughout.
    Snapshot(SnapshotArgs),
}

#[derive(clap::Args)]
struct SnapshotArgs {
    /// The node's RESP address (`ferry server --resp`).
    #[arg(long)]
    resp: String,
    /// A tenant of the node, as ID:TOKEN.
    #[arg(long, default_value = "1:ferry")]
    tenant: String,
    /// Start it and return (BGSAVE).
    #[arg(long)]
    background: bool,
    /// Longest wait for the answer.
    #[arg(long, default_value = "600s", value_parser = crate::flag_values::duration)]
    timeout: Duration,
}

pub fn run(args: AdminArgs) -> CmdResult {
    let AdminCommand::Snapshot(args) = args.command;
    let tenant = ferry_server::config::parse_tenant_flag(&args.tenant)?;
    let timeout = args.timeout;
    let addr = args
        .resp
        .to_socket_addrs()
        .map_err(|err| format!("--resp {}: {err}", args.resp))?
        .next()
        .ok_or_else(|| format!("--resp {} resolves to no address", args.resp))?;
    let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(10))
        .map_err(|err| format!("cannot connect to {addr}: {err}"))?;
    stream.set_read_timeout(Some(timeout))?;
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    let id = tenant.id.to_string();
    let command = if args.background { "BGSAVE" } else { "SAVE" };
    for words in [&["AUTH", &id, &tenant.token][..], &[command]] {
        writer.write_all(&encode(words))?;
    }
    let auth = read_reply(&mut reader)?;
    if let Reply::Error(why) = auth {
        return Err(format!("{addr} refused tenant {id}: {why}").into());
    }
    match read_reply(&mut reader)? {
        Reply::Simple(status) if args.background => println!("{status}"),
        Reply::Simple(_) => println!("snapshot taken"),
        Reply::Error(why) => return Err(format!("{command}: {why}").into()),
        other => return Err(format!("{command}: unexpected reply {other:?}").into()),
    }
    Ok(())
}

fn encode(words: &[&str]) -> Vec<u8> {
    let args: Vec<&[u8]> = words.iter().map(|word| word.as_bytes()).collect();
    let mut out = bytes::BytesMut::new();
    ferry_resp::command::encode_request(&args, &mut out);
    out.to_vec()
}

/// One status or error reply (all SAVE, BGSAVE and AUTH answer).
fn read_reply(reader: &mut BufReader<TcpStream>) -> Result<Reply, String> {
    let mut line = Vec::new();
    let read = reader
        .by_ref()
        .take(MAX_REPLY_LINE_BYTES)
        .read_until(b'\n', &mut line)
        .map_err(|err| match err.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                "no answer before --timeout; the snapshot may still finish".to_string()
            }
            _ => err.to_string(),
        })?;
    if read == 0 {
        return Err("the node closed the connection".into());
    }
    Reply::decode(&bytes::Bytes::from(line)).map_err(|err| format!("bad reply: {err:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_resp_arrays() {
        assert_eq!(encode(&["SAVE"]), b"*1\r\n$4\r\nSAVE\r\n");
        assert_eq!(
            encode(&["AUTH", "1", "ab"]),
            b"*3\r\n$4\r\nAUTH\r\n$1\r\n1\r\n$2\r\nab\r\n"
        );
    }
}
