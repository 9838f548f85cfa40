//! Listening sockets handed from a parent to the child it starts, as file descriptors.
//!
//! `ferry cluster up` must write every node's address into the cluster map before any node
//! starts. Choosing a free port by binding it and letting it go leaves a window in which
//! another process can take it; instead the parent binds each listener itself, builds the
//! map from the addresses it got, and passes the bound sockets to the node that serves
//! them (`ferry server --listen-fd N`), as systemd's socket activation does. The sockets
//! stay close-on-exec in the parent, so each child inherits only its own.

use std::io;
use std::net::TcpListener;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;

/// Lowest descriptor accepted as an inherited listener (0–2 are the standard streams).
const MIN_INHERITED_FD: RawFd = 3;

/// Lets the child `command` starts inherit `listeners` under their current descriptor
/// numbers (pass each one's `as_raw_fd()` on its command line).
pub fn pass_listeners(command: &mut Command, listeners: &[&TcpListener]) {
    let fds: Vec<RawFd> = listeners.iter().map(|listener| listener.as_raw_fd()).collect();
    // SAFETY: the closure runs in the forked child before exec and calls only fcntl, which
    // is async-signal-safe; it allocates nothing (the descriptors were collected before).
    unsafe {
        command.pre_exec(move || {
            for &fd in &fds {
                if libc::fcntl(fd, libc::F_SETFD, 0) == -1 {
                    return Err(io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
}

/// The listening TCP socket inherited as descriptor `fd`. Refuses a standard stream, a
/// descriptor that is not open, and one that is not a TCP socket with an address.
pub fn inherited_listener(fd: RawFd) -> io::Result<TcpListener> {
    if fd < MIN_INHERITED_FD {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("descriptor {fd} is a standard stream, not a listener"),
        ));
    }
    // SAFETY: fcntl on any integer is safe; it only reports whether the descriptor is open.
    if unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1 {
        return Err(io::Error::last_os_error());
    }
    let mut kind: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `kind` and `len` are valid for writes of the sizes given.
    let is_socket = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TYPE,
            (&mut kind as *mut libc::c_int).cast(),
            &mut len,
        )
    } == 0;
    if !is_socket || kind != libc::SOCK_STREAM {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("descriptor {fd} is not a TCP socket"),
        ));
    }
    // SAFETY: the descriptor is open, is a stream socket, and was handed to this process to
    // own (nothing else in it uses the number).
    let listener = unsafe { TcpListener::from_raw_fd(fd) };
    listener.local_addr()?;
    Ok(listener)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listener_survives_being_taken_from_its_descriptor() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let fd = std::os::fd::IntoRawFd::into_raw_fd(listener);
        let again = inherited_listener(fd).unwrap();
        assert_eq!(again.local_addr().unwrap(), addr);
        let _client = std::net::TcpStream::connect(addr).unwrap();
        assert!(again.accept().is_ok());
    }

    #[test]
    fn standard_streams_closed_descriptors_and_files_are_refused() {
        assert!(inherited_listener(1).is_err());
        assert!(inherited_listener(100_000).is_err());
        let file = std::fs::File::open("/dev/null").unwrap();
        let fd = std::os::fd::IntoRawFd::into_raw_fd(file);
        assert!(inherited_listener(fd).is_err());
        // SAFETY: `fd` was just taken from the file above and nothing else owns it.
        drop(unsafe { std::fs::File::from_raw_fd(fd) });
    }
}
