//! Closed-form queueing results the simulator is validated against.

/// Mean waiting time (queueing delay, excluding service) of an M/M/1 queue with arrival
/// rate `lambda` and service rate `mu` (per second): ρ / (μ − λ).
pub fn mm1_wait_s(lambda: f64, mu: f64) -> f64 {
    assert!(lambda < mu, "M/M/1 needs λ < μ for a steady state");
    (lambda / mu) / (mu - lambda)
}

/// Mean waiting time of an M/D/1 queue (Pollaczek–Khinchine with zero service variance):
/// ρ / (2 μ (1 − ρ)).
pub fn md1_wait_s(lambda: f64, mu: f64) -> f64 {
    assert!(lambda < mu, "M/D/1 needs λ < μ for a steady state");
    let rho = lambda / mu;
    rho / (2.0 * mu * (1.0 - rho))
}

/// Erlang C: probability that an arrival waits in an M/M/c queue with offered load
/// `a = λ/μ` Erlangs.
pub fn erlang_c(c: u32, a: f64) -> f64 {
    assert!(a < c as f64, "M/M/c needs λ < cμ for a steady state");
    // Sum a^k/k! for k < c iteratively to avoid overflow.
    let mut term = 1.0;
    let mut sum = 1.0;
    for k in 1..c {
        term *= a / k as f64;
        sum += term;
    }
    let last = term * a / c as f64 * (c as f64 / (c as f64 - a));
    last / (sum + last)
}

/// Mean waiting time of an M/M/c queue: C(c, a) / (cμ − λ).
pub fn mmc_wait_s(c: u32, lambda: f64, mu: f64) -> f64 {
    erlang_c(c, lambda / mu) / (c as f64 * mu - lambda)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn textbook_values() {
        // ρ = 0.5, μ = 1: M/M/1 waits 1, M/D/1 waits 0.5.
        assert!((mm1_wait_s(0.5, 1.0) - 1.0).abs() < 1e-12);
        assert!((md1_wait_s(0.5, 1.0) - 0.5).abs() < 1e-12);
        // M/M/1 is M/M/c with c = 1.
        assert!((mmc_wait_s(1, 0.7, 1.0) - mm1_wait_s(0.7, 1.0)).abs() < 1e-12);
        // Erlang C for c = 2, a = 1: 1/3.
        assert!((erlang_c(2, 1.0) - 1.0 / 3.0).abs() < 1e-12);
    }
}
