//! Zipfian keys, as YCSB draws them (Gray et al., "Quickly generating billion-record
//! synthetic databases"): item ranks 0..n with P(rank k) ∝ 1/(k+1)^θ, hottest first.
//! Ranks are scrambled over the key space so hot keys do not cluster.

use rand::Rng;

/// YCSB's default skew.
pub const YCSB_THETA: f64 = 0.99;

/// Most items: zeta(n) is summed once at construction, O(n).
pub const MAX_ITEMS: u64 = 100_000_000;

/// A Zipfian distribution over `0..items`.
#[derive(Clone, Debug)]
pub struct Zipf {
    items: u64,
    theta: f64,
    alpha: f64,
    zeta_n: f64,
    eta: f64,
}

fn zeta(n: u64, theta: f64) -> f64 {
    (1..=n).map(|i| 1.0 / (i as f64).powf(theta)).sum()
}

impl Zipf {
    /// The distribution over `items` items with skew `theta` (0 < θ < 1).
    pub fn new(items: u64, theta: f64) -> Result<Zipf, String> {
        if items == 0 || items > MAX_ITEMS {
            return Err(format!("zipf needs 1..={MAX_ITEMS} items, got {items}"));
        }
        if !(theta > 0.0 && theta < 1.0) {
            return Err(format!("zipf skew must be in (0, 1), got {theta}"));
        }
        let zeta_n = zeta(items, theta);
        let zeta_2 = zeta(2.min(items), theta);
        let eta = if items <= 2 {
            0.0
        } else {
            (1.0 - (2.0 / items as f64).powf(1.0 - theta)) / (1.0 - zeta_2 / zeta_n)
        };
        Ok(Zipf {
            items,
            theta,
            alpha: 1.0 / (1.0 - theta),
            zeta_n,
            eta,
        })
    }

    /// A rank: 0 is the hottest.
    pub fn rank(&self, rng: &mut impl Rng) -> u64 {
        if self.items == 1 {
            return 0;
        }
        let u: f64 = rng.gen();
        let uz = u * self.zeta_n;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return 1;
        }
        let rank = (self.items as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        rank.min(self.items - 1)
    }

    /// A key: the rank scrambled over `0..items` (a fixed bijection).
    pub fn key(&self, rng: &mut impl Rng) -> u64 {
        scramble(self.rank(rng), self.items)
    }
}

/// A bijection of `0..n` that spreads consecutive ranks: multiplication by a constant
/// coprime with n, modulo n.
fn scramble(rank: u64, n: u64) -> u64 {
    let mut multiplier: u64 = 0x9e37_79b9_7f4a_7c15 % n.max(1);
    while gcd(multiplier, n) != 1 {
        multiplier += 1;
    }
    ((rank as u128 * multiplier as u128) % n as u128) as u64
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn hot_ranks_dominate_as_zipf_predicts() {
        let zipf = Zipf::new(1000, YCSB_THETA).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut counts = vec![0u64; 1000];
        let draws = 200_000;
        for _ in 0..draws {
            counts[zipf.rank(&mut rng) as usize] += 1;
        }
        // P(rank 0) = 1 / zeta(1000, 0.99) ≈ 0.134; generous band.
        let p0 = counts[0] as f64 / draws as f64;
        assert!((0.11..0.16).contains(&p0), "p(rank 0) = {p0}");
        assert!(counts[0] > counts[1] && counts[1] > counts[10] && counts[10] > counts[500]);
    }

    #[test]
    fn keys_cover_the_space_as_a_bijection() {
        for n in [1u64, 2, 7, 10, 1000] {
            let mut seen: Vec<u64> = (0..n).map(|rank| scramble(rank, n)).collect();
            seen.sort_unstable();
            assert_eq!(seen, (0..n).collect::<Vec<_>>());
        }
        assert!(Zipf::new(0, 0.5).is_err());
        assert!(Zipf::new(10, 1.0).is_err());
    }
}
