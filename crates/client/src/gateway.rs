//! A client of a gateway: one rate loop per tenant, the gateway's.
//!
//! The gateway is the tenant's scheduler (Pyxis' design): its rate loop sets the tenant's
//! admission rate R and its policy places each invocation. A client that ran a rate loop of
//! its own in front of it (an [`Adaptive`] with a Kayak-style policy, as `ferry bench`
//! does) would stack two: the client's loop sees the gateway's refusals come back fast,
//! reads them as a healthy node and keeps its rate above the gateway's, which refuses the
//! difference. So a client of a gateway follows the gateway's R instead of finding one:
//!
//! - every answer of a gateway carries the tenant's current R in its header (the hello
//!   answer too), and each of the client's connections stores the latest in a
//!   [`GatewayRate`]: no request of its own, never older than the last answer;
//! - [`FollowGateway`] is the policy that admits at that R (a little below, see
//!   [`FOLLOW_HEADROOM`]) and sends everything to the gateway, which places it further;
//! - [`ViaGateway`] is the backend that asks the gateway for each run's costs, so the
//!   invocations it returns say where the gateway ran them and what that cost each side.
//!
//! `Adaptive::through_gateway(client)` puts the three together.

use bytes::Bytes;

use ferry_control::{Completion, FnId, Nanos, Placement, Policy, PolicyState};

use crate::adaptive::{Adaptive, Backend, BackendFuture};
use crate::client::Client;
use crate::error::ClientError;
use crate::gateway_rate::GatewayRate;

/// How often the follower re-reads the gateway's R: well inside the gateway's own 5 ms
/// R-loop period (`ferry_control::rate::RATE_PERIOD_DEFAULT`), so the client is never
/// more than a fraction of one of its decisions behind.
pub const FOLLOW_PERIOD: Nanos = Nanos::from_ms(2);

/// Share of the gateway's R the follower leaves unused. Requests paced at exactly R reach
/// the gateway with the jitter of two schedulers and the network: when one arrives late,
/// the gateway's bucket (4 tokens deep) may already be full and the token is lost, and the
/// next early one is refused. Pacing 5 % below R refills what jitter took within
/// 4 / (0.05 R) (8 ms at 10 k/s), and costs no throughput: the gateway's loop raises R
/// until the load it *admits* meets the SLO.
pub const FOLLOW_HEADROOM: f64 = 0.05;

/// The policy of a client whose tenant's scheduler is a gateway: everything goes to the
/// gateway (placed `Remote`; the gateway places it further), admitted at the gateway's R
/// less [`FOLLOW_HEADROOM`], re-read every [`FOLLOW_PERIOD`]. It learns nothing from
/// completions: the gateway's loop already does, from the same requests.
///
/// Its observation is the gateway's R, which the client's connections write into a
/// [`GatewayRate`] as answers arrive; `tick` reads it, so the state machine itself still
/// only moves when its driver calls it.
#[derive(Debug)]
pub struct FollowGateway {
    /// Where the connections leave the gateway's latest R.
    gateway: GatewayRate,
    /// What the limiter admits at now.
    rate_ops: f64,
    /// When to read the gateway's R next.
    next_tick: Nanos,
}

impl FollowGateway {
    /// Follows the rate in `gateway`, which must have one already (a gateway's hello
    /// answer carries it).
    pub fn new(gateway: GatewayRate) -> Result<FollowGateway, ClientError> {
        let rate = gateway
            .rate_ops()
            .ok_or_else(|| ClientError::Invalid("the peer reports no admission rate: it is not a gateway".into()))?;
        Ok(FollowGateway {
            rate_ops: admitted_rate_ops(rate),
            gateway,
            next_tick: Nanos::ZERO,
        })
    }

    /// Follows the gateway `client` is connected to; [`ClientError::Invalid`] if it is not
    /// connected to a gateway.
    pub fn of(client: &Client) -> Result<FollowGateway, ClientError> {
        FollowGateway::new(client.gateway_rate())
    }
}

/// The rate the follower admits at for a gateway's `rate_ops`.
fn admitted_rate_ops(rate_ops: u32) -> f64 {
    f64::from(rate_ops) * (1.0 - FOLLOW_HEADROOM)
}

impl Policy for FollowGateway {
    fn name(&self) -> String {
        "gateway".into()
    }

    fn place(&mut self, _now: Nanos, _fn_id: FnId) -> Placement {
        Placement::Remote
    }

    fn on_completion(&mut self, _now: Nanos, _completion: &Completion) {}

    fn tick(&mut self, now: Nanos) {
        if let Some(rate) = self.gateway.rate_ops() {
            self.rate_ops = admitted_rate_ops(rate);
        }
        self.next_tick = now.saturating_add(FOLLOW_PERIOD);
    }

    fn next_tick(&self) -> Nanos {
        self.next_tick
    }

    fn rate_ops(&self) -> f64 {
        self.rate_ops
    }

    /// X is 1 from here: every request goes to the gateway. The gateway's own X (its
    /// split between storage and compute nodes) is its stat `tenant.N.rpc_fraction_ppm`.
    fn state(&self) -> PolicyState {
        PolicyState {
            rate_ops: self.rate_ops,
            rpc_fraction: 1.0,
            latency_ns_estimate: None,
            searches: None,
        }
    }
}

/// ferry's [`Client`] of a gateway as a placement backend: a remote invocation asks the
/// gateway for its costs record, so the [`crate::Invocation`] it returns is the one the
/// gateway saw (placement, both sides' CPU, round trips), as an embedded client would have
/// measured it.
#[derive(Clone)]
pub struct ViaGateway(pub Client);

impl Backend for ViaGateway {
    fn invoke_remote<'a>(&'a self, function: &'a str, args: Bytes) -> BackendFuture<'a> {
        Box::pin(self.0.invoke_with_costs(function, args))
    }
    /// Runs it here over the gateway's data operations ([`FollowGateway`] never asks).
    fn invoke_local<'a>(&'a self, function: &'a str, args: Bytes) -> BackendFuture<'a> {
        Box::pin(self.0.invoke_local(function, args))
    }
    /// A gateway never pushes back to its clients: a remote run.
    fn invoke_pushable<'a>(&'a self, function: &'a str, args: Bytes) -> BackendFuture<'a> {
        self.invoke_remote(function, args)
    }
}

impl Adaptive<ViaGateway> {
    /// Invocations through the gateway `client` is connected to, admitted at the gateway's
    /// rate ([`FollowGateway`]): the tenant has one rate loop, the gateway's. Fails with
    /// [`ClientError::Invalid`] if `client` does not talk to a gateway. Must be called
    /// inside a tokio runtime.
    pub fn through_gateway(client: Client) -> Result<Adaptive<ViaGateway>, ClientError> {
        let policy = FollowGateway::of(&client)?;
        Adaptive::new(ViaGateway(client), Box::new(policy))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn completion() -> Completion {
        Completion {
            fn_id: FnId(0),
            placement: Placement::Remote,
            latency_ns: 1,
            costs: ferry_control::Costs::default(),
            pushed_back: false,
        }
    }

    #[test]
    fn follows_the_latest_rate_a_gateway_reported_and_sends_everything_to_it() {
        let gateway = GatewayRate::default();
        assert!(FollowGateway::new(gateway.clone()).is_err(), "not a gateway");
        gateway.observe(1_000);
        let mut policy = FollowGateway::new(gateway.clone()).unwrap();
        assert_eq!(policy.rate_ops(), 950.0, "R less the headroom from the start");
        assert_eq!(policy.next_tick(), Nanos::ZERO, "reads the rate at once");
        // A new R is admitted at from the next tick on, not before.
        gateway.observe(2_000);
        assert_eq!(policy.rate_ops(), 950.0);
        let now = Nanos::from_ms(10);
        policy.tick(now);
        assert_eq!(policy.rate_ops(), 1_900.0);
        assert_eq!(policy.next_tick(), now.saturating_add(FOLLOW_PERIOD));
        // An answer from something that is not a gateway (0) leaves the rate alone.
        gateway.observe(0);
        policy.tick(Nanos::from_ms(12));
        assert_eq!(policy.rate_ops(), 1_900.0);
        // Completions teach it nothing; every request goes to the gateway.
        policy.on_completion(Nanos::from_ms(13), &completion());
        for fn_id in 0..10 {
            assert_eq!(policy.place(Nanos::from_ms(14), FnId(fn_id)), Placement::Remote);
        }
        let state = policy.state();
        assert_eq!((state.rate_ops, state.rpc_fraction), (1_900.0, 1.0));
        // A decrease is followed just as fast.
        gateway.observe(100);
        policy.tick(Nanos::from_ms(14));
        assert_eq!(policy.rate_ops(), 95.0);
    }
}
