//! Exporters: they read the state and publish it.

pub mod http;
pub mod metrics;
pub mod push;
pub mod openmetrics;
