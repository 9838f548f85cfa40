//! CPU pinning: a storage node, a gateway or a compute node started with `--cpu-set` keeps
//! to its CPUs, and the two sides of a measurement never share a CPU.

use thiserror::Error;

/// Most CPUs a CPU-set may name (the size of the kernel's `cpu_set_t`).
pub const MAX_CPUS: usize = libc::CPU_SETSIZE as usize;

/// Why a CPU set could not be applied.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum AffinityError {
    /// The text is not a CPU list.
    #[error("invalid CPU set {0:?}: expected a list like 0 or 0,2 or 1-3")]
    Parse(String),
    /// A CPU this machine does not have.
    #[error("CPU {cpu} does not exist on this machine (it has CPUs 0-{last})")]
    NoSuchCpu {
        /// The CPU asked for.
        cpu: usize,
        /// Highest CPU available.
        last: usize,
    },
    /// The kernel refused.
    #[error("cannot pin to CPUs {cpus:?}: {message}")]
    Kernel {
        /// The CPUs asked for.
        cpus: Vec<usize>,
        /// The error.
        message: String,
    },
}

/// Parses `0`, `0,2`, `1-3` into a sorted list of CPUs.
pub fn parse_cpu_set(text: &str) -> Result<Vec<usize>, AffinityError> {
    let parse_error = || AffinityError::Parse(text.to_string());
    let mut cpus = Vec::new();
    for part in text.split(',') {
        let part = part.trim();
        let (first, last) = match part.split_once('-') {
            Some((a, b)) => (a.trim().parse::<usize>(), b.trim().parse::<usize>()),
            None => (part.parse::<usize>(), part.parse::<usize>()),
        };
        let (first, last) = (first.map_err(|_| parse_error())?, last.map_err(|_| parse_error())?);
        if first > last {
            return Err(parse_error());
        }
        cpus.extend(first..=last);
    }
    cpus.sort_unstable();
    cpus.dedup();
    if cpus.is_empty() {
        return Err(parse_error());
    }
    Ok(cpus)
}

/// CPUs online on this machine.
pub fn online_cpus() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

/// Pins the calling thread, and every thread it creates afterwards, to `cpus`. Call it
/// before starting runtimes or workers so the whole process lands on those CPUs.
pub fn pin_current_thread(cpus: &[usize]) -> Result<(), AffinityError> {
    let online = configured_cpus().min(MAX_CPUS);
    if let Some(&cpu) = cpus.iter().find(|&&cpu| cpu >= online) {
        return Err(AffinityError::NoSuchCpu {
            cpu,
            last: online.saturating_sub(1),
        });
    }
    // SAFETY: cpu_set_t is plain data; CPU_ZERO/CPU_SET only write inside it, and every
    // index was checked above to be below the CPU count, itself capped at MAX_CPUS.
    let result = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        for &cpu in cpus {
            libc::CPU_SET(cpu, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if result != 0 {
        return Err(AffinityError::Kernel {
            cpus: cpus.to_vec(),
            message: std::io::Error::last_os_error().to_string(),
        });
    }
    Ok(())
}

/// CPUs the machine has (not only those this process may use).
fn configured_cpus() -> usize {
    // SAFETY: sysconf has no preconditions.
    let count = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
    if count > 0 {
        count as usize
    } else {
        online_cpus()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_sets_parse_and_bad_ones_are_refused() {
        assert_eq!(parse_cpu_set("0").unwrap(), vec![0]);
        assert_eq!(parse_cpu_set("3,1-2, 1").unwrap(), vec![1, 2, 3]);
        assert_eq!(
            parse_cpu_set("99999").unwrap(),
            vec![99999],
            "existence is checked when pinning"
        );
        for bad in ["", "x", "2-1", "-1", "1,,2"] {
            assert!(parse_cpu_set(bad).is_err(), "{bad:?} should be refused");
        }
    }

    #[test]
    fn pinning_to_a_missing_cpu_is_a_clear_error() {
        let err = pin_current_thread(&[MAX_CPUS - 1]).unwrap_err();
        assert!(matches!(err, AffinityError::NoSuchCpu { .. }), "{err}");
        assert!(err.to_string().contains("does not exist"));
    }
}
