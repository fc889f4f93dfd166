//! Exporters: they read the state and publish it.

pub mod format;
pub mod live;
pub mod metrics;
pub mod notify;
pub mod openmetrics;
pub mod process;
pub mod push;
pub mod ring;
pub mod sdsocket;
pub mod server;
pub mod signals;
pub mod summary;
pub mod valid;
