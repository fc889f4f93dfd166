//! Exporters: they read the state and publish it.

pub mod http;
pub mod kv;
pub mod metrics;
pub mod openmetrics;
pub mod push;
pub mod summary;
pub mod webconfig;
