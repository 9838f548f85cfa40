//! Placement from measured costs: what each request costs each side, Pyxis' load model
//! over those costs, and the bracket search that refines its prediction.
//!
//! - [`costs`]: per-placement moving averages of app and storage CPU per request;
//! - [`mix`]: those costs per function of a mix, and Pyxis' turning point over them;
//! - [`load_model`]: the load each side carries at a rate and a split, the capacity at a
//!   split, and the split that balances the two sides.

pub mod balance;
pub mod bracket;
pub mod change;
pub mod costs;
pub mod load_model;
pub mod mix;
