//! Exporters: they read the state and publish it.

pub mod cache;
pub mod conns;
pub mod http;
pub mod listen;
pub mod live;
pub mod metrics;
pub mod notify;
pub mod openmetrics;
pub mod process;
pub mod push;
pub mod ring;
pub mod sdsocket;
pub mod signals;
pub mod summary;
pub mod valid;
pub mod webconfig;
pub mod worker;
