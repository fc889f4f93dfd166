//! Tests of the request-record reader.
