//! Tests of the request metrics.
