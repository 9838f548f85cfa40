//! Placement from measured costs: what each request costs each side, Pyxis' load model
//! over those costs, and the bracket search that refines its prediction.
//!
//! - [`costs`]: per-placement moving averages of app and storage CPU per request;
//! - [`mix`]: those costs per function of a mix, and Pyxis' turning point over them;
//! - [`load_model`]: the load each side carries at a rate and a split, the capacity at a
//!   split, and the split that balances the two sides;
//! - [`tail`]: one class's latency (a function placed one way) as a floor and a spread,
//!   and the tail of a mix of classes;
//! - [`latency_model`]: each class's latency at a predicted load, the mix's p99, and the
//!   split that serves the most within the SLO.

pub mod balance;
pub mod bracket;
pub mod change;
pub mod costs;
pub mod latency_model;
pub mod load_model;
pub mod mix;
pub mod tail;
