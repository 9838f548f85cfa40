//! The crate's integration tests as one test binary (each file a module): openraft's
//! generic code is compiled into each test binary, so one binary instead of two saves a
//! build of it.

mod group;
mod storage;
