//! Exporters: they read the state and publish it.

pub mod cache;
pub mod conns;
pub mod http;
pub mod metrics;
pub mod openmetrics;
pub mod push;
pub mod signals;
pub mod summary;
pub mod webconfig;
