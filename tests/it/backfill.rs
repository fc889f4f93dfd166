//! `backfill` against real `promtool tsdb create-blocks-from openmetrics` and a Prometheus
//! started on the blocks.
