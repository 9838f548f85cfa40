//! Waiting for the signals that stop a process.

/// Resolves on the first SIGINT or SIGTERM (call inside a tokio runtime with signals
/// enabled); an error if the handlers cannot be installed.
pub async fn terminated() -> std::io::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    tokio::select! {
        _ = terminate.recv() => {}
        _ = interrupt.recv() => {}
    }
    Ok(())
}
