//! Placement from measured costs: what each request costs each side, how much of each
//! side's measured CPU those costs account for, Pyxis' load model over them, and the laws
//! that move X.
//!
//! - [`costs`]: per-placement moving averages of app and storage CPU per request;
//! - [`mix`]: those costs per function of a mix, and Pyxis' turning point over them;
//! - [`capture`]: each side's measured busy CPU over the CPU its costs account for;
//! - [`class_tail`]: each placement's tail, to tell one that cannot meet the SLO;
//! - [`load_model`]: the load each side carries at a rate and a split, the capacity at a
//!   split, and the split that balances the two sides;
//! - [`placing`]: the split in use, what it rests on, and the R loop's feed-forward;
//! - [`x_step`]: X stepping toward balancing the sides' measured utilisation;
//! - [`balance`]: ferry's default policy, built from the parts above;
//! - [`bracket`] and [`pyxis`]: Pyxis' Algorithm 1 and Pyxis as published, the baseline.

pub mod balance;
pub mod bracket;
pub mod capture;
pub mod class_tail;
pub mod costs;
pub mod load_model;
pub mod mix;
pub mod placing;
pub mod pyxis;
pub mod x_step;
